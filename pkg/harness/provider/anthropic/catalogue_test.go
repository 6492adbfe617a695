package anthropic_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/anthropic"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/internal/wiretest"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/models"
)

// foreignHistory is a run that began on other vendors and falls back to
// Anthropic: Kimi's ids (through OpenRouter), OpenAI's, a Bedrock id, and
// a genuine id that a naive mapping ('.' and ':' to '_') of a Kimi id
// would collide with.
func foreignHistory() *provider.Request {
	call := func(id, name string) provider.ToolCall {
		return provider.ToolCall{ID: id, Name: name, Arguments: json.RawMessage(`{"path":"a.go"}`)}
	}
	result := func(id string) provider.Message {
		return provider.Message{Role: provider.RoleTool, ToolCallID: id, Content: "package a"}
	}
	return &provider.Request{
		System: "Work through the tools.",
		Messages: []provider.Message{
			{Role: provider.RoleUser, Content: "Fix a.go."},
			{Role: provider.RoleAssistant, ToolCalls: []provider.ToolCall{call("functions.read_file:0", "read_file"), call("functions.grep:1", "grep")}},
			result("functions.read_file:0"), result("functions.grep:1"),
			{Role: provider.RoleAssistant, ToolCalls: []provider.ToolCall{call("functions_read_file_0", "read_file")}},
			result("functions_read_file_0"),
			{Role: provider.RoleAssistant, ToolCalls: []provider.ToolCall{call("call_tyZNHs2AudCbG4XJUEmX5Waw", "read_file"), call("toolu_bdrk_01M8nJQQMxqpv1VaPYuJKT4j", "read_file")}},
			result("call_tyZNHs2AudCbG4XJUEmX5Waw"), result("toolu_bdrk_01M8nJQQMxqpv1VaPYuJKT4j"),
			{Role: provider.RoleUser, Content: "Go on."},
		},
		Tools: []provider.ToolSpec{{Name: "read_file", Parameters: json.RawMessage(`{"type":"object"}`)}, {Name: "grep"}},
	}
}

// TestForeignToolIDs sends a history made by other vendors to a local
// Messages server that checks tool ids as the API does. The negative
// control, the same history with its ids sent as they are, is in
// ids_internal_test.go.
func TestForeignToolIDs(t *testing.T) {
	answer := wiretest.SSE(start("claude-sonnet-4-5", 10, 0, 0) + textBlock(0, "Done.") + end("end_turn", `{"output_tokens":2}`))
	srv := wiretest.CheckingServer(t, func(b []byte) error { return wiretest.CheckMessages(b, 0) }, true, answer)
	c := newClient(t, srv, nil)
	for range 2 {
		resp, err := wiretest.Complete(t, c, foreignHistory())
		if err != nil {
			t.Fatalf("the API refused the mapped history: %v", err)
		}
		if resp.Text != "Done." {
			t.Fatalf("text %q", resp.Text)
		}
	}
	reqs := srv.Requests()
	// A resumed run sends byte-identical requests: the mapping is pure.
	if !bytes.Equal(reqs[0].Body, reqs[1].Body) {
		t.Errorf("the same history gave two different bodies:\n%s\n%s", reqs[0].Body, reqs[1].Body)
	}
	// The vendor's own ids, and ids it accepts, reach it untouched.
	for _, id := range []string{`"toolu_bdrk_01M8nJQQMxqpv1VaPYuJKT4j"`, `"call_tyZNHs2AudCbG4XJUEmX5Waw"`, `"functions_read_file_0"`} {
		if n := strings.Count(string(reqs[0].Body), id); n != 2 {
			t.Errorf("%s appears %d times in the body, want 2 (the call and its result)", id, n)
		}
	}
	if strings.Contains(string(reqs[0].Body), "functions.read_file:0") {
		t.Errorf("a Kimi id reached Anthropic: %s", reqs[0].Body)
	}
}

