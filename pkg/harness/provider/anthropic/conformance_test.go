package anthropic_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/anthropic"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/internal/wiretest"
)

// fixtureTurn is what a recorded stream must assemble to.
type fixtureTurn struct {
	model string          // the configured model, which picks the price
	price *provider.Price // a configured price, for a model the table lacks
	resp  *provider.Response
	kind  provider.Kind // the error kind, when the stream must fail
	// completed is the turn the stream assembles once its missing final
	// blank line is added.
	completed *provider.Response
}

func opus47(input, output int64) provider.Cost {
	return provider.Cost{USD: (float64(input)*5 + float64(output)*25) / 1e6, Known: true}
}

// opus41 is Opus 4.1's list price, $15 and $75 a million tokens.
func opus41(input, output int64) provider.Cost {
	return provider.Cost{USD: (float64(input)*15 + float64(output)*75) / 1e6, Known: true}
}

var fixtureTurns = map[string]fixtureTurn{
	"anthropic-docs-text.sse": {model: "claude-opus-4-1", resp: &provider.Response{
		Text:       "Hello!",
		Usage:      provider.Usage{InputTokens: 25, OutputTokens: 15},
		Cost:       opus41(25, 15),
		StopReason: provider.StopEnd,
		Model:      "claude-opus-4-1-20250805",
	}},
	// The recording ends without the blank line after message_stop, so
	// the event never completes: a cut stream, whatever it held.
	"anthropic-docs-tool-use.sse": {model: "claude-opus-4-1", kind: provider.KindTruncated, completed: &provider.Response{
		Text:       "Okay, let's check the weather for San Francisco, CA:",
		ToolCalls:  []provider.ToolCall{{ID: "toolu_01T1x1fJ34qAmk2tNTrN7Up6", Name: "get_weather", Arguments: json.RawMessage(`{"location": "San Francisco, CA", "unit": "fahrenheit"}`)}},
		Usage:      provider.Usage{InputTokens: 472, OutputTokens: 89},
		Cost:       opus41(472, 89),
		StopReason: provider.StopToolUse,
		Model:      "claude-opus-4-1-20250805",
	}},
	"anthropic-midstream-error.sse": {model: "claude-sonnet-4", kind: provider.KindServer},
	"anthropic-text-then-tool-use.sse": {model: "claude-3-7-sonnet-20250219", price: &provider.Price{Input: 3, Output: 15, CacheRead: 0.3, CacheWrite: 3.75}, resp: &provider.Response{
		Text:       "I'd be happy to check the weather in San Francisco for you. Let me get that information for you right away.",
		ToolCalls:  []provider.ToolCall{{ID: "toolu_017QoD96fYwGzCWvLfaPADWg", Name: "get_weather", Arguments: json.RawMessage(`{"city": "San Francisco"}`)}},
		Usage:      provider.Usage{InputTokens: 394, OutputTokens: 79},
		Cost:       provider.Cost{USD: (394*3 + 79*15) / 1e6, Known: true},
		StopReason: provider.StopToolUse,
		Model:      "claude-3-7-sonnet-20250219",
	}},
	"anthropic-tool-loop-1-tool-use.sse": {model: "claude-opus-4-7", resp: &provider.Response{
		ToolCalls:  []provider.ToolCall{{ID: "toolu_01M8nJQQMxqpv1VaPYuJKT4j", Name: "get_weather", Arguments: json.RawMessage(`{"city": "Paris"}`)}},
		Usage:      provider.Usage{InputTokens: 798, OutputTokens: 66},
		Cost:       opus47(798, 66),
		StopReason: provider.StopToolUse,
		Model:      "claude-opus-4-7",
	}},
	"anthropic-tool-loop-2-answer.sse": {model: "claude-opus-4-7", resp: &provider.Response{
		Text:       "Paris is currently sunny at 22°C.",
		Usage:      provider.Usage{InputTokens: 895, OutputTokens: 19},
		Cost:       opus47(895, 19),
		StopReason: provider.StopEnd,
		Model:      "claude-opus-4-7",
	}},
}

