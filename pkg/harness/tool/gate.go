package tool

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"

	"github.com/initorigin/io-harness-go/pkg/harness/policy"
)

// Action is an effect a tool is about to have, as the permission boundary
// sees it.
type Action struct {
	Act policy.Act `json:"act"`
	// Target is a clean, slash-separated workspace path for read and
	// write, a program for exec, host:port for net.
	Target string `json:"target"`
	// Content is the payload of a write: the complete new content of the
	// file.
	Content string `json:"content,omitempty"`
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
//   - Peek answers without asking anyone and without tracing: it is for
//     walks that decide what to show. A walk hides what Peek denies and
//     reads only what it allows.
type Gate interface {
	Authorize(ctx context.Context, a Action) Verdict
	Peek(act policy.Act, target string) policy.Effect
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
func peek(env *Env, act policy.Act, target string) policy.Effect {
	if env.Gate == nil {
		return policy.Allow
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
			return "", fmt.Errorf("symlink %s: %w", cand, errLinkEscapes)
		}
		next := path.Join(path.Dir(cand), link)
		if next == ".." || strings.HasPrefix(next, "../") {
			return "", fmt.Errorf("symlink %s: %w", cand, errLinkEscapes)
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
