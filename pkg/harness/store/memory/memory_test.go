package memory

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/store"
	"github.com/initorigin/io-harness-go/pkg/harness/store/sqlite"
	"github.com/initorigin/io-harness-go/pkg/harness/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return New() })
}

func TestNameAndDurable(t *testing.T) {
	s := New()
	if s.Name() != ":memory:" || s.Durable() {
		t.Errorf("Name %q, Durable %v", s.Name(), s.Durable())
	}
}

// fill sets every field reachable from ptr to a value that is not zero: a
// slice gets one element, a pointer a value, a json.RawMessage a small
// object, so that every slice and pointer a store might keep exists.
func fill(ptr any) { fillValue(reflect.ValueOf(ptr).Elem()) }

var (
	rawType  = reflect.TypeFor[json.RawMessage]()
	timeType = reflect.TypeFor[time.Time]()
)

func fillValue(v reflect.Value) {
	switch {
	case v.Type() == rawType:
		v.SetBytes([]byte(`{"k":"v"}`))
		return
	case v.Type() == timeType:
		v.Set(reflect.ValueOf(t0))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString("s")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64, reflect.Int32:
		v.SetInt(int64(time.Millisecond))
	case reflect.Float64:
		v.SetFloat(0.5)
	case reflect.Uint8:
		v.SetUint('b')
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fillValue(v.Index(0))
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fillValue(v.Elem())
	case reflect.Struct:
		for i := range v.NumField() {
			fillValue(v.Field(i))
		}
	}
}

// scribble changes, in place, everything reachable from v (a pointer or
// a slice) through slices and pointers, every string and number of it,
// and returns how many slice elements it changed: what a caller who kept
// a value could do to it later.
func scribble(v any) int { return scribbleValue(reflect.ValueOf(v)) }

func scribbleValue(v reflect.Value) int {
	if v.Type() == timeType {
		v.Set(reflect.ValueOf(t0.Add(time.Hour)))
		return 0
	}
	n := 0
	switch v.Kind() {
	case reflect.String:
		v.SetString("scribbled")
	case reflect.Int, reflect.Int64, reflect.Int32:
		v.SetInt(v.Int() + 99)
	case reflect.Uint8:
		if c := byte(v.Uint()); c >= 'a' && c <= 'z' {
			v.SetUint('X') // a JSON object of letters stays one
		}
	case reflect.Slice:
		for i := range v.Len() {
			scribbleValue(v.Index(i))
			n++
		}
	case reflect.Pointer:
		if !v.IsNil() {
			n += scribbleValue(v.Elem())
		}
	case reflect.Struct:
		for i := range v.NumField() {
			n += scribbleValue(v.Field(i))
		}
	}
	return n
}

