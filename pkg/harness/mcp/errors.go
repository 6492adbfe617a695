package mcp

import (
	"errors"
	"fmt"
	"strings"
)

// The kinds of an *Error, for errors.Is.
var (
	// ErrRefused: the policy (or a person asked) refused to start or reach
	// the server. Nothing was started or dialled.
	ErrRefused = errors.New("mcp: refused")
	// ErrStart: the server could not be started or did not complete the
	// handshake within its start timeout.
	ErrStart = errors.New("mcp: server did not start")
	// ErrClosed: the client was closed.
	ErrClosed = errors.New("mcp: client closed")
	// ErrUncontained: a stdio server that does not say host: true, with no
	// contained launcher to run it in.
	ErrUncontained = errors.New("mcp: no sandbox to run the server in")
)

// Error is a failure of one server. Use errors.Is with ErrRefused,
// ErrStart, ErrClosed or ErrUncontained to classify it.
type Error struct {
	// Server is the server's configured name.
	Server string
	// Kind is ErrRefused, ErrStart, ErrClosed or ErrUncontained.
	Kind error
	// Message says what happened.
	Message string
	// Stderr is the tail of what the server wrote on its standard error,
	// at most 2 KiB, for a stdio server.
	Stderr string
	// Err is the underlying error, if any.
	Err error
}

// Error implements error.
func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "mcp: server %s: %s", e.Server, e.Message)
	if e.Err != nil {
		fmt.Fprintf(&b, ": %v", e.Err)
	}
	if s := strings.TrimSpace(e.Stderr); s != "" {
		fmt.Fprintf(&b, "; its stderr ends: %s", s)
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
