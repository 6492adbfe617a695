package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/initorigin/io-harness-go/pkg/harness/store"
)

// runColumns and scanRun are the one place that reads a run's columns;
// insertRun is the one that writes a new one.
const runColumns = `id, parent_id, agent_path, task, provider, status, outcome, outcome_json,
	started_at, finished_at, steps, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, cost_usd, cost_known,
	policy, remembered, lost_input_tokens, lost_output_tokens, lost_cache_read_tokens, lost_cache_write_tokens,
	lost_cost_usd, lost_cost_known, paused_ms, paused_at, root_id, containment`

func scanRun(sc pgx.Row) (*store.Run, error) {
	var r store.Run
	var task, status, outcomeJSON, policy, remembered, containment string
	var finished, pausedAt *time.Time
	var pausedMS int64
	if err := sc.Scan(&r.ID, &r.ParentID, &r.AgentPath, &task, &r.Provider, &status, &r.Outcome, &outcomeJSON,
		&r.StartedAt, &finished, &r.Steps, &r.Usage.InputTokens, &r.Usage.OutputTokens,
		&r.Usage.CacheReadTokens, &r.Usage.CacheWriteTokens, &r.Cost.USD, &r.Cost.Known, &policy, &remembered,
		&r.LostUsage.InputTokens, &r.LostUsage.OutputTokens, &r.LostUsage.CacheReadTokens, &r.LostUsage.CacheWriteTokens,
		&r.LostCost.USD, &r.LostCost.Known, &pausedMS, &pausedAt, &r.RootID, &containment); err != nil {
		return nil, err
	}
	r.ParentID, r.AgentPath, r.Provider, r.Outcome = untext(r.ParentID), untext(r.AgentPath), untext(r.Provider), untext(r.Outcome)
	if r.RootID = untext(r.RootID); r.RootID == "" {
		r.RootID = r.ID // written before trees: a root
	}
	if containment != "" {
		r.Containment = json.RawMessage(untext(containment))
	}
	r.Paused = time.Duration(pausedMS) * time.Millisecond
	if pausedAt != nil {
		r.PausedAt = *pausedAt
	}
	if policy != "" {
		r.Policy = json.RawMessage(untext(policy))
	}
	if remembered != "" {
		r.Remembered = json.RawMessage(untext(remembered))
	}
	r.Task = json.RawMessage(untext(task))
	r.Status = store.Status(status)
	if outcomeJSON != "" {
		r.OutcomeJSON = json.RawMessage(untext(outcomeJSON))
	}
	if finished != nil {
		r.FinishedAt = *finished
	}
	return &r, nil
}

