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

// The records below are a fleet's (package fleet): what a submission
// carries to the worker that claims it, the workspaces it moves, and the
// log of what the job queue did with each run. They live beside the runs
// so that a submission and its job commit together.

// Submission is what a submitted run carries to the worker that claims it.
type Submission struct {
	RunID string `json:"run_id"`
	// Spec is the run spec the workers build the run's providers from,
	// without keys: workers read keys from their own environment.
	Spec json.RawMessage `json:"spec"`
	// Workspace says how a worker reaches the run's workspace: "shared"
	// (the task's path, on a filesystem every worker mounts) or "upload"
	// (a snapshot stored with the submission).
	Workspace   string    `json:"workspace"`
	SubmittedBy string    `json:"submitted_by"`
	SubmittedAt time.Time `json:"submitted_at"`
}

// QueueEntry is one line of a run's queue log: an action of the job
// queue on the run — submitted, claimed, paused, handed back, rescued,
// refused — with the worker and the job.
type QueueEntry struct {
	ID      int64     `json:"id"`
	RunID   string    `json:"run_id"`
	At      time.Time `json:"at"`
	Action  string    `json:"action"`
	Worker  string    `json:"worker,omitempty"`
	Job     int64     `json:"job,omitempty"`
	Attempt int       `json:"attempt,omitempty"`
	Detail  string    `json:"detail,omitempty"`
}

// Snapshot is a workspace stored in the database: a gzip-compressed tar
// archive of its files.
type Snapshot struct {
	RunID string    `json:"run_id"`
	Kind  string    `json:"kind"` // "input" (submitted) or "result" (at the run's end)
	Data  []byte    `json:"-"`
	Files int       `json:"files"`
	Bytes int64     `json:"bytes"`
	At    time.Time `json:"at"`
}

// Enqueuer inserts a job in the transaction of a store write and returns
// its id.
type Enqueuer func(ctx context.Context, tx pgx.Tx) (job int64, err error)

func logEntry(ctx context.Context, tx pgx.Tx, e *QueueEntry) error {
	return tx.QueryRow(ctx, `INSERT INTO ioh_queue_log (run_id, action, worker, job, attempt, detail)
		VALUES ($1, $2, $3, $4, $5, $6) RETURNING id, at`,
		e.RunID, text(e.Action), text(e.Worker), e.Job, e.Attempt, text(e.Detail)).Scan(&e.ID, &e.At)
}

// CreateQueued records a submitted run in one transaction: the run, in
// status queued and paused since it was submitted (the wait for a worker
// is not the run's time), with no driver; its first events; its
// submission; its input snapshot, if any; its job, which enqueue inserts;
// and the queue log's first line, with the job's id.
func (s *Store) CreateQueued(ctx context.Context, r *store.Run, events []store.Event, sub *Submission, snap *Snapshot, e *QueueEntry, enqueue Enqueuer) error {
	if err := s.writable("submit run"); err != nil {
		return err
	}
	if r.ID == "" || len(r.Task) == 0 {
		return errors.New("store: a run needs an id and a task")
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		insertRun(b, r, store.StatusQueued, r.StartedAt)
		b.Queue(`INSERT INTO ioh_leases (run_id, host, pid, generation, expires, ttl_ms) VALUES ($1, '', 0, 0, 'epoch', 0)`, r.ID)
		insertEvents(b, r.ID, events)
		b.Queue(`INSERT INTO ioh_submissions (run_id, spec, workspace, submitted_by, submitted_at) VALUES ($1, $2, $3, $4, $5)`,
			r.ID, textBytes(sub.Spec), sub.Workspace, text(sub.SubmittedBy), sub.SubmittedAt)
		if snap != nil {
			b.Queue(`INSERT INTO ioh_snapshots (run_id, kind, data, files, bytes, at) VALUES ($1, $2, $3, $4, $5, clock_timestamp())`,
				r.ID, snap.Kind, snap.Data, snap.Files, snap.Bytes)
		}
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return err
		}
		job, err := enqueue(ctx, tx)
		if err != nil {
			return &enqueueError{err}
		}
		e.RunID, e.Job = r.ID, job
		return logEntry(ctx, tx, e)
	})
	return s.txError("submit run", err)
}

// enqueueError is a failure of the job engine, passed on as it is.
type enqueueError struct{ err error }

func (e *enqueueError) Error() string { return e.err.Error() }
func (e *enqueueError) Unwrap() error { return e.err }

func (s *Store) txError(op string, err error) error {
	var ee *enqueueError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ee):
		return fmt.Errorf("store %s: %s: enqueue: %s", s.name, op, s.scrub(ee.err.Error()))
	}
	return s.classify(op, err)
}

