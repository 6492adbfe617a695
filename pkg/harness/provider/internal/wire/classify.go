// Package wire is the HTTP plumbing the vendor packages share: it sends
// one streaming request, watches the stream for stalls, and turns every
// failure (an HTTP status, an error body, an in-stream error, a cut
// connection) into a [provider.Error] of exactly one kind.
//
// It never retries: the harness owns retry, backoff and fallback.
package wire

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/initorigin/io-harness-go/pkg/harness/provider"
)

// APIError is the error object a vendor sends, in any of the shapes the
// vendors use: OpenAI's {"error":{"message","type","code"}}, Anthropic's
// {"type":"error","error":{"type","message"}}, OpenRouter's numeric code
// and metadata.error_type, llama.cpp's {"code":400,…}, vLLM's top-level
// {"object":"error",…} and a bare string.
type APIError struct {
	// Type is error.type, or OpenRouter's error.metadata.error_type when
	// there is no type.
	Type string
	// Code is error.code as text: "insufficient_quota", or "429" when the
	// vendor sent a number.
	Code string
	// Message is the vendor's description.
	Message string
}

// Text describes the error for a [provider.Error] message: the vendor's
// type, message and code.
func (e APIError) Text() string {
	msg := e.Message
	if e.Type != "" && e.Type != "error" {
		if msg == "" {
			msg = e.Type
		} else {
			msg = e.Type + ": " + msg
		}
	}
	if e.Code != "" && e.Code != e.Type && !strings.Contains(msg, e.Code) {
		msg += " (" + e.Code + ")"
	}
	return msg
}

// InStream returns the error for an error event inside a stream. Its
// Provider is filled in, and its message cleaned (see [Clean]), by
// [Stream.Fail] or [Fail].
func InStream(e APIError) *provider.Error {
	return &provider.Error{Kind: Kind(0, "", e), Message: e.Text()}
}

// wireError is the JSON of an error object.
type wireError struct {
	Type     string          `json:"type"`
	Code     json.RawMessage `json:"code"`
	Message  string          `json:"message"`
	Metadata struct {
		ErrorType string `json:"error_type"`
	} `json:"metadata"`
}

// ParseError reads the error of an error body or an in-stream error
// event: {"error":{…}}, {"error":"text"}, or vLLM's error object at the
// top level, {"object":"error","message":…,"type":…,"code":400}. ok is
// false when data holds none of them.
func ParseError(data []byte) (e APIError, ok bool) {
	var outer struct {
		Error  json.RawMessage `json:"error"`
		Object string          `json:"object"`
	}
	if json.Unmarshal(data, &outer) != nil {
		return APIError{}, false
	}
	if len(outer.Error) == 0 || string(outer.Error) == "null" {
		if outer.Object == "error" {
			return ParseErrorObject(data)
		}
		return APIError{}, false
	}
	var text string
	if json.Unmarshal(outer.Error, &text) == nil {
		return APIError{Message: text}, true
	}
	return ParseErrorObject(outer.Error)
}

// ParseErrorObject reads one error object, such as the value of
// llama.cpp's error field: {"code":400,"message":…,"type":…}. ok is false
// when obj is not an object with a type, code or message.
func ParseErrorObject(obj []byte) (e APIError, ok bool) {
	var w wireError
	if json.Unmarshal(obj, &w) != nil {
		return APIError{}, false
	}
	e = APIError{Type: w.Type, Message: w.Message, Code: codeText(w.Code)}
	if e.Type == "" {
		e.Type = w.Metadata.ErrorType
	}
	return e, e.Message != "" || e.Type != "" || e.Code != ""
}

// codeText returns a JSON string or number as text.
func codeText(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var n json.Number
	if json.Unmarshal(raw, &n) == nil {
		return n.String()
	}
	return ""
}