// TestConformance replays every recorded Anthropic stream through the
// client, over HTTP, clean and with each transport fault.
func TestConformance(t *testing.T) {
	dir := wiretest.FixtureDir(t)
	files, err := filepath.Glob(filepath.Join(dir, "anthropic-*.sse"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no anthropic-*.sse fixtures in %s", dir)
	}
	for _, path := range files {
		name := filepath.Base(path)
		want, ok := fixtureTurns[name]
		if !ok {
			t.Errorf("%s: no expected turn for this fixture", name)
			continue
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(name, func(t *testing.T) {
			for fname, fault := range wiretest.Faults() {
				t.Run(fname, func(t *testing.T) {
					replay(t, want, string(data), fault, want.resp, want.kind)
				})
			}
			if want.completed != nil {
				t.Run("completed", func(t *testing.T) {
					replay(t, want, string(data)+"\n", wiretest.Fault{}, want.completed, "")
				})
			}
		})
	}
}

func replay(t *testing.T, ft fixtureTurn, body string, fault wiretest.Fault, want *provider.Response, kind provider.Kind) {
	t.Helper()
	reply := wiretest.SSE(body)
	reply.Fault = fault
	srv := wiretest.NewServer(t, reply)
	c, err := anthropic.New(anthropic.Config{APIKey: key, Model: ft.model, BaseURL: srv.URL, Price: ft.price})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := wiretest.Complete(t, c, &provider.Request{Messages: []provider.Message{{Role: provider.RoleUser, Content: "hi"}}})
	if kind != "" {
		if pe := provider.AsError(err); pe == nil || pe.Kind != kind {
			t.Fatalf("err = %v, want %s", err, kind)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, resp, approx); diff != "" {
		t.Errorf("turn (-want +got):\n%s", diff)
	}
}

// TestRecordedRequest rebuilds the recorded turn-2 request of the tool
// loop and compares it with what the API was sent; the cache marks are
// the harness's own addition.
func TestRecordedRequest(t *testing.T) {
	dir := wiretest.FixtureDir(t)
	data, err := os.ReadFile(filepath.Join(dir, "anthropic-tool-loop-2-answer.request.json"))
	if err != nil {
		t.Fatal(err)
	}
	var recorded struct {
		Headers map[string]string `json:"headers"`
		Body    any               `json:"body"`
	}
	if err := json.Unmarshal(data, &recorded); err != nil {
		t.Fatal(err)
	}
	srv := wiretest.NewServer(t, wiretest.SSE(start("m", 1, 0, 0)+end("end_turn", `{"output_tokens":1}`)))
	c := newClient(t, srv, func(c *anthropic.Config) { c.Model = "claude-opus-4-7" })
	req := &provider.Request{
		System:          "Use the get_weather tool, then answer in one short sentence.",
		MaxOutputTokens: 80,
		Tools: []provider.ToolSpec{{
			Name:        "get_weather",
			Description: "Get current weather for a city.",
			Parameters:  json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}`),
		}},
		Messages: []provider.Message{
			{Role: provider.RoleUser, Content: "What is the weather in Paris?"},
			{Role: provider.RoleAssistant, ToolCalls: []provider.ToolCall{{ID: "toolu_01M8nJQQMxqpv1VaPYuJKT4j", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris"}`)}}},
			{Role: provider.RoleTool, ToolCallID: "toolu_01M8nJQQMxqpv1VaPYuJKT4j", Content: `{"temperature":22,"condition":"sunny"}`},
		},
	}
	if _, err := wiretest.Complete(t, c, req); err != nil {
		t.Fatal(err)
	}
	sent := srv.Requests()[0]
	for k, v := range recorded.Headers {
		if got := sent.Header.Get(k); got != v {
			t.Errorf("header %s = %q, recorded %q", k, got, v)
		}
	}
	var body any
	if err := json.Unmarshal([]byte(strings.ReplaceAll(string(sent.Body), `,"cache_control":{"type":"ephemeral"}`, "")), &body); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(recorded.Body, body); diff != "" {
		t.Errorf("request body (-recorded +sent):\n%s", diff)
	}
	if !strings.Contains(string(sent.Body), `"cache_control":{"type":"ephemeral"}`) {
		t.Error("no cache marks sent")
	}
}
