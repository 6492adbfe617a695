// Package provider is the provider-neutral vocabulary of the harness:
// messages, tool calls, usage and cost, the [Provider] interface every model
// backend implements, and the error kinds that decide what is retried.
//
// Vendor wire formats live in leaf packages (scripted, replay, and the HTTP
// vendors); nothing here knows any vendor's JSON.
package provider

import (
	"context"
	"encoding/json"
	"strconv"
)

// Provider sends one request to a model and returns the whole turn.
//
// # Contract
//
//   - Complete must be safe for concurrent use by several runs.
//   - ctx bounds the whole call, connection and stream included. When ctx is
//     done, Complete returns promptly with an error that wraps ctx.Err().
//   - onText, when not nil, receives text deltas in order while the turn
//     streams; it is called from the goroutine that called Complete and must
//     not retain its argument beyond the call. The concatenation of every
//     delta equals Response.Text.
//   - A failure is returned as an *Error whose Kind says whether a retry may
//     help. Complete never retries on its own; the harness owns retry,
//     backoff and fallback, so a retried turn never duplicates output.
//   - Complete must not modify req.
type Provider interface {
	// Name identifies the provider and model in the trace, for example
	// "scripted" or "anthropic:claude-sonnet-4-5". It never contains a key.
	Name() string
	// Complete runs one completion.
	Complete(ctx context.Context, req *Request, onText func(string)) (*Response, error)
}

// Pricer is implemented by providers that know what a turn costs. The
// harness uses it to enforce a money budget before a request is sent.
//
// Price must be a pure function of u, non-decreasing in each field, and
// cheap. It is linear in each field except where a long-context price
// applies (see [Price.LongContext]): a prompt past the threshold makes the
// whole request dearer, so the price of N output tokens after a prompt of
// in tokens is Price({in, N}) − Price({in, 0}), not Price({0, N}).
type Pricer interface {
	Price(u Usage) Cost
}

// Role says who speaks in a [Message].
type Role string

const (
	// RoleUser is the harness speaking for the task: the contract, harness
	// notes and verification feedback.
	RoleUser Role = "user"
	// RoleAssistant is the model.
	RoleAssistant Role = "assistant"
	// RoleTool carries the result of one tool call.
	RoleTool Role = "tool"
)

// Message is one entry of the conversation the model sees.
type Message struct {
	Role Role `json:"role"`
	// Content is the text of the message. For RoleTool it is the
	// observation the tool produced.
	Content string `json:"content,omitempty"`
	// ToolCalls are the calls an assistant message makes, in order.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// ToolCallID names the call a RoleTool message answers.
	ToolCallID string `json:"tool_call_id,omitempty"`
	// IsError marks a RoleTool message whose call failed or was refused.
	IsError bool `json:"is_error,omitempty"`
	// Images are pictures shown with the message: on a RoleTool message,
	// what the call returned (view_image, an MCP tool). Each vendor puts
	// them where its API takes them (see [Image]).
	Images []Image `json:"images,omitempty"`
}

// Image is a picture in a message, in one of the formats every vendor
// that takes images accepts: image/png, image/jpeg, image/gif or
// image/webp. Package media checks a file before it becomes one.
type Image struct {
	// MediaType is "image/png", "image/jpeg", "image/gif" or "image/webp".
	MediaType string `json:"media_type"`
	// Data is the file's bytes.
	Data []byte `json:"data"`
}

// ImageTaker is implemented by providers that know whether their model
// takes images as input. A provider that does not implement it is
// assumed not to: the harness then tells the model, in words, that an
// image could not be shown, and sends none.
type ImageTaker interface {
	TakesImages() bool
}

// TakesImages reports whether p's model takes images.
func TakesImages(p Provider) bool {
	t, ok := p.(ImageTaker)
	return ok && t.TakesImages()
}

// ToolCall is one call the model asked for.
type ToolCall struct {
	// ID is the identifier the model gave the call; results echo it.
	ID string `json:"id"`
	// Name is the tool's name.
	Name string `json:"name"`
	// Arguments is the JSON the model produced. Providers normalise an
	// empty argument string to {}; anything else is passed on verbatim,
	// valid JSON or not, so that the tool can report what was wrong.
	Arguments json.RawMessage `json:"arguments"`
}

// ToolSpec describes a tool as it is offered to the model.
type ToolSpec struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	// Parameters is a JSON Schema for the arguments object.
	Parameters json.RawMessage `json:"parameters"`
}

