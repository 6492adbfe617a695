package abi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/initorigin/io-harness-go/pkg/harness"
	"github.com/initorigin/io-harness-go/pkg/harness/approve"
	"github.com/initorigin/io-harness-go/pkg/harness/policy"
	"github.com/initorigin/io-harness-go/pkg/harness/tool"
)

// maxEarly bounds the answers a run keeps for approval requests it has
// not made yet.
const maxEarly = 64

// Event kinds the ABI adds to the harness's own (see harness.EventKind).
const (
	// KindApprovalPending: the run waits for approval.resolve on
	// request_id; "request" is the whole approve.Request.
	KindApprovalPending = "approval_pending"
	// KindDone: the run's terminal event; nothing of the run follows it.
	KindDone = "done"
	// KindClosed: the harness was closed; the poller's last event.
	KindClosed = "closed"
	// KindDebug and KindDebugDone are the events of debug.emit.
	KindDebug     = "debug"
	KindDebugDone = "debug_done"
)

// The statuses of a done event.
const (
	// StatusDone: the run reached an outcome other than cancelled (which
	// may still be a budget or an awaiting_approval outcome).
	StatusDone = "ok"
	// StatusCancelled: the run was cancelled: its outcome is cancelled,
	// or, when it was cancelled before it could record one, error says
	// so with code cancelled.
	StatusCancelled = "cancelled"
	// StatusError: the run could not be driven; error says why.
	StatusError = "error"
)

// DoneEvent is the terminal event of a run.
type DoneEvent struct {
	Kind   string `json:"kind"`
	Run    uint64 `json:"run"`
	RunID  string `json:"run_id"`
	Status string `json:"status"`
	// Outcome is how the run ended (status ok or cancelled).
	Outcome *harness.Outcome `json:"outcome,omitempty"`
	// Remembered are the rules approvers asked the run to remember.
	Remembered []policy.Rule `json:"remembered,omitempty"`
	// Error says why the run could not be driven (status error).
	Error *Error `json:"error,omitempty"`
}

// pendingEvent is the event of an approval the run waits on.
type pendingEvent struct {
	Kind      string           `json:"kind"`
	Run       uint64           `json:"run"`
	RunID     string           `json:"run_id"`
	Step      int              `json:"step"`
	RequestID string           `json:"request_id"`
	Request   *approve.Request `json:"request"`
}

// runEntry is one run driven by the table: started, resumed, or resumed
// with a decision. Its goroutine is the only producer of its events.
type runEntry struct {
	id     uint64
	h      *harnessEntry
	ctx    context.Context // the run's context
	cancel context.CancelFunc

	// first is closed by the run's first event or, if none came, by the
	// run's end; sawEvent says which.
	first     chan struct{}
	firstOnce sync.Once
	sawEvent  bool
	earlyErr  error

	mu       sync.Mutex // guards the fields below
	runID    string
	finished bool
	done     *DoneEvent
	pending  map[string]chan approve.Decision // requests the run waits on
	early    map[string]approve.Decision      // answers that came before their request
	answered map[string]string                // request id → the decision's JSON
	// announced are the approval requests the run has made known (its
	// approval_requested events): the only ids a host can have learnt,
	// so the only ones an early answer may name.
	announced map[string]bool

	// step and callID are the step and the model's call id of the tool
	// call under way, from the run's events.
	step   int
	callID string
	// toolPending are the host tool calls the run waits on;
	// toolAnswered the answered ones (request id → a hash of the
	// answer); toolExpired those it gave up on, with why (the last
	// keepExpired, oldest first in expiredOrder).
	toolPending  map[string]chan toolAnswer
	toolAnswered map[string]string
	toolExpired  map[string]string
	expiredOrder []string
}

// RunID returns the run's id, empty until the run has one.
func (r *runEntry) RunID() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.runID
}

func (r *runEntry) isFinished() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.finished
}

// driver runs the harness call of a run: Run, Resume or
// ResumeWithDecision with the options the table built.
type driver func(ctx context.Context, opts harness.Options) (*harness.Result, error)

