package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/initorigin/io-harness-go/pkg/harness/store"
)

// contenderEnv, in the environment of this test binary, makes
// TestManyProcessesOnOneFile one of its contenders: it runs a run on the
// store the variable names, as "path,run id".
const contenderEnv = "IOH_SQLITE_CONTENDER"

// contenders and contenderSteps size TestManyProcessesOnOneFile: the
// hundred processes of issue 27's defect (the races are between
// processes opening one new file at once, and grow with their number),
// of a few writes each; under -race on 2 cores it takes about 18 s, 13 of
// them CPU, most of it the hundred race-instrumented processes starting.
const (
	contenders     = 100
	contenderSteps = 4
)

// A hundred processes, each its own Store on one file, each a run of a
// few steps committed through the calls the harness makes (create the
// run, record spend, open an intent, commit the step, finish, release),
// all let go at once: contention on the file must wait, never fail a
// write. Every process exits 0 and every write is in the file. Before
// the store retried what SQLite refuses as busy, about 1 in 7 runs here
// had a process fail Open with SQLITE_BUSY; the deterministic control of
// that is TestOpenWaitsForANewFilesWriteLock.
func TestManyProcessesOnOneFile(t *testing.T) {
	if v := os.Getenv(contenderEnv); v != "" {
		path, id, _ := strings.Cut(v, ",")
		if err := contend(context.Background(), path, id); err != nil {
			fmt.Fprintln(os.Stderr, "contender", id+":", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	path := filepath.Join(t.TempDir(), "trace.db")
	// The contenders block reading their stdin, a pipe, until every one
	// has started: closing it lets all of them go at once.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		err    error
		stderr bytes.Buffer
	}
	results := make([]result, contenders)
	cmds := make([]*exec.Cmd, contenders)
	for i := range cmds {
		cmd := exec.Command(os.Args[0], "-test.run=^TestManyProcessesOnOneFile$", "-test.count=1")
		cmd.Env = append(os.Environ(), contenderEnv+"="+path+","+runID(i))
		cmd.Stdin = r
		cmd.Stderr = &results[i].stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds[i] = cmd
	}
	r.Close()
	w.Close()
	var wg sync.WaitGroup
	for i, cmd := range cmds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i].err = cmd.Wait()
		}()
	}
	wg.Wait()
	failed := 0
	for i := range results {
		if results[i].err != nil {
			failed++
			if failed <= 5 {
				t.Errorf("contender %s: %v: %s", runID(i), results[i].err, strings.TrimSpace(results[i].stderr.String()))
			}
		}
	}
	if failed > 0 {
		t.Errorf("%d of %d processes failed", failed, contenders)
	}

	ctx := context.Background()
	s, err := OpenReadOnly(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	missing := 0
	for i := range contenders {
		id := runID(i)
		run, err := s.Run(ctx, id)
		if err != nil {
			missing++
			continue
		}
		steps, err := s.Steps(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		events, err := s.Events(ctx, id, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		want := 1 + contenderSteps + 1 // started, a checkpoint a step, finished
		if run.Status != store.StatusFinished || len(steps) != contenderSteps || len(events) != want ||
			run.Usage.InputTokens != 100*contenderSteps {
			missing++
			if missing <= 5 {
				t.Errorf("run %s: status %s, %d steps, %d events, %d input tokens; want %s, %d, %d, %d",
					id, run.Status, len(steps), len(events), run.Usage.InputTokens, store.StatusFinished, contenderSteps, want, 100*contenderSteps)
			}
		}
	}
	if missing > 0 {
		t.Errorf("%d of %d runs lack writes", missing, contenders)
	}
}

func runID(i int) string { return "run-" + strconv.Itoa(i) }

// contend is one contender: it waits to be let go, then drives run id on
// the store at path to its end.
func contend(ctx context.Context, path, id string) error {
	io.Copy(io.Discard, os.Stdin)
	s, err := Open(ctx, path)
	if err != nil {
		return err
	}
	defer s.Close()
	l, err := s.CreateRun(ctx, &store.Run{ID: id, Task: json.RawMessage(`{"goal":"g"}`), Provider: "scripted", StartedAt: t0},
		[]store.Event{{Seq: 1, Kind: "run_started", At: t0, Data: json.RawMessage(`{"kind":"run_started"}`)}}, store.Self(), time.Minute)
	if err != nil {
		return err
	}
	for n := 1; n <= contenderSteps; n++ {
		if _, err := s.Run(ctx, id); err != nil {
			return err
		}
		if err := s.RecordSpend(ctx, l, &store.Spend{RunID: id, Step: n, Attempt: 1, Provider: "scripted", At: t0}); err != nil {
			return err
		}
		if _, err := s.OpenIntent(ctx, l, &store.Intent{RunID: id, Step: n, CallID: "c", Tool: "write_file", Arguments: json.RawMessage(`{}`), CreatedAt: t0}); err != nil {
			return err
		}
		if err := s.CommitStep(ctx, l, step(id, n)); err != nil {
			return err
		}
		if err := s.Renew(ctx, l); err != nil {
			return err
		}
	}
	f := &store.Finish{RunID: id, Status: store.StatusFinished, Outcome: "success", At: t0,
		Events: []store.Event{{Seq: 1000, Kind: "outcome", At: t0, Data: json.RawMessage(`{"kind":"outcome"}`)}}}
	if err := s.FinishRun(ctx, l, f); err != nil {
		return err
	}
	return s.Release(ctx, l)
}

// Open on a new file while another process holds its write lock: the
// switch to WAL upgrades a read transaction to write, which SQLite
// refuses at once, without its busy timeout. Open waits and tries again
// until the lock is let go. The negative control is the same Open with
// the retry switched off (a wait that stops at once): it fails with
// SQLITE_BUSY, as every Open did before the retry.
func TestOpenWaitsForANewFilesWriteLock(t *testing.T) {
	for _, tc := range []struct {
		name  string
		retry bool
	}{
		{"retry", true},
		{"control: no retry", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			path := filepath.Join(t.TempDir(), "trace.db")
			other, err := sql.Open("sqlite", "file:"+escapePath(path))
			if err != nil {
				t.Fatal(err)
			}
			defer other.Close()
			holder, err := other.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer holder.Close()
			if _, err := holder.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
				t.Fatal(err)
			}
			busy := make(chan struct{}) // closed at the first busy try
			release := make(chan error, 1)
			var once sync.Once
			wait := func(ctx context.Context, tries int) error {
				once.Do(func() { close(busy) })
				if !tc.retry {
					return errors.New("retry switched off")
				}
				return backoff(ctx, tries)
			}
			opened := make(chan struct{})
			go func() {
				select {
				case <-busy:
				case <-opened: // Open never met the lock
				}
				_, err := holder.ExecContext(ctx, "COMMIT")
				release <- err
			}()
			s, err := openWait(ctx, fileDSN(path, false), path, false, wait)
			close(opened)
			select {
			case <-busy:
			default:
				t.Fatal("Open never found the file busy: the test shows nothing")
			}
			if tc.retry {
				if err != nil {
					t.Fatalf("Open while another holds the write lock: %v", err)
				}
				defer s.Close()
				if err := <-release; err != nil {
					t.Fatal(err)
				}
				l := newRun(t, s, "r")
				if err := s.CommitStep(ctx, l, step("r", 1)); err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				s.Close()
				t.Fatal("with the retry off, Open under another's write lock succeeded: the test shows nothing")
			}
			if !isBusy(err) || !errors.Is(err, store.ErrUnavailable) {
				t.Fatalf("with the retry off: %v; want SQLITE_BUSY, as store.ErrUnavailable", err)
			}
			t.Logf("with the retry off: %v", err)
			<-release
		})
	}
}
