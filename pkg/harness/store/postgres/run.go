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

// insertRun queues the insert of a run's row. It is the one place that
// writes a new run's columns: CreateRun and a submission (CreateQueued)
// both go through it.
func insertRun(b *pgx.Batch, r *store.Run, status store.Status, pausedAt time.Time) {
	path := r.AgentPath
	if path == "" {
		path = "root"
	}
	root := r.RootID
	if root == "" {
		root = r.ID // a run that is no agent is its own tree's root
	}
	b.Queue(`INSERT INTO ioh_runs (id, parent_id, root_id, agent_path, task, provider, status, started_at, policy, paused_at, containment)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
		r.ID, text(r.ParentID), text(root), text(path), textBytes(r.Task), text(r.Provider), string(status), r.StartedAt,
		textBytes(r.Policy), nullTime(pausedAt), textBytes(r.Containment))
}

// nullTime is t, or NULL for the zero time.
func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}

// ttlMS is a lease's ttl in whole milliseconds, at least one.
func ttlMS(ttl time.Duration) int64 { return max(ttl.Milliseconds(), 1) }

// CreateRun implements store.Store. The lease's expiry is the database's
// clock plus ttl.
func (s *Store) CreateRun(ctx context.Context, r *store.Run, events []store.Event, owner store.Owner, ttl time.Duration) (*store.Lease, error) {
	if r.ID == "" || len(r.Task) == 0 {
		return nil, errors.New("store: a run needs an id and a task")
	}
	l := &store.Lease{RunID: r.ID, Owner: owner, Generation: 1, TTL: ttl}
	b := batch(nil)
	root := *r
	root.ParentID, root.RootID = "", r.ID // CreateRun makes a tree's root; CreateAgent its agents
	insertRun(b, &root, store.StatusRunning, time.Time{})
	b.Queue(`INSERT INTO ioh_leases (run_id, host, pid, started, generation, expires, ttl_ms, live)
		VALUES ($1, $2, $3, $4, 1, clock_timestamp() + $5 * interval '1 millisecond', $5, $6) RETURNING expires`,
		r.ID, text(owner.Host), owner.PID, nullTime(owner.Started), ttlMS(ttl), text(owner.Live))
	insertEvents(b, r.ID, events)
	err := s.send(ctx, "create run", b, func(i int, br pgx.BatchResults) error {
		if i == 1 {
			return br.QueryRow().Scan(&l.Expires)
		}
		_, err := br.Exec()
		return err
	})
	if err != nil {
		return nil, err
	}
	return l, nil
}

// CreateAgent implements store.Store.
func (s *Store) CreateAgent(ctx context.Context, l *store.Lease, r *store.Run, events []store.Event) error {
	switch {
	case r.ID == "" || len(r.Task) == 0 || r.ParentID == "" || r.AgentPath == "":
		return errors.New("store: an agent needs an id, a task, a parent and a path")
	case r.RootID != l.RunID:
		return fmt.Errorf("%w: agent %s has root %s, not the leased %s", store.ErrFenced, r.ID, r.RootID, l.RunID)
	case r.Status != store.StatusQueued && r.Status != store.StatusRunning:
		return fmt.Errorf("store: an agent starts queued or running, not %q", r.Status)
	}
	b := batch(l.For(r.ParentID))
	insertRun(b, r, r.Status, time.Time{})
	insertEvents(b, r.ID, events)
	return s.send(ctx, "create agent", b, nil)
}

const leaseColumns = `run_id, host, pid, started, generation, expires, ttl_ms, live`

func scanLease(sc pgx.Row, extra ...any) (*store.Lease, error) {
	var l store.Lease
	var started *time.Time
	var ttl int64
	dest := append([]any{&l.RunID, &l.Owner.Host, &l.Owner.PID, &started, &l.Generation, &l.Expires, &ttl, &l.Owner.Live}, extra...)
	if err := sc.Scan(dest...); err != nil {
		return nil, err
	}
	l.Owner.Host, l.Owner.Live = untext(l.Owner.Host), untext(l.Owner.Live)
	if started != nil {
		l.Owner.Started = *started
	}
	l.TTL = time.Duration(ttl) * time.Millisecond
	return &l, nil
}

// Lease implements store.Reader: the lease whose expiry, by the database's
// clock, is still ahead.
func (s *Store) Lease(ctx context.Context, runID string) (*store.Lease, error) {
	if err := s.readable("read lease"); err != nil {
		return nil, err
	}
	l, err := scanLease(s.pool.QueryRow(ctx, `SELECT `+leaseColumns+` FROM ioh_leases WHERE run_id = $1 AND expires > clock_timestamp()`, runID))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, s.classify("read lease", err)
	}
	return l, nil
}

// Acquire implements store.Store. In one transaction it locks the run's
// lease row, asks the database's clock whether the lease has expired
// (and this host whether its owner's process is gone, when it ran here),
// and takes it with the next generation.
//
// seen is checked after the lease row is locked: a driver's write holds
// that row shared until it commits (ioh_fence), so every write of the
// former holder has landed or will be fenced out, and the run's row,
// locked too, is the one the new driver starts from.
func (s *Store) Acquire(ctx context.Context, runID string, owner store.Owner, ttl time.Duration, force bool, seen *store.Seen) (*store.Lease, error) {
	if err := s.writable("acquire lease"); err != nil {
		return nil, err
	}
	var got *store.Lease
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var root string
		switch err := tx.QueryRow(ctx, `SELECT root_id FROM ioh_runs WHERE id = $1`, runID).Scan(&root); {
		case errors.Is(err, pgx.ErrNoRows):
			return fmt.Errorf("%w: run %s", store.ErrNotFound, runID)
		case err != nil:
			return err
		case root != "" && root != runID:
			return fmt.Errorf("%w: run %s is an agent of the tree of %s, whose lease covers it", store.ErrAgent, runID, root)
		}
		var now time.Time
		held, err := scanLease(tx.QueryRow(ctx, `SELECT `+leaseColumns+`, clock_timestamp() FROM ioh_leases WHERE run_id = $1 FOR UPDATE`, runID), &now)
		if errors.Is(err, pgx.ErrNoRows) {
			// A run without a lease row, written by hand or by an older
			// version: make one, at generation 0, expired.
			tag, err := tx.Exec(ctx, `INSERT INTO ioh_leases (run_id, host, pid, generation, expires, ttl_ms)
				SELECT id, '', 0, 0, 'epoch', 0 FROM ioh_runs WHERE id = $1 ON CONFLICT (run_id) DO NOTHING`, runID)
			if err != nil {
				return err
			}
			if tag.RowsAffected() == 0 {
				var n int
				if err := tx.QueryRow(ctx, `SELECT count(*) FROM ioh_runs WHERE id = $1`, runID).Scan(&n); err != nil {
					return err
				}
				if n == 0 {
					return fmt.Errorf("%w: run %s", store.ErrNotFound, runID)
				}
			}
			held, err = scanLease(tx.QueryRow(ctx, `SELECT `+leaseColumns+`, clock_timestamp() FROM ioh_leases WHERE run_id = $1 FOR UPDATE`, runID), &now)
		}
		if err != nil {
			return err
		}
		var status, outcome string
		var steps int
		if err := tx.QueryRow(ctx, `SELECT status, outcome, steps FROM ioh_runs WHERE id = $1 FOR UPDATE`, runID).Scan(&status, &outcome, &steps); err != nil {
			return err
		}
		if err := seen.Check(runID, store.Status(untext(status)), untext(outcome), steps); err != nil {
			return err
		}
		if s.localClock {
			now = time.Now()
		}
		if !force && held.Generation > 0 && !held.Lapsed(now, owner) {
			return &store.LeaseError{RunID: runID, Holder: *held}
		}
		got = &store.Lease{RunID: runID, Owner: owner, TTL: ttl}
		return tx.QueryRow(ctx, `UPDATE ioh_leases SET host = $2, pid = $3, started = $4, generation = generation + 1,
			expires = clock_timestamp() + $5 * interval '1 millisecond', ttl_ms = $5, live = $6
			WHERE run_id = $1 RETURNING generation, expires`,
			runID, text(owner.Host), owner.PID, nullTime(owner.Started), ttlMS(ttl), text(owner.Live)).Scan(&got.Generation, &got.Expires)
	})
	var le *store.LeaseError
	switch {
	case err == nil:
		return got, nil
	case errors.As(err, &le), errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrAgent), errors.Is(err, store.ErrChanged):
		return nil, err
	}
	return nil, s.classify("acquire lease", err)
}

// Renew implements store.Store: the expiry becomes the database's clock
// plus the lease's ttl.
func (s *Store) Renew(ctx context.Context, l *store.Lease) error {
	b := batch(l)
	b.Queue(`UPDATE ioh_leases SET expires = clock_timestamp() + ttl_ms * interval '1 millisecond'
		WHERE run_id = $1 AND generation = $2 RETURNING expires`, l.RunID, l.Generation)
	var expires time.Time
	err := s.send(ctx, "renew lease", b, func(i int, br pgx.BatchResults) error {
		if i == 1 {
			return br.QueryRow().Scan(&expires)
		}
		_, err := br.Exec()
		return err
	})
	if err == nil {
		l.Expires = expires
	}
	return err
}

// Release implements store.Store. The row stays, expired now by the
// database's clock, so that the next driver's generation is above every
// earlier one's, and the expiry says when the run was let go.
func (s *Store) Release(ctx context.Context, l *store.Lease) error {
	b := batch(nil)
	b.Queue(`UPDATE ioh_leases SET expires = least(expires, clock_timestamp()) WHERE run_id = $1 AND generation = $2`, l.RunID, l.Generation)
	return s.send(ctx, "release lease", b, nil)
}

// FinishRun implements store.Store.
func (s *Store) FinishRun(ctx context.Context, l *store.Lease, f *store.Finish) error {
	b := batch(l)
	finish(b, f)
	return s.send(ctx, "finish run", b, nil)
}

// finish queues the statements that record an outcome.
func finish(b *pgx.Batch, f *store.Finish) {
	var pausedAt time.Time
	if f.Status == store.StatusPaused {
		pausedAt = f.At
	}
	b.Queue(`WITH u AS (UPDATE ioh_runs SET status = $2, outcome = $3, outcome_json = $4, finished_at = $5, paused_at = $6
		WHERE id = $1 RETURNING 1)
		SELECT ioh_check(count(*) = 1, 'IH003', 'run ' || $1 || ' does not exist') FROM u`,
		f.RunID, string(f.Status), text(f.Outcome), textBytes(f.OutcomeJSON), f.At, nullTime(pausedAt))
	insertAttempts(b, f.RunID, f.Attempts)
	insertEvents(b, f.RunID, f.Events)
}

// ReopenRun implements store.Store. A queued run (see CreateQueued)
// becomes running here: the time it waited for a worker is added to its
// paused total like a pause for a person.
func (s *Store) ReopenRun(ctx context.Context, l *store.Lease, task, policy json.RawMessage, at time.Time, events []store.Event) error {
	b := batch(l)
	b.Queue(`WITH u AS (UPDATE ioh_runs SET
			paused_ms = paused_ms + CASE WHEN paused_at IS NOT NULL AND $2 > paused_at
				THEN round(extract(epoch FROM ($2 - paused_at)) * 1000)::bigint ELSE 0 END,
			paused_at = NULL, status = 'running', outcome = '', outcome_json = '', finished_at = NULL, task = $3, policy = $4
		WHERE id = $1 RETURNING 1)
		SELECT ioh_check(count(*) = 1, 'IH003', 'run ' || $1 || ' does not exist') FROM u`,
		l.Target(), at, textBytes(task), textBytes(policy))
	insertEvents(b, l.Target(), events)
	return s.send(ctx, "reopen run", b, nil)
}

// insertEvents queues one statement that writes every event.
func insertEvents(b *pgx.Batch, runID string, events []store.Event) {
	if len(events) == 0 {
		return
	}
	seqs := make([]int64, len(events))
	steps := make([]int32, len(events))
	kinds := make([]string, len(events))
	ats := make([]time.Time, len(events))
	data := make([]string, len(events))
	for i, e := range events {
		seqs[i], steps[i], kinds[i], ats[i], data[i] = e.Seq, int32(e.Step), text(e.Kind), e.At, textBytes(e.Data)
	}
	b.Queue(`INSERT INTO ioh_events (run_id, seq, step, kind, at, data)
		SELECT $1, * FROM unnest($2::bigint[], $3::integer[], $4::text[], $5::timestamptz[], $6::text[])`,
		runID, seqs, steps, kinds, ats, data)
}

// insertAttempts queues one statement that writes every attempt.
func insertAttempts(b *pgx.Batch, runID string, attempts []store.Attempt) {
	if len(attempts) == 0 {
		return
	}
	n := len(attempts)
	steps, nums, statuses := make([]int32, n), make([]int32, n), make([]int32, n)
	providers, kinds, errs := make([]string, n), make([]string, n), make([]string, n)
	latency, wait := make([]int64, n), make([]int64, n)
	ats := make([]time.Time, n)
	for i, a := range attempts {
		steps[i], nums[i], statuses[i] = int32(a.Step), int32(a.Attempt), int32(a.Status)
		providers[i], kinds[i], errs[i] = text(a.Provider), text(a.ErrorKind), text(a.Error)
		latency[i], wait[i], ats[i] = a.Latency.Milliseconds(), a.Wait.Milliseconds(), a.At
	}
	b.Queue(`INSERT INTO ioh_attempts (run_id, step, attempt, provider, error_kind, error, status, latency_ms, wait_ms, at)
		SELECT $1, step, attempt, provider, error_kind, error, status, latency_ms, wait_ms, at
		FROM unnest($2::integer[], $3::integer[], $4::text[], $5::text[], $6::text[], $7::integer[], $8::bigint[], $9::bigint[], $10::timestamptz[])
		WITH ORDINALITY AS a(step, attempt, provider, error_kind, error, status, latency_ms, wait_ms, at, n) ORDER BY n`,
		runID, steps, nums, providers, kinds, errs, statuses, latency, wait, ats)
}
