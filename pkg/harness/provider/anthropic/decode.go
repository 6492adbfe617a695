package anthropic

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"

	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/internal/wire"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/sse"
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
// [provider.Price].
func wireCost(p provider.Price, u wireUsage) provider.Cost {
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
	stop      provider.StopReason
	model     string
	usage     wireUsage
	usageSeen bool
}

// blockState is a content block being assembled.
type blockState struct {
	index int
	tool  bool
	id    string
	name  string
	input json.RawMessage // the start event's input, used only when no fragments came
	args  []byte
}

type decoder struct {
	onText func(string)
	text   strings.Builder
	blocks []blockState
	stop   string
	t      turn
}

// decode reads a Messages event stream up to message_stop and returns the
// turn, passing each text delta to onText (when not nil) as it arrives.
// An error event and a stream that ends before message_stop are returned
// as a *provider.Error without its Provider; a failure of r is returned
// as is.
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
			b := d.block(e.Index)
			switch cb.Type {
			case "tool_use":
				b.tool, b.id, b.name, b.input = true, cb.ID, cb.Name, cb.Input
			case "text":
				d.emit(cb.Text)
			}
		}
	case "content_block_delta":
		if dl := e.Delta; dl != nil {
			switch dl.Type {
			case "text_delta":
				d.emit(dl.Text)
			case "input_json_delta":
				b := d.block(e.Index)
				b.args = append(b.args, dl.PartialJSON...)
			}
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
func (d *decoder) emit(s string) {
	if s == "" {
		return
	}
	d.text.WriteString(s)
	if d.onText != nil {
		d.onText(s)
	}
}

// block returns the block with the given index, adding it if new.
func (d *decoder) block(index int) *blockState {
	for i := range d.blocks {
		if d.blocks[i].index == index {
			return &d.blocks[i]
		}
	}
	d.blocks = append(d.blocks, blockState{index: index})
	return &d.blocks[len(d.blocks)-1]
}

// finish builds the turn at message_stop.
//
// A tool call's input is its concatenated fragments, {} when there were
// none (or only ""). A turn cut by max_tokens whose last call's input does
// not parse has that call dropped, and keeps StopMaxTokens, so the
// harness never runs a half-written call.
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
	for _, b := range d.blocks {
		if !b.tool {
			continue
		}
		args := json.RawMessage(bytes.TrimSpace(b.args))
		if len(args) == 0 {
			args = json.RawMessage("{}")
			if in := bytes.TrimSpace(b.input); len(in) > 2 && json.Valid(in) {
				args = json.RawMessage(in)
			}
		}
		t.calls = append(t.calls, provider.ToolCall{ID: b.id, Name: b.name, Arguments: args})
	}
	if n := len(t.calls); n > 0 && t.stop == provider.StopMaxTokens && !json.Valid(t.calls[n-1].Arguments) {
		t.calls = t.calls[:n-1]
	}
	if len(t.calls) > 0 && t.stop == provider.StopEnd {
		t.stop = provider.StopToolUse
	}
	return t
}
