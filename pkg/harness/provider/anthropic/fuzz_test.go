package anthropic_test

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/anthropic"
)

// FuzzMessagesStream feeds arbitrary bytes to the Messages decoder: it must
// not panic, must fail only with a *provider.Error, must give the same
// result however the bytes are split, and a turn it returns must be well
// formed.
func FuzzMessagesStream(f *testing.F) {
	// Seeds stay small: the fuzzer minimises every new input, and that
	// takes long on a large one.
	f.Add([]byte(start("m", 9, 5, 7) + textBlock(0, "22°C") + toolBlock(1, "t", "f", "", `{"a":`, `1}`) + end("tool_use", `{"output_tokens":3}`)))
	f.Add([]byte(start("m", 1, 0, 0) + ev("error", `{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}`)))
	f.Add([]byte("event: ping\r\ndata: {\"type\": \"ping\"}\r\n\r\nevent: message_stop\r\ndata: {\"type\":\"message_stop\"   }\r\n\r\n"))
	f.Add([]byte(toolBlock(0, "t", "f", `{"p":"x`) + end("max_tokens", `{"output_tokens":3}`)))
	c, err := anthropic.New(anthropic.Config{APIKey: key, Model: "claude-sonnet-4-5"})
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
		for _, call := range resp.ToolCalls {
			if len(call.Arguments) == 0 {
				t.Fatalf("call without arguments: %+v", call)
			}
		}
		if u := resp.Usage; u.InputTokens < u.CacheReadTokens+u.CacheWriteTokens && u.CacheReadTokens >= 0 && u.CacheWriteTokens >= 0 && u.InputTokens >= 0 {
			t.Fatalf("usage not normalised: %+v", u)
		}
	})
}
