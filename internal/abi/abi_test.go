package abi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/initorigin/io-harness-go/pkg/harness"
	"github.com/initorigin/io-harness-go/pkg/harness/approve"
	"github.com/initorigin/io-harness-go/pkg/harness/policy"
	"github.com/initorigin/io-harness-go/pkg/harness/store"
	"github.com/initorigin/io-harness-go/pkg/sandbox"
)

func TestErrorTable(t *testing.T) {
	for _, tc := range []struct {
		name      string
		err       error
		code      Code
		retryable bool
	}{
		{"canceled", context.Canceled, CodeCancelled, false},
		{"deadline", fmt.Errorf("wrapped: %w", context.DeadlineExceeded), CodeDeadlineExceeded, true},
		{"handle", fmt.Errorf("%w: no harness 7", errNotFound), CodeNotFound, false},
		{"unknown run", &harness.Error{Kind: harness.ErrResume, Err: store.ErrNotFound}, CodeNotFound, false},
		{"unknown request", &harness.Error{Kind: harness.ErrResume, Err: approve.ErrUnknownRequest}, CodeNotFound, false},
		{"already decided", &harness.Error{Kind: harness.ErrResume, Err: approve.ErrAlreadyDecided}, CodeConflict, false},
		{"mismatch", &harness.Error{Kind: harness.ErrResume, Err: approve.ErrMismatch}, CodeConflict, false},
		// Another driver holds the run: a host that obeys retryable must
		// not start a third.
		{"store conflict", &harness.Error{Kind: harness.ErrState, Err: store.ErrConflict}, CodeConflict, false},
		{"lease held", &harness.Error{Kind: harness.ErrConflict, Err: &store.LeaseError{RunID: "r"}}, CodeConflict, false},
		{"store unavailable", &harness.Error{Kind: harness.ErrUnavailable, Err: store.ErrUnavailable}, CodeUnavailable, false},
		{"abi conflict", fmt.Errorf("%w: busy", errConflict), CodeConflict, false},
		{"closed", fmt.Errorf("%w: harness 3", errClosed), CodeUnavailable, false},
		{"refused", &harness.Error{Kind: harness.ErrRefused, Message: "net deny"}, CodePermissionDenied, false},
		{"config", &harness.Error{Kind: harness.ErrConfig, Field: "task.goal"}, CodeInvalidArgument, false},
		{"invalid", fmt.Errorf("%w: params.x", errInvalid), CodeInvalidArgument, false},
		{"sandbox invalid", &sandbox.Error{Kind: sandbox.ErrInvalid, Step: "argv"}, CodeInvalidArgument, false},
		{"policy", &policy.Error{Field: "defaults.read", Reason: "bad"}, CodeInvalidArgument, false},
		{"resume corrupt", &harness.Error{Kind: harness.ErrResume, Err: store.ErrCorrupt}, CodeUnavailable, false},
		{"resume other", &harness.Error{Kind: harness.ErrResume, Message: "final"}, CodeInvalidArgument, false},
		{"provider", &harness.Error{Kind: harness.ErrProvider}, CodeUnavailable, true},
		{"state", &harness.Error{Kind: harness.ErrState}, CodeUnavailable, true},
		{"io", &harness.Error{Kind: harness.ErrIO}, CodeUnavailable, false},
		{"sandbox kind", &harness.Error{Kind: harness.ErrSandbox}, CodeUnavailable, false},
		{"mcp", &harness.Error{Kind: harness.ErrMCP}, CodeUnavailable, true},
		{"sandbox unavailable", &sandbox.Error{Kind: sandbox.ErrUnavailable, Backend: "bwrap"}, CodeUnavailable, false},
		{"sandbox setup", &sandbox.Error{Kind: sandbox.ErrSetup}, CodeUnavailable, true},
		{"sandbox apply", &sandbox.Error{Kind: sandbox.ErrApply, Err: syscall.ENOSPC}, CodeUnavailable, false},
		{"store closed", store.ErrClosed, CodeUnavailable, false},
		{"too new", store.ErrTooNew, CodeUnavailable, false},
		{"anything else", errors.New("boom"), CodeInternal, false},
		{"already an Error", &Error{Code: CodeABIMismatch, Message: "x"}, CodeABIMismatch, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ErrorOf(tc.err)
			if got.Code != tc.code || got.Retryable != tc.retryable {
				t.Errorf("ErrorOf(%v) = %s retryable=%v; want %s retryable=%v", tc.err, got.Code, got.Retryable, tc.code, tc.retryable)
			}
			if got.Message == "" {
				t.Error("empty message")
			}
		})
	}
}

// Every code of the table is one of Codes(), and every code can be
// produced by some error.
func TestCodesAreClosed(t *testing.T) {
	known := map[Code]bool{}
	for _, c := range Codes() {
		known[c] = true
	}
	for _, m := range table {
		if !known[m.code] {
			t.Errorf("table maps to %q, which is not in Codes()", m.code)
		}
	}
	if len(known) != 11 {
		t.Errorf("%d codes; docs/abi.md lists 11", len(known))
	}
}

func TestErrorDetails(t *testing.T) {
	got := ErrorOf(&harness.Error{Kind: harness.ErrConfig, Field: "task.goal", Message: "required"})
	want := map[string]any{"kind": "config", "field": "task.goal"}
	if diff := cmp.Diff(want, got.Details); diff != "" {
		t.Errorf("details (-want +got):\n%s", diff)
	}
	got = ErrorOf(&sandbox.Error{Kind: sandbox.ErrSetup, Backend: "linux-ns", Step: "spawn"})
	want = map[string]any{"backend": "linux-ns", "step": "spawn"}
	if diff := cmp.Diff(want, got.Details); diff != "" {
		t.Errorf("details (-want +got):\n%s", diff)
	}
}

