package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/initorigin/io-harness-go/pkg/harness/store"
)

// Trace is one run as the store holds it: its row, its committed steps and
// its events.
type Trace struct {
	Run    store.Run    `json:"run"`
	Steps  []store.Step `json:"steps"`
	Events []Event      `json:"events"`
}

// ReadTrace reads a run's trace from the store.
//
// # Errors
//
// An unknown run wraps store.ErrNotFound; a trace that does not decode is
// ErrState.
func ReadTrace(ctx context.Context, st *store.Store, runID string) (*Trace, error) {
	run, err := st.Run(ctx, runID)
	if err != nil {
		return nil, wrap(ErrState, "read run", err)
	}
	steps, err := st.Steps(ctx, runID)
	if err != nil {
		return nil, wrap(ErrState, "read steps", err)
	}
	stored, err := st.Events(ctx, runID, 0, 0)
	if err != nil {
		return nil, wrap(ErrState, "read events", err)
	}
	t := &Trace{Run: *run, Steps: steps, Events: make([]Event, len(stored))}
	for i, e := range stored {
		if err := json.Unmarshal(e.Data, &t.Events[i]); err != nil {
			return nil, wrap(ErrState, fmt.Sprintf("event %d of run %s", e.Seq, runID), errors.Join(store.ErrCorrupt, err))
		}
	}
	return t, nil
}

// WriteText writes the trace for a person to read: the run, then each step
// with the model's words, its tool calls and what came of them, then the
// outcome.
func (t *Trace) WriteText(w io.Writer) error {
	var b strings.Builder
	r := &t.Run
	fmt.Fprintf(&b, "run %s  provider %s  started %s\n", r.ID, r.Provider, r.StartedAt.Format("2006-01-02 15:04:05"))
	var task TaskContract
	if json.Unmarshal(r.Task, &task) == nil {
		fmt.Fprintf(&b, "goal: %s\n", oneLine(task.Goal, 200))
	}
	for _, st := range t.Steps {
		fmt.Fprintf(&b, "\nstep %d  %s  %d in / %d out tokens  %s  %s\n", st.Step, st.Provider,
			st.Usage.InputTokens, st.Usage.OutputTokens, st.Cost, st.FinishedAt.Sub(st.StartedAt).Round(1e6))
		if text := strings.TrimSpace(st.Assistant.Content); text != "" {
			fmt.Fprintf(&b, "  model: %s\n", oneLine(text, 300))
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
	_, err := io.WriteString(w, b.String())
	return err
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
