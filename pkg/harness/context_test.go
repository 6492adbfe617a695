package harness_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/initorigin/io-harness-go/pkg/harness"
	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/scripted"
	"github.com/initorigin/io-harness-go/pkg/harness/verify"
)

// longTurns writes a numbered file per step, with a text of some bulk, and
// the last turn writes done.txt.
func longTurns(n int) []scripted.Turn {
	turns := make([]scripted.Turn, n)
	for i := range turns {
		turns[i] = scripted.Turn{Text: fmt.Sprintf("Step %d: %s", i+1, strings.Repeat("working carefully on it ", 6)),
			ToolCalls: []scripted.Call{call("write_file", map[string]string{"path": fmt.Sprintf("f/%d.txt", i+1), "content": strings.Repeat("x", 120)})}}
	}
	turns[n-1].ToolCalls = []scripted.Call{call("write_file", map[string]string{"path": "done.txt", "content": "done"})}
	return turns
}

// A 2,000-step run whose history would overflow a 32k-token window
// completes: the history is folded as it grows, and no request passes the
// window's share. The negative control is the same history unfolded,
// which is many times the window.
func TestLongRunFolds(t *testing.T) {
	const steps, window = 2000, 32_000
	p, err := scripted.New(scripted.Script{Turns: longTurns(steps), ContextWindow: window})
	if err != nil {
		t.Fatal(err)
	}
	rec := &sizes{Provider: p}
	var obs events
	task := harness.TaskContract{Goal: "write the files", Root: workspace(t, nil), Budgets: harness.Budgets{MaxSteps: steps},
		Verification: []verify.Check{contains("done.txt", "done")}}
	res, err := harness.Run(context.Background(), task, harness.Options{Provider: rec, Store: memStore(t), Observer: obs.observe, DigestFolds: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome.Kind != harness.Success || res.Outcome.Steps != steps {
		t.Fatalf("outcome %+v", res.Outcome)
	}
	limit := int64(0.6 * window)
	if rec.max > limit {
		t.Errorf("a request of about %d input tokens passed the share of %d", rec.max, limit)
	}
	folds := len(obs.of(harness.EventContextFold))
	if folds < 10 {
		t.Errorf("%d folds in %d steps", folds, steps)
	}
	// The unfolded history: every turn's text and call, every result.
	var unfolded provider.Request
	for _, tt := range longTurns(steps) {
		unfolded.Messages = append(unfolded.Messages, provider.Message{Role: provider.RoleAssistant, Content: tt.Text},
			provider.Message{Role: provider.RoleTool, Content: strings.Repeat("y", 60)})
	}
	if full := provider.EstimateInput(&unfolded); full < 3*window {
		t.Fatalf("negative control: the whole history is only %d tokens", full)
	}
	t.Logf("%d folds; the largest request was about %d tokens (share %d)", folds, rec.max, limit)
}

// sizes records the largest request a provider was sent.
type sizes struct {
	provider.Provider
	max int64
}

func (s *sizes) Complete(ctx context.Context, req *provider.Request, onText func(string)) (*provider.Response, error) {
	if n := provider.EstimateInput(req); n > s.max && req.Step > 0 {
		s.max = n
	}
	return s.Provider.Complete(ctx, req, onText)
}

func (s *sizes) Limits() (provider.Limits, bool) { return provider.LimitsOf(s.Provider) }

// A provider that says the context is too long gets a folded history and
// one more try; the run goes on. A provider that knows no window is sent
// the history whole until then.
func TestContextOverflowFoldsAndRetries(t *testing.T) {
	turns := longTurns(12)
	turns[9].Fail = &scripted.Failure{Kind: provider.KindContextOverflow, Status: 400, Message: "prompt is too long", Times: 1}
	var obs events
	task := harness.TaskContract{Goal: "write the files", Root: workspace(t, nil), Budgets: harness.Budgets{MaxRetries: intp(0)},
		Verification: []verify.Check{contains("done.txt", "done")}}
	res, err := harness.Run(context.Background(), task, harness.Options{Provider: script(t, turns...), Store: memStore(t), Observer: obs.observe, DigestFolds: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome.Kind != harness.Success || res.Outcome.Steps != 12 {
		t.Fatalf("outcome %+v", res.Outcome)
	}
	if folds := obs.of(harness.EventContextFold); len(folds) != 1 || folds[0].Step != 10 {
		t.Errorf("folds %+v", folds)
	}
}
