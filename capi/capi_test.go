package main

// These tests check the built artifact: they build libio_harness.so.1 the
// way `make lib` does, then check its exported symbols, its SONAME, that
// the hand-written header agrees with the cgo-generated one, and run the C
// tests, the C and Rust examples against it. The benchmarks compare the C
// ABI and the Python and Node bindings with pure-Go baselines measured in
// the same run.

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/initorigin/io-harness-go/internal/abi"
	"github.com/initorigin/io-harness-go/pkg/harness"
	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/scripted"
	"github.com/initorigin/io-harness-go/pkg/harness/tool"
	"github.com/initorigin/io-harness-go/pkg/harness/verify"
)

// lib is the library built for this test binary; libErr says why not.
var (
	libDir string
	libErr error
)

func TestMain(m *testing.M) {
	flag.Parse()
	if f := flag.Lookup("test.list"); f != nil && f.Value.String() != "" {
		os.Exit(m.Run()) // listing tests needs no library
	}
	dir, err := os.MkdirTemp("", "io-harness-capi-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	libDir = dir
	libErr = buildLibrary(dir)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// repoRoot is the module root, one level up from capi.
func repoRoot() string {
	wd, _ := os.Getwd()
	return filepath.Dir(wd)
}

func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(runtime.GOROOT(), "bin", "go")
}

// builtWithMake says whether the library was built by the Makefile's lib
// target (else by the same go build, where make is missing).
var builtWithMake bool

// buildLibrary builds the library into dir with the Makefile's lib
// target (or, without make, the same go build), with a timeout.
func buildLibrary(dir string) error {
	return buildVariant(dir, "")
}

// buildVariant builds the library into dir; cflags, when set, are extra
// C flags (the fork guard's negative control).
func buildVariant(dir, cflags string) error {
	if runtime.GOOS != "linux" {
		return fmt.Errorf("the artifact checks are written for Linux (ELF, version scripts); this is %s", runtime.GOOS)
	}
	if _, err := exec.LookPath("gcc"); err != nil {
		return fmt.Errorf("no gcc: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	root := repoRoot()
	var cmd *exec.Cmd
	if _, err := exec.LookPath("make"); err == nil && cflags == "" {
		builtWithMake = true
		cmd = exec.CommandContext(ctx, "make", "--no-print-directory", "-C", root, "lib", "LIB_DIR="+dir, "GO="+goTool())
	} else {
		cmd = exec.CommandContext(ctx, goTool(), "build", "-buildmode=c-shared", "-trimpath",
			"-ldflags=-extldflags '-Wl,--version-script="+filepath.Join(root, "capi", "exports.map")+" -Wl,-soname,libio_harness.so.1'",
			"-o", filepath.Join(dir, "libio_harness.so.1"), "./capi")
	}
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	if cflags != "" {
		cmd.Env = append(cmd.Env, "CGO_CFLAGS=-O2 -g "+cflags)
	}
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%v: %v\n%s", cmd.Args, err, b)
	}
	if _, err := os.Lstat(filepath.Join(dir, "libio_harness.so")); err != nil {
		if err := os.Symlink("libio_harness.so.1", filepath.Join(dir, "libio_harness.so")); err != nil {
			return err
		}
	}
	return nil
}

// make lib leaves the library and its link, and no second header beside
// them (cgo writes libio_harness.so.h; the public header is
// include/io_harness.h).
func TestMakeLibLeavesOneHeader(t *testing.T) {
	needLib(t)
	if !builtWithMake {
		t.Skip("make is not installed: the library was built with go build")
	}
	entries, err := os.ReadDir(libDir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	if diff := cmp.Diff([]string{"libio_harness.so", "libio_harness.so.1"}, got); diff != "" {
		t.Errorf("make lib left (-want +got):\n%s", diff)
	}
}

func needLib(t testing.TB) {
	t.Helper()
	if libErr != nil {
		if strings.Contains(libErr.Error(), "no gcc") || strings.Contains(libErr.Error(), "written for Linux") {
			t.Skipf("library not built: %v", libErr)
		}
		t.Fatalf("library not built: %v", libErr)
	}
}

// run runs a command with a timeout and returns its combined output.
func run(t testing.TB, timeout time.Duration, dir string, env []string, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("%s %v: timed out after %s\n%s", name, args, timeout, out)
	}
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
	return string(out)
}

func TestExportedSymbols(t *testing.T) {
	needLib(t)
	out := run(t, time.Minute, "", nil, "nm", "-D", "--defined-only", filepath.Join(libDir, "libio_harness.so.1"))
	var got []string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || f[1] == "A" { // A: the version node itself
			continue
		}
		name, _, _ := strings.Cut(f[2], "@")
		got = append(got, name)
	}
	want := strings.Fields(readFile(t, "testdata/symbols.golden"))
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("exported symbols (-golden +got):\n%s", diff)
	}
}

