package fleet

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/riverqueue/river/rivertype"

	"github.com/initorigin/io-harness-go/pkg/harness"
	"github.com/initorigin/io-harness-go/pkg/harness/approve"
	"github.com/initorigin/io-harness-go/pkg/harness/store"
	"github.com/initorigin/io-harness-go/pkg/harness/store/postgres"
)

// A fleet's run decided the one way any run is — harness.Decide, from
// another connection, as another process would — reaches the fleet: a
// worker finds the decision, queues the run once, and the worker that
// claims it carries the decision out and finishes the run. The negative
// control is the same worker with the decisions' queueing switched off:
// after the worker has looked twice since the decision, the run is still
// paused, its decision recorded and no job queued for it — stranded, as
// harness.Decide left a fleet's run before.
func TestADecidedRunReachesTheFleet(t *testing.T) {
	for _, control := range []bool{false, true} {
		name := "decided"
		if control {
			name = "control: the worker does not look for decisions"
		}
		t.Run(name, func(t *testing.T) {
			st, dsn := openStore(t)
			m, base := newModel(t)
			ctx := context.Background()
			ws, spec := m.add(t, base, "d", 1, true)
			id, err := Submit(ctx, st, spec, SubmitOptions{})
			if err != nil {
				t.Fatal(err)
			}
			looked := make(chan struct{}, 1)
			runWorker(t, st, WorkerOptions{Concurrency: 1}, func(w *Worker) {
				if control {
					w.decisions = func(context.Context) error {
						select {
						case looked <- struct{}{}:
						default:
						}
						return nil
					}
				}
			})
			waitFor(t, st, id, "paused", func(r *store.Run) bool { return r.Status == store.StatusPaused })
			waitAction(t, st, id, ActionPaused)
			as, err := st.Approvals(ctx, id)
			if err != nil || len(as) != 1 {
				t.Fatalf("approvals %+v %v", as, err)
			}
			other, err := postgres.Open(ctx, dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer other.Close()
			if err := harness.Decide(ctx, other, id, as[0].ID, approve.Decision{Kind: approve.Approve}, "a person"); err != nil {
				t.Fatal(err)
			}
			if control {
				// Drain a look that began before the decision, then wait
				// for two that began after it.
				select {
				case <-looked:
				default:
				}
				for range 2 {
					select {
					case <-looked:
					case <-time.After(2 * time.Minute):
						t.Fatal("the worker stopped looking for decisions")
					}
				}
				r, err := st.Run(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				a, err := st.Approval(ctx, id, as[0].ID)
				if err != nil {
					t.Fatal(err)
				}
				jobs, err := jobsOf(ctx, st, []string{id}, append([]rivertype.JobState{rivertype.JobStateRunning}, waiting...))
				if err != nil {
					t.Fatal(err)
				}
				if r.Status != store.StatusPaused || a.State != store.ApprovalApproved || len(jobs[id]) != 0 || slices.Contains(actions(t, st, id), ActionDecisionQueued) {
					t.Fatalf("without the worker looking, the decided run was not stranded: status %s, approval %s, %d jobs waiting or running, queue log %v",
						r.Status, a.State, len(jobs[id]), actions(t, st, id))
				}
				t.Logf("stranded: the run is %s with its request %s and no job waits for it", r.Status, a.State)
				return
			}
			r := waitFor(t, st, id, "finished", finished)
			if r.Outcome != string(harness.Success) || r.Steps != 1 {
				t.Errorf("after the decision: %s, %d steps", r.Outcome, r.Steps)
			}
			if data, _ := os.ReadFile(filepath.Join(ws, "approved.txt")); string(data) != "yes" {
				t.Errorf("approved.txt = %q", data)
			}
			got := waitAction(t, st, id, ActionFinished)
			want := []string{ActionSubmitted, ActionClaimed, ActionPaused, ActionDecisionQueued, ActionClaimed, ActionFinished}
			if !slices.Equal(got, want) {
				t.Errorf("queue log %v, want %v", got, want)
			}
			log, _ := st.QueueLog(ctx, id)
			for _, e := range log {
				if e.Action == ActionDecisionQueued && !strings.Contains(e.Detail, "approve on request "+as[0].ID+", by a person") {
					t.Errorf("the queue log's decision: %q", e.Detail)
				}
			}
		})
	}
}

// runWorker is startWorker with a hook on the worker before it runs.
func runWorker(t *testing.T, st *postgres.Store, o WorkerOptions, hook func(*Worker)) {
	t.Helper()
	if o.LeaseTTL == 0 {
		o.LeaseTTL = 2 * time.Second
	}
	if o.FetchPoll == 0 {
		o.FetchPoll = 200 * time.Millisecond
	}
	w, err := NewWorker(st, o)
	if err != nil {
		t.Fatal(err)
	}
	hook(w)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("the worker: %v", err)
		}
	})
}
