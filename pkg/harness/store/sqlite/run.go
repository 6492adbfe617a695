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

// CreateRun implements store.Store.
func (s *Store) CreateRun(ctx context.Context, r *store.Run, events []store.Event, owner store.Owner, ttl time.Duration) (*store.Lease, error) {
	if r.ID == "" || len(r.Task) == 0 {
		return nil, errors.New("store: a run needs an id and a task")
	}
	path := r.AgentPath
	if path == "" {
		path = "root"
	}
	l := &store.Lease{RunID: r.ID, Owner: owner, Generation: 1, Expires: time.Now().Add(ttl), TTL: ttl}
	err := s.write(ctx, "create run", nil, func() error {
		_, err := s.exec(ctx,
			`INSERT INTO runs (id, parent_id, root_id, agent_path, task, provider, status, started_at, policy, containment) VALUES (?,?,?,?,?,?,?,?,?,?)`,
			r.ID, "", r.ID, path, string(r.Task), r.Provider, string(store.StatusRunning), r.StartedAt.UnixMilli(), string(r.Policy), string(r.Containment))
		if err != nil {
			return s.classify("create run", err)
		}
		if err := s.putLease(ctx, l); err != nil {
			return err
		}
		return s.insertEvents(ctx, r.ID, events)
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
	// Unsynced: the agent's first synced write (or its parent's) makes it
	// durable; a machine crash before that loses the spawn with the step
	// that made it, which the resumed parent makes again.
	return s.writeSync(ctx, "create agent", l.For(r.ParentID), false, func() error {
		_, err := s.exec(ctx,
			`INSERT INTO runs (id, parent_id, root_id, agent_path, task, provider, status, started_at, policy) VALUES (?,?,?,?,?,?,?,?,?)`,
			r.ID, r.ParentID, r.RootID, r.AgentPath, string(r.Task), r.Provider, string(r.Status), r.StartedAt.UnixMilli(), string(r.Policy))
		if err != nil {
			return s.classify("create agent", err)
		}
		return s.insertEvents(ctx, r.ID, events)
	})
}

func (s *Store) putLease(ctx context.Context, l *store.Lease) error {
	_, err := s.exec(ctx, `INSERT INTO leases (run_id, host, pid, started, generation, expires, ttl_ms, live) VALUES (?,?,?,?,?,?,?,?)
		ON CONFLICT(run_id) DO UPDATE SET host=excluded.host, pid=excluded.pid, started=excluded.started,
		generation=excluded.generation, expires=excluded.expires, ttl_ms=excluded.ttl_ms, live=excluded.live`,
		l.RunID, l.Owner.Host, l.Owner.PID, l.Owner.Started.UnixMilli(), l.Generation, l.Expires.UnixMilli(), l.TTL.Milliseconds(), l.Owner.Live)
	if err != nil {
		return s.classify("write lease", err)
	}
	return nil
}

func scanLease(sc interface{ Scan(...any) error }) (*store.Lease, error) {
	var l store.Lease
	var started, expires, ttl int64
	if err := sc.Scan(&l.RunID, &l.Owner.Host, &l.Owner.PID, &started, &l.Generation, &expires, &ttl, &l.Owner.Live); err != nil {
		return nil, err
	}
	if started != 0 && started != (time.Time{}).UnixMilli() {
		l.Owner.Started = time.UnixMilli(started)
	}
	l.Expires, l.TTL = time.UnixMilli(expires), time.Duration(ttl)*time.Millisecond
	return &l, nil
}

const leaseColumns = `run_id, host, pid, started, generation, expires, ttl_ms, live`

// Lease implements store.Reader.
func (s *Store) Lease(ctx context.Context, runID string) (*store.Lease, error) {
	l, err := scanLease(s.db.QueryRowContext(ctx, `SELECT `+leaseColumns+` FROM leases WHERE run_id=? AND expires>?`, runID, time.Now().UnixMilli()))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, s.classify("read lease", err)
	}
	return l, nil
}

// Acquire implements store.Store.
func (s *Store) Acquire(ctx context.Context, runID string, owner store.Owner, ttl time.Duration, force bool, seen *store.Seen) (*store.Lease, error) {
	var got *store.Lease
	err := s.write(ctx, "acquire lease", nil, func() error {
		var root, status, outcome string
		var steps int
		err := s.w.QueryRowContext(ctx, `SELECT root_id, status, outcome, steps FROM runs WHERE id=?`, runID).Scan(&root, &status, &outcome, &steps)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("%w: run %s", store.ErrNotFound, runID)
		case err != nil:
			return s.classify("acquire lease", err)
		case root != "" && root != runID:
			return fmt.Errorf("%w: run %s is an agent of the tree of %s, whose lease covers it", store.ErrAgent, runID, root)
		}
		if err := seen.Check(runID, store.Status(status), outcome, steps); err != nil {
			return err
		}
		now := time.Now()
		held, err := scanLease(s.w.QueryRowContext(ctx, `SELECT `+leaseColumns+` FROM leases WHERE run_id=?`, runID))
		switch {
		case errors.Is(err, sql.ErrNoRows):
			held = nil
		case err != nil:
			return s.classify("read lease", err)
		}
		gen := int64(1)
		if held != nil {
			if !force && !held.Lapsed(now, owner) {
				return &store.LeaseError{RunID: runID, Holder: *held}
			}
			gen = held.Generation + 1
		}
		got = &store.Lease{RunID: runID, Owner: owner, Generation: gen, Expires: now.Add(ttl), TTL: ttl}
		return s.putLease(ctx, got)
	})
	if err != nil {
		return nil, err
	}
	return got, nil
}