func TestSONAME(t *testing.T) {
	needLib(t)
	out := run(t, time.Minute, "", nil, "readelf", "-d", filepath.Join(libDir, "libio_harness.so.1"))
	if !strings.Contains(out, "Library soname: [libio_harness.so.1]") {
		t.Errorf("no SONAME libio_harness.so.1 in:\n%s", out)
	}
}

// The hand-written header and the cgo-generated one compile together:
// any drift between a prototype and its //export is a compile error. The
// cgo header is generated here (make lib removes its copy).
func TestHeaderAgreesWithCgo(t *testing.T) {
	needLib(t)
	dir := t.TempDir()
	run(t, time.Minute, ".", []string{"CGO_ENABLED=1"}, goTool(), "tool", "cgo", "-objdir", dir,
		"-exportheader", filepath.Join(dir, "libio_harness.so.h"), "--", "-I", filepath.Join(repoRoot(), "include"), "capi.go")
	run(t, time.Minute, "", nil, "gcc", "-std=c11", "-Wall", "-Wextra", "-Werror",
		"-I", filepath.Join(repoRoot(), "include"), "-I", dir,
		"-c", "testdata/header_check.c", "-o", filepath.Join(dir, "header_check.o"))
}

func TestHeaderABIVersion(t *testing.T) {
	h := readFile(t, filepath.Join(repoRoot(), "include", "io_harness.h"))
	for name, want := range map[string]int{"IO_HARNESS_ABI_MAJOR": abi.ABIMajor, "IO_HARNESS_ABI_MINOR": abi.ABIMinor} {
		m := regexp.MustCompile(`#define ` + name + ` (\d+)`).FindStringSubmatch(h)
		if m == nil {
			t.Errorf("no %s in the header", name)
			continue
		}
		if got, _ := strconv.Atoi(m[1]); got != want {
			t.Errorf("%s = %d, the library says %d", name, got, want)
		}
	}
	if m := regexp.MustCompile(`#define IO_HARNESS_MAX_REQUEST_BYTES \((\d+)u << (\d+)\)`).FindStringSubmatch(h); m == nil {
		t.Errorf("no IO_HARNESS_MAX_REQUEST_BYTES in the header")
	} else if a, _ := strconv.Atoi(m[1]); a<<atoi(m[2]) != abi.MaxRequestBytes {
		t.Errorf("IO_HARNESS_MAX_REQUEST_BYTES = %s << %s, the library says %d", m[1], m[2], abi.MaxRequestBytes)
	}
	for name, want := range map[string]int32{"IO_HARNESS_OK": abi.StatusOK, "IO_HARNESS_UNKNOWN_HANDLE": abi.StatusUnknownHandle,
		"IO_HARNESS_CLOSED": abi.StatusClosed, "IO_HARNESS_TIMEOUT": abi.StatusTimeout, "IO_HARNESS_ILLEGAL_CONTEXT": abi.StatusIllegalContext,
		"IO_HARNESS_FORKED": abi.StatusForked} {
		m := regexp.MustCompile(`#define ` + name + ` \(?(-?\d+)\)?`).FindStringSubmatch(h)
		if m == nil {
			t.Errorf("no %s in the header", name)
			continue
		}
		if got, _ := strconv.Atoi(m[1]); int32(got) != want {
			t.Errorf("%s = %d, the library says %d", name, got, want)
		}
	}
}

