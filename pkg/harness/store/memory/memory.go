// Package memory is a store of the harness that keeps everything in the
// process's memory, in maps and slices: a [store.Store] for runs that
// need no durability — tests, demos, and embedded runs that keep nothing
// once they end. Nothing it holds outlives the process or its [Store.Close].
//
// It keeps the whole contract of package store — steps committed whole or
// not at all, leases with generations that fence a superseded driver out,
// intents, lost spend, approvals decided once — and reads back what the
// SQLite store reads back for the same writes, to the millisecond it keeps
// times to. One stricter check: a write is fenced out unless every run its
// values name is the run its lease is a handle on ([store.Lease.For]).
//
// A write takes one lock for the time it takes to check and copy its
// values; reads share the lock with each other.
//
// Every value passed in is copied before it is kept, and every value
// handed out is a copy: a caller cannot change the store through a slice
// or a [json.RawMessage] it passed or was given.
package memory

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/store"
)

// Store is a store in memory. It is safe for concurrent use.
type Store struct {
	mu        sync.RWMutex // guards every field below
	closed    bool
	runs      map[string]*run
	created   []*run                     // every run, in the order it was created
	approvals map[string]*store.Approval // every approval request, by id: ids are unique across runs
	intentID  int64                      // the id of the last intent opened
}

// run is one run and everything recorded for it.
type run struct {
	rec   store.Run
	lease *store.Lease // the run's lease; nil for an agent of a tree
	// steps are the committed steps, steps[i] being step i+1, without
	// their attempts: those are in attempts.
	steps []store.Step
	// attempts are every provider attempt recorded for the run, in the
	// order they were written; Steps hands each to the committed step it
	// names, Attempts the rest.
	attempts  []store.Attempt
	events    []store.Event // in sequence order
	intents   []store.Intent
	open      []int             // indexes into intents of the open ones
	spend     []store.Spend     // spend of calls whose step has not committed
	approvals []*store.Approval // the run's requests, in the order they were made
}

var _ store.Store = (*Store)(nil)

// New returns an empty store.
func New() *Store {
	return &Store{runs: map[string]*run{}, approvals: map[string]*store.Approval{}}
}

// Name returns ":memory:".
func (s *Store) Name() string { return ":memory:" }

// Durable returns false: nothing outlives the process.
func (s *Store) Durable() bool { return false }

// Close drops everything the store holds; every later call returns
// [store.ErrClosed]. It is idempotent.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	s.runs, s.created, s.approvals = nil, nil, nil
	return nil
}

// rlock takes the lock for a reader, unless ctx is done or the store is
// closed; the caller unlocks with s.mu.RUnlock when it returns nil.
func (s *Store) rlock(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return store.ErrClosed
	}
	return nil
}

// lock takes the lock for a writer, as rlock does; the caller unlocks
// with s.mu.Unlock.
func (s *Store) lock(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return store.ErrClosed
	}
	return nil
}

// leased returns the run a write with l is for (l.Target()), after
// checking that l is still the lease of its tree and that every run the
// write's values name is that run. A write with no lease, with a lease
// another driver has since taken, or for a run outside the leased tree is
// an error wrapping [store.ErrFenced].
func (s *Store) leased(l *store.Lease, named ...string) (*run, error) {
	if l == nil {
		return nil, fmt.Errorf("%w: a write made with no lease", store.ErrFenced)
	}
	root := s.runs[l.RunID]
	switch {
	case root == nil || root.lease == nil:
		return nil, fmt.Errorf("%w: run %s has no lease", store.ErrFenced, l.RunID)
	case root.lease.Generation != l.Generation:
		return nil, fmt.Errorf("%w: run %s is at lease generation %d, this driver holds %d",
			store.ErrFenced, l.RunID, root.lease.Generation, l.Generation)
	}
	target := root
	if l.Agent != "" {
		target = s.runs[l.Agent]
		switch {
		case target == nil:
			return nil, fmt.Errorf("%w: run %s", store.ErrNotFound, l.Agent)
		case target.rec.RootID != l.RunID:
			return nil, fmt.Errorf("%w: run %s is not an agent of the tree of %s", store.ErrFenced, l.Agent, l.RunID)
		}
	}
	for _, id := range named {
		if id != target.rec.ID {
			return nil, fmt.Errorf("%w: a write for run %s made with the lease's handle on run %s", store.ErrFenced, id, target.rec.ID)
		}
	}
	return target, nil
}

