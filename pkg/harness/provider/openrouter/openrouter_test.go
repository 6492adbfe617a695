package openrouter_test

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/internal/wiretest"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/openrouter"
)

const key = "sk-or-v1-test-0123456789"

func stream(chunks ...string) string {
	var b strings.Builder
	b.WriteString(": OPENROUTER PROCESSING\n\n")
	for _, c := range chunks {
		b.WriteString("data: " + c + "\n\n")
	}
	b.WriteString("data: [DONE]\n\n")
	return b.String()
}

// chunk returns an OpenRouter chunk with one choice and optional extra
// top-level fields.
func chunk(delta, finish, extra string) string {
	f := "null"
	if finish != "" {
		f = `"` + finish + `"`
	}
	if extra != "" {
		extra = "," + extra
	}
	return `{"id":"gen-1","object":"chat.completion.chunk","created":1,"model":"anthropic/claude-4.7-opus-20260416","provider":"Amazon Bedrock","choices":[{"index":0,"delta":` + delta + `,"finish_reason":` + f + `,"native_finish_reason":` + f + `}]` + extra + `}`
}

const usageCost = `"usage":{"prompt_tokens":802,"completion_tokens":66,"total_tokens":868,"cost":0.00566,"is_byok":false,"prompt_tokens_details":{"cached_tokens":700,"cache_write_tokens":50},"cost_details":{"upstream_inference_cost":0.00566}}`

