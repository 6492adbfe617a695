package chat

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"hash/fnv"
	"io"
	"strconv"
	"strings"

	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/internal/bound"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/internal/sse"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/internal/wire"
)

// Turn is a streamed turn, assembled.
type Turn struct {
	Text      string
	ToolCalls []provider.ToolCall
	// Dropped names the calls the stream stopped inside.
	Dropped []string
	Stop    provider.StopReason
	Model   string
	// Usage is the last usage report; UsageSeen says whether there was
	// one.
	Usage     provider.Usage
	UsageSeen bool
	// Cost is the cost the server reported (OpenRouter's usage.cost), or
	// nil.
	Cost *float64
}

// chunk is the part of a chat.completion.chunk the decoder reads;
// everything else (obfuscation, provider, native_finish_reason, x_groq,
// token_ids, logprobs, …) is skipped.
type chunk struct {
	ID      string          `json:"id"`
	Model   string          `json:"model"`
	Choices []choice        `json:"choices"`
	Usage   *usage          `json:"usage"`
	Error   json.RawMessage `json:"error"`
}

type choice struct {
	Index int `json:"index"`
	Delta struct {
		// Content is "" for both null and "": either means no text.
		Content   string      `json:"content"`
		ToolCalls []toolDelta `json:"tool_calls"`
	} `json:"delta"`
	FinishReason string `json:"finish_reason"`
}

