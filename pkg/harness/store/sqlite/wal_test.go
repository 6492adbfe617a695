package sqlite

import (
	"bufio"
	"context"
	"crypto/sha256"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/initorigin/io-harness-go/pkg/harness/store"
)

// deadWriterEnv, in the environment of this test binary, makes
// TestReadingADeadWritersLogWritesNothing the writer that dies: it
// commits a step to the store the variable names and waits to be killed.
const deadWriterEnv = "IOH_SQLITE_DEAD_WRITER"

// A writer killed with committed steps in the log leaves them only in
// the -wal: the database file lacks them until a checkpoint. A reader
// reads them, and writes nothing: the database file keeps its bytes and
// its mtime, and the -wal is still there as it was. A connection that
// may write would, on its close as the last connection, checkpoint the
// log into the database and delete it — what opening mode=ro rules out.
// The negative control is the same reads through openReadOnly with
// mode=ro switched off (writable): the database changes and the -wal is
// gone, and the test sees both.
func TestReadingADeadWritersLogWritesNothing(t *testing.T) {
	if path := os.Getenv(deadWriterEnv); path != "" {
		deadWriter(t, path)
		return
	}
	for _, tc := range []struct {
		name     string
		writable bool
	}{
		{"OpenReadOnly", false},
		{"control: without mode=ro", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			path := filepath.Join(t.TempDir(), "trace.db")
			s, err := Open(ctx, path)
			if err != nil {
				t.Fatal(err)
			}
			l := newRun(t, s, "r")
			if err := s.CommitStep(ctx, l, step("r", 1)); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil { // checkpoints step 1 into the file
				t.Fatal(err)
			}
			past := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
			if err := os.Chtimes(path, past, past); err != nil {
				t.Fatal(err)
			}
			killWriter(t, path)
			before, wal := stateOf(t, path), walState(t, path)
			if wal.Size == 0 {
				t.Fatal("the dead writer left no log: the test cannot see a checkpoint")
			}

			openReader := OpenReadOnly
			if tc.writable {
				openReader = openWritableReader
			}
			ro, err := openReader(ctx, path)
			if err != nil {
				t.Fatal(err)
			}
			steps, err := ro.Steps(ctx, "r")
			if err != nil || len(steps) != 2 {
				t.Fatalf("the reader read %d steps (%v); the dead writer committed 2", len(steps), err)
			}
			if r, err := ro.Run(ctx, "r"); err != nil || r.Steps != 2 {
				t.Fatalf("the reader's run: %+v, %v", r, err)
			}
			if err := ro.Close(); err != nil {
				t.Fatal(err)
			}

			after, walAfter := stateOf(t, path), walState(t, path)
			changed := after != before || walAfter != wal
			switch {
			case tc.writable && !changed:
				t.Fatalf("without mode=ro the reader left the file and its log as they were: the test cannot see a write")
			case tc.writable:
				t.Logf("without mode=ro: the database %d -> %d bytes (bytes the same: %v), mtime %s -> %s; the -wal %d -> %d bytes",
					before.Size, after.Size, after.Sum == before.Sum, before.MTime.Format(time.RFC3339), after.MTime.Format(time.RFC3339), wal.Size, walAfter.Size)
			case changed:
				t.Errorf("reading a dead writer's store wrote it: the database %d -> %d bytes (bytes the same: %v), mtime %s -> %s; the -wal %d -> %d bytes",
					before.Size, after.Size, after.Sum == before.Sum, before.MTime.Format(time.RFC3339), after.MTime.Format(time.RFC3339), wal.Size, walAfter.Size)
			}
		})
	}
}

// openWritableReader is OpenReadOnly with mode=ro switched off: the
// same readers, overlay and query_only, on a connection that may write.
func openWritableReader(ctx context.Context, path string) (*Store, error) {
	name, query, _ := strings.Cut(fileDSN(path, true), "?")
	q, err := url.ParseQuery(query)
	if err != nil {
		return nil, err
	}
	if q.Get("mode") != "ro" {
		return nil, fmt.Errorf("a reader's DSN has no mode=ro to switch off: %s", query)
	}
	q.Del("mode")
	return open(ctx, name+"?"+q.Encode(), path, true)
}

// walFile is what a reader must leave of the log: its bytes; a missing
// log has size 0.
type walFile struct {
	Sum  [32]byte
	Size int64
}

func walState(t *testing.T, path string) walFile {
	t.Helper()
	data, err := os.ReadFile(path + "-wal")
	if os.IsNotExist(err) {
		return walFile{}
	}
	if err != nil {
		t.Fatal(err)
	}
	return walFile{Sum: sha256.Sum256(data), Size: int64(len(data))}
}

// killWriter runs this test binary as the writer that dies on the store
// at path, and kills it with SIGKILL once it has committed.
func killWriter(t *testing.T, path string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestReadingADeadWritersLogWritesNothing$", "-test.count=1")
	cmd.Env = append(os.Environ(), deadWriterEnv+"="+path)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdin, err := cmd.StdinPipe() // never written: the writer blocks on it
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	committed := false
	for sc := bufio.NewScanner(out); sc.Scan(); {
		if sc.Text() == "committed" {
			committed = true
			break
		}
	}
	cmd.Process.Kill()
	cmd.Wait()
	if !committed {
		t.Fatal("the writer died before it committed")
	}
}

// deadWriter is the writer that dies: it commits step 2 with automatic
// checkpoints off, says so, and blocks until it is killed, never closing
// the store.
func deadWriter(t *testing.T, path string) {
	ctx := context.Background()
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.w.ExecContext(ctx, "PRAGMA wal_autocheckpoint=0"); err != nil {
		t.Fatal(err)
	}
	l, err := s.Acquire(ctx, "r", store.Self(), time.Minute, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CommitStep(ctx, l, step("r", 2)); err != nil {
		t.Fatal(err)
	}
	os.Stdout.WriteString("committed\n")
	os.Stdin.Read(make([]byte, 1))
	t.Fatal("the writer was not killed")
}
