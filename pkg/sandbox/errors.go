package sandbox

import (
	"errors"
	"fmt"
	"strings"
)

// The kinds of sandbox failure. Test for them with errors.Is. A command
// that ran and failed is never an error: it is a [Result].
var (
	// ErrUnavailable is a backend that cannot run on this host or in this
	// build: unknown name, missing kernel feature, missing helper, or a
	// probe that failed.
	ErrUnavailable = errors.New("sandbox: backend unavailable")
	// ErrSetup is a sandbox that could not be built for one run: the
	// command never started.
	ErrSetup = errors.New("sandbox: setup failed")
	// ErrInvalid is a spec or option that cannot be honoured as written.
	ErrInvalid = errors.New("sandbox: invalid spec")
	// ErrApply is a command that ran, but whose changes to a host
	// directory (held back by the disk cap's overlay) could not all be
	// applied to it: a host disk that is full, a directory the host
	// changed meanwhile. What was applied stays.
	ErrApply = errors.New("sandbox: changes not applied")
)

// AccessError is a path the command must write that the user it runs as
// ([Enforcement.UID]) cannot: a root caller's commands run as an
// unprivileged user. Chown the path to that user, or set [Spec.Lend] for
// a directory made for the run. It is the Err of an *Error of kind
// ErrInvalid.
type AccessError struct {
	// Path is the path, and Field the spec field that named it.
	Path  string
	Field string
	// UID and GID are the user and group the command runs as.
	UID, GID int
	// Reason says what is missing.
	Reason string
}

// Error implements error.
func (e *AccessError) Error() string {
	return fmt.Sprintf("%s %s: %s for uid %d gid %d, the unprivileged user that commands of a root caller run as (Options.UID); chown it, or set Spec.Lend for a directory made for the run",
		e.Field, e.Path, e.Reason, e.UID, e.GID)
}

// Error is a failure of the sandbox itself. errors.Is matches its Kind
// and anything Err wraps (a syscall.Errno, a context error).
type Error struct {
	// Kind is ErrUnavailable, ErrSetup or ErrInvalid, or the context's
	// error when a run was cancelled.
	Kind error
	// Backend names the backend, when one was involved.
	Backend string
	// Step is what failed: a spec field ("limits.cpu"), a setup step
	// ("spawn: mount: private /proc"), "probe", "workdir".
	Step string
	// Err is the underlying error, if any.
	Err error
}

// Error implements error.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("sandbox: ")
	if e.Backend != "" {
		b.WriteString(e.Backend)
		b.WriteString(": ")
	}
	b.WriteString(strings.TrimPrefix(e.Kind.Error(), "sandbox: "))
	if e.Step != "" {
		b.WriteString(": ")
		b.WriteString(e.Step)
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap returns the kind and the underlying error.
func (e *Error) Unwrap() []error {
	if e.Err == nil {
		return []error{e.Kind}
	}
	return []error{e.Kind, e.Err}
}
