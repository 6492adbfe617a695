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
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/initorigin/io-harness-go/pkg/harness/store"
	"github.com/initorigin/io-harness-go/pkg/harness/store/sqlite"
)

// The tree the torture drives: the root spawns treeKids children in the
// background and collects them; each child writes its file, spawns
// treeGrandkids grandchildren and waits for them, then edits its file;
// each grandchild writes its file and edits it. Edits are not idempotent:
// one applied twice shows as a line written twice.
const (
	treeKids      = 3
	treeGrandkids = 2
	treeAgents    = 1 + treeKids + treeKids*treeGrandkids
	// treeSteps is every agent's steps together, uninterrupted: the root
	// 3, each child 4, each grandchild 3.
	treeSteps = 3 + 4*treeKids + 3*treeKids*treeGrandkids
)

// treeModel is an OpenAI-compatible streaming server that plays every
// agent of the tree carefully: it tells the agent by the part its goal
// names, the step by the turns so far, and before an edit it looks at the
// file, so that an edit a crash left in doubt is not made twice.
type treeModel struct {
	ws  string
	mu  sync.Mutex
	rng *rand.Rand
	// requests counts the requests per agent part and step.
	requests map[string]int
}

var partRE = regexp.MustCompile(`part (\d+(?:\.\d+)?)`)

