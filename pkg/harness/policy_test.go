package harness_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/initorigin/io-harness-go/pkg/harness"
	"github.com/initorigin/io-harness-go/pkg/harness/approve"
	"github.com/initorigin/io-harness-go/pkg/harness/policy"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/scripted"
	"github.com/initorigin/io-harness-go/pkg/harness/store"
	"github.com/initorigin/io-harness-go/pkg/harness/store/sqlite"
	"github.com/initorigin/io-harness-go/pkg/harness/verify"
)

// testPolicy reads allowed, writes asked, secrets and vendor/ denied.
func testPolicy() *policy.Policy {
	return &policy.Policy{Version: 1,
		Defaults: policy.Defaults{Read: policy.Allow, Write: policy.Ask, Exec: policy.Ask, Net: policy.Deny},
		Layers: []policy.Layer{
			{Name: "secrets", Rules: []policy.Rule{
				{Act: policy.Read, Effect: policy.Deny, Pattern: ".env"},
				{Act: policy.Write, Effect: policy.Deny, Pattern: ".env"}}},
			{Name: "project", Rules: []policy.Rule{
				{Act: policy.Write, Effect: policy.Deny, Pattern: "vendor/**"},
				{Act: policy.Write, Effect: policy.Ask, Pattern: "go.mod"}}},
		}}
}

// counting is an approver that answers with fn and counts the requests.
type counting struct {
	n  atomic.Int32
	fn func(*approve.Request) approve.Decision
}

func (c *counting) Decide(_ context.Context, req *approve.Request) (approve.Decision, error) {
	c.n.Add(1)
	return c.fn(req), nil
}

func write(path, content string) scripted.Call {
	return call("write_file", map[string]string{"path": path, "content": content})
}

// A denied action never reaches the approver: it is an observation naming
// the rule and layer, it costs a step, and a model that keeps trying
// reaches the step cap.
func TestDenyNeverReachesTheApprover(t *testing.T) {
	dir := workspace(t, map[string]string{".env": "KEY=s3cret"})
	ap := &counting{fn: func(*approve.Request) approve.Decision { return approve.Decision{Kind: approve.Approve} }}
	try := calls(call("read_file", map[string]string{"path": ".env"}), write("vendor/x.go", "package x"))
	st := memStore(t)
	var obs events
	task := harness.TaskContract{Goal: "g", Root: dir, Budgets: harness.Budgets{MaxSteps: 3},
		Verification: []verify.Check{contains("out.txt", "done")}}
	res, err := harness.Run(context.Background(), task, harness.Options{Provider: script(t, try, try, try), Store: st,
		Policy: testPolicy(), Approver: ap, Observer: obs.observe})
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome.Kind != harness.VerificationFailed || res.Outcome.Steps != 3 {
		t.Fatalf("outcome %+v", res.Outcome)
	}
	if ap.n.Load() != 0 {
		t.Errorf("the approver was asked %d times about denied actions", ap.n.Load())
	}
	steps, _ := st.Steps(context.Background(), res.RunID)
	got := []string{steps[0].Observations[0].Refusal, steps[0].Observations[1].Refusal}
	want := []string{`deny by rule ".env" in layer "secrets"`, `deny by rule "vendor/**" in layer "project"`}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("refusal %d = %q, want %q", i, got[i], want[i])
		}
	}
	if strings.Contains(steps[0].Observations[0].Output, "s3cret") {
		t.Error("a denied read leaked the file")
	}
	if _, err := os.Stat(filepath.Join(dir, "vendor")); err == nil {
		t.Error("a denied write happened")
	}
	// Every verdict is in the trace, with its rule and layer.
	verdicts := obs.of(harness.EventPolicy)
	if len(verdicts) != 6 || verdicts[0].Effect != policy.Deny || verdicts[0].Layer != "secrets" || verdicts[1].Rule != "vendor/**" {
		t.Errorf("verdict events %+v", verdicts)
	}
}

