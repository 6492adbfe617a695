package verify

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/initorigin/io-harness-go/pkg/sandbox"
)

// A command gate on the workspace itself sees it as the user has it
// (node_modules and .git included, which a copy leaves out), cannot read
// what the read policy refuses, and changes nothing in it. The controls:
// the same gate with no read policy reads the secret, and the same gate
// on a copy does not see node_modules.
func TestCommandGateOnTheWorkspace(t *testing.T) {
	files := map[string]string{
		"node_modules/dep/index.js": "module.exports = 1\n",
		".git/HEAD":                 "ref: refs/heads/main\n",
		"secret.env":                "TOKEN=hunter2\n",
		"a.txt":                     "a\n",
	}
	gate := func(env *Env, script string) Result {
		t.Helper()
		c := Check{Kind: CommandSucceeds, Argv: []string{"sh", "-c", script}, Limits: gateLimits}
		if err := c.Validate(""); err != nil {
			t.Fatal(err)
		}
		r, err := Run(context.Background(), env, &c)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	env := execEnv(t, files, "")
	if !env.Sandbox.Enforcement().Overlay {
		t.Fatalf("%s holds no changes apart here; linux-ns does on this kernel", env.Sandbox.Name())
	}
	dir := env.Root.Name()

	if r := gate(env, "test -f node_modules/dep/index.js && grep -q main .git/HEAD"); !r.Passed {
		t.Errorf("the gate did not see node_modules and .git: %s\n%s", r.Detail, r.Output)
	}
	if r := gate(&Env{Root: env.Root, Sandbox: noOverlay{env.Sandbox}, Getenv: os.Getenv}, "test -f node_modules/dep/index.js"); r.Passed {
		t.Error("control: a copy of the workspace should leave node_modules out")
	}

	if r := gate(env, "grep -q hunter2 secret.env"); !r.Passed {
		t.Fatalf("control: with no read policy the gate should read secret.env: %s\n%s", r.Detail, r.Output)
	}
	env.Visible = func(rel string) bool { return rel != "secret.env" }
	if r := gate(env, "cat secret.env; ls -a; grep -q hunter2 secret.env"); r.Passed || strings.Contains(r.Output, "hunter2") {
		t.Errorf("the gate read a file the read policy refuses: %s\n%s", r.Detail, r.Output)
	}

	if r := gate(env, "echo changed > a.txt; rm -f node_modules/dep/index.js; echo new > new.txt; echo x > .git/HEAD; true"); !r.Passed {
		t.Fatalf("%s\n%s", r.Detail, r.Output)
	}
	for name, want := range files {
		if data, err := os.ReadFile(filepath.Join(dir, name)); err != nil || string(data) != want {
			t.Errorf("%s = %q, %v after the gate; want it unchanged", name, data, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "new.txt")); err == nil {
		t.Error("a file the gate's command made reached the workspace")
	}
}

// sleepingGates are the gates TestHelperSleepingGate runs, by kind: each
// with a pinned file, and a command or test that runs "sleep 613".
var sleepingGates = map[string]Check{
	"command": {Kind: CommandSucceeds, Argv: []string{"sleep", "613"}, Pin: []string{"p.txt"}, Pinned: map[string]string{"p.txt": "x\n"}},
	"go":      {Kind: GoTestPasses, Pin: []string{"calc_test.go"}, Pinned: map[string]string{"calc_test.go": "package calc\n\nimport (\n\t\"os/exec\"\n\t\"testing\"\n)\n\nfunc TestSleep(t *testing.T) { exec.Command(\"sleep\", \"613\").Run() }\n"}},
	"rust":    {Kind: RustTestPasses, File: "lib.rs", Test: "#[test]\nfn sleeps() {\n    let _ = std::process::Command::new(\"sleep\").arg(\"613\").status();\n}\n"},
}

// TestHelperSleepingGate is not a test: TestPinsAfterKill runs the test
// binary as a process that runs a gate (IOH_SLEEPING_GATE_KIND) whose
// command sleeps, to kill it with SIGKILL mid-gate.
func TestHelperSleepingGate(t *testing.T) {
	dir := os.Getenv("IOH_SLEEPING_GATE")
	if dir == "" {
		return
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := testSandbox()
	if err != nil {
		t.Fatal(err)
	}
	c := sleepingGates[os.Getenv("IOH_SLEEPING_GATE_KIND")]
	if err := c.Validate(""); err != nil {
		t.Fatal(err)
	}
	Run(context.Background(), &Env{Root: root, Sandbox: sb, CacheDir: os.Getenv("IOH_SLEEPING_GATE_CACHE"), Getenv: os.Getenv}, &c)
}

// A harness killed with SIGKILL mid-gate leaves its gate's private layer
// (pinned files, generated sources, build outputs) behind (the control:
// it is there after the kill), the workspace as it was, and the next gate
// on the machine removes the layer; the gate's command died with the
// harness.
func TestPinsAfterKill(t *testing.T) {
	for _, kind := range []string{"command", "go", "rust"} {
		t.Run(kind, func(t *testing.T) {
			switch kind {
			case "go", "rust":
				need(t, map[string]string{"go": "go", "rust": "rustc"}[kind])
			}
			env := execEnv(t, map[string]string{"p.txt": "x\n", "go.mod": goMod, "calc.go": rightCalc, "lib.rs": "pub fn one() -> u8 { 1 }\n"}, warmCache(t))
			if !env.Sandbox.Enforcement().Overlay {
				t.Fatalf("%s holds no changes apart here", env.Sandbox.Name())
			}
			before := tree(t, env.Root.Name())
			tmp := t.TempDir()
			t.Setenv("TMPDIR", tmp)
			if os.Geteuid() == 0 {
				os.Chmod(tmp, 0o755)
			}
			cmd := exec.Command(os.Args[0], "-test.run", "^TestHelperSleepingGate$")
			cmd.Env = append(os.Environ(), "IOH_SLEEPING_GATE="+env.Root.Name(), "IOH_SLEEPING_GATE_KIND="+kind, "IOH_SLEEPING_GATE_CACHE="+env.CacheDir, "TMPDIR="+tmp)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			// Wait for the gate's command: the helper's sandboxed sleep 613.
			var pins []string
			for pins == nil || !sleeping() {
				select {
				case err := <-exited:
					t.Fatalf("the helper ended before its gate ran: %v", err)
				default:
				}
				pins, _ = filepath.Glob(filepath.Join(tmp, layerPrefix+"*"))
				runtime.Gosched()
			}
			cmd.Process.Kill()
			<-exited
			if _, err := os.Stat(pins[0]); err != nil {
				t.Fatalf("control: the killed gate's layer should still be there: %v", err)
			}
			if diff := cmp.Diff(before, tree(t, env.Root.Name())); diff != "" {
				t.Errorf("the killed gate changed the workspace (-before +after):\n%s", diff)
			}
			c := Check{Kind: CommandSucceeds, Argv: []string{"true"}, Pin: []string{"p.txt"}, Pinned: map[string]string{"p.txt": "x\n"}}
			if err := c.Validate(""); err != nil {
				t.Fatal(err)
			}
			if r, err := Run(context.Background(), env, &c); err != nil || !r.Passed {
				t.Fatalf("%v %+v", err, r)
			}
			if left, _ := os.ReadDir(tmp); len(left) != 0 {
				t.Errorf("left behind: %v", left)
			}
			// The sandbox dies with its host process.
			for sleeping() {
				runtime.Gosched()
			}
		})
	}
}

// sleeping reports whether a process runs "sleep 613" (a length no other test uses).
func sleeping() bool {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		if b, _ := os.ReadFile(p); strings.HasSuffix(string(b), "sleep\x00613\x00") {
			return true
		}
	}
	return false
}

// lateWriter is a sandbox that writes a file into the workspace as each
// command starts: another process's write, after what the gate's
// command is shown concealed was fixed.
type lateWriter struct {
	sandbox.Sandbox
	path, content string
}

func (l lateWriter) Run(ctx context.Context, s *sandbox.Spec) (*sandbox.Result, error) {
	if err := os.WriteFile(l.path, []byte(l.content), 0o644); err != nil {
		return nil, err
	}
	return l.Sandbox.Run(ctx, s)
}

// A file the read policy refuses that appears in the workspace while a
// gate's command runs does not pass the gate or show in its output: the
// command may have read it. The control is the same gate with no read
// policy, which reads the late file and passes.
func TestGateRefusedFileAppearingMidCommand(t *testing.T) {
	env := execEnv(t, map[string]string{"a.txt": "a\n"}, "")
	if !env.Sandbox.Enforcement().Overlay {
		t.Fatalf("%s holds no changes apart here; linux-ns does on this kernel", env.Sandbox.Name())
	}
	secret := filepath.Join(env.Root.Name(), "secret.txt")
	env.Sandbox = lateWriter{env.Sandbox, secret, "LATE-SECRET\n"}
	c := Check{Kind: CommandSucceeds, Argv: []string{"sh", "-c", "cat secret.txt; grep -q LATE secret.txt"}, Limits: gateLimits}
	if err := c.Validate(""); err != nil {
		t.Fatal(err)
	}
	for _, deny := range []bool{false, true} {
		os.Remove(secret)
		env.Visible = nil
		if deny {
			env.Visible = func(rel string) bool { return rel != "secret.txt" }
		}
		r, err := Run(context.Background(), env, &c)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case !deny && !r.Passed:
			t.Fatalf("control: with no read policy the gate should read the late file: %s\n%s", r.Detail, r.Output)
		case deny && (r.Passed || strings.Contains(r.Output, "LATE-SECRET")):
			t.Errorf("a refused file that appeared mid-gate passed it or showed: %+v", r)
		case deny && !strings.Contains(r.Output, "appeared in the workspace"):
			t.Errorf("the failure is not explained: %+v", r)
		}
	}
}
