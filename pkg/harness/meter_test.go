package harness_test

import (
	"context"
	"sync"
	"testing"

	"github.com/initorigin/io-harness-go/pkg/harness"
	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/scripted"
	"github.com/initorigin/io-harness-go/pkg/harness/verify"
)

// bounded records, for each request, the most input tokens the harness
// allowed it (what the token budget had left less the output it asked
// for) and what a real tokenizer counts of it.
type bounded struct {
	provider.Provider
	budget int64
	real   tokenCounter

	mu          sync.Mutex
	spent       int64
	allowed, in []int64
}

func (b *bounded) Complete(ctx context.Context, req *provider.Request, onText func(string)) (*provider.Response, error) {
	b.mu.Lock()
	b.allowed = append(b.allowed, b.budget-b.spent-req.MaxOutputTokens)
	b.in = append(b.in, b.real.CountInput(req))
	b.mu.Unlock()
	resp, err := b.Provider.Complete(ctx, req, onText)
	if err == nil {
		b.mu.Lock()
		b.spent += resp.Usage.Total()
		b.mu.Unlock()
	}
	return resp, err
}

// A run under a token budget judges each request by what the provider
// counted of the last one plus the estimate of what is new, never below
// what a real tokenizer counts (o200k_base, which the scripted model
// reports as its usage), and so finishes under a budget (the run's real
// cost and a thousand tokens) that the estimate alone, the negative
// control, stops short of.
func TestInputBoundIsTheLastCountAndWhatIsNew(t *testing.T) {
	const steps = 40
	run := func(t *testing.T, budget int64, edit ...func(*harness.Options)) (harness.Outcome, *bounded) {
		real := tiktokenCounter(t)
		sp, err := scripted.New(scripted.Script{Turns: longTurns(steps), Counter: real})
		if err != nil {
			t.Fatal(err)
		}
		b := &bounded{Provider: sp, real: real, budget: budget}
		task := harness.TaskContract{Goal: "write the files, then done.txt", Root: workspace(t, nil),
			Budgets:      harness.Budgets{MaxSteps: steps, MaxTokens: budget},
			Verification: []verify.Check{contains("done.txt", "done")}}
		opts := harness.Options{Provider: b, Store: memStore(t)}
		for _, e := range edit {
			e(&opts)
		}
		res, err := harness.Run(context.Background(), task, opts)
		if err != nil {
			t.Fatal(err)
		}
		return res.Outcome, b
	}
	// The budget: what the run costs without one, by the real count, and
	// a thousand tokens more.
	free, _ := run(t, 0)
	if free.Kind != harness.Success {
		t.Fatalf("the run without a budget: %s: %s", free.Kind, free.Reason)
	}
	budget := free.Usage.Total() + 1000
	out, b := run(t, budget)
	if out.Kind != harness.Success || out.Steps != steps {
		t.Fatalf("outcome %s after %d steps: %s", out.Kind, out.Steps, out.Reason)
	}
	for i := range b.in {
		if b.in[i] > b.allowed[i] {
			t.Errorf("request %d holds %d input tokens by o200k_base, more than the %d its budget allowed", i+1, b.in[i], b.allowed[i])
		}
	}
	t.Logf("%d steps under a budget of %d; request 2 allowed %d input tokens for %d real", out.Steps, budget, b.allowed[1], b.in[1])

	t.Run("negative control: the estimate alone", func(t *testing.T) {
		out, b := run(t, budget, harness.EstimateOnly)
		if out.Kind != harness.CostBudgetExceeded || out.Steps >= steps {
			t.Fatalf("outcome %s after %d steps: %s; want the budget to stop the run short of %d", out.Kind, out.Steps, out.Reason, steps)
		}
		t.Logf("stopped after %d steps, %d of the budget spent", out.Steps, b.spent)
	})
}
