package wasi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/initorigin/io-harness-go/pkg/sandbox"
)

func TestGuestWorld(t *testing.T) {
	sb := newSandbox(t, nil)
	wd := realTempDir(t)
	if err := os.WriteFile(filepath.Join(wd, "words.txt"), []byte("one two three\nfour\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		spec sandbox.Spec
		op   string
		args []string
		want string
	}{
		{name: "argv is the guest's", op: "args", args: []string{"a b", ""},
			want: guest(t) + "\nargs\na b\n\n"},
		{name: "the environment is the spec's, adjusted", op: "env",
			spec: sandbox.Spec{Env: []string{"A=1", "HTTP_PROXY=http://proxy:3128", "PWD=/host/dir", "TMPDIR=/host/tmp", "B=x=y"}},
			want: "A=1\nB=x=y\nPWD=/\nTMPDIR=/tmp\n"},
		{name: "nothing is inherited", op: "env", want: "PWD=/\nTMPDIR=/tmp\n"},
		{name: "the working directory is /", op: "pwd", want: "/\n"},
		{name: "the workdir is at /", op: "ls", args: []string{"/"}, spec: sandbox.Spec{Workdir: wd}, want: "words.txt\n"},
		{name: "and at its host path", op: "cat", args: []string{filepath.Join(wd, "words.txt")}, spec: sandbox.Spec{Workdir: wd},
			want: "one two three\nfour\n"},
		{name: "relative names are in the workdir", op: "wc", args: []string{"words.txt"}, spec: sandbox.Spec{Workdir: wd}, want: "4\n"},
		{name: "an ephemeral workdir starts empty", op: "ls", args: []string{"."}, want: ""},
		{name: "/tmp is private and starts empty", op: "ls", args: []string{"/tmp"}, want: ""},
		{name: "stdin", op: "stdin", spec: sandbox.Spec{Stdin: []byte("hello\n")}, want: "hello\n"},
		{name: "no stdin is empty", op: "stdin", want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := attempt(t, sb, tt.spec, tt.op, tt.args...)
			if res.ExitCode != 0 {
				t.Fatalf("exit %d, stderr %s", res.ExitCode, res.Stderr)
			}
			if diff := cmp.Diff(tt.want, string(res.Stdout)); diff != "" {
				t.Errorf("stdout (-want +got):\n%s", diff)
			}
		})
	}
}

func TestResult(t *testing.T) {
	sb := newSandbox(t, nil)
	res := attempt(t, sb, sandbox.Spec{}, "exit", "7")
	want := &sandbox.Result{
		ExitCode: 7,
		Stdout:   []byte{},
		Stderr:   []byte{},
		Backend:  Backend,
		Enforced: sb.Enforcement(),
	}
	if diff := cmp.Diff(want, res, cmpIgnoreTimes); diff != "" {
		t.Errorf("result (-want +got):\n%s", diff)
	}
	if res.Duration <= 0 || res.CPU != res.Duration {
		t.Errorf("duration %v, CPU %v: want a positive duration, and the CPU bound equal to it", res.Duration, res.CPU)
	}
	if sb.Name() != Backend {
		t.Errorf("Name() = %q, want %q", sb.Name(), Backend)
	}
	e := sb.Enforcement()
	if !e.Filesystem || !e.PrivateTmp || e.Network != sandbox.NetworkDenied || !e.Memory || !e.Teardown || e.Gaps == "" {
		t.Errorf("enforcement claims too little: %+v", e)
	}
}

var cmpIgnoreTimes = cmp.FilterPath(func(p cmp.Path) bool {
	s := p.String()
	return s == "Duration" || s == "CPU"
}, cmp.Ignore())

func TestRealClockAndRandomness(t *testing.T) {
	sb := newSandbox(t, nil)
	res := attempt(t, sb, sandbox.Spec{}, "clock")
	var year, ms int
	if _, err := fmt.Sscanf(string(res.Stdout), "%d %d", &year, &ms); err != nil {
		t.Fatalf("%q: %v", res.Stdout, err)
	}
	if now := time.Now().Year(); year != now || ms < 45 {
		t.Errorf("the guest saw year %d and a 50 ms sleep of %d ms; want %d and at least 45 (the host's clocks)", year, ms, now)
	}
	a, b := attempt(t, sb, sandbox.Spec{}, "rand"), attempt(t, sb, sandbox.Spec{}, "rand")
	if string(a.Stdout) == string(b.Stdout) {
		t.Errorf("two runs drew the same random bytes %q: the guest's randomness is deterministic", a.Stdout)
	}
}

