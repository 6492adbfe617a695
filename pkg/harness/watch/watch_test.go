package watch

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/initorigin/io-harness-go/pkg/harness/store"
	"github.com/initorigin/io-harness-go/pkg/harness/store/sqlite"
)

// fakeRun is a Source: events not yet in the store are kept in pending.
type fakeRun struct {
	mu      sync.Mutex
	pending [][]byte
	hub     *Hub
	id      string
}

func (f *fakeRun) Attach(attach func()) [][]byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	attach()
	return append([][]byte(nil), f.pending...)
}

// emit publishes one event and keeps it pending, as a driver does.
func (f *fakeRun) emit(seq int64, step int, kind string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	data := fmt.Appendf(nil, `{"run_id":%q,"seq":%d,"step":%d,"kind":%q}`, f.id, seq, step, kind)
	if seq != 0 {
		f.pending = append(f.pending, data)
	}
	if f.hub.Wants(f.id) {
		f.hub.Publish(f.id, data)
	}
}

// commit moves the pending events to the store.
func (f *fakeRun) commit(t *testing.T, st store.Store, l *store.Lease, step int) {
	t.Helper()
	f.mu.Lock()
	var evs []store.Event
	for _, data := range f.pending {
		var h struct {
			Seq  int64  `json:"seq"`
			Step int    `json:"step"`
			Kind string `json:"kind"`
		}
		json.Unmarshal(data, &h)
		evs = append(evs, store.Event{Seq: h.Seq, Step: h.Step, Kind: h.Kind, At: time.Now(), Data: data})
	}
	f.pending = nil
	f.mu.Unlock()
	err := st.CommitStep(context.Background(), l, &store.Commit{Step: store.Step{RunID: f.id, Step: step, StartedAt: time.Now(), FinishedAt: time.Now()}, Events: evs})
	if err != nil {
		t.Fatal(err)
	}
}

