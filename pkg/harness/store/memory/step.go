package memory

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/initorigin/io-harness-go/pkg/harness/store"
)

// CommitStep implements store.Store. Everything the commit would change
// is checked first — the lease, the step number, the event numbers, the
// approval ids — and only then is anything changed, so a commit that
// fails leaves nothing of the step.
func (s *Store) CommitStep(ctx context.Context, l *store.Lease, c *store.Commit) error {
	if c == nil {
		return errors.New("store: no step to commit")
	}
	st := &c.Step
	named := []string{st.RunID}
	for i := range c.Approvals {
		named = append(named, c.Approvals[i].RunID)
	}
	var finishEvents []store.Event
	if c.Finish != nil {
		named = append(named, c.Finish.RunID)
		finishEvents = c.Finish.Events
	}
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	r, err := s.leased(l, named...)
	if err != nil {
		return err
	}
	if r.rec.Status != store.StatusRunning || r.rec.Steps != st.Step-1 {
		return fmt.Errorf("%w: run %s step %d is not its next step", store.ErrConflict, st.RunID, st.Step)
	}
	if err := r.checkEvents(c.Events, finishEvents); err != nil {
		return err
	}
	for i := range c.Approvals {
		id := c.Approvals[i].ID
		if s.approvals[id] != nil || slices.ContainsFunc(c.Approvals[:i], func(a store.Approval) bool { return a.ID == id }) {
			return fmt.Errorf("%w: approval request %s exists", store.ErrConflict, id)
		}
	}

	r.rec.Steps = st.Step
	addUsage(&r.rec.Usage, &r.rec.Cost, st.Usage, st.Cost)
	r.steps = append(r.steps, copyStep(st))
	r.addAttempts(st.Attempts)
	// The step's spend is now in the run's totals.
	r.spend = slices.DeleteFunc(r.spend, func(sp store.Spend) bool { return sp.Step == st.Step })
	r.closeIntents(store.IntentDone, func(in *store.Intent) bool { return in.Step == st.Step })
	for _, id := range c.InDoubt {
		if i, ok := r.findIntent(id); ok && r.intents[i].State == store.IntentInDoubt {
			r.intents[i].State = store.IntentReported
		}
	}
	for i := range c.Approvals {
		a := copyApproval(&c.Approvals[i])
		a.State, a.Decision, a.Result, a.DecidedAt, a.CreatedAt = store.ApprovalPending, nil, nil, time.Time{}, ms(a.CreatedAt)
		s.approvals[a.ID] = &a
		r.approvals = append(r.approvals, &a)
	}
	for _, id := range c.Applied {
		if a := s.approvals[id]; a != nil && a.RunID == r.rec.ID {
			a.State = store.ApprovalApplied
		}
	}
	if c.Remembered != nil {
		r.rec.Remembered = raw(c.Remembered)
	}
	r.addEvents(c.Events)
	if c.Finish != nil {
		r.finish(c.Finish)
	}
	return nil
}

// RecordSpend implements store.Store.
func (s *Store) RecordSpend(ctx context.Context, l *store.Lease, sp *store.Spend) error {
	if sp == nil {
		return errors.New("store: no spend to record")
	}
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	r, err := s.leased(l, sp.RunID)
	if errors.Is(err, store.ErrFenced) {
		// Paid for all the same: lost spend of the run, if it is of
		// the lease's tree.
		if r := s.runs[sp.RunID]; r != nil && l != nil && r.rec.RootID == l.RunID {
			addUsage(&r.rec.LostUsage, &r.rec.LostCost, sp.Usage, sp.Cost)
		}
		return err
	}
	if err != nil {
		return err
	}
	r.spend = append(r.spend, *sp)
	return nil
}

// Steps implements store.Reader.
func (s *Store) Steps(ctx context.Context, runID string) ([]store.Step, error) {
	if err := s.rlock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	r := s.runs[runID]
	if r == nil {
		return nil, nil
	}
	var out []store.Step
	for i := range r.steps {
		out = append(out, copyStep(&r.steps[i]))
	}
	for _, a := range r.attempts {
		if a.Step >= 1 && a.Step <= len(out) {
			out[a.Step-1].Attempts = append(out[a.Step-1].Attempts, a)
		}
	}
	return out, nil
}

// Attempts implements store.Reader.
func (s *Store) Attempts(ctx context.Context, runID string) ([]store.Attempt, error) {
	if err := s.rlock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	r := s.runs[runID]
	if r == nil {
		return nil, nil
	}
	var out []store.Attempt
	for _, a := range r.attempts {
		if a.Step > r.rec.Steps {
			out = append(out, a)
		}
	}
	return out, nil
}

// Events implements store.Reader.
func (s *Store) Events(ctx context.Context, runID string, after int64, limit int) ([]store.Event, error) {
	if err := s.rlock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	r := s.runs[runID]
	if r == nil {
		return nil, nil
	}
	i, found := r.findEvent(after)
	if found {
		i++
	}
	evs := r.events[i:]
	if limit > 0 && len(evs) > limit {
		evs = evs[:limit]
	}
	var out []store.Event
	for _, e := range evs {
		e.Data = rawAlways(e.Data)
		out = append(out, e)
	}
	return out, nil
}

// LastSeq implements store.Reader.
func (s *Store) LastSeq(ctx context.Context, runID string) (int64, error) {
	if err := s.rlock(ctx); err != nil {
		return 0, err
	}
	defer s.mu.RUnlock()
	r := s.runs[runID]
	if r == nil || len(r.events) == 0 {
		return 0, nil
	}
	return r.events[len(r.events)-1].Seq, nil
}
