package abi

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// One harness drives a run whose write waits for a person (approvals
// "wait"); a second harness over the same store file — as another
// process would open it — watches the run, sees it waiting, decides with
// approval.decide, and sees it finish. The driver carries the decision
// out: the write lands.
func TestWatchAndDecideFromAnotherHarness(t *testing.T) {
	a := New(nil)
	path := filepath.Join(t.TempDir(), "store.db")
	driver := handleOf(t, call(t, a, "harness.open", map[string]any{"store": path, "live": true}), "harness")
	defer a.Close(driver, 10*time.Second)
	ws := t.TempDir()
	quoted, _ := json.Marshal(ws)
	data, err := os.ReadFile(filepath.Join("testdata", "fixtures", "defer_resume", "spec.json"))
	if err != nil {
		t.Fatal(err)
	}
	spec := json.RawMessage(strings.ReplaceAll(string(data), `"$WORKSPACE"`, string(quoted)))
	res := call(t, a, "run.start", map[string]any{"harness": driver, "spec": spec, "approvals": "wait"})
	runID := res["run_id"].(string)
	driven := handleOf(t, res, "run")

	watcher := handleOf(t, call(t, a, "harness.open", map[string]any{"store": path}), "harness")
	defer a.Close(watcher, 10*time.Second)
	w := call(t, a, "run.watch", map[string]any{"harness": watcher, "run_id": runID, "poll_ms": 20})
	watched := handleOf(t, w, "run")
	if w["run_id"] != runID {
		t.Fatalf("run.watch: %v", w)
	}
	// The watcher sees the run wait for a person, and answers.
	var reqID string
	var seen []event
	deadline := time.Now().Add(60 * time.Second)
	for reqID == "" {
		if time.Now().After(deadline) {
			t.Fatalf("the watcher never saw the wait: %v", kinds(seen))
		}
		for _, e := range pollEvents(t, a, watcher, 100*time.Millisecond) {
			if e.Run != watched {
				t.Fatalf("an event of another handle on the watcher's queue: %s", e.Raw)
			}
			seen = append(seen, e)
			if e.Kind == KindApprovalPending {
				reqID = e.RequestID
				if !strings.Contains(string(e.Raw), `+mode = \"on\"`) {
					t.Errorf("the pending request does not show the diff: %s", e.Raw)
				}
			}
		}
	}
	call(t, a, "approval.decide", map[string]any{"harness": watcher, "run_id": runID, "request_id": reqID,
		"decision": map[string]any{"kind": "approve"}})
	if e := callErr(t, a, "approval.decide", map[string]any{"harness": watcher, "run_id": runID, "request_id": reqID,
		"decision": map[string]any{"kind": "deny", "reason": "too late"}}); e.Code != CodeConflict {
		t.Errorf("a second decision: %+v", e)
	}
	// Both the driver's and the watcher's handle end with success.
	hs := newHost(t, a, watcher)
	hs.events[watched] = seen
	evs := hs.wait(watched)
	if last := evs[len(evs)-1]; last.Status != StatusDone || last.Outcome == nil || last.Outcome.Kind != "success" {
		t.Fatalf("the watch ended %s", last.Raw)
	}
	dh := newHost(t, a, driver)
	devs := dh.wait(driven)
	if last := devs[len(devs)-1]; last.Outcome == nil || last.Outcome.Kind != "success" {
		t.Fatalf("the driven run ended %s", last.Raw)
	}
	if got, _ := os.ReadFile(filepath.Join(ws, "config.toml")); string(got) != "mode = \"on\"\n" {
		t.Errorf("config.toml = %q", got)
	}
	// The watcher saw every stored event once, in order.
	var seqs []int64
	for _, e := range evs {
		if e.Seq != 0 {
			seqs = append(seqs, e.Seq)
		}
	}
	for i := range seqs {
		if seqs[i] != int64(i+1) {
			t.Fatalf("the watcher's events are numbered %v", seqs)
		}
	}
}