func TestEnvelope(t *testing.T) {
	a := New(nil)
	for _, tc := range []struct {
		name   string
		req    string
		ok     bool
		code   Code
		wantID string
	}{
		{"version", `{"method":"version"}`, true, "", ""},
		{"id echoed", `{"method":"version","id":42}`, true, "", "42"},
		{"string id", `{"method":"version","id":"a-1"}`, true, "", `"a-1"`},
		{"unknown fields ignored", `{"method":"version","params":{"x":1},"extra":true}`, true, "", ""},
		{"abi matches", `{"method":"version","abi":1}`, true, "", ""},
		{"not json", `{"method":`, false, CodeInvalidJSON, ""},
		{"empty", ``, false, CodeInvalidJSON, ""},
		{"array", `[1,2]`, false, CodeInvalidJSON, ""},
		{"trailing", `{"method":"version"} {}`, false, CodeInvalidJSON, ""},
		{"no method", `{"params":{}}`, false, CodeInvalidArgument, ""},
		{"method not a string", `{"method":7,"id":1}`, false, CodeInvalidArgument, "1"},
		{"object id", `{"method":"version","id":{}}`, false, CodeInvalidArgument, ""},
		{"unknown method", `{"method":"nope","id":"x"}`, false, CodeUnknownMethod, `"x"`},
		{"abi mismatch", `{"method":"version","abi":2}`, false, CodeABIMismatch, ""},
		{"abi not a number", `{"method":"version","abi":"1"}`, false, CodeInvalidArgument, ""},
		{"params not an object", `{"method":"harness.open","params":[1]}`, false, CodeInvalidArgument, ""},
		{"param of the wrong type", `{"method":"harness.open","params":{"store":5}}`, false, CodeInvalidArgument, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := decodeEnvelope(t, a.Call(context.Background(), []byte(tc.req)))
			if e.OK != tc.ok {
				t.Fatalf("ok = %v, want %v (error %v)", e.OK, tc.ok, e.Error)
			}
			if !tc.ok && e.Error.Code != tc.code {
				t.Errorf("code %s (%s), want %s", e.Error.Code, e.Error.Message, tc.code)
			}
			if string(e.ID) != tc.wantID {
				t.Errorf("id %s, want %s", e.ID, tc.wantID)
			}
		})
	}
}

func TestVersion(t *testing.T) {
	a := New(nil)
	var v VersionInfo
	if err := json.Unmarshal(callEnv(t, a, "version", nil).Result, &v); err != nil {
		t.Fatal(err)
	}
	if v.ABI.Major != ABIMajor || v.ABI.Minor != ABIMinor || v.Version != Version {
		t.Errorf("version %+v", v)
	}
	if ABIVersion != uint32(v.ABI.Major)<<16|uint32(v.ABI.Minor) {
		t.Errorf("ABIVersion %#x disagrees with %d.%d", ABIVersion, v.ABI.Major, v.ABI.Minor)
	}
	var names []string
	for n := range methods {
		names = append(names, n)
	}
	if diff := cmp.Diff(Methods(), v.Methods); diff != "" {
		t.Errorf("methods (-Methods() +version):\n%s", diff)
	}
	got := map[string]bool{}
	for _, n := range names {
		got[n] = true
	}
	for _, n := range Methods() {
		if !got[n] {
			t.Errorf("Methods() lists %s, which the table lacks", n)
		}
	}
	if len(names) != len(Methods()) {
		t.Errorf("the table has %d methods, Methods() %d", len(names), len(Methods()))
	}
}

func TestHandleErrors(t *testing.T) {
	a := New(nil)
	for _, tc := range []struct {
		method string
		params map[string]any
		code   Code
	}{
		{"harness.open", map[string]any{}, CodeInvalidArgument},
		{"harness.open", map[string]any{"store": ":memory:", "queue_size": -1}, CodeInvalidArgument},
		{"harness.close", map[string]any{"harness": 999}, CodeNotFound},
		{"run.start", map[string]any{"harness": 999, "spec": map[string]any{}}, CodeNotFound},
		{"run.start", map[string]any{"spec": map[string]any{}}, CodeInvalidArgument},
		{"run.cancel", map[string]any{"run": 999}, CodeNotFound},
		{"run.cancel", map[string]any{}, CodeInvalidArgument},
		{"run.status", map[string]any{"run": 999}, CodeNotFound},
		{"approval.resolve", map[string]any{"harness": 999, "run_id": "r", "request_id": "q", "decision": map[string]any{"kind": "approve"}}, CodeNotFound},
		{"trace.get", map[string]any{"harness": 999, "run_id": "r"}, CodeNotFound},
		{"runs.list", map[string]any{"harness": 999}, CodeNotFound},
		{"debug.emit", map[string]any{"harness": 999, "count": 1}, CodeNotFound},
	} {
		t.Run(tc.method, func(t *testing.T) {
			if e := callErr(t, a, tc.method, tc.params); e.Code != tc.code {
				t.Errorf("%s(%v): %s %s, want %s", tc.method, tc.params, e.Code, e.Message, tc.code)
			}
		})
	}
	if got := a.Cancel(12345); got != StatusUnknownHandle {
		t.Errorf("Cancel(unknown) = %d", got)
	}
	if got := a.Close(12345, time.Second); got != StatusUnknownHandle {
		t.Errorf("Close(unknown) = %d", got)
	}
	if got := a.Poll(12345, time.Second, 10); got != nil {
		t.Errorf("Poll(unknown) = %s", got)
	}
}

func TestRunSpecErrors(t *testing.T) {
	a := New(nil)
	h := openMemory(t, a)
	ws := t.TempDir()
	script := map[string]any{"name": "scripted", "script": map[string]any{"turns": []any{map[string]any{"text": "hi"}}}}
	for _, tc := range []struct {
		name  string
		spec  any
		code  Code
		field string
	}{
		{"no goal", map[string]any{"task": map[string]any{"root": ws, "verification": []any{}}, "provider": script}, CodeInvalidArgument, "spec.task.goal"},
		{"unknown field", map[string]any{"task": map[string]any{"goal": "g", "root": ws}, "provider": script, "nope": 1}, CodeInvalidArgument, "nope"},
		{"no provider", map[string]any{"task": map[string]any{"goal": "g", "root": ws,
			"verification": []any{map[string]any{"kind": "workspace_file_contains", "file": "a", "text": "b"}}}, "provider": map[string]any{}},
			CodeInvalidArgument, "spec.provider.name"},
		{"missing workspace", map[string]any{"task": map[string]any{"goal": "g", "root": filepath.Join(ws, "missing"),
			"verification": []any{map[string]any{"kind": "workspace_file_contains", "file": "a", "text": "b"}}}, "provider": script},
			CodeInvalidArgument, "spec.task.root"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := callErr(t, a, "run.start", map[string]any{"harness": h, "spec": tc.spec})
			if e.Code != tc.code {
				t.Errorf("code %s (%s), want %s", e.Code, e.Message, tc.code)
			}
			if tc.field != "" && !strings.Contains(fmt.Sprint(e.Details["field"]), strings.TrimPrefix(tc.field, "spec.")) {
				t.Errorf("details %v, want field %s", e.Details, tc.field)
			}
		})
	}
	if s := a.Stats(); s.Runs != 0 {
		t.Errorf("a failed start left %d runs behind", s.Runs)
	}
	if e := callErr(t, a, "run.start", map[string]any{"harness": h, "spec": loadFixtures(t)[0].specFor(t), "approvals": "maybe"}); e.Code != CodeInvalidArgument {
		t.Errorf("approvals maybe: %s", e.Code)
	}
}

func fixtureNamed(t testing.TB, name string) fixture {
	t.Helper()
	for _, f := range loadFixtures(t) {
		if f.name == name {
			return f
		}
	}
	t.Fatalf("no fixture %s", name)
	return fixture{}
}

