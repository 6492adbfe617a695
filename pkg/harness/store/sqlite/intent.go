package sqlite

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/initorigin/io-harness-go/pkg/harness/store"
)

// OpenIntent implements store.Store.
func (s *Store) OpenIntent(ctx context.Context, l *store.Lease, in *store.Intent) (int64, error) {
	var id int64
	err := s.write(ctx, "open intent", l, func() error {
		res, err := s.exec(ctx,
			`INSERT INTO intents (run_id, step, call_id, tool, arguments, state, created_at) VALUES (?,?,?,?,?,?,?)`,
			in.RunID, in.Step, in.CallID, in.Tool, string(in.Arguments), string(store.IntentOpen), in.CreatedAt.UnixMilli())
		if err != nil {
			return s.classify("open intent", err)
		}
		id, err = res.LastInsertId()
		return err
	})
	return id, err
}

// Recover implements store.Store: in one transaction, every open intent
// of the run becomes in doubt, and the spend of every call whose step
// never committed is added to the run's lost spend.
func (s *Store) Recover(ctx context.Context, l *store.Lease) ([]store.Intent, error) {
	var out []store.Intent
	err := s.write(ctx, "recover", l, func() error {
		if _, err := s.exec(ctx, `UPDATE intents SET state=? WHERE run_id=? AND state=?`,
			string(store.IntentInDoubt), l.Target(), string(store.IntentOpen)); err != nil {
			return s.classify("mark intents in doubt", err)
		}
		if _, err := s.exec(ctx, `UPDATE runs SET
			lost_input_tokens = lost_input_tokens + (SELECT coalesce(sum(input_tokens),0) FROM spend WHERE run_id=?1 AND state='open'),
			lost_output_tokens = lost_output_tokens + (SELECT coalesce(sum(output_tokens),0) FROM spend WHERE run_id=?1 AND state='open'),
			lost_cache_read_tokens = lost_cache_read_tokens + (SELECT coalesce(sum(cache_read_tokens),0) FROM spend WHERE run_id=?1 AND state='open'),
			lost_cache_write_tokens = lost_cache_write_tokens + (SELECT coalesce(sum(cache_write_tokens),0) FROM spend WHERE run_id=?1 AND state='open'),
			lost_cost_usd = lost_cost_usd + (SELECT coalesce(sum(cost_usd),0) FROM spend WHERE run_id=?1 AND state='open'),
			lost_cost_known = lost_cost_known AND (SELECT coalesce(min(cost_known),1) FROM spend WHERE run_id=?1 AND state='open')
			WHERE id=?1`, l.Target()); err != nil {
			return s.classify("count lost spend", err)
		}
		if _, err := s.exec(ctx, `UPDATE spend SET state='lost' WHERE run_id=? AND state='open'`, l.Target()); err != nil {
			return s.classify("mark spend lost", err)
		}
		rows, err := s.w.QueryContext(ctx,
			`SELECT id, run_id, step, call_id, tool, arguments, state, created_at FROM intents WHERE run_id=? AND state=? ORDER BY id`,
			l.Target(), string(store.IntentInDoubt))
		if err != nil {
			return s.classify("read intents", err)
		}
		defer rows.Close()
		for rows.Next() {
			var in store.Intent
			var args, state string
			var created int64
			if err := rows.Scan(&in.ID, &in.RunID, &in.Step, &in.CallID, &in.Tool, &args, &state, &created); err != nil {
				return fmt.Errorf("store: read intent: %w", err)
			}
			in.Arguments = json.RawMessage(args)
			in.State = store.IntentState(state)
			in.CreatedAt = time.UnixMilli(created)
			out = append(out, in)
		}
		return rows.Err()
	})
	return out, err
}
