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
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/internal/bound"
)

// Script is a scripted model. It is plain data with a JSON form.
type Script struct {
	// Name is the provider name in the trace; "scripted" when empty.
	Name string `json:"name,omitempty"`
	// Turns are the model's turns, in order.
	Turns []Turn `json:"turns"`
	// Price, when set, makes turns without an explicit cost cost money.
	Price *provider.Price `json:"price,omitempty"`
	// ContextWindow, when set, is the context window the provider says
	// its model has (provider.Limiter), in tokens. A request whose input
	// passes it is refused as a vendor refuses one: HTTP 400, kind
	// context_overflow, with OpenAI's message.
	ContextWindow int64 `json:"context_window,omitempty"`
	// Counter counts a request's input, as the model's tokenizer would:
	// against ContextWindow, and as the input a turn without its own Usage
	// reports. Nil means provider.EstimateInput. It has no JSON form.
	Counter provider.TokenCounter `json:"-"`
	// Agents script the agents of a tree: a request for an agent whose
	// path matches an entry's pattern gets that entry's turns, the first
	// match winning; the root, and an agent no entry matches, get Turns.
	Agents []AgentScript `json:"agents,omitempty"`
}

// AgentScript is the model of the agents whose paths match Path, a
// pattern of path.Match ("root/*" matches every child of the root,
// "root/*/*" every grandchild). In its turns' text and call arguments,
// {agent} stands for the agent's path with each "/" made "-", so that
// siblings playing one script can name their own files.
type AgentScript struct {
	Path  string `json:"path"`
	Turns []Turn `json:"turns"`
}

// Turn is one model turn.
type Turn struct {
	// Text is the assistant's text; it streams word by word.
	Text string `json:"text,omitempty"`
	// ToolCalls are the calls the turn makes.
	ToolCalls []Call `json:"tool_calls,omitempty"`
	// Usage is the turn's token usage. When absent it is estimated from
	// the request and the turn (provider.EstimateInput and
	// provider.CountTextTokens).
	Usage *provider.Usage `json:"usage,omitempty"`
	// CostUSD is the turn's cost. When absent it is computed from Price,
	// or zero when there is none: a script costs nothing.
	CostUSD *float64 `json:"cost_usd,omitempty"`
	// LatencyMS delays the answer, honouring cancellation.
	LatencyMS int `json:"latency_ms,omitempty"`
	// Fail, when set, makes requests for this turn fail first.
	Fail *Failure `json:"fail,omitempty"`
	// Truncated makes the turn one its output cap cut: its stop reason is
	// provider.StopMaxTokens.
	Truncated bool `json:"truncated,omitempty"`
	// DroppedCalls names the calls the cut left unfinished, as a vendor
	// reports them in Response.DroppedCalls; it needs Truncated.
	DroppedCalls []string `json:"dropped_calls,omitempty"`
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

	mu    sync.Mutex     // guards fails
	fails map[string]int // agent and turn → failures served so far
}

var _ provider.Pricer = (*Provider)(nil)

// New returns a provider that plays s. The script is validated here: a
// turn with neither text nor a tool call (nor a dropped call), dropped
// calls in a turn that is not truncated, a call without a name, arguments
// that are not a JSON object, a failure without a kind, or a turn past a
// bound on a response (provider.MaxResponseBytes and its neighbours) is
// an error.
func New(s Script) (*Provider, error) {
	if len(s.Turns) == 0 {
		return nil, errors.New("scripted: turns: a script needs at least one turn")
	}
	if err := checkTurns("turns", s.Turns); err != nil {
		return nil, err
	}
	for i, a := range s.Agents {
		if _, err := path.Match(a.Path, "root"); err != nil || a.Path == "" {
			return nil, fmt.Errorf("scripted: agents[%d].path: %q is not a path pattern", i, a.Path)
		}
		if len(a.Turns) == 0 {
			return nil, fmt.Errorf("scripted: agents[%d].turns: a script needs at least one turn", i)
		}
		if err := checkTurns(fmt.Sprintf("agents[%d].turns", i), a.Turns); err != nil {
			return nil, err
		}
	}
	return &Provider{script: s, fails: map[string]int{}}, nil
}

