package abi

import (
	"bytes"
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/initorigin/io-harness-go/pkg/harness/store"
	"github.com/initorigin/io-harness-go/pkg/harness/telemetry"
	"github.com/initorigin/io-harness-go/pkg/harness/watch"
)

const (
	// defaultQueue is the event queue's capacity when harness.open names
	// none.
	defaultQueue = 1024
	// maxQueue bounds queue_size.
	maxQueue = 1 << 20
	// keepFinished is how many finished runs a harness remembers for
	// run.status and run.cancel; older ones are forgotten and their
	// handles become not_found.
	keepFinished = 4096
)

// closedEvent is the last thing a poller receives.
var closedEvent = []byte(`[{"kind":"closed"}]`)

// harnessEntry is one open harness: a store, the runs driven over it and
// the one event queue they all write to.
//
// Every goroutine it starts (runs, the dispatcher, debug emitters, the
// closer) is counted in wg or owned by dispMu's dispatcher, and ends when
// the harness closes.
type harnessEntry struct {
	a      *ABI
	id     uint64
	st     store.Store
	lookup func(string) (string, bool)
	// hub serves the live events of the runs driven here to watchers in
	// other processes; nil unless the harness was opened with live.
	hub *watch.Hub
	// exporters are the runs' OpenTelemetry exporters by their settings
	// (nil for settings that turn export off); closed with the harness.
	expMu     sync.Mutex
	exporters map[string]*telemetry.Exporter

	// ctx is the harness's lifecycle: every run's context derives from
	// it, and close cancels it.
	ctx    context.Context
	cancel context.CancelFunc

	events  chan []byte   // the bounded queue; producers block when it is full
	closed  chan struct{} // closed when close begins: wakes pollers and producers
	closing atomic.Bool
	// marker says the closed event was handed to a poller; the table
	// keeps it after the harness is forgotten.
	marker *atomic.Bool

	wg        sync.WaitGroup // run goroutines and debug emitters
	closeOnce sync.Once
	finished  chan struct{} // closed once every goroutine ended and the store is closed

	mu       sync.Mutex           // guards byRunID and finishes
	byRunID  map[string]*runEntry // live runs by run id
	finishes []uint64             // finished runs' handles, oldest first

	dispMu sync.Mutex           // serialises callback changes; guards disp
	disp   atomic.Pointer[disp] // the dispatcher, while a callback is registered
}

// disp is the dispatcher goroutine of a registered callback.
type disp struct {
	stop   chan struct{}
	done   chan struct{}
	thread uint64 // the OS thread it is locked to, when ThreadID is known
	known  bool
}

func (a *ABI) openHarness(st store.Store, queue int, lookup func(string) (string, bool)) *harnessEntry {
	ctx, cancel := context.WithCancel(context.Background())
	h := &harnessEntry{a: a, id: a.handle(), st: st, lookup: lookup, ctx: ctx, cancel: cancel,
		events: make(chan []byte, queue), closed: make(chan struct{}), finished: make(chan struct{}),
		byRunID: map[string]*runEntry{}, marker: new(atomic.Bool), exporters: map[string]*telemetry.Exporter{}}
	a.mu.Lock()
	a.harnesses[h.id] = h
	a.mu.Unlock()
	return h
}

// push queues one event, blocking while the queue is full: backpressure
// reaches the run that produced it. It drops the event and returns false
// once the harness is closing.
func (h *harnessEntry) push(ev []byte) bool {
	if h.closing.Load() {
		return false
	}
	select {
	case h.events <- ev:
		return true
	case <-h.closed:
		return false
	}
}

func (h *harnessEntry) poll(timeout time.Duration, max int) ([]byte, int32) {
	if h.closing.Load() {
		return h.closedOnce()
	}
	if h.disp.Load() == nil {
		// What is queued already wins over a timer that fired too.
		select {
		case first := <-h.events:
			return h.batch(first, max), StatusOK
		default:
		}
	}
	var timer <-chan time.Time
	if timeout >= 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		timer = t.C
	}
	if h.disp.Load() != nil {
		select {
		case <-h.closed:
			return h.closedOnce()
		case <-timer:
			return nil, StatusTimeout
		}
	}
	select {
	case first := <-h.events:
		return h.batch(first, max), StatusOK
	case <-h.closed:
		return h.closedOnce()
	case <-timer:
		return nil, StatusTimeout
	}
}

