package harness_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/initorigin/io-harness-go/pkg/harness"
	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/scripted"
	"github.com/initorigin/io-harness-go/pkg/harness/verify"
	"github.com/initorigin/io-harness-go/pkg/harness/window"
	"github.com/tiktoken-go/tokenizer"
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
// completes: the history is folded as it grows. The window is judged by
// a real tokenizer, not by the estimate that triggers the folds: the
// scripted model counts each request with o200k_base and refuses one
// past its window as OpenAI does, and no request comes near the window's
// share. The negative control is the same run with a context manager
// that never folds: the model refuses the history, and the run ends on
// the overflow.
func TestLongRunFolds(t *testing.T) {
	const steps, size = 2000, 32_000
	run := func(t *testing.T, mgr func(string) window.Manager) (harness.Outcome, *sizes, int) {
		real := tiktokenCounter(t)
		p, err := scripted.New(scripted.Script{Turns: longTurns(steps), ContextWindow: size, Counter: real})
		if err != nil {
			t.Fatal(err)
		}
		rec := &sizes{Provider: p, count: real}
		var obs events
		task := harness.TaskContract{Goal: "write the files", Root: workspace(t, nil), Budgets: harness.Budgets{MaxSteps: steps, MaxRetries: intp(0)},
			Verification: []verify.Check{contains("done.txt", "done")}}
		res, err := harness.Run(context.Background(), task, harness.Options{Provider: rec, Store: memStore(t), Observer: obs.observe,
			DigestFolds: true, ContextManager: mgr})
		if err != nil {
			t.Fatal(err)
		}
		return res.Outcome, rec, len(obs.of(harness.EventContextFold))
	}

	out, rec, folds := run(t, nil)
	if out.Kind != harness.Success || out.Steps != steps {
		t.Fatalf("outcome %+v", out)
	}
	if rec.refused > 0 {
		t.Errorf("the model refused %d requests as longer than its window", rec.refused)
	}
	limit := int64(0.6 * size)
	if rec.max > limit {
		t.Errorf("a request of %d input tokens (o200k_base) passed the share of %d", rec.max, limit)
	}
	if folds < 10 {
		t.Errorf("%d folds in %d steps", folds, steps)
	}
	t.Logf("%d folds; the largest request was %d tokens in o200k_base (share %d, window %d)", folds, rec.max, limit, size)

	t.Run("negative control: no fold", func(t *testing.T) {
		out, rec, _ := run(t, func(task string) window.Manager { return unfolded{window.New(task, window.Options{})} })
		if out.Kind != harness.Escalated || rec.refused == 0 || !strings.Contains(out.Reason, "maximum context length is 32000 tokens") {
			t.Fatalf("without folds: outcome %s after %d steps (%s), %d refusals", out.Kind, out.Steps, out.Reason, rec.refused)
		}
		t.Logf("without folds the model refused the request of step %d: %s", out.Steps+1, out.Reason)
	})
}

// unfolded is a transcript that never folds: every request holds the
// whole history.
type unfolded struct{ *window.Transcript }

func (u unfolded) Messages(pre []provider.Message, _ int64) ([]provider.Message, *window.FoldRequest) {
	return u.Transcript.Messages(pre, 0)
}

// tokenCounter counts a request as OpenAI's current models do: the
// o200k_base tokens of its texts, and the few of the chat format around
// each message and tool. It remembers each text's count: a run sends its
// system prompt, tools and history again with every request.
type tokenCounter struct {
	codec tokenizer.Codec
	memo  *sync.Map // text → its count
}

func tiktokenCounter(t testing.TB) tokenCounter {
	t.Helper()
	c, err := tokenizer.Get(tokenizer.O200kBase)
	if err != nil {
		t.Fatal(err)
	}
	return tokenCounter{c, &sync.Map{}}
}

func (c tokenCounter) text(s string) int64 {
	if n, ok := c.memo.Load(s); ok {
		return n.(int64)
	}
	n, _ := c.codec.Count(s)
	c.memo.Store(s, int64(n))
	return int64(n)
}

