package tool

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/initorigin/io-harness-go/pkg/harness/policy"
	"github.com/initorigin/io-harness-go/pkg/sandbox"
)

// recordingGate answers every Authorize with verdict and records what it
// was asked.
type recordingGate struct {
	mu      sync.Mutex
	asked   []Action
	verdict func(a Action) Verdict
	peek    func(act policy.Act, target string) policy.Effect
}

func (g *recordingGate) Authorize(_ context.Context, a Action) Verdict {
	g.mu.Lock()
	g.asked = append(g.asked, a)
	g.mu.Unlock()
	return g.verdict(a)
}

func (g *recordingGate) Peek(act policy.Act, target string) policy.Verdict {
	v := policy.Verdict{Act: act, Target: target, Effect: policy.Allow}
	if g.peek != nil {
		v.Effect = g.peek(act, target)
	}
	return v
}

// validArgs are arguments that make each built-in tool act.
var validArgs = map[string]string{
	"read_file":  `{"path": "a.txt"}`,
	"write_file": `{"path": "new.txt", "content": "x"}`,
	"edit_file":  `{"path": "a.txt", "old_text": "hello", "new_text": "bye"}`,
	"list_dir":   `{}`,
	"grep":       `{"pattern": "hello"}`,
	"find":       `{"pattern": "*.txt"}`,
	"exec":       `{"argv": ["touch", "new.txt"]}`,
}

// countingSandbox is a sandbox that counts runs and runs nothing.
type countingSandbox struct{ runs int }

func (s *countingSandbox) Name() string                     { return "counting" }
func (s *countingSandbox) Enforcement() sandbox.Enforcement { return sandbox.Enforcement{} }
func (s *countingSandbox) Run(context.Context, *sandbox.Spec) (*sandbox.Result, error) {
	s.runs++
	return &sandbox.Result{Backend: "counting"}, nil
}

