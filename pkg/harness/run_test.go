package harness_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/initorigin/io-harness-go/pkg/harness"
	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/scripted"
	"github.com/initorigin/io-harness-go/pkg/harness/store"
	"github.com/initorigin/io-harness-go/pkg/harness/tool"
	"github.com/initorigin/io-harness-go/pkg/harness/verify"
)

var fastBackoff = harness.Backoff{Base: harness.Duration(time.Millisecond), Max: harness.Duration(4 * time.Millisecond)}

func usage(in, out int64) *provider.Usage { return &provider.Usage{InputTokens: in, OutputTokens: out} }

// Every outcome is reachable, and each reports the steps it completed.
func TestEveryOutcomeIsReachable(t *testing.T) {
	write := calls(call("write_file", map[string]string{"path": "out.txt", "content": "done"}))
	look := calls(call("list_dir", map[string]string{}))
	tests := []struct {
		name      string
		turns     []scripted.Turn
		budgets   harness.Budgets
		cancelAt  int // cancel after this step's checkpoint
		noGate    bool
		schema    string
		want      harness.OutcomeKind
		wantSteps int
		check     func(t *testing.T, out harness.Outcome)
	}{
		{name: "success", turns: []scripted.Turn{look, write}, want: harness.Success, wantSteps: 2},
		{name: "verification failed", turns: []scripted.Turn{look, look, look}, budgets: harness.Budgets{MaxSteps: 2},
			want: harness.VerificationFailed, wantSteps: 2,
			check: func(t *testing.T, out harness.Outcome) {
				if !strings.Contains(out.Reason, "the last check said") || !strings.Contains(out.Reason, "out.txt does not exist") {
					t.Errorf("reason %q", out.Reason)
				}
			}},
		{name: "step cap", noGate: true, turns: []scripted.Turn{look, look, look}, budgets: harness.Budgets{MaxSteps: 2},
			want: harness.StepCapReached, wantSteps: 2},
		{name: "finished", noGate: true, turns: []scripted.Turn{look, {Text: "All done: a.txt holds a."}},
			want: harness.Finished, wantSteps: 2,
			check: func(t *testing.T, out harness.Outcome) {
				if out.Answer != "All done: a.txt holds a." {
					t.Errorf("answer %q", out.Answer)
				}
			}},
		{name: "schema answer", noGate: true, schema: `{"type":"object","required":["n"],"properties":{"n":{"type":"integer"}}}`,
			turns: []scripted.Turn{look, {Text: "{\"n\": \"three\"}"}, {Text: "```json\n{\"n\": 3}\n```"}},
			want:  harness.Success, wantSteps: 3,
			check: func(t *testing.T, out harness.Outcome) {
				if string(out.Output) != `{"n":3}` {
					t.Errorf("output %s", out.Output)
				}
			}},
		{name: "schema unsatisfied", noGate: true, schema: `{"type":"object","required":["n"]}`,
			turns: []scripted.Turn{{Text: "nope"}, {Text: "{}"}, {Text: "[1]"}, look},
			want:  harness.SchemaUnsatisfied, wantSteps: 3},
		{name: "schema and gate", schema: `{"type":"object","required":["n"]}`,
			turns: []scripted.Turn{{Text: "{\"n\": 1}"}, write, {Text: "{\"n\": 2}"}},
			want:  harness.Success, wantSteps: 3,
			check: func(t *testing.T, out harness.Outcome) {
				if string(out.Output) != `{"n":2}` {
					t.Errorf("output %s: an answer given before the checks passed counted", out.Output)
				}
			}},
		{name: "time budget", turns: []scripted.Turn{{ToolCalls: look.ToolCalls, LatencyMS: 10_000}},
			budgets: harness.Budgets{Time: harness.Duration(150 * time.Millisecond)},
			want:    harness.TimeBudgetExceeded, wantSteps: 0},
		// The first request's conservative estimate (about 5,700 tokens)
		// fits the budget; the second's does not.
		{name: "token budget", budgets: harness.Budgets{MaxTokens: 12000},
			turns: []scripted.Turn{{ToolCalls: look.ToolCalls, Usage: usage(10000, 100)}, {ToolCalls: write.ToolCalls, Usage: usage(10000, 100)}},
			want:  harness.CostBudgetExceeded, wantSteps: 1,
			check: func(t *testing.T, out harness.Outcome) {
				if out.Budget != harness.BudgetTokens || out.Usage.Total() != 10100 {
					t.Errorf("budget %q usage %d", out.Budget, out.Usage.Total())
				}
			}},
		{name: "money budget", budgets: harness.Budgets{MaxCostUSD: 0.30},
			turns: []scripted.Turn{{ToolCalls: look.ToolCalls, CostUSD: ptr(0.25)}, {ToolCalls: look.ToolCalls, CostUSD: ptr(0.25)}, write},
			want:  harness.CostBudgetExceeded, wantSteps: 2,
			check: func(t *testing.T, out harness.Outcome) {
				if out.Budget != harness.BudgetMoney || out.Cost != (provider.Cost{USD: 0.5, Known: true}) {
					t.Errorf("budget %q cost %+v", out.Budget, out.Cost)
				}
			}},
		{name: "escalated transient", budgets: harness.Budgets{MaxRetries: intp(2)},
			turns: []scripted.Turn{{Text: "x", Fail: &scripted.Failure{Kind: provider.KindServer, Status: 503}}},
			want:  harness.Escalated, wantSteps: 0,
			check: func(t *testing.T, out harness.Outcome) {
				if !out.Retryable || !strings.Contains(out.Reason, "HTTP 503") {
					t.Errorf("retryable %v reason %q", out.Retryable, out.Reason)
				}
			}},
		{name: "escalated terminal",
			turns: []scripted.Turn{{Text: "x", Fail: &scripted.Failure{Kind: provider.KindAuth, Status: 401, Message: "bad key"}}},
			want:  harness.Escalated, wantSteps: 0,
			check: func(t *testing.T, out harness.Outcome) {
				if out.Retryable {
					t.Error("an auth failure is reported as retryable")
				}
			}},
		{name: "cancelled", turns: []scripted.Turn{look, look, write}, cancelAt: 1, want: harness.Cancelled, wantSteps: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := workspace(t, map[string]string{"a.txt": "a"})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var obs events
			opts := harness.Options{Provider: script(t, tt.turns...), Store: memStore(t), Backoff: fastBackoff,
				Observer: func(e harness.Event) {
					obs.observe(e)
					if tt.cancelAt > 0 && e.Kind == harness.EventCheckpoint && e.Step == tt.cancelAt {
						cancel()
					}
				}}
			task := harness.TaskContract{Goal: "write done to out.txt", Root: dir, Budgets: tt.budgets,
				Verification: []verify.Check{contains("out.txt", "done")}}
			if tt.noGate {
				task.Verification = nil
			}
			if tt.schema != "" {
				task.OutputSchema = json.RawMessage(tt.schema)
			}
			res, err := harness.Run(ctx, task, opts)
			if err != nil {
				t.Fatal(err)
			}
			out := res.Outcome
			if out.Kind != tt.want || out.Steps != tt.wantSteps {
				t.Fatalf("outcome %s after %d steps (%s), want %s after %d", out.Kind, out.Steps, out.Reason, tt.want, tt.wantSteps)
			}
			if tt.check != nil {
				tt.check(t, out)
			}
			// The outcome is stored, and is the last event.
			run, err := opts.Store.Run(context.Background(), res.RunID)
			if err != nil {
				t.Fatal(err)
			}
			if run.Status != store.StatusFinished || run.Outcome != string(tt.want) || run.Steps != tt.wantSteps {
				t.Errorf("stored run: status %s outcome %s steps %d", run.Status, run.Outcome, run.Steps)
			}
			kinds := obs.kinds()
			if kinds[len(kinds)-1] != harness.EventOutcome {
				t.Errorf("last event %s, want outcome", kinds[len(kinds)-1])
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// The token budget is enforced before it is spent: each request asks for
// no more output than remains, and the request that cannot be paid for is
// never sent.
func TestTokenBudgetEnforcedBeforeSpending(t *testing.T) {
	dir := workspace(t, nil)
	// Each call reports more input than the estimate of its request (a
	// count never below the truth), so the bound the budget is judged by
	// is the estimate (about 2,800 tokens), and 7,700 is spent a step:
	// two requests, not three (1,600 are left for the third).
	look := scripted.Turn{ToolCalls: calls(call("list_dir", map[string]string{})).ToolCalls, Usage: usage(7500, 200)}
	rec := &recorder{Provider: script(t, look, look, look, look)}
	const budget = 17000
	task := harness.TaskContract{Goal: "g", Root: dir, Budgets: harness.Budgets{MaxTokens: budget},
		Verification: []verify.Check{contains("never.txt", "x")}}
	res, err := harness.Run(context.Background(), task, harness.Options{Provider: rec, Store: memStore(t)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome.Kind != harness.CostBudgetExceeded || res.Outcome.Steps != 2 {
		t.Fatalf("outcome %+v", res.Outcome)
	}
	if rec.count() != 2 {
		t.Fatalf("%d requests sent; the third could not be paid for and must not be sent", rec.count())
	}
	for i, req := range rec.requests {
		spent := int64(i) * 7700
		want := budget - spent - provider.EstimateInput(req)
		if req.MaxOutputTokens != want {
			t.Errorf("request %d asks for %d output tokens, want %d (budget %d, spent %d)", i+1, req.MaxOutputTokens, want, budget, spent)
		}
	}
}

// The money budget caps output tokens through the provider's prices.
func TestMoneyBudgetCapsOutput(t *testing.T) {
	dir := workspace(t, nil)
	sp, err := scripted.New(scripted.Script{Price: &provider.Price{Input: 1, Output: 10},
		Turns: []scripted.Turn{{ToolCalls: calls(call("list_dir", map[string]string{})).ToolCalls, Usage: usage(100, 10)}}})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{Provider: sp}
	task := harness.TaskContract{Goal: "g", Root: dir, Budgets: harness.Budgets{MaxCostUSD: 0.01, MaxSteps: 1},
		Verification: []verify.Check{contains("never.txt", "x")}}
	if _, err := harness.Run(context.Background(), task, harness.Options{Provider: rec, Store: memStore(t)}); err != nil {
		t.Fatal(err)
	}
	req := rec.requests[0]
	in := provider.EstimateInput(req)
	want := int64((0.01 - float64(in)/1e6) / 10 * 1e6)
	if req.MaxOutputTokens != want {
		t.Errorf("MaxOutputTokens = %d, want %d ($0.01 less %d input tokens at $1/M, output at $10/M)", req.MaxOutputTokens, want, in)
	}
}

// A refused path is reported with its reason and costs a step: a model
// that keeps trying it reaches the step cap.
func TestRefusedPathCostsAStep(t *testing.T) {
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret.txt")
	os.WriteFile(secret, []byte("s3cret"), 0o644)
	dir := workspace(t, nil)
	if err := os.Symlink(secret, filepath.Join(dir, "link.txt")); err != nil {
		t.Fatal(err)
	}
	escape := calls(call("read_file", map[string]string{"path": "../" + filepath.Base(outside) + "/secret.txt"}),
		call("read_file", map[string]string{"path": "link.txt"}),
		call("write_file", map[string]string{"path": secret, "content": "pwned"}))
	st := memStore(t)
	var obs events
	task := harness.TaskContract{Goal: "g", Root: dir, Budgets: harness.Budgets{MaxSteps: 2},
		Verification: []verify.Check{contains("out.txt", "x")}}
	res, err := harness.Run(context.Background(), task, harness.Options{Provider: script(t, escape, escape), Store: st, Observer: obs.observe})
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome.Kind != harness.VerificationFailed || res.Outcome.Steps != 2 {
		t.Fatalf("outcome %+v, want verification_failed after 2 steps", res.Outcome)
	}
	refusals := obs.of(harness.EventRefusal)
	if len(refusals) != 6 {
		t.Fatalf("%d refusal events, want 6", len(refusals))
	}
	for _, e := range refusals {
		if e.Reason == "" {
			t.Errorf("refusal of %s has no reason", e.Tool)
		}
	}
	steps, err := st.Steps(context.Background(), res.RunID)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range steps[0].Observations[:3] {
		if o.Refusal == "" || !o.IsError || strings.Contains(o.Output, "s3cret") {
			t.Errorf("observation %+v: want a refusal with its reason and no secret", o)
		}
	}
	if data, _ := os.ReadFile(secret); string(data) != "s3cret" {
		t.Errorf("the file outside the workspace now holds %q", data)
	}
}

// Transient failures are retried with backoff, Retry-After is honoured,
// and every attempt is in the trace.
func TestRetryHonoursRetryAfter(t *testing.T) {
	dir := workspace(t, nil)
	turn := calls(call("write_file", map[string]string{"path": "out.txt", "content": "done"}))
	turn.Fail = &scripted.Failure{Kind: provider.KindRateLimited, Status: 429, RetryAfterMS: 30, Times: 2}
	st := memStore(t)
	var obs events
	task := harness.TaskContract{Goal: "g", Root: dir, Verification: []verify.Check{contains("out.txt", "done")}}
	start := time.Now()
	res, err := harness.Run(context.Background(), task, harness.Options{Provider: script(t, turn), Store: st, Observer: obs.observe})
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome.Kind != harness.Success {
		t.Fatalf("outcome %+v", res.Outcome)
	}
	if time.Since(start) < 60*time.Millisecond {
		t.Errorf("two Retry-After waits of 30ms took %v", time.Since(start))
	}
	retries := obs.of(harness.EventRetry)
	if len(retries) != 2 || retries[0].WaitMS != 30 || retries[0].ErrorKind != provider.KindRateLimited {
		t.Fatalf("retry events %+v", retries)
	}
	steps, _ := st.Steps(context.Background(), res.RunID)
	var kinds []string
	for _, a := range steps[0].Attempts {
		kinds = append(kinds, a.ErrorKind)
	}
	if diff := cmp.Diff([]string{"rate_limited", "rate_limited", ""}, kinds); diff != "" {
		t.Errorf("attempts (-want +got):\n%s", diff)
	}
}

// A retry whose wait would pass the time budget is not waited for. The
// budget (20 s) is far more than a loaded machine takes to reach the first
// request, and the asked-for wait (a minute) passes it all the same.
func TestRetryNeverSleepsPastTheTimeBudget(t *testing.T) {
	dir := workspace(t, nil)
	turn := scripted.Turn{Text: "x", Fail: &scripted.Failure{Kind: provider.KindRateLimited, RetryAfterMS: 60_000}}
	task := harness.TaskContract{Goal: "g", Root: dir, Budgets: harness.Budgets{Time: harness.Duration(20 * time.Second)},
		Verification: []verify.Check{contains("out.txt", "done")}}
	res, err := harness.Run(context.Background(), task, harness.Options{Provider: script(t, turn), Store: memStore(t)})
	if err != nil {
		t.Fatal(err)
	}
	// A run that slept the minute would have ended on its time budget
	// instead: the outcome says it did not wait.
	if res.Outcome.Kind != harness.Escalated || !res.Outcome.Retryable {
		t.Fatalf("outcome %+v; want a retryable escalation without the wait", res.Outcome)
	}
	if !strings.Contains(res.Outcome.Reason, "pass the time budget") {
		t.Errorf("reason %q does not say why", res.Outcome.Reason)
	}
}

// When the primary escalates the fallback answers, and the run stays on it.
func TestFallbackChain(t *testing.T) {
	dir := workspace(t, nil)
	dead := &recorder{Provider: script(t, scripted.Turn{Text: "x", Fail: &scripted.Failure{Kind: provider.KindAuth, Status: 401}})}
	look := calls(call("list_dir", map[string]string{}))
	write := calls(call("write_file", map[string]string{"path": "out.txt", "content": "done"}))
	sp, _ := scripted.New(scripted.Script{Name: "backup", Turns: []scripted.Turn{look, write}})
	backup := &recorder{Provider: sp}
	var obs events
	st := memStore(t)
	task := harness.TaskContract{Goal: "g", Root: dir, Verification: []verify.Check{contains("out.txt", "done")}}
	res, err := harness.Run(context.Background(), task, harness.Options{Provider: dead, Fallbacks: []provider.Provider{backup},
		Store: st, Observer: obs.observe, Backoff: fastBackoff})
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome.Kind != harness.Success || res.Outcome.Steps != 2 {
		t.Fatalf("outcome %+v", res.Outcome)
	}
	if dead.count() != 1 {
		t.Errorf("primary called %d times; an auth failure is not retried and the run stays on the fallback", dead.count())
	}
	fb := obs.of(harness.EventFallback)
	if len(fb) != 1 || fb[0].Provider != "backup" || fb[0].ErrorKind != provider.KindAuth {
		t.Errorf("fallback events %+v", fb)
	}
	steps, _ := st.Steps(context.Background(), res.RunID)
	if steps[0].Provider != "backup" || steps[1].Provider != "backup" {
		t.Errorf("steps answered by %q, %q", steps[0].Provider, steps[1].Provider)
	}
}

// The context the model sees holds the contract, the tools, the history
// and the observations, and a big observation is truncated with a marker.
func TestContextIsBuiltFromContractHistoryAndObservations(t *testing.T) {
	big := strings.Repeat("0123456789abcdef\n", 1500) // 25.5 KiB
	dir := workspace(t, map[string]string{"big.txt": big})
	rec := &recorder{Provider: script(t,
		calls(call("read_file", map[string]string{"path": "big.txt"})),
		calls(call("write_file", map[string]string{"path": "out.txt", "content": "done"})))}
	task := harness.TaskContract{Goal: "find the needle", Root: dir, Constraints: []string{"do not delete anything"},
		ExpectedOutput: "a file", SuccessCriteria: []string{"out.txt says done"},
		Verification: []verify.Check{contains("out.txt", "done")}}
	if _, err := harness.Run(context.Background(), task, harness.Options{Provider: rec, Store: memStore(t)}); err != nil {
		t.Fatal(err)
	}
	first := rec.requests[0]
	for _, want := range []string{"find the needle", "do not delete anything", "a file", "out.txt says done", `out.txt must contain "done"`, "at most 12 steps"} {
		if !strings.Contains(first.Messages[0].Content, want) {
			t.Errorf("the task message lacks %q", want)
		}
	}
	var names []string
	for _, tl := range first.Tools {
		names = append(names, tl.Name)
	}
	if diff := cmp.Diff([]string{"read_file", "write_file", "edit_file", "list_dir", "grep", "find", "exec"}, names); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}
	second := rec.requests[1]
	roles := []provider.Role{}
	for _, m := range second.Messages {
		roles = append(roles, m.Role)
	}
	if diff := cmp.Diff([]provider.Role{provider.RoleUser, provider.RoleAssistant, provider.RoleTool, provider.RoleUser}, roles); diff != "" {
		t.Fatalf("roles of the second request (-want +got):\n%s", diff)
	}
	obs := second.Messages[2]
	if obs.ToolCallID != second.Messages[1].ToolCalls[0].ID {
		t.Errorf("tool result answers %q, the call was %q", obs.ToolCallID, second.Messages[1].ToolCalls[0].ID)
	}
	if len(obs.Content) > 17<<10 || !strings.Contains(obs.Content, "bytes truncated") {
		t.Errorf("a %d-byte observation reached the model as %d bytes without a marker", len(big), len(obs.Content))
	}
	if !strings.Contains(second.Messages[3].Content, "Verification after step 1: not yet passed") {
		t.Errorf("verification feedback missing: %q", second.Messages[3].Content)
	}
}

// A single-file task shows the file every step and refuses other paths.
func TestSingleFileTask(t *testing.T) {
	dir := workspace(t, map[string]string{"main.go": "package main\n", "other.go": "package other\n"})
	rec := &recorder{Provider: script(t,
		calls(call("write_file", map[string]string{"path": "other.go", "content": "x"})),
		calls(call("write_file", map[string]string{"content": "package main\n\nfunc main() {}\n"})))}
	task := harness.TaskContract{Goal: "add main", File: filepath.Join(dir, "main.go"),
		Verification: []verify.Check{{Kind: verify.FileContains, Text: "func main()"}}}
	res, err := harness.Run(context.Background(), task, harness.Options{Provider: rec, Store: memStore(t)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome.Kind != harness.Success || res.Outcome.Steps != 2 {
		t.Fatalf("outcome %+v", res.Outcome)
	}
	if data, _ := os.ReadFile(filepath.Join(dir, "other.go")); string(data) != "package other\n" {
		t.Errorf("a single-file task changed another file: %q", data)
	}
	last := rec.requests[0].Messages[len(rec.requests[0].Messages)-1].Content
	if !strings.Contains(last, "Current content of main.go") || !strings.Contains(last, "package main") {
		t.Errorf("the file is not shown: %q", last)
	}
	if len(rec.requests[0].Tools) != 3 {
		t.Errorf("a single-file task offers %d tools, want read_file, write_file and edit_file", len(rec.requests[0].Tools))
	}
}

func TestRunErrorsAreTyped(t *testing.T) {
	dir := workspace(t, nil)
	good := harness.TaskContract{Goal: "g", Root: dir, Verification: []verify.Check{contains("a", "b")}}
	_, err := harness.Run(context.Background(), good, harness.Options{})
	var he *harness.Error
	if !errors.Is(err, harness.ErrConfig) || !errors.As(err, &he) || he.Field != "options.provider" {
		t.Errorf("no provider: %v", err)
	}
	bad := good
	bad.Budgets.MaxSteps = -1
	_, err = harness.Run(context.Background(), bad, harness.Options{Provider: script(t, scripted.Turn{Text: "x"})})
	if !errors.As(err, &he) || he.Kind != harness.ErrConfig || he.Field != "budgets.max_steps" {
		t.Errorf("negative max_steps: %v", err)
	}
}

// Read-only calls of one turn run at once, and the model and the trace
// see their results in the order it made them. Each read waits on a
// barrier that opens only when all of them have started: run one by one
// they would wait forever, or, here, until hangGuard, which no loaded
// machine needs. The negative control is the turn with a write
// between them, which splits the batch: the first read, alone, gives up
// its wait after a second. A loaded machine cannot make the control
// fail, since nothing else can start while that read runs.
func TestParallelReads(t *testing.T) {
	dir := workspace(t, map[string]string{"a.txt": "A", "b.txt": "B", "c.txt": "C"})
	const n = 3
	var started atomic.Int32
	all := make(chan struct{})
	barrier := &barrierTool{started: &started, n: n, all: all, wait: hangGuard}
	turn := calls(call("barrier", map[string]string{"path": "a.txt"}), call("barrier", map[string]string{"path": "b.txt"}),
		call("barrier", map[string]string{"path": "c.txt"}))
	var obs events
	st := memStore(t)
	task := harness.TaskContract{Goal: "g", Root: dir, Budgets: harness.Budgets{MaxSteps: 1}}
	res, err := harness.Run(context.Background(), task, harness.Options{Provider: script(t, turn), Store: st,
		Tools: []tool.Tool{barrier}, Observer: obs.observe})
	if err != nil {
		t.Fatal(err)
	}
	steps, _ := st.Steps(context.Background(), res.RunID)
	var got []string
	for _, o := range steps[0].Observations {
		got = append(got, o.Output)
	}
	if strings.Join(got, ",") != "A (together),B (together),C (together)" {
		t.Errorf("observations %q: the reads did not run at once, or came back out of order", got)
	}
	var ids []string
	for _, e := range obs.of(harness.EventToolResult) {
		ids = append(ids, e.CallID)
	}
	if strings.Join(ids, ",") != "call_1_1,call_1_2,call_1_3" {
		t.Errorf("tool results in the trace, out of order: %v", ids)
	}

	// Negative control: a write between the reads splits the batch, and
	// the first read, alone, never sees the others start.
	var started2 atomic.Int32
	lone := &barrierTool{started: &started2, n: n, all: make(chan struct{}), wait: time.Second}
	split := calls(call("barrier", map[string]string{"path": "a.txt"}), call("write_file", map[string]string{"path": "x.txt", "content": "x"}),
		call("barrier", map[string]string{"path": "b.txt"}), call("barrier", map[string]string{"path": "c.txt"}))
	st2 := memStore(t)
	res, err = harness.Run(context.Background(), task, harness.Options{Provider: script(t, split), Store: st2, Tools: []tool.Tool{lone}})
	if err != nil {
		t.Fatal(err)
	}
	steps, _ = st2.Steps(context.Background(), res.RunID)
	if !strings.HasSuffix(steps[0].Observations[0].Output, "(alone)") {
		t.Errorf("negative control: a read split from the others by a write ran %q", steps[0].Observations[0].Output)
	}
}

// barrierTool is a read-only tool that reads a file once every call of
// the batch has started, or after waiting alone for wait.
type barrierTool struct {
	started *atomic.Int32
	n       int32
	all     chan struct{}
	once    sync.Once
	wait    time.Duration
}

func (b *barrierTool) Spec() provider.ToolSpec {
	return provider.ToolSpec{Name: "barrier", Description: "read a file", Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`)}
}
func (b *barrierTool) ReadOnly() bool   { return true }
func (b *barrierTool) Idempotent() bool { return true }
func (b *barrierTool) Call(ctx context.Context, env *tool.Env, args json.RawMessage) tool.Result {
	var a struct{ Path string }
	json.Unmarshal(args, &a)
	if b.started.Add(1) == b.n {
		b.once.Do(func() { close(b.all) })
	}
	how := " (together)"
	select {
	case <-b.all:
	case <-time.After(b.wait):
		how = " (alone)"
	}
	data, _ := env.Root.ReadFile(a.Path)
	return tool.Result{Output: string(data) + how}
}

// fileVerifier is a Go check of the caller's: the file holds the text.
type fileVerifier struct{ file, text string }

func (v fileVerifier) Describe() string { return v.file + " says " + v.text }
func (v fileVerifier) Verify(_ context.Context, env *verify.Env) (verify.Result, error) {
	data, _ := env.Root.ReadFile(v.file)
	if strings.Contains(string(data), v.text) {
		return verify.Result{Passed: true, Detail: v.Describe()}, nil
	}
	return verify.Result{Detail: v.file + " does not say " + v.text}, nil
}

// A caller's own verifier is part of the gate: the run succeeds only when
// it passes too, and the model is told what it checks. Omitted built-in
// tools are not offered.
func TestCallerVerifierAndOmittedTools(t *testing.T) {
	dir := workspace(t, nil)
	rec := &recorder{Provider: script(t, calls(write("out.txt", "done")), calls(write("ok.txt", "yes")))}
	task := harness.TaskContract{Goal: "g", Root: dir, Verification: []verify.Check{contains("out.txt", "done")}}
	res, err := harness.Run(context.Background(), task, harness.Options{Provider: rec, Store: memStore(t),
		Verifiers: []verify.Verifier{fileVerifier{"ok.txt", "yes"}}, OmitTools: []string{"exec", "grep"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome.Kind != harness.Success || res.Outcome.Steps != 2 {
		t.Fatalf("outcome %+v: the caller's verifier did not hold the run back at step 1", res.Outcome)
	}
	req := rec.requests[0]
	if !strings.Contains(req.Messages[0].Content, "ok.txt says yes") {
		t.Errorf("the model is not told of the caller's check:\n%s", req.Messages[0].Content)
	}
	for _, s := range req.Tools {
		if s.Name == "exec" || s.Name == "grep" {
			t.Errorf("omitted tool %s is offered", s.Name)
		}
	}
	if _, err := harness.Run(context.Background(), task, harness.Options{Provider: rec, OmitTools: []string{"nope"}}); err == nil {
		t.Error("omitting a tool that is not built in is not an error")
	}
}

// brokenArgs answers its first turn with a call whose arguments are not
// JSON, as a weak model does, then with an answer.
type brokenArgs struct{ turns int }

func (b *brokenArgs) Name() string { return "broken" }

func (b *brokenArgs) Complete(ctx context.Context, req *provider.Request, _ func(string)) (*provider.Response, error) {
	b.turns++
	if b.turns == 1 {
		return &provider.Response{StopReason: provider.StopToolUse, Usage: provider.Usage{InputTokens: 10, OutputTokens: 5},
			ToolCalls: []provider.ToolCall{{ID: "c1", Name: "write_file", Arguments: json.RawMessage(`{"path": "a.txt", "content": "x`)}}}, nil
	}
	return &provider.Response{Text: "done", StopReason: provider.StopEnd, Usage: provider.Usage{InputTokens: 10, OutputTokens: 5}}, nil
}

// A call whose arguments are not JSON is an observation the model can
// correct, not a step that cannot be stored: the turn is committed (on a
// store file, whose encoder refuses invalid JSON), the call is not run,
// and the run goes on.
func TestInvalidArgumentsAreAnObservation(t *testing.T) {
	dir := workspace(t, nil)
	st, _ := fileStore(t)
	var ev events
	res, err := harness.Run(context.Background(), harness.TaskContract{Goal: "g", Root: dir},
		harness.Options{Provider: &brokenArgs{}, Store: st, Observer: ev.observe})
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome.Kind != harness.Finished || res.Outcome.Steps != 2 {
		t.Fatalf("outcome %+v", res.Outcome)
	}
	results := ev.of(harness.EventToolResult)
	if len(results) != 1 || !results[0].IsError || !strings.Contains(results[0].Output, "not valid JSON") {
		t.Errorf("the broken call's observation: %+v", results)
	}
	if _, err := os.Stat(filepath.Join(dir, "a.txt")); err == nil {
		t.Error("a call with broken arguments ran")
	}
	steps, err := st.Steps(context.Background(), res.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(steps[0].Assistant.ToolCalls[0].Arguments); !strings.Contains(got, "invalid_json") {
		t.Errorf("stored arguments: %s", got)
	}
}

// The task's output schema rides on every request, for the providers
// whose wire has a structured-output mode; a task without one sends none.
func TestOutputSchemaReachesTheProvider(t *testing.T) {
	schema := json.RawMessage(`{"type":"object","required":["n"],"properties":{"n":{"type":"integer"}}}`)
	look := calls(call("list_dir", map[string]string{}))
	for _, s := range []json.RawMessage{schema, nil} {
		rec := &recorder{Provider: script(t, look, scripted.Turn{Text: `{"n": 2}`})}
		task := harness.TaskContract{Goal: "count", Root: workspace(t, nil), OutputSchema: s}
		res, err := harness.Run(context.Background(), task, harness.Options{Provider: rec, Store: memStore(t)})
		if err != nil {
			t.Fatal(err)
		}
		if res.Outcome.Steps != 2 || len(rec.requests) != 2 {
			t.Fatalf("outcome %+v after %d requests", res.Outcome, len(rec.requests))
		}
		for i, req := range rec.requests {
			if string(req.OutputSchema) != string(s) {
				t.Errorf("request %d carries schema %s, want %s", i, req.OutputSchema, s)
			}
		}
	}
}
