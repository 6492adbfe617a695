// Package scripted is a provider that plays turns written down in advance:
// text and tool calls, each with its usage, an optional latency and an
// optional injected failure. It serves demos, tests and benchmarks.
//
// The turn a request gets is chosen by the request itself, not by a
// counter: a request that already holds n assistant turns gets turn n. A
// resumed run therefore gets the turn it would have got had it never
// stopped, and a retried request gets the same turn again.
package scripted

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/initorigin/io-harness-go/pkg/harness/provider"
)

// Script is a scripted model. It is plain data with a JSON form.
type Script struct {
	// Name is the provider name in the trace; "scripted" when empty.
	Name string `json:"name,omitempty"`
	// Turns are the model's turns, in order.
	Turns []Turn `json:"turns"`
	// Price, when set, makes turns without an explicit cost cost money.
	Price *provider.Price `json:"price,omitempty"`
}

// Turn is one model turn.
type Turn struct {
	// Text is the assistant's text; it streams word by word.
	Text string `json:"text,omitempty"`
	// ToolCalls are the calls the turn makes.
	ToolCalls []Call `json:"tool_calls,omitempty"`
	// Usage is the turn's token usage. When absent it is estimated from
	// the request and the turn, four bytes to a token.
	Usage *provider.Usage `json:"usage,omitempty"`
	// CostUSD is the turn's cost. When absent it is computed from Price,
	// or zero when there is none: a script costs nothing.
	CostUSD *float64 `json:"cost_usd,omitempty"`
	// LatencyMS delays the answer, honouring cancellation.
	LatencyMS int `json:"latency_ms,omitempty"`
	// Fail, when set, makes requests for this turn fail first.
	Fail *Failure `json:"fail,omitempty"`
}

// Call is a scripted tool call.
type Call struct {
	// ID is the call's id; "call_<turn>_<index>" when empty.
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// Failure is an injected provider failure.
type Failure struct {
	Kind         provider.Kind `json:"kind"`
	Status       int           `json:"status,omitempty"`
	Message      string        `json:"message,omitempty"`
	RetryAfterMS int           `json:"retry_after_ms,omitempty"`
	// Times is how many requests for the turn fail before one succeeds;
	// zero means every request fails.
	Times int `json:"times,omitempty"`
}

// Provider plays a Script. It is safe for concurrent use.
type Provider struct {
	script Script

	mu    sync.Mutex  // guards fails
	fails map[int]int // turn → failures served so far
}

var _ provider.Pricer = (*Provider)(nil)

// New returns a provider that plays s. The script is validated here: a
// turn with neither text nor a tool call, a call without a name, arguments
// that are not a JSON object, or a failure without a kind is an error.
func New(s Script) (*Provider, error) {
	if len(s.Turns) == 0 {
		return nil, errors.New("scripted: turns: a script needs at least one turn")
	}
	for i, t := range s.Turns {
		if t.Fail != nil && t.Fail.Kind == "" {
			return nil, fmt.Errorf("scripted: turns[%d].fail.kind: required", i)
		}
		if t.Text == "" && len(t.ToolCalls) == 0 && (t.Fail == nil || t.Fail.Times > 0) {
			return nil, fmt.Errorf("scripted: turns[%d]: a turn needs text or tool calls", i)
		}
		for j, c := range t.ToolCalls {
			if c.Name == "" {
				return nil, fmt.Errorf("scripted: turns[%d].tool_calls[%d].name: required", i, j)
			}
			if len(c.Arguments) > 0 {
				var obj map[string]json.RawMessage
				if err := json.Unmarshal(c.Arguments, &obj); err != nil || obj == nil {
					return nil, fmt.Errorf("scripted: turns[%d].tool_calls[%d].arguments: must be a JSON object", i, j)
				}
			}
		}
	}
	return &Provider{script: s, fails: map[int]int{}}, nil
}

// Parse reads a Script from JSON and returns its provider. Unknown fields
// are errors, so that a misspelt field is not silently ignored.
func Parse(data []byte) (*Provider, error) {
	var s Script
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("scripted: %w", err)
	}
	return New(s)
}

// Load reads a Script from a JSON file.
func Load(path string) (*Provider, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("scripted: %w", err)
	}
	return Parse(data)
}

// Name implements provider.Provider.
func (p *Provider) Name() string {
	if p.script.Name != "" {
		return p.script.Name
	}
	return "scripted"
}

// Price implements provider.Pricer.
func (p *Provider) Price(u provider.Usage) provider.Cost {
	if p.script.Price == nil {
		return provider.Cost{Known: true}
	}
	return p.script.Price.Cost(u)
}

// Complete implements provider.Provider.
func (p *Provider) Complete(ctx context.Context, req *provider.Request, onText func(string)) (*provider.Response, error) {
	n := 0
	for i := range req.Messages {
		if req.Messages[i].Role == provider.RoleAssistant {
			n++
		}
	}
	if n >= len(p.script.Turns) {
		return nil, &provider.Error{Provider: p.Name(), Kind: provider.KindNotRecorded,
			Message: fmt.Sprintf("the script has %d turns and the request asks for turn %d", len(p.script.Turns), n+1)}
	}
	t := &p.script.Turns[n]
	if t.LatencyMS > 0 {
		timer := time.NewTimer(time.Duration(t.LatencyMS) * time.Millisecond)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, &provider.Error{Provider: p.Name(), Kind: provider.KindTimeout, Message: "cancelled while waiting", Err: ctx.Err()}
		case <-timer.C:
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, &provider.Error{Provider: p.Name(), Kind: provider.KindTimeout, Message: "cancelled", Err: err}
	}
	if t.Fail != nil && p.fail(n, t.Fail.Times) {
		f := t.Fail
		return nil, &provider.Error{Provider: p.Name(), Kind: f.Kind, Status: f.Status, Message: f.Message,
			RetryAfter: time.Duration(f.RetryAfterMS) * time.Millisecond}
	}

	resp := &provider.Response{Text: t.Text, StopReason: provider.StopEnd, Model: p.Name()}
	outBytes := len(t.Text)
	for i, c := range t.ToolCalls {
		id := c.ID
		if id == "" {
			id = fmt.Sprintf("call_%d_%d", n+1, i+1)
		}
		args := c.Arguments
		if len(args) == 0 {
			args = json.RawMessage(`{}`)
		}
		resp.ToolCalls = append(resp.ToolCalls, provider.ToolCall{ID: id, Name: c.Name, Arguments: args})
		outBytes += len(c.Name) + len(args)
	}
	if len(resp.ToolCalls) > 0 {
		resp.StopReason = provider.StopToolUse
	}
	if t.Usage != nil {
		resp.Usage = *t.Usage
	} else {
		resp.Usage = provider.Usage{InputTokens: provider.EstimateInput(req), OutputTokens: provider.CountTextTokens(outBytes)}
	}
	if t.CostUSD != nil {
		resp.Cost = provider.Cost{USD: *t.CostUSD, Known: true}
	} else {
		resp.Cost = p.Price(resp.Usage)
	}
	if onText != nil && t.Text != "" {
		for _, w := range splitWords(t.Text) {
			onText(w)
		}
	}
	return resp, nil
}

// fail reports whether this request for turn n should fail, counting it.
func (p *Provider) fail(n, times int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if times > 0 && p.fails[n] >= times {
		return false
	}
	p.fails[n]++
	return true
}

// splitWords cuts s after each run of spaces, so that the pieces
// concatenate to s.
func splitWords(s string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] == ' ' && (i+1 == len(s) || s[i+1] != ' ') {
			out = append(out, s[start:i+1])
			start = i + 1
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}
