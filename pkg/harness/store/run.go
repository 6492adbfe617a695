package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/initorigin/io-harness-go/pkg/harness/provider"
)

// ErrConflict reports a write that lost a race with another writer of the
// same run, such as two processes driving one run.
var ErrConflict = errors.New("store: run was changed by another writer")

// Status is where a run stands.
type Status string

const (
	// StatusRunning is a run being driven, or one whose process died; a
	// crashed run looks like this.
	StatusRunning Status = "running"
	// StatusPaused is a run waiting for something outside the process,
	// such as a human's decision.
	StatusPaused Status = "paused"
	// StatusFinished is a run that reached an outcome.
	StatusFinished Status = "finished"
)

// Run is one run's row.
type Run struct {
	ID        string          `json:"id"`
	ParentID  string          `json:"parent_id,omitempty"`
	AgentPath string          `json:"agent_path"`
	Task      json.RawMessage `json:"task"`
	Provider  string          `json:"provider"`
	Status    Status          `json:"status"`
	// Outcome is the outcome's name, empty while the run has none.
	Outcome string `json:"outcome,omitempty"`
	// OutcomeJSON is the whole outcome as the harness recorded it.
	OutcomeJSON json.RawMessage `json:"outcome_json,omitempty"`
	StartedAt   time.Time       `json:"started_at"`
	FinishedAt  time.Time       `json:"finished_at,omitzero"`
	// Steps is the number of committed steps; the last one's number.
	Steps int            `json:"steps"`
	Usage provider.Usage `json:"usage"`
	Cost  provider.Cost  `json:"cost"`
	// Policy is the policy the run runs under, as JSON; empty for none.
	Policy json.RawMessage `json:"policy,omitempty"`
	// Remembered are the rules approvers asked the run to remember, as
	// a JSON array; empty for none.
	Remembered json.RawMessage `json:"remembered,omitempty"`
}

// Event is one stored trace event. Data is the event's whole JSON form;
// the other fields are indexed copies of parts of it.
type Event struct {
	Seq  int64           `json:"seq"`
	Step int             `json:"step"`
	Kind string          `json:"kind"`
	At   time.Time       `json:"at"`
	Data json.RawMessage `json:"data"`
}

// Attempt is one provider call: a success, a retried failure, or the
// failure that made the harness fall back or escalate.
type Attempt struct {
	Step      int           `json:"step"`
	Attempt   int           `json:"attempt"`
	Provider  string        `json:"provider"`
	ErrorKind string        `json:"error_kind,omitempty"`
	Error     string        `json:"error,omitempty"`
	Status    int           `json:"status,omitempty"`
	Latency   time.Duration `json:"latency"`
	Wait      time.Duration `json:"wait,omitempty"`
	At        time.Time     `json:"at"`
}

// CreateRun inserts a new run in status running, with its first events.
func (s *Store) CreateRun(ctx context.Context, r *Run, events []Event) error {
	if r.ID == "" || len(r.Task) == 0 {
		return errors.New("store: a run needs an id and a task")
	}
	path := r.AgentPath
	if path == "" {
		path = "root"
	}
	return s.write(ctx, "create run", func() error {
		_, err := s.exec(ctx,
			`INSERT INTO runs (id, parent_id, agent_path, task, provider, status, started_at, policy) VALUES (?,?,?,?,?,?,?,?)`,
			r.ID, r.ParentID, path, string(r.Task), r.Provider, string(StatusRunning), r.StartedAt.UnixMilli(), string(r.Policy))
		if err != nil {
			return s.classify("create run", err)
		}
		return s.insertEvents(ctx, r.ID, events)
	})
}

// Finish records a run's outcome. Status is StatusFinished or
// StatusPaused. Attempts are the provider calls of the step that did not
// commit, if any (an escalation's retries).
type Finish struct {
	RunID       string
	Status      Status
	Outcome     string
	OutcomeJSON json.RawMessage
	At          time.Time
	Attempts    []Attempt
	Events      []Event
}

// FinishRun records a run's outcome in one transaction.
func (s *Store) FinishRun(ctx context.Context, f *Finish) error {
	return s.write(ctx, "finish run", func() error {
		res, err := s.exec(ctx,
			`UPDATE runs SET status=?, outcome=?, outcome_json=?, finished_at=? WHERE id=?`,
			string(f.Status), f.Outcome, string(f.OutcomeJSON), f.At.UnixMilli(), f.RunID)
		if err != nil {
			return s.classify("finish run", err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return fmt.Errorf("%w: %s", ErrNotFound, f.RunID)
		}
		if err := s.insertAttempts(ctx, f.RunID, f.Attempts); err != nil {
			return err
		}
		return s.insertEvents(ctx, f.RunID, f.Events)
	})
}

// ReopenRun marks a run running again for a resume: its outcome is
// cleared, its task and policy replaced (a resume may raise a budget or
// bring a stricter policy), and the resume's events recorded.
func (s *Store) ReopenRun(ctx context.Context, runID string, task, policy json.RawMessage, events []Event) error {
	return s.write(ctx, "reopen run", func() error {
		res, err := s.exec(ctx,
			`UPDATE runs SET status=?, outcome='', outcome_json='', finished_at=0, task=?, policy=? WHERE id=?`,
			string(StatusRunning), string(task), string(policy), runID)
		if err != nil {
			return s.classify("reopen run", err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return fmt.Errorf("%w: %s", ErrNotFound, runID)
		}
		return s.insertEvents(ctx, runID, events)
	})
}

// insertEvents writes events with as few statements as it can: one
// multi-row INSERT per batch of up to eventBatch rows.
func (s *Store) insertEvents(ctx context.Context, runID string, events []Event) error {
	for len(events) > 0 {
		n := min(len(events), eventBatch)
		args := make([]any, 0, 6*n)
		for i := range events[:n] {
			e := &events[i]
			args = append(args, runID, e.Seq, e.Step, e.Kind, e.At.UnixMilli(), string(e.Data))
		}
		if _, err := s.exec(ctx, insertEventsQuery(n), args...); err != nil {
			return fmt.Errorf("store: insert events %d to %d: %w", events[0].Seq, events[n-1].Seq, err)
		}
		events = events[n:]
	}
	return nil
}

// eventBatch bounds a multi-row INSERT; 16 rows of 6 values stay far below
// SQLite's limit on bound parameters.
const eventBatch = 16

func insertEventsQuery(n int) string {
	return "INSERT INTO events (run_id, seq, step, kind, at, data) VALUES " +
		strings.TrimSuffix(strings.Repeat("(?,?,?,?,?,?),", n), ",")
}

func (s *Store) insertAttempts(ctx context.Context, runID string, attempts []Attempt) error {
	for i := range attempts {
		a := &attempts[i]
		if _, err := s.exec(ctx,
			`INSERT INTO attempts (run_id, step, attempt, provider, error_kind, error, status, latency_ms, wait_ms, at) VALUES (?,?,?,?,?,?,?,?,?,?)`,
			runID, a.Step, a.Attempt, a.Provider, a.ErrorKind, a.Error, a.Status,
			a.Latency.Milliseconds(), a.Wait.Milliseconds(), a.At.UnixMilli()); err != nil {
			return fmt.Errorf("store: insert attempt: %w", err)
		}
	}
	return nil
}
