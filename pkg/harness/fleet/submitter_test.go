package fleet

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/initorigin/io-harness-go/pkg/harness"
	"github.com/initorigin/io-harness-go/pkg/harness/store"
)

// whoever can submit chooses a spec, and the worker lends its
// environment: the tests below attack with a spec.

// keySpy is a server that records the Authorization headers it is sent.
type keySpy struct {
	mu   sync.Mutex
	auth []string
}

func (k *keySpy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	k.mu.Lock()
	k.auth = append(k.auth, r.Header.Get("Authorization"))
	k.mu.Unlock()
	http.Error(w, "no", http.StatusUnauthorized)
}

func (k *keySpy) saw(secret string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, a := range k.auth {
		if strings.Contains(a, secret) {
			return true
		}
	}
	return false
}

// A submitted spec that names its own server for a vendor gets no key
// from the worker's environment: the spec is refused, by Submit and by a
// worker, saying why, and the server never sees the key. The negative control runs the same spec
// locally with the same environment: the key goes to the server.
func TestWorkerKeyNeverGoesToTheSubmittersServer(t *testing.T) {
	st, _ := openStore(t)
	ctx := context.Background()
	const secret = "sk-fleet-secret-8812"
	env := func(name string) (string, bool) {
		if name == "OPENAI_API_KEY" {
			return secret, true
		}
		return "", false
	}
	spy := &keySpy{}
	srv := httptest.NewServer(spy)
	defer srv.Close()
	ws := t.TempDir()
	spec := fmt.Appendf(nil, `{"task": {"goal": "g", "root": %q,
		"verification": [{"kind": "workspace_file_contains", "file": "a", "text": "b"}], "budgets": {"max_steps": 1}},
		"provider": {"name": "openai", "base_url": %q, "model": "gpt-x", "price": {"input": 1, "output": 1}}}`, ws, srv.URL+"/v1")
	// No worker could drive it, so Submit refuses it; a worker refuses
	// it too (a submission written by code that did not check).
	if _, err := Submit(ctx, st, spec, SubmitOptions{}); err == nil || !strings.Contains(err.Error(), "provider.base_url") || !strings.Contains(err.Error(), "gets no key") {
		t.Errorf("submit: %v", err)
	}
	if _, err := specOptions(spec, env); err == nil || !strings.Contains(err.Error(), "provider.base_url") || !strings.Contains(err.Error(), "gets no key") {
		t.Errorf("the worker's refusal: %v", err)
	}
	if spy.saw(secret) {
		t.Fatal("the submitter's server received the worker's key")
	}
	// The negative control.
	s, err := harness.ParseSpec(spec)
	if err != nil {
		t.Fatal(err)
	}
	opts, err := s.Options(env)
	if err != nil {
		t.Fatal(err)
	}
	harness.Run(ctx, s.Task, opts)
	if !spy.saw(secret) {
		t.Error("the negative control: a local run with the same spec and environment did not send the key either")
	}
}

// MCP servers of a submitted spec read only the variables the worker
// lends them.
func TestWorkerLendsMCPOnlyWhatItNames(t *testing.T) {
	st, _ := openStore(t)
	env := func(name string) (string, bool) { return "value-of-" + name, true }
	w, err := NewWorker(st, WorkerOptions{LookupEnv: env, MCPEnv: []string{"MCP_TOKEN"}})
	if err != nil {
		t.Fatal(err)
	}
	look := w.mcpEnv()
	if v, ok := look("MCP_TOKEN"); !ok || v != "value-of-MCP_TOKEN" {
		t.Errorf("a lent variable: %q %v", v, ok)
	}
	for _, name := range []string{"OPENAI_API_KEY", "HOME", "PGPASSWORD"} {
		if v, ok := look(name); ok {
			t.Errorf("%s reached an MCP server: %q", name, v)
		}
		if _, ok := env(name); !ok {
			t.Errorf("the negative control: the environment has no %s", name)
		}
	}
	none, _ := NewWorker(st, WorkerOptions{LookupEnv: env})
	if none.mcpEnv() != nil {
		t.Error("a worker that lends nothing lends something")
	}
}

// A worker with roots drives only runs whose workspace is inside them,
// links resolved: a run outside, or inside through a link that leads out,
// is refused. Without roots, the same run is driven.
func TestWorkerRoots(t *testing.T) {
	st, _ := openStore(t)
	m, base := newModel(t)
	ctx := context.Background()
	allowed := t.TempDir()
	inside, spec := m.add(t, base, "in", 1, false)
	_ = inside
	// The model's workspaces are made by add under their own temp dirs;
	// move one under the allowed root, and make a link to another.
	moved := filepath.Join(allowed, "in")
	if err := os.Rename(inside, moved); err != nil {
		t.Fatal(err)
	}
	m.mu.Lock()
	m.runs["in"].ws = moved
	m.mu.Unlock()
	spec = []byte(strings.ReplaceAll(string(spec), inside, moved))
	outside, outSpec := m.add(t, base, "out", 1, false)
	link := filepath.Join(allowed, "link")
	if err := os.Symlink(outside, link); err != nil {
		t.Fatal(err)
	}
	viaLink := []byte(strings.ReplaceAll(string(outSpec), outside, link))
	ids := map[string]string{}
	for name, sp := range map[string][]byte{"in": spec, "out": outSpec, "link": viaLink} {
		id, err := Submit(ctx, st, sp, SubmitOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ids[name] = id
	}
	_, stop := startWorker(t, st, WorkerOptions{Concurrency: 3, Roots: []string{allowed}})
	if r := waitFor(t, st, ids["in"], "finished", finished); r.Outcome != string(harness.Success) {
		t.Errorf("the run inside: %s", r.Outcome)
	}
	for _, name := range []string{"out", "link"} {
		waitAction(t, st, ids[name], ActionRefused)
		log, _ := st.QueueLog(ctx, ids[name])
		if d := log[len(log)-1].Detail; !strings.Contains(d, "outside the directories this worker works in") {
			t.Errorf("%s: %s", name, d)
		}
		if r, _ := st.Run(ctx, ids[name]); r.Steps != 0 {
			t.Errorf("%s was driven", name)
		}
	}
	stop()
	// The negative control: a worker without roots drives them.
	startWorker(t, st, WorkerOptions{Concurrency: 3})
	for _, name := range []string{"out", "link"} {
		r := waitFor(t, st, ids[name], "finished", finished)
		if r.Status != store.StatusFinished {
			t.Errorf("%s: %s", name, r.Status)
		}
	}
}
