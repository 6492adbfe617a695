package openai_test

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
	"github.com/initorigin/io-harness-go/pkg/harness/provider/internal/wiretest"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/openai"
)

const key = "sk-test-key-0123456789"

// stream returns a Chat Completions event stream of the given chunks,
// ended by [DONE].
func stream(chunks ...string) string {
	var b strings.Builder
	for _, c := range chunks {
		b.WriteString("data: " + c + "\n\n")
	}
	b.WriteString("data: [DONE]\n\n")
	return b.String()
}

// delta returns a chunk with one choice.
func delta(d string, finish string) string {
	f := "null"
	if finish != "" {
		f = `"` + finish + `"`
	}
	return `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-2024-08-06","choices":[{"index":0,"delta":` + d + `,"logprobs":null,"finish_reason":` + f + `}],"usage":null}`
}

func usageChunk(prompt, completion, cached int) string {
	return fmt.Sprintf(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-2024-08-06","choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d,"prompt_tokens_details":{"cached_tokens":%d}}}`, prompt, completion, prompt+completion, cached)
}

func newClient(t *testing.T, srv *wiretest.Server, edit func(*openai.Config)) *openai.Client {
	t.Helper()
	cfg := openai.Config{APIKey: key, Model: "gpt-4o", BaseURL: srv.URL + "/v1", MaxOutputTokens: 256, StallTimeout: 5 * time.Second}
	if edit != nil {
		edit(&cfg)
	}
	c, err := openai.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

var weatherTool = provider.ToolSpec{
	Name:        "get_weather",
	Description: "Get current weather for a city.",
	Parameters:  json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`),
}

