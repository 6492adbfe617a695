package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/store"
	"github.com/initorigin/io-harness-go/pkg/harness/store/sqlite"
)

// tortureSteps is how many steps each run of the torture test takes; each
// step appends one line to log.txt with edit_file, which is not
// idempotent: a step applied twice shows as a line written twice.
const tortureSteps = 10

// usagePerTurn is what the model server reports for every turn.
var usagePerTurn = provider.Usage{InputTokens: 100, OutputTokens: 10}

// tortureModel is an OpenAI-compatible streaming server that plays a
// careful model: at step k it appends "step k" to the log, unless the
// log already has it (a call left in doubt by a crash, which the harness
// said may have happened), when it only looks at the directory. It counts
// requests made after the step that passes the gate.
type tortureModel struct {
	ws    string
	rng   *rand.Rand
	mu    sync.Mutex
	extra int // requests for a step past the last
	total int
}

func (m *tortureModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
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
	m.total++
	if step > tortureSteps {
		m.extra++
	}
	delay := time.Duration(m.rng.IntN(40)) * time.Millisecond
	m.mu.Unlock()
	log, _ := os.ReadFile(filepath.Join(m.ws, "log.txt"))
	name, args := "edit_file", fmt.Sprintf(`{"path":"log.txt","old_text":"<END>","new_text":"step %d\n<END>"}`, step)
	if bytes.Contains(log, []byte(fmt.Sprintf("step %d\n", step))) || step > tortureSteps {
		name, args = "list_dir", `{}`
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fl := w.(http.Flusher)
	chunk := func(v any) {
		data, _ := json.Marshal(v)
		fmt.Fprintf(w, "data: %s\n\n", data)
		fl.Flush()
	}
	time.Sleep(delay)
	id := fmt.Sprintf("call_%d", step)
	chunk(map[string]any{"id": "c", "object": "chat.completion.chunk", "choices": []any{map[string]any{"index": 0,
		"delta": map[string]any{"role": "assistant", "tool_calls": []any{map[string]any{"index": 0, "id": id, "type": "function",
			"function": map[string]any{"name": name, "arguments": ""}}}}}}})
	time.Sleep(delay / 2)
	chunk(map[string]any{"id": "c", "object": "chat.completion.chunk", "choices": []any{map[string]any{"index": 0,
		"delta": map[string]any{"tool_calls": []any{map[string]any{"index": 0, "function": map[string]any{"arguments": args}}}}}}})
	chunk(map[string]any{"id": "c", "object": "chat.completion.chunk", "choices": []any{map[string]any{"index": 0, "delta": map[string]any{},
		"finish_reason": "tool_calls"}}})
	chunk(map[string]any{"id": "c", "object": "chat.completion.chunk", "choices": []any{},
		"usage": map[string]any{"prompt_tokens": usagePerTurn.InputTokens, "completion_tokens": usagePerTurn.OutputTokens}})
	fmt.Fprint(w, "data: [DONE]\n\n")
}

// TestKillNineTorture drives runs with the real CLI and kills it with
// SIGKILL at random moments (seeded), resuming each time, 30 kills in all.
// After every run: each step's edit is in the log exactly once, the steps
// are numbered without a gap, the committed spend is the uninterrupted
// run's, and no request was made after the step that passed the gate.
func TestKillNineTorture(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the torture test kills 30 processes")
	}
	const kills = 30
	rng := rand.New(rand.NewPCG(2026, 12))
	done, landed := 0, 0
	for run := 0; done < kills; run++ {
		dir := t.TempDir()
		ws := filepath.Join(dir, "ws")
		os.Mkdir(ws, 0o755)
		os.WriteFile(filepath.Join(ws, "log.txt"), []byte("<END>"), 0o644)
		model := &tortureModel{ws: ws, rng: rand.New(rand.NewPCG(uint64(run), 1))}
		srv := httptest.NewServer(model)
		spec := filepath.Join(dir, "spec.json")
		os.WriteFile(spec, fmt.Appendf(nil, `{"task": {"goal": "append the numbered lines", "root": %q,
			"verification": [{"kind": "workspace_file_contains", "file": "log.txt", "text": "step %d\n"}],
			"budgets": {"max_steps": %d}},
			"provider": {"name": "openai_compatible", "base_url": %q, "model": "m", "api_key": "k"}}`,
			ws, tortureSteps, 4*tortureSteps, srv.URL+"/v1"), 0o644)
		db := filepath.Join(dir, "trace.db")
		finished := false
		for attempt := 0; !finished; attempt++ {
			args := []string{"run", "--json", "--store", db, spec}
			if id := onlyRun(t, db); id != "" {
				args = []string{"resume", "--json", "--store", db, spec, id}
			}
			cmd := exec.Command(bin, args...)
			cmd.Dir = dir
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			var err error
			if done < kills {
				select {
				case err = <-exited:
				case <-time.After(time.Duration(5+rng.IntN(300)) * time.Millisecond):
					cmd.Process.Signal(syscall.SIGKILL)
					<-exited
					done++
					landed++
					continue
				}
			} else {
				select {
				case err = <-exited:
				case <-time.After(2 * time.Minute):
					cmd.Process.Kill()
					t.Fatalf("the last driver did not finish:\n%s", out.String())
				}
			}
			if err != nil {
				t.Fatalf("%v exited: %v\n%s", args[0], err, out.String())
			}
			finished = true
		}
		srv.Close()
		checkTortureRun(t, db, ws, model)
	}
	t.Logf("%d kills, each landing mid-run", landed)
}

