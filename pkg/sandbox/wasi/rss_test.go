package wasi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/tetratelabs/wazero/sys"

	"github.com/initorigin/io-harness-go/pkg/sandbox"
)

// The attacks on the embedding process's memory run in a child process
// (this test binary, re-executed), so that the test process is not at
// risk, and so that the child's own peak resident memory (VmHWM) measures
// what the guest made the host take.

// rssChildEnv, when set, makes the test binary an RSS child. Its value is
// an rssJob in JSON.
const rssChildEnv = "IOH_WASI_RSS_CHILD"

type rssJob struct {
	// Mode is "backend" (a run in this package's Sandbox), "raw" (the
	// module instantiated with wazero's own API and WASI, no bound of
	// ours) or "raw-compile" (wazero's CompileModule only).
	Mode   string `json:"mode"`
	Wasm   string `json:"wasm"`
	Memory int64  `json:"memory,omitempty"`
	// NoFile is the child's RLIMIT_NOFILE, for the "fds-raw" and
	// "fds-backend" modes; see fdsChild.
	NoFile uint64 `json:"nofile,omitempty"`
	// CacheDir is the backend's compilation cache, in "fds-backend".
	CacheDir string `json:"cache_dir,omitempty"`
}

// rssReport is what the child prints.
type rssReport struct {
	Exit   int    `json:"exit"`
	Cap    string `json:"cap,omitempty"`
	Stderr string `json:"stderr,omitempty"`
	Err    string `json:"err,omitempty"`
	// BaseKiB is the resident memory before the guest, PeakKiB the peak
	// while it ran (VmHWM, reset before the guest where the kernel
	// allows).
	BaseKiB int64 `json:"base_kib"`
	PeakKiB int64 `json:"peak_kib"`
	// Stdout is the guest's, and HostOpen the outcome of the host's own
	// open while the guest held its files ("ok" or the error), in the
	// fds modes.
	Stdout   string `json:"stdout,omitempty"`
	HostOpen string `json:"host_open,omitempty"`
}

// procStatus reads a field of /proc/self/status, in KiB.
func procStatus(field string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return -1
}

// rssChild is the child's main.
func rssChild() int {
	var job rssJob
	if err := json.Unmarshal([]byte(os.Getenv(rssChildEnv)), &job); err != nil {
		fmt.Fprintln(os.Stderr, "rss child:", err)
		return 2
	}
	ctx := context.Background()
	var rep rssReport
	b, err := os.ReadFile(job.Wasm)
	if err != nil {
		fmt.Fprintln(os.Stderr, "rss child:", err)
		return 2
	}
	start := func() {
		runtime.GC()
		// Reset VmHWM to the current resident size (Linux 4.0 and later).
		os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
		rep.BaseKiB = procStatus("VmRSS")
	}
	switch job.Mode {
	case "backend":
		sb, err := New(ctx, nil)
		if err != nil {
			fmt.Fprintln(os.Stderr, "rss child:", err)
			return 2
		}
		defer sb.(io.Closer).Close()
		start()
		res, err := sb.Run(ctx, &sandbox.Spec{Argv: []string{job.Wasm}, Limits: sandbox.Limits{
			Memory: job.Memory, Wall: sandbox.Duration(time.Minute)}})
		if err != nil {
			rep.Err = err.Error()
		} else {
			rep.Exit, rep.Cap, rep.Stderr = res.ExitCode, string(res.CapHit), string(res.Stderr)
		}
	case "raw", "raw-compile":
		rt := wazero.NewRuntime(ctx)
		defer rt.Close(ctx)
		wasi_snapshot_preview1.MustInstantiate(ctx, rt)
		start()
		if job.Mode == "raw-compile" {
			_, err = rt.CompileModule(ctx, b)
		} else {
			_, err = rt.InstantiateWithConfig(ctx, b, wazero.NewModuleConfig())
		}
		var ee *sys.ExitError
		switch {
		case errors.As(err, &ee):
			rep.Exit = int(ee.ExitCode())
		case err != nil:
			rep.Exit, rep.Err = -1, err.Error()
		}
	case "fds-raw", "fds-backend":
		if err := fdsChild(job, &rep); err != nil {
			fmt.Fprintln(os.Stderr, "fds child:", err, rep.Stdout)
			return 2
		}
	default:
		fmt.Fprintln(os.Stderr, "rss child: unknown mode", job.Mode)
		return 2
	}
	rep.PeakKiB = procStatus("VmHWM")
	json.NewEncoder(os.Stdout).Encode(rep)
	return 0
}

