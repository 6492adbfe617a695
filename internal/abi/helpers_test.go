package abi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/initorigin/io-harness-go/pkg/harness/store"
	"github.com/initorigin/io-harness-go/pkg/harness/store/sqlite"
)

// envelope is a decoded answer.
type envelope struct {
	OK     bool            `json:"ok"`
	Result json.RawMessage `json:"result"`
	Error  *Error          `json:"error"`
	ID     json.RawMessage `json:"id"`
}

func decodeEnvelope(t testing.TB, out []byte) envelope {
	t.Helper()
	var e envelope
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		t.Fatalf("malformed envelope %s: %v", out, err)
	}
	if e.OK == (e.Error != nil) {
		t.Fatalf("envelope with ok=%v and error %v: %s", e.OK, e.Error, out)
	}
	return e
}

// call runs a method and returns its result decoded into a map, failing
// the test on an error envelope.
func call(t testing.TB, a *ABI, method string, params any) map[string]any {
	t.Helper()
	e := callEnv(t, a, method, params)
	if !e.OK {
		t.Fatalf("%s: %s: %s", method, e.Error.Code, e.Error.Message)
	}
	var m map[string]any
	if err := json.Unmarshal(e.Result, &m); err != nil {
		t.Fatalf("%s: result %s: %v", method, e.Result, err)
	}
	return m
}

// callErr runs a method that must fail and returns its error.
func callErr(t testing.TB, a *ABI, method string, params any) *Error {
	t.Helper()
	e := callEnv(t, a, method, params)
	if e.OK {
		t.Fatalf("%s succeeded with %s; want an error", method, e.Result)
	}
	return e.Error
}

func callEnv(t testing.TB, a *ABI, method string, params any) envelope {
	t.Helper()
	req, err := json.Marshal(map[string]any{"method": method, "params": params})
	if err != nil {
		t.Fatal(err)
	}
	return decodeEnvelope(t, a.Call(context.Background(), req))
}

// handleOf reads an integer handle from a result.
func handleOf(t testing.TB, m map[string]any, key string) uint64 {
	t.Helper()
	f, ok := m[key].(float64)
	if !ok || f <= 0 {
		t.Fatalf("result has no %s handle: %v", key, m)
	}
	return uint64(f)
}

func openMemory(t testing.TB, a *ABI) uint64 {
	t.Helper()
	h := handleOf(t, call(t, a, "harness.open", map[string]any{"store": ":memory:"}), "harness")
	t.Cleanup(func() { a.Close(h, 10*time.Second) })
	return h
}

// event is the part of an event the tests look at.
type event struct {
	Kind      string          `json:"kind"`
	Run       uint64          `json:"run"`
	RunID     string          `json:"run_id"`
	Seq       int64           `json:"seq"`
	Status    string          `json:"status"`
	RequestID string          `json:"request_id"`
	Outcome   *outcome        `json:"outcome"`
	Error     *Error          `json:"error"`
	N         int             `json:"n"`
	Raw       json.RawMessage `json:"-"`
}

type outcome struct {
	Kind      string `json:"kind"`
	Steps     int    `json:"steps"`
	RequestID string `json:"request_id"`
}