func newClient(t *testing.T, srv *wiretest.Server, edit func(*openrouter.Config)) *openrouter.Client {
	t.Helper()
	cfg := openrouter.Config{APIKey: key, Model: "anthropic/claude-opus-4.7", BaseURL: srv.URL + "/api/v1", StallTimeout: 5 * time.Second}
	if edit != nil {
		edit(&cfg)
	}
	c, err := openrouter.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

var approx = cmp.Comparer(func(a, b float64) bool { return math.Abs(a-b) < 1e-12 })

func TestToolLoop(t *testing.T) {
	turn1 := stream(
		chunk(`{"role":"assistant","content":"Checking."}`, "", ""),
		chunk(`{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"toolu_bdrk_01","type":"function","function":{"name":"get_weather","arguments":""}}]}`, "", ""),
		chunk(`{"role":"assistant","content":null,"tool_calls":[{"index":0,"function":{"arguments":""}}]}`, "", ""),
		chunk(`{"role":"assistant","content":null,"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":\"Paris\"}"}}]}`, "", ""),
		chunk(`{"role":"assistant","content":""}`, "tool_calls", ""),
		chunk(`{"role":"assistant","content":""}`, "tool_calls", usageCost),
	)
	turn2 := stream(
		chunk(`{"role":"assistant","content":"Paris : 22°C, "}`, "", ""),
		chunk(`{"role":"assistant","content":"ensoleillé ☀️."}`, "", ""),
		chunk(`{"role":"assistant","content":""}`, "stop", ""),
		chunk(`{"role":"assistant","content":""}`, "stop", `"usage":{"prompt_tokens":899,"completion_tokens":19,"total_tokens":918,"cost":0.00497}`),
	)
	srv := wiretest.NewServer(t, wiretest.SSE(turn1), wiretest.SSE(turn2))
	c := newClient(t, srv, func(c *openrouter.Config) {
		c.Referer = "https://example.org/agent"
		c.Title = "io-harness test"
		c.Models = []string{"anthropic/claude-sonnet-4.6", "openai/gpt-4o-mini"}
		c.Provider = json.RawMessage(`{"order":["Anthropic","Amazon Bedrock"],"allow_fallbacks":false,"data_collection":"deny"}`)
		c.MaxOutputTokens = 512
	})
	req := &provider.Request{
		System:   "Be brief.",
		Messages: []provider.Message{{Role: provider.RoleUser, Content: "Weather in Paris?"}},
		Tools:    []provider.ToolSpec{{Name: "get_weather", Description: "Weather.", Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}}}`)}},
	}
	resp, err := wiretest.Complete(t, c, req)
	if err != nil {
		t.Fatal(err)
	}
	want1 := &provider.Response{
		Text:       "Checking.",
		ToolCalls:  []provider.ToolCall{{ID: "toolu_bdrk_01", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris"}`)}},
		Usage:      provider.Usage{InputTokens: 802, OutputTokens: 66, CacheReadTokens: 700, CacheWriteTokens: 50},
		Cost:       provider.Cost{USD: 0.00566, Known: true},
		StopReason: provider.StopToolUse,
		Model:      "anthropic/claude-4.7-opus-20260416",
	}
	if diff := cmp.Diff(want1, resp, approx); diff != "" {
		t.Fatalf("turn 1 (-want +got):\n%s", diff)
	}
	req.Messages = append(req.Messages,
		provider.Message{Role: provider.RoleAssistant, Content: resp.Text, ToolCalls: resp.ToolCalls},
		provider.Message{Role: provider.RoleTool, ToolCallID: "toolu_bdrk_01", Content: `{"temperature":22}`},
	)
	resp, err = wiretest.Complete(t, c, req)
	if err != nil {
		t.Fatal(err)
	}
	want2 := &provider.Response{
		Text:       "Paris : 22°C, ensoleillé ☀️.",
		Usage:      provider.Usage{InputTokens: 899, OutputTokens: 19},
		Cost:       provider.Cost{USD: 0.00497, Known: true},
		StopReason: provider.StopEnd,
		Model:      "anthropic/claude-4.7-opus-20260416",
	}
	if diff := cmp.Diff(want2, resp, approx); diff != "" {
		t.Errorf("turn 2 (-want +got):\n%s", diff)
	}

	r := srv.Requests()[1]
	if r.Path != "/api/v1/chat/completions" {
		t.Errorf("path %s", r.Path)
	}
	for k, v := range map[string]string{
		"Authorization": "Bearer " + key, "HTTP-Referer": "https://example.org/agent", "X-Title": "io-harness test",
		"Content-Type": "application/json", "Accept": "text/event-stream",
	} {
		if got := r.Header.Get(k); got != v {
			t.Errorf("header %s = %q, want %q", k, got, v)
		}
	}
	wantBody := `{
		"model": "anthropic/claude-opus-4.7",
		"models": ["anthropic/claude-sonnet-4.6", "openai/gpt-4o-mini"],
		"provider": {"order":["Anthropic","Amazon Bedrock"],"allow_fallbacks":false,"data_collection":"deny"},
		"messages": [
			{"role": "system", "content": "Be brief."},
			{"role": "user", "content": "Weather in Paris?"},
			{"role": "assistant", "content": "Checking.", "tool_calls": [
				{"id": "toolu_bdrk_01", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]},
			{"role": "tool", "tool_call_id": "toolu_bdrk_01", "content": "{\"temperature\":22}"}
		],
		"tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather.", "parameters": {"type":"object","properties":{"city":{"type":"string"}}}}}],
		"stream": true,
		"stream_options": {"include_usage": true},
		"usage": {"include": true},
		"max_tokens": 512
	}`
	if diff := cmp.Diff(wiretest.JSONOf(t, []byte(wantBody)), wiretest.JSONOf(t, r.Body)); diff != "" {
		t.Errorf("turn 2 request body (-want +got):\n%s", diff)
	}
}

