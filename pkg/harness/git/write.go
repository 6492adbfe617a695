package git

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/initorigin/io-harness-go/pkg/harness/policy"
	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/tool"
	"github.com/initorigin/io-harness-go/pkg/sandbox"
)

// authorize asks the gate about the git command argv, the one action a
// change through git is: its exec, as the policy judges a command and a
// person approves it. An approver may approve or deny it, not rewrite
// it: the git tools run only the commands they build.
func authorize(ctx context.Context, r *repo, argv []string) *tool.Result {
	got, stop := tool.Authorize(ctx, r.env, tool.CommandAction(argv))
	if stop != nil {
		return stop
	}
	if !slices.Equal(got.Argv, argv) {
		res := tool.Result{IsError: true, Refusal: "a rewritten git command",
			Output: fmt.Sprintf("[refused] %s: the approver rewrote it to %s; the git tools run only the commands they build", policy.Quote(argv), got.Target)}
		return &res
	}
	return nil
}

// write runs a git command that changes the repository, and copies
// HEAD back when it changed.
func (r *repo) write(ctx context.Context, what string, stdin []byte, args ...string) (*sandbox.Result, *tool.Result) {
	res, err := r.run(ctx, true, stdin, listOut, args...)
	if err != nil {
		out := tool.Errorf("%s could not run: %v", what, err)
		return nil, &out
	}
	if err := r.syncHead(); err != nil {
		out := tool.Errorf("%s: HEAD could not be updated: %v", what, err)
		return nil, &out
	}
	if res.ExitCode != 0 || res.CapHit != sandbox.CapNone || res.Signal != "" {
		out := tool.Errorf("%s", failure(what, res))
		return nil, &out
	}
	return res, nil
}

// --- git_add

type add struct{ cfg Config }

type addArgs struct {
	Paths []string `json:"paths"`
	All   bool     `json:"all"`
}

const addDesc = "Stage changes for the next commit: the files named (a directory stages the changed files under it, " +
	"deletions included), or with all, every changed and untracked file that is not ignored. " +
	"A file the read policy hides or the write policy denies is not staged."

const addSchema = `{
  "type": "object",
  "properties": {
    "paths": {"type": "array", "items": {"type": "string"}, "description": "Files or directories to stage, relative to the workspace root."},
    "all": {"type": "boolean", "description": "Stage every change instead. Default false."}
  },
  "additionalProperties": false
}`

// Spec describes git_add.
func (add) Spec() provider.ToolSpec {
	return provider.ToolSpec{Name: "git_add", Description: addDesc, Parameters: json.RawMessage(addSchema)}
}

// Idempotent reports true: staging the same files again changes nothing.
func (add) Idempotent() bool { return true }

// Call stages the files.
func (t add) Call(ctx context.Context, env *tool.Env, args json.RawMessage) tool.Result {
	return callWith(ctx, env, t.cfg, args, func(ctx context.Context, r *repo, raw json.RawMessage) tool.Result {
		var a addArgs
		if err := tool.DecodeArgs(raw, &a); err != nil {
			return tool.BadArgs(err)
		}
		switch {
		case a.All && len(a.Paths) > 0:
			return tool.BadArgs(tool.ArgError("all", "give paths or all, not both"))
		case !a.All && len(a.Paths) == 0:
			return tool.BadArgs(tool.ArgError("paths", "name the files to stage, or set all"))
		}
		paths, bad := checkPaths("paths", a.Paths)
		if bad != nil {
			return *bad
		}
		files, stop := r.names(ctx, "git add", append([]string{"ls-files", "-z", "--modified", "--others", "--deleted", "--exclude-standard", "--"}, paths...)...)
		if stop != nil {
			return *stop
		}
		var stage, refused []string
		var verdicts []policy.Verdict
		hiddenCount := 0
		for _, f := range files {
			rv := tool.Peek(r.env, policy.Read, f)
			if rv.Effect != policy.Allow {
				verdicts = append(verdicts, rv)
				if named(f, paths) {
					refused = append(refused, fmt.Sprintf("%s: the read policy does not show it (%s)", f, rv.Effect))
				} else {
					hiddenCount++
				}
				continue
			}
			if wv := tool.Peek(r.env, policy.Write, f); wv.Effect == policy.Deny {
				verdicts = append(verdicts, wv)
				refused = append(refused, fmt.Sprintf("%s: the write policy denies it (%s)", f, wv))
				continue
			}
			stage = append(stage, f)
		}
		var note strings.Builder
		if len(refused) > 0 {
			fmt.Fprintf(&note, "\nnot staged:\n- %s", strings.Join(refused, "\n- "))
		}
		if hiddenCount > 0 {
			fmt.Fprintf(&note, "\n(%s the read policy does not show %s left out)", plural(hiddenCount, "path"), pick(hiddenCount == 1, "is", "are"))
		}
		if len(stage) == 0 {
			return tool.Result{IsError: len(refused) > 0, Output: "nothing to stage: no changed file matches" + note.String(), Verdicts: verdicts}
		}
		if stop := authorize(ctx, r, append([]string{"git", "add", "--"}, stage...)); stop != nil {
			stop.Verdicts = append(verdicts, stop.Verdicts...)
			return *stop
		}
		stdin := []byte(strings.Join(stage, "\x00") + "\x00")
		if _, stop := r.write(ctx, "git add", stdin, "add", "--pathspec-from-file=-", "--pathspec-file-nul"); stop != nil {
			return *stop
		}
		return tool.Result{Output: fmt.Sprintf("staged %s: %s%s", plural(len(stage), "file"), strings.Join(stage, ", "), note.String()), Verdicts: verdicts}
	})
}

