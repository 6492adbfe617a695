package tool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/initorigin/io-harness-go/pkg/harness/policy"
	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/sandbox"
)

// execTool is the exec tool: a command, run in the sandbox on a copy of
// the workspace, whose changes come back where the write policy allows.
type execTool struct{}

type execArgs struct {
	Argv    []string `json:"argv"`
	Stdin   string   `json:"stdin"`
	Timeout int      `json:"timeout_seconds"`
}

const execDesc = "Run a command (no shell: argv[0] is the program, the rest its arguments) in a sandbox, on a copy of the workspace, " +
	"with no network. Files the command creates or changes are copied back into the workspace where the write policy allows; " +
	"deletions are not. The output (exit status, stdout and stderr, each cut to its end) is limited. " +
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
	argvJSON, _ := json.Marshal(a.Argv)
	act, stop := authorize(ctx, env, Action{Act: policy.Exec, Target: a.Argv[0], Content: string(argvJSON)})
	if stop != nil {
		return *stop
	}
	argv := a.Argv
	if act.Content != string(argvJSON) {
		if err := json.Unmarshal([]byte(act.Content), &argv); err != nil || len(argv) == 0 {
			return errorf("the approved command is not an argv array: %s", act.Content)
		}
	}

	work, err := os.MkdirTemp("", "io-harness-exec-")
	if err != nil {
		return errorf("exec: %v", err)
	}
	defer os.RemoveAll(work)
	before, err := copyOut(env.Root, work)
	if err != nil {
		return errorf("exec: copy the workspace: %v", err)
	}
	timeout := a.Timeout
	if timeout == 0 {
		timeout = execDefaultTimeout
	}
	spec := &sandbox.Spec{Argv: argv, Workdir: work, Stdin: []byte(a.Stdin),
		Env:    []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + work, "LANG=C.UTF-8"},
		Limits: sandbox.Limits{Wall: sandbox.Duration(time.Duration(timeout) * time.Second)}}
	res, err := env.Sandbox.Run(ctx, spec)
	if err != nil {
		return errorf("exec %s could not run: %v", argv[0], err)
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
	fmt.Fprintf(&b, "(sandbox %s, %s)\n", res.Backend, time.Duration(res.Duration).Round(time.Millisecond))
	writeStream(&b, "stdout", res.Stdout, res.StdoutTruncated)
	writeStream(&b, "stderr", res.Stderr, res.StderrTruncated)
	copied, withheld, err := copyBack(ctx, env, work, before)
	if err != nil {
		fmt.Fprintf(&b, "copying the changes back failed: %v\n", err)
	}
	if len(copied) > 0 {
		fmt.Fprintf(&b, "changed in the workspace: %s\n", strings.Join(copied, ", "))
	}
	if len(withheld) > 0 {
		fmt.Fprintf(&b, "not copied back (the write policy does not allow it without asking): %s\n", strings.Join(withheld, ", "))
	}
	failed := res.CapHit != sandbox.CapNone || res.Signal != "" || res.ExitCode != 0
	return Result{Output: strings.TrimSuffix(b.String(), "\n"), IsError: failed}
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

// copyOut copies the workspace's regular files into dir, skipping .git,
// target and node_modules, and returns the content it copied by path.
func copyOut(root *os.Root, dir string) (map[string][]byte, error) {
	files := map[string][]byte{}
	var total int64
	err := fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != "." && skipDir(d.Name()) {
				return fs.SkipDir
			}
			return os.MkdirAll(filepath.Join(dir, filepath.FromSlash(p)), 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		data, err := root.ReadFile(p)
		if err != nil {
			return err
		}
		if total += int64(len(data)); total > maxCopyBack*4 {
			return errors.New("the workspace is too big to copy")
		}
		info, _ := d.Info()
		mode := fs.FileMode(0o644)
		if info != nil {
			mode = info.Mode().Perm() | 0o600
		}
		files[p] = data
		return os.WriteFile(filepath.Join(dir, filepath.FromSlash(p)), data, mode)
	})
	return files, err
}

// copyBack copies the files the command created or changed back into the
// workspace, each through the write policy without asking: allowed ones
// are written, the others listed.
func copyBack(ctx context.Context, env *Env, dir string, before map[string][]byte) (copied, withheld []string, err error) {
	var total int64
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel != "." && skipDir(d.Name()) {
				return fs.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if old, ok := before[rel]; ok && bytes.Equal(old, data) {
			return nil
		}
		if peek(env, policy.Write, rel) != policy.Allow {
			withheld = append(withheld, rel)
			return nil
		}
		if total += int64(len(data)); total > maxCopyBack {
			withheld = append(withheld, rel+" (over the copy-back limit)")
			return nil
		}
		if _, err := writeAtomic(ctx, env.Root, rel, data); err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
		copied = append(copied, rel)
		return nil
	})
	slices.Sort(copied)
	slices.Sort(withheld)
	return copied, withheld, err
}
