package anthropic

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

// TestForeignToolIDsUnmapped is the negative control of
// TestForeignToolIDs: the same history, its ids sent as they are (the
// code path before ids were mapped) or mapped naively, is refused by a
// server that checks ids as the API does; mapped by the rule, it is
// accepted.
func TestForeignToolIDsUnmapped(t *testing.T) {
	call := func(id string) provider.ToolCall {
		return provider.ToolCall{ID: id, Name: "read_file", Arguments: json.RawMessage(`{}`)}
	}
	req := &provider.Request{Messages: []provider.Message{
		{Role: provider.RoleUser, Content: "Fix a.go."},
		{Role: provider.RoleAssistant, ToolCalls: []provider.ToolCall{call("functions.read_file:0")}},
		{Role: provider.RoleTool, ToolCallID: "functions.read_file:0", Content: "x"},
		{Role: provider.RoleAssistant, ToolCalls: []provider.ToolCall{call("functions_read_file_0")}},
		{Role: provider.RoleTool, ToolCallID: "functions_read_file_0", Content: "y"},
	}}
	srv := wiretest.CheckingServer(t, func(b []byte) error { return wiretest.CheckMessages(b, 0) }, true,
		wiretest.SSE("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"))
	post := func(body []byte) (int, string) {
		resp, err := http.Post(srv.URL+"/v1/messages", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	naive := toolid.Rule{} // the ids as they are
	body, err := requestBody("m", 100, req, naive)
	if err != nil {
		t.Fatal(err)
	}
	if code, msg := post(body); code != http.StatusBadRequest || !strings.Contains(msg, "should match pattern") {
		t.Errorf("unmapped ids: HTTP %d %s; want the pattern refusal", code, msg)
	}
	// A mapping that only replaces the characters Anthropic refuses makes
	// two calls one id.
	sanitised := bytes.ReplaceAll(bytes.ReplaceAll(body, []byte("functions.read_file:0"), []byte("functions_read_file_0")), []byte(":0"), []byte("_0"))
	if code, msg := post(sanitised); code != http.StatusBadRequest || !strings.Contains(msg, "must be unique") {
		t.Errorf("naively sanitised ids: HTTP %d %s; want the uniqueness refusal", code, msg)
	}
	body, err = requestBody("m", 100, req, toolid.Anthropic())
	if err != nil {
		t.Fatal(err)
	}
	if code, msg := post(body); code != http.StatusOK {
		t.Errorf("mapped ids: HTTP %d %s", code, msg)
	}
}
