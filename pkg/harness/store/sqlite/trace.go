package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/initorigin/io-harness-go/pkg/harness/store"
)

const runColumns = `id, parent_id, agent_path, task, provider, status, outcome, outcome_json,
	started_at, finished_at, steps, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, cost_usd, cost_known,
	policy, remembered, lost_input_tokens, lost_output_tokens, lost_cache_read_tokens, lost_cache_write_tokens,
	lost_cost_usd, lost_cost_known, paused_ms, paused_at, root_id, containment`

func scanRun(sc interface{ Scan(...any) error }) (*store.Run, error) {
	var r store.Run
	var task, status, outcomeJSON, policy, remembered, containment string
	var started, finished, pausedMS, pausedAt int64
	if err := sc.Scan(&r.ID, &r.ParentID, &r.AgentPath, &task, &r.Provider, &status, &r.Outcome, &outcomeJSON,
		&started, &finished, &r.Steps, &r.Usage.InputTokens, &r.Usage.OutputTokens,
		&r.Usage.CacheReadTokens, &r.Usage.CacheWriteTokens, &r.Cost.USD, &r.Cost.Known, &policy, &remembered,
		&r.LostUsage.InputTokens, &r.LostUsage.OutputTokens, &r.LostUsage.CacheReadTokens, &r.LostUsage.CacheWriteTokens,
		&r.LostCost.USD, &r.LostCost.Known, &pausedMS, &pausedAt, &r.RootID, &containment); err != nil {
		return nil, err
	}
	r.Paused = time.Duration(pausedMS) * time.Millisecond
	if pausedAt != 0 {
		r.PausedAt = time.UnixMilli(pausedAt)
	}
	if policy != "" {
		r.Policy = json.RawMessage(policy)
	}
	if remembered != "" {
		r.Remembered = json.RawMessage(remembered)
	}
	if containment != "" {
		r.Containment = json.RawMessage(containment)
	}
	if r.RootID == "" {
		r.RootID = r.ID // written before trees: a root
	}
	r.Task = json.RawMessage(task)
	r.Status = store.Status(status)
	if outcomeJSON != "" {
		r.OutcomeJSON = json.RawMessage(outcomeJSON)
	}
	r.StartedAt = time.UnixMilli(started)
	if finished != 0 {
		r.FinishedAt = time.UnixMilli(finished)
	}
	return &r, nil
}

