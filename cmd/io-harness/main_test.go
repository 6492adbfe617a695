package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// bin is the io-harness binary built for these tests.
var bin string

func TestMain(m *testing.M) {
	if os.Getenv(liveStoreEnv) != "" {
		os.Exit(m.Run()) // a helper process (TestLiveDriverHelper): no CLI to build
	}
	dir, err := os.MkdirTemp("", "io-harness-cli-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = filepath.Join(dir, "io-harness")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	cmd := exec.CommandContext(ctx, goTool(), "build", "-o", bin, ".")
	out, err := cmd.CombinedOutput()
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	pg.Stop()
	os.RemoveAll(dir)
	os.Exit(code)
}

func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(runtime.GOROOT(), "bin", "go")
}

type result struct {
	code           int
	stdout, stderr string
}

// cli runs the binary in dir with a timeout.
func cli(t *testing.T, dir, stdin string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader(stdin)
	cmd.WaitDelay = 5 * time.Second
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("io-harness %v: timed out\n%s\n%s", args, out.String(), errb.String())
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("io-harness %v: %v", args, err)
	}
	return result{code, out.String(), errb.String()}
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

// writeFixture writes the named shared fixture's spec with a fresh
// workspace into dir and returns its path.
func writeFixture(t *testing.T, dir, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "internal", "abi", "testdata", "fixtures", name, "spec.json"))
	if err != nil {
		t.Fatal(err)
	}
	ws := t.TempDir()
	q, _ := json.Marshal(ws)
	p := filepath.Join(dir, name+".json")
	if err := os.WriteFile(p, bytes.ReplaceAll(data, []byte(`"$WORKSPACE"`), q), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func writeJSON(t *testing.T, path string, v any) string {
	t.Helper()
	data, _ := json.Marshal(v)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestHelpAndUsage(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"help"}, exitOK, "Exit codes:"},
		{[]string{"--help"}, exitOK, "Commands:"},
		{nil, exitUsage, "Commands:"},
		{[]string{"frobnicate"}, exitUsage, "unknown command"},
		{[]string{"run", "--help"}, exitOK, "Usage: io-harness run"},
		{[]string{"resume", "--help"}, exitOK, "-max-steps"},
		{[]string{"approve", "--help"}, exitOK, "-allow"},
		{[]string{"trace", "--help"}, exitOK, "Usage: io-harness trace"},
		{[]string{"runs", "--help"}, exitOK, "Usage: io-harness runs"},
		{[]string{"policy", "explain", "--help"}, exitOK, "POLICY ACT TARGET"},
		{[]string{"sandbox", "exec", "--help"}, exitOK, "-backend"},
		{[]string{"sandbox", "backends", "--help"}, exitOK, "backends probes"},
		{[]string{"sandbox", "--help"}, exitOK, "sandbox exec"},
		{[]string{"version", "--help"}, exitOK, "Usage: io-harness version"},
		{[]string{"run"}, exitUsage, "want exactly one SPEC.json"},
		{[]string{"run", "--nope", "x.json"}, exitUsage, "flag provided but not defined"},
		{[]string{"approve", "--spec", "s.json", "r", "q"}, exitUsage, "exactly one of --allow"},
		{[]string{"policy", "explain", "default", "read"}, exitUsage, "want POLICY ACT TARGET"},
		{[]string{"sandbox", "exec"}, exitUsage, "give the command after --"},
	} {
		t.Run(strings.Join(tc.args, "_"), func(t *testing.T) {
			r := cli(t, dir, "", tc.args...)
			if r.code != tc.code || !strings.Contains(r.stdout+r.stderr, tc.want) {
				t.Errorf("want exit %d and %q; got %s", tc.code, tc.want, r)
			}
		})
	}
}

