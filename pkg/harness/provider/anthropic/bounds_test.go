package anthropic_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/anthropic"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/internal/wiretest"
)

// TestBounds floods the client past each bound on a response, and stops
// exactly at each as the control. Text goes to block 0; tool call i is
// block i+1.
func TestBounds(t *testing.T) {
	w := wiretest.Wire{
		Head: start("claude-sonnet-4-5", 10, 0, 0) +
			ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`),
		Tail: end("tool_use", `{"output_tokens":5}`),
		Text: func(s string) string {
			b, _ := json.Marshal(s)
			return ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":`+string(b)+`}}`)
		},
		Call: func(i int, args ...string) string {
			return toolBlock(i+1, fmt.Sprintf("toolu_%d", i), "f", args...)
		},
	}
	wiretest.Bounds(t, func(t *testing.T, url string) provider.Provider {
		c, err := anthropic.New(anthropic.Config{APIKey: key, Model: "claude-sonnet-4-5", BaseURL: url, StallTimeout: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}, w)
}
