package tool

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"

	"github.com/initorigin/io-harness-go/pkg/harness/policy"
	"github.com/initorigin/io-harness-go/pkg/harness/snapshot"
)

// Action is an effect a tool is about to have, as the permission boundary
// sees it.
type Action struct {
	Act policy.Act `json:"act"`
	// Target is a clean, slash-separated workspace path for read and
	// write, the command line of a command ([policy.Quote] of Argv) or a
	// tool's name for exec, host:port for net.
	Target string `json:"target"`
	// Content is the payload: the complete new content of a write, the
	// argv of a command as a JSON array, the arguments of a tool call.
	Content string `json:"content,omitempty"`
	// Argv is the command of an exec of a command; nil for a tool call.
	Argv []string `json:"argv,omitempty"`
}

// CommandAction is the exec of argv, in the one form the permission
// boundary judges and a person approves: Target, Content and Argv say
// the same thing.
func CommandAction(argv []string) Action {
	data, _ := json.Marshal(argv)
	return Action{Act: policy.Exec, Target: policy.Quote(argv), Content: string(data), Argv: argv}
}

// ActionOf rebuilds an action from its stored form: an exec whose
// content is a JSON array of strings is a command, made again with
// [CommandAction]; ok is false when the content of a command is not a
// valid argv.
func ActionOf(act policy.Act, target, content string) (Action, bool) {
	if act == policy.Exec && strings.HasPrefix(strings.TrimSpace(content), "[") {
		argv, err := ParseArgv(content)
		if err != nil {
			return Action{}, false
		}
		return CommandAction(argv), true
	}
	return Action{Act: act, Target: target, Content: content}, true
}

// ParseArgv reads a command's argv from its JSON form: a non-empty array
// of strings whose first is not empty and none holds a NUL byte.
func ParseArgv(content string) ([]string, error) {
	var argv []string
	if err := json.Unmarshal([]byte(content), &argv); err != nil {
		return nil, fmt.Errorf("a command is a JSON array of strings: %v", err)
	}
	if len(argv) == 0 || argv[0] == "" {
		return nil, fmt.Errorf("a command needs a program")
	}
	for i, a := range argv {
		if strings.IndexByte(a, 0) >= 0 {
			return nil, fmt.Errorf("argv[%d] contains a NUL byte", i)
		}
	}
	return argv, nil
}

// Verdict is a gate's answer to an [Action].
type Verdict struct {
	// Action is what to do: the action asked about, or an approver's
	// rewrite of it, already checked again.
	Action Action
	// Refused, when not empty, is why the action must not happen; it
	// names the rule and layer, or the person, that refused it.
	Refused string
	// Deferred, when not empty, is the approval request the action now
	// waits on; the tool does nothing.
	Deferred string
}

// Gate is the permission boundary every tool acts through. The harness
// implements it with the policy and the approver.
//
// # Contract
//
//   - A tool calls Authorize before every effect and performs exactly the
//     returned Verdict.Action, or nothing.
//   - Authorize may block while a person decides; it returns when ctx is
//     done.
//   - For an exec of a command, the returned action's Argv is the command
//     to run, and its Target and Content agree with it.
//   - Peek answers without asking anyone and without tracing: it is for
//     walks and copies that decide what to show or take. It judges a path
//     through the symlinks of its directories, as Authorize does, and
//     takes the last element as given: a walk never visits a link, and a
//     caller that acts through a link at the end of a path asks about the
//     file it leads to too. A walk hides what Peek denies and reads only
//     what it allows; a tool that acts on a Peek verdict other than allow
//     reports it in [Result.Verdicts].
type Gate interface {
	Authorize(ctx context.Context, a Action) Verdict
	Peek(act policy.Act, target string) policy.Verdict
}

// authorize asks env's gate about a; without a gate everything is allowed.
// It returns the action to perform, or the result to return instead.
func authorize(ctx context.Context, env *Env, a Action) (Action, *Result) {
	if env.Gate == nil {
		return a, nil
	}
	v := env.Gate.Authorize(ctx, a)
	switch {
	case v.Deferred != "":
		r := Result{IsError: true, Deferred: v.Deferred,
			Output: fmt.Sprintf("[awaiting approval] %s %s: a person must decide (request %s); nothing was done yet", a.Act, a.Target, v.Deferred)}
		return Action{}, &r
	case v.Refused != "":
		r := Result{IsError: true, Refusal: v.Refused, Output: fmt.Sprintf("[refused] %s %s: %s", a.Act, a.Target, v.Refused)}
		return Action{}, &r
	}
	return v.Action, nil
}

// authorizePath authorizes a on a path and validates a rewritten target
// like any path argument.
func authorizePath(ctx context.Context, env *Env, a Action) (Action, *Result) {
	got, stop := authorize(ctx, env, a)
	if stop != nil {
		return got, stop
	}
	if got.Target != a.Target {
		clean, refused := resolve(env, got.Target)
		if refused != nil {
			return got, refused
		}
		got.Target = clean
	}
	return got, nil
}

// peek asks env's gate whether a walk may show (and search) target.
func peek(env *Env, act policy.Act, target string) policy.Verdict {
	if env.Gate == nil {
		return policy.Verdict{Act: act, Target: target, Effect: policy.Allow}
	}
	return env.Gate.Peek(act, target)
}

// Canonical returns the workspace path p with every symlink along it
// resolved, as a clean slash path relative to root: the file p really
// names. Components that do not exist are kept as given. A symlink that
// leads out of the workspace is an error recognised by [IsEscape]. The
// permission boundary checks a path's canonical form as well as its
// literal one, so that a link cannot smuggle a write past a rule.
func Canonical(root *os.Root, p string) (string, error) {
	clean, reason := cleanPath(p)
	if reason != "" {
		return "", fmt.Errorf("%s: %s", p, reason)
	}
	if clean == "." {
		return ".", nil
	}
	rest := strings.Split(clean, "/")
	done := ""
	for hops := 0; len(rest) > 0; {
		cand := path.Join(done, rest[0])
		fi, err := root.Lstat(cand)
		if err != nil {
			// Missing (or unreadable): the rest is taken as given.
			return path.Join(append([]string{done}, rest...)...), nil
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			done, rest = cand, rest[1:]
			continue
		}
		if hops++; hops > 40 {
			return "", fmt.Errorf("%s: %w", p, syscall.ELOOP)
		}
		link, err := root.Readlink(cand)
		if err != nil {
			return "", fmt.Errorf("read symlink %s: %w", cand, err)
		}
		link = strings.ReplaceAll(link, `\`, "/")
		if link == "" || link[0] == '/' || hasDrive(link) {
			return "", fmt.Errorf("symlink %s: %w", cand, snapshot.ErrLinkEscapes)
		}
		next := path.Join(path.Dir(cand), link)
		if next == ".." || strings.HasPrefix(next, "../") {
			return "", fmt.Errorf("symlink %s: %w", cand, snapshot.ErrLinkEscapes)
		}
		done, rest = "", append(strings.Split(next, "/"), rest[1:]...)
		if next == "." {
			rest = rest[1:]
		}
	}
	if done == "" {
		return ".", nil
	}
	return done, nil
}

// IsEscape reports whether err says a path led out of the workspace.
func IsEscape(err error) bool { return isEscape(err) }
