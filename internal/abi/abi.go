// Package abi is the JSON method table behind the C ABI (capi) and the
// command-line tool (cmd/io-harness): one place that turns a JSON request
// into a harness operation and its answer into a JSON envelope.
//
// A request is {"method": "...", "params": {...}, "id": ...}; the answer is
// {"ok": true, "result": ...} or {"ok": false, "error": {"code", "message",
// "retryable", "details"}}, with the id echoed. Harnesses and runs are
// named by integer handles that are never reused. Events of every run of a
// harness go to one bounded queue that the host drains with [ABI.Poll], or
// that a dispatcher goroutine pushes to a callback ([ABI.SetCallback]).
// docs/abi.md specifies the protocol for non-Go implementers.
//
// The package is pure Go: the C ABI is a thin cgo layer over it, so all of
// its behaviour is tested here without a host.
//
//	a := abi.New(&abi.Options{LookupEnv: os.LookupEnv})
//	out := a.Call(ctx, []byte(`{"method":"harness.open","params":{"store":":memory:"}}`))
package abi

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// The ABI version: the major changes only when a C symbol's signature
// changes or a symbol goes away; the minor when symbols are added. JSON
// methods evolve additively without touching either.
const (
	ABIMajor = 1
	ABIMinor = 1
	// Version is the library's version.
	Version = "0.1.0"
)

// ABIVersion is (ABIMajor << 16) | ABIMinor, the value of
// io_harness_abi_version.
const ABIVersion uint32 = ABIMajor<<16 | ABIMinor

// Status codes of the integer-returning entry points (poll, cancel,
// close, set_event_callback).
const (
	StatusOK             int32 = 0
	StatusUnknownHandle  int32 = -1
	StatusClosed         int32 = -2
	StatusTimeout        int32 = -3
	StatusIllegalContext int32 = -4
	// StatusForked is returned by the C ABI in a process forked after
	// the library was loaded (the check is in capi's C wrappers).
	StatusForked int32 = -5
)

// Options configures [New].
type Options struct {
	// LookupEnv reads the process environment for provider keys, models
	// and base URLs, for harnesses opened with "use_environment": true.
	// Nil means the environment is never read.
	LookupEnv func(string) (string, bool)
	// ThreadID returns an identifier of the calling OS thread. With it,
	// closing a harness (or changing its callback) from inside that
	// harness's event callback is detected and refused instead of
	// deadlocking. Nil disables the check.
	ThreadID func() uint64
}

// ABI is the method table and the handle table of every harness and run
// it opened. It is safe for concurrent use from any number of goroutines
// (or C threads).
type ABI struct {
	opts Options

	next atomic.Uint64 // the last handle given out; handles start at 1

	mu        sync.RWMutex // guards harnesses, runs and closed
	harnesses map[uint64]*harnessEntry
	runs      map[uint64]*runEntry
	// closed remembers the last keepClosed harnesses that were closed and
	// removed from harnesses, so that their handles still answer "closed"
	// rather than "unknown" for a while, at a few bytes each.
	closed      map[uint64]*closedEntry
	closedOrder []uint64

	stringsOut   atomic.Int64 // strings handed to the host
	stringsFreed atomic.Int64 // strings the host freed
	cbStrings    atomic.Int64 // strings lent to callbacks (freed by the library)
	owned        atomic.Int64 // goroutines the table started and that are still running
}

// New returns an empty table. It does no work that can fail, so it is
// safe to call while a shared library is being loaded.
func New(opts *Options) *ABI {
	a := &ABI{harnesses: map[uint64]*harnessEntry{}, runs: map[uint64]*runEntry{}, closed: map[uint64]*closedEntry{}}
	if opts != nil {
		a.opts = *opts
	}
	return a
}

// handle returns a fresh handle. Handles stay below 2^53 in any
// realistic process, so JavaScript hosts see them as plain numbers.
func (a *ABI) handle() uint64 { return a.next.Add(1) }

// Call runs one JSON request and returns its envelope. It never panics and
// never returns nil: a panic inside a method becomes an internal error.
// Methods are non-blocking or bounded (run.start returns once the run has
// its id; sandbox.exec is bounded by its wall-clock limit).
func (a *ABI) Call(ctx context.Context, data []byte) (out []byte) {
	var id json.RawMessage
	defer func() {
		if r := recover(); r != nil {
			out = encode(&response{Error: panicError(r), ID: id})
		}
	}()
	if len(data) > MaxRequestBytes {
		return TooLargeEnvelope(len(data))
	}
	req, derr := decodeRequest(data)
	if req != nil {
		id = req.ID
	}
	if derr != nil {
		return encode(&response{Error: derr, ID: id})
	}
	if req.ABI != nil && *req.ABI != ABIMajor {
		return encode(&response{Error: &Error{Code: CodeABIMismatch,
			Message: fmt.Sprintf("the request speaks ABI major %d; this library speaks %d.%d", *req.ABI, ABIMajor, ABIMinor),
			Details: map[string]any{"major": ABIMajor, "minor": ABIMinor}}, ID: id})
	}
	m, ok := methods[req.Method]
	if !ok {
		return encode(&response{Error: &Error{Code: CodeUnknownMethod, Message: fmt.Sprintf("no method %q", req.Method),
			Details: map[string]any{"method": req.Method}}, ID: id})
	}
	result, err := m(a, ctx, req.Params)
	if err != nil {
		e := ErrorOf(err)
		return encode(&response{Error: e, ID: id})
	}
	return encode(&response{OK: true, Result: result, ID: id})
}

