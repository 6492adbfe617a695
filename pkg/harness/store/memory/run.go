package memory

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/store"
)

// CreateRun implements store.Store. A run whose id the store already
// holds is an error wrapping [store.ErrConflict].
func (s *Store) CreateRun(ctx context.Context, r *store.Run, events []store.Event, owner store.Owner, ttl time.Duration) (*store.Lease, error) {
	if r == nil || r.ID == "" || len(r.Task) == 0 {
		return nil, errors.New("store: a run needs an id and a task")
	}
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	if s.runs[r.ID] != nil {
		return nil, fmt.Errorf("%w: run %s exists", store.ErrConflict, r.ID)
	}
	path := r.AgentPath
	if path == "" {
		path = "root"
	}
	n := &run{rec: store.Run{ID: r.ID, RootID: r.ID, AgentPath: path, Task: r.Task, Provider: r.Provider,
		Status: store.StatusRunning, StartedAt: r.StartedAt, Policy: r.Policy, Containment: r.Containment}}
	if err := n.checkEvents(events); err != nil {
		return nil, err
	}
	l := &store.Lease{RunID: r.ID, Owner: owner, Generation: 1, Expires: time.Now().Add(ttl), TTL: ttl}
	s.add(n, events)
	n.lease = keptLease(l)
	return l, nil
}

// CreateAgent implements store.Store.
func (s *Store) CreateAgent(ctx context.Context, l *store.Lease, r *store.Run, events []store.Event) error {
	switch {
	case l == nil:
		return fmt.Errorf("%w: a write made with no lease", store.ErrFenced)
	case r == nil || r.ID == "" || len(r.Task) == 0 || r.ParentID == "" || r.AgentPath == "":
		return errors.New("store: an agent needs an id, a task, a parent and a path")
	case r.RootID != l.RunID:
		return fmt.Errorf("%w: agent %s has root %s, not the leased %s", store.ErrFenced, r.ID, r.RootID, l.RunID)
	case r.Status != store.StatusQueued && r.Status != store.StatusRunning:
		return fmt.Errorf("store: an agent starts queued or running, not %q", r.Status)
	}
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	if _, err := s.leased(l.For(r.ParentID)); err != nil {
		return err
	}
	if s.runs[r.ID] != nil {
		return fmt.Errorf("%w: run %s exists", store.ErrConflict, r.ID)
	}
	n := &run{rec: store.Run{ID: r.ID, ParentID: r.ParentID, RootID: r.RootID, AgentPath: r.AgentPath, Task: r.Task,
		Provider: r.Provider, Status: r.Status, StartedAt: r.StartedAt, Policy: r.Policy}}
	if err := n.checkEvents(events); err != nil {
		return err
	}
	s.add(n, events)
	return nil
}

// add keeps a new run, whose record holds the caller's values, and its
// first events.
func (s *Store) add(n *run, events []store.Event) {
	n.rec = copyRun(&n.rec)
	n.rec.StartedAt = ms(n.rec.StartedAt)
	// A run's spend starts known, and unknown spend makes it unknown.
	n.rec.Cost.Known, n.rec.LostCost.Known = true, true
	n.addEvents(events)
	s.runs[n.rec.ID] = n
	s.created = append(s.created, n)
}

// keptLease is the copy of l the store keeps: to the millisecond, and
// without a handle on an agent.
func keptLease(l *store.Lease) *store.Lease {
	return &store.Lease{RunID: l.RunID, Owner: store.Owner{Host: l.Owner.Host, PID: l.Owner.PID, Started: ms(l.Owner.Started), Live: l.Owner.Live},
		Generation: l.Generation, Expires: ms(l.Expires), TTL: msd(l.TTL)}
}

// Lease implements store.Reader.
func (s *Store) Lease(ctx context.Context, runID string) (*store.Lease, error) {
	if err := s.rlock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	r := s.runs[runID]
	if r == nil || r.lease == nil || r.lease.Expires.UnixMilli() <= time.Now().UnixMilli() {
		return nil, nil
	}
	l := *r.lease
	return &l, nil
}

// Acquire implements store.Store.
func (s *Store) Acquire(ctx context.Context, runID string, owner store.Owner, ttl time.Duration, force bool, seen *store.Seen) (*store.Lease, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	r := s.runs[runID]
	switch {
	case r == nil:
		return nil, fmt.Errorf("%w: run %s", store.ErrNotFound, runID)
	case r.rec.RootID != runID:
		return nil, fmt.Errorf("%w: run %s is an agent of the tree of %s, whose lease covers it", store.ErrAgent, runID, r.rec.RootID)
	}
	if err := seen.Check(runID, r.rec.Status, r.rec.Outcome, r.rec.Steps); err != nil {
		return nil, err
	}
	now := time.Now()
	gen := int64(1)
	if held := r.lease; held != nil {
		if !force && !held.Lapsed(now, owner) {
			return nil, &store.LeaseError{RunID: runID, Holder: *held}
		}
		gen = held.Generation + 1
	}
	l := &store.Lease{RunID: runID, Owner: owner, Generation: gen, Expires: now.Add(ttl), TTL: ttl}
	r.lease = keptLease(l)
	return l, nil
}

