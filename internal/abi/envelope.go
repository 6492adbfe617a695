package abi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/initorigin/io-harness-go/pkg/harness"
	"github.com/initorigin/io-harness-go/pkg/harness/approve"
	"github.com/initorigin/io-harness-go/pkg/harness/fleet"
	"github.com/initorigin/io-harness-go/pkg/harness/policy"
	"github.com/initorigin/io-harness-go/pkg/harness/store"
	"github.com/initorigin/io-harness-go/pkg/sandbox"
)

// Code is an error code of the envelope: a stable snake_case name that a
// host branches on. The set is closed; see [Codes].
type Code string

// The error codes. Their meaning is specified in docs/abi.md.
const (
	// CodeInvalidJSON: the request is not a JSON object.
	CodeInvalidJSON Code = "invalid_json"
	// CodeInvalidArgument: a parameter is missing, mistyped or invalid,
	// including a run spec the harness refuses.
	CodeInvalidArgument Code = "invalid_argument"
	// CodeUnknownMethod: no method has that name.
	CodeUnknownMethod Code = "unknown_method"
	// CodeNotFound: a handle, run or approval request that does not exist
	// (or no longer does).
	CodeNotFound Code = "not_found"
	// CodeConflict: the request contradicts the current state: a second,
	// different answer to one approval, a run that is already live, an
	// approval already decided.
	CodeConflict Code = "conflict"
	// CodeCancelled: the operation was cancelled.
	CodeCancelled Code = "cancelled"
	// CodeDeadlineExceeded: the operation ran out of time.
	CodeDeadlineExceeded Code = "deadline_exceeded"
	// CodePermissionDenied: the policy refused what was asked.
	CodePermissionDenied Code = "permission_denied"
	// CodeUnavailable: a resource failed: the store, the workspace, a
	// provider, a sandbox backend, a closed harness.
	CodeUnavailable Code = "unavailable"
	// CodeABIMismatch: the request names an ABI major version this
	// library does not speak.
	CodeABIMismatch Code = "abi_mismatch"
	// CodeInternal: a bug: a recovered panic or an impossible state.
	CodeInternal Code = "internal"
)

// Codes returns every error code, in the order docs/abi.md lists them.
func Codes() []Code {
	return []Code{CodeInvalidJSON, CodeInvalidArgument, CodeUnknownMethod, CodeNotFound, CodeConflict,
		CodeCancelled, CodeDeadlineExceeded, CodePermissionDenied, CodeUnavailable, CodeABIMismatch, CodeInternal}
}

// Error is the error object of a failed call's envelope. It is also a Go
// error, so that method handlers can return it directly.
type Error struct {
	Code      Code   `json:"code"`
	Message   string `json:"message"`
	Retryable bool   `json:"retryable"`
	// Details carries structured context: the harness error kind and
	// field, the sandbox step, the method name.
	Details map[string]any `json:"details,omitempty"`
}

// Error implements error.
func (e *Error) Error() string { return string(e.Code) + ": " + e.Message }

func errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Sentinels for conditions of the ABI itself; [ErrorOf] maps them.
var (
	// errNotFound is an unknown or stale handle.
	errNotFound = errors.New("abi: not found")
	// errClosed is a harness that was closed.
	errClosed = errors.New("abi: harness closed")
	// errConflict is a request that contradicts the current state.
	errConflict = errors.New("abi: conflict")
	// errInvalid is a bad parameter.
	errInvalid = errors.New("abi: invalid argument")
)

// mapping is one row of the error table: an error errors.Is (or As)
// recognises, the code it becomes, and whether retrying can help.
type mapping struct {
	match     func(error) bool
	code      Code
	retryable bool
}

func is(target error) func(error) bool { return func(err error) bool { return errors.Is(err, target) } }

