package sandbox

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// newMarker makes a marker unique to this test and process, to find its
// processes by.
func newMarker(t *testing.T) string {
	return fmt.Sprintf("ioh-%d-%d-%s", os.Getpid(), time.Now().UnixNano(), strings.NewReplacer("/", "-", " ", "-").Replace(t.Name()))
}

// negatives counts, across a group of parallel subtests, the backends on
// which an escape really happened.
type negatives struct {
	mu sync.Mutex
	n  int
}

func (ng *negatives) add() {
	ng.mu.Lock()
	ng.n++
	ng.mu.Unlock()
}

// TestDaemonGrandchild: a double-forked, setsid'd grandchild holds stdout
// and sleeps for an hour. Run must not wait for it: Run returns while the
// grandchild lives (where the backend cannot kill it) or once the backend
// has killed it (where it claims Teardown, and then nothing is left). A Run
// still held at hangGuard is released by killing the grandchild, and
// fails: it returned only because the grandchild died.
func TestDaemonGrandchild(t *testing.T) {
	var ng negatives
	t.Run("backends", func(t *testing.T) {
		forEach(t, true, func(t *testing.T, n named) {
			marker := newMarker(t)
			defer killMarked(marker)
			spec := payloadSpec(t, Spec{Limits: Limits{Wall: Duration(hangGuard)}}, "daemon", marker)
			type ran struct {
				res *Result
				err error
			}
			done := make(chan ran, 1)
			go func() {
				res, err := n.sb.Run(context.Background(), &spec)
				done <- ran{res, err}
			}()
			var r ran
			select {
			case r = <-done:
			case <-time.After(hangGuard):
				killMarked(marker)
				<-done
				t.Fatalf("Run returned only once the test killed the grandchild: it waited for the output the grandchild held")
			}
			if r.err != nil {
				t.Fatal(r.err)
			}
			res := r.res
			if !res.Enforced.Teardown {
				// The grandchild sleeps an hour: seen now, it outlived the
				// Run that did not wait for it.
				if left := markedProcs(marker); len(left) > 0 {
					ng.add()
				}
				return
			}
			if left := gone(marker); len(left) > 0 {
				t.Errorf("ESCAPED: the grandchild outlived the run: %s (exit %d, %s)", describe(left), res.ExitCode, res.Stdout)
			} else if res.ExitCode != 0 {
				t.Logf("the payload could not make its daemon here: exit %d %s", res.ExitCode, res.Stdout)
			}
		})
	})
	if ng.n == 0 {
		t.Errorf("on no backend did the grandchild outlive Run, so the test shows nothing")
	}
}

// TestHostKilled: SIGKILL of the host process while a sandboxed command
// (which has a child) runs. On a backend that claims HostDeath nothing
// survives, and no workdir is left on the host.
func TestHostKilled(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var ng negatives
	t.Run("backends", func(t *testing.T) {
		forEach(t, true, func(t *testing.T, n named) {
			marker := newMarker(t)
			cmd := exec.Command(exe)
			cmd.Env = []string{"IOH_HOSTRUN=" + n.opts.Backend, "IOH_HELPER=" + n.opts.HelperPath, "IOH_MARKER=" + marker}
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			lines := bufio.NewScanner(out)
			var workdir string
			hostDeath := false
			for lines.Scan() && (workdir == "" || !strings.HasPrefix(lines.Text(), "host_death")) {
				line := lines.Text()
				if v, ok := strings.CutPrefix(line, "workdir="); ok {
					workdir = v
				}
				if v, ok := strings.CutPrefix(line, "host_death="); ok {
					hostDeath = v == "true"
				}
				if workdir != "" && strings.HasPrefix(line, "workdir=") {
					break
				}
			}
			// Wait for the command and its child to run (not just a
			// wrapper around them): kill the host any earlier and the test
			// is about the wrapper's start-up instead.
			deadline := time.Now().Add(hangGuard)
			seen := 0 // consecutive polls that saw both, to step over a fork in flight
			for seen < 3 && time.Now().Before(deadline) {
				if sleepers(exe, marker) >= 2 {
					seen++
				} else {
					seen = 0
				}
				time.Sleep(10 * time.Millisecond)
			}
			if seen < 3 {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("the sandboxed command did not start (workdir %q)", workdir)
			}
			// The run's private TMPDIR, which a backend that does not claim
			// HostDeath leaves behind with the workdir.
			tmpdir := envOf(marker, "TMPDIR")
			cmd.Process.Signal(syscall.SIGKILL)
			cmd.Wait()
			// A backend that claims HostDeath has doomed every process: wait
			// for them to go. On one that does not, the sleepers (an hour
			// each) seen now have outlived the host.
			left := markedProcs(marker)
			if hostDeath {
				left = gone(marker)
			}
			_, statErr := os.Stat(workdir)
			onHost := workdir != privateWorkdirPath && statErr == nil
			switch {
			case hostDeath && len(left) > 0:
				t.Errorf("ESCAPED: processes outlived the host: %s", describe(left))
			case hostDeath && onHost:
				t.Errorf("the workdir %s was left on the host", workdir)
			case !hostDeath && len(left) > 0:
				ng.add()
			}
			killMarked(marker)
			if onHost && strings.Contains(workdir, "io-harness-run-") {
				os.RemoveAll(workdir)
			}
			if strings.Contains(tmpdir, "io-harness-tmp-") {
				os.RemoveAll(tmpdir)
			}
		})
	})
	if ng.n == 0 {
		t.Errorf("on no backend did a process survive the host, so the test shows nothing")
	}
}

