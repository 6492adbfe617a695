// Package fleet drives runs on a pool of workers that share one
// PostgreSQL database (package store/postgres), with River
// (github.com/riverqueue/river) as the job engine.
//
// [Submit] records a run as queued and enqueues its job in one
// transaction, and returns the run's id at once. A [Worker] works the
// queue: it claims a job, checks it can reach the run's workspace, and
// drives the run with [harness.Resume] — the same path that continues a
// run after a crash, so a first claim and a claim after a worker died are
// one code path: the run's lease is taken first, committed steps are not
// run again, effects left open are reported in doubt.
//
// # The queue and the lease
//
// River decides who is offered a run; the run's lease decides who drives
// it. A job River hands out twice — a retry, a rescue, a duplicate — finds
// the lease held by a live driver and is snoozed until the lease is
// renewed or lapses; every write of a driver that was taken over is fenced
// out by the store. River's own rescuer only notices a worker's death
// after RescueAfter (an hour by default), so every worker also sweeps for
// runs nobody drives — never claimed, or whose lease lapsed: expired by
// the database's clock, or held by a process on this host that is gone —
// whose job River still counts as running after a lease ttl, and enqueues
// a rescue job for each such job, unique per job rescued.
//
// A run's outcome ends its job: the worker completes the job and logs the
// run's finished (or paused) line in one transaction. A worker killed
// between the outcome's commit and that transaction leaves its job
// running on a finished run; the next worker to start queues a rescue
// job for it, which completes it and logs the finished line.
//
// A run that pauses for a person's decision releases its worker (its job
// completes). The decision is recorded from any process the one way any
// run's is, with [harness.Decide] (the ABI's approval.decide, io-harness
// approve --store); every worker looks for the decided requests of paused
// runs as often as it polls for jobs, and queues a job for each, once,
// which the worker that claims it carries out as any resume does, and
// continues the run. On shutdown a
// worker stops taking jobs and hands each run it holds back to the queue
// at its next step boundary, or mid-step once its grace period is over;
// a run handed back mid-step is resumed like one whose worker died.
//
// Every queue action on a run — submitted, claimed, snoozed, paused,
// finished, handed back, rescued, refused, a decision queued — is a line
// of its queue log ([postgres.Store.QueueLog]), which io-harness trace shows beside the
// run's events.
//
// # Workspaces
//
// A worker must reach the run's workspace. By default the task's path is
// used as it is: it must be on a filesystem every worker mounts at the
// same path, and a worker that cannot reach it refuses the job, says so in
// the queue log, and leaves it to another worker. With
// [SubmitOptions.Upload] the workspace travels in the database instead: a
// snapshot is stored with the submission, the worker that first claims
// the run materialises it under its [WorkerOptions.Workspaces] directory,
// and the workspace as the run left it is stored back when the run
// finishes, for [Fetch].
package fleet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"

	"github.com/initorigin/io-harness-go/pkg/harness/store"
	"github.com/initorigin/io-harness-go/pkg/harness/store/postgres"
)

// Kind is the River job kind of a run; Queue is the River queue the runs
// go through.
const (
	Kind  = "io_harness_run"
	Queue = "io_harness"
)

// Args are a run job's arguments: the run, and what the job is for. A
// run has at most one job of each kind of arguments waiting or running:
// its submission, a rescue of one job whose worker died; and one job, ever,
// for a decision on each request.
type Args struct {
	RunID string `json:"run_id" river:"unique"`
	// Rescue is the job this one rescues: one a worker took and died
	// with, which River still counts as running.
	Rescue int64 `json:"rescue,omitempty" river:"unique"`
	// RequestID is the approval request the run awaited, whose decision
	// (in the store) the job's worker carries out.
	RequestID string `json:"request_id,omitempty" river:"unique"`
}

// Kind implements river.JobArgs.
func (Args) Kind() string { return Kind }

// maxAttempts bounds the failed attempts of a job (a workspace no worker
// reaches, a store that keeps failing); snoozes do not count.
const maxAttempts = 12

// InsertOpts implements river.JobArgsWithInsertOpts: the run queue, and
// uniqueness by the tagged arguments.
func (Args) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: Queue, MaxAttempts: maxAttempts, UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

// ErrNotFleet reports a store a fleet cannot use: not a PostgreSQL one.
var ErrNotFleet = errors.New("fleet: a fleet needs a PostgreSQL store (a postgres:// DSN)")

// Of returns st as a fleet's store.
func Of(st store.Reader) (*postgres.Store, error) {
	pg, ok := st.(*postgres.Store)
	if !ok {
		return nil, fmt.Errorf("%w; %s is not one", ErrNotFleet, st.Name())
	}
	return pg, nil
}

// Migrate creates River's tables beside the store's, or brings them up to
// date. Workers and submitters that start together migrate once: each
// holds a session advisory lock while it migrates. River's migrations run
// one transaction each (some add an enum value that a later statement of
// the same migration uses, which one transaction cannot do).
func Migrate(ctx context.Context, st *postgres.Store) error {
	m, err := rivermigrate.New(riverpgxv5.New(st.Pool()), &rivermigrate.Config{Logger: quiet()})
	if err != nil {
		return fmt.Errorf("fleet: the job engine's migrations: %w", err)
	}
	fail := func(err error) error {
		return fmt.Errorf("%w: %s: migrate the job engine's tables: %v", store.ErrUnavailable, st.Name(), err)
	}
	// The lock is held on a connection of its own, outside the pool, which
	// River's migrations use: a pool of one connection would wait on
	// itself.
	conn, err := pgx.ConnectConfig(ctx, st.Pool().Config().ConnConfig.Copy())
	if err != nil {
		return fail(err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	const key = `hashtext(current_schema() || '.io-harness-river')`
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock(`+key+`)`); err != nil {
		return fail(err)
	}
	defer conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock(`+key+`)`)
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fail(err)
	}
	return nil
}

// quiet is a logger that says nothing.
func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// inserter returns a client that inserts and lists jobs but works none.
func inserter(st *postgres.Store) (*river.Client[pgx.Tx], error) {
	c, err := river.NewClient(riverpgxv5.New(st.Pool()), &river.Config{Logger: quiet()})
	if err != nil {
		return nil, fmt.Errorf("fleet: the job engine's client: %w", err)
	}
	return c, nil
}

// enqueue returns an Enqueuer that inserts args; a duplicate of a job
// already waiting or running inserts nothing and returns job 0. A
// decision's job is unique in every state River keeps a job in: a
// decision is carried out once, and one whose job was refused or gave up
// is left for a person to look at, not queued again.
func enqueue(c *river.Client[pgx.Tx], args Args) postgres.Enqueuer {
	var opts *river.InsertOpts
	if args.RequestID != "" {
		o := args.InsertOpts()
		o.UniqueOpts.ByState = append(rivertype.UniqueOptsByStateDefault(), rivertype.JobStateCancelled, rivertype.JobStateDiscarded)
		opts = &o
	}
	return func(ctx context.Context, tx pgx.Tx) (int64, error) {
		res, err := c.InsertTx(ctx, tx, args, opts)
		switch {
		case err != nil:
			return 0, err
		case res.UniqueSkippedAsDuplicate:
			return 0, nil
		}
		return res.Job.ID, nil
	}
}

// ownerName is how the queue log names a process.
func ownerName(o store.Owner) string { return fmt.Sprintf("%s:%d", o.Host, o.PID) }
