// Package storetest is the conformance suite of [store.Store]. Every
// implementation runs it from its own tests:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) store.Store { ... a fresh, empty store ... })
//	}
//
// Each case checks one promise of the contract in the store package's
// documentation, with real writes and reads and no knowledge of how the
// implementation keeps them.
package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/store"
)

// Opener returns a fresh, empty store for one test; the suite closes it.
type Opener func(t *testing.T) store.Store

// Run runs every case of the suite, each as a subtest with a store of its
// own.
func Run(t *testing.T, open Opener) {
	cases := []struct {
		name string
		fn   func(*testing.T, store.Store)
	}{
		{"RunRoundTrip", testRunRoundTrip},
		{"StepsCommitInOrder", testStepsCommitInOrder},
		{"Events", testEvents},
		{"LeaseConflict", testLeaseConflict},
		{"LeaseFencing", testLeaseFencing},
		{"LeaseTakeover", testLeaseTakeover},
		{"LeaseOfWhatWasSeen", testLeaseOfWhatWasSeen},
		{"LeaseLiveAddress", testLeaseLiveAddress},
		{"IntentsAndRecover", testIntentsAndRecover},
		{"SpendLost", testSpendLost},
		{"SpendOfAFencedDriver", testSpendOfAFencedDriver},
		{"FinishWithTheLastStep", testFinishWithTheLastStep},
		{"PausedTime", testPausedTime},
		{"Approvals", testApprovals},
		{"AttemptsOfNoStep", testAttemptsOfNoStep},
		{"Closed", testClosed},
		{"ConcurrentReaders", testConcurrentReaders},
		{"Tree", testTree},
		{"TreeFencing", testTreeFencing},
		{"ChangedFiles", testChangedFiles},
		{"ConcurrentWriters", testConcurrentWriters},
		{"AnyBytes", testAnyBytes},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := open(t)
			t.Cleanup(func() { s.Close() })
			c.fn(t, s)
		})
	}
}

var t0 = time.UnixMilli(1_700_000_000_000)

const ttl = time.Minute

