// Package window keeps what a model is sent each turn within its context
// window: the context manager of a run.
//
// A [Transcript] holds the run's history as the model sees it — the task,
// a summary of the steps folded away, and each step since, rendered once
// when it commits — so assembling a request costs nothing per committed
// step beyond appending it. Between folds the history only grows at its
// end, which keeps a vendor's prompt cache valid. When the next request
// would pass its share of the window, [Transcript.Messages] asks for a
// fold: the oldest steps are replaced by a summary (the model's, or
// [Digest]'s when no model may be spent), and the steps kept are rendered
// again with what a later step made stale shrunk to a stub: a file read
// that a later read of the same file supersedes, and old tool output over
// a size. The store keeps the whole history; a fold is recorded with the
// step it happened before, so a resumed run rebuilds the same transcript.
package window

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/store"
)

// Manager is a run's context manager.
//
// # Contract
//
//   - Append is called once for every committed step, in order, including
//     steps whose first observation is a fold ([store.ObservationFold]),
//     which it applies before the step.
//   - Messages returns the next request's messages: the transcript, then
//     pre. When they would pass limit tokens and folding could help, it
//     returns a FoldRequest instead of messages; the caller summarises the
//     request's steps, calls Fold, and asks again. A transcript that
//     cannot fit even folded is returned as it is: the provider says so.
//     The messages may share memory with the Manager, so that a step
//     costs no copy of the history: the caller must not change them (an
//     append copies), and must not keep them past the next Append.
//   - A Manager is used by one goroutine.
type Manager interface {
	Append(st *store.Step)
	Messages(pre []provider.Message, limit int64) ([]provider.Message, *FoldRequest)
	Fold(through int, summary string)
}

// FoldRequest is a fold the transcript needs: the steps up to and
// including Through, as the model saw them, to be summarised.
type FoldRequest struct {
	Through  int
	Messages []provider.Message
	// Tokens is the estimate (provider.CountTextTokens) of the
	// transcript before the fold, and After of what it keeps.
	Tokens, After int64
}

// Options shape a [Transcript].
type Options struct {
	// MaxEntry bounds one observation, in bytes: a longer one keeps its
	// head and tail around a marker. Zero means 16 KiB.
	MaxEntry int
	// Keep is how many of the latest steps a fold keeps whole; zero
	// means 4.
	Keep int
	// StaleAfter is how many steps old a tool result must be before a
	// fold may shrink it to a stub (when it is over StubOver bytes); zero
	// means 8 steps and 2 KiB.
	StaleAfter int
	StubOver   int
}

func (o Options) withDefaults() Options {
	if o.MaxEntry <= 0 {
		o.MaxEntry = 16 << 10
	}
	if o.Keep <= 0 {
		o.Keep = 4
	}
	if o.StaleAfter <= 0 {
		o.StaleAfter = 8
	}
	if o.StubOver <= 0 {
		o.StubOver = 2 << 10
	}
	return o
}

// Transcript is the default [Manager].
type Transcript struct {
	opts Options
	task string

	summary   string // of the steps folded away; empty before the first fold
	folded    int    // the last step folded into the summary
	steps     []*rendered
	all       []store.Step // every committed step since the last fold, for re-rendering
	msgs      []provider.Message
	msgTokens int64 // the estimate of msgs
}

// rendered is one committed step as messages.
type rendered struct {
	step   int
	msgs   []provider.Message
	tokens int64 // the estimate of msgs
}

var _ Manager = (*Transcript)(nil)

// New returns a transcript that starts with the task's text.
func New(task string, o Options) *Transcript {
	t := &Transcript{opts: o.withDefaults(), task: task}
	t.rebuild()
	return t
}

// Append implements Manager.
func (t *Transcript) Append(st *store.Step) {
	if f, ok := foldOf(st); ok {
		t.Fold(f.Through, f.Summary)
	}
	t.all = append(t.all, *st)
	r := t.render(st, nil)
	t.steps = append(t.steps, r)
	t.msgs = appendMessages(t.msgs, r.msgs)
	t.msgTokens += r.tokens
}

// Messages implements Manager.
func (t *Transcript) Messages(pre []provider.Message, limit int64) ([]provider.Message, *FoldRequest) {
	tokens := t.tokens(pre)
	if limit > 0 && tokens > limit && len(t.steps) > t.opts.Keep {
		fold := len(t.steps) - t.opts.Keep
		through := t.steps[fold-1].step
		var folded []provider.Message
		var away int64
		for _, r := range t.steps[:fold] {
			folded = append(folded, r.msgs...)
			away += r.tokens
		}
		return nil, &FoldRequest{Through: through, Messages: folded, Tokens: tokens, After: tokens - away}
	}
	if len(pre) == 0 {
		// The transcript as it is, its capacity cut so that an append
		// by the caller copies instead of writing into it.
		return t.msgs[:len(t.msgs):len(t.msgs)], nil
	}
	out := make([]provider.Message, len(t.msgs), len(t.msgs)+len(pre))
	copy(out, t.msgs)
	for _, m := range pre {
		out = appendMessages(out, []provider.Message{m})
	}
	return out, nil
}

