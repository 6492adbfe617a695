package wire_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/internal/wire"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/internal/wiretest"
)

// TestKind is the error table, row by row.
func TestKind(t *testing.T) {
	tests := []struct {
		name        string
		status      int
		shouldRetry string
		e           wire.APIError
		want        provider.Kind
	}{
		// HTTP statuses.
		{"301", 301, "", wire.APIError{}, provider.KindBadRequest},
		{"302", 302, "", wire.APIError{}, provider.KindBadRequest},
		{"307", 307, "", wire.APIError{}, provider.KindBadRequest},
		{"400", 400, "", wire.APIError{Type: "invalid_request_error", Message: "bad"}, provider.KindBadRequest},
		{"401", 401, "", wire.APIError{Type: "authentication_error"}, provider.KindAuth},
		{"402", 402, "", wire.APIError{Type: "billing_error"}, provider.KindQuota},
		{"403", 403, "", wire.APIError{Type: "permission_error"}, provider.KindAuth},
		{"404", 404, "", wire.APIError{Type: "not_found_error"}, provider.KindBadRequest},
		{"408", 408, "", wire.APIError{}, provider.KindTimeout},
		{"409", 409, "", wire.APIError{}, provider.KindConflict},
		{"413", 413, "", wire.APIError{Type: "request_too_large"}, provider.KindBadRequest},
		{"422", 422, "", wire.APIError{}, provider.KindBadRequest},
		{"429", 429, "", wire.APIError{Type: "rate_limit_error", Code: "rate_limit_exceeded"}, provider.KindRateLimited},
		{"429 insufficient_quota", 429, "", wire.APIError{Type: "insufficient_quota", Code: "insufficient_quota"}, provider.KindQuota},
		{"429 insufficient_quota code only", 429, "", wire.APIError{Type: "requests", Code: "insufficient_quota"}, provider.KindQuota},
		{"500", 500, "", wire.APIError{Type: "api_error"}, provider.KindServer},
		{"502", 502, "", wire.APIError{}, provider.KindServer},
		{"503", 503, "", wire.APIError{}, provider.KindServer},
		{"504", 504, "", wire.APIError{Type: "timeout_error"}, provider.KindServer},
		{"529", 529, "", wire.APIError{Type: "overloaded_error"}, provider.KindServer},
		// Context overflow, by code and by message.
		{"400 context_length_exceeded", 400, "", wire.APIError{Type: "invalid_request_error", Code: "context_length_exceeded", Message: "Input tokens exceed the configured limit"}, provider.KindContextOverflow},
		{"400 anthropic prompt too long", 400, "", wire.APIError{Type: "invalid_request_error", Message: "prompt is too long: 210000 tokens > 200000 maximum"}, provider.KindContextOverflow},
		{"400 vllm maximum context", 400, "", wire.APIError{Message: "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens"}, provider.KindContextOverflow},
		{"400 llama.cpp context size", 400, "", wire.APIError{Type: "exceed_context_size_error", Message: "the request exceeds the available context size"}, provider.KindContextOverflow},
		// x-should-retry overrules.
		{"400 should retry", 400, "true", wire.APIError{}, provider.KindServer},
		{"401 should retry", 401, "true", wire.APIError{}, provider.KindServer},
		{"500 should not retry", 500, "false", wire.APIError{}, provider.KindBadRequest},
		{"429 should not retry", 429, "false", wire.APIError{}, provider.KindQuota},
		{"503 should retry", 503, "true", wire.APIError{}, provider.KindServer},
		{"400 should not retry", 400, "false", wire.APIError{}, provider.KindBadRequest},
		{"should retry odd case", 409, " TRUE ", wire.APIError{}, provider.KindConflict},
		{"should retry junk ignored", 409, "maybe", wire.APIError{}, provider.KindConflict},
		// In-stream errors: Anthropic error events.
		{"stream overloaded_error", 0, "", wire.APIError{Type: "overloaded_error", Message: "Overloaded"}, provider.KindServer},
		{"stream api_error", 0, "", wire.APIError{Type: "api_error"}, provider.KindServer},
		{"stream rate_limit_error", 0, "", wire.APIError{Type: "rate_limit_error"}, provider.KindRateLimited},
		{"stream timeout_error", 0, "", wire.APIError{Type: "timeout_error"}, provider.KindTimeout},
		{"stream authentication_error", 0, "", wire.APIError{Type: "authentication_error"}, provider.KindAuth},
		{"stream permission_error", 0, "", wire.APIError{Type: "permission_error"}, provider.KindAuth},
		{"stream billing_error", 0, "", wire.APIError{Type: "billing_error"}, provider.KindQuota},
		{"stream invalid_request_error", 0, "", wire.APIError{Type: "invalid_request_error"}, provider.KindBadRequest},
		{"stream not_found_error", 0, "", wire.APIError{Type: "not_found_error"}, provider.KindBadRequest},
		{"stream request_too_large", 0, "", wire.APIError{Type: "request_too_large"}, provider.KindBadRequest},
		// In-stream errors: OpenAI chunks.
		{"stream server_error", 0, "", wire.APIError{Type: "server_error", Message: "The server had an error"}, provider.KindServer},
		{"stream insufficient_quota", 0, "", wire.APIError{Type: "insufficient_quota", Code: "insufficient_quota"}, provider.KindQuota},
		{"stream rate_limit_exceeded code", 0, "", wire.APIError{Code: "rate_limit_exceeded"}, provider.KindRateLimited},
		{"stream context_length_exceeded", 0, "", wire.APIError{Type: "invalid_request_error", Code: "context_length_exceeded"}, provider.KindContextOverflow},
		// In-stream errors: OpenRouter chunks, numeric and string codes.
		{"openrouter 429", 0, "", wire.APIError{Code: "429", Type: "rate_limit_exceeded", Message: "Rate limit exceeded"}, provider.KindRateLimited},
		{"openrouter 400", 0, "", wire.APIError{Code: "400", Message: "Token limit reached"}, provider.KindBadRequest},
		{"openrouter 502", 0, "", wire.APIError{Code: "502", Type: "provider_unavailable"}, provider.KindServer},
		{"openrouter provider_overloaded", 0, "", wire.APIError{Type: "provider_overloaded"}, provider.KindServer},
		{"openrouter server_error code", 0, "", wire.APIError{Code: "server_error"}, provider.KindServer},
		// In-stream errors: llama.cpp's error field.
		{"llama.cpp context", 0, "", wire.APIError{Code: "400", Type: "invalid_request_error", Message: "the request exceeds the available context size. try increasing the context size or enable context shift"}, provider.KindContextOverflow},
		{"llama.cpp 500", 0, "", wire.APIError{Code: "500", Message: "boom"}, provider.KindServer},
		// Unknown.
		{"stream unknown type", 0, "", wire.APIError{Type: "mystery"}, provider.KindServer},
		{"stream nothing", 0, "", wire.APIError{}, provider.KindServer},
	}
	seen := map[string]bool{}
	for _, tt := range tests {
		if seen[tt.name] {
			t.Fatalf("duplicate row %q", tt.name)
		}
		seen[tt.name] = true
		t.Run(tt.name, func(t *testing.T) {
			if got := wire.Kind(tt.status, tt.shouldRetry, tt.e); got != tt.want {
				t.Errorf("Kind(%d, %q, %+v) = %s, want %s", tt.status, tt.shouldRetry, tt.e, got, tt.want)
			}
		})
	}
}

