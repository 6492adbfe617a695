package anthropic_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/anthropic"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/internal/wiretest"
)

const key = "sk-ant-test-0123456789"

// ev returns one event of a Messages stream.
func ev(name, data string) string { return "event: " + name + "\ndata: " + data + "\n\n" }

func start(model string, input, cacheWrite, cacheRead int) string {
	return ev("message_start", fmt.Sprintf(`{"type":"message_start","message":{"model":%q,"id":"msg_1","type":"message","role":"assistant","content":[],"stop_reason":null,"usage":{"input_tokens":%d,"cache_creation_input_tokens":%d,"cache_read_input_tokens":%d,"output_tokens":1}}}`, model, input, cacheWrite, cacheRead))
}

func textBlock(index int, parts ...string) string {
	s := ev("content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":{"type":"text","text":""}}`, index))
	for _, p := range parts {
		b, _ := json.Marshal(p)
		s += ev("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"text_delta","text":%s}}`, index, b))
	}
	return s + ev("content_block_stop", fmt.Sprintf(`{"type":"content_block_stop","index":%d}`, index))
}

func toolBlock(index int, id, name string, parts ...string) string {
	s := ev("content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":{"type":"tool_use","id":%q,"name":%q,"input":{}}}`, index, id, name))
	for _, p := range parts {
		b, _ := json.Marshal(p)
		s += ev("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"input_json_delta","partial_json":%s}}`, index, b))
	}
	return s + ev("content_block_stop", fmt.Sprintf(`{"type":"content_block_stop","index":%d}`, index))
}

