package anthropic

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"

	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/internal/bound"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/internal/sse"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/internal/wire"
)

// event is the part of a Messages stream event the decoder reads.
type event struct {
	Type    string `json:"type"`
	Index   int    `json:"index"`
	Message *struct {
		Model string `json:"model"`
		Usage *usage `json:"usage"`
	} `json:"message"`
	ContentBlock *struct {
		Type  string          `json:"type"`
		ID    string          `json:"id"`
		Name  string          `json:"name"`
		Text  string          `json:"text"`
		Input json.RawMessage `json:"input"`
	} `json:"content_block"`
	Delta *struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		PartialJSON string `json:"partial_json"`
		StopReason  string `json:"stop_reason"`
	} `json:"delta"`
	Usage *usage `json:"usage"`
}

// usage is a usage report; a field that is absent leaves the value an
// earlier report set.
type usage struct {
	InputTokens              *int64 `json:"input_tokens"`
	OutputTokens             *int64 `json:"output_tokens"`
	CacheCreationInputTokens *int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     *int64 `json:"cache_read_input_tokens"`
	CacheCreation            *struct {
		Ephemeral5m *int64 `json:"ephemeral_5m_input_tokens"`
		Ephemeral1h *int64 `json:"ephemeral_1h_input_tokens"`
	} `json:"cache_creation"`
}

// wireUsage is a turn's usage as the Messages API counts it: InputTokens
// excludes the cache counts, and cache writes are split by lifetime when
// the API says so.
type wireUsage struct {
	InputTokens      int64
	OutputTokens     int64
	CacheReadTokens  int64
	CacheWriteTokens int64
	// CacheWrite1hTokens is the part of CacheWriteTokens written with a
	// one-hour lifetime; the rest are five-minute writes.
	CacheWrite1hTokens int64
}

// normalise returns u in the harness's shape, whose InputTokens include
// the cache counts.
func (u wireUsage) normalise() provider.Usage {
	return provider.Usage{
		InputTokens:      u.InputTokens + u.CacheReadTokens + u.CacheWriteTokens,
		OutputTokens:     u.OutputTokens,
		CacheReadTokens:  u.CacheReadTokens,
		CacheWriteTokens: u.CacheWriteTokens,
	}
}

// wireCost returns what u costs at p, by Anthropic's formula:
//
//	input·Input + 5m write·CacheWrite + 1h write·2·Input
//	  + read·CacheRead + output·Output
//
// where a zero CacheRead or CacheWrite means the Input price, as for
// [provider.Price], at the prices p has for the turn's whole prompt
// (input and cache tokens: a long prompt may be priced higher).
func wireCost(p provider.Price, u wireUsage) provider.Cost {
	p = p.At(u.normalise().InputTokens)
	read, write := p.CacheRead, p.CacheWrite
	if read == 0 {
		read = p.Input
	}
	if write == 0 {
		write = p.Input
	}
	long := min(max(u.CacheWrite1hTokens, 0), u.CacheWriteTokens)
	usd := float64(u.InputTokens)*p.Input +
		float64(u.CacheWriteTokens-long)*write +
		float64(long)*2*p.Input +
		float64(u.CacheReadTokens)*read +
		float64(u.OutputTokens)*p.Output
	return provider.Cost{USD: usd / 1e6, Known: true}
}

// merge applies a report: fields present replace, fields absent keep.
func (u *wireUsage) merge(r *usage) {
	set := func(dst *int64, src *int64) {
		if src != nil {
			*dst = *src
		}
	}
	set(&u.InputTokens, r.InputTokens)
	set(&u.OutputTokens, r.OutputTokens)
	set(&u.CacheWriteTokens, r.CacheCreationInputTokens)
	set(&u.CacheReadTokens, r.CacheReadInputTokens)
	if r.CacheCreation != nil {
		set(&u.CacheWrite1hTokens, r.CacheCreation.Ephemeral1h)
	}
}

// turn is an assembled Messages turn.
type turn struct {
	text      string
	calls     []provider.ToolCall
	dropped   []string // the names of the calls the stream stopped inside
	stop      provider.StopReason
	model     string
	usage     wireUsage
	usageSeen bool
}

// blockState is a tool_use block being assembled. Other blocks keep no
// state: their text is passed on as it comes.
type blockState struct {
	index   int
	id      string
	name    string
	input   json.RawMessage // the start event's input, used only when no fragments came
	args    []byte
	stopped bool // its content_block_stop came
}

type decoder struct {
	onText func(string)
	text   strings.Builder
	blocks []blockState
	stop   string
	t      turn
	size   bound.Turn
}

// decode reads a Messages event stream up to message_stop and returns the
// turn, passing each text delta to onText (when not nil) as it arrives.
// An error event, a stream that ends before message_stop and a turn past
// a bound on a response (provider.MaxResponseBytes and its neighbours)
// are returned as a *provider.Error without its Provider, and nothing
// more is read; a failure of r is returned as is.
func decode(r io.Reader, onText func(string)) (*turn, error) {
	d := decoder{onText: onText}
	sr := sse.NewReader(r)
	for {
		ev, err := sr.Next()
		if err == io.EOF {
			return nil, &provider.Error{Kind: provider.KindTruncated, Message: "stream ended before message_stop"}
		}
		if err != nil {
			return nil, err
		}
		done, err := d.event(ev)
		if err != nil {
			return nil, err
		}
		if done {
			return d.finish(), nil
		}
	}
}