// table maps Go errors to codes. The first matching row wins, so the
// specific conditions come before the broad harness kinds.
var table = []mapping{
	{is(context.Canceled), CodeCancelled, false},
	{is(context.DeadlineExceeded), CodeDeadlineExceeded, true},
	{is(errNotFound), CodeNotFound, false},
	{is(store.ErrNotFound), CodeNotFound, false},
	{is(approve.ErrUnknownRequest), CodeNotFound, false},
	{is(errConflict), CodeConflict, false},
	{is(approve.ErrAlreadyDecided), CodeConflict, false},
	{is(approve.ErrMismatch), CodeConflict, false},
	{is(harness.ErrConflict), CodeConflict, false},
	{is(store.ErrConflict), CodeConflict, false},
	{is(store.ErrNotPending), CodeConflict, false},
	{is(errClosed), CodeUnavailable, false},
	{is(harness.ErrUnavailable), CodeUnavailable, false},
	{is(store.ErrUnavailable), CodeUnavailable, false},
	{is(store.ErrReadOnly), CodeUnavailable, false},
	{is(harness.ErrRefused), CodePermissionDenied, false},
	{is(errInvalid), CodeInvalidArgument, false},
	{is(fleet.ErrNotFleet), CodeInvalidArgument, false},
	{is(fleet.ErrSnapshot), CodeInvalidArgument, false},
	{is(harness.ErrConfig), CodeInvalidArgument, false},
	{is(sandbox.ErrInvalid), CodeInvalidArgument, false},
	{func(err error) bool { var pe *policy.Error; return errors.As(err, &pe) }, CodeInvalidArgument, false},
	{is(store.ErrTooNew), CodeUnavailable, false},
	{is(store.ErrTooOld), CodeUnavailable, false},
	{is(store.ErrCorrupt), CodeUnavailable, false},
	{is(harness.ErrResume), CodeInvalidArgument, false},
	{is(harness.ErrProvider), CodeUnavailable, true},
	{is(harness.ErrState), CodeUnavailable, true},
	{is(harness.ErrIO), CodeUnavailable, false},
	{is(harness.ErrSandbox), CodeUnavailable, false},
	{is(harness.ErrMCP), CodeUnavailable, true},
	{is(sandbox.ErrUnavailable), CodeUnavailable, false},
	{is(sandbox.ErrSetup), CodeUnavailable, true},
	{is(sandbox.ErrApply), CodeUnavailable, false},
	{is(store.ErrClosed), CodeUnavailable, false},
}

// ErrorOf maps any error to the envelope's error object: an *Error is
// returned as is, anything else goes through the error table, and what no
// row matches is internal. Harness and sandbox errors keep their kind,
// field and step in Details.
func ErrorOf(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	out := &Error{Code: CodeInternal, Message: err.Error()}
	for _, m := range table {
		if m.match(err) {
			out.Code, out.Retryable = m.code, m.retryable
			break
		}
	}
	var he *harness.Error
	if errors.As(err, &he) {
		out.detail("kind", string(he.Kind))
		if he.Field != "" {
			out.detail("field", he.Field)
		}
	}
	var se *sandbox.Error
	if errors.As(err, &se) {
		if se.Backend != "" {
			out.detail("backend", se.Backend)
		}
		if se.Step != "" {
			out.detail("step", se.Step)
		}
	}
	var pe *policy.Error
	if errors.As(err, &pe) {
		out.detail("field", "policy."+pe.Field)
	}
	return out
}

func (e *Error) detail(k string, v any) {
	if e.Details == nil {
		e.Details = map[string]any{}
	}
	e.Details[k] = v
}

// request is a decoded call.
type request struct {
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	ID     json.RawMessage `json:"id"`
	// ABI, when set, is the ABI major version the caller speaks.
	ABI *uint32 `json:"abi"`
}

// response is the envelope of every answer.
type response struct {
	OK     bool            `json:"ok"`
	Result any             `json:"result,omitempty"`
	Error  *Error          `json:"error,omitempty"`
	ID     json.RawMessage `json:"id,omitempty"`
}

// Bounds of a request, documented in docs/abi.md.
const (
	// MaxRequestBytes is the largest request io_harness_call accepts;
	// a larger one is refused as invalid_argument before it is read.
	MaxRequestBytes = 16 << 20
	// MaxDepth is how deeply a request may nest objects and arrays.
	MaxDepth = 1000
)

