package sqlite

import (
	"bytes"
	"context"
	"crypto/sha256"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/initorigin/io-harness-go/pkg/harness/store"
)

// testdata/v3.db is a store the previous release wrote: schema version
// 3, made by its io-harness CLI (commit cac7795) from the two specs in
// testdata/v3 — one run that succeeded in two steps, one paused on an
// approval. See testdata/v3/README.md.
const v3File = "testdata/v3.db"

// olderCopy copies the version-3 store into a directory of its own, with
// an mtime in the past, so that any write moves it.
func olderCopy(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(v3File)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "v3.db")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	past := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	if err := os.Chtimes(path, past, past); err != nil {
		t.Fatal(err)
	}
	return path
}

// fileState is what a reader must leave alone: the store file's bytes,
// size and mtime.
type fileState struct {
	Sum   [32]byte
	Size  int64
	MTime time.Time
}

func stateOf(t *testing.T, path string) fileState {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fileState{Sum: sha256.Sum256(data), Size: fi.Size(), MTime: fi.ModTime()}
}

// everything is what every read of a store returns, run by run.
type everything struct {
	Runs      []store.Run
	Roots     []store.Run
	Steps     map[string][]store.Step
	Events    map[string][]store.Event
	LastSeq   map[string]int64
	Attempts  map[string][]store.Attempt
	Approvals map[string][]store.Approval
	Approval  map[string]*store.Approval
	Leases    map[string]*store.Lease
	Trees     map[string][]store.Run
	ByID      map[string]*store.Run
	Report    *Report
}

// readAll makes every read the store offers — those of io-harness runs
// and trace among them — and returns what they read.
func readAll(t *testing.T, s *Store) *everything {
	t.Helper()
	ctx := context.Background()
	e := &everything{Steps: map[string][]store.Step{}, Events: map[string][]store.Event{}, LastSeq: map[string]int64{},
		Attempts: map[string][]store.Attempt{}, Approvals: map[string][]store.Approval{}, Approval: map[string]*store.Approval{},
		Leases: map[string]*store.Lease{}, Trees: map[string][]store.Run{}, ByID: map[string]*store.Run{}}
	var err error
	if e.Runs, err = s.Runs(ctx, store.RunFilter{Limit: -1}); err != nil {
		t.Fatal(err)
	}
	if e.Roots, err = s.Runs(ctx, store.RunFilter{Roots: true, Limit: 20}); err != nil {
		t.Fatal(err)
	}
	if len(e.Runs) != 2 || len(e.Roots) != 2 {
		t.Fatalf("read %d runs, %d roots; the file holds 2", len(e.Runs), len(e.Roots))
	}
	for _, r := range e.Runs {
		id := r.ID
		must := func(err error) {
			t.Helper()
			if err != nil {
				t.Fatalf("run %s: %v", id, err)
			}
		}
		var err error
		e.ByID[id], err = s.Run(ctx, id)
		must(err)
		e.Steps[id], err = s.Steps(ctx, id)
		must(err)
		e.Events[id], err = s.Events(ctx, id, 0, 0)
		must(err)
		e.LastSeq[id], err = s.LastSeq(ctx, id)
		must(err)
		e.Attempts[id], err = s.Attempts(ctx, id)
		must(err)
		e.Approvals[id], err = s.Approvals(ctx, id)
		must(err)
		for _, a := range e.Approvals[id] {
			e.Approval[a.ID], err = s.Approval(ctx, id, a.ID)
			must(err)
		}
		e.Leases[id], err = s.Lease(ctx, id)
		must(err)
		e.Trees[id], err = s.Runs(ctx, store.RunFilter{RootID: id, Limit: -1})
		must(err)
	}
	if e.Report, err = s.Check(ctx); err != nil || !e.Report.OK() {
		t.Fatalf("check: %+v %v", e.Report, err)
	}
	return e
}

// A reader of a file the previous release wrote reads all of it and
// changes none of it: the bytes and the mtime are as they were, so the
// previous release still opens it. The negative control is the same
// reads on the same file through a reader that migrates first, as
// OpenReadOnly once did: the file changes (it grows from 69,632 bytes to
// 90,112), and the test sees it.
func TestReadingAnOlderFileWritesNothing(t *testing.T) {
	migrating := func(ctx context.Context, path string) (*Store, error) { return openReadOnly(ctx, path, true) }
	for _, tc := range []struct {
		name    string
		open    func(context.Context, string) (*Store, error)
		migrate bool
	}{
		{"OpenReadOnly", OpenReadOnly, false},
		{"control: migrate first", migrating, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := olderCopy(t)
			before := stateOf(t, path)
			s, err := tc.open(context.Background(), path)
			if err != nil {
				t.Fatal(err)
			}
			e := readAll(t, s)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if e.Report.Schema != 3 && !tc.migrate {
				t.Errorf("the reader reports schema %d; the file is version 3", e.Report.Schema)
			}
			after := stateOf(t, path)
			changed := after != before
			switch {
			case tc.migrate && !changed:
				t.Fatalf("the control migrated the file, and the test did not see it change: %+v", after)
			case tc.migrate:
				t.Logf("the control changed the file: %d -> %d bytes, mtime %s -> %s", before.Size, after.Size,
					before.MTime.Format(time.RFC3339), after.MTime.Format(time.RFC3339))
			case changed:
				t.Errorf("reading the older file changed it: %d -> %d bytes, mtime %s -> %s", before.Size, after.Size,
					before.MTime.Format(time.RFC3339), after.MTime.Format(time.RFC3339))
			}
			if !tc.migrate {
				if v := userVersion(t, path); v != 3 {
					t.Errorf("user_version after reading = %d, want 3", v)
				}
			}
		})
	}
}

