package git

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/initorigin/io-harness-go/pkg/harness/policy"
	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/tool"
	"github.com/initorigin/io-harness-go/pkg/sandbox"
)

// body is one git tool's work on an open repository.
type body func(ctx context.Context, r *repo, args json.RawMessage) tool.Result

// callWith runs a git tool's body: a live context, a repository the tools
// accept and its shadow, removed on every path, and an output bounded as
// every built-in tool's.
func callWith(ctx context.Context, env *tool.Env, cfg Config, args json.RawMessage, fn body) tool.Result {
	if err := ctx.Err(); err != nil {
		return tool.Errorf("cancelled before the call started: %v", err)
	}
	r, stop := openRepo(env, cfg)
	if stop != nil {
		return *stop
	}
	defer r.close()
	res := fn(ctx, r, args)
	res.Output = tool.Bound(res.Output)
	return res
}

// visible splits paths into those the read policy shows (allows outright)
// and the verdicts of the others, which the tools hide as a walk does.
func visible(env *tool.Env, paths []string) (shown []string, hidden []policy.Verdict) {
	for _, p := range paths {
		if v := tool.Peek(env, policy.Read, p); v.Effect != policy.Allow {
			hidden = append(hidden, v)
			continue
		}
		shown = append(shown, p)
	}
	return shown, hidden
}

// hiddenNote tells the model how many paths the read policy kept out.
func hiddenNote(hidden []policy.Verdict) string {
	if len(hidden) == 0 {
		return ""
	}
	return fmt.Sprintf("\n(%s the read policy does not show %s left out)", plural(len(hidden), "path"), pick(len(hidden) == 1, "is", "are"))
}

func pick(c bool, yes, no string) string {
	if c {
		return yes
	}
	return no
}

// names runs a git command that prints NUL-separated paths and returns
// them, sorted and without repeats.
func (r *repo) names(ctx context.Context, what string, args ...string) ([]string, *tool.Result) {
	res, err := r.run(ctx, false, nil, listOut, args...)
	if err != nil {
		out := tool.Errorf("%s could not run: %v", what, err)
		return nil, &out
	}
	if res.ExitCode != 0 || res.CapHit != sandbox.CapNone || res.Signal != "" {
		out := tool.Errorf("%s", failure(what, res))
		return nil, &out
	}
	paths := splitNUL(res.Stdout)
	slices.Sort(paths)
	return slices.Compact(paths), nil
}

// patch runs a git command that prints a patch for the given pathspecs
// and returns its text, with a note when git was stopped at patchOut.
func (r *repo) patch(ctx context.Context, what string, args []string, paths []string) (string, *tool.Result) {
	args = append(append(args, "--"), paths...)
	res, err := r.run(ctx, false, nil, patchOut, args...)
	if err != nil {
		out := tool.Errorf("%s could not run: %v", what, err)
		return "", &out
	}
	text := string(bytes.ToValidUTF8(res.Stdout, []byte("\uFFFD")))
	switch {
	case res.CapHit == sandbox.CapOutput || res.StdoutTruncated:
		text += fmt.Sprintf("\n[the patch is longer than %d bytes and was cut; ask for fewer paths]", patchOut)
	case res.ExitCode != 0 || res.CapHit != sandbox.CapNone || res.Signal != "":
		out := tool.Errorf("%s", failure(what, res))
		return "", &out
	}
	return text, nil
}

// patchPaths returns the pathspecs a patch is asked for: the caller's
// when the read policy hides none of the changed paths, else the shown
// ones by name (at most maxPatchPaths, with a note for the rest).
func patchPaths(given, changed, shown []string) ([]string, string) {
	if len(shown) == len(changed) {
		return given, ""
	}
	if len(shown) > maxPatchPaths {
		return shown[:maxPatchPaths], fmt.Sprintf("\n(the patch covers the first %d of %s; ask for the others by path)", maxPatchPaths, plural(len(shown), "changed path"))
	}
	return shown, ""
}

// --- git_status

type status struct{ cfg Config }

const statusDesc = "Show the repository's state: the current branch (and how far it is from its upstream), " +
	"the staged and unstaged changes and the untracked files, one per line as `XY path` (X: the index, Y: the working tree; " +
	"M modified, A added, D deleted, ?? untracked). Paths the read policy hides are left out."