func TestToolLoop(t *testing.T) {
	turn1 := stream(
		delta(`{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_tyZN","type":"function","function":{"name":"get_weather","arguments":""}}],"refusal":null}`, ""),
		delta(`{"tool_calls":[{"index":0,"function":{"arguments":"{\""}}]}`, ""),
		delta(`{"tool_calls":[{"index":0,"function":{"arguments":"city\":\"Par"}}]}`, ""),
		delta(`{"tool_calls":[{"index":0,"function":{"arguments":"is\"}"}}]}`, ""),
		delta(`{}`, "tool_calls"),
		usageChunk(64, 14, 0),
	)
	turn2 := stream(
		delta(`{"role":"assistant","content":"","refusal":null}`, ""),
		delta(`{"content":"Paris: 22°C,"}`, ""),
		delta(`{"content":" ensoleillé ☀️ — 晴れ."}`, ""),
		delta(`{}`, "stop"),
		usageChunk(96, 15, 64),
	)
	srv := wiretest.NewServer(t, wiretest.SSE(turn1), wiretest.SSE(turn2))
	c := newClient(t, srv, nil)

	req := &provider.Request{
		System:   "Use the get_weather tool, then answer in one short sentence.",
		Messages: []provider.Message{{Role: provider.RoleUser, Content: "What is the weather in Paris?"}},
		Tools:    []provider.ToolSpec{weatherTool},
	}
	resp, err := wiretest.Complete(t, c, req)
	if err != nil {
		t.Fatal(err)
	}
	want1 := &provider.Response{
		ToolCalls:  []provider.ToolCall{{ID: "call_tyZN", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris"}`)}},
		Usage:      provider.Usage{InputTokens: 64, OutputTokens: 14},
		Cost:       provider.Cost{USD: (64*2.5 + 14*10) / 1e6, Known: true},
		StopReason: provider.StopToolUse,
		Model:      "gpt-4o-2024-08-06",
	}
	if diff := cmp.Diff(want1, resp); diff != "" {
		t.Fatalf("turn 1 (-want +got):\n%s", diff)
	}

	req.Messages = append(req.Messages,
		provider.Message{Role: provider.RoleAssistant, ToolCalls: resp.ToolCalls},
		provider.Message{Role: provider.RoleTool, ToolCallID: resp.ToolCalls[0].ID, Content: `{"temperature":22,"condition":"sunny"}`},
	)
	resp, err = wiretest.Complete(t, c, req)
	if err != nil {
		t.Fatal(err)
	}
	want2 := &provider.Response{
		Text:       "Paris: 22°C, ensoleillé ☀️ — 晴れ.",
		Usage:      provider.Usage{InputTokens: 96, OutputTokens: 15, CacheReadTokens: 64},
		Cost:       provider.Cost{USD: (32*2.5 + 64*1.25 + 15*10) / 1e6, Known: true},
		StopReason: provider.StopEnd,
		Model:      "gpt-4o-2024-08-06",
	}
	if diff := cmp.Diff(want2, resp); diff != "" {
		t.Errorf("turn 2 (-want +got):\n%s", diff)
	}

	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("server got %d requests, want 2", len(reqs))
	}
	r := reqs[1]
	if r.Method != http.MethodPost || r.Path != "/v1/chat/completions" {
		t.Errorf("request line %s %s", r.Method, r.Path)
	}
	for k, v := range map[string]string{"Authorization": "Bearer " + key, "Content-Type": "application/json", "Accept": "text/event-stream"} {
		if got := r.Header.Get(k); got != v {
			t.Errorf("header %s = %q, want %q", k, got, v)
		}
	}
	wantBody := `{
		"model": "gpt-4o",
		"messages": [
			{"role": "system", "content": "Use the get_weather tool, then answer in one short sentence."},
			{"role": "user", "content": "What is the weather in Paris?"},
			{"role": "assistant", "content": null, "tool_calls": [
				{"id": "call_tyZN", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}
			]},
			{"role": "tool", "tool_call_id": "call_tyZN", "content": "{\"temperature\":22,\"condition\":\"sunny\"}"}
		],
		"tools": [{"type": "function", "function": {"name": "get_weather", "description": "Get current weather for a city.",
			"parameters": {"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}],
		"stream": true,
		"stream_options": {"include_usage": true},
		"max_completion_tokens": 256
	}`
	if diff := cmp.Diff(wiretest.JSONOf(t, []byte(wantBody)), wiretest.JSONOf(t, r.Body)); diff != "" {
		t.Errorf("turn 2 request body (-want +got):\n%s", diff)
	}
}

// TestFaults delivers streams with transport faults and expects the same
// turn as a clean delivery.
func TestFaults(t *testing.T) {
	body := stream(
		delta(`{"role":"assistant","content":""}`, ""),
		delta(`{"content":"Température : 22°C — ☀️\r\nligne"}`, ""),
		delta(`{"content":" suivante"}`, ""),
		delta(`{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"f","arguments":"{\"q\":\"é"}}]}`, ""),
		delta(`{"tool_calls":[{"index":0,"function":{"arguments":"\"}"}}]}`, "tool_calls"),
		usageChunk(10, 5, 0),
	)
	want := &provider.Response{
		Text:       "Température : 22°C — ☀️\r\nligne suivante",
		ToolCalls:  []provider.ToolCall{{ID: "call_a", Name: "f", Arguments: json.RawMessage(`{"q":"é"}`)}},
		Usage:      provider.Usage{InputTokens: 10, OutputTokens: 5},
		Cost:       provider.Cost{USD: (10*2.5 + 5*10) / 1e6, Known: true},
		StopReason: provider.StopToolUse,
		Model:      "gpt-4o-2024-08-06",
	}
	for name, fault := range wiretest.Faults() {
		t.Run(name, func(t *testing.T) {
			reply := wiretest.SSE(body)
			reply.Fault = fault
			srv := wiretest.NewServer(t, reply)
			resp, err := wiretest.Complete(t, newClient(t, srv, nil), &provider.Request{})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, resp); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestCutAndStall(t *testing.T) {
	body := stream(delta(`{"content":"Hello, world"}`, ""), delta(`{}`, "stop"), usageChunk(1, 2, 0))
	tests := []struct {
		name  string
		fault wiretest.Fault
		want  provider.Kind
	}{
		{"cut mid-stream", wiretest.Fault{CutAt: len(body) / 2}, provider.KindTruncated},
		{"cut before done", wiretest.Fault{CutAt: len(body) - 8}, provider.KindTruncated},
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
			c := newClient(t, srv, func(c *openai.Config) { c.StallTimeout = stall })
			_, err := wiretest.Complete(t, c, &provider.Request{})
			pe := provider.AsError(err)
			if pe == nil || pe.Kind != tt.want || !pe.Transient() {
				t.Fatalf("err = %v, want transient %s", err, tt.want)
			}
			// A stall is ended by the configured stall timeout, not another
			// bound.
			if want := "no bytes for " + stall.String(); tt.want == provider.KindStall && pe.Message != want {
				t.Errorf("stall: %q, want %q", pe.Message, want)
			}
		})
	}
}

func TestEndWithoutDone(t *testing.T) {
	body := "data: " + delta(`{"content":"Hi"}`, "stop") + "\n\n"
	srv := wiretest.NewServer(t, wiretest.SSE(body))
	_, err := wiretest.Complete(t, newClient(t, srv, nil), &provider.Request{})
	if pe := provider.AsError(err); pe == nil || pe.Kind != provider.KindTruncated {
		t.Fatalf("err = %v, want truncated", err)
	}
}

func TestInStreamErrors(t *testing.T) {
	tests := []struct {
		name string
		body string
		want provider.Kind
	}{
		{"openai server_error", "data: " + delta(`{"content":"Hi"}`, "") + "\n\n" +
			`data: {"error": {"message": "The server had an error while processing your request. Sorry about that!", "type": "server_error"}}` + "\n\n", provider.KindServer},
		{"openai insufficient_quota", `data: {"error":{"type":"insufficient_quota","code":"insufficient_quota","message":"You exceeded your current quota"}}` + "\n\n", provider.KindQuota},
		{"openai rate limit", `data: {"error":{"type":"rate_limit_error","code":"rate_limit_exceeded","message":"slow down"}}` + "\n\n", provider.KindRateLimited},
		{"llama.cpp error field", `error: {"code":400,"message":"the request exceeds the available context size. try increasing the context size or enable context shift","type":"invalid_request_error"}` + "\n\ndata: [DONE]\n\n", provider.KindContextOverflow},
		{"llama.cpp error field 500", `error: {"code":500,"message":"crash"}` + "\n\ndata: [DONE]\n\n", provider.KindServer},
		{"llama.cpp data error", `data: {"error":{"code":500,"message":"bad","type":"server_error"}}` + "\n\ndata: [DONE]\n\n", provider.KindServer},
		{"not json", "data: {oops\n\ndata: [DONE]\n\n", provider.KindMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := wiretest.NewServer(t, wiretest.SSE(tt.body))
			_, err := wiretest.Complete(t, newClient(t, srv, nil), &provider.Request{})
			pe := provider.AsError(err)
			if pe == nil || pe.Kind != tt.want {
				t.Fatalf("err = %v, want %s", err, tt.want)
			}
			if pe.Provider != "openai:gpt-4o" {
				t.Errorf("Provider = %q", pe.Provider)
			}
		})
	}
}

// vLLM refuses a request with its error object at the top level of the
// body, not under "error". An overflow in that shape is a context
// overflow, which the harness folds on, and keeps vLLM's message; the
// control is the same shape with another message, which is a plain bad
// request that still keeps its message.
func TestVLLMErrorBody(t *testing.T) {
	tests := []struct {
		name, message string
		want          provider.Kind
	}{
		{"overflow", "This model's maximum context length is 4096 tokens. However, you requested 5123 tokens (4123 in the messages, 1000 in the completion). Please reduce the length of the messages or completion.", provider.KindContextOverflow},
		{"control: another refusal", "The model `nope` does not exist.", provider.KindBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body, err := json.Marshal(map[string]any{"object": "error", "message": tt.message, "type": "BadRequestError", "param": nil, "code": 400})
			if err != nil {
				t.Fatal(err)
			}
			srv := wiretest.NewServer(t, wiretest.JSON(400, string(body)))
			c, err := openai.NewCompatible(openai.Config{Model: "m", Preset: openai.PresetVLLM, BaseURL: srv.URL + "/v1"})
			if err != nil {
				t.Fatal(err)
			}
			_, err = wiretest.Complete(t, c, &provider.Request{})
			pe := provider.AsError(err)
			if pe == nil || pe.Kind != tt.want || pe.Status != 400 {
				t.Fatalf("err = %v, want %s (HTTP 400)", err, tt.want)
			}
			if !strings.Contains(pe.Message, tt.message) {
				t.Errorf("Message = %q, want it to hold %q", pe.Message, tt.message)
			}
		})
	}
}

