package chat

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/internal/toolid"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/internal/wiretest"
)

// TestForeignToolIDsUnmapped is the negative control of the vendors'
// TestForeignToolIDs: a history with an id longer than OpenAI's 40 bytes
// is refused when its ids are sent as they are (the code path before ids
// were mapped), and accepted once mapped by OpenAI's and OpenRouter's
// rule.
func TestForeignToolIDsUnmapped(t *testing.T) {
	long := "toolu_bdrk_01M8nJQQMxqpv1VaPYuJKT4jABCDEFGH"
	req := &provider.Request{Messages: []provider.Message{
		{Role: provider.RoleUser, Content: "Fix a.go."},
		{Role: provider.RoleAssistant, ToolCalls: []provider.ToolCall{{ID: long, Name: "read_file", Arguments: json.RawMessage(`{}`)}}},
		{Role: provider.RoleTool, ToolCallID: long, Content: "x"},
	}}
	srv := wiretest.CheckingServer(t, func(b []byte) error { return wiretest.CheckChat(b, 40, false, 0) }, false, wiretest.SSE("data: [DONE]\n\n"))
	post := func(rule toolid.Rule) (int, string) {
		body, err := Body(req, &Options{Model: "gpt-4o", MaxTokensField: MaxCompletionTokens, IDs: rule})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, msg := post(toolid.Rule{}); code != http.StatusBadRequest || !strings.Contains(msg, "string too long") {
		t.Errorf("unmapped ids: HTTP %d %s; want the length refusal", code, msg)
	}
	for _, r := range []toolid.Rule{toolid.OpenAI(), toolid.OpenRouter()} {
		if code, msg := post(r); code != http.StatusOK {
			t.Errorf("mapped by %+v: HTTP %d %s", r, code, msg)
		}
	}
}

// TestKimiIDsToOpenRouter: Kimi's ids fit OpenAI's length but not
// Anthropic's alphabet, which OpenRouter's routing may reach.
func TestKimiIDsToOpenRouter(t *testing.T) {
	req := &provider.Request{Messages: []provider.Message{
		{Role: provider.RoleAssistant, ToolCalls: []provider.ToolCall{{ID: "functions.read_file:0", Name: "read_file", Arguments: json.RawMessage(`{}`)}}},
		{Role: provider.RoleTool, ToolCallID: "functions.read_file:0", Content: "x"},
	}}
	for _, tt := range []struct {
		rule toolid.Rule
		ok   bool
	}{{toolid.Rule{}, false}, {toolid.OpenRouter(), true}} {
		body, err := Body(req, &Options{Model: "anthropic/claude-sonnet-4.5", IDs: tt.rule})
		if err != nil {
			t.Fatal(err)
		}
		if err := wiretest.CheckChat(body, 40, true, 0); (err == nil) != tt.ok {
			t.Errorf("rule %+v: %v; want accepted %v", tt.rule, err, tt.ok)
		}
	}
}
