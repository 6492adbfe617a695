// Package watch carries a run's events to other processes as they
// happen, before their step commits.
//
// The store holds a run's events once their step has committed; a step
// can take minutes. A driver that wants to be watched serves its runs'
// events from a [Hub]: a listener on the loopback interface whose URL,
// with an access token in it, the driver announces in the run's lease
// (store.Owner.Live). A watcher ([Follow]) reads the committed events from
// the store and, when the driver runs on its host, the rest from the hub,
// and delivers each event once, in order.
//
// The hub never slows the run it serves: publishing is a non-blocking
// send to each watcher's bounded queue, and a watcher that falls behind
// or stops reading is cut off (it catches up from the store and connects
// again). A watcher that goes away costs the run nothing.
//
// The package knows events only as JSON objects with "seq", "step" and
// "kind" fields (docs/abi.md, "Events"); the harness encodes them.
package watch

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// A Source is a run a hub serves.
type Source interface {
	// Attach calls attach while no event of the run can be published,
	// and returns the run's events that are not yet in the store, each
	// encoded, in order. A watcher that attaches mid-step thus starts
	// from the first event the store does not hold.
	Attach(attach func()) [][]byte
}

// Hub serves the events of the runs a process drives to watchers in other
// processes on the same host. It is safe for concurrent use.
//
// A hub owns one goroutine, its HTTP server, and one goroutine per
// watcher connection; Close ends them all.
type Hub struct {
	ln    net.Listener
	srv   *http.Server
	url   string
	token string

	// queue is each watcher's queue, in events; one that fills is cut
	// off. writeTimeout bounds one write to a watcher that has stopped
	// reading. block makes Publish wait for room instead (tests only:
	// it is the unprotected hub the negative controls run).
	queue        int
	writeTimeout time.Duration
	block        bool

	mu      sync.RWMutex // guards runs, subs and closed
	runs    map[string]Source
	subs    map[string]map[*sub]struct{} // by run id; "" is every run
	closed  bool
	served  sync.WaitGroup // the server goroutine
	handles sync.WaitGroup // watcher connections
}

// sub is one watcher connection.
type sub struct {
	ch   chan []byte
	gone chan struct{} // closed when the hub drops the watcher
	once sync.Once
}

func (s *sub) drop() { s.once.Do(func() { close(s.gone) }) }

// HubOptions configures [Listen]; the zero value is the default.
type HubOptions struct {
	// Queue is how many events a watcher may fall behind before it is
	// cut off; zero means 4096.
	Queue int
	// WriteTimeout bounds a write to a watcher that does not read; zero
	// means 10s.
	WriteTimeout time.Duration
}

// Listen starts a hub on an ephemeral port of 127.0.0.1. Its URL holds a
// fresh random token: a connection that does not present it is refused,
// so another local user who cannot read the store cannot watch.
func Listen(opts *HubOptions) (*Hub, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("watch: listen on the loopback interface: %w", err)
	}
	var b [32]byte
	rand.Read(b[:])
	h := &Hub{ln: ln, token: hex.EncodeToString(b[:]), queue: 4096, writeTimeout: 10 * time.Second,
		runs: map[string]Source{}, subs: map[string]map[*sub]struct{}{}}
	if opts != nil {
		if opts.Queue > 0 {
			h.queue = opts.Queue
		}
		if opts.WriteTimeout > 0 {
			h.writeTimeout = opts.WriteTimeout
		}
	}
	h.url = "http://" + ln.Addr().String() + "/live/" + h.token
	mux := http.NewServeMux()
	mux.HandleFunc("GET /live/{token}/runs/{run}/events", h.serveRun)
	mux.HandleFunc("GET /live/{token}/events", h.serveRun)
	h.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	h.served.Add(1)
	go func() {
		defer h.served.Done()
		h.srv.Serve(ln)
	}()
	return h, nil
}

// URL is the hub's address, with its token: what a driver announces in a
// run's lease. It is a capability: whoever has it may watch every run the
// hub serves.
func (h *Hub) URL() string { return h.url }

// AllURL is the address of every run's events, from the moment a watcher
// connects: the stream a tree's watcher or a dashboard reads.
func (h *Hub) AllURL() string { return h.url + "/events" }

// Serve makes the hub serve runID's events, from src, until stop is
// called. A watcher that asks for a run the hub does not serve is told
// so (404) and reads the store.
func (h *Hub) Serve(runID string, src Source) (stop func()) {
	h.mu.Lock()
	h.runs[runID] = src
	h.mu.Unlock()
	return func() {
		h.mu.Lock()
		if h.runs[runID] == src {
			delete(h.runs, runID)
		}
		for s := range h.subs[runID] {
			s.drop()
		}
		delete(h.subs, runID)
		h.mu.Unlock()
	}
}

// Wants reports whether a watcher follows runID now: the run encodes its
// events for the hub only then.
func (h *Hub) Wants(runID string) bool {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return len(h.subs[runID]) > 0 || len(h.subs[""]) > 0
}

// Publish hands one encoded event of runID to its watchers. It never
// blocks: a watcher whose queue is full is cut off.
func (h *Hub) Publish(runID string, data []byte) {
	h.mu.RLock()
	var full []*sub
	for _, key := range [2]string{runID, ""} {
		for s := range h.subs[key] {
			if h.block {
				select {
				case s.ch <- data:
				case <-s.gone:
				}
				continue
			}
			select {
			case s.ch <- data:
			default:
				full = append(full, s)
			}
		}
	}
	h.mu.RUnlock()
	if len(full) > 0 {
		h.mu.Lock()
		for _, s := range full {
			h.remove(s)
		}
		h.mu.Unlock()
	}
}