// Kind is the one table that classifies a failure. status is the HTTP
// status, or 0 for an error that arrived inside a stream; shouldRetry is
// the x-should-retry header ("" when absent); e is the vendor's error
// object, zero when the body held none.
//
// In order:
//   - A quota or billing code (insufficient_quota, billing_error, HTTP
//     402) is KindQuota whatever the status, because waiting will not fix
//     it.
//   - A request too long for the model's context (code
//     context_length_exceeded, or a message that says so on a request the
//     vendor refused) is KindContextOverflow.
//   - The status decides next: 408 timeout, 409 conflict, 429
//     rate_limited, 5xx (529 included) server, 401 and 403 auth, any other
//     4xx and every 3xx bad_request.
//   - Without a status, the numeric code of an in-stream error stands in
//     for one (OpenRouter, llama.cpp), and otherwise the error type
//     decides: overloaded_error, api_error and server_error are server;
//     rate_limit_error rate_limited; timeout_error timeout;
//     authentication_error and permission_error auth;
//     invalid_request_error, not_found_error and request_too_large
//     bad_request. An in-stream error of no known type is server.
//   - Last, x-should-retry, when present, overrules transience: "true" on
//     a terminal kind gives server, "false" on a transient kind gives quota
//     for a rate limit and bad_request otherwise.
func Kind(status int, shouldRetry string, e APIError) provider.Kind {
	k := baseKind(status, e)
	switch strings.ToLower(strings.TrimSpace(shouldRetry)) {
	case "true":
		if !k.Transient() {
			k = provider.KindServer
		}
	case "false":
		if k.Transient() {
			if k == provider.KindRateLimited {
				k = provider.KindQuota
			} else {
				k = provider.KindBadRequest
			}
		}
	}
	return k
}

func baseKind(status int, e APIError) provider.Kind {
	typ, code := strings.ToLower(e.Type), strings.ToLower(e.Code)
	if status == 0 {
		if n, err := strconv.Atoi(code); err == nil && n >= 300 && n < 600 {
			status = n
		}
	}
	switch {
	case typ == "insufficient_quota" || code == "insufficient_quota" ||
		typ == "billing_error" || status == http.StatusPaymentRequired:
		return provider.KindQuota
	case code == "context_length_exceeded" || typ == "exceed_context_size_error":
		return provider.KindContextOverflow
	}
	if status != 0 {
		k := statusKind(status)
		if k == provider.KindBadRequest && status >= 400 && overflowMessage(e.Message) {
			return provider.KindContextOverflow
		}
		return k
	}
	switch typ {
	case "overloaded_error", "api_error", "server_error", "provider_overloaded", "provider_unavailable":
		return provider.KindServer
	case "rate_limit_error", "rate_limit_exceeded":
		return provider.KindRateLimited
	case "timeout_error":
		return provider.KindTimeout
	case "authentication_error", "permission_error":
		return provider.KindAuth
	case "invalid_request_error", "not_found_error", "request_too_large":
		if overflowMessage(e.Message) {
			return provider.KindContextOverflow
		}
		return provider.KindBadRequest
	}
	if code == "rate_limit_exceeded" {
		return provider.KindRateLimited
	}
	return provider.KindServer
}

// statusKind classifies an HTTP status that is not a success.
func statusKind(status int) provider.Kind {
	switch {
	case status == http.StatusRequestTimeout:
		return provider.KindTimeout
	case status == http.StatusConflict:
		return provider.KindConflict
	case status == http.StatusTooManyRequests:
		return provider.KindRateLimited
	case status == http.StatusUnauthorized, status == http.StatusForbidden:
		return provider.KindAuth
	case status >= 500:
		return provider.KindServer
	case status >= 300:
		return provider.KindBadRequest
	}
	return provider.KindMalformed
}

// overflowMessage reports whether a refusal's message says the request
// is longer than the model's context, in the words the vendors and the
// local servers use.
func overflowMessage(msg string) bool {
	msg = strings.ToLower(msg)
	for _, s := range []string{
		"context length", "context_length", "context size", "context window",
		"maximum context", "prompt is too long", "input tokens exceed",
	} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// MaxRetryAfter is the longest wait a response may ask for; a longer one
// is cut to it. The harness honours the wait as given, so without a bound
// a server could park a run that has no time budget for years.
const MaxRetryAfter = 10 * time.Minute

// RetryAfter returns the wait the response asked for: retry-after-ms
// (milliseconds) when present, else retry-after (seconds, or an HTTP date
// relative to now), else 0; at most MaxRetryAfter.
func RetryAfter(h http.Header, now time.Time) time.Duration {
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 && ms < 1e12 {
			return min(time.Duration(ms*float64(time.Millisecond)), MaxRetryAfter)
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s > 0 && s < 1e9 {
			return min(time.Duration(s*float64(time.Second)), MaxRetryAfter)
		}
		return 0
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return min(t.Sub(now), MaxRetryAfter)
	}
	return 0
}