// Run implements store.Reader.
func (s *Store) Run(ctx context.Context, id string) (*store.Run, error) {
	r, err := scanRun(s.db.QueryRowContext(ctx, `SELECT `+runColumns+` FROM runs WHERE id=?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("%w: run %s", store.ErrNotFound, id)
	}
	if err != nil {
		return nil, s.classify("read run", err)
	}
	return r, nil
}

// Runs implements store.Reader.
func (s *Store) Runs(ctx context.Context, f store.RunFilter) ([]store.Run, error) {
	limit := f.Limit
	switch {
	case limit == 0:
		limit = 100
	case limit < 0:
		limit = -1 // SQLite: no limit
	}
	q := `SELECT ` + runColumns + ` FROM runs`
	var where []string
	args := []any{}
	if f.ParentID != "" {
		where = append(where, `parent_id=?`)
		args = append(args, f.ParentID)
	}
	if f.RootID != "" {
		where = append(where, `(root_id=? OR id=?)`)
		args = append(args, f.RootID, f.RootID)
	}
	if f.Roots {
		where = append(where, `(root_id='' OR root_id=id)`)
	}
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, ` AND `)
	}
	if f.RootID != "" {
		q += ` ORDER BY rowid LIMIT ?` // a tree in the order its agents were made
	} else {
		q += ` ORDER BY started_at DESC, id DESC LIMIT ?`
	}
	args = append(args, limit)
	rows, err := s.db.QueryContext(ctx, q, args...)
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
	return out, rows.Err()
}

// Steps implements store.Reader.
func (s *Store) Steps(ctx context.Context, runID string) ([]store.Step, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT step, started_at, finished_at, assistant, input_tokens, output_tokens,
		cache_read_tokens, cache_write_tokens, cost_usd, cost_known, verified, provider
		FROM steps WHERE run_id=? ORDER BY step`, runID)
	if err != nil {
		return nil, s.classify("read steps", err)
	}
	var out []store.Step
	index := map[int]int{}
	for rows.Next() {
		st := store.Step{RunID: runID}
		var started, finished int64
		var assistant string
		if err := rows.Scan(&st.Step, &started, &finished, &assistant, &st.Usage.InputTokens, &st.Usage.OutputTokens,
			&st.Usage.CacheReadTokens, &st.Usage.CacheWriteTokens, &st.Cost.USD, &st.Cost.Known, &st.Verified, &st.Provider); err != nil {
			rows.Close()
			return nil, s.classify("read step", err)
		}
		st.StartedAt, st.FinishedAt = time.UnixMilli(started), time.UnixMilli(finished)
		if err := json.Unmarshal([]byte(assistant), &st.Assistant); err != nil {
			rows.Close()
			return nil, fmt.Errorf("%w: run %s step %d: assistant turn: %v", store.ErrCorrupt, runID, st.Step, err)
		}
		index[st.Step] = len(out)
		out = append(out, st)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, s.classify("read steps", err)
	}

	// Reads are not one snapshot: a step may commit between the queries,
	// so rows of steps beyond the last one read are left out.
	last := 0
	if len(out) > 0 {
		last = out[len(out)-1].Step
	}
	orows, err := s.db.QueryContext(ctx, `SELECT step, kind, call_id, tool, arguments, output, is_error, refusal, changed
		FROM observations WHERE run_id=? AND step<=? ORDER BY step, idx`, runID, last)
	if err != nil {
		return nil, s.classify("read observations", err)
	}
	for orows.Next() {
		var step int
		var o store.Observation
		var kind, args, changed string
		if err := orows.Scan(&step, &kind, &o.CallID, &o.Tool, &args, &o.Output, &o.IsError, &o.Refusal, &changed); err != nil {
			orows.Close()
			return nil, s.classify("read observation", err)
		}
		o.Kind = store.ObservationKind(kind)
		if args != "" {
			o.Arguments = json.RawMessage(args)
		}
		if changed != "" {
			if err := json.Unmarshal([]byte(changed), &o.Changed); err != nil {
				orows.Close()
				return nil, fmt.Errorf("%w: run %s step %d: changed files: %v", store.ErrCorrupt, runID, step, err)
			}
		}
		i, ok := index[step]
		if !ok {
			orows.Close()
			return nil, fmt.Errorf("%w: run %s: observation of step %d, which was never committed", store.ErrCorrupt, runID, step)
		}
		out[i].Observations = append(out[i].Observations, o)
	}
	orows.Close()
	if err := orows.Err(); err != nil {
		return nil, s.classify("read observations", err)
	}

	arows, err := s.db.QueryContext(ctx, `SELECT step, attempt, provider, error_kind, error, status, latency_ms, wait_ms, at
		FROM attempts WHERE run_id=? AND step<=? ORDER BY id`, runID, last)
	if err != nil {
		return nil, s.classify("read attempts", err)
	}
	defer arows.Close()
	for arows.Next() {
		var a store.Attempt
		var latency, wait, at int64
		if err := arows.Scan(&a.Step, &a.Attempt, &a.Provider, &a.ErrorKind, &a.Error, &a.Status, &latency, &wait, &at); err != nil {
			return nil, s.classify("read attempt", err)
		}
		a.Latency, a.Wait, a.At = time.Duration(latency)*time.Millisecond, time.Duration(wait)*time.Millisecond, time.UnixMilli(at)
		if i, ok := index[a.Step]; ok {
			out[i].Attempts = append(out[i].Attempts, a)
		}
	}
	return out, arows.Err()
}

// Events implements store.Reader.
func (s *Store) Events(ctx context.Context, runID string, after int64, limit int) ([]store.Event, error) {
	q := `SELECT seq, step, kind, at, data FROM events WHERE run_id=? AND seq>? ORDER BY seq`
	args := []any{runID, after}
	if limit > 0 {
		q += ` LIMIT ?`
		args = append(args, limit)
	}
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, s.classify("read events", err)
	}
	defer rows.Close()
	var out []store.Event
	for rows.Next() {
		var e store.Event
		var at int64
		var data string
		if err := rows.Scan(&e.Seq, &e.Step, &e.Kind, &at, &data); err != nil {
			return nil, s.classify("read event", err)
		}
		e.At = time.UnixMilli(at)
		e.Data = json.RawMessage(data)
		out = append(out, e)
	}
	return out, rows.Err()
}

// LastSeq returns the highest event sequence number stored for a run, or 0.
func (s *Store) LastSeq(ctx context.Context, runID string) (int64, error) {
	var seq sql.NullInt64
	if err := s.db.QueryRowContext(ctx, `SELECT MAX(seq) FROM events WHERE run_id=?`, runID).Scan(&seq); err != nil {
		return 0, s.classify("read last event", err)
	}
	return seq.Int64, nil
}

// Attempts implements store.Reader.
func (s *Store) Attempts(ctx context.Context, runID string) ([]store.Attempt, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT step, attempt, provider, error_kind, error, status, latency_ms, wait_ms, at
		FROM attempts WHERE run_id=? AND step > (SELECT steps FROM runs WHERE id=?) ORDER BY id`, runID, runID)
	if err != nil {
		return nil, s.classify("read attempts", err)
	}
	defer rows.Close()
	var out []store.Attempt
	for rows.Next() {
		var a store.Attempt
		var latency, wait, at int64
		if err := rows.Scan(&a.Step, &a.Attempt, &a.Provider, &a.ErrorKind, &a.Error, &a.Status, &latency, &wait, &at); err != nil {
			return nil, s.classify("read attempt", err)
		}
		a.Latency, a.Wait, a.At = time.Duration(latency)*time.Millisecond, time.Duration(wait)*time.Millisecond, time.UnixMilli(at)
		out = append(out, a)
	}
	return out, rows.Err()
}