func listen(t *testing.T, opts *HubOptions) *Hub {
	t.Helper()
	h, err := Listen(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

func memStore(t *testing.T) store.Store {
	t.Helper()
	st, err := sqlite.OpenMemory(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// collector gathers what Follow delivers.
type collector struct {
	mu    sync.Mutex
	items []Item
	more  chan struct{}
}

func newCollector() *collector { return &collector{more: make(chan struct{}, 1)} }

func (c *collector) add(it Item) error {
	c.mu.Lock()
	c.items = append(c.items, it)
	c.mu.Unlock()
	select {
	case c.more <- struct{}{}:
	default:
	}
	return nil
}

// waitFor waits until ok holds for the items; the deadline only catches a
// hang, it measures nothing.
func (c *collector) waitFor(t *testing.T, what string, ok func([]Item) bool) {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		c.mu.Lock()
		done := ok(c.items)
		c.mu.Unlock()
		if done {
			return
		}
		select {
		case <-c.more:
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			c.mu.Lock()
			defer c.mu.Unlock()
			t.Fatalf("never saw %s; saw %v", what, c.items)
		}
	}
}

func (c *collector) seqs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, it := range c.items {
		out = append(out, fmt.Sprintf("%d:%s", it.Seq, it.Kind))
	}
	return out
}

func has(kind string, seq int64) func([]Item) bool {
	return func(items []Item) bool {
		for _, it := range items {
			if it.Kind == kind && it.Seq == seq {
				return true
			}
		}
		return false
	}
}

// A watcher sees the step under way as it happens — events the store does
// not hold yet, model deltas included — then the committed ones, each
// once and in order, and stops when the run finishes. The control: the
// store alone, which is all a watcher without the hub has, holds none of
// the step under way.
func TestFollowSeesTheStepUnderWay(t *testing.T) {
	st := memStore(t)
	hub := listen(t, nil)
	run := &fakeRun{hub: hub, id: "r1"}
	defer hub.Serve("r1", run)()
	owner := store.Self()
	owner.Live = hub.URL()
	run.emit(1, 0, "run_started")
	l, err := st.CreateRun(context.Background(), &store.Run{ID: "r1", Task: json.RawMessage(`{}`), StartedAt: time.Now()}, nil, owner, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	run.emit(2, 1, "step_started") // before the watcher attaches: from the backlog
	c := newCollector()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := Follow(ctx, st, "r1", &FollowOptions{Poll: 20 * time.Millisecond}, c.add)
		done <- err
	}()
	c.waitFor(t, "the backlog's step_started", has("step_started", 2))
	run.emit(0, 1, "model_delta")
	run.emit(3, 1, "model_done")
	c.waitFor(t, "model_done, live", has("model_done", 3))
	// The control: nothing of step 1 is in the store yet.
	if evs, _ := st.Events(context.Background(), "r1", 1, 0); len(evs) != 0 {
		t.Fatalf("the store already holds step 1: %v", evs)
	}
	run.emit(4, 1, "checkpoint")
	run.commit(t, st, l, 1)
	run.emit(5, 1, "outcome")
	f := &store.Finish{RunID: "r1", Status: store.StatusFinished, Outcome: "success", OutcomeJSON: json.RawMessage(`{"kind":"success"}`), At: time.Now()}
	f.Events = []store.Event{{Seq: 5, Step: 1, Kind: "outcome", At: time.Now(), Data: json.RawMessage(`{"seq":5,"step":1,"kind":"outcome"}`)}}
	run.mu.Lock()
	run.pending = nil
	run.mu.Unlock()
	if err := st.FinishRun(context.Background(), l, f); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	want := []string{"1:run_started", "2:step_started", "0:model_delta", "3:model_done", "4:checkpoint", "5:outcome"}
	if diff := cmp.Diff(want, c.seqs()); diff != "" {
		t.Errorf("delivered (-want +got):\n%s", diff)
	}
	for _, it := range c.items {
		if it.Seq >= 2 && it.Seq <= 3 && !it.Live {
			t.Errorf("%v came from the store, not live", it)
		}
	}
}

// A live event ahead of one the watcher has not seen waits for it: the
// step's earlier events were neither pending nor stored when the watcher
// attached (between the driver's take and its commit), and arrive later
// from the store, before the event that followed them.
func TestFollowWaitsAcrossAGap(t *testing.T) {
	st := memStore(t)
	hub := listen(t, nil)
	run := &fakeRun{hub: hub, id: "r"}
	defer hub.Serve("r", run)()
	owner := store.Self()
	owner.Live = hub.URL()
	l, err := st.CreateRun(context.Background(), &store.Run{ID: "r", Task: json.RawMessage(`{}`), StartedAt: time.Now()},
		[]store.Event{{Seq: 1, Kind: "run_started", At: time.Now(), Data: json.RawMessage(`{"seq":1,"kind":"run_started"}`)}}, owner, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	// Events 2 and 3 are taken for a commit that has not landed: the
	// watcher can get them from neither the hub nor the store.
	run.emit(2, 1, "step_started")
	run.emit(3, 1, "checkpoint")
	run.mu.Lock()
	taken := run.pending
	run.pending = nil
	run.mu.Unlock()

	c := newCollector()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go Follow(ctx, st, "r", &FollowOptions{Poll: 20 * time.Millisecond}, c.add)
	c.waitFor(t, "run_started", has("run_started", 1))
	for !hub.Wants("r") {
		time.Sleep(5 * time.Millisecond)
	}
	run.emit(4, 2, "step_started")
	run.emit(0, 2, "model_delta") // while 2 and 3 are missing: dropped
	run.mu.Lock()
	run.pending = append(taken, run.pending...)
	run.mu.Unlock()
	run.commit(t, st, l, 1)
	c.waitFor(t, "step 2's start", has("step_started", 4))
	if diff := cmp.Diff([]string{"1:run_started", "2:step_started", "3:checkpoint", "4:step_started"}, c.seqs()); diff != "" {
		t.Errorf("delivered (-want +got):\n%s", diff)
	}
}

// When a driver dies mid-step and another resumes the run, the events the
// first showed and never committed are void: the watcher delivers the
// second driver's events under the same numbers.
func TestFollowRewindsForANewDriver(t *testing.T) {
	st := memStore(t)
	hub := listen(t, nil)
	run := &fakeRun{hub: hub, id: "r"}
	stop := hub.Serve("r", run)
	owner := store.Self()
	owner.Live = hub.URL()
	_, err := st.CreateRun(context.Background(), &store.Run{ID: "r", Task: json.RawMessage(`{}`), StartedAt: time.Now()},
		[]store.Event{{Seq: 1, Kind: "run_started", At: time.Now(), Data: json.RawMessage(`{"seq":1,"kind":"run_started"}`)}}, owner, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	c := newCollector()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go Follow(ctx, st, "r", &FollowOptions{Poll: 20 * time.Millisecond}, c.add)
	c.waitFor(t, "run_started", has("run_started", 1))
	for !hub.Wants("r") {
		time.Sleep(5 * time.Millisecond)
	}
	run.emit(2, 1, "step_started")
	run.emit(3, 1, "tool_call")
	c.waitFor(t, "the first driver's tool_call", has("tool_call", 3))
	stop() // the first driver dies

	second := &fakeRun{hub: hub, id: "r"}
	defer hub.Serve("r", second)()
	l2, err := st.Acquire(context.Background(), "r", owner, time.Minute, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	second.emit(2, 1, "run_resumed")
	second.emit(3, 1, "step_started")
	second.commit(t, st, l2, 1)
	c.waitFor(t, "the second driver's step_started", has("step_started", 3))
	want := []string{"1:run_started", "2:step_started", "3:tool_call", "2:run_resumed", "3:step_started"}
	if diff := cmp.Diff(want, c.seqs()); diff != "" {
		t.Errorf("delivered (-want +got):\n%s", diff)
	}
}

// The hub's URL is a capability: a request without its token gets nothing.
// The control is the same request with the token, which gets the stream.
func TestHubRefusesAWrongToken(t *testing.T) {
	hub := listen(t, nil)
	run := &fakeRun{hub: hub, id: "r"}
	defer hub.Serve("r", run)()
	run.emit(1, 0, "run_started")
	base := hub.URL()
	wrong := base[:strings.LastIndex(base, "/")+1] + strings.Repeat("0", 64)
	for _, tc := range []struct {
		name, base string
		status     int
	}{
		{"wrong token", wrong, http.StatusForbidden},
		{"no token", strings.TrimSuffix(wrong, strings.Repeat("0", 64)), http.StatusNotFound},
		{"the token (control)", base, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, liveURL(tc.base, "r"), nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
			}
			br := bufio.NewReader(resp.Body)
			line, _ := br.ReadString('\n')
			if tc.status == http.StatusOK {
				line, _ = br.ReadString('\n') // after watch_attached
				if !strings.Contains(line, "run_started") {
					t.Errorf("the control got %q", line)
				}
			} else if strings.Contains(line, "run_started") {
				t.Errorf("a refused request got an event: %q", line)
			}
		})
	}
}

// A watcher that connects and never reads cannot hold the run up: once
// its queue is full it is cut off and publishing goes on. The control is
// the same hub publishing with back-pressure (block), where the stalled
// watcher stops the publisher until its connection is closed.
func TestStalledWatcherDoesNotBlockTheRun(t *testing.T) {
	for _, block := range []bool{false, true} {
		t.Run(fmt.Sprintf("block=%v", block), func(t *testing.T) {
			hub := listen(t, &HubOptions{Queue: 16, WriteTimeout: time.Hour})
			hub.block = block
			run := &fakeRun{hub: hub, id: "r"}
			defer hub.Serve("r", run)()
			// A raw connection that sends its request and reads nothing.
			u := strings.TrimPrefix(liveURL(hub.URL(), "r"), "http://")
			addr, path, _ := strings.Cut(u, "/")
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			fmt.Fprintf(conn, "GET /%s HTTP/1.1\r\nHost: %s\r\n\r\n", path, addr)
			for !hub.Wants("r") {
				time.Sleep(5 * time.Millisecond)
			}
			// 32 MiB: more than a socket's buffers hold.
			payload := strings.Repeat("x", 64<<10)
			const n = 512
			var published atomic.Int64
			done := make(chan struct{})
			go func() {
				defer close(done)
				for i := range n {
					hub.Publish("r", fmt.Appendf(nil, `{"seq":%d,"kind":"tool_result","output":%q}`, i+1, payload))
					published.Add(1)
				}
			}()
			if !block {
				select {
				case <-done:
				case <-time.After(60 * time.Second):
					t.Fatalf("the publisher is stuck behind a stalled watcher after %d events", published.Load())
				}
				if hub.Wants("r") {
					t.Error("the stalled watcher was not cut off")
				}
				return
			}
			// The control: the publisher stalls with the watcher, and goes
			// on only once the connection is gone.
			stalled := false
			for range 600 {
				select {
				case <-done:
					t.Fatalf("with back-pressure the publisher finished past a watcher that reads nothing")
				case <-time.After(100 * time.Millisecond):
				}
				before := published.Load()
				time.Sleep(100 * time.Millisecond)
				if published.Load() == before && before < n {
					stalled = true
					break
				}
			}
			if !stalled {
				t.Fatal("the control never stalled")
			}
			conn.Close()
			select {
			case <-done:
			case <-time.After(60 * time.Second):
				t.Fatal("the publisher did not go on after the watcher went away")
			}
		})
	}
}

// A watcher that goes away mid-stream is forgotten; the run goes on.
func TestWatcherGoingAwayIsForgotten(t *testing.T) {
	hub := listen(t, nil)
	run := &fakeRun{hub: hub, id: "r"}
	defer hub.Serve("r", run)()
	ctx, cancel := context.WithCancel(context.Background())
	resp, err := dial(ctx, http.DefaultClient, hub.URL(), "r")
	if err != nil {
		t.Fatal(err)
	}
	run.emit(1, 0, "run_started")
	br := bufio.NewReader(resp.Body)
	br.ReadString('\n')
	if line, _ := br.ReadString('\n'); !strings.Contains(line, "run_started") {
		t.Fatalf("got %q", line)
	}
	cancel()
	resp.Body.Close()
	for i := 2; hub.Wants("r"); i++ {
		run.emit(int64(i), 1, "tool_call") // a write to the closed connection fails
		time.Sleep(time.Millisecond)
		if i > 100000 {
			t.Fatal("the hub never noticed the watcher left")
		}
	}
	// Closing the hub ends every goroutine it started.
	if err := hub.Close(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		t.Fatal(err)
	}
}

// A run the hub does not serve is a 404, which a watcher takes as "read
// the store".
func TestHubNotServed(t *testing.T) {
	hub := listen(t, nil)
	if _, err := dial(context.Background(), http.DefaultClient, hub.URL(), "nobody"); !errors.Is(err, errNotServed) {
		t.Fatalf("got %v", err)
	}
	resp, err := http.Get(strings.TrimSuffix(hub.URL(), "/") + "/elsewhere")
	if err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("an unknown path: %s", resp.Status)
		}
	}
}