// Enqueue inserts a job (enqueue) and logs e with its id, in one
// transaction.
func (s *Store) Enqueue(ctx context.Context, e *QueueEntry, enqueue Enqueuer) error {
	if err := s.writable("enqueue"); err != nil {
		return err
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		job, err := enqueue(ctx, tx)
		if err != nil {
			return &enqueueError{err}
		}
		if job == 0 {
			return nil // nothing was enqueued: nothing to log
		}
		e.Job = job
		return logEntry(ctx, tx, e)
	})
	return s.txError("enqueue", err)
}

// Log appends e to its run's queue log.
func (s *Store) Log(ctx context.Context, e *QueueEntry) error {
	if err := s.writable("log queue action"); err != nil {
		return err
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error { return logEntry(ctx, tx, e) })
	return s.classify("log queue action", err)
}

// QueueLog returns a run's queue log, oldest first.
func (s *Store) QueueLog(ctx context.Context, runID string) ([]QueueEntry, error) {
	if err := s.readable("read queue log"); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT id, run_id, at, action, worker, job, attempt, detail FROM ioh_queue_log
		WHERE run_id = $1 ORDER BY id`, runID)
	if err != nil {
		return nil, s.classify("read queue log", err)
	}
	defer rows.Close()
	var out []QueueEntry
	for rows.Next() {
		var e QueueEntry
		if err := rows.Scan(&e.ID, &e.RunID, &e.At, &e.Action, &e.Worker, &e.Job, &e.Attempt, &e.Detail); err != nil {
			return nil, s.classify("read queue log", err)
		}
		e.Action, e.Worker, e.Detail = untext(e.Action), untext(e.Worker), untext(e.Detail)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, s.classify("read queue log", err)
	}
	return out, nil
}

// Decision is a decision on an approval request of a submitted run that
// waits, paused, for a driver to carry it out.
type Decision struct {
	RunID     string          `json:"run_id"` // the submitted run: the root of the request's tree
	RequestID string          `json:"request_id"`
	Decision  json.RawMessage `json:"decision"`
	DecidedAt time.Time       `json:"decided_at"`
}

// Decided returns, newest first and at most limit of them, the decisions
// on requests of submitted runs that are paused: decisions recorded from
// any process (harness.Decide) that no driver has carried out yet, which
// a fleet's worker resumes the run to carry out. Newest first, so that
// decisions left waiting (their job refused) never hide a new one.
func (s *Store) Decided(ctx context.Context, limit int) ([]Decision, error) {
	if err := s.readable("find decided runs"); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT root.id, a.id, a.decision, a.decided_at
		FROM ioh_approvals a JOIN ioh_runs r ON r.id = a.run_id
		JOIN ioh_runs root ON root.id = COALESCE(NULLIF(r.root_id, ''), r.id) JOIN ioh_submissions sub ON sub.run_id = root.id
		WHERE a.state IN ('approved', 'denied', 'refused') AND root.status = 'paused'
		ORDER BY a.decided_at DESC, a.id LIMIT $1`, limit)
	if err != nil {
		return nil, s.classify("find decided runs", err)
	}
	defer rows.Close()
	var out []Decision
	for rows.Next() {
		var d Decision
		var decision string
		var at *time.Time
		if err := rows.Scan(&d.RunID, &d.RequestID, &decision, &at); err != nil {
			return nil, s.classify("find decided runs", err)
		}
		d.RunID, d.RequestID, d.Decision = untext(d.RunID), untext(d.RequestID), json.RawMessage(untext(decision))
		if at != nil {
			d.DecidedAt = *at
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, s.classify("find decided runs", err)
	}
	return out, nil
}

// Submission returns what a submitted run carries; a run that was not
// submitted wraps store.ErrNotFound.
func (s *Store) Submission(ctx context.Context, runID string) (*Submission, error) {
	if err := s.readable("read submission"); err != nil {
		return nil, err
	}
	sub := &Submission{RunID: runID}
	var spec string
	err := s.pool.QueryRow(ctx, `SELECT spec, workspace, submitted_by, submitted_at FROM ioh_submissions WHERE run_id = $1`, runID).
		Scan(&spec, &sub.Workspace, &sub.SubmittedBy, &sub.SubmittedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("%w: run %s was not submitted to a queue", store.ErrNotFound, runID)
	}
	if err != nil {
		return nil, s.classify("read submission", err)
	}
	sub.Spec, sub.SubmittedBy = json.RawMessage(untext(spec)), untext(sub.SubmittedBy)
	return sub, nil
}

// PutSnapshot stores a workspace snapshot of a run, replacing one of the
// same kind.
func (s *Store) PutSnapshot(ctx context.Context, snap *Snapshot) error {
	b := batch(nil)
	b.Queue(`INSERT INTO ioh_snapshots (run_id, kind, data, files, bytes, at) VALUES ($1, $2, $3, $4, $5, clock_timestamp())
		ON CONFLICT (run_id, kind) DO UPDATE SET data = excluded.data, files = excluded.files, bytes = excluded.bytes, at = excluded.at`,
		snap.RunID, snap.Kind, snap.Data, snap.Files, snap.Bytes)
	return s.send(ctx, "store snapshot", b, nil)
}

