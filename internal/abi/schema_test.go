package abi

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/initorigin/io-harness-go/pkg/harness"
	"github.com/initorigin/io-harness-go/pkg/harness/approve"
	"github.com/initorigin/io-harness-go/pkg/harness/policy"
	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/scripted"
	"github.com/initorigin/io-harness-go/pkg/harness/tool"
	"github.com/initorigin/io-harness-go/pkg/harness/verify"
	"github.com/initorigin/io-harness-go/pkg/sandbox"
)

// The one JSON Schema of the spec, the events and the results
// (docs/spec.schema.json) is checked three ways: its objects have exactly
// the fields of the Go types they describe; every event a run emits
// validates; every JSON example of docs/spec.md validates.

const schemaPath = "../../docs/spec.schema.json"

func readSchema(t testing.TB) map[string]any {
	t.Helper()
	data, err := os.ReadFile(schemaPath)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatalf("%s: %v", schemaPath, err)
	}
	return doc
}

// compileDef compiles the schema with its root pointing at one of its
// definitions.
func compileDef(t testing.TB, name string) *verify.Schema {
	t.Helper()
	doc := readSchema(t)
	if _, ok := doc["$defs"].(map[string]any)[name]; !ok {
		t.Fatalf("no $defs/%s in the schema", name)
	}
	doc["$ref"] = "#/$defs/" + name
	data, _ := json.Marshal(doc)
	s, err := verify.CompileSchema(data)
	if err != nil {
		t.Fatalf("compile $defs/%s: %v", name, err)
	}
	return s
}

