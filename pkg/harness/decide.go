package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/initorigin/io-harness-go/pkg/harness/approve"
	"github.com/initorigin/io-harness-go/pkg/harness/store"
)

// Decide answers a deferred approval request without driving the run:
// the decision is recorded in the store, and the next driver of the run
// carries it out — a process waiting for it (the CLI's --approvals wait,
// the ABI's "approvals": "wait"), a later [Resume], or, for a run
// submitted to a fleet (package fleet), the worker that finds the
// decision and resumes the run. It is the one way to answer a paused run,
// whoever drives it, and the ABI's approval.decide and io-harness approve
// --store answer with it. It needs no lease and no provider, so a person
// watching the run from another process (io-harness watch) can answer.
//
// by names who decides, for the record: it is kept with the decision (the
// stored decision's "by"), and a fleet's queue log names it; empty means
// this process (host:pid).
//
// What is approved is checked when it is carried out, as it is for
// [ResumeWithDecision]: the policy in force then must not deny it, and
// the action must be exactly the one the person saw (its hash); otherwise
// nothing is done and the model is told why. A defer decision changes
// nothing. Rules to remember need ResumeWithDecision, which applies them
// at once.
//
// # Errors
//
// An invalid decision, or one with rules to remember, is an *Error of
// kind ErrConfig. An unknown run or request, or a request already decided,
// is ErrResume wrapping [approve.ErrUnknownRequest] or
// [approve.ErrAlreadyDecided]. A store that cannot be written is
// ErrUnavailable or ErrState.
func Decide(ctx context.Context, st store.Store, runID, requestID string, d approve.Decision, by string) error {
	if err := d.Validate(); err != nil {
		return &Error{Kind: ErrConfig, Field: "decision", Err: err}
	}
	if len(d.Remember) > 0 {
		return configError("decision.remember", "rules to remember are applied by the driver that decides: use ResumeWithDecision (io-harness approve)")
	}
	fail := func(msg string, err error) error {
		return &Error{Kind: ErrResume, Message: "run " + runID + ": " + msg, Err: err}
	}
	rec, err := st.Run(ctx, runID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return fail("no such run in "+st.Name(), errors.Join(approve.ErrUnknownRequest, err))
	case err != nil:
		return storeError("run "+runID+": read run", err)
	}
	a, err := st.Approval(ctx, runID, requestID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return fail("no approval request "+requestID, approve.ErrUnknownRequest)
	case err != nil:
		return storeError("run "+runID+": read approval "+requestID, err)
	case a.State != store.ApprovalPending:
		return fail(fmt.Sprintf("approval request %s was already decided (%s)", requestID, a.State), approve.ErrAlreadyDecided)
	case d.Kind == approve.Defer:
		return nil
	}
	state := store.ApprovalApproved
	if d.Kind == approve.Deny {
		state = store.ApprovalDenied
	}
	if by == "" {
		self := store.Self()
		by = fmt.Sprintf("%s:%d", self.Host, self.PID)
	}
	// Who decided is kept with the decision, beside its fields.
	data, err := json.Marshal(struct {
		approve.Decision
		By string `json:"by"`
	}{d, by})
	if err != nil {
		return wrap(ErrConfig, "encode decision", err)
	}
	now := time.Now()
	// A paused run has no driver to number its events, and none takes it
	// until the decision is in: the decision is the trace's next event.
	// A run in any other state gets no event rather than one whose number
	// a driver might also use.
	var events []store.Event
	if rec.Status == store.StatusPaused {
		seq, err := st.LastSeq(ctx, runID)
		if err != nil {
			return storeError("run "+runID+": read events", err)
		}
		e := Event{RunID: runID, Path: rec.AgentPath, Seq: seq + 1, Step: a.Step, Kind: EventApprovalResolved, At: now,
			RequestID: requestID, Decision: d.Kind, Reason: d.Reason, Tool: a.Tool, Target: a.Target}
		events = []store.Event{{Seq: e.Seq, Step: e.Step, Kind: string(e.Kind), At: now, Data: encodeEvent(&e)}}
	}
	if err := st.Decide(ctx, runID, requestID, state, data, now, events); err != nil {
		if errors.Is(err, store.ErrNotPending) {
			return fail("approval request "+requestID+" was decided meanwhile", approve.ErrAlreadyDecided)
		}
		return storeError("run "+runID+": record decision", err)
	}
	return nil
}
