package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/initorigin/io-harness-go/pkg/harness"
	"github.com/initorigin/io-harness-go/pkg/harness/policy"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/scripted"
)

// An exec command line is the model's content: a bearer token in
// sh -c "…" must not leave in the policy event's target, nor in the
// approval's, unless content is opted in. The control is the same run with
// Content on, whose export carries the token.
func TestExecCommandLineIsContent(t *testing.T) {
	const token = "Bearer tok-5f2c9a"
	for _, content := range []bool{false, true} {
		t.Run(fmt.Sprintf("content=%v", content), func(t *testing.T) {
			rc, endpoint := serve(t, "http/protobuf")
			x, err := New(Config{Endpoint: endpoint, Content: content})
			if err != nil {
				t.Fatal(err)
			}
			args, _ := json.Marshal(map[string]any{"argv": []string{"sh", "-c", "curl -H 'Authorization: " + token + "' https://example.com"}})
			p, err := scripted.New(scripted.Script{Turns: []scripted.Turn{
				{Text: "Fetching.", ToolCalls: []scripted.Call{{Name: "exec", Arguments: args}}},
				{Text: "done"},
			}})
			if err != nil {
				t.Fatal(err)
			}
			pol := &policy.Policy{Version: 1, Defaults: policy.Defaults{Read: policy.Allow, Write: policy.Allow, Exec: policy.Deny, Net: policy.Deny}}
			task := harness.TaskContract{Goal: "fetch", Root: t.TempDir()}
			if _, err := harness.Run(context.Background(), task, harness.Options{Provider: p, Policy: pol, Sinks: []harness.Sink{x}}); err != nil {
				t.Fatal(err)
			}
			if err := x.Shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
			spans, _ := rc.spans()
			if len(named(spans, "execute_tool exec")) != 1 {
				t.Fatalf("spans: %v", names(spans))
			}
			if leaked := bytes.Contains(rc.raw(), []byte(token)); leaked != content {
				t.Errorf("content=%v, but the command line reached the collector: %v", content, leaked)
			}
		})
	}
}

// Every attribute and event the exporter makes is audited for content:
// each kind of event it turns into spans carries the secret in every field
// that holds the model's, a tool's or a file's words (text, arguments,
// output, reason, target, a check's detail, the outcome's reason), and
// none of it may leave unless content is opted in. With Content on, the
// same events' export carries it: the test can see a leak.
func TestNoContentInAnyAttribute(t *testing.T) {
	kinds := []string{"run_started", "step_started", "model_done", "retry", "fallback", "tool_call", "policy",
		"approval_requested", "approval_resolved", "refusal", "tool_result", "verification", "context_fold",
		"in_doubt", "sandbox", "mcp", "checkpoint", "run_resumed", "outcome"}
	for _, content := range []bool{false, true} {
		t.Run(fmt.Sprintf("content=%v", content), func(t *testing.T) {
			rc, endpoint := serve(t, "http/protobuf")
			x, err := New(Config{Endpoint: endpoint, Content: content})
			if err != nil {
				t.Fatal(err)
			}
			t0 := time.Now()
			for i, kind := range kinds {
				ev := map[string]any{
					"run_id": "run_1", "path": "root", "kind": kind, "step": 1, "seq": i,
					"at":       t0.Add(time.Duration(i) * time.Millisecond).Format(time.RFC3339Nano),
					"provider": "openai:gpt-test", "tool": "exec", "call_id": "c1", "act": "exec", "effect": "deny",
					"rule": "no-exec", "layer": "base", "request_id": "req_1", "decision": "deny", "error_kind": "rate_limited",
					"passed": false, "usage": map[string]any{"input_tokens": 1}, "cost": map[string]any{"usd": 0, "known": true},
					"sandbox": map[string]any{"kind": "exec", "backend": "bwrap"},
					// The content.
					"text": "text " + secret, "arguments": map[string]any{"argv": []string{"sh", "-c", secret}},
					"output": "output " + secret, "reason": "reason " + secret, "target": "sh -c " + secret,
					"checks": []any{map[string]any{"kind": "workspace_file_contains", "file": "out.txt", "passed": false, "detail": "detail " + secret}},
				}
				if kind == "outcome" {
					ev["outcome"] = map[string]any{"kind": "success", "steps": 1, "reason": "reason " + secret}
				}
				data, _ := json.Marshal(ev)
				x.Publish("run_1", data)
			}
			if err := x.Shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
			spans, _ := rc.spans()
			if len(spans) < 5 {
				t.Fatalf("spans: %v", names(spans))
			}
			if leaked := bytes.Contains(rc.raw(), []byte(secret)); leaked != content {
				for _, s := range spans {
					for _, kv := range s.Attributes {
						if bytes.Contains([]byte(kv.Value.String()), []byte(secret)) {
							t.Logf("span %s: %s", s.Name, kv.Key)
						}
					}
					for _, e := range s.Events {
						for _, kv := range e.Attributes {
							if bytes.Contains([]byte(kv.Value.String()), []byte(secret)) {
								t.Logf("span %s, event %s: %s", s.Name, e.Name, kv.Key)
							}
						}
					}
				}
				t.Errorf("content=%v, but the secret reached the collector: %v", content, leaked)
			}
		})
	}
}

// A provider that names no model (scripted) exports no
// gen_ai.request.model, rather than an empty one.
func TestNoEmptyRequestModel(t *testing.T) {
	rc, endpoint := serve(t, "http/protobuf")
	x, err := New(Config{Endpoint: endpoint})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	for i, ev := range []string{
		`{"run_id":"r","kind":"run_started","provider":"scripted"}`,
		`{"run_id":"r","kind":"step_started","step":1}`,
		`{"run_id":"r","kind":"model_done","step":1,"provider":"scripted"}`,
		`{"run_id":"r","kind":"outcome","outcome":{"kind":"success","steps":1}}`,
	} {
		var m map[string]any
		json.Unmarshal([]byte(ev), &m)
		m["at"] = t0.Add(time.Duration(i) * time.Millisecond).Format(time.RFC3339Nano)
		data, _ := json.Marshal(m)
		x.Publish("r", data)
	}
	if err := x.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans, _ := rc.spans()
	chats := named(spans, "chat")
	if len(chats) != 1 {
		t.Fatalf("spans: %v", names(spans))
	}
	if v, ok := attrs(chats[0])["gen_ai.request.model"]; ok {
		t.Errorf("gen_ai.request.model = %v, want none", v)
	}
}
