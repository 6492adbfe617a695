package verify

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

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

func need(t *testing.T, program string) {
	t.Helper()
	if _, err := exec.LookPath(program); err != nil {
		t.Skipf("%s is not installed: the %s gates cannot be tested here", program, program)
	}
}

const addTest = `
#[test]
fn adds() {
    assert_eq!(add(2, 3), 5);
    assert!(add(-1, 1) == 0, "add(-1, 1) should be 0");
}
`

// The gate-defeat corpus for Rust: stubs, substring tricks, macro
// shadowing, a subject that compiles itself away, unsafe code that runs
// before main, and an infinite loop all fail; honest solutions, one with
// a private helper and inner attributes, pass.
func TestRustGateDefeats(t *testing.T) {
	need(t, "rustc")
	limits := sandbox.Limits{Wall: sandbox.Duration(20 * time.Second), CPU: sandbox.Duration(10 * time.Second)}
	tests := []struct {
		name, subject string
		pass          bool
		detail        string
	}{
		{"honest", "pub fn add(a: i32, b: i32) -> i32 { a + b }\n", true, ""},
		{"honest with a private helper", "//! Arithmetic.\n#![allow(dead_code)]\nfn helper(a: i32, b: i32) -> i32 { a + b }\n/// Adds.\npub fn add(a: i32, b: i32) -> i32 { helper(a, b) }\n", true, ""},
		{"stub", "pub fn add(a: i32, b: i32) -> i32 { todo!() }\n", false, "the tests"},
		{"wrong", "pub fn add(a: i32, b: i32) -> i32 { a - b }\n", false, "the tests"},
		{"substring only", "// pub fn add(a: i32, b: i32) -> i32 { a + b }\n", false, "compiling"},
		{"shadowed assert_eq", "macro_rules! assert_eq { ($($t:tt)*) => {} }\nmacro_rules! assert { ($($t:tt)*) => {} }\npub fn add(a: i32, b: i32) -> i32 { 0 }\n", false, "the tests"},
		{"exported shadow", "#[macro_export]\nmacro_rules! assert_eq { ($($t:tt)*) => {} }\n#[macro_export]\nmacro_rules! assert { ($($t:tt)*) => {} }\npub fn add(a: i32, b: i32) -> i32 { 0 }\n", false, "the tests"},
		{"compiles itself away", "#![cfg(any())]\npub fn add(a: i32, b: i32) -> i32 { 0 }\n", false, ""},
		// A perfect forgery of both the listing and the report, printed
		// before main: refused at compile time, because it needs
		// #[link_section], which unsafe_code forbids.
		{"runs before main", "#[used]\n#[link_section = \".init_array\"]\nstatic FAKE: extern \"C\" fn() = fake;\n" +
			"extern \"C\" fn fake() { println!(\"__io_harness_gate::adds: test\\n__io_harness_gate::__io_harness_probe: test\\ntest result: ok. 2 passed\"); std::process::exit(0) }\n" +
			"pub fn add(a: i32, b: i32) -> i32 { 0 }\n", false, "compiling"},
		{"infinite loop", "pub fn add(a: i32, b: i32) -> i32 { loop {} }\n", false, "limit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env := execEnv(t, map[string]string{"src/lib.rs": tt.subject}, "")
			c := Check{Kind: RustTestPasses, File: "src/lib.rs", Test: addTest, Limits: limits}
			if err := c.Validate(""); err != nil {
				t.Fatal(err)
			}
			r, err := Run(context.Background(), env, &c)
			if err != nil {
				t.Fatal(err)
			}
			if r.Passed != tt.pass || !strings.Contains(r.Detail, tt.detail) {
				t.Errorf("passed %v (%s), want %v with %q\n%s", r.Passed, r.Detail, tt.pass, tt.detail, r.Output)
			}
			if r.Backend == "" {
				t.Error("the result does not name the sandbox backend")
			}
		})
	}
}

