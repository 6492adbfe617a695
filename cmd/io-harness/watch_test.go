package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/initorigin/io-harness-go/pkg/harness"
	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/scripted"
	"github.com/initorigin/io-harness-go/pkg/harness/store/sqlite"
	"github.com/initorigin/io-harness-go/pkg/harness/verify"
	"github.com/initorigin/io-harness-go/pkg/harness/watch"
)

// proc is a started process whose stdout is read line by line.
type proc struct {
	cmd   *exec.Cmd
	lines chan string
	mu    sync.Mutex
	all   []string
	err   strings.Builder
	done  chan struct{}
}

func start(t *testing.T, dir string, env []string, name string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, lines: make(chan string, 4096), done: make(chan struct{})}
	cmd.Stderr = &p.err
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(p.lines)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			p.mu.Lock()
			p.all = append(p.all, sc.Text())
			p.mu.Unlock()
			p.lines <- sc.Text()
		}
		io.Copy(io.Discard, out)
	}()
	go func() {
		for range p.lines {
		}
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return p
}

// waitLine waits until a line of stdout matches re and returns its
// submatches. The deadline only catches a hang.
func (p *proc) waitLine(t *testing.T, re *regexp.Regexp) []string {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	seen := 0
	for time.Now().Before(deadline) {
		p.mu.Lock()
		lines := p.all[seen:]
		seen = len(p.all)
		p.mu.Unlock()
		for _, l := range lines {
			if m := re.FindStringSubmatch(l); m != nil {
				return m
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no line matches %s:\n%s\nstderr:\n%s", re, p.output(), p.err.String())
	return nil
}

func (p *proc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.all, "\n")
}

// wait waits for the process and returns its exit code.
func (p *proc) wait(t *testing.T) int {
	t.Helper()
	errc := make(chan error, 1)
	go func() { errc <- p.cmd.Wait() }()
	select {
	case err := <-errc:
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	case <-time.After(2 * time.Minute):
		p.cmd.Process.Kill()
		t.Fatalf("%s did not end:\n%s\nstderr:\n%s", p.cmd.Args, p.output(), p.err.String())
		return -1
	}
}

var runLine = regexp.MustCompile(`^run (run_[0-9a-f]+)  provider`)

// One process drives a run whose write waits for a person; a second
// process (the CLI) watches it, sees the request with its diff and
// approves it; the first carries the decision out and the run finishes.
// A third watcher is killed with SIGKILL while it follows: the run does
// not notice.
func TestWatchApprovesAWaitingRun(t *testing.T) {
	dir := t.TempDir()
	spec := writeFixture(t, dir, "defer_resume")
	driver := start(t, dir, nil, bin, "run", "--approvals", "wait", spec)
	runID := driver.waitLine(t, runLine)[1]
	driver.waitLine(t, regexp.MustCompile(`^waiting for a decision on request apr_`))

	doomed := start(t, dir, nil, bin, "watch", "--json", runID)
	doomed.waitLine(t, regexp.MustCompile(`"kind":"approval_pending"`))
	doomed.cmd.Process.Signal(syscall.SIGKILL)
	doomed.cmd.Wait()

	w := start(t, dir, nil, bin, "watch", "--allow", runID)
	w.waitLine(t, regexp.MustCompile(`^\+mode = "on"`)) // the diff the person approves
	if code := w.wait(t); code != exitOK {
		t.Fatalf("watch exited %d:\n%s\nstderr:\n%s", code, w.output(), w.err.String())
	}
	if code := driver.wait(t); code != exitOK {
		t.Fatalf("the driver exited %d:\n%s\nstderr:\n%s", code, driver.output(), driver.err.String())
	}
	for _, out := range []string{w.output(), driver.output()} {
		if !strings.Contains(out, "outcome: success") {
			t.Errorf("no success in:\n%s", out)
		}
	}
	if !strings.Contains(w.output(), "decided apr_") {
		t.Errorf("the watcher does not say it decided:\n%s", w.output())
	}
	// A watcher with nothing to answer with and no terminal says how, exit 5.
	spec2 := writeFixture(t, dir, "defer_resume")
	d2 := start(t, dir, nil, bin, "run", "--approvals", "wait", spec2)
	run2 := d2.waitLine(t, runLine)[1]
	r := cli(t, dir, "", "watch", run2)
	if r.code != exitAwaiting || !strings.Contains(r.stderr, "io-harness watch --store io-harness.db --allow "+run2) {
		t.Errorf("%s", r)
	}
	cli(t, dir, "", "watch", "--deny", "not today", run2)
	// Denied, the model goes on; its script ends there (escalated).
	if code := d2.wait(t); code != exitEscalated {
		t.Errorf("the second driver exited %d:\n%s", code, d2.output())
	}
	if tr := cli(t, dir, "", "trace", run2); !strings.Contains(tr.stdout, "denied. not today") {
		t.Errorf("the trace does not carry the denial:\n%s", tr)
	}
}

const (
	liveStoreEnv  = "IOH_TEST_LIVE_STORE"
	liveRootEnv   = "IOH_TEST_LIVE_ROOT"
	liveMarkerEnv = "IOH_TEST_LIVE_MARKER"
	liveHubEnv    = "IOH_TEST_LIVE_HUB"
)

// TestLiveDriverHelper is the driver process of TestWatchIsLive: a run
// whose first turn streams text until the marker file exists, served
// live when IOH_TEST_LIVE_HUB is set.
func TestLiveDriverHelper(t *testing.T) {
	storePath := os.Getenv(liveStoreEnv)
	if storePath == "" {
		return // a helper process: it runs only when its test starts it
	}
	ctx := context.Background()
	st, err := sqlite.Open(ctx, storePath)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	sp, err := scripted.New(scripted.Script{Turns: []scripted.Turn{{Text: "done",
		ToolCalls: []scripted.Call{{Name: "write_file", Arguments: []byte(`{"path":"out.txt","content":"ok"}`)}}}}})
	if err != nil {
		t.Fatal(err)
	}
	opts := harness.Options{Provider: &untilMarker{Provider: sp, marker: os.Getenv(liveMarkerEnv)}, Store: st,
		Observer: func(e harness.Event) {
			if e.Kind == harness.EventRunStarted {
				fmt.Printf("run %s  provider scripted\n", e.RunID)
			}
		}}
	if os.Getenv(liveHubEnv) != "" {
		hub, err := watch.Listen(nil)
		if err != nil {
			t.Fatal(err)
		}
		defer hub.Close()
		opts.Live = hub
	}
	task := harness.TaskContract{Goal: "write out.txt", Root: os.Getenv(liveRootEnv),
		Verification: []verify.Check{{Kind: verify.WorkspaceFileContains, File: "out.txt", Text: "ok"}}}
	res, err := harness.Run(ctx, task, opts)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("RESULT %s\n", res.Outcome.Kind)
}

// untilMarker streams text until its marker file exists, then answers.
type untilMarker struct {
	provider.Provider
	marker string
}

func (u *untilMarker) Complete(ctx context.Context, req *provider.Request, onText func(string)) (*provider.Response, error) {
	for {
		if _, err := os.Stat(u.marker); err == nil {
			break
		}
		if onText != nil {
			onText("still thinking ")
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return u.Provider.Complete(ctx, req, onText)
}

// A watcher in another process sees the model's text while the turn
// streams, before anything of the step is stored: the driver holds the
// turn open until the test has seen a model delta in the watcher's
// output. The control is the same run driven without a hub: the watcher
// sees every stored event and never a delta, which only the live stream
// carries.
func TestWatchIsLive(t *testing.T) {
	for _, live := range []bool{true, false} {
		t.Run(fmt.Sprintf("hub=%v", live), func(t *testing.T) {
			dir := t.TempDir()
			storePath := filepath.Join(dir, "io-harness.db")
			marker := filepath.Join(dir, "go")
			env := []string{liveStoreEnv + "=" + storePath, liveRootEnv + "=" + t.TempDir(), liveMarkerEnv + "=" + marker}
			if live {
				env = append(env, liveHubEnv+"=1")
			}
			self, err := os.Executable()
			if err != nil {
				t.Fatal(err)
			}
			driver := start(t, dir, env, self, "-test.run=^TestLiveDriverHelper$", "-test.v")
			runID := driver.waitLine(t, runLine)[1]
			w := start(t, dir, nil, bin, "watch", "--json", runID)
			if live {
				w.waitLine(t, regexp.MustCompile(`"kind":"model_delta".*still thinking`))
			} else {
				w.waitLine(t, regexp.MustCompile(`"kind":"run_started"`))
			}
			if err := os.WriteFile(marker, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			if code := w.wait(t); code != exitOK {
				t.Fatalf("watch exited %d:\n%s\nstderr:\n%s", code, w.output(), w.err.String())
			}
			if code := driver.wait(t); code != 0 {
				t.Fatalf("the driver exited %d:\n%s", code, driver.output())
			}
			out := w.output()
			if !strings.Contains(out, `"kind":"outcome"`) || !strings.Contains(out, `"kind":"done"`) {
				t.Errorf("the watcher missed the end:\n%s", out)
			}
			if !live && strings.Contains(out, `"kind":"model_delta"`) {
				t.Errorf("a watcher of a run without a hub saw a delta:\n%s", out)
			}
		})
	}
}
