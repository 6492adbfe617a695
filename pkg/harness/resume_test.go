package harness_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
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
	"github.com/initorigin/io-harness-go/pkg/harness/store/sqlite"
	"github.com/initorigin/io-harness-go/pkg/harness/verify"
)

// crash is a provider that dies (panics, as a crashing process would stop)
// when asked for turn at, counted from 1.
type crash struct {
	provider.Provider
	at int
}

type crashed struct{}

func (c crash) Complete(ctx context.Context, req *provider.Request, onText func(string)) (*provider.Response, error) {
	n := 0
	for _, m := range req.Messages {
		if m.Role == provider.RoleAssistant {
			n++
		}
	}
	if n+1 == c.at {
		panic(crashed{})
	}
	return c.Provider.Complete(ctx, req, onText)
}

// runUntilCrash runs until the injected crash and returns the run id.
func runUntilCrash(t *testing.T, task harness.TaskContract, opts harness.Options) (runID string) {
	t.Helper()
	opts.Observer = chainObserver(opts.Observer, func(e harness.Event) {
		if e.Kind == harness.EventRunStarted {
			runID = e.RunID
		}
	})
	func() {
		defer func() {
			if _, ok := recover().(crashed); !ok {
				t.Fatal("the run did not crash")
			}
		}()
		harness.Run(context.Background(), task, opts)
	}()
	return runID
}

func chainObserver(a, b func(harness.Event)) func(harness.Event) {
	return func(e harness.Event) {
		if a != nil {
			a(e)
		}
		b(e)
	}
}

// numbered returns n turns; turn i writes step-i.txt and says "turn i".
func numbered(n int) []scripted.Turn {
	var turns []scripted.Turn
	for i := 1; i <= n; i++ {
		turns = append(turns, scripted.Turn{Text: fmt.Sprintf("turn %d", i),
			ToolCalls: calls(call("write_file", map[string]string{"path": fmt.Sprintf("step-%d.txt", i), "content": fmt.Sprint(i)})).ToolCalls,
			Usage:     usage(100, 10)})
	}
	return turns
}

// assertSteps checks that the run's committed steps are 1..n, each the
// turn of its own number: none repeated, none lost.
func assertSteps(t *testing.T, st store.Store, runID string, n int) {
	t.Helper()
	steps, err := st.Steps(context.Background(), runID)
	if err != nil {
		t.Fatal(err)
	}
	var got, want []string
	for i, s := range steps {
		got = append(got, fmt.Sprintf("%d:%s", s.Step, s.Assistant.Content))
		want = append(want, fmt.Sprintf("%d:turn %d", i+1, i+1))
	}
	if len(steps) != n {
		t.Errorf("%d steps committed, want %d", len(steps), n)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("steps (-want +got):\n%s", diff)
	}
}