// userVersion reads a file's schema version with a reader.
func userVersion(t *testing.T, path string) int {
	t.Helper()
	s, err := OpenReadOnly(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var v int
	if err := s.db.QueryRow("PRAGMA main.user_version").Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// What a reader reads from an older file through the overlay is what the
// same file holds once migrated: every run, step, event, attempt and
// approval, with the columns the file lacks at the defaults the migration
// gives them. The control of the comparison is the migrated copy itself,
// which differs from the overlay only where the test says it may (the
// schema version the check reports).
func TestAnOlderFileReadsAsMigrated(t *testing.T) {
	ctx := context.Background()
	path := olderCopy(t)
	ro, err := OpenReadOnly(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	read := readAll(t, ro)
	ro.Close()

	w, err := Open(ctx, path) // migrates the file to SchemaVersion
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	if v := userVersion(t, path); v != SchemaVersion {
		t.Fatalf("the migrated copy is version %d", v)
	}
	ro, err = OpenReadOnly(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	migrated := readAll(t, ro)
	ro.Close()
	if read.Report.Schema != 3 || migrated.Report.Schema != SchemaVersion {
		t.Errorf("schemas reported: %d read as it is, %d migrated", read.Report.Schema, migrated.Report.Schema)
	}
	read.Report, migrated.Report = nil, nil
	if diff := cmp.Diff(migrated, read); diff != "" {
		t.Errorf("the older file read as it is (+) differs from it migrated (-):\n%s", diff)
	}
	// The paused run's approval and the finished run's steps are there.
	var paused, done int
	for _, r := range read.Runs {
		switch {
		case r.Status == store.StatusPaused && len(read.Approvals[r.ID]) == 1 && read.Approvals[r.ID][0].State == store.ApprovalPending:
			paused++
		case r.Status == store.StatusFinished && len(read.Steps[r.ID]) == 2 && r.RootID == r.ID:
			done++
		}
	}
	if paused != 1 || done != 1 {
		t.Errorf("read %d paused runs with their request, %d finished with their steps: %+v", paused, done, read.Runs)
	}
}

// The overlay rests on this: every migration only adds — a table, an
// index, or a column with a default (or none, when it may be NULL) — and
// never changes or drops what an older file holds.
func TestMigrationsOnlyAdd(t *testing.T) {
	allowed := []*regexp.Regexp{
		regexp.MustCompile(`^CREATE TABLE \w+ \(`),
		regexp.MustCompile(`^CREATE INDEX \w+ ON \w+\(`),
		regexp.MustCompile(`^ALTER TABLE \w+ ADD COLUMN \w+ \w+ NOT NULL DEFAULT ('[^']*'|-?[0-9.]+)$`),
		regexp.MustCompile(`^ALTER TABLE \w+ ADD COLUMN \w+ \w+$`),
	}
	for v, m := range migrations() {
		for _, stmt := range strings.Split(m, ";") {
			stmt = strings.TrimSpace(stmt)
			if stmt == "" {
				continue
			}
			ok := false
			for _, re := range allowed {
				ok = ok || re.MatchString(stmt)
			}
			if !ok {
				t.Errorf("migration %d: %q does not only add", v+1, firstLine(stmt))
			}
		}
	}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// The checked-in file is what its README says: a version-3 store in WAL
// mode with the two runs.
func TestTheOlderFileIsVersion3(t *testing.T) {
	data, err := os.ReadFile(v3File)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(data, []byte("SQLite format 3\x00")) || len(data) != 69632 {
		t.Fatalf("%s: %d bytes, not the 69,632-byte SQLite file the previous release wrote", v3File, len(data))
	}
	// The header: the file-format bytes say WAL (2), user_version is at
	// offset 60.
	if data[18] != 2 || data[19] != 2 {
		t.Errorf("file format bytes %d %d, want 2 2 (WAL)", data[18], data[19])
	}
	if v := int(data[60])<<24 | int(data[61])<<16 | int(data[62])<<8 | int(data[63]); v != 3 {
		t.Errorf("user_version %d, want 3", v)
	}
}