// rssRun runs job in a child process, bounded to two minutes and always
// reaped. crashed reports a child that died instead of reporting, with
// its output.
func rssRun(t *testing.T, job rssJob) (rep rssReport, crashed bool, out string) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("resident memory is read from /proc/self/status, which only Linux has")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	j, err := json.Marshal(job)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), rssChildEnv+"="+string(j))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run() // Run waits: the child is reaped on every path
	out = stdout.String() + stderr.String()
	if err != nil {
		return rep, true, out
	}
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("rss child printed %q: %v", out, err)
	}
	if rep.PeakKiB < 0 || rep.BaseKiB < 0 {
		t.Skipf("no VmHWM or VmRSS in /proc/self/status: %+v", rep)
	}
	return rep, false, out
}

const mib = 1 << 10 // in KiB

// TestTableGrowAttack is the attack that found the hole: a module of 90
// bytes grows its table by 2^26 entries (512 MiB in wazero, which grows
// tables from the Go heap, where the memory allocator does not see them).
// Through the backend, under a 64 MiB memory cap, table.grow returns -1
// and the host's memory stays under the cap. The negative control runs
// the same module through wazero's own API, which lets it take the
// memory.
func TestTableGrowAttack(t *testing.T) {
	attack := writeWasm(t, "grow.wasm", tableGrowModule([]byte{0, 0}, 1<<26))

	ctl, crashed, out := rssRun(t, rssJob{Mode: "raw", Wasm: attack})
	if crashed {
		t.Fatalf("the control child died: %s", out)
	}
	grew := (ctl.PeakKiB - ctl.BaseKiB) / mib
	if ctl.Exit != 0 || grew < 400 {
		t.Fatalf("control: through wazero's own API the table grew (exit %d, %v) and the process gained %d MiB; "+
			"want exit 0 and at least 400 MiB, or the attack proves nothing", ctl.Exit, ctl.Err, grew)
	}
	t.Logf("control: wazero's own API let the guest grow its table; the process gained %d MiB", grew)

	rep, crashed, out := rssRun(t, rssJob{Mode: "backend", Wasm: attack, Memory: 64 << 20})
	if crashed {
		t.Fatalf("the backend child died: %s", out)
	}
	gained := (rep.PeakKiB - rep.BaseKiB) / mib
	if rep.Err != "" || rep.Exit != 3 {
		t.Errorf("through the backend: exit %d, error %q, stderr %q; want exit 3 (table.grow returned -1)", rep.Exit, rep.Err, rep.Stderr)
	}
	if gained > 64 {
		t.Errorf("through the backend under a 64 MiB cap the process gained %d MiB", gained)
	}
	t.Logf("backend: exit %d; the process gained %d MiB", rep.Exit, gained)
}

// TestTablesChargedToMemory checks that tables count against the memory
// limit: a module whose tables at their maximum (each capped at
// maxTableEntries) take more than the limit does not start, with the
// memory cap, whatever it would have done with them.
func TestTablesChargedToMemory(t *testing.T) {
	var tables [][]byte
	for range 16 { // 16 unbounded tables: 16 × 8 MiB at their capped maximum
		tables = append(tables, []byte{0x70, 0, 0})
	}
	wasm := writeWasm(t, "tables.wasm", wasmModule(
		typesSection, procExit,
		section(3, vec(leb(0))),
		section(4, vec(tables...)),
		memorySection, exportsStart,
		section(10, vec(body([]byte{0x41, 0, 0x10, 0}))),
	))
	sb := newSandbox(t, nil)
	for _, tt := range []struct {
		memory int64
		code   int
		cap    sandbox.Cap
	}{
		{64 << 20, 126, sandbox.CapMemory},
		{256 << 20, 0, sandbox.CapNone},
	} {
		res, err := sb.Run(context.Background(), &sandbox.Spec{Argv: []string{wasm}, Limits: sandbox.Limits{Memory: tt.memory}})
		if err != nil {
			t.Fatal(err)
		}
		if res.ExitCode != tt.code || res.CapHit != tt.cap {
			t.Errorf("memory %d MiB: exit %d cap %q stderr %q; want %d and %q", tt.memory>>20, res.ExitCode, res.CapHit, res.Stderr, tt.code, tt.cap)
		}
	}
}

