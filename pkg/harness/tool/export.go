package tool

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"strings"

	"github.com/initorigin/io-harness-go/pkg/harness/policy"
)

// This file lends the workspace tools' shared checks to the tools the
// harness builds in other packages (git, skills, images), so that every
// built-in tool decodes its arguments, confines its paths and asks the
// gate the same way.

// DecodeArgs decodes a tool call's JSON arguments strictly into the
// struct *dst: one JSON object, every key a field of dst as its json tag
// spells it, every name in required present and not null. Null or empty
// arguments mean {}. The error names the field and what was expected.
func DecodeArgs(raw json.RawMessage, dst any, required ...string) error {
	return decodeArgs(raw, dst, required...)
}

// BadArgs is the observation for arguments [DecodeArgs] refused.
func BadArgs(err error) Result { return badArgs(err) }

// ArgError is an argument error naming its field, as [DecodeArgs] makes.
func ArgError(field, msg string) error { return &argError{Field: field, Msg: msg} }

// Errorf is an error observation.
func Errorf(format string, a ...any) Result { return errorf(format, a...) }

// Refuse is the observation for a path p refused before any action.
func Refuse(p, reason string) Result { return refuse(p, reason) }

// Bound cuts an observation to the bound every built-in tool's output
// keeps (32 KiB), with a marker saying what was dropped.
func Bound(s string) string { return bound(s) }

// MaxOutput is the bound of every built-in tool's output, in bytes.
const MaxOutput = maxOutput

// CleanPath checks a workspace path lexically and returns it in clean
// slash form, or the reason it is refused: empty, a NUL byte, absolute,
// or climbing out with "..".
func CleanPath(p string) (clean, reason string) { return cleanPath(p) }

// Authorize asks env's gate about a; without a gate everything is
// allowed. It returns the action to perform, or the observation to
// return instead (a refusal, or a deferral to a person).
func Authorize(ctx context.Context, env *Env, a Action) (Action, *Result) {
	return authorize(ctx, env, a)
}

// Peek asks env's gate, without asking anyone, whether target may be
// shown or used for act; without a gate everything is allowed.
func Peek(env *Env, act policy.Act, target string) policy.Verdict { return peek(env, act, target) }

// ReasonGitDir is why a write into a repository's .git directory is
// refused by the file tools: only the git tools change a repository, and
// only through git.
const ReasonGitDir = "path is inside a .git directory, which the file tools never write: a hook or a config written there would run code the next time anyone uses git; change the repository with the git tools"

// InGitDir reports whether the clean slash path p names a .git directory
// or something inside one, at any depth. The test ignores case and the
// trailing dots and spaces Windows drops, and catches the 8.3 short name
// GIT~1, so that no spelling reaches the directory on a filesystem that
// folds them.
func InGitDir(p string) bool {
	for _, c := range strings.Split(p, "/") {
		c = strings.ToLower(strings.TrimRight(c, ". "))
		if c == ".git" || c == "git~1" {
			return true
		}
	}
	return false
}

// gitFloor refuses a write of the workspace path p that would land in a
// .git directory, as given or through the symlinks along it. It is the
// tool layer's floor under every policy: a permissive run, or a policy
// without the builtin-git layer, still cannot plant a hook.
func gitFloor(env *Env, p string) *Result {
	if InGitDir(p) {
		r := refuse(p, ReasonGitDir)
		return &r
	}
	canon, err := Canonical(env.Root, p)
	if err == nil && InGitDir(canon) {
		r := refuse(p, fmt.Sprintf("%s (it leads to %s)", ReasonGitDir, path.Clean(canon)))
		return &r
	}
	return nil
}