// checkEvents reports a sequence number that batches would write twice,
// into the run or within themselves, as an error wrapping
// [store.ErrConflict] (two drivers numbering events). It changes nothing.
func (r *run) checkEvents(batches ...[]store.Event) error {
	last := int64(-1 << 63)
	if n := len(r.events); n > 0 {
		last = r.events[n-1].Seq
	}
	inOrder := true // every batch ascending, and after what is stored
	for _, b := range batches {
		for _, e := range b {
			if e.Seq <= last {
				inOrder = false
			}
			last = e.Seq
		}
	}
	if inOrder {
		return nil
	}
	seen := map[int64]bool{}
	for _, b := range batches {
		for _, e := range b {
			_, stored := r.findEvent(e.Seq)
			if stored || seen[e.Seq] {
				return fmt.Errorf("%w: run %s: event %d was written by another driver", store.ErrConflict, r.rec.ID, e.Seq)
			}
			seen[e.Seq] = true
		}
	}
	return nil
}

// findEvent returns where the event seq is, or would be, in r.events.
func (r *run) findEvent(seq int64) (int, bool) {
	return slices.BinarySearchFunc(r.events, seq, func(e store.Event, seq int64) int { return cmp.Compare(e.Seq, seq) })
}

// addEvents stores copies of events, which checkEvents passed.
func (r *run) addEvents(events []store.Event) {
	for _, e := range events {
		e.At, e.Data = ms(e.At), rawAlways(e.Data)
		if n := len(r.events); n == 0 || r.events[n-1].Seq < e.Seq {
			r.events = append(r.events, e)
			continue
		}
		i, _ := r.findEvent(e.Seq)
		r.events = slices.Insert(r.events, i, e)
	}
}

// addAttempts stores copies of attempts.
func (r *run) addAttempts(attempts []store.Attempt) {
	for _, a := range attempts {
		a.Latency, a.Wait, a.At = msd(a.Latency), msd(a.Wait), ms(a.At)
		r.attempts = append(r.attempts, a)
	}
}

// The store keeps times and durations to the millisecond, as the SQLite
// store does, so that a trace reads the same from either.

// ms is t to the millisecond; the zero time stays zero.
func ms(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return time.UnixMilli(t.UnixMilli())
}

// msd is d to the millisecond, rounded toward zero.
func msd(d time.Duration) time.Duration { return d.Truncate(time.Millisecond) }

// raw copies b; an empty one is nil, as the SQLite store reads it back.
func raw(b json.RawMessage) json.RawMessage {
	if len(b) == 0 {
		return nil
	}
	return json.RawMessage(append([]byte(nil), b...))
}

// rawAlways copies b; an empty one is empty, not nil.
func rawAlways(b json.RawMessage) json.RawMessage {
	return json.RawMessage(append([]byte{}, b...))
}

// strs copies a list of strings; an empty one is nil.
func strs(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return slices.Clone(s)
}

// copyRun returns a copy of r that shares no memory with it.
func copyRun(r *store.Run) store.Run {
	c := *r
	c.Task, c.OutcomeJSON, c.Policy = rawAlways(r.Task), raw(r.OutcomeJSON), raw(r.Policy)
	c.Remembered, c.Containment = raw(r.Remembered), raw(r.Containment)
	return c
}

// copyMessage returns a copy of m that shares no memory with it.
func copyMessage(m provider.Message) provider.Message {
	c := m
	c.ToolCalls = nil
	for _, tc := range m.ToolCalls {
		tc.Arguments = raw(tc.Arguments)
		c.ToolCalls = append(c.ToolCalls, tc)
	}
	c.Images = nil
	for _, im := range m.Images {
		im.Data = append([]byte(nil), im.Data...)
		c.Images = append(c.Images, im)
	}
	return c
}

// copyObservation returns a copy of o that shares no memory with it.
func copyObservation(o store.Observation) store.Observation {
	o.Arguments, o.Changed = raw(o.Arguments), strs(o.Changed)
	return o
}

// copyStep returns a copy of st, without its attempts, that shares no
// memory with it, with its times to the millisecond.
func copyStep(st *store.Step) store.Step {
	c := *st
	c.StartedAt, c.FinishedAt = ms(st.StartedAt), ms(st.FinishedAt)
	c.Assistant = copyMessage(st.Assistant)
	c.Observations = nil
	for _, o := range st.Observations {
		c.Observations = append(c.Observations, copyObservation(o))
	}
	c.Attempts = nil
	return c
}

// copyApproval returns a copy of a that shares no memory with it.
func copyApproval(a *store.Approval) store.Approval {
	c := *a
	c.Arguments, c.Decision = rawAlways(a.Arguments), raw(a.Decision)
	if a.Result != nil {
		o := copyObservation(*a.Result)
		c.Result = &o
	}
	return c
}

// copyIntent returns a copy of in that shares no memory with it.
func copyIntent(in *store.Intent) store.Intent {
	c := *in
	c.Arguments = rawAlways(in.Arguments)
	return c
}