// named reports whether the model named f itself, not a directory of
// it: only such a path is named in a refusal, as a walk names none of
// the files the read policy hides.
func named(f string, paths []string) bool { return slices.Contains(paths, f) }

// --- git_commit

type commit struct{ cfg Config }

type commitArgs struct {
	Message string `json:"message"`
}

// maxMessage bounds a commit message, in bytes.
const maxMessage = 64 << 10

const commitDesc = "Commit what is staged (see git_add) with the message given, as the run's configured identity. " +
	"Hooks do not run and nothing is signed. There is no amend, reset, rebase or push."

const commitSchema = `{
  "type": "object",
  "properties": {
    "message": {"type": "string", "description": "The commit message: a subject line, optionally a blank line and a body."}
  },
  "required": ["message"],
  "additionalProperties": false
}`

// Spec describes git_commit.
func (commit) Spec() provider.ToolSpec {
	return provider.ToolSpec{Name: "git_commit", Description: commitDesc, Parameters: json.RawMessage(commitSchema)}
}

// Call commits.
func (t commit) Call(ctx context.Context, env *tool.Env, args json.RawMessage) tool.Result {
	return callWith(ctx, env, t.cfg, args, func(ctx context.Context, r *repo, raw json.RawMessage) tool.Result {
		var a commitArgs
		if err := tool.DecodeArgs(raw, &a, "message"); err != nil {
			return tool.BadArgs(err)
		}
		switch {
		case strings.TrimSpace(a.Message) == "":
			return tool.BadArgs(tool.ArgError("message", "the message is empty"))
		case len(a.Message) > maxMessage:
			return tool.BadArgs(tool.ArgError("message", fmt.Sprintf("the message is over %d bytes", maxMessage)))
		case strings.IndexByte(a.Message, 0) >= 0 || !utf8.ValidString(a.Message):
			return tool.BadArgs(tool.ArgError("message", "the message is not UTF-8 text"))
		}
		staged, stop := r.names(ctx, "git commit", "diff", "--cached", "--no-renames", "--name-only", "-z", "--")
		if stop != nil {
			return *stop
		}
		if len(staged) == 0 {
			return tool.Errorf("nothing is staged; stage changes with git_add first")
		}
		for _, f := range staged {
			if v := tool.Peek(r.env, policy.Write, f); v.Effect == policy.Deny {
				return tool.Result{IsError: true, Refusal: v.String(), Verdicts: []policy.Verdict{v},
					Output: fmt.Sprintf("[refused] the commit would record %s, which the write policy denies (%s); nothing was committed", f, v)}
			}
		}
		if stop := authorize(ctx, r, []string{"git", "commit", "-m", a.Message}); stop != nil {
			return *stop
		}
		res, stop := r.write(ctx, "git commit", []byte(a.Message), "commit", "--no-verify", "--no-gpg-sign", "--cleanup=whitespace", "--file=-")
		if stop != nil {
			return *stop
		}
		return tool.Result{Output: strings.TrimSpace(string(res.Stdout))}
	})
}

// --- git_branch

type branch struct{ cfg Config }

type branchArgs struct {
	Action string `json:"action"`
	Name   string `json:"name"`
	Start  string `json:"start"`
}

const branchDesc = "List branches (the current one marked *), create one (from start, default HEAD), or switch to one. " +
	"A switch refuses to overwrite uncommitted changes, and rewrites only files the write policy allows."

