package fleet

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"

	"github.com/initorigin/io-harness-go/pkg/harness"
	"github.com/initorigin/io-harness-go/pkg/harness/approve"
	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/store"
	"github.com/initorigin/io-harness-go/pkg/harness/store/postgres"
)

// Runs submitted to the queue are driven to success by two workers: each
// step once, each edit once, each run's spend exactly its steps', and the
// queue log says who did what.
func TestSubmitAndWork(t *testing.T) {
	st, _ := openStore(t)
	m, base := newModel(t)
	ctx := context.Background()
	const runs, steps = 6, 3
	ids := make([]string, runs)
	wss := make([]string, runs)
	for i := range runs {
		ws, spec := m.add(t, base, fmt.Sprint("r", i), steps, false)
		id, err := Submit(ctx, st, spec, SubmitOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ids[i], wss[i] = id, ws
		if r, _ := st.Run(ctx, id); r.Status != store.StatusQueued {
			t.Fatalf("a submitted run is %s", r.Status)
		}
	}
	startWorker(t, st, WorkerOptions{Concurrency: 2})
	startWorker(t, st, WorkerOptions{Concurrency: 2})
	for i, id := range ids {
		r := waitFor(t, st, id, "finished", finished)
		if r.Outcome != string(harness.Success) || r.Steps != steps {
			t.Errorf("run %s: %s after %d steps", id, r.Outcome, r.Steps)
		}
		want := provider.Usage{InputTokens: steps * usagePerTurn.InputTokens, OutputTokens: steps * usagePerTurn.OutputTokens}
		if r.Usage != want || r.LostUsage != (provider.Usage{}) {
			t.Errorf("run %s: spend %+v lost %+v, want %+v", id, r.Usage, r.LostUsage, want)
		}
		if r.Paused <= 0 {
			t.Errorf("run %s: the wait for a worker is not counted as paused: %s", id, r.Paused)
		}
		checkEdits(t, wss[i], steps)
		if diff := cmp.Diff(map[int]int{1: 1, 2: 1, 3: 1}, m.requests(fmt.Sprint("r", i))); diff != "" {
			t.Errorf("run %s: requests per step (-want +got):\n%s", id, diff)
		}
		if got := waitAction(t, st, id, ActionFinished); !slices.Equal(got, []string{ActionSubmitted, ActionClaimed, ActionFinished}) {
			t.Errorf("run %s: queue log %v", id, got)
		}
	}
}

// A submitted spec is stored for the workers, so one with a key is
// refused and nothing is stored; the same spec without the key goes in.
func TestSubmitRefusesKeys(t *testing.T) {
	st, _ := openStore(t)
	m, base := newModel(t)
	ctx := context.Background()
	_, spec := m.add(t, base, "k", 1, false)
	withKey := []byte(string(spec[:len(spec)-1]) + `, "fallbacks": [{"name": "openai_compatible", "base_url": "http://127.0.0.1:1/v1", "model": "m", "api_key": "sk-live-123"}]}`)
	_, err := Submit(ctx, st, withKey, SubmitOptions{})
	var he *harness.Error
	if !errors.As(err, &he) || he.Kind != harness.ErrConfig || he.Field != "fallbacks[0].api_key" {
		t.Fatalf("a spec with a key: %v", err)
	}
	if runs, _ := st.Runs(ctx, store.RunFilter{}); len(runs) != 0 {
		t.Errorf("a refused submission stored %d runs", len(runs))
	}
	id, err := Submit(ctx, st, spec, SubmitOptions{})
	if err != nil {
		t.Fatalf("the same spec without the key: %v", err)
	}
	// Nothing works the queue here: the run waits.
	runs, err := Runs(ctx, st, store.RunFilter{})
	if err != nil || len(runs) != 1 || runs[0].ID != id || runs[0].State != StateQueued || runs[0].Last.Action != ActionSubmitted {
		t.Errorf("Runs = %+v, %v", runs, err)
	}
}

// tableText returns every row of every table in the store's schema — the
// store's and River's — as text.
func tableText(t *testing.T, st *postgres.Store) map[string]string {
	t.Helper()
	ctx := context.Background()
	rows, err := st.Pool().Query(ctx, `SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()`)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var name string
		rows.Scan(&name)
		tables = append(tables, name)
	}
	rows.Close()
	out := map[string]string{}
	for _, table := range tables {
		var text string
		if err := st.Pool().QueryRow(ctx, `SELECT coalesce(string_agg(t::text, E'\n'), '') FROM `+pgx.Identifier{table}.Sanitize()+` t`).Scan(&text); err != nil {
			t.Fatal(err)
		}
		out[table] = text
	}
	return out
}

// The DSN's password is in no row of any table, the store's or River's,
// after a run was submitted, driven, paused, decided and finished over a
// connection that used it; nor in the store's name. The negative control
// plants it in a row, and the search finds it there.
func TestPasswordNeverStored(t *testing.T) {
	st, dsn := openStore(t)
	m, base := newModel(t)
	ctx := context.Background()
	pw := pg.Password()
	if !strings.Contains(dsn, pw) || len(pw) < 16 {
		t.Fatalf("the DSN does not carry the password: %s", st.Name())
	}
	_, spec := m.add(t, base, "pw", 1, true)
	id, err := Submit(ctx, st, spec, SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	startWorker(t, st, WorkerOptions{Concurrency: 1})
	waitAction(t, st, id, ActionPaused)
	as, _ := st.Approvals(ctx, id)
	if err := harness.Decide(ctx, st, id, as[0].ID, approve.Decision{Kind: approve.Approve}, ""); err != nil {
		t.Fatal(err)
	}
	waitAction(t, st, id, ActionFinished)
	tables := tableText(t, st)
	if len(tables) < 10 || !strings.Contains(tables["ioh_runs"], id) || !strings.Contains(tables["river_job"], id) {
		t.Fatalf("the search reads %d tables and misses the run: %v", len(tables), slices.Collect(maps.Keys(tables)))
	}
	for table, text := range tables {
		if strings.Contains(text, pw) {
			t.Errorf("table %s holds the password", table)
		}
	}
	if strings.Contains(st.Name(), pw) {
		t.Errorf("Name() = %s", st.Name())
	}
	if err := st.Log(ctx, &postgres.QueueEntry{RunID: id, Action: "planted", Detail: "x" + pw}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(tableText(t, st)["ioh_queue_log"], pw) {
		t.Error("the negative control: a planted password is not found")
	}
}
