package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/store"
)

var t0 = time.UnixMilli(1_700_000_000_000)

func newRun(t *testing.T, s *Store, id string, owner store.Owner, ttl time.Duration) *store.Lease {
	t.Helper()
	l, err := s.CreateRun(context.Background(), &store.Run{ID: id, Task: json.RawMessage(`{"goal":"g"}`), Provider: "scripted", StartedAt: t0},
		[]store.Event{{Seq: 1, Kind: "run_started", At: t0, Data: json.RawMessage(`{"kind":"run_started"}`)}}, owner, ttl)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func step(id string, n int) *store.Commit {
	return &store.Commit{
		Step: store.Step{RunID: id, Step: n, StartedAt: t0, FinishedAt: t0.Add(time.Second), Provider: "scripted",
			Assistant:    provider.Message{Role: provider.RoleAssistant, Content: fmt.Sprintf("turn %d", n)},
			Observations: []store.Observation{{Kind: store.ObservationVerification, Output: "not yet", IsError: true}},
			Usage:        provider.Usage{InputTokens: 100, OutputTokens: 10}, Cost: provider.Cost{USD: 0.25, Known: true}},
		Events: []store.Event{{Seq: int64(10 * n), Step: n, Kind: "checkpoint", At: t0, Data: json.RawMessage(`{"kind":"checkpoint"}`)}},
	}
}

// The negative control of storetest's AnyBytes case: the strings it
// writes, inserted into a text column as they are, are refused, so the
// store's escape is what lets them through.
func TestTextRefusesWhatTheEscapeCarries(t *testing.T) {
	s, _ := open(t)
	ctx := context.Background()
	newRun(t, s, "r", store.Self(), time.Minute)
	for _, w := range []string{"nul\x00byte", "latin1 \xe9t\xe9", "\xff\xfe"} {
		if _, err := s.pool.Exec(ctx, `INSERT INTO ioh_queue_log (run_id, action, detail) VALUES ('r', 'x', $1)`, w); err == nil {
			t.Errorf("PostgreSQL took %q as text: the escape is not needed", w)
		}
		if err := s.Log(ctx, &QueueEntry{RunID: "r", Action: "x", Detail: w}); err != nil {
			t.Errorf("the store refused %q: %v", w, err)
		}
	}
	log, err := s.QueueLog(ctx, "r")
	if err != nil || len(log) != 3 || log[0].Detail != "nul\x00byte" || log[2].Detail != "\xff\xfe" {
		t.Errorf("queue log %+v %v", log, err)
	}
}

// The lease's expiry comes from the database's clock, and so does the
// verdict on whether it has expired: a worker whose clock runs two hours
// ahead cannot take a live lease. The negative control is the same
// Acquire judging by that clock instead: it takes the lease, which by
// the database's clock was still live.
func TestLeaseUsesTheDatabaseClock(t *testing.T) {
	s, dsn := open(t)
	ctx := context.Background()
	far := store.Owner{Host: "elsewhere.invalid", PID: 7, Started: t0}
	l := newRun(t, s, "r", far, time.Hour)
	dbNow := func() time.Time {
		t.Helper()
		var now time.Time
		if err := s.pool.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&now); err != nil {
			t.Fatal(err)
		}
		return now
	}
	if now := dbNow(); l.Expires.Sub(now) > time.Hour || l.Expires.Sub(now) < 59*time.Minute {
		t.Errorf("expiry %s is not the database's clock plus an hour (%s)", l.Expires, now)
	}
	ahead := func() time.Time { return time.Now().Add(2 * time.Hour) }
	held, err := s.Lease(ctx, "r")
	if err != nil || held == nil {
		t.Fatalf("Lease = %+v, %v", held, err)
	}
	if !held.Lapsed(ahead(), store.Self()) {
		t.Fatal("a decision on a clock two hours ahead keeps the lease: the control below cannot take it")
	}
	if _, err := s.Acquire(ctx, "r", store.Self(), time.Minute, false); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("a live lease was taken: %v", err)
	}
	// Renewing moves the expiry by the database's clock as well: the
	// statements since the lease was made took longer than a tick of it.
	before := l.Expires
	if err := s.Renew(ctx, l); err != nil || !l.Expires.After(before) {
		t.Errorf("renewal: %v, expiry %s after %s", err, l.Expires, before)
	}

	// The control: a worker whose Acquire judges by its clock, two hours
	// ahead, takes the lease the database's clock says is live.
	w, err := Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	w.leaseClock = ahead
	took, err := w.Acquire(ctx, "r", store.Self(), time.Minute, false)
	if err != nil {
		t.Fatalf("the negative control: judged by a clock two hours ahead, Acquire kept the lease (%v): the test cannot see a lease judged by the local clock", err)
	}
	if now := dbNow(); !now.Before(l.Expires) {
		t.Fatalf("the lease had expired by the database's clock too (%s, expiry %s): the control shows nothing", now, l.Expires)
	}
	t.Logf("judged by a clock two hours ahead, a worker took generation %d of a lease live until %s", took.Generation, l.Expires)
}