func TestParseError(t *testing.T) {
	tests := []struct {
		name   string
		body   string
		want   wire.APIError
		wantOK bool
	}{
		{"openai", `{"error":{"message":"Rate limit exceeded.","type":"rate_limit_error","param":null,"code":"rate_limit_exceeded"}}`,
			wire.APIError{Type: "rate_limit_error", Code: "rate_limit_exceeded", Message: "Rate limit exceeded."}, true},
		{"anthropic", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_1"}`,
			wire.APIError{Type: "overloaded_error", Message: "Overloaded"}, true},
		{"openrouter numeric code", `{"error":{"code":429,"message":"Rate limit exceeded","metadata":{"error_type":"rate_limit_exceeded"}}}`,
			wire.APIError{Type: "rate_limit_exceeded", Code: "429", Message: "Rate limit exceeded"}, true},
		{"openrouter chunk", `{"id":"gen-1","provider":"OpenAI","error":{"code":"server_error","message":"x"},"choices":[{"index":0,"delta":{"content":""},"finish_reason":"error"}]}`,
			wire.APIError{Code: "server_error", Message: "x"}, true},
		{"vllm top level", `{"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens.","type":"BadRequestError","param":null,"code":400}`,
			wire.APIError{Type: "BadRequestError", Code: "400", Message: "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens."}, true},
		{"a chunk is not an error", `{"object":"chat.completion.chunk","message":"x","choices":[]}`, wire.APIError{}, false},
		{"string error", `{"error":"model not found"}`, wire.APIError{Message: "model not found"}, true},
		{"null error", `{"error":null,"choices":[]}`, wire.APIError{}, false},
		{"no error", `{"id":"x"}`, wire.APIError{}, false},
		{"not json", `<html>502</html>`, wire.APIError{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := wire.ParseError([]byte(tt.body))
			if ok != tt.wantOK {
				t.Fatalf("ok = %v, want %v", ok, tt.wantOK)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	got, ok := wire.ParseErrorObject([]byte(`{"code":400,"message":"too long","type":"invalid_request_error"}`))
	if want := (wire.APIError{Type: "invalid_request_error", Code: "400", Message: "too long"}); !ok || got != want {
		t.Errorf("ParseErrorObject = %+v, %v; want %+v", got, ok, want)
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2025, 10, 30, 16, 17, 36, 0, time.UTC)
	tests := []struct {
		name   string
		header map[string]string
		want   time.Duration
	}{
		{"none", nil, 0},
		{"seconds", map[string]string{"Retry-After": "20"}, 20 * time.Second},
		{"fractional seconds", map[string]string{"Retry-After": "1.5"}, 1500 * time.Millisecond},
		{"http date", map[string]string{"Retry-After": now.Add(30 * time.Second).Format(http.TimeFormat)}, 30 * time.Second},
		{"http date past", map[string]string{"Retry-After": now.Add(-time.Minute).Format(http.TimeFormat)}, 0},
		{"ms", map[string]string{"Retry-After-Ms": "250"}, 250 * time.Millisecond},
		{"ms preferred", map[string]string{"Retry-After-Ms": "1500.5", "Retry-After": "20"}, 1500*time.Millisecond + 500*time.Microsecond},
		{"bad ms falls back", map[string]string{"Retry-After-Ms": "soon", "Retry-After": "3"}, 3 * time.Second},
		{"negative", map[string]string{"Retry-After": "-5"}, 0},
		{"at the bound", map[string]string{"Retry-After": "600"}, wire.MaxRetryAfter},
		{"years, cut to the bound", map[string]string{"Retry-After": "999999999"}, wire.MaxRetryAfter},
		{"ms past the bound", map[string]string{"Retry-After-Ms": "86400000"}, wire.MaxRetryAfter},
		{"a date next year, cut to the bound", map[string]string{"Retry-After": now.AddDate(1, 0, 0).Format(http.TimeFormat)}, wire.MaxRetryAfter},
		{"junk", map[string]string{"Retry-After": "tomorrow"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range tt.header {
				h.Set(k, v)
			}
			if got := wire.RetryAfter(h, now); got != tt.want {
				t.Errorf("RetryAfter = %v, want %v", got, tt.want)
			}
		})
	}
}

const secret = "sk-test-0123456789abcdef"

// open opens a stream from srv with the given stall timeout: the feature
// under test where a test is about stalls, else a minute, which no loaded
// machine's loopback needs.
func open(t *testing.T, srv *wiretest.Server, stall time.Duration) (*wire.Stream, error) {
	t.Helper()
	return wire.Open(context.Background(), &wire.Request{
		Provider:     "test:model",
		URL:          srv.URL + "/v1/chat/completions",
		Header:       http.Header{"Authorization": {"Bearer " + secret}},
		Body:         []byte(`{}`),
		Secret:       secret,
		Client:       wire.NoRedirects(nil),
		StallTimeout: stall,
	})
}

// TestOpenStatus runs status rows of the table over HTTP, with their
// retry-after headers.
func TestOpenStatus(t *testing.T) {
	tests := []struct {
		name  string
		reply wiretest.Reply
		want  provider.Error
	}{
		{"429 openai", withHeader(wiretest.JSON(429, `{"error":{"message":"Rate limit exceeded. Please try again in 20 seconds.","type":"rate_limit_error","param":null,"code":"rate_limit_exceeded"}}`), "Retry-After", "20"),
			provider.Error{Kind: provider.KindRateLimited, Status: 429, RetryAfter: 20 * time.Second, Message: "rate_limit_error: Rate limit exceeded. Please try again in 20 seconds. (rate_limit_exceeded)"}},
		{"429 quota", wiretest.JSON(429, `{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}`),
			provider.Error{Kind: provider.KindQuota, Status: 429, Message: "insufficient_quota: You exceeded your current quota"}},
		{"529 anthropic", withHeader(wiretest.JSON(529, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`), "Retry-After-Ms", "1500"),
			provider.Error{Kind: provider.KindServer, Status: 529, RetryAfter: 1500 * time.Millisecond, Message: "overloaded_error: Overloaded"}},
		{"503 html", Reply(503, "text/html", "<html>down</html>"),
			provider.Error{Kind: provider.KindServer, Status: 503, Message: `Service Unavailable ("text/html" body)`}},
		{"400 should retry", withHeader(wiretest.JSON(400, `{"error":{"message":"try again"}}`), "X-Should-Retry", "true"),
			provider.Error{Kind: provider.KindServer, Status: 400, Message: "try again"}},
		{"500 should not retry", withHeader(wiretest.JSON(500, `{"error":{"message":"no"}}`), "X-Should-Retry", "false"),
			provider.Error{Kind: provider.KindBadRequest, Status: 500, Message: "no"}},
		{"408", wiretest.JSON(408, `{}`), provider.Error{Kind: provider.KindTimeout, Status: 408, Message: "Request Timeout"}},
		{"409", wiretest.JSON(409, `{}`), provider.Error{Kind: provider.KindConflict, Status: 409, Message: "Conflict"}},
		{"403", wiretest.JSON(403, `{"error":{"code":403,"message":"flagged"}}`), provider.Error{Kind: provider.KindAuth, Status: 403, Message: "flagged (403)"}},
		{"400 overflow", wiretest.JSON(400, `{"error":{"message":"Input tokens exceed the configured limit of 272000 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`),
			provider.Error{Kind: provider.KindContextOverflow, Status: 400, Message: "invalid_request_error: Input tokens exceed the configured limit of 272000 tokens. (context_length_exceeded)"}},
		{"200 json error", wiretest.JSON(200, `{"error":{"message":"exceeds the available context size","type":"invalid_request_error"}}`),
			provider.Error{Kind: provider.KindContextOverflow, Status: 200, Message: "invalid_request_error: exceeds the available context size"}},
		{"200 not a stream", Reply(200, "text/html", "<html>login</html>"),
			provider.Error{Kind: provider.KindMalformed, Status: 200, Message: `expected an event stream, got "text/html"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := wiretest.NewServer(t, tt.reply)
			_, err := open(t, srv, time.Minute)
			pe := provider.AsError(err)
			if pe == nil {
				t.Fatalf("err = %v, want a *provider.Error", err)
			}
			tt.want.Provider = "test:model"
			if diff := cmp.Diff(&tt.want, pe); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func Reply(status int, ct, body string) wiretest.Reply {
	return wiretest.Reply{Status: status, Header: map[string]string{"Content-Type": ct}, Body: []byte(body)}
}

func withHeader(r wiretest.Reply, k, v string) wiretest.Reply {
	h := map[string]string{}
	for hk, hv := range r.Header {
		h[hk] = hv
	}
	h[k] = v
	r.Header = h
	return r
}

// TestKeyNeverLeaks answers 401 with bodies that echo the auth header.
func TestKeyNeverLeaks(t *testing.T) {
	for _, body := range []string{
		`{"error":{"message":"Incorrect API key provided: Bearer ` + secret + `","type":"invalid_request_error","code":"invalid_api_key"}}`,
		`Authorization: Bearer ` + secret,
		`{"error":"` + secret + `"}`,
	} {
		srv := wiretest.NewServer(t, Reply(401, "application/json", body))
		_, err := open(t, srv, time.Minute)
		if pe := provider.AsError(err); pe == nil || pe.Kind != provider.KindAuth {
			t.Fatalf("err = %v, want auth", err)
		}
		if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "0123456789abcdef") {
			t.Errorf("error text leaks the key: %s", err)
		}
	}
}

func TestRedirectNotFollowed(t *testing.T) {
	target := wiretest.NewServer(t, wiretest.SSE("data: [DONE]\n\n"))
	srv := wiretest.NewServer(t, wiretest.Reply{Status: http.StatusTemporaryRedirect, Header: map[string]string{"Location": target.URL + "/elsewhere"}})
	_, err := open(t, srv, time.Minute)
	pe := provider.AsError(err)
	if pe == nil || pe.Kind != provider.KindBadRequest || pe.Status != http.StatusTemporaryRedirect {
		t.Fatalf("err = %v, want bad_request with status 307", err)
	}
	if n := len(target.Requests()); n != 0 {
		t.Errorf("the redirect target got %d requests, want 0", n)
	}
}

func TestStall(t *testing.T) {
	reply := wiretest.SSE("data: {}\n\ndata: {}\n\ndata: [DONE]\n\n")
	reply.Fault.StallAt = 10
	srv := wiretest.NewServer(t, reply)
	// On a loaded machine the stall can come before the headers do: it is
	// judged by the error, not by where it came.
	s, err := open(t, srv, 100*time.Millisecond)
	if err == nil {
		defer s.Close()
		_, err = io.ReadAll(s)
		err = s.Fail(err)
	}
	if pe := provider.AsError(err); pe == nil || pe.Kind != provider.KindStall {
		t.Fatalf("err = %v, want stall", err)
	}
	if !provider.AsError(err).Transient() {
		t.Error("a stall is not transient")
	}
	// The stream's own stall timeout ended it, not another bound.
	if m := provider.AsError(err).Message; m != "no bytes for 100ms" {
		t.Errorf("stall: %q, want the 100ms stall timeout named", m)
	}
}

func TestStallBeforeHeaders(t *testing.T) {
	release := make(chan struct{})
	srv := wiretest.NewServer(t)
	srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	defer close(release)
	_, err := open(t, srv, 100*time.Millisecond)
	if pe := provider.AsError(err); pe == nil || pe.Kind != provider.KindStall {
		t.Fatalf("err = %v, want stall", err)
	}
}

// The caller's deadline ends a stream that stalls, whether it comes while
// the request is opened or while the body is read (on a loaded machine
// the opening alone can outlast it): judged by the error, not by where.
func TestCallerContext(t *testing.T) {
	reply := wiretest.SSE("data: {}\n\ndata: [DONE]\n\n")
	reply.Fault.StallAt = 5
	srv := wiretest.NewServer(t, reply)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	s, err := wire.Open(ctx, &wire.Request{Provider: "p", URL: srv.URL, Header: http.Header{}, Client: wire.NoRedirects(nil), StallTimeout: time.Minute})
	if err == nil {
		defer s.Close()
		_, err = io.ReadAll(s)
		err = s.Fail(err)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want it to wrap context.DeadlineExceeded", err)
	}
	if pe := provider.AsError(err); pe == nil || pe.Kind != provider.KindTimeout {
		t.Errorf("err = %v, want timeout", err)
	}
}

// A request's own timeout ends a stream that stalls, whether it comes
// while the request is opened or while the body is read.
func TestRequestTimeout(t *testing.T) {
	reply := wiretest.SSE("data: {}\n\ndata: [DONE]\n\n")
	reply.Fault.StallAt = 5
	srv := wiretest.NewServer(t, reply)
	s, err := wire.Open(context.Background(), &wire.Request{Provider: "p", URL: srv.URL, Header: http.Header{}, Client: wire.NoRedirects(nil), Timeout: 100 * time.Millisecond})
	if err == nil {
		defer s.Close()
		_, err = io.ReadAll(s)
		err = s.Fail(err)
	}
	if pe := provider.AsError(err); pe == nil || pe.Kind != provider.KindTimeout {
		t.Errorf("err = %v, want timeout", err)
	}
}

func TestCut(t *testing.T) {
	reply := wiretest.SSE("data: {\"a\":1}\n\ndata: {\"b\":2}\n\ndata: [DONE]\n\n")
	reply.Fault.CutAt = 20
	srv := wiretest.NewServer(t, reply)
	s, err := open(t, srv, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, err = io.ReadAll(s)
	err = s.Fail(err)
	pe := provider.AsError(err)
	if pe == nil || pe.Kind != provider.KindTruncated || !pe.Transient() {
		t.Fatalf("err = %v, want truncated", err)
	}
}

func TestConnectionRefused(t *testing.T) {
	srv := wiretest.NewServer(t)
	url := srv.URL
	srv.Close()
	_, err := wire.Open(context.Background(), &wire.Request{Provider: "p", URL: url, Header: http.Header{}, Client: wire.NoRedirects(nil)})
	if pe := provider.AsError(err); pe == nil || pe.Kind != provider.KindTransport {
		t.Fatalf("err = %v, want transport", err)
	}
}

// The APIs of the vendors, as their packages build them.
var (
	anthropicAPI  = wire.API{Root: "/v1", Path: "/messages", AlwaysRoot: true}
	openaiAPI     = wire.API{Root: "/v1", Path: "/chat/completions"}
	openrouterAPI = wire.API{Root: "/api/v1", Path: "/chat/completions"}
)

func TestURL(t *testing.T) {
	tests := []struct {
		name, raw     string
		api           wire.API
		url, hostPort string
		ok            bool
	}{
		// Anthropic's base URL names the host; /v1 is always added, once.
		{"anthropic host", "https://api.anthropic.com", anthropicAPI, "https://api.anthropic.com/v1/messages", "api.anthropic.com:443", true},
		{"anthropic slash", "https://api.anthropic.com/", anthropicAPI, "https://api.anthropic.com/v1/messages", "api.anthropic.com:443", true},
		{"anthropic with /v1", "https://api.anthropic.com/v1", anthropicAPI, "https://api.anthropic.com/v1/messages", "api.anthropic.com:443", true},
		{"anthropic with /v1/", "https://api.anthropic.com/v1/", anthropicAPI, "https://api.anthropic.com/v1/messages", "api.anthropic.com:443", true},
		{"anthropic whole endpoint", "https://api.anthropic.com/v1/messages", anthropicAPI, "https://api.anthropic.com/v1/messages", "api.anthropic.com:443", true},
		{"anthropic proxy prefix", "https://gw.example/anthropic", anthropicAPI, "https://gw.example/anthropic/v1/messages", "gw.example:443", true},
		{"anthropic proxy prefix with /v1", "https://gw.example/anthropic/v1//", anthropicAPI, "https://gw.example/anthropic/v1/messages", "gw.example:443", true},
		// OpenAI's base URL names the API root; a bare host gets /v1.
		{"openai root", "https://api.openai.com/v1", openaiAPI, "https://api.openai.com/v1/chat/completions", "api.openai.com:443", true},
		{"openai root slash", "https://api.openai.com/v1/", openaiAPI, "https://api.openai.com/v1/chat/completions", "api.openai.com:443", true},
		{"openai host", "https://api.openai.com", openaiAPI, "https://api.openai.com/v1/chat/completions", "api.openai.com:443", true},
		{"openai whole endpoint", "https://api.openai.com/v1/chat/completions", openaiAPI, "https://api.openai.com/v1/chat/completions", "api.openai.com:443", true},
		{"ollama host", "http://localhost:11434", openaiAPI, "http://localhost:11434/v1/chat/completions", "localhost:11434", true},
		{"ollama root", "http://localhost:11434/v1", openaiAPI, "http://localhost:11434/v1/chat/completions", "localhost:11434", true},
		{"groq", "https://api.groq.com/openai/v1", openaiAPI, "https://api.groq.com/openai/v1/chat/completions", "api.groq.com:443", true},
		{"gemini compat keeps its root", "https://generativelanguage.googleapis.com/v1beta/openai/", openaiAPI, "https://generativelanguage.googleapis.com/v1beta/openai/chat/completions", "generativelanguage.googleapis.com:443", true},
		{"a segment that only starts like /v1", "http://h/v", openaiAPI, "http://h/v/chat/completions", "h:80", true},
		{"ipv6", "http://[::1]/v1", openaiAPI, "http://[::1]/v1/chat/completions", "[::1]:80", true},
		{"escaped path kept", "http://h/a%2Fb/v1", openaiAPI, "http://h/a%2Fb/v1/chat/completions", "h:80", true},
		// OpenRouter's root is /api/v1.
		{"openrouter root", "https://openrouter.ai/api/v1", openrouterAPI, "https://openrouter.ai/api/v1/chat/completions", "openrouter.ai:443", true},
		{"openrouter host", "https://openrouter.ai", openrouterAPI, "https://openrouter.ai/api/v1/chat/completions", "openrouter.ai:443", true},
		{"openrouter /api", "https://openrouter.ai/api/", openrouterAPI, "https://openrouter.ai/api/v1/chat/completions", "openrouter.ai:443", true},
		{"openrouter whole endpoint", "https://openrouter.ai/api/v1/chat/completions", openrouterAPI, "https://openrouter.ai/api/v1/chat/completions", "openrouter.ai:443", true},
		// Refused.
		{"ftp", "ftp://x", openaiAPI, "", "", false},
		{"no scheme", "localhost:8080", openaiAPI, "", "", false},
		{"user info", "https://user:pass@host/v1", openaiAPI, "", "", false},
		{"query", "https://host/v1?key=1", openaiAPI, "", "", false},
		{"empty query", "https://host/v1?", openaiAPI, "", "", false},
		{"fragment", "https://host/v1#x", openaiAPI, "", "", false},
		{"empty port", "https://host:/v1", openaiAPI, "", "", false},
		{"empty", "", openaiAPI, "", "", false},
	}
	for _, tt := range tests {
		got, hostPort, err := wire.URL(tt.raw, tt.api)
		if (err == nil) != tt.ok || got != tt.url || hostPort != tt.hostPort {
			t.Errorf("%s: URL(%q) = %q, %q, %v; want %q, %q", tt.name, tt.raw, got, hostPort, err, tt.url, tt.hostPort)
		}
		if err != nil && strings.Contains(err.Error(), "pass") {
			t.Errorf("%s: the error quotes the password: %v", tt.name, err)
		}
	}
}

// FuzzURL checks that a base URL is refused or gives an endpoint URL
// that ends in the API's path, has the root once, and is a fixed point.
func FuzzURL(f *testing.F) {
	for _, s := range []string{"https://api.anthropic.com/v1", "http://localhost:11434", "https://openrouter.ai/api",
		"https://gw/x/v1/messages/", "http://[::1]:8/v1/chat/completions", "https://h/%2F/v1", "http://h//"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		for _, api := range []wire.API{anthropicAPI, openaiAPI, openrouterAPI} {
			got, hostPort, err := wire.URL(raw, api)
			if err != nil {
				continue
			}
			if !strings.HasSuffix(got, api.Root+api.Path) && api.AlwaysRoot || !strings.HasSuffix(got, api.Path) {
				t.Fatalf("URL(%q, %+v) = %q: the endpoint path is missing", raw, api, got)
			}
			// The root twice in the path: a host that is named like the
			// root ("https://v1") is not a path element.
			u, perr := url.Parse(got)
			if perr != nil {
				t.Fatalf("URL(%q, %+v) = %q, which does not parse: %v", raw, api, got, perr)
			}
			if p := u.EscapedPath(); strings.Contains(p, api.Root+api.Root+"/") || strings.HasSuffix(p, api.Root+api.Root+api.Path) {
				t.Fatalf("URL(%q, %+v) = %q: the root twice", raw, api, got)
			}
			again, hp2, err := wire.URL(got, api)
			if err != nil || again != got || hp2 != hostPort {
				t.Fatalf("URL(%q) = %q, but URL of that = %q, %q, %v", raw, got, again, hp2, err)
			}
		}
	})
}
