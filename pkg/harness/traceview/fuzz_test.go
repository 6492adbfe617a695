package traceview

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/store"
)

// FuzzBuild builds an agent's steps from arbitrary tool calls, results and
// events: whatever a damaged or hostile store holds, the view is built
// without a panic and the page renders.
func FuzzBuild(f *testing.F) {
	f.Add("write_file", `{"path":"a","content":"x"}`, "created a (1 byte, 1 line)", `{"kind":"tool_call","call_id":"c"}`)
	f.Add("edit_file", `{"path":"a","old_text":"x","new_text":"y"}`, "edited a: replaced 1 occurrence, at line 1", `{"kind":"policy","effect":"deny"}`)
	f.Add("read_file", `{"path":"a"}`, "a (lines 1-2 of 2)\nx\ny\n", `{"kind":"verification","checks":[{}]}`)
	f.Add("read_file", `{}`, "a (empty file, 0 lines)", `{"kind":"model_done","latency_ms":-1}`)
	f.Add("exec", `[]`, "", `{"kind":"tool_result","call_id":"c"}`)
	f.Fuzz(func(t *testing.T, tool, args, output, ev string) {
		st := store.Step{Step: 1, Assistant: provider.Message{ToolCalls: []provider.ToolCall{{ID: "c", Name: tool, Arguments: json.RawMessage(args)}}},
			Observations: []store.Observation{{Kind: store.ObservationTool, CallID: "c", Tool: tool, Output: output}, {Kind: store.ObservationTool, CallID: "c", Output: output}}}
		var e event
		json.Unmarshal([]byte(ev), &e)
		e.Step = 1
		a := &Agent{ID: "r", Path: "root"}
		a.build([]store.Step{st, st}, []event{e, e})
		var b strings.Builder
		if err := WriteHTML(&b, &View{Root: "r", Agents: []*Agent{a}}); err != nil {
			t.Fatal(err)
		}
	})
}