// A crash between steps: the resume continues at the next step under the
// same id, repeats nothing, loses nothing, and restores the spend.
func TestResumeAfterCrashBetweenSteps(t *testing.T) {
	dir := workspace(t, nil)
	st, _ := fileStore(t)
	turns := numbered(5)
	task := harness.TaskContract{Goal: "g", Root: dir, Verification: []verify.Check{contains("step-5.txt", "5")}}
	runID := runUntilCrash(t, task, harness.Options{Provider: crash{script(t, turns...), 4}, Store: st})
	assertSteps(t, st, runID, 3)

	rec := &recorder{Provider: script(t, turns...)}
	var obs events
	res, err := harness.Resume(context.Background(), runID, harness.Options{Provider: rec, Store: st, Observer: obs.observe}, harness.ResumeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.RunID != runID || res.Outcome.Kind != harness.Success || res.Outcome.Steps != 5 {
		t.Fatalf("resumed outcome %+v of %s", res.Outcome, res.RunID)
	}
	if rec.count() != 2 {
		t.Errorf("the resume sent %d requests; steps 4 and 5 need 2", rec.count())
	}
	if got := res.Outcome.Usage; got != (provider.Usage{InputTokens: 500, OutputTokens: 50}) {
		t.Errorf("usage %+v; the spend of the three committed steps is not restored", got)
	}
	assertSteps(t, st, runID, 5)
	resumed := obs.of(harness.EventRunResumed)
	if len(resumed) != 1 || !strings.Contains(resumed[0].Text, "resuming at step 4; 3 committed step(s) skipped") {
		t.Errorf("resume event %+v", resumed)
	}
	// Event numbers continue across the crash without a gap or a repeat.
	stored, err := st.Events(context.Background(), runID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range stored {
		if e.Seq != int64(i+1) {
			t.Fatalf("stored event %d has seq %d", i+1, e.Seq)
		}
	}
}

// A resumed run sends the model exactly the requests an uninterrupted run
// would have sent.
func TestResumedContextMatchesUninterrupted(t *testing.T) {
	turns := numbered(4)
	mk := func() harness.TaskContract {
		return harness.TaskContract{Goal: "g", Root: workspace(t, nil), Verification: []verify.Check{contains("step-4.txt", "4")}}
	}
	whole := &recorder{Provider: script(t, turns...)}
	if _, err := harness.Run(context.Background(), mk(), harness.Options{Provider: whole, Store: memStore(t)}); err != nil {
		t.Fatal(err)
	}
	st := memStore(t)
	first := &recorder{Provider: script(t, turns...)}
	runID := runUntilCrash(t, mk(), harness.Options{Provider: crash{first, 3}, Store: st})
	second := &recorder{Provider: script(t, turns...)}
	if _, err := harness.Resume(context.Background(), runID, harness.Options{Provider: second, Store: st}, harness.ResumeOptions{}); err != nil {
		t.Fatal(err)
	}
	pieced := append(append([]*provider.Request{}, first.requests...), second.requests...)
	if diff := cmp.Diff(whole.requests, pieced); diff != "" {
		t.Errorf("requests of the crashed-and-resumed run differ (-whole +pieced):\n%s", diff)
	}
}

// A crash after a non-idempotent effect and before its step committed: the
// resumed model is told the call is in doubt, and the trace says so.
func TestResumeReportsEffectsInDoubt(t *testing.T) {
	dir := workspace(t, map[string]string{"a.txt": "old"})
	st := memStore(t)
	edit := calls(call("edit_file", map[string]string{"path": "a.txt", "old_text": "old", "new_text": "new"}))
	task := harness.TaskContract{Goal: "g", Root: dir, Verification: []verify.Check{contains("a.txt", "new!")}}
	var runID string
	func() {
		defer func() {
			if _, ok := recover().(crashed); !ok {
				t.Fatal("no crash")
			}
		}()
		harness.Run(context.Background(), task, harness.Options{Provider: script(t, edit), Store: st,
			Observer: func(e harness.Event) {
				runID = e.RunID
				if e.Kind == harness.EventToolResult && e.Tool == "edit_file" {
					panic(crashed{}) // the edit happened; its step never commits
				}
			}})
	}()
	if data, _ := os.ReadFile(filepath.Join(dir, "a.txt")); string(data) != "new" {
		t.Fatalf("a.txt = %q", data)
	}
	finish := calls(call("write_file", map[string]string{"path": "a.txt", "content": "new!"}))
	rec := &recorder{Provider: script(t, finish)}
	var obs events
	res, err := harness.Resume(context.Background(), runID, harness.Options{Provider: rec, Store: st, Observer: obs.observe}, harness.ResumeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome.Kind != harness.Success || res.Outcome.Steps != 1 {
		t.Fatalf("outcome %+v", res.Outcome)
	}
	last := rec.requests[0].Messages[len(rec.requests[0].Messages)-1]
	if last.Role != provider.RoleUser || !strings.Contains(last.Content, "may or may not have taken effect") || !strings.Contains(last.Content, `edit_file {"new_text":"new","old_text":"old","path":"a.txt"}`) {
		t.Errorf("the model was not told about the call in doubt: %q", last.Content)
	}
	if doubt := obs.of(harness.EventInDoubt); len(doubt) != 1 || doubt[0].Tool != "edit_file" {
		t.Errorf("in_doubt events %+v", doubt)
	}
	steps, _ := st.Steps(context.Background(), runID)
	if steps[0].Observations[0].Kind != store.ObservationInDoubt {
		t.Errorf("the in-doubt note is not in the trace: %+v", steps[0].Observations[0])
	}
	// Reported once, it is not reported again.
	l, err := st.Acquire(context.Background(), runID, store.Self(), time.Minute, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := st.Recover(context.Background(), l); len(again) != 0 {
		t.Errorf("still in doubt after being reported: %+v", again)
	}
}

func TestResumeFinishedRunIsANoOp(t *testing.T) {
	dir := workspace(t, nil)
	st := memStore(t)
	task := harness.TaskContract{Goal: "g", Root: dir, Verification: []verify.Check{contains("step-1.txt", "1")}}
	res, err := harness.Run(context.Background(), task, harness.Options{Provider: script(t, numbered(1)...), Store: st})
	if err != nil {
		t.Fatal(err)
	}
	for _, reopen := range []bool{false, true} {
		rec := &recorder{Provider: script(t, numbered(3)...)}
		again, err := harness.Resume(context.Background(), res.RunID, harness.Options{Provider: rec, Store: st}, harness.ResumeOptions{Reopen: reopen})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(res, again); diff != "" || rec.count() != 0 {
			t.Errorf("reopen=%v: resume of a successful run changed its result (%s) or called the provider %d times", reopen, diff, rec.count())
		}
	}
}

// A run that ran out of steps continues when resumed with more, and
// reports the same outcome at no cost when resumed without.
func TestResumeBudgetOutcome(t *testing.T) {
	dir := workspace(t, nil)
	st := memStore(t)
	turns := numbered(4)
	task := harness.TaskContract{Goal: "g", Root: dir, Budgets: harness.Budgets{MaxSteps: 2},
		Verification: []verify.Check{contains("step-4.txt", "4")}}
	res, err := harness.Run(context.Background(), task, harness.Options{Provider: script(t, turns...), Store: st})
	if err != nil || res.Outcome.Kind != harness.VerificationFailed {
		t.Fatalf("%v %+v", err, res)
	}
	rec := &recorder{Provider: script(t, turns...)}
	same, err := harness.Resume(context.Background(), res.RunID, harness.Options{Provider: rec, Store: st}, harness.ResumeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if same.Outcome.Kind != harness.VerificationFailed || same.Outcome.Usage != res.Outcome.Usage || rec.count() != 0 {
		t.Errorf("resume with the same budget: %+v after %d calls", same.Outcome, rec.count())
	}
	more, err := harness.Resume(context.Background(), res.RunID, harness.Options{Provider: rec, Store: st}, harness.ResumeOptions{Budgets: &harness.Budgets{MaxSteps: 10}})
	if err != nil {
		t.Fatal(err)
	}
	if more.Outcome.Kind != harness.Success || more.Outcome.Steps != 4 || rec.count() != 2 {
		t.Errorf("resume with more steps: %+v after %d calls", more.Outcome, rec.count())
	}
	assertSteps(t, st, res.RunID, 4)
}

// An escalated run is final unless the caller reopens it.
func TestResumeEscalatedNeedsReopen(t *testing.T) {
	dir := workspace(t, nil)
	st := memStore(t)
	task := harness.TaskContract{Goal: "g", Root: dir, Budgets: harness.Budgets{MaxRetries: intp(0)},
		Verification: []verify.Check{contains("step-1.txt", "1")}}
	down := scripted.Turn{Text: "x", Fail: &scripted.Failure{Kind: provider.KindServer}}
	res, err := harness.Run(context.Background(), task, harness.Options{Provider: script(t, down), Store: st})
	if err != nil || res.Outcome.Kind != harness.Escalated {
		t.Fatalf("%v %+v", err, res)
	}
	rec := &recorder{Provider: script(t, numbered(1)...)}
	again, _ := harness.Resume(context.Background(), res.RunID, harness.Options{Provider: rec, Store: st}, harness.ResumeOptions{})
	if again.Outcome.Kind != harness.Escalated || rec.count() != 0 {
		t.Errorf("resume of an escalated run called the provider %d times: %+v", rec.count(), again.Outcome)
	}
	again, _ = harness.Resume(context.Background(), res.RunID, harness.Options{Provider: rec, Store: st}, harness.ResumeOptions{Reopen: true})
	if again.Outcome.Kind != harness.Success || rec.count() != 1 {
		t.Errorf("reopened resume: %+v after %d calls", again.Outcome, rec.count())
	}
}

// The time budget counts wall-clock time since the run started, downtime
// between a crash and a resume included. The downtime is an hour, made by
// a store that dates the run's start an hour back, without a sleep; the
// budget is half an hour, which the steps before the crash cannot use up
// on any machine, and the hour can.
func TestTimeBudgetCountsDowntime(t *testing.T) {
	dir := workspace(t, nil)
	st, path := fileStore(t)
	turns := numbered(5)
	task := harness.TaskContract{Goal: "g", Root: dir, Budgets: harness.Budgets{Time: harness.Duration(30 * time.Minute)},
		Verification: []verify.Check{contains("step-5.txt", "5")}}
	runID := runUntilCrash(t, task, harness.Options{Provider: crash{script(t, turns...), 2}, Store: st})
	st.Close()
	st2, err := sqlite.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	rec := &recorder{Provider: script(t, turns...)}
	later := &agedStore{Store: st2, by: time.Hour}
	res, err := harness.Resume(context.Background(), runID, harness.Options{Provider: rec, Store: later}, harness.ResumeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome.Kind != harness.TimeBudgetExceeded || res.Outcome.Steps != 1 || rec.count() != 0 {
		t.Errorf("resume after the budget passed in downtime: %+v, %d calls", res.Outcome, rec.count())
	}
}

// Resume refuses what it cannot trust, with a typed error and no panic.
func TestResumeErrors(t *testing.T) {
	ctx := context.Background()
	setup := func(t *testing.T) (store.Store, string, string) {
		st, path := fileStore(t)
		dir := workspace(t, nil)
		task := harness.TaskContract{Goal: "g", Root: dir, Verification: []verify.Check{contains("step-5.txt", "5")}}
		runID := runUntilCrash(t, task, harness.Options{Provider: crash{script(t, numbered(5)...), 3}, Store: st})
		return st, path, runID
	}
	tamper := func(t *testing.T, path, q string, args ...any) {
		db, err := sql.Open("sqlite", "file:"+path)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if _, err := db.Exec(q, args...); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name    string
		break_  func(t *testing.T, path, runID string) string
		wantErr error
	}{
		{"unknown run", func(t *testing.T, path, runID string) string { return "run_nope" }, store.ErrNotFound},
		{"corrupt task", func(t *testing.T, path, runID string) string {
			tamper(t, path, `UPDATE runs SET task='{"goal":' WHERE id=?`, runID)
			return runID
		}, nil},
		{"newer task", func(t *testing.T, path, runID string) string {
			tamper(t, path, `UPDATE runs SET task=json_set(task, '$.version', 99) WHERE id=?`, runID)
			return runID
		}, store.ErrTooNew},
		{"missing step", func(t *testing.T, path, runID string) string {
			tamper(t, path, `DELETE FROM observations WHERE run_id=? AND step=1`, runID)
			tamper(t, path, `DELETE FROM steps WHERE run_id=? AND step=1`, runID)
			return runID
		}, store.ErrCorrupt},
		{"corrupt assistant turn", func(t *testing.T, path, runID string) string {
			tamper(t, path, `UPDATE steps SET assistant='{oops' WHERE run_id=? AND step=2`, runID)
			return runID
		}, store.ErrCorrupt},
		{"corrupt outcome", func(t *testing.T, path, runID string) string {
			tamper(t, path, `UPDATE runs SET status='finished', outcome='success', outcome_json='nope' WHERE id=?`, runID)
			return runID
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, path, runID := setup(t)
			id := tt.break_(t, path, runID)
			rec := &recorder{Provider: script(t, numbered(5)...)}
			_, err := harness.Resume(ctx, id, harness.Options{Provider: rec, Store: st}, harness.ResumeOptions{})
			if !errors.Is(err, harness.ErrResume) {
				t.Fatalf("err = %v, want a resume error", err)
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("err = %v, want it to wrap %v", err, tt.wantErr)
			}
			if rec.count() != 0 {
				t.Errorf("a refused resume called the provider")
			}
		})
	}
}

// Keys and auth headers never reach the store, even when a vendor echoes
// them back in its error bodies: the raw bytes of the database and its
// WAL are searched for them after a run that failed, retried, fell back
// and succeeded against local servers speaking the vendors' wire formats.
func TestSecretsNeverStored(t *testing.T) {
	const anthropicKey = "sk-ant-test-DO-NOT-STORE-0123456789"
	const openaiKey = "sk-openai-test-DO-NOT-STORE-9876543210"
	// The primary rejects its key, quoting it, as a terminal auth error.
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(401)
		fmt.Fprintf(w, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key %s"}}`, r.Header.Get("X-Api-Key"))
	}))
	defer bad.Close()
	// The fallback fails once with a 503 that quotes its Authorization
	// header, then answers: a write_file call, then a final text.
	var calls int
	good := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		if calls == 1 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(503)
			fmt.Fprintf(w, `{"error":{"message":"overloaded; your header was %s","type":"server_error"}}`, r.Header.Get("Authorization"))
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		args, _ := json.Marshal(`{"path":"out.txt","content":"done"}`)
		fmt.Fprintf(w, "data: {\"id\":\"c1\",\"model\":\"gpt-test\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"writing\",\"tool_calls\":[{\"index\":0,\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"write_file\",\"arguments\":%s}}]},\"finish_reason\":null}]}\n\n", args)
		fmt.Fprint(w, "data: {\"id\":\"c1\",\"model\":\"gpt-test\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n")
		fmt.Fprint(w, "data: {\"id\":\"c1\",\"model\":\"gpt-test\",\"choices\":[],\"usage\":{\"prompt_tokens\":120,\"completion_tokens\":30,\"total_tokens\":150}}\n\n")
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	defer good.Close()

	st, path := fileStore(t)
	dir := workspace(t, nil)
	spec := []byte(fmt.Sprintf(`{
		"task": {"goal": "write done", "root": %q,
		         "verification": [{"kind": "workspace_file_contains", "file": "out.txt", "text": "done"}]},
		"provider": {"name": "anthropic", "model": "claude-test", "base_url": %q, "api_key": %q},
		"fallbacks": [{"name": "openai", "model": "gpt-test", "base_url": %q}],
		"backoff": {"base": "1ms"}
	}`, dir, bad.URL, anthropicKey, good.URL+"/v1"))
	s, err := harness.ParseSpec(spec)
	if err != nil {
		t.Fatal(err)
	}
	env := func(k string) (string, bool) {
		if k == "OPENAI_API_KEY" {
			return openaiKey, true
		}
		return "", false
	}
	opts, err := s.Options(env)
	if err != nil {
		t.Fatal(err)
	}
	opts.Store = st
	var obs events
	opts.Observer = obs.observe
	res, err := harness.Run(context.Background(), s.Task, opts)
	if err != nil || res.Outcome.Kind != harness.Success {
		t.Fatalf("%v %+v", err, res)
	}
	if len(obs.of(harness.EventFallback)) != 1 || len(obs.of(harness.EventRetry)) != 1 {
		t.Fatalf("want one fallback and one retry: %v", obs.kinds())
	}
	for _, e := range obs.all {
		if b, _ := json.Marshal(e); strings.Contains(string(b), anthropicKey) || strings.Contains(string(b), openaiKey) {
			t.Errorf("event %s carries a key: %s", e.Kind, b)
		}
	}
	st.Close() // checkpoint nothing away: the WAL stays for the search
	var searched int
	for _, suffix := range []string{"", "-wal"} {
		data, err := os.ReadFile(path + suffix)
		if err != nil {
			continue
		}
		searched += len(data)
		for _, secret := range []string{anthropicKey, openaiKey} {
			if strings.Contains(string(data), secret) {
				t.Errorf("%s holds %q", filepath.Base(path+suffix), secret)
			}
		}
	}
	// The search looked at real data: the trace, the vendor's error text
	// and the tool call are all in the file.
	st2, err := sqlite.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	tr, err := harness.ReadTrace(context.Background(), st2, res.RunID)
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	tr.WriteText(&text)
	if searched == 0 || !strings.Contains(text.String(), "write_file") {
		t.Fatalf("nothing was searched (%d bytes):\n%s", searched, text.String())
	}
	var sawVendorError bool
	for _, e := range tr.Events {
		if e.Kind == harness.EventFallback && strings.Contains(e.Reason, "invalid x-api-key") {
			sawVendorError = true
		}
	}
	if !sawVendorError {
		t.Error("the vendor's error text is not in the trace; the search proves less than it claims")
	}
}
