package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

const runColumns = `id, parent_id, agent_path, task, provider, status, outcome, outcome_json,
	started_at, finished_at, steps, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, cost_usd, cost_known,
	policy, remembered`

func scanRun(sc interface{ Scan(...any) error }) (*Run, error) {
	var r Run
	var task, status, outcomeJSON, policy, remembered string
	var started, finished int64
	if err := sc.Scan(&r.ID, &r.ParentID, &r.AgentPath, &task, &r.Provider, &status, &r.Outcome, &outcomeJSON,
		&started, &finished, &r.Steps, &r.Usage.InputTokens, &r.Usage.OutputTokens,
		&r.Usage.CacheReadTokens, &r.Usage.CacheWriteTokens, &r.Cost.USD, &r.Cost.Known, &policy, &remembered); err != nil {
		return nil, err
	}
	if policy != "" {
		r.Policy = json.RawMessage(policy)
	}
	if remembered != "" {
		r.Remembered = json.RawMessage(remembered)
	}
	r.Task = json.RawMessage(task)
	r.Status = Status(status)
	if outcomeJSON != "" {
		r.OutcomeJSON = json.RawMessage(outcomeJSON)
	}
	r.StartedAt = time.UnixMilli(started)
	if finished != 0 {
		r.FinishedAt = time.UnixMilli(finished)
	}
	return &r, nil
}

// Run returns one run's row.
//
// # Errors
//
// An unknown id wraps [ErrNotFound].
func (s *Store) Run(ctx context.Context, id string) (*Run, error) {
	r, err := scanRun(s.db.QueryRowContext(ctx, `SELECT `+runColumns+` FROM runs WHERE id=?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	if err != nil {
		return nil, s.classify("read run", err)
	}
	return r, nil
}

// RunFilter selects runs for [Store.Runs].
type RunFilter struct {
	// ParentID, when set, selects that run's children.
	ParentID string `json:"parent_id,omitempty"`
	// Limit caps the number of runs; zero means 100.
	Limit int `json:"limit,omitempty"`
}

// Runs lists runs, newest first.
func (s *Store) Runs(ctx context.Context, f RunFilter) ([]Run, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	q := `SELECT ` + runColumns + ` FROM runs`
	args := []any{}
	if f.ParentID != "" {
		q += ` WHERE parent_id=?`
		args = append(args, f.ParentID)
	}
	q += ` ORDER BY started_at DESC, id DESC LIMIT ?`
	args = append(args, limit)
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, s.classify("list runs", err)
	}
	defer rows.Close()
	var out []Run
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, s.classify("list runs", err)
		}
		out = append(out, *r)
	}
	return out, rows.Err()
}

// Steps returns a run's committed steps in order, each with its
// observations and attempts.
func (s *Store) Steps(ctx context.Context, runID string) ([]Step, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT step, started_at, finished_at, assistant, input_tokens, output_tokens,
		cache_read_tokens, cache_write_tokens, cost_usd, cost_known, verified, provider
		FROM steps WHERE run_id=? ORDER BY step`, runID)
	if err != nil {
		return nil, s.classify("read steps", err)
	}
	var out []Step
	index := map[int]int{}
	for rows.Next() {
		st := Step{RunID: runID}
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
			return nil, fmt.Errorf("%w: run %s step %d: assistant turn: %v", ErrCorrupt, runID, st.Step, err)
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
	orows, err := s.db.QueryContext(ctx, `SELECT step, kind, call_id, tool, arguments, output, is_error, refusal
		FROM observations WHERE run_id=? AND step<=? ORDER BY step, idx`, runID, last)
	if err != nil {
		return nil, s.classify("read observations", err)
	}
	for orows.Next() {
		var step int
		var o Observation
		var kind, args string
		if err := orows.Scan(&step, &kind, &o.CallID, &o.Tool, &args, &o.Output, &o.IsError, &o.Refusal); err != nil {
			orows.Close()
			return nil, s.classify("read observation", err)
		}
		o.Kind = ObservationKind(kind)
		if args != "" {
			o.Arguments = json.RawMessage(args)
		}
		i, ok := index[step]
		if !ok {
			orows.Close()
			return nil, fmt.Errorf("%w: run %s: observation of step %d, which was never committed", ErrCorrupt, runID, step)
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
		var a Attempt
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

// Events returns a run's events with a sequence number above after, in
// order, at most limit of them (zero means all).
func (s *Store) Events(ctx context.Context, runID string, after int64, limit int) ([]Event, error) {
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
	var out []Event
	for rows.Next() {
		var e Event
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