// pollEvents polls h once and decodes the batch.
func pollEvents(t testing.TB, a *ABI, h uint64, timeout time.Duration) []event {
	t.Helper()
	out := a.Poll(h, timeout, 1000)
	if out == nil {
		return nil
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(out, &raws); err != nil {
		t.Fatalf("poll returned %s: %v", out, err)
	}
	evs := make([]event, len(raws))
	for i, r := range raws {
		if err := json.Unmarshal(r, &evs[i]); err != nil {
			t.Fatalf("event %s: %v", r, err)
		}
		evs[i].Raw = r
	}
	return evs
}

// host drives runs of one harness the way a binding does: it polls,
// answers approvals with answer (when set) and collects each run's events
// until its done event.
type host struct {
	t      testing.TB
	a      *ABI
	h      uint64
	answer json.RawMessage
	events map[uint64][]event // by run handle
}

func newHost(t testing.TB, a *ABI, h uint64) *host {
	return &host{t: t, a: a, h: h, events: map[uint64][]event{}}
}

// hangGuard bounds a wait only so that a hung test fails instead of
// hanging: it is far beyond what any wait here takes, however loaded the
// machine, and no test judges a duration by it.
const hangGuard = 2 * time.Minute

// wait polls until run has its done event, or fails after hangGuard.
func (hs *host) wait(run uint64) []event {
	hs.t.Helper()
	limit := hangGuard
	deadline := time.Now().Add(limit)
	for {
		evs := hs.events[run]
		if n := len(evs); n > 0 && evs[n-1].Kind == KindDone {
			return evs
		}
		if time.Now().After(deadline) {
			hs.t.Fatalf("run %d: no done event within %s; got %v", run, limit, kinds(evs))
		}
		for _, e := range pollEvents(hs.t, hs.a, hs.h, 100*time.Millisecond) {
			if e.Kind == KindClosed {
				hs.t.Fatalf("harness closed while waiting for run %d", run)
			}
			if e.Kind == KindApprovalPending && hs.answer != nil {
				call(hs.t, hs.a, "approval.resolve", map[string]any{"harness": hs.h, "run_id": e.RunID,
					"request_id": e.RequestID, "decision": hs.answer})
			}
			hs.events[e.Run] = append(hs.events[e.Run], e)
		}
	}
}

func kinds(evs []event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Kind
	}
	return out
}

// fixture is one directory of testdata/fixtures.
type fixture struct {
	name    string
	spec    string // with $WORKSPACE still in it
	approve json.RawMessage
	resume  json.RawMessage
	golden  string
}

func loadFixtures(t testing.TB) []fixture {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join("testdata", "fixtures", "*", "spec.json"))
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	sort.Strings(dirs)
	var out []fixture
	for _, p := range dirs {
		dir := filepath.Dir(p)
		f := fixture{name: filepath.Base(dir), golden: filepath.Join(dir, "events.golden")}
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		f.spec = string(data)
		if data, err := os.ReadFile(filepath.Join(dir, "approve.json")); err == nil {
			f.approve = bytes.TrimSpace(data)
		}
		if data, err := os.ReadFile(filepath.Join(dir, "resume.json")); err == nil {
			f.resume = bytes.TrimSpace(data)
		}
		out = append(out, f)
	}
	return out
}

// specFor returns the fixture's spec with a fresh workspace.
func (f *fixture) specFor(t testing.TB) json.RawMessage {
	t.Helper()
	ws := t.TempDir()
	quoted, _ := json.Marshal(ws)
	return json.RawMessage(strings.ReplaceAll(f.spec, `"$WORKSPACE"`, string(quoted)))
}

// play runs the fixture on a fresh in-memory harness and returns the
// kinds of every event of its runs.
func (f *fixture) play(t testing.TB, a *ABI) []string {
	t.Helper()
	h := openMemory(t, a)
	hs := newHost(t, a, h)
	hs.answer = f.approve
	spec := f.specFor(t)
	res := call(t, a, "run.start", map[string]any{"harness": h, "spec": spec})
	run := handleOf(t, res, "run")
	evs := hs.wait(run)
	got := kinds(evs)
	last := evs[len(evs)-1]
	if f.resume != nil {
		if last.Outcome == nil || last.Outcome.Kind != "awaiting_approval" {
			t.Fatalf("fixture %s: first run ended %+v, want awaiting_approval", f.name, last)
		}
		res := call(t, a, "run.resume_with_decision", map[string]any{"harness": h, "run_id": last.RunID,
			"request_id": last.Outcome.RequestID, "decision": f.resume, "spec": spec})
		evs := hs.wait(handleOf(t, res, "run"))
		got = append(got, kinds(evs)...)
	}
	return got
}

func readGolden(t testing.TB, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	return strings.Fields(string(data))
}

func writeGolden(t testing.TB, path string, kinds []string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(strings.Join(kinds, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// waitFor polls cond every few milliseconds until it holds or hangGuard
// passes.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	limit := hangGuard
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", limit, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprint(err))
	}
	return b
}

func mustMemoryStore(t testing.TB) store.Store {
	t.Helper()
	st, err := sqlite.OpenMemory(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st
}