// A successful run: one done event, last, and its trace and listing read
// back from the store.
func TestRunSuccessAndTrace(t *testing.T) {
	a := New(nil)
	h := openMemory(t, a)
	f := fixtureNamed(t, "success")
	res := call(t, a, "run.start", map[string]any{"harness": h, "spec": f.specFor(t)})
	run, runID := handleOf(t, res, "run"), res["run_id"].(string)
	if !strings.HasPrefix(runID, "run_") {
		t.Fatalf("run id %q", runID)
	}
	evs := newHost(t, a, h).wait(run)
	done := evs[len(evs)-1]
	if done.Status != StatusDone || done.Outcome.Kind != "success" || done.RunID != runID {
		t.Fatalf("done %s", done.Raw)
	}
	for _, e := range evs {
		if e.Run != run || e.RunID != runID {
			t.Errorf("event of another run: %s", e.Raw)
		}
	}
	st := call(t, a, "run.status", map[string]any{"run": run})
	if st["state"] != "done" {
		t.Errorf("status %v", st)
	}
	tr := call(t, a, "trace.get", map[string]any{"harness": h, "run_id": runID})
	if tr["format"] != "json" || tr["trace"] == nil {
		t.Errorf("trace %v", tr)
	}
	text := call(t, a, "trace.get", map[string]any{"harness": h, "run_id": runID, "format": "text"})
	if s, _ := text["text"].(string); !strings.Contains(s, "outcome: success") {
		t.Errorf("text trace %q", s)
	}
	if e := callErr(t, a, "trace.get", map[string]any{"harness": h, "run_id": "run_nope"}); e.Code != CodeNotFound {
		t.Errorf("unknown trace: %s", e.Code)
	}
	if e := callErr(t, a, "trace.get", map[string]any{"harness": h, "run_id": runID, "format": "xml"}); e.Code != CodeInvalidArgument {
		t.Errorf("format xml: %s", e.Code)
	}
	list := call(t, a, "runs.list", map[string]any{"harness": h})
	runs, _ := list["runs"].([]any)
	if len(runs) != 1 || runs[0].(map[string]any)["id"] != runID {
		t.Errorf("runs %v", list)
	}
	// Cancelling a finished run is a no-op, not an error.
	call(t, a, "run.cancel", map[string]any{"run": run})
}

// A run that blocks in its provider is cancelled midway: its one done
// event says cancelled. The model's turn takes an hour, so the done event
// comes (within the hang guard) only if the cancel interrupted it.
func TestCancelMidway(t *testing.T) {
	a := New(nil)
	h := openMemory(t, a)
	spec := slowSpec(t, 3_600_000)
	run := handleOf(t, call(t, a, "run.start", map[string]any{"harness": h, "spec": spec}), "run")
	hs := newHost(t, a, h)
	// Wait until the run is inside its first step.
	for !containsKind(hs.events[run], "step_started") {
		for _, e := range pollEvents(t, a, h, 100*time.Millisecond) {
			hs.events[e.Run] = append(hs.events[e.Run], e)
		}
	}
	call(t, a, "run.cancel", map[string]any{"run": run})
	evs := hs.wait(run)
	done := evs[len(evs)-1]
	if done.Status != StatusCancelled || done.Outcome == nil || done.Outcome.Kind != "cancelled" {
		t.Errorf("done %s", done.Raw)
	}
	if n := countKind(evs, KindDone); n != 1 {
		t.Errorf("%d done events", n)
	}
}

// slowSpec is a spec whose first turn takes latency ms (honouring
// cancellation).
func slowSpec(t testing.TB, latency int) json.RawMessage {
	t.Helper()
	return mustJSON(map[string]any{
		"task": map[string]any{"goal": "wait", "root": t.TempDir(),
			"verification": []any{map[string]any{"kind": "workspace_file_contains", "file": "x.txt", "text": "x"}}},
		"provider": map[string]any{"name": "scripted", "script": map[string]any{"turns": []any{
			map[string]any{"text": "slow", "latency_ms": latency,
				"tool_calls": []any{map[string]any{"name": "write_file", "arguments": map[string]any{"path": "x.txt", "content": "x"}}}}}}},
	})
}

func containsKind(evs []event, kind string) bool { return countKind(evs, kind) > 0 }

func countKind(evs []event, kind string) int {
	n := 0
	for _, e := range evs {
		if e.Kind == kind {
			n++
		}
	}
	return n
}

// An answer that arrives before the run asks is kept and used at once; a
// repeated answer is accepted; a different one is a conflict.
func TestApprovalEarlyAnswer(t *testing.T) {
	a := New(nil)
	h := a.harness(openMemory(t, a))
	r := &runEntry{id: a.handle(), h: h, cancel: func() {}, pending: map[string]chan approve.Decision{},
		early: map[string]approve.Decision{}, answered: map[string]string{}, runID: "run_x",
		announced: map[string]bool{"apr_1": true}}
	state, err := r.resolve("apr_1", approve.Decision{Kind: approve.Approve})
	if err != nil || state != "stored" {
		t.Fatalf("early resolve: %s %v", state, err)
	}
	if state, err := r.resolve("apr_1", approve.Decision{Kind: approve.Approve}); err != nil || state != "already_resolved" {
		t.Errorf("repeat: %s %v", state, err)
	}
	if _, err := r.resolve("apr_1", approve.Decision{Kind: approve.Deny, Reason: "no"}); !errors.Is(err, errConflict) {
		t.Errorf("different answer: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	d, err := r.decide(ctx, &approve.Request{ID: "apr_1", RunID: "run_x"})
	if err != nil || d.Kind != approve.Approve {
		t.Errorf("decide after an early answer: %+v %v", d, err)
	}
	// The pending event was still sent.
	evs := pollEvents(t, a, h.id, hangGuard)
	if len(evs) != 1 || evs[0].Kind != KindApprovalPending || evs[0].RequestID != "apr_1" {
		t.Errorf("events %v", kinds(evs))
	}
}

// A waiter is answered from another goroutine; a cancelled waiter returns
// the context's error.
func TestApprovalWaiter(t *testing.T) {
	a := New(nil)
	h := a.harness(openMemory(t, a))
	r := &runEntry{id: a.handle(), h: h, cancel: func() {}, pending: map[string]chan approve.Decision{},
		early: map[string]approve.Decision{}, answered: map[string]string{}, runID: "run_x", announced: map[string]bool{}}
	got := make(chan approve.Decision, 1)
	go func() {
		d, _ := r.decide(context.Background(), &approve.Request{ID: "apr_2", RunID: "run_x"})
		got <- d
	}()
	evs := pollEvents(t, a, h.id, hangGuard)
	if len(evs) != 1 || evs[0].Kind != KindApprovalPending {
		t.Fatalf("events %v", kinds(evs))
	}
	if state, err := r.resolve("apr_2", approve.Decision{Kind: approve.Deny, Reason: "later"}); err != nil || state != "delivered" {
		t.Fatalf("resolve: %s %v", state, err)
	}
	select {
	case d := <-got:
		if d.Kind != approve.Deny || d.Reason != "later" {
			t.Errorf("decision %+v", d)
		}
	case <-time.After(hangGuard):
		t.Fatal("the waiter was not woken")
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := r.decide(ctx, &approve.Request{ID: "apr_3"})
		errc <- err
	}()
	pollEvents(t, a, h.id, hangGuard)
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled waiter: %v", err)
		}
	case <-time.After(hangGuard):
		t.Fatal("a cancelled waiter did not return")
	}
	// Too many early answers.
	for i := 0; i < maxEarly; i++ {
		r.announced["early_"+strconv.Itoa(i)] = true
		if _, err := r.resolve("early_"+strconv.Itoa(i), approve.Decision{Kind: approve.Approve}); err != nil {
			t.Fatal(err)
		}
	}
	r.announced["one_more"] = true
	if _, err := r.resolve("one_more", approve.Decision{Kind: approve.Approve}); !errors.Is(err, errConflict) {
		t.Errorf("over the early limit: %v", err)
	}
}

