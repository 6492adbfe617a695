package replay

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/initorigin/io-harness-go/pkg/harness/provider"
)

// TestBounds replays recorded responses past each bound on a response:
// each is refused as the live provider would refuse it, not retried, and
// the recording exactly at the bound plays back whole (the control).
func TestBounds(t *testing.T) {
	calls := func(n int, args string) []provider.ToolCall {
		out := make([]provider.ToolCall, n)
		for i := range out {
			out[i] = provider.ToolCall{ID: fmt.Sprintf("c%d", i), Name: "f", Arguments: json.RawMessage(args)}
		}
		return out
	}
	args := func(n int) string { return `{"x":"` + strings.Repeat("a", n-8) + `"}` }
	tests := []struct {
		name string
		resp provider.Response
		want string // a substring of the refusal, or "" for a response that plays
	}{
		{"text past MaxResponseBytes", provider.Response{Text: strings.Repeat("a", provider.MaxResponseBytes+1)}, "8 MiB (provider.MaxResponseBytes)"},
		{"text of exactly MaxResponseBytes", provider.Response{Text: strings.Repeat("a", provider.MaxResponseBytes)}, ""},
		{"1025 tool calls", provider.Response{ToolCalls: calls(provider.MaxToolCalls+1, `{}`)}, "more than 1024 tool calls (provider.MaxToolCalls)"},
		{"1024 tool calls", provider.Response{ToolCalls: calls(provider.MaxToolCalls, `{}`)}, ""},
		{"arguments past MaxToolArgumentBytes", provider.Response{ToolCalls: calls(1, args(provider.MaxToolArgumentBytes+1))}, "1 MiB (provider.MaxToolArgumentBytes)"},
		{"arguments of exactly MaxToolArgumentBytes", provider.Response{ToolCalls: calls(1, args(provider.MaxToolArgumentBytes))}, ""},
		{"calls whose arguments add up past MaxResponseBytes", provider.Response{ToolCalls: calls(9, args(provider.MaxToolArgumentBytes))}, "8 MiB (provider.MaxResponseBytes)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := tt.resp
			rp, err := New(&Cassette{Version: Version, Provider: "p", Entries: []Entry{{Request: *req("a"), Response: &resp}}})
			if err != nil {
				t.Fatal(err)
			}
			got, err := rp.Complete(context.Background(), req("a"), nil)
			if tt.want == "" {
				if err != nil || len(got.Text) != len(resp.Text) || len(got.ToolCalls) != len(resp.ToolCalls) {
					t.Fatalf("err = %v; want the recording played whole", err)
				}
				return
			}
			pe := provider.AsError(err)
			if pe == nil || pe.Kind != provider.KindResponseTooLarge || pe.Transient() || pe.Provider != rp.Name() || !strings.Contains(pe.Message, tt.want) {
				t.Fatalf("err = %v, want a terminal %s from %s naming %q", err, provider.KindResponseTooLarge, rp.Name(), tt.want)
			}
		})
	}
}