// TestOutputCap checks the max_tokens a request carries against a server
// that refuses a cap above the model's, as the API does.
func TestOutputCap(t *testing.T) {
	answer := wiretest.SSE(start("m", 10, 0, 0) + textBlock(0, "ok") + end("end_turn", `{"output_tokens":1}`))
	small := &provider.Request{Messages: []provider.Message{{Role: provider.RoleUser, Content: "hi"}}}
	long := &provider.Request{Messages: []provider.Message{{Role: provider.RoleUser, Content: strings.Repeat("word ", 55_000)}}} // about 165,000 estimated tokens
	budget := func(n int64) *provider.Request { r := *small; r.MaxOutputTokens = n; return &r }
	empty := &models.Catalogue{Version: models.Version}
	tests := []struct {
		name  string
		model string
		cat   *models.Catalogue
		conf  int64
		req   *provider.Request
		want  int64
		fails bool
	}{
		{"nothing asked: the model's largest", "claude-sonnet-4-5", nil, 0, small, 64_000, false},
		{"a budget's cap below it", "claude-sonnet-4-5", nil, 0, budget(3000), 3000, false},
		{"a budget's cap above it is cut to it", "claude-sonnet-4-5", nil, 0, budget(1_000_000), 64_000, false},
		{"the config's cap", "claude-sonnet-4-5", nil, 8000, small, 8000, false},
		{"the window's room after a long prompt", "claude-sonnet-4-5", nil, 0, long, 200_000 - provider.EstimateInput(long), false},
		{"opus 4.7: 128k", "claude-opus-4-7-20260416", nil, 0, small, 128_000, false},
		{"a model the catalogue lacks: the default", "claude-unreleased-9", nil, 0, small, anthropic.DefaultMaxOutputTokens, false},
		// Negative control: without the catalogue, the budget's cap goes
		// out as it is, and the API refuses the request.
		{"no catalogue: the budget's cap is refused", "claude-sonnet-4-5", empty, 0, budget(1_000_000), 1_000_000, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := wiretest.CheckingServer(t, func(b []byte) error {
				return wiretest.CheckMessages(b, 64_000+64_000*boolInt(strings.HasPrefix(tt.model, "claude-opus")))
			}, true, answer)
			c := newClient(t, srv, func(c *anthropic.Config) { c.Model, c.Catalogue, c.MaxOutputTokens = tt.model, tt.cat, tt.conf })
			_, err := wiretest.Complete(t, c, tt.req)
			if pe := provider.AsError(err); tt.fails != (pe != nil && pe.Kind == provider.KindBadRequest && pe.Status == http.StatusBadRequest) {
				t.Fatalf("err = %v, want a refusal: %v", err, tt.fails)
			}
			var body struct {
				MaxTokens int64 `json:"max_tokens"`
			}
			json.Unmarshal(srv.Requests()[0].Body, &body)
			if body.MaxTokens != tt.want {
				t.Errorf("max_tokens = %d, want %d", body.MaxTokens, tt.want)
			}
		})
	}
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