// A host that answers through approval.resolve from its own goroutine,
// possibly before the waiter is ready, while the run is live.
func TestApprovalResolveValidation(t *testing.T) {
	a := New(nil)
	h := openMemory(t, a)
	f := fixtureNamed(t, "approve")
	run := handleOf(t, call(t, a, "run.start", map[string]any{"harness": h, "spec": f.specFor(t)}), "run")
	var pending event
	hs := newHost(t, a, h)
	for pending.Kind == "" {
		for _, e := range pollEvents(t, a, h, 100*time.Millisecond) {
			hs.events[e.Run] = append(hs.events[e.Run], e)
			if e.Kind == KindApprovalPending {
				pending = e
			}
		}
	}
	base := map[string]any{"harness": h, "run_id": pending.RunID, "request_id": pending.RequestID}
	for _, tc := range []struct {
		name   string
		change map[string]any
		code   Code
	}{
		{"no decision", map[string]any{}, CodeInvalidArgument},
		{"bad kind", map[string]any{"decision": map[string]any{"kind": "maybe"}}, CodeInvalidArgument},
		{"unknown field", map[string]any{"decision": map[string]any{"kind": "approve", "why": 1}}, CodeInvalidArgument},
		{"deny with rewrite", map[string]any{"decision": map[string]any{"kind": "deny", "rewrite": map[string]any{"target": "x"}}}, CodeInvalidArgument},
		{"unknown run", map[string]any{"run_id": "run_nope", "decision": map[string]any{"kind": "approve"}}, CodeNotFound},
		{"no request id", map[string]any{"request_id": "", "decision": map[string]any{"kind": "approve"}}, CodeInvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := map[string]any{}
			for k, v := range base {
				p[k] = v
			}
			for k, v := range tc.change {
				p[k] = v
			}
			if e := callErr(t, a, "approval.resolve", p); e.Code != tc.code {
				t.Errorf("%s: %s", e.Code, e.Message)
			}
		})
	}
	ok := map[string]any{"decision": map[string]any{"kind": "approve"}}
	for k, v := range base {
		ok[k] = v
	}
	if got := call(t, a, "approval.resolve", ok); got["state"] != "delivered" {
		t.Errorf("resolve: %v", got)
	}
	evs := hs.wait(run)
	if done := evs[len(evs)-1]; done.Outcome.Kind != "success" {
		t.Errorf("done %s", done.Raw)
	}
	// After the run ended, resolving is not_found.
	if e := callErr(t, a, "approval.resolve", map[string]any{"harness": h, "run_id": pending.RunID, "request_id": "other",
		"decision": map[string]any{"kind": "approve"}}); e.Code != CodeNotFound {
		t.Errorf("after done: %s", e.Code)
	}
}

// A deferral ends the run awaiting_approval; a second harness over the
// same store file (as another process would) answers it with
// run.resume_with_decision, and the run finishes.
func TestDeferThenDecideInAnotherHarness(t *testing.T) {
	dbPath := filepath.Join(t.TempDir(), "trace.db")
	f := fixtureNamed(t, "defer_resume")
	spec := f.specFor(t)

	a1 := New(nil)
	h1 := handleOf(t, call(t, a1, "harness.open", map[string]any{"store": dbPath}), "harness")
	run := handleOf(t, call(t, a1, "run.start", map[string]any{"harness": h1, "spec": spec, "approvals": "defer"}), "run")
	evs := newHost(t, a1, h1).wait(run)
	done := evs[len(evs)-1]
	if done.Outcome == nil || done.Outcome.Kind != "awaiting_approval" || done.Outcome.RequestID == "" {
		t.Fatalf("first run: %s", done.Raw)
	}
	call(t, a1, "harness.close", map[string]any{"harness": h1})

	a2 := New(nil)
	h2 := handleOf(t, call(t, a2, "harness.open", map[string]any{"store": dbPath}), "harness")
	defer a2.Close(h2, 10*time.Second)
	// A wrong request id is not_found; a missing spec is invalid.
	if e := callErr(t, a2, "run.resume_with_decision", map[string]any{"harness": h2, "run_id": done.RunID, "request_id": "apr_nope",
		"decision": map[string]any{"kind": "approve"}, "spec": spec}); e.Code != CodeNotFound {
		t.Errorf("unknown request: %s %s", e.Code, e.Message)
	}
	if e := callErr(t, a2, "run.resume_with_decision", map[string]any{"harness": h2, "run_id": done.RunID,
		"request_id": done.Outcome.RequestID, "decision": map[string]any{"kind": "approve"}}); e.Code != CodeInvalidArgument {
		t.Errorf("no spec: %s %s", e.Code, e.Message)
	}
	res := call(t, a2, "run.resume_with_decision", map[string]any{"harness": h2, "run_id": done.RunID,
		"request_id": done.Outcome.RequestID, "decision": map[string]any{"kind": "approve"}, "spec": spec})
	evs = newHost(t, a2, h2).wait(handleOf(t, res, "run"))
	if last := evs[len(evs)-1]; last.Outcome == nil || last.Outcome.Kind != "success" || last.RunID != done.RunID {
		t.Fatalf("resumed run: %s", last.Raw)
	}
	// Answering again is a conflict: the request was decided.
	if e := callErr(t, a2, "run.resume_with_decision", map[string]any{"harness": h2, "run_id": done.RunID,
		"request_id": done.Outcome.RequestID, "decision": map[string]any{"kind": "approve"}, "spec": spec}); e.Code != CodeConflict {
		t.Errorf("second decision: %s %s", e.Code, e.Message)
	}
	// run.resume of a finished run reports its outcome again, with only a
	// done event.
	res = call(t, a2, "run.resume", map[string]any{"harness": h2, "run_id": done.RunID, "spec": spec})
	evs = newHost(t, a2, h2).wait(handleOf(t, res, "run"))
	if diff := cmp.Diff([]string{KindDone}, kinds(evs)); diff != "" {
		t.Errorf("resume of a finished run (-want +got):\n%s", diff)
	}
}

