package sandbox

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// markedProcs lists the host pids whose command line or environment
// contains marker.
func markedProcs(marker string) []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		for _, f := range []string{"cmdline", "environ"} {
			b, err := os.ReadFile("/proc/" + e.Name() + "/" + f)
			if err == nil && bytes.Contains(b, []byte(marker)) {
				if st, ok := readStat("/proc/"+e.Name()+"/stat", make([]byte, 1024)); ok && st.state != 'Z' {
					out = append(out, e.Name())
				}
				break
			}
		}
	}
	return out
}

// hangGuard bounds a wait only so that a hung test fails instead of
// hanging: it is far beyond what any wait here takes, however loaded the
// machine, and no test judges a duration by it.
const hangGuard = 2 * time.Minute

// gone waits until no process carries marker, waking on the exit of each
// (a pidfd), and reports the survivors if some outlive hangGuard. Call it
// only where every marked process has been killed or must die: a process
// left alive on purpose keeps it waiting for the whole guard.
func gone(marker string) []string {
	deadline := time.Now().Add(hangGuard)
	for {
		left := markedProcs(marker)
		wait := time.Until(deadline)
		if len(left) == 0 || wait <= 0 {
			return left
		}
		pid, _ := strconv.Atoi(left[0])
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			continue // gone between the scan and the open
		}
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		unix.Poll(fds, int(wait.Milliseconds())+1) // readable once it has exited
		unix.Close(fd)
	}
}

