// Package replay records a provider's answers to a cassette and plays them
// back offline. This is how a user turns one run against a real model into
// a test that needs no network and no key.
//
// A cassette answers by the whole content of a request, not by a counter:
// the request's canonical JSON is the key. Requests recorded more than once
// are answered in recorded order, then the last answer repeats. A request
// the cassette lacks is a loud, non-retryable error of kind
// provider.KindNotRecorded, never an empty answer. A recorded response
// past a bound on a response (provider.MaxResponseBytes and its
// neighbours) is refused as the live provider would refuse it, with
// provider.KindResponseTooLarge.
package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/internal/bound"
)

// Version is the cassette format this code writes and reads. A cassette of
// another version is refused.
const Version = 1

// Cassette is a recording: requests and what answered them.
type Cassette struct {
	Version int `json:"version"`
	// Provider is the recorded provider's name.
	Provider string  `json:"provider"`
	Entries  []Entry `json:"entries"`
}

// Entry is one recorded exchange: a response or an error.
type Entry struct {
	Request  provider.Request   `json:"request"`
	Response *provider.Response `json:"response,omitempty"`
	Error    *Failure           `json:"error,omitempty"`
}

// Failure is a recorded provider error.
type Failure struct {
	Kind         provider.Kind `json:"kind"`
	Status       int           `json:"status,omitempty"`
	Message      string        `json:"message,omitempty"`
	RetryAfterMS int64         `json:"retry_after_ms,omitempty"`
}

// Replay answers requests from a cassette. It is safe for concurrent use.
type Replay struct {
	name    string
	entries map[string][]Entry // canonical request → recorded answers
	order   []string           // keys in first-recorded order, for diagnostics

	mu     sync.Mutex     // guards served
	served map[string]int // key → answers served
}

// New returns a provider that plays c back.
func New(c *Cassette) (*Replay, error) {
	if c.Version != Version {
		return nil, fmt.Errorf("replay: cassette version %d; this code reads version %d", c.Version, Version)
	}
	r := &Replay{name: "replay(" + c.Provider + ")", entries: map[string][]Entry{}, served: map[string]int{}}
	for i := range c.Entries {
		e := c.Entries[i]
		if (e.Response == nil) == (e.Error == nil) {
			return nil, fmt.Errorf("replay: entries[%d]: needs exactly one of response and error", i)
		}
		k, err := Key(&e.Request)
		if err != nil {
			return nil, fmt.Errorf("replay: entries[%d]: %w", i, err)
		}
		if _, ok := r.entries[k]; !ok {
			r.order = append(r.order, k)
		}
		r.entries[k] = append(r.entries[k], e)
	}
	return r, nil
}

// Load reads a cassette file and returns its player.
func Load(path string) (*Replay, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	var c Cassette
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("replay: %s: %w", path, err)
	}
	return New(&c)
}

// Name implements provider.Provider.
func (r *Replay) Name() string { return r.name }

// Complete implements provider.Provider.
func (r *Replay) Complete(ctx context.Context, req *provider.Request, onText func(string)) (*provider.Response, error) {
	if err := ctx.Err(); err != nil {
		return nil, &provider.Error{Provider: r.name, Kind: provider.KindTimeout, Message: "cancelled", Err: err}
	}
	k, err := Key(req)
	if err != nil {
		return nil, &provider.Error{Provider: r.name, Kind: provider.KindBadRequest, Message: err.Error()}
	}
	answers, ok := r.entries[k]
	if !ok {
		return nil, &provider.Error{Provider: r.name, Kind: provider.KindNotRecorded, Message: r.miss(req)}
	}
	r.mu.Lock()
	i := r.served[k]
	if i < len(answers)-1 {
		r.served[k] = i + 1
	} else {
		i = len(answers) - 1
	}
	r.mu.Unlock()
	e := answers[i]
	if e.Error != nil {
		return nil, &provider.Error{Provider: r.name, Kind: e.Error.Kind, Status: e.Error.Status, Message: e.Error.Message,
			RetryAfter: time.Duration(e.Error.RetryAfterMS) * time.Millisecond}
	}
	if err := bound.Check(e.Response); err != nil {
		pe := provider.AsError(err)
		pe.Provider = r.name
		return nil, pe
	}
	resp := *e.Response
	resp.ToolCalls = append([]provider.ToolCall(nil), e.Response.ToolCalls...)
	if onText != nil && resp.Text != "" {
		onText(resp.Text)
	}
	return &resp, nil
}

