package tool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/initorigin/io-harness-go/pkg/harness/policy"
	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/snapshot"
	"github.com/initorigin/io-harness-go/pkg/sandbox"
)

// execTool is the exec tool: a command, run in the sandbox on the
// workspace (or a copy of it), whose changes come back where the write
// policy allows.
type execTool struct{}

type execArgs struct {
	Argv    []string `json:"argv"`
	Stdin   string   `json:"stdin"`
	Timeout int      `json:"timeout_seconds"`
}

const execDesc = "Run a command (no shell: argv[0] is the program, the rest its arguments) in a sandbox, on the workspace, " +
	"with no network. Files the command creates, changes or removes are brought back into the workspace where the write policy allows, " +
	"the others reported; .git is read-only. The output (exit status, stdout and stderr, each cut to its end) is limited. " +
	"To run a shell pipeline, run [\"sh\", \"-c\", \"...\"]."

const execSchema = `{
  "type": "object",
  "properties": {
    "argv": {"type": "array", "items": {"type": "string"}, "minItems": 1, "description": "The program and its arguments."},
    "stdin": {"type": "string", "description": "Standard input. Default: none."},
    "timeout_seconds": {"type": "integer", "minimum": 1, "maximum": 600, "description": "Wall-clock limit. Default 60."}
  },
  "required": ["argv"],
  "additionalProperties": false
}`

// Spec describes exec.
func (execTool) Spec() provider.ToolSpec {
	return provider.ToolSpec{Name: "exec", Description: execDesc, Parameters: json.RawMessage(execSchema)}
}

// Call runs the command. exec is not idempotent.
func (t execTool) Call(ctx context.Context, env *Env, args json.RawMessage) Result {
	return invoke(ctx, env, args, t.call)
}

const (
	execDefaultTimeout = 60
	execMaxTimeout     = 600
	execOutputShown    = 6 << 10
	maxCopyBack        = 64 << 20
)

func (execTool) call(ctx context.Context, env *Env, raw json.RawMessage) Result {
	var a execArgs
	if err := decodeArgs(raw, &a, "argv"); err != nil {
		return badArgs(err)
	}
	switch {
	case len(a.Argv) == 0 || a.Argv[0] == "":
		return badArgs(&argError{Field: "argv", Msg: "expected the program and its arguments, got none"})
	case a.Timeout < 0 || a.Timeout > execMaxTimeout:
		return badArgs(&argError{Field: "timeout_seconds", Msg: fmt.Sprintf("expected 1 to %d, got %d", execMaxTimeout, a.Timeout)})
	}
	for i, s := range a.Argv {
		if strings.IndexByte(s, 0) >= 0 {
			return badArgs(&argError{Field: fmt.Sprintf("argv[%d]", i), Msg: "contains a NUL byte"})
		}
	}
	if env.Sandbox == nil {
		return errorf("exec is not available: no sandbox is configured, and commands never run on the host")
	}
	act, stop := authorize(ctx, env, CommandAction(a.Argv))
	if stop != nil {
		return *stop
	}
	argv := act.Argv
	if len(argv) == 0 {
		return errorf("the approved action is not a command: %s", act.Content)
	}

	timeout := a.Timeout
	if timeout == 0 {
		timeout = execDefaultTimeout
	}
	res, back, err := runOnWorkspace(ctx, env, "io-harness-exec-", func(dir, home string) *sandbox.Spec {
		return &sandbox.Spec{Argv: argv, Workdir: dir, Stdin: []byte(a.Stdin), Lend: true,
			Env:    []string{"PATH=" + env.Programs.Path(), "HOME=" + home, "LANG=C.UTF-8"},
			Limits: sandbox.Limits{Wall: sandbox.Duration(time.Duration(timeout) * time.Second)}}
	})
	if err != nil {
		return Result{IsError: true, Output: fmt.Sprintf("exec %s could not run: %v", argv[0], err), Verdicts: back.verdicts}
	}
	var b strings.Builder
	switch {
	case res.CapHit != sandbox.CapNone:
		fmt.Fprintf(&b, "%s was killed: it hit the %s limit\n", argv[0], res.CapHit)
	case res.Signal != "":
		fmt.Fprintf(&b, "%s was killed by %s\n", argv[0], res.Signal)
	default:
		fmt.Fprintf(&b, "%s exited with status %d\n", argv[0], res.ExitCode)
	}
	fmt.Fprintf(&b, "(sandbox %s, %s, %s)\n", res.Backend, time.Duration(res.Duration).Round(time.Millisecond), back.seen)
	writeStream(&b, "stdout", res.Stdout, res.StdoutTruncated)
	writeStream(&b, "stderr", res.Stderr, res.StderrTruncated)
	back.report(&b)
	failed := res.CapHit != sandbox.CapNone || res.Signal != "" || res.ExitCode != 0
	return Result{Output: strings.TrimSuffix(b.String(), "\n"), IsError: failed, Verdicts: back.verdicts, Changed: append(back.copied, back.removed...)}
}

