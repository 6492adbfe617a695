package provider

import (
	"errors"
	"fmt"
	"time"
)

// Kind classifies a provider failure. Every kind is either transient (a
// retry of the same request may succeed) or terminal; [Kind.Transient] is
// the one table that says which.
type Kind string

const (
	// KindTransport is a connection, DNS, TLS or mid-stream read failure.
	KindTransport Kind = "transport"
	// KindTimeout is a request that ran past its deadline (HTTP 408 too).
	KindTimeout Kind = "timeout"
	// KindStall is a stream that sent no bytes for longer than allowed.
	KindStall Kind = "stall"
	// KindTruncated is a stream that ended before its terminator.
	KindTruncated Kind = "truncated"
	// KindRateLimited is HTTP 429 or an in-stream rate-limit error.
	KindRateLimited Kind = "rate_limited"
	// KindConflict is HTTP 409.
	KindConflict Kind = "conflict"
	// KindServer is a 5xx, an overloaded error or an in-stream server error.
	KindServer Kind = "server"
	// KindMalformed is a response that could not be understood.
	KindMalformed Kind = "malformed"

	// KindAuth is a missing, wrong or unauthorised key (401, 403).
	KindAuth Kind = "auth"
	// KindQuota is a billing or quota refusal that waiting will not fix.
	KindQuota Kind = "quota"
	// KindBadRequest is any other 4xx (and a 3xx: redirects are not
	// followed, because a new host was never authorised).
	KindBadRequest Kind = "bad_request"
	// KindContextOverflow is a request longer than the model's context.
	KindContextOverflow Kind = "context_overflow"
	// KindNotRecorded is a replay cassette that has no answer for the
	// request.
	KindNotRecorded Kind = "not_recorded"
	// KindResponseTooLarge is a response that crossed one of the bounds
	// on a response (see [MaxResponseBytes]): the provider stopped
	// reading it. It is terminal: the same request would most likely
	// bring the same flood again, and pay for it.
	KindResponseTooLarge Kind = "response_too_large"
)

// Transient reports whether a retry of the same request may succeed.
// Unknown kinds are terminal.
func (k Kind) Transient() bool {
	switch k {
	case KindTransport, KindTimeout, KindStall, KindTruncated,
		KindRateLimited, KindConflict, KindServer, KindMalformed:
		return true
	}
	return false
}

// Error is a provider failure.
//
// Message never contains a key or an auth header: the vendor packages
// build it from the vendor's error text only, and remove from that text,
// and from Err's, every run of 8 or more characters of the key before
// they cut it to 1 KiB.
type Error struct {
	// Provider is the failing provider's Name.
	Provider string
	// Kind classifies the failure.
	Kind Kind
	// Status is the HTTP status, or 0 when there was none.
	Status int
	// Message is the vendor's or the client's description.
	Message string
	// RetryAfter is the wait the provider asked for, or 0.
	RetryAfter time.Duration
	// Err is the underlying error, if any.
	Err error
}

// Error implements error.
func (e *Error) Error() string {
	s := "provider"
	if e.Provider != "" {
		s += " " + e.Provider
	}
	s += ": " + string(e.Kind)
	if e.Status != 0 {
		s += fmt.Sprintf(" (HTTP %d)", e.Status)
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.Err != nil && (e.Message == "" || e.Message != e.Err.Error()) {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// Transient reports whether a retry of the same request may succeed.
func (e *Error) Transient() bool { return e.Kind.Transient() }

// AsError returns err's *Error, or nil when err does not wrap one.
func AsError(err error) *Error {
	var pe *Error
	if errors.As(err, &pe) {
		return pe
	}
	return nil
}
