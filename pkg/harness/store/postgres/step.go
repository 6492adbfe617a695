package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/initorigin/io-harness-go/pkg/harness/store"
)

// CommitStep implements store.Store: the lease check, the budget draw on
// the run's totals (only if the step is the run's next), the step row,
// every observation, every attempt, the step's spend marked committed,
// its intents closed, the in-doubt intents it reported, its approvals, the
// decisions it applied, the remembered rules, its events and, when the
// step ends the run, the outcome — one transaction, one round trip.
func (s *Store) CommitStep(ctx context.Context, l *store.Lease, c *store.Commit) error {
	st := &c.Step
	assistant, err := json.Marshal(st.Assistant)
	if err != nil {
		return fmt.Errorf("store: encode assistant turn: %w", err)
	}
	b := batch(l)
	b.Queue(`WITH u AS (UPDATE ioh_runs SET steps = $2,
			input_tokens = input_tokens + $3, output_tokens = output_tokens + $4,
			cache_read_tokens = cache_read_tokens + $5, cache_write_tokens = cache_write_tokens + $6,
			cost_usd = cost_usd + $7, cost_known = cost_known AND $8
		WHERE id = $1 AND steps = $2 - 1 AND status = 'running' RETURNING 1)
		SELECT ioh_check(count(*) = 1, 'IH002', 'run ' || $1 || ' step ' || $2 || ' is not its next step') FROM u`,
		st.RunID, st.Step, st.Usage.InputTokens, st.Usage.OutputTokens, st.Usage.CacheReadTokens, st.Usage.CacheWriteTokens,
		st.Cost.USD, st.Cost.Known)
	b.Queue(`INSERT INTO ioh_steps (run_id, step, started_at, finished_at, assistant,
			input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, cost_usd, cost_known, verified, provider)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`,
		st.RunID, st.Step, st.StartedAt, st.FinishedAt, textBytes(assistant),
		st.Usage.InputTokens, st.Usage.OutputTokens, st.Usage.CacheReadTokens, st.Usage.CacheWriteTokens,
		st.Cost.USD, st.Cost.Known, st.Verified, text(st.Provider))
	insertObservations(b, st)
	insertAttempts(b, st.RunID, st.Attempts)
	b.Queue(`UPDATE ioh_spend SET state = 'committed' WHERE run_id = $1 AND step = $2 AND state = 'open'`, st.RunID, st.Step)
	b.Queue(`UPDATE ioh_intents SET state = $3 WHERE run_id = $1 AND step = $2 AND state = $4`,
		st.RunID, st.Step, string(store.IntentDone), string(store.IntentOpen))
	if len(c.InDoubt) > 0 {
		b.Queue(`UPDATE ioh_intents SET state = $3 WHERE run_id = $1 AND id = ANY($2) AND state = $4`,
			st.RunID, c.InDoubt, string(store.IntentReported), string(store.IntentInDoubt))
	}
	for i := range c.Approvals {
		insertApproval(b, &c.Approvals[i])
	}
	if len(c.Applied) > 0 {
		b.Queue(`UPDATE ioh_approvals SET state = $3 WHERE run_id = $1 AND id = ANY($2)`,
			st.RunID, c.Applied, string(store.ApprovalApplied))
	}
	if c.Remembered != nil {
		b.Queue(`UPDATE ioh_runs SET remembered = $2 WHERE id = $1`, st.RunID, textBytes(c.Remembered))
	}
	insertEvents(b, st.RunID, c.Events)
	if c.Finish != nil {
		finish(b, c.Finish)
	}
	return s.send(ctx, "commit step", b, nil)
}

// RecordSpend implements store.Store. Its transaction does not wait for
// the server to flush its log (synchronous_commit off for it alone): the
// record outlives this process at once, since the server has it, and the
// step's commit that follows waits for the flush of both.
//
// A fenced driver's spend is recorded all the same, as lost spend of the
// run (the provider served the call, and it is paid for), and the call
// returns ErrFenced.
func (s *Store) RecordSpend(ctx context.Context, l *store.Lease, sp *store.Spend) error {
	b := batch(l)
	b.Queue(`SELECT set_config('synchronous_commit', 'off', true)`)
	b.Queue(`INSERT INTO ioh_spend (run_id, step, attempt, provider, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens,
			cost_usd, cost_known, at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
		sp.RunID, sp.Step, sp.Attempt, text(sp.Provider), sp.Usage.InputTokens, sp.Usage.OutputTokens, sp.Usage.CacheReadTokens,
		sp.Usage.CacheWriteTokens, sp.Cost.USD, sp.Cost.Known, sp.At)
	err := s.send(ctx, "record spend", b, nil)
	if !errors.Is(err, store.ErrFenced) || l == nil {
		return err
	}
	lost := batch(nil)
	lost.Queue(`WITH r AS (UPDATE ioh_runs SET
			lost_input_tokens = lost_input_tokens + $5, lost_output_tokens = lost_output_tokens + $6,
			lost_cache_read_tokens = lost_cache_read_tokens + $7, lost_cache_write_tokens = lost_cache_write_tokens + $8,
			lost_cost_usd = lost_cost_usd + $9, lost_cost_known = lost_cost_known AND $10
			WHERE id = $1 AND root_id = $12 RETURNING id)
		INSERT INTO ioh_spend (run_id, step, attempt, provider, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens,
			cost_usd, cost_known, state, at) SELECT id, $2, $3, $4, $5, $6, $7, $8, $9, $10, 'lost', $11 FROM r`,
		sp.RunID, sp.Step, sp.Attempt, text(sp.Provider), sp.Usage.InputTokens, sp.Usage.OutputTokens, sp.Usage.CacheReadTokens,
		sp.Usage.CacheWriteTokens, sp.Cost.USD, sp.Cost.Known, sp.At, l.RunID)
	return errors.Join(err, s.send(ctx, "record lost spend", lost, nil))
}

// insertObservations queues one statement that writes a step's
// observations in order.
func insertObservations(b *pgx.Batch, st *store.Step) {
	n := len(st.Observations)
	if n == 0 {
		return
	}
	idx := make([]int32, n)
	kinds, calls, tools, args, outs, refusals := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	changed := make([]string, n)
	errs := make([]bool, n)
	for i, o := range st.Observations {
		idx[i], kinds[i], calls[i], tools[i] = int32(i), text(string(o.Kind)), text(o.CallID), text(o.Tool)
		args[i], outs[i], errs[i], refusals[i] = textBytes(o.Arguments), text(o.Output), o.IsError, text(o.Refusal)
		if len(o.Changed) > 0 {
			data, _ := json.Marshal(o.Changed) // a []string always encodes
			changed[i] = textBytes(data)
		}
	}
	b.Queue(`INSERT INTO ioh_observations (run_id, step, idx, kind, call_id, tool, arguments, output, is_error, refusal, changed)
		SELECT $1, $2, * FROM unnest($3::integer[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::boolean[], $10::text[], $11::text[])`,
		st.RunID, st.Step, idx, kinds, calls, tools, args, outs, errs, refusals, changed)
}