// synth stands for a synthesised tool call id in a wanted call.
const synth = "(synthesised)"

// TestToolCallQuirks feeds the tool-call shapes real servers send.
func TestToolCallQuirks(t *testing.T) {
	call := func(id, name, args string) provider.ToolCall {
		return provider.ToolCall{ID: id, Name: name, Arguments: json.RawMessage(args)}
	}
	tests := []struct {
		name   string
		chunks []string
		calls  []provider.ToolCall
		stop   provider.StopReason
	}{
		{"whole call in one chunk (groq, ollama)", []string{
			delta(`{"role":"assistant","content":"","tool_calls":[{"id":"call_lbcj","index":0,"type":"function","function":{"name":"run","arguments":"{\"command\":\"ls -a\"}"}}]}`, ""),
			delta(`{"role":"assistant","content":""}`, "tool_calls"),
		}, []provider.ToolCall{call("call_lbcj", "run", `{"command":"ls -a"}`)}, provider.StopToolUse},
		{"finish_reason on the arguments chunk (together)", []string{
			delta(`{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\":"}}]}`, ""),
			delta(`{"tool_calls":[{"index":0,"function":{"arguments":"1}"}}]}`, "tool_calls"),
		}, []provider.ToolCall{call("c1", "f", `{"a":1}`)}, provider.StopToolUse},
		{"id repeated on every chunk (vllm)", []string{
			delta(`{"tool_calls":[{"index":0,"id":"chatcmpl-tool-9","type":"function","function":{"name":"f","arguments":"{\"a\""}}]}`, ""),
			delta(`{"tool_calls":[{"index":0,"id":"chatcmpl-tool-9","type":"function","function":{"arguments":":1}"}}]}`, ""),
		}, []provider.ToolCall{call("chatcmpl-tool-9", "f", `{"a":1}`)}, provider.StopToolUse},
		{"tool call with finish_reason stop (forced tool choice)", []string{
			delta(`{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]}`, ""),
			delta(`{}`, "stop"),
		}, []provider.ToolCall{call("c1", "f", `{}`)}, provider.StopToolUse},
		{"empty arguments become {}", []string{
			delta(`{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"now","arguments":""}}]}`, ""),
			delta(`{"tool_calls":[{"index":0,"function":{"arguments":""}}]}`, "tool_calls"),
		}, []provider.ToolCall{call("c1", "now", `{}`)}, provider.StopToolUse},
		{"missing ids are synthesised", []string{
			delta(`{"tool_calls":[{"index":0,"type":"function","function":{"name":"f","arguments":"{}"}}]}`, ""),
			delta(`{"tool_calls":[{"index":1,"id":"","type":"function","function":{"name":"g","arguments":"{}"}}]}`, "tool_calls"),
		}, []provider.ToolCall{call(synth, "f", `{}`), call(synth, "g", `{}`)}, provider.StopToolUse},
		{"duplicate ids are synthesised", []string{
			delta(`{"tool_calls":[{"index":0,"id":"dup","type":"function","function":{"name":"f","arguments":"{}"}}]}`, ""),
			delta(`{"tool_calls":[{"index":1,"id":"dup","type":"function","function":{"name":"g","arguments":"{}"}}]}`, "tool_calls"),
		}, []provider.ToolCall{call("dup", "f", `{}`), call(synth, "g", `{}`)}, provider.StopToolUse},
		{"parallel calls interleaved by index", []string{
			delta(`{"tool_calls":[{"index":0,"id":"a","type":"function","function":{"name":"f","arguments":"{\"x\""}}]}`, ""),
			delta(`{"tool_calls":[{"index":1,"id":"b","type":"function","function":{"name":"g","arguments":"{\"y\""}}]}`, ""),
			delta(`{"tool_calls":[{"index":0,"function":{"arguments":":1}"}}]}`, ""),
			delta(`{"tool_calls":[{"index":1,"function":{"arguments":":2}"}}]}`, "tool_calls"),
		}, []provider.ToolCall{call("a", "f", `{"x":1}`), call("b", "g", `{"y":2}`)}, provider.StopToolUse},
		{"one index reused for two calls", []string{
			delta(`{"tool_calls":[{"index":0,"id":"a","type":"function","function":{"name":"f","arguments":"{}"}}]}`, ""),
			delta(`{"tool_calls":[{"index":0,"id":"b","type":"function","function":{"name":"g","arguments":"{}"}}]}`, "tool_calls"),
		}, []provider.ToolCall{call("a", "f", `{}`), call("b", "g", `{}`)}, provider.StopToolUse},
		{"no index", []string{
			delta(`{"tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{\"x\":"}}]}`, ""),
			delta(`{"tool_calls":[{"function":{"arguments":"1}"}}]}`, ""),
			delta(`{"tool_calls":[{"id":"b","type":"function","function":{"name":"g","arguments":"{}"}}]}`, "tool_calls"),
		}, []provider.ToolCall{call("a", "f", `{"x":1}`), call("b", "g", `{}`)}, provider.StopToolUse},
		{"invalid arguments passed on verbatim", []string{
			delta(`{"tool_calls":[{"index":0,"id":"a","type":"function","function":{"name":"f","arguments":"{\"x\":"}}]}`, "tool_calls"),
		}, []provider.ToolCall{call("a", "f", `{"x":`)}, provider.StopToolUse},
		{"max tokens drops a half-written last call", []string{
			delta(`{"tool_calls":[{"index":0,"id":"a","type":"function","function":{"name":"f","arguments":"{}"}}]}`, ""),
			delta(`{"tool_calls":[{"index":1,"id":"b","type":"function","function":{"name":"g","arguments":"{\"path\":\"/e"}}]}`, "length"),
		}, []provider.ToolCall{call("a", "f", `{}`)}, provider.StopMaxTokens},
		{"max tokens keeps a complete last call", []string{
			delta(`{"tool_calls":[{"index":0,"id":"a","type":"function","function":{"name":"f","arguments":"{}"}}]}`, "length"),
		}, []provider.ToolCall{call("a", "f", `{}`)}, provider.StopMaxTokens},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := wiretest.NewServer(t, wiretest.SSE(stream(tt.chunks...)))
			c := newClient(t, srv, nil)
			resp, err := wiretest.Complete(t, c, &provider.Request{})
			if err != nil {
				t.Fatal(err)
			}
			again, err := wiretest.Complete(t, c, &provider.Request{})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(resp, again); diff != "" {
				t.Errorf("the same stream decoded twice differs (-first +second):\n%s", diff)
			}
			ids := map[string]bool{}
			for i, got := range resp.ToolCalls {
				if ids[got.ID] {
					t.Errorf("id %q repeated", got.ID)
				}
				ids[got.ID] = true
				if i < len(tt.calls) && tt.calls[i].ID == synth {
					if !strings.HasPrefix(got.ID, "call_") || len(got.ID) < 10 {
						t.Errorf("synthetic id %q", got.ID)
					}
					tt.calls[i].ID = got.ID
				}
			}
			if diff := cmp.Diff(tt.calls, resp.ToolCalls); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
			if resp.StopReason != tt.stop {
				t.Errorf("stop = %s, want %s", resp.StopReason, tt.stop)
			}
		})
	}
}

