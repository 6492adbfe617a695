package abi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/initorigin/io-harness-go/pkg/harness"
	"github.com/initorigin/io-harness-go/pkg/harness/approve"
	"github.com/initorigin/io-harness-go/pkg/harness/policy"
	"github.com/initorigin/io-harness-go/pkg/harness/store"
	"github.com/initorigin/io-harness-go/pkg/harness/watch"
)

// untilDecided makes a driver that does not end at a deferral: a run that
// ends awaiting approval waits, paused and holding no lease, until some
// process decides the request in the store (approval.decide, io-harness
// watch or approve), and is then resumed here, carrying the decision out.
// Cancelling the run while it waits leaves it paused.
func (h *harnessEntry) untilDecided(drive driver) driver {
	return func(ctx context.Context, o harness.Options) (*harness.Result, error) {
		res, err := drive(ctx, o)
		for err == nil && res.Outcome.Kind == harness.AwaitingApproval {
			a, werr := watch.Decision(ctx, h.st, res.RunID, res.Outcome.RequestID, 0)
			if werr != nil {
				return res, nil
			}
			if a.State == store.ApprovalPerformed || a.State == store.ApprovalApplied {
				// Another process decided and drove it (io-harness
				// approve): follow nothing further here.
				return res, nil
			}
			res, err = harness.Resume(ctx, res.RunID, o, harness.ResumeOptions{})
		}
		return res, err
	}
}

// runWatch follows a run of the harness's store, driven by any process,
// and delivers its events to the harness's queue under a handle of its
// own, as a driven run's are, ending with a done event when the run
// finishes. run.cancel stops following.
func (a *ABI) runWatch(ctx context.Context, raw json.RawMessage) (any, error) {
	var p struct {
		Harness uint64 `json:"harness"`
		RunID   string `json:"run_id"`
		PollMS  int64  `json:"poll_ms"`
	}
	if err := decodeParams(raw, &p); err != nil {
		return nil, err
	}
	h, err := a.openOf(p.Harness)
	if err != nil {
		return nil, err
	}
	switch {
	case p.RunID == "":
		return nil, fmt.Errorf("%w: params.run_id: required", errInvalid)
	case p.PollMS < 0 || p.PollMS > 60_000:
		return nil, fmt.Errorf("%w: params.poll_ms: want 0 to 60000", errInvalid)
	}
	if _, err := h.st.Run(ctx, p.RunID); err != nil {
		return nil, err
	}
	rctx, cancel := context.WithCancel(h.ctx)
	r := &runEntry{id: a.handle(), h: h, ctx: rctx, cancel: cancel, first: make(chan struct{}), runID: p.RunID, sawEvent: true}
	r.firstOnce.Do(func() { close(r.first) })
	h.mu.Lock()
	if h.closing.Load() {
		h.mu.Unlock()
		cancel()
		return nil, errClosed
	}
	h.wg.Add(1)
	h.mu.Unlock()
	a.mu.Lock()
	a.runs[r.id] = r
	a.mu.Unlock()
	announced := map[string]bool{}
	opts := &watch.FollowOptions{Poll: time.Duration(p.PollMS) * time.Millisecond, OnStatus: func(run *store.Run) error {
		if run.Status == store.StatusPaused {
			r.pendingApprovals(rctx, announced)
		}
		return nil
	}}
	a.goStart(func() {
		defer h.wg.Done()
		// The step records the events that came from the store are
		// restored from (their content is kept once, in the step).
		var steps []store.Step
		rec, err := watch.Follow(rctx, h.st, p.RunID, opts, func(it watch.Item) error {
			data := it.Data
			if !it.Live && it.Step >= 1 {
				if it.Step > len(steps) {
					all, err := h.st.Steps(rctx, p.RunID)
					if err != nil {
						return err
					}
					steps = all
				}
				if n := it.Step; n <= len(steps) && steps[n-1].Step == n {
					data = harness.RestoreEvent(data, &steps[n-1])
				}
			}
			r.emit(withRun(r.id, data))
			return nil
		})
		if err != nil {
			r.finish(nil, err)
			return
		}
		var out harness.Outcome
		if err := json.Unmarshal(rec.OutcomeJSON, &out); err != nil {
			r.finish(nil, fmt.Errorf("%w: run %s: its outcome: %v", store.ErrCorrupt, p.RunID, err))
			return
		}
		r.finish(&harness.Result{RunID: p.RunID, Outcome: out}, nil)
	})
	return &started{Run: r.id, RunID: p.RunID}, nil
}

// pendingApprovals tells the host of a watched run that pauses which
// requests wait for a person, as approval_pending events with the request
// as it was shown; the host answers with approval.decide.
func (r *runEntry) pendingApprovals(ctx context.Context, announced map[string]bool) {
	all, err := r.h.st.Approvals(ctx, r.runID)
	if err != nil {
		return
	}
	for _, ap := range all {
		if ap.State != store.ApprovalPending || announced[ap.ID] {
			continue
		}
		announced[ap.ID] = true
		req := &approve.Request{ID: ap.ID, RunID: ap.RunID, Step: ap.Step, Tool: ap.Tool, CallID: ap.CallID,
			Act: policy.Act(ap.Act), Target: ap.Target, Content: ap.Content, Shown: ap.Shown, Hash: ap.Hash, Rule: ap.Rule, Layer: ap.Layer}
		data, err := json.Marshal(&pendingEvent{Kind: KindApprovalPending, Run: r.id, RunID: r.runID, Step: ap.Step, RequestID: ap.ID, Request: req})
		if err == nil {
			r.emit(data)
		}
	}
}

// approvalDecide records a decision on a deferred request of any run in
// the store, driven by any process, with harness.Decide; the run's next
// driver carries it out. A run submitted to a fleet is "queued": a worker
// finds the decision and resumes the run.
func (a *ABI) approvalDecide(ctx context.Context, raw json.RawMessage) (any, error) {
	h, p, d, err := a.decisionOf(raw)
	if err != nil {
		return nil, err
	}
	queued, err := submitted(ctx, h, p.RunID)
	if err != nil {
		return nil, err
	}
	if err := harness.Decide(ctx, h.st, p.RunID, p.RequestID, d, p.By); err != nil {
		return nil, err
	}
	state := "decided"
	switch {
	case d.Kind == approve.Defer:
		state = "pending"
	case queued != nil:
		state = "queued"
	}
	return map[string]any{"state": state}, nil
}

// errNoHub is a live option on a harness that could not listen.
var errNoHub = errors.New("abi: the live event hub could not listen on the loopback interface")