// A run that ran out of steps continues with run.resume and a larger
// budget.
func TestResumeWithBudgets(t *testing.T) {
	a := New(nil)
	h := openMemory(t, a)
	f := fixtureNamed(t, "step_cap")
	spec := f.specFor(t)
	run := handleOf(t, call(t, a, "run.start", map[string]any{"harness": h, "spec": spec}), "run")
	hs := newHost(t, a, h)
	evs := hs.wait(run)
	done := evs[len(evs)-1]
	if done.Outcome.Kind != "verification_failed" {
		t.Fatalf("done %s", done.Raw)
	}
	if e := callErr(t, a, "run.resume", map[string]any{"harness": h, "run_id": done.RunID, "spec": spec,
		"budgets": map[string]any{"max_steps": "five"}}); e.Code != CodeInvalidArgument {
		t.Errorf("bad budgets: %s", e.Code)
	}
	if e := callErr(t, a, "run.resume", map[string]any{"harness": h, "run_id": "run_nope", "spec": spec}); e.Code != CodeNotFound {
		t.Errorf("unknown run: %s %s", e.Code, e.Message)
	}
	res := call(t, a, "run.resume", map[string]any{"harness": h, "run_id": done.RunID, "spec": spec, "budgets": map[string]any{"max_steps": 3}})
	evs = hs.wait(handleOf(t, res, "run"))
	if last := evs[len(evs)-1]; last.Outcome.Kind != "success" || last.Outcome.Steps != 2 {
		t.Errorf("resumed: %s", last.Raw)
	}
}

// A live run cannot be resumed by the same harness at the same time.
func TestResumeLiveRunConflict(t *testing.T) {
	a := New(nil)
	h := openMemory(t, a)
	spec := slowSpec(t, 60_000)
	res := call(t, a, "run.start", map[string]any{"harness": h, "spec": spec})
	if e := callErr(t, a, "run.resume", map[string]any{"harness": h, "run_id": res["run_id"], "spec": spec}); e.Code != CodeConflict {
		t.Errorf("resume of a live run: %s %s", e.Code, e.Message)
	}
	a.Cancel(h)
	newHost(t, a, h).wait(handleOf(t, res, "run"))
}

// Close cancels runs, wakes a blocked poller with the closed marker, is
// idempotent, and leaves no goroutine behind.
func TestCloseWakesPollerAndJoins(t *testing.T) {
	a := New(nil)
	h := handleOf(t, call(t, a, "harness.open", map[string]any{"store": ":memory:"}), "harness")
	for i := 0; i < 3; i++ {
		call(t, a, "run.start", map[string]any{"harness": h, "spec": slowSpec(t, 60_000)})
	}
	// Drain what is queued, so the next poll blocks.
	for pollEvents(t, a, h, 50*time.Millisecond) != nil {
	}
	got := make(chan []byte, 1)
	go func() { got <- a.Poll(h, -1, 100) }()
	time.Sleep(50 * time.Millisecond)
	if st := a.Close(h, hangGuard); st != StatusOK {
		t.Fatalf("close: %d", st)
	}
	select {
	case out := <-got:
		if string(out) != string(closedEvent) {
			t.Errorf("the woken poller got %s", out)
		}
	case <-time.After(hangGuard):
		t.Fatal("close did not wake the poller")
	}
	if out := a.Poll(h, time.Second, 10); out != nil {
		t.Errorf("poll after the marker: %s", out)
	}
	if st := a.Close(h, hangGuard); st != StatusOK {
		t.Errorf("second close: %d", st)
	}
	if st := a.Cancel(h); st != StatusClosed {
		t.Errorf("cancel after close: %d", st)
	}
	if e := callErr(t, a, "run.start", map[string]any{"harness": h, "spec": slowSpec(t, 1)}); e.Code != CodeUnavailable {
		t.Errorf("start on a closed harness: %s", e.Code)
	}
	waitFor(t, "owned goroutines to end", func() bool { return a.Stats().Goroutines == 0 })
	if s := a.Stats(); s.Harnesses != 0 || s.Runs != 0 {
		t.Errorf("stats after close: %+v", s)
	}
}

// A full queue blocks its producer until the host polls (backpressure);
// nothing is lost or reordered.
func TestBackpressure(t *testing.T) {
	a := New(nil)
	h := handleOf(t, call(t, a, "harness.open", map[string]any{"store": ":memory:", "queue_size": 4}), "harness")
	defer a.Close(h, 5*time.Second)
	call(t, a, "debug.emit", map[string]any{"harness": h, "count": 500})
	he := a.harness(h)
	waitFor(t, "the queue to fill", func() bool { return len(he.events) >= 4 })
	if n := len(he.events); n != 4 {
		t.Errorf("queue holds %d events, want it full at 4", n)
	}
	next := 1
	for {
		evs := pollEvents(t, a, h, hangGuard)
		if evs == nil {
			t.Fatalf("stalled after %d events", next-1)
		}
		for _, e := range evs {
			if e.Kind == KindDebugDone {
				if next != 501 {
					t.Errorf("debug_done after %d events", next-1)
				}
				return
			}
			if e.N != next {
				t.Fatalf("event %d arrived as %d", e.N, next)
			}
			next++
		}
	}
}

// Poll's batch limit and timeouts.
func TestPollBatching(t *testing.T) {
	a := New(nil)
	h := openMemory(t, a)
	start := time.Now()
	if out := a.Poll(h, 30*time.Millisecond, 10); out != nil {
		t.Errorf("poll of an empty queue: %s", out)
	}
	if time.Since(start) < 25*time.Millisecond {
		t.Error("poll returned before its timeout")
	}
	call(t, a, "debug.emit", map[string]any{"harness": h, "count": 25})
	waitFor(t, "26 queued events", func() bool { return len(a.harness(h).events) == 26 })
	var sizes []int
	for {
		out := a.Poll(h, 0, 10)
		if out == nil {
			break
		}
		var evs []json.RawMessage
		if err := json.Unmarshal(out, &evs); err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, len(evs))
	}
	if diff := cmp.Diff([]int{10, 10, 6}, sizes); diff != "" {
		t.Errorf("batch sizes (-want +got):\n%s", diff)
	}
}

// goroutineID identifies the calling goroutine; the tests use it as the
// "thread" of ThreadID, since the dispatcher goroutine is the one that
// calls the callback.
func goroutineID() uint64 {
	var buf [64]byte
	s := strings.TrimPrefix(string(buf[:runtime.Stack(buf[:], false)]), "goroutine ")
	id, _ := strconv.ParseUint(s[:strings.IndexByte(s, ' ')], 10, 64)
	return id
}

