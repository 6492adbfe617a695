package openai_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/internal/wiretest"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/models"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/openai"
)

// foreignHistory is a run that began on other vendors and falls back to
// OpenAI: Kimi's ids, an Anthropic id through Bedrock longer than 40
// bytes, a Responses-style id, and a genuine id that a naive mapping of
// the Kimi id would collide with.
func foreignHistory() *provider.Request {
	call := func(id string) provider.ToolCall {
		return provider.ToolCall{ID: id, Name: "read_file", Arguments: json.RawMessage(`{"path":"a.go"}`)}
	}
	result := func(id string) provider.Message {
		return provider.Message{Role: provider.RoleTool, ToolCallID: id, Content: "package a"}
	}
	long := "toolu_bdrk_01M8nJQQMxqpv1VaPYuJKT4jABCDEFGH"
	resp := "fc_689e2d4880a0819d98acca37694989b00b15d90494fc6b87"
	return &provider.Request{Messages: []provider.Message{
		{Role: provider.RoleUser, Content: "Fix a.go."},
		{Role: provider.RoleAssistant, ToolCalls: []provider.ToolCall{call("functions.read_file:0"), call(long)}},
		result("functions.read_file:0"), result(long),
		{Role: provider.RoleAssistant, ToolCalls: []provider.ToolCall{call("functions_read_file_0"), call(resp)}},
		result("functions_read_file_0"), result(resp),
	}}
}