// Spec describes git_status.
func (status) Spec() provider.ToolSpec {
	return provider.ToolSpec{Name: "git_status", Description: statusDesc,
		Parameters: json.RawMessage(`{"type": "object", "properties": {}, "additionalProperties": false}`)}
}

// ReadOnly reports true: git_status changes nothing.
func (status) ReadOnly() bool { return true }

// Idempotent reports true.
func (status) Idempotent() bool { return true }

// Call shows the status.
func (t status) Call(ctx context.Context, env *tool.Env, args json.RawMessage) tool.Result {
	return callWith(ctx, env, t.cfg, args, func(ctx context.Context, r *repo, raw json.RawMessage) tool.Result {
		var a struct{}
		if err := tool.DecodeArgs(raw, &a); err != nil {
			return tool.BadArgs(err)
		}
		res, err := r.run(ctx, false, nil, listOut, "status", "--porcelain=v1", "-z", "--branch", "--no-renames",
			"--untracked-files=normal", "--ignore-submodules=all")
		if err != nil {
			return tool.Errorf("git status could not run: %v", err)
		}
		if res.ExitCode != 0 || res.CapHit != sandbox.CapNone || res.Signal != "" {
			return tool.Errorf("%s", failure("git status", res))
		}
		var b strings.Builder
		var lines []string
		var hidden []policy.Verdict
		for _, e := range splitNUL(res.Stdout) {
			if rest, ok := strings.CutPrefix(e, "## "); ok {
				fmt.Fprintf(&b, "branch: %s\n", rest)
				continue
			}
			if len(e) < 4 {
				continue
			}
			p := strings.TrimSuffix(e[3:], "/")
			if v := tool.Peek(r.env, policy.Read, p); v.Effect != policy.Allow {
				hidden = append(hidden, v)
				continue
			}
			lines = append(lines, e)
		}
		if len(lines) == 0 {
			b.WriteString("nothing to commit: the working tree matches HEAD and the index")
		} else {
			b.WriteString(strings.Join(lines, "\n"))
		}
		b.WriteString(hiddenNote(hidden))
		return tool.Result{Output: b.String(), Verdicts: hidden}
	})
}

// --- git_diff

type diff struct{ cfg Config }

type diffArgs struct {
	Paths  []string `json:"paths"`
	Staged bool     `json:"staged"`
	Base   string   `json:"base"`
}

const diffDesc = "Show changes as a unified diff with a summary of files changed: by default the working tree against the index " +
	"(what is not staged yet); with staged, the index against HEAD (what the next commit takes); with base, the working tree " +
	"(or with staged, the index) against that commit. Limit it to some paths with paths. The output is bounded: for a large change, " +
	"ask for fewer paths. Paths the read policy hides are left out."

const diffSchema = `{
  "type": "object",
  "properties": {
    "paths": {"type": "array", "items": {"type": "string"}, "description": "Files or directories to limit the diff to, relative to the workspace root. Default: all."},
    "staged": {"type": "boolean", "description": "Diff the index (staged changes) instead of the working tree. Default false."},
    "base": {"type": "string", "description": "A commit to diff against (a branch, tag, hash, HEAD~2). Default: the index, or HEAD with staged."}
  },
  "additionalProperties": false
}`

// Spec describes git_diff.
func (diff) Spec() provider.ToolSpec {
	return provider.ToolSpec{Name: "git_diff", Description: diffDesc, Parameters: json.RawMessage(diffSchema)}
}

// ReadOnly reports true: git_diff changes nothing.
func (diff) ReadOnly() bool { return true }

// Idempotent reports true.
func (diff) Idempotent() bool { return true }

// Call shows the diff.
func (t diff) Call(ctx context.Context, env *tool.Env, args json.RawMessage) tool.Result {
	return callWith(ctx, env, t.cfg, args, func(ctx context.Context, r *repo, raw json.RawMessage) tool.Result {
		var a diffArgs
		if err := tool.DecodeArgs(raw, &a); err != nil {
			return tool.BadArgs(err)
		}
		paths, bad := checkPaths("paths", a.Paths)
		if bad != nil {
			return *bad
		}
		common := []string{"diff", "--no-renames"}
		if a.Staged {
			common = append(common, "--cached")
		}
		var revs []string
		if a.Base != "" {
			if err := checkRev(a.Base); err != nil {
				return tool.BadArgs(tool.ArgError("base", err.Error()))
			}
			revs = []string{"--end-of-options", a.Base}
		}
		changed, stop := r.names(ctx, "git diff", append(append(append(slices.Clone(common), "--name-only", "-z"), revs...), append([]string{"--"}, paths...)...)...)
		if stop != nil {
			return *stop
		}
		shown, hidden := visible(r.env, changed)
		if len(shown) == 0 {
			return tool.Result{Output: "no changes" + hiddenNote(hidden), Verdicts: hidden}
		}
		specs, note := patchPaths(paths, changed, shown)
		text, stop := r.patch(ctx, "git diff", append(append(slices.Clone(common), "--no-ext-diff", "--no-textconv", "--patch-with-stat"), revs...), specs)
		if stop != nil {
			return *stop
		}
		return tool.Result{Output: strings.TrimRight(text, "\n") + note + hiddenNote(hidden), Verdicts: hidden}
	})
}