// startRun registers a run, starts its goroutine and waits until it has an
// id (its first event) or has ended without one. A run that failed before
// its first event is an error and leaves nothing behind.
func (h *harnessEntry) startRun(ctx context.Context, runID string, opts harness.Options, approvals string, tools *hostTools, drive driver) (*runEntry, error) {
	if h.closing.Load() {
		return nil, errClosed
	}
	rctx, cancel := context.WithCancel(h.ctx)
	r := &runEntry{id: h.a.handle(), h: h, ctx: rctx, cancel: cancel, first: make(chan struct{}), runID: runID,
		pending: map[string]chan approve.Decision{}, early: map[string]approve.Decision{}, answered: map[string]string{},
		announced: map[string]bool{}, toolPending: map[string]chan toolAnswer{}}
	if tools != nil {
		opts.Tools = append(append([]tool.Tool(nil), opts.Tools...), tools.bind(r)...)
	}
	switch approvals {
	case "", "host":
		opts.Approver = approve.Func(r.decide)
	case "approve":
		opts.Approver = approve.ApproveAll()
	case "deny":
		opts.Approver = approve.DenyAll("denied by the host's approvals setting")
	case "defer":
		opts.Approver = approve.DeferAll()
	case "wait":
		opts.Approver = approve.DeferAll()
		drive = h.untilDecided(drive)
	default:
		cancel()
		return nil, fmt.Errorf("%w: approvals: want host, approve, deny, defer or wait, got %q", errInvalid, approvals)
	}
	opts.Observer = r.observe
	opts.Store = h.st
	opts.Live = h.hub

	h.mu.Lock()
	if runID != "" {
		if _, live := h.byRunID[runID]; live {
			h.mu.Unlock()
			cancel()
			return nil, fmt.Errorf("%w: run %s is already being driven by this harness", errConflict, runID)
		}
		h.byRunID[runID] = r
	}
	h.wg.Add(1)
	h.mu.Unlock()
	h.a.mu.Lock()
	h.a.runs[r.id] = r
	h.a.mu.Unlock()

	h.a.goStart(func() {
		defer h.wg.Done()
		res, err := safeDrive(rctx, opts, drive)
		r.finish(res, err)
	})

	select {
	case <-r.first:
	case <-ctx.Done():
		cancel()
		<-r.first
		if !r.sawEvent {
			return nil, ctx.Err()
		}
	}
	if !r.sawEvent && r.earlyErr != nil {
		return nil, r.earlyErr
	}
	return r, nil
}

// rctxDone reports whether the run was cancelled (by run.cancel, a
// harness-wide cancel or close).
func rctxDone(r *runEntry) bool { return r.ctx.Err() != nil }

// safeDrive runs drive, turning a panic into an internal error so that a
// bug never takes the host process down.
func safeDrive(ctx context.Context, opts harness.Options, drive driver) (res *harness.Result, err error) {
	defer func() {
		if p := recover(); p != nil {
			res, err = nil, panicError(p)
		}
	}()
	return drive(ctx, opts)
}

// observe receives every harness event of the run, on its goroutine.
func (r *runEntry) observe(e harness.Event) {
	switch e.Kind {
	case harness.EventStepStarted, harness.EventToolCall, harness.EventApprovalRequested:
		r.mu.Lock()
		switch e.Kind {
		case harness.EventStepStarted:
			r.step, r.callID = e.Step, ""
		case harness.EventToolCall:
			r.step, r.callID = e.Step, e.CallID
		case harness.EventApprovalRequested:
			if r.announced != nil {
				r.announced[e.RequestID] = true
			}
		}
		r.mu.Unlock()
	}
	r.firstOnce.Do(func() {
		r.mu.Lock()
		fresh := r.runID == ""
		if fresh {
			r.runID = e.RunID
		}
		r.mu.Unlock()
		if fresh {
			r.h.mu.Lock()
			r.h.byRunID[e.RunID] = r
			r.h.mu.Unlock()
		}
		r.sawEvent = true
		close(r.first)
	})
	data, err := json.Marshal(&e)
	if err != nil {
		data = []byte(`{"kind":` + strconv.Quote(string(e.Kind)) + `}`)
	}
	r.emit(withRun(r.id, data))
}

// withRun puts "run": handle first in an event object.
func withRun(id uint64, obj []byte) []byte {
	out := make([]byte, 0, len(obj)+24)
	out = append(out, `{"run":`...)
	out = strconv.AppendUint(out, id, 10)
	if len(obj) > 2 {
		out = append(out, ',')
	}
	return append(out, obj[1:]...)
}

// emit queues one event of the run, unless the run already ended.
func (r *runEntry) emit(ev []byte) {
	r.mu.Lock()
	over := r.finished
	r.mu.Unlock()
	if !over {
		r.h.push(ev)
	}
}

