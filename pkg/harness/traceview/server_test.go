package traceview

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/initorigin/io-harness-go/pkg/harness"
	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/scripted"
	"github.com/initorigin/io-harness-go/pkg/harness/verify"
)

// A request the browser sends for a name that resolves to the loopback
// interface but is not it — a site that rebound its own name to
// 127.0.0.1 — is refused, so a page on that site cannot read the store.
// The control is the same request to a bare mux of the same routes, which
// hands the run over.
func TestServerRefusesAForeignHost(t *testing.T) {
	st := memStore(t)
	res := demoRun(t, st)
	srv, err := NewServer(st)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		handler http.Handler
		host    string
		status  int
	}{
		{srv, "attacker.example:8080", http.StatusForbidden},
		{srv, "127.0.0.1.nip.io", http.StatusForbidden},
		{srv, "localhost:1234", http.StatusOK},
		{srv, "127.0.0.1:1234", http.StatusOK},
		{srv, "[::1]:1234", http.StatusOK},
		{srv.mux, "attacker.example:8080", http.StatusOK}, // the control
	} {
		req := httptest.NewRequest(http.MethodGet, "/api/runs/"+res.RunID+"/view", nil)
		req.Host = tc.host
		w := httptest.NewRecorder()
		tc.handler.ServeHTTP(w, req)
		leaked := strings.Contains(w.Body.String(), res.RunID)
		if w.Code != tc.status || leaked != (tc.status == http.StatusOK) {
			t.Errorf("host %s via %T: %d (leaked %v), want %d", tc.host, tc.handler, w.Code, leaked, tc.status)
		}
	}
	// Anything but GET is refused; an unknown run is 404.
	for _, tc := range []struct{ method, path string }{{http.MethodPost, "/api/runs"}, {http.MethodGet, "/runs/run_nope"}} {
		req := httptest.NewRequest(tc.method, tc.path, nil)
		req.Host = "127.0.0.1"
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, req)
		if w.Code < 400 {
			t.Errorf("%s %s: %d", tc.method, tc.path, w.Code)
		}
	}
}

// The served page follows a run while it progresses: opened while the run
// waits inside step 2, it shows one step; once the run goes on, it shows
// the numbers the store holds at the end, without a reload. The index
// lists the run. The view's ETag spares unchanged polls their body.
func TestServedPageFollowsTheRun(t *testing.T) {
	b := startBrowser(t)
	st := fileStore(t)
	srv, err := NewServer(st)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	defer hs.Close()

	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a.txt"), []byte("a\n"), 0o644)
	sp, _ := scripted.New(scripted.Script{Turns: []scripted.Turn{
		{Text: "one", ToolCalls: []scripted.Call{{Name: "read_file", Arguments: args(map[string]string{"path": "a.txt"})}}, Usage: &provider.Usage{InputTokens: 100, OutputTokens: 5}},
		{Text: "two", ToolCalls: []scripted.Call{{Name: "write_file", Arguments: args(map[string]string{"path": "b.txt", "content": "done"})}}, Usage: &provider.Usage{InputTokens: 200, OutputTokens: 7}},
	}})
	release := make(chan struct{})
	started := make(chan string, 1)
	var once sync.Once
	ran := make(chan *harness.Result, 1)
	go func() {
		res, err := harness.Run(context.Background(), harness.TaskContract{Goal: "write b", Root: dir,
			Verification: []verify.Check{{Kind: verify.WorkspaceFileContains, File: "b.txt", Text: "done"}}},
			harness.Options{Provider: holdAt{sp, 2, release}, Store: st, Observer: func(e harness.Event) {
				if e.Kind == harness.EventCheckpoint {
					once.Do(func() { started <- e.RunID })
				}
			}})
		if err != nil {
			t.Error(err)
		}
		ran <- res
	}()
	runID := <-started
	// Step 1 commits right after its checkpoint event; wait for it.
	for {
		if r, _ := st.Run(context.Background(), runID); r != nil && r.Steps == 1 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	p := open(t, b, hs.URL+"/runs/"+runID)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if got := eval[string](t, p, `document.getElementById("sum-steps").dataset.value`); got != "1" {
		t.Fatalf("steps before: %s", got)
	}
	if got := eval[string](t, p, `document.getElementById("sum-outcome").dataset.value`); got != "running" {
		t.Fatalf("outcome before: %s", got)
	}
	close(release)
	res := <-ran
	if err := p.WaitFor(ctx, `document.getElementById("sum-outcome").dataset.value === "success"`); err != nil {
		t.Fatal(err)
	}
	run, _ := st.Run(context.Background(), runID)
	got := eval[map[string]string](t, p, `(() => { const v = (id) => document.getElementById(id).dataset.value;
		return {steps: v("sum-steps"), in: v("sum-tokens-in"), rows: String(document.querySelectorAll(".step-row").length)} })()`)
	if got["steps"] != fmt.Sprint(run.Steps) || got["in"] != fmt.Sprint(run.Usage.InputTokens) || got["rows"] != "2" || res.Outcome.Steps != 2 {
		t.Errorf("after the run: %v; store %d steps %d in", got, run.Steps, run.Usage.InputTokens)
	}
	screenshot(t, p, "trace-live.png")

	// The index lists the run.
	ip := open(t, b, hs.URL+"/")
	if n := eval[int](t, ip, `document.querySelectorAll("tr[data-run='`+runID+`']").length`); n != 1 {
		t.Errorf("the index lists the run %d times", n)
	}
	// An unchanged view is a 304.
	resp, err := http.Get(hs.URL + "/api/runs/" + runID + "/view")
	if err != nil {
		t.Fatal(err)
	}
	var v View
	json.NewDecoder(resp.Body).Decode(&v)
	resp.Body.Close()
	req, _ := http.NewRequest(http.MethodGet, hs.URL+"/api/runs/"+runID+"/view", nil)
	req.Header.Set("If-None-Match", `"`+v.Version+`"`)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotModified {
		t.Errorf("an unchanged view: %s", resp.Status)
	}
}

// holdAt holds the turn of step n until release is closed.
type holdAt struct {
	provider.Provider
	n       int
	release chan struct{}
}

func (h holdAt) Complete(ctx context.Context, req *provider.Request, onText func(string)) (*provider.Response, error) {
	if req.Step == h.n {
		select {
		case <-h.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return h.Provider.Complete(ctx, req, onText)
}
