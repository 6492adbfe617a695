package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/initorigin/io-harness-go/pkg/harness/provider"
)

var t0 = time.UnixMilli(1_700_000_000_000)

func openFile(t *testing.T) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "trace.db")
	s, err := Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, path
}

func newRun(t *testing.T, s *Store, id string) {
	t.Helper()
	err := s.CreateRun(context.Background(), &Run{ID: id, Task: json.RawMessage(`{"goal":"g"}`), Provider: "scripted", StartedAt: t0},
		[]Event{{Seq: 1, Kind: "run_started", At: t0, Data: json.RawMessage(`{"kind":"run_started"}`)}})
	if err != nil {
		t.Fatal(err)
	}
}

func step(id string, n int) *Commit {
	return &Commit{
		Step: Step{
			RunID: id, Step: n, StartedAt: t0, FinishedAt: t0.Add(time.Second), Provider: "scripted",
			Assistant: provider.Message{Role: provider.RoleAssistant, Content: fmt.Sprintf("turn %d", n),
				ToolCalls: []provider.ToolCall{{ID: "c1", Name: "read_file", Arguments: json.RawMessage(`{"path":"a"}`)}}},
			Observations: []Observation{
				{Kind: ObservationTool, CallID: "c1", Tool: "read_file", Arguments: json.RawMessage(`{"path":"a"}`), Output: "hello"},
				{Kind: ObservationVerification, Output: "not yet", IsError: true},
			},
			Usage:    provider.Usage{InputTokens: 100, OutputTokens: 10, CacheReadTokens: 40},
			Cost:     provider.Cost{USD: 0.25, Known: true},
			Attempts: []Attempt{{Step: n, Attempt: 1, Provider: "scripted", Latency: 5 * time.Millisecond, At: t0}},
		},
		Events: []Event{{Seq: int64(10 * n), Step: n, Kind: "checkpoint", At: t0, Data: json.RawMessage(`{"kind":"checkpoint"}`)}},
	}
}

func TestOpenSetsPragmas(t *testing.T) {
	s, _ := openFile(t)
	ctx := context.Background()
	for pragma, want := range map[string]string{"journal_mode": "wal", "foreign_keys": "1", "user_version": fmt.Sprint(SchemaVersion), "synchronous": "2"} {
		var got string
		if err := s.db.QueryRowContext(ctx, "PRAGMA "+pragma).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("PRAGMA %s = %q, want %q", pragma, got, want)
		}
	}
}