// newRun creates run id with one event and returns its lease.
func newRun(t *testing.T, s store.Store, id string) *store.Lease {
	t.Helper()
	l, err := s.CreateRun(context.Background(), &store.Run{ID: id, Task: json.RawMessage(`{"goal":"g"}`), Provider: "scripted", StartedAt: t0},
		[]store.Event{event(1, 0, "run_started")}, store.Self(), ttl)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func event(seq int64, step int, kind string) store.Event {
	return store.Event{Seq: seq, Step: step, Kind: kind, At: t0, Data: json.RawMessage(fmt.Sprintf(`{"kind":%q,"seq":%d}`, kind, seq))}
}

// commit is a step n with two observations, one attempt and its spend.
func commit(id string, n int) *store.Commit {
	return &store.Commit{
		Step: store.Step{
			RunID: id, Step: n, StartedAt: t0, FinishedAt: t0.Add(time.Second), Provider: "scripted",
			Assistant: provider.Message{Role: provider.RoleAssistant, Content: fmt.Sprintf("turn %d — ünïcode ✓", n),
				ToolCalls: []provider.ToolCall{{ID: "c1", Name: "read_file", Arguments: json.RawMessage(`{"path":"a"}`)}}},
			Observations: []store.Observation{
				{Kind: store.ObservationTool, CallID: "c1", Tool: "read_file", Arguments: json.RawMessage(`{"path":"a"}`), Output: "hello"},
				{Kind: store.ObservationVerification, Output: "not yet", IsError: true},
			},
			Usage:    provider.Usage{InputTokens: 100, OutputTokens: 10, CacheReadTokens: 40},
			Cost:     provider.Cost{USD: 0.25, Known: true},
			Attempts: []store.Attempt{{Step: n, Attempt: 1, Provider: "scripted", Latency: 5 * time.Millisecond, At: t0}},
		},
		Events: []store.Event{event(int64(10*n), n, "checkpoint")},
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func testRunRoundTrip(t *testing.T, s store.Store) {
	ctx := context.Background()
	newRun(t, s, "r1")
	r, err := s.Run(ctx, "r1")
	must(t, err)
	if r.ID != "r1" || r.Status != store.StatusRunning || r.AgentPath != "root" || string(r.Task) != `{"goal":"g"}` ||
		!r.StartedAt.Equal(t0) || r.Steps != 0 || r.Provider != "scripted" {
		t.Errorf("Run = %+v", r)
	}
	if _, err := s.Run(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown run: %v", err)
	}
	if _, err := s.CreateRun(ctx, &store.Run{ID: "r1", Task: json.RawMessage(`{}`), StartedAt: t0}, nil, store.Self(), ttl); err == nil {
		t.Error("a second run with the same id was created")
	}
	newRun(t, s, "r2")
	runs, err := s.Runs(ctx, store.RunFilter{})
	must(t, err)
	if len(runs) != 2 {
		t.Errorf("Runs = %d runs", len(runs))
	}
	if !strings.Contains(s.Name(), "") || strings.Contains(strings.ToLower(s.Name()), "password") {
		t.Errorf("Name = %q", s.Name())
	}
}

func testStepsCommitInOrder(t *testing.T, s store.Store) {
	ctx := context.Background()
	l := newRun(t, s, "r")
	var want []store.Step
	for n := 1; n <= 3; n++ {
		c := commit("r", n)
		must(t, s.CommitStep(ctx, l, c))
		want = append(want, c.Step)
	}
	for _, n := range []int{3, 5} {
		if err := s.CommitStep(ctx, l, commit("r", n)); !errors.Is(err, store.ErrConflict) {
			t.Errorf("commit of step %d after 3: %v", n, err)
		}
	}
	got, err := s.Steps(ctx, "r")
	must(t, err)
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty(), cmpopts.EquateApproxTime(time.Millisecond)); diff != "" {
		t.Errorf("Steps (-want +got):\n%s", diff)
	}
	r, err := s.Run(ctx, "r")
	must(t, err)
	if r.Steps != 3 || r.Usage.InputTokens != 300 || r.Usage.OutputTokens != 30 || r.Cost.USD != 0.75 || !r.Cost.Known {
		t.Errorf("totals %+v %+v after 3 steps", r.Usage, r.Cost)
	}
	// A step whose cost is unknown makes the run's unknown.
	c := commit("r", 4)
	c.Step.Cost = provider.Cost{}
	must(t, s.CommitStep(ctx, l, c))
	if r, _ := s.Run(ctx, "r"); r.Cost.Known {
		t.Error("a step of unknown cost left the run's cost known")
	}
}

func testEvents(t *testing.T, s store.Store) {
	ctx := context.Background()
	l := newRun(t, s, "r")
	c := commit("r", 1)
	c.Events = []store.Event{event(2, 1, "step_started"), event(3, 1, "tool_call"), event(4, 1, "checkpoint")}
	must(t, s.CommitStep(ctx, l, c))
	all, err := s.Events(ctx, "r", 0, 0)
	must(t, err)
	var seqs []int64
	for _, e := range all {
		seqs = append(seqs, e.Seq)
	}
	if !cmp.Equal(seqs, []int64{1, 2, 3, 4}) || all[2].Kind != "tool_call" || string(all[2].Data) != `{"kind":"tool_call","seq":3}` {
		t.Errorf("events %v / %+v", seqs, all[2])
	}
	some, err := s.Events(ctx, "r", 1, 2)
	must(t, err)
	if len(some) != 2 || some[0].Seq != 2 {
		t.Errorf("Events after 1, limit 2 = %+v", some)
	}
	if n, err := s.LastSeq(ctx, "r"); err != nil || n != 4 {
		t.Errorf("LastSeq = %d, %v", n, err)
	}
	// A sequence number written twice (two drivers numbering events) is
	// a conflict, and the step with it is not committed.
	c = commit("r", 2)
	c.Events = []store.Event{event(4, 2, "checkpoint")}
	if err := s.CommitStep(ctx, l, c); !errors.Is(err, store.ErrConflict) {
		t.Errorf("a duplicate event: %v", err)
	}
	if r, _ := s.Run(ctx, "r"); r.Steps != 1 {
		t.Errorf("a step with a duplicate event committed: %d steps", r.Steps)
	}
}

func testLeaseConflict(t *testing.T, s store.Store) {
	ctx := context.Background()
	l := newRun(t, s, "r")
	if l.Generation < 1 || l.Owner != store.Self() || !l.Expires.After(time.Now()) {
		t.Errorf("creator's lease %+v", l)
	}
	held, err := s.Lease(ctx, "r")
	must(t, err)
	if held == nil || held.Generation != l.Generation || held.Owner.PID != l.Owner.PID {
		t.Errorf("Lease = %+v, want %+v", held, l)
	}
	// This process is alive: a second driver is refused, naming it.
	_, err = s.Acquire(ctx, "r", store.Self(), ttl, false, nil)
	var le *store.LeaseError
	if !errors.Is(err, store.ErrConflict) || !errors.As(err, &le) || le.Holder.Owner.PID != l.Owner.PID {
		t.Fatalf("a second driver: %v", err)
	}
	if _, err := s.Acquire(ctx, "nope", store.Self(), ttl, false, nil); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("acquire of an unknown run: %v", err)
	}
	must(t, s.Renew(ctx, l))
}

func testLeaseFencing(t *testing.T, s store.Store) {
	ctx := context.Background()
	old := newRun(t, s, "r")
	must(t, s.CommitStep(ctx, old, commit("r", 1)))
	// A forced takeover fences the first driver out of every write.
	l, err := s.Acquire(ctx, "r", store.Self(), ttl, true, nil)
	must(t, err)
	if l.Generation <= old.Generation {
		t.Fatalf("takeover generation %d after %d", l.Generation, old.Generation)
	}
	checks := map[string]error{
		"CommitStep": s.CommitStep(ctx, old, commit("r", 2)),
		"FinishRun":  s.FinishRun(ctx, old, &store.Finish{RunID: "r", Status: store.StatusFinished, Outcome: "success", OutcomeJSON: json.RawMessage(`{}`), At: t0}),
		"Renew":      s.Renew(ctx, old),
		"RecordSpend": s.RecordSpend(ctx, old, &store.Spend{RunID: "r", Step: 2, Attempt: 1, Provider: "p",
			Usage: provider.Usage{InputTokens: 1}, At: t0}),
		"ReopenRun": s.ReopenRun(ctx, old, json.RawMessage(`{"goal":"x"}`), nil, t0, nil),
	}
	_, err = s.OpenIntent(ctx, old, &store.Intent{RunID: "r", Step: 2, CallID: "c", Tool: "exec", Arguments: json.RawMessage(`{}`), CreatedAt: t0})
	checks["OpenIntent"] = err
	_, err = s.Recover(ctx, old)
	checks["Recover"] = err
	checks["RecordDecisions"] = s.RecordDecisions(ctx, old, nil, []store.Event{event(99, 1, "x")})
	for name, err := range checks {
		if !errors.Is(err, store.ErrFenced) || !errors.Is(err, store.ErrConflict) {
			t.Errorf("%s with a superseded lease: %v", name, err)
		}
	}
	r, err := s.Run(ctx, "r")
	must(t, err)
	if r.Steps != 1 || r.Status != store.StatusRunning || string(r.Task) != `{"goal":"g"}` {
		t.Errorf("a superseded driver's write landed: %+v", r)
	}
	if evs, _ := s.Events(ctx, "r", 10, 0); len(evs) != 0 {
		t.Errorf("a superseded driver's events landed: %+v", evs)
	}
	must(t, s.CommitStep(ctx, l, commit("r", 2)))
	// Releasing keeps generations growing: a later driver fences out
	// every earlier one.
	must(t, s.Release(ctx, l))
	if held, _ := s.Lease(ctx, "r"); held != nil {
		t.Errorf("a released lease is still held: %+v", held)
	}
	next, err := s.Acquire(ctx, "r", store.Self(), ttl, false, nil)
	must(t, err)
	if next.Generation <= l.Generation {
		t.Errorf("generation %d after release of %d", next.Generation, l.Generation)
	}
	if err := s.CommitStep(ctx, l, commit("r", 3)); !errors.Is(err, store.ErrFenced) {
		t.Errorf("a released lease still writes: %v", err)
	}
}

func testLeaseTakeover(t *testing.T, s store.Store) {
	ctx := context.Background()
	self := store.Self()
	// A holder on another host is alive until its lease expires.
	other := store.Owner{Host: "elsewhere.invalid", PID: 1, Started: t0}
	_, err := s.CreateRun(ctx, &store.Run{ID: "far", Task: json.RawMessage(`{}`), StartedAt: t0}, nil, other, 150*time.Millisecond)
	must(t, err)
	if _, err := s.Acquire(ctx, "far", self, ttl, false, nil); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("a live lease from another host was taken: %v", err)
	}
	time.Sleep(200 * time.Millisecond)
	l, err := s.Acquire(ctx, "far", self, ttl, false, nil)
	if err != nil || l.Generation != 2 {
		t.Fatalf("an expired lease was not taken over: %+v %v", l, err)
	}
	// A holder on this host whose process is gone is dead at once, with
	// a long ttl left.
	dead := store.Owner{Host: self.Host, PID: deadPID(), Started: t0}
	_, err = s.CreateRun(ctx, &store.Run{ID: "near", Task: json.RawMessage(`{}`), StartedAt: t0}, nil, dead, time.Hour)
	must(t, err)
	if l, err := s.Acquire(ctx, "near", self, ttl, false, nil); err != nil || l.Generation != 2 {
		t.Fatalf("the lease of a dead process on this host was not taken: %+v %v", l, err)
	}
}

