package abi

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/initorigin/io-harness-go/pkg/harness"
)

// addTool is the registration of a host tool "add" with a strict schema.
func addTool(extra map[string]any) map[string]any {
	t := map[string]any{
		"name":        "add",
		"description": "Adds two integers.",
		"parameters": map[string]any{"type": "object", "additionalProperties": false, "required": []string{"a", "b"},
			"properties": map[string]any{"a": map[string]any{"type": "integer"}, "b": map[string]any{"type": "integer"}}},
	}
	for k, v := range extra {
		t[k] = v
	}
	return t
}

// toolSpec is a scripted run whose first turn calls the host tool "add"
// with args, and whose second turn writes done.txt, which the gate wants.
func toolSpec(t testing.TB, args any, policyJSON any) map[string]any {
	spec := map[string]any{
		"task": map[string]any{"goal": "Add, then write done.txt.", "root": t.TempDir(),
			"verification": []any{map[string]any{"kind": "workspace_file_contains", "file": "done.txt", "text": "done"}}},
		"provider": map[string]any{"name": "scripted", "script": map[string]any{"turns": []any{
			map[string]any{"text": "Adding.", "tool_calls": []any{map[string]any{"name": "add", "arguments": args}}},
			map[string]any{"text": "Writing.", "tool_calls": []any{map[string]any{"name": "write_file",
				"arguments": map[string]any{"path": "done.txt", "content": "done\n"}}}},
		}}},
	}
	if policyJSON != nil {
		spec["policy"] = policyJSON
	}
	return spec
}

// toolHost is a host that polls and answers host tool calls with answer
// (nil: it holds them, as a busy host would).
type toolHost struct {
	*host
	answer func(e toolEvent) map[string]any
	calls  []toolEvent
}

type toolEvent struct {
	Kind      string          `json:"kind"`
	Run       uint64          `json:"run"`
	RunID     string          `json:"run_id"`
	Step      int             `json:"step"`
	RequestID string          `json:"request_id"`
	CallID    string          `json:"call_id"`
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
	IsError   bool            `json:"is_error"`
	Output    string          `json:"output"`
}

// wait polls until run is done, answering host tool calls, and returns
// the run's events decoded as tool events too. It fails after hangGuard.
func (th *toolHost) wait(run uint64) ([]event, []toolEvent) {
	th.t.Helper()
	limit := hangGuard
	deadline := time.Now().Add(limit)
	var all []toolEvent
	for {
		evs := th.events[run]
		if n := len(evs); n > 0 && evs[n-1].Kind == KindDone {
			return evs, all
		}
		if time.Now().After(deadline) {
			th.t.Fatalf("run %d: no done event within %s; got %v", run, limit, kinds(evs))
		}
		for _, e := range pollEvents(th.t, th.a, th.h, 100*time.Millisecond) {
			var te toolEvent
			json.Unmarshal(e.Raw, &te)
			if e.Run == run {
				all = append(all, te)
			}
			if e.Kind == KindHostToolCall {
				th.calls = append(th.calls, te)
				if th.answer != nil {
					p := th.answer(te)
					p["harness"], p["run_id"], p["request_id"] = th.h, te.RunID, te.RequestID
					call(th.t, th.a, "tool.resolve", p)
				}
			}
			th.events[e.Run] = append(th.events[e.Run], e)
		}
	}
}

func toolResults(evs []toolEvent) []toolEvent {
	var out []toolEvent
	for _, e := range evs {
		if e.Kind == string(harness.EventToolResult) && e.Tool == "add" {
			out = append(out, e)
		}
	}
	return out
}

