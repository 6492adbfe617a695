package harness_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/initorigin/io-harness-go/pkg/harness"
	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/scripted"
	"github.com/initorigin/io-harness-go/pkg/harness/store"
	"github.com/initorigin/io-harness-go/pkg/harness/store/sqlite"
	"github.com/initorigin/io-harness-go/pkg/harness/verify"
)

// workspace makes a directory holding files.
func workspace(t testing.TB, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// call is a scripted tool call with arguments given as a Go value.
func call(name string, args any) scripted.Call {
	data, err := json.Marshal(args)
	if err != nil {
		panic(err)
	}
	return scripted.Call{Name: name, Arguments: data}
}

func calls(c ...scripted.Call) scripted.Turn { return scripted.Turn{ToolCalls: c} }

func script(t testing.TB, turns ...scripted.Turn) *scripted.Provider {
	t.Helper()
	p, err := scripted.New(scripted.Script{Turns: turns})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func contains(file, text string) verify.Check {
	return verify.Check{Kind: verify.WorkspaceFileContains, File: file, Text: text}
}

func memStore(t testing.TB) store.Store {
	t.Helper()
	st, err := sqlite.OpenMemory(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func fileStore(t testing.TB) (store.Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "trace.db")
	st, err := sqlite.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st, path
}

// recorder wraps a provider and keeps every request it was sent.
type recorder struct {
	provider.Provider
	mu       sync.Mutex
	requests []*provider.Request
}

func (r *recorder) Complete(ctx context.Context, req *provider.Request, onText func(string)) (*provider.Response, error) {
	r.mu.Lock()
	c := *req
	r.requests = append(r.requests, &c)
	r.mu.Unlock()
	return r.Provider.Complete(ctx, req, onText)
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.requests)
}

// Price forwards to the wrapped provider so that money budgets apply.
func (r *recorder) Price(u provider.Usage) provider.Cost {
	if p, ok := r.Provider.(provider.Pricer); ok {
		return p.Price(u)
	}
	return provider.Cost{}
}

// events collects what an observer sees.
type events struct {
	mu  sync.Mutex
	all []harness.Event
}

func (e *events) observe(ev harness.Event) {
	e.mu.Lock()
	e.all = append(e.all, ev)
	e.mu.Unlock()
}

func (e *events) kinds() []harness.EventKind {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []harness.EventKind
	for _, ev := range e.all {
		if ev.Kind != harness.EventModelDelta {
			out = append(out, ev.Kind)
		}
	}
	return out
}

func (e *events) of(kind harness.EventKind) []harness.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []harness.Event
	for _, ev := range e.all {
		if ev.Kind == kind {
			out = append(out, ev)
		}
	}
	return out
}

func intp(n int) *int { return &n }