// Every built-in tool asks the gate before it acts, and does nothing when
// the gate refuses: the registry is walked, so a new tool without a check
// fails here.
func TestEveryToolActsThroughTheGate(t *testing.T) {
	tools := append(Workspace(), SingleFile()...)
	for _, tl := range tools {
		name := tl.Spec().Name
		t.Run(name, func(t *testing.T) {
			args, ok := validArgs[name]
			if !ok {
				t.Fatalf("no valid arguments for %s: add them, so that its gate is checked", name)
			}
			dir := t.TempDir()
			os.WriteFile(filepath.Join(dir, "a.txt"), []byte("hello\n"), 0o644)
			root, err := os.OpenRoot(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer root.Close()
			only := []string(nil)
			if slices.ContainsFunc(SingleFile(), func(s Tool) bool { return s == tl }) {
				only = []string{"a.txt", "new.txt"}
			}
			g := &recordingGate{verdict: func(Action) Verdict { return Verdict{Refused: `denied by rule "**" in layer "test"`} }}
			sb := &countingSandbox{}
			res := tl.Call(context.Background(), &Env{Root: root, Gate: g, Only: only, Sandbox: sb}, json.RawMessage(args))
			if len(g.asked) == 0 {
				t.Fatalf("%s acted without asking the gate: %+v", name, res)
			}
			if !res.IsError || !strings.Contains(res.Refusal, "layer") || strings.Contains(res.Output, "hello") {
				t.Errorf("a refused %s returned %+v", name, res)
			}
			if data, _ := os.ReadFile(filepath.Join(dir, "a.txt")); string(data) != "hello\n" {
				t.Errorf("a refused %s changed a.txt to %q", name, data)
			}
			if _, err := os.Stat(filepath.Join(dir, "new.txt")); err == nil {
				t.Errorf("a refused %s created new.txt", name)
			}
			if sb.runs != 0 {
				t.Errorf("a refused %s ran a command", name)
			}
			// A deferred action does nothing either, and says so.
			g.verdict = func(Action) Verdict { return Verdict{Deferred: "req-1"} }
			res = tl.Call(context.Background(), &Env{Root: root, Gate: g, Only: only, Sandbox: sb}, json.RawMessage(args))
			if res.Deferred != "req-1" {
				t.Errorf("a deferred %s returned %+v", name, res)
			}
			if data, _ := os.ReadFile(filepath.Join(dir, "a.txt")); string(data) != "hello\n" {
				t.Errorf("a deferred %s changed a.txt", name)
			}
		})
	}
}

// What the gate is asked carries the act, the clean target and, for a
// write, the whole new content; an approver's rewrite is performed as
// rewritten.
func TestGateSeesActionsAndRewrites(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a.txt"), []byte("hello world\n"), 0o644)
	root, _ := os.OpenRoot(dir)
	defer root.Close()
	g := &recordingGate{verdict: func(a Action) Verdict {
		if a.Act == policy.Write {
			a.Target, a.Content = "moved.txt", a.Content+"(approved)\n"
		}
		return Verdict{Action: a}
	}}
	env := &Env{Root: root, Gate: g}
	ctx := context.Background()
	for _, c := range []struct{ tool, args string }{
		{"edit_file", `{"path": "./a.txt", "old_text": "world", "new_text": "there"}`},
		{"write_file", `{"path": "sub/../b.txt", "content": "b\n"}`},
		{"read_file", `{"path": "a.txt"}`},
	} {
		for _, tl := range Workspace() {
			if tl.Spec().Name == c.tool {
				if res := tl.Call(ctx, env, json.RawMessage(c.args)); res.IsError {
					t.Fatalf("%s: %s", c.tool, res.Output)
				}
			}
		}
	}
	want := []Action{
		{Act: policy.Write, Target: "a.txt", Content: "hello there\n"},
		{Act: policy.Write, Target: "b.txt", Content: "b\n"},
		{Act: policy.Read, Target: "a.txt"},
	}
	if diff := cmp.Diff(want, g.asked); diff != "" {
		t.Errorf("actions asked (-want +got):\n%s", diff)
	}
	got, _ := os.ReadFile(filepath.Join(dir, "moved.txt"))
	if string(got) != "b\n(approved)\n" {
		t.Errorf("moved.txt = %q: the rewrite was not performed as rewritten", got)
	}
	if a, _ := os.ReadFile(filepath.Join(dir, "a.txt")); string(a) != "hello world\n" {
		t.Errorf("a.txt = %q: the original target was written although the write was moved", a)
	}
}

// Walks hide what the read policy denies, and grep reads only what it
// allows.
func TestWalksFollowPeek(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{"a.txt": "needle", ".env": "needle", "ask.txt": "needle", "sub/key.pem": "needle"} {
		os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755)
		os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644)
	}
	root, _ := os.OpenRoot(dir)
	defer root.Close()
	p := policy.Policy{Version: 1, Defaults: policy.Defaults{Read: policy.Allow},
		Layers: []policy.Layer{{Name: "t", Rules: []policy.Rule{
			{Act: policy.Read, Effect: policy.Deny, Pattern: ".env"},
			{Act: policy.Read, Effect: policy.Deny, Pattern: "*.pem"},
			{Act: policy.Read, Effect: policy.Ask, Pattern: "ask.txt"}}}}}
	g := &recordingGate{verdict: func(a Action) Verdict { return Verdict{Action: a} },
		peek: func(act policy.Act, target string) policy.Effect { return p.Explain(act, target).Effect }}
	env := &Env{Root: root, Gate: g}
	out := map[string]string{}
	for _, tl := range Workspace() {
		if args, ok := map[string]string{"grep": `{"pattern":"needle"}`, "find": `{"pattern":"**"}`, "list_dir": `{}`}[tl.Spec().Name]; ok {
			out[tl.Spec().Name] = tl.Call(context.Background(), env, json.RawMessage(args)).Output
		}
	}
	for tool, o := range out {
		if strings.Contains(o, ".env") || strings.Contains(o, "key.pem") {
			t.Errorf("%s shows a denied file:\n%s", tool, o)
		}
	}
	if !strings.Contains(out["find"], "ask.txt") || !strings.Contains(out["list_dir"], "ask.txt") {
		t.Errorf("an ask-tier file is not listed:\n%s\n%s", out["find"], out["list_dir"])
	}
	if strings.Contains(out["grep"], "ask.txt:") || !strings.Contains(out["grep"], "a.txt:1:needle") || !strings.Contains(out["grep"], "not searched: the read policy") {
		t.Errorf("grep searched an ask-tier file or did not say it skipped it:\n%s", out["grep"])
	}
}

func TestCanonical(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "secrets", "deep"), 0o755)
	os.WriteFile(filepath.Join(dir, "secrets", "deep", "k"), nil, 0o644)
	os.Symlink("secrets", filepath.Join(dir, "s"))
	os.Symlink("s/deep/k", filepath.Join(dir, "k"))
	os.Symlink("../..", filepath.Join(dir, "secrets", "up"))
	os.Symlink(filepath.Join(dir, "secrets"), filepath.Join(dir, "abs"))
	root, _ := os.OpenRoot(dir)
	defer root.Close()
	for in, want := range map[string]string{
		"s/deep/k": "secrets/deep/k", "k": "secrets/deep/k", "s/new.txt": "secrets/new.txt",
		"plain/x": "plain/x", "./s": "secrets", "s/..": ".",
	} {
		if got, err := Canonical(root, in); err != nil || got != want {
			t.Errorf("Canonical(%s) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"secrets/up/x", "abs/deep/k"} {
		if _, err := Canonical(root, in); !IsEscape(err) {
			t.Errorf("Canonical(%s) = %v, want an escape", in, err)
		}
	}
}