// event applies one event; done reports message_stop.
func (d *decoder) event(ev sse.Event) (done bool, err error) {
	if len(ev.Data) == 0 || string(ev.Data) == "[DONE]" {
		return false, nil
	}
	if ev.Type == "error" {
		return false, streamError(ev.Data)
	}
	if ev.Type == "ping" {
		return false, nil
	}
	var e event
	if err := json.Unmarshal(ev.Data, &e); err != nil {
		return false, &provider.Error{Kind: provider.KindMalformed, Message: "event is not JSON", Err: err}
	}
	typ := ev.Type
	if typ == "" {
		typ = e.Type
	}
	switch typ {
	case "message_start":
		if e.Message != nil {
			d.t.model = e.Message.Model
			if e.Message.Usage != nil {
				d.t.usage.merge(e.Message.Usage)
				d.t.usageSeen = true
			}
		}
	case "content_block_start":
		if cb := e.ContentBlock; cb != nil {
			switch cb.Type {
			case "tool_use":
				return false, d.startTool(e.Index, cb.ID, cb.Name, cb.Input)
			case "text":
				return false, d.emit(cb.Text)
			}
		}
	case "content_block_delta":
		if dl := e.Delta; dl != nil {
			switch dl.Type {
			case "text_delta":
				return false, d.emit(dl.Text)
			case "input_json_delta":
				// Input for a block that did not start as tool_use has no
				// call to go to, and is dropped.
				if b := d.block(e.Index); b != nil {
					if err := d.size.Args(len(b.args), len(dl.PartialJSON)); err != nil {
						return false, err
					}
					b.args = append(b.args, dl.PartialJSON...)
				}
			}
		}
	case "content_block_stop":
		if b := d.block(e.Index); b != nil {
			b.stopped = true
		}
	case "message_delta":
		if e.Delta != nil && e.Delta.StopReason != "" {
			d.stop = e.Delta.StopReason
		}
		if e.Usage != nil {
			d.t.usage.merge(e.Usage)
			d.t.usageSeen = true
		}
	case "message_stop":
		return true, nil
	case "error":
		return false, streamError(ev.Data)
	}
	return false, nil
}

// streamError classifies an error event by its error type.
func streamError(data []byte) error {
	e, ok := wire.ParseError(data)
	if !ok {
		e = wire.APIError{Message: "error event"}
	}
	return wire.InStream(e)
}

// emit passes on a text delta.
func (d *decoder) emit(s string) error {
	if s == "" {
		return nil
	}
	if err := d.size.Add(len(s)); err != nil {
		return err
	}
	d.text.WriteString(s)
	if d.onText != nil {
		d.onText(s)
	}
	return nil
}

// startTool starts the tool_use block with the given index, or restarts
// it when the index was seen before.
func (d *decoder) startTool(index int, id, name string, input json.RawMessage) error {
	if err := d.size.Add(len(id) + len(name) + len(input)); err != nil {
		return err
	}
	b := d.block(index)
	if b == nil {
		if err := d.size.Call(); err != nil {
			return err
		}
		d.blocks = append(d.blocks, blockState{index: index})
		b = &d.blocks[len(d.blocks)-1]
	}
	b.id, b.name, b.input, b.stopped = id, name, input, false
	return nil
}

// block returns the tool_use block with the given index, or nil.
func (d *decoder) block(index int) *blockState {
	for i := range d.blocks {
		if d.blocks[i].index == index {
			return &d.blocks[i]
		}
	}
	return nil
}

// finish builds the turn at message_stop.
//
// A tool call's input is its concatenated fragments, {} when there were
// none (or only ""). A call the stream stopped inside is dropped, so the
// harness never runs a half-written call, and its name is kept in the
// turn's dropped calls: a tool_use block whose content_block_stop never
// came, and, in a turn cut by max_tokens, a last call whose input is
// empty or does not parse. The turn keeps StopMaxTokens.
func (d *decoder) finish() *turn {
	t := &d.t
	t.text = d.text.String()
	switch d.stop {
	case "end_turn", "stop_sequence", "":
		t.stop = provider.StopEnd
	case "tool_use":
		t.stop = provider.StopToolUse
	case "max_tokens":
		t.stop = provider.StopMaxTokens
	default:
		t.stop = provider.StopOther
	}
	for i, b := range d.blocks {
		raw := bytes.TrimSpace(b.args)
		cut := !b.stopped ||
			t.stop == provider.StopMaxTokens && i == len(d.blocks)-1 && (len(raw) == 0 || !json.Valid(raw))
		if cut {
			t.dropped = append(t.dropped, b.name)
			continue
		}
		args := json.RawMessage(raw)
		if len(args) == 0 {
			args = json.RawMessage("{}")
			if in := bytes.TrimSpace(b.input); len(in) > 2 && json.Valid(in) {
				args = json.RawMessage(in)
			}
		}
		t.calls = append(t.calls, provider.ToolCall{ID: b.id, Name: b.name, Arguments: args})
	}
	if len(t.calls) > 0 && t.stop == provider.StopEnd {
		t.stop = provider.StopToolUse
	}
	return t
}