// miss explains a request the cassette lacks by naming where it departs
// from the closest recorded one.
func (r *Replay) miss(req *provider.Request) string {
	msg := fmt.Sprintf("no recorded answer for this request (%d messages)", len(req.Messages))
	best, bestAt := "", -1
	for _, k := range r.order {
		rec := &r.entries[k][0].Request
		at := commonPrefix(rec, req)
		if at > bestAt {
			best, bestAt = k, at
		}
	}
	if best == "" {
		return msg + "; the cassette is empty"
	}
	rec := &r.entries[best][0].Request
	switch {
	case rec.System != req.System:
		return msg + "; the system prompt differs from every recording"
	case bestAt < len(req.Messages) && bestAt < len(rec.Messages):
		return fmt.Sprintf("%s; the closest recording (%d messages) differs at message %d", msg, len(rec.Messages), bestAt)
	case len(req.Messages) != len(rec.Messages):
		return fmt.Sprintf("%s; the closest recording has %d messages", msg, len(rec.Messages))
	}
	return msg + "; the closest recording differs in its tools or output cap"
}

// commonPrefix counts the leading messages a and b share; -1 when their
// system prompts differ.
func commonPrefix(a, b *provider.Request) int {
	if a.System != b.System {
		return -1
	}
	n := 0
	for n < len(a.Messages) && n < len(b.Messages) {
		x, _ := json.Marshal(a.Messages[n])
		y, _ := json.Marshal(b.Messages[n])
		if !bytes.Equal(x, y) {
			break
		}
		n++
	}
	return n
}

// Key is the canonical form of a request: its JSON with every embedded
// JSON document (tool arguments and parameter schemas) compacted, so that
// whitespace does not change the key.
func Key(req *provider.Request) (string, error) {
	c := *req
	c.Messages = make([]provider.Message, len(req.Messages))
	for i, m := range req.Messages {
		if len(m.ToolCalls) > 0 {
			calls := make([]provider.ToolCall, len(m.ToolCalls))
			for j, tc := range m.ToolCalls {
				tc.Arguments = compactJSON(tc.Arguments)
				calls[j] = tc
			}
			m.ToolCalls = calls
		}
		c.Messages[i] = m
	}
	c.Tools = make([]provider.ToolSpec, len(req.Tools))
	for i, t := range req.Tools {
		t.Parameters = compactJSON(t.Parameters)
		c.Tools[i] = t
	}
	b, err := json.Marshal(&c)
	if err != nil {
		return "", fmt.Errorf("replay: request cannot be encoded: %w", err)
	}
	return string(b), nil
}

// compactJSON compacts raw; raw that is not valid JSON is kept as a JSON
// string so the key still encodes.
func compactJSON(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return raw
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		s, _ := json.Marshal(string(raw))
		return s
	}
	return b.Bytes()
}

// Recorder wraps a provider and records every exchange. It is safe for
// concurrent use.
type Recorder struct {
	p provider.Provider

	mu      sync.Mutex // guards entries
	entries []Entry
}

// NewRecorder wraps p.
func NewRecorder(p provider.Provider) *Recorder { return &Recorder{p: p} }

// Name implements provider.Provider; the recorder is transparent.
func (r *Recorder) Name() string { return r.p.Name() }

// Price implements provider.Pricer when the wrapped provider does, and
// reports an unknown cost otherwise.
func (r *Recorder) Price(u provider.Usage) provider.Cost {
	if pr, ok := r.p.(provider.Pricer); ok {
		return pr.Price(u)
	}
	return provider.Cost{}
}

// Complete implements provider.Provider: it calls the wrapped provider and
// records the exchange. Cancellations are not recorded: they say nothing
// about the model.
func (r *Recorder) Complete(ctx context.Context, req *provider.Request, onText func(string)) (*provider.Response, error) {
	resp, err := r.p.Complete(ctx, req, onText)
	e := Entry{Request: cloneRequest(req)}
	switch {
	case err == nil:
		c := *resp
		e.Response = &c
	case ctx.Err() != nil:
		return resp, err
	default:
		pe := provider.AsError(err)
		if pe == nil {
			pe = &provider.Error{Kind: provider.KindTransport, Message: err.Error()}
		}
		e.Error = &Failure{Kind: pe.Kind, Status: pe.Status, Message: pe.Message, RetryAfterMS: pe.RetryAfter.Milliseconds()}
	}
	r.mu.Lock()
	r.entries = append(r.entries, e)
	r.mu.Unlock()
	return resp, err
}

// Cassette returns what has been recorded so far.
func (r *Recorder) Cassette() *Cassette {
	r.mu.Lock()
	defer r.mu.Unlock()
	return &Cassette{Version: Version, Provider: r.p.Name(), Entries: append([]Entry(nil), r.entries...)}
}

// Save writes the cassette to path as indented JSON, atomically.
func (r *Recorder) Save(path string) error {
	data, err := json.MarshalIndent(r.Cassette(), "", "  ")
	if err != nil {
		return fmt.Errorf("replay: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("replay: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("replay: %w", err)
	}
	return nil
}

func cloneRequest(req *provider.Request) provider.Request {
	c := *req
	c.Messages = append([]provider.Message(nil), req.Messages...)
	c.Tools = append([]provider.ToolSpec(nil), req.Tools...)
	return c
}