func TestErrors(t *testing.T) {
	tests := []struct {
		name  string
		reply wiretest.Reply
		kind  provider.Kind
		retry time.Duration
	}{
		{"documented error chunk", wiretest.SSE(stream(chunk(`{"content":"Hi"}`, "", ""),
			`{"id":"gen-abc123","object":"chat.completion.chunk","created":1234567890,"model":"openai/gpt-4o","provider":"OpenAI","error":{"code":429,"message":"Rate limit exceeded","metadata":{"error_type":"rate_limit_exceeded"}},"choices":[{"index":0,"delta":{"content":""},"finish_reason":"error"}]}`)),
			provider.KindRateLimited, 0},
		{"recorded error chunk with usage and done", wiretest.SSE(stream(
			`{"id":"gen-1762179802","provider":"Minimax","error":{"code":400,"message":"Token limit reached"},"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}],"usage":{"prompt_tokens":10,"completion_tokens":0,"cost":0}}`)),
			provider.KindBadRequest, 0},
		{"string code", wiretest.SSE(stream(`{"error":{"code":"server_error","message":"upstream died"},"choices":[{"index":0,"delta":{"content":""},"finish_reason":"error"}]}`)),
			provider.KindServer, 0},
		{"finish_reason error alone", wiretest.SSE(stream(chunk(`{"content":""}`, "error", ""))), provider.KindServer, 0},
		{"402 credits", wiretest.JSON(402, `{"error":{"code":402,"message":"Insufficient credits"}}`), provider.KindQuota, 0},
		{"429 upstream", wiretest.Reply{Status: 429, Header: map[string]string{"Content-Type": "application/json", "Retry-After": "7"}, Body: []byte(`{"error":{"code":429,"message":"Provider returned error","metadata":{"provider_name":"Google","raw":"temporarily rate-limited upstream"}}}`)},
			provider.KindRateLimited, 7 * time.Second},
		{"503 no provider", wiretest.JSON(503, `{"error":{"code":503,"message":"No endpoints found that support tool use"}}`), provider.KindServer, 0},
		{"400 overflow", wiretest.JSON(400, `{"error":{"code":400,"message":"This endpoint's maximum context length is 200000 tokens. However, you requested about 250000 tokens"}}`), provider.KindContextOverflow, 0},
		{"403 moderation", wiretest.JSON(403, `{"error":{"code":403,"message":"flagged","metadata":{"reasons":["x"]}}}`), provider.KindAuth, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := wiretest.NewServer(t, tt.reply)
			_, err := wiretest.Complete(t, newClient(t, srv, nil), &provider.Request{})
			pe := provider.AsError(err)
			if pe == nil || pe.Kind != tt.kind || pe.RetryAfter != tt.retry {
				t.Fatalf("err = %v (retry %v), want %s (retry %v)", err, pe.RetryAfter, tt.kind, tt.retry)
			}
		})
	}
}

func TestFaultsAndCut(t *testing.T) {
	body := stream(chunk(`{"role":"assistant","content":"Bonjour, 22°C ☀️"}`, "", ""), chunk(`{"content":""}`, "stop", ""), chunk(`{"content":""}`, "stop", usageCost))
	for name, fault := range wiretest.Faults() {
		t.Run(name, func(t *testing.T) {
			reply := wiretest.SSE(body)
			reply.Fault = fault
			resp, err := wiretest.Complete(t, newClient(t, wiretest.NewServer(t, reply), nil), &provider.Request{})
			if err != nil {
				t.Fatal(err)
			}
			if resp.Text != "Bonjour, 22°C ☀️" || resp.Cost != (provider.Cost{USD: 0.00566, Known: true}) {
				t.Errorf("text %q cost %v", resp.Text, resp.Cost)
			}
		})
	}
	for name, fault := range map[string]wiretest.Fault{"cut": {CutAt: len(body) - 20}, "stall": {StallAt: 40}} {
		t.Run(name, func(t *testing.T) {
			reply := wiretest.SSE(body)
			reply.Fault = fault
			// The stall timeout is short only where a stall is the case: a
			// loaded machine must not turn a cut into a stall.
			stall := time.Minute
			if name == "stall" {
				stall = wiretest.Short
			}
			c := newClient(t, wiretest.NewServer(t, reply), func(c *openrouter.Config) { c.StallTimeout = stall })
			_, err := wiretest.Complete(t, c, &provider.Request{})
			if pe := provider.AsError(err); pe == nil || !pe.Transient() || pe.Kind != map[string]provider.Kind{"cut": provider.KindTruncated, "stall": provider.KindStall}[name] {
				t.Fatalf("err = %v", err)
			}
		})
	}
}