func atoi(s string) int { n, _ := strconv.Atoi(s); return n }

func readFile(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// compileC builds one C program against the library.
func compileC(t testing.TB, src, out string) string {
	t.Helper()
	root := repoRoot()
	bin := filepath.Join(t.TempDir(), out)
	run(t, 2*time.Minute, root, nil, "gcc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-O2", "-pthread",
		"-I", filepath.Join(root, "include"), "-I", filepath.Join(root, "examples", "c", "tests"),
		src, "-L", libDir, "-lio_harness", "-Wl,-rpath,"+libDir, "-o", bin)
	return bin
}

// The C tests: smoke (every export and error path), stress (many
// threads, many runs), re-entry from the event callback, and the shared
// fixtures.
func TestC(t *testing.T) {
	needLib(t)
	root := repoRoot()
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"smoke", nil},
		{"stress", nil},
		{"reentry", nil},
		{"tools", nil},
		{"fork", nil},
		{"fixtures", []string{filepath.Join(root, "internal", "abi", "testdata", "fixtures")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bin := compileC(t, filepath.Join("examples", "c", "tests", tc.name+".c"), tc.name)
			out := run(t, 3*time.Minute, t.TempDir(), nil, bin, tc.args...)
			if !strings.Contains(out, tc.name+": ok") {
				t.Errorf("output:\n%s", out)
			}
			t.Log(strings.TrimSpace(out))
		})
	}
}

// The fork guard's negative control: the same C program against a
// library built without the guard gets no clear error in the forked
// child (it hangs until its alarm, or runs on in a broken runtime).
func TestForkGuardControl(t *testing.T) {
	needLib(t)
	dir := t.TempDir()
	if err := buildVariant(dir, "-DIOH_NO_FORK_GUARD"); err != nil {
		t.Fatal(err)
	}
	bin := compileC(t, filepath.Join("examples", "c", "tests", "fork.c"), "fork")
	out := run(t, 2*time.Minute, t.TempDir(), []string{"LD_LIBRARY_PATH=" + dir}, bin, "control")
	if !strings.Contains(out, "fork control: no fork error") || !strings.Contains(out, "fork: ok") {
		t.Errorf("without the guard the child should get no fork error:\n%s", out)
	}
	t.Log(strings.TrimSpace(out))
}