// TestDecodeBombs hands wazero's decoder modules of a few bytes that
// declare enormous counts. wazero allocates for the count before reading
// an entry: the control child, using wazero's own API, dies with "fatal
// error: runtime: out of memory", which no recover catches, or reserves
// the memory. Through the backend each is refused with the limit named,
// and the process stays small.
func TestDecodeBombs(t *testing.T) {
	bombs := []struct {
		name, limit string
		wasm        []byte
	}{
		{"2^32 function bodies in 5 bytes", "function bodies",
			wasmModule(rawSection(10, leb(5), leb(1<<32-1)))},
		{"a name section that names 2^32 functions", "",
			wasmModule(section(0, str("name"), []byte{1}, leb(5), leb(1<<32-1)))},
	}
	for _, b := range bombs {
		t.Run(b.name, func(t *testing.T) {
			wasm := writeWasm(t, "bomb.wasm", b.wasm)
			ctl, crashed, out := rssRun(t, rssJob{Mode: "raw-compile", Wasm: wasm})
			switch {
			case crashed && strings.Contains(out, "out of memory"):
				t.Logf("control: wazero's own API ended the process: %s", firstLine(out, "fatal error"))
			case !crashed && procStatusPeakGiB(ctl) >= 1:
				t.Logf("control: wazero's own API took %d MiB", (ctl.PeakKiB-ctl.BaseKiB)/mib)
			default:
				t.Fatalf("control: wazero's own API survived the bomb (crashed %v, %+v): %s; the case proves nothing", crashed, ctl, out)
			}

			rep, crashed, out := rssRun(t, rssJob{Mode: "backend", Wasm: wasm})
			if crashed {
				t.Fatalf("the backend child died: %s", out)
			}
			if gained := (rep.PeakKiB - rep.BaseKiB) / mib; gained > 64 {
				t.Errorf("through the backend the process gained %d MiB", gained)
			}
			if rep.Exit != 126 || !strings.Contains(rep.Stderr, b.limit) {
				t.Errorf("through the backend: exit %d, stderr %q; want 126 naming %q", rep.Exit, rep.Stderr, b.limit)
			}
		})
	}
}

func procStatusPeakGiB(r rssReport) int64 { return (r.PeakKiB - r.BaseKiB) / mib / 1024 }

// firstLine returns the first line of s that contains sub.
func firstLine(s, sub string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}

// TestStackDepthBounded runs a guest that recurses for ever. wazero
// grows the guest's call stack on the Go heap up to a fixed ceiling,
// then traps: the host's memory grows by at most that ceiling, whatever
// the memory limit (which does not count the stack).
func TestStackDepthBounded(t *testing.T) {
	wasm := writeWasm(t, "recurse.wasm", recursionModule())
	rep, crashed, out := rssRun(t, rssJob{Mode: "backend", Wasm: wasm, Memory: 64 << 20})
	if crashed {
		t.Fatalf("the backend child died: %s", out)
	}
	if rep.Exit != -1 || !strings.Contains(rep.Stderr, "stack overflow") {
		t.Errorf("exit %d stderr %q; want -1 and a stack overflow trap", rep.Exit, rep.Stderr)
	}
	gained := (rep.PeakKiB - rep.BaseKiB) / mib
	bound := int64(256)
	if raceEnabled {
		bound *= 3 // the race detector shadows every byte of the stack wazero copies as it grows it
	}
	if gained > bound {
		t.Errorf("the process gained %d MiB for the guest's stack, over %d MiB; wazero's ceiling is about 150", gained, bound)
	}
	t.Logf("a guest recursing for ever: trapped; the process gained %d MiB", gained)
}
