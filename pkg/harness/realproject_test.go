package harness_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/initorigin/io-harness-go/pkg/harness"
	"github.com/initorigin/io-harness-go/pkg/harness/verify"
	"github.com/initorigin/io-harness-go/pkg/sandbox"
)

// nodeprojModules is where make deps installs testdata/nodeproj's
// dependencies (see NODEPROJ_NPM in the Makefile).
func nodeprojModules(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("IOH_NODEPROJ_NPM")
	if dir == "" {
		if os.Geteuid() == 0 {
			dir = "/var/cache/io-harness/npm/nodeproj"
		} else {
			home, _ := os.UserHomeDir()
			dir = filepath.Join(home, ".cache", "io-harness", "npm", "nodeproj")
		}
	}
	dir = filepath.Join(dir, "node_modules")
	if _, err := os.Stat(filepath.Join(dir, "uvu", "package.json")); err != nil {
		t.Skipf("testdata/nodeproj's dependencies are not installed (make deps installs them into %s): %v", dir, err)
	}
	if _, err := exec.LookPath("npm"); err != nil {
		t.Skipf("no npm: %v", err)
	}
	return dir
}

// copyTree copies src into dst with cp -a.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	if out, err := exec.Command("cp", "-a", src+"/.", dst).CombinedOutput(); err != nil {
		t.Fatalf("cp %s: %v\n%s", src, err, out)
	}
}

// nodeProject is a workspace holding testdata/nodeproj with its
// node_modules, as a user who ran npm install has it.
func nodeProject(t *testing.T) string {
	t.Helper()
	modules := nodeprojModules(t)
	dir := t.TempDir()
	copyTree(t, "testdata/nodeproj", dir)
	if err := os.Mkdir(filepath.Join(dir, "node_modules"), 0o755); err != nil {
		t.Fatal(err)
	}
	copyTree(t, modules, filepath.Join(dir, "node_modules"))
	return dir
}

const fixedSum = `// sum adds the numbers of a list.
function sum(xs) {
  let total = 0;
  for (const x of xs) {
    total += x;
  }
  return total;
}

module.exports = { sum };
`

// A real Node project, its dependencies installed from the npm registry:
// the agent runs npm test in exec (which fails: the project has a bug),
// fixes the bug, and the npm test gate passes, so the run succeeds. The
// controls: the first step's gate fails on the bug, and on a copy of the
// workspace (the fallback, which leaves node_modules out) the same npm
// test cannot find its test runner.
func TestNodeProjectEndToEnd(t *testing.T) {
	sb, err := sandbox.New(context.Background(), nil)
	if err != nil {
		t.Skipf("no sandbox backend works here: %v", err)
	}
	if !sb.Enforcement().Overlay {
		t.Fatalf("%s holds no changes apart here; linux-ns does on this kernel", sb.Name())
	}
	run := func(t *testing.T, native sandbox.Sandbox) (*harness.Result, []string) {
		dir := nodeProject(t)
		st := memStore(t)
		task := harness.TaskContract{Goal: "make npm test pass", Root: dir, Budgets: harness.Budgets{MaxSteps: 3},
			Verification: []verify.Check{{Kind: verify.CommandSucceeds, Argv: []string{"npm", "test"}}}}
		res, err := harness.Run(context.Background(), task, harness.Options{
			Provider: script(t,
				calls(call("exec", map[string]any{"argv": []string{"npm", "test"}})),
				calls(call("write_file", map[string]any{"path": "src/sum.js", "content": fixedSum}))),
			Store: st, Policy: execPolicy(), NativeSandbox: native})
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
		return res, outs
	}

	res, outs := run(t, sb)
	if res.Outcome.Kind != harness.Success {
		t.Fatalf("outcome %+v; want success\n%s", res.Outcome, strings.Join(outs, "\n---\n"))
	}
	all := strings.Join(outs, "\n---\n")
	// uvu's own report of the bug, from exec and from the first gate.
	if !strings.Contains(outs[0], "npm exited with status 1") || !strings.Contains(outs[0], "Expected") || !strings.Contains(all, "Total:") {
		t.Errorf("exec's npm test should have run uvu and failed on the bug:\n%s", all)
	}
	if !strings.Contains(all, "npm test failed") {
		t.Errorf("control: the first step's gate should have failed on the bug:\n%s", all)
	}

	// The copy fallback leaves node_modules out: uvu is not there.
	_, outs = run(t, noOverlay{sb})
	if joined := strings.Join(outs, "\n"); !strings.Contains(joined, "uvu: not found") && !strings.Contains(joined, "uvu: command not found") {
		t.Errorf("control: on a copy npm test should not find uvu:\n%s", joined)
	}
}

// A Go module whose go generate reads .git (git rev-parse): it works in
// exec, whose output file comes back, and in a gate. The control is the
// same gate on a copy, which has no .git.
func TestGoGenerateReadsGit(t *testing.T) {
	sb, err := sandbox.New(context.Background(), nil)
	if err != nil {
		t.Skipf("no sandbox backend works here: %v", err)
	}
	for _, p := range []string{"git", "go"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Skipf("no %s: %v", p, err)
		}
	}
	mk := func(t *testing.T) string {
		dir := workspace(t, map[string]string{
			"go.mod":  "module example.com/gen\n\ngo 1.21\n",
			"main.go": "package main\n\n//go:generate sh -c \"git rev-parse --short HEAD > version.txt\"\n\nfunc main() {}\n",
		})
		for _, args := range [][]string{{"init", "-q"}, {"add", "."}, {"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "first"}} {
			cmd := exec.Command("git", args...)
			cmd.Dir = dir
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("git %v: %v\n%s", args, err, out)
			}
		}
		return dir
	}
	head := func(t *testing.T, dir string) string {
		out, err := exec.Command("git", "-C", dir, "rev-parse", "--short", "HEAD").Output()
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(out))
	}
	gen := []string{"go", "generate", "./..."}

	dir := mk(t)
	out, _ := runExec(t, dir, execPolicy(), nil, gen...)
	if data, err := os.ReadFile(filepath.Join(dir, "version.txt")); err != nil || strings.TrimSpace(string(data)) != head(t, dir) {
		t.Errorf("exec go generate: version.txt = %q, %v; want %s\n%s", data, err, head(t, dir), out)
	}

	gate := func(native sandbox.Sandbox) *harness.Result {
		dir := mk(t)
		task := harness.TaskContract{Goal: "g", Root: dir, Budgets: harness.Budgets{MaxSteps: 1},
			Verification: []verify.Check{{Kind: verify.CommandSucceeds, Argv: gen}}}
		res, err := harness.Run(context.Background(), task, harness.Options{Provider: script(t, calls(call("list_dir", map[string]any{}))),
			Store: memStore(t), Policy: execPolicy(), NativeSandbox: native})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(dir, "version.txt")); err == nil {
			t.Error("a gate's output reached the workspace")
		}
		return res
	}
	if res := gate(sb); res.Outcome.Kind != harness.Success {
		t.Errorf("the go generate gate: %+v", res.Outcome)
	}
	if res := gate(noOverlay{sb}); res.Outcome.Kind == harness.Success {
		t.Error("control: on a copy with no .git the go generate gate should fail")
	}
}

// noOverlay is a sandbox that claims no overlay, so that exec and the
// gates take a copy of the workspace, as on a backend without one.
type noOverlay struct{ sandbox.Sandbox }

func (n noOverlay) Enforcement() sandbox.Enforcement {
	e := n.Sandbox.Enforcement()
	e.Overlay = false
	return e
}