// batch returns first and up to max-1 more queued events as a JSON array.
func (h *harnessEntry) batch(first []byte, max int) []byte {
	var b bytes.Buffer
	b.WriteByte('[')
	b.Write(first)
	for n := 1; n < max; n++ {
		select {
		case ev := <-h.events:
			b.WriteByte(',')
			b.Write(ev)
			continue
		default:
		}
		break
	}
	b.WriteByte(']')
	return b.Bytes()
}

func (h *harnessEntry) closedOnce() ([]byte, int32) {
	if h.marker.CompareAndSwap(false, true) {
		return closedEvent, StatusOK
	}
	return nil, StatusClosed
}

// inCallback reports whether the caller runs on h's dispatcher thread,
// that is, inside h's event callback.
func (h *harnessEntry) inCallback() bool {
	d := h.disp.Load()
	if d == nil || !d.known || h.a.opts.ThreadID == nil {
		return false
	}
	return h.a.opts.ThreadID() == d.thread
}

func (h *harnessEntry) setCallback(fn func([]byte)) int32 {
	h.dispMu.Lock()
	defer h.dispMu.Unlock()
	h.stopDispatcher()
	if fn == nil {
		return StatusOK
	}
	if h.closing.Load() {
		return StatusClosed
	}
	d := &disp{stop: make(chan struct{}), done: make(chan struct{})}
	ready := make(chan struct{})
	h.a.goStart(func() {
		defer close(d.done)
		// One stable thread for every callback of this harness.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if tid := h.a.opts.ThreadID; tid != nil {
			d.thread, d.known = tid(), true
		}
		close(ready)
		for {
			select {
			case <-d.stop:
				return
			case <-h.closed:
				return
			case ev := <-h.events:
				h.deliver(fn, ev)
			}
		}
	})
	<-ready
	h.disp.Store(d)
	return StatusOK
}

// deliver calls the host's callback with one event; a panic in it (a Go
// callback in tests) is contained.
func (h *harnessEntry) deliver(fn func([]byte), ev []byte) {
	defer func() { _ = recover() }()
	fn(ev)
}

// stopDispatcher stops the dispatcher, if any, and waits until it has
// returned from its last callback. The caller holds dispMu.
func (h *harnessEntry) stopDispatcher() {
	d := h.disp.Load()
	if d == nil {
		return
	}
	close(d.stop)
	<-d.done
	h.disp.Store(nil)
}

// cancelRuns cancels every live run.
func (h *harnessEntry) cancelRuns() {
	h.a.mu.RLock()
	defer h.a.mu.RUnlock()
	for _, r := range h.a.runs {
		if r.h == h {
			r.cancel()
		}
	}
}

func (h *harnessEntry) close(timeout time.Duration) int32 {
	if h.closing.CompareAndSwap(false, true) {
		h.cancel()
		close(h.closed)
	}
	h.dispMu.Lock()
	h.stopDispatcher()
	h.dispMu.Unlock()
	h.closeOnce.Do(func() {
		// The closer: once every run and emitter has ended, close the
		// store and forget the harness and its runs. It ends with them.
		h.a.goStart(func() {
			h.wg.Wait()
			if h.hub != nil {
				h.hub.Close()
			}
			h.closeTelemetry()
			h.st.Close()
			h.a.forget(h)
			close(h.finished)
		})
	})
	if timeout < 0 {
		<-h.finished
		return StatusOK
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-h.finished:
		return StatusOK
	case <-t.C:
		return StatusTimeout
	}
}

// rememberFinished records a finished run and forgets the oldest beyond
// keepFinished.
func (h *harnessEntry) rememberFinished(r *runEntry) {
	id := r.RunID()
	h.mu.Lock()
	if h.byRunID[id] == r {
		delete(h.byRunID, id)
	}
	h.finishes = append(h.finishes, r.id)
	var drop []uint64
	if len(h.finishes) > keepFinished {
		n := len(h.finishes) - keepFinished
		drop = append(drop, h.finishes[:n]...)
		h.finishes = append(h.finishes[:0:0], h.finishes[n:]...)
	}
	h.mu.Unlock()
	if len(drop) > 0 {
		h.a.mu.Lock()
		for _, id := range drop {
			delete(h.a.runs, id)
		}
		h.a.mu.Unlock()
	}
}
