package harness_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/initorigin/io-harness-go/pkg/harness"
	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/scripted"
	"github.com/initorigin/io-harness-go/pkg/harness/store"
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
		want      harness.OutcomeKind
		wantSteps int
		check     func(t *testing.T, out harness.Outcome)
	}{
		{name: "success", turns: []scripted.Turn{look, write}, want: harness.Success, wantSteps: 2},
		{name: "step cap", turns: []scripted.Turn{look, look, look}, budgets: harness.Budgets{MaxSteps: 2},
			want: harness.StepCapReached, wantSteps: 2},
		{name: "time budget", turns: []scripted.Turn{{ToolCalls: look.ToolCalls, LatencyMS: 10_000}},
			budgets: harness.Budgets{Time: harness.Duration(150 * time.Millisecond)},
			want:    harness.TimeBudgetExceeded, wantSteps: 0},
		{name: "token budget", budgets: harness.Budgets{MaxTokens: 2500},
			turns: []scripted.Turn{{ToolCalls: look.ToolCalls, Usage: usage(1500, 100)}, {ToolCalls: write.ToolCalls, Usage: usage(1500, 100)}},
			want:  harness.CostBudgetExceeded, wantSteps: 1,
			check: func(t *testing.T, out harness.Outcome) {
				if out.Budget != harness.BudgetTokens || out.Usage.Total() != 1600 {
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
	look := scripted.Turn{ToolCalls: calls(call("list_dir", map[string]string{})).ToolCalls, Usage: usage(2000, 200)}
	rec := &recorder{Provider: script(t, look, look, look, look)}
	task := harness.TaskContract{Goal: "g", Root: dir, Budgets: harness.Budgets{MaxTokens: 6000},
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
		spent := int64(i) * 2200
		want := 6000 - spent - provider.EstimateInput(req)
		if req.MaxOutputTokens != want {
			t.Errorf("request %d asks for %d output tokens, want %d (budget 6000, spent %d)", i+1, req.MaxOutputTokens, want, spent)
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
	if res.Outcome.Kind != harness.StepCapReached || res.Outcome.Steps != 2 {
		t.Fatalf("outcome %+v, want step_cap_reached after 2 steps", res.Outcome)
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

// A retry whose wait would pass the time budget is not waited for.
func TestRetryNeverSleepsPastTheTimeBudget(t *testing.T) {
	dir := workspace(t, nil)
	turn := scripted.Turn{Text: "x", Fail: &scripted.Failure{Kind: provider.KindRateLimited, RetryAfterMS: 60_000}}
	task := harness.TaskContract{Goal: "g", Root: dir, Budgets: harness.Budgets{Time: harness.Duration(5 * time.Second)},
		Verification: []verify.Check{contains("out.txt", "done")}}
	start := time.Now()
	res, err := harness.Run(context.Background(), task, harness.Options{Provider: script(t, turn), Store: memStore(t)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome.Kind != harness.Escalated || !res.Outcome.Retryable || time.Since(start) > 2*time.Second {
		t.Fatalf("outcome %+v after %v; want an immediate retryable escalation", res.Outcome, time.Since(start))
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
