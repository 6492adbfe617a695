package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/initorigin/io-harness-go/internal/pgtest"
	"github.com/initorigin/io-harness-go/pkg/harness/fleet"
	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/store"
	"github.com/initorigin/io-harness-go/pkg/harness/store/postgres"
)

// pg is this binary's PostgreSQL server, started on first use and stopped
// by TestMain.
var pg = &pgtest.Server{}

// fleetModel is the torture test's careful model for many runs at once,
// one per URL prefix /w/KEY/v1: at step k it appends "step k" to KEY's
// log.txt with edit_file, which is not idempotent, unless the log has it
// already (a call left in doubt), when it lists the directory. Each turn
// takes a random moment, so that a kill lands inside steps. It records a
// run whose requests overlap (two drivers at once) and requests made
// after the run's last step.
type fleetModel struct {
	mu       sync.Mutex
	rng      *rand.Rand
	runs     map[string]*fleetRun
	overlaps []string
}

type fleetRun struct {
	ws       string
	steps    int
	approval bool
	inFlight int
	requests int
	extra    int
}

func (m *fleetModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/w/"), "/")
	var req struct {
		Messages []struct {
			Role string `json:"role"`
		} `json:"messages"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	step := 1
	for _, msg := range req.Messages {
		if msg.Role == "assistant" {
			step++
		}
	}
	m.mu.Lock()
	run := m.runs[key]
	if run == nil {
		m.mu.Unlock()
		http.Error(w, "no run "+key, 404)
		return
	}
	run.requests++
	if run.inFlight++; run.inFlight > 1 {
		m.overlaps = append(m.overlaps, fmt.Sprintf("%s step %d", key, step))
	}
	if step > run.steps {
		run.extra++
	}
	delay := time.Duration(20+m.rng.IntN(100)) * time.Millisecond
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		run.inFlight--
		m.mu.Unlock()
	}()
	log, _ := os.ReadFile(filepath.Join(run.ws, "log.txt"))
	name, args := "edit_file", fmt.Sprintf(`{"path":"log.txt","old_text":"<END>","new_text":"step %d\n<END>"}`, step)
	switch {
	case run.approval && step == 1:
		name, args = "write_file", `{"path":"approved.txt","content":"yes"}`
	case run.approval, bytes.Contains(log, fmt.Appendf(nil, "step %d\n", step)), step > run.steps:
		name, args = "list_dir", `{}`
	}
	select {
	case <-time.After(delay):
	case <-r.Context().Done():
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fl := w.(http.Flusher)
	chunk := func(v any) {
		data, _ := json.Marshal(v)
		fmt.Fprintf(w, "data: %s\n\n", data)
		fl.Flush()
	}
	chunk(map[string]any{"id": "c", "object": "chat.completion.chunk", "choices": []any{map[string]any{"index": 0,
		"delta": map[string]any{"role": "assistant", "tool_calls": []any{map[string]any{"index": 0, "id": fmt.Sprintf("call_%d", step), "type": "function",
			"function": map[string]any{"name": name, "arguments": args}}}}}}})
	chunk(map[string]any{"id": "c", "object": "chat.completion.chunk", "choices": []any{map[string]any{"index": 0, "delta": map[string]any{},
		"finish_reason": "tool_calls"}}})
	chunk(map[string]any{"id": "c", "object": "chat.completion.chunk", "choices": []any{},
		"usage": map[string]any{"prompt_tokens": usagePerTurn.InputTokens, "completion_tokens": usagePerTurn.OutputTokens}})
	fmt.Fprint(w, "data: [DONE]\n\n")
}

// add makes run key's workspace and spec file.
func (m *fleetModel) add(t *testing.T, dir, base, key string, steps int, approval bool) (ws, spec string) {
	t.Helper()
	ws = filepath.Join(dir, "ws", key)
	os.MkdirAll(ws, 0o755)
	os.WriteFile(filepath.Join(ws, "log.txt"), []byte("<END>"), 0o644)
	m.mu.Lock()
	m.runs[key] = &fleetRun{ws: ws, steps: steps, approval: approval}
	m.mu.Unlock()
	check := map[string]any{"kind": "workspace_file_contains", "file": "log.txt", "text": fmt.Sprintf("step %d\n", steps)}
	doc := map[string]any{
		"task": map[string]any{"goal": "append the numbered lines", "root": ws, "verification": []any{check},
			"budgets": map[string]any{"max_steps": 4 * steps}},
		"provider": map[string]any{"name": "openai_compatible", "base_url": base + "/w/" + key + "/v1", "model": "m"},
	}
	if approval {
		doc["task"].(map[string]any)["verification"] = []any{map[string]any{"kind": "workspace_file_contains", "file": "approved.txt", "text": "yes"}}
		doc["policy"] = map[string]any{"version": 1, "defaults": map[string]any{"read": "allow", "write": "allow", "exec": "deny", "net": "allow"},
			"layers": []any{map[string]any{"name": "gate", "rules": []any{map[string]any{"act": "write", "effect": "ask", "pattern": "approved.txt"}}}}}
	}
	return ws, writeJSON(t, filepath.Join(dir, key+".json"), doc)
}

func newFleetModel(t *testing.T, seed uint64) (*fleetModel, string) {
	m := &fleetModel{rng: rand.New(rand.NewPCG(seed, 17)), runs: map[string]*fleetRun{}}
	srv := httptest.NewServer(m)
	t.Cleanup(srv.Close)
	return m, srv.URL
}

// withoutPassword returns dsn without its password, and the password,
// for PGPASSWORD: a password in a command line is visible to every user
// of the machine in the process list.
func withoutPassword(t *testing.T, dsn string) (string, string) {
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	pw, _ := u.User.Password()
	u.User = url.User(u.User.Username())
	return u.String(), pw
}

// proc is a CLI process the test runs in the background. done is closed
// when it has exited; err is then how.
type fleetProc struct {
	name string
	cmd  *exec.Cmd
	out  bytes.Buffer
	done chan struct{}
	err  error
}

func (p *fleetProc) String() string { return p.name + ":\n" + p.out.String() }

// start starts the CLI with extra environment, in the background; the
// test kills it at the end if it still runs.
func startCLI(t *testing.T, name string, env []string, args ...string) *fleetProc {
	t.Helper()
	p := &fleetProc{name: name, cmd: exec.Command(bin, args...), done: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), env...)
	sw := &syncWriter{w: &p.out}
	p.cmd.Stdout, p.cmd.Stderr = sw, sw
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.done
	})
	return p
}

type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(b)
}

func (p *fleetProc) output() string {
	p.cmd.Stdout.(*syncWriter).mu.Lock()
	defer p.cmd.Stdout.(*syncWriter).mu.Unlock()
	return p.out.String()
}

// cliEnv runs the CLI to its end with extra environment.
func cliEnv(t *testing.T, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("io-harness %v: %v", args, err)
	}
	return result{code, out.String(), errb.String()}
}

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// health reads a worker's health endpoint; nil while it does not answer.
func health(addr string) *fleet.Health {
	resp, err := http.Get("http://" + addr + "/healthz")
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var h fleet.Health
	if json.NewDecoder(resp.Body).Decode(&h) != nil {
		return nil
	}
	return &h
}

// until polls cond every 50ms for up to three minutes.
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited three minutes for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// The fleet test: three worker processes of the real CLI work 50
// submitted runs; one is killed with SIGKILL while it drives runs, and
// another is sent SIGTERM. Every run finishes exactly once, with success;
// no two drivers ever drove a run at once; every step's edit is in its
// workspace exactly once; every run's committed spend is its
// uninterrupted spend, what the killed calls cost being counted apart as
// lost; and no request came after a run's last step.
func TestFleetKillAndTerm(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the fleet test runs three workers over 50 runs")
	}
	dsn := pg.DSN(t)
	bare, pw := withoutPassword(t, dsn)
	env := []string{"PGPASSWORD=" + pw}
	dir := t.TempDir()
	m, base := newFleetModel(t, 2026)
	const runs, steps = 50, 6
	keys := make([]string, runs)
	wss := make([]string, runs)
	ids := make([]string, runs)
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i := range runs {
		keys[i] = fmt.Sprint("r", i)
		ws, spec := m.add(t, dir, base, keys[i], steps, false)
		wss[i] = ws
		wg.Go(func() {
			// Submitted with the password in the URL: it must show nowhere.
			r := cliEnv(t, nil, "submit", "--store", dsn, spec)
			mu.Lock()
			defer mu.Unlock()
			if r.code != 0 || strings.Contains(r.stdout+r.stderr, pw) {
				t.Errorf("submit %s: %s", keys[i], r)
				return
			}
			ids[i] = strings.TrimSpace(r.stdout)
		})
		if i%8 == 7 {
			wg.Wait()
		}
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	st, err := postgres.OpenReadOnly(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()

	addrs := []string{freeAddr(t), freeAddr(t), freeAddr(t)}
	workers := make([]*fleetProc, 3)
	for i := range workers {
		workers[i] = startCLI(t, fmt.Sprint("worker", i), env, "worker", "--store", bare, "--concurrency", "6",
			"--lease", "3s", "--grace", "20s", "--health", addrs[i], "--name", fmt.Sprint("w", i))
	}
	countFinished := func() int {
		n := 0
		for _, id := range ids {
			if r, err := st.Run(context.Background(), id); err == nil && r.Status == store.StatusFinished {
				n++
			}
		}
		return n
	}
	// Kill worker 0 while it drives runs that have begun, once the fleet
	// has finished a few.
	var killedRuns []string
	until(t, "worker 0 to drive runs past their first step", func() bool {
		h := health(addrs[0])
		if h == nil || len(h.Held) < 2 || countFinished() < 5 {
			return false
		}
		for _, held := range h.Held {
			if held.Step >= 2 {
				for _, hr := range h.Held {
					killedRuns = append(killedRuns, hr.RunID)
				}
				return true
			}
		}
		return false
	})
	workers[0].cmd.Process.Signal(syscall.SIGKILL)
	<-workers[0].done
	t.Logf("killed worker 0 (kill -9) while it drove %v; %d runs finished", killedRuns, countFinished())

	// Send SIGTERM to worker 1 while it drives runs, later on.
	until(t, "worker 1 to drive runs", func() bool {
		h := health(addrs[1])
		return h != nil && len(h.Held) > 0 && countFinished() >= 15
	})
	termed := health(addrs[1]).Held
	workers[1].cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-workers[1].done:
		if err := workers[1].err; err != nil {
			t.Errorf("the SIGTERMed worker exited with %v:\n%s", err, workers[1].output())
		}
	case <-time.After(2 * time.Minute):
		t.Fatalf("the SIGTERMed worker did not exit:\n%s", workers[1].output())
	}
	t.Logf("worker 1 stopped on SIGTERM while it drove %d runs; %d runs finished", len(termed), countFinished())

	ctx := context.Background()
	deadline := time.Now().Add(3 * time.Minute)
	for countFinished() < runs {
		if time.Now().After(deadline) {
			for _, id := range ids {
				r, _ := st.Run(ctx, id)
				if r == nil || r.Status == store.StatusFinished {
					continue
				}
				l, _ := st.Lease(ctx, id)
				t.Logf("unfinished %s: %s after %d steps, lease %+v", id, r.Status, r.Steps, l)
				log, _ := st.QueueLog(ctx, id)
				for _, e := range log {
					t.Logf("  %s %s %s job %d attempt %d: %s", e.At.Format("15:04:05.000"), e.Action, e.Worker, e.Job, e.Attempt, e.Detail)
				}
			}
			t.Fatalf("waited three minutes for every run to finish; worker 2:\n%s", workers[2].output())
		}
		time.Sleep(50 * time.Millisecond)
	}
	rescued, handedBack := 0, 0
	var lost int64
	for i, id := range ids {
		r, err := st.Run(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if r.Outcome != "success" || r.Steps != steps {
			t.Errorf("run %s: %s after %d steps", id, r.Outcome, r.Steps)
		}
		want := provider.Usage{InputTokens: steps * usagePerTurn.InputTokens, OutputTokens: steps * usagePerTurn.OutputTokens}
		if r.Usage != want {
			t.Errorf("run %s: committed spend %+v, want the uninterrupted %+v", id, r.Usage, want)
		}
		m.mu.Lock()
		fr := m.runs[keys[i]]
		uncommitted := int64(fr.requests - steps)
		extra := fr.extra
		m.mu.Unlock()
		lost += r.LostUsage.Total()
		if r.LostUsage.Total() > uncommitted*usagePerTurn.Total() {
			t.Errorf("run %s: lost spend %d tokens, more than its %d uncommitted requests cost", id, r.LostUsage.Total(), uncommitted)
		}
		if extra != 0 {
			t.Errorf("run %s: %d requests after its last step", id, extra)
		}
		checkLog(t, wss[i], steps)
		stepsStored, err := st.Steps(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		for k, s := range stepsStored {
			if s.Step != k+1 {
				t.Errorf("run %s: step %d stored at %d", id, s.Step, k+1)
			}
		}
		events, _ := st.Events(ctx, id, 0, 0)
		outcomes := 0
		for _, e := range events {
			if e.Kind == "outcome" {
				outcomes++
			}
		}
		if outcomes != 1 {
			t.Errorf("run %s finished %d times", id, outcomes)
		}
		log, _ := st.QueueLog(ctx, id)
		for _, e := range log {
			switch e.Action {
			case fleet.ActionRescued:
				rescued++
			case fleet.ActionHandedBack:
				handedBack++
			}
		}
	}
	m.mu.Lock()
	overlaps := m.overlaps
	m.mu.Unlock()
	if len(overlaps) > 0 {
		t.Errorf("two drivers drove a run at once: %v", overlaps)
	}
	if rescued == 0 {
		t.Errorf("no run of the killed worker was rescued")
	}
	if len(termed) > 0 && handedBack == 0 {
		t.Errorf("the SIGTERMed worker held %d runs and handed none back:\n%s", len(termed), workers[1].output())
	}
	for _, w := range workers {
		if strings.Contains(w.output(), pw) {
			t.Errorf("%s printed the password", w.name)
		}
	}
	t.Logf("%d runs finished; %d rescue(s), %d hand-back(s); %d tokens of calls cut by the kill counted as lost", runs, rescued, handedBack, lost)
	if testing.Verbose() {
		for _, h := range termed {
			log, _ := st.QueueLog(ctx, h.RunID)
			for _, e := range log {
				t.Logf("SIGTERMed %s: %s %s %s", h.RunID, e.Action, e.Worker, e.Detail)
			}
		}
	}
}

// checkLog checks each step's line is in the log exactly once.
func checkLog(t *testing.T, ws string, steps int) {
	t.Helper()
	var want strings.Builder
	for k := 1; k <= steps; k++ {
		fmt.Fprintf(&want, "step %d\n", k)
	}
	want.WriteString("<END>")
	if got, _ := os.ReadFile(filepath.Join(ws, "log.txt")); string(got) != want.String() {
		t.Errorf("%s (an edit lost or applied twice):\n%s", ws, got)
	}
}

// A run paused for approval frees its worker; the approval, given from
// another process with io-harness approve, is carried out by whichever
// worker claims it. runs shows the run paused, then finished; a second
// approval is refused; trace shows the queue's actions.
func TestFleetApprovalFromAnotherProcess(t *testing.T) {
	dsn := pg.DSN(t)
	bare, pw := withoutPassword(t, dsn)
	env := []string{"PGPASSWORD=" + pw}
	dir := t.TempDir()
	m, base := newFleetModel(t, 7)
	ws, spec := m.add(t, dir, base, "ap", 1, true)
	r := cliEnv(t, env, "submit", "--store", bare, spec)
	if r.code != 0 {
		t.Fatalf("submit: %s", r)
	}
	id := strings.TrimSpace(r.stdout)
	runs := func() string {
		r := cliEnv(t, env, "runs", "--store", bare)
		if r.code != 0 {
			t.Fatalf("runs: %s", r)
		}
		return r.stdout
	}
	if out := runs(); !strings.Contains(out, id) || !strings.Contains(out, " queued ") {
		t.Errorf("runs before any worker:\n%s", out)
	}
	a := startCLI(t, "worker a", env, "worker", "--store", bare, "--concurrency", "2", "--lease", "3s", "--name", "a")
	b := startCLI(t, "worker b", env, "worker", "--store", bare, "--concurrency", "2", "--lease", "3s", "--name", "b")
	st, err := postgres.OpenReadOnly(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var request string
	until(t, "the run to pause", func() bool {
		rec, err := st.Run(context.Background(), id)
		if err != nil || rec.Status != store.StatusPaused {
			return false
		}
		as, _ := st.Approvals(context.Background(), id)
		request = as[0].ID
		return true
	})
	until(t, "the pause in the queue log", func() bool {
		log, _ := st.QueueLog(context.Background(), id)
		return len(log) > 0 && log[len(log)-1].Action == fleet.ActionPaused
	})
	if out := runs(); !strings.Contains(out, " paused ") {
		t.Errorf("runs of a paused run:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(ws, "approved.txt")); err == nil {
		t.Fatal("the write that waits for a person happened")
	}
	r = cliEnv(t, env, "approve", "--store", bare, id, request, "--allow")
	if r.code != 0 || !strings.Contains(r.stdout, "queued") {
		t.Fatalf("approve: %s", r)
	}
	r = cliEnv(t, env, "approve", "--store", bare, id, request, "--deny", "no")
	if r.code == 0 || !strings.Contains(r.stderr, "conflict") {
		t.Errorf("a second decision: %s", r)
	}
	until(t, "the run to finish", func() bool {
		rec, err := st.Run(context.Background(), id)
		return err == nil && rec.Status == store.StatusFinished
	})
	if data, _ := os.ReadFile(filepath.Join(ws, "approved.txt")); string(data) != "yes" {
		t.Errorf("approved.txt = %q", data)
	}
	until(t, "the finish in the queue log", func() bool {
		log, _ := st.QueueLog(context.Background(), id)
		return len(log) > 0 && log[len(log)-1].Action == fleet.ActionFinished
	})
	if out := runs(); !strings.Contains(out, " finished ") || !strings.Contains(out, "success") {
		t.Errorf("runs of a finished run:\n%s", out)
	}
	tr := cliEnv(t, env, "trace", "--store", bare, id)
	for _, want := range []string{"outcome: success", "queue", "submitted", "claimed", "paused", "decision_queued", "approve on request " + request, "finished"} {
		if !strings.Contains(tr.stdout, want) {
			t.Errorf("trace lacks %q:\n%s", want, tr.stdout)
		}
	}
	for _, p := range []*fleetProc{a, b} {
		if strings.Contains(p.output(), pw) {
			t.Errorf("%s printed the password", p.name)
		}
	}
}

// An uploaded workspace travels with the submission, is worked on in the
// worker's directory, and comes back with fetch.
func TestFleetUploadAndFetch(t *testing.T) {
	dsn := pg.DSN(t)
	dir := t.TempDir()
	m, base := newFleetModel(t, 9)
	ws, spec := m.add(t, dir, base, "up", 2, false)
	r := cliEnv(t, nil, "submit", "--store", dsn, "--upload", spec)
	if r.code != 0 {
		t.Fatalf("submit --upload: %s", r)
	}
	id := strings.TrimSpace(r.stdout)
	workspaces := filepath.Join(dir, "worker-workspaces")
	m.mu.Lock()
	m.runs["up"].ws = filepath.Join(workspaces, id)
	m.mu.Unlock()
	startCLI(t, "worker", nil, "worker", "--store", dsn, "--workspaces", workspaces, "--lease", "3s")
	st, err := postgres.OpenReadOnly(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	until(t, "the result to be stored", func() bool {
		log, _ := st.QueueLog(context.Background(), id)
		return slices.ContainsFunc(log, func(e postgres.QueueEntry) bool { return e.Action == fleet.ActionStoredResult })
	})
	out := filepath.Join(dir, "fetched")
	if r := cliEnv(t, nil, "fetch", "--store", dsn, id, out); r.code != 0 || !strings.Contains(r.stdout, "files of run") {
		t.Fatalf("fetch: %s", r)
	}
	checkLog(t, out, 2)
	if data, _ := os.ReadFile(filepath.Join(ws, "log.txt")); string(data) != "<END>" {
		t.Errorf("the submitter's copy changed: %q", data)
	}
	if r := cliEnv(t, nil, "fetch", "--store", dsn, id, out); r.code == 0 {
		t.Errorf("a fetch into a full directory: %s", r)
	}
}

// The fleet commands refuse a store that is not a fleet's, and a DSN's
// password shows in no message, even when it is wrong.
func TestFleetCommandsRefuseAndRedact(t *testing.T) {
	dir := t.TempDir()
	spec := writeJSON(t, filepath.Join(dir, "s.json"), map[string]any{"task": map[string]any{"goal": "g", "root": dir,
		"verification": []any{map[string]any{"kind": "workspace_file_contains", "file": "a", "text": "b"}}},
		"provider": map[string]any{"name": "scripted", "script": map[string]any{"turns": []any{map[string]any{"text": "x"}}}}})
	for _, args := range [][]string{
		{"submit", spec},
		{"submit", "--store", filepath.Join(dir, "trace.db"), spec},
		{"worker", "--store", filepath.Join(dir, "trace.db")},
		{"fetch", "--store", filepath.Join(dir, "trace.db"), "run_x", filepath.Join(dir, "out")},
	} {
		if r := cliEnv(t, nil, args...); r.code != exitUsage || !strings.Contains(r.stderr, "postgres://") {
			t.Errorf("%v: %s", args, r)
		}
	}
	admin := pg.Admin(t)
	u, _ := url.Parse(admin)
	const wrong = "Wr0ng-pass-7781"
	u.User = url.UserPassword("ioh", wrong)
	for _, args := range [][]string{
		{"submit", "--store", u.String(), spec},
		{"runs", "--store", u.String()},
		{"trace", "--store", u.String(), "run_x"},
		{"worker", "--store", u.String()},
		{"run", "--store", u.String(), spec},
	} {
		r := cliEnv(t, nil, args...)
		if r.code == 0 || !strings.Contains(r.stderr, "password authentication failed") {
			t.Errorf("%v with a wrong password: %s", args, r)
		}
		if strings.Contains(r.stdout+r.stderr, wrong) {
			t.Errorf("%v printed the password: %s", args, r)
		}
	}
	if r := cliEnv(t, nil, "worker", "--store", admin, "--health", "0.0.0.0:1"); r.code != exitUsage {
		t.Errorf("a health address that is not loopback: %s", r)
	}
}

// submit refuses a spec that run refuses, with run's exit code and the
// field it names, and queues nothing.
func TestSubmitRefusesWhatRunRefuses(t *testing.T) {
	dsn := pg.DSN(t)
	dir := t.TempDir()
	spec := writeJSON(t, filepath.Join(dir, "s.json"), map[string]any{"task": map[string]any{"goal": "g", "root": dir,
		"verification": []any{map[string]any{"kind": "workspace_file_contains", "file": "a", "text": "b"}}},
		"provider": map[string]any{"name": "no-such-vendor", "model": "m"}})
	run := cliEnv(t, nil, "run", "--store", filepath.Join(dir, "trace.db"), spec)
	if run.code != exitError || !strings.Contains(run.stderr, "field: spec.provider.name") {
		t.Fatalf("run of a bad spec: %s", run)
	}
	sub := cliEnv(t, nil, "submit", "--store", dsn, spec)
	if sub.code != run.code || !strings.Contains(sub.stderr, "field: spec.provider.name") {
		t.Errorf("submit of the spec run refuses: %s", sub)
	}
	if r := cliEnv(t, nil, "runs", "--store", dsn, "--json"); r.code != 0 || strings.Contains(r.stdout, "run_") {
		t.Errorf("the refused spec was queued: %s", r)
	}
}