// The model calls a host tool; the host answers; the model sees the
// answer, the trace holds it, and the run succeeds.
func TestHostToolRoundTrip(t *testing.T) {
	a := New(nil)
	h := openMemory(t, a)
	res := call(t, a, "run.start", map[string]any{"harness": h, "spec": toolSpec(t, map[string]any{"a": 2, "b": 3}, nil),
		"tools": []any{addTool(nil)}})
	run := handleOf(t, res, "run")
	th := &toolHost{host: newHost(t, a, h), answer: func(e toolEvent) map[string]any {
		var args struct{ A, B int }
		json.Unmarshal(e.Arguments, &args)
		return map[string]any{"output": itoa(args.A + args.B)}
	}}
	evs, all := th.wait(run)
	if done := evs[len(evs)-1]; done.Outcome == nil || done.Outcome.Kind != "success" {
		t.Fatalf("done %s", done.Raw)
	}
	if len(th.calls) != 1 || th.calls[0].Tool != "add" || th.calls[0].Step != 1 || th.calls[0].CallID == "" ||
		!strings.HasPrefix(th.calls[0].RequestID, "htc_") {
		t.Fatalf("host tool calls %+v", th.calls)
	}
	if r := toolResults(all); len(r) != 1 || r[0].IsError || r[0].Output != "5" {
		t.Errorf("tool results %+v", r)
	}
	tr := call(t, a, "trace.get", map[string]any{"harness": h, "run_id": res["run_id"], "format": "text"})
	if s := tr["text"].(string); !strings.Contains(s, "add") || !strings.Contains(s, "5") {
		t.Errorf("trace:\n%s", s)
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// Attack: the model sends arguments that break the tool's schema. They
// never reach the host; the model is told why. Negative control: the same
// arguments with a tool whose schema allows them reach the host.
func TestHostToolArgumentsValidated(t *testing.T) {
	bad := map[string]any{"a": "two", "b": 3, "rm": "-rf /"}
	for _, tc := range []struct {
		name     string
		tool     map[string]any
		reaches  bool
		contains string
	}{
		{"strict schema", addTool(nil), false, "do not match its parameters schema"},
		{"open schema (control)", addTool(map[string]any{"parameters": map[string]any{"type": "object"}}), true, "seen"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := New(nil)
			h := openMemory(t, a)
			run := handleOf(t, call(t, a, "run.start", map[string]any{"harness": h, "spec": toolSpec(t, bad, nil),
				"tools": []any{tc.tool}}), "run")
			th := &toolHost{host: newHost(t, a, h), answer: func(toolEvent) map[string]any { return map[string]any{"output": "seen"} }}
			_, all := th.wait(run)
			if got := len(th.calls) > 0; got != tc.reaches {
				t.Fatalf("the host saw the call: %v, want %v", got, tc.reaches)
			}
			r := toolResults(all)
			if len(r) != 1 || r[0].IsError == tc.reaches || !strings.Contains(r[0].Output, tc.contains) {
				t.Errorf("tool result %+v, want one containing %q", r, tc.contains)
			}
		})
	}
}

// Attack: a policy denies the tool's name as an exec; the host never
// sees the call. Negative control: a policy that allows it.
func TestHostToolUnderExecPolicy(t *testing.T) {
	for _, tc := range []struct {
		effect  string
		reaches bool
	}{{"deny", false}, {"allow", true}} {
		t.Run(tc.effect, func(t *testing.T) {
			a := New(nil)
			h := openMemory(t, a)
			pol := map[string]any{"version": 1, "defaults": map[string]any{"read": "allow", "write": "allow", "exec": "allow", "net": "deny"},
				"layers": []any{map[string]any{"name": "tools", "rules": []any{map[string]any{"act": "exec", "effect": tc.effect, "pattern": "add"}}}}}
			run := handleOf(t, call(t, a, "run.start", map[string]any{"harness": h, "spec": toolSpec(t, map[string]any{"a": 1, "b": 1}, pol),
				"tools": []any{addTool(nil)}}), "run")
			th := &toolHost{host: newHost(t, a, h), answer: func(toolEvent) map[string]any { return map[string]any{"output": "2"} }}
			evs, all := th.wait(run)
			if got := len(th.calls) > 0; got != tc.reaches {
				t.Fatalf("the host saw the call: %v, want %v (events %v)", got, tc.reaches, kinds(evs))
			}
			if !tc.reaches && !containsKind(evs, "refusal") {
				t.Errorf("no refusal event: %v", kinds(evs))
			}
			if r := toolResults(all); len(r) != 1 || r[0].IsError == tc.reaches {
				t.Errorf("tool result %+v", r)
			}
		})
	}
}

// An exception in the host's tool is an observation the model sees; the
// run goes on to its outcome.
func TestHostToolExceptionIsObservation(t *testing.T) {
	a := New(nil)
	h := openMemory(t, a)
	run := handleOf(t, call(t, a, "run.start", map[string]any{"harness": h, "spec": toolSpec(t, map[string]any{"a": 1, "b": 1}, nil),
		"tools": []any{addTool(nil)}}), "run")
	th := &toolHost{host: newHost(t, a, h), answer: func(toolEvent) map[string]any {
		return map[string]any{"error": "ValueError: the host's function raised"}
	}}
	evs, all := th.wait(run)
	if done := evs[len(evs)-1]; done.Status != StatusDone || done.Outcome.Kind != "success" {
		t.Fatalf("done %s", done.Raw)
	}
	if r := toolResults(all); len(r) != 1 || !r[0].IsError || !strings.Contains(r[0].Output, "add failed: ValueError: the host's function raised") {
		t.Errorf("tool result %+v", r)
	}
}

// Attack: the host is busy (it reads its events but does not answer the
// call). The call fails cleanly after the tool's timeout: an observation,
// and the run goes on; the late answer is told why it is too late.
// Negative control: a host that answers gets its output through.
func TestHostToolBusyHost(t *testing.T) {
	a := New(nil)
	h := openMemory(t, a)
	run := handleOf(t, call(t, a, "run.start", map[string]any{"harness": h, "spec": toolSpec(t, map[string]any{"a": 1, "b": 1}, nil),
		"tools": []any{addTool(map[string]any{"timeout_ms": 200})}}), "run")
	th := &toolHost{host: newHost(t, a, h)} // never answers
	evs, all := th.wait(run)
	if done := evs[len(evs)-1]; done.Outcome == nil || done.Outcome.Kind != "success" {
		t.Fatalf("done %s", done.Raw)
	}
	r := toolResults(all)
	if len(r) != 1 || !r[0].IsError || !strings.Contains(r[0].Output, "did not answer within 200ms") {
		t.Fatalf("tool result %+v", r)
	}
	// The run is over: the late answer is refused at once.
	e := callErr(t, a, "tool.resolve", map[string]any{"harness": h, "run_id": th.calls[0].RunID, "request_id": th.calls[0].RequestID, "output": "2"})
	if e.Code != CodeNotFound {
		t.Errorf("late answer: %s %s", e.Code, e.Message)
	}
}

// A host that goes away (closes the harness) while a call is pending:
// close ends the run at once instead of waiting out the tool's timeout.
func TestHostToolHostGone(t *testing.T) {
	a := New(nil)
	h := handleOf(t, call(t, a, "harness.open", map[string]any{"store": ":memory:"}), "harness")
	run := handleOf(t, call(t, a, "run.start", map[string]any{"harness": h, "spec": toolSpec(t, map[string]any{"a": 1, "b": 1}, nil),
		"tools": []any{addTool(map[string]any{"timeout_ms": 3_600_000})}}), "run")
	hs := newHost(t, a, h)
	for !containsKind(hs.events[run], KindHostToolCall) {
		for _, e := range pollEvents(t, a, h, 100*time.Millisecond) {
			hs.events[e.Run] = append(hs.events[e.Run], e)
		}
	}
	if st := a.Close(h, hangGuard); st != StatusOK {
		t.Fatalf("close with a pending host tool call: status %d (the call held the run)", st)
	}
	if s := a.Stats(); s.Runs != 0 || s.HarnessEntries != 0 {
		t.Errorf("after close: %+v", s)
	}
}

// Attack: a host answers with an id the run never gave out (a typo): it
// fails at once. A second, different answer is a conflict; an identical
// one is accepted again.
func TestToolResolveIDs(t *testing.T) {
	a := New(nil)
	h := openMemory(t, a)
	// The turn after the call waits, so that the run is still there to
	// remember the answer while the test answers again.
	spec := toolSpec(t, map[string]any{"a": 1, "b": 1}, nil)
	turns := spec["provider"].(map[string]any)["script"].(map[string]any)["turns"].([]any)
	turns[1].(map[string]any)["latency_ms"] = 600_000
	run := handleOf(t, call(t, a, "run.start", map[string]any{"harness": h, "spec": spec, "tools": []any{addTool(nil)}}), "run")
	hs := newHost(t, a, h)
	var pending event
	for pending.Kind == "" {
		for _, e := range pollEvents(t, a, h, 100*time.Millisecond) {
			hs.events[e.Run] = append(hs.events[e.Run], e)
			if e.Kind == KindHostToolCall {
				pending = e
			}
		}
	}
	base := func(extra map[string]any) map[string]any {
		p := map[string]any{"harness": h, "run_id": pending.RunID, "request_id": pending.RequestID}
		for k, v := range extra {
			p[k] = v
		}
		return p
	}
	typo := pending.RequestID[:len(pending.RequestID)-1] + "x"
	for _, tc := range []struct {
		name string
		p    map[string]any
		code Code
	}{
		{"typo", base(map[string]any{"request_id": typo, "output": "2"}), CodeNotFound},
		{"no answer", base(nil), CodeInvalidArgument},
		{"unknown run", base(map[string]any{"run_id": "run_nope", "output": "2"}), CodeNotFound},
		{"no request id", base(map[string]any{"request_id": "", "output": "2"}), CodeInvalidArgument},
	} {
		if e := callErr(t, a, "tool.resolve", tc.p); e.Code != tc.code {
			t.Errorf("%s: %s %s", tc.name, e.Code, e.Message)
		}
	}
	if got := call(t, a, "tool.resolve", base(map[string]any{"output": "2"})); got["state"] != "delivered" {
		t.Errorf("answer: %v", got)
	}
	if got := call(t, a, "tool.resolve", base(map[string]any{"output": "2"})); got["state"] != "already_resolved" {
		t.Errorf("same answer again: %v", got)
	}
	if e := callErr(t, a, "tool.resolve", base(map[string]any{"output": "3"})); e.Code != CodeConflict {
		t.Errorf("another answer: %s", e.Code)
	}
	call(t, a, "run.cancel", map[string]any{"harness": h, "run": run})
	hs.wait(run)
}

// A registration the harness could not honour is refused at run.start,
// naming its field, and leaves nothing behind.
func TestHostToolRegistration(t *testing.T) {
	a := New(nil)
	h := openMemory(t, a)
	for _, tc := range []struct {
		name  string
		tools any
		field string
	}{
		{"bad name", []any{addTool(map[string]any{"name": "1add"})}, "params.tools[0].name"},
		{"built-in name", []any{addTool(map[string]any{"name": "write_file"})}, "params.tools[0].name"},
		{"twice", []any{addTool(nil), addTool(nil)}, "params.tools[1].name"},
		{"no description", []any{addTool(map[string]any{"description": " "})}, "params.tools[0].description"},
		{"not an object schema", []any{addTool(map[string]any{"parameters": map[string]any{"type": "string"}})}, "params.tools[0].parameters"},
		{"schema does not compile", []any{addTool(map[string]any{"parameters": map[string]any{"type": "object", "properties": 3}})}, "params.tools[0].parameters"},
		{"external ref", []any{addTool(map[string]any{"parameters": map[string]any{"type": "object", "$ref": "http://127.0.0.1:1/s.json"}})}, "params.tools[0].parameters"},
		{"timeout", []any{addTool(map[string]any{"timeout_ms": -1})}, "params.tools[0].timeout_ms"},
		{"unknown field", []any{addTool(map[string]any{"run": "me"})}, "params.tools"},
		{"not an array", map[string]any{"name": "add"}, "params.tools"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := callErr(t, a, "run.start", map[string]any{"harness": h, "spec": toolSpec(t, map[string]any{}, nil), "tools": tc.tools})
			if e.Code != CodeInvalidArgument || e.Details["field"] != tc.field {
				t.Errorf("%s %s %v", e.Code, e.Message, e.Details)
			}
		})
	}
	if s := a.Stats(); s.Runs != 0 || s.RunEntries != 0 {
		t.Errorf("refused runs left entries: %+v", s)
	}
}

