package tool

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/initorigin/io-harness-go/pkg/harness/policy"
	"github.com/initorigin/io-harness-go/pkg/sandbox"
)

func realSandbox(t *testing.T) sandbox.Sandbox {
	t.Helper()
	sb, err := sandbox.New(context.Background(), nil)
	if err != nil {
		t.Skipf("no sandbox backend works here: %v", err)
	}
	return sb
}

// exec runs its command in the sandbox on a copy of the workspace; what
// the command writes comes back where the write policy allows, and
// nothing else changes.
func TestExec(t *testing.T) {
	sb := realSandbox(t)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "in.txt"), []byte("input\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "keep.txt"), []byte("original\n"), 0o644)
	root, _ := os.OpenRoot(dir)
	defer root.Close()
	g := &recordingGate{verdict: func(a Action) Verdict { return Verdict{Action: a} },
		peek: func(act policy.Act, target string) policy.Effect {
			if target == "keep.txt" {
				return policy.Ask
			}
			return policy.Allow
		}}
	env := &Env{Root: root, Gate: g, Sandbox: sb}
	call := func(args string) Result {
		return execTool{}.Call(context.Background(), env, json.RawMessage(args))
	}

	res := call(`{"argv": ["sh", "-c", "cat in.txt; echo made > out.txt; echo changed > keep.txt; rm in.txt; echo to-stderr >&2"]}`)
	if res.IsError {
		t.Fatalf("exec failed: %s", res.Output)
	}
	for _, want := range []string{"exited with status 0", "input", "to-stderr", "changed in the workspace: out.txt", "not copied back (the write policy does not allow it without asking): keep.txt"} {
		if !strings.Contains(res.Output, want) {
			t.Errorf("output lacks %q:\n%s", want, res.Output)
		}
	}
	if data, _ := os.ReadFile(filepath.Join(dir, "out.txt")); string(data) != "made\n" {
		t.Errorf("out.txt = %q", data)
	}
	if data, _ := os.ReadFile(filepath.Join(dir, "keep.txt")); string(data) != "original\n" {
		t.Errorf("keep.txt = %q: a write the policy does not allow came back", data)
	}
	if _, err := os.Stat(filepath.Join(dir, "in.txt")); err != nil {
		t.Error("a deletion reached the workspace")
	}
	if len(g.asked) != 1 || g.asked[0].Act != policy.Exec || g.asked[0].Target != "sh" {
		t.Errorf("gate asked %+v", g.asked)
	}

	res = call(`{"argv": ["sh", "-c", "exit 7"]}`)
	if !res.IsError || !strings.Contains(res.Output, "status 7") {
		t.Errorf("a failing command: %+v", res)
	}
	res = call(`{"argv": ["sleep", "30"], "timeout_seconds": 1}`)
	if !res.IsError || !strings.Contains(res.Output, "wall limit") {
		t.Errorf("a command past its timeout: %+v", res)
	}
	res = call(`{"argv": []}`)
	if !res.IsError || !strings.Contains(res.Output, "argv") {
		t.Errorf("no argv: %+v", res)
	}
	if res := (execTool{}).Call(context.Background(), &Env{Root: root}, json.RawMessage(`{"argv": ["true"]}`)); !res.IsError || !strings.Contains(res.Output, "no sandbox") {
		t.Errorf("without a sandbox: %+v", res)
	}
}
