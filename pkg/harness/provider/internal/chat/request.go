// Package chat is the OpenAI Chat Completions wire format that the openai
// and openrouter packages share: the request body, and the decoder that
// assembles a streamed turn from its chunks.
package chat

import (
	"encoding/base64"
	"encoding/json"
	"fmt"

	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/internal/toolid"
)

// Max-token field names.
const (
	// MaxCompletionTokens is OpenAI's current name for the output cap.
	MaxCompletionTokens = "max_completion_tokens"
	// MaxTokens is the older name the compatible servers expect.
	MaxTokens = "max_tokens"
)

// emptySchema is the parameters of a tool that declares none.
const emptySchema = `{"type":"object","properties":{}}`

// Options shape a request body beyond what the request says.
type Options struct {
	Model string
	// MaxTokensField is MaxCompletionTokens or MaxTokens.
	MaxTokensField string
	// MaxOutputTokens is the cap sent when the request sets none; zero
	// sends none.
	MaxOutputTokens int64
	// Limits are the model's, from the catalogue: a cap is never sent
	// above Limits.MaxOutputTokens nor above the room Limits.ContextWindow
	// leaves after the input. Zero fields are unknown.
	Limits provider.Limits
	// IDs is the rule every tool-call id of a request is mapped through.
	IDs toolid.Rule
	// Models is OpenRouter's fallback list.
	Models []string
	// Provider is OpenRouter's provider preferences object, passed as is.
	Provider json.RawMessage
	// IncludeUsage sends OpenRouter's usage:{"include":true}.
	IncludeUsage bool
	// StructuredOutput sends a request's output schema as
	// response_format json_schema (not strict) when its root is an
	// object, the shape every server that has the mode accepts.
	StructuredOutput bool
	// AnySchema, with StructuredOutput, sends response_format whatever
	// the request's output schema, an array root and none included: the
	// object-root rule switched off, which only the providers' negative
	// controls ask for (their export_test.go).
	AnySchema bool
}

type body struct {
	Model               string          `json:"model"`
	Models              []string        `json:"models,omitempty"`
	Messages            []message       `json:"messages"`
	Tools               []tool          `json:"tools,omitempty"`
	Stream              bool            `json:"stream"`
	StreamOptions       streamOptions   `json:"stream_options"`
	MaxCompletionTokens int64           `json:"max_completion_tokens,omitempty"`
	MaxTokens           int64           `json:"max_tokens,omitempty"`
	Provider            json.RawMessage `json:"provider,omitempty"`
	Usage               *usageOption    `json:"usage,omitempty"`
	ResponseFormat      *responseFormat `json:"response_format,omitempty"`
}

// responseFormat asks for a final answer that matches a JSON Schema.
type responseFormat struct {
	Type       string     `json:"type"`
	JSONSchema jsonSchema `json:"json_schema"`
}

