package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// ErrNotPending reports a decision for an approval request that is not
// waiting for one.
var ErrNotPending = errors.New("store: the approval request is not pending")

// ApprovalState is where an approval request stands.
type ApprovalState string

const (
	// ApprovalPending waits for a decision.
	ApprovalPending ApprovalState = "pending"
	// ApprovalApproved was approved; the action has not yet been
	// performed, or its step has not yet committed.
	ApprovalApproved ApprovalState = "approved"
	// ApprovalDenied was denied by a person.
	ApprovalDenied ApprovalState = "denied"
	// ApprovalRefused was approved, but the policy in force at the
	// decision refused the action.
	ApprovalRefused ApprovalState = "refused"
	// ApprovalApplied is decided, and the step that told the model the
	// outcome has committed.
	ApprovalApplied ApprovalState = "applied"
)

// Approval is a request for a person's decision, with the exact action
// they are shown.
type Approval struct {
	ID        string          `json:"id"`
	RunID     string          `json:"run_id"`
	Step      int             `json:"step"`
	CallID    string          `json:"call_id"`
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
	Act       string          `json:"act"`
	Target    string          `json:"target"`
	Content   string          `json:"content"`
	Shown     string          `json:"shown"`
	Hash      string          `json:"hash"`
	Rule      string          `json:"rule,omitempty"`
	Layer     string          `json:"layer,omitempty"`
	State     ApprovalState   `json:"state"`
	// Decision is the decision's JSON, once there is one.
	Decision  json.RawMessage `json:"decision,omitempty"`
	CreatedAt time.Time       `json:"created_at"`
	DecidedAt time.Time       `json:"decided_at,omitzero"`
}

func (s *Store) insertApproval(ctx context.Context, a *Approval) error {
	_, err := s.exec(ctx, `INSERT INTO approvals (id, run_id, step, call_id, tool, arguments, act, target, content, shown, hash, rule, layer, state, created_at)
		VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`,
		a.ID, a.RunID, a.Step, a.CallID, a.Tool, string(a.Arguments), a.Act, a.Target, a.Content, a.Shown, a.Hash,
		a.Rule, a.Layer, string(ApprovalPending), a.CreatedAt.UnixMilli())
	if err != nil {
		return s.classify("insert approval", err)
	}
	return nil
}

const approvalColumns = `id, run_id, step, call_id, tool, arguments, act, target, content, shown, hash, rule, layer, state, decision, created_at, decided_at`

func scanApproval(sc interface{ Scan(...any) error }) (*Approval, error) {
	var a Approval
	var args, state, decision string
	var created, decided int64
	if err := sc.Scan(&a.ID, &a.RunID, &a.Step, &a.CallID, &a.Tool, &args, &a.Act, &a.Target, &a.Content, &a.Shown,
		&a.Hash, &a.Rule, &a.Layer, &state, &decision, &created, &decided); err != nil {
		return nil, err
	}
	a.Arguments, a.State = json.RawMessage(args), ApprovalState(state)
	if decision != "" {
		a.Decision = json.RawMessage(decision)
	}
	a.CreatedAt = time.UnixMilli(created)
	if decided != 0 {
		a.DecidedAt = time.UnixMilli(decided)
	}
	return &a, nil
}

// Approval returns one approval request of a run.
//
// # Errors
//
// An id the run does not have wraps [ErrNotFound].
func (s *Store) Approval(ctx context.Context, runID, id string) (*Approval, error) {
	a, err := scanApproval(s.db.QueryRowContext(ctx, `SELECT `+approvalColumns+` FROM approvals WHERE id=? AND run_id=?`, id, runID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("%w: approval %s of run %s", ErrNotFound, id, runID)
	}
	if err != nil {
		return nil, s.classify("read approval", err)
	}
	return a, nil
}

// Approvals returns a run's approval requests in the order they were made.
func (s *Store) Approvals(ctx context.Context, runID string) ([]Approval, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+approvalColumns+` FROM approvals WHERE run_id=? ORDER BY created_at, id`, runID)
	if err != nil {
		return nil, s.classify("read approvals", err)
	}
	defer rows.Close()
	var out []Approval
	for rows.Next() {
		a, err := scanApproval(rows)
		if err != nil {
			return nil, s.classify("read approval", err)
		}
		out = append(out, *a)
	}
	return out, rows.Err()
}

// Decide records a decision on a pending approval request. Exactly one
// decision succeeds: a request that is no longer pending is
// [ErrNotPending], and nothing changes.
func (s *Store) Decide(ctx context.Context, runID, id string, state ApprovalState, decision json.RawMessage, at time.Time, events []Event) error {
	return s.write(ctx, "decide approval", func() error {
		res, err := s.exec(ctx, `UPDATE approvals SET state=?, decision=?, decided_at=? WHERE id=? AND run_id=? AND state=?`,
			string(state), string(decision), at.UnixMilli(), id, runID, string(ApprovalPending))
		if err != nil {
			return s.classify("decide approval", err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return fmt.Errorf("%w: %s", ErrNotPending, id)
		}
		return s.insertEvents(ctx, runID, events)
	})
}
