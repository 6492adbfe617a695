package tool

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"syscall"

	"github.com/initorigin/io-harness-go/pkg/harness/policy"
	"github.com/initorigin/io-harness-go/pkg/harness/snapshot"
)

// Refusal reasons, as the model reads them.
const (
	reasonEmpty      = "path is empty"
	reasonNUL        = "path contains a NUL byte"
	reasonAbsolute   = "path is absolute; give a path relative to the workspace root"
	reasonClimbs     = "path climbs out of the workspace with .."
	reasonSymlinkOut = "path leads out of the workspace through a symlink"
	reasonNotAllowed = "path is not one this task may touch"
)

// escapeMsg is the text of the error [os.Root] returns for a path that
// leads out of the root. The os package does not export the error value.
const escapeMsg = "path escapes from parent"

// constError is an error that can be a constant.
type constError string

func (e constError) Error() string { return string(e) }

// cleanPath checks p lexically and returns it in clean slash form, or the
// reason it is refused. Backslashes count as separators on every platform,
// so that a path means the same thing wherever the harness runs. The
// result is "." for the root itself, never empty, never absolute, and
// never starts with "..".
func cleanPath(p string) (clean, reason string) {
	switch {
	case p == "":
		return "", reasonEmpty
	case strings.IndexByte(p, 0) >= 0:
		return "", reasonNUL
	}
	s := strings.ReplaceAll(p, `\`, "/")
	if s[0] == '/' || hasDrive(s) {
		return "", reasonAbsolute
	}
	s = path.Clean(s)
	if s == ".." || strings.HasPrefix(s, "../") {
		return "", reasonClimbs
	}
	return s, ""
}

// hasDrive reports whether s starts with a Windows drive letter and colon,
// as in "C:\x" and the drive-relative "C:x".
func hasDrive(s string) bool {
	if len(s) < 2 || s[1] != ':' {
		return false
	}
	c := s[0] | 0x20
	return 'a' <= c && c <= 'z'
}

// pathArg returns the path argument p, or its default when p is empty: the
// task's one file when env.Only has exactly one entry, else fallback.
func pathArg(env *Env, p, fallback string) string {
	if p != "" {
		return p
	}
	if len(env.Only) == 1 {
		return env.Only[0]
	}
	return fallback
}

// resolve validates the path argument p for a call in env: it must pass
// [cleanPath] and, when env.Only is set, be one of its entries. It returns
// the clean path, or the refusal to return to the model. Every tool
// resolves every path with it before touching the filesystem.
func resolve(env *Env, p string) (string, *Result) {
	clean, reason := cleanPath(p)
	if reason != "" {
		r := refuse(p, reason)
		return "", &r
	}
	if len(env.Only) > 0 && !slices.ContainsFunc(env.Only, func(o string) bool {
		c, bad := cleanPath(o)
		return bad == "" && c == clean
	}) {
		r := refuse(p, fmt.Sprintf("%s (it may touch only %s)", reasonNotAllowed, strings.Join(env.Only, ", ")))
		return "", &r
	}
	return clean, nil
}

// isEscape reports whether err says a path led out of the root.
func isEscape(err error) bool {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if e.Error() == escapeMsg {
			return true
		}
	}
	return false
}

// fsFailure turns a filesystem error on the path p into an observation. A
// path that leads out of the root is a refusal: the lexical checks have
// passed by then, so only a symlink can have led it out.
func fsFailure(p string, err error) Result {
	var pe *fs.PathError
	var ce *ConflictError
	switch {
	case errors.As(err, &ce):
		return conflict(ce)
	case errors.Is(err, errGitDir):
		return refuse(p, ReasonGitDir)
	case isEscape(err):
		return refuse(p, reasonSymlinkOut)
	case errors.Is(err, fs.ErrNotExist):
		return errorf("%s: no such file or directory", p)
	case errors.Is(err, fs.ErrPermission):
		return errorf("%s: permission denied", p)
	case errors.Is(err, syscall.ELOOP):
		return errorf("%s: too many levels of symbolic links", p)
	case errors.As(err, &pe):
		return errorf("%s: %s failed: %v", p, pe.Op, pe.Err)
	default:
		return errorf("%s: %v", p, err)
	}
}

// statRegular returns the info of the regular file p in root, following
// symlinks inside the root, or the observation saying why it cannot be
// used as one. what names the action, for the message.
func statRegular(root *os.Root, p, what string) (fs.FileInfo, *Result) {
	fi, err := root.Stat(p)
	if err != nil {
		r := fsFailure(p, err)
		return nil, &r
	}
	if fi.IsDir() {
		r := errorf("%s is a directory; %s works on files (use list_dir to see a directory)", p, what)
		return nil, &r
	}
	if !fi.Mode().IsRegular() {
		r := errorf("%s is not a regular file (%v); %s works on regular files only", p, fi.Mode().Type(), what)
		return nil, &r
	}
	return fi, nil
}

// resolveLinks follows the symlinks that end the path p, inside root, and
// returns the path of the file they lead to, which may not exist yet. A
// link that leads out of the workspace is an error that [isEscape]
// recognises. Links in directories along the way are left to root.
func resolveLinks(root *os.Root, p string) (string, error) {
	return snapshot.ResolveLinks(root, p)
}

// searchPath returns the resolved and read-authorized path argument of a
// tool that searches: p, or the whole workspace when p is empty.
func searchPath(ctx context.Context, env *Env, p string) (string, *Result) {
	p, refused := resolve(env, pathArg(env, p, "."))
	if refused != nil {
		return "", refused
	}
	act, stop := authorizePath(ctx, env, Action{Act: policy.Read, Target: p})
	if stop != nil {
		return "", stop
	}
	return act.Target, nil
}

// filePath returns the resolved path argument of a tool that acts on one
// file: p, or the task's one file when p is empty. A missing path is an
// argument error.
func filePath(env *Env, p string) (string, *Result) {
	p = pathArg(env, p, "")
	if p == "" {
		r := badArgs(&argError{Field: "path", Msg: "missing required field, expected a string"})
		return "", &r
	}
	return resolve(env, p)
}
