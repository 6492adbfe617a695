package openai_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/internal/wiretest"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/openai"
)

// fixtureTurn is what a recorded stream must assemble to.
type fixtureTurn struct {
	model string // the configured model, which picks the price
	resp  *provider.Response
	err   *provider.Error // Kind, Status and RetryAfter are compared
	retry string          // a retry-after header the fixture server adds
}

func gpt4o(prompt, completion int64) provider.Cost {
	return provider.Cost{USD: (float64(prompt)*2.5 + float64(completion)*10) / 1e6, Known: true}
}

func gpt4oMini(prompt, completion int64) provider.Cost {
	return provider.Cost{USD: (float64(prompt)*0.15 + float64(completion)*0.6) / 1e6, Known: true}
}

var fixtureTurns = map[string]fixtureTurn{
	"openai-chat-text.sse": {model: "gpt-4o", resp: &provider.Response{
		Text:       "I'm unable to provide real-time weather updates. To get the current weather in San Francisco, I recommend checking a reliable weather website or a weather app.",
		Usage:      provider.Usage{InputTokens: 14, OutputTokens: 30},
		Cost:       gpt4o(14, 30),
		StopReason: provider.StopEnd,
		Model:      "gpt-4o-2024-08-06",
	}},
	"openai-chat-tool-call.sse": {model: "gpt-4o", resp: &provider.Response{
		ToolCalls:  []provider.ToolCall{{ID: "call_4XzlGBLtUe9dy3GVNV4jhq7h", Name: "get_weather", Arguments: json.RawMessage(`{"city":"New York City"}`)}},
		Usage:      provider.Usage{InputTokens: 44, OutputTokens: 16},
		Cost:       gpt4o(44, 16),
		StopReason: provider.StopToolUse,
		Model:      "gpt-4o-2024-08-06",
	}},
	"openai-chat-parallel-tool-calls.sse": {model: "gpt-4o", resp: &provider.Response{
		ToolCalls: []provider.ToolCall{
			{ID: "call_JMW1whyEaYG438VE1OIflxA2", Name: "GetWeatherArgs", Arguments: json.RawMessage(`{"city": "Edinburgh", "country": "GB", "units": "c"}`)},
			{ID: "call_DNYTawLBoN8fj3KN6qU9N1Ou", Name: "get_stock_price", Arguments: json.RawMessage(`{"ticker": "AAPL", "exchange": "NASDAQ"}`)},
		},
		Usage:      provider.Usage{InputTokens: 149, OutputTokens: 60},
		Cost:       gpt4o(149, 60),
		StopReason: provider.StopToolUse,
		Model:      "gpt-4o-2024-08-06",
	}},
	"openai-chat-tool-loop-1-tool-call.sse": {model: "gpt-4o-mini", resp: &provider.Response{
		ToolCalls:  []provider.ToolCall{{ID: "call_tyZNHs2AudCbG4XJUEmX5Waw", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris"}`)}},
		Usage:      provider.Usage{InputTokens: 64, OutputTokens: 14},
		Cost:       gpt4oMini(64, 14),
		StopReason: provider.StopToolUse,
		Model:      "gpt-4o-mini-2024-07-18",
	}},
	"openai-chat-tool-loop-2-answer.sse": {model: "gpt-4o-mini", resp: &provider.Response{
		Text:       "The weather in Paris is sunny with a temperature of 22°C.",
		Usage:      provider.Usage{InputTokens: 96, OutputTokens: 15},
		Cost:       gpt4oMini(96, 15),
		StopReason: provider.StopEnd,
		Model:      "gpt-4o-mini-2024-07-18",
	}},
	"openai-http429-rate-limit.http": {model: "gpt-4o", retry: "20",
		err: &provider.Error{Kind: provider.KindRateLimited, Status: 429, RetryAfter: 20 * time.Second}},
}

// TestConformance replays every recorded OpenAI stream through the
// client, over HTTP, clean and with each transport fault.
func TestConformance(t *testing.T) {
	dir := wiretest.FixtureDir(t)
	files, err := filepath.Glob(filepath.Join(dir, "openai-*"))
	if err != nil {
		t.Fatal(err)
	}
	ran := 0
	for _, path := range files {
		name := filepath.Base(path)
		if !strings.HasSuffix(name, ".sse") && !strings.HasSuffix(name, ".http") {
			continue
		}
		want, ok := fixtureTurns[name]
		if !ok {
			t.Errorf("%s: no expected turn for this fixture", name)
			continue
		}
		ran++
		t.Run(name, func(t *testing.T) {
			reply := fixtureReply(t, path, want.retry)
			for fname, fault := range wiretest.Faults() {
				t.Run(fname, func(t *testing.T) {
					r := reply
					r.Fault = fault
					srv := wiretest.NewServer(t, r)
					c, err := openai.New(openai.Config{APIKey: key, Model: want.model, BaseURL: srv.URL + "/v1"})
					if err != nil {
						t.Fatal(err)
					}
					resp, err := wiretest.Complete(t, c, &provider.Request{Messages: []provider.Message{{Role: provider.RoleUser, Content: "hi"}}})
					checkTurn(t, want, resp, err)
				})
			}
		})
	}
	if ran == 0 {
		t.Fatalf("no openai-* fixtures in %s", dir)
	}
}

// fixtureReply reads a .sse fixture as an event-stream reply, or a .http
// fixture as the raw response it records.
func fixtureReply(t *testing.T, path, retry string) wiretest.Reply {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.HasSuffix(path, ".sse") {
		return wiretest.SSE(string(data))
	}
	resp, err := httpReadResponse(data)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	reply := wiretest.Reply{Status: resp.StatusCode, Header: map[string]string{}, Body: body}
	for k := range resp.Header {
		if k != "Content-Length" {
			reply.Header[k] = resp.Header.Get(k)
		}
	}
	if retry != "" {
		reply.Header["Retry-After"] = retry
	}
	return reply
}

func checkTurn(t *testing.T, want fixtureTurn, resp *provider.Response, err error) {
	t.Helper()
	if want.err != nil {
		pe := provider.AsError(err)
		if pe == nil {
			t.Fatalf("err = %v, want %s", err, want.err.Kind)
		}
		got := provider.Error{Kind: pe.Kind, Status: pe.Status, RetryAfter: pe.RetryAfter}
		if diff := cmp.Diff(*want.err, got); diff != "" {
			t.Errorf("error (-want +got):\n%s", diff)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	approx := cmp.Comparer(func(a, b float64) bool { return math.Abs(a-b) < 1e-12 })
	if diff := cmp.Diff(want.resp, resp, approx); diff != "" {
		t.Errorf("turn (-want +got):\n%s", diff)
	}
}

// TestRecordedRequests rebuilds the recorded tool-loop requests and
// compares them with what the API was sent. The recordings also set
// temperature, which the harness does not send.
func TestRecordedRequests(t *testing.T) {
	dir := wiretest.FixtureDir(t)
	system := "Use the get_weather tool, then answer in one short sentence."
	user := provider.Message{Role: provider.RoleUser, Content: "What is the weather in Paris?"}
	tools := []provider.ToolSpec{{
		Name:        "get_weather",
		Description: "Get current weather for a city.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}`),
	}}
	tests := map[string]*provider.Request{
		"openai-chat-tool-loop-1-tool-call.request.json": {System: system, Tools: tools, MaxOutputTokens: 80,
			Messages: []provider.Message{user}},
		"openai-chat-tool-loop-2-answer.request.json": {System: system, Tools: tools, MaxOutputTokens: 80,
			Messages: []provider.Message{user,
				{Role: provider.RoleAssistant, ToolCalls: []provider.ToolCall{{ID: "call_tyZNHs2AudCbG4XJUEmX5Waw", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris"}`)}}},
				{Role: provider.RoleTool, ToolCallID: "call_tyZNHs2AudCbG4XJUEmX5Waw", Content: `{"temperature":22,"condition":"sunny"}`},
			}},
	}
	for name, req := range tests {
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil {
				t.Fatal(err)
			}
			var recorded struct {
				Body map[string]any `json:"body"`
			}
			if err := json.Unmarshal(data, &recorded); err != nil {
				t.Fatal(err)
			}
			delete(recorded.Body, "temperature")
			srv := wiretest.NewServer(t, wiretest.SSE(stream(delta(`{}`, "stop"))))
			c, err := openai.New(openai.Config{APIKey: key, Model: "gpt-4o-mini", BaseURL: srv.URL + "/v1", MaxTokensField: "max_tokens"})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := wiretest.Complete(t, c, req); err != nil {
				t.Fatal(err)
			}
			var sent map[string]any
			if err := json.Unmarshal(srv.Requests()[0].Body, &sent); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(recorded.Body, sent); diff != "" {
				t.Errorf("request body (-recorded +sent):\n%s", diff)
			}
		})
	}
}

// httpReadResponse parses a raw HTTP response.
func httpReadResponse(data []byte) (*http.Response, error) {
	return http.ReadResponse(bufio.NewReader(bytes.NewReader(data)), nil)
}
