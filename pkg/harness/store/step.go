package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/initorigin/io-harness-go/pkg/harness/provider"
)

// ObservationKind says where an observation came from.
type ObservationKind string

const (
	// ObservationTool is the result of one tool call.
	ObservationTool ObservationKind = "tool"
	// ObservationNote is a message from the harness to the model after
	// its turn, such as the reminder that follows a turn without a tool
	// call.
	ObservationNote ObservationKind = "note"
	// ObservationVerification is the verification gate's feedback.
	ObservationVerification ObservationKind = "verification"
	// ObservationInDoubt tells the model, before its turn, which effects
	// of an earlier attempt at the step may or may not have happened.
	ObservationInDoubt ObservationKind = "in_doubt"
	// ObservationDecision tells the model, before its turn, what a
	// person decided about an action that waited for them, and what came
	// of it.
	ObservationDecision ObservationKind = "decision"
)

// Observation is one thing the model is told after its turn.
type Observation struct {
	Kind      ObservationKind `json:"kind"`
	CallID    string          `json:"call_id,omitempty"`
	Tool      string          `json:"tool,omitempty"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Output    string          `json:"output"`
	IsError   bool            `json:"is_error,omitempty"`
	Refusal   string          `json:"refusal,omitempty"`
}

// Step is one committed step: the model's turn, what came of it, and what
// it cost.
type Step struct {
	RunID      string           `json:"run_id"`
	Step       int              `json:"step"`
	StartedAt  time.Time        `json:"started_at"`
	FinishedAt time.Time        `json:"finished_at"`
	Provider   string           `json:"provider"`
	Assistant  provider.Message `json:"assistant"`
	// Observations are in the order the model sees them.
	Observations []Observation  `json:"observations"`
	Usage        provider.Usage `json:"usage"`
	Cost         provider.Cost  `json:"cost"`
	// Verified reports whether the verification gate passed after it.
	Verified bool `json:"verified"`
	// Attempts are the provider calls the step made, failures included.
	Attempts []Attempt `json:"attempts,omitempty"`
}

// Commit is what [Store.CommitStep] writes.
type Commit struct {
	Step Step
	// Events are the step's events, its checkpoint marker among them.
	Events []Event
	// InDoubt lists the in-doubt intents the step reported to the model;
	// they become IntentReported.
	InDoubt []int64
	// Approvals are the approval requests the step deferred.
	Approvals []Approval
	// Applied lists decided approval requests whose outcome the step told
	// the model; they become ApprovalApplied.
	Applied []string
	// Remembered, when not nil, replaces the run's remembered rules.
	Remembered json.RawMessage
}

// CommitStep writes one step in one transaction: the step row with its
// assistant turn, every observation, every attempt, the budget draw on the
// run's totals, the events, and the closing of the step's intents. The step
// number must be the run's next one; otherwise another writer got there
// first and the error wraps [ErrConflict].
func (s *Store) CommitStep(ctx context.Context, c *Commit) error {
	st := &c.Step
	assistant, err := json.Marshal(st.Assistant)
	if err != nil {
		return fmt.Errorf("store: encode assistant turn: %w", err)
	}
	return s.write(ctx, "commit step", func() error {
		res, err := s.exec(ctx, `UPDATE runs SET steps=?,
			input_tokens=input_tokens+?, output_tokens=output_tokens+?,
			cache_read_tokens=cache_read_tokens+?, cache_write_tokens=cache_write_tokens+?,
			cost_usd=cost_usd+?, cost_known=cost_known AND ?
			WHERE id=? AND steps=? AND status=?`,
			st.Step,
			st.Usage.InputTokens, st.Usage.OutputTokens, st.Usage.CacheReadTokens, st.Usage.CacheWriteTokens,
			st.Cost.USD, st.Cost.Known,
			st.RunID, st.Step-1, string(StatusRunning))
		if err != nil {
			return s.classify("commit step", err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return fmt.Errorf("%w: run %s step %d", ErrConflict, st.RunID, st.Step)
		}
		if _, err := s.exec(ctx, `INSERT INTO steps (run_id, step, started_at, finished_at, assistant,
			input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, cost_usd, cost_known, verified, provider)
			VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)`,
			st.RunID, st.Step, st.StartedAt.UnixMilli(), st.FinishedAt.UnixMilli(), string(assistant),
			st.Usage.InputTokens, st.Usage.OutputTokens, st.Usage.CacheReadTokens, st.Usage.CacheWriteTokens,
			st.Cost.USD, st.Cost.Known, st.Verified, st.Provider); err != nil {
			return s.classify("insert step", err)
		}
		for i := range st.Observations {
			o := &st.Observations[i]
			if _, err := s.exec(ctx, `INSERT INTO observations (run_id, step, idx, kind, call_id, tool, arguments, output, is_error, refusal)
				VALUES (?,?,?,?,?,?,?,?,?,?)`,
				st.RunID, st.Step, i, string(o.Kind), o.CallID, o.Tool, string(o.Arguments), o.Output, o.IsError, o.Refusal); err != nil {
				return s.classify("insert observation", err)
			}
		}
		if err := s.insertAttempts(ctx, st.RunID, st.Attempts); err != nil {
			return err
		}
		if _, err := s.exec(ctx, `UPDATE intents SET state=? WHERE run_id=? AND step=? AND state=?`,
			string(IntentDone), st.RunID, st.Step, string(IntentOpen)); err != nil {
			return s.classify("close intents", err)
		}
		for _, id := range c.InDoubt {
			if _, err := s.exec(ctx, `UPDATE intents SET state=? WHERE id=? AND run_id=? AND state=?`,
				string(IntentReported), id, st.RunID, string(IntentInDoubt)); err != nil {
				return s.classify("mark intent reported", err)
			}
		}
		for i := range c.Approvals {
			if err := s.insertApproval(ctx, &c.Approvals[i]); err != nil {
				return err
			}
		}
		for _, id := range c.Applied {
			if _, err := s.exec(ctx, `UPDATE approvals SET state=? WHERE id=? AND run_id=?`, string(ApprovalApplied), id, st.RunID); err != nil {
				return s.classify("mark approval applied", err)
			}
		}
		if c.Remembered != nil {
			if _, err := s.exec(ctx, `UPDATE runs SET remembered=? WHERE id=?`, string(c.Remembered), st.RunID); err != nil {
				return s.classify("remember rules", err)
			}
		}
		return s.insertEvents(ctx, st.RunID, c.Events)
	})
}
