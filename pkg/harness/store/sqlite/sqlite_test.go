package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/store"
	"github.com/initorigin/io-harness-go/pkg/harness/store/storetest"
)

func TestConformanceFile(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := Open(context.Background(), filepath.Join(t.TempDir(), "trace.db"))
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func TestConformanceMemory(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := OpenMemory(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

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

func newRun(t *testing.T, s *Store, id string) *store.Lease {
	t.Helper()
	l, err := s.CreateRun(context.Background(), &store.Run{ID: id, Task: json.RawMessage(`{"goal":"g"}`), Provider: "scripted", StartedAt: t0},
		[]store.Event{{Seq: 1, Kind: "run_started", At: t0, Data: json.RawMessage(`{"kind":"run_started"}`)}}, store.Self(), time.Minute)
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
	// A spend record is written unsynced and leaves the connection synced.
	l := newRun(t, s, "r")
	if err := s.RecordSpend(ctx, l, &store.Spend{RunID: "r", Step: 1, Attempt: 1, Provider: "p", At: t0}); err != nil {
		t.Fatal(err)
	}
	var sync string
	s.w.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&sync)
	if sync != "2" {
		t.Errorf("synchronous = %s after a spend record", sync)
	}
}

// A commit that fails part way leaves nothing of the step.
func TestTornStepLeavesNothing(t *testing.T) {
	s, _ := openFile(t)
	ctx := context.Background()
	l := newRun(t, s, "r")
	c := step("r", 1)
	c.Events = append(c.Events, c.Events[0]) // a duplicate sequence number fails the insert
	if err := s.CommitStep(ctx, l, c); err == nil {
		t.Fatal("a commit with a duplicate event succeeded")
	}
	if r, _ := s.Run(ctx, "r"); r.Steps != 0 || r.Usage.InputTokens != 0 {
		t.Errorf("a torn commit left %+v", r)
	}
	if steps, _ := s.Steps(ctx, "r"); len(steps) != 0 {
		t.Errorf("a torn commit left steps %+v", steps)
	}
}

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

	want := []store.Step{{RunID: "old", Step: 1, StartedAt: time.UnixMilli(1700000000000), FinishedAt: time.UnixMilli(1700000001000),
		Assistant:    provider.Message{Role: provider.RoleAssistant, Content: "hi"},
		Observations: []store.Observation{{Kind: store.ObservationVerification, Output: "not yet"}},
		Usage:        provider.Usage{InputTokens: 50, OutputTokens: 5}, Cost: provider.Cost{Known: true}}}

	// A reader reads the old file as it is, and leaves it at version 1.
	ro, err := OpenReadOnly(ctx, path)
	if err != nil {
		t.Fatalf("read a version-1 file: %v", err)
	}
	steps, err := ro.Steps(ctx, "old")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, steps, cmpopts.EquateApproxTime(0)); diff != "" {
		t.Errorf("steps read from the version-1 file (-want +got):\n%s", diff)
	}
	var v int
	ro.db.QueryRowContext(ctx, "PRAGMA main.user_version").Scan(&v)
	ro.Close()
	if v != 1 {
		t.Errorf("user_version after reading = %d, want 1", v)
	}

	// A writer migrates it in place.
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatalf("open a version-1 file: %v", err)
	}
	defer s.Close()
	s.db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v)
	if v != SchemaVersion {
		t.Errorf("user_version after migration = %d, want %d", v, SchemaVersion)
	}
	if steps, err = s.Steps(ctx, "old"); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, steps, cmpopts.EquateApproxTime(0)); diff != "" {
		t.Errorf("migrated steps (-want +got):\n%s", diff)
	}
	// The migrated run is driven on: a new driver takes it (it has no
	// lease yet) and commits.
	l, err := s.Acquire(ctx, "old", store.Self(), time.Minute, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.OpenIntent(ctx, l, &store.Intent{RunID: "old", Step: 2, CallID: "c", Tool: "edit_file", Arguments: json.RawMessage(`{}`), CreatedAt: t0}); err != nil {
		t.Fatal(err)
	}
	if err := s.CommitStep(ctx, l, step("old", 2)); err != nil {
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
	for _, open := range []func(context.Context, string) (*Store, error){Open, OpenReadOnly} {
		_, err = open(context.Background(), path)
		var se *store.SchemaError
		if !errors.Is(err, store.ErrTooNew) || !errors.As(err, &se) || se.Found != SchemaVersion+1 || se.Supported != SchemaVersion {
			t.Fatalf("open newer file: err = %v, want a *SchemaError wrapping ErrTooNew", err)
		}
	}
}

// Files that are not stores are refused, and left exactly as they were.
func TestOpenWhatIsNotAStore(t *testing.T) {
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
	empty := filepath.Join(dir, "empty.db")
	os.WriteFile(empty, nil, 0o644)
	for _, path := range []string{garbage, foreign} {
		if _, err := Open(context.Background(), path); !errors.Is(err, store.ErrCorrupt) {
			t.Errorf("Open(%s) = %v, want ErrCorrupt", filepath.Base(path), err)
		}
	}
	for _, path := range []string{garbage, foreign, empty} {
		before, _ := os.ReadFile(path)
		if _, err := OpenReadOnly(context.Background(), path); !errors.Is(err, store.ErrCorrupt) {
			t.Errorf("OpenReadOnly(%s) = %v, want ErrCorrupt", filepath.Base(path), err)
		}
		if after, _ := os.ReadFile(path); string(after) != string(before) {
			t.Errorf("reading %s changed it", filepath.Base(path))
		}
		if _, err := os.Stat(path + "-wal"); err == nil {
			t.Errorf("reading %s made a -wal file", filepath.Base(path))
		}
	}
	if _, err := OpenReadOnly(context.Background(), filepath.Join(dir, "missing.db")); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("OpenReadOnly of a missing file: %v", err)
	}
}