func TestPrivateTmpVanishes(t *testing.T) {
	var rec recorder
	sb := newSandbox(t, &Options{Observer: rec.observe})
	res := attempt(t, sb, sandbox.Spec{Workdir: realTempDir(t)}, "tmp")
	if res.ExitCode != 0 || !strings.HasPrefix(string(res.Stdout), "/tmp/guest-") {
		t.Fatalf("exit %d, stdout %q, stderr %q: want a file made in /tmp", res.ExitCode, res.Stdout, res.Stderr)
	}
	// The run's host directory, the private /tmp's parent, is gone.
	matches, _ := filepath.Glob(filepath.Join(os.TempDir(), "io-harness-wasi-*", "tmp", "guest-*"))
	if len(matches) > 0 {
		t.Errorf("the guest's temporary files outlived the run: %v", matches)
	}
}

func TestEvents(t *testing.T) {
	var rec recorder
	sb := newSandbox(t, &Options{Observer: rec.observe})
	attempt(t, sb, sandbox.Spec{}, "exit", "0")
	attempt(t, sb, sandbox.Spec{Limits: sandbox.Limits{Output: 10}}, "output", "100")
	var kinds []sandbox.EventKind
	var workdirs []string
	for _, e := range rec.all() {
		kinds = append(kinds, e.Kind)
		if e.Backend != Backend || e.Time.IsZero() {
			t.Errorf("event %+v: want backend %q and a time", e, Backend)
		}
		if e.Kind == sandbox.EventCreate {
			workdirs = append(workdirs, e.Workdir)
		}
	}
	want := []sandbox.EventKind{
		sandbox.EventCreate, sandbox.EventExec, sandbox.EventTeardown,
		sandbox.EventCreate, sandbox.EventExec, sandbox.EventCapHit, sandbox.EventTeardown,
	}
	if diff := cmp.Diff(want, kinds); diff != "" {
		t.Errorf("event kinds (-want +got):\n%s", diff)
	}
	for _, wd := range workdirs {
		if _, err := os.Stat(wd); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the ephemeral workdir %s outlived its run (%v)", wd, err)
		}
	}
}

// TestNotRunnable checks that a module that cannot run is the command's
// failure, reported as a shell would, not the sandbox's.
func TestNotRunnable(t *testing.T) {
	sb := newSandbox(t, nil)
	wd := realTempDir(t)
	write := func(name string, b []byte) string {
		p := filepath.Join(wd, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	header := []byte("\x00asm\x01\x00\x00\x00")
	tests := []struct {
		name   string
		argv0  string
		code   int
		stderr string
	}{
		{"missing", filepath.Join(wd, "missing.wasm"), 127, "no such file"},
		{"relative and missing", "missing.wasm", 127, "no such file"},
		{"a directory", wd, 126, "is a directory"},
		{"not wasm", write("text.wasm", []byte("#!/bin/sh\necho hi\n")), 126, "not a valid WebAssembly module"},
		{"no _start", write("empty.wasm", header), 126, "no _start"},
		{"imports beyond WASI", write("env.wasm", append(header,
			1, 4, 1, 0x60, 0, 0, // a type: func() ()
			2, 9, 1, 3, 'e', 'n', 'v', 1, 'f', 0, 0, // import env.f of that type
		)), 126, "imports env.f"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := sb.Run(context.Background(), &sandbox.Spec{Argv: []string{tt.argv0}, Workdir: wd})
			if err != nil {
				t.Fatal(err)
			}
			if res.ExitCode != tt.code || !strings.Contains(string(res.Stderr), tt.stderr) {
				t.Errorf("exit %d, stderr %q; want %d and %q", res.ExitCode, res.Stderr, tt.code, tt.stderr)
			}
		})
	}
}

func TestInvalidSpec(t *testing.T) {
	sb := newSandbox(t, nil)
	wd := realTempDir(t)
	file := filepath.Join(wd, "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(wd, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		spec *sandbox.Spec
		step string
	}{
		{"nil", nil, "spec"},
		{"no argv", &sandbox.Spec{}, "argv"},
		{"NUL in argv", &sandbox.Spec{Argv: []string{"a\x00"}}, "argv[0]"},
		{"bad env", &sandbox.Spec{Argv: []string{"x"}, Env: []string{"NOVALUE"}}, "env[0]"},
		{"relative workdir", &sandbox.Spec{Argv: []string{"x"}, Workdir: "rel"}, "workdir"},
		{"missing workdir", &sandbox.Spec{Argv: []string{"x"}, Workdir: filepath.Join(wd, "nope")}, "workdir"},
		{"a file to mount", &sandbox.Spec{Argv: []string{"x"}, ReadOnly: []string{file}}, "read_only[0]"},
		{"read-only inside the workdir", &sandbox.Spec{Argv: []string{"x"}, Workdir: wd, ReadOnly: []string{filepath.Join(wd, "sub")}}, "read_only[0]"},
		{"read-only inside a writable path", &sandbox.Spec{Argv: []string{"x"}, Writable: []string{wd}, ReadOnly: []string{filepath.Join(wd, "sub")}}, "read_only[0]"},
		{"a mount over /", &sandbox.Spec{Argv: []string{"x"}, ReadOnly: []string{"/"}}, "read_only[0]"},
		{"a mount over /tmp", &sandbox.Spec{Argv: []string{"x"}, Writable: []string{"/tmp"}}, "writable[0]"},
		{"negative memory", &sandbox.Spec{Argv: []string{"x"}, Limits: sandbox.Limits{Memory: -1}}, "limits.memory"},
		{"negative disk", &sandbox.Spec{Argv: []string{"x"}, Limits: sandbox.Limits{Disk: -1}}, "limits.disk"},
		{"CPU below 1s", &sandbox.Spec{Argv: []string{"x"}, Limits: sandbox.Limits{CPU: sandbox.Duration(time.Millisecond)}}, "limits.cpu"},
		{"bad allow-list entry", &sandbox.Spec{Argv: []string{"x"}, Network: sandbox.Network{Allow: []string{"a:b:c"}}}, "network.allow[0]"},
	}
	if runtime.GOOS == "windows" {
		tests = tests[:len(tests)-4] // "/" and "/tmp" are not host paths there
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := sb.Run(context.Background(), tt.spec)
			var se *sandbox.Error
			if !errors.Is(err, sandbox.ErrInvalid) || !errors.As(err, &se) || se.Step != tt.step || se.Backend != Backend {
				t.Errorf("error %v; want ErrInvalid at step %q from %q", err, tt.step, Backend)
			}
		})
	}
}

