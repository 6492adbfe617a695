package harness_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/initorigin/io-harness-go/pkg/harness"
	"github.com/initorigin/io-harness-go/pkg/harness/approve"
	"github.com/initorigin/io-harness-go/pkg/harness/policy"
	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/store"
	"github.com/initorigin/io-harness-go/pkg/harness/watch"
)

// holding is a provider that, on the turn of step hold, streams text until
// release is closed, and then answers.
type holding struct {
	provider.Provider
	hold    int
	release chan struct{}
}

func (h *holding) Complete(ctx context.Context, req *provider.Request, onText func(string)) (*provider.Response, error) {
	if req.Step == h.hold {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
	stream:
		for {
			select {
			case <-h.release:
				break stream
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-tick.C:
				if onText != nil {
					onText("thinking about step two ")
				}
			}
		}
	}
	return h.Provider.Complete(ctx, req, onText)
}

// A watcher sees a step as it happens — the model's text while the turn
// streams — though the store holds nothing of the step yet (the control:
// the store is all a watcher of a run without a hub reads). Once the run
// finishes the watcher has had every stored event, once, in order.
func TestLiveWatcherSeesAStepBeforeItCommits(t *testing.T) {
	dir := workspace(t, map[string]string{"greet.txt": "hello, wrld\n"})
	st, _ := fileStore(t)
	hub, err := watch.Listen(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer hub.Close()
	p := &holding{Provider: script(t, fixTurns()...), hold: 2, release: make(chan struct{})}
	started := make(chan string, 1)
	var once sync.Once
	obs := func(e harness.Event) { once.Do(func() { started <- e.RunID }) }
	type result struct {
		res *harness.Result
		err error
	}
	ran := make(chan result, 1)
	go func() {
		res, err := harness.Run(context.Background(), fixTask(dir), harness.Options{Provider: p, Store: st, Live: hub, Observer: obs})
		ran <- result{res, err}
	}()
	runID := <-started

	var mu sync.Mutex
	var got []watch.Item
	sawText := make(chan struct{})
	var textOnce sync.Once
	followed := make(chan error, 1)
	go func() {
		_, err := watch.Follow(context.Background(), st, runID, &watch.FollowOptions{Poll: 20 * time.Millisecond}, func(it watch.Item) error {
			mu.Lock()
			got = append(got, it)
			mu.Unlock()
			if it.Kind == string(harness.EventModelDelta) && strings.Contains(string(it.Data), "thinking about step two") {
				textOnce.Do(func() { close(sawText) })
			}
			return nil
		})
		followed <- err
	}()
	select {
	case <-sawText:
	case <-time.After(60 * time.Second):
		t.Fatal("the watcher never saw step 2's text while the turn streamed")
	}
	// The control: the store holds nothing of step 2 yet.
	evs, err := st.Events(context.Background(), runID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if e.Step == 2 {
			t.Fatalf("the store already holds step 2's %s", e.Kind)
		}
	}
	close(p.release)
	r := <-ran
	if r.err != nil || r.res.Outcome.Kind != harness.Success {
		t.Fatalf("%v %+v", r.err, r.res)
	}
	if err := <-followed; err != nil {
		t.Fatal(err)
	}
	evs, _ = st.Events(context.Background(), runID, 0, 0)
	var want, delivered []int64
	for _, e := range evs {
		want = append(want, e.Seq)
	}
	for _, it := range got {
		if it.Seq != 0 {
			delivered = append(delivered, it.Seq)
		}
	}
	if !slicesEqual(want, delivered) {
		t.Errorf("delivered %v, stored %v", delivered, want)
	}
	// The driver announced its hub in the lease while it drove.
	if l, _ := st.Lease(context.Background(), runID); l != nil {
		t.Errorf("a finished run still names a driver: %+v", l)
	}
}

func slicesEqual(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A decision recorded from another process, with no lease and no
// provider, is carried out by the next driver: the approved write lands,
// and the trace says who decided what, in sequence.
func TestDecideAnswersAPausedRun(t *testing.T) {
	dir := workspace(t, nil)
	st, _ := fileStore(t)
	opts := harness.Options{Provider: script(t, deferTurns()...), Store: st, Policy: testPolicy(), Approver: approve.DeferAll()}
	res, err := harness.Run(context.Background(), deferTask(dir), opts)
	if err != nil || res.Outcome.Kind != harness.AwaitingApproval {
		t.Fatalf("%v %+v", err, res)
	}
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		d     approve.Decision
		kind  harness.Kind
		isErr error
	}{
		{"remember", approve.Decision{Kind: approve.Approve, Remember: []policy.Rule{{Act: policy.Write, Effect: policy.Allow, Pattern: "x"}}}, harness.ErrConfig, nil},
		{"invalid", approve.Decision{Kind: "maybe"}, harness.ErrConfig, nil},
	} {
		var he *harness.Error
		if err := harness.Decide(ctx, st, res.RunID, res.Outcome.RequestID, tc.d, ""); !errors.As(err, &he) || he.Kind != tc.kind {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	if err := harness.Decide(ctx, st, res.RunID, "apr_nope", approve.Decision{Kind: approve.Approve}, ""); !errors.Is(err, approve.ErrUnknownRequest) {
		t.Errorf("an unknown request: %v", err)
	}
	if err := harness.Decide(ctx, st, res.RunID, res.Outcome.RequestID, approve.Decision{Kind: approve.Approve}, ""); err != nil {
		t.Fatal(err)
	}
	if err := harness.Decide(ctx, st, res.RunID, res.Outcome.RequestID, approve.Decision{Kind: approve.Deny}, ""); !errors.Is(err, approve.ErrAlreadyDecided) {
		t.Errorf("a second decision: %v", err)
	}
	reqID := res.Outcome.RequestID
	if _, err := os.Stat(filepath.Join(dir, "config.toml")); err == nil {
		t.Fatal("deciding performed the action; the driver must")
	}
	opts.Approver = approve.ApproveAll() // the next step's write
	res, err = harness.Resume(ctx, res.RunID, opts, harness.ResumeOptions{})
	if err != nil || res.Outcome.Kind != harness.Success {
		t.Fatalf("%v %+v", err, res)
	}
	if data, _ := os.ReadFile(filepath.Join(dir, "config.toml")); string(data) != "mode = \"approved\"\n" {
		t.Errorf("config.toml = %q", data)
	}
	tr, err := harness.ReadTrace(ctx, st, res.RunID)
	if err != nil {
		t.Fatal(err)
	}
	var resolved *harness.Event
	for i, e := range tr.Events {
		if e.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d", i, e.Seq)
		}
		if e.Kind == harness.EventApprovalResolved && e.RequestID == reqID {
			resolved = &tr.Events[i]
		}
	}
	if resolved == nil || resolved.Target != "config.toml" {
		t.Errorf("the trace lacks the decision: %+v", resolved)
	}
}

// What is decided from outside is checked when it is carried out: a deny
// added to the policy in between refuses the approved write. The control
// is the same decision under the old policy (above), which lands.
func TestDecideIsCheckedWhenCarriedOut(t *testing.T) {
	dir := workspace(t, nil)
	st, _ := fileStore(t)
	opts := harness.Options{Provider: script(t, deferTurns()...), Store: st, Policy: testPolicy(), Approver: approve.DeferAll()}
	res, err := harness.Run(context.Background(), deferTask(dir), opts)
	if err != nil || res.Outcome.Kind != harness.AwaitingApproval {
		t.Fatalf("%v %+v", err, res)
	}
	if err := harness.Decide(context.Background(), st, res.RunID, res.Outcome.RequestID, approve.Decision{Kind: approve.Approve}, ""); err != nil {
		t.Fatal(err)
	}
	frozen := testPolicy()
	frozen.Layers = append(frozen.Layers, policy.Layer{Name: "freeze", Rules: []policy.Rule{{Act: policy.Write, Effect: policy.Deny, Pattern: "config.toml"}}})
	opts.Policy = frozen
	if _, err := harness.Resume(context.Background(), res.RunID, opts, harness.ResumeOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "config.toml")); err == nil {
		t.Fatal("an approval crossed a deny added after it")
	}
	a, err := st.Approval(context.Background(), res.RunID, res.Outcome.RequestID)
	if err != nil || a.Result == nil || !strings.Contains(a.Result.Output, "freeze") {
		var out json.RawMessage
		if a != nil {
			out, _ = json.Marshal(a.Result)
		}
		t.Errorf("the model is not told why: %s %v", out, err)
	}
	if a != nil && a.State != store.ApprovalApplied {
		t.Errorf("the refused approval is %s, want applied (the model was told)", a.State)
	}
}