// A lease asked for the run as the caller read it is refused, with
// ErrChanged and nothing changed, once the run has moved on: a step
// committed, an outcome recorded. The run as it is now is leased.
func testLeaseOfWhatWasSeen(t *testing.T, s store.Store) {
	ctx := context.Background()
	l := newRun(t, s, "r")
	read, err := s.Run(ctx, "r")
	must(t, err)
	seen := read.Seen()
	must(t, s.CommitStep(ctx, l, commit("r", 1)))
	must(t, s.Release(ctx, l))
	if _, err := s.Acquire(ctx, "r", store.Self(), ttl, false, seen); !errors.Is(err, store.ErrChanged) || !errors.Is(err, store.ErrConflict) {
		t.Fatalf("a lease of a run that committed a step since it was read: %v", err)
	}
	if held, _ := s.Lease(ctx, "r"); held != nil {
		t.Errorf("a refused Acquire took the lease: %+v", held)
	}
	read, err = s.Run(ctx, "r")
	must(t, err)
	seen = read.Seen()
	l2, err := s.Acquire(ctx, "r", store.Self(), ttl, false, seen)
	must(t, err)
	if l2.Generation != l.Generation+1 {
		t.Errorf("generation %d after %d", l2.Generation, l.Generation)
	}
	must(t, s.FinishRun(ctx, l2, &store.Finish{RunID: "r", Status: store.StatusFinished, Outcome: "success", OutcomeJSON: json.RawMessage(`{}`), At: t0}))
	must(t, s.Release(ctx, l2))
	if _, err := s.Acquire(ctx, "r", store.Self(), ttl, true, seen); !errors.Is(err, store.ErrChanged) {
		t.Errorf("a forced lease of a run that finished since it was read: %v", err)
	}
	if l3, err := s.Acquire(ctx, "r", store.Self(), ttl, false, nil); err != nil || l3.Generation != l2.Generation+1 {
		t.Errorf("a lease that asks nothing of the run: %+v %v", l3, err)
	}
}

