package anthropic

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"

	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/internal/toolid"
)

// emptySchema is the input schema of a tool that declares none.
const emptySchema = `{"type":"object","properties":{}}`

type body struct {
	Model     string    `json:"model"`
	MaxTokens int64     `json:"max_tokens"`
	System    []block   `json:"system,omitempty"`
	Messages  []message `json:"messages"`
	Tools     []tool    `json:"tools,omitempty"`
	Stream    bool      `json:"stream"`
}

type cacheControl struct {
	Type string `json:"type"`
}

// ephemeral marks the end of the cached prefix.
func ephemeral() *cacheControl { return &cacheControl{Type: "ephemeral"} }

type message struct {
	Role    string  `json:"role"`
	Content []block `json:"content"`
}

// block is a text, tool_use or tool_result content block.
type block struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	// Content is a tool result's: its text, or its text and image
	// blocks when the call returned images.
	Content      any           `json:"content,omitempty"`
	Source       *imageSource  `json:"source,omitempty"`
	IsError      bool          `json:"is_error,omitempty"`
	CacheControl *cacheControl `json:"cache_control,omitempty"`
}

// imageSource is an image block's data, inline in base64.
type imageSource struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type"`
	Data      string `json:"data"`
}

type tool struct {
	Name         string          `json:"name"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"input_schema"`
	CacheControl *cacheControl   `json:"cache_control,omitempty"`
}

// requestBody returns the JSON body of a streaming Messages request.
//
// The system prompt and the tool list are the stable prefix of every
// request of a run, so the system block and the last tool carry a cache
// breakpoint. Messages are reshaped to what the API accepts: tool results
// become tool_result blocks of a user message, consecutive messages of
// one role are merged, a user message starts with its tool results, an
// assistant message puts its text before its tool_use blocks, and empty
// text is left out. Every tool-call id, of a call and of the result that
// answers it, goes through ids, so that ids another vendor made reach
// the API in a form it accepts, the pairs still matching.
func requestBody(model string, maxTokens int64, req *provider.Request, ids toolid.Rule) ([]byte, error) {
	b := body{Model: model, MaxTokens: maxTokens, Stream: true, Messages: toMessages(req.Messages, ids)}
	if req.System != "" {
		b.System = []block{{Type: "text", Text: req.System, CacheControl: ephemeral()}}
	}
	for _, t := range req.Tools {
		schema := t.Parameters
		if len(schema) == 0 {
			schema = json.RawMessage(emptySchema)
		} else if !json.Valid(schema) {
			return nil, fmt.Errorf("tool %q: parameters are not valid JSON", t.Name)
		}
		b.Tools = append(b.Tools, tool{Name: t.Name, Description: t.Description, InputSchema: schema})
	}
	if n := len(b.Tools); n > 0 {
		b.Tools[n-1].CacheControl = ephemeral()
	}
	return json.Marshal(&b)
}

func toMessages(msgs []provider.Message, ids toolid.Rule) []message {
	out := make([]message, 0, len(msgs))
	for i := range msgs {
		m := &msgs[i]
		role, blocks := "user", toBlocks(m, ids)
		if m.Role == provider.RoleAssistant {
			role = "assistant"
		}
		if len(blocks) == 0 {
			continue
		}
		if n := len(out); n > 0 && out[n-1].Role == role {
			out[n-1].Content = append(out[n-1].Content, blocks...)
			continue
		}
		out = append(out, message{Role: role, Content: blocks})
	}
	for i := range out {
		first := "tool_result"
		if out[i].Role == "assistant" {
			first = "text"
		}
		out[i].Content = partition(out[i].Content, first)
	}
	return out
}

// toBlocks converts one message to content blocks.
func toBlocks(m *provider.Message, ids toolid.Rule) []block {
	switch m.Role {
	case provider.RoleTool:
		r := block{Type: "tool_result", ToolUseID: ids.Map(m.ToolCallID), IsError: m.IsError}
		if m.Content != "" {
			r.Content = m.Content
		}
		if len(m.Images) > 0 {
			// The images a call returned go in its result, after its text.
			var parts []block
			if m.Content != "" {
				parts = append(parts, block{Type: "text", Text: m.Content})
			}
			for _, img := range m.Images {
				parts = append(parts, block{Type: "image", Source: &imageSource{Type: "base64", MediaType: img.MediaType,
					Data: base64.StdEncoding.EncodeToString(img.Data)}})
			}
			r.Content = parts
		}
		return []block{r}
	case provider.RoleAssistant:
		var bs []block
		if m.Content != "" {
			bs = append(bs, block{Type: "text", Text: m.Content})
		}
		for _, c := range m.ToolCalls {
			bs = append(bs, block{Type: "tool_use", ID: ids.Map(c.ID), Name: c.Name, Input: toolInput(c.Arguments)})
		}
		return bs
	default:
		if m.Content == "" {
			return nil
		}
		return []block{{Type: "text", Text: m.Content}}
	}
}

// toolInput returns a call's arguments as the JSON object the API wants.
// Arguments that are empty, invalid or not an object are sent as {}: the
// model sees the call it made, and the tool's result says what was wrong
// with it.
func toolInput(args json.RawMessage) json.RawMessage {
	trimmed := bytes.TrimSpace(args)
	if len(trimmed) == 0 || trimmed[0] != '{' || !json.Valid(trimmed) {
		return json.RawMessage("{}")
	}
	return trimmed
}

// partition returns bs with the blocks of type first moved to the front,
// each group in its order.
func partition(bs []block, first string) []block {
	out := make([]block, 0, len(bs))
	for _, b := range bs {
		if b.Type == first {
			out = append(out, b)
		}
	}
	for _, b := range bs {
		if b.Type != first {
			out = append(out, b)
		}
	}
	return out
}
