package postgres

import (
	"context"
	"encoding/json"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/initorigin/io-harness-go/pkg/harness/store"
)

// OpenIntent implements store.Store.
func (s *Store) OpenIntent(ctx context.Context, l *store.Lease, in *store.Intent) (int64, error) {
	b := batch(l)
	b.Queue(`INSERT INTO ioh_intents (run_id, step, call_id, tool, arguments, state, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id`,
		in.RunID, in.Step, text(in.CallID), text(in.Tool), textBytes(in.Arguments), string(store.IntentOpen), in.CreatedAt)
	var id int64
	err := s.send(ctx, "open intent", b, func(i int, br pgx.BatchResults) error {
		if i == b.Len()-1 {
			return br.QueryRow().Scan(&id)
		}
		_, err := br.Exec()
		return err
	})
	return id, err
}

// Recover implements store.Store: in one transaction every open intent of
// the run becomes in doubt, the spend of every call whose step never
// committed is added to the run's lost spend and marked lost, and the
// run's in-doubt intents are read back.
func (s *Store) Recover(ctx context.Context, l *store.Lease) ([]store.Intent, error) {
	b := batch(l)
	b.Queue(`UPDATE ioh_intents SET state = $2 WHERE run_id = $1 AND state = $3`,
		l.Target(), string(store.IntentInDoubt), string(store.IntentOpen))
	b.Queue(`UPDATE ioh_runs r SET
			lost_input_tokens = r.lost_input_tokens + o.input_tokens,
			lost_output_tokens = r.lost_output_tokens + o.output_tokens,
			lost_cache_read_tokens = r.lost_cache_read_tokens + o.cache_read_tokens,
			lost_cache_write_tokens = r.lost_cache_write_tokens + o.cache_write_tokens,
			lost_cost_usd = r.lost_cost_usd + o.cost_usd,
			lost_cost_known = r.lost_cost_known AND o.cost_known
		FROM (SELECT coalesce(sum(input_tokens), 0) AS input_tokens, coalesce(sum(output_tokens), 0) AS output_tokens,
			coalesce(sum(cache_read_tokens), 0) AS cache_read_tokens, coalesce(sum(cache_write_tokens), 0) AS cache_write_tokens,
			coalesce(sum(cost_usd), 0) AS cost_usd, coalesce(bool_and(cost_known), true) AS cost_known
			FROM ioh_spend WHERE run_id = $1 AND state = 'open') o
		WHERE r.id = $1`, l.Target())
	b.Queue(`UPDATE ioh_spend SET state = 'lost' WHERE run_id = $1 AND state = 'open'`, l.Target())
	b.Queue(`SELECT id, run_id, step, call_id, tool, arguments, state, created_at FROM ioh_intents
		WHERE run_id = $1 AND state = $2 ORDER BY id`, l.Target(), string(store.IntentInDoubt))
	var out []store.Intent
	err := s.send(ctx, "recover", b, func(i int, br pgx.BatchResults) error {
		if i < b.Len()-1 {
			_, err := br.Exec()
			return err
		}
		rows, err := br.Query()
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var in store.Intent
			var args, state string
			var created time.Time
			if err := rows.Scan(&in.ID, &in.RunID, &in.Step, &in.CallID, &in.Tool, &args, &state, &created); err != nil {
				return err
			}
			in.CallID, in.Tool = untext(in.CallID), untext(in.Tool)
			in.Arguments = json.RawMessage(untext(args))
			in.State = store.IntentState(state)
			in.CreatedAt = created
			out = append(out, in)
		}
		return rows.Err()
	})
	return out, err
}