// A takeover and a commit of the superseded driver, raced many times: a
// commit that returns nil landed before the takeover, and the new driver's
// next step always commits — no write of the old one slips in after it.
func TestTakeoverOrdersWrites(t *testing.T) {
	s, _ := open(t)
	ctx := context.Background()
	landed, fenced := 0, 0
	defer func() { t.Logf("the old driver's commit landed first %d times, was fenced %d times", landed, fenced) }()
	for i := range 25 {
		id := fmt.Sprint("race", i)
		old := newRun(t, s, id, store.Self(), time.Minute)
		var wg sync.WaitGroup
		var commitErr error
		var took *store.Lease
		wg.Go(func() { commitErr = s.CommitStep(ctx, old, step(id, 1)) })
		wg.Go(func() {
			var err error
			if took, err = s.Acquire(ctx, id, store.Self(), time.Minute, true); err != nil {
				t.Error(err)
			}
		})
		wg.Wait()
		if took == nil {
			return
		}
		r, _ := s.Run(ctx, id)
		switch {
		case commitErr == nil && r.Steps != 1:
			t.Fatalf("%s: the old driver's commit returned nil but is not stored", id)
		case commitErr != nil && !errors.Is(commitErr, store.ErrFenced):
			t.Fatalf("%s: the old driver's commit: %v", id, commitErr)
		case commitErr == nil:
			landed++
		default:
			fenced++
		}
		if err := s.CommitStep(ctx, took, step(id, r.Steps+1)); err != nil {
			t.Fatalf("%s: the new driver's step %d: %v", id, r.Steps+1, err)
		}
		if err := s.CommitStep(ctx, old, step(id, r.Steps+2)); !errors.Is(err, store.ErrFenced) {
			t.Fatalf("%s: the old driver wrote after the takeover: %v", id, err)
		}
	}
}

// A step whose statements fail part way leaves nothing: not the step, not
// the run's totals.
func TestTornStepLeavesNothing(t *testing.T) {
	s, _ := open(t)
	ctx := context.Background()
	l := newRun(t, s, "r", store.Self(), time.Minute)
	c := step("r", 1)
	c.Events = append(c.Events, c.Events[0]) // the last statement fails
	if err := s.CommitStep(ctx, l, c); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("a commit with a duplicate event: %v", err)
	}
	if r, _ := s.Run(ctx, "r"); r.Steps != 0 || r.Usage.InputTokens != 0 {
		t.Errorf("a torn commit left %+v", r)
	}
	if steps, _ := s.Steps(ctx, "r"); len(steps) != 0 {
		t.Errorf("a torn commit left steps %+v", steps)
	}
}

