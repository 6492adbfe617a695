package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/initorigin/io-harness-go/internal/visible"
	"github.com/initorigin/io-harness-go/pkg/harness/policy"
	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/store"
)

// Trace is one run as the store holds it: its record, its committed
// steps, the provider calls that belong to no committed step (those of the
// call that ended the run, and of steps a crash cut short), and its events.
type Trace struct {
	Run      store.Run       `json:"run"`
	Steps    []store.Step    `json:"steps"`
	Attempts []store.Attempt `json:"attempts,omitempty"`
	Events   []Event         `json:"events"`
	// Agents are, for the root of a tree of agents, the other runs of its
	// tree, in the order they were spawned: each names its parent and its
	// path, so that the tree rebuilds from them.
	Agents []store.Run `json:"agents,omitempty"`
}

// ReadTrace reads a run's trace from the store.
//
// # Errors
//
// An unknown run wraps store.ErrNotFound; a trace that does not decode is
// ErrState.
func ReadTrace(ctx context.Context, st store.Reader, runID string) (*Trace, error) {
	run, err := st.Run(ctx, runID)
	if err != nil {
		return nil, wrap(ErrState, "read run", err)
	}
	steps, err := st.Steps(ctx, runID)
	if err != nil {
		return nil, wrap(ErrState, "read steps", err)
	}
	attempts, err := st.Attempts(ctx, runID)
	if err != nil {
		return nil, wrap(ErrState, "read attempts", err)
	}
	stored, err := st.Events(ctx, runID, 0, 0)
	if err != nil {
		return nil, wrap(ErrState, "read events", err)
	}
	t := &Trace{Run: *run, Steps: steps, Attempts: attempts, Events: make([]Event, len(stored))}
	if len(run.Containment) > 0 {
		all, err := st.Runs(ctx, store.RunFilter{RootID: runID, Limit: -1})
		if err != nil {
			return nil, wrap(ErrState, "read the tree's agents", err)
		}
		for _, a := range all {
			if a.ID != runID {
				t.Agents = append(t.Agents, a)
			}
		}
	}
	for i, e := range stored {
		if err := json.Unmarshal(e.Data, &t.Events[i]); err != nil {
			return nil, wrap(ErrState, fmt.Sprintf("event %d of run %s", e.Seq, runID), errors.Join(store.ErrCorrupt, err))
		}
		if n := t.Events[i].Step; n >= 1 && n <= len(steps) && steps[n-1].Step == n {
			thicken(&t.Events[i], &steps[n-1])
		}
	}
	return t, nil
}

// RestoreEvent returns an event as the store holds it (store.Event.Data)
// whole: the store keeps the model's text, a call's arguments and a
// result's preview once, in the record of the event's step, and not in the
// step's events; RestoreEvent puts them back from st, that record, as
// ReadTrace does. Data of another step, or that lacks nothing, is returned
// as it is; so is data that does not decode.
func RestoreEvent(data json.RawMessage, st *store.Step) json.RawMessage {
	var e Event
	if st == nil || json.Unmarshal(data, &e) != nil || e.Step != st.Step {
		return data
	}
	before := e
	thicken(&e, st)
	if e.Text == before.Text && len(e.Arguments) == len(before.Arguments) && e.Output == before.Output {
		return data
	}
	out, err := json.Marshal(&e)
	if err != nil {
		return data
	}
	return out
}

// thin drops from e what the step's record holds word for word: the
// model's text, a call's arguments, a result's preview of its
// observation. [thicken] puts it back.
func thin(e *Event, st *store.Step) {
	switch e.Kind {
	case EventModelDone:
		if e.Text == st.Assistant.Content {
			e.Text = ""
		}
	case EventToolCall:
		for _, c := range st.Assistant.ToolCalls {
			if c.ID == e.CallID && bytes.Equal(c.Arguments, e.Arguments) {
				e.Arguments = nil
			}
		}
	case EventToolResult:
		for _, o := range st.Observations {
			if o.Kind == store.ObservationTool && o.CallID == e.CallID && clip(o.Output, outputPreview) == e.Output {
				e.Output = ""
			}
		}
	}
}

// thicken restores what thin dropped from an event of st.
func thicken(e *Event, st *store.Step) {
	switch e.Kind {
	case EventModelDone:
		if e.Text == "" {
			e.Text = st.Assistant.Content
		}
	case EventToolCall:
		for _, c := range st.Assistant.ToolCalls {
			if c.ID == e.CallID && len(e.Arguments) == 0 {
				e.Arguments = c.Arguments
			}
		}
	case EventToolResult:
		for _, o := range st.Observations {
			if o.Kind == store.ObservationTool && o.CallID == e.CallID && e.Output == "" {
				e.Output = clip(o.Output, outputPreview)
			}
		}
	}
}