func writeStream(b *strings.Builder, name string, data []byte, truncated bool) {
	s := strings.TrimRight(string(data), "\n")
	if s == "" {
		return
	}
	if len(s) > execOutputShown {
		cut := len(s) - execOutputShown
		for cut < len(s) && s[cut]&0xC0 == 0x80 {
			cut++
		}
		s = fmt.Sprintf("[... %d bytes cut ...]\n", cut) + s[cut:]
		truncated = false
	}
	fmt.Fprintf(b, "--- %s ---\n%s\n", name, s)
	if truncated {
		fmt.Fprintf(b, "[%s was cut by the sandbox's output limit]\n", name)
	}
}

// peekWrite judges a write of p without asking, as writeAtomic would do
// it: through a link at the end of p as well, to the file it leads to.
func peekWrite(env *Env, p string) policy.Verdict {
	if gitFloor(env, p) != nil {
		return policy.Verdict{Act: policy.Write, Target: p, Effect: policy.Deny, Rule: "<inside a .git directory>", Layer: "builtin-gitdir"}
	}
	v := peek(env, policy.Write, p)
	if v.Effect == policy.Deny {
		return v
	}
	target, err := resolveLinks(env.Root, p)
	switch {
	case err != nil && isEscape(err):
		return policy.Verdict{Act: policy.Write, Target: p, Effect: policy.Deny, Rule: "<resolves outside the workspace>", Layer: "builtin-root"}
	case err != nil || target == p:
		return v
	}
	if t := peek(env, policy.Write, target); policy.Stricter(v.Effect, t.Effect) != v.Effect {
		t.Target = p
		if t.Rule != "" {
			t.Rule += " (via " + target + ")"
		}
		return t
	}
	return v
}

// copied is what a run on a copy of the workspace kept from the command
// and brought back from it.
type copied struct {
	copied   []string         // files written into the workspace
	removed  []string         // files and directories removed from it
	withheld []string         // files not written, each with its reason
	verdicts []policy.Verdict // the verdicts that hid or withheld files
	err      error            // why copy-back stopped early, if it did
	since    uint64           // the Files mark the copy was taken at
	seen     string           // how the command saw the workspace (snapshot.Seen)
}

// report tells the model what came back.
func (c *copied) report(b *strings.Builder) {
	if c.err != nil {
		fmt.Fprintf(b, "copying the changes back stopped: %v\n", c.err)
	}
	if len(c.copied) > 0 {
		fmt.Fprintf(b, "changed in the workspace: %s\n", strings.Join(c.copied, ", "))
	}
	if len(c.removed) > 0 {
		fmt.Fprintf(b, "removed from the workspace: %s\n", strings.Join(c.removed, ", "))
	}
	if len(c.withheld) > 0 {
		fmt.Fprintf(b, "not copied back:\n- %s\n", strings.Join(c.withheld, "\n- "))
	}
}

// runOnCopy runs a command in the sandbox on a copy of the workspace that
// holds only what the read policy lets a walk show, then copies back what
// the command changed. spec makes the command for the copy's directory.
// The copy is the run's shadow (env.Shadow) when there is one and no
// other command has it, brought up to date and given back after, and is
// otherwise made anew and removed on every path.
func runOnCopy(ctx context.Context, env *Env, prefix string, spec func(dir string) *sandbox.Spec) (*sandbox.Result, copied, error) {
	var c copied
	c.since = mark(env)
	// The copy is the sandbox's to write: given, as it is made, to the
	// user a root caller's commands run as (the spec lends it too).
	var owner *snapshot.Owner
	if e := env.Sandbox.Enforcement(); e.Unprivileged && e.UID > 0 && e.UID != os.Geteuid() {
		owner = &snapshot.Owner{UID: e.UID, GID: e.GID}
	}
	snap, err := env.Shadow.Take(ctx, env.Root, snapshot.Options{Prefix: prefix, Skip: skipDir, Owner: owner,
		Visible: func(rel string) bool {
			v := peek(env, policy.Read, rel)
			if v.Effect != policy.Allow {
				c.verdicts = append(c.verdicts, v)
			}
			return v.Effect == policy.Allow
		}})
	if err != nil {
		return nil, c, fmt.Errorf("copy the workspace: %w", err)
	}
	defer snap.Remove()
	c.seen = snapshot.Seen(snap)
	res, err := env.Sandbox.Run(ctx, spec(snap.Dir))
	switch {
	case res != nil && errors.Is(err, sandbox.ErrApply):
		// The command ran; what did not leave the sandbox is told.
		c.withheld = append(c.withheld, fmt.Sprintf("some of the command's changes could not be brought out of the sandbox: %v", err))
	case err != nil:
		return nil, c, err
	}
	if res.CapHit != sandbox.CapNone || res.Signal != "" {
		c.withheld = append(c.withheld, killedNote)
		return res, c, nil
	}
	copyBack(ctx, env, snap, &c)
	return res, c, nil
}