func (c tokenCounter) CountInput(req *provider.Request) int64 {
	n := c.text(req.System) + 3
	for _, m := range req.Messages {
		n += 4 + c.text(m.Content) + c.text(m.ToolCallID)
		for _, tc := range m.ToolCalls {
			n += c.text(tc.ID) + c.text(tc.Name) + c.text(string(tc.Arguments))
		}
	}
	for _, tl := range req.Tools {
		n += 4 + c.text(tl.Name) + c.text(tl.Description) + c.text(string(tl.Parameters))
	}
	return n
}

// sizes records the largest request a provider was sent, in a real
// tokenizer's count, how many requests it was sent and how many it
// refused as too long.
type sizes struct {
	provider.Provider
	count          provider.TokenCounter
	max            int64
	calls, refused int
}

func (s *sizes) Complete(ctx context.Context, req *provider.Request, onText func(string)) (*provider.Response, error) {
	if n := s.count.CountInput(req); n > s.max && req.Step > 0 {
		s.max = n
	}
	s.calls++
	resp, err := s.Provider.Complete(ctx, req, onText)
	if pe := provider.AsError(err); pe != nil && pe.Kind == provider.KindContextOverflow {
		s.refused++
	}
	return resp, err
}

func (s *sizes) Limits() (provider.Limits, bool) { return provider.LimitsOf(s.Provider) }

// A model that refuses a request as longer than its window gets a folded
// history, shorter than the one it refused, and the run goes on: each
// refusal costs one request more, never two. The harness does not know
// the window (the provider states none), so the history is sent whole
// until the model refuses it.
func TestContextOverflowFoldsAndRetries(t *testing.T) {
	const steps, size = 12, 12_000
	turns := make([]scripted.Turn, steps)
	for i := range turns {
		turns[i] = scripted.Turn{Text: fmt.Sprintf("Reading part %d.", i+1),
			ToolCalls: []scripted.Call{call("read_file", map[string]string{"path": fmt.Sprintf("part%d.txt", i+1)})}}
	}
	turns[steps-1].ToolCalls = []scripted.Call{call("write_file", map[string]string{"path": "done.txt", "content": "done"})}
	files := map[string]string{}
	for i := range steps {
		files[fmt.Sprintf("part%d.txt", i+1)] = strings.Repeat(fmt.Sprintf("line %d of part %d: the quick brown fox jumps over the lazy dog\n", i, i+1), 80)
	}
	real := tiktokenCounter(t)
	p, err := scripted.New(scripted.Script{Turns: turns, ContextWindow: size, Counter: real})
	if err != nil {
		t.Fatal(err)
	}
	rec := &sizes{Provider: p, count: real}
	var obs events
	task := harness.TaskContract{Goal: "read the parts, then write done.txt", Root: workspace(t, files), Budgets: harness.Budgets{MaxRetries: intp(0)},
		Verification: []verify.Check{contains("done.txt", "done")}}
	res, err := harness.Run(context.Background(), task, harness.Options{Provider: struct{ provider.Provider }{rec}, Store: memStore(t),
		Observer: obs.observe, DigestFolds: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome.Kind != harness.Success || res.Outcome.Steps != steps {
		t.Fatalf("outcome %+v", res.Outcome)
	}
	folds := obs.of(harness.EventContextFold)
	if rec.refused == 0 || len(folds) != rec.refused {
		t.Errorf("%d refusals and %d folds: each refusal must fold once", rec.refused, len(folds))
	}
	if got := len(obs.of(harness.EventModelDone)); rec.calls != got+rec.refused {
		t.Errorf("%d requests for %d answers and %d refusals", rec.calls, got, rec.refused)
	}
	t.Logf("%d refusals, %d requests, the largest %d tokens in o200k_base (window %d)", rec.refused, rec.calls, rec.max, size)
}