// Renew implements store.Store.
func (s *Store) Renew(ctx context.Context, l *store.Lease) error {
	expires := time.Now().Add(l.TTL)
	err := s.write(ctx, "renew lease", l, func() error {
		_, err := s.exec(ctx, `UPDATE leases SET expires=? WHERE run_id=? AND generation=?`, expires.UnixMilli(), l.RunID, l.Generation)
		if err != nil {
			return s.classify("renew lease", err)
		}
		return nil
	})
	if err == nil {
		l.Expires = expires
	}
	return err
}

// Release implements store.Store. The lease row stays, expired, so that
// the next driver's generation is higher than every earlier one's.
func (s *Store) Release(ctx context.Context, l *store.Lease) error {
	return s.write(ctx, "release lease", nil, func() error {
		if _, err := s.exec(ctx, `UPDATE leases SET expires=0 WHERE run_id=? AND generation=?`, l.RunID, l.Generation); err != nil {
			return s.classify("release lease", err)
		}
		return nil
	})
}

// FinishRun implements store.Store.
func (s *Store) FinishRun(ctx context.Context, l *store.Lease, f *store.Finish) error {
	return s.write(ctx, "finish run", l, func() error { return s.finish(ctx, f) })
}

// finish records an outcome inside a write.
func (s *Store) finish(ctx context.Context, f *store.Finish) error {
	var pausedAt int64
	if f.Status == store.StatusPaused {
		pausedAt = f.At.UnixMilli()
	}
	res, err := s.exec(ctx,
		`UPDATE runs SET status=?, outcome=?, outcome_json=?, finished_at=?, paused_at=? WHERE id=?`,
		string(f.Status), f.Outcome, string(f.OutcomeJSON), f.At.UnixMilli(), pausedAt, f.RunID)
	if err != nil {
		return s.classify("finish run", err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("%w: run %s", store.ErrNotFound, f.RunID)
	}
	if err := s.insertAttempts(ctx, f.RunID, f.Attempts); err != nil {
		return err
	}
	return s.insertEvents(ctx, f.RunID, f.Events)
}

// ReopenRun implements store.Store.
func (s *Store) ReopenRun(ctx context.Context, l *store.Lease, task, policy json.RawMessage, at time.Time, events []store.Event) error {
	// Unsynced: the run's next synced write makes it durable; a machine
	// crash before that leaves the run as it stood, to be reopened again.
	return s.writeSync(ctx, "reopen run", l, false, func() error {
		res, err := s.exec(ctx,
			`UPDATE runs SET paused_ms = paused_ms + CASE WHEN paused_at > 0 AND ? > paused_at THEN ? - paused_at ELSE 0 END,
			paused_at=0, status=?, outcome='', outcome_json='', finished_at=0, task=?, policy=? WHERE id=?`,
			at.UnixMilli(), at.UnixMilli(), string(store.StatusRunning), string(task), string(policy), l.Target())
		if err != nil {
			return s.classify("reopen run", err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return fmt.Errorf("%w: run %s", store.ErrNotFound, l.Target())
		}
		return s.insertEvents(ctx, l.Target(), events)
	})
}

// insertEvents writes events with as few statements as it can: one
// multi-row INSERT per batch of up to eventBatch rows.
func (s *Store) insertEvents(ctx context.Context, runID string, events []store.Event) error {
	for len(events) > 0 {
		n := min(len(events), rowBatch)
		args := make([]any, 0, 6*n)
		for i := range events[:n] {
			e := &events[i]
			args = append(args, runID, e.Seq, e.Step, e.Kind, e.At.UnixMilli(), string(e.Data))
		}
		if _, err := s.exec(ctx, insertEventsQuery(n), args...); err != nil {
			if strings.Contains(err.Error(), "UNIQUE") {
				return fmt.Errorf("%w: run %s: events %d to %d were written by another driver", store.ErrConflict, runID, events[0].Seq, events[n-1].Seq)
			}
			return s.classify(fmt.Sprintf("insert events %d to %d", events[0].Seq, events[n-1].Seq), err)
		}
		events = events[n:]
	}
	return nil
}

// rowBatch bounds a multi-row INSERT; 16 rows of up to 10 values stay far
// below SQLite's limit on bound parameters.
const rowBatch = 16

// rowsQuery is prefix followed by n groups of cols placeholders. Each
// distinct query is prepared once and kept.
func rowsQuery(prefix string, cols, n int) string {
	group := "(" + strings.TrimSuffix(strings.Repeat("?,", cols), ",") + "),"
	return prefix + strings.TrimSuffix(strings.Repeat(group, n), ",")
}

func insertEventsQuery(n int) string {
	return rowsQuery("INSERT INTO events (run_id, seq, step, kind, at, data) VALUES ", 6, n)
}

func (s *Store) insertAttempts(ctx context.Context, runID string, attempts []store.Attempt) error {
	for i := range attempts {
		a := &attempts[i]
		if _, err := s.exec(ctx,
			`INSERT INTO attempts (run_id, step, attempt, provider, error_kind, error, status, latency_ms, wait_ms, at) VALUES (?,?,?,?,?,?,?,?,?,?)`,
			runID, a.Step, a.Attempt, a.Provider, a.ErrorKind, a.Error, a.Status,
			a.Latency.Milliseconds(), a.Wait.Milliseconds(), a.At.UnixMilli()); err != nil {
			return s.classify("insert attempt", err)
		}
	}
	return nil
}