// jsonFields returns the JSON names of a struct's fields.
func jsonFields(typ reflect.Type) []string {
	var out []string
	for i := 0; i < typ.NumField(); i++ {
		f := typ.Field(i)
		tag := f.Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		if name == "-" || !f.IsExported() && name == "" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// Every object of the schema has exactly the JSON fields of its Go type:
// a field added in Go without the schema (or the other way) fails here.
func TestSchemaMatchesGoTypes(t *testing.T) {
	defs := readSchema(t)["$defs"].(map[string]any)
	for name, typ := range map[string]reflect.Type{
		"Spec":                 reflect.TypeOf(harness.Spec{}),
		"TaskContract":         reflect.TypeOf(harness.TaskContract{}),
		"Budgets":              reflect.TypeOf(harness.Budgets{}),
		"Check":                reflect.TypeOf(verify.Check{}),
		"Limits":               reflect.TypeOf(sandbox.Limits{}),
		"ProviderSpec":         reflect.TypeOf(harness.ProviderSpec{}),
		"Price":                reflect.TypeOf(provider.Price{}),
		"Script":               reflect.TypeOf(scripted.Script{}),
		"Turn":                 reflect.TypeOf(scripted.Turn{}),
		"ScriptedCall":         reflect.TypeOf(scripted.Call{}),
		"Failure":              reflect.TypeOf(scripted.Failure{}),
		"Backoff":              reflect.TypeOf(harness.Backoff{}),
		"Policy":               reflect.TypeOf(policy.Policy{}),
		"Defaults":             reflect.TypeOf(policy.Defaults{}),
		"Layer":                reflect.TypeOf(policy.Layer{}),
		"Rule":                 reflect.TypeOf(policy.Rule{}),
		"SandboxOptions":       reflect.TypeOf(sandbox.Options{}),
		"WasmTool":             reflect.TypeOf(tool.Wasm{}),
		"HostTool":             reflect.TypeOf(HostToolSpec{}),
		"Usage":                reflect.TypeOf(provider.Usage{}),
		"Cost":                 reflect.TypeOf(provider.Cost{}),
		"Spent":                reflect.TypeOf(harness.Spent{}),
		"Outcome":              reflect.TypeOf(harness.Outcome{}),
		"ErrorObject":          reflect.TypeOf(Error{}),
		"ApprovalRequest":      reflect.TypeOf(approve.Request{}),
		"Decision":             reflect.TypeOf(approve.Decision{}),
		"Rewrite":              reflect.TypeOf(approve.Rewrite{}),
		"CheckResult":          reflect.TypeOf(verify.Result{}),
		"SandboxEvent":         reflect.TypeOf(sandbox.Event{}),
		"ApprovalPendingEvent": reflect.TypeOf(pendingEvent{}),
		"HostToolCallEvent":    reflect.TypeOf(hostToolCallEvent{}),
		"DoneEvent":            reflect.TypeOf(DoneEvent{}),
	} {
		def, ok := defs[name].(map[string]any)
		if !ok {
			t.Errorf("no $defs/%s", name)
			continue
		}
		var got []string
		for k := range def["properties"].(map[string]any) {
			got = append(got, k)
		}
		sort.Strings(got)
		if diff := cmp.Diff(jsonFields(typ), got); diff != "" {
			t.Errorf("$defs/%s and %s differ (-Go +schema):\n%s", name, typ, diff)
		}
	}
	// A harness event is harness.Event with the run's handle.
	var got []string
	for k := range defs["HarnessEvent"].(map[string]any)["properties"].(map[string]any) {
		got = append(got, k)
	}
	sort.Strings(got)
	want := append(jsonFields(reflect.TypeOf(harness.Event{})), "run")
	sort.Strings(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("$defs/HarnessEvent and harness.Event differ (-Go +schema):\n%s", diff)
	}
	// The closed lists: event kinds, outcome kinds, error codes.
	enum := func(def string) []string {
		var out []string
		for _, v := range defs[def].(map[string]any)["enum"].([]any) {
			out = append(out, v.(string))
		}
		return out
	}
	var hk []string
	for _, k := range EventKinds() {
		if !slices.Contains([]string{KindApprovalPending, KindHostToolCall, KindDone, KindClosed, KindDebug, KindDebugDone}, k) {
			hk = append(hk, k)
		}
	}
	if diff := cmp.Diff(hk, enum("HarnessEventKind")); diff != "" {
		t.Errorf("harness event kinds (-Go +schema):\n%s", diff)
	}
	var codes []string
	for _, c := range Codes() {
		codes = append(codes, string(c))
	}
	if diff := cmp.Diff(codes, enum("ErrorCode")); diff != "" {
		t.Errorf("error codes (-Go +schema):\n%s", diff)
	}
	outcomes := []string{string(harness.Success), string(harness.StepCapReached), string(harness.TimeBudgetExceeded),
		string(harness.CostBudgetExceeded), string(harness.Escalated), string(harness.Cancelled), string(harness.AwaitingApproval),
		string(harness.Finished), string(harness.VerificationFailed), string(harness.SchemaUnsatisfied), string(harness.BudgetCeilingReached)}
	if diff := cmp.Diff(outcomes, enum("OutcomeKind")); diff != "" {
		t.Errorf("outcome kinds (-Go +schema):\n%s", diff)
	}
}

// Every event of real runs validates against $defs/Event: the shared
// fixtures, a run with a host tool, debug events, the closed event.
// Negative control: events with a wrong field type or kind do not.
func TestSchemaValidatesEvents(t *testing.T) {
	evSchema := compileDef(t, "Event")
	doneSchema := compileDef(t, "DoneEvent")
	a := New(nil)
	h := handleOf(t, call(t, a, "harness.open", map[string]any{"store": ":memory:"}), "harness")
	var raws []json.RawMessage
	collect := func(evs []event) {
		for _, e := range evs {
			raws = append(raws, e.Raw)
		}
	}
	for _, f := range loadFixtures(t) {
		hs := newHost(t, a, h)
		hs.answer = f.approve
		spec := f.specFor(t)
		res := call(t, a, "run.start", map[string]any{"harness": h, "spec": spec})
		evs := hs.wait(handleOf(t, res, "run"))
		collect(evs)
		if f.resume != nil {
			last := evs[len(evs)-1]
			res := call(t, a, "run.resume_with_decision", map[string]any{"harness": h, "run_id": last.RunID,
				"request_id": last.Outcome.RequestID, "decision": f.resume, "spec": spec})
			collect(hs.wait(handleOf(t, res, "run")))
		}
	}
	run := handleOf(t, call(t, a, "run.start", map[string]any{"harness": h, "spec": toolSpec(t, map[string]any{"a": 1, "b": 2}, nil),
		"tools": []any{addTool(nil)}}), "run")
	th := &toolHost{host: newHost(t, a, h), answer: func(toolEvent) map[string]any { return map[string]any{"output": "3"} }}
	evs, _ := th.wait(run)
	collect(evs)
	call(t, a, "debug.emit", map[string]any{"harness": h, "count": 2})
	for n := 0; n < 3; {
		for _, e := range pollEvents(t, a, h, time.Second) {
			raws = append(raws, e.Raw)
			n++
		}
	}
	a.Close(h, 10*time.Second)
	closed, _ := a.PollStatus(h, 0, 0)
	var last []json.RawMessage
	json.Unmarshal(closed, &last)
	raws = append(raws, last...)

	kinds := map[string]bool{}
	for _, raw := range raws {
		var k struct{ Kind string }
		json.Unmarshal(raw, &k)
		kinds[k.Kind] = true
		if err := evSchema.Check(raw); err != nil {
			t.Errorf("event %s: %v", raw, err)
		}
		if k.Kind == KindDone {
			if err := doneSchema.Check(raw); err != nil {
				t.Errorf("done event %s: %v", raw, err)
			}
		}
	}
	for _, want := range []string{"run_started", "tool_call", "tool_result", "approval_pending", "host_tool_call", "done",
		"outcome", "verification", "debug", "debug_done", "closed", "model_done", "policy"} {
		if !kinds[want] {
			t.Errorf("no %s event was checked", want)
		}
	}
	for _, bad := range []string{
		`{"kind":"done","run":1,"run_id":"r","status":"finished"}`,
		`{"kind":"done","run":1,"run_id":"r","status":"ok","outcome":{"kind":"won","steps":1,"usage":{"input_tokens":1,"output_tokens":1},"cost":{"usd":0,"known":true}}}`,
		`{"kind":"host_tool_call","run":1,"run_id":"r","step":1,"request_id":"x","tool":"t","arguments":[],"timeout_ms":1}`,
		`{"kind":"no_such_event"}`,
		`{"run":1,"run_id":"r","path":"root","seq":"1","step":1,"kind":"run_started","at":"2026-01-01T00:00:00Z"}`,
	} {
		if evSchema.Check([]byte(bad)) == nil {
			t.Errorf("control: %s validated", bad)
		}
	}
}

// Every JSON example in docs/spec.md validates against the schema: the
// whole specs against the root, the fragments ("field": value) against
// that field's schema, each table's examples against the field they
// document. Negative control: a misspelt field and a wrong type fail.
func TestSpecExamplesValidate(t *testing.T) {
	doc := readSchema(t)
	defs := doc["$defs"].(map[string]any)
	data, err := os.ReadFile(filepath.Join("..", "..", "docs", "spec.md"))
	if err != nil {
		t.Fatal(err)
	}
	md := string(data)
	checked, sketches := 0, 0
	// schemaAt resolves a path of property names ("turns[].text") from a
	// definition to a schema, as a JSON pointer into the document.
	pointer := func(def, path string) string {
		cur := defs[def].(map[string]any)
		ptr := "#/$defs/" + def
		for _, seg := range strings.Split(path, ".") {
			items := strings.HasSuffix(seg, "[]")
			seg = strings.TrimSuffix(seg, "[]")
			for cur["$ref"] != nil {
				ptr = cur["$ref"].(string)
				cur = defs[strings.TrimPrefix(ptr, "#/$defs/")].(map[string]any)
			}
			props, _ := cur["properties"].(map[string]any)
			next, ok := props[seg].(map[string]any)
			if !ok {
				t.Fatalf("docs/spec.md documents %s.%s: no such field in $defs/%s", def, path, def)
			}
			ptr += "/properties/" + seg
			cur = next
			if items {
				for cur["$ref"] != nil {
					ptr = cur["$ref"].(string)
					cur = defs[strings.TrimPrefix(ptr, "#/$defs/")].(map[string]any)
				}
				ptr += "/items"
				cur = cur["items"].(map[string]any)
			}
		}
		return ptr
	}
	validate := func(where, ptr string, value json.RawMessage) {
		t.Helper()
		d := readSchema(t)
		d["$ref"] = ptr
		raw, _ := json.Marshal(d)
		s, err := verify.CompileSchema(raw)
		if err != nil {
			t.Fatalf("%s: compile %s: %v", where, ptr, err)
		}
		if err := s.Check(value); err != nil {
			t.Errorf("docs/spec.md %s: %s does not validate against %s: %v", where, value, ptr, err)
		}
		checked++
	}
	// The fenced examples.
	for _, m := range regexp.MustCompile("(?s)```json\n(.*?)```").FindAllStringSubmatch(md, -1) {
		block := strings.TrimSpace(m[1])
		if strings.Contains(block, "{ ... }") {
			sketches++ // the shape of a spec, not an example
			continue
		}
		if strings.HasPrefix(block, `"`) {
			var frag map[string]json.RawMessage
			if err := json.Unmarshal([]byte("{"+block+"}"), &frag); err != nil {
				t.Fatalf("a fragment of docs/spec.md is not JSON: %v\n%s", err, block)
			}
			for k, v := range frag {
				validate("fragment "+k, pointer("Spec", k), v)
			}
			continue
		}
		validate("example", "#/$defs/Spec", json.RawMessage(block))
	}
	// The tables: each section documents one definition.
	sections := map[string]string{
		"## `task`": "TaskContract", "### `task.budgets`": "Budgets", "### `task.verification[]`": "Check",
		"## `provider`": "ProviderSpec", "### `provider.script`": "Script", "## `backoff`": "Backoff",
		"## `policy`": "Policy", "## `sandbox`": "SandboxOptions", "## `wasm_tools`": "WasmTool",
	}
	def := ""
	row := regexp.MustCompile("^\\| `([a-z_\\[\\].]+)` \\| `(.*?)` \\|")
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(line, "#") {
			def = ""
			for h, d := range sections {
				if strings.HasPrefix(line, h) {
					def = d
				}
			}
			continue
		}
		m := row.FindStringSubmatch(line)
		if m == nil || def == "" {
			continue
		}
		field, example := m[1], m[2]
		where := def + " " + field
		if strings.HasPrefix(example, "{") { // a whole object: the field's value
			if def == "Check" {
				validate(where, "#/$defs/Check", json.RawMessage(example))
			} else {
				validate(where, pointer(def, field), json.RawMessage(example))
			}
			continue
		}
		var frag map[string]json.RawMessage
		if err := json.Unmarshal([]byte("{"+example+"}"), &frag); err != nil {
			t.Errorf("docs/spec.md %s: the example %s is not JSON: %v", where, example, err)
			continue
		}
		for k, v := range frag {
			path := field
			if i := strings.LastIndex(field, "."); i >= 0 {
				path = field[:i+1] + k
			} else {
				path = k
			}
			validate(where, pointer(def, path), v)
		}
	}
	t.Logf("checked %d examples of docs/spec.md", checked)
	if checked < 60 || sketches != 1 {
		t.Errorf("checked %d examples and skipped %d sketches of docs/spec.md; want at least 60 and exactly 1", checked, sketches)
	}
	spec := compileDef(t, "Spec")
	for _, bad := range []string{
		`{"task":{"goal":"g","root":"/w","verification":[{"kind":"file_contains"}]},"provider":{"name":"scripted"},"polcy":{}}`,
		`{"task":{"goal":"g","root":"/w","verification":[{"kind":"file_contains"}],"budgets":{"max_steps":"8"}},"provider":{"name":"scripted"}}`,
		`{"task":{"goal":"g","root":"/w","verification":[]},"provider":{"name":"scripted"},"policy":"strict"}`,
	} {
		if spec.Check([]byte(bad)) == nil {
			t.Errorf("control: %s validated", bad)
		}
	}
}