// killMarked cleans up what a negative control left running.
func killMarked(marker string) {
	for _, p := range markedProcs(marker) {
		if pid, err := strconv.Atoi(p); err == nil {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// forEach runs f for every Linux backend in parallel.
func forEach(t *testing.T, withHost bool, f func(t *testing.T, n named)) {
	for _, n := range linuxSandboxes(t, withHost) {
		t.Run(n.label, func(t *testing.T) {
			t.Parallel()
			f(t, n)
		})
	}
}

// TestCaps checks that each cap ends its run and is named for it. None is
// judged by how long the run took: a cap must end the run before the wall
// clock (or the limit the case is about) does, and the CPU cap is judged
// by the CPU time the kernel accounted, which a loaded machine does not
// stretch as it stretches the wall clock.
func TestCaps(t *testing.T) {
	type capCase struct {
		name  string
		spec  Spec
		op    string
		args  []string
		want  Cap
		check func(t *testing.T, res *Result)
	}
	cases := []capCase{
		{
			// The wall limit is far past what the spinner takes to use a
			// second of CPU on a loaded machine: the CPU cap must come first.
			name: "CPU spin", op: "spin", want: CapCPU,
			spec: Spec{Limits: Limits{CPU: Duration(time.Second), Wall: Duration(hangGuard)}},
			check: func(t *testing.T, res *Result) {
				// The watcher kills at the limit; the kernel's RLIMIT_CPU
				// hard limit (one second past it) is the backstop.
				if d := time.Duration(res.CPU); d < 900*time.Millisecond || d > 2500*time.Millisecond {
					t.Errorf("CPU time %v, want about the 1s limit (at most the 2s hard limit)", d)
				}
			},
		},
		{
			name: "sleep forever", op: "sleep", want: CapWall,
			spec: Spec{Limits: Limits{Wall: Duration(300 * time.Millisecond)}},
			check: func(t *testing.T, res *Result) {
				// The payload sleeps an hour: only the wall cap ends it, and
				// not before its time.
				if d := time.Duration(res.Duration); d < 300*time.Millisecond {
					t.Errorf("ended after %v, before the 300ms wall limit", d)
				}
			},
		},
		{
			name: "memory hog", op: "alloc", args: []string{"1024"}, want: CapMemory,
			spec: Spec{Limits: Limits{Memory: 256 << 20, Wall: Duration(hangGuard)}},
		},
		{
			// Negative control of the memory cap: the same program under a
			// limit it stays below allocates and exits on its own.
			name: "memory under the limit", op: "alloc", args: []string{"64", "exit"},
			spec: Spec{Limits: Limits{Memory: 1 << 30, Wall: Duration(hangGuard)}},
			check: func(t *testing.T, res *Result) {
				if res.CapHit != CapNone || res.ExitCode != 0 || !bytes.Contains(res.Stdout, []byte("allocated 64")) {
					t.Errorf("cap %q, exit %d, stdout %q: want the allocation to finish and exit 0", res.CapHit, res.ExitCode, res.Stdout)
				}
			},
		},
		{
			name: "fork bomb", op: "forkbomb",
			spec: Spec{Limits: Limits{Processes: 64, Memory: 2 << 30, Wall: Duration(hangGuard)}},
			check: func(t *testing.T, res *Result) {
				if res.CapHit != CapProcesses && res.CapHit != CapMemory {
					t.Errorf("cap %q, want processes (or memory, whichever the bomb reaches first)", res.CapHit)
				}
			},
		},
		{
			name: "output flood", op: "output", args: []string{"4000000"}, want: CapOutput,
			spec: Spec{Limits: Limits{Output: 64 << 10, Wall: Duration(hangGuard)}},
			check: func(t *testing.T, res *Result) {
				if len(res.Stdout) != 64<<10 || !res.StdoutTruncated {
					t.Errorf("stdout %d bytes, truncated %v; want exactly 64 KiB and truncated", len(res.Stdout), res.StdoutTruncated)
				}
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			forEach(t, true, func(t *testing.T, n named) {
				marker := newMarker(t)
				spec := c.spec
				spec.Env = []string{"IOH_MARKER=" + marker}
				res := attempt(t, n.sb, spec, c.op, c.args...)
				if c.want != CapNone && res.CapHit != c.want {
					t.Errorf("cap %q, want %q (exit %d, signal %q)\nstdout: %.300s\nstderr: %.300s",
						res.CapHit, c.want, res.ExitCode, res.Signal, res.Stdout, res.Stderr)
				}
				if c.check != nil {
					c.check(t, res)
				}
				// Teardown claims that nothing is left once Run returns;
				// a process the teardown killed may still be on its way out.
				if res.Enforced.Teardown {
					if left := gone(marker); len(left) > 0 {
						t.Errorf("processes left behind after Run: %s", describe(left))
					}
				}
				killMarked(marker)
			})
		})
	}
}

// TestFileSize checks the file-size cap with dd (a Go program would not
// do: Go handles SIGXFSZ and gets EFBIG). The file stops at the limit,
// and the cap is reported when SIGXFSZ kills the writer; the init of a
// pid namespace (the command on linux-ns) ignores SIGXFSZ and gets EFBIG.
func TestFileSize(t *testing.T) {
	dd, err := exec.LookPath("dd")
	if err != nil {
		t.Skip("no dd on this host to write past the limit with")
	}
	forEach(t, true, func(t *testing.T, n named) {
		wd := tempDir(t)
		res, err := n.sb.Run(context.Background(), &Spec{
			Argv: []string{dd, "if=/dev/zero", "of=big", "bs=65536", "count=64"}, Workdir: wd, Lend: true,
			Limits: Limits{FileSize: 1 << 20, Wall: Duration(20 * time.Second)},
		})
		if err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(filepath.Join(wd, "big"))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() > 1<<20 {
			t.Errorf("the file grew to %d bytes, past the 1 MiB limit", fi.Size())
		}
		pid1 := res.Enforced.PIDNamespace && (res.Enforced.Spawner == "cgo" || res.Enforced.Spawner == "helper")
		switch {
		case pid1:
			if res.CapHit != CapNone || !bytes.Contains(res.Stderr, []byte("File too large")) {
				t.Errorf("cap %q, stderr %q: want EFBIG for pid 1", res.CapHit, res.Stderr)
			}
		case res.CapHit != CapFileSize:
			t.Errorf("cap %q (exit %d, signal %q, stderr %q), want file_size", res.CapHit, res.ExitCode, res.Signal, res.Stderr)
		}
	})
}

// TestConcurrentRuns checks that runs do not interfere: each sees only its
// own workdir and output.
func TestConcurrentRuns(t *testing.T) {
	forEach(t, false, func(t *testing.T, n named) {
		var wg sync.WaitGroup
		for i := 0; i < 8; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res := attempt(t, n.sb, Spec{}, "output", "1000")
				if res.ExitCode != 0 || len(res.Stdout) != 1000 {
					t.Errorf("run %d: exit %d, %d bytes", i, res.ExitCode, len(res.Stdout))
				}
			}()
		}
		wg.Wait()
	})
}