const branchSchema = `{
  "type": "object",
  "properties": {
    "action": {"type": "string", "enum": ["list", "create", "switch"], "description": "Default list."},
    "name": {"type": "string", "description": "The branch to create or switch to."},
    "start": {"type": "string", "description": "For create: the commit the branch starts at. Default HEAD."}
  },
  "additionalProperties": false
}`

// Spec describes git_branch.
func (branch) Spec() provider.ToolSpec {
	return provider.ToolSpec{Name: "git_branch", Description: branchDesc, Parameters: json.RawMessage(branchSchema)}
}

// Call lists, creates or switches.
func (t branch) Call(ctx context.Context, env *tool.Env, args json.RawMessage) tool.Result {
	return callWith(ctx, env, t.cfg, args, func(ctx context.Context, r *repo, raw json.RawMessage) tool.Result {
		var a branchArgs
		if err := tool.DecodeArgs(raw, &a); err != nil {
			return tool.BadArgs(err)
		}
		if a.Action == "" {
			a.Action = "list"
		}
		if a.Action != "list" {
			if err := checkBranch(a.Name); err != nil {
				return tool.BadArgs(tool.ArgError("name", err.Error()))
			}
		}
		if a.Start != "" && a.Action != "create" {
			return tool.BadArgs(tool.ArgError("start", "only create takes a start"))
		}
		switch a.Action {
		case "list":
			if a.Name != "" {
				return tool.BadArgs(tool.ArgError("name", "list takes no name"))
			}
			res, err := r.run(ctx, false, nil, listOut, "branch", "--list", "--format=%(HEAD) %(refname:short)")
			if err != nil {
				return tool.Errorf("git branch could not run: %v", err)
			}
			if res.ExitCode != 0 {
				return tool.Errorf("%s", failure("git branch", res))
			}
			out := strings.TrimRight(string(res.Stdout), "\n")
			if out == "" {
				out = "no branches yet (no commit has been made)"
			}
			return tool.Result{Output: out}
		case "create":
			argv := []string{"git", "branch", a.Name}
			gitArgs := []string{"branch", "--no-track", "--end-of-options", a.Name}
			if a.Start != "" {
				if err := checkRev(a.Start); err != nil {
					return tool.BadArgs(tool.ArgError("start", err.Error()))
				}
				argv = append(argv, a.Start)
				gitArgs = append(gitArgs, a.Start)
			}
			if stop := authorize(ctx, r, argv); stop != nil {
				return *stop
			}
			if _, stop := r.write(ctx, "git branch", nil, gitArgs...); stop != nil {
				return *stop
			}
			return tool.Result{Output: fmt.Sprintf("created branch %s", a.Name)}
		case "switch":
			return r.switchTo(ctx, a.Name)
		}
		return tool.BadArgs(tool.ArgError("action", fmt.Sprintf("expected list, create or switch, got %q", a.Action)))
	})
}

// switchTo switches the working tree to a branch. Every file the switch
// would rewrite must be one the write policy allows outright: a switch
// cannot be half done, so one that is not refuses the switch.
func (r *repo) switchTo(ctx context.Context, name string) tool.Result {
	changed, stop := r.names(ctx, "git switch", "diff", "--no-renames", "--name-only", "-z", "--end-of-options", "HEAD", name, "--")
	if stop != nil {
		return *stop
	}
	var verdicts []policy.Verdict
	var blocked []string
	for _, f := range changed {
		if v := tool.Peek(r.env, policy.Write, f); v.Effect != policy.Allow {
			verdicts = append(verdicts, v)
			blocked = append(blocked, fmt.Sprintf("%s (%s)", f, v.Effect))
		}
	}
	if len(blocked) > 0 {
		return tool.Result{IsError: true, Refusal: "the write policy", Verdicts: verdicts,
			Output: fmt.Sprintf("[refused] switching to %s would rewrite files the write policy does not allow without asking: %s; nothing was changed",
				name, strings.Join(blocked, ", "))}
	}
	if stop := authorize(ctx, r, []string{"git", "switch", name}); stop != nil {
		return *stop
	}
	res, stop := r.write(ctx, "git switch", nil, "switch", "--no-guess", "--end-of-options", name)
	if stop != nil {
		return *stop
	}
	out := strings.TrimSpace(string(res.Stderr) + "\n" + string(res.Stdout))
	if out == "" {
		out = "switched to " + name
	}
	return tool.Result{Output: out}
}