// TestForeignToolIDs sends a history made by other vendors to a local
// server that checks ids as OpenAI does. The negative control is
// internal/chat's TestForeignToolIDsUnmapped.
func TestForeignToolIDs(t *testing.T) {
	srv := wiretest.CheckingServer(t, func(b []byte) error { return wiretest.CheckChat(b, 40, false, 0) }, false,
		wiretest.SSE(stream(delta(`{"content":"Done."}`, "stop"))))
	c := newClient(t, srv, nil)
	for range 2 {
		if _, err := wiretest.Complete(t, c, foreignHistory()); err != nil {
			t.Fatalf("the API refused the mapped history: %v", err)
		}
	}
	reqs := srv.Requests()
	if !bytes.Equal(reqs[0].Body, reqs[1].Body) {
		t.Errorf("the same history gave two different bodies")
	}
	if n := strings.Count(string(reqs[0].Body), `"functions_read_file_0"`); n != 2 {
		t.Errorf("an id OpenAI accepts appears %d times, want 2 (call and result)", n)
	}
	// A compatible server gets the ids as they are: its chat template
	// knows its own model's.
	srv = wiretest.NewServer(t, wiretest.SSE(stream(delta(`{"content":"Done."}`, "stop"))))
	local, err := openai.NewCompatible(openai.Config{Model: "kimi-k2", BaseURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wiretest.Complete(t, local, foreignHistory()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(srv.Requests()[0].Body), `"functions.read_file:0"`) {
		t.Errorf("a compatible server's ids were mapped: %s", srv.Requests()[0].Body)
	}
}

// TestOutputCap checks the cap a request carries against a server that
// refuses one above the model's, as OpenAI does.
func TestOutputCap(t *testing.T) {
	small := func(n int64) *provider.Request {
		return &provider.Request{Messages: []provider.Message{{Role: provider.RoleUser, Content: "hi"}}, MaxOutputTokens: n}
	}
	empty := &models.Catalogue{Version: models.Version}
	tests := []struct {
		name  string
		model string
		cat   *models.Catalogue
		conf  int64
		req   *provider.Request
		want  any // the max_completion_tokens sent; nil for none
		fails bool
	}{
		{"nothing asked: none sent, the server's default", "gpt-4o", nil, 0, small(0), nil, false},
		{"a budget's cap below the model's", "gpt-4o", nil, 0, small(3000), float64(3000), false},
		{"a budget's cap above it is cut to it", "gpt-4o-2024-08-06", nil, 0, small(1_000_000), float64(16384), false},
		{"the config's cap above it is cut to it", "gpt-4o", nil, 50_000, small(0), float64(16384), false},
		{"a model the catalogue lacks: as asked", "gpt-unreleased", nil, 0, small(1_000_000), float64(1_000_000), false},
		// Negative control: without the catalogue the cap goes out as
		// it is, and the server refuses the request.
		{"no catalogue: the budget's cap is refused", "gpt-4o", empty, 0, small(1_000_000), float64(1_000_000), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			limit := int64(16384)
			if tt.model == "gpt-unreleased" {
				limit = 0
			}
			srv := wiretest.CheckingServer(t, func(b []byte) error { return wiretest.CheckChat(b, 0, false, limit) }, false,
				wiretest.SSE(stream(delta(`{"content":"ok"}`, "stop"))))
			c := newClient(t, srv, func(c *openai.Config) { c.Model, c.Catalogue, c.MaxOutputTokens = tt.model, tt.cat, tt.conf })
			_, err := wiretest.Complete(t, c, tt.req)
			if pe := provider.AsError(err); tt.fails != (pe != nil && pe.Status == http.StatusBadRequest) {
				t.Fatalf("err = %v, want a refusal: %v", err, tt.fails)
			}
			body := wiretest.JSONOf(t, srv.Requests()[0].Body).(map[string]any)
			if body["max_completion_tokens"] != tt.want {
				t.Errorf("max_completion_tokens = %v, want %v", body["max_completion_tokens"], tt.want)
			}
		})
	}
}

func TestLimits(t *testing.T) {
	tests := []struct {
		c    func() (*openai.Client, error)
		want provider.Limits
		ok   bool
	}{
		{func() (*openai.Client, error) {
			return openai.New(openai.Config{APIKey: key, Model: "gpt-4.1-2025-04-14"})
		}, provider.Limits{ContextWindow: 1047576, MaxOutputTokens: 32768}, true},
		{func() (*openai.Client, error) { return openai.New(openai.Config{APIKey: key, Model: "gpt-5"}) }, provider.Limits{ContextWindow: 400_000, MaxOutputTokens: 128_000}, true},
		{func() (*openai.Client, error) { return openai.New(openai.Config{APIKey: key, Model: "o9-unlisted"}) }, provider.Limits{}, false},
		{func() (*openai.Client, error) {
			return openai.NewCompatible(openai.Config{Model: "qwen3-coder:30b", Preset: openai.PresetOllama})
		}, provider.Limits{ContextWindow: 262144, MaxOutputTokens: 65536}, true},
	}
	for i, tt := range tests {
		c, err := tt.c()
		if err != nil {
			t.Fatal(err)
		}
		if l, ok := provider.LimitsOf(c); ok != tt.ok || l != tt.want {
			t.Errorf("%d: %s: %+v, %v; want %+v, %v", i, c.Name(), l, ok, tt.want, tt.ok)
		}
	}
}

// TestBaseURL checks that every spelling of a base URL reaches
// /v1/chat/completions, and a compatible server's own root is kept.
func TestBaseURL(t *testing.T) {
	for _, tt := range []struct{ suffix, path string }{
		{"", "/v1/chat/completions"}, {"/", "/v1/chat/completions"}, {"/v1", "/v1/chat/completions"},
		{"/v1/", "/v1/chat/completions"}, {"/v1/chat/completions", "/v1/chat/completions"},
		{"/v1beta/openai/", "/v1beta/openai/chat/completions"},
	} {
		for _, compatible := range []bool{false, true} {
			srv := wiretest.NewServer(t, wiretest.SSE(stream(delta(`{"content":"ok"}`, "stop"))))
			var c *openai.Client
			var err error
			if compatible {
				c, err = openai.NewCompatible(openai.Config{Model: "m", BaseURL: srv.URL + tt.suffix})
			} else {
				c, err = openai.New(openai.Config{APIKey: key, Model: "m", BaseURL: srv.URL + tt.suffix})
			}
			if err != nil {
				t.Fatal(err)
			}
			if _, err := wiretest.Complete(t, c, &provider.Request{}); err != nil {
				t.Fatal(err)
			}
			if got := srv.Requests()[0].Path; got != tt.path {
				t.Errorf("base URL …%s (compatible %v): path %s, want %s", tt.suffix, compatible, got, tt.path)
			}
		}
	}
}

// TestCutToolCall streams turns the output cap cut inside a tool call.
func TestCutToolCall(t *testing.T) {
	tests := []struct {
		name    string
		chunks  []string
		calls   []string
		dropped []string
	}{
		{"cut inside the arguments", []string{
			delta(`{"content":"Writing it."}`, ""),
			delta(`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"write_file","arguments":"{\"path\":\"big.go\",\"content\":\"package"}}]}`, "length"),
		}, nil, []string{"write_file"}},
		{"cut right after the name", []string{
			delta(`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"write_file","arguments":""}}]}`, "length"),
		}, nil, []string{"write_file"}},
		{"a whole call, then a cut one", []string{
			delta(`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"a.go\"}"}}]}`, ""),
			delta(`{"tool_calls":[{"index":1,"id":"call_2","type":"function","function":{"name":"write_file","arguments":"{\"pa"}}]}`, "length"),
		}, []string{"read_file"}, []string{"write_file"}},
		{"a whole call at the cap is kept", []string{
			delta(`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"a.go\"}"}}]}`, "length"),
		}, []string{"read_file"}, nil},
		{"text cut, no call", []string{delta(`{"content":"I will now wri"}`, "length")}, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := wiretest.NewServer(t, wiretest.SSE(stream(tt.chunks...)))
			resp, err := wiretest.Complete(t, newClient(t, srv, nil), &provider.Request{})
			if err != nil {
				t.Fatal(err)
			}
			var calls []string
			for _, c := range resp.ToolCalls {
				calls = append(calls, c.Name)
			}
			if diff := cmp.Diff(tt.calls, calls); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.dropped, resp.DroppedCalls); diff != "" {
				t.Errorf("dropped (-want +got):\n%s", diff)
			}
			if !resp.Truncated() {
				t.Errorf("stop %s, want max_tokens", resp.StopReason)
			}
		})
	}
}

