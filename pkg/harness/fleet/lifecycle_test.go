package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/initorigin/io-harness-go/pkg/harness"
	"github.com/initorigin/io-harness-go/pkg/harness/approve"
	"github.com/initorigin/io-harness-go/pkg/harness/store"
	"github.com/initorigin/io-harness-go/pkg/harness/store/postgres"
)

// A run that pauses for a person releases its worker; a decision queued
// through another connection — another process — is carried out by
// whichever worker claims it, and a second decision on the same request
// is refused.
func TestDecisionFromAnotherConnection(t *testing.T) {
	st, dsn := openStore(t)
	m, base := newModel(t)
	ctx := context.Background()
	ws, spec := m.add(t, base, "a", 1, true)
	id, err := Submit(ctx, st, spec, SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, _ := startWorker(t, st, WorkerOptions{Concurrency: 1})
	r := waitFor(t, st, id, "paused", func(r *store.Run) bool { return r.Status == store.StatusPaused })
	waitAction(t, st, id, ActionPaused)
	if runs, err := Runs(ctx, st, store.RunFilter{}); err != nil || runs[0].State != StatePaused || runs[0].Last.Action != ActionPaused {
		t.Errorf("Runs of a paused run: %+v %v", runs, err)
	}
	if h := w.Health(ctx); len(h.Held) != 0 {
		t.Errorf("a paused run still holds the worker: %+v", h.Held)
	}
	if _, err := os.Stat(filepath.Join(ws, "approved.txt")); err == nil {
		t.Fatal("the write that waits for a person happened")
	}
	approvals, err := st.Approvals(ctx, id)
	if err != nil || len(approvals) != 1 {
		t.Fatalf("approvals %+v %v", approvals, err)
	}
	other, err := postgres.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	req := approvals[0].ID
	if err := harness.Decide(ctx, other, id, req, approve.Decision{Kind: approve.Approve}, "a person"); err != nil {
		t.Fatal(err)
	}
	err = harness.Decide(ctx, other, id, req, approve.Decision{Kind: approve.Deny, Reason: "too late"}, "another person")
	if !errors.Is(err, approve.ErrAlreadyDecided) {
		t.Errorf("a second decision: %v", err)
	}
	r = waitFor(t, st, id, "finished", finished)
	if r.Outcome != string(harness.Success) || r.Steps != 1 {
		t.Errorf("after the approval: %s, %d steps", r.Outcome, r.Steps)
	}
	if data, _ := os.ReadFile(filepath.Join(ws, "approved.txt")); string(data) != "yes" {
		t.Errorf("approved.txt = %q", data)
	}
	got := waitAction(t, st, id, ActionFinished)
	want := []string{ActionSubmitted, ActionClaimed, ActionPaused, ActionDecisionQueued, ActionClaimed, ActionFinished}
	if !slices.Equal(got, want) {
		t.Errorf("queue log %v, want %v", got, want)
	}
	if n := m.requests("a")[1]; n != 1 {
		t.Errorf("step 1 was asked for %d times", n)
	}
}

// A worker that stops hands each run back at its next step boundary: the
// step under way commits, the next never starts on the stopping worker,
// and another worker finishes the run. Every step is asked for once.
func TestHandBackAtTheStepBoundary(t *testing.T) {
	st, _ := openStore(t)
	m, base := newModel(t)
	ctx := context.Background()
	const steps = 4
	m.delay = func(string, int) time.Duration { return 300 * time.Millisecond }
	ws, spec := m.add(t, base, "h", steps, false)
	id, err := Submit(ctx, st, spec, SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, stopA := startWorker(t, st, WorkerOptions{Concurrency: 1, Grace: time.Minute})
	waitFor(t, st, id, "at step 1", func(r *store.Run) bool { return r.Steps >= 1 })
	if err := stopA(); err != nil {
		t.Fatal(err)
	}
	r, _ := st.Run(ctx, id)
	if r.Status == store.StatusFinished {
		t.Fatalf("the run finished on the stopping worker: %+v", r)
	}
	if got := actions(t, st, id); !slices.Contains(got, ActionHandedBack) {
		t.Fatalf("queue log %v", got)
	}
	startWorker(t, st, WorkerOptions{Concurrency: 1})
	r = waitFor(t, st, id, "finished", finished)
	if r.Outcome != string(harness.Success) || r.Steps != steps || r.LostUsage.Total() != 0 {
		t.Errorf("%s after %d steps, lost %+v", r.Outcome, r.Steps, r.LostUsage)
	}
	checkEdits(t, ws, steps)
	for step, n := range m.requests("h") {
		if n != 1 {
			t.Errorf("step %d asked for %d times: a step was driven twice or cut", step, n)
		}
	}
}

// The negative control of the step boundary: once the grace period is
// over, a run inside a step is handed back there. The cut step is asked
// for again by the next worker, its spend is lost spend, and still no
// edit lands twice.
func TestHandBackMidStepAfterGrace(t *testing.T) {
	st, _ := openStore(t)
	m, base := newModel(t)
	ctx := context.Background()
	const steps = 2
	slow := make(chan struct{})
	m.delay = func(_ string, step int) time.Duration {
		if step == 2 {
			select {
			case <-slow:
				return 0
			default:
				return time.Minute
			}
		}
		return 0
	}
	ws, spec := m.add(t, base, "g", steps, false)
	id, err := Submit(ctx, st, spec, SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, stopA := startWorker(t, st, WorkerOptions{Concurrency: 1, Grace: 200 * time.Millisecond})
	deadline := time.Now().Add(time.Minute)
	for m.requests("g")[2] == 0 {
		if time.Now().After(deadline) {
			t.Fatal("step 2 never started")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := stopA(); err != nil {
		t.Fatal(err)
	}
	close(slow)
	startWorker(t, st, WorkerOptions{Concurrency: 1})
	r := waitFor(t, st, id, "finished", finished)
	if r.Outcome != string(harness.Success) || r.Steps != steps {
		t.Errorf("%s after %d steps", r.Outcome, r.Steps)
	}
	checkEdits(t, ws, steps)
	if n := m.requests("g")[2]; n != 2 {
		t.Errorf("the cut step was asked for %d times, want 2", n)
	}
	log, _ := st.QueueLog(ctx, id)
	if !slices.ContainsFunc(log, func(e postgres.QueueEntry) bool {
		return e.Action == ActionHandedBack && e.Detail == "the worker stopped, and its grace period ended inside a step"
	}) {
		t.Errorf("queue log %+v", log)
	}
}

// A run whose worker died with it is swept up and finished by another
// worker: one whose lease names a process on this host that is gone, long
// before the lease would expire, and one that a worker took from the
// queue and died with before it could take the lease. A run a live
// process on another host holds is left alone, though its job looks just
// as old; so is a run whose job has ended, which stays stalled.
func TestSweepRescuesADeadDriver(t *testing.T) {
	st, _ := openStore(t)
	m, base := newModel(t)
	ctx := context.Background()
	self := store.Self()
	gone := store.Owner{Host: self.Host, PID: 1 << 30, Started: time.UnixMilli(1_700_000_000_000)}
	elsewhere := store.Owner{Host: "elsewhere.invalid", PID: 1, Started: time.UnixMilli(1_700_000_000_000)}
	c, _ := inserter(st)
	// takeJob makes the run's job look taken an hour ago by a worker that
	// is no more, as River leaves it when its worker dies.
	takeJob := func(id string, cancel bool) {
		jobs, err := jobsOf(ctx, st, []string{id}, waiting)
		if err != nil || len(jobs[id]) != 1 {
			t.Fatalf("jobs of %s: %v %v", id, jobs, err)
		}
		j := jobs[id][0]
		if cancel {
			if _, err := c.JobCancel(ctx, j.ID); err != nil {
				t.Fatal(err)
			}
			return
		}
		if _, err := st.Pool().Exec(ctx, `UPDATE river_job SET state = 'running', attempt = 1,
			attempted_at = now() - interval '1 hour', attempted_by = '{dead-worker}' WHERE id = $1`, j.ID); err != nil {
			t.Fatal(err)
		}
	}
	var ids []string
	for i, c := range []struct {
		owner  *store.Owner // nil: never claimed
		cancel bool
	}{{&gone, false}, {nil, false}, {&elsewhere, false}, {&gone, true}} {
		_, spec := m.add(t, base, fmt.Sprint("s", i), 1, false)
		id, err := Submit(ctx, st, spec, SubmitOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
		takeJob(id, c.cancel)
		if c.owner == nil {
			continue
		}
		l, err := st.Acquire(ctx, id, *c.owner, time.Hour, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.ReopenRun(ctx, l, mustTask(t, st, id), nil, time.Now(), nil); err != nil {
			t.Fatal(err)
		}
	}
	states := func() map[string]RunState {
		runs, err := Runs(ctx, st, store.RunFilter{})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]RunState{}
		for _, rs := range runs {
			out[rs.ID] = rs
		}
		return out
	}
	if rs := states()[ids[0]]; rs.State != StateStalled || rs.Worker != "" {
		t.Errorf("a run whose driver is gone and that no job waits for: %s %q", rs.State, rs.Worker)
	}
	startWorker(t, st, WorkerOptions{Concurrency: 2, LeaseTTL: 500 * time.Millisecond})
	for _, id := range ids[:2] {
		r := waitFor(t, st, id, "finished", finished)
		if r.Outcome != string(harness.Success) {
			t.Errorf("the rescued run %s: %s", id, r.Outcome)
		}
		if got := actions(t, st, id); !slices.Contains(got, ActionRescued) {
			t.Errorf("queue log of %s: %v", id, got)
		}
		if rs := states()[id]; rs.State != StateFinished {
			t.Errorf("the rescued run is %s", rs.State)
		}
	}
	got := states()
	if rs := got[ids[2]]; rs.State != StateRunning || rs.Worker != "elsewhere.invalid:1" {
		t.Errorf("the live run elsewhere: %s by %q", rs.State, rs.Worker)
	}
	if rs := got[ids[3]]; rs.State != StateStalled {
		t.Errorf("a run whose job ended: %s", rs.State)
	}
	for _, id := range ids[2:] {
		if got := actions(t, st, id); slices.Contains(got, ActionRescued) {
			t.Errorf("run %s was rescued: %v", id, got)
		}
	}
}

func mustTask(t *testing.T, st *postgres.Store, id string) json.RawMessage {
	t.Helper()
	r, err := st.Run(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return r.Task
}

// A worker that cannot reach a run's workspace refuses it, says so in the
// queue log, and leaves it to the queue: once the workspace is there
// again, a retry finishes the run.
func TestUnreachableWorkspaceIsRefused(t *testing.T) {
	st, _ := openStore(t)
	m, base := newModel(t)
	ctx := context.Background()
	ws, spec := m.add(t, base, "u", 1, false)
	id, err := Submit(ctx, st, spec, SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	moved := ws + ".away"
	if err := os.Rename(ws, moved); err != nil {
		t.Fatal(err)
	}
	startWorker(t, st, WorkerOptions{Concurrency: 1})
	waitAction(t, st, id, ActionRefused)
	log, _ := st.QueueLog(ctx, id)
	last := log[len(log)-1]
	if last.Action != ActionRefused || !containsAll(last.Detail, "cannot reach the workspace", ws, "left for another worker") {
		t.Errorf("the refusal: %+v", last)
	}
	if r, _ := st.Run(ctx, id); r.Steps != 0 || r.Status != store.StatusQueued {
		t.Errorf("a refused run was driven: %+v", r)
	}
	if err := os.Rename(moved, ws); err != nil {
		t.Fatal(err)
	}
	r := waitFor(t, st, id, "finished", finished)
	if r.Outcome != string(harness.Success) {
		t.Errorf("after the workspace came back: %s", r.Outcome)
	}
}

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// An uploaded workspace is materialised under the worker's directory, the
// run works there — never on the submitter's copy — and its result is
// fetched back.
func TestUploadedWorkspace(t *testing.T) {
	st, _ := openStore(t)
	m, base := newModel(t)
	ctx := context.Background()
	const steps = 2
	ws, spec := m.add(t, base, "up", steps, false)
	os.MkdirAll(filepath.Join(ws, "sub"), 0o755)
	os.WriteFile(filepath.Join(ws, "sub", "keep.txt"), []byte("kept"), 0o600)
	os.Symlink("sub/keep.txt", filepath.Join(ws, "link"))
	id, err := Submit(ctx, st, spec, SubmitOptions{Upload: true})
	if err != nil {
		t.Fatal(err)
	}
	// The model follows the run to where the worker puts it.
	dir := t.TempDir()
	m.mu.Lock()
	m.runs["up"].ws = filepath.Join(dir, id)
	m.mu.Unlock()
	_, stop := startWorker(t, st, WorkerOptions{Concurrency: 1, Workspaces: dir})
	r := waitFor(t, st, id, "finished", finished)
	if r.Outcome != string(harness.Success) {
		t.Fatalf("%s", r.Outcome)
	}
	waitAction(t, st, id, ActionStoredResult)
	if data, _ := os.ReadFile(filepath.Join(ws, "log.txt")); string(data) != "<END>" {
		t.Errorf("the submitter's copy changed: %q", data)
	}
	var task harness.TaskContract
	json.Unmarshal(r.Task, &task)
	if task.Root != filepath.Join(dir, id) {
		t.Errorf("the run's root is %s", task.Root)
	}
	out := filepath.Join(t.TempDir(), "fetched")
	if _, err := Fetch(ctx, st, id, out); err != nil {
		t.Fatal(err)
	}
	checkEdits(t, out, steps)
	if data, _ := os.ReadFile(filepath.Join(out, "link")); string(data) != "kept" {
		t.Errorf("the link came back as %q", data)
	}
	if _, err := Fetch(ctx, st, id, out); !errors.Is(err, ErrSnapshot) {
		t.Errorf("a fetch into a full directory: %v", err)
	}
	// A worker without a directory for workspaces refuses uploaded runs.
	stop()
	_, spec2 := m.add(t, base, "up2", 1, false)
	id2, err := Submit(ctx, st, spec2, SubmitOptions{Upload: true})
	if err != nil {
		t.Fatal(err)
	}
	startWorker(t, st, WorkerOptions{Concurrency: 1})
	waitAction(t, st, id2, ActionRefused)
	log, _ := st.QueueLog(ctx, id2)
	if d := log[len(log)-1].Detail; !strings.Contains(d, "no directory for workspaces") {
		t.Errorf("the refusal: %s", d)
	}
}

// The health endpoint says the worker works and which runs it holds; a
// stopped worker answers 503.
func TestHealth(t *testing.T) {
	st, _ := openStore(t)
	m, base := newModel(t)
	ctx := context.Background()
	block := make(chan struct{})
	m.delay = func(string, int) time.Duration {
		<-block
		return 0
	}
	_, spec := m.add(t, base, "hl", 1, false)
	id, err := Submit(ctx, st, spec, SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, stop := startWorker(t, st, WorkerOptions{Concurrency: 3, Grace: 100 * time.Millisecond})
	srv := httptest.NewServer(w.Handler())
	defer srv.Close()
	var h Health
	deadline := time.Now().Add(time.Minute)
	for len(h.Held) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the worker never held the run: %+v", h)
		}
		resp, err := http.Get(srv.URL + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		h = Health{}
		json.Unmarshal(body, &h)
		if resp.StatusCode != 200 && h.State != workerIdle {
			t.Fatalf("status %d: %s", resp.StatusCode, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if h.State != workerWorking || h.Concurrency != 3 || h.Held[0].RunID != id || h.Database != "ok" {
		t.Errorf("health %+v", h)
	}
	close(block)
	stop()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("a stopped worker answers %d", resp.StatusCode)
	}
}

// River hands a job out again while its run is driven — a retry, its
// rescuer, a duplicate: the second worker finds the lease held, snoozes
// the job, and the run is driven once, each step asked for once. The
// negative control drives the same run with Force, which ignores the
// lease: the step under way is asked for twice.
func TestDuplicateJobIsSnoozed(t *testing.T) {
	st, _ := openStore(t)
	m, base := newModel(t)
	ctx := context.Background()
	const steps = 4
	m.delay = func(string, int) time.Duration { return 250 * time.Millisecond }
	ws, spec := m.add(t, base, "dup", steps, false)
	id, err := Submit(ctx, st, spec, SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	startWorker(t, st, WorkerOptions{Concurrency: 2})
	waitFor(t, st, id, "at step 1", func(r *store.Run) bool { return r.Steps >= 1 })
	c, _ := inserter(st)
	if err := st.Enqueue(ctx, &postgres.QueueEntry{RunID: id, Action: "test_duplicate"}, enqueue(c, Args{RunID: id, Rescue: 999_999})); err != nil {
		t.Fatal(err)
	}
	startWorker(t, st, WorkerOptions{Concurrency: 2})
	waitAction(t, st, id, ActionSnoozed)
	r := waitFor(t, st, id, "finished", finished)
	if r.Outcome != string(harness.Success) || r.Steps != steps {
		t.Errorf("%s after %d steps", r.Outcome, r.Steps)
	}
	checkEdits(t, ws, steps)
	for step, n := range m.requests("dup") {
		if n != 1 {
			t.Errorf("step %d asked for %d times", step, n)
		}
	}
	// The negative control.
	ws2, spec2 := m.add(t, base, "force", steps, false)
	id2, err := Submit(ctx, st, spec2, SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, st, id2, "at step 1", func(r *store.Run) bool { return r.Steps >= 1 })
	s, _ := harness.ParseSpec(spec2)
	opts, _ := s.Options(nil)
	opts.Store = st
	harness.Resume(ctx, id2, opts, harness.ResumeOptions{Force: true})
	waitFor(t, st, id2, "finished", finished)
	twice := false
	for _, n := range m.requests("force") {
		twice = twice || n > 1
	}
	if !twice {
		t.Error("the negative control: a forced second driver asked for no step twice")
	}
	_ = ws2
}