// WriteText writes the trace for a person to read: the run, then each step
// with the model's words, its tool calls and what came of them, then the
// outcome. Control characters in what the model, tools and files said are
// written as escapes (\x1b and the like), so the text is safe to print on a
// terminal.
func (t *Trace) WriteText(w io.Writer) error {
	var b strings.Builder
	r := &t.Run
	fmt.Fprintf(&b, "run %s  provider %s  started %s\n", r.ID, r.Provider, r.StartedAt.Format("2006-01-02 15:04:05"))
	var task TaskContract
	if json.Unmarshal(r.Task, &task) == nil {
		fmt.Fprintf(&b, "goal: %s\n", oneLine(task.Goal, 200))
	}
	if s := t.attention(); s != "" {
		fmt.Fprintf(&b, "not clean: %s\n", s)
	}
	approvals := map[int][]string{}
	for _, e := range t.Events {
		switch e.Kind {
		case EventApprovalRequested:
			approvals[e.Step] = append(approvals[e.Step], fmt.Sprintf("approval %s asked: %s %s %s", e.RequestID, e.Tool, e.Act, e.Target))
		case EventApprovalResolved:
			line := fmt.Sprintf("approval %s: %s", e.RequestID, e.Decision)
			if e.Reason != "" {
				line += " (" + oneLine(e.Reason, 160) + ")"
			}
			approvals[e.Step] = append(approvals[e.Step], line)
		}
	}
	for _, st := range t.Steps {
		fmt.Fprintf(&b, "\nstep %d  %s  %d in / %d out tokens", st.Step, st.Provider, st.Usage.InputTokens, st.Usage.OutputTokens)
		if u := st.Usage; u.CacheReadTokens+u.CacheWriteTokens > 0 {
			fmt.Fprintf(&b, " (cache: %d read, %d written)", u.CacheReadTokens, u.CacheWriteTokens)
		}
		fmt.Fprintf(&b, "  %s  %s\n", st.Cost, st.FinishedAt.Sub(st.StartedAt).Round(1e6))
		writeAttempts(&b, st.Attempts)
		if text := strings.TrimSpace(st.Assistant.Content); text != "" {
			fmt.Fprintf(&b, "  model: %s\n", oneLine(text, 300))
		}
		for _, line := range approvals[st.Step] {
			fmt.Fprintf(&b, "  %s\n", line)
		}
		calls := map[string]string{}
		for _, c := range st.Assistant.ToolCalls {
			calls[c.ID] = c.Name + " " + oneLine(string(c.Arguments), 160)
		}
		for _, o := range st.Observations {
			switch o.Kind {
			case store.ObservationTool:
				status := "ok"
				switch {
				case o.Refusal != "":
					status = "REFUSED: " + o.Refusal
				case o.IsError:
					status = "error"
				}
				fmt.Fprintf(&b, "  tool:  %s -> %s\n", calls[o.CallID], status)
				if o.Refusal == "" {
					fmt.Fprintf(&b, "         %s\n", oneLine(o.Output, 160))
				}
			case store.ObservationVerification:
				fmt.Fprintf(&b, "  check: %s\n", oneLine(o.Output, 300))
			default:
				fmt.Fprintf(&b, "  note:  %s\n", oneLine(o.Output, 300))
			}
		}
	}
	var cached, input int64
	for _, st := range t.Steps {
		cached += st.Usage.CacheReadTokens
		input += st.Usage.InputTokens // cached tokens are part of it
	}
	if cached > 0 && input > 0 {
		fmt.Fprintf(&b, "\nprompt cache: %d of %d input tokens read from the cache (%.0f%%)\n", cached, input, 100*float64(cached)/float64(input))
	}
	if len(t.Attempts) > 0 {
		fmt.Fprintf(&b, "\nprovider calls of no committed step\n")
		writeAttempts(&b, t.Attempts)
	}
	if r.LostUsage.Total() > 0 {
		fmt.Fprintf(&b, "\nlost to crashes: %d in / %d out tokens  %s (paid for, in no step, counted in every budget)\n",
			r.LostUsage.InputTokens, r.LostUsage.OutputTokens, r.LostCost)
	}
	if r.Paused > 0 {
		fmt.Fprintf(&b, "paused for a person: %s (not counted in the time budget)\n", r.Paused.Round(1e6))
	}
	if r.Outcome != "" {
		var out Outcome
		json.Unmarshal(r.OutcomeJSON, &out)
		fmt.Fprintf(&b, "\noutcome: %s after %d step(s), %d tokens, %s", out.Kind, out.Steps, out.Usage.Total(), out.Cost)
		if out.Reason != "" {
			fmt.Fprintf(&b, " (%s)", out.Reason)
		}
		b.WriteString("\n")
	} else {
		fmt.Fprintf(&b, "\nstatus: %s after %d step(s)\n", r.Status, r.Steps)
	}
	if len(t.Agents) > 0 {
		writeTree(&b, r, t.Agents)
	}
	_, err := io.WriteString(w, visible.Text(b.String()))
	return err
}