func TestApprovalDecisions(t *testing.T) {
	newContent := "module m\n\ngo 1.22\n"
	tests := []struct {
		name     string
		decide   func(*approve.Request) approve.Decision
		wantFile map[string]string // file → content; "" means absent
		wantObs  string
	}{
		{"approve", func(*approve.Request) approve.Decision { return approve.Decision{Kind: approve.Approve} },
			map[string]string{"go.mod": newContent}, "wrote go.mod"},
		{"deny", func(*approve.Request) approve.Decision {
			return approve.Decision{Kind: approve.Deny, Reason: "not today"}
		},
			map[string]string{"go.mod": "module old\n"}, "denied by the approver: not today"},
		{"rewrite content", func(*approve.Request) approve.Decision {
			c := "module rewritten\n"
			return approve.Decision{Kind: approve.Approve, Rewrite: &approve.Rewrite{Content: &c}}
		}, map[string]string{"go.mod": "module rewritten\n"}, "wrote go.mod"},
		{"rewrite across a deny", func(*approve.Request) approve.Decision {
			return approve.Decision{Kind: approve.Approve, Rewrite: &approve.Rewrite{Target: "vendor/go.mod"}}
		}, map[string]string{"go.mod": "module old\n", "vendor/go.mod": ""}, `the approved action crosses a deny: deny by rule "vendor/**"`},
		{"remember across a deny", func(*approve.Request) approve.Decision {
			return approve.Decision{Kind: approve.Approve, Rewrite: &approve.Rewrite{Target: ".env"},
				Remember: []policy.Rule{{Act: policy.Write, Effect: policy.Allow, Pattern: "**"}}}
		}, map[string]string{".env": "KEY=1\n"}, `crosses a deny: deny by rule ".env" in layer "secrets"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := workspace(t, map[string]string{"go.mod": "module old\n", ".env": "KEY=1\n"})
			ap := &counting{fn: tt.decide}
			st := memStore(t)
			task := harness.TaskContract{Goal: "g", Root: dir, Budgets: harness.Budgets{MaxSteps: 1},
				Verification: []verify.Check{contains("never", "x")}}
			res, err := harness.Run(context.Background(), task, harness.Options{
				Provider: script(t, calls(write("go.mod", newContent))), Store: st, Policy: testPolicy(), Approver: ap})
			if err != nil {
				t.Fatal(err)
			}
			if ap.n.Load() != 1 {
				t.Errorf("approver asked %d times", ap.n.Load())
			}
			for f, want := range tt.wantFile {
				data, err := os.ReadFile(filepath.Join(dir, f))
				if want == "" {
					if err == nil {
						t.Errorf("%s exists: %q", f, data)
					}
				} else if string(data) != want {
					t.Errorf("%s = %q, want %q", f, data, want)
				}
			}
			steps, _ := st.Steps(context.Background(), res.RunID)
			if o := steps[0].Observations[0].Output; !strings.Contains(o, tt.wantObs) {
				t.Errorf("observation %q lacks %q", o, tt.wantObs)
			}
		})
	}
}

// Remembered rules silence later asks of the same kind, are returned with
// the result, and never beat an explicit ask rule or a deny.
func TestRememberedRules(t *testing.T) {
	dir := workspace(t, map[string]string{"go.mod": "module old\n"})
	remember := []policy.Rule{{Act: policy.Write, Effect: policy.Allow, Pattern: "**"}}
	ap := &counting{fn: func(*approve.Request) approve.Decision {
		return approve.Decision{Kind: approve.Approve, Remember: remember}
	}}
	turns := []scripted.Turn{
		calls(write("a.txt", "1")),
		calls(write("b.txt", "2"), write("vendor/c.txt", "3")),
		calls(write("go.mod", "module new\n")),
	}
	task := harness.TaskContract{Goal: "g", Root: dir, Budgets: harness.Budgets{MaxSteps: 3},
		Verification: []verify.Check{contains("never", "x")}}
	res, err := harness.Run(context.Background(), task, harness.Options{Provider: script(t, turns...), Store: memStore(t),
		Policy: testPolicy(), Approver: ap})
	if err != nil {
		t.Fatal(err)
	}
	// a.txt asks (the write default); b.txt is then remembered; vendor/
	// stays denied; go.mod has an explicit ask rule, so it asks again.
	if ap.n.Load() != 2 {
		t.Errorf("approver asked %d times, want 2 (a.txt, then go.mod's ask rule)", ap.n.Load())
	}
	for f, want := range map[string]string{"a.txt": "1", "b.txt": "2", "go.mod": "module new\n"} {
		if data, _ := os.ReadFile(filepath.Join(dir, f)); string(data) != want {
			t.Errorf("%s = %q", f, data)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "vendor")); err == nil {
		t.Error("a remembered allow crossed a deny")
	}
	if len(res.Remembered) != 1 || res.Remembered[0] != remember[0] {
		t.Errorf("Remembered = %+v", res.Remembered)
	}
}

// A symlink does not carry a write past a rule: the path is judged in the
// form it really names too.
func TestSymlinkCannotCrossADeny(t *testing.T) {
	dir := workspace(t, map[string]string{"vendor/lib.go": "package lib\n"})
	if err := os.Symlink("vendor", filepath.Join(dir, "v")); err != nil {
		t.Fatal(err)
	}
	ap := &counting{fn: func(*approve.Request) approve.Decision { return approve.Decision{Kind: approve.Approve} }}
	st := memStore(t)
	task := harness.TaskContract{Goal: "g", Root: dir, Budgets: harness.Budgets{MaxSteps: 1}, Verification: []verify.Check{contains("never", "x")}}
	res, err := harness.Run(context.Background(), task, harness.Options{Provider: script(t, calls(write("v/lib.go", "pwned"))),
		Store: st, Policy: testPolicy(), Approver: ap})
	if err != nil {
		t.Fatal(err)
	}
	steps, _ := st.Steps(context.Background(), res.RunID)
	if r := steps[0].Observations[0].Refusal; !strings.Contains(r, `vendor/** (via vendor/lib.go)`) {
		t.Errorf("refusal %q", r)
	}
	if data, _ := os.ReadFile(filepath.Join(dir, "vendor", "lib.go")); string(data) != "package lib\n" || ap.n.Load() != 0 {
		t.Errorf("vendor/lib.go = %q after %d asks", data, ap.n.Load())
	}
}

// A deferred write ends the run awaiting approval with the exact content
// and its hash persisted; a later call with the decision performs exactly
// that write and the run continues. Everything that does not match fails
// closed.
func TestDeferredApproval(t *testing.T) {
	dir := workspace(t, map[string]string{"go.mod": "module old\n"})
	st, path := fileStore(t)
	turns := []scripted.Turn{
		calls(write("go.mod", "module new\n"), write("other.txt", "x")),
		calls(write("done.txt", "done")),
	}
	task := harness.TaskContract{Goal: "g", Root: dir, Verification: []verify.Check{contains("done.txt", "done")}}
	opts := harness.Options{Provider: script(t, turns...), Store: st, Policy: testPolicy(), Approver: approve.DeferAll()}
	res, err := harness.Run(context.Background(), task, opts)
	if err != nil {
		t.Fatal(err)
	}
	out := res.Outcome
	if out.Kind != harness.AwaitingApproval || out.RequestID == "" || out.Steps != 1 {
		t.Fatalf("outcome %+v", out)
	}
	run, _ := st.Run(context.Background(), res.RunID)
	if run.Status != store.StatusPaused {
		t.Errorf("status %s, want paused", run.Status)
	}
	a, err := st.Approval(context.Background(), res.RunID, out.RequestID)
	if err != nil {
		t.Fatal(err)
	}
	if a.Content != "module new\n" || a.Hash != approve.Hash(policy.Write, "go.mod", "module new\n") || !strings.Contains(a.Shown, "-module old\n+module new") {
		t.Errorf("persisted approval %+v", a)
	}
	if data, _ := os.ReadFile(filepath.Join(dir, "go.mod")); string(data) != "module old\n" {
		t.Error("a deferred write happened")
	}
	if _, err := os.Stat(filepath.Join(dir, "other.txt")); err == nil {
		t.Error("a call after the deferred one ran")
	}
	st.Close()

	// Another opening of the file: plain resume still waits, and calls
	// nothing.
	st2, err := sqlite.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	rec := &recorder{Provider: script(t, turns...)}
	again, err := harness.Resume(context.Background(), res.RunID, harness.Options{Provider: rec, Store: st2}, harness.ResumeOptions{})
	if err != nil || again.Outcome.Kind != harness.AwaitingApproval || rec.count() != 0 {
		t.Fatalf("plain resume: %+v %v after %d calls", again, err, rec.count())
	}
	for name, tc := range map[string]struct {
		id   string
		want error
	}{"unknown id": {"apr_nope", approve.ErrUnknownRequest}} {
		_, err := harness.ResumeWithDecision(context.Background(), res.RunID, tc.id, approve.Decision{Kind: approve.Approve}, harness.Options{Provider: rec, Store: st2}, harness.ResumeOptions{})
		if !errors.Is(err, harness.ErrResume) || !errors.Is(err, tc.want) {
			t.Errorf("%s: %v", name, err)
		}
	}
	done, err := harness.ResumeWithDecision(context.Background(), res.RunID, out.RequestID, approve.Decision{Kind: approve.Approve},
		harness.Options{Provider: rec, Store: st2, Approver: approve.ApproveAll()}, harness.ResumeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if done.Outcome.Kind != harness.Success || done.Outcome.Steps != 2 {
		t.Fatalf("after approval: %+v", done.Outcome)
	}
	if data, _ := os.ReadFile(filepath.Join(dir, "go.mod")); string(data) != "module new\n" {
		t.Errorf("go.mod = %q, want exactly the approved content", data)
	}
	last := rec.requests[0].Messages[len(rec.requests[0].Messages)-1].Content
	if !strings.Contains(last, "approved and carried out") || !strings.Contains(last, "wrote go.mod") {
		t.Errorf("the model was not told: %q", last)
	}
	// A second decision on the same request fails closed.
	_, err = harness.ResumeWithDecision(context.Background(), res.RunID, out.RequestID, approve.Decision{Kind: approve.Deny},
		harness.Options{Provider: rec, Store: st2}, harness.ResumeOptions{})
	if !errors.Is(err, approve.ErrAlreadyDecided) {
		t.Errorf("second decision: %v", err)
	}
	approvals, _ := st2.Approvals(context.Background(), res.RunID)
	if len(approvals) != 1 || approvals[0].State != store.ApprovalApplied {
		t.Errorf("approvals %+v", approvals)
	}
}

// An approved edit whose file changed while the decision waited is not
// the action the person saw: nothing is done, and the request still waits.
func TestDeferredApprovalMismatch(t *testing.T) {
	dir := workspace(t, map[string]string{"go.mod": "module old\n"})
	st := memStore(t)
	edit := calls(call("edit_file", map[string]string{"path": "go.mod", "old_text": "old", "new_text": "new"}))
	task := harness.TaskContract{Goal: "g", Root: dir, Verification: []verify.Check{contains("go.mod", "new")}}
	res, err := harness.Run(context.Background(), task, harness.Options{Provider: script(t, edit), Store: st,
		Policy: testPolicy(), Approver: approve.DeferAll()})
	if err != nil || res.Outcome.Kind != harness.AwaitingApproval {
		t.Fatalf("%v %+v", err, res)
	}
	os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module old // changed\n"), 0o644)
	rec := &recorder{Provider: script(t, edit)}
	_, err = harness.ResumeWithDecision(context.Background(), res.RunID, res.Outcome.RequestID, approve.Decision{Kind: approve.Approve},
		harness.Options{Provider: rec, Store: st}, harness.ResumeOptions{})
	if !errors.Is(err, harness.ErrResume) || !errors.Is(err, approve.ErrMismatch) {
		t.Fatalf("err = %v, want a mismatch", err)
	}
	if data, _ := os.ReadFile(filepath.Join(dir, "go.mod")); string(data) != "module old // changed\n" || rec.count() != 0 {
		t.Errorf("go.mod = %q after %d calls; nothing may happen", data, rec.count())
	}
	if a, _ := st.Approval(context.Background(), res.RunID, res.Outcome.RequestID); a.State != store.ApprovalPending {
		t.Errorf("state %s, want still pending", a.State)
	}
}

// The policy is checked again when the decision comes: a deny added while
// it waited holds, nothing is written, and the model is told.
func TestDeferredApprovalUnderAStricterPolicy(t *testing.T) {
	dir := workspace(t, map[string]string{"go.mod": "module old\n"})
	st := memStore(t)
	turns := []scripted.Turn{calls(write("go.mod", "module new\n")), calls(write("done.txt", "done"))}
	task := harness.TaskContract{Goal: "g", Root: dir, Verification: []verify.Check{contains("done.txt", "done")}}
	res, err := harness.Run(context.Background(), task, harness.Options{Provider: script(t, turns...), Store: st,
		Policy: testPolicy(), Approver: approve.DeferAll()})
	if err != nil || res.Outcome.Kind != harness.AwaitingApproval {
		t.Fatalf("%v %+v", err, res)
	}
	stricter := testPolicy()
	stricter.Layers = append(stricter.Layers, policy.Layer{Name: "freeze", Rules: []policy.Rule{{Act: policy.Write, Effect: policy.Deny, Pattern: "go.*"}}})
	rec := &recorder{Provider: script(t, turns...)}
	done, err := harness.ResumeWithDecision(context.Background(), res.RunID, res.Outcome.RequestID, approve.Decision{Kind: approve.Approve},
		harness.Options{Provider: rec, Store: st, Policy: stricter, Approver: approve.ApproveAll()}, harness.ResumeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(filepath.Join(dir, "go.mod")); string(data) != "module old\n" {
		t.Errorf("go.mod = %q: the approval crossed a deny added while it waited", data)
	}
	if done.Outcome.Kind != harness.Success {
		t.Errorf("outcome %+v", done.Outcome)
	}
	last := rec.requests[0].Messages[len(rec.requests[0].Messages)-1].Content
	if !strings.Contains(last, "the policy in force now refuses it") {
		t.Errorf("the model was not told: %q", last)
	}
	if a, _ := st.Approval(context.Background(), res.RunID, res.Outcome.RequestID); a.State != store.ApprovalApplied || !strings.Contains(string(a.Decision), "freeze") {
		t.Errorf("approval %+v", a)
	}
}

// A resumed run keeps the permission boundary it was started with.
func TestResumeKeepsThePolicy(t *testing.T) {
	dir := workspace(t, nil)
	st := memStore(t)
	turns := []scripted.Turn{calls(write("a.txt", "1")), calls(write("vendor/x", "2")), calls(write("done.txt", "done"))}
	task := harness.TaskContract{Goal: "g", Root: dir, Verification: []verify.Check{contains("done.txt", "done")}}
	runID := runUntilCrash(t, task, harness.Options{Provider: crash{script(t, turns...), 2}, Store: st,
		Policy: testPolicy(), Approver: approve.ApproveAll()})
	res, err := harness.Resume(context.Background(), runID, harness.Options{Provider: script(t, turns...), Store: st, Approver: approve.ApproveAll()}, harness.ResumeOptions{})
	if err != nil || res.Outcome.Kind != harness.Success {
		t.Fatalf("%v %+v", err, res)
	}
	if _, err := os.Stat(filepath.Join(dir, "vendor")); err == nil {
		t.Error("the resumed run dropped the policy: vendor/ was written")
	}
}

// The provider's host is allowed through the provider layer under a
// deny-all network default, and the verdict names that layer; an explicit
// deny of the host wins and fails before any connection is made.
func TestProviderLayer(t *testing.T) {
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, `data: {"id":"c","model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"write_file","arguments":"{\"path\":\"done.txt\",\"content\":\"done\"}"}}]},"finish_reason":"tool_calls"}]}`+"\n\n")
		fmt.Fprint(w, `data: {"id":"c","model":"m","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":5}}`+"\n\ndata: [DONE]\n\n")
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	spec := func(p *policy.Policy) (harness.Options, harness.TaskContract) {
		s, err := harness.ParseSpec([]byte(fmt.Sprintf(`{"task": {"goal": "g", "root": %q,
			"verification": [{"kind": "workspace_file_contains", "file": "done.txt", "text": "done"}]},
			"provider": {"name": "openai_compatible", "model": "m", "base_url": %q}}`, workspace(t, nil), srv.URL+"/v1")))
		if err != nil {
			t.Fatal(err)
		}
		opts, err := s.Options(nil)
		if err != nil {
			t.Fatal(err)
		}
		opts.Policy, opts.Approver, opts.Store = p, approve.ApproveAll(), memStore(t)
		return opts, s.Task
	}
	def := policy.Default()
	var obs events
	opts, task := spec(&def)
	opts.Observer = obs.observe
	res, err := harness.Run(context.Background(), task, opts)
	if err != nil || res.Outcome.Kind != harness.Success {
		t.Fatalf("under Default: %v %+v", err, res)
	}
	v := obs.of(harness.EventPolicy)[0]
	if v.Act != policy.Net || v.Effect != policy.Allow || v.Layer != "provider" || v.Target != host {
		t.Errorf("provider verdict %+v", v)
	}
	if got := def.Explain(policy.Net, host).Effect; got != policy.Deny {
		t.Fatalf("Default allows %s without the provider layer", host)
	}

	before := conns.Load()
	deny := policy.Default()
	deny.Layers = append(deny.Layers, policy.Layer{Name: "no-local", Rules: []policy.Rule{{Act: policy.Net, Effect: policy.Deny, Pattern: "127.0.0.1:*"}}})
	opts, task = spec(&deny)
	var heard events
	opts.Observer = heard.observe
	_, err = harness.Run(context.Background(), task, opts)
	var he *harness.Error
	if !errors.As(err, &he) || he.Kind != harness.ErrRefused || !strings.Contains(he.Message, `layer "no-local"`) {
		t.Fatalf("explicit deny of the provider host: %v", err)
	}
	if conns.Load() != before {
		t.Errorf("%d connections were made to a refused provider", conns.Load()-before)
	}
	if runs, _ := opts.Store.Runs(context.Background(), store.RunFilter{}); len(runs) != 0 {
		t.Errorf("a refused run left %d runs", len(runs))
	}
	if n := len(heard.kinds()); n != 0 {
		t.Errorf("the observer heard %d events of a refused run", n)
	}
}
