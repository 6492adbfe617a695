package verify

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"unicode"
	"unicode/utf8"
)

// gateModule names the test module the harness adds to a Rust subject.
const gateModule = "__io_harness_gate"

// rustEnv is the environment rustc runs with: its own directory on PATH
// and the toolchain manager's homes from the host, nothing else; and the
// host paths the sandbox must show, read-only, for it to run: rustc's
// directory and those homes (the sandbox hides the caller's home, where
// rustup keeps them).
func (w *workdir) rustEnv(rustc string) []string {
	env := []string{"PATH=" + filepath.Dir(rustc) + ":/usr/local/bin:/usr/bin:/bin", "HOME=" + w.dir}
	// The toolchain may be in the caller's home, which the sandbox hides:
	// it is shown, read-only.
	w.show = append(w.show, filepath.Dir(rustc))
	for _, k := range []string{"RUSTUP_HOME", "CARGO_HOME", "RUSTUP_TOOLCHAIN"} {
		if v := w.getenv(k); v != "" {
			env = append(env, k+"="+v)
			if k != "RUSTUP_TOOLCHAIN" {
				w.show = append(w.show, v)
			}
		}
	}
	home := w.getenv("HOME")
	if w.getenv("RUSTUP_HOME") == "" && home != "" {
		env = append(env, "RUSTUP_HOME="+filepath.Join(home, ".rustup"))
		w.show = append(w.show, filepath.Join(home, ".rustup"))
	}
	if w.getenv("CARGO_HOME") == "" && home != "" {
		w.show = append(w.show, filepath.Join(home, ".cargo"))
	}
	return env
}

// rustc flags every gate compiles with. Unsafe code is forbidden: it is
// how a subject could run code before main (a .init_array entry through
// #[link_section] or global_asm!) and read or write the process's memory.
var rustFlags = []string{"--edition", "2021", "-F", "unsafe_code"}

// rustSacrifice is the first item the gate appends to a subject: an outer
// attribute left dangling at the subject's end (#[cfg(any())]) applies to
// it, not to what follows.
const rustSacrifice = "\n\nconst _: () = ();\n"

// rustIncremental returns rustc's flags and writable path for an
// incremental build of the subject named by key (its kind and files):
// its own directory under the gate cache, kept from gate to gate of the
// run, so that a second gate on an unchanged or slightly changed subject
// rebuilds only what changed. None without a cache.
func (w *workdir) rustIncremental(key ...string) (flags, writable []string) {
	if w.env.CacheDir == "" {
		return nil, nil
	}
	h := sha256.Sum256([]byte(strings.Join(key, "\x00")))
	dir := filepath.Join(w.env.CacheDir, "rust-incremental", hex.EncodeToString(h[:12]))
	if os.MkdirAll(dir, 0o755) != nil {
		return nil, nil
	}
	return []string{"-C", "incremental=" + dir}, []string{dir}
}