// What a fenced driver's provider served is paid for: its RecordSpend is
// refused (ErrFenced) but counted in the run's lost spend, once — the new
// driver's Recover does not count it again — and never in a run of
// another tree.
func testSpendOfAFencedDriver(t *testing.T, s store.Store) {
	ctx := context.Background()
	old := newRun(t, s, "r")
	newRun(t, s, "other")
	l, err := s.Acquire(ctx, "r", store.Self(), ttl, true, nil)
	must(t, err)
	sp := &store.Spend{RunID: "r", Step: 1, Attempt: 1, Provider: "p",
		Usage: provider.Usage{InputTokens: 1000, OutputTokens: 10}, Cost: provider.Cost{USD: 0.5, Known: true}, At: t0}
	if err := s.RecordSpend(ctx, old, sp); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("a fenced driver's spend: %v", err)
	}
	outside := *sp
	outside.RunID = "other"
	if err := s.RecordSpend(ctx, old, &outside); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("a fenced driver's spend for another tree: %v", err)
	}
	_, err = s.Recover(ctx, l)
	must(t, err)
	r, err := s.Run(ctx, "r")
	must(t, err)
	if r.LostUsage != sp.Usage || r.LostCost.USD != 0.5 || !r.LostCost.Known || r.Usage != (provider.Usage{}) {
		t.Errorf("after a fenced driver's spend: usage %+v, lost %+v %+v; want lost %+v", r.Usage, r.LostUsage, r.LostCost, sp.Usage)
	}
	if o, _ := s.Run(ctx, "other"); o.LostUsage != (provider.Usage{}) {
		t.Errorf("a fenced driver's spend landed in another tree's run: %+v", o.LostUsage)
	}
}

// The address a driver serves live events at is kept with its lease and
// read back with it; a new driver's replaces it, and a released lease
// shows none (the driver that served it is gone).
func testLeaseLiveAddress(t *testing.T, s store.Store) {
	ctx := context.Background()
	first := store.Self()
	first.Live = "http://127.0.0.1:1/live/first"
	l, err := s.CreateRun(ctx, &store.Run{ID: "w", Task: json.RawMessage(`{}`), StartedAt: t0}, nil, first, ttl)
	must(t, err)
	got, err := s.Lease(ctx, "w")
	must(t, err)
	if got == nil || got.Owner.Live != first.Live {
		t.Fatalf("the creator's live address: %+v", got)
	}
	must(t, s.Release(ctx, l))
	if got, err := s.Lease(ctx, "w"); err != nil || got != nil {
		t.Fatalf("a released lease still names a driver: %+v %v", got, err)
	}
	second := store.Self()
	second.Live = "http://127.0.0.1:2/live/second"
	if _, err := s.Acquire(ctx, "w", second, ttl, false, nil); err != nil {
		t.Fatal(err)
	}
	got, err = s.Lease(ctx, "w")
	must(t, err)
	if got == nil || got.Owner.Live != second.Live || got.Generation != 2 {
		t.Fatalf("the next driver's live address: %+v", got)
	}
	// A driver that serves none clears it.
	if _, err := s.Acquire(ctx, "w", store.Self(), ttl, true, nil); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Lease(ctx, "w"); got == nil || got.Owner.Live != "" {
		t.Fatalf("a driver without a live address inherited one: %+v", got)
	}
}

// deadPID is a pid no process has: above the kernel's pid_max default.
func deadPID() int { return 1 << 30 }

