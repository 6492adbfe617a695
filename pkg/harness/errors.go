package harness

import (
	"errors"
	"fmt"
	"strings"

	"github.com/initorigin/io-harness-go/pkg/harness/store"
)

// Kind classifies a harness error. A Kind is itself an error, so that
// errors.Is(err, harness.ErrConfig) asks whether err is of that kind.
type Kind string

// The error kinds. They match the original io-harness's.
const (
	// ErrIO is a failure reading or writing the workspace or the host.
	ErrIO Kind = "io"
	// ErrState is a failure of the store: the trace could not be written
	// or read.
	ErrState Kind = "state"
	// ErrProvider is a model provider failure the loop could not absorb.
	ErrProvider Kind = "provider"
	// ErrConfig is a bad contract, spec or option; Error.Field names the
	// offending field.
	ErrConfig Kind = "config"
	// ErrSandbox is a failure of the execution sandbox itself.
	ErrSandbox Kind = "sandbox"
	// ErrRefused is an action the policy refused before the run could
	// start.
	ErrRefused Kind = "refused"
	// ErrMCP is a failure of an MCP server the caller said must exist.
	ErrMCP Kind = "mcp"
	// ErrResume is a run that cannot be resumed: unknown, corrupt, or
	// written by newer code.
	ErrResume Kind = "resume"
	// ErrConflict is a run another driver holds: a resume of a live run,
	// or a driver whose lease was taken over. Trying again does not help
	// while the other driver lives; see ResumeOptions.Force.
	ErrConflict Kind = "conflict"
	// ErrUnavailable is a store the environment keeps from being used: a
	// missing directory, a read-only or full filesystem. The message
	// names the path.
	ErrUnavailable Kind = "unavailable"
)

// Error implements error, so that a Kind can be a target of errors.Is.
func (k Kind) Error() string { return "harness: " + string(k) + " error" }

// Error is an error of the harness. Use errors.Is with a Kind to classify
// it and errors.As to read its fields.
type Error struct {
	// Kind classifies the error.
	Kind Kind
	// Field is the JSON path of the offending field of a configuration
	// error, such as "budgets.max_steps" or "verification[0].text".
	Field string
	// Message describes the error.
	Message string
	// Err is the underlying error, if any.
	Err error
}

// Error implements error.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("harness: ")
	b.WriteString(string(e.Kind))
	if e.Field != "" {
		b.WriteString(": ")
		b.WriteString(e.Field)
	}
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is e's Kind.
func (e *Error) Is(target error) bool {
	k, ok := target.(Kind)
	return ok && k == e.Kind
}

func configError(field, format string, args ...any) *Error {
	return &Error{Kind: ErrConfig, Field: field, Message: fmt.Sprintf(format, args...)}
}

func wrap(kind Kind, msg string, err error) *Error {
	return &Error{Kind: kind, Message: msg, Err: err}
}

// storeError classifies a store failure: another driver (ErrConflict), an
// environment that keeps the store from being used (ErrUnavailable), or
// else ErrState.
func storeError(msg string, err error) *Error {
	switch {
	case errors.Is(err, store.ErrConflict):
		return wrap(ErrConflict, msg, err)
	case errors.Is(err, store.ErrUnavailable):
		return wrap(ErrUnavailable, msg, err)
	}
	return wrap(ErrState, msg, err)
}