// Push mode: events arrive in order on one dispatcher; the callback may
// call methods (re-entry) but not close its own harness; after
// unregistering, the callback is never called again.
func TestCallback(t *testing.T) {
	a := New(&Options{ThreadID: goroutineID})
	h := openMemory(t, a)
	var (
		mu      sync.Mutex
		got     []event
		threads = map[uint64]bool{}
		closeSt = make(chan int32, 1)
	)
	cb := func(raw []byte) {
		var e event
		if err := json.Unmarshal(raw, &e); err != nil {
			t.Errorf("event %s: %v", raw, err)
		}
		mu.Lock()
		got = append(got, e)
		threads[goroutineID()] = true
		mu.Unlock()
		if e.Kind == KindApprovalPending {
			// Re-entry: resolve from inside the callback.
			out := a.Call(context.Background(), mustJSON(map[string]any{"method": "approval.resolve", "params": map[string]any{
				"harness": h, "run_id": e.RunID, "request_id": e.RequestID, "decision": map[string]any{"kind": "approve"}}}))
			if !bytes.Contains(out, []byte(`"ok":true`)) {
				t.Errorf("resolve from the callback: %s", out)
			}
			select {
			case closeSt <- a.Close(h, time.Second):
			default:
			}
			if st := a.SetCallback(h, nil); st != StatusIllegalContext {
				t.Errorf("SetCallback from inside the callback: %d", st)
			}
		}
	}
	if st := a.SetCallback(h, cb); st != StatusOK {
		t.Fatalf("SetCallback: %d", st)
	}
	f := fixtureNamed(t, "approve")
	call(t, a, "run.start", map[string]any{"harness": h, "spec": f.specFor(t)})
	waitFor(t, "the done event", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) > 0 && got[len(got)-1].Kind == KindDone
	})
	if st := <-closeSt; st != StatusIllegalContext {
		t.Errorf("Close from inside the callback: %d, want %d", st, StatusIllegalContext)
	}
	mu.Lock()
	if diff := cmp.Diff(readGolden(t, f.golden), kinds(got)); diff != "" {
		t.Errorf("callback kinds (-golden +got):\n%s", diff)
	}
	if len(threads) != 1 {
		t.Errorf("callbacks came from %d dispatchers", len(threads))
	}
	mu.Unlock()
	// Poll gets nothing while the callback is registered.
	if out := a.Poll(h, 10*time.Millisecond, 10); out != nil {
		t.Errorf("poll in push mode: %s", out)
	}
	if st := a.SetCallback(h, nil); st != StatusOK {
		t.Fatalf("unregister: %d", st)
	}
	var after atomic.Int32
	a.SetCallback(h, func([]byte) { after.Add(1) })
	a.SetCallback(h, nil)
	call(t, a, "debug.emit", map[string]any{"harness": h, "count": 3})
	if evs := pollEvents(t, a, h, hangGuard); len(evs) == 0 {
		t.Error("poll after unregistering got nothing")
	}
	if n := after.Load(); n != 0 {
		t.Errorf("an unregistered callback was called %d times", n)
	}
	if st := a.SetCallback(999, cb); st != StatusUnknownHandle {
		t.Errorf("SetCallback(unknown) = %d", st)
	}
}

// Many goroutines start, cancel, poll and query at once: every run gets
// exactly one done event, last of its events, and nothing leaks.
func TestHammer(t *testing.T) {
	a := New(nil)
	h := openMemory(t, a)
	f := fixtureNamed(t, "approve")
	const workers, perWorker = 8, 6
	var (
		mu     sync.Mutex
		byRun  = map[uint64][]event{}
		runs   = map[uint64]bool{}
		wg     sync.WaitGroup
		stopPo = make(chan struct{})
		polled sync.WaitGroup
	)
	polled.Add(1)
	go func() {
		defer polled.Done()
		for {
			select {
			case <-stopPo:
				return
			default:
			}
			for _, e := range pollEvents(t, a, h, 20*time.Millisecond) {
				if e.Kind == KindApprovalPending {
					a.Call(context.Background(), mustJSON(map[string]any{"method": "approval.resolve", "params": map[string]any{
						"harness": h, "run_id": e.RunID, "request_id": e.RequestID, "decision": map[string]any{"kind": "approve"}}}))
				}
				mu.Lock()
				byRun[e.Run] = append(byRun[e.Run], e)
				mu.Unlock()
			}
		}
	}()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < perWorker; i++ {
				spec := f.specFor(t)
				if i%3 == 2 {
					spec = slowSpec(t, 10_000)
				}
				out := a.Call(context.Background(), mustJSON(map[string]any{"method": "run.start", "params": map[string]any{"harness": h, "spec": spec}}))
				var e envelope
				json.Unmarshal(out, &e)
				if !e.OK {
					t.Errorf("run.start: %s", out)
					continue
				}
				var s started
				json.Unmarshal(e.Result, &s)
				mu.Lock()
				runs[s.Run] = true
				mu.Unlock()
				if i%3 == 2 {
					a.Cancel(s.Run)
				}
				a.Call(context.Background(), []byte(`{"method":"debug.stats"}`))
				a.Call(context.Background(), mustJSON(map[string]any{"method": "run.status", "params": map[string]any{"run": s.Run}}))
			}
		}(w)
	}
	wg.Wait()
	waitFor(t, "every run's done event", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for r := range runs {
			evs := byRun[r]
			if len(evs) == 0 || evs[len(evs)-1].Kind != KindDone {
				return false
			}
		}
		return true
	})
	close(stopPo)
	polled.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(runs) != workers*perWorker {
		t.Errorf("%d runs started", len(runs))
	}
	for r := range runs {
		if n := countKind(byRun[r], KindDone); n != 1 {
			t.Errorf("run %d: %d done events", r, n)
		}
	}
	if st := a.Close(h, hangGuard); st != StatusOK {
		t.Errorf("close: %d", st)
	}
	waitFor(t, "owned goroutines to end", func() bool { return a.Stats().Goroutines == 0 })
}

