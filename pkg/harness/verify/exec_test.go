package verify

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/initorigin/io-harness-go/pkg/harness/snapshot"
	"github.com/initorigin/io-harness-go/pkg/sandbox"
)

// testSandbox is the strongest sandbox this host has, made once.
var testSandbox = sync.OnceValues(func() (sandbox.Sandbox, error) {
	return sandbox.New(context.Background(), nil)
})

func execEnv(t *testing.T, files map[string]string, cache string) *Env {
	t.Helper()
	sb, err := testSandbox()
	if err != nil {
		t.Skipf("no sandbox backend works here: %v", err)
	}
	r := root(t, files)
	return &Env{Root: r, Sandbox: sb, CacheDir: cache, Getenv: os.Getenv}
}

// warmCache is where the gate tests keep their Go build cache: the
// harness's own gate cache under the user's cache directory, so that the
// standard library is built once per machine, not once per test run (a
// cold build takes minutes on a loaded machine). A temporary directory
// when there is no user cache directory.
func warmCache(t testing.TB) string {
	t.Helper()
	if dir, err := os.UserCacheDir(); err == nil {
		dir = filepath.Join(dir, "io-harness", "gates")
		if os.MkdirAll(dir, 0o755) == nil {
			return dir
		}
	}
	return t.TempDir()
}

// gateLimits are the limits of the gate tests: generous, because a
// loaded two-core machine is slow; the tests judge outcomes, never
// durations. A case about a cap sets the cap it is about.
var gateLimits = sandbox.Limits{Wall: sandbox.Duration(10 * time.Minute), CPU: sandbox.Duration(5 * time.Minute)}

// bindsPaths reports whether a backend binds paths into its own mount
// namespace, and so can keep a file of the workdir read-only.
func bindsPaths(backend string) bool {
	return backend == sandbox.BackendLinuxNS || backend == sandbox.BackendBwrap
}

func need(t *testing.T, program string) {
	t.Helper()
	if _, err := exec.LookPath(program); err != nil {
		t.Skipf("%s is not installed: the %s gates cannot be tested here", program, program)
	}
}

func TestRustCompileGates(t *testing.T) {
	need(t, "rustc")
	for _, way := range []string{"overlay", "copy"} {
		t.Run(way, func(t *testing.T) { testRustCompileGates(t, way == "copy") })
	}
}

func testRustCompileGates(t *testing.T, copied bool) {
	env := execEnv(t, map[string]string{
		"a.rs": "pub fn a() -> u8 { 1 }\n", "b.rs": "pub fn b() -> u8 { 2 }\n", "bad.rs": "pub fn c() -> u8 { \"no\" }\n",
		"m.rs": "pub fn m() -> u8 { 3 }\n", "t.rs": "pub fn t() -> u8 { super::m0_m::m() }\n",
		"away.rs": "#![cfg(any())]\npub fn c() -> u8 { \"no\" }\n",
		// A wrong b that prints what the old gate looked for, and exits 0.
		"lying.rs": "pub fn b() -> u8 {\n    std::io::Write::write_all(&mut std::io::stdout(), b\"\\ntest result: ok. 1 passed\\n\").unwrap();\n    std::process::exit(0)\n}\n",
	}, "")
	if copied {
		env.Sandbox = noOverlay{env.Sandbox}
	}
	for _, tc := range []struct {
		check Check
		pass  bool
	}{
		{Check{Kind: CompilesRust, File: "a.rs"}, true},
		{Check{Kind: CompilesRust, File: "bad.rs"}, false},
		{Check{Kind: EachCompilesRust, Files: []string{"a.rs", "b.rs"}}, true},
		{Check{Kind: EachCompilesRust, Files: []string{"a.rs", "bad.rs"}}, false},
		{Check{Kind: WorkspaceTestPasses, Files: []string{"a.rs", "b.rs"}, Test: "#[test]\nfn both() { assert_eq!(a() + b(), 3); }"}, true},
		{Check{Kind: WorkspaceTestPasses, Files: []string{"a.rs", "b.rs"}, Test: "#[test]\nfn both() { assert_eq!(a() + b(), 4); }"}, false},
		{Check{Kind: EachCompilesRust, Files: []string{"a.rs", "away.rs"}}, false},
		{Check{Kind: WorkspaceTestPasses, Files: []string{"a.rs", "lying.rs"}, Test: "#[test]\nfn both() { assert_eq!(a() + b(), 3); }"}, false},
	} {
		c := tc.check
		c.Limits = gateLimits
		if err := c.Validate(""); err != nil {
			t.Fatal(err)
		}
		r, err := Run(context.Background(), env, &c)
		if err != nil {
			t.Fatal(err)
		}
		if r.Passed != tc.pass {
			t.Errorf("%s %v%v: passed %v, want %v: %s\n%s", c.Kind, c.File, c.Files, r.Passed, tc.pass, r.Detail, r.Output)
		}
	}
}

