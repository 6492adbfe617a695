package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/anthropic"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/openai"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/openrouter"
)

func TestTurnNote(t *testing.T) {
	call := provider.ToolCall{ID: "c1", Name: "read_file", Arguments: json.RawMessage(`{}`)}
	tests := []struct {
		name    string
		resp    provider.Response
		want    []string // in the note
		notWant []string
	}{
		{"a turn with calls needs no note", provider.Response{ToolCalls: []provider.ToolCall{call}, StopReason: provider.StopToolUse}, nil, nil},
		{"no call", provider.Response{Text: "Done, I think.", StopReason: provider.StopEnd}, []string{noCallNote}, nil},
		{"cut inside a call", provider.Response{Text: "Writing it.", StopReason: provider.StopMaxTokens, DroppedCalls: []string{"write_file"}, Usage: provider.Usage{OutputTokens: 4096}},
			[]string{"cut off at the output limit after 4096 output tokens", `The call to "write_file" was cut off`, "so it was not run", "write a large file in parts"},
			[]string{"You did not call a tool", "results are above"}},
		{"cut after a whole call", provider.Response{ToolCalls: []provider.ToolCall{call}, StopReason: provider.StopMaxTokens, DroppedCalls: []string{"edit_file"}},
			[]string{"cut off at the output limit.", `"edit_file"`, "The calls before it ran"}, []string{"You did not"}},
		{"cut before any call", provider.Response{Text: "Let me explain at length", StopReason: provider.StopMaxTokens, Usage: provider.Usage{OutputTokens: 512}},
			[]string{"cut off at the output limit after 512 output tokens", "You did not get to call a tool"}, []string{noCallNote}},
		{"cut with whole calls and nothing dropped", provider.Response{ToolCalls: []provider.ToolCall{call}, StopReason: provider.StopMaxTokens}, nil, nil},
		{"a call cut for another reason", provider.Response{StopReason: provider.StopOther, DroppedCalls: []string{""}},
			[]string{"The call to a tool was cut off", "Make it again if it is still needed"}, []string{"output limit"}},
		{"two dropped, a long name clipped", provider.Response{StopReason: provider.StopMaxTokens, DroppedCalls: []string{"a", strings.Repeat("é", 100)}},
			[]string{`The calls to "a" and "`, "were cut off before their arguments", "so they were not run", "…"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := turnNote(&tt.resp)
			if tt.want == nil && got != "" {
				t.Errorf("note %q, want none", got)
			}
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("note %q lacks %q", got, w)
				}
			}
			for _, w := range tt.notWant {
				if strings.Contains(got, w) {
					t.Errorf("note %q says %q", got, w)
				}
			}
			if len(got) > 600 {
				t.Errorf("note of %d bytes: %q", len(got), got)
			}
		})
	}
}

// TestTurnNoteFromVendors streams, from local servers in each vendor's
// format, a turn the output cap cut inside a write_file call, and checks
// the note the model would be told: the cut and the call, not "You did
// not call a tool". The control is a turn without a call, which still
// gets that note.
func TestTurnNoteFromVendors(t *testing.T) {
	anthropicCut := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"m\",\"usage\":{\"input_tokens\":10,\"output_tokens\":1}}}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"write_file\",\"input\":{}}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"path\\\":\\\"big.go\\\",\\\"content\\\":\\\"package\"}}\n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"max_tokens\"},\"usage\":{\"output_tokens\":4096}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	anthropicText := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"m\",\"usage\":{\"input_tokens\":10,\"output_tokens\":1}}}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"All done.\"}}\n\n" +
		"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":3}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	chat := func(finish string, deltas ...string) string {
		var b strings.Builder
		for i, d := range deltas {
			f := "null"
			if i == len(deltas)-1 {
				f = `"` + finish + `"`
			}
			fmt.Fprintf(&b, "data: {\"id\":\"x\",\"choices\":[{\"index\":0,\"delta\":%s,\"finish_reason\":%s}]}\n\n", d, f)
		}
		b.WriteString("data: {\"id\":\"x\",\"choices\":[],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":4096}}\n\ndata: [DONE]\n\n")
		return b.String()
	}
	chatCut := chat("length", `{"content":"Writing it."}`, `{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"write_file","arguments":"{\"path\":\"big.go\",\"content\":\"pack"}}]}`)
	chatText := chat("stop", `{"content":"All done."}`)

	serve := func(body string) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, body)
		}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	vendors := []struct {
		name      string
		cut, text string
		build     func(url string) (provider.Provider, error)
	}{
		{"anthropic", anthropicCut, anthropicText, func(url string) (provider.Provider, error) {
			return anthropic.New(anthropic.Config{APIKey: "sk-ant-0123456789", Model: "claude-sonnet-4-5", BaseURL: url})
		}},
		{"openai", chatCut, chatText, func(url string) (provider.Provider, error) {
			return openai.New(openai.Config{APIKey: "sk-0123456789", Model: "gpt-4o", BaseURL: url})
		}},
		{"openrouter", chatCut, chatText, func(url string) (provider.Provider, error) {
			return openrouter.New(openrouter.Config{APIKey: "sk-or-0123456789", Model: "qwen/qwen3-coder", BaseURL: url})
		}},
		{"ollama", chatCut, chatText, func(url string) (provider.Provider, error) {
			return openai.NewCompatible(openai.Config{Model: "qwen3-coder", Preset: openai.PresetOllama, BaseURL: url})
		}},
	}
	req := &provider.Request{Messages: []provider.Message{{Role: provider.RoleUser, Content: "Write big.go."}}}
	for _, v := range vendors {
		t.Run(v.name, func(t *testing.T) {
			p, err := v.build(serve(v.cut))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := p.Complete(context.Background(), req, nil)
			if err != nil {
				t.Fatal(err)
			}
			note := turnNote(resp)
			if len(resp.ToolCalls) != 0 || strings.Contains(note, "You did not call a tool") ||
				!strings.Contains(note, "cut off at the output limit after 4096 output tokens") || !strings.Contains(note, `"write_file"`) {
				t.Errorf("cut turn (calls %v, dropped %v, stop %s): note %q", resp.ToolCalls, resp.DroppedCalls, resp.StopReason, note)
			}
			p, err = v.build(serve(v.text))
			if err != nil {
				t.Fatal(err)
			}
			resp, err = p.Complete(context.Background(), req, nil)
			if err != nil {
				t.Fatal(err)
			}
			if note := turnNote(resp); note != noCallNote {
				t.Errorf("control, a turn without a call: note %q", note)
			}
		})
	}
}