// run.watch and approval.decide check their parameters.
func TestWatchParams(t *testing.T) {
	a := New(nil)
	h := openMemory(t, a)
	for _, tc := range []struct {
		method string
		params map[string]any
		code   Code
	}{
		{"run.watch", map[string]any{"harness": h}, CodeInvalidArgument},
		{"run.watch", map[string]any{"harness": h, "run_id": "run_nope"}, CodeNotFound},
		{"run.watch", map[string]any{"harness": h, "run_id": "x", "poll_ms": -1}, CodeInvalidArgument},
		{"run.watch", map[string]any{"harness": 999, "run_id": "x"}, CodeNotFound},
		{"approval.decide", map[string]any{"harness": h, "run_id": "r"}, CodeInvalidArgument},
		{"approval.decide", map[string]any{"harness": h, "run_id": "r", "request_id": "q"}, CodeInvalidArgument},
		{"approval.decide", map[string]any{"harness": h, "run_id": "r", "request_id": "q", "decision": map[string]any{"kind": "approve"}}, CodeNotFound},
		{"run.start", map[string]any{"harness": h, "spec": json.RawMessage(`{}`), "approvals": "later"}, CodeInvalidArgument},
	} {
		if e := callErr(t, a, tc.method, tc.params); e.Code != tc.code {
			t.Errorf("%s %v: %s %s, want %s", tc.method, tc.params, e.Code, e.Message, tc.code)
		}
	}
}

// A run that waits twice is answered twice: the watcher is told of each
// request as the run pauses for it, though the run pauses again within
// one poll of being resumed.
func TestWatchAnswersEachWait(t *testing.T) {
	a := New(nil)
	path := filepath.Join(t.TempDir(), "store.db")
	driver := handleOf(t, call(t, a, "harness.open", map[string]any{"store": path, "live": true}), "harness")
	defer a.Close(driver, 10*time.Second)
	ws, _ := json.Marshal(t.TempDir())
	spec := json.RawMessage(`{"task": {"goal": "two files", "root": ` + string(ws) + `,
		"verification": [{"kind": "workspace_file_contains", "file": "b.txt", "text": "b"}]},
	"provider": {"name": "scripted", "script": {"turns": [
		{"tool_calls": [{"name": "write_file", "arguments": {"path": "a.txt", "content": "a"}}]},
		{"tool_calls": [{"name": "write_file", "arguments": {"path": "b.txt", "content": "b"}}]}]}},
	"policy": {"version": 1, "defaults": {"read": "allow", "write": "ask", "exec": "deny", "net": "deny"}}}`)
	res := call(t, a, "run.start", map[string]any{"harness": driver, "spec": spec, "approvals": "wait"})
	runID := res["run_id"].(string)
	watcher := handleOf(t, call(t, a, "harness.open", map[string]any{"store": path}), "harness")
	defer a.Close(watcher, 10*time.Second)
	watched := handleOf(t, call(t, a, "run.watch", map[string]any{"harness": watcher, "run_id": runID, "poll_ms": 200}), "run")
	answered := 0
	deadline := time.Now().Add(2 * time.Minute)
	var last event
	for last.Kind != KindDone {
		if time.Now().After(deadline) {
			t.Fatalf("answered %d; the watch never ended", answered)
		}
		for _, e := range pollEvents(t, a, watcher, 100*time.Millisecond) {
			if e.Run != watched {
				continue
			}
			last = e
			if e.Kind == KindApprovalPending {
				call(t, a, "approval.decide", map[string]any{"harness": watcher, "run_id": runID, "request_id": e.RequestID,
					"decision": map[string]any{"kind": "approve"}})
				answered++
			}
		}
	}
	if answered != 2 || last.Outcome == nil || last.Outcome.Kind != "success" {
		t.Errorf("answered %d; the watch ended %s", answered, last.Raw)
	}
}
