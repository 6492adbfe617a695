package tree

import (
	"context"
	"sync"
)

// Slots bounds how many agents of a tree step at once. An agent holds a
// slot while it runs its own steps and gives it back while it waits, for
// a child or in the queue, so that a parent never starves the children it
// waits for. Slots go to waiters first come, first served.
type Slots struct {
	mu      sync.Mutex
	free    int
	waiters []chan struct{}
	live    int // slots held now
	peak    int // the most held at once
}

// NewSlots returns n slots; n < 1 is taken as 1.
func NewSlots(n int) *Slots { return &Slots{free: max(n, 1)} }

// Acquire takes a slot, waiting in line for one. It returns the context's
// cause if ctx ends first, holding nothing.
func (s *Slots) Acquire(ctx context.Context) error {
	s.mu.Lock()
	if s.free > 0 && len(s.waiters) == 0 {
		s.take()
		s.mu.Unlock()
		return nil
	}
	ready := make(chan struct{})
	s.waiters = append(s.waiters, ready)
	s.mu.Unlock()
	select {
	case <-ready:
		return nil
	case <-ctx.Done():
		s.mu.Lock()
		defer s.mu.Unlock()
		select {
		case <-ready:
			// Handed a slot as ctx ended: give it on.
			s.release()
		default:
			for i, w := range s.waiters {
				if w == ready {
					s.waiters = append(s.waiters[:i], s.waiters[i+1:]...)
					break
				}
			}
		}
		return context.Cause(ctx)
	}
}

// Release gives a slot back, to the first in line if anyone waits.
func (s *Slots) Release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.release()
}

// release hands the slot on or frees it. Called with mu held.
func (s *Slots) release() {
	s.live--
	if len(s.waiters) > 0 {
		w := s.waiters[0]
		s.waiters = s.waiters[1:]
		s.live++
		s.peak = max(s.peak, s.live)
		close(w)
		return
	}
	s.free++
}

// take takes a free slot. Called with mu held.
func (s *Slots) take() {
	s.free--
	s.live++
	s.peak = max(s.peak, s.live)
}

// Live returns how many slots are held now, and the most held at once.
func (s *Slots) Live() (now, peak int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.live, s.peak
}

// Queued returns how many wait in line.
func (s *Slots) Queued() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.waiters)
}