func TestPrice(t *testing.T) {
	tests := []struct {
		model string
		price *provider.Price
		u     provider.Usage
		usd   float64
		known bool
	}{
		// The vectors of the research notes, from OpenRouter's own costs.
		{"openai/gpt-4o-mini", nil, provider.Usage{InputTokens: 67, OutputTokens: 5}, 0.00001005 + 0.000003, true},
		{"anthropic/claude-opus-4.7", nil, provider.Usage{InputTokens: 802, OutputTokens: 66}, 0.00401 + 0.00165, true},
		{"anthropic/claude-sonnet-4.6", nil, provider.Usage{InputTokens: 254, OutputTokens: 5}, 0.000762 + 0.000075, true},
		// A free variant costs nothing; another variant has its own price.
		{"openai/gpt-4o-mini:free", nil, provider.Usage{InputTokens: 67, OutputTokens: 5}, 0, true},
		{"openai/gpt-4o-mini:nitro", nil, provider.Usage{InputTokens: 67, OutputTokens: 5}, 0, false},
		// OpenRouter-only models are in the catalogue.
		{"qwen/qwen3-coder", nil, provider.Usage{InputTokens: 1e6, OutputTokens: 1e6}, 0.22 + 0.95, true},
		{"moonshotai/kimi-k2.5", nil, provider.Usage{InputTokens: 1e6, OutputTokens: 1e6}, 0.6 + 3, true},
		// Gemini 2.5 Pro bills a prompt past 200k tokens at its long-context price.
		{"google/gemini-2.5-pro", nil, provider.Usage{InputTokens: 200_000, OutputTokens: 1000}, (200_000*1.25 + 1000*10) / 1e6, true},
		{"google/gemini-2.5-pro", nil, provider.Usage{InputTokens: 200_001, OutputTokens: 1000}, (200_001*2.5 + 1000*15) / 1e6, true},
		{"minimax/minimax-m2", nil, provider.Usage{InputTokens: 67}, 0, false},
		{"minimax/minimax-m2", &provider.Price{Input: 1, Output: 2}, provider.Usage{InputTokens: 1e6, OutputTokens: 1e6}, 3, true},
	}
	for _, tt := range tests {
		c, err := openrouter.New(openrouter.Config{APIKey: key, Model: tt.model, Price: tt.price})
		if err != nil {
			t.Fatal(err)
		}
		got := c.Price(tt.u)
		if got.Known != tt.known || math.Abs(got.USD-tt.usd) > 1e-12 {
			t.Errorf("%s: Price = %v, want $%g known=%v", tt.model, got, tt.usd, tt.known)
		}
	}
}

