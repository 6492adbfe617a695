package verify

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/initorigin/io-harness-go/pkg/sandbox"
)

const addTest = `
#[test]
fn adds() {
    assert_eq!(add(2, 3), 5);
    assert!(add(-1, 1) == 0, "add(-1, 1) should be 0");
}
`

// rustOK is what the old gate looked for in the output of the tests.
const rustOK = "test result: ok. 2 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s"

// A rustCase is one subject judged by rust_test_passes.
type rustCase struct {
	name    string
	subject string
	extra   map[string]string // more workspace files
	test    string            // the test module; addTest when empty
	pass    bool
	detail  string
	fooled  bool       // the old gate passes the same subject: the attack is real
	control *weakening // the new gate with this protection off passes it
	limits  *sandbox.Limits
	pinned  map[string]string // pinned workspace files
}

// The forgery corpus of the Rust test gates: every subject but the honest
// ones is wrong, with an attack that tries to pass anyway. Where the
// attack beat the old gate (exit 0 and "test result: ok." on stdout), the
// old gate must pass the same subject; where the defence is a secret, the
// new gate with the secret given away must pass it.
func TestRustGateDefeats(t *testing.T) {
	need(t, "rustc")
	wrong := "pub fn add(a: i32, b: i32) -> i32 { a - b }\n"
	// Output written to stdout itself: libtest captures a test's print!.
	exitsOK := fmt.Sprintf("std::io::Write::write_all(&mut std::io::stdout(), %q.as_bytes()).unwrap(); std::process::exit(0)", "\n"+rustOK+"\n")
	findTest := "\n#[test]\nfn finds() {\n    assert_eq!(find(&[1, 2, 3], 2), Some(1));\n}\n"
	typedTest := "\n#[test]\nfn adds() {\n    let got: i32 = add(2, 3);\n    assert_eq!(got, 5);\n}\n"
	panicTest := "\n#[test]\n#[should_panic(expected = \"overflow\")]\nfn overflows() {\n    add(i32::MAX, 1);\n}\n\n#[test]\nfn adds() {\n    assert_eq!(add(2, 3), 5);\n}\n"
	resultTest := "\n#[test]\nfn adds() -> Result<(), String> {\n    if add(2, 3) == 5 { Ok(()) } else { Err(format!(\"add(2, 3) = {}\", add(2, 3))) }\n}\n"
	ignoredTest := addTest + "\n#[test]\n#[ignore]\nfn slow() {\n    assert_eq!(add(1, 1), 3);\n}\n"
	stealer := `
pub fn add(a: i32, b: i32) -> i32 {
    const SRC: &str = include_str!(concat!("/proc/self/cwd/", file!()));
    const ENVIRON: &[u8] = include_bytes!("/proc/self/environ");
    const CMDLINE: &[u8] = include_bytes!("/proc/self/cmdline");
    let _ = (ENVIRON, CMDLINE);
    if let Some(i) = SRC.rfind("__IO_HARNESS_SLOT: [::std::primitive::u8; 32] = [") {
        let rest = &SRC[i..];
        let list = &rest[rest.find("= [").unwrap() + 3..rest.find("];").unwrap()];
        let mut hex = String::new();
        for b in list.split(", ") {
            hex.push_str(&format!("{:02x}", b.trim().parse::<u8>().unwrap()));
        }
        std::io::Write::write_all(&mut std::io::stdout(), format!("\n` + reportMarker + ` {}\n", hex).as_bytes()).unwrap();
        std::process::exit(0);
    }
    a - b
}
`
	tests := []rustCase{
		{name: "honest", subject: "pub fn add(a: i32, b: i32) -> i32 { a + b }\n", pass: true},
		{name: "honest with a private helper", subject: "//! Arithmetic.\n#![allow(dead_code)]\nfn helper(a: i32, b: i32) -> i32 { a + b }\n/// Adds.\npub fn add(a: i32, b: i32) -> i32 { helper(a, b) }\n", pass: true},
		{name: "honest with a module file beside it", subject: "mod inner;\npub fn add(a: i32, b: i32) -> i32 { inner::plus(a, b) }\n",
			extra: map[string]string{"src/inner.rs": "pub fn plus(a: i32, b: i32) -> i32 { a + b }\n"}, pass: true},
		{name: "honest should_panic, Result and ignored tests", pass: true, detail: "(3)",
			test:    panicTest + strings.Replace(resultTest, "fn adds", "fn adds_result", 1) + "\n#[test]\n#[ignore]\nfn never() { panic!() }\n",
			subject: "pub fn add(a: i32, b: i32) -> i32 { a.checked_add(b).expect(\"overflow\") }\n"},

		{name: "stub", subject: "pub fn add(a: i32, b: i32) -> i32 { todo!() }\n", detail: "the tests"},
		{name: "wrong", subject: wrong, detail: "the tests"},
		{name: "wrong, a test returning Err", subject: wrong, test: resultTest, detail: "the tests"},
		{name: "wrong, with an ignored test that would fail", subject: wrong, test: ignoredTest, detail: "the tests"},
		{name: "substring only", subject: "// pub fn add(a: i32, b: i32) -> i32 { a + b }\n", detail: "compiling"},
		{name: "infinite loop", subject: "pub fn add(a: i32, b: i32) -> i32 { loop {} }\n", detail: "killed",
			limits: &sandbox.Limits{Wall: gateLimits.Wall, CPU: sandbox.Duration(5 * time.Second)}},

		// Macros and names.
		{name: "shadowed assert_eq", subject: "macro_rules! assert_eq { ($($t:tt)*) => {} }\nmacro_rules! assert { ($($t:tt)*) => {} }\npub fn add(a: i32, b: i32) -> i32 { 0 }\n", detail: "the tests"},
		{name: "exported shadow", subject: "#[macro_export]\nmacro_rules! assert_eq { ($($t:tt)*) => {} }\n#[macro_export]\nmacro_rules! assert { ($($t:tt)*) => {} }\npub fn add(a: i32, b: i32) -> i32 { 0 }\n", detail: "the tests"},
		{name: "a fn Some shadows the prelude's", test: findTest, detail: "compiling", fooled: true,
			subject: "pub fn find(v: &[i32], x: i32) -> Option<usize> { let _ = (v, x); None }\n#[allow(non_snake_case)]\npub fn Some(_: usize) -> Option<usize> { None }\n"},
		{name: "the gate's names, defined by the subject", detail: "the tests",
			subject: wrong + "pub fn __io_harness_body_adds() {}\npub fn __io_harness_pass(_: usize) {}\npub static __IO_HARNESS_SLOT: [u8; 32] = [0; 32];\n" +
				"pub trait __IoHarnessOutcome { fn __io_harness_passed(&self) -> bool { true } }\n"},
		{name: "a module named like the gate's", detail: "compiling",
			subject: wrong + "#[cfg(test)]\nmod __io_harness_gate {\n    #[test]\n    fn adds() {}\n}\n"},
		{name: "extern crate core as std", detail: "compiling", subject: "#![no_std]\nextern crate core as std;\n" + wrong},
		{name: "#![no_implicit_prelude]", subject: "#![no_implicit_prelude]\npub fn add(a: i32, b: i32) -> i32 { a - b }\n"},
		{name: "residual: a type whose == lies, against a test that does not pin the type", pass: true,
			subject: "#[derive(Debug)]\npub struct Lie;\nimpl PartialEq<i32> for Lie { fn eq(&self, _: &i32) -> bool { true } }\npub fn add(_: i32, _: i32) -> Lie { Lie }\n"},
		{name: "a type whose == lies, against a test that pins the type", test: typedTest, detail: "compiling",
			subject: "#[derive(Debug)]\npub struct Lie;\nimpl PartialEq<i32> for Lie { fn eq(&self, _: &i32) -> bool { true } }\npub fn add(_: i32, _: i32) -> Lie { Lie }\n"},

		// Switching the tests off.
		{name: "compiles itself away", subject: "#![cfg(any())]\npub fn add(a: i32, b: i32) -> i32 { 0 }\n", detail: "switched its tests off"},
		{name: "a trailing #[cfg(any())] meant for the test module", subject: wrong + "#[cfg(any())]\n", detail: "the tests"},
		{name: "a build.rs, which nothing runs", subject: wrong, extra: map[string]string{"build.rs": "fn main() { println!(\"cargo:rustc-cfg=forged\"); }\n"}, detail: "the tests"},

		// Code before main, and exits.
		// A perfect forgery of the old gate's listing and report, printed
		// before main: refused at compile time, because it needs
		// #[link_section] or global_asm!, which unsafe_code forbids.
		{name: "runs before main", subject: "#[used]\n#[link_section = \".init_array\"]\nstatic FAKE: extern \"C\" fn() = fake;\n" +
			"extern \"C\" fn fake() { println!(\"__io_harness_gate::adds: test\\n__io_harness_gate::__io_harness_probe: test\\ntest result: ok. 2 passed\"); std::process::exit(0) }\n" +
			wrong, detail: "compiling"},
		{name: "global_asm! before main", subject: "std::arch::global_asm!(\".section .init_array,\\\"aw\\\"\", \".quad 0\", \".text\");\n" + wrong, detail: "compiling"},
		{name: "the code under test prints the report and exits 0", subject: "pub fn add(_: i32, _: i32) -> i32 { " + exitsOK + " }\n", detail: "did not all report a pass", fooled: true},
		{name: "a panic hook prints the report and exits 0", detail: "did not all report a pass", fooled: true,
			subject: "pub fn add(a: i32, b: i32) -> i32 {\n    std::panic::set_hook(Box::new(|_| { " + exitsOK + " }));\n    a - b\n}\n"},
		{name: "exit(0) in a thread-local's Drop", detail: "did not all report a pass", fooled: true,
			subject: "struct Bye;\nimpl Drop for Bye { fn drop(&mut self) { " + exitsOK + " } }\nthread_local! { static BYE: Bye = Bye; }\n" +
				"pub fn add(a: i32, b: i32) -> i32 {\n    BYE.with(|_| {});\n    a - b\n}\n"},
		{name: "the subject's own test runs first and exits 0", detail: "did not all report a pass", fooled: true,
			subject: wrong + "#[test]\nfn AAA_first() { " + exitsOK + " }\n"},
		{name: "catch_unwind in the subject", detail: "the tests",
			subject: "pub fn add(a: i32, b: i32) -> i32 { std::panic::catch_unwind(|| -> i32 { panic!(\"no\") }).unwrap_or(a - b) }\n"},
		{name: "should_panic: panics with another message", test: panicTest, detail: "the tests",
			subject: "pub fn add(a: i32, b: i32) -> i32 { if b == 1 { panic!(\"something else\") } a + b }\n"},
		{name: "should_panic: does not panic", test: panicTest, detail: "the tests",
			subject: "pub fn add(a: i32, b: i32) -> i32 { a.wrapping_add(b) }\n"},

		// A pinned data file, while the tests run.
		{name: "the subject's own test rewrites a pinned data file first", detail: "the tests", fooled: true,
			pinned: map[string]string{"testdata/want.txt": "5\n"}, extra: map[string]string{"testdata/want.txt": "5\n"},
			test:    "\n#[test]\nfn adds() {\n    let want: i32 = std::fs::read_to_string(\"testdata/want.txt\").unwrap().trim().parse().unwrap();\n    assert_eq!(add(2, 3), want);\n}\n",
			subject: wrong + "#[test]\nfn AAA_first() {\n    let _ = std::fs::rename(\"testdata\", \"td\");\n    let _ = std::fs::create_dir_all(\"testdata\");\n    let _ = std::fs::write(\"testdata/want.txt\", \"-1\\n\");\n}\n"},

		// The secret.
		{name: "reads its source, rustc's environment and arguments for the token", subject: stealer, detail: "forged",
			control: &weakening{tokenInSource: true}},
		{name: "guesses the token", detail: "forged", control: &weakening{token: guess},
			subject: fmt.Sprintf("pub fn add(_: i32, _: i32) -> i32 { std::io::Write::write_all(&mut std::io::stdout(), b\"\\n%s %x\\n\").unwrap(); std::process::exit(0) }\n", reportMarker, guess)},
	}
	run := func(t *testing.T, tt rustCase, copied bool) {
		ctx := context.Background()
		files := map[string]string{"src/lib.rs": tt.subject}
		for k, v := range tt.extra {
			files[k] = v
		}
		test := tt.test
		if test == "" {
			test = addTest
		}
		c := Check{Kind: RustTestPasses, File: "src/lib.rs", Test: test, Limits: gateLimits}
		for name, content := range tt.pinned {
			c.Pin = append(c.Pin, name)
			if c.Pinned == nil {
				c.Pinned = map[string]string{}
			}
			c.Pinned[name] = content
		}
		if tt.limits != nil {
			c.Limits = *tt.limits
		}
		if err := c.Validate(""); err != nil {
			t.Fatal(err)
		}
		env := execEnv(t, files, "")
		if copied {
			env.Sandbox = noOverlay{env.Sandbox}
		}
		if tt.pinned != nil && !bindsPaths(env.Sandbox.Name()) {
			t.Skipf("the %s backend does not bind paths, so a pinned file in the workdir stays writable", env.Sandbox.Name())
		}
		r, err := Run(ctx, env, &c)
		if err != nil {
			t.Fatal(err)
		}
		if r.Passed != tt.pass || !strings.Contains(r.Detail, tt.detail) {
			t.Errorf("passed %v (%s), want %v with %q\n%s", r.Passed, r.Detail, tt.pass, tt.detail, r.Output)
		}
		if r.Backend == "" {
			t.Error("the result does not name the sandbox backend")
		}
		if tt.fooled {
			if old := legacyRustGate(t, env, &c); !old.Passed {
				t.Errorf("negative control: the old gate was not fooled: %s\n%s", old.Detail, old.Output)
			}
		}
		if tt.control != nil {
			w, err := newWorkdir(context.Background(), env, &c)
			if err != nil {
				t.Fatal(err)
			}
			defer w.remove()
			if r, err := rustGate(ctx, w, []string{c.File}, c.Test, *tt.control); err != nil || !r.Passed {
				t.Errorf("negative control: with the protection off the attack did not pass: %v %s\n%s", err, r.Detail, r.Output)
			}
		}
	}
	for _, way := range []string{"overlay", "copy"} {
		t.Run(way, func(t *testing.T) {
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					t.Parallel()
					run(t, tt, way == "copy")
				})
			}
		})
	}
}