// finish records the run's end and queues its done event, the last event
// of the run. A run that ended before its first event with an error is
// reported to run.start instead, and forgotten.
func (r *runEntry) finish(res *harness.Result, err error) {
	r.firstOnce.Do(func() {
		// No event came: the run never showed itself to the host. A
		// failure is reported to run.start, and the run is forgotten
		// before run.start returns, so that the host may retry at once.
		r.earlyErr = err
		if err != nil {
			r.forget()
		}
		close(r.first)
	})
	defer r.cancel()
	d := &DoneEvent{Kind: KindDone, Run: r.id, Status: StatusDone}
	switch {
	case err != nil && errors.Is(err, context.Canceled) && rctxDone(r):
		// Cancelled before the harness could record an outcome (for
		// instance before the run was stored): still a cancellation.
		d.Status, d.Error = StatusCancelled, ErrorOf(err)
	case err != nil:
		d.Status, d.Error = StatusError, ErrorOf(err)
	case res != nil:
		out := res.Outcome
		d.Outcome, d.Remembered = &out, res.Remembered
		if out.Kind == harness.Cancelled {
			d.Status = StatusCancelled
		}
	}
	r.mu.Lock()
	if res != nil && r.runID == "" {
		r.runID = res.RunID
	}
	d.RunID = r.runID
	r.pending, r.early, r.announced, r.toolPending = nil, nil, nil, nil
	r.finished, r.done = true, d
	r.mu.Unlock()

	if !r.sawEvent && err != nil {
		return // forgotten above
	}
	data, merr := json.Marshal(d)
	if merr != nil {
		data = []byte(`{"kind":"done","run":` + strconv.FormatUint(r.id, 10) + `,"status":"error"}`)
	}
	// Forget the run id before the host can see the done event, so that
	// a resume it answers with is not a conflict.
	r.h.rememberFinished(r)
	r.h.push(data)
}

// forget removes a run that failed before its first event from every
// table, marking it finished.
func (r *runEntry) forget() {
	r.mu.Lock()
	r.finished = true
	id := r.runID
	r.mu.Unlock()
	r.h.mu.Lock()
	if r.h.byRunID[id] == r {
		delete(r.h.byRunID, id)
	}
	r.h.mu.Unlock()
	r.h.a.mu.Lock()
	delete(r.h.a.runs, r.id)
	r.h.a.mu.Unlock()
}

// decide is the host approver: it registers the request, tells the host
// with an approval_pending event and waits for approval.resolve, or for
// the run's context to end. An answer that came before the request is
// used at once (the event is still sent, so that every host sees the same
// sequence).
func (r *runEntry) decide(ctx context.Context, req *approve.Request) (approve.Decision, error) {
	r.mu.Lock()
	d, early := r.early[req.ID]
	var ch chan approve.Decision
	if early {
		delete(r.early, req.ID)
	} else {
		ch = make(chan approve.Decision, 1)
		r.pending[req.ID] = ch
	}
	r.mu.Unlock()

	data, err := json.Marshal(&pendingEvent{Kind: KindApprovalPending, Run: r.id, RunID: req.RunID, Step: req.Step, RequestID: req.ID, Request: req})
	if err == nil {
		r.emit(data)
	}
	if early {
		return d, nil
	}
	select {
	case d := <-ch:
		return d, nil
	case <-ctx.Done():
		r.mu.Lock()
		delete(r.pending, req.ID)
		r.mu.Unlock()
		return approve.Decision{}, ctx.Err()
	}
}

// resolve answers an approval request of the run: it wakes the waiter,
// or keeps the answer for a request the run has not made yet. A repeated
// identical answer is accepted again; a different one is a conflict.
func (r *runEntry) resolve(requestID string, d approve.Decision) (string, error) {
	key, err := json.Marshal(d)
	if err != nil {
		return "", fmt.Errorf("%w: decision: %v", errInvalid, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if prev, ok := r.answered[requestID]; ok {
		if prev == string(key) {
			return "already_resolved", nil
		}
		return "", fmt.Errorf("%w: approval request %s was already answered with %s", errConflict, requestID, prev)
	}
	if r.finished {
		return "", fmt.Errorf("%w: run %s has ended; answer a deferred request with run.resume_with_decision", errNotFound, r.runID)
	}
	if ch, ok := r.pending[requestID]; ok {
		delete(r.pending, requestID)
		r.answered[requestID] = string(key)
		ch <- d
		return "delivered", nil
	}
	if !r.announced[requestID] {
		// Every id a host can know came in an approval_requested event
		// of this run, recorded before the event was queued: any other
		// is a mistake, and is told at once rather than kept.
		return "", fmt.Errorf("%w: run %s has made no approval request %s", errNotFound, r.runID, requestID)
	}
	if len(r.early) >= maxEarly {
		return "", fmt.Errorf("%w: run %s holds %d answers to requests it has not made", errConflict, r.runID, maxEarly)
	}
	r.early[requestID] = d
	r.answered[requestID] = string(key)
	return "stored", nil
}
