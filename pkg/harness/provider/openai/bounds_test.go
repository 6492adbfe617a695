package openai_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/internal/wiretest"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/openai"
)

// chatWire builds Chat Completions streams for the bound tests.
func chatWire() wiretest.Wire {
	event := func(c string) string { return "data: " + c + "\n\n" }
	return wiretest.Wire{
		Head: event(delta(`{"role":"assistant","content":""}`, "")),
		Tail: event(delta(`{}`, "tool_calls")) + "data: [DONE]\n\n",
		Text: func(s string) string {
			b, _ := json.Marshal(s)
			return event(delta(`{"content":`+string(b)+`}`, ""))
		},
		Call: func(i int, args ...string) string {
			s := event(delta(fmt.Sprintf(`{"tool_calls":[{"index":%d,"id":"call_%d","type":"function","function":{"name":"f","arguments":""}}]}`, i, i), ""))
			for _, a := range args {
				b, _ := json.Marshal(a)
				s += event(delta(fmt.Sprintf(`{"tool_calls":[{"index":%d,"function":{"arguments":%s}}]}`, i, b), ""))
			}
			return s
		},
	}
}

// TestBounds floods New's and NewCompatible's clients past each bound on
// a response, and stops exactly at each as the control.
func TestBounds(t *testing.T) {
	t.Run("openai", func(t *testing.T) {
		wiretest.Bounds(t, func(t *testing.T, url string) provider.Provider {
			c, err := openai.New(openai.Config{APIKey: key, Model: "gpt-4o", BaseURL: url + "/v1", StallTimeout: 30 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			return c
		}, chatWire())
	})
	t.Run("openai_compatible", func(t *testing.T) {
		wiretest.Bounds(t, func(t *testing.T, url string) provider.Provider {
			c, err := openai.NewCompatible(openai.Config{Model: "local", BaseURL: url + "/v1", StallTimeout: 30 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			return c
		}, chatWire())
	})
}
