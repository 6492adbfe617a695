package fleet

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/riverqueue/river/rivertype"

	"github.com/initorigin/io-harness-go/pkg/harness"
	"github.com/initorigin/io-harness-go/pkg/harness/store/postgres"
)

// killedWorkerEnv is test-only: set, it makes TestKilledWorkerProcess a
// worker on the store it names that SIGKILLs its own process right after
// a run's outcome commits. Only this file reads it.
const killedWorkerEnv = "IOH_TEST_FLEET_KILLED_WORKER"

// TestKilledWorkerProcess is the worker process TestKilledAfterOutcome
// kills: it does nothing unless killedWorkerEnv is set.
func TestKilledWorkerProcess(t *testing.T) {
	dsn := os.Getenv(killedWorkerEnv)
	if dsn == "" {
		return // not a child of TestKilledAfterOutcome: nothing to be
	}
	ctx := context.Background()
	st, err := postgres.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	w, err := NewWorker(st, WorkerOptions{Concurrency: 1, LeaseTTL: 2 * time.Second, FetchPoll: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	w.afterOutcome = func() { syscall.Kill(os.Getpid(), syscall.SIGKILL) }
	t.Fatalf("the worker returned without being killed: %v", w.Run(ctx))
}

// A worker killed with SIGKILL right after a run's outcome commits — its
// job not completed, no finished line in the queue log — is settled by
// the next worker that starts: by the time that worker reports itself
// working it has queued the settling, and then the dead worker's job is
// completed and the queue log has the run's finished line, once, with
// no model request made again. The negative control is the same second
// worker with its settling switched off: once it works, the dead
// worker's job is still running and the run has no finished line, as
// every worker left them before (until River's rescuer, an hour later).
func TestKilledAfterOutcome(t *testing.T) {
	for _, control := range []bool{false, true} {
		name := "settled"
		if control {
			name = "control: the worker does not settle"
		}
		t.Run(name, func(t *testing.T) { testKilledAfterOutcome(t, control) })
	}
}

func testKilledAfterOutcome(t *testing.T, control bool) {
	st, dsn := openStore(t)
	m, base := newModel(t)
	ctx := context.Background()
	_, spec := m.add(t, base, "k", 1, false)
	id, err := Submit(ctx, st, spec, SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}

	// The first worker, in a process of its own, kills itself at the
	// outcome.
	child := exec.Command(os.Args[0], "-test.run=^TestKilledWorkerProcess$", "-test.count=1")
	child.Env = append(os.Environ(), killedWorkerEnv+"="+dsn)
	out, err := child.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("the first worker was not killed by its SIGKILL: %v\n%s", err, out)
	}
	r, err := st.Run(ctx, id)
	if err != nil || r.Outcome != string(harness.Success) {
		t.Fatalf("the killed worker did not commit the outcome first: %+v %v", r, err)
	}
	running, err := jobsOf(ctx, st, []string{id}, []rivertype.JobState{rivertype.JobStateRunning})
	if err != nil || len(running[id]) != 1 {
		t.Fatalf("the killed worker's job is not left running: %v %v", running, err)
	}
	dead := running[id][0].ID
	if got, want := actions(t, st, id), []string{ActionSubmitted, ActionClaimed}; !slices.Equal(got, want) {
		t.Fatalf("queue log after the kill %v, want %v", got, want)
	}

	c, err := inserter(st)
	if err != nil {
		t.Fatal(err)
	}

	// The second worker starts.
	var w *Worker
	runWorker(t, st, WorkerOptions{Concurrency: 1}, func(x *Worker) {
		w = x
		if control {
			w.settle = func(context.Context) error { return nil }
		}
	})
	for w.Health(ctx).State != workerWorking { // until it has started, settling first
		time.Sleep(10 * time.Millisecond)
	}
	if control {
		got := actions(t, st, id)
		j, err := c.JobGet(ctx, dead)
		if err != nil {
			t.Fatal(err)
		}
		if j.State != rivertype.JobStateRunning || slices.Contains(got, ActionFinished) || slices.Contains(got, ActionRescued) {
			t.Fatalf("without settling, the dead worker's job was settled anyway: job %s, queue log %v", j.State, got)
		}
		t.Logf("unsettled: job %d is %s on the dead worker and the queue log is %v", dead, j.State, got)
		return
	}
	if got := actions(t, st, id); !slices.Contains(got, ActionRescued) {
		t.Fatalf("the second worker started and did not settle job %d, still running on the dead worker: queue log %v", dead, got)
	}
	got := waitAction(t, st, id, ActionFinished)
	if want := []string{ActionSubmitted, ActionClaimed, ActionRescued, ActionFinished}; !slices.Equal(got, want) {
		t.Errorf("queue log %v, want %v", got, want)
	}
	// The finished line and the job's completion commit together.
	if j, err := c.JobGet(ctx, dead); err != nil || j.State != rivertype.JobStateCompleted {
		t.Errorf("the dead worker's job %d with the finished line logged: %+v %v", dead, j, err)
	}
	if n := m.requests("k"); n[1] != 1 || len(n) != 1 {
		t.Errorf("model requests by step %v, want one for step 1", n)
	}
}