func testIntentsAndRecover(t *testing.T, s store.Store) {
	ctx := context.Background()
	l := newRun(t, s, "r")
	intent := func(step int, call string) int64 {
		id, err := s.OpenIntent(ctx, l, &store.Intent{RunID: "r", Step: step, CallID: call, Tool: "exec",
			Arguments: json.RawMessage(`{"argv":["x"]}`), CreatedAt: t0})
		must(t, err)
		return id
	}
	intent(1, "a")
	must(t, s.CommitStep(ctx, l, commit("r", 1))) // closes a
	b := intent(2, "b")
	// The driver dies; the next one recovers.
	l2, err := s.Acquire(ctx, "r", store.Self(), ttl, true, nil)
	must(t, err)
	doubt, err := s.Recover(ctx, l2)
	must(t, err)
	if len(doubt) != 1 || doubt[0].ID != b || doubt[0].CallID != "b" || doubt[0].State != store.IntentInDoubt ||
		string(doubt[0].Arguments) != `{"argv":["x"]}` {
		t.Fatalf("in doubt: %+v", doubt)
	}
	// Until reported, a later recovery finds it again; once reported,
	// never.
	again, err := s.Recover(ctx, l2)
	must(t, err)
	if len(again) != 1 {
		t.Errorf("second recovery: %+v", again)
	}
	c := commit("r", 2)
	c.InDoubt = []int64{b}
	must(t, s.CommitStep(ctx, l2, c))
	if after, _ := s.Recover(ctx, l2); len(after) != 0 {
		t.Errorf("a reported intent is in doubt again: %+v", after)
	}
}

func testSpendLost(t *testing.T, s store.Store) {
	ctx := context.Background()
	l := newRun(t, s, "r")
	spend := func(step int, in int64) {
		must(t, s.RecordSpend(ctx, l, &store.Spend{RunID: "r", Step: step, Attempt: 1, Provider: "p",
			Usage: provider.Usage{InputTokens: in, OutputTokens: 7}, Cost: provider.Cost{USD: 0.5, Known: true}, At: t0}))
	}
	spend(1, 100)
	must(t, s.CommitStep(ctx, l, commit("r", 1)))
	spend(2, 130) // answered, then the driver died before the commit
	l2, err := s.Acquire(ctx, "r", store.Self(), ttl, true, nil)
	must(t, err)
	_, err = s.Recover(ctx, l2)
	must(t, err)
	_, err = s.Recover(ctx, l2) // counted once
	must(t, err)
	r, err := s.Run(ctx, "r")
	must(t, err)
	if r.LostUsage != (provider.Usage{InputTokens: 130, OutputTokens: 7}) || r.LostCost.USD != 0.5 || !r.LostCost.Known {
		t.Errorf("lost %+v %+v", r.LostUsage, r.LostCost)
	}
	if r.Usage.InputTokens != 100 {
		t.Errorf("committed usage %+v", r.Usage)
	}
}

func testFinishWithTheLastStep(t *testing.T, s store.Store) {
	ctx := context.Background()
	l := newRun(t, s, "r")
	c := commit("r", 1)
	c.Step.Verified = true
	c.Finish = &store.Finish{RunID: "r", Status: store.StatusFinished, Outcome: "success", OutcomeJSON: json.RawMessage(`{"kind":"success"}`),
		At: t0.Add(time.Minute), Events: []store.Event{event(11, 1, "outcome")}}
	must(t, s.CommitStep(ctx, l, c))
	r, err := s.Run(ctx, "r")
	must(t, err)
	if r.Steps != 1 || r.Status != store.StatusFinished || r.Outcome != "success" || string(r.OutcomeJSON) != `{"kind":"success"}` {
		t.Errorf("after a finishing commit: %+v", r)
	}
	// A finishing commit that fails leaves neither the step nor the
	// outcome.
	l2 := newRun(t, s, "r2")
	bad := commit("r2", 2) // not the next step
	bad.Finish = &store.Finish{RunID: "r2", Status: store.StatusFinished, Outcome: "success", OutcomeJSON: json.RawMessage(`{}`), At: t0}
	if err := s.CommitStep(ctx, l2, bad); err == nil {
		t.Fatal("a commit of step 2 first succeeded")
	}
	if r, _ := s.Run(ctx, "r2"); r.Status != store.StatusRunning || r.Outcome != "" {
		t.Errorf("a failed finishing commit left an outcome: %+v", r)
	}
}

func testPausedTime(t *testing.T, s store.Store) {
	ctx := context.Background()
	l := newRun(t, s, "r")
	must(t, s.FinishRun(ctx, l, &store.Finish{RunID: "r", Status: store.StatusPaused, Outcome: "awaiting_approval",
		OutcomeJSON: json.RawMessage(`{}`), At: t0.Add(time.Minute)}))
	r, _ := s.Run(ctx, "r")
	if r.Status != store.StatusPaused || !r.PausedAt.Equal(t0.Add(time.Minute)) || r.Paused != 0 {
		t.Errorf("paused run %+v", r)
	}
	must(t, s.ReopenRun(ctx, l, json.RawMessage(`{"goal":"g2"}`), json.RawMessage(`{"version":1}`), t0.Add(10*time.Minute), []store.Event{event(5, 0, "run_resumed")}))
	r, _ = s.Run(ctx, "r")
	if r.Status != store.StatusRunning || r.Paused != 9*time.Minute || !r.PausedAt.IsZero() || string(r.Task) != `{"goal":"g2"}` ||
		string(r.Policy) != `{"version":1}` || r.Outcome != "" {
		t.Errorf("reopened run %+v", r)
	}
	// Reopening a run that was not paused adds nothing.
	must(t, s.ReopenRun(ctx, l, json.RawMessage(`{"goal":"g2"}`), nil, t0.Add(time.Hour), nil))
	if r, _ = s.Run(ctx, "r"); r.Paused != 9*time.Minute {
		t.Errorf("paused total %s after a reopen of a running run", r.Paused)
	}
}