func TestRustCompileGates(t *testing.T) {
	need(t, "rustc")
	env := execEnv(t, map[string]string{
		"a.rs": "pub fn a() -> u8 { 1 }\n", "b.rs": "pub fn b() -> u8 { 2 }\n", "bad.rs": "pub fn c() -> u8 { \"no\" }\n",
		"m.rs": "pub fn m() -> u8 { 3 }\n", "t.rs": "pub fn t() -> u8 { super::m0_m::m() }\n",
	}, "")
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
	} {
		c := tc.check
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

const calcTest = `package calc

import "testing"

func TestAdd(t *testing.T) {
	if got := Add(2, 3); got != 5 {
		t.Fatalf("Add(2, 3) = %d", got)
	}
}

func TestNegative(t *testing.T) {
	if got := Add(-2, 2); got != 0 {
		t.Fatalf("Add(-2, 2) = %d", got)
	}
}
`

// The gate-defeat corpus for Go: a stub, a rewritten test file, a
// TestMain that exits 0, a substring in a comment and an infinite loop
// all fail; an honest solution with a private helper passes.
func TestGoGateDefeats(t *testing.T) {
	need(t, "go")
	cache := t.TempDir()
	files := func(code string, extra map[string]string) map[string]string {
		m := map[string]string{"go.mod": "module example.com/calc\n\ngo 1.22\n", "calc.go": code, "calc_test.go": calcTest}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	tests := []struct {
		name   string
		files  map[string]string
		pass   bool
		detail string
	}{
		{"honest with a private helper", files("package calc\n\nfunc sum(a, b int) int { return a + b }\n\nfunc Add(a, b int) int { return sum(a, b) }\n", nil), true, "2 tests"},
		{"stub", files("package calc\n\nfunc Add(a, b int) int { return 0 }\n", nil), false, "TestAdd"},
		{"substring in a comment", files("package calc\n\n// return a + b\nfunc Add(a, b int) int { return a * b }\n", nil), false, "failed"},
		{"rewritten test file", files("package calc\n\nfunc Add(a, b int) int { return 0 }\n",
			map[string]string{"calc_test.go": "package calc\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {}\nfunc TestNegative(t *testing.T) {}\n"}), false, "TestAdd"},
		{"TestMain that exits 0", files("package calc\n\nfunc Add(a, b int) int { return 0 }\n",
			map[string]string{"main_test.go": "package calc\n\nimport (\n\t\"os\"\n\t\"testing\"\n)\n\nfunc TestMain(m *testing.M) { os.Exit(0) }\n"}), false, "did not run and pass"},
		{"infinite loop", files("package calc\n\nfunc Add(a, b int) int { for {} }\n", nil), false, "limit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := execEnv(t, tt.files, cache)
			c := Check{Kind: GoTestPasses, Pin: []string{"calc_test.go"}, Pinned: map[string]string{"calc_test.go": calcTest},
				Limits: sandbox.Limits{Wall: sandbox.Duration(60 * time.Second), CPU: sandbox.Duration(60 * time.Second)}}
			if tt.name == "infinite loop" {
				c.Limits.Wall = sandbox.Duration(15 * time.Second)
			}
			if err := c.Validate(""); err != nil {
				t.Fatal(err)
			}
			r, err := Run(context.Background(), env, &c)
			if err != nil {
				t.Fatal(err)
			}
			if r.Passed != tt.pass || !strings.Contains(r.Detail, tt.detail) {
				t.Errorf("passed %v (%s), want %v with %q\n%s", r.Passed, r.Detail, tt.pass, tt.detail, r.Output)
			}
			// The workspace's own test file is never changed by a gate.
			if data, _ := env.Root.ReadFile("calc_test.go"); string(data) != tt.files["calc_test.go"] {
				t.Error("the gate changed the workspace")
			}
		})
	}
}

func TestCommandGate(t *testing.T) {
	env := execEnv(t, map[string]string{"ok.sh": "exit 0\n", "bad.sh": "echo broken >&2; exit 3\n"}, "")
	for _, tc := range []struct {
		argv   []string
		pass   bool
		detail string
	}{
		{[]string{"sh", "ok.sh"}, true, "succeeded"},
		{[]string{"sh", "bad.sh"}, false, "exit code 3"},
		{[]string{"no-such-program-here"}, false, "not installed"},
	} {
		c := Check{Kind: CommandSucceeds, Argv: tc.argv}
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
	_ = filepath.Join
}