// killedNote is what exec reports of a command that a cap or a signal
// stopped: a file it was writing may be cut short, so none of its
// changes come back, lest half a file replace a whole one.
const killedNote = "none of the command's changes: it was killed before it finished, and what it was writing may be cut short"

// copyBack copies the files the command created or changed back into the
// workspace, each through the write policy without asking (judged through
// the workspace's symlinks, as write_file is): allowed ones are written,
// the others listed with their reasons. It goes on past a refusal, and
// reads no file it will not write: sizes are checked before any byte is
// read, so what it costs is bounded by what it accepts.
func copyBack(ctx context.Context, env *Env, snap *snapshot.Snapshot, c *copied) {
	changes, skipped, err := snap.Changes(ctx)
	for _, s := range skipped {
		c.withheld = append(c.withheld, fmt.Sprintf("%s: %s", s.Path, s.Reason))
	}
	if err != nil {
		c.err = err
	}
	// Removals first, so that a file made where a directory was can be
	// written once the directory's files are gone.
	var gone []string
	for _, ch := range changes {
		if ch.Removed {
			if removeCopied(env, ch.Path, c) {
				gone = append(gone, ch.Path)
			}
		}
	}
	pruneDirs(env, snap, gone)
	var total int64
	for _, ch := range changes {
		if err := ctx.Err(); err != nil {
			c.err = err
			break
		}
		if ch.Removed {
			continue
		}
		if v := peekWrite(env, ch.Path); v.Effect != policy.Allow {
			c.verdicts = append(c.verdicts, v)
			c.withheld = append(c.withheld, fmt.Sprintf("%s: the write policy does not allow it without asking (%s)", ch.Path, v.Effect))
			continue
		}
		if total+ch.Size > maxCopyBack {
			c.withheld = append(c.withheld, fmt.Sprintf("%s: %d bytes, over what is left of the %d-byte copy-back limit", ch.Path, ch.Size, maxCopyBack))
			continue
		}
		data, err := snap.ReadFile(ch.Path, ch.Size)
		if err != nil {
			c.withheld = append(c.withheld, fmt.Sprintf("%s: %v", ch.Path, err))
			continue
		}
		if old, err := env.Root.ReadFile(ch.Path); err == nil && bytes.Equal(old, data) {
			if carryExec(env, ch.Path, ch.Mode) {
				c.copied = append(c.copied, ch.Path)
			}
			continue // touched, or its mode changed
		}
		total += int64(len(data))
		if _, err := writeAtomic(ctx, env, ch.Path, data, c.since); err != nil {
			r := fsFailure(ch.Path, err)
			c.withheld = append(c.withheld, fmt.Sprintf("%s: %s", ch.Path, r.Output))
			continue
		}
		carryExec(env, ch.Path, ch.Mode)
		c.copied = append(c.copied, ch.Path)
	}
}

// removeCopied removes from the workspace the file p that the command
// removed from its copy, through the write policy, and reports whether
// it is gone. What is a directory in the workspace now is not the file
// the copy had, and stays.
func removeCopied(env *Env, p string, c *copied) bool {
	fi, err := env.Root.Lstat(p)
	switch {
	case err != nil:
		return true // gone already
	case fi.IsDir():
		return false
	}
	return removeEntry(env, p, fi, c)
}

// pruneDirs removes the directories of the removed files that the copy
// no longer has, where the workspace's are left empty: what rm -r did.
// The deepest go first, so that a parent emptied by its children goes
// too.
func pruneDirs(env *Env, snap *snapshot.Snapshot, removed []string) {
	var dirs []string
	seen := map[string]bool{}
	for _, p := range removed {
		for d := path.Dir(p); d != "." && !seen[d]; d = path.Dir(d) {
			seen[d] = true
			dirs = append(dirs, d)
		}
	}
	slices.SortFunc(dirs, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
	for _, d := range dirs {
		if fi, err := os.Lstat(filepath.Join(snap.Dir, filepath.FromSlash(d))); err == nil && fi.IsDir() {
			continue // the command kept it
		}
		if v := peekWrite(env, d); v.Effect == policy.Allow {
			env.Root.Remove(d) // only if empty
		}
	}
}
