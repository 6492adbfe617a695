package scripted

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/initorigin/io-harness-go/pkg/harness/provider"
)

// TestBounds refuses, when the script is made, a turn that no live
// provider would accept, naming the turn and the bound; a turn exactly at
// each bound is accepted (the control).
func TestBounds(t *testing.T) {
	calls := func(n int, args string) []Call {
		out := make([]Call, n)
		for i := range out {
			out[i] = Call{Name: "f", Arguments: json.RawMessage(args)}
		}
		return out
	}
	args := func(n int) string { return `{"x":"` + strings.Repeat("a", n-8) + `"}` }
	tests := []struct {
		name string
		turn Turn
		want string // a substring of the error, or "" for a turn that is accepted
	}{
		{"text past MaxResponseBytes", Turn{Text: strings.Repeat("a", provider.MaxResponseBytes+1)}, "turns[1]: response refused: text and tool calls over 8 MiB (provider.MaxResponseBytes)"},
		{"text of exactly MaxResponseBytes", Turn{Text: strings.Repeat("a", provider.MaxResponseBytes)}, ""},
		{"1025 tool calls", Turn{ToolCalls: calls(provider.MaxToolCalls+1, `{}`)}, "turns[1]: response refused: more than 1024 tool calls (provider.MaxToolCalls)"},
		{"1024 tool calls", Turn{ToolCalls: calls(provider.MaxToolCalls, `{}`)}, ""},
		{"arguments past MaxToolArgumentBytes", Turn{ToolCalls: calls(1, args(provider.MaxToolArgumentBytes+1))}, "1 MiB (provider.MaxToolArgumentBytes)"},
		{"arguments of exactly MaxToolArgumentBytes", Turn{ToolCalls: calls(1, args(provider.MaxToolArgumentBytes))}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(Script{Turns: []Turn{{Text: "first"}, tt.turn}})
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("New: %v; want the turn accepted", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("New: %v; want an error with %q", err, tt.want)
			}
		})
	}
}
