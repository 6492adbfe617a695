package abi

import (
	"bytes"
	"context"
	"encoding/json"
	"runtime"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/initorigin/io-harness-go/pkg/harness/store"
)

// Attack: invalid UTF-8 in a request. Go's JSON parser accepts it
// (negative control: json.Valid says yes, and would echo or replace the
// bytes); the table refuses it as invalid_json, and its answer is valid
// UTF-8.
func TestInvalidUTF8IsInvalidJSON(t *testing.T) {
	a := New(nil)
	for _, req := range [][]byte{
		[]byte("{\"method\":\"version\",\"id\":\"\xff\xfe\"}"),
		[]byte("{\"method\":\"policy.explain\",\"params\":{\"policy\":\"default\",\"act\":\"read\",\"target\":\"a\xc3\"}}"),
		[]byte("{\"method\":\"version\",\"\xed\xa0\x80\":1}"), // a UTF-16 surrogate spelled in UTF-8
	} {
		if !json.Valid(req) {
			t.Fatalf("control: Go's parser refuses %q itself; the attack would not need the check", req)
		}
		out := a.Call(context.Background(), req)
		if !utf8.Valid(out) {
			t.Errorf("answer to %q is not UTF-8: %q", req, out)
		}
		e := decodeEnvelope(t, out)
		if e.OK || e.Error.Code != CodeInvalidJSON || !strings.Contains(e.Error.Message, "UTF-8") {
			t.Errorf("%q: %s", req, out)
		}
	}
	// The same request in valid UTF-8 is answered, its id echoed.
	e := decodeEnvelope(t, a.Call(context.Background(), []byte(`{"method":"version","id":"é"}`)))
	if !e.OK || string(e.ID) != `"é"` {
		t.Errorf("valid request: ok=%v id=%s", e.OK, e.ID)
	}
}

// Attack: a request past the documented size is refused before it is
// parsed. Negative control: one just under the limit is parsed and
// answered.
func TestMaxRequestSize(t *testing.T) {
	a := New(nil)
	build := func(n int) []byte {
		head := []byte(`{"method":"version","params":{"pad":"`)
		tail := []byte(`"}}`)
		b := make([]byte, 0, n)
		b = append(b, head...)
		b = append(b, bytes.Repeat([]byte("x"), n-len(head)-len(tail))...)
		return append(b, tail...)
	}
	if e := decodeEnvelope(t, a.Call(context.Background(), build(MaxRequestBytes))); !e.OK {
		t.Fatalf("a request of exactly the limit: %s %s", e.Error.Code, e.Error.Message)
	}
	e := decodeEnvelope(t, a.Call(context.Background(), build(MaxRequestBytes+1)))
	if e.OK || e.Error.Code != CodeInvalidArgument || e.Error.Details["max_bytes"] != float64(MaxRequestBytes) {
		t.Fatalf("one byte over: %+v", e.Error)
	}
}

// Attack: a request nested past the limit gets a message that says so
// (it said "not a JSON object"). Negative control: at the limit it is
// parsed.
func TestNestingTooDeep(t *testing.T) {
	a := New(nil)
	nest := func(n int) []byte {
		return []byte(`{"method":"version","params":{"x":` + strings.Repeat("[", n-2) + strings.Repeat("]", n-2) + `}}`)
	}
	e := decodeEnvelope(t, a.Call(context.Background(), nest(MaxDepth+1)))
	if e.OK || e.Error.Code != CodeInvalidJSON || !strings.Contains(e.Error.Message, "deep") {
		t.Errorf("too deep: %+v", e.Error)
	}
	if e := decodeEnvelope(t, a.Call(context.Background(), nest(MaxDepth))); !e.OK {
		t.Errorf("at the limit: %+v", e.Error)
	}
	// Brackets inside strings are not nesting.
	if d := depth([]byte(`{"a":"[[[[{{{{\"]]"}`)); d != 1 {
		t.Errorf("depth counted strings: %d", d)
	}
}

// PollStatus tells a timeout from an unknown handle and from a closed
// harness (io_harness_poll returned NULL for all three).
func TestPollStatus(t *testing.T) {
	a := New(nil)
	if out, st := a.PollStatus(987654, 0, 0); out != nil || st != StatusUnknownHandle {
		t.Errorf("unknown handle: %q %d", out, st)
	}
	h := handleOf(t, call(t, a, "harness.open", map[string]any{"store": ":memory:"}), "harness")
	if out, st := a.PollStatus(h, 10*time.Millisecond, 0); out != nil || st != StatusTimeout {
		t.Errorf("timeout: %q %d", out, st)
	}
	call(t, a, "debug.emit", map[string]any{"harness": h, "count": 1})
	if out, st := a.PollStatus(h, hangGuard, 0); out == nil || st != StatusOK {
		t.Errorf("events: %q %d", out, st)
	}
	if st := a.Close(h, hangGuard); st != StatusOK {
		t.Fatalf("close: %d", st)
	}
	// The harness is gone from the table, yet its handle still answers
	// "closed": once with the closed event, then with the status.
	if out, st := a.PollStatus(h, 0, 0); string(out) != `[{"kind":"closed"}]` || st != StatusOK {
		t.Errorf("first poll after close: %q %d", out, st)
	}
	if out, st := a.PollStatus(h, 0, 0); out != nil || st != StatusClosed {
		t.Errorf("poll after the closed event: %q %d", out, st)
	}
	if st := a.Cancel(h); st != StatusClosed {
		t.Errorf("cancel after close: %d", st)
	}
	if st := a.Close(h, 0); st != StatusOK {
		t.Errorf("close again: %d", st)
	}
	if e := callErr(t, a, "runs.list", map[string]any{"harness": h}); e.Code != CodeUnavailable {
		t.Errorf("a method on a closed harness: %s", e.Code)
	}
}

