package sqlite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/initorigin/io-harness-go/pkg/harness/store"
)

// CommitStep implements store.Store: the step row with its assistant
// turn, every observation, every attempt, the budget draw on the run's
// totals, the step's spend marked committed, the events, the closing of
// the step's intents and, when the step ends the run, the outcome — in
// one transaction.
func (s *Store) CommitStep(ctx context.Context, l *store.Lease, c *store.Commit) error {
	st := &c.Step
	assistant, err := json.Marshal(st.Assistant)
	if err != nil {
		return fmt.Errorf("store: encode assistant turn: %w", err)
	}
	return s.write(ctx, "commit step", l, func() error {
		res, err := s.exec(ctx, `UPDATE runs SET steps=?,
			input_tokens=input_tokens+?, output_tokens=output_tokens+?,
			cache_read_tokens=cache_read_tokens+?, cache_write_tokens=cache_write_tokens+?,
			cost_usd=cost_usd+?, cost_known=cost_known AND ?
			WHERE id=? AND steps=? AND status=?`,
			st.Step,
			st.Usage.InputTokens, st.Usage.OutputTokens, st.Usage.CacheReadTokens, st.Usage.CacheWriteTokens,
			st.Cost.USD, st.Cost.Known,
			st.RunID, st.Step-1, string(store.StatusRunning))
		if err != nil {
			return s.classify("commit step", err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return fmt.Errorf("%w: run %s step %d is not its next step", store.ErrConflict, st.RunID, st.Step)
		}
		if _, err := s.exec(ctx, `INSERT INTO steps (run_id, step, started_at, finished_at, assistant,
			input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, cost_usd, cost_known, verified, provider)
			VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)`,
			st.RunID, st.Step, st.StartedAt.UnixMilli(), st.FinishedAt.UnixMilli(), string(assistant),
			st.Usage.InputTokens, st.Usage.OutputTokens, st.Usage.CacheReadTokens, st.Usage.CacheWriteTokens,
			st.Cost.USD, st.Cost.Known, st.Verified, st.Provider); err != nil {
			return s.classify("insert step", err)
		}
		if err := s.insertObservations(ctx, st); err != nil {
			return err
		}
		if err := s.insertAttempts(ctx, st.RunID, st.Attempts); err != nil {
			return err
		}
		if _, err := s.exec(ctx, `UPDATE spend SET state='committed' WHERE run_id=? AND step=? AND state='open'`, st.RunID, st.Step); err != nil {
			return s.classify("commit spend", err)
		}
		if _, err := s.exec(ctx, `UPDATE intents SET state=? WHERE run_id=? AND step=? AND state=?`,
			string(store.IntentDone), st.RunID, st.Step, string(store.IntentOpen)); err != nil {
			return s.classify("close intents", err)
		}
		for _, id := range c.InDoubt {
			if _, err := s.exec(ctx, `UPDATE intents SET state=? WHERE id=? AND run_id=? AND state=?`,
				string(store.IntentReported), id, st.RunID, string(store.IntentInDoubt)); err != nil {
				return s.classify("mark intent reported", err)
			}
		}
		for i := range c.Approvals {
			if err := s.insertApproval(ctx, &c.Approvals[i]); err != nil {
				return err
			}
		}
		for _, id := range c.Applied {
			if _, err := s.exec(ctx, `UPDATE approvals SET state=? WHERE id=? AND run_id=?`, string(store.ApprovalApplied), id, st.RunID); err != nil {
				return s.classify("mark approval applied", err)
			}
		}
		if c.Remembered != nil {
			if _, err := s.exec(ctx, `UPDATE runs SET remembered=? WHERE id=?`, string(c.Remembered), st.RunID); err != nil {
				return s.classify("remember rules", err)
			}
		}
		if err := s.insertEvents(ctx, st.RunID, c.Events); err != nil {
			return err
		}
		if c.Finish != nil {
			return s.finish(ctx, c.Finish)
		}
		return nil
	})
}

// RecordSpend implements store.Store. Its transaction is not synced to
// disk on its own: a process crash keeps it (the log is in the kernel's
// cache), and the step's commit, which follows, syncs it with the step.
//
// A fenced driver's spend is recorded all the same, as lost spend of the
// run (the provider served the call, and it is paid for), and the call
// returns ErrFenced.
func (s *Store) RecordSpend(ctx context.Context, l *store.Lease, sp *store.Spend) error {
	insert := func(state string) error {
		_, err := s.exec(ctx, `INSERT INTO spend (run_id, step, attempt, provider, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens,
			cost_usd, cost_known, state, at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)`,
			sp.RunID, sp.Step, sp.Attempt, sp.Provider, sp.Usage.InputTokens, sp.Usage.OutputTokens, sp.Usage.CacheReadTokens,
			sp.Usage.CacheWriteTokens, sp.Cost.USD, sp.Cost.Known, state, sp.At.UnixMilli())
		if err != nil {
			return s.classify("record spend", err)
		}
		return nil
	}
	err := s.writeSync(ctx, "record spend", l, false, func() error { return insert("open") })
	if !errors.Is(err, store.ErrFenced) || l == nil {
		return err
	}
	lost := s.write(ctx, "record lost spend", nil, func() error {
		res, err := s.exec(ctx, `UPDATE runs SET
			lost_input_tokens = lost_input_tokens + ?, lost_output_tokens = lost_output_tokens + ?,
			lost_cache_read_tokens = lost_cache_read_tokens + ?, lost_cache_write_tokens = lost_cache_write_tokens + ?,
			lost_cost_usd = lost_cost_usd + ?, lost_cost_known = lost_cost_known AND ?
			WHERE id = ? AND root_id = ?`,
			sp.Usage.InputTokens, sp.Usage.OutputTokens, sp.Usage.CacheReadTokens, sp.Usage.CacheWriteTokens,
			sp.Cost.USD, sp.Cost.Known, sp.RunID, l.RunID)
		if err != nil {
			return s.classify("record lost spend", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return nil // no run of the lease's tree
		}
		return insert("lost")
	})
	return errors.Join(err, lost)
}

// insertObservations writes a step's observations with as few statements
// as it can: one multi-row INSERT per batch of up to rowBatch rows.
func (s *Store) insertObservations(ctx context.Context, st *store.Step) error {
	obs := st.Observations
	for base := 0; base < len(obs); base += rowBatch {
		n := min(len(obs)-base, rowBatch)
		args := make([]any, 0, 11*n)
		for i := base; i < base+n; i++ {
			o := &obs[i]
			var changed []byte
			if len(o.Changed) > 0 {
				changed, _ = json.Marshal(o.Changed) // a []string always encodes
			}
			args = append(args, st.RunID, st.Step, i, string(o.Kind), o.CallID, o.Tool, string(o.Arguments), o.Output, o.IsError, o.Refusal, string(changed))
		}
		if _, err := s.exec(ctx, rowsQuery("INSERT INTO observations (run_id, step, idx, kind, call_id, tool, arguments, output, is_error, refusal, changed) VALUES ", 11, n), args...); err != nil {
			return s.classify("insert observations", err)
		}
	}
	return nil
}
