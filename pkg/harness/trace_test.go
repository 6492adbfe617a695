package harness_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/initorigin/io-harness-go/pkg/harness"
	"github.com/initorigin/io-harness-go/pkg/harness/approve"
	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/replay"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/scripted"
	"github.com/initorigin/io-harness-go/pkg/harness/store"
	"github.com/initorigin/io-harness-go/pkg/harness/verify"
)

func fixTask(dir string) harness.TaskContract {
	return harness.TaskContract{Goal: "fix the greeting", Root: dir,
		Verification: []verify.Check{contains("greet.txt", "hello, world")}}
}

func fixTurns() []scripted.Turn {
	return []scripted.Turn{
		{Text: "Looking around.", ToolCalls: []scripted.Call{call("find", map[string]string{"pattern": "*.txt"}), call("grep", map[string]string{"pattern": "hello"})}},
		{Text: "Reading it.", ToolCalls: []scripted.Call{call("read_file", map[string]string{"path": "greet.txt"})}},
		{Text: "Fixing it.", ToolCalls: []scripted.Call{call("edit_file", map[string]string{"path": "greet.txt", "old_text": "hello, wrld", "new_text": "hello, world"})}},
	}
}

// The events an observer sees are the events the trace holds, model
// deltas aside, one for one: what the store keeps only in the step's
// record (the model's text, the calls' arguments, the results) comes back
// whole.
func TestObservedEventsAreStored(t *testing.T) {
	dir := workspace(t, map[string]string{"greet.txt": "hello, wrld\n"})
	st := memStore(t)
	var obs events
	res, err := harness.Run(context.Background(), fixTask(dir), harness.Options{Provider: script(t, fixTurns()...), Store: st, Observer: obs.observe})
	if err != nil || res.Outcome.Kind != harness.Success {
		t.Fatalf("%v %+v", err, res)
	}
	tr, err := harness.ReadTrace(context.Background(), st, res.RunID)
	if err != nil {
		t.Fatal(err)
	}
	var live []string
	deltas := 0
	for _, e := range obs.all {
		if e.Kind == harness.EventModelDelta {
			deltas++
			continue
		}
		b, _ := json.Marshal(e)
		live = append(live, string(b))
	}
	var kept []string
	for _, e := range tr.Events {
		b, _ := json.Marshal(e)
		kept = append(kept, string(b))
	}
	if diff := cmp.Diff(live, kept); diff != "" {
		t.Errorf("observed vs stored events (-observed +stored):\n%s", diff)
	}
	if deltas == 0 {
		t.Error("no model text deltas reached the observer")
	}
	want := []harness.EventKind{harness.EventRunStarted,
		harness.EventStepStarted, harness.EventModelDone, harness.EventToolCall, harness.EventToolResult, harness.EventToolCall, harness.EventToolResult, harness.EventVerification, harness.EventCheckpoint,
		harness.EventStepStarted, harness.EventModelDone, harness.EventToolCall, harness.EventToolResult, harness.EventVerification, harness.EventCheckpoint,
		harness.EventStepStarted, harness.EventModelDone, harness.EventToolCall, harness.EventToolResult, harness.EventVerification, harness.EventCheckpoint,
		harness.EventOutcome}
	if diff := cmp.Diff(want, obs.kinds()); diff != "" {
		t.Errorf("event kinds (-want +got):\n%s", diff)
	}
}