// onlyRun returns the id of the one run in the store, or "" when the
// store or the run does not exist yet.
func onlyRun(t *testing.T, db string) string {
	t.Helper()
	if _, err := os.Stat(db); err != nil {
		return ""
	}
	st, err := sqlite.OpenReadOnly(context.Background(), db)
	if err != nil {
		return ""
	}
	defer st.Close()
	runs, err := st.Runs(context.Background(), store.RunFilter{})
	if err != nil || len(runs) == 0 {
		return ""
	}
	if len(runs) > 1 {
		t.Fatalf("%d runs in one store", len(runs))
	}
	return runs[0].ID
}

func checkTortureRun(t *testing.T, db, ws string, model *tortureModel) {
	t.Helper()
	var want strings.Builder
	for k := 1; k <= tortureSteps; k++ {
		fmt.Fprintf(&want, "step %d\n", k)
	}
	want.WriteString("<END>")
	if got, _ := os.ReadFile(filepath.Join(ws, "log.txt")); string(got) != want.String() {
		t.Errorf("log.txt after the run (an edit lost or applied twice):\n%s", got)
	}
	st, err := sqlite.OpenReadOnly(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	id := onlyRun(t, db)
	r, err := st.Run(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != store.StatusFinished || r.Outcome != "success" {
		t.Errorf("run %s: %s %s", id, r.Status, r.Outcome)
	}
	steps, err := st.Steps(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range steps {
		if s.Step != i+1 {
			t.Errorf("step %d stored at position %d", s.Step, i+1)
		}
	}
	// The committed spend is one turn's per step, whatever crashed: the
	// crashed calls' spend is counted apart, as lost.
	wantUsage := provider.Usage{InputTokens: int64(len(steps)) * usagePerTurn.InputTokens, OutputTokens: int64(len(steps)) * usagePerTurn.OutputTokens}
	if r.Usage != wantUsage {
		t.Errorf("committed spend %+v over %d steps, want %+v", r.Usage, len(steps), wantUsage)
	}
	if n := int64(model.total-len(steps)) * usagePerTurn.Total(); r.LostUsage.Total() > n {
		t.Errorf("lost spend %d tokens, more than the %d uncommitted requests cost", r.LostUsage.Total(), n)
	}
	if model.extra != 0 {
		t.Errorf("%d requests after the step that passed the gate", model.extra)
	}
}