// Run implements store.Reader.
func (s *Store) Run(ctx context.Context, id string) (*store.Run, error) {
	if err := s.readable("read run"); err != nil {
		return nil, err
	}
	r, err := scanRun(s.pool.QueryRow(ctx, `SELECT `+runColumns+` FROM ioh_runs WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("%w: run %s", store.ErrNotFound, id)
	}
	if err != nil {
		return nil, s.classify("read run", err)
	}
	return r, nil
}

// Runs implements store.Reader.
func (s *Store) Runs(ctx context.Context, f store.RunFilter) ([]store.Run, error) {
	if err := s.readable("list runs"); err != nil {
		return nil, err
	}
	q := `SELECT ` + runColumns + ` FROM ioh_runs`
	var where []string
	args := []any{}
	if f.ParentID != "" {
		args = append(args, text(f.ParentID))
		where = append(where, fmt.Sprintf(`parent_id = $%d`, len(args)))
	}
	if f.RootID != "" {
		args = append(args, text(f.RootID))
		where = append(where, fmt.Sprintf(`(root_id = $%d OR id = $%d)`, len(args), len(args)))
	}
	if f.Roots {
		where = append(where, `(root_id = '' OR root_id = id)`)
	}
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, ` AND `)
	}
	if f.RootID != "" {
		q += ` ORDER BY made` // a tree in the order its agents were made
	} else {
		q += ` ORDER BY started_at DESC, id DESC`
	}
	switch {
	case f.Limit == 0:
		args = append(args, 100)
		q += fmt.Sprintf(` LIMIT $%d`, len(args))
	case f.Limit > 0:
		args = append(args, f.Limit)
		q += fmt.Sprintf(` LIMIT $%d`, len(args))
	}
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, s.classify("list runs", err)
	}
	defer rows.Close()
	var out []store.Run
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, s.classify("list runs", err)
		}
		out = append(out, *r)
	}
	if err := rows.Err(); err != nil {
		return nil, s.classify("list runs", err)
	}
	return out, nil
}

// Steps implements store.Reader. The step rows, their observations and
// their attempts are read in one round trip, in one snapshot of the
// database.
func (s *Store) Steps(ctx context.Context, runID string) ([]store.Step, error) {
	if err := s.readable("read steps"); err != nil {
		return nil, err
	}
	var out []store.Step
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		b.Queue(`SELECT step, started_at, finished_at, assistant, input_tokens, output_tokens,
			cache_read_tokens, cache_write_tokens, cost_usd, cost_known, verified, provider
			FROM ioh_steps WHERE run_id = $1 ORDER BY step`, runID)
		b.Queue(`SELECT step, kind, call_id, tool, arguments, output, is_error, refusal, changed
			FROM ioh_observations WHERE run_id = $1 ORDER BY step, idx`, runID)
		b.Queue(`SELECT step, attempt, provider, error_kind, error, status, latency_ms, wait_ms, at
			FROM ioh_attempts WHERE run_id = $1 ORDER BY id`, runID)
		br := tx.SendBatch(ctx, b)
		defer br.Close()
		index := map[int]int{}
		rows, err := br.Query()
		if err != nil {
			return err
		}
		for rows.Next() {
			st := store.Step{RunID: runID}
			var assistant string
			if err := rows.Scan(&st.Step, &st.StartedAt, &st.FinishedAt, &assistant, &st.Usage.InputTokens, &st.Usage.OutputTokens,
				&st.Usage.CacheReadTokens, &st.Usage.CacheWriteTokens, &st.Cost.USD, &st.Cost.Known, &st.Verified, &st.Provider); err != nil {
				rows.Close()
				return err
			}
			st.Provider = untext(st.Provider)
			if err := json.Unmarshal([]byte(untext(assistant)), &st.Assistant); err != nil {
				rows.Close()
				return fmt.Errorf("%w: run %s step %d: assistant turn: %v", store.ErrCorrupt, runID, st.Step, err)
			}
			index[st.Step] = len(out)
			out = append(out, st)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		orows, err := br.Query()
		if err != nil {
			return err
		}
		for orows.Next() {
			var step int
			var o store.Observation
			var kind, args, changed string
			if err := orows.Scan(&step, &kind, &o.CallID, &o.Tool, &args, &o.Output, &o.IsError, &o.Refusal, &changed); err != nil {
				orows.Close()
				return err
			}
			o.Kind = store.ObservationKind(untext(kind))
			o.CallID, o.Tool, o.Output, o.Refusal = untext(o.CallID), untext(o.Tool), untext(o.Output), untext(o.Refusal)
			if args != "" {
				o.Arguments = json.RawMessage(untext(args))
			}
			if changed != "" {
				if err := json.Unmarshal([]byte(untext(changed)), &o.Changed); err != nil {
					orows.Close()
					return fmt.Errorf("%w: run %s step %d: changed files: %v", store.ErrCorrupt, runID, step, err)
				}
			}
			i, ok := index[step]
			if !ok {
				orows.Close()
				return fmt.Errorf("%w: run %s: observation of step %d, which was never committed", store.ErrCorrupt, runID, step)
			}
			out[i].Observations = append(out[i].Observations, o)
		}
		orows.Close()
		if err := orows.Err(); err != nil {
			return err
		}
		arows, err := br.Query()
		if err != nil {
			return err
		}
		defer arows.Close()
		for arows.Next() {
			a, err := scanAttempt(arows)
			if err != nil {
				return err
			}
			if i, ok := index[a.Step]; ok {
				out[i].Attempts = append(out[i].Attempts, a)
			}
		}
		return arows.Err()
	})
	if errors.Is(err, store.ErrCorrupt) {
		return nil, err
	}
	if err != nil {
		return nil, s.classify("read steps", err)
	}
	return out, nil
}

func scanAttempt(rows pgx.Rows) (store.Attempt, error) {
	var a store.Attempt
	var latency, wait int64
	if err := rows.Scan(&a.Step, &a.Attempt, &a.Provider, &a.ErrorKind, &a.Error, &a.Status, &latency, &wait, &a.At); err != nil {
		return a, err
	}
	a.Provider, a.ErrorKind, a.Error = untext(a.Provider), untext(a.ErrorKind), untext(a.Error)
	a.Latency, a.Wait = time.Duration(latency)*time.Millisecond, time.Duration(wait)*time.Millisecond
	return a, nil
}

// Events implements store.Reader.
func (s *Store) Events(ctx context.Context, runID string, after int64, limit int) ([]store.Event, error) {
	if err := s.readable("read events"); err != nil {
		return nil, err
	}
	q := `SELECT seq, step, kind, at, data FROM ioh_events WHERE run_id = $1 AND seq > $2 ORDER BY seq`
	args := []any{runID, after}
	if limit > 0 {
		q += ` LIMIT $3`
		args = append(args, limit)
	}
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, s.classify("read events", err)
	}
	defer rows.Close()
	var out []store.Event
	for rows.Next() {
		var e store.Event
		var data string
		if err := rows.Scan(&e.Seq, &e.Step, &e.Kind, &e.At, &data); err != nil {
			return nil, s.classify("read event", err)
		}
		e.Kind = untext(e.Kind)
		e.Data = json.RawMessage(untext(data))
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, s.classify("read events", err)
	}
	return out, nil
}

// LastSeq implements store.Reader.
func (s *Store) LastSeq(ctx context.Context, runID string) (int64, error) {
	if err := s.readable("read last event"); err != nil {
		return 0, err
	}
	var seq int64
	if err := s.pool.QueryRow(ctx, `SELECT coalesce(max(seq), 0) FROM ioh_events WHERE run_id = $1`, runID).Scan(&seq); err != nil {
		return 0, s.classify("read last event", err)
	}
	return seq, nil
}

// Attempts implements store.Reader.
func (s *Store) Attempts(ctx context.Context, runID string) ([]store.Attempt, error) {
	if err := s.readable("read attempts"); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT step, attempt, provider, error_kind, error, status, latency_ms, wait_ms, at
		FROM ioh_attempts WHERE run_id = $1 AND step > (SELECT steps FROM ioh_runs WHERE id = $1) ORDER BY id`, runID)
	if err != nil {
		return nil, s.classify("read attempts", err)
	}
	defer rows.Close()
	var out []store.Attempt
	for rows.Next() {
		a, err := scanAttempt(rows)
		if err != nil {
			return nil, s.classify("read attempt", err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, s.classify("read attempts", err)
	}
	return out, nil
}