func (m *treeModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Messages []struct {
			Role    string `json:"role"`
			Content any    `json:"content"`
		} `json:"messages"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	step, part := 1, ""
	for _, msg := range req.Messages {
		switch msg.Role {
		case "assistant":
			step++
		case "user":
			if s, ok := msg.Content.(string); ok && part == "" && strings.HasPrefix(s, "# Task") {
				if m := partRE.FindStringSubmatch(strings.SplitN(s, "\n\n", 3)[1]); m != nil {
					part = m[1]
				} else {
					part = "root"
				}
			}
		}
	}
	m.mu.Lock()
	m.requests[fmt.Sprintf("%s#%d", part, step)]++
	delay := time.Duration(m.rng.IntN(25)) * time.Millisecond
	m.mu.Unlock()

	type tc struct{ name, args string }
	var calls []tc
	text := ""
	file := "out/p" + part + ".txt"
	careful := func() tc {
		data, _ := os.ReadFile(filepath.Join(m.ws, file))
		if bytes.Contains(data, []byte("b\n")) {
			return tc{"list_dir", `{"path":"out"}`}
		}
		return tc{"edit_file", fmt.Sprintf(`{"path":%q,"old_text":"a\n","new_text":"a\nb\n"}`, file)}
	}
	switch {
	case part == "root" && step == 1:
		for i := 1; i <= treeKids; i++ {
			calls = append(calls, tc{"spawn_agent", fmt.Sprintf(`{"goal":"part %d","wait":false}`, i)})
		}
	case part == "root" && step == 2:
		calls = append(calls, tc{"collect_agents", `{}`})
	case part == "root":
		text = "the tree is done"
	case !strings.Contains(part, ".") && step == 1, strings.Contains(part, ".") && step == 1:
		calls = append(calls, tc{"write_file", fmt.Sprintf(`{"path":%q,"content":"a\n"}`, file)})
	case !strings.Contains(part, ".") && step == 2:
		for j := 1; j <= treeGrandkids; j++ {
			calls = append(calls, tc{"spawn_agent", fmt.Sprintf(`{"goal":"part %s.%d"}`, part, j)})
		}
	case !strings.Contains(part, ".") && step == 3, strings.Contains(part, ".") && step == 2:
		calls = append(calls, careful())
	default:
		text = "part " + part + " done"
	}

	w.Header().Set("Content-Type", "text/event-stream")
	fl := w.(http.Flusher)
	chunk := func(v any) {
		data, _ := json.Marshal(v)
		fmt.Fprintf(w, "data: %s\n\n", data)
		fl.Flush()
	}
	time.Sleep(delay)
	finish := "stop"
	if text != "" {
		chunk(map[string]any{"id": "c", "object": "chat.completion.chunk", "choices": []any{map[string]any{"index": 0,
			"delta": map[string]any{"role": "assistant", "content": text}}}})
	}
	for i, c := range calls {
		finish = "tool_calls"
		chunk(map[string]any{"id": "c", "object": "chat.completion.chunk", "choices": []any{map[string]any{"index": 0,
			"delta": map[string]any{"role": "assistant", "tool_calls": []any{map[string]any{"index": i, "id": fmt.Sprintf("call_%d_%d", step, i),
				"type": "function", "function": map[string]any{"name": c.name, "arguments": c.args}}}}}}})
	}
	chunk(map[string]any{"id": "c", "object": "chat.completion.chunk", "choices": []any{map[string]any{"index": 0, "delta": map[string]any{},
		"finish_reason": finish}}})
	chunk(map[string]any{"id": "c", "object": "chat.completion.chunk", "choices": []any{},
		"usage": map[string]any{"prompt_tokens": usagePerTurn.InputTokens, "completion_tokens": usagePerTurn.OutputTokens}})
	fmt.Fprint(w, "data: [DONE]\n\n")
}

// TestTreeKillNineTorture drives a three-level tree with the real CLI and
// kills it with SIGKILL at random moments (seeded), resuming the tree
// each time from its root, treeKills kills in all. After every tree: each
// agent's edit is in its file exactly once, no agent was spawned twice,
// every agent finished, the steps are numbered without a gap, and the
// tree's committed spend is the uninterrupted tree's.
func TestTreeKillNineTorture(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the torture test kills 20 processes")
	}
	const treeKills = 20
	rng := rand.New(rand.NewPCG(2026, 3))
	done := 0
	for tree := 0; done < treeKills; tree++ {
		dir := t.TempDir()
		ws := filepath.Join(dir, "ws")
		os.MkdirAll(filepath.Join(ws, "out"), 0o755)
		model := &treeModel{ws: ws, rng: rand.New(rand.NewPCG(uint64(tree), 9)), requests: map[string]int{}}
		srv := httptest.NewServer(model)
		spec := filepath.Join(dir, "spec.json")
		os.WriteFile(spec, fmt.Appendf(nil, `{"task": {"goal": "build the tree", "root": %q, "budgets": {"max_steps": 8}},
			"provider": {"name": "openai_compatible", "base_url": %q, "model": "m", "api_key": "k"},
			"containment": {"max_agents": %d, "max_concurrent": 2, "max_depth": 2}}`, ws, srv.URL+"/v1", treeAgents), 0o644)
		db := filepath.Join(dir, "trace.db")
		kills := 0
		for finished := false; !finished; {
			args := []string{"run", "--json", "--store", db, spec}
			if id := rootRun(t, db); id != "" {
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
			if done < treeKills {
				// Kill once the tree has committed a few more steps, plus a
				// random moment: every kill lands inside the tree's work,
				// whatever the machine's speed.
				target := committedSteps(db) + 1 + rng.IntN(5)
				jitter := time.Duration(rng.IntN(30)) * time.Millisecond
				killed := false
				for !killed {
					select {
					case err = <-exited:
					case <-time.After(5 * time.Millisecond):
						if committedSteps(db) < target {
							continue
						}
						time.Sleep(jitter)
						cmd.Process.Signal(syscall.SIGKILL)
						<-exited
						killed = true
					}
					if !killed {
						break
					}
				}
				if killed {
					done++
					kills++
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
		checkTree(t, db, ws, model)
		t.Logf("tree %d: %d kills", tree, kills)
	}
}

// committedSteps counts the steps the tree in db has committed; 0 before
// the store exists.
func committedSteps(db string) int {
	if _, err := os.Stat(db); err != nil {
		return 0
	}
	st, err := sqlite.OpenReadOnly(context.Background(), db)
	if err != nil {
		return 0
	}
	defer st.Close()
	runs, err := st.Runs(context.Background(), store.RunFilter{Limit: -1})
	if err != nil {
		return 0
	}
	n := 0
	for _, r := range runs {
		n += r.Steps
	}
	return n
}

// rootRun returns the id of the store's one root run, or "" when there is
// none yet.
func rootRun(t *testing.T, db string) string {
	t.Helper()
	if _, err := os.Stat(db); err != nil {
		return ""
	}
	st, err := sqlite.OpenReadOnly(context.Background(), db)
	if err != nil {
		return ""
	}
	defer st.Close()
	runs, err := st.Runs(context.Background(), store.RunFilter{Roots: true})
	if err != nil || len(runs) == 0 {
		return ""
	}
	if len(runs) > 1 {
		t.Fatalf("%d root runs in one store", len(runs))
	}
	return runs[0].ID
}

func checkTree(t *testing.T, db, ws string, model *treeModel) {
	t.Helper()
	for i := 1; i <= treeKids; i++ {
		parts := []string{fmt.Sprint(i)}
		for j := 1; j <= treeGrandkids; j++ {
			parts = append(parts, fmt.Sprintf("%d.%d", i, j))
		}
		for _, p := range parts {
			if got, _ := os.ReadFile(filepath.Join(ws, "out", "p"+p+".txt")); string(got) != "a\nb\n" {
				t.Errorf("out/p%s.txt after the tree (an edit lost or applied twice): %q", p, got)
			}
		}
	}
	st, err := sqlite.OpenReadOnly(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	root := rootRun(t, db)
	runs, err := st.Runs(context.Background(), store.RunFilter{RootID: root, Limit: -1})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != treeAgents {
		t.Errorf("%d agents in the tree, want %d: a spawn ran twice or never", len(runs), treeAgents)
	}
	paths := map[string]bool{}
	steps := 0
	for _, r := range runs {
		if paths[r.AgentPath] {
			t.Errorf("two agents at %s", r.AgentPath)
		}
		paths[r.AgentPath] = true
		if r.Status != store.StatusFinished || r.Outcome != "finished" {
			t.Errorf("agent %s: %s %s", r.AgentPath, r.Status, r.Outcome)
		}
		ss, err := st.Steps(context.Background(), r.ID)
		if err != nil {
			t.Fatal(err)
		}
		for i, s := range ss {
			if s.Step != i+1 {
				t.Errorf("agent %s: step %d stored at position %d", r.AgentPath, s.Step, i+1)
			}
		}
		steps += len(ss)
		want := usagePerTurn.Total() * int64(len(ss))
		if r.Usage.Total() != want {
			t.Errorf("agent %s: committed spend %d tokens over %d steps, want %d", r.AgentPath, r.Usage.Total(), len(ss), want)
		}
	}
	// The tree's committed spend is the uninterrupted tree's: every step
	// once, whatever crashed; the crashed calls' spend is counted apart.
	if steps != treeSteps {
		t.Errorf("the tree committed %d steps, the uninterrupted tree %d", steps, treeSteps)
	}
}