func encode(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestNoSharedMemory attacks the store through the memory it is handed
// and hands out: every value a write takes is filled in every field,
// including every slice and pointer, and after the writes the caller
// scribbles over all of them, then over every value the reads gave it.
// What the store reads back must not change. The control shows the attack
// is real: a store that kept the values it was given as they are (a copy
// of the struct, sharing its slices) changes with them.
func TestNoSharedMemory(t *testing.T) {
	ctx := context.Background()
	s := New()

	r := &store.Run{}
	fill(r)
	r.ID = "r"
	first := []store.Event{{Seq: 1, Kind: "run_started", At: t0, Data: json.RawMessage(`{"k":"v"}`)}}
	l, err := s.CreateRun(ctx, r, first, store.Self(), time.Minute)
	must(t, err)

	c := &store.Commit{}
	fill(c)
	c.Step.RunID, c.Step.Step, c.Step.Attempts[0].Step = "r", 1, 1
	c.Events[0].Seq = 2
	c.Approvals[0].RunID, c.Approvals[0].ID = "r", "apr"
	c.Finish = nil
	must(t, s.CommitStep(ctx, l, c))

	decision := json.RawMessage(`{"k":"v"}`)
	decided := []store.Event{{Seq: 3, Data: json.RawMessage(`{"k":"v"}`)}}
	must(t, s.Decide(ctx, "r", "apr", store.ApprovalApproved, decision, t0, decided))
	performed := []store.Performed{{}}
	fill(&performed[0])
	performed[0].ID = "apr"
	done := []store.Event{{Seq: 4, Data: json.RawMessage(`{"k":"v"}`)}}
	must(t, s.RecordDecisions(ctx, l, performed, done))

	in := &store.Intent{}
	fill(in)
	in.RunID = "r"
	_, err = s.OpenIntent(ctx, l, in)
	must(t, err)

	f := &store.Finish{}
	fill(f)
	f.RunID, f.Status, f.Events[0].Seq = "r", store.StatusPaused, 5
	must(t, s.FinishRun(ctx, l, f))
	task, policy := json.RawMessage(`{"k":"v"}`), json.RawMessage(`{"k":"v"}`)
	reopened := []store.Event{{Seq: 6, Data: json.RawMessage(`{"k":"v"}`)}}
	must(t, s.ReopenRun(ctx, l, task, policy, t0.Add(time.Minute), reopened))

	agent := &store.Run{}
	fill(agent)
	agent.ID, agent.ParentID, agent.RootID, agent.Status = "a", "r", "r", store.StatusQueued
	spawned := []store.Event{{Seq: 1, Data: json.RawMessage(`{"k":"v"}`)}}
	must(t, s.CreateAgent(ctx, l, agent, spawned))

	// Everything a reader can be given, read the same way each time, with
	// the driver's own copy of the lease: the one the store gave is
	// scribbled over below.
	driver := *l
	reads := func() []any {
		var out []any
		for _, id := range []string{"r", "a"} {
			run, err := s.Run(ctx, id)
			must(t, err)
			steps, err := s.Steps(ctx, id)
			must(t, err)
			events, err := s.Events(ctx, id, 0, 0)
			must(t, err)
			attempts, err := s.Attempts(ctx, id)
			must(t, err)
			approvals, err := s.Approvals(ctx, id)
			must(t, err)
			out = append(out, run, steps, events, attempts, approvals)
		}
		runs, err := s.Runs(ctx, store.RunFilter{Limit: -1})
		must(t, err)
		approval, err := s.Approval(ctx, "r", "apr")
		must(t, err)
		lease, err := s.Lease(ctx, "r")
		must(t, err)
		doubt, err := s.Recover(ctx, &driver)
		must(t, err)
		return append(out, runs, approval, lease, doubt)
	}
	before := reads()
	want := encode(t, before)
	for _, v := range slices.Concat(before[:5], before[len(before)-3:]) { // run r's reads, the approval, the lease, the intent
		if reflect.ValueOf(v).IsZero() {
			t.Fatalf("a read gave nothing: %s", want)
		}
	}

	// Control: a store that kept what it was given, as a struct copy,
	// would now hold the scribbles.
	kept := *c
	keptBefore := encode(t, kept)

	passed := []any{r, &first, c, &decision, &decided, &performed, &done, in, f, &task, &policy, &reopened, agent, &spawned}
	for _, v := range passed {
		if scribble(v) == 0 {
			t.Fatalf("nothing to scribble in %T", v)
		}
	}
	if encode(t, kept) == keptBefore {
		t.Fatal("control: scribbling over a commit left a struct copy of it as it was; the attack is not real")
	}
	if got := encode(t, reads()); got != want {
		t.Errorf("changing values after passing them changed the store:\nwas %s\nnow %s", want, got)
	}

	for _, v := range slices.Concat(before, []any{l}) {
		scribble(v)
	}
	if encode(t, before) == want {
		t.Fatal("control: scribbling over the values read left them as they were")
	}
	if got := encode(t, reads()); got != want {
		t.Errorf("changing values read from the store changed it:\nwas %s\nnow %s", want, got)
	}
}

// TestWritesNameTheLeasedRun attacks the fence with writes that name a
// run other than the one their lease is a handle on: a driver holding
// the lease of its own run commits a step, records spend, opens an
// intent, defers an approval or records an outcome for a run of another
// tree, or writes with no lease at all. The memory store fences every one
// out. The control is the SQLite store, which fences by the lease alone
// and writes for the run the values name: there each attack lands.
func TestWritesNameTheLeasedRun(t *testing.T) {
	ctx := context.Background()
	attacks := []struct {
		name   string
		write  func(s store.Store, mine *store.Lease) error
		landed func(r *store.Run, s store.Store) bool
	}{
		{"a step for another tree's run", func(s store.Store, mine *store.Lease) error {
			return s.CommitStep(ctx, mine, step("theirs", 1))
		}, func(r *store.Run, _ store.Store) bool { return r.Steps == 1 }},
		{"an outcome for another tree's run", func(s store.Store, mine *store.Lease) error {
			return s.FinishRun(ctx, mine, &store.Finish{RunID: "theirs", Status: store.StatusFinished, Outcome: "hijacked", At: t0})
		}, func(r *store.Run, _ store.Store) bool { return r.Outcome == "hijacked" }},
		{"an outcome with its own step, for another tree's run", func(s store.Store, mine *store.Lease) error {
			c := step("mine", 1)
			c.Finish = &store.Finish{RunID: "theirs", Status: store.StatusFinished, Outcome: "hijacked", At: t0}
			return s.CommitStep(ctx, mine, c)
		}, func(r *store.Run, _ store.Store) bool { return r.Outcome == "hijacked" }},
		{"an approval request on another tree's run", func(s store.Store, mine *store.Lease) error {
			c := step("mine", 1)
			c.Approvals = []store.Approval{{ID: "apr_x", RunID: "theirs", Step: 1, Arguments: json.RawMessage(`{}`), CreatedAt: t0}}
			return s.CommitStep(ctx, mine, c)
		}, func(_ *store.Run, s store.Store) bool { as, _ := s.Approvals(ctx, "theirs"); return len(as) > 0 }},
		{"spend charged to another tree's run", func(s store.Store, mine *store.Lease) error {
			if err := s.RecordSpend(ctx, mine, &store.Spend{RunID: "theirs", Step: 1, Attempt: 1, Usage: provider.Usage{InputTokens: 1000}, At: t0}); err != nil {
				return err
			}
			// The spend shows once the run's own driver recovers.
			_, err := s.Recover(ctx, theirs(ctx, s))
			return err
		}, func(r *store.Run, _ store.Store) bool { return r.LostUsage.InputTokens == 1000 }},
		{"an intent on another tree's run", func(s store.Store, mine *store.Lease) error {
			if _, err := s.OpenIntent(ctx, mine, &store.Intent{RunID: "theirs", Step: 1, CallID: "c", Tool: "exec", Arguments: json.RawMessage(`{}`), CreatedAt: t0}); err != nil {
				return err
			}
			_, err := s.Recover(ctx, theirs(ctx, s))
			return err
		}, func(_ *store.Run, s store.Store) bool {
			doubt, _ := s.Recover(ctx, theirs(ctx, s))
			return len(doubt) > 0
		}},
		{"a step with no lease", func(s store.Store, _ *store.Lease) error {
			return s.CommitStep(ctx, nil, step("theirs", 1))
		}, func(r *store.Run, _ store.Store) bool { return r.Steps == 1 }},
	}
	stores := []struct {
		name    string
		open    func() store.Store
		fenced  bool
		because string
	}{
		{"memory", func() store.Store { return New() }, true, ""},
		{"sqlite (control)", func() store.Store {
			s, err := sqlite.OpenMemory(ctx)
			must(t, err)
			return s
		}, false, "the SQLite store now fences this attack too: move it into storetest and drop this control"},
	}
	for _, a := range attacks {
		for _, st := range stores {
			t.Run(a.name+"/"+st.name, func(t *testing.T) {
				s := st.open()
				defer s.Close()
				mine := newRun(t, s, "mine")
				newRun(t, s, "theirs")
				err := a.write(s, mine)
				r, rerr := s.Run(ctx, "theirs")
				must(t, rerr)
				landed := a.landed(r, s)
				switch {
				case st.fenced && (!errors.Is(err, store.ErrFenced) || landed):
					t.Errorf("the write landed (%v) or was not fenced: %v", landed, err)
				case !st.fenced && (err != nil || !landed):
					t.Errorf("%s (err %v, landed %v)", st.because, err, landed)
				}
			})
		}
	}
}

// theirs is a lease on run "theirs" taken over from its creator.
func theirs(ctx context.Context, s store.Store) *store.Lease {
	l, err := s.Acquire(ctx, "theirs", store.Self(), time.Minute, true, nil)
	if err != nil {
		panic(err)
	}
	return l
}

func newRun(t *testing.T, s store.Store, id string) *store.Lease {
	t.Helper()
	l, err := s.CreateRun(context.Background(), &store.Run{ID: id, Task: json.RawMessage(`{"goal":"g"}`), StartedAt: t0},
		nil, store.Self(), time.Minute)
	must(t, err)
	return l
}

func step(run string, n int) *store.Commit {
	return &store.Commit{Step: store.Step{RunID: run, Step: n, StartedAt: t0, FinishedAt: t0,
		Assistant:    provider.Message{Role: provider.RoleAssistant, Content: "turn"},
		Observations: []store.Observation{{Kind: store.ObservationNote, Output: "note"}},
		Usage:        provider.Usage{InputTokens: 10}, Cost: provider.Cost{Known: true}}}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestClosedAndCancelled: a closed store and a cancelled context are
// typed errors, and a closed store is closed for every method.
func TestClosedAndCancelled(t *testing.T) {
	s := New()
	l := newRun(t, s, "r")
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.CommitStep(cancelled, l, step("r", 1)); !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled commit: %v", err)
	}
	if r, _ := s.Run(context.Background(), "r"); r.Steps != 0 {
		t.Errorf("a cancelled commit landed")
	}
	must(t, s.Close())
	ctx := context.Background()
	calls := map[string]error{
		"Run":        errOf(s.Run(ctx, "r")),
		"Runs":       errOf(s.Runs(ctx, store.RunFilter{})),
		"Steps":      errOf(s.Steps(ctx, "r")),
		"Events":     errOf(s.Events(ctx, "r", 0, 0)),
		"LastSeq":    errOf(s.LastSeq(ctx, "r")),
		"Attempts":   errOf(s.Attempts(ctx, "r")),
		"Approvals":  errOf(s.Approvals(ctx, "r")),
		"Approval":   errOf(s.Approval(ctx, "r", "a")),
		"Lease":      errOf(s.Lease(ctx, "r")),
		"CreateRun":  errOf(s.CreateRun(ctx, &store.Run{ID: "n", Task: json.RawMessage(`{}`)}, nil, store.Self(), time.Minute)),
		"Acquire":    errOf(s.Acquire(ctx, "r", store.Self(), time.Minute, true, nil)),
		"Renew":      s.Renew(ctx, l),
		"Release":    s.Release(ctx, l),
		"CommitStep": s.CommitStep(ctx, l, step("r", 1)),
		"Recover":    errOf(s.Recover(ctx, l)),
		"Decide":     s.Decide(ctx, "r", "a", store.ApprovalApproved, nil, t0, nil),
	}
	for name, err := range calls {
		if !errors.Is(err, store.ErrClosed) {
			t.Errorf("%s on a closed store: %v", name, err)
		}
	}
}

func errOf[T any](_ T, err error) error { return err }

// TestBadInput: missing values are errors, never a panic.
func TestBadInput(t *testing.T) {
	ctx := context.Background()
	s := New()
	l := newRun(t, s, "r")
	checks := map[string]error{
		"a run with no id":         errOf(s.CreateRun(ctx, &store.Run{Task: json.RawMessage(`{}`)}, nil, store.Self(), time.Minute)),
		"no run":                   errOf(s.CreateRun(ctx, nil, nil, store.Self(), time.Minute)),
		"no commit":                s.CommitStep(ctx, l, nil),
		"no outcome":               s.FinishRun(ctx, l, nil),
		"no spend":                 s.RecordSpend(ctx, l, nil),
		"no intent":                errOf(s.OpenIntent(ctx, l, nil)),
		"no agent":                 s.CreateAgent(ctx, l, nil, nil),
		"an agent with no lease":   s.CreateAgent(ctx, nil, &store.Run{ID: "a"}, nil),
		"a renewal with no lease":  s.Renew(ctx, nil),
		"a recovery with no lease": errOf(s.Recover(ctx, nil)),
	}
	for name, err := range checks {
		if err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if err := s.Release(ctx, nil); err != nil {
		t.Errorf("releasing no lease: %v", err)
	}
	if strings.Contains(s.Name(), "/") {
		t.Errorf("Name %q", s.Name())
	}
}