// TestMounts checks the other side of containment: what the spec grants
// works.
func TestMounts(t *testing.T) {
	sb := newSandbox(t, nil)
	wd, ro, rw := realTempDir(t), hostScratch(t), hostScratch(t)
	if err := os.WriteFile(filepath.Join(ro, "data"), []byte("ro data"), 0o644); err != nil {
		t.Fatal(err)
	}
	spec := sandbox.Spec{Workdir: wd, ReadOnly: []string{ro}, Writable: []string{rw}}
	tests := []struct {
		name    string
		op, arg string
		ok      bool
		host    string // a file the attempt makes on the host, if it succeeds
	}{
		{"write the workdir by relative name", "write", "made", true, filepath.Join(wd, "made")},
		{"write the workdir at its host path", "write", filepath.Join(wd, "made2"), true, filepath.Join(wd, "made2")},
		{"write a writable path", "write", filepath.Join(rw, "made"), true, filepath.Join(rw, "made")},
		{"read a read-only path", "read", filepath.Join(ro, "data"), true, ""},
		{"write a read-only path", "write", filepath.Join(ro, "made"), false, filepath.Join(ro, "made")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := attempt(t, sb, spec, tt.op, tt.arg)
			if got := outcome(t, res); got != tt.ok {
				t.Errorf("succeeded %v, want %v: %s", got, tt.ok, res.Stdout)
			}
			if tt.host != "" {
				_, err := os.Stat(tt.host)
				if (err == nil) != tt.ok {
					t.Errorf("on the host, %s: %v; want it to exist: %v", tt.host, err, tt.ok)
				}
			}
		})
	}
}

func TestNetworkAllowListIsDenied(t *testing.T) {
	sb := newSandbox(t, nil)
	spec := sandbox.Spec{Network: sandbox.Network{Allow: []string{"example.com:443"}}}
	res := attempt(t, sb, spec, "tcp", "example.com:443")
	if outcome(t, res) {
		t.Errorf("a dial through an allow-list got through: %s", res.Stdout)
	}
	if res.Enforced.Network != sandbox.NetworkDenied || res.Egress != nil {
		t.Errorf("enforced network %q, egress %v; want %q and none", res.Enforced.Network, res.Egress, sandbox.NetworkDenied)
	}
}

