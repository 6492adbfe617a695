package wiretest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"testing"
)

// anthropicID is the pattern the Messages API checks tool_use ids
// against.
var anthropicID = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)

// CheckMessages checks a Messages request body as the API does before it
// answers: every tool_use id matches ^[a-zA-Z0-9_-]+$ and is unique in the
// request, every tool_result answers a tool_use of the assistant message
// just before it, and max_tokens is at most maxTokens (when maxTokens is
// not 0). It returns the API's message for the first violation.
func CheckMessages(body []byte, maxTokens int64) error {
	var b struct {
		MaxTokens int64 `json:"max_tokens"`
		Messages  []struct {
			Role    string `json:"role"`
			Content []struct {
				Type      string `json:"type"`
				ID        string `json:"id"`
				ToolUseID string `json:"tool_use_id"`
			} `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &b); err != nil {
		return fmt.Errorf("request body is not valid JSON: %v", err)
	}
	if maxTokens > 0 && b.MaxTokens > maxTokens {
		return fmt.Errorf("max_tokens: %d > %d, which is the maximum allowed number of output tokens", b.MaxTokens, maxTokens)
	}
	seen := map[string]bool{}
	var prev map[string]bool // the tool_use ids of the last assistant message
	for i, m := range b.Messages {
		uses := map[string]bool{}
		for j, c := range m.Content {
			switch c.Type {
			case "tool_use":
				if !anthropicID.MatchString(c.ID) {
					return fmt.Errorf("messages.%d.content.%d.tool_use.id: String should match pattern '^[a-zA-Z0-9_-]+$'", i, j)
				}
				if seen[c.ID] {
					return fmt.Errorf("messages.%d.content.%d: `tool_use` ids must be unique", i, j)
				}
				seen[c.ID], uses[c.ID] = true, true
			case "tool_result":
				if !anthropicID.MatchString(c.ToolUseID) {
					return fmt.Errorf("messages.%d.content.%d.tool_result.tool_use_id: String should match pattern '^[a-zA-Z0-9_-]+$'", i, j)
				}
				if !prev[c.ToolUseID] {
					return fmt.Errorf("messages.%d.content.%d: unexpected `tool_use_id` found in `tool_result` blocks: %s. Each `tool_result` block must have a corresponding `tool_use` block in the previous message.", i, j, c.ToolUseID)
				}
			}
		}
		if m.Role == "assistant" {
			prev = uses
		} else {
			prev = nil
		}
	}
	return nil
}

// CheckChat checks a Chat Completions request body as OpenAI does: every
// tool call id is at most maxLen bytes (when maxLen is not 0), matches
// Anthropic's pattern (when pattern is set: OpenRouter may route the
// request to Anthropic) and is unique, every tool message answers a call
// of the assistant message before it, and the output cap is at most
// maxTokens (when maxTokens is not 0).
func CheckChat(body []byte, maxLen int, pattern bool, maxTokens int64) error {
	var b struct {
		MaxCompletionTokens int64 `json:"max_completion_tokens"`
		MaxTokens           int64 `json:"max_tokens"`
		Messages            []struct {
			Role       string `json:"role"`
			ToolCallID string `json:"tool_call_id"`
			ToolCalls  []struct {
				ID string `json:"id"`
			} `json:"tool_calls"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &b); err != nil {
		return fmt.Errorf("request body is not valid JSON: %v", err)
	}
	if limit := max(b.MaxCompletionTokens, b.MaxTokens); maxTokens > 0 && limit > maxTokens {
		return fmt.Errorf("max_tokens is too large: %d. This model supports at most %d completion tokens, whereas you provided %d.", limit, maxTokens, limit)
	}
	seen := map[string]bool{}
	calls := map[string]bool{}
	for i, m := range b.Messages {
		for j, c := range m.ToolCalls {
			if maxLen > 0 && len(c.ID) > maxLen {
				return fmt.Errorf("Invalid 'messages[%d].tool_calls[%d].id': string too long. Expected a string with maximum length %d, but got a string with length %d instead.", i, j, maxLen, len(c.ID))
			}
			if pattern && !anthropicID.MatchString(c.ID) {
				return fmt.Errorf("messages.%d.content.%d.tool_use.id: String should match pattern '^[a-zA-Z0-9_-]+$'", i, j)
			}
			if seen[c.ID] {
				return fmt.Errorf("Invalid 'messages[%d].tool_calls[%d].id': duplicate tool call id %q", i, j, c.ID)
			}
			seen[c.ID] = true
		}
		switch m.Role {
		case "assistant":
			calls = map[string]bool{}
			for _, c := range m.ToolCalls {
				calls[c.ID] = true
			}
		case "tool":
			if !calls[m.ToolCallID] {
				return fmt.Errorf("Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'. (messages[%d].tool_call_id %q)", i, m.ToolCallID)
			}
		}
	}
	return nil
}

// CheckingServer is a server that checks every request body with check
// and answers 400 with an invalid_request_error in the vendor's shape
// when it fails, and with ok otherwise. It records what it received.
// anthropicShape picks Anthropic's error body over OpenAI's.
func CheckingServer(t testing.TB, check func([]byte) error, anthropicShape bool, ok Reply) *Server {
	s := &Server{replies: []Reply{ok}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		s.serve(rec, r) // records the request, and renders the reply
		s.mu.Lock()
		body := s.requests[len(s.requests)-1].Body
		s.mu.Unlock()
		if err := check(body); err != nil {
			msg, _ := json.Marshal(err.Error())
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			if anthropicShape {
				fmt.Fprintf(w, `{"type":"error","error":{"type":"invalid_request_error","message":%s},"request_id":"req_test"}`, msg)
			} else {
				fmt.Fprintf(w, `{"error":{"message":%s,"type":"invalid_request_error","param":"messages","code":null}}`, msg)
			}
			return
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		w.Write(rec.Body.Bytes())
	}))
	t.Cleanup(s.Close)
	return s
}
