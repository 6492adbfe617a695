package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/initorigin/io-harness-go/pkg/harness/store"
)

func insertApproval(b *pgx.Batch, a *store.Approval) {
	b.Queue(`INSERT INTO ioh_approvals (id, run_id, step, call_id, tool, arguments, act, target, content, shown, hash, rule, layer, state, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)`,
		a.ID, a.RunID, a.Step, text(a.CallID), text(a.Tool), textBytes(a.Arguments), text(a.Act), text(a.Target), text(a.Content),
		text(a.Shown), text(a.Hash), text(a.Rule), text(a.Layer), string(store.ApprovalPending), a.CreatedAt)
}

const approvalColumns = `id, run_id, step, call_id, tool, arguments, act, target, content, shown, hash, rule, layer, state, decision, result, created_at, decided_at`

func scanApproval(sc pgx.Row) (*store.Approval, error) {
	var a store.Approval
	var args, state, decision, result string
	var decided *time.Time
	if err := sc.Scan(&a.ID, &a.RunID, &a.Step, &a.CallID, &a.Tool, &args, &a.Act, &a.Target, &a.Content, &a.Shown,
		&a.Hash, &a.Rule, &a.Layer, &state, &decision, &result, &a.CreatedAt, &decided); err != nil {
		return nil, err
	}
	for _, f := range []*string{&a.CallID, &a.Tool, &a.Act, &a.Target, &a.Content, &a.Shown, &a.Hash, &a.Rule, &a.Layer} {
		*f = untext(*f)
	}
	a.Arguments, a.State = json.RawMessage(untext(args)), store.ApprovalState(state)
	if decision != "" {
		a.Decision = json.RawMessage(untext(decision))
	}
	if result != "" {
		var o store.Observation
		if err := json.Unmarshal([]byte(untext(result)), &o); err != nil {
			return nil, fmt.Errorf("%w: approval %s: result: %v", store.ErrCorrupt, a.ID, err)
		}
		a.Result = &o
	}
	if decided != nil {
		a.DecidedAt = *decided
	}
	return &a, nil
}

// Approval implements store.Reader.
func (s *Store) Approval(ctx context.Context, runID, id string) (*store.Approval, error) {
	if err := s.readable("read approval"); err != nil {
		return nil, err
	}
	a, err := scanApproval(s.pool.QueryRow(ctx, `SELECT `+approvalColumns+` FROM ioh_approvals WHERE run_id = $1 AND id = $2`, runID, id))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, fmt.Errorf("%w: approval %s of run %s", store.ErrNotFound, id, runID)
	case errors.Is(err, store.ErrCorrupt):
		return nil, err
	case err != nil:
		return nil, s.classify("read approval", err)
	}
	return a, nil
}

// Approvals implements store.Reader.
func (s *Store) Approvals(ctx context.Context, runID string) ([]store.Approval, error) {
	if err := s.readable("read approvals"); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT `+approvalColumns+` FROM ioh_approvals WHERE run_id = $1 ORDER BY created_at, id`, runID)
	if err != nil {
		return nil, s.classify("read approvals", err)
	}
	defer rows.Close()
	var out []store.Approval
	for rows.Next() {
		a, err := scanApproval(rows)
		if errors.Is(err, store.ErrCorrupt) {
			return nil, err
		}
		if err != nil {
			return nil, s.classify("read approval", err)
		}
		out = append(out, *a)
	}
	if err := rows.Err(); err != nil {
		return nil, s.classify("read approvals", err)
	}
	return out, nil
}

// Decide implements store.Store: the decision lands only on a pending
// request, and its events with it.
func (s *Store) Decide(ctx context.Context, runID, id string, state store.ApprovalState, decision json.RawMessage, at time.Time, events []store.Event) error {
	b := batch(nil)
	b.Queue(`WITH u AS (UPDATE ioh_approvals SET state = $3, decision = $4, decided_at = $5
		WHERE run_id = $1 AND id = $2 AND state = $6 RETURNING 1)
		SELECT ioh_check(count(*) = 1, 'IH004', $2) FROM u`,
		runID, id, string(state), textBytes(decision), at, string(store.ApprovalPending))
	insertEvents(b, runID, events)
	return s.send(ctx, "decide approval", b, nil)
}

// RecordDecisions implements store.Store.
func (s *Store) RecordDecisions(ctx context.Context, l *store.Lease, performed []store.Performed, events []store.Event) error {
	b := batch(l)
	for _, p := range performed {
		result, err := json.Marshal(p.Result)
		if err != nil {
			return fmt.Errorf("store: encode the result of approval %s: %w", p.ID, err)
		}
		b.Queue(`WITH u AS (UPDATE ioh_approvals SET state = $3, result = $4
			WHERE run_id = $1 AND id = $2 AND state IN ($5, $6, $7) RETURNING 1)
			SELECT ioh_check(count(*) = 1, 'IH004', 'approval ' || $2 || ' of run ' || $1 || ' is not decided') FROM u`,
			l.Target(), p.ID, string(store.ApprovalPerformed), textBytes(result),
			string(store.ApprovalApproved), string(store.ApprovalDenied), string(store.ApprovalRefused))
		b.Queue(`UPDATE ioh_intents SET state = $3 WHERE run_id = $1 AND call_id = $2 AND state = $4`,
			l.Target(), text(p.CallID), string(store.IntentDone), string(store.IntentOpen))
	}
	insertEvents(b, l.Target(), events)
	return s.send(ctx, "record decisions", b, nil)
}