// tokens estimates the transcript followed by pre. Each message is
// counted with its framing before a user message merges into the one
// before it, which counts the joint (a blank line) with room to spare.
func (t *Transcript) tokens(pre []provider.Message) int64 {
	n := t.msgTokens
	for i := range pre {
		n += messageTokens(&pre[i])
	}
	return n
}

// Fold implements Manager: the steps up to through leave the transcript
// for summary, and the steps kept are rendered again with what is stale
// shrunk.
func (t *Transcript) Fold(through int, summary string) {
	if through <= t.folded {
		return
	}
	t.summary, t.folded = summary, through
	kept := t.all[:0:0]
	for _, st := range t.all {
		if st.Step > through {
			kept = append(kept, st)
		}
	}
	t.all = kept
	t.rebuild()
}

// rebuild renders the task, the summary and the kept steps again.
func (t *Transcript) rebuild() {
	t.msgs, t.msgTokens, t.steps = nil, 0, nil
	head := t.task
	if t.summary != "" {
		head += fmt.Sprintf("\n\n## What happened in steps 1 to %d\n\n%s", t.folded, t.summary)
	}
	m := provider.Message{Role: provider.RoleUser, Content: head}
	t.msgs = appendMessages(t.msgs, []provider.Message{m})
	t.msgTokens = messageTokens(&m)
	if len(t.all) == 0 {
		return
	}
	stale := t.staleness()
	for i := range t.all {
		r := t.render(&t.all[i], stale)
		t.steps = append(t.steps, r)
		t.msgs = appendMessages(t.msgs, r.msgs)
		t.msgTokens += r.tokens
	}
}

// staleness decides, for the kept steps, which tool results a fold
// shrinks: a read of a file a later kept step reads again, and old
// output over the stub size. It maps a step and a call id to the stub.
func (t *Transcript) staleness() map[string]string {
	stubs := map[string]string{}
	lastRead := map[string]int{} // path -> the last step that read it
	last := t.all[len(t.all)-1].Step
	for _, st := range t.all {
		for _, c := range st.Assistant.ToolCalls {
			if p := readPath(c); p != "" {
				lastRead[p] = st.Step
			}
		}
	}
	for _, st := range t.all {
		args := map[string]provider.ToolCall{}
		for _, c := range st.Assistant.ToolCalls {
			args[c.ID] = c
		}
		for _, o := range st.Observations {
			if o.Kind != store.ObservationTool {
				continue
			}
			key := fmt.Sprintf("%d/%s", st.Step, o.CallID)
			c := args[o.CallID]
			if p := readPath(c); p != "" && lastRead[p] > st.Step {
				stubs[key] = fmt.Sprintf("[a read of %s, superseded by a later read at step %d]", p, lastRead[p])
				continue
			}
			if last-st.Step >= t.opts.StaleAfter && len(o.Output) > t.opts.StubOver {
				stubs[key] = fmt.Sprintf("[the %d-byte result of %s at step %d, dropped to save context; call it again if it is still needed]",
					len(o.Output), c.Name, st.Step)
			}
		}
	}
	return stubs
}

// readPath returns the path a read_file call reads, or "".
func readPath(c provider.ToolCall) string {
	if c.Name != "read_file" {
		return ""
	}
	var a struct {
		Path      string `json:"path"`
		StartLine int    `json:"start_line"`
		EndLine   int    `json:"end_line"`
	}
	if json.Unmarshal(c.Arguments, &a) != nil || a.StartLine != 0 || a.EndLine != 0 {
		return "" // a range is not superseded by another range
	}
	return a.Path
}

