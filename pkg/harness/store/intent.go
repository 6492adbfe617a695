package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// IntentState is where an intent stands.
type IntentState string

const (
	// IntentOpen is an effect that has started and whose step has not
	// committed.
	IntentOpen IntentState = "open"
	// IntentDone is an effect whose step committed.
	IntentDone IntentState = "done"
	// IntentInDoubt is an effect whose step never committed: the process
	// died between starting it and recording its result, so it may or may
	// not have happened.
	IntentInDoubt IntentState = "in_doubt"
	// IntentReported is an in-doubt effect the model has been told about.
	IntentReported IntentState = "reported"
)

// Intent records that an effect which is not idempotent is about to
// happen. It is written, and committed, before the effect starts.
type Intent struct {
	ID        int64           `json:"id"`
	RunID     string          `json:"run_id"`
	Step      int             `json:"step"`
	CallID    string          `json:"call_id"`
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
	State     IntentState     `json:"state"`
	CreatedAt time.Time       `json:"created_at"`
}

// OpenIntent records, durably and at once, that the effect described by in
// is about to start, and returns the intent's id. The intent closes when
// its step commits.
func (s *Store) OpenIntent(ctx context.Context, in *Intent) (int64, error) {
	var id int64
	err := s.write(ctx, "open intent", func() error {
		res, err := s.exec(ctx,
			`INSERT INTO intents (run_id, step, call_id, tool, arguments, state, created_at) VALUES (?,?,?,?,?,?,?)`,
			in.RunID, in.Step, in.CallID, in.Tool, string(in.Arguments), string(IntentOpen), in.CreatedAt.UnixMilli())
		if err != nil {
			return s.classify("open intent", err)
		}
		id, err = res.LastInsertId()
		return err
	})
	return id, err
}

// InDoubt turns every open intent of the run into an in-doubt one and
// returns all the run's in-doubt intents not yet reported to the model.
// A resume calls it before driving the run: an intent still open then
// belongs to a step that never committed.
func (s *Store) InDoubt(ctx context.Context, runID string) ([]Intent, error) {
	var out []Intent
	err := s.write(ctx, "find intents in doubt", func() error {
		if _, err := s.exec(ctx, `UPDATE intents SET state=? WHERE run_id=? AND state=?`,
			string(IntentInDoubt), runID, string(IntentOpen)); err != nil {
			return s.classify("mark intents in doubt", err)
		}
		rows, err := s.w.QueryContext(ctx,
			`SELECT id, run_id, step, call_id, tool, arguments, state, created_at FROM intents WHERE run_id=? AND state=? ORDER BY id`,
			runID, string(IntentInDoubt))
		if err != nil {
			return s.classify("read intents", err)
		}
		defer rows.Close()
		for rows.Next() {
			var in Intent
			var args, state string
			var created int64
			if err := rows.Scan(&in.ID, &in.RunID, &in.Step, &in.CallID, &in.Tool, &args, &state, &created); err != nil {
				return fmt.Errorf("store: read intent: %w", err)
			}
			in.Arguments = json.RawMessage(args)
			in.State = IntentState(state)
			in.CreatedAt = time.UnixMilli(created)
			out = append(out, in)
		}
		return rows.Err()
	})
	return out, err
}
