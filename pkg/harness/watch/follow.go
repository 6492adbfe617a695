package watch

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/initorigin/io-harness-go/pkg/harness/store"
)

// Item is one event delivered to a watcher.
type Item struct {
	// Seq, Step and Kind are the event's; Seq is 0 for a model delta.
	Seq  int64  `json:"seq"`
	Step int    `json:"step"`
	Kind string `json:"kind"`
	// Data is the event as JSON (docs/abi.md, "Events"). One from the
	// store lacks what the store keeps once, in the step's record (the
	// model's text, a call's arguments, a result's preview):
	// harness.RestoreEvent puts it back.
	Data json.RawMessage `json:"data"`
	// Live reports an event that came from the driver before its step
	// committed: a crash may still void it, and the driver that resumes
	// the run may number another event with its Seq.
	Live bool `json:"live,omitempty"`
}

// FollowOptions configures [Follow]; the zero value is the default.
type FollowOptions struct {
	// Poll is how often the store is read; zero means 250ms.
	Poll time.Duration
	// OnStatus, when set, is called with the run's record whenever its
	// status or its number of committed steps changes (and once at the
	// start), after every event the store held at that moment was
	// delivered. An error stops Follow, which returns it.
	OnStatus func(*store.Run) error
	// Client dials the driver's hub; nil means a client of its own.
	Client *http.Client
	// Host is this host's name, to tell a driver on this host (whose
	// loopback hub can be reached) from one elsewhere; empty means
	// os.Hostname.
	Host string
}

// Follow delivers the events of runID to fn, each once and in sequence
// order, until the run finishes (it returns the run's final record), fn or
// OnStatus returns an error (Follow returns it), or ctx is done.
//
// Committed events come from the store, which Follow reads every Poll.
// When the run's driver is on this host and announces a hub in its lease,
// the events of the step under way come from the hub as they happen, model
// deltas included; a driver elsewhere, or one that serves none, is
// followed through the store alone, a step at a time. An event the hub
// sends ahead of one Follow has not seen waits until the store supplies
// the one between, so nothing is skipped; model deltas are passed on only
// while nothing is missing.
//
// When another driver takes the run over (its lease generation changes),
// the events its predecessor showed but never committed are void: Follow
// starts again from the store's last event, so a Seq may be delivered
// twice, the second time with the new driver's event.
//
// # Errors
//
// An unknown run wraps store.ErrNotFound. A store that fails is an error;
// a hub that cannot be reached is not (the store still is).
func Follow(ctx context.Context, st store.Reader, runID string, opts *FollowOptions, fn func(Item) error) (*store.Run, error) {
	var o FollowOptions
	if opts != nil {
		o = *opts
	}
	if o.Poll <= 0 {
		o.Poll = 250 * time.Millisecond
	}
	if o.Client == nil {
		o.Client = &http.Client{}
	}
	if o.Host == "" {
		o.Host, _ = os.Hostname()
	}
	f := &follower{st: st, runID: runID, o: o, fn: fn, ahead: map[int64]Item{}}
	defer f.disconnect()
	ticker := time.NewTicker(o.Poll)
	defer ticker.Stop()
	for {
		run, err := f.poll(ctx)
		if err != nil || run != nil {
			return run, err
		}
		var items <-chan Item
		var ended <-chan struct{}
		if f.live != nil {
			items, ended = f.live.items, f.live.ended
		}
	wait:
		for {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-ticker.C:
				break wait
			case <-ended:
				// The hub ended the stream (the run's step is done, or it
				// cut us off): read the store now, and dial again.
				f.drainLive()
				f.disconnect()
				f.dialed = false
				break wait
			case it := <-items:
				if err := f.offer(it); err != nil {
					return nil, err
				}
			}
		}
	}
}

// follower is the state of one Follow.
type follower struct {
	st    store.Reader
	runID string
	o     FollowOptions
	fn    func(Item) error

	last      int64          // the highest seq delivered
	committed int64          // the highest seq the store held
	ahead     map[int64]Item // live events past a gap, by seq
	status    store.Status   // the status and steps OnStatus last saw
	steps     int
	gen       int64 // the lease generation last seen
	dialed    bool  // the hub of that generation was dialled
	live      *stream
}

// poll reads the store: the run, its new events, its lease. It returns
// the run's record once it has finished.
func (f *follower) poll(ctx context.Context) (*store.Run, error) {
	run, err := f.st.Run(ctx, f.runID)
	if err != nil {
		return nil, err
	}
	lease, err := f.lease(ctx)
	if err != nil {
		return nil, err
	}
	f.dial(ctx, lease)
	for {
		evs, err := f.st.Events(ctx, f.runID, f.committed, 1000)
		if err != nil {
			return nil, err
		}
		// A driver that took the run over while they were read may have
		// committed some of these events under numbers delivered live
		// from its predecessor: look at the lease again before skipping
		// any of them as seen.
		if lease, err = f.lease(ctx); err != nil {
			return nil, err
		}
		for _, e := range evs {
			f.committed = e.Seq
			if e.Seq <= f.last {
				continue
			}
			if err := f.deliver(Item{Seq: e.Seq, Step: e.Step, Kind: e.Kind, Data: e.Data}); err != nil {
				return nil, err
			}
		}
		if err := f.flushAhead(); err != nil {
			return nil, err
		}
		if len(evs) < 1000 {
			break
		}
	}
	f.dial(ctx, lease)
	if run.Status != f.status || run.Steps != f.steps {
		f.status, f.steps = run.Status, run.Steps
		if f.o.OnStatus != nil {
			if err := f.o.OnStatus(run); err != nil {
				return nil, err
			}
		}
	}
	if run.Status == store.StatusFinished {
		// A run finishes in the transaction that stores its last events,
		// and they were read after the record: nothing is left.
		if evs, err := f.st.Events(ctx, f.runID, f.committed, 0); err != nil {
			return nil, err
		} else {
			for _, e := range evs {
				f.committed = e.Seq
				if e.Seq > f.last {
					if err := f.deliver(Item{Seq: e.Seq, Step: e.Step, Kind: e.Kind, Data: e.Data}); err != nil {
						return nil, err
					}
				}
			}
		}
		return run, nil
	}
	return nil, nil
}