// A gate whose command's changes do not fit the filesystem of the gate's
// copy still gives its verdict (the command's), telling what was not
// applied; it is no failure of the sandbox.
func TestCommandGateApplyFails(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting the small filesystem the changes must not fit needs root")
	}
	tmp := t.TempDir()
	if err := syscall.Mount("tmpfs", tmp, "tmpfs", 0, "size=1m,mode=0777"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Unmount(tmp, syscall.MNT_DETACH) })
	t.Setenv("TMPDIR", tmp) // where the gate copies the workspace
	env := execEnv(t, map[string]string{"a.txt": "a\n"}, "")
	env.Sandbox = noOverlay{env.Sandbox} // on the workspace itself, a gate's changes are dropped, never applied
	if !bindsPaths(env.Sandbox.Name()) {
		t.Skipf("%s applies no changes: it writes the copy in place", env.Sandbox.Name())
	}
	for _, tc := range []struct {
		script string
		pass   bool
	}{
		{"head -c 2000000 /dev/zero > big; exit 0", true},
		{"head -c 2000000 /dev/zero > big; exit 4", false},
	} {
		c := Check{Kind: CommandSucceeds, Argv: []string{"sh", "-c", tc.script}, Limits: gateLimits}
		if err := c.Validate(""); err != nil {
			t.Fatal(err)
		}
		r, err := Run(context.Background(), env, &c)
		if err != nil {
			t.Fatalf("%s: %v", tc.script, err)
		}
		if r.Passed != tc.pass || !strings.Contains(r.Output, "not applied") {
			t.Errorf("%s: passed %v (%s), output %q; want %v and what was not applied", tc.script, r.Passed, r.Detail, r.Output, tc.pass)
		}
	}
}

func TestCommandGate(t *testing.T) {
	for _, way := range []string{"overlay", "copy"} {
		t.Run(way, func(t *testing.T) { testCommandGate(t, way == "copy") })
	}
}

func testCommandGate(t *testing.T, copied bool) {
	env := execEnv(t, map[string]string{"ok.sh": "exit 0\n", "bad.sh": "echo broken >&2; exit 3\n"}, "")
	if copied {
		env.Sandbox = noOverlay{env.Sandbox}
	}
	for _, tc := range []struct {
		argv   []string
		pass   bool
		detail string
	}{
		{[]string{"sh", "ok.sh"}, true, "succeeded"},
		{[]string{"sh", "bad.sh"}, false, "exit code 3"},
		{[]string{"no-such-program-here"}, false, "not installed"},
	} {
		c := Check{Kind: CommandSucceeds, Argv: tc.argv, Limits: gateLimits}
		if err := c.Validate(""); err != nil {
			t.Fatal(err)
		}
		r, err := Run(context.Background(), env, &c)
		if err != nil {
			t.Fatal(err)
		}
		if r.Passed != tc.pass || !strings.Contains(r.Detail, tc.detail) {
			t.Errorf("%v: passed %v (%s)", tc.argv, r.Passed, r.Detail)
		}
	}
	// The exec policy is asked, and only an allow passes.
	env.Allow = func(p string) error { return os.ErrPermission }
	c := Check{Kind: CommandSucceeds, Argv: []string{"sh", "ok.sh"}}
	c.Validate("")
	if r, _ := Run(context.Background(), env, &c); r.Passed || !strings.Contains(r.Detail, "permission") {
		t.Errorf("a refused program: %+v", r)
	}
	// Without a sandbox nothing runs, on the host or anywhere.
	env.Sandbox, env.Allow = nil, nil
	if r, _ := Run(context.Background(), env, &c); r.Passed || !strings.Contains(r.Detail, "no sandbox") {
		t.Errorf("without a sandbox: %+v", r)
	}
}

// A command gate's pinned files stay as they were while the command runs:
// the command's script (the agent's) cannot rewrite the file the command
// compares with, nor swap its directory for another. The negative
// control runs the same command in the same copy without the binds.
func TestCommandGatePinnedFiles(t *testing.T) {
	for _, way := range []string{"overlay", "copy", "shadow"} {
		t.Run(way, func(t *testing.T) { testCommandGatePinnedFiles(t, way) })
	}
}

