package memory

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/initorigin/io-harness-go/pkg/harness/store"
)

// Approval implements store.Reader.
func (s *Store) Approval(ctx context.Context, runID, id string) (*store.Approval, error) {
	if err := s.rlock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	a := s.approvals[id]
	if a == nil || a.RunID != runID {
		return nil, fmt.Errorf("%w: approval %s of run %s", store.ErrNotFound, id, runID)
	}
	c := copyApproval(a)
	return &c, nil
}

// Approvals implements store.Reader: in the order they were made, by the
// millisecond, then by id.
func (s *Store) Approvals(ctx context.Context, runID string) ([]store.Approval, error) {
	if err := s.rlock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	r := s.runs[runID]
	if r == nil {
		return nil, nil
	}
	var out []store.Approval
	for _, a := range r.approvals {
		out = append(out, copyApproval(a))
	}
	slices.SortStableFunc(out, func(a, b store.Approval) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	return out, nil
}

// Decide implements store.Store.
func (s *Store) Decide(ctx context.Context, runID, id string, state store.ApprovalState, decision json.RawMessage, at time.Time, events []store.Event) error {
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	a := s.approvals[id]
	if a == nil || a.RunID != runID || a.State != store.ApprovalPending {
		return fmt.Errorf("%w: %s", store.ErrNotPending, id)
	}
	r := s.runs[runID]
	if err := r.checkEvents(events); err != nil {
		return err
	}
	a.State, a.Decision, a.DecidedAt = state, raw(decision), ms(at)
	r.addEvents(events)
	return nil
}

// RecordDecisions implements store.Store.
func (s *Store) RecordDecisions(ctx context.Context, l *store.Lease, performed []store.Performed, events []store.Event) error {
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	r, err := s.leased(l)
	if err != nil {
		return err
	}
	for i, p := range performed {
		a := s.approvals[p.ID]
		decided := a != nil && a.RunID == r.rec.ID &&
			(a.State == store.ApprovalApproved || a.State == store.ApprovalDenied || a.State == store.ApprovalRefused)
		if !decided || slices.ContainsFunc(performed[:i], func(q store.Performed) bool { return q.ID == p.ID }) {
			return fmt.Errorf("%w: approval %s of run %s is not decided", store.ErrNotPending, p.ID, r.rec.ID)
		}
	}
	if err := r.checkEvents(events); err != nil {
		return err
	}
	for _, p := range performed {
		a := s.approvals[p.ID]
		result := copyObservation(p.Result)
		a.State, a.Result = store.ApprovalPerformed, &result
		r.closeIntents(store.IntentDone, func(in *store.Intent) bool { return in.CallID == p.CallID })
	}
	r.addEvents(events)
	return nil
}