type jsonSchema struct {
	Name   string          `json:"name"`
	Schema json.RawMessage `json:"schema"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type usageOption struct {
	Include bool `json:"include"`
}

type message struct {
	Role string `json:"role"`
	// Content is a string, null on an assistant message that only calls
	// tools, or the parts of a user message that shows images.
	Content    any        `json:"content"`
	ToolCalls  []toolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

// part is one part of a user message's content: text, or an image as a
// data URL.
type part struct {
	Type     string    `json:"type"`
	Text     string    `json:"text,omitempty"`
	ImageURL *imageURL `json:"image_url,omitempty"`
}

type imageURL struct {
	URL string `json:"url"`
}

type toolCall struct {
	ID       string   `json:"id"`
	Type     string   `json:"type"`
	Function function `json:"function"`
}

type function struct {
	Name string `json:"name"`
	// Arguments is a JSON text inside a JSON string.
	Arguments string `json:"arguments"`
}

type tool struct {
	Type     string       `json:"type"`
	Function toolFunction `json:"function"`
}

type toolFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
}

// Body returns the JSON body of a streaming request for req. It fails
// only when a tool's parameters are not valid JSON.
func Body(req *provider.Request, o *Options) ([]byte, error) {
	b := body{
		Model:         o.Model,
		Models:        o.Models,
		Messages:      make([]message, 0, len(req.Messages)+1),
		Stream:        true,
		StreamOptions: streamOptions{IncludeUsage: true},
		Provider:      o.Provider,
	}
	if o.IncludeUsage {
		b.Usage = &usageOption{Include: true}
	}
	if o.StructuredOutput && (o.AnySchema || objectSchema(req.OutputSchema)) {
		b.ResponseFormat = &responseFormat{Type: "json_schema", JSONSchema: jsonSchema{Name: "answer", Schema: req.OutputSchema}}
	}
	limit := req.MaxOutputTokens
	if limit <= 0 {
		limit = o.MaxOutputTokens
	}
	if limit > 0 {
		// Only a cap that was asked for is sized: with none, the server
		// gives the model's own, and a local server its configured one.
		limit = o.Limits.OutputCap(limit, provider.EstimateInput(req))
	}
	if o.MaxTokensField == MaxTokens {
		b.MaxTokens = limit
	} else {
		b.MaxCompletionTokens = limit
	}
	if req.System != "" {
		b.Messages = append(b.Messages, message{Role: "system", Content: &req.System})
	}
	// A tool message is text only: the images a call returned follow the
	// turn's tool messages, in a user message that names the call.
	var images []message
	for i := range req.Messages {
		m := &req.Messages[i]
		if m.Role != provider.RoleTool && len(images) > 0 {
			b.Messages, images = append(b.Messages, images...), nil
		}
		b.Messages = append(b.Messages, toMessage(m, o.IDs))
		if m.Role == provider.RoleTool && len(m.Images) > 0 {
			images = append(images, imageMessage(m, o.IDs))
		}
	}
	b.Messages = append(b.Messages, images...)
	for _, t := range req.Tools {
		params := t.Parameters
		if len(params) == 0 {
			params = json.RawMessage(emptySchema)
		} else if !json.Valid(params) {
			return nil, fmt.Errorf("tool %q: parameters are not valid JSON", t.Name)
		}
		b.Tools = append(b.Tools, tool{Type: "function", Function: toolFunction{Name: t.Name, Description: t.Description, Parameters: params}})
	}
	return json.Marshal(&b)
}

// objectSchema reports whether schema is a JSON Schema whose root says
// "type": "object".
func objectSchema(schema json.RawMessage) bool {
	var root struct {
		Type any `json:"type"`
	}
	return len(schema) > 0 && json.Unmarshal(schema, &root) == nil && root.Type == "object"
}

// imageMessage is the user message that shows the images a tool call
// returned: a text part naming the call, then each image as a base64
// data URL, the text first as the vendors advise.
func imageMessage(m *provider.Message, ids toolid.Rule) message {
	parts := []part{{Type: "text", Text: fmt.Sprintf("The image%s returned by tool call %s:", plural(len(m.Images)), ids.Map(m.ToolCallID))}}
	for _, img := range m.Images {
		parts = append(parts, part{Type: "image_url", ImageURL: &imageURL{URL: "data:" + img.MediaType + ";base64," + base64.StdEncoding.EncodeToString(img.Data)}})
	}
	return message{Role: "user", Content: parts}
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// toMessage converts one message, its tool-call ids mapped through ids. A
// tool result carries no error flag in this format: the observation's
// text says what went wrong.
func toMessage(m *provider.Message, ids toolid.Rule) message {
	content := m.Content
	switch m.Role {
	case provider.RoleAssistant:
		out := message{Role: "assistant", Content: &content}
		if content == "" && len(m.ToolCalls) > 0 {
			out.Content = nil
		}
		for _, c := range m.ToolCalls {
			args := string(c.Arguments)
			if args == "" {
				args = "{}"
			}
			out.ToolCalls = append(out.ToolCalls, toolCall{ID: ids.Map(c.ID), Type: "function", Function: function{Name: c.Name, Arguments: args}})
		}
		return out
	case provider.RoleTool:
		return message{Role: "tool", Content: &content, ToolCallID: ids.Map(m.ToolCallID)}
	default:
		return message{Role: string(m.Role), Content: &content}
	}
}