// A reader writes nothing, and a write through it is refused.
func TestReadOnly(t *testing.T) {
	s, path := openFile(t)
	ctx := context.Background()
	l := newRun(t, s, "r")
	if err := s.CommitStep(ctx, l, step("r", 1)); err != nil {
		t.Fatal(err)
	}
	ro, err := OpenReadOnly(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if steps, err := ro.Steps(ctx, "r"); err != nil || len(steps) != 1 {
		t.Fatalf("reader Steps = %d, %v", len(steps), err)
	}
	if err := ro.CommitStep(ctx, l, step("r", 2)); !errors.Is(err, store.ErrReadOnly) {
		t.Errorf("a write through a reader: %v", err)
	}
}

// Environment failures name the path and are ErrUnavailable, never a bug
// report.
func TestOpenEnvironmentFailures(t *testing.T) {
	dir := t.TempDir()
	for name, path := range map[string]string{
		"missing parent": filepath.Join(dir, "no", "such", "dir", "trace.db"),
		"a directory":    dir,
	} {
		_, err := Open(context.Background(), path)
		if !errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if os.Geteuid() != 0 {
		ro := filepath.Join(dir, "ro")
		os.Mkdir(ro, 0o555)
		if _, err := Open(context.Background(), filepath.Join(ro, "trace.db")); !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("a read-only directory: %v", err)
		}
	}
}

// A store on a full filesystem is ErrUnavailable naming the path. The
// filesystem is a 64 KiB tmpfs, which needs root to mount.
func TestOpenOnAFullDisk(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=64k"); err != nil {
		t.Skipf("cannot mount a small tmpfs here (%v); the full-disk case needs root", err)
	}
	defer syscall.Unmount(dir, syscall.MNT_DETACH)
	filler, _ := os.Create(filepath.Join(dir, "filler"))
	filler.Write(make([]byte, 128<<10)) // fills it; the error is expected
	filler.Close()
	path := filepath.Join(dir, "trace.db")
	_, err := Open(context.Background(), path)
	if !errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), path) {
		t.Errorf("a store on a full filesystem: %v", err)
	}
}

// Check reads the whole file and says what it holds; a file damaged in
// the middle fails it. The negative control is the same file undamaged.
func TestCheck(t *testing.T) {
	s, path := openFile(t)
	ctx := context.Background()
	for i := range 40 {
		l := newRun(t, s, fmt.Sprintf("r%d", i))
		if err := s.CommitStep(ctx, l, step(fmt.Sprintf("r%d", i), 1)); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := s.Check(ctx)
	if err != nil || !rep.OK() || rep.Runs["running"] != 40 || rep.Leased != 40 || rep.Schema != SchemaVersion || rep.Files[path] == 0 && rep.Files[path+"-wal"] == 0 {
		t.Fatalf("Check = %+v, %v", rep, err)
	}
	s.Close()
	// Damage a page in the middle of the database.
	w, _ := Open(ctx, path)
	w.db.ExecContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)")
	w.Close()
	data, _ := os.ReadFile(path)
	if len(data) < 4*4096 {
		t.Fatalf("the database is only %d bytes", len(data))
	}
	for i := 2 * 4096; i < 3*4096; i++ {
		data[i] ^= 0x5a
	}
	os.WriteFile(path, data, 0o644)
	ro, err := OpenReadOnly(ctx, path)
	if err != nil {
		if !errors.Is(err, store.ErrCorrupt) {
			t.Fatalf("open a damaged store: %v", err)
		}
		return
	}
	defer ro.Close()
	if rep, err := ro.Check(ctx); err == nil && rep.OK() {
		t.Errorf("a damaged store passed the check: %+v", rep)
	}
}

// A store on a read-only filesystem is ErrUnavailable naming the path
// (root ignores directory modes, so this needs a read-only mount).
func TestOpenOnAReadOnlyFilesystem(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_RDONLY, "size=64k"); err != nil {
		t.Skipf("cannot mount a read-only tmpfs here (%v); the case needs root", err)
	}
	defer syscall.Unmount(dir, syscall.MNT_DETACH)
	path := filepath.Join(dir, "trace.db")
	_, err := Open(context.Background(), path)
	if !errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), path) {
		t.Errorf("a store on a read-only filesystem: %v", err)
	}
}
