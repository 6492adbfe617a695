package tree_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/initorigin/io-harness-go/pkg/harness/tool"
	"github.com/initorigin/io-harness-go/pkg/harness/tree"
)

// fixed reserves want when it is left, tokens only.
func fixed(want int64) tree.Plan {
	return func(avail tree.Amount) (tree.Amount, bool) {
		return tree.Amount{Tokens: want}, avail.Tokens >= want
	}
}

// agents returns the draws of seed's agents: a ceiling, and what each of
// 50 agents wants per draw.
func agents(seed uint64) (ceiling int64, wants []int64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	ceiling = int64(1000 + rng.IntN(5000))
	for range 50 {
		wants = append(wants, int64(1+rng.IntN(300)))
	}
	return ceiling, wants
}

// settled is what a draw of want costs: at most its reservation.
func settled(want int64) int64 { return want - want/3 }

// drawAtOnce runs the agents against l at once, each drawing its want
// and settling it again and again until the ledger refuses it. It
// returns what went wrong: the spend past the ceiling, or an agent the
// ledger never refused.
func drawAtOnce(l *tree.Ledger, wants []int64) error {
	var wg sync.WaitGroup
	var refused atomic.Int64
	errs := make(chan error, len(wants))
	for _, want := range wants {
		wg.Go(func() {
			for {
				d, err := l.Reserve(context.Background(), fixed(want))
				if errors.Is(err, tree.ErrCeiling) {
					refused.Add(1)
					return
				}
				if err != nil {
					errs <- err
					return
				}
				d.Settle(tree.Amount{Tokens: settled(want)})
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		return err
	}
	if got, ceiling := l.Spent().Tokens, l.Ceiling().Tokens; got > ceiling {
		return fmt.Errorf("spent %d past the ceiling %d", got, ceiling)
	}
	if refused.Load() != int64(len(wants)) || l.Halted() == "" {
		return fmt.Errorf("%d agents refused, halted %q", refused.Load(), l.Halted())
	}
	return nil
}

// The attack: many agents draw at once, each checking what is left and
// then spending it. Without one lock around the check and the draw they
// would all see the same remainder and overspend; with the ledger the
// total spent never passes the ceiling, and every agent stops with
// ErrCeiling once it cannot be paid.
func TestLedgerHoldsTheCeilingUnderConcurrentDraws(t *testing.T) {
	for seed := range uint64(20) {
		ceiling, wants := agents(seed)
		if err := drawAtOnce(tree.NewLedger(tree.Amount{Tokens: ceiling}, tree.Amount{}), wants); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
	}
}

// The negative control: the same agents against the same ledger with its
// lock between a draw's check and its reservation switched off
// overspend the ceiling. The gap holds each agent's first draw until
// every agent has checked, so each sees the whole ceiling left: the
// interleaving the lock rules out happens every time. It is run on the
// seeds whose agents' first draws alone cost more than the ceiling.
func TestUnlockedCheckThenSpendOverspends(t *testing.T) {
	controls := 0
	for seed := range uint64(20) {
		ceiling, wants := agents(seed)
		var once int64
		for _, w := range wants {
			once += settled(w)
		}
		if once <= ceiling {
			continue
		}
		controls++
		var checked sync.WaitGroup
		checked.Add(len(wants))
		var gaps atomic.Int64
		l := tree.NewUnlockedLedger(tree.Amount{Tokens: ceiling}, tree.Amount{}, func() {
			if gaps.Add(1) <= int64(len(wants)) {
				checked.Done()
				checked.Wait()
			}
		})
		err := drawAtOnce(l, wants)
		if err == nil || !strings.Contains(err.Error(), "past the ceiling") {
			t.Fatalf("seed %d: the unlocked ledger held the ceiling (%v): the test cannot see an overspend", seed, err)
		}
		t.Logf("seed %d without the lock: %v", seed, err)
	}
	if controls == 0 {
		t.Fatal("no seed's agents cost more than the ceiling in one draw each: the control shows nothing")
	}
}

func TestLedgerWaitsForDrawsInFlight(t *testing.T) {
	l := tree.NewLedger(tree.Amount{Tokens: 100}, tree.Amount{Tokens: 20})
	first, err := l.Reserve(context.Background(), fixed(60))
	if err != nil {
		t.Fatal(err)
	}
	// 20 are left now and 80 once the first settles: the second waits.
	got := make(chan error, 1)
	go func() {
		d, err := l.Reserve(context.Background(), fixed(50))
		if err == nil {
			d.Settle(tree.Amount{Tokens: 50})
		}
		got <- err
	}()
	first.Settle(tree.Amount{Tokens: 10})
	if err := <-got; err != nil {
		t.Fatalf("the waiting draw: %v", err)
	}
	if s := l.Spent().Tokens; s != 80 {
		t.Errorf("spent %d, want 20+10+50", s)
	}
	// 20 left: a draw of 50 can never be paid, and halts the tree.
	if _, err := l.Reserve(context.Background(), fixed(50)); !errors.Is(err, tree.ErrCeiling) {
		t.Fatalf("an unpayable draw: %v", err)
	}
	if _, err := l.Reserve(context.Background(), fixed(1)); !errors.Is(err, tree.ErrCeiling) {
		t.Errorf("a halted ledger lent again: %v", err)
	}
}

// What draws in flight hold counts against the ceiling before any of them
// settles: three agents each asking for 600 tokens of a 1000-token
// ceiling get one draw between them. The other two find 400 left, would
// accept what is left once the first settles, and wait; each plan
// cancels its draw's context when it finds too little, so a draw that
// waits returns the context's error at once, in this goroutine, and a
// ledger that lent what the first draw holds a second time grants it
// instead.
func TestLedgerCountsDrawsInFlight(t *testing.T) {
	l := tree.NewLedger(tree.Amount{Tokens: 1000}, tree.Amount{})
	var granted []*tree.Draw
	var seen [][]int64 // what each draw's plan was offered, in order
	for i := range 3 {
		ctx, cancel := context.WithCancel(context.Background())
		seen = append(seen, nil)
		d, err := l.Reserve(ctx, func(avail tree.Amount) (tree.Amount, bool) {
			seen[i] = append(seen[i], avail.Tokens)
			if avail.Tokens < 600 {
				cancel()
			}
			return tree.Amount{Tokens: 600}, avail.Tokens >= 600
		})
		cancel()
		switch {
		case err == nil:
			granted = append(granted, d)
		case !errors.Is(err, context.Canceled):
			t.Fatalf("draw %d: %v, want it to wait for the first to settle", i+1, err)
		}
	}
	want := [][]int64{{1000}, {400, 1000}, {400, 1000}}
	if len(granted) != 1 || !cmp.Equal(seen, want) {
		t.Errorf("%d of three 600-token draws granted on a 1000-token ceiling before any settled (want 1); the plans were offered %v, want %v",
			len(granted), seen, want)
	}
	if h := l.Halted(); h != "" {
		t.Errorf("the ledger halted: %s", h)
	}
	for _, d := range granted {
		d.Settle(d.Amount())
	}
	if s := l.Spent().Tokens; s > 1000 {
		t.Errorf("spent %d of a 1000-token ceiling", s)
	}
}

func TestLedgerMoneyAndUncappedTokens(t *testing.T) {
	l := tree.NewLedger(tree.Amount{USD: 1}, tree.Amount{})
	d, err := l.Reserve(context.Background(), func(a tree.Amount) (tree.Amount, bool) {
		if a.Tokens < 1<<40 {
			t.Errorf("uncapped tokens lent as %d", a.Tokens)
		}
		return tree.Amount{USD: 0.75}, a.USD >= 0.75
	})
	if err != nil {
		t.Fatal(err)
	}
	d.Settle(tree.Amount{USD: 0.5, Tokens: 1e6})
	d.Settle(tree.Amount{USD: 0.5}) // a second settle spends nothing
	if s := l.Spent(); s.USD != 0.5 {
		t.Errorf("spent %+v", s)
	}
}

func TestSlotsBoundAndOrder(t *testing.T) {
	ctx := context.Background()
	// One slot: the waiters get it strictly in the order they queued.
	s := tree.NewSlots(1)
	if err := s.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	var order []int
	var wg sync.WaitGroup
	for i := range 5 {
		wg.Go(func() {
			if err := s.Acquire(ctx); err != nil {
				t.Error(err)
				return
			}
			order = append(order, i) // the slot serialises this
			s.Release()
		})
		waitQueued(t, s, i+1)
	}
	s.Release()
	wg.Wait()
	if diff := cmp.Diff([]int{0, 1, 2, 3, 4}, order); diff != "" {
		t.Errorf("slots were not handed out in order (-want +got):\n%s", diff)
	}

	// Two slots: never more than two held.
	s = tree.NewSlots(2)
	var in, worst atomic.Int64
	for range 20 {
		wg.Go(func() {
			if err := s.Acquire(ctx); err != nil {
				t.Error(err)
				return
			}
			n := in.Add(1)
			for {
				w := worst.Load()
				if n <= w || worst.CompareAndSwap(w, n) {
					break
				}
			}
			time.Sleep(100 * time.Microsecond)
			in.Add(-1)
			s.Release()
		})
	}
	wg.Wait()
	if _, peak := s.Live(); peak > 2 || worst.Load() > 2 {
		t.Errorf("peak %d slots held, %d at once, want at most 2", peak, worst.Load())
	}
	// A waiter whose context ends leaves the line holding nothing.
	if err := s.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.Acquire(cctx); !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled wait: %v", err)
	}
	if now, _ := s.Live(); now != 2 || s.Queued() != 0 {
		t.Errorf("%d held and %d queued after a cancelled wait", now, s.Queued())
	}
}

// waitQueued waits until n goroutines wait in line.
func waitQueued(t *testing.T, s *tree.Slots, n int) {
	t.Helper()
	for range 100000 {
		if s.Queued() >= n {
			return
		}
		time.Sleep(10 * time.Microsecond)
	}
	t.Fatalf("%d waiters never queued", n)
}

func TestWorkspaceConflicts(t *testing.T) {
	w := tree.NewWorkspace()
	a, b := w.Agent("root/1.0"), w.Agent("root/1.1")
	wrote := func(v tool.Files, p string, since uint64) error {
		return v.Write(p, since, func() error { return nil })
	}
	// A new file: whoever writes first wins, the other must read it first.
	if err := wrote(a, "f", 0); err != nil {
		t.Fatal(err)
	}
	var ce *tool.ConflictError
	if err := wrote(b, "f", 0); !errors.As(err, &ce) || ce.By != "root/1.0" || ce.Path != "f" {
		t.Fatalf("a blind write over a sibling's: %v", err)
	}
	b.Saw("f", b.Mark())
	if err := wrote(b, "f", 0); err != nil {
		t.Fatalf("a write after reading: %v", err)
	}
	// a's view is stale now.
	if err := wrote(a, "f", 0); !errors.As(err, &ce) || ce.By != "root/1.1" {
		t.Fatalf("a stale write: %v", err)
	}
	// A mark taken before the sibling's write is stale too.
	m := a.Mark()
	if err := wrote(b, "f", 0); err != nil {
		t.Fatal(err)
	}
	if err := wrote(a, "f", m); !errors.As(err, &ce) {
		t.Fatalf("a write since an old mark: %v", err)
	}
	// A write's own failure is its error, and records nothing.
	boom := errors.New("disk")
	a.Saw("f", a.Mark())
	if err := a.Write("f", 0, func() error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("failed write: %v", err)
	}
	if err := wrote(a, "f", 0); err != nil {
		t.Fatalf("after a failed write: %v", err)
	}
	// A rebuilt history counts as another agent's write.
	w.Wrote("g", "root/1.1")
	if err := wrote(a, "g", 0); !errors.As(err, &ce) {
		t.Fatalf("over a rebuilt write: %v", err)
	}
}

// Concurrent read-modify-writes through the views never lose an update:
// each either lands on top of the last or is refused.
func TestWorkspaceLosesNoUpdate(t *testing.T) {
	w := tree.NewWorkspace()
	var content []string // the file
	var mu sync.Mutex
	var wg sync.WaitGroup
	var landed atomic.Int64
	for i := range 16 {
		v := w.Agent(fmt.Sprintf("root/1.%d", i))
		wg.Go(func() {
			for k := 0; k < 20; {
				at := v.Mark()
				mu.Lock()
				seen := append([]string(nil), content...)
				mu.Unlock()
				v.Saw("f", at)
				err := v.Write("f", 0, func() error {
					mu.Lock()
					content = append(seen, fmt.Sprintf("%d.%d", i, k))
					mu.Unlock()
					return nil
				})
				var ce *tool.ConflictError
				switch {
				case err == nil:
					landed.Add(1)
					k++
				case !errors.As(err, &ce):
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if int64(len(content)) != landed.Load() || landed.Load() != 16*20 {
		t.Fatalf("%d writes landed, the file holds %d lines: an update was lost", landed.Load(), len(content))
	}
}