// checkTurns validates the turns of a script; field names them in errors.
func checkTurns(field string, turns []Turn) error {
	for i, t := range turns {
		if t.Fail != nil && t.Fail.Kind == "" {
			return fmt.Errorf("scripted: %s[%d].fail.kind: required", field, i)
		}
		if t.Text == "" && len(t.ToolCalls) == 0 && len(t.DroppedCalls) == 0 && (t.Fail == nil || t.Fail.Times > 0) {
			return fmt.Errorf("scripted: %s[%d]: a turn needs text, tool calls or dropped calls", field, i)
		}
		if len(t.DroppedCalls) > 0 && !t.Truncated {
			return fmt.Errorf("scripted: %s[%d].dropped_calls: needs truncated: only a cut turn drops a call", field, i)
		}
		for j, c := range t.ToolCalls {
			if c.Name == "" {
				return fmt.Errorf("scripted: %s[%d].tool_calls[%d].name: required", field, i, j)
			}
			if len(c.Arguments) > 0 {
				var obj map[string]json.RawMessage
				if err := json.Unmarshal(c.Arguments, &obj); err != nil || obj == nil {
					return fmt.Errorf("scripted: %s[%d].tool_calls[%d].arguments: must be a JSON object", field, i, j)
				}
			}
		}
		if err := bound.Check(t.response(i)); err != nil {
			return fmt.Errorf("scripted: %s[%d]: %s", field, i, provider.AsError(err).Message)
		}
	}
	return nil
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
	n := req.Step - 1
	if req.Step <= 0 {
		n = 0
		for i := range req.Messages {
			if req.Messages[i].Role == provider.RoleAssistant {
				n++
			}
		}
	}
	turns := p.turns(req.Agent)
	if n >= len(turns) {
		return nil, &provider.Error{Provider: p.Name(), Kind: provider.KindNotRecorded,
			Message: fmt.Sprintf("the script of agent %q has %d turns and the request asks for turn %d", req.Agent, len(turns), n+1)}
	}
	t := &turns[n]
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
	if w := p.script.ContextWindow; w > 0 {
		in := provider.EstimateInput(req)
		if p.script.Counter != nil {
			in = p.script.Counter.CountInput(req)
		}
		if in > w {
			return nil, &provider.Error{Provider: p.Name(), Kind: provider.KindContextOverflow, Status: 400,
				Message: fmt.Sprintf("This model's maximum context length is %d tokens. However, your messages resulted in %d tokens. Please reduce the length of the messages.", w, in)}
		}
	}
	if t.Fail != nil && p.fail(req.Agent, n, t.Fail.Times) {
		f := t.Fail
		return nil, &provider.Error{Provider: p.Name(), Kind: f.Kind, Status: f.Status, Message: f.Message,
			RetryAfter: time.Duration(f.RetryAfterMS) * time.Millisecond}
	}

	resp := t.response(n)
	resp.Model = p.Name()
	if req.Agent != "" {
		expand(resp, strings.ReplaceAll(req.Agent, "/", "-"))
	}
	if t.Usage != nil {
		resp.Usage = *t.Usage
		// A server stops at the request's output cap, whatever the turn
		// would have said.
		if m := req.MaxOutputTokens; m > 0 && resp.Usage.OutputTokens > m {
			resp.Usage.OutputTokens = m
		}
	} else {
		out := provider.CountTextTokens(resp.Text)
		for _, c := range resp.ToolCalls {
			out += provider.CountTextTokens(c.Name) + provider.CountTextTokens(string(c.Arguments))
		}
		in := provider.EstimateInput(req)
		if p.script.Counter != nil {
			in = p.script.Counter.CountInput(req)
		}
		resp.Usage = provider.Usage{InputTokens: in, OutputTokens: out}
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

// response returns the text, tool calls and stop reason of turn t, the
// n-th turn from 0.
func (t *Turn) response(n int) *provider.Response {
	resp := &provider.Response{Text: t.Text, StopReason: provider.StopEnd}
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
	}
	if len(resp.ToolCalls) > 0 {
		resp.StopReason = provider.StopToolUse
	}
	if t.Truncated {
		resp.StopReason = provider.StopMaxTokens
		resp.DroppedCalls = append([]string(nil), t.DroppedCalls...)
	}
	return resp
}

// turns returns the turns of the agent at path.
func (p *Provider) turns(agent string) []Turn {
	if agent != "" {
		for _, a := range p.script.Agents {
			if ok, _ := path.Match(a.Path, agent); ok {
				return a.Turns
			}
		}
	}
	return p.script.Turns
}

// expand writes the agent's name for {agent} in a turn's text and calls.
func expand(resp *provider.Response, name string) {
	const hole = "{agent}"
	resp.Text = strings.ReplaceAll(resp.Text, hole, name)
	for i := range resp.ToolCalls {
		c := &resp.ToolCalls[i]
		if strings.Contains(string(c.Arguments), hole) {
			c.Arguments = json.RawMessage(strings.ReplaceAll(string(c.Arguments), hole, name))
		}
	}
}

// fail reports whether this request of the agent for turn n should fail,
// counting it.
func (p *Provider) fail(agent string, n, times int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	key := agent + "#" + strconv.Itoa(n)
	if times > 0 && p.fails[key] >= times {
		return false
	}
	p.fails[key]++
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

// Limits implements provider.Limiter when the script states a context
// window.
func (p *Provider) Limits() (provider.Limits, bool) {
	if p.script.ContextWindow <= 0 {
		return provider.Limits{}, false
	}
	return provider.Limits{ContextWindow: p.script.ContextWindow}, true
}
