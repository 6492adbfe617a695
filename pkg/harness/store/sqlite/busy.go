package sqlite

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync/atomic"
	"time"

	sqlite3 "modernc.org/sqlite/lib"
)

// Contention on a store file waits; it never fails a write. SQLite
// waits by itself, through the busy timeout, where it can wait without
// deadlocking: a reader, or BEGIN IMMEDIATE. Where it cannot, it returns
// SQLITE_BUSY at once: a connection holding a read transaction that
// needs the write lock, as PRAGMA journal_mode=WAL does on a new file
// while another process holds that lock. And a busy timeout ends.
// There, retryBusy waits (having given up its locks with the failed
// statement) and tries again, until the caller's context is done.

// isBusy reports whether err is SQLite's SQLITE_BUSY, in any of its
// extended codes.
func isBusy(err error) bool {
	var e interface{ Code() int }
	return errors.As(err, &e) && e.Code()&0xff == sqlite3.SQLITE_BUSY
}

// waitFunc waits before the tries+1'th attempt at a statement that
// returned SQLITE_BUSY, or returns an error to stop trying.
type waitFunc func(ctx context.Context, tries int) error

// backoff is the waitFunc of a store: from about a millisecond, doubling
// to about 64, jittered so that processes that collided once do not
// collide again.
func backoff(ctx context.Context, tries int) error {
	d := time.Millisecond << min(tries-1, 6)
	d = d/2 + rand.N(d)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// retryBusy runs fn until it returns anything but SQLITE_BUSY. When
// s.wait stops it (ctx is done), the error is the last SQLITE_BUSY,
// joined with why it stopped.
func (s *Store) retryBusy(ctx context.Context, fn func() error) error {
	for tries := 1; ; tries++ {
		err := fn()
		if !isBusy(err) {
			return err
		}
		if stop := s.wait(ctx, tries); stop != nil {
			return errors.Join(err, stop)
		}
	}
}

// anyLive returns a context that is done once every write of batch has
// its context done: a batch waits for the file while any of its writes
// may still land. stop releases it.
func anyLive(batch []*pending) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	left := atomic.Int64{}
	left.Store(int64(len(batch)))
	stops := make([]func() bool, len(batch))
	for i, w := range batch {
		stops[i] = context.AfterFunc(w.ctx, func() {
			if left.Add(-1) == 0 {
				cancel()
			}
		})
	}
	return ctx, func() {
		for _, s := range stops {
			s()
		}
		cancel()
	}
}