// Renew implements store.Store.
func (s *Store) Renew(ctx context.Context, l *store.Lease) error {
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	if _, err := s.leased(l); err != nil {
		return err
	}
	expires := time.Now().Add(l.TTL)
	s.runs[l.RunID].lease.Expires = ms(expires)
	l.Expires = expires
	return nil
}

// Release implements store.Store. The lease stays, expired, so that the
// next driver's generation is higher than every earlier one's.
func (s *Store) Release(ctx context.Context, l *store.Lease) error {
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	if l == nil {
		return nil
	}
	if r := s.runs[l.RunID]; r != nil && r.lease != nil && r.lease.Generation == l.Generation {
		r.lease.Expires = time.Time{}
	}
	return nil
}

// FinishRun implements store.Store.
func (s *Store) FinishRun(ctx context.Context, l *store.Lease, f *store.Finish) error {
	if f == nil {
		return errors.New("store: no outcome to record")
	}
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	r, err := s.leased(l, f.RunID)
	if err != nil {
		return err
	}
	if err := r.checkEvents(f.Events); err != nil {
		return err
	}
	r.finish(f)
	return nil
}

// finish records an outcome whose events checkEvents passed.
func (r *run) finish(f *store.Finish) {
	rec := &r.rec
	rec.Status, rec.Outcome, rec.OutcomeJSON, rec.FinishedAt = f.Status, f.Outcome, raw(f.OutcomeJSON), ms(f.At)
	rec.PausedAt = time.Time{}
	if f.Status == store.StatusPaused {
		rec.PausedAt = ms(f.At)
	}
	r.addAttempts(f.Attempts)
	r.addEvents(f.Events)
}

// ReopenRun implements store.Store.
func (s *Store) ReopenRun(ctx context.Context, l *store.Lease, task, policy json.RawMessage, at time.Time, events []store.Event) error {
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	r, err := s.leased(l)
	if err != nil {
		return err
	}
	if err := r.checkEvents(events); err != nil {
		return err
	}
	rec := &r.rec
	if p, a := rec.PausedAt.UnixMilli(), at.UnixMilli(); p > 0 && a > p {
		rec.Paused += time.Duration(a-p) * time.Millisecond
	}
	rec.PausedAt, rec.Status, rec.Outcome, rec.OutcomeJSON, rec.FinishedAt = time.Time{}, store.StatusRunning, "", nil, time.Time{}
	rec.Task, rec.Policy = rawAlways(task), raw(policy)
	r.addEvents(events)
	return nil
}

// Run implements store.Reader.
func (s *Store) Run(ctx context.Context, id string) (*store.Run, error) {
	if err := s.rlock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	r := s.runs[id]
	if r == nil {
		return nil, fmt.Errorf("%w: run %s", store.ErrNotFound, id)
	}
	c := copyRun(&r.rec)
	return &c, nil
}

// Runs implements store.Reader: a tree (f.RootID) in the order its runs
// were created, other selections newest first by start, then by id.
func (s *Store) Runs(ctx context.Context, f store.RunFilter) ([]store.Run, error) {
	if err := s.rlock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	var sel []*store.Run
	for _, r := range s.created {
		rec := &r.rec
		if (f.ParentID != "" && rec.ParentID != f.ParentID) ||
			(f.RootID != "" && rec.RootID != f.RootID && rec.ID != f.RootID) ||
			(f.Roots && rec.RootID != rec.ID) {
			continue
		}
		sel = append(sel, rec)
	}
	if f.RootID == "" {
		slices.SortFunc(sel, func(a, b *store.Run) int {
			if c := cmp.Compare(b.StartedAt.UnixMilli(), a.StartedAt.UnixMilli()); c != 0 {
				return c
			}
			return cmp.Compare(b.ID, a.ID)
		})
	}
	limit := f.Limit
	if limit == 0 {
		limit = 100
	}
	if limit > 0 && len(sel) > limit {
		sel = sel[:limit]
	}
	var out []store.Run
	for _, rec := range sel {
		out = append(out, copyRun(rec))
	}
	return out, nil
}

// addUsage adds u and c to a run's totals.
func addUsage(u *provider.Usage, c *provider.Cost, du provider.Usage, dc provider.Cost) {
	*u = u.Add(du)
	*c = c.Add(dc)
}