func testApprovals(t *testing.T, s store.Store) {
	ctx := context.Background()
	l := newRun(t, s, "r")
	c := commit("r", 1)
	c.Approvals = []store.Approval{{ID: "apr_1", RunID: "r", Step: 1, CallID: "c1", Tool: "write_file", Arguments: json.RawMessage(`{"path":"a"}`),
		Act: "write", Target: "a", Content: "new", Shown: "--- a\n+++ a\n", Hash: "h1", Rule: "", Layer: "", CreatedAt: t0}}
	must(t, s.CommitStep(ctx, l, c))
	a, err := s.Approval(ctx, "r", "apr_1")
	must(t, err)
	if a.State != store.ApprovalPending || a.Content != "new" || a.Shown != "--- a\n+++ a\n" || a.Hash != "h1" {
		t.Errorf("approval %+v", a)
	}
	if _, err := s.Approval(ctx, "r", "apr_x"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown approval: %v", err)
	}
	// Exactly one of two racing decisions lands.
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range 2 {
		wg.Go(func() {
			errs[i] = s.Decide(ctx, "r", "apr_1", store.ApprovalApproved, json.RawMessage(fmt.Sprintf(`{"kind":"approve","n":%d}`, i)), t0, nil)
		})
	}
	wg.Wait()
	if (errs[0] == nil) == (errs[1] == nil) || !errors.Is(errors.Join(errs...), store.ErrNotPending) {
		t.Fatalf("two decisions: %v / %v", errs[0], errs[1])
	}
	result := store.Observation{Kind: store.ObservationDecision, CallID: "c1", Tool: "write_file", Output: "approved and carried out"}
	must(t, s.RecordDecisions(ctx, l, []store.Performed{{ID: "apr_1", Result: result}}, nil))
	a, _ = s.Approval(ctx, "r", "apr_1")
	if a.State != store.ApprovalPerformed || a.Result == nil || !cmp.Equal(*a.Result, result) {
		t.Errorf("performed approval %+v", a)
	}
	c = commit("r", 2)
	c.Applied = []string{"apr_1"}
	must(t, s.CommitStep(ctx, l, c))
	if all, _ := s.Approvals(ctx, "r"); len(all) != 1 || all[0].State != store.ApprovalApplied {
		t.Errorf("approvals %+v", all)
	}
}

func testAttemptsOfNoStep(t *testing.T, s store.Store) {
	ctx := context.Background()
	l := newRun(t, s, "r")
	must(t, s.CommitStep(ctx, l, commit("r", 1)))
	failed := []store.Attempt{
		{Step: 2, Attempt: 1, Provider: "p", ErrorKind: "rate_limit", Error: "429", Status: 429, Wait: time.Second, At: t0},
		{Step: 2, Attempt: 2, Provider: "p", ErrorKind: "rate_limit", Error: "429", Status: 429, At: t0},
	}
	must(t, s.FinishRun(ctx, l, &store.Finish{RunID: "r", Status: store.StatusFinished, Outcome: "escalated",
		OutcomeJSON: json.RawMessage(`{}`), At: t0, Attempts: failed}))
	got, err := s.Attempts(ctx, "r")
	must(t, err)
	if diff := cmp.Diff(failed, got, cmpopts.EquateApproxTime(time.Millisecond)); diff != "" {
		t.Errorf("Attempts (-want +got):\n%s", diff)
	}
	steps, _ := s.Steps(ctx, "r")
	if len(steps) != 1 || len(steps[0].Attempts) != 1 {
		t.Errorf("the step's attempts: %+v", steps)
	}
}

func testClosed(t *testing.T, s store.Store) {
	ctx := context.Background()
	l := newRun(t, s, "r")
	must(t, s.Close())
	must(t, s.Close())
	if err := s.CommitStep(ctx, l, commit("r", 1)); err == nil {
		t.Error("a closed store committed a step")
	}
	if _, err := s.Run(ctx, "r"); err == nil {
		t.Error("a closed store read a run")
	}
}