func TestUsage(t *testing.T) {
	tests := []struct {
		name   string
		chunks []string
		usage  provider.Usage
		known  bool
	}{
		{"usage null does not erase", []string{usageChunk(10, 2, 4), delta(`{"content":"x"}`, "stop")}, provider.Usage{InputTokens: 10, OutputTokens: 2, CacheReadTokens: 4}, true},
		{"repeated usage: last wins, never summed", []string{delta(`{}`, "stop"), usageChunk(10, 2, 0), usageChunk(10, 3, 0)}, provider.Usage{InputTokens: 10, OutputTokens: 3}, true},
		{"no usage: unknown cost", []string{delta(`{"content":"x"}`, "stop")}, provider.Usage{}, false},
		{"together: usage on the finish chunk, cached at top level", []string{
			`{"id":"1","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":20,"completion_tokens":3,"cached_tokens":8}}`,
		}, provider.Usage{InputTokens: 20, OutputTokens: 3, CacheReadTokens: 8}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := wiretest.NewServer(t, wiretest.SSE(stream(tt.chunks...)))
			resp, err := wiretest.Complete(t, newClient(t, srv, nil), &provider.Request{})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.usage, resp.Usage); diff != "" {
				t.Errorf("usage (-want +got):\n%s", diff)
			}
			if resp.Cost.Known != tt.known {
				t.Errorf("cost %v, want known=%v", resp.Cost, tt.known)
			}
		})
	}
}

