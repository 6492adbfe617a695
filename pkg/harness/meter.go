package harness

import (
	"crypto/sha256"
	"encoding/binary"
	"strconv"

	"github.com/initorigin/io-harness-go/pkg/harness/provider"
)

// inputMeter bounds the input tokens of a run's next request from above,
// more tightly than [provider.EstimateInput] alone: a provider's count of
// the last request it answered is exact, and a conversation's next
// request is mostly that one again. The bound is that count plus the
// estimate of every part (the system prompt, a tool, a message) the next
// request has and the last did not. Tokens add up part by part (a chat
// template frames each message apart), and a part dropped (a folded
// history) only lowers the count, so the bound still errs high wherever
// the estimate does; it is the estimate whenever that is lower.
type inputMeter struct {
	provider string           // whose count the reading is
	input    int64            // the input tokens it counted
	parts    map[[32]byte]int // the parts of that request, with how often each came
}

// read records what p counted for req (usage.InputTokens), after a call
// that succeeded.
func (m *inputMeter) read(p provider.Provider, req *provider.Request, usage provider.Usage) {
	if usage.InputTokens <= 0 {
		return
	}
	m.provider, m.input, m.parts = p.Name(), usage.InputTokens, map[[32]byte]int{}
	for _, k := range partsOf(req) {
		m.parts[k.key]++
	}
}

// bound returns the most input tokens req can hold for p.
func (m *inputMeter) bound(p provider.Provider, req *provider.Request) int64 {
	est := provider.EstimateInput(req)
	if m.parts == nil || m.provider != p.Name() {
		return est
	}
	seen := map[[32]byte]int{}
	b := m.input
	for _, k := range partsOf(req) {
		if seen[k.key]++; seen[k.key] > m.parts[k.key] {
			b += k.tokens
		}
	}
	return min(b, est)
}

// part is one part of a request: its identity and its estimate, framing
// included.
type part struct {
	key    [32]byte
	tokens int64
}

// partsOf lists req's parts.
func partsOf(req *provider.Request) []part {
	out := make([]part, 0, 1+len(req.Tools)+len(req.Messages))
	h := sha256.New()
	sum := func(tokens int64, fields ...[]byte) {
		h.Reset()
		for _, f := range fields {
			var n [8]byte
			binary.LittleEndian.PutUint64(n[:], uint64(len(f)))
			h.Write(n[:])
			h.Write(f)
		}
		var k [32]byte
		h.Sum(k[:0])
		out = append(out, part{k, tokens})
	}
	sum(provider.CountTextTokens(req.System), []byte("system"), []byte(req.System))
	for i := range req.Tools {
		t := &req.Tools[i]
		sum(provider.CountTextTokens(t.Name)+provider.CountTextTokens(t.Description)+provider.CountTextTokens(string(t.Parameters))+provider.PerMessageTokens,
			[]byte("tool"), []byte(t.Name), []byte(t.Description), t.Parameters)
	}
	for i := range req.Messages {
		msg := &req.Messages[i]
		fields := [][]byte{[]byte("message"), []byte(msg.Role), []byte(msg.Content), []byte(msg.ToolCallID), []byte(strconv.FormatBool(msg.IsError))}
		for _, c := range msg.ToolCalls {
			fields = append(fields, []byte(c.ID), []byte(c.Name), c.Arguments)
		}
		for _, im := range msg.Images {
			fields = append(fields, []byte(im.MediaType), im.Data)
		}
		sum(provider.MessageTokens(msg)+provider.PerMessageTokens, fields...)
	}
	return out
}
