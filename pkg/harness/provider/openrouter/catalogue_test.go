package openrouter_test

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/internal/wiretest"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/openrouter"
)

// TestForeignToolIDs sends a history with Kimi's ids and an id longer
// than OpenAI's limit, and checks them as the strictest upstream would:
// Anthropic's alphabet and OpenAI's length.
func TestForeignToolIDs(t *testing.T) {
	long := "toolu_bdrk_01M8nJQQMxqpv1VaPYuJKT4jABCDEFGH"
	req := &provider.Request{Messages: []provider.Message{
		{Role: provider.RoleUser, Content: "Fix a.go."},
		{Role: provider.RoleAssistant, ToolCalls: []provider.ToolCall{
			{ID: "functions.read_file:0", Name: "read_file", Arguments: json.RawMessage(`{}`)},
			{ID: long, Name: "read_file", Arguments: json.RawMessage(`{}`)}}},
		{Role: provider.RoleTool, ToolCallID: "functions.read_file:0", Content: "x"},
		{Role: provider.RoleTool, ToolCallID: long, Content: "y"},
	}}
	check := func(b []byte) error { return wiretest.CheckChat(b, 40, true, 0) }
	srv := wiretest.CheckingServer(t, check, false, wiretest.SSE(stream(chunk(`{"content":"ok"}`, "stop", ""))))
	if _, err := wiretest.Complete(t, newClient(t, srv, nil), req); err != nil {
		t.Fatalf("the mapped history was refused: %v", err)
	}
}

// TestCutToolCall streams a turn OpenRouter ended with finish_reason
// "length" inside a tool call.
func TestCutToolCall(t *testing.T) {
	body := stream(
		chunk(`{"role":"assistant","content":"Writing."}`, "", ""),
		chunk(`{"tool_calls":[{"index":0,"id":"toolu_bdrk_1","type":"function","function":{"name":"read_file","arguments":"{}"}}]}`, "", ""),
		chunk(`{"tool_calls":[{"index":1,"id":"toolu_bdrk_2","type":"function","function":{"name":"write_file","arguments":"{\"path\":\"a.go\",\"content\":\"pack"}}]}`, "length", ""),
		chunk(`{}`, "length", usageCost),
	)
	srv := wiretest.NewServer(t, wiretest.SSE(body))
	resp, err := wiretest.Complete(t, newClient(t, srv, nil), &provider.Request{})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.ToolCalls) != 1 || resp.ToolCalls[0].Name != "read_file" || !resp.Truncated() {
		t.Errorf("calls %+v, stop %s", resp.ToolCalls, resp.StopReason)
	}
	if diff := cmp.Diff([]string{"write_file"}, resp.DroppedCalls); diff != "" {
		t.Errorf("dropped (-want +got):\n%s", diff)
	}
}

func TestLimitsAndBaseURL(t *testing.T) {
	for _, tt := range []struct {
		model string
		want  provider.Limits
		ok    bool
	}{
		{"anthropic/claude-opus-4.7", provider.Limits{ContextWindow: 1_000_000, MaxOutputTokens: 128_000}, true},
		{"qwen/qwen3-coder:free", provider.Limits{ContextWindow: 262144, MaxOutputTokens: 65536}, true},
		{"someone/new-model", provider.Limits{}, false},
	} {
		c, err := openrouter.New(openrouter.Config{APIKey: key, Model: tt.model})
		if err != nil {
			t.Fatal(err)
		}
		if l, ok := c.Limits(); ok != tt.ok || l != tt.want {
			t.Errorf("%s: %+v, %v; want %+v, %v", tt.model, l, ok, tt.want, tt.ok)
		}
	}
	for _, suffix := range []string{"", "/api", "/api/", "/api/v1", "/api/v1/chat/completions"} {
		srv := wiretest.NewServer(t, wiretest.SSE(stream(chunk(`{"content":"ok"}`, "stop", ""))))
		c := newClient(t, srv, func(c *openrouter.Config) { c.BaseURL = srv.URL + suffix })
		if _, err := wiretest.Complete(t, c, &provider.Request{}); err != nil {
			t.Fatal(err)
		}
		if got := srv.Requests()[0].Path; got != "/api/v1/chat/completions" {
			t.Errorf("base URL …%s: path %s", suffix, got)
		}
	}
}