// A host's output past the bound is cut, saying so.
func TestHostToolOutputBound(t *testing.T) {
	if got := bound(strings.Repeat("é", maxToolOutput)); len(got) > maxToolOutput || !strings.Contains(got, "more bytes cut") {
		t.Errorf("bound: %d bytes, ends %q", len(got), got[len(got)-80:])
	}
	if got := bound("short"); got != "short" {
		t.Errorf("bound(short) = %q", got)
	}
}

// A resumed run gets its host tools again from the resume's params.
func TestHostToolOnResume(t *testing.T) {
	a := New(nil)
	dir := t.TempDir()
	h := handleOf(t, call(t, a, "harness.open", map[string]any{"store": dir + "/trace.db"}), "harness")
	t.Cleanup(func() { a.Close(h, 10*time.Second) })
	spec := toolSpec(t, map[string]any{"a": 4, "b": 5}, nil)
	spec["task"].(map[string]any)["budgets"] = map[string]any{"max_steps": 1}
	res := call(t, a, "run.start", map[string]any{"harness": h, "spec": spec, "tools": []any{addTool(nil)}})
	th := &toolHost{host: newHost(t, a, h), answer: func(toolEvent) map[string]any { return map[string]any{"output": "9"} }}
	evs, _ := th.wait(handleOf(t, res, "run"))
	if o := evs[len(evs)-1].Outcome; o == nil || o.Kind != "verification_failed" {
		t.Fatalf("first run: %s", evs[len(evs)-1].Raw)
	}
	again := call(t, a, "run.resume", map[string]any{"harness": h, "spec": spec, "run_id": res["run_id"],
		"budgets": map[string]any{"max_steps": 3}, "tools": []any{addTool(nil)}})
	evs, _ = th.wait(handleOf(t, again, "run"))
	if o := evs[len(evs)-1].Outcome; o == nil || o.Kind != "success" {
		t.Fatalf("resumed run: %s", evs[len(evs)-1].Raw)
	}
}