// Snapshot returns a run's snapshot of the kind; none wraps
// store.ErrNotFound.
func (s *Store) Snapshot(ctx context.Context, runID, kind string) (*Snapshot, error) {
	if err := s.readable("read snapshot"); err != nil {
		return nil, err
	}
	snap := &Snapshot{RunID: runID, Kind: kind}
	err := s.pool.QueryRow(ctx, `SELECT data, files, bytes, at FROM ioh_snapshots WHERE run_id = $1 AND kind = $2`, runID, kind).
		Scan(&snap.Data, &snap.Files, &snap.Bytes, &snap.At)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("%w: run %s has no %s snapshot", store.ErrNotFound, runID, kind)
	}
	if err != nil {
		return nil, s.classify("read snapshot", err)
	}
	return snap, nil
}

// Relocate moves a run's workspace: the stored task's root (or the
// directory of its file) becomes dir. A worker that materialises an
// uploaded workspace calls it under the run's lease.
func (s *Store) Relocate(ctx context.Context, l *store.Lease, dir string) error {
	if err := s.writable("relocate workspace"); err != nil {
		return err
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT ioh_fence($1, $2)`, l.RunID, l.Generation); err != nil {
			return err
		}
		var raw string
		if err := tx.QueryRow(ctx, `SELECT task FROM ioh_runs WHERE id = $1 FOR UPDATE`, l.RunID).Scan(&raw); err != nil {
			return err
		}
		var task map[string]json.RawMessage
		if err := json.Unmarshal([]byte(untext(raw)), &task); err != nil {
			return fmt.Errorf("%w: run %s: task: %v", store.ErrCorrupt, l.RunID, err)
		}
		if file, ok := task["file"]; ok {
			var f string
			if err := json.Unmarshal(file, &f); err != nil {
				return fmt.Errorf("%w: run %s: task file: %v", store.ErrCorrupt, l.RunID, err)
			}
			task["file"], _ = json.Marshal(dir + "/" + baseName(f))
		} else {
			task["root"], _ = json.Marshal(dir)
		}
		out, err := json.Marshal(task)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE ioh_runs SET task = $2 WHERE id = $1`, l.RunID, textBytes(out))
		return err
	})
	if errors.Is(err, store.ErrCorrupt) {
		return err
	}
	return s.classify("relocate workspace", err)
}

func baseName(p string) string {
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] == '/' || p[i] == '\\' {
			return p[i+1:]
		}
	}
	return p
}

// Unheld returns the leases of the submitted runs that no driver holds:
// queued runs that were never driven (generation 0), and running runs
// whose lease expired, by the database's clock, at least grace ago, or
// whose owner ran on host (whose process the caller can look for); with
// the database's clock now. They are the candidates for a rescue.
func (s *Store) Unheld(ctx context.Context, host string, grace time.Duration) ([]store.Lease, time.Time, error) {
	if err := s.readable("find unheld runs"); err != nil {
		return nil, time.Time{}, err
	}
	rows, err := s.pool.Query(ctx, `SELECT l.run_id, l.host, l.pid, l.started, l.generation, l.expires, l.ttl_ms, l.live, clock_timestamp()
		FROM ioh_runs r JOIN ioh_leases l ON l.run_id = r.id JOIN ioh_submissions s ON s.run_id = r.id
		WHERE r.status IN ('queued', 'running')
		AND (l.generation = 0 OR l.expires <= clock_timestamp() - $1 * interval '1 millisecond' OR l.host = $2)
		ORDER BY l.generation = 0, l.expires LIMIT 1000`, grace.Milliseconds(), text(host))
	if err != nil {
		return nil, time.Time{}, s.classify("find unheld runs", err)
	}
	defer rows.Close()
	var out []store.Lease
	var now time.Time
	for rows.Next() {
		l, err := scanLease(rows, &now)
		if err != nil {
			return nil, time.Time{}, s.classify("find unheld runs", err)
		}
		out = append(out, *l)
	}
	if err := rows.Err(); err != nil {
		return nil, time.Time{}, s.classify("find unheld runs", err)
	}
	if now.IsZero() {
		return out, time.Time{}, nil
	}
	return out, now, nil
}

// Now returns the database's clock.
func (s *Store) Now(ctx context.Context) (time.Time, error) {
	if err := s.readable("read the clock"); err != nil {
		return time.Time{}, err
	}
	var now time.Time
	if err := s.pool.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&now); err != nil {
		return time.Time{}, s.classify("read the clock", err)
	}
	return now, nil
}