func TestVersion(t *testing.T) {
	r := cli(t, t.TempDir(), "", "version")
	if r.code != 0 || !regexp.MustCompile(`^io-harness \d+\.\d+\.\d+ \(ABI 1\.\d+`).MatchString(r.stdout) {
		t.Errorf("%s", r)
	}
	r = cli(t, t.TempDir(), "", "version", "--json")
	var v struct {
		Methods []string `json:"methods"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &v) != nil || len(v.Methods) == 0 {
		t.Errorf("%s", r)
	}
}

// A run to success with progress, then its trace and the run list, read
// from the default store in the working directory.
func TestRunTraceRuns(t *testing.T) {
	dir := t.TempDir()
	spec := writeFixture(t, dir, "success")
	r := cli(t, dir, "", "run", spec)
	if r.code != exitOK {
		t.Fatalf("%s", r)
	}
	for _, want := range []string{"step 1", "tool:  write_file", "outcome: success after 1 step(s), 144 tokens"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("progress lacks %q:\n%s", want, r.stdout)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, defaultStore)); err != nil {
		t.Errorf("no default store: %v", err)
	}
	runID := regexp.MustCompile(`run (run_[0-9a-f]+)`).FindStringSubmatch(r.stdout)[1]
	tr := cli(t, dir, "", "trace", runID)
	if tr.code != 0 || !strings.Contains(tr.stdout, "outcome: success") {
		t.Errorf("trace: %s", tr)
	}
	tj := cli(t, dir, "", "trace", "--json", runID)
	var trace struct {
		Run struct {
			ID string `json:"id"`
		} `json:"run"`
	}
	if tj.code != 0 || json.Unmarshal([]byte(tj.stdout), &trace) != nil || trace.Run.ID != runID {
		t.Errorf("trace --json: %s", tj)
	}
	if r := cli(t, dir, "", "trace", "run_nope"); r.code != exitError || !strings.Contains(r.stderr, "not_found") {
		t.Errorf("unknown run: %s", r)
	}
	if r := cli(t, dir, "", "runs"); r.code != 0 || !strings.Contains(r.stdout, runID) {
		t.Errorf("runs: %s", r)
	}
	if r := cli(t, dir, "", "trace", "--store", filepath.Join(dir, "missing.db"), runID); r.code != exitError {
		t.Errorf("missing store: %s", r)
	}
}

// --json prints one JSON event per line, in the fixture's golden order.
func TestRunJSON(t *testing.T) {
	dir := t.TempDir()
	spec := writeFixture(t, dir, "approve")
	r := cli(t, dir, "y\n", "run", "--json", "--approvals", "ask", "--store", filepath.Join(dir, "x.db"), spec)
	if r.code != exitOK {
		t.Fatalf("%s", r)
	}
	var kinds []string
	sc := bufio.NewScanner(strings.NewReader(r.stdout))
	for sc.Scan() {
		var ev struct {
			Kind string `json:"kind"`
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("not a JSON line: %q", sc.Text())
		}
		kinds = append(kinds, ev.Kind)
	}
	golden, _ := os.ReadFile(filepath.Join("..", "..", "internal", "abi", "testdata", "fixtures", "approve", "events.golden"))
	if diff := cmp.Diff(strings.Fields(string(golden)), kinds); diff != "" {
		t.Errorf("event kinds (-golden +got):\n%s", diff)
	}
}

// A deferred approval exits 5 and says how to answer; approve answers it
// in a new process and the run finishes.
func TestDeferThenApprove(t *testing.T) {
	dir := t.TempDir()
	spec := writeFixture(t, dir, "defer_resume")
	r := cli(t, dir, "", "run", spec) // stdin is not a terminal: approvals defer
	if r.code != exitAwaiting {
		t.Fatalf("%s", r)
	}
	m := regexp.MustCompile(`io-harness approve --spec \S+ (run_[0-9a-f]+) (apr_[0-9a-f]+)`).FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("no approve hint:\n%s", r.stdout)
	}
	a := cli(t, dir, "", "approve", "--spec", spec, m[1], m[2], "--allow")
	if a.code != exitOK || !strings.Contains(a.stdout, "outcome: success") {
		t.Fatalf("approve: %s", a)
	}
	again := cli(t, dir, "", "approve", "--spec", spec, m[1], m[2], "--deny", "too late")
	if again.code != exitError || !strings.Contains(again.stderr, "conflict") {
		t.Errorf("second answer: %s", again)
	}
}

// --approvals ask reads the answer from stdin.
func TestAskOnStdin(t *testing.T) {
	dir := t.TempDir()
	spec := writeFixture(t, dir, "deny")
	r := cli(t, dir, "maybe\nn not the config\n", "run", "--approvals", "ask", spec)
	if r.code != exitOK || !strings.Contains(r.stderr, "approval needed: write_file wants to write config.toml") ||
		!strings.Contains(r.stdout, "refused: denied by the approver: not the config") {
		t.Errorf("%s", r)
	}
}

// Budgets exit 3 and resume continues with a larger one; escalated exits 6;
// a bad spec exits 1 naming the field.
func TestExitCodes(t *testing.T) {
	dir := t.TempDir()
	spec := writeFixture(t, dir, "step_cap")
	r := cli(t, dir, "", "run", spec)
	if r.code != exitBudget {
		t.Fatalf("step cap: %s", r)
	}
	runID := regexp.MustCompile(`resume --max-steps N \S+ (run_[0-9a-f]+)`).FindStringSubmatch(r.stdout)
	if runID == nil {
		t.Fatalf("no resume hint: %s", r)
	}
	if r := cli(t, dir, "", "resume", "--max-steps", "3", spec, runID[1]); r.code != exitOK {
		t.Errorf("resume: %s", r)
	}
	escalate := writeJSON(t, filepath.Join(dir, "escalate.json"), map[string]any{
		"task": map[string]any{"goal": "g", "root": t.TempDir(),
			"verification": []any{map[string]any{"kind": "workspace_file_contains", "file": "a", "text": "b"}}},
		"provider": map[string]any{"name": "scripted", "script": map[string]any{"turns": []any{map[string]any{"text": "only one turn"}}}},
	})
	if r := cli(t, dir, "", "run", escalate); r.code != exitEscalated {
		t.Errorf("escalated: %s", r)
	}
	bad := writeJSON(t, filepath.Join(dir, "bad.json"), map[string]any{"task": map[string]any{"goal": ""}, "provider": map[string]any{"name": "scripted"}})
	if r := cli(t, dir, "", "run", bad); r.code != exitError || !strings.Contains(r.stderr, "invalid_argument") || !strings.Contains(r.stderr, "field: spec.task.goal") {
		t.Errorf("bad spec: %s", r)
	}
	if r := cli(t, dir, "", "run", filepath.Join(dir, "nope.json")); r.code != exitError {
		t.Errorf("missing spec: %s", r)
	}
}

// Ctrl-C cancels the run: exit 130. The model's turn takes an hour and
// the command is killed after two minutes (a guard no loaded machine
// needs): an exit 130 comes only from a stop that cancelled the turn
// instead of waiting for it.
func TestInterrupt(t *testing.T) {
	dir := t.TempDir()
	spec := writeJSON(t, filepath.Join(dir, "slow.json"), map[string]any{
		"task": map[string]any{"goal": "wait", "root": t.TempDir(),
			"verification": []any{map[string]any{"kind": "workspace_file_contains", "file": "a", "text": "b"}}},
		"provider": map[string]any{"name": "scripted", "script": map[string]any{"turns": []any{map[string]any{"text": "slow", "latency_ms": 3_600_000}}}},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "run", spec)
	cmd.Dir = dir
	cmd.WaitDelay = 5 * time.Second
	stdout, _ := cmd.StdoutPipe()
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	var out strings.Builder
	for sc.Scan() {
		out.WriteString(sc.Text() + "\n")
		if strings.HasPrefix(sc.Text(), "step 1") {
			break
		}
	}
	cmd.Process.Signal(syscall.SIGINT)
	for sc.Scan() {
		out.WriteString(sc.Text() + "\n")
	}
	err := cmd.Wait()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != exitCancelled {
		t.Fatalf("exit %v, want %d\n%s\n%s", err, exitCancelled, out.String(), errb.String())
	}
	if !strings.Contains(out.String(), "outcome: cancelled") {
		t.Errorf("output:\n%s", out.String())
	}
	// Issue 15: resuming the cancelled run without --reopen printed
	// nothing. It says what happened and how to drive the run again.
	runID := regexp.MustCompile(`run (run_[0-9a-f]+)`).FindStringSubmatch(out.String())[1]
	r := cli(t, dir, "", "resume", spec, runID)
	if r.code != exitCancelled || !strings.Contains(r.stdout, "had already ended cancelled") ||
		!strings.Contains(r.stdout, "io-harness resume --reopen "+spec+" "+runID) {
		t.Errorf("resume of a cancelled run: %s", r)
	}
}

func TestPolicyExplain(t *testing.T) {
	dir := t.TempDir()
	pol := writeJSON(t, filepath.Join(dir, "policy.json"), map[string]any{"version": 1,
		"defaults": map[string]any{"read": "allow", "write": "ask", "exec": "deny", "net": "deny"},
		"layers":   []any{map[string]any{"name": "project", "rules": []any{map[string]any{"act": "write", "effect": "deny", "pattern": "vendor/**"}}}}})
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"policy", "explain", pol, "write", "vendor/a.go"}, 0, `deny: write vendor/a.go, by rule "vendor/**" in layer "project"`},
		{[]string{"policy", "explain", pol, "write", "main.go"}, 0, "ask: write main.go, by the write default"},
		{[]string{"policy", "explain", "default", "read", ".env"}, 0, `deny: read .env, by rule ".env" in layer "builtin-secrets"`},
		{[]string{"policy", "explain", "--json", "permissive", "exec", "rm"}, 0, `"effect": "allow"`},
		{[]string{"policy", "explain", "default", "delete", "x"}, exitError, "invalid_argument"},
		{[]string{"policy", "explain", filepath.Join(dir, "none.json"), "read", "x"}, exitError, "no such file"},
	} {
		r := cli(t, dir, "", tc.args...)
		if r.code != tc.code || !strings.Contains(r.stdout+r.stderr, tc.want) {
			t.Errorf("%v: want exit %d and %q; got %s", tc.args, tc.code, tc.want, r)
		}
	}
}

func TestSandbox(t *testing.T) {
	dir := t.TempDir()
	r := cli(t, dir, "", "sandbox", "backends", "--json")
	var b struct {
		Backends []struct {
			Name      string `json:"name"`
			Available bool   `json:"available"`
		} `json:"backends"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &b) != nil || len(b.Backends) == 0 {
		t.Fatalf("backends: %s", r)
	}
	if r := cli(t, dir, "", "sandbox", "backends"); r.code != 0 || !strings.Contains(r.stdout, "host") {
		t.Errorf("backends: %s", r)
	}
	r = cli(t, dir, "", "sandbox", "exec", "--backend", "host", "--wall", "10", "--cpu", "5", "--memory", "268435456", "--", "sh", "-c", "echo hello; exit 4")
	if r.code != 0 {
		t.Fatalf("exec: %s", r)
	}
	var res struct {
		ExitCode int    `json:"exit_code"`
		Stdout   []byte `json:"stdout"`
		Backend  string `json:"backend"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || res.ExitCode != 4 || string(res.Stdout) != "hello\n" || res.Backend != "host" {
		t.Errorf("exec result %+v (%v): %s", res, err, r)
	}
	if r := cli(t, dir, "", "sandbox", "exec", "--backend", "nope", "--", "true"); r.code != exitError || !strings.Contains(r.stderr, "unavailable") {
		t.Errorf("unknown backend: %s", r)
	}
}

// TestSandboxWasi runs the wasm_tool example's program, built for WASI,
// through sandbox exec: with --backend wasi, and by its .wasm name alone.
// sandbox backends lists wasi.
func TestSandboxWasi(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir()) // the compiled-module cache
	dir := t.TempDir()
	tool := filepath.Join(dir, "wordcount.wasm")
	build := exec.Command(goTool(), "build", "-o", tool, "../../examples/wasm_tool/tool")
	build.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build the wasm tool: %v\n%s", err, out)
	}
	work := t.TempDir()
	if err := os.WriteFile(filepath.Join(work, "notes.txt"), []byte("to be or not to be\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"sandbox", "exec", "--backend", "wasi", "--workdir", work, "--", tool, "-top", "1", "notes.txt"},
		{"sandbox", "exec", "--workdir", work, "--memory", "268435456", "--", tool, "-top", "1", "notes.txt"},
	} {
		r := cli(t, dir, "", args...)
		var res struct {
			ExitCode int    `json:"exit_code"`
			Stdout   []byte `json:"stdout"`
			Backend  string `json:"backend"`
		}
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &res) != nil {
			t.Fatalf("%v: %s", args, r)
		}
		var rep struct{ Total struct{ Words int } }
		if res.ExitCode != 0 || res.Backend != "wasi" || json.Unmarshal(res.Stdout, &rep) != nil || rep.Total.Words != 6 {
			t.Errorf("%v: exit %d backend %q stdout %s", args, res.ExitCode, res.Backend, res.Stdout)
		}
	}
	r := cli(t, dir, "", "sandbox", "backends")
	if r.code != 0 || !regexp.MustCompile(`(?m)^  wasi +network denied; enforces filesystem`).MatchString(r.stdout) {
		t.Errorf("sandbox backends does not list wasi as working: %s", r)
	}
}

// A resume of a run another live process drives is refused with exit 7,
// naming the conflict, before it calls the model: the live run's file is
// untouched and it goes on. The control is the same resume with --force,
// which takes the run over.
func TestResumeOfALiveRunIsAConflict(t *testing.T) {
	dir := t.TempDir()
	ws := t.TempDir()
	spec := writeJSON(t, filepath.Join(dir, "slow.json"), map[string]any{
		"task": map[string]any{"goal": "wait", "root": ws,
			"verification": []any{map[string]any{"kind": "workspace_file_contains", "file": "a", "text": "b"}}},
		"provider": map[string]any{"name": "scripted", "script": map[string]any{"turns": []any{map[string]any{"text": "slow", "latency_ms": 60000}}}},
	})
	db := filepath.Join(dir, "trace.db")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	live := exec.CommandContext(ctx, bin, "run", "--store", db, spec)
	live.Dir = dir
	live.WaitDelay = 5 * time.Second
	stdout, _ := live.StdoutPipe()
	if err := live.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { live.Process.Kill(); live.Wait() }()
	sc := bufio.NewScanner(stdout)
	var runID string
	for sc.Scan() && runID == "" {
		if m := regexp.MustCompile(`run (run_[0-9a-f]+)`).FindStringSubmatch(sc.Text()); m != nil {
			runID = m[1]
		}
	}
	if runID == "" {
		t.Fatal("the live run printed no id")
	}
	go func() {
		for sc.Scan() {
		}
	}()
	r := cli(t, dir, "", "resume", "--store", db, spec, runID)
	if r.code != exitConflict || !strings.Contains(r.stderr, "conflict") {
		t.Fatalf("a resume of a live run: %s", r)
	}
	// It says how to take the run over with this command, not with the
	// Go API's field.
	if !strings.Contains(r.stderr, "io-harness resume --force --store "+shellQuote(db)+" "+shellQuote(spec)+" "+runID) || strings.Contains(r.stderr, "Force") {
		t.Errorf("the conflict does not say how to take the run over: %s", r)
	}
	if err := live.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("the live run ended: %v", err)
	}
	// The control: --force takes the run over and drives its step.
	force := exec.CommandContext(ctx, bin, "resume", "--force", "--store", db, spec, runID)
	force.Dir = dir
	forced, _ := force.StdoutPipe()
	if err := force.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { force.Process.Kill(); force.Wait() }()
	var lines []string
	fs := bufio.NewScanner(forced)
	for fs.Scan() && !strings.HasPrefix(fs.Text(), "step 1") {
		lines = append(lines, fs.Text())
	}
	if fs.Err() != nil || !strings.HasPrefix(fs.Text(), "step 1") {
		t.Fatalf("resume --force did not drive the run: %v\n%s", fs.Err(), strings.Join(lines, "\n"))
	}
}
