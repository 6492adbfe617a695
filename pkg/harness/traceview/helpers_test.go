package traceview

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/initorigin/io-harness-go/internal/browser"
	"github.com/initorigin/io-harness-go/pkg/harness"
	"github.com/initorigin/io-harness-go/pkg/harness/approve"
	"github.com/initorigin/io-harness-go/pkg/harness/policy"
	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/scripted"
	"github.com/initorigin/io-harness-go/pkg/harness/store"
	"github.com/initorigin/io-harness-go/pkg/harness/store/sqlite"
	"github.com/initorigin/io-harness-go/pkg/harness/verify"
)

func args(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func usd(f float64) *float64 { return &f }

func memStore(t testing.TB) store.Store {
	t.Helper()
	st, err := sqlite.OpenMemory(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func fileStore(t testing.TB) store.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "trace.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// demoRun drives a real run that has a bit of everything: a retried
// provider call, a read the policy refuses, an edit, a write a person
// approves, a gate that fails and then passes.
func demoRun(t testing.TB, st store.Store, extra ...scripted.Turn) *harness.Result {
	t.Helper()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "greet.txt"), []byte("hello, wrld\n"), 0o644)
	os.WriteFile(filepath.Join(dir, ".env"), []byte("KEY=1\n"), 0o644)
	turns := append([]scripted.Turn{
		{Text: "Let me look around first.", ToolCalls: []scripted.Call{
			{Name: "read_file", Arguments: args(map[string]string{"path": "greet.txt"})},
			{Name: "read_file", Arguments: args(map[string]string{"path": ".env"})}},
			Usage: &provider.Usage{InputTokens: 1200, OutputTokens: 40, CacheReadTokens: 800}, CostUSD: usd(0.0012),
			Fail: &scripted.Failure{Kind: provider.KindRateLimited, Times: 1, RetryAfterMS: 1}},
		{Text: "Fixing the typo.", ToolCalls: []scripted.Call{{Name: "edit_file", Arguments: args(map[string]string{"path": "greet.txt", "old_text": "wrld", "new_text": "world"})}},
			Usage: &provider.Usage{InputTokens: 1500, OutputTokens: 30}, CostUSD: usd(0.0015)},
	}, extra...)
	turns = append(turns, scripted.Turn{Text: "Leaving a note.", ToolCalls: []scripted.Call{{Name: "write_file", Arguments: args(map[string]string{"path": "NOTES.md", "content": "# Notes\n\nfixed the greeting\n"})}},
		Usage: &provider.Usage{InputTokens: 1800, OutputTokens: 60}, CostUSD: usd(0.0021)})
	p, err := scripted.New(scripted.Script{Name: "openai:gpt-5-mini", Turns: turns})
	if err != nil {
		t.Fatal(err)
	}
	pol := &policy.Policy{Version: 1, Defaults: policy.Defaults{Read: policy.Allow, Write: policy.Allow, Exec: policy.Deny, Net: policy.Deny},
		Layers: []policy.Layer{{Name: "secrets", Rules: []policy.Rule{{Act: policy.Read, Effect: policy.Deny, Pattern: ".env"}}},
			{Name: "review", Rules: []policy.Rule{{Act: policy.Write, Effect: policy.Ask, Pattern: "NOTES.md"}}}}}
	task := harness.TaskContract{Goal: "Fix the greeting in greet.txt and leave a note", Root: dir,
		Verification: []verify.Check{{Kind: verify.WorkspaceFileContains, File: "NOTES.md", Text: "fixed"}},
		Budgets:      harness.Budgets{MaxSteps: len(turns)}}
	res, err := harness.Run(context.Background(), task, harness.Options{Provider: p, Store: st, Policy: pol, Approver: approve.ApproveAll(),
		Backoff: harness.Backoff{Base: harness.Duration(time.Millisecond), Max: harness.Duration(2 * time.Millisecond)}})
	if err != nil || res.Outcome.Kind != harness.Success {
		t.Fatalf("%v %+v", err, res)
	}
	return res
}

// treeStore writes a tree of runs straight into the store, as the tree
// code will: a root with fan children, each with fan children, down to
// depth levels, every run with steps steps, one tool call each.
func treeStore(t testing.TB, st store.Store, fan, depth, steps int) (rootID string, agents int) {
	t.Helper()
	ctx := context.Background()
	t0 := time.Now().Add(-time.Hour)
	var rootLease *store.Lease
	var make1 func(parent, path string, level, n int) string
	make1 = func(parent, path string, level, n int) string {
		agents++
		id := fmt.Sprintf("run_tree_%05d", agents)
		start := t0.Add(time.Duration(agents) * 50 * time.Millisecond)
		ev := func(seq int64, step int, kind string, at time.Time, extra string) store.Event {
			return store.Event{Seq: seq, Step: step, Kind: kind, At: at, Data: json.RawMessage(fmt.Sprintf(
				`{"run_id":%q,"path":%q,"seq":%d,"step":%d,"kind":%q,"at":%q%s}`, id, path, seq, step, kind, at.Format(time.RFC3339Nano), extra))}
		}
		run := &store.Run{ID: id, ParentID: parent, AgentPath: path, Task: json.RawMessage(fmt.Sprintf(`{"goal":"work on %s"}`, path)),
			Provider: "anthropic:claude-test", StartedAt: start}
		first := []store.Event{ev(1, 0, "run_started", start, `,"provider":"anthropic:claude-test"`)}
		var l *store.Lease
		if parent == "" {
			var err error
			if l, err = st.CreateRun(ctx, run, first, store.Self(), time.Minute); err != nil {
				t.Fatal(err)
			}
			rootLease = l
		} else {
			// An agent of the tree, under the root's lease.
			run.RootID, run.Status = rootLease.RunID, store.StatusRunning
			if err := st.CreateAgent(ctx, rootLease, run, first); err != nil {
				t.Fatal(err)
			}
			l = rootLease.For(id)
		}
		seq := int64(1)
		at := start
		for s := 1; s <= steps; s++ {
			begin := at
			at = at.Add(20 * time.Millisecond)
			call := fmt.Sprintf("call_%d", s)
			var evs []store.Event
			for _, k := range []string{"step_started", "model_done", "tool_call", "tool_result", "checkpoint"} {
				seq++
				extra := ""
				switch k {
				case "model_done":
					extra = `,"latency_ms":12,"provider":"anthropic:claude-test"`
				case "tool_call", "tool_result":
					extra = `,"tool":"read_file","call_id":"` + call + `"`
				}
				evs = append(evs, ev(seq, s, k, at, extra))
			}
			c := &store.Commit{Step: store.Step{RunID: id, Step: s, StartedAt: begin, FinishedAt: at, Provider: "anthropic:claude-test",
				Assistant: provider.Message{Role: provider.RoleAssistant, Content: "reading " + path,
					ToolCalls: []provider.ToolCall{{ID: call, Name: "read_file", Arguments: json.RawMessage(`{"path":"a.txt"}`)}}},
				Observations: []store.Observation{{Kind: store.ObservationTool, CallID: call, Tool: "read_file", Output: "a.txt (lines 1-1 of 1)\nx\n"}},
				Usage:        provider.Usage{InputTokens: int64(100 * s), OutputTokens: 10}, Cost: provider.Cost{USD: 0.0001 * float64(s), Known: true}},
				Events: evs}
			if err := st.CommitStep(ctx, l, c); err != nil {
				t.Fatal(err)
			}
		}
		if level < depth {
			for i := 0; i < fan; i++ {
				make1(id, fmt.Sprintf("%s/w%d", path, i), level+1, i)
			}
		}
		kind := "success"
		if n%7 == 3 {
			kind = "step_cap_reached"
		}
		out := fmt.Sprintf(`{"kind":%q,"steps":%d}`, kind, steps)
		seq++
		if err := st.FinishRun(ctx, l, &store.Finish{RunID: id, Status: store.StatusFinished, Outcome: kind, OutcomeJSON: json.RawMessage(out), At: at,
			Events: []store.Event{ev(seq, steps, "outcome", at, `,"outcome":`+out)}}); err != nil {
			t.Fatal(err)
		}
		return id
	}
	rootID = make1("", "root", 0, 0)
	return rootID, agents
}

// startBrowser starts Chromium, or skips the test saying why.
func startBrowser(t testing.TB) *browser.Browser {
	t.Helper()
	b, err := browser.Start()
	if errors.Is(err, browser.ErrNoBrowser) {
		t.Skip(err.Error())
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// open loads url in a fresh page and waits until the page has drawn.
func open(t testing.TB, b *browser.Browser, url string) *browser.Page {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p, err := b.NewPage(ctx, 1400, 900)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Navigate(ctx, url); err != nil {
		t.Fatal(err)
	}
	if err := p.WaitFor(ctx, `document.body.dataset.ready === "1"`); err != nil {
		t.Fatalf("%v; console: %v", err, p.Console())
	}
	return p
}

func eval[T any](t testing.TB, p *browser.Page, expr string) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var v T
	if err := p.Eval(ctx, expr, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// screenshot saves the page as name in the test's directory (and, when
// IOH_SCREENSHOTS names a directory, there too) and returns its path.
func screenshot(t testing.TB, p *browser.Page, name string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	png, err := p.Screenshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	if d := os.Getenv("IOH_SCREENSHOTS"); d != "" {
		os.WriteFile(filepath.Join(d, name), png, 0o644)
	}
	if len(png) < 10_000 {
		t.Errorf("the screenshot %s is %d bytes: a blank page?", name, len(png))
	}
	t.Logf("screenshot: %s (%d bytes)", path, len(png))
	return path
}

// writePage writes v's page to a file and returns its file:// URL and size.
func writePage(t testing.TB, v *View) (string, int) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "trace.html")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteHTML(f, v); err != nil {
		t.Fatal(err)
	}
	f.Close()
	fi, _ := os.Stat(path)
	return "file://" + path, int(fi.Size())
}

func storeFilterAll() store.RunFilter { return store.RunFilter{Limit: 1 << 20} }