// Issue 15: the bindings' READMEs give test commands with a relative
// IO_HARNESS_LIB that failed when followed literally (the tests' child
// processes run elsewhere). Each README's command runs here as written,
// with only the library's path changed to this build's (still relative),
// on the loading tests, whose children run in other directories.
func TestBindingReadmeCommands(t *testing.T) {
	needLib(t)
	root := repoRoot()
	for _, tc := range []struct {
		name, readme, dir, pattern, narrow string
	}{
		{"python", "bindings/python/README.md", ".", "`(IO_HARNESS_LIB=\\S+ python3 -m pytest bindings/python/tests)`", " -q -k TestLoading"},
		{"node", "bindings/node/README.md", "bindings/node", "`(IO_HARNESS_LIB=\\S+ node --test test/)`", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := exec.LookPath(map[string]string{"python": "python3", "node": "node"}[tc.name]); err != nil {
				t.Skipf("%s is not installed: %v", tc.name, err)
			}
			if tc.name == "node" {
				if _, err := os.Stat(filepath.Join(root, "bindings", "node", "node_modules", "koffi")); err != nil {
					t.Skip("koffi is not installed (npm ci in bindings/node)")
				}
			}
			m := regexp.MustCompile(tc.pattern).FindStringSubmatch(readFile(t, filepath.Join(root, tc.readme)))
			if m == nil {
				t.Fatalf("%s gives no test command matching %s", tc.readme, tc.pattern)
			}
			dir := filepath.Join(root, tc.dir)
			rel, err := filepath.Rel(dir, filepath.Join(libDir, "libio_harness.so.1"))
			if err != nil {
				t.Fatal(err)
			}
			cmd := regexp.MustCompile(`^IO_HARNESS_LIB=\S+`).ReplaceAllString(m[1], "IO_HARNESS_LIB="+rel)
			if tc.name == "node" {
				cmd = strings.Replace(cmd, " test/", " test/loading.test.js", 1)
			}
			out := run(t, 5*time.Minute, dir, []string{"IO_HARNESS_LIB="}, "sh", "-c", cmd+tc.narrow)
			t.Log(cmd + tc.narrow)
			if !strings.Contains(out, "passed") && !strings.Contains(out, "# pass") {
				t.Errorf("%s:\n%s", cmd, out)
			}
		})
	}
}

func TestCExample(t *testing.T) {
	needLib(t)
	bin := compileC(t, filepath.Join("examples", "c", "quickstart.c"), "quickstart")
	if out := run(t, time.Minute, t.TempDir(), nil, bin); !strings.Contains(out, "outcome: success") {
		t.Errorf("output:\n%s", out)
	}
}

// The Rust example builds offline (no crates) and runs the scripted task.
func TestRustExample(t *testing.T) {
	needLib(t)
	if _, err := exec.LookPath("cargo"); err != nil {
		t.Skipf("no cargo on this machine: %v", err)
	}
	dir := filepath.Join(repoRoot(), "examples", "rust")
	env := []string{"IO_HARNESS_LIB_DIR=" + libDir, "CARGO_TARGET_DIR=" + t.TempDir()}
	out := run(t, 5*time.Minute, dir, env, "cargo", "test", "--offline", "--quiet")
	if !strings.Contains(out, "test result: ok") {
		t.Errorf("cargo test:\n%s", out)
	}
}

// BenchmarkVersionRoundTrip compares one {"method":"version"} call
// through the C ABI (a C program calling io_harness_call and
// io_harness_free) with the same call made directly in Go, in this run.
func BenchmarkVersionRoundTrip(b *testing.B) {
	needLib(b)
	a := abi.New(nil)
	req := []byte(`{"method":"version"}`)
	ctx := context.Background()
	const n = 20000
	for i := 0; i < 1000; i++ { // warm up, as the C side does
		a.Call(ctx, req)
	}
	goNS, cNS := math.Inf(1), math.Inf(1)
	bin := compileC(b, filepath.Join("examples", "c", "tests", "bench.c"), "bench")
	b.ResetTimer()
	// The best of b.N rounds of each, interleaved, so that both see the
	// same machine.
	for i := 0; i < b.N; i++ {
		start := time.Now()
		for j := 0; j < n; j++ {
			a.Call(ctx, req)
		}
		goNS = math.Min(goNS, float64(time.Since(start).Nanoseconds())/n)
		out := run(b, 2*time.Minute, "", nil, bin, "call", strconv.Itoa(n))
		v, err := strconv.ParseFloat(strings.TrimSpace(out), 64)
		if err != nil {
			b.Fatalf("bench call printed %q", out)
		}
		cNS = math.Min(cNS, v)
	}
	b.ReportMetric(goNS, "go-ns/call")
	b.ReportMetric(cNS, "c-abi-ns/call")
	b.ReportMetric(cNS/goNS, "c/go")
}

