package fleet

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/initorigin/io-harness-go/internal/pgtest"
	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/store"
	"github.com/initorigin/io-harness-go/pkg/harness/store/postgres"
)

// pg is this binary's PostgreSQL server, started on first use.
var pg = &pgtest.Server{}

func TestMain(m *testing.M) { os.Exit(pg.Main(m)) }

// openStore opens a store on a fresh schema, closed when the test ends.
func openStore(t *testing.T) (*postgres.Store, string) {
	t.Helper()
	dsn := pg.DSN(t)
	st, err := postgres.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st, dsn
}

// usagePerTurn is what the model reports for every turn.
var usagePerTurn = provider.Usage{InputTokens: 100, OutputTokens: 10}

// model is an OpenAI-compatible streaming server that plays a careful
// model for many runs at once, one per URL prefix /w/KEY/v1: at step k
// it appends "step k" to KEY's log.txt with edit_file (not idempotent),
// unless the log has it already (a call left in doubt), when it only
// lists the directory. A run in approval mode writes approved.txt at its
// first step instead. It counts the requests of every step of every run.
type model struct {
	mu    sync.Mutex
	runs  map[string]*scriptedRun
	delay func(key string, step int) time.Duration
}

type scriptedRun struct {
	ws       string
	steps    int
	approval bool
	requests map[int]int
}

func newModel(t testing.TB) (*model, string) {
	m := &model{runs: map[string]*scriptedRun{}}
	srv := httptest.NewServer(m)
	t.Cleanup(srv.Close)
	return m, srv.URL
}

// add makes a workspace for run key and returns its spec.
func (m *model) add(t *testing.T, base, key string, steps int, approval bool) (ws string, spec []byte) {
	t.Helper()
	ws = filepath.Join(t.TempDir(), key)
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(ws, "log.txt"), []byte("<END>"), 0o644)
	m.mu.Lock()
	m.runs[key] = &scriptedRun{ws: ws, steps: steps, approval: approval, requests: map[int]int{}}
	m.mu.Unlock()
	check := fmt.Sprintf(`{"kind": "workspace_file_contains", "file": "log.txt", "text": "step %d\n"}`, steps)
	policy := ""
	if approval {
		check = `{"kind": "workspace_file_contains", "file": "approved.txt", "text": "yes"}`
		policy = `, "policy": {"version": 1, "defaults": {"read": "allow", "write": "allow", "exec": "deny", "net": "allow"},
			"layers": [{"name": "gate", "rules": [{"act": "write", "effect": "ask", "pattern": "approved.txt"}]}]}`
	}
	spec = fmt.Appendf(nil, `{"task": {"goal": "append the numbered lines", "root": %q, "verification": [%s],
		"budgets": {"max_steps": %d}},
		"provider": {"name": "openai_compatible", "base_url": %q, "model": "m"}%s}`,
		ws, check, 4*steps, base+"/w/"+key+"/v1", policy)
	return ws, spec
}

func (m *model) requests(key string) map[int]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[int]int{}
	for k, v := range m.runs[key].requests {
		out[k] = v
	}
	return out
}

func (m *model) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/w/"), "/")
	var req struct {
		Messages []struct {
			Role string `json:"role"`
		} `json:"messages"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	step := 1
	for _, msg := range req.Messages {
		if msg.Role == "assistant" {
			step++
		}
	}
	m.mu.Lock()
	run := m.runs[key]
	if run == nil {
		m.mu.Unlock()
		http.Error(w, "no run "+key, 404)
		return
	}
	run.requests[step]++
	var delay time.Duration
	if m.delay != nil {
		delay = m.delay(key, step)
	}
	m.mu.Unlock()
	log, _ := os.ReadFile(filepath.Join(run.ws, "log.txt"))
	name, args := "edit_file", fmt.Sprintf(`{"path":"log.txt","old_text":"<END>","new_text":"step %d\n<END>"}`, step)
	switch {
	case run.approval && step == 1:
		name, args = "write_file", `{"path":"approved.txt","content":"yes"}`
	case run.approval, bytes.Contains(log, fmt.Appendf(nil, "step %d\n", step)), step > run.steps:
		name, args = "list_dir", `{}`
	}
	select {
	case <-time.After(delay):
	case <-r.Context().Done():
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fl := w.(http.Flusher)
	chunk := func(v any) {
		data, _ := json.Marshal(v)
		fmt.Fprintf(w, "data: %s\n\n", data)
		fl.Flush()
	}
	chunk(map[string]any{"id": "c", "object": "chat.completion.chunk", "choices": []any{map[string]any{"index": 0,
		"delta": map[string]any{"role": "assistant", "tool_calls": []any{map[string]any{"index": 0, "id": fmt.Sprintf("call_%d", step), "type": "function",
			"function": map[string]any{"name": name, "arguments": args}}}}}}})
	chunk(map[string]any{"id": "c", "object": "chat.completion.chunk", "choices": []any{map[string]any{"index": 0, "delta": map[string]any{},
		"finish_reason": "tool_calls"}}})
	chunk(map[string]any{"id": "c", "object": "chat.completion.chunk", "choices": []any{},
		"usage": map[string]any{"prompt_tokens": usagePerTurn.InputTokens, "completion_tokens": usagePerTurn.OutputTokens}})
	fmt.Fprint(w, "data: [DONE]\n\n")
}

// startWorker runs a worker until the test ends, or until stop is called;
// stop returns Run's error.
func startWorker(t *testing.T, st *postgres.Store, o WorkerOptions) (*Worker, func() error) {
	t.Helper()
	if o.LeaseTTL == 0 {
		o.LeaseTTL = 2 * time.Second
	}
	if o.FetchPoll == 0 {
		o.FetchPoll = 200 * time.Millisecond
	}
	w, err := NewWorker(st, o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	var once sync.Once
	var runErr error
	stop := func() error {
		once.Do(func() {
			cancel()
			select {
			case runErr = <-done:
			case <-time.After(2 * time.Minute):
				runErr = fmt.Errorf("the worker did not stop")
			}
		})
		return runErr
	}
	t.Cleanup(func() { stop() })
	return w, stop
}

// waitFor polls the run until cond holds or two minutes pass.
func waitFor(t *testing.T, st store.Reader, id string, what string, cond func(*store.Run) bool) *store.Run {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		r, err := st.Run(context.Background(), id)
		if err == nil && cond(r) {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s: not %s after two minutes: %+v %v", id, what, r, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func finished(r *store.Run) bool { return r.Status == store.StatusFinished }

// checkEdits checks that each step's line is in the log exactly once.
func checkEdits(t *testing.T, ws string, steps int) {
	t.Helper()
	var want strings.Builder
	for k := 1; k <= steps; k++ {
		fmt.Fprintf(&want, "step %d\n", k)
	}
	want.WriteString("<END>")
	if got, _ := os.ReadFile(filepath.Join(ws, "log.txt")); string(got) != want.String() {
		t.Errorf("%s/log.txt (an edit lost or applied twice):\n%s", ws, got)
	}
}

// actions returns the queue log's actions of a run.
func actions(t *testing.T, st *postgres.Store, id string) []string {
	t.Helper()
	log, err := st.QueueLog(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range log {
		out = append(out, e.Action)
	}
	return out
}

// waitAction polls the run's queue log until it holds action, or two
// minutes pass, and returns the log's actions.
func waitAction(t *testing.T, st *postgres.Store, id, action string) []string {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		got := actions(t, st, id)
		if slices.Contains(got, action) {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s: no %s in the queue log after two minutes: %v", id, action, got)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