// TestConcurrentRuns runs one module many times at once: every run gets
// its own answer, and the module is compiled once.
func TestConcurrentRuns(t *testing.T) {
	var rec recorder
	sb := newSandbox(t, &Options{Observer: rec.observe})
	guest(t)
	const n = 8
	var wg sync.WaitGroup
	outs := make([]string, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := sb.Run(context.Background(), &sandbox.Spec{Argv: []string{guest(t), "args", fmt.Sprint(i)}})
			if err != nil {
				errs[i] = err
				return
			}
			outs[i] = string(res.Stdout)
		}()
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("run %d: %v", i, errs[i])
		}
		if want := fmt.Sprintf("%s\nargs\n%d\n", guest(t), i); outs[i] != want {
			t.Errorf("run %d printed %q, want %q", i, outs[i], want)
		}
	}
	compiled := 0
	for _, e := range rec.all() {
		if e.Kind == sandbox.EventExec && strings.Contains(e.Detail, "compiled") {
			compiled++
		}
	}
	if compiled != 1 {
		t.Errorf("%d of %d concurrent runs compiled the module; want exactly 1", compiled, n)
	}
}

// TestCancel: cancelling the context of a run whose guest spins ends the
// run with the context's error. Its limits are far off, so the run ends
// before they would end it only because it was cancelled.
func TestCancel(t *testing.T) {
	g := guest(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sb := newSandbox(t, &Options{Observer: func(e sandbox.Event) {
		if e.Kind == sandbox.EventExec {
			cancel()
		}
	}})
	far := sandbox.Duration(hangGuard)
	_, err := sb.Run(ctx, &sandbox.Spec{Argv: []string{g, "spin"}, Limits: sandbox.Limits{CPU: far, Wall: far}})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("error %v, want context.Canceled", err)
	}
	if _, err := sb.Run(ctx, &sandbox.Spec{Argv: []string{g, "exit", "0"}}); !errors.Is(err, context.Canceled) {
		t.Errorf("a run with an ended context: %v, want context.Canceled", err)
	}
}

// TestClose: Close ends a run in flight, whose guest spins, with
// ErrUnavailable. The run's limits are far off, so a Close that waited
// for the run instead would leave it to end by a cap, without the error.
func TestClose(t *testing.T) {
	g := guest(t)
	started := make(chan struct{})
	var once sync.Once
	sb, err := New(context.Background(), &Options{CacheDir: filepath.Join(builtDir(t), "cache"), Observer: func(e sandbox.Event) {
		if e.Kind == sandbox.EventExec {
			once.Do(func() { close(started) })
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		far := sandbox.Duration(hangGuard)
		_, err := sb.Run(context.Background(), &sandbox.Spec{Argv: []string{g, "spin"}, Limits: sandbox.Limits{CPU: far, Wall: far}})
		done <- err
	}()
	<-started
	time.Sleep(100 * time.Millisecond)
	if err := sb.(io.Closer).Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := <-done; !errors.Is(err, sandbox.ErrUnavailable) {
		t.Errorf("the run in flight returned %v, want ErrUnavailable", err)
	}
	if _, err := sb.Run(context.Background(), &sandbox.Spec{Argv: []string{g, "exit", "0"}}); !errors.Is(err, sandbox.ErrUnavailable) {
		t.Errorf("a run after Close: %v, want ErrUnavailable", err)
	}
	if err := sb.(io.Closer).Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}
}

// tinyCommand is the smallest WASI command: a memory and a _start that
// returns, or traps. It compiles in no time, even under the race
// detector, and both forms have the same size.
func tinyCommand(trap bool) []byte {
	op := byte(0x01) // nop
	if trap {
		op = 0x00 // unreachable
	}
	return []byte{
		0, 'a', 's', 'm', 1, 0, 0, 0,
		1, 4, 1, 0x60, 0, 0, // type 0: func() ()
		3, 2, 1, 0, // function 0 has type 0
		5, 3, 1, 0, 1, // a memory of at least one page
		7, 19, 2, 6, '_', 's', 't', 'a', 'r', 't', 0, 0, 6, 'm', 'e', 'm', 'o', 'r', 'y', 2, 0, // exports
		10, 5, 1, 3, 0, op, 0x0b, // function 0: no locals, op, end
	}
}

// TestModuleChanged checks that a module file rewritten in place, to the
// same size and with its modification time set back, runs as rewritten:
// the remembered hash of the old content is not used.
func TestModuleChanged(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("hashes are not remembered on Windows")
	}
	sb := newSandbox(t, nil)
	wasm := filepath.Join(t.TempDir(), "tiny.wasm")
	if err := os.WriteFile(wasm, tinyCommand(false), 0o644); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(wasm)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(settled + 100*time.Millisecond) // old enough for its hash to be remembered
	run := func() int {
		res, err := sb.Run(context.Background(), &sandbox.Spec{Argv: []string{wasm}})
		if err != nil {
			t.Fatal(err)
		}
		return res.ExitCode
	}
	if code := run(); code != 0 {
		t.Fatalf("exit %d, want 0", code)
	}
	if code := run(); code != 0 {
		t.Fatalf("the unchanged module: exit %d, want 0", code)
	}
	if err := os.WriteFile(wasm, tinyCommand(true), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(wasm, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	if code := run(); code != -1 {
		t.Errorf("the rewritten module: exit %d, want -1 (its trap): the old module ran", code)
	}
}

func TestDiskCache(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cache")
	wasm := filepath.Join(t.TempDir(), "tiny.wasm")
	if err := os.WriteFile(wasm, tinyCommand(false), 0o644); err != nil {
		t.Fatal(err)
	}
	sb := newSandbox(t, &Options{CacheDir: dir})
	res, err := sb.Run(context.Background(), &sandbox.Spec{Argv: []string{wasm}})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("exit %d: %s", res.ExitCode, res.Stderr)
	}
	var files []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, p)
		}
		return nil
	})
	if len(files) == 0 {
		t.Errorf("nothing in the disk cache %s after a compilation", dir)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS != "windows" && fi.Mode().Perm() != 0o700 {
		t.Errorf("cache directory mode %v, want 0700", fi.Mode().Perm())
	}
}

