package openrouter_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/internal/wiretest"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/openrouter"
)

// TestBounds floods the client past each bound on a response, and stops
// exactly at each as the control.
func TestBounds(t *testing.T) {
	event := func(c string) string { return "data: " + c + "\n\n" }
	w := wiretest.Wire{
		Head: ": OPENROUTER PROCESSING\n\n" + event(chunk(`{"role":"assistant","content":""}`, "", "")),
		Tail: event(chunk(`{}`, "tool_calls", usageCost)) + "data: [DONE]\n\n",
		Text: func(s string) string {
			b, _ := json.Marshal(s)
			return event(chunk(`{"content":`+string(b)+`}`, "", ""))
		},
		Call: func(i int, args ...string) string {
			s := event(chunk(fmt.Sprintf(`{"tool_calls":[{"index":%d,"id":"call_%d","type":"function","function":{"name":"f","arguments":""}}]}`, i, i), "", ""))
			for _, a := range args {
				b, _ := json.Marshal(a)
				s += event(chunk(fmt.Sprintf(`{"tool_calls":[{"index":%d,"function":{"arguments":%s}}]}`, i, b), "", ""))
			}
			return s
		},
	}
	wiretest.Bounds(t, func(t *testing.T, url string) provider.Provider {
		c, err := openrouter.New(openrouter.Config{APIKey: key, Model: "anthropic/claude-opus-4.7", BaseURL: url + "/api/v1", StallTimeout: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}, w)
}