// TestCompatibleEnvironment checks that a compatible server's settings
// come from their own variables, and that OpenAI's key never goes to it.
func TestCompatibleEnvironment(t *testing.T) {
	srv := wiretest.NewServer(t, wiretest.SSE(stream(delta(`{"content":"ok"}`, "stop"))))
	env := map[string]string{
		"OPENAI_API_KEY": key, "OPENAI_MODEL": "gpt-4o", "OPENAI_BASE_URL": "https://api.openai.com/v1",
		"OPENAI_COMPATIBLE_API_KEY": "local-key-abcdefgh", "OPENAI_COMPATIBLE_MODEL": "qwen3-coder", "OPENAI_COMPATIBLE_BASE_URL": srv.URL,
	}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	cfg := openai.CompatibleConfigFromEnv(lookup)
	if diff := cmp.Diff(openai.Config{APIKey: "local-key-abcdefgh", Model: "qwen3-coder", BaseURL: srv.URL}, cfg); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	c, err := openai.NewCompatible(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wiretest.Complete(t, c, &provider.Request{}); err != nil {
		t.Fatal(err)
	}
	if got := srv.Requests()[0].Header.Get("Authorization"); got != "Bearer local-key-abcdefgh" {
		t.Errorf("Authorization = %q", got)
	}
	delete(env, "OPENAI_COMPATIBLE_API_KEY")
	if cfg := openai.CompatibleConfigFromEnv(lookup); cfg.APIKey != "" {
		t.Errorf("OPENAI_API_KEY was read for a compatible server: %q", cfg.APIKey)
	}
}