// TestCost checks OpenAI's formula, (prompt − cached)·in + cached·cached_in
// + completion·out, against the vectors of the research notes.
func TestCost(t *testing.T) {
	tests := []struct {
		model string
		u     provider.Usage
		usd   float64
	}{
		// gpt-4o-mini via OpenRouter: 67/5 tokens cost 0.00001005 + 0.000003.
		{"gpt-4o-mini", provider.Usage{InputTokens: 67, OutputTokens: 5}, 0.00001005 + 0.000003},
		{"gpt-4o-mini-2024-07-18", provider.Usage{InputTokens: 67, OutputTokens: 5}, 0.00001005 + 0.000003},
		// gpt-4o: 2.50 / 10, cached 1.25.
		{"gpt-4o", provider.Usage{InputTokens: 1000, OutputTokens: 100, CacheReadTokens: 600}, (400*2.5 + 600*1.25 + 100*10) / 1e6},
		// gpt-4.1: 2 / 8, cached 0.50.
		{"gpt-4.1", provider.Usage{InputTokens: 1_000_000, OutputTokens: 1_000_000, CacheReadTokens: 500_000}, 0.5*2 + 0.5*0.5 + 8},
	}
	for _, tt := range tests {
		c, err := openai.New(openai.Config{APIKey: key, Model: tt.model})
		if err != nil {
			t.Fatal(err)
		}
		got := c.Price(tt.u)
		if !got.Known || math.Abs(got.USD-tt.usd) > 1e-12 {
			t.Errorf("%s: Price(%+v) = %v, want $%g", tt.model, tt.u, got, tt.usd)
		}
	}
	c, _ := openai.New(openai.Config{APIKey: key, Model: "o9-unlisted"})
	if got := c.Price(provider.Usage{InputTokens: 5}); got.Known {
		t.Errorf("unlisted model: %v, want unknown", got)
	}
	c, _ = openai.New(openai.Config{APIKey: key, Model: "o9-unlisted", Price: &provider.Price{Input: 1, Output: 2}})
	if got := c.Price(provider.Usage{InputTokens: 1e6, OutputTokens: 1e6}); !got.Known || got.USD != 3 {
		t.Errorf("configured price: %v, want $3", got)
	}
	// A local server's models cost nothing, if the catalogue knows them;
	// another server's are unknown, whatever their name.
	for _, tt := range []struct {
		cfg   openai.Config
		known bool
	}{
		{openai.Config{Model: "gpt-4o", Preset: openai.PresetOllama}, false},
		{openai.Config{Model: "qwen2.5-coder:7b-instruct-q8_0", Preset: openai.PresetOllama}, true},
		{openai.Config{Model: "Qwen/Qwen3-Coder-30B-A3B-Instruct", Preset: openai.PresetVLLM, BaseURL: "http://gpu-box:8000/v1"}, true},
		{openai.Config{Model: "gpt-oss:20b", BaseURL: "http://127.0.0.1:11434"}, true},
		{openai.Config{Model: "gpt-oss:20b", BaseURL: "http://[::1]:8080/v1"}, true},
		{openai.Config{Model: "gpt-oss:20b", BaseURL: "http://models.localhost/v1"}, true},
		{openai.Config{Model: "llama3.3", BaseURL: "https://api.together.xyz/v1"}, false},
		{openai.Config{Model: "gpt-oss-20b", BaseURL: "http://10.0.0.5:8000/v1"}, false},
	} {
		c, err := openai.NewCompatible(tt.cfg)
		if err != nil {
			t.Fatal(err)
		}
		got := c.Price(provider.Usage{InputTokens: 1e6, OutputTokens: 1e6})
		if got.Known != tt.known || got.USD != 0 {
			t.Errorf("compatible %s at %q (preset %q): %v, want known=%v and $0", tt.cfg.Model, tt.cfg.BaseURL, tt.cfg.Preset, got, tt.known)
		}
	}
}