// Closed harnesses leave the handle table, and debug.stats sees it.
// Negative control: harnesses left open stay in the table, and the stat
// counts them.
func TestClosedHarnessesLeaveTheTable(t *testing.T) {
	a := New(nil)
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapInuse
	}
	before := heap()
	// The table alone: a store whose only used method is Close, so
	// that thousands of cycles take no SQLite time (under -race).
	const cycles = 4000
	for i := 0; i < cycles; i++ {
		h := a.openHarness(closeOnlyStore{}, defaultQueue, nil)
		if st := a.Close(h.id, hangGuard); st != StatusOK {
			t.Fatalf("close: %d", st)
		}
	}
	s := a.Stats()
	if s.HarnessEntries != 0 || s.RunEntries != 0 || s.ClosedRemembered > keepClosed {
		t.Fatalf("after %d open/close cycles: %+v", cycles, s)
	}
	// Before the fix each cycle kept the entry and its 1024-slot queue,
	// over 24 KB: 100 MB here. A handle remembered as closed costs a few
	// bytes.
	if grown := int64(heap()) - int64(before); grown > 4<<20 {
		t.Errorf("the heap grew by %d bytes over %d cycles", grown, cycles)
	}
	for i := 0; i < 100; i++ {
		h := a.openHarness(closeOnlyStore{}, defaultQueue, nil)
		t.Cleanup(func() { a.Close(h.id, time.Second) })
	}
	if s := a.Stats(); s.HarnessEntries != 100 || s.Harnesses != 100 {
		t.Errorf("control: 100 open harnesses, stats %+v", s)
	}
}

// Attack: a host answers an approval with a mistyped request id while
// the run is live. It is refused at once (it was "stored" and the typo
// stayed silent), and the right id still works.
func TestMistypedApprovalID(t *testing.T) {
	a := New(nil)
	h := openMemory(t, a)
	f := fixtureNamed(t, "approve")
	run := handleOf(t, call(t, a, "run.start", map[string]any{"harness": h, "spec": f.specFor(t)}), "run")
	hs := newHost(t, a, h)
	var pending event
	for pending.Kind == "" {
		for _, e := range pollEvents(t, a, h, 100*time.Millisecond) {
			hs.events[e.Run] = append(hs.events[e.Run], e)
			if e.Kind == KindApprovalPending {
				pending = e
			}
		}
	}
	typo := pending.RequestID[:len(pending.RequestID)-1] + "0"
	if typo == pending.RequestID {
		typo = pending.RequestID[:len(pending.RequestID)-1] + "1"
	}
	approveIt := map[string]any{"kind": "approve"}
	e := callErr(t, a, "approval.resolve", map[string]any{"harness": h, "run_id": pending.RunID, "request_id": typo, "decision": approveIt})
	if e.Code != CodeNotFound || !strings.Contains(e.Message, "no approval request") {
		t.Errorf("typo: %s %s", e.Code, e.Message)
	}
	if got := call(t, a, "approval.resolve", map[string]any{"harness": h, "run_id": pending.RunID, "request_id": pending.RequestID,
		"decision": approveIt}); got["state"] != "delivered" {
		t.Errorf("the right id: %v", got)
	}
	evs := hs.wait(run)
	if o := evs[len(evs)-1].Outcome; o == nil || o.Kind != "success" {
		t.Errorf("done %s", evs[len(evs)-1].Raw)
	}
}

// A spec may name a built-in policy, as policy.explain does. Negative
// control: an unknown name is refused naming the field.
func TestSpecNamesBuiltinPolicy(t *testing.T) {
	a := New(nil)
	h := openMemory(t, a)
	f := fixtureNamed(t, "approve") // writes config.toml: the default policy asks
	var spec map[string]any
	json.Unmarshal(f.specFor(t), &spec)
	spec["policy"] = "default"
	run := handleOf(t, call(t, a, "run.start", map[string]any{"harness": h, "spec": spec, "approvals": "deny"}), "run")
	evs := newHost(t, a, h).wait(run)
	if !containsKind(evs, "approval_requested") {
		t.Errorf("the default policy did not ask about a write: %v", kinds(evs))
	}
	spec["policy"] = "strict"
	e := callErr(t, a, "run.start", map[string]any{"harness": h, "spec": spec})
	if e.Code != CodeInvalidArgument || e.Details["field"] != "spec.policy" {
		t.Errorf("unknown name: %s %s %v", e.Code, e.Message, e.Details)
	}
}

// closeOnlyStore is a store.Store whose only method the table calls is
// Close.
type closeOnlyStore struct{ store.Store }

func (closeOnlyStore) Close() error { return nil }