type toolDelta struct {
	// Index is nil when a server leaves it out.
	Index    *int   `json:"index"`
	ID       string `json:"id"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type usage struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	CachedTokens        int64 `json:"cached_tokens"` // Together puts it here
	PromptTokensDetails *struct {
		CachedTokens     int64 `json:"cached_tokens"`
		CacheWriteTokens int64 `json:"cache_write_tokens"` // OpenRouter
	} `json:"prompt_tokens_details"`
	Cost *float64 `json:"cost"` // OpenRouter
}

// call is a tool call being assembled.
type call struct {
	index int // the wire index, or -1 when the server sent none
	id    string
	name  string
	args  []byte
}

// decoder assembles one turn.
type decoder struct {
	onText func(string)
	text   strings.Builder
	calls  []call
	finish string
	id     string // the completion id, for synthetic tool call ids
	turn   Turn
	size   bound.Turn
}

// Decode reads a Chat Completions event stream up to its [DONE] and
// returns the turn, passing each text delta to onText (when not nil) as
// it arrives.
//
// An error chunk ({"error":…} in a data event, or llama.cpp's error
// field), a stream that ends before [DONE] and a turn past a bound on a
// response (provider.MaxResponseBytes and its neighbours) are returned as
// a *provider.Error without its Provider, and nothing more is read; a
// failure of r is returned as is.
func Decode(r io.Reader, onText func(string)) (*Turn, error) {
	d := decoder{onText: onText}
	sr := sse.NewReader(r)
	for {
		ev, err := sr.Next()
		if err == io.EOF {
			return nil, &provider.Error{Kind: provider.KindTruncated, Message: "stream ended before [DONE]"}
		}
		if err != nil {
			return nil, err
		}
		done, err := d.event(ev)
		if err != nil {
			return nil, err
		}
		if done {
			return d.finishTurn(), nil
		}
	}
}

// event applies one event; done reports the [DONE] terminator.
func (d *decoder) event(ev sse.Event) (done bool, err error) {
	for _, f := range ev.Fields {
		if f.Name == "error" {
			return false, fieldError(f.Value)
		}
	}
	if len(ev.Data) == 0 {
		return false, nil
	}
	if string(ev.Data) == "[DONE]" {
		return true, nil
	}
	var c chunk
	if err := json.Unmarshal(ev.Data, &c); err != nil {
		return false, &provider.Error{Kind: provider.KindMalformed, Message: "chunk is not JSON", Err: err}
	}
	if len(c.Error) > 0 && string(c.Error) != "null" {
		return false, chunkError(ev.Data)
	}
	if d.id == "" {
		d.id = c.ID
	}
	if c.Model != "" {
		d.turn.Model = c.Model
	}
	if c.Usage != nil {
		d.setUsage(c.Usage)
	}
	for i := range c.Choices {
		ch := &c.Choices[i]
		if ch.Index != 0 {
			continue // only the first choice is asked for
		}
		if ch.Delta.Content != "" {
			if err := d.size.Add(len(ch.Delta.Content)); err != nil {
				return false, err
			}
			d.text.WriteString(ch.Delta.Content)
			if d.onText != nil {
				d.onText(ch.Delta.Content)
			}
		}
		for j := range ch.Delta.ToolCalls {
			if err := d.toolDelta(&ch.Delta.ToolCalls[j]); err != nil {
				return false, err
			}
		}
		switch ch.FinishReason {
		case "":
		case "error":
			// OpenRouter's error chunk carries an error object, caught
			// above; one without is still a failed turn.
			return false, wire.InStream(wire.APIError{Message: `finish_reason "error"`})
		default:
			d.finish = ch.FinishReason
		}
	}
	return false, nil
}

// chunkError classifies an error chunk: OpenAI's {"error":{…}} or
// OpenRouter's chunk with a top-level error.
func chunkError(data []byte) error {
	e, ok := wire.ParseError(data)
	if !ok {
		e = wire.APIError{Message: "error chunk"}
	}
	return wire.InStream(e)
}

// fieldError classifies llama.cpp's non-standard error field. Its text
// is passed on whole: wire cleans it of the key before it cuts it, since
// a cut first could leave most of a key that redaction then misses.
func fieldError(value []byte) error {
	e, ok := wire.ParseErrorObject(value)
	if !ok {
		var text string
		if json.Unmarshal(value, &text) != nil {
			text = string(value)
		}
		e = wire.APIError{Message: text}
	}
	return wire.InStream(e)
}

// setUsage records a usage report. The last report wins; reports are
// never added together.
func (d *decoder) setUsage(u *usage) {
	nu := provider.Usage{
		InputTokens:     u.PromptTokens,
		OutputTokens:    u.CompletionTokens,
		CacheReadTokens: u.CachedTokens,
	}
	if det := u.PromptTokensDetails; det != nil {
		if det.CachedTokens != 0 {
			nu.CacheReadTokens = det.CachedTokens
		}
		nu.CacheWriteTokens = det.CacheWriteTokens
	}
	d.turn.Usage, d.turn.UsageSeen = nu, true
	d.turn.Cost = u.Cost
}

// toolDelta applies one tool call fragment. Fragments are keyed by index;
// an id is never taken to start a new call, because some servers repeat
// it on every fragment. A fragment with a new id and a name on an index
// whose call already has arguments starts a new call: some servers reuse
// one index for several calls. Every call, and every byte of its id, name
// and arguments, is counted against the bounds on a response.
func (d *decoder) toolDelta(td *toolDelta) error {
	var c *call
	switch {
	case td.Index != nil:
		for i := len(d.calls) - 1; i >= 0; i-- {
			if d.calls[i].index == *td.Index {
				c = &d.calls[i]
				break
			}
		}
		if c != nil && td.ID != "" && c.id != "" && td.ID != c.id && td.Function.Name != "" && len(c.args) > 0 {
			c = nil
		}
	case td.ID != "":
		for i := range d.calls {
			if d.calls[i].id == td.ID {
				c = &d.calls[i]
				break
			}
		}
	case td.Function.Name == "" && len(d.calls) > 0:
		c = &d.calls[len(d.calls)-1]
	}
	if c == nil {
		if err := d.size.Call(); err != nil {
			return err
		}
		index := -1
		if td.Index != nil {
			index = *td.Index
		}
		d.calls = append(d.calls, call{index: index})
		c = &d.calls[len(d.calls)-1]
	}
	if c.id == "" && td.ID != "" {
		if err := d.size.Add(len(td.ID)); err != nil {
			return err
		}
		c.id = td.ID
	}
	if c.name == "" && td.Function.Name != "" {
		if err := d.size.Add(len(td.Function.Name)); err != nil {
			return err
		}
		c.name = td.Function.Name
	}
	if err := d.size.Args(len(c.args), len(td.Function.Arguments)); err != nil {
		return err
	}
	c.args = append(c.args, td.Function.Arguments...)
	return nil
}

// finishTurn builds the turn at [DONE].
//
// Tool calls decide a tool turn, whatever finish_reason says. A turn cut
// by its output cap whose last call's arguments are empty or do not parse
// has that call dropped (its name kept in Dropped), and keeps
// StopMaxTokens, so the harness never runs a half-written call: a
// complete call's arguments are an object, "{}" at least.
func (d *decoder) finishTurn() *Turn {
	t := &d.turn
	t.Text = d.text.String()
	switch d.finish {
	case "length":
		t.Stop = provider.StopMaxTokens
	case "", "stop", "tool_calls", "function_call":
		t.Stop = provider.StopEnd
	default:
		t.Stop = provider.StopOther
	}
	calls := d.calls
	if t.Stop == provider.StopMaxTokens && len(calls) > 0 {
		last := &calls[len(calls)-1]
		if args := bytes.TrimSpace(last.args); len(args) == 0 || !json.Valid(args) {
			t.Dropped = append(t.Dropped, last.name)
			calls = calls[:len(calls)-1]
		}
	}
	seen := make(map[string]bool, len(calls))
	for i, c := range calls {
		id := c.id
		if id == "" || seen[id] {
			id = d.syntheticID(i, &c)
		}
		seen[id] = true
		args := json.RawMessage(c.args)
		if len(args) == 0 {
			args = json.RawMessage("{}")
		}
		t.ToolCalls = append(t.ToolCalls, provider.ToolCall{ID: id, Name: c.name, Arguments: args})
	}
	if len(t.ToolCalls) > 0 && t.Stop == provider.StopEnd {
		t.Stop = provider.StopToolUse
	}
	return t
}

// syntheticID returns a stable id for a call that came without one, or
// with the id of an earlier call: the same stream always gives the same
// id, and the completion id keeps it apart from other turns' ids.
func (d *decoder) syntheticID(pos int, c *call) string {
	h := fnv.New64a()
	h.Write([]byte(d.id))
	h.Write([]byte{0})
	h.Write([]byte(strconv.Itoa(pos)))
	h.Write([]byte{0})
	h.Write([]byte(c.name))
	h.Write([]byte{0})
	h.Write(c.args)
	return "call_" + hex.EncodeToString(h.Sum(nil))
}