// canonical is a trace with clocks, ids and latencies removed.
func canonical(t *testing.T, st store.Store, runID string) []harness.Event {
	t.Helper()
	stored, err := st.Events(context.Background(), runID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []harness.Event
	for _, se := range stored {
		var e harness.Event
		if err := json.Unmarshal(se.Data, &e); err != nil {
			t.Fatal(err)
		}
		e.RunID, e.At, e.LatencyMS, e.FirstTokenMS, e.Provider = "", time.Time{}, 0, 0, ""
		for i := range e.Checks {
			e.Checks[i].Duration = 0
		}
		out = append(out, e)
	}
	return out
}

// A run recorded against a provider replays offline, from the cassette
// alone, to the same trace.
func TestRecordedRunReplaysToTheSameTrace(t *testing.T) {
	files := map[string]string{"greet.txt": "hello, wrld\n", "notes/a.txt": "nothing\n"}
	st := memStore(t)
	rec := replay.NewRecorder(script(t, fixTurns()...))
	first, err := harness.Run(context.Background(), fixTask(workspace(t, files)), harness.Options{Provider: rec, Store: st})
	if err != nil || first.Outcome.Kind != harness.Success {
		t.Fatalf("%v %+v", err, first)
	}
	cassette := filepath.Join(t.TempDir(), "run.cassette.json")
	if err := rec.Save(cassette); err != nil {
		t.Fatal(err)
	}
	player, err := replay.Load(cassette)
	if err != nil {
		t.Fatal(err)
	}
	second, err := harness.Run(context.Background(), fixTask(workspace(t, files)), harness.Options{Provider: player, Store: st})
	if err != nil || second.Outcome.Kind != harness.Success {
		t.Fatalf("%v %+v", err, second)
	}
	if diff := cmp.Diff(canonical(t, st, first.RunID), canonical(t, st, second.RunID)); diff != "" {
		t.Errorf("replayed trace differs (-recorded +replayed):\n%s", diff)
	}

	// A different workspace makes a different request, and the cassette
	// says so loudly instead of answering.
	other := map[string]string{"greet.txt": "HELLO, WRLD\n"}
	third, err := harness.Run(context.Background(), fixTask(workspace(t, other)), harness.Options{Provider: player, Store: st})
	if err != nil {
		t.Fatal(err)
	}
	if third.Outcome.Kind != harness.Escalated || third.Outcome.Retryable {
		t.Errorf("a request the cassette lacks: %+v, want a terminal escalation", third.Outcome)
	}
	steps, _ := st.Steps(context.Background(), third.RunID)
	if len(steps) != 1 {
		t.Errorf("%d steps before the miss, want 1 (the greeting differs only in what grep finds)", len(steps))
	}
}

// A run whose provider failed does not read like a clean one: the text
// trace names the retries and the fallback, and both forms keep the calls
// of the step that ended the run.
func TestTraceShowsRetriesAndFallbacks(t *testing.T) {
	dir := workspace(t, nil)
	flaky := scripted.Turn{Text: "x", Fail: &scripted.Failure{Kind: provider.KindRateLimited, RetryAfterMS: 1}}
	dead := script(t, flaky, flaky, flaky, flaky)
	sp, _ := scripted.New(scripted.Script{Name: "backup", Turns: []scripted.Turn{calls(write("out.txt", "done"))}})
	st := memStore(t)
	task := harness.TaskContract{Goal: "g", Root: dir, Verification: []verify.Check{contains("out.txt", "done")}}
	res, err := harness.Run(context.Background(), task, harness.Options{Provider: dead, Fallbacks: []provider.Provider{sp}, Store: st, Backoff: fastBackoff})
	if err != nil || res.Outcome.Kind != harness.Success {
		t.Fatalf("%+v %v", res, err)
	}
	tr, err := harness.ReadTrace(context.Background(), st, res.RunID)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	tr.WriteText(&b)
	for _, want := range []string{"call 1 to scripted retried after", "fallback: scripted -> backup"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the text trace lacks %q:\n%s", want, b.String())
		}
	}

	// A run that escalates keeps the calls of its last step.
	st2 := memStore(t)
	res, err = harness.Run(context.Background(), task, harness.Options{Provider: script(t, flaky, flaky, flaky), Store: st2, Backoff: fastBackoff})
	if err != nil || res.Outcome.Kind != harness.Escalated {
		t.Fatalf("%+v %v", res, err)
	}
	tr, err = harness.ReadTrace(context.Background(), st2, res.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Attempts) != 3 || tr.Attempts[2].ErrorKind != string(provider.KindRateLimited) {
		t.Errorf("the escalation's attempts: %+v", tr.Attempts)
	}
	b.Reset()
	tr.WriteText(&b)
	if !strings.Contains(b.String(), "provider calls of no committed step") || !strings.Contains(b.String(), "call 3 to scripted failed") {
		t.Errorf("the text trace of an escalation:\n%s", b.String())
	}
}

// A run whose first provider failed, and whose calls the policy refused
// or asked about, says so before its first step, and each step says what
// happened to it: the retry, the fall-back, the refusal, the approval. A
// clean run says nothing of the kind.
func TestTextTraceIsNotCleanWhenTheRunWasNot(t *testing.T) {
	dir := workspace(t, map[string]string{".env": "KEY=1\n"})
	flaky := scripted.Turn{Text: "x", Fail: &scripted.Failure{Kind: provider.KindRateLimited, RetryAfterMS: 1}}
	dead := script(t, flaky, flaky, flaky, flaky)
	backup, _ := scripted.New(scripted.Script{Name: "backup", Turns: []scripted.Turn{
		calls(call("read_file", map[string]string{"path": ".env"})),
		calls(write("out.txt", "done")),
	}})
	st := memStore(t)
	task := harness.TaskContract{Goal: "g", Root: dir, Verification: []verify.Check{contains("out.txt", "done")}}
	res, err := harness.Run(context.Background(), task, harness.Options{Provider: dead, Fallbacks: []provider.Provider{backup}, Store: st,
		Backoff: fastBackoff, Policy: testPolicy(), Approver: approve.ApproveAll()})
	if err != nil || res.Outcome.Kind != harness.Success {
		t.Fatalf("%+v %v", res, err)
	}
	tr, err := harness.ReadTrace(context.Background(), st, res.RunID)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	tr.WriteText(&b)
	text := b.String()
	for _, want := range []string{
		"not clean: 3 provider call(s) failed, 2 retried, 1 fallback(s): scripted -> backup; 1 tool call(s) refused; 1 policy denial(s); 1 approval(s) asked",
		"call 1 to scripted retried after", "fallback: scripted -> backup",
		`REFUSED: deny by rule ".env" in layer "secrets"`,
		"approval apr_", ": approve",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the text trace lacks %q:\n%s", want, text)
		}
	}
	if strings.Index(text, "not clean:") > strings.Index(text, "step 1") {
		t.Errorf("the summary comes after the steps:\n%s", text)
	}

	// A clean run.
	clean := memStore(t)
	res, err = harness.Run(context.Background(), task, harness.Options{Provider: script(t, calls(write("out.txt", "done"))), Store: clean})
	if err != nil {
		t.Fatal(err)
	}
	tr, _ = harness.ReadTrace(context.Background(), clean, res.RunID)
	b.Reset()
	tr.WriteText(&b)
	if strings.Contains(b.String(), "not clean") {
		t.Errorf("a clean run:\n%s", b.String())
	}
}