func TestStepRoundTrip(t *testing.T) {
	for _, mem := range []bool{false, true} {
		t.Run(fmt.Sprintf("memory=%v", mem), func(t *testing.T) {
			ctx := context.Background()
			var s *Store
			if mem {
				var err error
				if s, err = OpenMemory(ctx); err != nil {
					t.Fatal(err)
				}
				defer s.Close()
			} else {
				s, _ = openFile(t)
			}
			newRun(t, s, "r1")
			c1, c2 := step("r1", 1), step("r1", 2)
			c2.Step.Cost = provider.Cost{USD: 1, Known: false}
			for _, c := range []*Commit{c1, c2} {
				if err := s.CommitStep(ctx, c); err != nil {
					t.Fatal(err)
				}
			}
			got, err := s.Steps(ctx, "r1")
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]Step{c1.Step, c2.Step}, got, cmpopts.EquateApproxTime(0)); diff != "" {
				t.Errorf("Steps (-want +got):\n%s", diff)
			}
			run, err := s.Run(ctx, "r1")
			if err != nil {
				t.Fatal(err)
			}
			wantUsage := provider.Usage{InputTokens: 200, OutputTokens: 20, CacheReadTokens: 80}
			if run.Steps != 2 || run.Usage != wantUsage || run.Cost != (provider.Cost{USD: 1.25, Known: false}) {
				t.Errorf("run totals = steps %d usage %+v cost %+v", run.Steps, run.Usage, run.Cost)
			}
			events, err := s.Events(ctx, "r1", 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			var seqs []int64
			for _, e := range events {
				seqs = append(seqs, e.Seq)
			}
			if diff := cmp.Diff([]int64{1, 10, 20}, seqs); diff != "" {
				t.Errorf("event seqs (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCommitStepOrderAndConflict(t *testing.T) {
	s, _ := openFile(t)
	ctx := context.Background()
	newRun(t, s, "r1")
	if err := s.CommitStep(ctx, step("r1", 2)); !errors.Is(err, ErrConflict) {
		t.Fatalf("step 2 before step 1: err = %v, want ErrConflict", err)
	}
	if err := s.CommitStep(ctx, step("r1", 1)); err != nil {
		t.Fatal(err)
	}
	if err := s.CommitStep(ctx, step("r1", 1)); !errors.Is(err, ErrConflict) {
		t.Fatalf("step 1 twice: err = %v, want ErrConflict", err)
	}
	if err := s.CommitStep(ctx, step("nope", 1)); !errors.Is(err, ErrConflict) {
		t.Fatalf("unknown run: err = %v, want ErrConflict", err)
	}
}

// A step transaction that fails part-way leaves nothing behind: not the
// step row, not the budget draw, not an observation.
func TestTornStepLeavesNothing(t *testing.T) {
	s, _ := openFile(t)
	ctx := context.Background()
	newRun(t, s, "r1")
	c := step("r1", 1)
	// The last insert of the transaction collides with the run's first
	// event, after every other row of the step has been written.
	c.Events = append(c.Events, Event{Seq: 1, Kind: "dup", At: t0, Data: json.RawMessage(`{}`)})
	if err := s.CommitStep(ctx, c); err == nil {
		t.Fatal("commit with a duplicate event succeeded")
	}
	run, err := s.Run(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if run.Steps != 0 || run.Usage != (provider.Usage{}) {
		t.Errorf("after a torn commit: steps %d usage %+v, want nothing", run.Steps, run.Usage)
	}
	for _, table := range []string{"steps", "observations", "attempts"} {
		var n int
		if err := s.db.QueryRowContext(ctx, "SELECT count(*) FROM "+table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("%s has %d rows after a torn commit", table, n)
		}
	}
	// And the same step commits cleanly afterwards.
	if err := s.CommitStep(ctx, step("r1", 1)); err != nil {
		t.Fatal(err)
	}
}

func TestIntentsInDoubt(t *testing.T) {
	s, _ := openFile(t)
	ctx := context.Background()
	newRun(t, s, "r1")
	done, err := s.OpenIntent(ctx, &Intent{RunID: "r1", Step: 1, CallID: "c1", Tool: "edit_file", Arguments: json.RawMessage(`{}`), CreatedAt: t0})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CommitStep(ctx, step("r1", 1)); err != nil {
		t.Fatal(err)
	}
	// Step 2 starts an effect and the process dies before its commit.
	lost, err := s.OpenIntent(ctx, &Intent{RunID: "r1", Step: 2, CallID: "c2", Tool: "edit_file", Arguments: json.RawMessage(`{"path":"x"}`), CreatedAt: t0})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.InDoubt(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].ID != lost || got[0].State != IntentInDoubt || got[0].Tool != "edit_file" {
		t.Fatalf("InDoubt = %+v, want intent %d only (intent %d committed)", got, lost, done)
	}
	// The resumed step 2 reports it; it is not in doubt any more.
	c := step("r1", 2)
	c.InDoubt = []int64{lost}
	if err := s.CommitStep(ctx, c); err != nil {
		t.Fatal(err)
	}
	if got, err := s.InDoubt(ctx, "r1"); err != nil || len(got) != 0 {
		t.Fatalf("InDoubt after reporting = %+v, %v; want none", got, err)
	}
	var states []string
	rows, err := s.db.QueryContext(ctx, "SELECT state FROM intents ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var st string
		rows.Scan(&st)
		states = append(states, st)
	}
	if diff := cmp.Diff([]string{"done", "reported"}, states); diff != "" {
		t.Errorf("intent states (-want +got):\n%s", diff)
	}
}

func TestFinishAndReopen(t *testing.T) {
	s, _ := openFile(t)
	ctx := context.Background()
	newRun(t, s, "r1")
	err := s.FinishRun(ctx, &Finish{RunID: "r1", Status: StatusFinished, Outcome: "step_cap_reached",
		OutcomeJSON: json.RawMessage(`{"kind":"step_cap_reached"}`), At: t0.Add(time.Minute),
		Attempts: []Attempt{{Step: 1, Attempt: 1, Provider: "p", ErrorKind: "server", Error: "boom", Status: 503, At: t0}}})
	if err != nil {
		t.Fatal(err)
	}
	run, _ := s.Run(ctx, "r1")
	if run.Status != StatusFinished || run.Outcome != "step_cap_reached" || !run.FinishedAt.Equal(t0.Add(time.Minute)) {
		t.Errorf("finished run = %+v", run)
	}
	if err := s.ReopenRun(ctx, "r1", json.RawMessage(`{"goal":"g2"}`), json.RawMessage(`{"version":1}`), nil); err != nil {
		t.Fatal(err)
	}
	run, _ = s.Run(ctx, "r1")
	if run.Status != StatusRunning || run.Outcome != "" || string(run.Task) != `{"goal":"g2"}` || !run.FinishedAt.IsZero() {
		t.Errorf("reopened run = %+v", run)
	}
	if err := s.FinishRun(ctx, &Finish{RunID: "nope", Status: StatusFinished}); !errors.Is(err, ErrNotFound) {
		t.Errorf("finish unknown run: %v", err)
	}
	if _, err := s.Run(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("read unknown run: %v", err)
	}
}

// A file at schema version 1, made here from version 1's own DDL, opens and
// migrates in place, keeping its rows.
func TestMigrateFromVersion1(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "v1.db")
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	stmts := []string{
		migrations()[0],
		"PRAGMA user_version = 1",
		`INSERT INTO runs (id, task, provider, started_at, steps, input_tokens, output_tokens) VALUES ('old', '{"goal":"g"}', 'scripted', 1700000000000, 1, 50, 5)`,
		`INSERT INTO steps (run_id, step, started_at, finished_at, assistant, input_tokens, output_tokens) VALUES ('old', 1, 1700000000000, 1700000001000, '{"role":"assistant","content":"hi"}', 50, 5)`,
		`INSERT INTO observations (run_id, step, idx, kind, output) VALUES ('old', 1, 0, 'verification', 'not yet')`,
		`INSERT INTO events (run_id, seq, step, kind, at, data) VALUES ('old', 1, 0, 'run_started', 1700000000000, '{}')`,
	}
	for _, q := range stmts {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Close()

	s, err := Open(ctx, path)
	if err != nil {
		t.Fatalf("open a version-1 file: %v", err)
	}
	defer s.Close()
	var v int
	s.db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v)
	if v != SchemaVersion {
		t.Errorf("user_version after migration = %d, want %d", v, SchemaVersion)
	}
	steps, err := s.Steps(ctx, "old")
	if err != nil {
		t.Fatal(err)
	}
	want := []Step{{RunID: "old", Step: 1, StartedAt: time.UnixMilli(1700000000000), FinishedAt: time.UnixMilli(1700000001000),
		Assistant:    provider.Message{Role: provider.RoleAssistant, Content: "hi"},
		Observations: []Observation{{Kind: ObservationVerification, Output: "not yet"}},
		Usage:        provider.Usage{InputTokens: 50, OutputTokens: 5}, Cost: provider.Cost{Known: true}}}
	if diff := cmp.Diff(want, steps, cmpopts.EquateApproxTime(0)); diff != "" {
		t.Errorf("migrated steps (-want +got):\n%s", diff)
	}
	// The migrated file takes new steps, with the version-2 tables.
	if _, err := s.OpenIntent(ctx, &Intent{RunID: "old", Step: 2, CallID: "c", Tool: "edit_file", Arguments: json.RawMessage(`{}`), CreatedAt: t0}); err != nil {
		t.Fatal(err)
	}
	if err := s.CommitStep(ctx, step("old", 2)); err != nil {
		t.Fatal(err)
	}
	if run, _ := s.Run(ctx, "old"); run.Steps != 2 || run.Usage.InputTokens != 150 {
		t.Errorf("migrated run after a new step: %+v", run)
	}
}

func TestOpenNewerFileIsTypedError(t *testing.T) {
	_, path := openFile(t)
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(fmt.Sprintf("PRAGMA user_version = %d", SchemaVersion+1)); err != nil {
		t.Fatal(err)
	}
	db.Close()
	_, err = Open(context.Background(), path)
	var se *SchemaError
	if !errors.Is(err, ErrTooNew) || !errors.As(err, &se) || se.Found != SchemaVersion+1 || se.Supported != SchemaVersion {
		t.Fatalf("open newer file: err = %v, want a *SchemaError wrapping ErrTooNew", err)
	}
}

func TestOpenCorruptFiles(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.db")
	data := make([]byte, 8192)
	for i := range data {
		data[i] = byte(i * 7)
	}
	if err := os.WriteFile(garbage, data, 0o644); err != nil {
		t.Fatal(err)
	}
	foreign := filepath.Join(dir, "foreign.db")
	db, err := sql.Open("sqlite", "file:"+foreign)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("CREATE TABLE unrelated (x)"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	for _, path := range []string{garbage, foreign} {
		if _, err := Open(context.Background(), path); !errors.Is(err, ErrCorrupt) {
			t.Errorf("Open(%s) = %v, want ErrCorrupt", filepath.Base(path), err)
		}
	}
	got, _ := os.ReadFile(garbage)
	if string(got) != string(data) {
		t.Error("opening a corrupt file changed it")
	}
}

// Many goroutines commit to their own runs and read concurrently; every
// step lands exactly once.
func TestConcurrentWritersAndReaders(t *testing.T) {
	s, _ := openFile(t)
	ctx := context.Background()
	const runs, steps = 8, 15
	for i := range runs {
		newRun(t, s, fmt.Sprintf("r%d", i))
	}
	var wg sync.WaitGroup
	errs := make(chan error, runs*2)
	for i := range runs {
		id := fmt.Sprintf("r%d", i)
		wg.Add(2)
		go func() {
			defer wg.Done()
			for n := 1; n <= steps; n++ {
				if err := s.CommitStep(ctx, step(id, n)); err != nil {
					errs <- err
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			for range steps {
				if _, err := s.Steps(ctx, id); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	all, err := s.Runs(ctx, RunFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != runs {
		t.Fatalf("Runs = %d runs, want %d", len(all), runs)
	}
	for _, r := range all {
		if r.Steps != steps || r.Usage.InputTokens != steps*100 {
			t.Errorf("run %s: steps %d input %d", r.ID, r.Steps, r.Usage.InputTokens)
		}
	}
}

// An approval request is inserted with its step, decided exactly once,
// and marked applied by the step that told the model.
func TestApprovals(t *testing.T) {
	s, _ := openFile(t)
	ctx := context.Background()
	newRun(t, s, "r1")
	c := step("r1", 1)
	c.Approvals = []Approval{{ID: "req1", RunID: "r1", Step: 1, CallID: "c1", Tool: "write_file",
		Arguments: json.RawMessage(`{"path":"a","content":"x"}`), Act: "write", Target: "a", Content: "x",
		Shown: "+x", Hash: "h", Rule: "", Layer: "", CreatedAt: t0}}
	c.Remembered = json.RawMessage(`[{"act":"write","effect":"allow","pattern":"/b"}]`)
	if err := s.CommitStep(ctx, c); err != nil {
		t.Fatal(err)
	}
	a, err := s.Approval(ctx, "r1", "req1")
	if err != nil || a.State != ApprovalPending || a.Content != "x" || a.Hash != "h" {
		t.Fatalf("Approval = %+v, %v", a, err)
	}
	if _, err := s.Approval(ctx, "other", "req1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("an approval of another run: %v", err)
	}
	if err := s.Decide(ctx, "r1", "req1", ApprovalApproved, json.RawMessage(`{"kind":"approve"}`), t0, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Decide(ctx, "r1", "req1", ApprovalDenied, json.RawMessage(`{"kind":"deny"}`), t0, nil); !errors.Is(err, ErrNotPending) {
		t.Errorf("a second decision: %v, want ErrNotPending", err)
	}
	c2 := step("r1", 2)
	c2.Applied = []string{"req1"}
	if err := s.CommitStep(ctx, c2); err != nil {
		t.Fatal(err)
	}
	all, _ := s.Approvals(ctx, "r1")
	if len(all) != 1 || all[0].State != ApprovalApplied || string(all[0].Decision) != `{"kind":"approve"}` {
		t.Errorf("Approvals = %+v", all)
	}
	run, _ := s.Run(ctx, "r1")
	if string(run.Remembered) != `[{"act":"write","effect":"allow","pattern":"/b"}]` {
		t.Errorf("remembered = %s", run.Remembered)
	}
}