func TestConfig(t *testing.T) {
	tests := []struct {
		name     string
		compat   bool
		cfg      openai.Config
		wantName string
		endpoint string
		wantErr  bool
	}{
		{"openai", false, openai.Config{APIKey: key, Model: "gpt-4o"}, "openai:gpt-4o", "api.openai.com:443", false},
		{"no model", false, openai.Config{APIKey: key}, "", "", true},
		{"no key", false, openai.Config{Model: "gpt-4o"}, "", "", true},
		{"preset refused", false, openai.Config{APIKey: key, Model: "m", Preset: openai.PresetVLLM}, "", "", true},
		{"bad field name", false, openai.Config{APIKey: key, Model: "m", MaxTokensField: "tokens"}, "", "", true},
		{"negative timeout", false, openai.Config{APIKey: key, Model: "m", StallTimeout: -1}, "", "", true},
		{"bad base url", false, openai.Config{APIKey: key, Model: "m", BaseURL: "api.openai.com"}, "", "", true},
		{"proxy base url", false, openai.Config{APIKey: key, Model: "m", BaseURL: "http://gateway.internal:8443/openai/v1/"}, "openai:m", "gateway.internal:8443", false},
		{"ollama", true, openai.Config{Model: "qwen2.5-coder:7b", Preset: openai.PresetOllama}, "ollama:qwen2.5-coder:7b", "localhost:11434", false},
		{"vllm", true, openai.Config{Model: "m", Preset: openai.PresetVLLM}, "vllm:m", "localhost:8000", false},
		{"llama.cpp", true, openai.Config{Model: "m", Preset: openai.PresetLlamaCpp}, "llamacpp:m", "localhost:8080", false},
		{"lm studio", true, openai.Config{Model: "m", Preset: openai.PresetLMStudio}, "lmstudio:m", "localhost:1234", false},
		{"preset with own url", true, openai.Config{Model: "m", Preset: openai.PresetOllama, BaseURL: "http://gpu-box:11434/v1"}, "ollama:m", "gpu-box:11434", false},
		{"gateway with key", true, openai.Config{APIKey: key, Model: "llama-3.3-70b", BaseURL: "https://api.groq.com/openai/v1"}, "openai_compatible:llama-3.3-70b", "api.groq.com:443", false},
		{"compatible without url", true, openai.Config{Model: "m"}, "", "", true},
		{"unknown preset", true, openai.Config{Model: "m", Preset: "tgi"}, "", "", true},
		{"compatible without model", true, openai.Config{Preset: openai.PresetOllama}, "", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			newFn := openai.New
			if tt.compat {
				newFn = openai.NewCompatible
			}
			c, err := newFn(tt.cfg)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if err != nil {
				if strings.Contains(err.Error(), key) {
					t.Errorf("error leaks the key: %v", err)
				}
				return
			}
			if c.Name() != tt.wantName || c.Endpoint() != tt.endpoint {
				t.Errorf("Name, Endpoint = %q, %q; want %q, %q", c.Name(), c.Endpoint(), tt.wantName, tt.endpoint)
			}
		})
	}
}

