package memory

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/store"
	"github.com/initorigin/io-harness-go/pkg/harness/store/sqlite"
)

// The memory store is to replace the SQLite store in memory as the
// harness's default, so it must read back what SQLite reads back for the
// same writes: not only what the conformance suite checks, but every
// field, every order and every error class. These tests drive both with
// the same writes, chosen at random or by the fuzzer, and compare every
// answer and then everything either store can be asked.

// scripts is how many random scripts TestSameAsSQLite plays; with the
// race detector, which finds nothing in a test on one goroutine and slows
// SQLite fifteenfold, 15 (2 comparing after every write) unless it is
// set.
var scripts = flag.Int("scripts", 170, "random scripts TestSameAsSQLite plays on both stores (15 under -race unless set)")

// TestSameAsSQLite plays a few scripts written by hand and then -scripts
// random ones of 40 writes each, from a fixed seed: 20 comparing
// everything after every write, the rest comparing the answer to each
// write and everything at the end.
//
// It is a test and not a fuzz target: a script takes 5 to 15 ms (a SQLite
// database is made for each), and the fuzzer spent a minute minimising
// each of the many inputs in which SQLite's own code found new coverage:
// 2m23s for 5,000 inputs.
func TestSameAsSQLite(t *testing.T) {
	written := []struct {
		name   string
		script []byte
	}{
		// A step; spend and an intent of the next; a forced takeover and a
		// recovery; a step reporting the intent and deferring apr_0; a
		// decision; the decision carried out; the step that applies it and
		// ends the run.
		{"recovery and approval", []byte{
			opCommit, 0, 0, 0, 0, 0, 0, 0,
			opSpend, 0, 0, 0,
			opIntent, 0, 0, 0, 0,
			opAcquire, 0, 0, 1,
			opRecover, 0, 0,
			opCommit, 0, 0, 0, 0b00_1001, 0, 0, 0,
			opDecide, 0, 0, 0, 0,
			opDecisions, 0, 0, 0, 0,
			opCommit, 0, 0, 0, 0b10_0000, 0, 1, 14,
		}},
		// Agents of two trees; a queued one reopened and stepping under the
		// root's lease; a write under another tree's lease; a takeover of
		// the root and a write under the old lease; an agent finished; the
		// lease released and taken again; a lease asked for an agent; an
		// agent's lost spend.
		{"tree", []byte{
			opAgent, 0, 0, 0, 1,
			opAgent, 0, 2, 1, 0,
			opAgent, 0, 1, 2, 1,
			opReopen, 0, 3, 1,
			opCommit, 0, 3, 0, 0, 0, 0, 0,
			opCommit, 5, 2, 0, 0, 0, 0, 0,
			opAcquire, 0, 0, 1,
			opCommit, 4, 2, 0, 0, 0, 0, 0,
			opFinish, 0, 2, 0, 2,
			opRelease, 0, 0,
			opAcquire, 0, 0, 0,
			opAcquire, 2, 0, 1,
			opSpend, 0, 3, 0,
			opRecover, 0, 3,
		}},
		// A pause; a step while paused; a reopen; a step out of order; a
		// step; one with events numbered twice; a read of some events; a
		// step numbered again.
		{"pauses and conflicts", []byte{
			opFinish, 0, 0, 1, 1,
			opCommit, 0, 0, 0, 0, 0, 0, 0,
			opReopen, 0, 0, 7,
			opCommit, 0, 0, 6, 0, 0, 0, 0,
			opCommit, 0, 0, 0, 0, 0, 0, 0,
			opCommit, 0, 0, 0, 0, 7, 0, 0,
			opEvents, 0, 3, 3,
			opCommit, 0, 0, 5, 0, 0, 0, 0,
		}},
	}
	for _, w := range written {
		t.Run(w.name, func(t *testing.T) { playBoth(t, w.script, true) })
	}
	n, each := *scripts, 20
	if race && !flagSet("scripts") {
		n, each = 15, 2
	}
	rng := rand.New(rand.NewPCG(14, 1))
	for i := range n {
		script := make([]byte, 40*8)
		for j := range script {
			script[j] = byte(rng.Uint32())
		}
		t.Run(fmt.Sprint(i), func(t *testing.T) { playBoth(t, script, i < each) })
	}
}

