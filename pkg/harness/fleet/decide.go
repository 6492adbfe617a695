package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/initorigin/io-harness-go/pkg/harness"
	"github.com/initorigin/io-harness-go/pkg/harness/approve"
	"github.com/initorigin/io-harness-go/pkg/harness/store"
	"github.com/initorigin/io-harness-go/pkg/harness/store/postgres"
)

// Decide queues a person's decision on the approval request a paused run
// awaits, from any process: whichever worker claims the job carries it
// out exactly as [harness.ResumeWithDecision] does — the policy checked
// again, the action the person saw or nothing — and continues the run.
// Exactly one decision per request is queued; a second one, from this or
// any process, is refused. by names who decides, for the queue log; empty
// means this process.
//
// A deferral decides nothing: the run goes on waiting and nothing is
// queued.
//
// # Errors
//
// A decision that does not validate is a *harness.Error of kind ErrConfig.
// An unknown run or request, or a request that is not pending or already
// has a decision waiting for a worker, is a *harness.Error of kind
// ErrResume wrapping approve.ErrUnknownRequest or
// approve.ErrAlreadyDecided.
func Decide(ctx context.Context, st *postgres.Store, runID, requestID string, d approve.Decision, by string) error {
	if err := d.Validate(); err != nil {
		return &harness.Error{Kind: harness.ErrConfig, Field: "decision", Err: err}
	}
	fail := func(msg string, err error) error {
		return &harness.Error{Kind: harness.ErrResume, Message: "run " + runID + ": " + msg, Err: err}
	}
	a, err := st.Approval(ctx, runID, requestID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return fail("no approval request "+requestID, approve.ErrUnknownRequest)
	case err != nil:
		return err
	case a.State != store.ApprovalPending:
		return fail(fmt.Sprintf("approval request %s was already decided (%s)", requestID, a.State), approve.ErrAlreadyDecided)
	case d.Kind == approve.Defer:
		return nil
	}
	data, err := json.Marshal(d)
	if err != nil {
		return &harness.Error{Kind: harness.ErrConfig, Field: "decision", Err: err}
	}
	if err := Migrate(ctx, st); err != nil {
		return err
	}
	c, err := inserter(st)
	if err != nil {
		return err
	}
	if by == "" {
		by = ownerName(store.Self())
	}
	entry := &postgres.QueueEntry{RunID: runID, Action: ActionDecisionQueued,
		Detail: fmt.Sprintf("%s on request %s, by %s", d.Kind, requestID, by)}
	if err := st.Enqueue(ctx, entry, enqueue(c, Args{RunID: runID, RequestID: requestID, Decision: data})); err != nil {
		return err
	}
	if entry.Job == 0 {
		return fail("a decision on approval request "+requestID+" already waits for a worker", approve.ErrAlreadyDecided)
	}
	return nil
}