func end(stop string, usage string) string {
	return ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"`+stop+`","stop_sequence":null},"usage":`+usage+`}`) +
		ev("message_stop", `{"type":"message_stop"}`)
}

func newClient(t *testing.T, srv *wiretest.Server, edit func(*anthropic.Config)) *anthropic.Client {
	t.Helper()
	cfg := anthropic.Config{APIKey: key, Model: "claude-sonnet-4-5", BaseURL: srv.URL, StallTimeout: 5 * time.Second}
	if edit != nil {
		edit(&cfg)
	}
	c, err := anthropic.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// sonnet is the list price of Claude Sonnet 4.x per million tokens.
func sonnet(input, write, read, output int64) provider.Cost {
	return provider.Cost{USD: (float64(input)*3 + float64(write)*3.75 + float64(read)*0.3 + float64(output)*15) / 1e6, Known: true}
}

var approx = cmp.Comparer(func(a, b float64) bool { return math.Abs(a-b) < 1e-12 })

func TestToolLoop(t *testing.T) {
	turn1 := start("claude-sonnet-4-5-20250929", 20, 1800, 0) +
		textBlock(0, "Let me check ", "both.") +
		ev("ping", `{"type": "ping"}`) +
		toolBlock(1, "toolu_01", "get_weather", "", `{"city":`, ` "Paris"}`) +
		toolBlock(2, "toolu_02", "get_time", "") +
		end("tool_use", `{"output_tokens":60}`)
	turn2 := start("claude-sonnet-4-5-20250929", 45, 0, 1800) +
		textBlock(0, "Paris: 22°C, ensoleillé ☀️", " — 晴れ.") +
		end("end_turn", `{"input_tokens":45,"cache_creation_input_tokens":0,"cache_read_input_tokens":1800,"output_tokens":19}`)
	srv := wiretest.NewServer(t, wiretest.SSE(turn1), wiretest.SSE(turn2))
	c := newClient(t, srv, nil)

	req := &provider.Request{
		System:   "Use the tools, then answer in one short sentence.",
		Messages: []provider.Message{{Role: provider.RoleUser, Content: "Weather and time in Paris?"}},
		Tools: []provider.ToolSpec{
			{Name: "get_weather", Description: "Weather of a city.", Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}}}`)},
			{Name: "get_time", Description: "The time."},
		},
	}
	resp, err := wiretest.Complete(t, c, req)
	if err != nil {
		t.Fatal(err)
	}
	want1 := &provider.Response{
		Text: "Let me check both.",
		ToolCalls: []provider.ToolCall{
			{ID: "toolu_01", Name: "get_weather", Arguments: json.RawMessage(`{"city": "Paris"}`)},
			{ID: "toolu_02", Name: "get_time", Arguments: json.RawMessage(`{}`)},
		},
		Usage:      provider.Usage{InputTokens: 1820, OutputTokens: 60, CacheWriteTokens: 1800},
		Cost:       sonnet(20, 1800, 0, 60),
		StopReason: provider.StopToolUse,
		Model:      "claude-sonnet-4-5-20250929",
	}
	if diff := cmp.Diff(want1, resp, approx); diff != "" {
		t.Fatalf("turn 1 (-want +got):\n%s", diff)
	}

	req.Messages = append(req.Messages,
		provider.Message{Role: provider.RoleAssistant, Content: resp.Text, ToolCalls: resp.ToolCalls},
		provider.Message{Role: provider.RoleTool, ToolCallID: "toolu_01", Content: `{"temperature":22}`},
		provider.Message{Role: provider.RoleTool, ToolCallID: "toolu_02", Content: "clock unavailable", IsError: true},
		provider.Message{Role: provider.RoleUser, Content: "Harness note: 3 turns left."},
	)
	resp, err = wiretest.Complete(t, c, req)
	if err != nil {
		t.Fatal(err)
	}
	want2 := &provider.Response{
		Text:       "Paris: 22°C, ensoleillé ☀️ — 晴れ.",
		Usage:      provider.Usage{InputTokens: 1845, OutputTokens: 19, CacheReadTokens: 1800},
		Cost:       sonnet(45, 0, 1800, 19),
		StopReason: provider.StopEnd,
		Model:      "claude-sonnet-4-5-20250929",
	}
	if diff := cmp.Diff(want2, resp, approx); diff != "" {
		t.Errorf("turn 2 (-want +got):\n%s", diff)
	}

	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("server got %d requests, want 2", len(reqs))
	}
	r := reqs[1]
	if r.Method != http.MethodPost || r.Path != "/v1/messages" {
		t.Errorf("request line %s %s", r.Method, r.Path)
	}
	for k, v := range map[string]string{"X-Api-Key": key, "Anthropic-Version": "2023-06-01", "Content-Type": "application/json", "Accept": "text/event-stream"} {
		if got := r.Header.Get(k); got != v {
			t.Errorf("header %s = %q, want %q", k, got, v)
		}
	}
	if r.Header.Get("Authorization") != "" {
		t.Error("an Authorization header was sent")
	}
	// max_tokens is the model's largest output cap from the catalogue:
	// the request asks for no cap, and its input is far from the window.
	wantBody := `{
		"model": "claude-sonnet-4-5",
		"max_tokens": 64000,
		"system": [{"type": "text", "text": "Use the tools, then answer in one short sentence.", "cache_control": {"type": "ephemeral"}}],
		"messages": [
			{"role": "user", "content": [{"type": "text", "text": "Weather and time in Paris?"}]},
			{"role": "assistant", "content": [
				{"type": "text", "text": "Let me check both."},
				{"type": "tool_use", "id": "toolu_01", "name": "get_weather", "input": {"city": "Paris"}},
				{"type": "tool_use", "id": "toolu_02", "name": "get_time", "input": {}}
			]},
			{"role": "user", "content": [
				{"type": "tool_result", "tool_use_id": "toolu_01", "content": "{\"temperature\":22}"},
				{"type": "tool_result", "tool_use_id": "toolu_02", "content": "clock unavailable", "is_error": true},
				{"type": "text", "text": "Harness note: 3 turns left."}
			]}
		],
		"tools": [
			{"name": "get_weather", "description": "Weather of a city.", "input_schema": {"type":"object","properties":{"city":{"type":"string"}}}},
			{"name": "get_time", "description": "The time.", "input_schema": {"type":"object","properties":{}}, "cache_control": {"type": "ephemeral"}}
		],
		"stream": true
	}`
	if diff := cmp.Diff(wiretest.JSONOf(t, []byte(wantBody)), wiretest.JSONOf(t, r.Body)); diff != "" {
		t.Errorf("turn 2 request body (-want +got):\n%s", diff)
	}
}

