package harness_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/initorigin/io-harness-go/pkg/harness"
	"github.com/initorigin/io-harness-go/pkg/harness/approve"
	"github.com/initorigin/io-harness-go/pkg/harness/policy"
	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/scripted"
	"github.com/initorigin/io-harness-go/pkg/harness/store"
	"github.com/initorigin/io-harness-go/pkg/harness/verify"
	"github.com/initorigin/io-harness-go/pkg/sandbox"
)

// askWrites asks before every write and allows the rest.
func askWrites() *policy.Policy {
	return &policy.Policy{Version: 1, Defaults: policy.Defaults{Read: policy.Allow, Write: policy.Ask, Exec: policy.Allow, Net: policy.Deny}}
}

// An approved action is carried out even when the step budget is spent,
// since carrying out what a person approved is not a model step; and a
// gate it satisfies ends the run success with no further request.
func TestApprovedActionOnTheLastStep(t *testing.T) {
	dir := workspace(t, nil)
	st := memStore(t)
	rec := &recorder{Provider: script(t, calls(write("out.txt", "done")))}
	task := harness.TaskContract{Goal: "g", Root: dir, Budgets: harness.Budgets{MaxSteps: 1},
		Verification: []verify.Check{contains("out.txt", "done")}}
	res, err := harness.Run(context.Background(), task, harness.Options{Provider: rec, Store: st, Policy: askWrites(), Approver: approve.DeferAll()})
	if err != nil || res.Outcome.Kind != harness.AwaitingApproval {
		t.Fatalf("first: %+v %v", res, err)
	}
	done, err := harness.ResumeWithDecision(context.Background(), res.RunID, res.Outcome.RequestID, approve.Decision{Kind: approve.Approve},
		harness.Options{Provider: rec, Store: st}, harness.ResumeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if done.Outcome.Kind != harness.Success || done.Outcome.Steps != 1 {
		t.Errorf("after approval: %+v", done.Outcome)
	}
	if data, _ := os.ReadFile(filepath.Join(dir, "out.txt")); string(data) != "done" {
		t.Errorf("the approved write was not performed: %q", data)
	}
	if rec.count() != 1 {
		t.Errorf("%d requests: approving sent another", rec.count())
	}
	a, _ := st.Approval(context.Background(), res.RunID, res.Outcome.RequestID)
	if a.State != store.ApprovalPerformed || a.Result == nil || !strings.Contains(a.Result.Output, "approved and carried out") {
		t.Errorf("the approval record: %+v", a)
	}
}

// Time spent waiting for a person is not spent from the time budget: a
// run paused longer than its whole budget continues after the decision.
// The pause is an hour, made by a store that dates the run's start and
// pause an hour back (and its reopening an hour on), without a sleep; the
// budget is half an hour. Counting the pause ends the run at once, and no
// loaded machine spends half an hour on the two steps that remain.
func TestPausedTimeIsNotSpent(t *testing.T) {
	dir := workspace(t, nil)
	st := memStore(t)
	turns := []scripted.Turn{calls(write("a.txt", "a")), calls(write("out.txt", "done"))}
	task := harness.TaskContract{Goal: "g", Root: dir, Budgets: harness.Budgets{MaxSteps: 4, Time: harness.Duration(30 * time.Minute)},
		Verification: []verify.Check{contains("out.txt", "done")}}
	p := askWrites()
	p.Layers = []policy.Layer{{Name: "l", Rules: []policy.Rule{{Act: policy.Write, Effect: policy.Allow, Pattern: "out.txt"}}}}
	res, err := harness.Run(context.Background(), task, harness.Options{Provider: script(t, turns...), Store: st, Policy: p, Approver: approve.DeferAll()})
	if err != nil || res.Outcome.Kind != harness.AwaitingApproval {
		t.Fatalf("first: %+v %v", res, err)
	}
	// A person takes an hour, longer than the whole budget.
	later := &agedStore{Store: st, by: time.Hour}
	done, err := harness.ResumeWithDecision(context.Background(), res.RunID, res.Outcome.RequestID, approve.Decision{Kind: approve.Approve},
		harness.Options{Provider: script(t, turns...), Store: later}, harness.ResumeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if done.Outcome.Kind != harness.Success {
		t.Fatalf("after a long pause: %+v", done.Outcome)
	}
	if data, _ := os.ReadFile(filepath.Join(dir, "a.txt")); string(data) != "a" {
		t.Errorf("the approved write was not performed: %q", data)
	}
	r, _ := st.Run(context.Background(), res.RunID)
	if r.Paused < time.Hour {
		t.Errorf("the run records %s paused, want the hour", r.Paused)
	}
}

// agedStore is a store seen by a driver that comes back by later than
// the run's clock says: the run started and paused by earlier, and it is
// reopened by later.
type agedStore struct {
	store.Store
	by time.Duration
}

func (s *agedStore) Run(ctx context.Context, id string) (*store.Run, error) {
	r, err := s.Store.Run(ctx, id)
	if err != nil {
		return nil, err
	}
	aged := *r
	aged.StartedAt = aged.StartedAt.Add(-s.by)
	if !aged.PausedAt.IsZero() {
		aged.PausedAt = aged.PausedAt.Add(-s.by)
	}
	return &aged, nil
}

func (s *agedStore) ReopenRun(ctx context.Context, l *store.Lease, task, policy json.RawMessage, at time.Time, events []store.Event) error {
	return s.Store.ReopenRun(ctx, l, task, policy, at.Add(s.by), events)
}

// A money budget that could not be enforced is a configuration error
// naming the price, not a budget that silently does nothing.
func TestMoneyBudgetNeedsAPrice(t *testing.T) {
	dir := workspace(t, nil)
	task := harness.TaskContract{Goal: "g", Root: dir, Budgets: harness.Budgets{MaxCostUSD: 0.01},
		Verification: []verify.Check{contains("out.txt", "done")}}
	spec, err := harness.ParseSpec([]byte(`{"task": {"goal": "g", "root": "` + dir + `",
		"verification": [{"kind": "workspace_file_contains", "file": "out.txt", "text": "done"}], "budgets": {"max_cost_usd": 0.01}},
		"provider": {"name": "openai_compatible", "base_url": "http://127.0.0.1:9/v1", "model": "my-local-model", "api_key": "k"}}`))
	if err != nil {
		t.Fatal(err)
	}
	opts, err := spec.Options(nil)
	if err != nil {
		t.Fatal(err)
	}
	opts.Store = memStore(t)
	_, err = harness.Run(context.Background(), spec.Task, opts)
	var he *harness.Error
	if !errors.As(err, &he) || he.Kind != harness.ErrConfig || he.Field != "provider.price" {
		t.Fatalf("a money budget without a price: %v", err)
	}
	priced, err := scripted.New(scripted.Script{Turns: []scripted.Turn{calls(write("out.txt", "done"))}, Price: &provider.Price{Input: 1, Output: 2}})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := harness.Run(context.Background(), task, harness.Options{Provider: priced, Store: memStore(t)}); err != nil || res.Outcome.Kind != harness.Success {
		t.Errorf("negative control: with a price the run goes: %+v %v", res, err)
	}
}

// A provider that asks to wait an hour ends the run at once, retryable,
// naming the wait, instead of sleeping for it.
func TestRetryAfterOverTheCeiling(t *testing.T) {
	dir := workspace(t, nil)
	turn := scripted.Turn{Text: "x", Fail: &scripted.Failure{Kind: provider.KindRateLimited, RetryAfterMS: 3_600_000}}
	task := harness.TaskContract{Goal: "g", Root: dir, Verification: []verify.Check{contains("out.txt", "done")}}
	res, err := harness.Run(context.Background(), task, harness.Options{Provider: script(t, turn), Store: memStore(t)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome.Kind != harness.Escalated || !res.Outcome.Retryable || !strings.Contains(res.Outcome.Reason, "wait 1h0m0s") ||
		!strings.Contains(res.Outcome.Reason, "30s ceiling") {
		t.Fatalf("outcome %+v", res.Outcome)
	}
}

// Resuming with one budget raised keeps the others.
func TestResumeMergesBudgets(t *testing.T) {
	dir := workspace(t, nil)
	st := memStore(t)
	task := harness.TaskContract{Goal: "g", Root: dir,
		Budgets:      harness.Budgets{MaxSteps: 1, MaxTokens: 20000, Time: harness.Duration(time.Hour)},
		Verification: []verify.Check{contains("step-3.txt", "3")}}
	res, err := harness.Run(context.Background(), task, harness.Options{Provider: script(t, numbered(3)...), Store: st})
	if err != nil || res.Outcome.Kind != harness.VerificationFailed {
		t.Fatalf("first: %+v %v", res, err)
	}
	_, err = harness.Resume(context.Background(), res.RunID, harness.Options{Provider: script(t, numbered(3)...), Store: st},
		harness.ResumeOptions{Budgets: &harness.Budgets{MaxSteps: 5}})
	if err != nil {
		t.Fatal(err)
	}
	r, _ := st.Run(context.Background(), res.RunID)
	var stored harness.TaskContract
	if err := json.Unmarshal(r.Task, &stored); err != nil {
		t.Fatal(err)
	}
	if stored.Budgets.MaxSteps != 5 || stored.Budgets.MaxTokens != 20000 || stored.Budgets.Time != harness.Duration(time.Hour) {
		t.Errorf("stored budgets after a resume raising max_steps: %+v", stored.Budgets)
	}
}

// Run leaves the caller's task as it was: a template task judges every
// run by its pinned files as they are when that run starts.
func TestRunDoesNotChangeTheTask(t *testing.T) {
	dir := workspace(t, map[string]string{"judge.txt": "first"})
	task := harness.TaskContract{Goal: "g", Root: dir, Budgets: harness.Budgets{MaxSteps: 1},
		Verification: []verify.Check{{Kind: verify.CommandSucceeds, Argv: []string{"true"}, Pin: []string{"judge.txt"}}}}
	if err := task.Validate(); err != nil {
		t.Fatal(err)
	}
	if task.Verification[0].Pinned != nil || !filepath.IsAbs(dir) {
		t.Fatalf("Validate changed the task: %+v", task.Verification[0])
	}
	st := memStore(t)
	if _, err := harness.Run(context.Background(), task, harness.Options{Provider: script(t, calls(call("list_dir", map[string]any{}))), Store: st}); err != nil {
		t.Fatal(err)
	}
	if task.Verification[0].Pinned != nil {
		t.Errorf("Run pinned the caller's task: %+v", task.Verification[0].Pinned)
	}
	os.WriteFile(filepath.Join(dir, "judge.txt"), []byte("second"), 0o644)
	res, err := harness.Run(context.Background(), task, harness.Options{Provider: script(t, calls(call("list_dir", map[string]any{}))), Store: st})
	if err != nil {
		t.Fatal(err)
	}
	r, _ := st.Run(context.Background(), res.RunID)
	if !strings.Contains(string(r.Task), `"judge.txt":"second"`) {
		t.Errorf("the second run judged by the first run's pinned file: %s", r.Task)
	}
}

// A gate the time budget cuts short is a failed check: the step commits
// and the run ends time_budget_exceeded, with an outcome. The gate would
// take an hour and the budget is 10 s: the step before it must not use up
// the budget, however loaded the machine, and only the gate can.
func TestGateCutShortByTheTimeBudget(t *testing.T) {
	if _, err := sandbox.New(context.Background(), nil); err != nil {
		t.Skipf("no sandbox backend works here: %v", err)
	}
	dir := workspace(t, nil)
	st := memStore(t)
	task := harness.TaskContract{Goal: "g", Root: dir, Budgets: harness.Budgets{Time: harness.Duration(10 * time.Second)},
		Verification: []verify.Check{{Kind: verify.CommandSucceeds, Argv: []string{"sleep", "3600"}}}}
	res, err := harness.Run(context.Background(), task, harness.Options{Provider: script(t, calls(write("a.txt", "a"))), Store: st})
	if err != nil {
		t.Fatalf("a gate cut short is not an error of the run: %v", err)
	}
	if res.Outcome.Kind != harness.TimeBudgetExceeded || res.Outcome.Steps != 1 {
		t.Fatalf("outcome %+v", res.Outcome)
	}
	r, _ := st.Run(context.Background(), res.RunID)
	steps, _ := st.Steps(context.Background(), res.RunID)
	if r.Status != store.StatusFinished || len(steps) != 1 || !strings.Contains(steps[0].Observations[len(steps[0].Observations)-1].Output, "cut short") {
		t.Errorf("run %+v, steps %+v", r, steps)
	}
	if data, _ := os.ReadFile(filepath.Join(dir, "a.txt")); string(data) != "a" {
		t.Error("the step's write is lost")
	}
}

// A run that starts is stored before its id is heard of: the observer's
// first event names a run the store already holds. (A run the policy
// refuses is neither stored nor heard of: TestProviderLayer.)
func TestRunIsStoredBeforeItsIDIsHeard(t *testing.T) {
	dir := workspace(t, nil)
	st := memStore(t)
	var first harness.Event
	heard := func(e harness.Event) {
		if first.Kind != "" {
			return
		}
		first = e
		if _, err := st.Run(context.Background(), e.RunID); err != nil {
			t.Errorf("the observer heard of run %s before it was stored: %v", e.RunID, err)
		}
	}
	task := harness.TaskContract{Goal: "g", Root: dir, Verification: []verify.Check{contains("out.txt", "done")}}
	if _, err := harness.Run(context.Background(), task, harness.Options{Provider: script(t, calls(write("out.txt", "done"))), Store: st, Observer: heard}); err != nil {
		t.Fatal(err)
	}
	if first.Kind != harness.EventRunStarted {
		t.Errorf("first event %s", first.Kind)
	}
}
