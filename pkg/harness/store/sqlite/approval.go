package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/initorigin/io-harness-go/pkg/harness/store"
)

func (s *Store) insertApproval(ctx context.Context, a *store.Approval) error {
	_, err := s.exec(ctx, `INSERT INTO approvals (id, run_id, step, call_id, tool, arguments, act, target, content, shown, hash, rule, layer, state, created_at)
		VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`,
		a.ID, a.RunID, a.Step, a.CallID, a.Tool, string(a.Arguments), a.Act, a.Target, a.Content, a.Shown, a.Hash,
		a.Rule, a.Layer, string(store.ApprovalPending), a.CreatedAt.UnixMilli())
	if err != nil {
		return s.classify("insert approval", err)
	}
	return nil
}

const approvalColumns = `id, run_id, step, call_id, tool, arguments, act, target, content, shown, hash, rule, layer, state, decision, result, created_at, decided_at`

func scanApproval(sc interface{ Scan(...any) error }) (*store.Approval, error) {
	var a store.Approval
	var args, state, decision, result string
	var created, decided int64
	if err := sc.Scan(&a.ID, &a.RunID, &a.Step, &a.CallID, &a.Tool, &args, &a.Act, &a.Target, &a.Content, &a.Shown,
		&a.Hash, &a.Rule, &a.Layer, &state, &decision, &result, &created, &decided); err != nil {
		return nil, err
	}
	a.Arguments, a.State = json.RawMessage(args), store.ApprovalState(state)
	if decision != "" {
		a.Decision = json.RawMessage(decision)
	}
	if result != "" {
		var o store.Observation
		if err := json.Unmarshal([]byte(result), &o); err != nil {
			return nil, fmt.Errorf("%w: approval %s: result: %v", store.ErrCorrupt, a.ID, err)
		}
		a.Result = &o
	}
	a.CreatedAt = time.UnixMilli(created)
	if decided != 0 {
		a.DecidedAt = time.UnixMilli(decided)
	}
	return &a, nil
}

// Approval implements store.Reader.
func (s *Store) Approval(ctx context.Context, runID, id string) (*store.Approval, error) {
	a, err := scanApproval(s.db.QueryRowContext(ctx, `SELECT `+approvalColumns+` FROM approvals WHERE id=? AND run_id=?`, id, runID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("%w: approval %s of run %s", store.ErrNotFound, id, runID)
	}
	if err != nil {
		return nil, s.classify("read approval", err)
	}
	return a, nil
}

// Approvals implements store.Reader.
func (s *Store) Approvals(ctx context.Context, runID string) ([]store.Approval, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+approvalColumns+` FROM approvals WHERE run_id=? ORDER BY created_at, id`, runID)
	if err != nil {
		return nil, s.classify("read approvals", err)
	}
	defer rows.Close()
	var out []store.Approval
	for rows.Next() {
		a, err := scanApproval(rows)
		if err != nil {
			return nil, s.classify("read approval", err)
		}
		out = append(out, *a)
	}
	return out, rows.Err()
}

// Decide implements store.Store.
func (s *Store) Decide(ctx context.Context, runID, id string, state store.ApprovalState, decision json.RawMessage, at time.Time, events []store.Event) error {
	return s.write(ctx, "decide approval", nil, func() error {
		res, err := s.exec(ctx, `UPDATE approvals SET state=?, decision=?, decided_at=? WHERE id=? AND run_id=? AND state=?`,
			string(state), string(decision), at.UnixMilli(), id, runID, string(store.ApprovalPending))
		if err != nil {
			return s.classify("decide approval", err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return fmt.Errorf("%w: %s", store.ErrNotPending, id)
		}
		return s.insertEvents(ctx, runID, events)
	})
}

// RecordDecisions implements store.Store.
func (s *Store) RecordDecisions(ctx context.Context, l *store.Lease, performed []store.Performed, events []store.Event) error {
	return s.write(ctx, "record decisions", l, func() error {
		for _, p := range performed {
			result, err := json.Marshal(p.Result)
			if err != nil {
				return fmt.Errorf("store: encode the result of approval %s: %w", p.ID, err)
			}
			res, err := s.exec(ctx, `UPDATE approvals SET state=?, result=? WHERE id=? AND run_id=? AND state IN (?,?,?)`,
				string(store.ApprovalPerformed), string(result), p.ID, l.Target(),
				string(store.ApprovalApproved), string(store.ApprovalDenied), string(store.ApprovalRefused))
			if err != nil {
				return s.classify("record decision", err)
			}
			if n, _ := res.RowsAffected(); n != 1 {
				return fmt.Errorf("%w: approval %s of run %s is not decided", store.ErrNotPending, p.ID, l.Target())
			}
			if _, err := s.exec(ctx, `UPDATE intents SET state=? WHERE run_id=? AND call_id=? AND state=?`,
				string(store.IntentDone), l.Target(), p.CallID, string(store.IntentOpen)); err != nil {
				return s.classify("close the intent of a decision", err)
			}
		}
		return s.insertEvents(ctx, l.Target(), events)
	})
}