func TestPolicyExplain(t *testing.T) {
	a := New(nil)
	custom := map[string]any{"version": 1, "defaults": map[string]any{"read": "allow", "write": "ask", "exec": "deny", "net": "deny"},
		"layers": []any{map[string]any{"name": "project", "rules": []any{map[string]any{"act": "write", "effect": "deny", "pattern": "vendor/**"}}}}}
	for _, tc := range []struct {
		name   string
		params map[string]any
		want   policy.Verdict
		code   Code
	}{
		{"custom deny", map[string]any{"policy": custom, "act": "write", "target": "vendor/x.go"},
			policy.Verdict{Act: policy.Write, Target: "vendor/x.go", Effect: policy.Deny, Rule: "vendor/**", Layer: "project"}, ""},
		{"custom default", map[string]any{"policy": custom, "act": "write", "target": "main.go"},
			policy.Verdict{Act: policy.Write, Target: "main.go", Effect: policy.Ask}, ""},
		{"builtin default secret", map[string]any{"policy": "default", "act": "read", "target": ".env"},
			policy.Verdict{Act: policy.Read, Target: ".env", Effect: policy.Deny, Rule: ".env", Layer: "builtin-secrets"}, ""},
		{"permissive", map[string]any{"policy": "permissive", "act": "exec", "target": "rm"},
			policy.Verdict{Act: policy.Exec, Target: "rm", Effect: policy.Allow}, ""},
		{"unknown builtin", map[string]any{"policy": "strict", "act": "read", "target": "a"}, policy.Verdict{}, CodeInvalidArgument},
		{"bad act", map[string]any{"policy": "default", "act": "delete", "target": "a"}, policy.Verdict{}, CodeInvalidArgument},
		{"no target", map[string]any{"policy": "default", "act": "read"}, policy.Verdict{}, CodeInvalidArgument},
		{"no policy", map[string]any{"act": "read", "target": "a"}, policy.Verdict{}, CodeInvalidArgument},
		{"invalid policy", map[string]any{"policy": map[string]any{"version": 1, "defaults": map[string]any{"read": "sometimes"}}, "act": "read", "target": "a"},
			policy.Verdict{}, CodeInvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := callEnv(t, a, "policy.explain", tc.params)
			if tc.code != "" {
				if e.OK || e.Error.Code != tc.code {
					t.Fatalf("got %+v, want %s", e, tc.code)
				}
				return
			}
			if !e.OK {
				t.Fatalf("%s: %s", e.Error.Code, e.Error.Message)
			}
			var v policy.Verdict
			if err := json.Unmarshal(e.Result, &v); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, v); diff != "" {
				t.Errorf("verdict (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSandboxBackends(t *testing.T) {
	a := New(nil)
	res := call(t, a, "sandbox.backends", nil)
	list, _ := res["backends"].([]any)
	names := map[string]map[string]any{}
	for _, b := range list {
		m := b.(map[string]any)
		names[m["name"].(string)] = m
		if m["available"] == true && m["enforcement"] == nil {
			t.Errorf("available backend without enforcement: %v", m)
		}
		if m["available"] == false && m["reason"] == "" {
			t.Errorf("unavailable backend without a reason: %v", m)
		}
	}
	want := backendsOf(runtime.GOOS)
	if len(names) != len(want) {
		t.Errorf("backends %v, want %v", names, want)
	}
	host, ok := names[sandbox.BackendHost]
	if !ok {
		t.Fatalf("no host backend in %v", res)
	}
	if host["available"] != true {
		t.Logf("host backend unavailable here: %v", host["reason"])
	}
	// wasi works on every OS, and says what it enforces.
	w := names[sandbox.BackendWASI]
	en, _ := w["enforcement"].(map[string]any)
	if w["available"] != true || en["filesystem"] != true || en["network"] != "denied" || en["spawner"] != "wazero" {
		t.Errorf("wasi backend %v; want it available, confining files and denying the network", w)
	}
	if res["default"] == sandbox.BackendWASI {
		t.Errorf("wasi is the default; it runs .wasm programs only")
	}
}

// helloWasm is a WASI command that writes "hi\n" to stdout and exits 3.
func helloWasm() []byte {
	return []byte{
		0, 'a', 's', 'm', 1, 0, 0, 0,
		// types: 0 fd_write's, 1 proc_exit's, 2 _start's
		1, 16, 3, 0x60, 4, 0x7f, 0x7f, 0x7f, 0x7f, 1, 0x7f, 0x60, 1, 0x7f, 0, 0x60, 0, 0,
		// imports: fd_write, proc_exit
		2, 70, 2,
		22, 'w', 'a', 's', 'i', '_', 's', 'n', 'a', 'p', 's', 'h', 'o', 't', '_', 'p', 'r', 'e', 'v', 'i', 'e', 'w', '1',
		8, 'f', 'd', '_', 'w', 'r', 'i', 't', 'e', 0, 0,
		22, 'w', 'a', 's', 'i', '_', 's', 'n', 'a', 'p', 's', 'h', 'o', 't', '_', 'p', 'r', 'e', 'v', 'i', 'e', 'w', '1',
		9, 'p', 'r', 'o', 'c', '_', 'e', 'x', 'i', 't', 0, 1,
		3, 2, 1, 2, // function 2 has type 2
		5, 3, 1, 0, 1, // one page of memory
		7, 19, 2, 6, '_', 's', 't', 'a', 'r', 't', 0, 2, 6, 'm', 'e', 'm', 'o', 'r', 'y', 2, 0,
		// _start: fd_write(1, iovs 0, 1, nwritten 16); drop; proc_exit(3)
		10, 19, 1, 17, 0, 0x41, 1, 0x41, 0, 0x41, 1, 0x41, 16, 0x10, 0, 0x1a, 0x41, 3, 0x10, 1, 0x0b,
		// memory[0:11] = iovec{8, 3}, "hi\n"
		11, 17, 1, 0, 0x41, 0, 0x0b, 11, 8, 0, 0, 0, 3, 0, 0, 0, 'h', 'i', '\n',
	}
}

// TestSandboxExecWasi runs a WebAssembly module through sandbox.exec:
// named by backend "wasi", or found by its .wasm name with no backend.
func TestSandboxExecWasi(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir()) // the compiled-module cache
	a := New(nil)
	wasm := filepath.Join(t.TempDir(), "hello.wasm")
	if err := os.WriteFile(wasm, helloWasm(), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, params := range []map[string]any{
		{"backend": "wasi", "spec": map[string]any{"argv": []string{wasm}}},
		{"spec": map[string]any{"argv": []string{wasm}, "limits": map[string]any{"disk": 1 << 20, "open_files": 16}}},
	} {
		e := callEnv(t, a, "sandbox.exec", params)
		if !e.OK {
			t.Fatalf("%v: %s: %s", params, e.Error.Code, e.Error.Message)
		}
		var r sandbox.Result
		if err := json.Unmarshal(e.Result, &r); err != nil {
			t.Fatal(err)
		}
		if r.ExitCode != 3 || string(r.Stdout) != "hi\n" || r.Backend != sandbox.BackendWASI || !r.Enforced.Filesystem {
			t.Errorf("%v: result %+v", params, r)
		}
	}
	// A native program named with the wasi backend cannot run there.
	e := callEnv(t, a, "sandbox.exec", map[string]any{"backend": "wasi", "spec": map[string]any{"argv": []string{"/bin/sh"}}})
	var r sandbox.Result
	if !e.OK || json.Unmarshal(e.Result, &r) != nil || r.ExitCode != 126 || r.Backend != sandbox.BackendWASI {
		t.Errorf("a native program in the wasi backend: %+v %s", e, e.Result)
	}
}

func TestSandboxExec(t *testing.T) {
	a := New(nil)
	e := callEnv(t, a, "sandbox.exec", map[string]any{"backend": "host",
		"spec": map[string]any{"argv": []string{"sh", "-c", "echo hi; exit 3"}, "limits": map[string]any{"wall": "10s"}}})
	if !e.OK {
		if e.Error.Code == CodeUnavailable {
			t.Skipf("the host sandbox backend is unavailable here: %s", e.Error.Message)
		}
		t.Fatalf("%s: %s", e.Error.Code, e.Error.Message)
	}
	var r sandbox.Result
	if err := json.Unmarshal(e.Result, &r); err != nil {
		t.Fatal(err)
	}
	if r.ExitCode != 3 || string(r.Stdout) != "hi\n" || r.Backend != "host" {
		t.Errorf("result %+v", r)
	}
	for _, tc := range []struct {
		name   string
		params map[string]any
		code   Code
	}{
		{"no spec", map[string]any{}, CodeInvalidArgument},
		{"unknown field", map[string]any{"spec": map[string]any{"argv": []string{"true"}, "nope": 1}}, CodeInvalidArgument},
		{"unknown backend", map[string]any{"backend": "nope", "spec": map[string]any{"argv": []string{"true"}}}, CodeUnavailable},
		{"empty argv", map[string]any{"backend": "host", "spec": map[string]any{"argv": []string{}}}, CodeInvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if e := callErr(t, a, "sandbox.exec", tc.params); e.Code != tc.code {
				t.Errorf("%s: %s", e.Code, e.Message)
			}
		})
	}
}

// A command whose changes do not fit its workdir's filesystem is
// unavailable (a resource failed, not a bug), with the command's result
// in the details and everything that fit applied.
func TestSandboxExecApplyFails(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting the small filesystem the changes must not fit needs root")
	}
	wd := t.TempDir()
	if err := syscall.Mount("tmpfs", wd, "tmpfs", 0, "size=1m,mode=0777"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Unmount(wd, syscall.MNT_DETACH) })
	a := New(nil)
	e := callErr(t, a, "sandbox.exec", map[string]any{"backend": "linux-ns",
		"spec": map[string]any{"argv": []string{"sh", "-c", "echo small > a; head -c 2000000 /dev/zero > b; echo ran"}, "workdir": wd}})
	if e.Code != CodeUnavailable || e.Details["step"] != "apply the changes" || !strings.Contains(e.Message, "no space left") {
		t.Fatalf("%s %v: %s; want unavailable, at applying the changes, for want of space", e.Code, e.Details, e.Message)
	}
	var r sandbox.Result
	if err := json.Unmarshal(mustJSON(e.Details["result"]), &r); err != nil || r.ExitCode != 0 || string(r.Stdout) != "ran\n" {
		t.Errorf("the command's result: %+v (%v); want exit 0 and its output", r, err)
	}
	names, _ := os.ReadDir(wd)
	var got []string
	for _, n := range names {
		got = append(got, n.Name())
	}
	if b, err := os.ReadFile(filepath.Join(wd, "a")); err != nil || string(b) != "small\n" || len(got) != 1 {
		t.Errorf("the workdir holds %v (a: %q, %v); want only a, applied", got, b, err)
	}
}

