package wasi

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/tetratelabs/wazero/sys"

	"github.com/initorigin/io-harness-go/pkg/sandbox"
)

// TestEscapes is the native escape suite's list, where it applies to a
// WASI guest: every attempt must be refused, and the host must agree
// (nothing appeared where the guest tried to write).
func TestEscapes(t *testing.T) {
	sb := newSandbox(t, nil)
	scratch := hostScratch(t)
	secret := filepath.Join(scratch, "secret")
	if err := os.WriteFile(secret, []byte("host secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A host-made symbolic link in the workdir that points out of it, as
	// a checked-out repository may carry.
	linked := realTempDir(t)
	if err := os.Symlink(scratch, filepath.Join(linked, "abs")); err != nil {
		t.Skipf("cannot make symbolic links here: %v", err)
	}
	rel, err := filepath.Rel(linked, scratch)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(rel, filepath.Join(linked, "rel")); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepted atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()

	type escape struct {
		name string
		spec func(wd string) sandbox.Spec
		op   string
		args []string
		// mark is a host file that must not exist afterwards.
		mark string
	}
	plain := func(wd string) sandbox.Spec { return sandbox.Spec{Workdir: wd} }
	cases := []escape{
		{name: "write outside the workdir", op: "write", args: []string{filepath.Join(scratch, "escape-write")},
			mark: filepath.Join(scratch, "escape-write")},
		{name: "read /etc/passwd", op: "read", args: []string{"/etc/passwd"}},
		{name: "read a host file by its path", op: "read", args: []string{secret}},
		{name: "list /etc", op: "ls", args: []string{"/etc"}},
		{name: "../ traversal after Go's cleaning", op: "read", args: []string{"../../../../../../etc/passwd"}},
		{name: "../ traversal sent raw to path_open", op: "rawopen", args: []string{"../../../../../../etc/passwd"}},
		{name: "a/../../ sent raw to path_open", op: "rawopen", args: []string{"a/../../etc/passwd"}},
		{name: "an absolute path sent raw to path_open", op: "rawopen", args: []string{"/etc/passwd"}},
		{name: "write through a symbolic link the guest made", op: "symlink-write", args: nil, // args set below
			mark: filepath.Join(scratch, "escape-link")},
		{name: "read through a symbolic link the guest made", op: "symlink-read", args: []string{"../../../../../../../../etc", "passwd"}},
		{name: "read through an absolute host-made link", spec: func(string) sandbox.Spec { return sandbox.Spec{Workdir: linked} },
			op: "read", args: []string{"abs/secret"}},
		{name: "read through a relative host-made link", spec: func(string) sandbox.Spec { return sandbox.Spec{Workdir: linked} },
			op: "read", args: []string{"rel/secret"}},
		{name: "TCP to a loopback server of the host", op: "tcp", args: []string{ln.Addr().String()}},
		{name: "TCP with an allow-list", op: "tcp", args: []string{ln.Addr().String()},
			spec: func(wd string) sandbox.Spec {
				return sandbox.Spec{Workdir: wd, Network: sandbox.Network{Allow: []string{ln.Addr().String()}}}
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			wd := realTempDir(t)
			spec := plain(wd)
			if c.spec != nil {
				spec = c.spec(wd)
			}
			args := c.args
			if c.op == "symlink-write" {
				target, err := filepath.Rel(spec.Workdir, scratch)
				if err != nil {
					t.Fatal(err)
				}
				args = []string{target, "escape-link"}
			}
			res := attempt(t, sb, spec, c.op, args...)
			if outcome(t, res) {
				t.Errorf("ESCAPED: %s", res.Stdout)
			}
			if c.mark != "" {
				if _, err := os.Stat(c.mark); err == nil {
					t.Errorf("ESCAPED: %s exists on the host", c.mark)
				}
			}
			if !res.Enforced.Filesystem || res.Enforced.Network != sandbox.NetworkDenied {
				t.Errorf("enforcement %+v claims less than it stopped", res.Enforced)
			}
		})
	}
	if n := accepted.Load(); n != 0 {
		t.Errorf("ESCAPED: the host listener accepted %d connections", n)
	}
}

// TestDotDotStaysInside checks a write to "../beside": the guest cleans
// the name against its working directory, /, so the file lands in the
// workdir, not beside it.
func TestDotDotStaysInside(t *testing.T) {
	parent := hostScratch(t)
	wd := filepath.Join(parent, "work")
	if err := os.Mkdir(wd, 0o755); err != nil {
		t.Fatal(err)
	}
	res := attempt(t, newSandbox(t, nil), sandbox.Spec{Workdir: wd}, "write", "../../beside")
	outcome(t, res)
	if _, err := os.Stat(filepath.Join(parent, "beside")); err == nil {
		t.Errorf("ESCAPED: the file appeared beside the workdir")
	}
	if _, err := os.Stat(filepath.Join(wd, "beside")); err != nil {
		t.Errorf("the write did not land in the workdir either: %v; stdout %s", err, res.Stdout)
	}
}

// TestSymlinkEscapeControl is the negative control for the symbolic-link
// cases: through wazero's own directory mount, the same guest escapes.
// That is why the backend mounts directories through os.Root.
func TestSymlinkEscapeControl(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("symbolic links need a privilege on Windows")
	}
	g := guest(t)
	ctx := context.Background()
	wd, scratch := realTempDir(t), hostScratch(t)
	target, err := filepath.Rel(wd, scratch)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(g)
	if err != nil {
		t.Fatal(err)
	}
	// The interpreter: it compiles fast, even under the race detector.
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	defer rt.Close(ctx)
	wasi_snapshot_preview1.MustInstantiate(ctx, rt)
	var out bytes.Buffer
	cfg := wazero.NewModuleConfig().WithArgs(g, "symlink-write", target, "escape").WithStdout(&out).
		WithFSConfig(wazero.NewFSConfig().WithDirMount(wd, "/")).WithSysWalltime().WithSysNanotime()
	// wazero reports exit 0 during instantiation as no error.
	_, err = rt.InstantiateWithConfig(ctx, b, cfg)
	var ee *sys.ExitError
	if err != nil && !errors.As(err, &ee) || ee != nil && ee.ExitCode() != escaped || out.String() != "done\n" {
		t.Fatalf("through wazero's own mount the guest did not escape (%v): %s; the escape case proves nothing", err, out.String())
	}
	if _, err := os.Stat(filepath.Join(scratch, "escape")); err != nil {
		t.Fatalf("the guest says it escaped but the host has no file: %v", err)
	}
	// And the same guest, through the backend, is refused.
	wd2 := realTempDir(t)
	target2, err := filepath.Rel(wd2, scratch)
	if err != nil {
		t.Fatal(err)
	}
	res := attempt(t, newSandbox(t, nil), sandbox.Spec{Workdir: wd2}, "symlink-write", target2, "escape2")
	if outcome(t, res) {
		t.Errorf("ESCAPED through the backend: %s", res.Stdout)
	}
}

// TestWorkdirOnly checks that the guest's / holds the workdir's files and
// nothing else: no host directories show through.
func TestWorkdirOnly(t *testing.T) {
	sb := newSandbox(t, nil)
	wd := realTempDir(t)
	for _, n := range []string{"a", "b"} {
		if err := os.WriteFile(filepath.Join(wd, n), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	res := attempt(t, sb, sandbox.Spec{Workdir: wd}, "ls", "/")
	if got := string(res.Stdout); got != "a\nb\n" {
		t.Errorf("the guest's / lists %q, want only the workdir's a and b", got)
	}
}

// TestCaps checks that each cap kills the guest and says which it was.
// A cap is judged by the cap it names, which must come before the wall
// clock (or the limit the case is about) would; memory growth, which was
// once slow, by the CPU time it cost.
func TestCaps(t *testing.T) {
	sb := newSandbox(t, nil)
	guest(t)
	ms := func(d time.Duration) sandbox.Duration { return sandbox.Duration(d) }
	tests := []struct {
		name   string
		limits sandbox.Limits
		op     string
		args   []string
		cap    sandbox.Cap
		check  func(t *testing.T, wd string, res *sandbox.Result)
	}{
		{name: "memory growth past the cap", limits: sandbox.Limits{Memory: 512 << 20, Wall: ms(hangGuard)}, op: "mem",
			cap: sandbox.CapMemory},
		{name: "a busy loop past the wall clock", limits: sandbox.Limits{Wall: ms(500 * time.Millisecond)}, op: "spin",
			cap: sandbox.CapWall,
			check: func(t *testing.T, _ string, res *sandbox.Result) {
				if d := time.Duration(res.Duration); d < 450*time.Millisecond {
					t.Errorf("killed after %s, before the 500ms deadline", d)
				}
			}},
		{name: "a busy loop past the CPU limit", limits: sandbox.Limits{CPU: ms(time.Second), Wall: ms(hangGuard)}, op: "spin",
			cap: sandbox.CapCPU},
		{name: "a sleep past the wall clock", limits: sandbox.Limits{Wall: ms(300 * time.Millisecond)}, op: "sleep",
			cap: sandbox.CapWall},
		{name: "output past the byte cap", limits: sandbox.Limits{Output: 4096, Wall: ms(hangGuard)}, op: "output", args: []string{"1000000"},
			cap: sandbox.CapOutput,
			check: func(t *testing.T, _ string, res *sandbox.Result) {
				if len(res.Stdout) != 4096 || !res.StdoutTruncated {
					t.Errorf("kept %d bytes (truncated %v), want 4096 and truncated", len(res.Stdout), res.StdoutTruncated)
				}
			}},
		{name: "a file past the size cap", limits: sandbox.Limits{FileSize: 1 << 20, Wall: ms(hangGuard)}, op: "filesize", args: []string{"4194304"},
			cap: sandbox.CapFileSize,
			check: func(t *testing.T, wd string, res *sandbox.Result) {
				fi, err := os.Stat(filepath.Join(wd, "big"))
				if err != nil || fi.Size() > 1<<20 {
					t.Errorf("the file on the host: %v, %v; want at most 1 MiB", fi, err)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var rec recorder
			sb := sb
			if tt.cap == sandbox.CapMemory {
				sb = newSandbox(t, &Options{Observer: rec.observe})
			}
			attempt(t, sb, sandbox.Spec{}, "exit", "0") // compiled before it is measured
			wd := realTempDir(t)
			cpu := processCPU(t)
			res := attempt(t, sb, sandbox.Spec{Workdir: wd, Limits: tt.limits}, tt.op, tt.args...)
			cpu = processCPU(t) - cpu
			if res.CapHit != tt.cap {
				t.Errorf("cap %q, want %q (exit %d, stderr %.300s)", res.CapHit, tt.cap, res.ExitCode, res.Stderr)
			}
			if res.ExitCode != -1 {
				t.Errorf("exit %d after the %s cap, want -1", res.ExitCode, tt.cap)
			}
			// 512 MiB: growth must be cheap all the way. wazero's default
			// allocator copies the memory on every grow, which took 9-34 s
			// to reach 1 GiB; the mapped memory grows in place.
			t.Logf("the run cost %s of CPU time", cpu)
			if tt.cap == sandbox.CapMemory && cpu > 5*time.Second {
				t.Errorf("growing to the cap cost %s of CPU time, want well under 5s", cpu)
			}
			if tt.check != nil {
				tt.check(t, wd, res)
			}
			for _, e := range rec.all() {
				if e.Kind == sandbox.EventCapHit && (e.Cap != tt.cap || !strings.Contains(e.Detail, "memory")) {
					t.Errorf("cap_hit event %+v", e)
				}
			}
		})
	}
}

// TestMemoryAtStart checks a module whose initial memory is over the cap:
// it does not start, and the memory cap says why.
func TestMemoryAtStart(t *testing.T) {
	sb := newSandbox(t, nil)
	res := attempt(t, sb, sandbox.Spec{Limits: sandbox.Limits{Memory: 1 << 20}}, "exit", "0")
	if res.ExitCode != 126 || res.CapHit != sandbox.CapMemory {
		t.Errorf("exit %d cap %q stderr %q; want 126 and the memory cap", res.ExitCode, res.CapHit, res.Stderr)
	}
}

func TestTrap(t *testing.T) {
	sb := newSandbox(t, nil)
	res := attempt(t, sb, sandbox.Spec{}, "trap")
	if res.ExitCode != -1 || res.CapHit != sandbox.CapNone || !strings.Contains(string(res.Stderr), "io-harness sandbox: wasm trap:") {
		t.Errorf("exit %d cap %q stderr %q; want -1, no cap and the trap on stderr", res.ExitCode, res.CapHit, res.Stderr)
	}
}

// TestMemoryReuse runs a guest many times at the default 2 GiB memory
// limit. With wazero's default allocator and WithMemoryCapacityFromMax,
// each run after the first zeroed the whole 2 GiB reservation from the Go
// heap (3.2-6.2 s per run, gigabytes resident). Judged by what the runs
// cost the process, which a loaded machine does not change: the bytes
// allocated from the Go heap and the CPU time.
func TestMemoryReuse(t *testing.T) {
	sb := newSandbox(t, nil)
	attempt(t, sb, sandbox.Spec{}, "exit", "0")
	const n = 10
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	cpu := processCPU(t)
	for range n {
		if res := attempt(t, sb, sandbox.Spec{}, "exit", "0"); res.ExitCode != 0 {
			t.Fatalf("exit %d: %s", res.ExitCode, res.Stderr)
		}
	}
	cpu = (processCPU(t) - cpu) / n
	runtime.ReadMemStats(&after)
	heap := (after.TotalAlloc - before.TotalAlloc) / n
	t.Logf("a run of a compiled module: %s of CPU time, %d KiB from the heap", cpu, heap>>10)
	if heap > 256<<20 {
		t.Errorf("a run of a compiled module allocated %d MiB from the Go heap; want well under the 2 GiB limit", heap>>20)
	}
	if cpu > 500*time.Millisecond {
		t.Errorf("a run of a compiled module cost %s of CPU time on average; want well under 500ms", cpu)
	}
}