// TooLargeEnvelope is the envelope of a request of n bytes, past
// MaxRequestBytes. The capi export answers with it before it copies the
// request; n < 0 means more than MaxRequestBytes, uncounted.
func TooLargeEnvelope(n int) []byte {
	msg := fmt.Sprintf("the request is larger than the %d-byte limit", MaxRequestBytes)
	if n >= 0 {
		msg = fmt.Sprintf("the request is %d bytes, past the %d-byte limit", n, MaxRequestBytes)
	}
	return encode(&response{Error: &Error{Code: CodeInvalidArgument, Message: msg,
		Details: map[string]any{"field": "request", "max_bytes": MaxRequestBytes}}})
}

// PanicEnvelope is the envelope of a call that panicked: the capi exports
// use it for a panic outside [ABI.Call].
func PanicEnvelope(r any) []byte { return encode(&response{Error: panicError(r)}) }

func panicError(r any) *Error {
	buf := make([]byte, 4096)
	buf = buf[:runtime.Stack(buf, false)]
	return &Error{Code: CodeInternal, Message: fmt.Sprintf("panic: %v", r), Details: map[string]any{"stack": string(buf)}}
}

// Poll waits up to timeout for the first event of any run of harness h
// and returns it with up to max-1 more that are already queued, as a JSON
// array. It returns nil when the wait times out, when h is unknown, and
// after the harness was closed — except once: the first poll after close
// (or a poll that close woke) returns [{"kind":"closed"}]. A negative
// timeout waits without limit; max <= 0 means 256.
//
// While an event callback is registered, events go to the callback and
// Poll returns nil after its timeout.
func (a *ABI) Poll(h uint64, timeout time.Duration, max int) []byte {
	out, _ := a.PollStatus(h, timeout, max)
	return out
}

// PollStatus is [ABI.Poll] that also says why it returned nil: StatusOK
// with events; StatusTimeout when none came in time (or a callback takes
// them); StatusClosed once the closed event was handed out (and for a
// harness closed not long ago); StatusUnknownHandle for a handle that is
// not a harness. It is io_harness_poll2.
func (a *ABI) PollStatus(h uint64, timeout time.Duration, max int) ([]byte, int32) {
	he := a.harness(h)
	if he == nil {
		a.mu.RLock()
		ce := a.closed[h]
		a.mu.RUnlock()
		switch {
		case ce == nil:
			return nil, StatusUnknownHandle
		case ce.marker.CompareAndSwap(false, true):
			return closedEvent, StatusOK
		}
		return nil, StatusClosed
	}
	if max <= 0 {
		max = 256
	}
	return he.poll(timeout, max)
}

// Cancel cancels a run, or every live run of a harness. It never blocks
// and is idempotent; a run's terminal event reports when it stopped.
func (a *ABI) Cancel(handle uint64) int32 {
	if r := a.run(handle); r != nil {
		r.cancel()
		return StatusOK
	}
	he := a.harness(handle)
	if he == nil {
		if a.wasClosed(handle) {
			return StatusClosed
		}
		return StatusUnknownHandle
	}
	if he.closing.Load() {
		return StatusClosed
	}
	he.cancelRuns()
	return StatusOK
}

// Close cancels every run of harness h, wakes its poller, stops its event
// callback and waits up to timeout (negative: without limit) for its runs
// to end; then it closes the store. After Close returns, the callback is
// never called again, even when Close timed out (StatusTimeout): the runs
// then finish in the background and a later Close waits for them again.
// Close is idempotent. Called from inside h's event callback it returns
// StatusIllegalContext and does nothing.
func (a *ABI) Close(h uint64, timeout time.Duration) int32 {
	he := a.harness(h)
	if he == nil {
		if a.wasClosed(h) {
			return StatusOK // closed, and its runs ended
		}
		return StatusUnknownHandle
	}
	if he.inCallback() {
		return StatusIllegalContext
	}
	return he.close(timeout)
}