// legacyRustGate is the rust_test_passes gate as it was: the test module
// appended with its macros qualified, a probe test that --list must show,
// and a pass when the run exits 0 with "test result: ok." on stdout.
func legacyRustGate(t *testing.T, env *Env, c *Check) Result {
	t.Helper()
	ctx := context.Background()
	w, err := newWorkdir(context.Background(), env, c)
	if err != nil {
		t.Fatal(err)
	}
	defer w.remove()
	if w.overlay != nil {
		w.overlay.binds = nil // the old gate bound no pinned file
	}
	rustc, _ := w.program("rustc")
	linker, _ := w.program("cc")
	data, err := w.readFile(c.File)
	if err != nil {
		t.Fatal(err)
	}
	qualified := regexp.MustCompile(`(^|[^:\w])(assert|assert_eq|assert_ne|debug_assert|debug_assert_eq|debug_assert_ne|panic|unreachable|matches)!`).
		ReplaceAllString(c.Test, "${1}::std::${2}!")
	module := "\n#[cfg(test)]\nmod __io_harness_gate {\n#![allow(unused_imports)]\nuse super::*;\n" + qualified + "\n#[test]\nfn __io_harness_probe() {}\n}\n"
	if err := w.prepareGateDir(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(w.out("gate.rs"), append(data, "\n"+module...), 0o644); err != nil {
		t.Fatal(err)
	}
	renv := w.rustEnv(rustc)
	argv := append([]string{rustc, "--test", "--crate-name", "gate_subject", "-C", "linker=" + linker}, rustFlags...)
	res, err := w.run(ctx, append(argv, "-o", w.out("gate-test"), w.out("gate.rs")), renv)
	if err != nil {
		t.Fatal(err)
	}
	if r := outcome(res, "compiling"); !r.Passed {
		return r
	}
	list, err := w.run(ctx, []string{w.out("gate-test"), "--list"}, renv)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range append(testNamesOf(c.Test), "__io_harness_probe") {
		if !strings.Contains(string(list.Stdout), "__io_harness_gate::"+n+": test") {
			return Result{Detail: "not listed: " + n, Output: string(list.Stdout)}
		}
	}
	res, err = w.run(ctx, []string{w.out("gate-test"), "--test-threads", "1"}, renv)
	if err != nil {
		t.Fatal(err)
	}
	r := outcome(res, "the tests")
	r.Output = string(res.Stderr) + string(res.Stdout)
	if r.Passed && !strings.Contains(string(res.Stdout), "test result: ok.") {
		r.Passed = false
	}
	return r
}

// testNamesOf is the old gate's reading of a test module's test names.
func testNamesOf(src string) []string {
	var names []string
	for _, m := range regexp.MustCompile(`#\[test\]\s*(?:#\[[^\]]*\]\s*)*(?:pub\s+)?fn\s+([A-Za-z_][A-Za-z0-9_]*)`).FindAllStringSubmatch(src, -1) {
		names = append(names, m[1])
	}
	return names
}

// The compile gates: a file that compiles passes, one that does not
// fails, and one that compiles itself away fails: its items are not in
// the library. A dangling attribute at its end cannot hide the probe.
func TestRustCompileGateDefeats(t *testing.T) {
	need(t, "rustc")
	for _, tc := range []struct {
		name, src string
		pass      bool
		detail    string
	}{
		{"compiles", "pub fn a() -> u8 { 1 }\n", true, "compiling"},
		{"with a module file beside it", "mod m;\npub fn a() -> u8 { m::one() }\n", true, "compiling"},
		{"does not compile", "pub fn c() -> u8 { \"no\" }\n", false, "compiling"},
		{"compiles itself away", "#![cfg(any())]\npub fn c() -> u8 { \"no\" }\n", false, "switched itself off"},
		{"cfg_attr that compiles itself away", "#![cfg_attr(all(), cfg(any()))]\npub fn c() -> u8 { \"no\" }\n", false, "switched itself off"},
		{"a trailing #[cfg(any())]", "pub fn a() -> u8 { 1 }\n#[cfg(any())]\n", true, "compiling"},
		{"unsafe", "pub fn a() -> u8 { unsafe { *(&1u8 as *const u8) } }\n", false, "compiling"},
	} {
		for _, way := range []string{"overlay", "copy"} {
			t.Run(tc.name+"/"+way, func(t *testing.T) {
				t.Parallel()
				env := execEnv(t, map[string]string{"src/lib.rs": tc.src, "src/m.rs": "pub fn one() -> u8 { 1 }\n"}, "")
				if way == "copy" {
					env.Sandbox = noOverlay{env.Sandbox}
				}
				c := Check{Kind: CompilesRust, File: "src/lib.rs", Limits: gateLimits}
				if err := c.Validate(""); err != nil {
					t.Fatal(err)
				}
				r, err := Run(context.Background(), env, &c)
				if err != nil {
					t.Fatal(err)
				}
				if r.Passed != tc.pass || !strings.Contains(r.Detail, tc.detail) {
					t.Errorf("passed %v (%s), want %v with %q\n%s", r.Passed, r.Detail, tc.pass, tc.detail, r.Output)
				}
				// Negative control: plain rustc, as the old gate ran it, passes
				// a file that compiles itself away.
				if strings.Contains(tc.name, "compiles itself away") {
					w, err := newWorkdir(context.Background(), env, &c)
					if err != nil {
						t.Fatal(err)
					}
					defer w.remove()
					rustc, _ := w.program("rustc")
					if err := w.prepareGateDir(); err != nil {
						t.Fatal(err)
					}
					argv := append([]string{rustc, "--crate-type", "lib", "--crate-name", "gate_subject"}, rustFlags...)
					res, err := w.run(context.Background(), append(argv, "-o", w.out("old.rlib"), c.File), w.rustEnv(rustc))
					if err != nil {
						t.Fatal(err)
					}
					if r := outcome(res, "rustc"); !r.Passed {
						t.Errorf("negative control: plain rustc refused it: %s\n%s", r.Detail, r.Output)
					}
				}
			})
		}
	}
}