func TestConfig(t *testing.T) {
	for _, cfg := range []openrouter.Config{
		{APIKey: key},
		{Model: "openai/gpt-4o"},
		{APIKey: key, Model: "m", Provider: json.RawMessage(`["not","an","object"]`)},
		{APIKey: key, Model: "m", BaseURL: "openrouter.ai"},
	} {
		if _, err := openrouter.New(cfg); err == nil {
			t.Errorf("New(%+v) succeeded", cfg)
		}
	}
	c, err := openrouter.New(openrouter.Config{APIKey: key, Model: "openai/gpt-4o"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Name() != "openrouter:openai/gpt-4o" || c.Endpoint() != "openrouter.ai:443" {
		t.Errorf("Name %q Endpoint %q", c.Name(), c.Endpoint())
	}
	env := map[string]string{"OPENROUTER_API_KEY": key, "OPENROUTER_MODEL": "openai/gpt-4o-mini", "OPENROUTER_BASE_URL": "http://localhost:9/api/v1"}
	cfg := openrouter.ConfigFromEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if diff := cmp.Diff(openrouter.Config{APIKey: key, Model: "openai/gpt-4o-mini", BaseURL: "http://localhost:9/api/v1"}, cfg); diff != "" {
		t.Errorf("ConfigFromEnv (-want +got):\n%s", diff)
	}
	if b, _ := json.Marshal(cfg); strings.Contains(string(b), key) {
		t.Errorf("Config JSON carries the key: %s", b)
	}
}

// TestConformance replays the recorded OpenRouter streams over HTTP,
// clean and with each transport fault.
func TestConformance(t *testing.T) {
	dir := wiretest.FixtureDir(t)
	want := map[string]*provider.Response{
		"openrouter-text.sse": {
			Text:       "Hello!",
			Usage:      provider.Usage{InputTokens: 21, OutputTokens: 3},
			Cost:       provider.Cost{USD: 0.00000495, Known: true},
			StopReason: provider.StopEnd,
			Model:      "openai/gpt-4o-mini",
		},
		"openrouter-tool-call.sse": {
			ToolCalls:  []provider.ToolCall{{ID: "call_L7mHMq49ZSUTBHjLJfBIP2eT", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris"}`)}},
			Usage:      provider.Usage{InputTokens: 67, OutputTokens: 5},
			Cost:       provider.Cost{USD: 0.00001305, Known: true},
			StopReason: provider.StopToolUse,
			Model:      "openai/gpt-4o-mini",
		},
	}
	files, _ := filepath.Glob(filepath.Join(dir, "openrouter-*.sse"))
	if len(files) == 0 {
		t.Fatalf("no openrouter-*.sse fixtures in %s", dir)
	}
	for _, path := range files {
		name := filepath.Base(path)
		w, ok := want[name]
		if !ok {
			t.Errorf("%s: no expected turn for this fixture", name)
			continue
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for fname, fault := range wiretest.Faults() {
			t.Run(name+"/"+fname, func(t *testing.T) {
				reply := wiretest.SSE(string(data))
				reply.Fault = fault
				c := newClient(t, wiretest.NewServer(t, reply), func(c *openrouter.Config) { c.Model = "openai/gpt-4o-mini" })
				resp, err := wiretest.Complete(t, c, &provider.Request{})
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(w, resp, approx); diff != "" {
					t.Errorf("(-want +got):\n%s", diff)
				}
			})
		}
	}
}

// TestRecordedRequest rebuilds the recorded request; the recording also
// set tool_choice and temperature, which the harness does not send, and
// lacks usage.include, which it does.
func TestRecordedRequest(t *testing.T) {
	dir := wiretest.FixtureDir(t)
	data, err := os.ReadFile(filepath.Join(dir, "openrouter-tool-call.request.json"))
	if err != nil {
		t.Fatal(err)
	}
	var recorded struct {
		Body map[string]any `json:"body"`
	}
	if err := json.Unmarshal(data, &recorded); err != nil {
		t.Fatal(err)
	}
	delete(recorded.Body, "tool_choice")
	delete(recorded.Body, "temperature")
	srv := wiretest.NewServer(t, wiretest.SSE(stream(chunk(`{}`, "stop", ""))))
	c := newClient(t, srv, func(c *openrouter.Config) { c.Model = "openai/gpt-4o-mini" })
	_, err = wiretest.Complete(t, c, &provider.Request{
		System:          "Call tools exactly as requested.",
		MaxOutputTokens: 80,
		Messages:        []provider.Message{{Role: provider.RoleUser, Content: "Call get_weather with city exactly Paris."}},
		Tools: []provider.ToolSpec{{Name: "get_weather", Description: "Get current weather for a city.",
			Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}`)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var sent map[string]any
	if err := json.Unmarshal(srv.Requests()[0].Body, &sent); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]any{"include": true}, sent["usage"]); diff != "" {
		t.Errorf("usage option (-want +got):\n%s", diff)
	}
	delete(sent, "usage")
	if diff := cmp.Diff(recorded.Body, sent); diff != "" {
		t.Errorf("request body (-recorded +sent):\n%s", diff)
	}
}

// FuzzOpenRouterStream feeds arbitrary bytes to the OpenRouter decoder: it must
// not panic, must fail only with a *provider.Error, must give the same
// result however the bytes are split, and a reported cost must become a
// known cost.
func FuzzOpenRouterStream(f *testing.F) {
	// Seeds stay small: the fuzzer minimises every new input, and that
	// takes long on a large one.
	f.Add([]byte(stream(chunk(`{"content":"Hi °"}`, "stop", ""), chunk(`{"content":""}`, "stop", `"usage":{"prompt_tokens":2,"completion_tokens":1,"cost":0.5}`))))
	f.Add([]byte(stream(`{"error":{"code":429,"message":"x","metadata":{"error_type":"rate_limit_exceeded"}},"choices":[{"index":0,"delta":{"content":""},"finish_reason":"error"}]}`)))
	f.Add([]byte(": OPENROUTER PROCESSING\r\n\r\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"a\",\"function\":{\"name\":\"f\",\"arguments\":\"\"}}]}}]}\r\n\r\ndata: [DONE]\r\n\r\n"))
	c, err := openrouter.New(openrouter.Config{APIKey: key, Model: "openai/gpt-4o-mini"})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var deltas strings.Builder
		resp, err := c.ReadStream(bytes.NewReader(in), func(s string) { deltas.WriteString(s) })
		again, err2 := c.ReadStream(iotest.OneByteReader(bytes.NewReader(in)), nil)
		if !reflect.DeepEqual(resp, again) {
			t.Fatalf("whole and one-byte reads differ: %+v, %+v", resp, again)
		}
		if err != nil {
			pe, pe2 := provider.AsError(err), provider.AsError(err2)
			if pe == nil || pe2 == nil || pe.Kind != pe2.Kind {
				t.Fatalf("errors %v, %v", err, err2)
			}
			return
		}
		if deltas.String() != resp.Text {
			t.Fatalf("deltas %q, text %q", deltas.String(), resp.Text)
		}
		if resp.Cost.Known && (math.IsNaN(resp.Cost.USD) || math.IsInf(resp.Cost.USD, 0)) {
			t.Fatalf("cost %v", resp.Cost)
		}
	})
}

// OpenRouter passes response_format to the models that take it: a
// request's object schema goes there, as on OpenAI's wire, and a request
// without one sends none. Each case's negative control is New with the
// rule the case checks switched off, under which the case fails.
func TestStructuredOutput(t *testing.T) {
	schema := json.RawMessage(`{"type":"object","required":["fix"]}`)
	tests := []struct {
		name    string
		schema  json.RawMessage
		want    any                                                 // nil: no response_format at all
		control func(openrouter.Config) (*openrouter.Client, error) // New without the rule the case checks
	}{
		{name: "object schema", schema: schema, control: openrouter.NewUnstructured,
			want: map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "answer", "schema": wiretest.JSONOf(t, schema)}}},
		{name: "no schema", control: openrouter.NewAnySchema},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, sent := responseFormat(t, openrouter.New, tt.schema)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("response_format (-want +got):\n%s", diff)
			}
			if tt.want == nil && sent {
				t.Errorf("a request without a schema sent response_format %v", got)
			}
			got, sent = responseFormat(t, tt.control, tt.schema)
			if cmp.Equal(tt.want, got) && sent == (tt.want != nil) {
				t.Fatalf("the negative control: with the rule switched off response_format is still %v: the case cannot fail", got)
			}
			t.Logf("with the rule switched off (-want +got):\n%s", cmp.Diff(tt.want, got))
		})
	}
}

// responseFormat returns the response_format a client that newClient
// makes sends for a request with the output schema schema, and whether
// it sent one.
func responseFormat(t *testing.T, newClient func(openrouter.Config) (*openrouter.Client, error), schema json.RawMessage) (any, bool) {
	t.Helper()
	srv := wiretest.NewServer(t, wiretest.SSE(stream(chunk(`{"content":"{\"fix\":\"x\"}"}`, "stop", ""))))
	c, err := newClient(openrouter.Config{APIKey: key, Model: "anthropic/claude-opus-4.7", BaseURL: srv.URL + "/api/v1", StallTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wiretest.Complete(t, c, &provider.Request{OutputSchema: schema}); err != nil {
		t.Fatal(err)
	}
	reqs := srv.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	rf, ok := wiretest.JSONOf(t, reqs[0].Body).(map[string]any)["response_format"]
	return rf, ok
}
