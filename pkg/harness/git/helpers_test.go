package git

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/initorigin/io-harness-go/pkg/harness/policy"
	"github.com/initorigin/io-harness-go/pkg/harness/tool"
	"github.com/initorigin/io-harness-go/pkg/sandbox"
)

var testIdentity = Config{Name: "Test Agent", Email: "agent@example.invalid"}

// realSandbox returns the strongest sandbox that works here, running as
// the caller as the harness's trusted sandbox does (env.Trusted), or
// skips.
func realSandbox(t testing.TB) sandbox.Sandbox {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skipf("git is not installed: %v", err)
	}
	sb, err := sandbox.New(context.Background(), &sandbox.Options{Caller: true})
	if err != nil {
		t.Skipf("no sandbox backend works here: %v", err)
	}
	return sb
}

// hostGit runs plain git on the host, for setting a repository up and
// for the negative controls. It fails the test on an error unless
// allowFail.
func hostGit(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	// No automatic gc or maintenance: after a commit of many loose objects
	// git starts one detached, which goes on writing into the repository
	// while the test's temporary directory is being removed.
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "HOME="+dir,
		"GIT_CONFIG_COUNT=2", "GIT_CONFIG_KEY_0=gc.auto", "GIT_CONFIG_VALUE_0=0",
		"GIT_CONFIG_KEY_1=maintenance.auto", "GIT_CONFIG_VALUE_1=false",
		"GIT_AUTHOR_NAME=Setup", "GIT_AUTHOR_EMAIL=setup@example.invalid", "GIT_COMMITTER_NAME=Setup", "GIT_COMMITTER_EMAIL=setup@example.invalid")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// newRepo makes a repository with files committed on main, and returns
// its directory.
func newRepo(t testing.TB, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	hostGit(t, dir, "init", "-q", "-b", "main")
	writeFiles(t, dir, files)
	hostGit(t, dir, "add", "-A")
	hostGit(t, dir, "commit", "-q", "-m", "initial")
	return dir
}

func writeFiles(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// envOn opens dir as a workspace with sb and gate.
func envOn(t testing.TB, dir string, sb sandbox.Sandbox, gate tool.Gate) *tool.Env {
	t.Helper()
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	return &tool.Env{Root: root, Sandbox: sb, Gate: gate}
}

// call calls the git tool name with args marshalled.
func call(t testing.TB, env *tool.Env, name string, args any) tool.Result {
	t.Helper()
	raw, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range Tools(testIdentity) {
		if tl.Spec().Name == name {
			r := tl.Call(context.Background(), env, raw)
			if len(r.Output) > tool.MaxOutput {
				t.Errorf("%s: output of %d bytes is over the bound", name, len(r.Output))
			}
			return r
		}
	}
	t.Fatalf("no tool %q", name)
	return tool.Result{}
}

// mustOK calls a tool and fails the test when the call failed.
func mustOK(t testing.TB, env *tool.Env, name string, args any) string {
	t.Helper()
	r := call(t, env, name, args)
	if r.IsError {
		t.Fatalf("%s %v failed: %s", name, args, r.Output)
	}
	return r.Output
}

// policyGate is a gate over a policy: asks are denied, every action is
// recorded.
type policyGate struct {
	p       policy.Policy
	actions []tool.Action
}

func (g *policyGate) Authorize(_ context.Context, a tool.Action) tool.Verdict {
	g.actions = append(g.actions, a)
	var v policy.Verdict
	if a.Argv != nil {
		v = g.p.ExplainArgv(a.Argv, nil)
	} else {
		v = g.p.Explain(a.Act, a.Target)
	}
	if v.Effect != policy.Allow {
		return tool.Verdict{Refused: v.String()}
	}
	return tool.Verdict{Action: a}
}

func (g *policyGate) Peek(act policy.Act, target string) policy.Verdict {
	return g.p.Explain(act, target)
}

// withWritable is a sandbox that also binds dir writable in every run:
// the marker directory of the escape tests, so that a program git ran
// could write its marker, and only git's not running it keeps the marker
// away.
type withWritable struct {
	sandbox.Sandbox
	dir string
}

func (w withWritable) Run(ctx context.Context, s *sandbox.Spec) (*sandbox.Result, error) {
	c := *s
	c.Writable = append(slices.Clone(s.Writable), w.dir)
	return w.Sandbox.Run(ctx, &c)
}

// plainSpec is a run of plain git (or any argv) on the repository dir,
// with the host's usual setup: the repository's own config, hooks and
// attributes apply. The negative controls run it.
func plainSpec(dir string, argv ...string) *sandbox.Spec {
	return &sandbox.Spec{Argv: argv, Workdir: dir,
		Env: []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + dir, "GIT_CONFIG_NOSYSTEM=1",
			"GIT_AUTHOR_NAME=Plain", "GIT_AUTHOR_EMAIL=plain@example.invalid", "GIT_COMMITTER_NAME=Plain",
			"GIT_COMMITTER_EMAIL=plain@example.invalid", "GIT_TERMINAL_PROMPT=0"}}
}