// --- git_log

type logTool struct{ cfg Config }

type logArgs struct {
	Rev      string   `json:"rev"`
	Paths    []string `json:"paths"`
	MaxCount int      `json:"max_count"`
}

const logDesc = "List commits, newest first: hash, date, author and subject, one a line. Start from rev (default HEAD); " +
	"with paths, only the commits that touch them. Use git_show to see one commit's change."

const logSchema = `{
  "type": "object",
  "properties": {
    "rev": {"type": "string", "description": "Where to start: a branch, tag, hash or HEAD~3. Default HEAD."},
    "paths": {"type": "array", "items": {"type": "string"}, "description": "Only commits touching these paths."},
    "max_count": {"type": "integer", "minimum": 1, "maximum": 200, "description": "How many commits at most. Default 20."}
  },
  "additionalProperties": false
}`

// Spec describes git_log.
func (logTool) Spec() provider.ToolSpec {
	return provider.ToolSpec{Name: "git_log", Description: logDesc, Parameters: json.RawMessage(logSchema)}
}

// ReadOnly reports true: git_log changes nothing.
func (logTool) ReadOnly() bool { return true }

// Idempotent reports true.
func (logTool) Idempotent() bool { return true }

// Call lists the commits.
func (t logTool) Call(ctx context.Context, env *tool.Env, args json.RawMessage) tool.Result {
	return callWith(ctx, env, t.cfg, args, func(ctx context.Context, r *repo, raw json.RawMessage) tool.Result {
		var a logArgs
		if err := tool.DecodeArgs(raw, &a); err != nil {
			return tool.BadArgs(err)
		}
		if a.MaxCount == 0 {
			a.MaxCount = 20
		}
		if a.MaxCount < 1 || a.MaxCount > 200 {
			return tool.BadArgs(tool.ArgError("max_count", fmt.Sprintf("expected 1 to 200, got %d", a.MaxCount)))
		}
		paths, bad := checkPaths("paths", a.Paths)
		if bad != nil {
			return *bad
		}
		if _, hidden := visible(r.env, paths); len(hidden) > 0 {
			v := hidden[0]
			return tool.Result{IsError: true, Refusal: v.String(), Verdicts: hidden,
				Output: fmt.Sprintf("[refused] %s: the read policy does not show it (%s)", v.Target, v)}
		}
		argv := []string{"log", "--no-decorate", "--date=iso-strict", "--format=%h%x1f%ad%x1f%an <%ae>%x1f%s%x1e", fmt.Sprintf("--max-count=%d", a.MaxCount)}
		if a.Rev != "" {
			if err := checkRev(a.Rev); err != nil {
				return tool.BadArgs(tool.ArgError("rev", err.Error()))
			}
			argv = append(argv, "--end-of-options", a.Rev)
		}
		argv = append(append(argv, "--"), paths...)
		res, err := r.run(ctx, false, nil, listOut, argv...)
		if err != nil {
			return tool.Errorf("git log could not run: %v", err)
		}
		if res.ExitCode != 0 {
			if strings.Contains(string(res.Stderr), "does not have any commits yet") {
				return tool.Result{Output: "no commits yet"}
			}
			return tool.Errorf("%s", failure("git log", res))
		}
		var b strings.Builder
		n := 0
		for _, rec := range strings.Split(string(res.Stdout), "\x1e") {
			f := strings.Split(strings.TrimLeft(rec, "\n"), "\x1f")
			if len(f) != 4 {
				continue
			}
			fmt.Fprintf(&b, "%s %s %s  %s\n", f[0], f[1], f[2], f[3])
			n++
		}
		if n == 0 {
			return tool.Result{Output: "no commits"}
		}
		return tool.Result{Output: strings.TrimSuffix(b.String(), "\n")}
	})
}

