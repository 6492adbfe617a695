package harness_test

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/initorigin/io-harness-go/internal/pgtest"
	"github.com/initorigin/io-harness-go/pkg/harness"
	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/scripted"
	"github.com/initorigin/io-harness-go/pkg/harness/store"
	"github.com/initorigin/io-harness-go/pkg/harness/store/postgres"
	"github.com/initorigin/io-harness-go/pkg/harness/verify"
)

// pg is this binary's PostgreSQL server, started on first use.
var pg = &pgtest.Server{}

func TestMain(m *testing.M) { os.Exit(pg.Main(m)) }

// pgStore opens a Postgres store on a fresh schema, closed when the test
// ends.
func pgStore(t testing.TB) store.Store {
	t.Helper()
	st, err := postgres.Open(context.Background(), pg.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// holdAcquire is a store whose first Acquire waits, once it is called,
// until release is closed: a driver held between its read of the run and
// the transaction that takes the run's lease.
type holdAcquire struct {
	store.Store
	once    sync.Once
	reached chan *store.Seen // what the store held when the driver reached Acquire
	release chan struct{}
}

func (h *holdAcquire) Acquire(ctx context.Context, runID string, owner store.Owner, ttl time.Duration, force bool, seen *store.Seen) (*store.Lease, error) {
	h.once.Do(func() {
		var now *store.Seen
		if r, err := h.Store.Run(ctx, runID); err == nil {
			now = r.Seen()
		}
		h.reached <- now
		<-h.release
	})
	return h.Store.Acquire(ctx, runID, owner, ttl, force, seen)
}

// gate is a provider whose first request waits until open is closed,
// after saying so on asked.
type gate struct {
	provider.Provider
	once  sync.Once
	asked chan struct{}
	open  chan struct{}
}

func (g *gate) Complete(ctx context.Context, req *provider.Request, onText func(string)) (*provider.Response, error) {
	g.once.Do(func() {
		close(g.asked)
		<-g.open
	})
	return g.Provider.Complete(ctx, req, onText)
}

// lateResume drives a run with driver A, and resumes it with driver B
// while A is inside its first model call; B is held between its read of
// the run (running, no step) and its Acquire until A has ended the run
// with turn. It returns A's and B's results, what B had read, and how many
// requests B's provider was sent.
//
// read is the run as it stood when B reached Acquire: running, with no
// step, or the hold did not hold B where it must.
func lateResume(t *testing.T, st store.Store, turn scripted.Turn, blind bool) (a, b *harness.Result, read *store.Seen, requests int) {
	t.Helper()
	dir := workspace(t, nil)
	task := harness.TaskContract{Goal: "g", Root: dir, Budgets: harness.Budgets{MaxRetries: intp(0)},
		Verification: []verify.Check{contains("step-1.txt", "1")}}
	g := &gate{Provider: script(t, turn), asked: make(chan struct{}), open: make(chan struct{})}
	runID := make(chan string, 1)
	type result struct {
		res *harness.Result
		err error
	}
	aDone := make(chan result, 1)
	go func() {
		res, err := harness.Run(context.Background(), task, harness.Options{Provider: g, Store: st, Observer: func(e harness.Event) {
			if e.Kind == harness.EventRunStarted {
				runID <- e.RunID
			}
		}})
		aDone <- result{res, err}
	}()
	<-g.asked // A is inside its first step, holding the lease
	id := <-runID

	h := &holdAcquire{Store: st, reached: make(chan *store.Seen, 1), release: make(chan struct{})}
	rec := &recorder{Provider: script(t, numbered(3)...)}
	opts := harness.Options{Provider: rec, Store: h}
	if blind {
		harness.BlindAcquire(&opts)
	}
	bDone := make(chan result, 1)
	go func() {
		res, err := harness.Resume(context.Background(), id, opts, harness.ResumeOptions{})
		bDone <- result{res, err}
	}()
	select {
	case read = <-h.reached:
	case r := <-bDone:
		// The hold never fired: the test would prove nothing.
		close(g.open)
		<-aDone
		t.Fatalf("B returned before it reached Acquire: %+v %v", r.res, r.err)
	}
	close(g.open) // A answers, commits, ends the run and releases its lease
	ra := <-aDone
	if ra.err != nil {
		t.Fatal(ra.err)
	}
	close(h.release)
	rb := <-bDone
	if rb.err != nil {
		t.Fatalf("B: %v", rb.err)
	}
	return ra.res, rb.res, read, rec.count()
}

// kindsOf counts a run's stored events of each kind.
func kindsOf(t *testing.T, st store.Store, runID string) map[string]int {
	t.Helper()
	evs, err := st.Events(context.Background(), runID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := map[string]int{}
	for _, e := range evs {
		n[e.Kind]++
	}
	return n
}

var lateResumeCases = []struct {
	name string
	turn scripted.Turn
	want harness.OutcomeKind
}{
	{"success", numbered(1)[0], harness.Success},
	{"escalated", scripted.Turn{Text: "x", Fail: &scripted.Failure{Kind: provider.KindServer}}, harness.Escalated},
}

var lateResumeStores = []struct {
	name string
	open func(testing.TB) store.Store
}{
	{"sqlite", memStore},
	{"postgres", pgStore},
}

// A resume that read the run while another driver was still driving it,
// and reaches its Acquire only after that driver ended the run, neither
// finishes the run a second time nor drives it again: its lease is
// refused in the transaction that would take it, and it returns the
// outcome the other driver recorded, without a request.
func TestLateResumeLeavesAnEndedRunAlone(t *testing.T) {
	for _, s := range lateResumeStores {
		for _, c := range lateResumeCases {
			t.Run(s.name+"/"+c.name, func(t *testing.T) {
				st := s.open(t)
				a, b, read, requests := lateResume(t, st, c.turn, false)
				if read == nil || read.Status != store.StatusRunning || read.Steps != 0 {
					t.Fatalf("B was held after reading %+v, not the running run A drove", read)
				}
				if a.Outcome.Kind != c.want {
					t.Fatalf("A ended %s, want %s", a.Outcome.Kind, c.want)
				}
				if b.Outcome.Kind != a.Outcome.Kind || b.Outcome.Steps != a.Outcome.Steps || requests != 0 {
					t.Errorf("B returned %s after %d step(s) and %d request(s); A ended %s after %d",
						b.Outcome.Kind, b.Outcome.Steps, requests, a.Outcome.Kind, a.Outcome.Steps)
				}
				n := kindsOf(t, st, a.RunID)
				if n[string(harness.EventRunResumed)] != 0 || n[string(harness.EventOutcome)] != 1 {
					t.Errorf("the run has %d run_resumed and %d outcome events, want 0 and 1", n[string(harness.EventRunResumed)], n[string(harness.EventOutcome)])
				}
				rec, err := st.Run(context.Background(), a.RunID)
				if err != nil || rec.Outcome != string(c.want) {
					t.Errorf("the stored outcome is %q (%v), want %s", rec.Outcome, err, c.want)
				}
			})
		}
	}
}

// The negative control: with the check switched off (the lease taken
// whatever the run became), the same late resume finishes a successful run
// a second time and drives an escalated one again, sending the model
// requests after the run's outcome.
func TestLateResumeControl(t *testing.T) {
	for _, s := range lateResumeStores {
		for _, c := range lateResumeCases {
			t.Run(s.name+"/"+c.name, func(t *testing.T) {
				st := s.open(t)
				a, b, _, requests := lateResume(t, st, c.turn, true)
				n := kindsOf(t, st, a.RunID)
				if n[string(harness.EventRunResumed)] != 1 || n[string(harness.EventOutcome)] != 2 {
					t.Errorf("without the check: %d run_resumed and %d outcome events, want 1 and 2", n[string(harness.EventRunResumed)], n[string(harness.EventOutcome)])
				}
				if c.want == harness.Escalated && (requests == 0 || b.Outcome.Kind == harness.Escalated) {
					t.Errorf("without the check, B drove the escalated run with %d request(s) to %s", requests, b.Outcome.Kind)
				}
			})
		}
	}
}
