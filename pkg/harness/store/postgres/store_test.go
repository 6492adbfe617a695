package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
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
// verdict on whether it has expired, whatever this process's clock says.
// The test cannot set the worker's clock (Go reads it from the kernel),
// so it moves the database's instead, which is the same skew seen from
// the other side: its schema's clock_timestamp() runs three hours off the
// real one, and the store, whose statements call clock_timestamp(), reads
// that as the database's clock. With the database three hours behind, a
// worker's own clock says a live lease expired hours ago; with it three
// hours ahead, that a released lease is live for three hours more. Acquire
// judges both as the database does. The negative control is the same
// Acquire judging by time.Now (localClock): it takes the live lease and
// keeps the released one, and the test sees both.
func TestLeaseUsesTheDatabaseClock(t *testing.T) {
	ctx := context.Background()
	far := store.Owner{Host: "elsewhere.invalid", PID: 7, Started: t0}
	for _, tc := range []struct {
		name string
		skew time.Duration // the database's clock less the real one
	}{
		{"the database three hours behind", -3 * time.Hour},
		{"the database three hours ahead", 3 * time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dsn := skewedDSN(t, tc.skew)
			s, err := Open(ctx, dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			control, err := Open(ctx, dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer control.Close()
			control.localClock = true

			runs := 0
			// judge makes a lease this process's clock misjudges and
			// says how st's Acquire judged it: "" if as the database
			// does.
			judge := func(st *Store) string {
				t.Helper()
				runs++
				id := fmt.Sprint("r", runs)
				l := newRun(t, s, id, far, time.Hour)
				// The premise: the store's clock is the skewed one.
				if off := l.Expires.Sub(time.Now()) - time.Hour - tc.skew; off > time.Minute || off < -time.Minute {
					t.Fatalf("the lease expires at %s, not at the skewed database clock plus an hour: the store does not read the clock the test moved", l.Expires)
				}
				if tc.skew > 0 {
					if err := s.Release(ctx, l); err != nil {
						t.Fatal(err)
					}
				}
				held, err := s.Lease(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				var expires time.Time
				if err := s.pool.QueryRow(ctx, `SELECT expires FROM ioh_leases WHERE run_id = $1`, id).Scan(&expires); err != nil {
					t.Fatal(err)
				}
				live := tc.skew < 0
				if (held != nil) != live || expires.After(time.Now()) == live {
					t.Fatalf("the lease, expiring at %s, is live by the database: %v; the worker's clock (%s) must say otherwise",
						expires, held != nil, time.Now())
				}
				took, err := st.Acquire(ctx, id, store.Self(), time.Minute, false, nil)
				switch {
				case live && err == nil:
					return fmt.Sprintf("took generation %d of a lease live by the database's clock until %s", took.Generation, expires)
				case live && !errors.Is(err, store.ErrConflict):
					t.Fatalf("Acquire of a live lease: %v", err)
				case !live && errors.Is(err, store.ErrConflict):
					return fmt.Sprintf("kept a lease released at %s by the database's clock: %v", expires, err)
				case !live && err != nil:
					t.Fatalf("Acquire of a released lease: %v", err)
				}
				return ""
			}

			if got := judge(s); got != "" {
				t.Errorf("Acquire %s", got)
			}
			got := judge(control)
			if got == "" {
				t.Fatal("the negative control: judged by this process's clock, Acquire judged the lease as the database does: the test cannot see a lease judged by the local clock")
			}
			t.Logf("judged by this process's clock, Acquire %s", got)
		})
	}
}

// Renewing moves the expiry by the database's clock.
func TestRenewUsesTheDatabaseClock(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, skewedDSN(t, -3*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	l := newRun(t, s, "r", store.Owner{Host: "elsewhere.invalid", PID: 7, Started: t0}, time.Hour)
	before := l.Expires
	if err := s.Renew(ctx, l); err != nil || !l.Expires.After(before) {
		t.Fatalf("renewal: %v, expiry %s after %s", err, l.Expires, before)
	}
	if off := l.Expires.Sub(time.Now()) - time.Hour + 3*time.Hour; off > time.Minute || off < -time.Minute {
		t.Errorf("renewed to %s, not the database's clock plus an hour", l.Expires)
	}
}

// skewedDSN returns the DSN of a fresh schema whose clock_timestamp()
// runs skew off the server's: the function, made in the schema, comes
// before pg_catalog's in the search_path.
func skewedDSN(t *testing.T, skew time.Duration) string {
	t.Helper()
	u, err := url.Parse(pg.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	schema := q.Get("search_path")
	if schema == "" {
		t.Fatalf("pgtest's DSN names no schema: %s", u.Redacted())
	}
	err = pg.Exec(context.Background(), fmt.Sprintf(`CREATE FUNCTION %s.clock_timestamp() RETURNS timestamptz LANGUAGE sql VOLATILE
		AS $$ SELECT pg_catalog.clock_timestamp() + %d * interval '1 millisecond' $$`, pgx.Identifier{schema}.Sanitize(), skew.Milliseconds()))
	if err != nil {
		t.Fatal(err)
	}
	q.Set("search_path", schema+",pg_catalog")
	u.RawQuery = q.Encode()
	return u.String()
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
			if took, err = s.Acquire(ctx, id, store.Self(), time.Minute, true, nil); err != nil {
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
	if _, err := ro.Acquire(ctx, "r", store.Self(), time.Minute, true, nil); !errors.Is(err, store.ErrReadOnly) {
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