func TestCacheDirRefused(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("permission bits do not say who may write on Windows")
	}
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	_, err := New(context.Background(), &Options{CacheDir: dir})
	if !errors.Is(err, sandbox.ErrInvalid) || !strings.Contains(err.Error(), "writable by group or others") {
		t.Errorf("a world-writable cache directory: %v, want ErrInvalid", err)
	}
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o600)
	if _, err := New(context.Background(), &Options{CacheDir: file}); !errors.Is(err, sandbox.ErrInvalid) {
		t.Errorf("a cache directory that is a file: %v, want ErrInvalid", err)
	}
}

// TestNoLeftovers checks that runs leave no directory behind in the
// system temp directory, whatever way they end.
func TestNoLeftovers(t *testing.T) {
	var rec recorder
	sb := newSandbox(t, &Options{Observer: rec.observe})
	attempt(t, sb, sandbox.Spec{}, "tmp")
	attempt(t, sb, sandbox.Spec{Limits: sandbox.Limits{Wall: sandbox.Duration(200 * time.Millisecond)}}, "spin")
	attempt(t, sb, sandbox.Spec{}, "trap")
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	sb.Run(ctx, &sandbox.Spec{Argv: []string{guest(t), "sleep"}})
	var created []string
	for _, e := range rec.all() {
		switch e.Kind {
		case sandbox.EventCreate:
			created = append(created, filepath.Dir(e.Workdir))
		case sandbox.EventTeardown:
			if strings.Contains(e.Detail, "failed") {
				t.Errorf("teardown: %s", e.Detail)
			}
		}
	}
	if len(created) != 4 {
		t.Fatalf("%d create events, want 4", len(created))
	}
	for _, dir := range created {
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s is still there (%v)", dir, err)
		}
	}
	if slices.Contains(created, "") {
		t.Errorf("a create event without a workdir")
	}
}

// TestWordcountTool runs the wasm_tool example's program, built for WASI,
// on a file in the workdir.
func TestWordcountTool(t *testing.T) {
	tool := goBuild(t, "github.com/initorigin/io-harness-go/examples/wasm_tool/tool", "wasip1", "wasm")
	wd := realTempDir(t)
	if err := os.WriteFile(filepath.Join(wd, "notes.txt"), []byte("to be or not to be\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := newSandbox(t, nil).Run(context.Background(), &sandbox.Spec{
		Argv:    []string{tool, "-top", "1", "notes.txt"},
		Workdir: wd,
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("exit %d: %s", res.ExitCode, res.Stderr)
	}
	var rep struct {
		Total struct {
			Words int
			Top   []struct{ Word string }
		}
	}
	if err := json.Unmarshal(res.Stdout, &rep); err != nil || rep.Total.Words != 6 || len(rep.Total.Top) != 1 || rep.Total.Top[0].Word != "be" {
		t.Errorf("report %+v (%v) from %s", rep, err, res.Stdout)
	}
}
