package harness

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/initorigin/io-harness-go/pkg/harness/store"
)

// errLeaseLost is the cause of a run's context when another driver took
// the run over.
var errLeaseLost = errors.New("harness: another driver took the run over")

// hold makes the runner the holder of lease: a goroutine renews it every
// third of its ttl until r.unhold, which stops the goroutine, waits for it
// and releases the lease. When a renewal finds the lease taken over, the
// returned context is cancelled, so that the run stops; its writes are
// fenced out by the store anyway.
func (r *runner) hold(ctx context.Context, lease *store.Lease) context.Context {
	r.lease = lease
	ctx, cancel := context.WithCancelCause(ctx)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(max(lease.TTL/3, time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			// A renewal that fails for another reason (a busy store) is
			// tried again at the next tick; the lease holds until then.
			if err := r.st.Renew(context.WithoutCancel(ctx), lease); errors.Is(err, store.ErrFenced) {
				cancel(errLeaseLost)
				return
			}
		}
	})
	r.unhold = func() {
		close(stop)
		wg.Wait()
		cancel(nil)
		r.st.Release(context.Background(), lease)
		r.unhold = nil
	}
	return ctx
}