// rustCompiles checks that each file compiles as a library on its own, and
// that its items are in the library: a probe constant appended to each
// file must be there, which a subject that compiles itself away
// (#![cfg(any())]) loses.
func rustCompiles(ctx context.Context, w *workdir, files []string) (Result, error) {
	rustc, err := w.program("rustc")
	if err != nil {
		return Result{Detail: "not run: " + err.Error()}, nil
	}
	if err := w.prepareGateDir(); err != nil {
		return Result{}, err
	}
	var id [8]byte
	rand.Read(id[:])
	probe := fmt.Sprintf("IO_HARNESS_PROBE_%X", id)
	probeSrc := "#![no_std]\n"
	probeArgv := []string{rustc, "--crate-type", "lib", "--emit=metadata", "--crate-name", "gate_probe", "--edition", "2021"}
	var last Result
	for i, f := range files {
		data, err := w.readFile(f)
		if err != nil {
			return Result{Detail: fmt.Sprintf("%s does not exist", f)}, nil
		}
		// The root sits beside the file, so that its `mod x;` and
		// include_str!("x") find what they would.
		root := path.Join(path.Dir(f), fmt.Sprintf(".io-harness-gate-lib%d.rs", i))
		src := string(data) + rustSacrifice + fmt.Sprintf("/// The io-harness gate's probe: it is here when this file's items are.\n#[doc(hidden)]\npub const %s: () = ();\n", probe)
		if err := w.writeFile(root, []byte(src)); err != nil {
			return failed("rustc", err)
		}
		name := fmt.Sprintf("gate_subject_%d", i)
		out := w.out(fmt.Sprintf("lib%d.rlib", i))
		incr, writable := w.rustIncremental("lib", f)
		argv := append([]string{rustc, "--crate-type", "lib", "--crate-name", name}, rustFlags...)
		argv = append(append(argv, incr...), "-o", out, root)
		res, err := w.run(ctx, argv, w.rustEnv(rustc), writable...)
		if err != nil {
			return failed("rustc", err)
		}
		if err := w.removeFile(root); err != nil {
			return Result{}, err
		}
		last = outcome(res, "compiling "+f)
		if !last.Passed {
			return last, nil
		}
		probeSrc += fmt.Sprintf("const _: () = ::%s::%s;\n", name, probe)
		probeArgv = append(probeArgv, "--extern", name+"="+out)
	}
	if err := os.WriteFile(w.out("probe.rs"), []byte(probeSrc), 0o644); err != nil {
		return Result{}, err
	}
	probeArgv = append(probeArgv, "-o", w.out("probe.rmeta"), w.out("probe.rs"))
	res, err := w.run(ctx, probeArgv, w.rustEnv(rustc))
	if err != nil {
		return failed("rustc", err)
	}
	if r := outcome(res, "the probe"); !r.Passed {
		r.Detail = "the subject compiled, but without its items: it switched itself off (a #![cfg] that is false?)"
		return r, nil
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
// The verdict is a report the instrumented test module prints, with a
// token patched into the binary after it was built, once every test has
// passed: see instrumentRustTest and RATIONALE.md, "How does a Rust gate
// resist the subject?".
func rustTest(ctx context.Context, w *workdir, files []string, test string) (Result, error) {
	return rustGate(ctx, w, files, test, weakening{})
}

// rustGate is rustTest with the protections weak switches off.
func rustGate(ctx context.Context, w *workdir, files []string, test string, weak weakening) (Result, error) {
	rustc, err := w.program("rustc")
	if err != nil {
		return Result{Detail: "not run: " + err.Error()}, nil
	}
	if err := w.prepareGateDir(); err != nil {
		return Result{}, err
	}
	in, err := instrumentRustTest(test, weak)
	if err != nil {
		return Result{Detail: err.Error()}, nil
	}
	module := fmt.Sprintf("#[cfg(test)]\nmod %s {\n#![allow(unused_imports, dead_code, non_snake_case)]\nuse super::*;\n", gateModule)
	var root, rootFile string
	if len(files) == 1 {
		data, err := w.readFile(files[0])
		if err != nil {
			return Result{Detail: fmt.Sprintf("%s does not exist", files[0])}, nil
		}
		root = string(data)
		rootFile = path.Join(path.Dir(files[0]), ".io-harness-gate-test.rs")
	} else {
		var b strings.Builder
		for i, f := range files {
			if _, err := w.readFile(f); err != nil {
				return Result{Detail: fmt.Sprintf("%s does not exist", f)}, nil
			}
			mod := fmt.Sprintf("m%d_%s", i, sanitize(strings.TrimSuffix(path.Base(f), ".rs")))
			fmt.Fprintf(&b, "#[path = %q]\npub mod %s;\n", f, mod)
			module += fmt.Sprintf("use super::%s::*;\n", mod)
		}
		root = b.String()
		rootFile = ".io-harness-gate-test.rs"
	}
	// The prelude, imported by name, makes a name that the subject also
	// defines (a fn Some) ambiguous in the tests instead of the subject's.
	module += "use ::std::prelude::rust_2021::*;\n" + in.source + "}\n"
	if err := w.writeFile(rootFile, []byte(root+rustSacrifice+module)); err != nil {
		return failed("rustc", err)
	}
	// The linker is named by its path: the exec policy is asked about it
	// like any program a gate starts.
	linker, err := w.program("cc")
	if err != nil {
		return Result{Detail: "not run: the linker: " + err.Error()}, nil
	}
	env := w.rustEnv(rustc)
	bin := w.out("gate-test")
	incr, writable := w.rustIncremental(append([]string{"test"}, files...)...)
	argv := append([]string{rustc, "--test", "--crate-name", "gate_subject", "-C", "linker=" + linker, "-C", "strip=symbols"}, rustFlags...)
	argv = append(append(argv, incr...), "-o", bin, rootFile)
	res, err := w.run(ctx, argv, env, writable...)
	if err != nil {
		return failed("rustc", err)
	}
	if r := outcome(res, "compiling the subject with the test module"); !r.Passed {
		return r, nil
	}
	if d := placeToken(bin, in, weak); d != "" {
		return Result{Backend: res.Backend, Detail: d}, nil
	}
	if weak.unbound && w.overlay != nil {
		w.overlay.binds = nil
	}
	run, err := w.runSubject(ctx, w.dir, []string{bin, "--test-threads", "1"}, env)
	if err != nil {
		return failed("the test binary", err)
	}
	what := fmt.Sprintf("the tests (%d)", len(in.tests))
	reports, forged, text := readReports(run.Stdout)
	r := outcome(run, what)
	r.Output = boundTail(strings.TrimSpace(string(run.Stderr)) + "\n" + text)
	want := hexToken(in.token)
	switch {
	case forged > 0:
		r.Passed, r.Detail = false, fmt.Sprintf("the test binary printed %d gate report lines without this gate's token: the subject forged them", forged)
	case !r.Passed:
	case len(reports) == 0 && strings.Contains(text, "running 0 tests"):
		r.Passed, r.Detail = false, "the test module did not compile into the binary: the subject switched its tests off"
	case len(reports) == 0:
		r.Passed, r.Detail = false, fmt.Sprintf("the test binary exited 0, but the tests did not all report a pass (%s)", strings.Join(in.tests, ", "))
	default:
		for _, tok := range reports {
			if tok != want {
				r.Passed, r.Detail = false, "the test binary printed a gate report whose token is not this gate's: the subject forged it"
				return r, nil
			}
		}
		r.Detail = fmt.Sprintf("the tests (%d) passed, each reporting its pass", len(in.tests))
	}
	return r, nil
}

// placeToken writes the token over the slot in the test binary at p,
// where the slot must be exactly once.
func placeToken(p string, in *rustInstrumented, weak weakening) string {
	data, err := os.ReadFile(p)
	if err != nil {
		return "reading the test binary: " + err.Error()
	}
	needle := in.slot
	if weak.tokenInSource {
		needle = in.token
	}
	switch n := bytes.Count(data, needle); {
	case n == 0:
		return "the test module is not in the test binary: the subject switched its tests off"
	case n > 1:
		return fmt.Sprintf("the test binary holds the gate's report slot %d times: the gate cannot judge it", n)
	}
	if weak.tokenInSource {
		return ""
	}
	copy(data[bytes.Index(data, needle):], in.token)
	if err := os.WriteFile(p, data, 0o755); err != nil {
		return "writing the test binary: " + err.Error()
	}
	return ""
}

// rustInstrumented is a test module with its tests wrapped.
type rustInstrumented struct {
	source string   // the module's items
	tests  []string // the tests it reports on
	slot   []byte   // the bytes the built binary holds where the token goes
	token  []byte
}

// instrumentRustTest rewrites a test module. The standard macros are
// called by their full paths (::std::assert_eq!), where a subject's
// macro_rules! of the same name does not apply. Every #[test] function
// that is not #[ignore]d is renamed, and a #[test] wrapper of its name
// runs it: a pass is noted only when it returned (Ok, for a test that
// returns a Result), or, for #[should_panic], when it panicked with the
// expected message. Once every test has passed, the module prints its
// report: the marker and the token. The generated code calls nothing by
// a name the subject could shadow through `use super::*`: absolute
// paths, no method-call syntax.
func instrumentRustTest(src string, weak weakening) (*rustInstrumented, error) {
	toks := lexRust(src)
	in := &rustInstrumented{slot: make([]byte, tokenSize), token: weak.token}
	rand.Read(in.slot)
	if in.token == nil {
		in.token = make([]byte, tokenSize)
		rand.Read(in.token)
	}
	type edit struct {
		at, end int
		text    string
	}
	var edits []edit
	for _, i := range stdMacroCalls(toks) {
		edits = append(edits, edit{toks[i].pos, toks[i].pos, "::std::"})
	}
	var wrappers []edit
	for _, fn := range rustTestFns(src, toks) {
		if fn.ignored {
			continue
		}
		idx := len(in.tests)
		in.tests = append(in.tests, fn.name)
		for _, a := range fn.drop {
			edits = append(edits, edit{a[0], a[1], ""})
		}
		edits = append(edits, edit{fn.namePos, fn.namePos + len(fn.name), "__io_harness_body_" + fn.name})
		var w strings.Builder
		w.WriteString("\n#[test]\n")
		for _, c := range fn.cfgs {
			w.WriteString(src[c[0]:c[1]] + "\n")
		}
		if fn.shouldPanic {
			expected := "::std::option::Option::None"
			if fn.expected != "" {
				expected = "::std::option::Option::Some(" + fn.expected + ")"
			}
			fmt.Fprintf(&w, "fn %s() {\n    __io_harness_should_panic(%d, %s, __io_harness_body_%s);\n}\n", fn.name, idx, expected, fn.name)
		} else {
			fmt.Fprintf(&w, "fn %[1]s() %[2]s{\n    let __io_harness_r = __io_harness_body_%[1]s();\n"+
				"    if __IoHarnessOutcome::__io_harness_passed(&__io_harness_r) {\n        __io_harness_pass(%[3]d);\n    }\n    __io_harness_r\n}\n",
				fn.name, fn.ret, idx)
		}
		wrappers = append(wrappers, edit{fn.end, fn.end, w.String()})
	}
	if len(in.tests) == 0 {
		return nil, fmt.Errorf("the test module has no #[test] function that is not #[ignore]d: there is nothing to judge")
	}
	edits = append(edits, wrappers...)
	sortEdits := func(e []edit) {
		for i := 1; i < len(e); i++ {
			for j := i; j > 0 && (e[j].at < e[j-1].at || e[j].at == e[j-1].at && e[j].end < e[j-1].end); j-- {
				e[j], e[j-1] = e[j-1], e[j]
			}
		}
	}
	sortEdits(edits)
	var b strings.Builder
	last := 0
	for _, e := range edits {
		b.WriteString(src[last:e.at])
		b.WriteString(e.text)
		last = e.end
	}
	b.WriteString(src[last:])

	lit := in.slot
	if weak.tokenInSource {
		lit = in.token
	}
	var bytesLit strings.Builder
	for i, c := range lit {
		if i > 0 {
			bytesLit.WriteString(", ")
		}
		fmt.Fprintf(&bytesLit, "%d", c)
	}
	fmt.Fprintf(&b, rustReporter, len(in.tests), bytesLit.String(), tokenSize, reportMarker)
	in.source = b.String()
	return in, nil
}

// rustReporter is the generated end of the test module: the token slot,
// the state and the functions the wrappers call. Arguments: the number of
// tests, the slot's bytes, their number, the report marker.
const rustReporter = `

// The rest of this module is generated by io-harness for a Rust test gate.

static __IO_HARNESS_SLOT: [::std::primitive::u8; %[3]d] = [%[2]s];

static __IO_HARNESS_PASSED: ::std::sync::Mutex<[::std::primitive::bool; %[1]d]> = ::std::sync::Mutex::new([false; %[1]d]);

fn __io_harness_pass(i: ::std::primitive::usize) {
    let mut guard = match ::std::sync::Mutex::lock(&__IO_HARNESS_PASSED) {
        ::std::result::Result::Ok(g) => g,
        ::std::result::Result::Err(e) => ::std::sync::PoisonError::into_inner(e),
    };
    let passed: &mut [::std::primitive::bool; %[1]d] = &mut *guard;
    if passed[i] {
        return;
    }
    passed[i] = true;
    for j in 0..%[1]d {
        if !passed[j] {
            return;
        }
    }
    let slot: &[::std::primitive::u8; %[3]d] = ::std::hint::black_box(&__IO_HARNESS_SLOT);
    let digits: &[::std::primitive::u8; 16] = b"0123456789abcdef";
    let mut line: ::std::vec::Vec<::std::primitive::u8> = ::std::vec::Vec::new();
    ::std::vec::Vec::extend_from_slice(&mut line, b"\n%[4]s ");
    for k in 0..%[3]d {
        ::std::vec::Vec::push(&mut line, digits[(slot[k] >> 4) as ::std::primitive::usize]);
        ::std::vec::Vec::push(&mut line, digits[(slot[k] & 15) as ::std::primitive::usize]);
    }
    ::std::vec::Vec::push(&mut line, b'\n');
    let mut out = ::std::io::stdout();
    let _ = ::std::io::Write::write_all(&mut out, &line);
    let _ = ::std::io::Write::flush(&mut out);
}

trait __IoHarnessOutcome {
    fn __io_harness_passed(&self) -> ::std::primitive::bool;
}

impl __IoHarnessOutcome for () {
    fn __io_harness_passed(&self) -> ::std::primitive::bool {
        true
    }
}

impl<T, E> __IoHarnessOutcome for ::std::result::Result<T, E> {
    fn __io_harness_passed(&self) -> ::std::primitive::bool {
        ::std::result::Result::is_ok(self)
    }
}

fn __io_harness_should_panic(i: ::std::primitive::usize, expected: ::std::option::Option<&'static ::std::primitive::str>, f: fn()) {
    let payload = match ::std::panic::catch_unwind(f) {
        ::std::result::Result::Ok(()) => ::std::panic!("the test did not panic, and it should"),
        ::std::result::Result::Err(p) => p,
    };
    if let ::std::option::Option::Some(want) = expected {
        let any: &(dyn ::std::any::Any + ::std::marker::Send) = &*payload;
        let message: ::std::option::Option<&::std::primitive::str> =
            match <dyn ::std::any::Any + ::std::marker::Send>::downcast_ref::<::std::string::String>(any) {
                ::std::option::Option::Some(s) => ::std::option::Option::Some(::std::string::String::as_str(s)),
                ::std::option::Option::None => match <dyn ::std::any::Any + ::std::marker::Send>::downcast_ref::<&'static ::std::primitive::str>(any) {
                    ::std::option::Option::Some(s) => ::std::option::Option::Some(*s),
                    ::std::option::Option::None => ::std::option::Option::None,
                },
            };
        match message {
            ::std::option::Option::Some(m) if ::std::primitive::str::contains(m, want) => {}
            _ => ::std::panic!("the test panicked, but not with a message containing {:?}", want),
        }
    }
    __io_harness_pass(i);
}
`

// stdMacros are the standard library's macros a test module may call;
// a subject's macro_rules! of the same name shadows the bare name.
var stdMacros = map[string]bool{
	"assert": true, "assert_eq": true, "assert_ne": true, "debug_assert": true, "debug_assert_eq": true, "debug_assert_ne": true,
	"panic": true, "unreachable": true, "todo": true, "unimplemented": true, "matches": true, "vec": true,
	"format": true, "format_args": true, "print": true, "println": true, "eprint": true, "eprintln": true, "write": true, "writeln": true,
	"concat": true, "stringify": true, "line": true, "column": true, "file": true, "module_path": true, "cfg": true,
	"env": true, "option_env": true, "include": true, "include_str": true, "include_bytes": true, "dbg": true,
	"thread_local": true, "compile_error": true,
}

// stdMacroCalls returns the indexes of the tokens that name a standard
// macro in a call (name ! delimiter) that is not already a path.
func stdMacroCalls(toks []rustToken) []int {
	var out []int
	for i, t := range toks {
		if t.kind != 'i' || !stdMacros[t.text] || i+2 >= len(toks) || toks[i+1].text != "!" || !strings.Contains("([{", toks[i+2].text) {
			continue
		}
		if i > 0 && (toks[i-1].text == ":" || toks[i-1].text == "$") {
			continue
		}
		out = append(out, i)
	}
	return out
}

// rustTestFn is a #[test] function of a test module.
type rustTestFn struct {
	name        string
	namePos     int
	end         int      // after its body
	ret         string   // "-> T " or ""
	drop        [][2]int // spans of the attributes the wrapper takes over
	cfgs        [][2]int // spans of its #[cfg] attributes, copied to the wrapper
	ignored     bool
	shouldPanic bool
	expected    string // the literal of should_panic(expected = ...)
}

// rustTestFns finds the #[test] functions of src, lexed into toks.
func rustTestFns(src string, toks []rustToken) []rustTestFn {
	var out []rustTestFn
	type attr struct {
		span    [2]int
		content []rustToken
	}
	var pending []attr
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		switch {
		case t.text == "#" && i+1 < len(toks) && toks[i+1].text == "[":
			end := matchDelim(toks, i+1)
			if end < 0 {
				return out
			}
			pending = append(pending, attr{[2]int{t.pos, toks[end].pos + 1}, toks[i+2 : end]})
			i = end
		case t.kind == 'i' && (t.text == "pub" || t.text == "async" || t.text == "const" || t.text == "unsafe" || t.text == "extern"):
		case t.text == "(" && i > 0 && toks[i-1].text == "pub":
			if end := matchDelim(toks, i); end >= 0 {
				i = end
			}
		case t.kind == 'i' && t.text == "fn" && i+2 < len(toks) && toks[i+1].kind == 'i':
			fn := rustTestFn{name: toks[i+1].text, namePos: toks[i+1].pos}
			isTest := false
			for _, a := range pending {
				if len(a.content) == 0 || a.content[0].kind != 'i' {
					continue
				}
				switch a.content[0].text {
				case "test":
					isTest = isTest || len(a.content) == 1
					fn.drop = append(fn.drop, a.span)
				case "ignore":
					fn.ignored = true
					fn.drop = append(fn.drop, a.span)
				case "should_panic":
					fn.shouldPanic = true
					fn.drop = append(fn.drop, a.span)
					c := a.content
					switch {
					case len(c) == 3 && c[1].text == "=" && c[2].kind == 'l':
						fn.expected = c[2].text
					case len(c) == 6 && c[1].text == "(" && c[2].text == "expected" && c[3].text == "=" && c[4].kind == 'l':
						fn.expected = c[4].text
					}
				case "cfg":
					fn.cfgs = append(fn.cfgs, a.span)
				}
			}
			pending = nil
			// The body is the first { at the signature's depth.
			j := i + 2
			if j < len(toks) && toks[j].text == "(" {
				if j = matchDelim(toks, j); j < 0 {
					return out
				}
				j++
			}
			retStart := j
			for j < len(toks) && toks[j].text != "{" && toks[j].text != ";" {
				j++
			}
			if j >= len(toks) || toks[j].text != "{" {
				continue
			}
			end := matchDelim(toks, j)
			if end < 0 {
				return out
			}
			if !isTest {
				continue // nested items are scanned too
			}
			if retStart < j {
				fn.ret = strings.TrimSpace(src[toks[retStart].pos:toks[j].pos]) + " "
			}
			fn.end = toks[end].pos + 1
			out = append(out, fn)
			i = end
		default:
			pending = nil
		}
	}
	return out
}

// matchDelim returns the index of the token that closes the delimiter at
// toks[i], or -1.
func matchDelim(toks []rustToken, i int) int {
	var stack []byte
	for j := i; j < len(toks); j++ {
		switch s := toks[j].text; s {
		case "(", "[", "{":
			stack = append(stack, map[string]byte{"(": ')', "[": ']', "{": '}'}[s])
		case ")", "]", "}":
			if len(stack) == 0 || stack[len(stack)-1] != s[0] {
				return -1
			}
			stack = stack[:len(stack)-1]
			if len(stack) == 0 {
				return j
			}
		}
	}
	return -1
}

// rustToken is a token of Rust source: an identifier or keyword ('i'), a
// literal ('l') or one punctuation character ('p'). Comments and
// whitespace are dropped.
type rustToken struct {
	kind byte
	text string
	pos  int
}

// lexRust splits Rust source into tokens, enough to find macro calls,
// attributes and items outside comments, strings and character literals.
func lexRust(src string) []rustToken {
	var toks []rustToken
	i := 0
	for i < len(src) {
		c := src[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case strings.HasPrefix(src[i:], "//"):
			if j := strings.IndexByte(src[i:], '\n'); j >= 0 {
				i += j + 1
			} else {
				i = len(src)
			}
		case strings.HasPrefix(src[i:], "/*"):
			depth, j := 0, i
			for j < len(src) {
				if strings.HasPrefix(src[j:], "/*") {
					depth, j = depth+1, j+2
				} else if strings.HasPrefix(src[j:], "*/") {
					depth, j = depth-1, j+2
					if depth == 0 {
						break
					}
				} else {
					j++
				}
			}
			i = j
		case rawStringStart(src[i:]) > 0:
			n := rawStringStart(src[i:])
			hashes := strings.Count(src[i:i+n], "#")
			closing := "\"" + strings.Repeat("#", hashes)
			j := strings.Index(src[i+n:], closing)
			end := len(src)
			if j >= 0 {
				end = i + n + j + len(closing)
			}
			toks = append(toks, rustToken{'l', src[i:end], i})
			i = end
		case c == '"' || (c == 'b' || c == 'c') && strings.HasPrefix(src[i+1:], "\""):
			j := i + 1
			if c != '"' {
				j++
			}
			for j < len(src) && src[j] != '"' {
				if src[j] == '\\' {
					j++
				}
				j++
			}
			end := min(j+1, len(src))
			toks = append(toks, rustToken{'l', src[i:end], i})
			i = end
		case c == '\'' || c == 'b' && strings.HasPrefix(src[i+1:], "'"):
			j := i + 1
			if c == 'b' {
				j++
			}
			if j < len(src) && src[j] == '\\' {
				// An escaped character literal.
				k := j + 2
				for k < len(src) && src[k] != '\'' {
					k++
				}
				end := min(k+1, len(src))
				toks = append(toks, rustToken{'l', src[i:end], i})
				i = end
				continue
			}
			_, size := utf8.DecodeRuneInString(src[j:])
			if j+size < len(src) && src[j+size] == '\'' {
				toks = append(toks, rustToken{'l', src[i : j+size+1], i})
				i = j + size + 1
				continue
			}
			// A lifetime or a label.
			k := j
			for k < len(src) && isIdentByte(src, k) {
				_, s := utf8.DecodeRuneInString(src[k:])
				k += s
			}
			toks = append(toks, rustToken{'i', src[i:k], i})
			i = max(k, i+1)
		case c >= '0' && c <= '9':
			j := i + 1
			for j < len(src) && (isIdentByte(src, j) || src[j] == '.' && j+1 < len(src) && src[j+1] >= '0' && src[j+1] <= '9') {
				j++
			}
			toks = append(toks, rustToken{'l', src[i:j], i})
			i = j
		case isIdentByte(src, i):
			j := i
			if strings.HasPrefix(src[i:], "r#") {
				j += 2
			}
			for j < len(src) && isIdentByte(src, j) {
				_, s := utf8.DecodeRuneInString(src[j:])
				j += s
			}
			toks = append(toks, rustToken{'i', src[i:j], i})
			i = j
		default:
			_, size := utf8.DecodeRuneInString(src[i:])
			toks = append(toks, rustToken{'p', src[i : i+size], i})
			i += size
		}
	}
	return toks
}

// rawStringStart returns the length of a raw string literal's opening
// (r", r#", br##" ...) at the start of s, or 0.
func rawStringStart(s string) int {
	i := 0
	if strings.HasPrefix(s, "br") || strings.HasPrefix(s, "cr") {
		i = 2
	} else if strings.HasPrefix(s, "r") {
		i = 1
	} else {
		return 0
	}
	j := i
	for j < len(s) && s[j] == '#' {
		j++
	}
	if j < len(s) && s[j] == '"' {
		return j + 1
	}
	return 0
}

func isIdentByte(s string, i int) bool {
	c := s[i]
	if c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
		return true
	}
	if c < utf8.RuneSelf {
		return false
	}
	r, _ := utf8.DecodeRuneInString(s[i:])
	return unicode.IsLetter(r) || unicode.IsDigit(r)
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