// SetCallback registers fn to receive every event of harness h, one event
// per call, in order, from one dispatcher goroutine locked to one OS
// thread. A nil fn unregisters; when SetCallback returns, the previous fn
// is not running and will not be called again. fn may call any method,
// but not Close or SetCallback on h (StatusIllegalContext).
func (a *ABI) SetCallback(h uint64, fn func(event []byte)) int32 {
	he := a.harness(h)
	if he == nil {
		if a.wasClosed(h) {
			return StatusClosed
		}
		return StatusUnknownHandle
	}
	if he.inCallback() {
		return StatusIllegalContext
	}
	return he.setCallback(fn)
}

// NoteStringOut counts a string handed to the host (debug.stats reports
// the counts, so that bindings can prove they free what they receive).
func (a *ABI) NoteStringOut() { a.stringsOut.Add(1) }

// NoteStringFreed counts a string the host gave back to io_harness_free.
func (a *ABI) NoteStringFreed() { a.stringsFreed.Add(1) }

// NoteCallbackString counts a string lent to an event callback and freed
// by the library.
func (a *ABI) NoteCallbackString() { a.cbStrings.Add(1) }

// Stats is the answer of debug.stats.
type Stats struct {
	// StringsOut, StringsFreed and StringsLive count the strings handed
	// to the host through the C ABI; StringsLive is out minus freed, and
	// does not count the string that carries this answer.
	StringsOut   int64 `json:"strings_out"`
	StringsFreed int64 `json:"strings_freed"`
	StringsLive  int64 `json:"strings_live"`
	// CallbackStrings counts the event strings lent to callbacks.
	CallbackStrings int64 `json:"callback_strings"`
	// Harnesses is the number of open harnesses; Runs the number of runs
	// still going.
	Harnesses int `json:"harnesses"`
	Runs      int `json:"runs"`
	// HarnessEntries and RunEntries are the sizes of the handle table:
	// harnesses open or still closing, and runs going or remembered
	// (finished runs of open harnesses, up to 4096 each). A closed
	// harness leaves the table once its runs have ended, with its runs;
	// ClosedRemembered counts the closed handles still answered as
	// closed rather than unknown (at most 4096).
	HarnessEntries   int `json:"harness_entries"`
	RunEntries       int `json:"run_entries"`
	ClosedRemembered int `json:"closed_remembered"`
	// Goroutines is the number of goroutines the table started and that
	// are still running (runs, dispatchers, closers); AllGoroutines is
	// the process's total.
	Goroutines    int64 `json:"goroutines"`
	AllGoroutines int   `json:"all_goroutines"`
}

// Stats returns the counters of debug.stats.
func (a *ABI) Stats() Stats {
	s := Stats{StringsOut: a.stringsOut.Load(), StringsFreed: a.stringsFreed.Load(), CallbackStrings: a.cbStrings.Load(),
		Goroutines: a.owned.Load(), AllGoroutines: runtime.NumGoroutine()}
	s.StringsLive = s.StringsOut - s.StringsFreed
	a.mu.RLock()
	defer a.mu.RUnlock()
	s.HarnessEntries, s.RunEntries, s.ClosedRemembered = len(a.harnesses), len(a.runs), len(a.closed)
	for _, h := range a.harnesses {
		if !h.closing.Load() {
			s.Harnesses++
		}
	}
	for _, r := range a.runs {
		if !r.isFinished() {
			s.Runs++
		}
	}
	return s
}

func (a *ABI) harness(h uint64) *harnessEntry {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.harnesses[h]
}

// closedEntry is what the table keeps of a closed harness.
type closedEntry struct {
	marker *atomic.Bool // the harness's: the closed event was handed to a poller
}

// keepClosed is how many closed harness handles the table remembers.
const keepClosed = 4096

// forget removes a closed harness, whose runs have all ended, from the
// table, and remembers its handle as closed.
func (a *ABI) forget(h *harnessEntry) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for id, r := range a.runs {
		if r.h == h {
			delete(a.runs, id)
		}
	}
	delete(a.harnesses, h.id)
	a.closed[h.id] = &closedEntry{marker: h.marker}
	a.closedOrder = append(a.closedOrder, h.id)
	if n := len(a.closedOrder) - keepClosed; n > 0 {
		for _, id := range a.closedOrder[:n] {
			delete(a.closed, id)
		}
		a.closedOrder = append(a.closedOrder[:0:0], a.closedOrder[n:]...)
	}
}

// wasClosed reports whether h is a harness closed not long ago.
func (a *ABI) wasClosed(h uint64) bool {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.closed[h] != nil
}

func (a *ABI) run(h uint64) *runEntry {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.runs[h]
}

// goStart runs fn in a goroutine counted in Stats.Goroutines.
func (a *ABI) goStart(fn func()) {
	a.owned.Add(1)
	go func() {
		defer a.owned.Add(-1)
		fn()
	}()
}