// Five processes opening a fresh schema at once migrate it once; without
// the lock, the second of two concurrent migrations fails.
func TestConcurrentOpenMigratesOnce(t *testing.T) {
	ctx := context.Background()
	dsn := pg.DSN(t)
	var wg sync.WaitGroup
	errs := make([]error, 5)
	for i := range errs {
		wg.Go(func() {
			s, err := Open(ctx, dsn)
			if err == nil {
				s.Close()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	// The negative control: the migration, twice at once, unlocked.
	raw := pg.DSN(t)
	a, err := pgx.Connect(ctx, raw)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(ctx)
	b, err := pgx.Connect(ctx, raw)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(ctx)
	ta, _ := a.Begin(ctx)
	if _, err := ta.Exec(ctx, schemaV1); err != nil {
		t.Fatal(err)
	}
	second := make(chan error, 1)
	go func() {
		tb, err := b.Begin(ctx)
		if err == nil {
			_, err = tb.Exec(ctx, schemaV1)
			tb.Rollback(ctx)
		}
		second <- err
	}()
	time.Sleep(100 * time.Millisecond) // not a timing assertion: either order fails the second
	ta.Commit(ctx)
	if err := <-second; err == nil {
		t.Error("two unlocked migrations both succeeded: the lock is not needed")
	}
}

func TestSchemaTooNewOrForeign(t *testing.T) {
	ctx := context.Background()
	s, dsn := open(t)
	if _, err := s.pool.Exec(ctx, `UPDATE ioh_schema SET version = 99`); err != nil {
		t.Fatal(err)
	}
	var se *store.SchemaError
	if _, err := Open(ctx, dsn); !errors.Is(err, store.ErrTooNew) || !errors.As(err, &se) || se.Found != 99 {
		t.Errorf("a newer schema: %v", err)
	}
	if _, err := OpenReadOnly(ctx, dsn); !errors.Is(err, store.ErrTooNew) {
		t.Errorf("a newer schema, read-only: %v", err)
	}
	foreign := pg.DSN(t)
	c, err := pgx.Connect(ctx, foreign)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, `CREATE TABLE ioh_runs (x int)`); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(ctx, foreign); !errors.Is(err, store.ErrCorrupt) {
		t.Errorf("a foreign ioh_runs: %v", err)
	}
	if _, err := OpenReadOnly(ctx, pg.DSN(t)); !errors.Is(err, store.ErrCorrupt) {
		t.Errorf("read-only on an empty schema: %v", err)
	}
}

// A read-only store refuses writes, and so do its connections, should a
// write reach them anyway.
func TestReadOnly(t *testing.T) {
	ctx := context.Background()
	s, dsn := open(t)
	newRun(t, s, "r", store.Self(), time.Minute)
	ro, err := OpenReadOnly(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if r, err := ro.Run(ctx, "r"); err != nil || r.ID != "r" {
		t.Fatalf("read: %+v %v", r, err)
	}
	if _, err := ro.Acquire(ctx, "r", store.Self(), time.Minute, true); !errors.Is(err, store.ErrReadOnly) {
		t.Errorf("Acquire on a read-only store: %v", err)
	}
	if err := ro.Decide(ctx, "r", "x", store.ApprovalApproved, nil, t0, nil); !errors.Is(err, store.ErrReadOnly) {
		t.Errorf("Decide on a read-only store: %v", err)
	}
	_, err = ro.pool.Exec(ctx, `UPDATE ioh_runs SET steps = 5`)
	if err == nil || !errors.Is(ro.classify("x", err), store.ErrReadOnly) {
		t.Errorf("a write on a read-only connection: %v", err)
	}
	// The negative control: the writer's connection takes the same write.
	if _, err := s.pool.Exec(ctx, `UPDATE ioh_runs SET steps = 0`); err != nil {
		t.Errorf("the writer: %v", err)
	}
	if !strings.Contains(ro.Name(), "search_path=") || strings.Contains(ro.Name(), pg.Password()) {
		t.Errorf("Name = %s", ro.Name())
	}
}