func testCommandGatePinnedFiles(t *testing.T, way string) {
	for _, tc := range []struct {
		name, script, want string
	}{
		{"rewrites the file", "echo 0 > data/want.txt\necho 0\n", "data/want.txt"},
		{"swaps the directory", "mv data d2\nmkdir data\necho 0 > data/want.txt\necho 0\n", "data/want.txt"},
		{"swaps a directory above it", "mv data d2\nmkdir -p data/deep\necho 0 > data/deep/want.txt\necho 0\n", "data/deep/want.txt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := execEnv(t, map[string]string{"add.sh": tc.script, tc.want: "5\n"}, "")
			if way != "overlay" {
				env.Sandbox = noOverlay{env.Sandbox}
			}
			if way == "shadow" {
				// The control below runs in the run's copy the attack
				// left: the sync undoes it.
				env.Shadow = snapshot.NewShadow()
				t.Cleanup(func() { env.Shadow.Close() })
			}
			if !bindsPaths(env.Sandbox.Name()) {
				t.Skipf("the %s backend does not bind paths, so a pinned file in the workdir stays writable", env.Sandbox.Name())
			}
			c := Check{Kind: CommandSucceeds, Argv: []string{"sh", "-c", `test "$(sh add.sh 2 3)" = "$(cat ` + tc.want + `)"`},
				Pin: []string{tc.want}, Pinned: map[string]string{tc.want: "5\n"}, Limits: gateLimits}
			if err := c.Validate(""); err != nil {
				t.Fatal(err)
			}
			r, err := Run(context.Background(), env, &c)
			if err != nil {
				t.Fatal(err)
			}
			if r.Passed {
				t.Errorf("the script rewrote the pinned file: %s\n%s", r.Detail, r.Output)
			}
			w, err := newWorkdir(context.Background(), env, &c)
			if err != nil {
				t.Fatal(err)
			}
			defer w.remove()
			if w.overlay != nil {
				w.overlay.binds = nil // the control: the pinned files not bound
			}
			sh, _ := w.program("sh")
			res, err := w.run(context.Background(), append([]string{sh}, c.Argv[1:]...), []string{"PATH=/usr/bin:/bin"})
			if err != nil {
				t.Fatal(err)
			}
			if r := outcome(res, "sh"); !r.Passed {
				t.Errorf("negative control: without the binds the attack failed: %s\n%s", r.Detail, r.Output)
			}
		})
	}
}

// More pinned files than a gate can bind fail the gate with the reason;
// they are not a failure of the sandbox.
func TestTooManyPins(t *testing.T) {
	files := map[string]string{}
	c := Check{Kind: CommandSucceeds, Argv: []string{"true"}, Pinned: map[string]string{}}
	for i := range maxPinBinds + 1 {
		name := fmt.Sprintf("d%d/f.txt", i)
		files[name], c.Pinned[name] = "x", "x"
		c.Pin = append(c.Pin, name)
	}
	env := execEnv(t, files, "")
	if err := c.Validate(""); err != nil {
		t.Fatal(err)
	}
	r, err := Run(context.Background(), env, &c)
	if err != nil || r.Passed || !strings.Contains(r.Detail, "pin fewer files") {
		t.Errorf("%v %+v", err, r)
	}
}

// noOverlay is a sandbox that claims no overlay, so that a gate takes the
// copy of the workspace, as on a backend without one.
type noOverlay struct{ sandbox.Sandbox }

func (n noOverlay) Enforcement() sandbox.Enforcement {
	e := n.Sandbox.Enforcement()
	e.Overlay = false
	return e
}

// Gates on the run's copy: a gate's pinned files and what its command
// left are undone before the next gate, which sees the agent's files;
// the Backend says which way the gate saw the workspace. The negative
// control of the header is a gate with no shadow, on a copy made anew.
func TestGateOnTheRunsCopy(t *testing.T) {
	env := execEnv(t, map[string]string{"want.txt": "7\n"}, "")
	env.Sandbox = noOverlay{env.Sandbox}
	env.Shadow = snapshot.NewShadow()
	defer env.Shadow.Close()
	gate := func(script string, pinned map[string]string) Result {
		t.Helper()
		c := Check{Kind: CommandSucceeds, Argv: []string{"sh", "-c", script}, Pinned: pinned, Limits: gateLimits}
		if err := c.Validate(""); err != nil {
			t.Fatal(err)
		}
		r, err := Run(context.Background(), env, &c)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := gate("test \"$(cat want.txt)\" = 5 && echo left > left.txt", map[string]string{"want.txt": "5\n"}); !r.Passed || !strings.HasPrefix(r.Workspace, "on the run's copy (") {
		t.Fatalf("the pinned gate: %+v", r)
	}
	if r := gate("test \"$(cat want.txt)\" = 7 && ! test -e left.txt", nil); !r.Passed {
		t.Errorf("the next gate saw the pinned file or the last gate's leftovers: %+v", r)
	}
	env.Shadow.Close()
	env.Shadow = nil
	if r := gate("true", nil); r.Workspace != "on a copy: no overlay" {
		t.Errorf("with no shadow: %+v", r)
	}
}