func testConcurrentReaders(t *testing.T, s store.Store) {
	ctx := context.Background()
	l := newRun(t, s, "r")
	const steps = 30
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				got, err := s.Steps(ctx, "r")
				if err != nil {
					t.Error(err)
					return
				}
				for i, st := range got {
					if st.Step != i+1 || len(st.Observations) != 2 {
						t.Errorf("a reader saw step %d at %d with %d observations", st.Step, i, len(st.Observations))
						return
					}
				}
			}
		})
	}
	for n := 1; n <= steps; n++ {
		if err := s.CommitStep(ctx, l, commit("r", n)); err != nil {
			t.Error(err)
			break
		}
	}
	close(stop)
	wg.Wait()
	if r, _ := s.Run(ctx, "r"); r.Steps != steps {
		t.Errorf("%d steps", r.Steps)
	}
}

// agent creates agent id under parent in the tree l leases.
func agent(t *testing.T, s store.Store, l *store.Lease, id, parent, path string, status store.Status) {
	t.Helper()
	must(t, s.CreateAgent(context.Background(), l, &store.Run{ID: id, ParentID: parent, RootID: l.RunID, AgentPath: path,
		Task: json.RawMessage(`{"goal":"` + id + `"}`), Provider: "scripted", Status: status, StartedAt: t0},
		[]store.Event{event(1, 0, "run_started")}))
}

func testTree(t *testing.T, s store.Store) {
	ctx := context.Background()
	l := newRun(t, s, "root")
	newRun(t, s, "other")
	agent(t, s, l, "a", "root", "root/1.0", store.StatusRunning)
	agent(t, s, l, "b", "root", "root/1.1", store.StatusQueued)
	agent(t, s, l, "a1", "a", "root/1.0/1.0", store.StatusRunning)

	root, err := s.Run(ctx, "root")
	must(t, err)
	if root.RootID != "root" || root.ParentID != "" {
		t.Errorf("root: root_id %q parent %q", root.RootID, root.ParentID)
	}
	b, err := s.Run(ctx, "b")
	must(t, err)
	if b.RootID != "root" || b.ParentID != "root" || b.AgentPath != "root/1.1" || b.Status != store.StatusQueued || b.Steps != 0 {
		t.Errorf("queued agent = %+v", b)
	}
	tree, err := s.Runs(ctx, store.RunFilter{RootID: "root", Limit: -1})
	must(t, err)
	var ids []string
	for _, r := range tree {
		ids = append(ids, r.ID)
	}
	if diff := cmp.Diff([]string{"root", "a", "b", "a1"}, ids); diff != "" {
		t.Errorf("the tree, in creation order (-want +got):\n%s", diff)
	}
	kids, err := s.Runs(ctx, store.RunFilter{ParentID: "a"})
	must(t, err)
	if len(kids) != 1 || kids[0].ID != "a1" {
		t.Errorf("children of a = %+v", kids)
	}
	roots, err := s.Runs(ctx, store.RunFilter{Roots: true})
	must(t, err)
	if len(roots) != 2 {
		t.Errorf("roots = %d runs, want root and other", len(roots))
	}

	// An agent writes under its root's lease, and a queued agent starts by
	// being reopened.
	al := l.For("b")
	must(t, s.ReopenRun(ctx, al, json.RawMessage(`{"goal":"b"}`), nil, t0, nil))
	must(t, s.CommitStep(ctx, al, commit("b", 1)))
	must(t, s.RecordSpend(ctx, al, &store.Spend{RunID: "b", Step: 2, Attempt: 1, Provider: "p", Usage: provider.Usage{InputTokens: 7}, At: t0}))
	if _, err := s.Recover(ctx, al); err != nil {
		t.Fatal(err)
	}
	b, err = s.Run(ctx, "b")
	must(t, err)
	if b.Status != store.StatusRunning || b.Steps != 1 || b.LostUsage.InputTokens != 7 {
		t.Errorf("agent b after a step and a recovery = %+v", b)
	}
	if r, _ := s.Run(ctx, "root"); r.Steps != 0 || r.LostUsage.InputTokens != 0 {
		t.Errorf("an agent's writes landed on its root: %+v", r)
	}

	// A lease is its root's: an agent has none of its own.
	if _, err := s.Acquire(ctx, "a", store.Self(), ttl, true, nil); !errors.Is(err, store.ErrAgent) {
		t.Errorf("Acquire of an agent: %v", err)
	}
	// An agent's parent must be in the leased tree.
	err = s.CreateAgent(ctx, l, &store.Run{ID: "x", ParentID: "other", RootID: "root", AgentPath: "root/9.0",
		Task: json.RawMessage(`{}`), Status: store.StatusRunning, StartedAt: t0}, nil)
	if !errors.Is(err, store.ErrFenced) {
		t.Errorf("an agent under a run of another tree: %v", err)
	}
}