// BenchmarkEvents20k measures the time to deliver 20,000 events of one
// harness queue (debug.emit) to a host that batch-polls 1000 at a time:
// pure Go draining the queue in process (the baseline), C, Python
// (ctypes) and Node (koffi), each reported with its ratio to Go.
func BenchmarkEvents20k(b *testing.B) {
	needLib(b)
	const n = 20000
	root := repoRoot()
	bin := compileC(b, filepath.Join("examples", "c", "tests", "bench.c"), "bench")
	hosts := []struct {
		name string
		cmd  []string
	}{
		{"c", []string{bin, "events", strconv.Itoa(n)}},
		{"python", []string{"python3", filepath.Join(root, "bindings", "python", "bench_events.py"), strconv.Itoa(n)}},
		{"node", []string{"node", filepath.Join(root, "bindings", "node", "bench", "events.js"), strconv.Itoa(n)}},
	}
	best := map[string]float64{"go": math.Inf(1)}
	for _, h := range hosts {
		best[h.name] = math.Inf(1)
	}
	skipped := map[string]bool{}
	if _, err := exec.LookPath("python3"); err != nil {
		b.Logf("python: skipped: %v", err)
		skipped["python"] = true
	}
	if _, err := exec.LookPath("node"); err != nil {
		b.Logf("node: skipped: %v", err)
		skipped["node"] = true
	} else if _, err := os.Stat(filepath.Join(root, "bindings", "node", "node_modules", "koffi")); err != nil {
		b.Logf("node: skipped: koffi is not installed (run npm ci in bindings/node)")
		skipped["node"] = true
	}
	env := []string{"IO_HARNESS_LIB=" + filepath.Join(libDir, "libio_harness.so.1")}
	b.ResetTimer()
	// The best of b.N rounds of each host, interleaved with the Go
	// baseline, so that all see the same machine.
	for i := 0; i < b.N; i++ {
		best["go"] = math.Min(best["go"], goEvents(b, n))
		for _, h := range hosts {
			if skipped[h.name] {
				continue
			}
			out := run(b, 3*time.Minute, "", env, h.cmd[0], h.cmd[1:]...)
			lines := strings.Fields(out)
			sec, err := strconv.ParseFloat(lines[len(lines)-1], 64)
			if err != nil {
				b.Fatalf("%s printed %q", h.name, out)
			}
			best[h.name] = math.Min(best[h.name], sec)
		}
	}
	b.ReportMetric(best["go"], "go-s")
	for _, h := range hosts {
		if !skipped[h.name] {
			b.ReportMetric(best[h.name], h.name+"-s")
			b.ReportMetric(best[h.name]/best["go"], h.name+"/go")
		}
	}
}

// echoTool is the Go tool of the host-tool benchmark's baseline.
type echoTool struct{}