// flagSet reports whether the flag name was given.
func flagSet(name string) (set bool) {
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// The writes a script makes; each takes the choices that follow it.
const (
	opAgent     = iota // lease, parent, id, queued
	opCommit           // lease, run, step offset, options, event offset, more options, outcome
	opSpend            // lease, run, step offset
	opIntent           // lease, run, step offset, call
	opRecover          // lease, run
	opAcquire          // run, owner, force
	opRelease          // lease
	opRenew            // lease, run
	opFinish           // lease, run, paused, attempts
	opReopen           // lease, run, minutes after t0
	opDecide           // approval, run, state, event offset
	opDecisions        // lease, approval, run, call
	opEvents           // run, after, limit (a read with arguments)
	opCount
)

// weighted are the writes a random script chooses from: each once, in
// order (so that a script written by hand names them by their constants),
// and those that have most to get wrong more often.
var weighted = append([]int{opAgent, opCommit, opSpend, opIntent, opRecover, opAcquire, opRelease, opRenew, opFinish,
	opReopen, opDecide, opDecisions, opEvents}, opCommit, opCommit, opCommit, opCommit, opIntent, opAgent, opDecide, opDecisions, opReopen)

var (
	t0     = time.UnixMilli(1_700_000_000_000)
	runIDs = []string{"r0", "r1", "a", "b", "x"}
	calls  = []string{"c0", "c1", ""}
)

// script reads the choices a script makes; past its end every choice is 0.
type script []byte

func (s *script) pick(n int) int {
	if len(*s) == 0 {
		return 0
	}
	v := int((*s)[0]) % n
	*s = (*s)[1:]
	return v
}

// pair is the memory store and the SQLite store, driven alike.
type pair struct {
	t      *testing.T
	stores [2]store.Store
	leases [2][]*store.Lease // the leases each store gave, in the same order
	seq    int64             // the last event number used
	ops    []string          // what was done, for a failure's message
}

// compared leaves out only what cannot be equal between two stores run
// one after the other: the wall-clock expiry of a lease.
var compared = cmp.Options{cmpopts.EquateEmpty(), cmpopts.IgnoreFields(store.Lease{}, "Expires")}

// playBoth plays the script b on a memory store and a SQLite store in
// memory, comparing everything both can be asked after every write when
// each is set, else at the end.
func playBoth(t *testing.T, b []byte, each bool) {
	ctx := context.Background()
	sq, err := sqlite.OpenMemory(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p := &pair{t: t, stores: [2]store.Store{New(), sq}, seq: 1} // every run starts with event 1
	defer p.stores[0].Close()
	defer p.stores[1].Close()
	for i, id := range []string{"r0", "r1"} {
		p.do("create "+id, func(s store.Store, k int) (any, error) {
			l, err := s.CreateRun(ctx, &store.Run{ID: id, Task: json.RawMessage(`{"goal":"g"}`), Provider: "scripted",
				StartedAt: t0.Add(time.Duration(i) * time.Millisecond), Policy: json.RawMessage(`{"version":1}`)},
				[]store.Event{p.event(1, 0)}, store.Self(), time.Minute)
			p.keep(k, l)
			return l, err
		})
	}
	s := script(b)
	for n := 0; n < 40 && len(s) > 0; n++ {
		p.play(ctx, &s)
		if each || len(s) == 0 || n == 39 {
			p.compareAll(ctx)
		}
		if t.Failed() {
			t.Fatalf("after:\n\t%s", strings.Join(p.ops, "\n\t"))
		}
	}
}

// keep records a lease store k gave.
func (p *pair) keep(k int, l *store.Lease) {
	if l != nil {
		p.leases[k] = append(p.leases[k], l)
	}
}

// event is the event numbered seq.
func (p *pair) event(seq int64, step int) store.Event {
	return store.Event{Seq: seq, Step: step, Kind: "k", At: t0.Add(time.Duration(seq) * 1500 * time.Microsecond),
		Data: json.RawMessage(fmt.Sprintf(`{"seq":%d}`, seq))}
}

// events are n events: new numbers, or, when off is not 0, numbers that
// may have been used already.
func (p *pair) events(n, off, step int) []store.Event {
	var out []store.Event
	base := p.seq + 1
	if off != 0 {
		base = max(1, p.seq-int64(off)+1)
	}
	for i := range n {
		out = append(out, p.event(base+int64(i), step))
	}
	p.seq = max(p.seq, base+int64(n)-1)
	return out
}

// run chooses a run: one the stores hold, most often, or any of runIDs.
func (p *pair) run(ctx context.Context, s *script) string {
	var held []string
	for _, id := range runIDs {
		if _, err := p.stores[0].Run(ctx, id); err == nil {
			held = append(held, id)
		}
	}
	c := s.pick(10)
	if c < 8 {
		return held[c%len(held)]
	}
	return runIDs[c%len(runIDs)]
}

// leaseChoice names the lease a write is made with: the newest lease of
// the tree of the run it writes for, the oldest, or the newest of another
// tree.
var leaseChoice = []string{"current", "current", "current", "current", "first", "another tree's"}

// lease is store k's lease that choice names (see leaseChoice) as a handle
// on run.
func (p *pair) lease(ctx context.Context, k, choice int, run string) *store.Lease {
	root := run
	if r, err := p.stores[0].Run(ctx, run); err == nil {
		root = r.RootID
	}
	var mine, others []*store.Lease
	for _, l := range p.leases[k] {
		if l.RunID == root {
			mine = append(mine, l)
		} else {
			others = append(others, l)
		}
	}
	switch {
	case leaseChoice[choice] == "another tree's" && len(others) > 0:
		return others[len(others)-1].For(run)
	case leaseChoice[choice] == "first" && len(mine) > 0:
		return mine[0].For(run)
	case len(mine) > 0:
		return mine[len(mine)-1].For(run)
	}
	return p.leases[k][0].For(run)
}

// approval chooses an approval request and its run: most often one the
// stores hold, else any id and any run.
func (p *pair) approval(ctx context.Context, s *script) (run, id string) {
	var held []store.Approval
	for _, id := range runIDs {
		as, _ := p.stores[0].Approvals(ctx, id)
		held = append(held, as...)
	}
	c, r := s.pick(10), p.run(ctx, s)
	if c < 8 && len(held) > 0 {
		a := held[c%len(held)]
		return a.RunID, a.ID
	}
	return r, fmt.Sprintf("apr_%d", c%4)
}

func (p *pair) play(ctx context.Context, s *script) {
	next := func(run string) int {
		r, err := p.stores[0].Run(ctx, run)
		if err != nil {
			return 1
		}
		return r.Steps + 1
	}
	switch weighted[s.pick(len(weighted))] {
	case opAgent:
		li, parent, id, queued := s.pick(len(leaseChoice)), p.run(ctx, s), runIDs[2+s.pick(3)], s.pick(2) == 0
		status := store.StatusRunning
		if queued {
			status = store.StatusQueued
		}
		// Started often at the same millisecond as a root: Runs orders those
		// by id.
		started := t0.Add(time.Duration(len(p.ops)%3) * time.Millisecond)
		p.do(fmt.Sprintf("agent %s under %s, %s lease, %s", id, parent, leaseChoice[li], status), func(s store.Store, k int) (any, error) {
			l := p.lease(ctx, k, li, parent)
			return nil, s.CreateAgent(ctx, l, &store.Run{ID: id, ParentID: parent, RootID: l.RunID, AgentPath: parent + "/" + id,
				Task: json.RawMessage(`{"goal":"` + id + `"}`), Provider: "p", Status: status, StartedAt: started,
				Policy: json.RawMessage(`{"v":2}`)}, []store.Event{p.event(1, 0)})
		})
	case opCommit:
		li, run := s.pick(len(leaseChoice)), p.run(ctx, s)
		n := next(run) + []int{0, 0, 0, 0, 0, -1, 1}[s.pick(7)]
		opts, off, more, end := s.pick(64), max(0, s.pick(8)-4), s.pick(4), s.pick(16)
		c := p.commit(run, n, opts, off, more, end)
		p.do(fmt.Sprintf("commit %s step %d, %s lease, options %06b %02b %d, event offset %d", run, n, leaseChoice[li], opts, more, end, off),
			func(s store.Store, k int) (any, error) { return nil, s.CommitStep(ctx, p.lease(ctx, k, li, run), c) })
	case opSpend:
		li, run := s.pick(len(leaseChoice)), p.run(ctx, s)
		n := next(run) + s.pick(2)
		p.do(fmt.Sprintf("spend %s step %d, %s lease", run, n, leaseChoice[li]), func(s store.Store, k int) (any, error) {
			return nil, s.RecordSpend(ctx, p.lease(ctx, k, li, run), &store.Spend{RunID: run, Step: n, Attempt: 1, Provider: "p",
				Usage: provider.Usage{InputTokens: int64(10 * n), OutputTokens: 3, CacheWriteTokens: 1},
				Cost:  provider.Cost{USD: 0.125, Known: n%3 != 0}, At: t0})
		})
	case opIntent:
		li, run := s.pick(len(leaseChoice)), p.run(ctx, s)
		n, call := next(run)+s.pick(2), calls[s.pick(len(calls))]
		p.do(fmt.Sprintf("intent %s step %d call %q, %s lease", run, n, call, leaseChoice[li]), func(s store.Store, k int) (any, error) {
			return s.OpenIntent(ctx, p.lease(ctx, k, li, run), &store.Intent{RunID: run, Step: n, CallID: call, Tool: "exec",
				Arguments: json.RawMessage(`{"argv":["x"]}`), State: store.IntentDone, CreatedAt: t0.Add(1234 * time.Microsecond)})
		})
	case opRecover:
		li, run := s.pick(len(leaseChoice)), p.run(ctx, s)
		p.do(fmt.Sprintf("recover %s, %s lease", run, leaseChoice[li]), func(s store.Store, k int) (any, error) {
			return s.Recover(ctx, p.lease(ctx, k, li, run))
		})
	case opAcquire:
		run, who, force := p.run(ctx, s), s.pick(3), s.pick(2) == 1
		owner := []store.Owner{store.Self(), {Host: "elsewhere.invalid", PID: 1, Started: t0},
			{Host: store.Self().Host, PID: 1 << 30, Started: t0}}[who]
		p.do(fmt.Sprintf("acquire %s by owner %d, force %v", run, who, force), func(s store.Store, k int) (any, error) {
			l, err := s.Acquire(ctx, run, owner, time.Minute, force, nil)
			p.keep(k, l)
			return l, err
		})
	case opRelease:
		li, run := s.pick(len(leaseChoice)), p.run(ctx, s)
		p.do(fmt.Sprintf("release the %s lease of %s", leaseChoice[li], run), func(s store.Store, k int) (any, error) {
			return nil, s.Release(ctx, p.lease(ctx, k, li, run))
		})
	case opRenew:
		li, run := s.pick(len(leaseChoice)), p.run(ctx, s)
		p.do(fmt.Sprintf("renew the %s lease for %s", leaseChoice[li], run), func(s store.Store, k int) (any, error) {
			return nil, s.Renew(ctx, p.lease(ctx, k, li, run))
		})
	case opFinish:
		li, run, paused, attempts := s.pick(len(leaseChoice)), p.run(ctx, s), s.pick(2) == 1, s.pick(3)
		n := next(run)
		status := store.StatusFinished
		if paused {
			status = store.StatusPaused
		}
		f := &store.Finish{RunID: run, Status: status, Outcome: "o" + string(status), OutcomeJSON: json.RawMessage(`{"kind":"x"}`),
			At: t0.Add(2*time.Minute + 1500*time.Microsecond), Events: p.events(1, 0, n)}
		for a := range attempts {
			f.Attempts = append(f.Attempts, store.Attempt{Step: n, Attempt: a + 1, Provider: "p", ErrorKind: "rate_limit",
				Error: "429", Status: 429, Latency: 1500 * time.Microsecond, Wait: time.Second, At: t0})
		}
		p.do(fmt.Sprintf("finish %s %s with %d attempts, %s lease", run, status, attempts, leaseChoice[li]), func(s store.Store, k int) (any, error) {
			return nil, s.FinishRun(ctx, p.lease(ctx, k, li, run), f)
		})
	case opReopen:
		li, run, minutes := s.pick(len(leaseChoice)), p.run(ctx, s), s.pick(10)
		var policy json.RawMessage
		if minutes%2 == 1 {
			policy = json.RawMessage(`{"version":3}`)
		}
		evs := p.events(1, 0, 0)
		p.do(fmt.Sprintf("reopen %s at t0+%dm, %s lease", run, minutes, leaseChoice[li]), func(s store.Store, k int) (any, error) {
			return nil, s.ReopenRun(ctx, p.lease(ctx, k, li, run), json.RawMessage(`{"goal":"again"}`), policy,
				t0.Add(time.Duration(minutes)*time.Minute+700*time.Microsecond), evs)
		})
	case opDecide:
		run, apr := p.approval(ctx, s)
		state, off := s.pick(5), s.pick(3)
		st := []store.ApprovalState{store.ApprovalApproved, store.ApprovalApproved, store.ApprovalDenied, store.ApprovalRefused, store.ApprovalPending}[state]
		evs := p.events(1, off, 0)
		p.do(fmt.Sprintf("decide %s of %s: %s, event offset %d", apr, run, st, off), func(s store.Store, k int) (any, error) {
			return nil, s.Decide(ctx, run, apr, st, json.RawMessage(`{"kind":"d"}`), t0.Add(3*time.Minute), evs)
		})
	case opDecisions:
		li := s.pick(len(leaseChoice))
		run, apr := p.approval(ctx, s)
		call := calls[s.pick(len(calls))]
		evs := p.events(1, 0, 0)
		p.do(fmt.Sprintf("carry out %s of %s (call %q), %s lease", apr, run, call, leaseChoice[li]), func(s store.Store, k int) (any, error) {
			return nil, s.RecordDecisions(ctx, p.lease(ctx, k, li, run), []store.Performed{{ID: apr, CallID: call,
				Result: store.Observation{Kind: store.ObservationDecision, CallID: call, Tool: "write_file",
					Arguments: json.RawMessage(`{"path":"a"}`), Output: "done", Changed: []string{"a"}}}}, evs)
		})
	case opEvents:
		run, after, limit := p.run(ctx, s), int64(s.pick(12)), s.pick(4)-1
		p.do(fmt.Sprintf("events of %s after %d, limit %d", run, after, limit), func(s store.Store, k int) (any, error) {
			return s.Events(ctx, run, after, limit)
		})
	}
}

// commit is a step of run numbered n, with what the choices choose:
//
//	opts bit 0     an approval request, apr_<bits 1-2>
//	opts bit 3     reports intents 1+<bits 1-2> and 2 in doubt
//	opts bit 4     new remembered rules
//	opts bit 5     applies apr_<bits 1-2>
//	more bit 0     verified
//	more bit 1     the step's cost is unknown
//	end            14: the run finishes; 15: it pauses
//
// off, when not 0, numbers its events from off below the last number
// (a script chooses 0 to 3, most often 0).
func (p *pair) commit(run string, n, opts, off, more, end int) *store.Commit {
	c := &store.Commit{
		Step: store.Step{RunID: run, Step: n, StartedAt: t0.Add(time.Duration(n) * time.Second), FinishedAt: t0.Add(time.Duration(n)*time.Second + 2500*time.Microsecond),
			Provider: "scripted",
			Assistant: provider.Message{Role: provider.RoleAssistant, Content: fmt.Sprintf("turn %d ✓", n),
				ToolCalls: []provider.ToolCall{{ID: "c0", Name: "write_file", Arguments: json.RawMessage(`{"path":"a"}`)}}},
			Observations: []store.Observation{
				{Kind: store.ObservationTool, CallID: "c0", Tool: "write_file", Arguments: json.RawMessage(`{"path":"a"}`), Output: "ok", Changed: []string{"a", "b ü"}},
				{Kind: store.ObservationVerification, Output: "not yet", IsError: true, Refusal: "r"},
			},
			Usage:    provider.Usage{InputTokens: 100, OutputTokens: 10, CacheReadTokens: 4, CacheWriteTokens: 2},
			Cost:     provider.Cost{USD: 0.25, Known: more&0b10 == 0},
			Verified: more&0b1 != 0,
			Attempts: []store.Attempt{{Step: n, Attempt: 1, Provider: "scripted", Latency: 5300 * time.Microsecond, At: t0}},
		},
		Events: p.events(2, off, n),
	}
	apr := fmt.Sprintf("apr_%d", (opts>>1)&0b11)
	if opts&0b1 != 0 {
		c.Approvals = []store.Approval{{ID: apr, RunID: run, Step: n, CallID: "c0", Tool: "write_file", Arguments: json.RawMessage(`{"path":"a"}`),
			Act: "write", Target: "a", Content: "new", Shown: "diff", Hash: "h", Rule: "rule", Layer: "base",
			State: store.ApprovalApplied, Decision: json.RawMessage(`{"ignored":true}`), CreatedAt: t0.Add(time.Duration(3-((opts>>1)&0b11)) * time.Millisecond)}}
	}
	if opts&0b1000 != 0 {
		c.InDoubt = []int64{int64(1 + (opts>>1)&0b11), 2}
	}
	if opts&0b1_0000 != 0 {
		c.Remembered = json.RawMessage(`[{"allow":"x"}]`)
	}
	if opts&0b10_0000 != 0 {
		c.Applied = []string{apr}
	}
	switch end {
	case 15:
		c.Finish = &store.Finish{RunID: run, Status: store.StatusPaused, Outcome: "awaiting_approval", OutcomeJSON: json.RawMessage(`{}`),
			At: t0.Add(time.Hour), Events: p.events(1, 0, n)}
	case 14:
		c.Finish = &store.Finish{RunID: run, Status: store.StatusFinished, Outcome: "success", At: t0.Add(time.Hour)}
	}
	return c
}

// errorClasses are the errors a caller tells apart.
var errorClasses = []error{store.ErrFenced, store.ErrConflict, store.ErrNotFound, store.ErrNotPending, store.ErrAgent, store.ErrClosed}

// do makes one write on both stores, and compares what each answered.
func (p *pair) do(what string, fn func(s store.Store, k int) (any, error)) {
	p.t.Helper()
	p.ops = append(p.ops, what)
	p.compare(what, fn)
}

// compare asks both stores the same, and compares what each answered.
func (p *pair) compare(what string, fn func(s store.Store, k int) (any, error)) {
	p.t.Helper()
	var outs [2]any
	var errs [2]error
	for k, s := range p.stores {
		outs[k], errs[k] = fn(s, k)
	}
	if !sameError(errs[0], errs[1]) {
		p.t.Errorf("%s: memory: %v; sqlite: %v", what, errs[0], errs[1])
		return
	}
	if errs[0] == nil && !cmp.Equal(outs[1], outs[0], compared) {
		p.t.Errorf("%s (-sqlite +memory):\n%s", what, cmp.Diff(outs[1], outs[0], compared))
	}
}

// sameError reports whether mem and sq are errors of the same classes. An
// id used twice is a constraint the SQLite store reports as it comes from
// the database, untyped, and the memory store as a conflict.
func sameError(mem, sq error) bool {
	if (mem == nil) != (sq == nil) {
		return false
	}
	if sq != nil && strings.Contains(sq.Error(), "UNIQUE constraint failed") {
		return errors.Is(mem, store.ErrConflict)
	}
	for _, c := range errorClasses {
		if errors.Is(mem, c) != errors.Is(sq, c) {
			return false
		}
	}
	return true
}

// compareAll compares everything either store can be asked.
func (p *pair) compareAll(ctx context.Context) {
	p.t.Helper()
	for _, f := range []store.RunFilter{{}, {Roots: true}, {RootID: "r0", Limit: -1}, {RootID: "r1"}, {ParentID: "r0"}, {ParentID: "a"}, {Limit: 2}} {
		p.compare(fmt.Sprintf("read runs %+v", f), func(s store.Store, _ int) (any, error) { return s.Runs(ctx, f) })
	}
	for _, id := range runIDs {
		p.compare("read run "+id, func(s store.Store, _ int) (any, error) { return s.Run(ctx, id) })
		p.compare("read steps of "+id, func(s store.Store, _ int) (any, error) { return s.Steps(ctx, id) })
		p.compare("read events of "+id, func(s store.Store, _ int) (any, error) { return s.Events(ctx, id, 0, 0) })
		p.compare("read last event of "+id, func(s store.Store, _ int) (any, error) { return s.LastSeq(ctx, id) })
		p.compare("read attempts of "+id, func(s store.Store, _ int) (any, error) { return s.Attempts(ctx, id) })
		p.compare("read approvals of "+id, func(s store.Store, _ int) (any, error) { return s.Approvals(ctx, id) })
		p.compare("read approval apr_1 of "+id, func(s store.Store, _ int) (any, error) { return s.Approval(ctx, id, "apr_1") })
		p.compare("read lease of "+id, func(s store.Store, _ int) (any, error) { return s.Lease(ctx, id) })
	}
}