func testTreeFencing(t *testing.T, s store.Store) {
	ctx := context.Background()
	l := newRun(t, s, "root")
	ol := newRun(t, s, "other")
	agent(t, s, l, "a", "root", "root/1.0", store.StatusRunning)
	// Another tree's lease cannot write for this tree's agent.
	if err := s.CommitStep(ctx, ol.For("a"), commit("a", 1)); !errors.Is(err, store.ErrFenced) {
		t.Errorf("a write for an agent under another tree's lease: %v", err)
	}
	// A takeover of the root fences every agent of the tree.
	if _, err := s.Acquire(ctx, "root", store.Self(), ttl, true, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.CommitStep(ctx, l.For("a"), commit("a", 1)); !errors.Is(err, store.ErrFenced) {
		t.Errorf("an agent's write under a superseded root lease: %v", err)
	}
	err := s.CreateAgent(ctx, l, &store.Run{ID: "late", ParentID: "root", RootID: "root", AgentPath: "root/2.0",
		Task: json.RawMessage(`{}`), Status: store.StatusQueued, StartedAt: t0}, nil)
	if !errors.Is(err, store.ErrFenced) {
		t.Errorf("a spawn under a superseded root lease: %v", err)
	}
	if _, err := s.Run(ctx, "late"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the fenced spawn landed: %v", err)
	}
}

func testChangedFiles(t *testing.T, s store.Store) {
	ctx := context.Background()
	l := newRun(t, s, "r")
	c := commit("r", 1)
	c.Step.Observations[0].Changed = []string{"a.txt", "dir/b ü.go"}
	must(t, s.CommitStep(ctx, l, c))
	steps, err := s.Steps(ctx, "r")
	must(t, err)
	if diff := cmp.Diff([]string{"a.txt", "dir/b ü.go"}, steps[0].Observations[0].Changed); diff != "" {
		t.Errorf("changed files (-want +got):\n%s", diff)
	}
	if steps[0].Observations[1].Changed != nil {
		t.Errorf("an observation that changed nothing: %v", steps[0].Observations[1].Changed)
	}
}

// testConcurrentWriters commits steps of many runs at once, one writer
// holding a superseded lease: the others' writes all land, and the
// superseded one's does not, whatever batch it shared with them.
func testConcurrentWriters(t *testing.T, s store.Store) {
	ctx := context.Background()
	const n = 40
	leases := make([]*store.Lease, n)
	for i := range leases {
		leases[i] = newRun(t, s, fmt.Sprintf("r%d", i))
	}
	if _, err := s.Acquire(ctx, "r0", store.Self(), ttl, true, nil); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			for step := 1; step <= 3; step++ {
				if err := s.CommitStep(ctx, leases[i], commit(fmt.Sprintf("r%d", i), step)); err != nil {
					errs[i] = err
					return
				}
			}
		})
	}
	wg.Wait()
	if !errors.Is(errs[0], store.ErrFenced) {
		t.Errorf("the superseded writer: %v", errs[0])
	}
	for i := 1; i < n; i++ {
		if errs[i] != nil {
			t.Errorf("writer %d: %v", i, errs[i])
		}
		r, err := s.Run(ctx, fmt.Sprintf("r%d", i))
		if err != nil || r.Steps != 3 {
			t.Errorf("run r%d: %d steps, %v", i, r.Steps, err)
		}
	}
	if r, _ := s.Run(ctx, "r0"); r.Steps != 0 {
		t.Errorf("the superseded writer's steps landed: %d", r.Steps)
	}
}

func testAnyBytes(t *testing.T, s store.Store) {
	ctx := context.Background()
	l := newRun(t, s, "r")
	// What a tool or a provider says is bytes: a NUL, bytes that are not
	// UTF-8. They read back as they were written.
	weird := []string{"nul\x00byte", "latin1 \xe9t\xe9", "\xff\xfe", "\uffffb64:aGk=", "plain ✓"}
	c := commit("r", 1)
	c.Step.Observations = nil
	for i, w := range weird {
		c.Step.Observations = append(c.Step.Observations, store.Observation{Kind: store.ObservationTool, CallID: fmt.Sprint("c", i),
			Tool: "exec", Output: w, Refusal: w})
	}
	c.Step.Attempts = []store.Attempt{{Step: 1, Attempt: 1, Provider: "p", ErrorKind: "transient", Error: weird[1], At: t0}}
	c.Approvals = []store.Approval{{ID: "apr_1", RunID: "r", Step: 1, CallID: "c0", Tool: "write_file", Arguments: json.RawMessage(`{}`),
		Act: "write", Target: "a", Content: weird[0] + weird[2], Shown: weird[1], Hash: "h", CreatedAt: t0}}
	must(t, s.CommitStep(ctx, l, c))
	steps, err := s.Steps(ctx, "r")
	must(t, err)
	if diff := cmp.Diff([]store.Step{c.Step}, steps, cmpopts.EquateEmpty(), cmpopts.EquateApproxTime(time.Millisecond)); diff != "" {
		t.Errorf("Steps (-want +got):\n%s", diff)
	}
	a, err := s.Approval(ctx, "r", "apr_1")
	must(t, err)
	if a.Content != weird[0]+weird[2] || a.Shown != weird[1] {
		t.Errorf("approval content %q shown %q", a.Content, a.Shown)
	}
}