// writeTree writes a tree of agents, each indented under its parent, with
// how it ended (or where it stands), its steps and its spend, then the
// tree's totals.
func writeTree(b *strings.Builder, root *store.Run, agents []store.Run) {
	kids := map[string][]*store.Run{}
	var total provider.Usage
	var cost provider.Cost
	total, cost = root.Usage.Add(root.LostUsage), root.Cost.Add(root.LostCost)
	for i := range agents {
		a := &agents[i]
		kids[a.ParentID] = append(kids[a.ParentID], a)
		total, cost = total.Add(a.Usage).Add(a.LostUsage), cost.Add(a.Cost).Add(a.LostCost)
	}
	fmt.Fprintf(b, "\ntree: %d agents, %d tokens, %s in all\n", len(agents)+1, total.Total(), cost)
	var walk func(r *store.Run, depth int)
	walk = func(r *store.Run, depth int) {
		state := r.Outcome
		if state == "" {
			state = string(r.Status)
		}
		goal := ""
		var task TaskContract
		if json.Unmarshal(r.Task, &task) == nil {
			goal = oneLine(task.Goal, 60)
		}
		fmt.Fprintf(b, "%s%s  %s  %s  %d step(s)  %d tokens  %s  %s\n", strings.Repeat("  ", depth+1), r.AgentPath, r.ID, state,
			r.Steps, r.Usage.Total()+r.LostUsage.Total(), r.Cost.Add(r.LostCost), goal)
		for _, k := range kids[r.ID] {
			walk(k, depth+1)
		}
	}
	walk(root, 0)
}

// attention sums up what makes a run not a clean one: failed provider
// calls, retries, fallbacks, refused calls and policy denials, approvals
// asked. It is empty for a clean run.
func (t *Trace) attention() string {
	failed, retried := 0, 0
	var switches []string
	count := func(attempts []store.Attempt) {
		last := ""
		for _, a := range attempts {
			if last != "" && a.Provider != last {
				switches = append(switches, last+" -> "+a.Provider)
			}
			last = a.Provider
			if a.ErrorKind != "" {
				failed++
				if a.Wait > 0 {
					retried++
				}
			}
		}
	}
	refused := 0
	for i := range t.Steps {
		count(t.Steps[i].Attempts)
		for _, o := range t.Steps[i].Observations {
			if o.Refusal != "" {
				refused++
			}
		}
	}
	count(t.Attempts)
	denied, asked := 0, 0
	for _, e := range t.Events {
		switch {
		case e.Kind == EventPolicy && e.Effect == policy.Deny:
			denied++
		case e.Kind == EventApprovalRequested:
			asked++
		}
	}
	var parts []string
	if failed > 0 {
		p := fmt.Sprintf("%d provider call(s) failed, %d retried", failed, retried)
		if len(switches) > 0 {
			p += fmt.Sprintf(", %d fallback(s): %s", len(switches), strings.Join(switches, ", "))
		}
		parts = append(parts, p)
	}
	if refused > 0 {
		parts = append(parts, fmt.Sprintf("%d tool call(s) refused", refused))
	}
	if denied > 0 {
		parts = append(parts, fmt.Sprintf("%d policy denial(s)", denied))
	}
	if asked > 0 {
		parts = append(parts, fmt.Sprintf("%d approval(s) asked", asked))
	}
	return strings.Join(parts, "; ")
}

// writeAttempts writes the provider calls that failed, so that a step
// that needed retries or a fallback does not read like a clean one.
func writeAttempts(b *strings.Builder, attempts []store.Attempt) {
	last := ""
	for _, a := range attempts {
		if last != "" && a.Provider != last {
			fmt.Fprintf(b, "  fallback: %s -> %s\n", last, a.Provider)
		}
		last = a.Provider
		if a.ErrorKind == "" {
			continue
		}
		what := "failed"
		if a.Wait > 0 {
			what = fmt.Sprintf("retried after %s", a.Wait.Round(1e6))
		}
		fmt.Fprintf(b, "  call %d to %s %s: %s\n", a.Attempt, a.Provider, what, oneLine(a.Error, 200))
	}
}

// oneLine flattens s to one line of at most n bytes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		cut := n
		for cut > 0 && !isCharStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}