// TestCancel: cancelling the context kills the run, removes its workdir,
// and returns the context's error. The context is cancelled once the
// payload and its child both run; they would sleep an hour, and so would
// the wall limit: a Run still going at hangGuard is released by killing
// them, and fails, since it returned only because they died.
func TestCancel(t *testing.T) {
	forEach(t, true, func(t *testing.T, n named) {
		marker := newMarker(t)
		defer killMarked(marker)
		var workdir string
		sb := n.with(t, func(e Event) {
			if e.Kind == EventCreate {
				workdir = e.Workdir
			}
		})
		exe, _ := os.Executable()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan error, 1)
		go func() {
			_, err := sb.Run(ctx, &Spec{
				Argv: []string{exe, marker}, Env: []string{"IOH_PAYLOAD=sleeper", "GORACE=atexit_sleep_ms=0"}, ReadOnly: []string{exeDir(t)},
				Limits: Limits{Wall: Duration(time.Hour)},
			})
			done <- err
		}()
		guard := time.After(hangGuard)
		var err error
	wait:
		for {
			select {
			case err = <-done:
				break wait
			case <-guard:
				killMarked(marker)
				<-done
				t.Fatalf("Run returned only once the test killed the payload: the cancellation did not end it")
			case <-time.After(10 * time.Millisecond):
				if sleepers(exe, marker) >= 2 {
					cancel()
				}
			}
		}
		if !errors.Is(err, context.Canceled) {
			t.Errorf("err %v, want the context's", err)
		}
		if left := gone(marker); len(left) > 0 {
			t.Errorf("processes outlived the cancelled run: %s", describe(left))
		}
		if workdir != privateWorkdirPath {
			if _, err := os.Stat(workdir); err == nil {
				t.Errorf("the workdir %s is still there", workdir)
			}
		}
	})
}

// describe says what the given pids are, for a failure message.
func describe(pids []string) string {
	var b strings.Builder
	for _, p := range pids {
		cmd, _ := os.ReadFile("/proc/" + p + "/cmdline")
		st, _ := os.ReadFile("/proc/" + p + "/stat")
		fmt.Fprintf(&b, "\n  %s: %q %s", p, strings.ReplaceAll(string(cmd), "\x00", " "), st)
	}
	return b.String()
}

// sleepers counts the running copies of this test binary whose command
// line carries marker.
func sleepers(exe, marker string) int {
	n := 0
	for _, p := range markedProcs(marker) {
		cmd, _ := os.ReadFile("/proc/" + p + "/cmdline")
		if target, err := os.Readlink("/proc/" + p + "/exe"); err == nil && target == exe && strings.Contains(string(cmd), marker) {
			n++
		}
	}
	return n
}

// envOf returns the value of key in the environment of a process that
// carries marker on its command line.
func envOf(marker, key string) string {
	for _, p := range markedProcs(marker) {
		cmd, _ := os.ReadFile("/proc/" + p + "/cmdline")
		if !strings.Contains(string(cmd), marker) {
			continue
		}
		env, _ := os.ReadFile("/proc/" + p + "/environ")
		for _, kv := range strings.Split(string(env), "\x00") {
			if v, ok := strings.CutPrefix(kv, key+"="); ok {
				return v
			}
		}
	}
	return ""
}