func (echoTool) Spec() provider.ToolSpec {
	return provider.ToolSpec{Name: "echo", Description: "Returns its text.",
		Parameters: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`)}
}
func (echoTool) Idempotent() bool { return true }
func (echoTool) Call(_ context.Context, _ *tool.Env, args json.RawMessage) tool.Result {
	var a struct{ Text string }
	json.Unmarshal(args, &a)
	return tool.Result{Output: a.Text}
}

// goToolRun runs the benchmark's scripted run (n echo calls in one turn)
// in Go with the Go tool and returns its seconds.
func goToolRun(b *testing.B, n int) float64 {
	var calls []scripted.Call
	for i := 0; i < n; i++ {
		calls = append(calls, scripted.Call{Name: "echo", Arguments: json.RawMessage(`{"text":"x"}`)})
	}
	p, err := scripted.New(scripted.Script{Turns: []scripted.Turn{{Text: "t", ToolCalls: calls, Usage: &provider.Usage{InputTokens: 1, OutputTokens: 1}}}})
	if err != nil {
		b.Fatal(err)
	}
	task := harness.TaskContract{Goal: "g", Root: b.TempDir(), Budgets: harness.Budgets{MaxSteps: 1},
		Verification: []verify.Check{{Kind: verify.WorkspaceFileContains, File: "a", Text: "b"}}}
	start := time.Now()
	res, err := harness.Run(context.Background(), task, harness.Options{Provider: p, Tools: []tool.Tool{echoTool{}}})
	took := time.Since(start).Seconds()
	if err != nil || res.Outcome.Kind != harness.VerificationFailed {
		b.Fatalf("go run: %v %+v", err, res)
	}
	return took
}

// BenchmarkHostToolCall measures one host-language tool call over the C
// ABI (a Python function, a JavaScript function) against the same tool
// written in Go and registered with harness.Options.Tools, in this run:
// per call, (T(n calls) - T(0)) / n of one scripted run each.
func BenchmarkHostToolCall(b *testing.B) {
	needLib(b)
	const n = 200
	root := repoRoot()
	hosts := map[string][]string{
		"python": {"python3", filepath.Join(root, "bindings", "python", "bench_tools.py"), strconv.Itoa(n)},
		"node":   {"node", filepath.Join(root, "bindings", "node", "bench", "tools.js"), strconv.Itoa(n)},
	}
	if _, err := os.Stat(filepath.Join(root, "bindings", "node", "node_modules", "koffi")); err != nil {
		b.Logf("node: skipped: koffi is not installed (run npm ci in bindings/node)")
		delete(hosts, "node")
	}
	for name, cmd := range hosts {
		if _, err := exec.LookPath(cmd[0]); err != nil {
			b.Logf("%s: skipped: %v", name, err)
			delete(hosts, name)
		}
	}
	env := []string{"IO_HARNESS_LIB=" + filepath.Join(libDir, "libio_harness.so.1")}
	best := map[string]float64{"go": math.Inf(1), "python": math.Inf(1), "node": math.Inf(1)}
	goToolRun(b, 10)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		best["go"] = math.Min(best["go"], (goToolRun(b, n)-goToolRun(b, 0))/n)
		for name, cmd := range hosts {
			out := run(b, 5*time.Minute, "", env, cmd[0], cmd[1:]...)
			lines := strings.Fields(out)
			v, err := strconv.ParseFloat(lines[len(lines)-1], 64)
			if err != nil {
				b.Fatalf("%s printed %q", name, out)
			}
			best[name] = math.Min(best[name], v)
		}
	}
	b.ReportMetric(best["go"]*1e6, "go-us/call")
	for name := range hosts {
		b.ReportMetric(best[name]*1e6, name+"-us/call")
		b.ReportMetric(best[name]/best["go"], name+"/go")
	}
}

// goEvents drains n debug events from a harness queue in process, with
// the same batch size as the bindings, and returns the seconds it took.
func goEvents(b *testing.B, n int) float64 {
	a := abi.New(nil)
	ctx := context.Background()
	var opened struct {
		Result struct {
			Harness uint64 `json:"harness"`
		} `json:"result"`
	}
	json.Unmarshal(a.Call(ctx, []byte(`{"method":"harness.open","params":{"store":":memory:"}}`)), &opened)
	h := opened.Result.Harness
	defer a.Close(h, 5*time.Second)
	start := time.Now()
	a.Call(ctx, []byte(fmt.Sprintf(`{"method":"debug.emit","params":{"harness":%d,"count":%d}}`, h, n)))
	got := 0
	for {
		batch := a.Poll(h, time.Second, 1000)
		if batch == nil {
			b.Fatalf("stalled after %d events", got)
		}
		var evs []struct {
			Kind string `json:"kind"`
		}
		if err := json.Unmarshal(batch, &evs); err != nil {
			b.Fatal(err)
		}
		for _, e := range evs {
			if e.Kind == abi.KindDebugDone {
				if got != n {
					b.Fatalf("%d events, want %d", got, n)
				}
				return time.Since(start).Seconds()
			}
			got++
		}
	}
}
