package openai_test

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/openai"
)

// FuzzChatStream feeds arbitrary bytes to the Chat Completions decoder:
// it must not panic, must fail only with a *provider.Error, must give the
// same result however the bytes are split, and a turn it returns must be
// well formed.
func FuzzChatStream(f *testing.F) {
	// Seeds stay small: the fuzzer minimises every new input, and that
	// takes long on a large one.
	f.Add([]byte(stream(delta(`{"content":"22°C"}`, ""), delta(`{"tool_calls":[{"index":0,"id":"a","function":{"name":"f","arguments":"{}"}}]}`, "tool_calls"), usageChunk(3, 4, 1))))
	f.Add([]byte("error: {\"code\":400,\"message\":\"context size\"}\n\ndata: [DONE]\n\n"))
	f.Add([]byte("data: {\"error\":{\"type\":\"server_error\"}}\n\n"))
	f.Add([]byte(": OPENROUTER PROCESSING\r\n\r\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"content\":null,\"tool_calls\":[{\"index\":0,\"id\":\"c\",\"function\":{\"name\":\"f\",\"arguments\":\"\"}}]},\"finish_reason\":null}],\"usage\":null}\r\n\r\ndata: {\"choices\":[],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":2,\"cost\":0.1}}\r\n\r\ndata: [DONE]\r\n\r\n"))
	f.Add([]byte("data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"function\":{\"arguments\":\"\"}}]},\"finish_reason\":\"length\"}]}\n\ndata: [DONE]"))
	c, err := openai.New(openai.Config{APIKey: key, Model: "gpt-4o"})
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
			if provider.AsError(err) == nil {
				t.Fatalf("error is not a *provider.Error: %v", err)
			}
			if pe, pe2 := provider.AsError(err), provider.AsError(err2); pe2 == nil || pe.Kind != pe2.Kind {
				t.Fatalf("whole and one-byte reads fail differently: %v, %v", err, err2)
			}
			return
		}
		if deltas.String() != resp.Text {
			t.Fatalf("deltas %q, text %q", deltas.String(), resp.Text)
		}
		ids := map[string]bool{}
		for _, call := range resp.ToolCalls {
			if call.ID == "" || ids[call.ID] || len(call.Arguments) == 0 {
				t.Fatalf("bad call %+v", call)
			}
			ids[call.ID] = true
		}
		if len(resp.ToolCalls) > 0 && resp.StopReason == provider.StopEnd {
			t.Fatalf("tool calls with stop reason %s", resp.StopReason)
		}
	})
}