// remove drops a watcher. The caller holds mu.
func (h *Hub) remove(s *sub) {
	for key, set := range h.subs {
		if _, ok := set[s]; ok {
			delete(set, s)
			if len(set) == 0 {
				delete(h.subs, key)
			}
		}
	}
	s.drop()
}

// Close stops the hub: its listener, every watcher connection, and the
// goroutines that served them. It is idempotent.
func (h *Hub) Close() error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	for _, set := range h.subs {
		for s := range set {
			s.drop()
		}
	}
	h.subs = map[string]map[*sub]struct{}{}
	h.mu.Unlock()
	err := h.srv.Close()
	h.served.Wait()
	h.handles.Wait()
	return err
}

// serveRun streams one run's events as JSON lines: first the events the
// store does not hold yet, then each event as it is published.
func (h *Hub) serveRun(w http.ResponseWriter, r *http.Request) {
	if subtle.ConstantTimeCompare([]byte(r.PathValue("token")), []byte(h.token)) != 1 {
		http.Error(w, "watch: wrong token", http.StatusForbidden)
		return
	}
	// Without a run in the path, the watcher follows every run the hub
	// serves from now on, with no backlog.
	runID := r.PathValue("run")
	h.mu.Lock()
	src, ok := h.runs[runID]
	if runID == "" {
		src, ok = nobacklog{}, true
	}
	if h.closed || !ok {
		h.mu.Unlock()
		http.Error(w, "watch: this process does not drive run "+runID, http.StatusNotFound)
		return
	}
	h.handles.Add(1)
	h.mu.Unlock()
	defer h.handles.Done()

	s := &sub{ch: make(chan []byte, h.queue), gone: make(chan struct{})}
	backlog := src.Attach(func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.closed {
			s.drop()
			return
		}
		if h.subs[runID] == nil {
			h.subs[runID] = map[*sub]struct{}{}
		}
		h.subs[runID][s] = struct{}{}
	})
	defer func() {
		s.drop() // first: a publisher waiting on this watcher lets go
		h.mu.Lock()
		h.remove(s)
		h.mu.Unlock()
	}()

	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	// Events are written as lines and flushed once per batch: whatever is
	// queued when the watcher is written to goes in one write.
	var buf []byte
	flush := func() bool {
		rc.SetWriteDeadline(time.Now().Add(h.writeTimeout))
		_, err := w.Write(buf)
		buf = buf[:0]
		return err == nil && rc.Flush() == nil
	}
	add := func(data []byte) { buf = append(append(buf, data...), '\n') }
	// drain adds what else is queued, up to a batch's worth.
	drain := func() {
		for len(buf) < 1<<20 {
			select {
			case data := <-s.ch:
				add(data)
			default:
				return
			}
		}
	}
	add([]byte(`{"kind":"watch_attached"}`))
	for _, data := range backlog {
		add(data)
	}
	if !flush() {
		return
	}
	keepalive := time.NewTicker(15 * time.Second)
	defer keepalive.Stop()
	// After an event, the hub waits flushEvery before it writes: the run's
	// events then reach the watcher a few at a time, and the run wakes
	// nobody per event. The queue holds what comes meanwhile.
	batch := time.NewTimer(time.Hour)
	batch.Stop()
	defer batch.Stop()
	for {
		select {
		case data := <-s.ch:
			// The events that follow wait in the queue, waking nobody,
			// until the batch is written.
			add(data)
			batch.Reset(flushEvery)
			select {
			case <-batch.C:
			case <-s.gone:
				batch.Stop()
			case <-r.Context().Done():
				return
			}
			for {
				drain()
				if len(buf) == 0 {
					break
				}
				if !flush() {
					return
				}
			}
		case <-keepalive.C:
			add(nil)
			if !flush() {
				return
			}
		case <-s.gone:
			// Cut off (it fell behind) or the run ended: what was queued
			// is still sent, so that a run's last events arrive.
			for {
				drain()
				if len(buf) == 0 || !flush() {
					return
				}
			}
		case <-r.Context().Done():
			return
		}
	}
}

// nobacklog is the source of a watcher of every run: it starts now.
type nobacklog struct{}

func (nobacklog) Attach(attach func()) [][]byte { attach(); return nil }

// flushEvery is how long a hub gathers events before it writes them to a
// watcher: short beside a person's eye, long beside a step's events.
const flushEvery = 20 * time.Millisecond

// errNotServed is a hub that does not (or no longer) serves the run.
var errNotServed = errors.New("watch: the driver does not serve this run's live events")

// liveURL returns the URL of runID's events on the hub at base.
func liveURL(base, runID string) string {
	return strings.TrimRight(base, "/") + "/runs/" + runID + "/events"
}

// dial opens runID's live stream at the hub base and returns its body.
func dial(ctx context.Context, client *http.Client, base, runID string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, liveURL(base, runID), nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		if resp.StatusCode == http.StatusNotFound {
			return nil, errNotServed
		}
		return nil, fmt.Errorf("watch: %s: %s", liveURL("http://driver", runID), resp.Status)
	}
	return resp, nil
}
