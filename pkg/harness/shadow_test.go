package harness_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/initorigin/io-harness-go/pkg/harness"
	"github.com/initorigin/io-harness-go/pkg/harness/verify"
	"github.com/initorigin/io-harness-go/pkg/sandbox"
)

// On a sandbox with no overlay, a run's exec calls and gates share the
// run's copies of the workspace (the second exec call says it is on the
// run's copy), and the run removes them when it ends: no io-harness
// directory is left in the temporary directory.
func TestRunRemovesItsShadows(t *testing.T) {
	sb, err := sandbox.New(context.Background(), nil)
	if err != nil {
		t.Skipf("no sandbox backend works here: %v", err)
	}
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a.txt"), []byte("a\n"), 0o644)
	st := memStore(t)
	task := harness.TaskContract{Goal: "look", Root: dir, Budgets: harness.Budgets{MaxSteps: 2},
		Verification: []verify.Check{{Kind: verify.CommandSucceeds, Argv: []string{"cat", "a.txt"}}}}
	res, err := harness.Run(context.Background(), task, harness.Options{
		Provider: script(t,
			calls(call("exec", map[string]any{"argv": []string{"cat", "a.txt"}}), call("exec", map[string]any{"argv": []string{"cat", "a.txt"}}))),
		Store: st, Policy: execPolicy(), NativeSandbox: noOverlay{sb}})
	if err != nil {
		t.Fatal(err)
	}
	steps, err := st.Steps(context.Background(), res.RunID)
	if err != nil {
		t.Fatal(err)
	}
	var outs []string
	for _, s := range steps {
		for _, o := range s.Observations {
			outs = append(outs, o.Output)
		}
	}
	all := strings.Join(outs, "\n---\n")
	if res.Outcome.Kind != harness.Success || !strings.Contains(all, ", on the run's copy (") {
		t.Fatalf("outcome %+v; want success on the run's copy\n%s", res.Outcome, all)
	}
	left, _ := filepath.Glob(filepath.Join(tmp, "io-harness-*"))
	if len(left) > 0 {
		t.Errorf("the run left %v", left)
	}
}

// A run sweeps what a harness killed mid-gate left, gates or not: a gate
// layer nothing holds is gone once a run with no gate starts. The
// control is a directory that is not a gate layer, which stays.
func TestRunSweepsDeadGateLayers(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	dead := filepath.Join(tmp, "io-harness-gate.123456")
	other := filepath.Join(tmp, "io-harness-other.123456")
	for _, d := range []string{dead, other} {
		if err := os.MkdirAll(filepath.Join(d, "out"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	_, err := harness.Run(context.Background(), harness.TaskContract{Goal: "look", Root: dir, Budgets: harness.Budgets{MaxSteps: 1}},
		harness.Options{Provider: script(t, calls(call("list_dir", map[string]any{"path": "."}))), Store: memStore(t)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dead); err == nil {
		t.Error("a dead gate's layer survived a run's start")
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("control: a directory that is no gate layer was swept: %v", err)
	}
}