// decodeRequest parses a call. Anything that is not one JSON object of
// valid UTF-8, nested at most MaxDepth deep, is invalid_json; an object
// without a string method is invalid_argument. Unknown top-level fields
// are ignored.
func decodeRequest(data []byte) (*request, *Error) {
	data = bytes.TrimSpace(data)
	if !utf8.Valid(data) {
		// Go's decoder would replace the bad bytes silently, and an id
		// holding them would be echoed as they came.
		return nil, errorf(CodeInvalidJSON, "the request is not valid UTF-8 (the first bad byte is at offset %d)", badUTF8(data))
	}
	if d := depth(data); d > MaxDepth {
		return nil, &Error{Code: CodeInvalidJSON, Message: fmt.Sprintf("the request nests objects and arrays %d deep; at most %d are allowed", d, MaxDepth),
			Details: map[string]any{"max_depth": MaxDepth}}
	}
	if len(data) == 0 || data[0] != '{' || !json.Valid(data) {
		return nil, errorf(CodeInvalidJSON, "the request is not a JSON object")
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, errorf(CodeInvalidJSON, "the request is not a JSON object: %v", err)
	}
	req := &request{ID: raw["id"]}
	if len(req.ID) > 0 && (req.ID[0] == '{' || req.ID[0] == '[') {
		req.ID = nil
		return req, errorf(CodeInvalidArgument, "id must be a string, a number or null")
	}
	m, ok := raw["method"]
	if !ok {
		return req, errorf(CodeInvalidArgument, "method is required")
	}
	if err := json.Unmarshal(m, &req.Method); err != nil {
		return req, errorf(CodeInvalidArgument, "method must be a string")
	}
	if v, ok := raw["abi"]; ok && string(v) != "null" {
		var major uint32
		if err := json.Unmarshal(v, &major); err != nil {
			return req, errorf(CodeInvalidArgument, "abi must be a non-negative integer (the ABI major version)")
		}
		req.ABI = &major
	}
	req.Params = raw["params"]
	return req, nil
}

// badUTF8 returns the offset of the first byte of data that is not part
// of a valid UTF-8 sequence.
func badUTF8(data []byte) int {
	for i := 0; i < len(data); {
		r, n := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return len(data)
}

// Depth returns how deeply data nests JSON objects and arrays, counting
// outside strings only; it stops counting once past MaxDepth. The CLI
// uses it to name the problem of a spec before it sends it.
func Depth(data []byte) int { return depth(data) }

// depth returns how deeply data nests objects and arrays, counting
// outside strings only. It stops counting once past MaxDepth.
func depth(data []byte) int {
	d, most := 0, 0
	inString, escaped := false, false
	for _, c := range data {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			d++
			if d > most {
				most = d
				if most > MaxDepth {
					return most
				}
			}
		case c == '}' || c == ']':
			d--
		}
	}
	return most
}

// encode marshals an envelope. A result that does not marshal becomes an
// internal error, so that encode always returns a well-formed envelope.
func encode(resp *response) []byte {
	out, err := json.Marshal(resp)
	if err != nil {
		out, _ = json.Marshal(&response{Error: &Error{Code: CodeInternal, Message: "encode the result: " + err.Error()}, ID: resp.ID})
	}
	return out
}

// Envelope returns the JSON envelope of a failed call with err's code.
func Envelope(err error) []byte {
	return encode(&response{Error: ErrorOf(err)})
}

// decodeParams decodes a method's params into v. Absent params decode as
// {}; unknown fields are ignored, for forward compatibility.
func decodeParams(raw json.RawMessage, v any) error {
	if len(raw) == 0 || string(raw) == "null" {
		raw = json.RawMessage(`{}`)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return &Error{Code: CodeInvalidArgument, Message: fmt.Sprintf("params.%s: want %s, got JSON %s", te.Field, te.Type, te.Value),
				Details: map[string]any{"field": "params." + te.Field}}
		}
		return errorf(CodeInvalidArgument, "params: %v", err)
	}
	return nil
}