// TestMessageShape checks the reshaping the Messages API needs.
func TestMessageShape(t *testing.T) {
	call := func(id string) provider.ToolCall {
		return provider.ToolCall{ID: id, Name: "f", Arguments: json.RawMessage(`{"a":1}`)}
	}
	tests := []struct {
		name string
		msgs []provider.Message
		want string
	}{
		{"text after a tool call moves before it", []provider.Message{
			{Role: provider.RoleUser, Content: "go"},
			{Role: provider.RoleAssistant, ToolCalls: []provider.ToolCall{call("t1")}},
			{Role: provider.RoleAssistant, Content: "done thinking"},
			{Role: provider.RoleTool, ToolCallID: "t1", Content: "ok"},
		}, `[
			{"role":"user","content":[{"type":"text","text":"go"}]},
			{"role":"assistant","content":[{"type":"text","text":"done thinking"},{"type":"tool_use","id":"t1","name":"f","input":{"a":1}}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"ok"}]}
		]`},
		{"user text before tool results moves after them", []provider.Message{
			{Role: provider.RoleAssistant, ToolCalls: []provider.ToolCall{call("t1")}},
			{Role: provider.RoleUser, Content: "note"},
			{Role: provider.RoleTool, ToolCallID: "t1", Content: "ok"},
		}, `[
			{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"f","input":{"a":1}}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"ok"},{"type":"text","text":"note"}]}
		]`},
		{"consecutive user messages merge, empty ones vanish", []provider.Message{
			{Role: provider.RoleUser, Content: "a"},
			{Role: provider.RoleUser},
			{Role: provider.RoleUser, Content: "b"},
		}, `[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}]`},
		{"bad arguments are sent as {}", []provider.Message{
			{Role: provider.RoleAssistant, ToolCalls: []provider.ToolCall{
				{ID: "t1", Name: "f", Arguments: json.RawMessage(`{"a":`)},
				{ID: "t2", Name: "f", Arguments: json.RawMessage(`[1]`)},
				{ID: "t3", Name: "f"},
			}},
		}, `[{"role":"assistant","content":[
			{"type":"tool_use","id":"t1","name":"f","input":{}},
			{"type":"tool_use","id":"t2","name":"f","input":{}},
			{"type":"tool_use","id":"t3","name":"f","input":{}}]}]`},
		{"empty tool result", []provider.Message{
			{Role: provider.RoleTool, ToolCallID: "t1", IsError: true},
		}, `[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","is_error":true}]}]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := wiretest.NewServer(t, wiretest.SSE(start("m", 1, 0, 0)+end("end_turn", `{"output_tokens":1}`)))
			if _, err := wiretest.Complete(t, newClient(t, srv, nil), &provider.Request{Messages: tt.msgs, MaxOutputTokens: 7}); err != nil {
				t.Fatal(err)
			}
			var body struct {
				MaxTokens int64           `json:"max_tokens"`
				Messages  json.RawMessage `json:"messages"`
				System    json.RawMessage `json:"system"`
				Tools     json.RawMessage `json:"tools"`
			}
			if err := json.Unmarshal(srv.Requests()[0].Body, &body); err != nil {
				t.Fatal(err)
			}
			if body.MaxTokens != 7 || body.System != nil || body.Tools != nil {
				t.Errorf("max_tokens %d, system %s, tools %s", body.MaxTokens, body.System, body.Tools)
			}
			if diff := cmp.Diff(wiretest.JSONOf(t, []byte(tt.want)), wiretest.JSONOf(t, body.Messages)); diff != "" {
				t.Errorf("messages (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFaults(t *testing.T) {
	body := start("claude-haiku-4-5", 10, 0, 0) +
		textBlock(0, "Température : 22°C — ☀️", "\r\nligne") +
		ev("ping", `{"type": "ping"}`) +
		toolBlock(1, "toolu_1", "f", "", `{"q":"é`, `"}`) +
		end("tool_use", `{"output_tokens":5}`)
	want := &provider.Response{
		Text:       "Température : 22°C — ☀️\r\nligne",
		ToolCalls:  []provider.ToolCall{{ID: "toolu_1", Name: "f", Arguments: json.RawMessage(`{"q":"é"}`)}},
		Usage:      provider.Usage{InputTokens: 10, OutputTokens: 5},
		Cost:       provider.Cost{USD: (10*1 + 5*5) / 1e6, Known: true},
		StopReason: provider.StopToolUse,
		Model:      "claude-haiku-4-5",
	}
	for name, fault := range wiretest.Faults() {
		t.Run(name, func(t *testing.T) {
			reply := wiretest.SSE(body)
			reply.Fault = fault
			srv := wiretest.NewServer(t, reply)
			resp, err := wiretest.Complete(t, newClient(t, srv, func(c *anthropic.Config) { c.Model = "claude-haiku-4-5" }), &provider.Request{})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, resp, approx); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestCutAndStall(t *testing.T) {
	body := start("m", 1, 0, 0) + textBlock(0, "Hello, world") + end("end_turn", `{"output_tokens":3}`)
	tests := []struct {
		name  string
		fault wiretest.Fault
		want  provider.Kind
	}{
		{"cut mid-stream", wiretest.Fault{CutAt: len(body) / 2}, provider.KindTruncated},
		{"cut before message_stop", wiretest.Fault{CutAt: len(body) - 10}, provider.KindTruncated},
		{"stall", wiretest.Fault{StallAt: len(body) / 2}, provider.KindStall},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reply := wiretest.SSE(body)
			reply.Fault = tt.fault
			srv := wiretest.NewServer(t, reply)
			// The stall timeout is short only where a stall is the case: a
			// loaded machine must not turn a cut into a stall.
			stall := time.Minute
			if tt.want == provider.KindStall {
				stall = wiretest.Short
			}
			c := newClient(t, srv, func(c *anthropic.Config) { c.StallTimeout = stall })
			_, err := wiretest.Complete(t, c, &provider.Request{})
			pe := provider.AsError(err)
			if pe == nil || pe.Kind != tt.want || !pe.Transient() {
				t.Fatalf("err = %v, want transient %s", err, tt.want)
			}
			if want := "no bytes for " + stall.String(); tt.want == provider.KindStall && pe.Message != want {
				t.Errorf("stall: %q, want %q", pe.Message, want)
			}
		})
	}
	// A clean EOF without message_stop is no success either.
	srv := wiretest.NewServer(t, wiretest.SSE(start("m", 1, 0, 0)+textBlock(0, "Hi")))
	if _, err := wiretest.Complete(t, newClient(t, srv, nil), &provider.Request{}); provider.AsError(err) == nil || provider.AsError(err).Kind != provider.KindTruncated {
		t.Errorf("EOF without message_stop: err = %v, want truncated", err)
	}
}

func TestInStreamErrors(t *testing.T) {
	for _, tt := range []struct {
		typ  string
		want provider.Kind
	}{
		{"overloaded_error", provider.KindServer},
		{"api_error", provider.KindServer},
		{"rate_limit_error", provider.KindRateLimited},
		{"timeout_error", provider.KindTimeout},
		{"authentication_error", provider.KindAuth},
		{"permission_error", provider.KindAuth},
		{"billing_error", provider.KindQuota},
		{"invalid_request_error", provider.KindBadRequest},
		{"not_found_error", provider.KindBadRequest},
		{"request_too_large", provider.KindBadRequest},
		{"some_new_error", provider.KindServer},
	} {
		t.Run(tt.typ, func(t *testing.T) {
			body := start("m", 1, 0, 0) + textBlock(0, "partial") +
				ev("error", `{"type": "error", "error": {"type": "`+tt.typ+`", "message": "Overloaded"}}`)
			srv := wiretest.NewServer(t, wiretest.SSE(body))
			_, err := wiretest.Complete(t, newClient(t, srv, nil), &provider.Request{})
			pe := provider.AsError(err)
			if pe == nil || pe.Kind != tt.want || pe.Status != 0 {
				t.Fatalf("err = %v, want %s without a status", err, tt.want)
			}
		})
	}
}

func TestHTTPErrors(t *testing.T) {
	tests := []struct {
		name  string
		reply wiretest.Reply
		want  provider.Error
	}{
		{"529 overloaded", wiretest.Reply{Status: 529, Header: map[string]string{"Content-Type": "application/json", "Retry-After": "3"}, Body: []byte(`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_1"}`)},
			provider.Error{Kind: provider.KindServer, Status: 529, RetryAfter: 3 * time.Second}},
		{"400 tool order", wiretest.JSON(400, `{"type":"error","error":{"type":"invalid_request_error","message":"messages.1: tool_use ids were found without tool_result blocks immediately after: call_1."}}`),
			provider.Error{Kind: provider.KindBadRequest, Status: 400}},
		{"400 prompt too long", wiretest.JSON(400, `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}`),
			provider.Error{Kind: provider.KindContextOverflow, Status: 400}},
		{"401", wiretest.JSON(401, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key `+key+`"}}`),
			provider.Error{Kind: provider.KindAuth, Status: 401}},
		{"402 billing", wiretest.JSON(402, `{"type":"error","error":{"type":"billing_error","message":"credit balance too low"}}`),
			provider.Error{Kind: provider.KindQuota, Status: 402}},
		{"429 should-retry false", wiretest.Reply{Status: 429, Header: map[string]string{"Content-Type": "application/json", "X-Should-Retry": "false"}, Body: []byte(`{"type":"error","error":{"type":"rate_limit_error","message":"no"}}`)},
			provider.Error{Kind: provider.KindQuota, Status: 429}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := wiretest.NewServer(t, tt.reply)
			_, err := wiretest.Complete(t, newClient(t, srv, nil), &provider.Request{})
			pe := provider.AsError(err)
			if pe == nil {
				t.Fatalf("err = %v", err)
			}
			if strings.Contains(err.Error(), key) {
				t.Errorf("error leaks the key: %v", err)
			}
			got := provider.Error{Kind: pe.Kind, Status: pe.Status, RetryAfter: pe.RetryAfter}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestUsageMerge(t *testing.T) {
	tests := []struct {
		name string
		body string
		want provider.Usage
	}{
		{"delta with output only keeps start's input", start("m", 472, 0, 0) + end("end_turn", `{"output_tokens":89}`),
			provider.Usage{InputTokens: 472, OutputTokens: 89}},
		{"cumulative delta replaces, never adds", start("m", 677, 0, 0) + end("end_turn", `{"input_tokens":677,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":33}`),
			provider.Usage{InputTokens: 677, OutputTokens: 33}},
		{"cache write", start("m", 9, 5752, 0) + end("end_turn", `{"output_tokens":10}`),
			provider.Usage{InputTokens: 9 + 5752, OutputTokens: 10, CacheWriteTokens: 5752}},
		{"cache read", start("m", 9, 0, 5752) + end("end_turn", `{"output_tokens":10}`),
			provider.Usage{InputTokens: 9 + 5752, OutputTokens: 10, CacheReadTokens: 5752}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := wiretest.NewServer(t, wiretest.SSE(tt.body))
			resp, err := wiretest.Complete(t, newClient(t, srv, nil), &provider.Request{})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, resp.Usage); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestCost checks Anthropic's formula, input·in + 5m write·1.25·in + 1h
// write·2·in + read·0.1·in + output·out, with the vectors of the research
// notes.
func TestCost(t *testing.T) {
	tests := []struct {
		name  string
		model string
		body  string
		usd   float64
	}{
		// claude-opus-4.7 via OpenRouter: 802/66 tokens cost 0.00401 + 0.00165.
		{"opus 4.7", "claude-opus-4-7", start("claude-opus-4-7", 802, 0, 0) + end("tool_use", `{"output_tokens":66}`), 0.00401 + 0.00165},
		// turn 2: 899/19 tokens cost 0.004495 + 0.000475.
		{"opus 4.7 turn 2", "claude-opus-4-7", start("claude-opus-4-7", 899, 0, 0) + end("end_turn", `{"output_tokens":19}`), 0.004495 + 0.000475},
		// claude-sonnet-4.6: 254/5 tokens cost 0.000762 + 0.000075.
		{"sonnet 4.6", "claude-sonnet-4-6", start("claude-sonnet-4-6", 254, 0, 0) + end("end_turn", `{"output_tokens":5}`), 0.000762 + 0.000075},
		// Cache writes at 1.25×, reads at 0.1× the input price.
		{"sonnet cache write", "claude-sonnet-4-5", start("m", 9, 5752, 0) + end("end_turn", `{"output_tokens":10}`), (9*3 + 5752*3.75 + 10*15) / 1e6},
		{"sonnet cache read", "claude-sonnet-4-5-20250929", start("m", 9, 0, 5752) + end("end_turn", `{"output_tokens":10}`), (9*3 + 5752*0.3 + 10*15) / 1e6},
		// One-hour writes at 2× the input price.
		{"sonnet 1h write", "claude-sonnet-4-5", ev("message_start", `{"type":"message_start","message":{"model":"m","usage":{"input_tokens":9,"cache_creation_input_tokens":1000,"cache_read_input_tokens":0,"cache_creation":{"ephemeral_5m_input_tokens":400,"ephemeral_1h_input_tokens":600},"output_tokens":1}}}`) + end("end_turn", `{"output_tokens":10}`),
			(9*3 + 400*3.75 + 600*6 + 10*15) / 1e6},
		{"haiku 4.5", "claude-haiku-4-5-20251001", start("m", 1000, 0, 0) + end("end_turn", `{"output_tokens":1000}`), (1000*1 + 1000*5) / 1e6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := wiretest.NewServer(t, wiretest.SSE(tt.body))
			resp, err := wiretest.Complete(t, newClient(t, srv, func(c *anthropic.Config) { c.Model = tt.model }), &provider.Request{})
			if err != nil {
				t.Fatal(err)
			}
			if !resp.Cost.Known || math.Abs(resp.Cost.USD-tt.usd) > 1e-12 {
				t.Errorf("cost %v, want $%g", resp.Cost, tt.usd)
			}
		})
	}
	c, _ := anthropic.New(anthropic.Config{APIKey: key, Model: "claude-sonnet-4-5"})
	if got, want := c.Price(provider.Usage{InputTokens: 5761, CacheWriteTokens: 5752, OutputTokens: 10}), (9*3+5752*3.75+10*15)/1e6; math.Abs(got.USD-want) > 1e-12 {
		t.Errorf("Price = %v, want $%g", got, want)
	}
	c, _ = anthropic.New(anthropic.Config{APIKey: key, Model: "claude-unreleased-9"})
	if got := c.Price(provider.Usage{InputTokens: 5}); got.Known {
		t.Errorf("unlisted model: %v, want unknown", got)
	}
}

func TestMaxTokens(t *testing.T) {
	body := start("m", 5, 0, 0) + textBlock(0, "Writing it:") +
		toolBlock(1, "toolu_ok", "f", `{}`) +
		ev("content_block_start", `{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_cut","name":"write_file","input":{}}}`) +
		ev("content_block_delta", `{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"path\":\"a.go\",\"content\":\"pack"}}`) +
		end("max_tokens", `{"output_tokens":4096}`)
	srv := wiretest.NewServer(t, wiretest.SSE(body))
	resp, err := wiretest.Complete(t, newClient(t, srv, nil), &provider.Request{})
	if err != nil {
		t.Fatal(err)
	}
	want := []provider.ToolCall{{ID: "toolu_ok", Name: "f", Arguments: json.RawMessage(`{}`)}}
	if diff := cmp.Diff(want, resp.ToolCalls); diff != "" || resp.StopReason != provider.StopMaxTokens || !resp.Truncated() {
		t.Errorf("stop %s, calls (-want +got):\n%s", resp.StopReason, diff)
	}
	if diff := cmp.Diff([]string{"write_file"}, resp.DroppedCalls); diff != "" {
		t.Errorf("dropped calls (-want +got):\n%s", diff)
	}
}

func TestConfig(t *testing.T) {
	tests := []struct {
		name     string
		cfg      anthropic.Config
		wantName string
		endpoint string
		wantErr  bool
	}{
		{"defaults", anthropic.Config{APIKey: key, Model: "claude-sonnet-4-5"}, "anthropic:claude-sonnet-4-5", "api.anthropic.com:443", false},
		{"no model", anthropic.Config{APIKey: key}, "", "", true},
		{"no key", anthropic.Config{Model: "m"}, "", "", true},
		{"proxy", anthropic.Config{APIKey: key, Model: "m", BaseURL: "http://127.0.0.1:4000/"}, "anthropic:m", "127.0.0.1:4000", false},
		{"bad url", anthropic.Config{APIKey: key, Model: "m", BaseURL: "file:///x"}, "", "", true},
		{"negative", anthropic.Config{APIKey: key, Model: "m", MaxOutputTokens: -1}, "", "", true},
		{"negative price", anthropic.Config{APIKey: key, Model: "m", Price: &provider.Price{Input: -1}}, "", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := anthropic.New(tt.cfg)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if err == nil && (c.Name() != tt.wantName || c.Endpoint() != tt.endpoint) {
				t.Errorf("Name, Endpoint = %q, %q", c.Name(), c.Endpoint())
			}
		})
	}
	env := map[string]string{"ANTHROPIC_API_KEY": key, "ANTHROPIC_MODEL": "claude-haiku-4-5", "ANTHROPIC_BASE_URL": "https://gw.example/anthropic"}
	cfg := anthropic.ConfigFromEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if diff := cmp.Diff(anthropic.Config{APIKey: key, Model: "claude-haiku-4-5", BaseURL: "https://gw.example/anthropic"}, cfg); diff != "" {
		t.Errorf("ConfigFromEnv (-want +got):\n%s", diff)
	}
	if b, _ := json.Marshal(cfg); strings.Contains(string(b), key) {
		t.Errorf("Config JSON carries the key: %s", b)
	}
}

func TestBetaHeaderAndKeyGuard(t *testing.T) {
	srv := wiretest.NewServer(t, wiretest.SSE(start("m", 1, 0, 0)+end("end_turn", `{"output_tokens":1}`)))
	c := newClient(t, srv, func(c *anthropic.Config) {
		c.Headers = map[string]string{"anthropic-beta": "fine-grained-tool-streaming-2025-05-14", "x-api-key": "other", "anthropic-version": "1999"}
	})
	if _, err := wiretest.Complete(t, c, &provider.Request{}); err != nil {
		t.Fatal(err)
	}
	h := srv.Requests()[0].Header
	if h.Get("Anthropic-Beta") != "fine-grained-tool-streaming-2025-05-14" || h.Get("X-Api-Key") != key || h.Get("Anthropic-Version") != "2023-06-01" {
		t.Errorf("headers %v", h)
	}
}

func TestCanceled(t *testing.T) {
	reply := wiretest.SSE(start("m", 1, 0, 0) + end("end_turn", `{"output_tokens":1}`))
	reply.Fault.StallAt = 10
	srv := wiretest.NewServer(t, reply)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	_, err := newClient(t, srv, nil).Complete(ctx, &provider.Request{}, nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want it to wrap context.Canceled", err)
	}
}