// lease reads the run's lease. When its generation is not the one last
// seen (a new driver, or a first look), what an earlier driver showed and
// never committed is void: delivery goes back to the last event read from
// the store, and the hub is dialled again.
func (f *follower) lease(ctx context.Context) (*store.Lease, error) {
	lease, err := f.st.Lease(ctx, f.runID)
	if err != nil || lease == nil || lease.Generation == f.gen {
		return lease, err
	}
	f.disconnect()
	if f.last > f.committed {
		f.last = f.committed
	}
	clear(f.ahead)
	f.gen, f.dialed = lease.Generation, false
	return lease, nil
}

// dial connects to the hub the lease announces, once per generation, when
// its driver is on this host.
func (f *follower) dial(ctx context.Context, lease *store.Lease) {
	if lease != nil && !f.dialed && lease.Owner.Live != "" && lease.Owner.Host == f.o.Host {
		f.dialed = true
		f.connect(ctx, lease.Owner.Live)
	}
}

// offer takes one live event: delivered when it is the next one, kept
// when it is ahead of a gap, dropped when it is old.
func (f *follower) offer(it Item) error {
	switch {
	case it.Seq == 0:
		if len(f.ahead) == 0 {
			return f.fn(it)
		}
		return nil
	case it.Seq <= f.last:
		return nil
	case it.Seq == f.last+1:
		if err := f.deliver(it); err != nil {
			return err
		}
		return f.flushAhead()
	}
	f.ahead[it.Seq] = it
	return nil
}

func (f *follower) deliver(it Item) error {
	f.last = it.Seq
	delete(f.ahead, it.Seq)
	return f.fn(it)
}

// flushAhead delivers the kept live events that are now next.
func (f *follower) flushAhead() error {
	for seq := range f.ahead {
		if seq <= f.last {
			delete(f.ahead, seq)
		}
	}
	for {
		it, ok := f.ahead[f.last+1]
		if !ok {
			return nil
		}
		if err := f.deliver(it); err != nil {
			return err
		}
	}
}

// drainLive takes what the stream delivered before it ended.
func (f *follower) drainLive() {
	if f.live == nil {
		return
	}
	for {
		select {
		case it := <-f.live.items:
			if f.offer(it) != nil {
				return
			}
		default:
			return
		}
	}
}

// stream is one open live connection; its goroutine, owned by the
// follower, decodes lines into items until the connection ends.
type stream struct {
	cancel context.CancelFunc
	items  chan Item
	ended  chan struct{}
	done   chan struct{}
}

func (f *follower) connect(ctx context.Context, base string) {
	ctx, cancel := context.WithCancel(ctx)
	resp, err := dial(ctx, f.o.Client, base, f.runID)
	if err != nil {
		cancel()
		// Not served: the store is read as for a driver without a hub,
		// until the next driver.
		return
	}
	s := &stream{cancel: cancel, items: make(chan Item, 256), ended: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		defer close(s.ended)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64*1024), 64<<20)
		for sc.Scan() {
			line := sc.Bytes()
			if len(line) == 0 {
				continue // a keepalive
			}
			var head struct {
				Seq  int64  `json:"seq"`
				Step int    `json:"step"`
				Kind string `json:"kind"`
			}
			if json.Unmarshal(line, &head) != nil || head.Kind == "watch_attached" {
				continue
			}
			it := Item{Seq: head.Seq, Step: head.Step, Kind: head.Kind, Data: append(json.RawMessage(nil), line...), Live: true}
			select {
			case s.items <- it:
			case <-ctx.Done():
				return
			}
		}
	}()
	f.live = s
}

func (f *follower) disconnect() {
	if f.live == nil {
		return
	}
	f.live.cancel()
	<-f.live.done
	f.live = nil
}

// String describes an item for messages.
func (it Item) String() string { return fmt.Sprintf("%s #%d (step %d)", it.Kind, it.Seq, it.Step) }

// ErrStop is returned by a callback to end [Follow] without an error:
// Follow then returns it, and the caller tells it from a failure with
// errors.Is.
var ErrStop = errors.New("watch: stopped")

// Decision waits until the approval request requestID of runID is no
// longer pending — some process decided it — and returns it. It reads the
// store every poll (zero means 250ms) and returns ctx's error when ctx
// ends first.
//
// # Errors
//
// An unknown run or request wraps store.ErrNotFound.
func Decision(ctx context.Context, st store.Reader, runID, requestID string, poll time.Duration) (*store.Approval, error) {
	if poll <= 0 {
		poll = 250 * time.Millisecond
	}
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		a, err := st.Approval(ctx, runID, requestID)
		if err != nil {
			return nil, err
		}
		if a.State != store.ApprovalPending {
			return a, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}