func TestLimits(t *testing.T) {
	c, _ := anthropic.New(anthropic.Config{APIKey: key, Model: "claude-haiku-4-5-20251001"})
	if l, ok := provider.LimitsOf(c); !ok || l != (provider.Limits{ContextWindow: 200_000, MaxOutputTokens: 64_000}) {
		t.Errorf("haiku 4.5: %+v, %v", l, ok)
	}
	c, _ = anthropic.New(anthropic.Config{APIKey: key, Model: "claude-unreleased-9"})
	if l, ok := provider.LimitsOf(c); ok || l != (provider.Limits{}) {
		t.Errorf("unknown model: %+v, %v; want unknown", l, ok)
	}
	// An override file's entry wins over the built-in one, price included.
	o, err := models.Parse([]byte(`{"version": 1, "models": [{"vendor": "anthropic", "id": "claude-haiku-4-5", "context_window": 50000, "max_output_tokens": 2000, "price": {"input": 10, "output": 20}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	c, _ = anthropic.New(anthropic.Config{APIKey: key, Model: "claude-haiku-4-5", Catalogue: models.Builtin().Merge(o)})
	if l, _ := c.Limits(); l.ContextWindow != 50000 {
		t.Errorf("override's window: %+v", l)
	}
	if got := c.Price(provider.Usage{InputTokens: 1e6, OutputTokens: 1e6}); got.USD != 30 {
		t.Errorf("override's price: %v, want $30", got)
	}
	// The config's price wins over the catalogue's.
	c, _ = anthropic.New(anthropic.Config{APIKey: key, Model: "claude-haiku-4-5", Price: &provider.Price{Input: 1, Output: 1}})
	if got := c.Price(provider.Usage{InputTokens: 1e6, OutputTokens: 1e6}); got.USD != 2 {
		t.Errorf("config's price: %v, want $2", got)
	}
}

// TestBaseURL checks that every spelling of a base URL reaches
// /v1/messages: ANTHROPIC_BASE_URL is often given with /v1, as OpenAI's
// is.
func TestBaseURL(t *testing.T) {
	answer := wiretest.SSE(start("m", 1, 0, 0) + end("end_turn", `{"output_tokens":1}`))
	for _, suffix := range []string{"", "/", "/v1", "/v1/", "/v1/messages", "/proxy", "/proxy/v1"} {
		srv := wiretest.NewServer(t, answer)
		c := newClient(t, srv, func(c *anthropic.Config) { c.BaseURL = srv.URL + suffix })
		if _, err := wiretest.Complete(t, c, &provider.Request{}); err != nil {
			t.Fatalf("%q: %v", suffix, err)
		}
		want := "/v1/messages"
		if strings.HasPrefix(suffix, "/proxy") {
			want = "/proxy/v1/messages"
		}
		if got := srv.Requests()[0].Path; got != want {
			t.Errorf("base URL …%s: path %s, want %s", suffix, got, want)
		}
	}
}

// TestCutToolCall streams turns the output cap cut inside a tool call:
// the half call is dropped and named, and the complete ones are kept.
func TestCutToolCall(t *testing.T) {
	cutStart := ev("content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_cut","name":"write_file","input":{}}}`)
	cutDelta := ev("content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"path\":\"big.go\",\"content\":\"package big\\n"}}`)
	tests := []struct {
		name    string
		body    string
		calls   []string
		dropped []string
		stop    provider.StopReason
	}{
		{"cut inside the arguments, no block stop", textBlock(0, "Writing.") + cutStart + cutDelta + end("max_tokens", `{"output_tokens":4096}`),
			nil, []string{"write_file"}, provider.StopMaxTokens},
		{"cut inside the arguments, block stopped", textBlock(0, "Writing.") + cutStart + cutDelta + ev("content_block_stop", `{"type":"content_block_stop","index":1}`) + end("max_tokens", `{"output_tokens":4096}`),
			nil, []string{"write_file"}, provider.StopMaxTokens},
		{"cut right after the name", cutStart + end("max_tokens", `{"output_tokens":4096}`),
			nil, []string{"write_file"}, provider.StopMaxTokens},
		{"a whole call, then a cut one", toolBlock(0, "toolu_ok", "read_file", `{"path":"a.go"}`) + cutStart + cutDelta + end("max_tokens", `{"output_tokens":4096}`),
			[]string{"read_file"}, []string{"write_file"}, provider.StopMaxTokens},
		{"a block never stopped is dropped whatever the reason", toolBlock(0, "toolu_ok", "read_file", `{}`) + cutStart + cutDelta + end("end_turn", `{"output_tokens":4096}`),
			[]string{"read_file"}, []string{"write_file"}, provider.StopToolUse},
		{"a whole call at the cap is kept", toolBlock(0, "toolu_ok", "read_file", `{"path":"a.go"}`) + end("max_tokens", `{"output_tokens":4096}`),
			[]string{"read_file"}, nil, provider.StopMaxTokens},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := wiretest.NewServer(t, wiretest.SSE(start("m", 10, 0, 0)+tt.body))
			resp, err := wiretest.Complete(t, newClient(t, srv, nil), &provider.Request{})
			if err != nil {
				t.Fatal(err)
			}
			var calls []string
			for _, c := range resp.ToolCalls {
				calls = append(calls, c.Name)
			}
			if diff := cmp.Diff(tt.calls, calls); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.dropped, resp.DroppedCalls); diff != "" {
				t.Errorf("dropped (-want +got):\n%s", diff)
			}
			if resp.StopReason != tt.stop {
				t.Errorf("stop %s, want %s", resp.StopReason, tt.stop)
			}
		})
	}
}