// --- git_show

type show struct{ cfg Config }

type showArgs struct {
	Rev  string `json:"rev"`
	Path string `json:"path"`
}

const showDesc = "Show one commit: its hash, author, date, message, a summary of files changed and the patch (against its first parent). " +
	"With path, show instead that file's content as it is in the commit. Paths the read policy hides are left out."

const showSchema = `{
  "type": "object",
  "properties": {
    "rev": {"type": "string", "description": "The commit: a branch, tag, hash or HEAD~1. Default HEAD."},
    "path": {"type": "string", "description": "A file to show as it is in that commit, relative to the workspace root."}
  },
  "additionalProperties": false
}`

// Spec describes git_show.
func (show) Spec() provider.ToolSpec {
	return provider.ToolSpec{Name: "git_show", Description: showDesc, Parameters: json.RawMessage(showSchema)}
}

// ReadOnly reports true: git_show changes nothing.
func (show) ReadOnly() bool { return true }

// Idempotent reports true.
func (show) Idempotent() bool { return true }

// maxShowFile bounds the file content git_show prints.
const maxShowFile = 1 << 20

// Call shows the commit or the file.
func (t show) Call(ctx context.Context, env *tool.Env, args json.RawMessage) tool.Result {
	return callWith(ctx, env, t.cfg, args, func(ctx context.Context, r *repo, raw json.RawMessage) tool.Result {
		var a showArgs
		if err := tool.DecodeArgs(raw, &a); err != nil {
			return tool.BadArgs(err)
		}
		if a.Rev == "" {
			a.Rev = "HEAD"
		}
		if err := checkRev(a.Rev); err != nil {
			return tool.BadArgs(tool.ArgError("rev", err.Error()))
		}
		if a.Path != "" {
			return r.showFile(ctx, a.Rev, a.Path)
		}
		changed, stop := r.names(ctx, "git show", "show", "--no-renames", "--diff-merges=first-parent", "--name-only", "-z",
			"--format=", "--end-of-options", a.Rev, "--")
		if stop != nil {
			return *stop
		}
		shown, hidden := visible(r.env, changed)
		base := []string{"show", "--no-renames", "--diff-merges=first-parent", "--no-ext-diff", "--no-textconv",
			"--format=fuller", "--date=iso-strict", "--patch-with-stat"}
		if len(shown) == 0 {
			base = append(base, "--no-patch")
		}
		specs, note := patchPaths(nil, changed, shown)
		text, stop := r.patch(ctx, "git show", append(base, "--end-of-options", a.Rev), specs)
		if stop != nil {
			return *stop
		}
		return tool.Result{Output: strings.TrimRight(text, "\n") + note + hiddenNote(hidden), Verdicts: hidden}
	})
}

// showFile prints a file as it is in a commit.
func (r *repo) showFile(ctx context.Context, rev, p string) tool.Result {
	paths, bad := checkPaths("path", []string{p})
	if bad != nil {
		return *bad
	}
	p = paths[0]
	if v := tool.Peek(r.env, policy.Read, p); v.Effect != policy.Allow {
		return tool.Result{IsError: true, Refusal: v.String(), Verdicts: []policy.Verdict{v},
			Output: fmt.Sprintf("[refused] %s: the read policy does not show it (%s)", p, v)}
	}
	res, err := r.run(ctx, false, nil, maxShowFile, "cat-file", "blob", "--end-of-options", rev+":"+p)
	if err != nil {
		return tool.Errorf("git show could not run: %v", err)
	}
	if res.ExitCode != 0 && res.CapHit == sandbox.CapNone {
		return tool.Errorf("%s", failure(fmt.Sprintf("git show %s:%s", rev, p), res))
	}
	data := res.Stdout
	head := data[:min(len(data), 8000)]
	if bytes.IndexByte(head, 0) >= 0 {
		return tool.Result{Output: fmt.Sprintf("%s at %s is a binary file", p, rev)}
	}
	out := fmt.Sprintf("%s at %s:\n%s", p, rev, bytes.ToValidUTF8(data, []byte("\uFFFD")))
	if res.CapHit != sandbox.CapNone || res.StdoutTruncated {
		out += fmt.Sprintf("\n[the file is longer than %d bytes and was cut]", maxShowFile)
	}
	return tool.Result{Output: out}
}
