package verify

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
)

// gateModule names the test module the harness adds to a Rust subject.
const gateModule = "__io_harness_gate"

// probeTest is a test the harness adds beside the caller's: if it is not
// listed, the subject switched the tests off.
const probeTest = "__io_harness_probe"

// rustEnv is the environment rustc runs with: its own directory on PATH
// and the toolchain manager's homes from the host, nothing else.
func (w *workdir) rustEnv(rustc string) []string {
	env := []string{"PATH=" + filepath.Dir(rustc) + ":/usr/local/bin:/usr/bin:/bin", "HOME=" + w.dir}
	for _, k := range []string{"RUSTUP_HOME", "CARGO_HOME", "RUSTUP_TOOLCHAIN"} {
		if v := w.getenv(k); v != "" {
			env = append(env, k+"="+v)
		}
	}
	if w.getenv("RUSTUP_HOME") == "" {
		if home := w.getenv("HOME"); home != "" {
			env = append(env, "RUSTUP_HOME="+filepath.Join(home, ".rustup"))
		}
	}
	return env
}

// rustc flags every gate compiles with. Unsafe code is forbidden: it is
// how a subject could run code before main (a .init_array entry) and fake
// the test binary's report.
var rustFlags = []string{"--edition", "2021", "-F", "unsafe_code"}

// rustCompiles checks that each file compiles as a library on its own.
func rustCompiles(ctx context.Context, w *workdir, files []string) (Result, error) {
	rustc, err := w.program("rustc")
	if err != nil {
		return Result{Detail: "not run: " + err.Error()}, nil
	}
	var last Result
	for i, f := range files {
		if _, err := os.Stat(w.path(f)); err != nil {
			return Result{Detail: fmt.Sprintf("%s does not exist", f)}, nil
		}
		out := fmt.Sprintf(".io-harness-gate/lib%d.rlib", i)
		os.MkdirAll(w.path(".io-harness-gate"), 0o755)
		argv := append([]string{rustc, "--crate-type", "lib", "--crate-name", "gate_subject"}, rustFlags...)
		argv = append(argv, "-o", out, f)
		res, err := w.run(ctx, argv, w.rustEnv(rustc))
		if err != nil {
			return failed("rustc", err)
		}
		last = outcome(res, "compiling "+f)
		if !last.Passed {
			return last, nil
		}
	}
	if len(files) > 1 {
		last.Detail = fmt.Sprintf("all %d files compile", len(files))
	}
	return last, nil
}

// rustTest compiles the subject files with the caller's test module and
// runs the tests.
//
// One file is the crate root, and the test module is appended to it, so
// the tests reach the subject's private items as a child module does.
// Several files become modules of a generated root, and the test module,
// a sibling, imports each one's public items.
//
// The subject cannot defeat the gate from inside: the assertion macros of
// the test module are called by their full path, so a macro_rules! of the
// same name in the subject does not apply; a subject that compiles
// itself away (#![cfg(any())]) loses the probe test, which must be
// listed; every test of the module must be listed and pass; unsafe code,
// which could run before main, is forbidden.
func rustTest(ctx context.Context, w *workdir, files []string, test string) (Result, error) {
	rustc, err := w.program("rustc")
	if err != nil {
		return Result{Detail: "not run: " + err.Error()}, nil
	}
	names := testNames(test)
	module := fmt.Sprintf("\n#[cfg(test)]\nmod %s {\n#![allow(unused_imports)]\nuse super::*;\n", gateModule)
	var root string
	if len(files) == 1 {
		data, err := os.ReadFile(w.path(files[0]))
		if err != nil {
			return Result{Detail: fmt.Sprintf("%s does not exist", files[0])}, nil
		}
		root = string(data)
	} else {
		var b strings.Builder
		for i, f := range files {
			if _, err := os.Stat(w.path(f)); err != nil {
				return Result{Detail: fmt.Sprintf("%s does not exist", f)}, nil
			}
			mod := fmt.Sprintf("m%d_%s", i, sanitize(strings.TrimSuffix(path.Base(f), ".rs")))
			fmt.Fprintf(&b, "#[path = %q]\npub mod %s;\n", "../"+f, mod)
			module += fmt.Sprintf("use super::%s::*;\n", mod)
		}
		root = b.String()
	}
	module += qualifyMacros(test) + fmt.Sprintf("\n#[test]\nfn %s() {}\n}\n", probeTest)
	gateDir := w.path(".io-harness-gate")
	if err := os.MkdirAll(gateDir, 0o755); err != nil {
		return Result{}, err
	}
	if err := os.WriteFile(filepath.Join(gateDir, "gate.rs"), []byte(root+"\n"+module), 0o644); err != nil {
		return Result{}, err
	}
	// The linker is named by its path: the exec policy is asked about it
	// like any program a gate starts.
	linker, err := w.program("cc")
	if err != nil {
		return Result{Detail: "not run: the linker: " + err.Error()}, nil
	}
	env := w.rustEnv(rustc)
	argv := append([]string{rustc, "--test", "--crate-name", "gate_subject", "-C", "linker=" + linker}, rustFlags...)
	argv = append(argv, "-o", ".io-harness-gate/gate-test", ".io-harness-gate/gate.rs")
	res, err := w.run(ctx, argv, env)
	if err != nil {
		return failed("rustc", err)
	}
	if r := outcome(res, "compiling the subject with the test module"); !r.Passed {
		return r, nil
	}
	// List first: a listing runs no test code, so the subject cannot
	// print its way past it (and it cannot run code before main).
	list, err := w.run(ctx, []string{"./.io-harness-gate/gate-test", "--list"}, env)
	if err != nil {
		return failed("the test binary", err)
	}
	if r := outcome(list, "listing the tests"); !r.Passed {
		return r, nil
	}
	listed := string(list.Stdout)
	for _, n := range append(names, probeTest) {
		if !strings.Contains(listed, gateModule+"::"+n+": test") {
			r := outcome(list, "listing the tests")
			r.Passed = false
			if n == probeTest {
				r.Detail = "the test module did not compile into the binary: the subject switched its tests off"
			} else {
				r.Detail = fmt.Sprintf("the test %s is not in the binary", n)
			}
			return r, nil
		}
	}
	run, err := w.run(ctx, []string{"./.io-harness-gate/gate-test", "--test-threads", "1"}, env)
	if err != nil {
		return failed("the test binary", err)
	}
	r := outcome(run, fmt.Sprintf("the tests (%d)", len(names)))
	if r.Passed && !strings.Contains(string(run.Stdout), "test result: ok.") {
		r.Passed, r.Detail = false, "the test binary exited 0 without reporting a passing result"
	}
	return r, nil
}

var testFn = regexp.MustCompile(`#\[test\]\s*(?:#\[[^\]]*\]\s*)*(?:pub\s+)?fn\s+([A-Za-z_][A-Za-z0-9_]*)`)

// testNames returns the names of the #[test] functions of a test module.
func testNames(src string) []string {
	var names []string
	for _, m := range testFn.FindAllStringSubmatch(src, -1) {
		names = append(names, m[1])
	}
	return names
}

var assertion = regexp.MustCompile(`(^|[^:\w])(assert|assert_eq|assert_ne|debug_assert|debug_assert_eq|debug_assert_ne|panic|unreachable|matches)!`)

// qualifyMacros makes the test module call the standard assertion macros
// by their full path, where a subject's macro_rules! cannot reach.
func qualifyMacros(src string) string {
	return assertion.ReplaceAllString(src, "${1}::std::${2}!")
}

// sanitize makes a file stem a Rust identifier.
func sanitize(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}