func TestCompatibleRequest(t *testing.T) {
	srv := wiretest.NewServer(t, wiretest.SSE(stream(delta(`{"content":"ok"}`, "stop"))))
	c, err := openai.NewCompatible(openai.Config{Model: "qwen", Preset: openai.PresetOllama, BaseURL: srv.URL + "/v1", Headers: map[string]string{"Authorization": "Bearer nope", "X-Extra": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wiretest.Complete(t, c, &provider.Request{MaxOutputTokens: 99}); err != nil {
		t.Fatal(err)
	}
	r := srv.Requests()[0]
	if got := r.Header.Get("Authorization"); got != "" {
		t.Errorf("Authorization = %q, want none without a key", got)
	}
	if r.Header.Get("X-Extra") != "1" {
		t.Error("extra header missing")
	}
	body := wiretest.JSONOf(t, r.Body).(map[string]any)
	if body["max_tokens"] != float64(99) || body["max_completion_tokens"] != nil {
		t.Errorf("body caps: max_tokens=%v max_completion_tokens=%v", body["max_tokens"], body["max_completion_tokens"])
	}
}

func TestConfigFromEnv(t *testing.T) {
	env := map[string]string{"OPENAI_API_KEY": key, "OPENAI_MODEL": "gpt-4.1", "OPENAI_BASE_URL": "http://proxy:9000/v1"}
	cfg := openai.ConfigFromEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if diff := cmp.Diff(openai.Config{APIKey: key, Model: "gpt-4.1", BaseURL: "http://proxy:9000/v1"}, cfg); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), key) {
		t.Errorf("Config JSON carries the key: %s", b)
	}
	c, err := openai.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(c.Name(), key) || c.Endpoint() != "proxy:9000" {
		t.Errorf("Name %q, Endpoint %q", c.Name(), c.Endpoint())
	}
}

func TestKeyNotInErrors(t *testing.T) {
	srv := wiretest.NewServer(t, wiretest.JSON(401, `{"error":{"message":"Incorrect API key provided: Bearer `+key+`.","type":"invalid_request_error","code":"invalid_api_key"}}`))
	_, err := wiretest.Complete(t, newClient(t, srv, nil), &provider.Request{})
	if pe := provider.AsError(err); pe == nil || pe.Kind != provider.KindAuth {
		t.Fatalf("err = %v, want auth", err)
	}
	if strings.Contains(err.Error(), key) {
		t.Errorf("error leaks the key: %v", err)
	}
}

func TestCanceled(t *testing.T) {
	reply := wiretest.SSE(stream(delta(`{"content":"x"}`, "stop")))
	reply.Fault.StallAt = 10
	srv := wiretest.NewServer(t, reply)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	_, err := newClient(t, srv, nil).Complete(ctx, &provider.Request{}, nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want it to wrap context.Canceled", err)
	}
}

// A request's output schema goes on OpenAI's wire as response_format
// json_schema when its root is an object; an array root (which the mode
// does not take) and a compatible server (which may not have the mode)
// get none, and the harness validates the answer either way. Each case's
// negative control is the same client with the rule the case checks
// switched off, under which the case fails.
func TestStructuredOutput(t *testing.T) {
	object := json.RawMessage(`{"type":"object","properties":{"fix":{"type":"string"}},"required":["fix"]}`)
	openAI := openai.Config{APIKey: key, Model: "gpt-4o", MaxOutputTokens: 256, StallTimeout: 5 * time.Second}
	compatible := openai.Config{Model: "qwen"}
	tests := []struct {
		name    string
		cfg     openai.Config
		client  func(openai.Config) (*openai.Client, error)
		control func(openai.Config) (*openai.Client, error) // client without the rule the case checks
		schema  json.RawMessage
		want    any
	}{
		{name: "object schema", cfg: openAI, client: openai.New, control: openai.NewUnstructured, schema: object,
			want: map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "answer", "schema": wiretest.JSONOf(t, object)}}},
		{name: "no schema", cfg: openAI, client: openai.New, control: openai.NewAnySchema},
		{name: "array schema", cfg: openAI, client: openai.New, control: openai.NewAnySchema, schema: json.RawMessage(`{"type":"array"}`)},
		{name: "compatible server", cfg: compatible, client: openai.NewCompatible, control: openai.NewCompatibleStructured, schema: object},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, responseFormat(t, tt.client, tt.cfg, tt.schema)); diff != "" {
				t.Errorf("response_format (-want +got):\n%s", diff)
			}
			got := responseFormat(t, tt.control, tt.cfg, tt.schema)
			if cmp.Equal(tt.want, got) {
				t.Fatalf("the negative control: with the rule switched off response_format is still %v: the case cannot fail", got)
			}
			t.Logf("with the rule switched off (-want +got):\n%s", cmp.Diff(tt.want, got))
		})
	}
}

// responseFormat returns the response_format a client that newClient
// makes from cfg sends for a request with the output schema schema.
func responseFormat(t *testing.T, newClient func(openai.Config) (*openai.Client, error), cfg openai.Config, schema json.RawMessage) any {
	t.Helper()
	srv := wiretest.NewServer(t, wiretest.SSE(stream(delta(`{"content":"{\"fix\":\"x\"}"}`, "stop"))))
	cfg.BaseURL = srv.URL + "/v1"
	c, err := newClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wiretest.Complete(t, c, &provider.Request{OutputSchema: schema}); err != nil {
		t.Fatal(err)
	}
	return wiretest.JSONOf(t, srv.Requests()[0].Body).(map[string]any)["response_format"]
}