// harness.open on a path that cannot be a store is unavailable; a file
// store survives its harness.
func TestOpenStore(t *testing.T) {
	a := New(nil)
	dir := t.TempDir()
	bad := filepath.Join(dir, "not-a-db")
	if err := os.WriteFile(bad, []byte("this is not sqlite, not at all, no"), 0o644); err != nil {
		t.Fatal(err)
	}
	if e := callErr(t, a, "harness.open", map[string]any{"store": bad}); e.Code != CodeUnavailable {
		t.Errorf("open a non-store: %s %s", e.Code, e.Message)
	}
	if e := callErr(t, a, "harness.open", map[string]any{"store": filepath.Join(dir, "missing", "dir", "x.db")}); e.Code == "" {
		t.Error("open in a missing directory succeeded")
	}
}

// use_environment makes the spec builder read keys through LookupEnv; the
// table never reads the environment otherwise.
func TestUseEnvironment(t *testing.T) {
	var asked atomic.Int32
	a := New(&Options{LookupEnv: func(k string) (string, bool) { asked.Add(1); return "", false }})
	spec := mustJSON(map[string]any{"task": map[string]any{"goal": "g", "root": t.TempDir(),
		"verification": []any{map[string]any{"kind": "workspace_file_contains", "file": "a", "text": "b"}}},
		"provider": map[string]any{"name": "openai"}})
	h := openMemory(t, a)
	callErr(t, a, "run.start", map[string]any{"harness": h, "spec": spec})
	if n := asked.Load(); n != 0 {
		t.Errorf("the environment was read %d times without use_environment", n)
	}
	h2 := handleOf(t, call(t, a, "harness.open", map[string]any{"store": ":memory:", "use_environment": true}), "harness")
	defer a.Close(h2, 5*time.Second)
	callErr(t, a, "run.start", map[string]any{"harness": h2, "spec": spec})
	if asked.Load() == 0 {
		t.Error("use_environment did not read the environment")
	}
}

// A panic inside a method becomes an internal error envelope.
func TestPanicBecomesInternal(t *testing.T) {
	methods["test.panic"] = func(*ABI, context.Context, json.RawMessage) (any, error) { panic("boom") }
	defer delete(methods, "test.panic")
	e := decodeEnvelope(t, New(nil).Call(context.Background(), []byte(`{"method":"test.panic","id":5}`)))
	if e.OK || e.Error.Code != CodeInternal || !strings.Contains(e.Error.Message, "boom") || string(e.ID) != "5" {
		t.Errorf("envelope %+v", e)
	}
	if e := decodeEnvelope(t, PanicEnvelope("x")); e.Error.Code != CodeInternal {
		t.Errorf("PanicEnvelope: %+v", e)
	}
}

func TestStatsCounters(t *testing.T) {
	a := New(nil)
	a.NoteStringOut()
	a.NoteStringOut()
	a.NoteStringFreed()
	a.NoteCallbackString()
	s := a.Stats()
	if s.StringsOut != 2 || s.StringsFreed != 1 || s.StringsLive != 1 || s.CallbackStrings != 1 {
		t.Errorf("stats %+v", s)
	}
	m := call(t, a, "debug.stats", nil)
	if m["strings_live"] != float64(1) {
		t.Errorf("debug.stats %v", m)
	}
}

// The done event of a run always names its run id, also when the run
// failed after it started.
func TestWithRun(t *testing.T) {
	if got := string(withRun(7, []byte(`{"kind":"x"}`))); got != `{"run":7,"kind":"x"}` {
		t.Errorf("withRun = %s", got)
	}
	if got := string(withRun(7, []byte(`{}`))); got != `{"run":7}` {
		t.Errorf("withRun(empty) = %s", got)
	}
}
