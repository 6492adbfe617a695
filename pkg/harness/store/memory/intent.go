package memory

import (
	"cmp"
	"context"
	"errors"
	"slices"

	"github.com/initorigin/io-harness-go/pkg/harness/store"
)

// OpenIntent implements store.Store. Intent ids grow across the store.
func (s *Store) OpenIntent(ctx context.Context, l *store.Lease, in *store.Intent) (int64, error) {
	if in == nil {
		return 0, errors.New("store: no intent to open")
	}
	if err := s.lock(ctx); err != nil {
		return 0, err
	}
	defer s.mu.Unlock()
	r, err := s.leased(l, in.RunID)
	if err != nil {
		return 0, err
	}
	s.intentID++
	c := copyIntent(in)
	c.ID, c.State, c.CreatedAt = s.intentID, store.IntentOpen, ms(in.CreatedAt)
	r.open = append(r.open, len(r.intents))
	r.intents = append(r.intents, c)
	return c.ID, nil
}

// Recover implements store.Store: every open intent of the run becomes
// in doubt, and the spend of every call whose step never committed is
// added to the run's lost spend.
func (s *Store) Recover(ctx context.Context, l *store.Lease) ([]store.Intent, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	r, err := s.leased(l)
	if err != nil {
		return nil, err
	}
	r.closeIntents(store.IntentInDoubt, func(*store.Intent) bool { return true })
	for _, sp := range r.spend {
		addUsage(&r.rec.LostUsage, &r.rec.LostCost, sp.Usage, sp.Cost)
	}
	r.spend = nil
	var out []store.Intent
	for i := range r.intents {
		if r.intents[i].State == store.IntentInDoubt {
			out = append(out, copyIntent(&r.intents[i]))
		}
	}
	return out, nil
}

// closeIntents moves the open intents that match to state.
func (r *run) closeIntents(state store.IntentState, match func(*store.Intent) bool) {
	r.open = slices.DeleteFunc(r.open, func(i int) bool {
		if match(&r.intents[i]) {
			r.intents[i].State = state
			return true
		}
		return false
	})
}

// findIntent returns where the intent id is in r.intents, which are in
// id order.
func (r *run) findIntent(id int64) (int, bool) {
	return slices.BinarySearchFunc(r.intents, id, func(in store.Intent, id int64) int { return cmp.Compare(in.ID, id) })
}