// render turns a committed step into messages: the notes told before the
// turn, the assistant turn, a tool message per call, and the notes after
// it as one user message.
func (t *Transcript) render(st *store.Step, stubs map[string]string) *rendered {
	r := &rendered{step: st.Step}
	for _, o := range st.Observations {
		if BeforeTurn(o.Kind) {
			r.add(provider.Message{Role: provider.RoleUser, Content: ClipMiddle(o.Output, t.opts.MaxEntry)})
		}
	}
	a := st.Assistant
	if a.Content == "" && len(a.ToolCalls) == 0 {
		a.Content = "(no output)"
	}
	r.add(a)
	var notes []string
	for _, o := range st.Observations {
		switch o.Kind {
		case store.ObservationTool:
			out := ClipMiddle(o.Output, t.opts.MaxEntry)
			if s, ok := stubs[fmt.Sprintf("%d/%s", st.Step, o.CallID)]; ok {
				out = s
			}
			r.add(provider.Message{Role: provider.RoleTool, ToolCallID: o.CallID, Content: out, IsError: o.IsError})
		case store.ObservationNote, store.ObservationVerification, store.ObservationAnswer:
			notes = append(notes, ClipMiddle(o.Output, t.opts.MaxEntry))
		}
	}
	if len(notes) > 0 {
		r.add(provider.Message{Role: provider.RoleUser, Content: strings.Join(notes, "\n\n")})
	}
	return r
}

func (r *rendered) add(m provider.Message) {
	r.msgs = appendMessages(r.msgs, []provider.Message{m})
	r.tokens += messageTokens(&m)
}

// BeforeTurn reports whether observations of kind k are told to the model
// before its turn rather than after it. A fold is told in the summary.
func BeforeTurn(k store.ObservationKind) bool {
	return k == store.ObservationInDoubt || k == store.ObservationDecision
}

// appendMessages appends ms to msgs, merging a user message into a user
// message before it, so that roles alternate.
func appendMessages(msgs []provider.Message, ms []provider.Message) []provider.Message {
	for _, m := range ms {
		if n := len(msgs); n > 0 && m.Role == provider.RoleUser && msgs[n-1].Role == provider.RoleUser {
			msgs[n-1].Content += "\n\n" + m.Content
			continue
		}
		msgs = append(msgs, m)
	}
	return msgs
}

// messageTokens estimates m with its framing, as provider.EstimateInput
// counts a message.
func messageTokens(m *provider.Message) int64 {
	return provider.MessageTokens(m) + provider.PerMessageTokens
}

// ClipMiddle keeps the head and tail of s within n bytes around a marker
// that says how much was cut.
func ClipMiddle(s string, n int) string {
	if len(s) <= n {
		return s
	}
	head, tail := n*3/4, n/4
	for head > 0 && s[head]&0xC0 == 0x80 {
		head--
	}
	start := len(s) - tail
	for start < len(s) && s[start]&0xC0 == 0x80 {
		start++
	}
	return s[:head] + fmt.Sprintf("\n[... %d bytes truncated ...]\n", start-head) + s[start:]
}

// Fold is a fold as it is recorded: with the step it happened before, as
// that step's first observation.
type Fold struct {
	// Through is the last step folded.
	Through int `json:"through"`
	// Method is "model" for a summary the model wrote, "digest" for one
	// made without a model.
	Method  string `json:"method"`
	Summary string `json:"-"`
}

// Observation is the record of a fold.
func (f Fold) Observation() store.Observation {
	meta, _ := json.Marshal(f)
	return store.Observation{Kind: store.ObservationFold, Arguments: meta, Output: f.Summary}
}

// foldOf reads a fold from a step's first observation.
func foldOf(st *store.Step) (Fold, bool) {
	if len(st.Observations) == 0 || st.Observations[0].Kind != store.ObservationFold {
		return Fold{}, false
	}
	var f Fold
	if json.Unmarshal(st.Observations[0].Arguments, &f) != nil {
		return Fold{}, false
	}
	f.Summary = st.Observations[0].Output
	return f, true
}

// Digest summarises steps without a model: each turn's words and calls,
// and what came of each call, a line each.
func Digest(msgs []provider.Message) string {
	var b strings.Builder
	for _, m := range msgs {
		switch m.Role {
		case provider.RoleAssistant:
			if t := oneLine(m.Content, 200); t != "" {
				fmt.Fprintf(&b, "- you said: %s\n", t)
			}
			for _, c := range m.ToolCalls {
				fmt.Fprintf(&b, "- you called %s %s\n", c.Name, oneLine(string(c.Arguments), 160))
			}
		case provider.RoleTool:
			status := "ok"
			if m.IsError {
				status = "failed"
			}
			fmt.Fprintf(&b, "  -> %s: %s\n", status, oneLine(m.Content, 160))
		case provider.RoleUser:
			fmt.Fprintf(&b, "- the harness said: %s\n", oneLine(m.Content, 200))
		}
	}
	return b.String()
}

// oneLine flattens s to one line of at most n bytes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		cut := n
		for cut > 0 && s[cut]&0xC0 == 0x80 {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}