// Request is everything a provider needs for one completion.
type Request struct {
	// System is the system prompt: the stable prefix of every request in a
	// run.
	System string `json:"system"`
	// Messages is the conversation so far, oldest first.
	Messages []Message `json:"messages"`
	// Tools is the tool list offered for this turn.
	Tools []ToolSpec `json:"tools,omitempty"`
	// MaxOutputTokens caps the turn's output. Zero means the provider's
	// own default; the harness sets it whenever a budget applies.
	MaxOutputTokens int64 `json:"max_output_tokens,omitempty"`
	// OutputSchema is the JSON Schema a final answer (a turn with no
	// tool call) must match, or nil. A provider whose wire has a
	// structured-output mode asks for it there; the harness validates the
	// answer whatever the vendor did.
	OutputSchema json.RawMessage `json:"output_schema,omitempty"`
	// Step is the run's step the request is the turn of, from 1; zero
	// for a request that is no step's turn (a fold's summary). It never
	// goes on the wire: a scripted provider picks its turn by it, since
	// a folded history no longer counts the turns before it.
	Step int `json:"-"`
	// Agent is the path of the agent the request is for in a tree of
	// agents ("root" for the root, "root/2.0" for a child); empty outside
	// a tree. It never goes on the wire: a scripted provider picks its
	// script by it.
	Agent string `json:"-"`
}

// StopReason says why a turn ended.
type StopReason string

const (
	// StopEnd is a natural end of turn.
	StopEnd StopReason = "end"
	// StopToolUse is a turn that ended to call tools.
	StopToolUse StopReason = "tool_use"
	// StopMaxTokens is a turn cut by its output cap.
	StopMaxTokens StopReason = "max_tokens"
	// StopOther is any other reason a provider reported.
	StopOther StopReason = "other"
)

// Response is one completed turn.
type Response struct {
	// Text is the assistant's text, if any.
	Text string `json:"text,omitempty"`
	// ToolCalls are the calls the turn makes, in order.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// Usage is the provider's last usage report for the turn.
	Usage Usage `json:"usage"`
	// Cost is what the turn cost, when known.
	Cost Cost `json:"cost"`
	// StopReason says why the turn ended.
	StopReason StopReason `json:"stop_reason,omitempty"`
	// Model is the model that answered, as the provider reported it.
	Model string `json:"model,omitempty"`
	// DroppedCalls names, in order, the tool calls the turn began but
	// did not finish: the stream stopped inside them (a turn cut by its
	// output cap, StopMaxTokens, most often). They are not in ToolCalls,
	// so they never run. A name is "" when the stream stopped before it.
	DroppedCalls []string `json:"dropped_calls,omitempty"`
}

// Truncated reports whether the turn was cut by its output cap.
func (r *Response) Truncated() bool { return r.StopReason == StopMaxTokens }

// Usage counts the tokens of one turn or of many.
//
// InputTokens counts every prompt token, cached or not; the two cache
// counts are parts of it. Vendors whose wire format reports cached tokens
// separately are normalised to this shape by their leaf package.
type Usage struct {
	InputTokens      int64 `json:"input_tokens"`
	OutputTokens     int64 `json:"output_tokens"`
	CacheReadTokens  int64 `json:"cache_read_tokens,omitempty"`
	CacheWriteTokens int64 `json:"cache_write_tokens,omitempty"`
}

// Total is the number of tokens a budget is charged: input plus output.
func (u Usage) Total() int64 { return u.InputTokens + u.OutputTokens }

// Add returns the field-wise sum of u and v.
func (u Usage) Add(v Usage) Usage {
	return Usage{
		InputTokens:      u.InputTokens + v.InputTokens,
		OutputTokens:     u.OutputTokens + v.OutputTokens,
		CacheReadTokens:  u.CacheReadTokens + v.CacheReadTokens,
		CacheWriteTokens: u.CacheWriteTokens + v.CacheWriteTokens,
	}
}

// Cost is an amount of money in US dollars.
//
// Known reports whether the amount is complete. A sum of costs is known
// only when every part was; USD then holds the sum of the parts that were
// known, a lower bound. The trace shows an unknown cost as "unknown", never
// as zero.
type Cost struct {
	USD   float64 `json:"usd"`
	Known bool    `json:"known"`
}

// Add returns the sum of c and d.
func (c Cost) Add(d Cost) Cost { return Cost{USD: c.USD + d.USD, Known: c.Known && d.Known} }

// String formats the cost the way the trace shows it.
func (c Cost) String() string {
	if !c.Known {
		if c.USD == 0 {
			return "unknown"
		}
		return "≥$" + formatUSD(c.USD) + " (partly unknown)"
	}
	return "$" + formatUSD(c.USD)
}

func formatUSD(v float64) string {
	if v != 0 && v < 0.01 {
		return strconv.FormatFloat(v, 'f', 6, 64)
	}
	return strconv.FormatFloat(v, 'f', 4, 64)
}
