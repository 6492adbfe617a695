package verify

import (
	"bytes"
	"fmt"
	"go/parser"
	"go/token"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestInstrumentGoTest(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		tests     []string
		err       string
	}{
		{"tests", calcTest, []string{"TestAdd", "TestNegative"}, ""},
		{"what go test runs", "package p\n\nimport tt \"testing\"\n\nfunc Test(t *tt.T) {}\nfunc TestÄ(t *tt.T) {}\nfunc Testx(t *tt.T) {}\n" +
			"func TestM(m *tt.M) {}\nfunc (r R) TestR(t *tt.T) {}\nfunc TestG[X any](t *tt.T) {}\nfunc TestTwo(a, b *tt.T) {}\nfunc TestRes(t *tt.T) int { return 0 }\n" +
			"func Test_under(t *tt.T) {}\nfunc TestB(b *tt.B) {}\n", []string{"Test", "TestÄ", "Test_under"}, ""},
		{"no tests", "package p\n\nfunc helper() {}\n", nil, ""},
		{"not Go", "package p\n\nfunc (", nil, "does not parse"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in, err := instrumentGoTest("p_test.go", []byte(tc.src), weakening{})
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.tests == nil {
				if in != nil {
					t.Fatalf("instrumented a file without tests: %s", in.source)
				}
				return
			}
			if diff := cmp.Diff(tc.tests, in.tests); diff != "" {
				t.Errorf("tests (-want +got):\n%s", diff)
			}
			// The result is Go, keeps every line of the original where it
			// was (failures point at the right lines), and holds the
			// slot only as escapes.
			if _, err := parser.ParseFile(token.NewFileSet(), "p_test.go", in.source, 0); err != nil {
				t.Errorf("the instrumented source does not parse: %v\n%s", err, in.source)
			}
			orig := strings.Split(tc.src, "\n")
			got := strings.Split(string(in.source), "\n")
			for i := 1; i < len(orig)-1; i++ {
				if !strings.HasPrefix(orig[i], "func Test") && got[i] != orig[i] {
					t.Errorf("line %d moved or changed: %q, was %q", i+1, got[i], orig[i])
				}
			}
			if bytes.Contains(in.source, in.slot) || bytes.Contains(in.source, in.token) {
				t.Error("the source holds the slot's or the token's bytes")
			}
			for _, id := range []string{"true", "false", "len", "append", "make", "string", "bool", "nil", "byte"} {
				if strings.Contains(string(in.source[len(tc.src):]), " "+id) || strings.Contains(string(in.source[len(tc.src):]), "("+id) {
					t.Errorf("the generated code names the predeclared %s, which the package could redeclare", id)
				}
			}
		})
	}
	// Two instrumentations of one file share neither names nor secrets.
	a, _ := instrumentGoTest("p_test.go", []byte(calcTest), weakening{})
	b, _ := instrumentGoTest("p_test.go", []byte(calcTest), weakening{})
	if bytes.Equal(a.source, b.source) || bytes.Equal(a.slot, b.slot) || bytes.Equal(a.token, b.token) {
		t.Error("two instrumentations are alike")
	}
}

func TestExecName(t *testing.T) {
	for path, want := range map[string]string{
		"example.com/calc": "calc", "example.com/calc/v2": "calc", "example.com/v2": "example.com", "v2": "v2",
		"example.com/calc/v1": "v1", "example.com/calc/v0": "v0", "example.com/calc/v10": "calc", "example.com/calc/v2x": "v2x", "calc": "calc",
	} {
		if got := execName(path); got != want {
			t.Errorf("execName(%q) = %q, want %q", path, got, want)
		}
	}
	pkgs := []goPackage{
		{ImportPath: "m/a/util", TestGoFiles: []string{"x_test.go"}},
		{ImportPath: "m/none"},
		{ImportPath: "m/b/util", XTestGoFiles: []string{"x_test.go"}},
		{ImportPath: "m/c", TestGoFiles: []string{"x_test.go"}},
		{ImportPath: "m/c/util/v2", TestGoFiles: []string{"x_test.go"}},
	}
	want := [][]string{{"m/a/util", "m/c"}, {"m/b/util"}, {"m/c/util/v2"}}
	if diff := cmp.Diff(want, testBatches(pkgs)); diff != "" {
		t.Errorf("testBatches (-want +got):\n%s", diff)
	}
}

func TestReadReports(t *testing.T) {
	tok := bytes.Repeat([]byte{0xab}, tokenSize)
	line := "\n" + reportMarker + " " + hexToken(tok) + "\n"
	for _, tc := range []struct {
		name, out string
		tokens    []string
		forged    int
		text      string
	}{
		{"a report among output", "ok\n" + line + "PASS\n", []string{hexToken(tok)}, 0, "ok\n\nPASS\n"},
		{"after a line without newline", "partial" + line, []string{hexToken(tok)}, 0, "partial\n"},
		{"mid-line", "x " + reportMarker + " " + hexToken(tok) + "\n", nil, 1, ""},
		{"short token", reportMarker + " abcd\n", nil, 1, ""},
		{"bare marker", reportMarker + "\n", nil, 1, ""},
		{"nothing", "PASS\n", nil, 0, "PASS\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tokens, forged, text := readReports([]byte(tc.out))
			if diff := cmp.Diff(tc.tokens, tokens); diff != "" || forged != tc.forged || text != tc.text {
				t.Errorf("tokens (-want +got):\n%s\nforged %d, want %d; text %q, want %q", diff, forged, tc.forged, text, tc.text)
			}
		})
	}
}

func TestInstrumentRustTest(t *testing.T) {
	src := `
use std::collections::HashMap; // assert_eq!(not, code)
/* a /* nested */ comment with panic!("x") */
#[test]
fn adds() {
    let s = "assert_eq!(in, a string)";
    let r = r#"vec![1]"#;
    let c = '"';
    let l: &'static str = "x";
    assert_eq!(add(2, 3), 5, "{}", s);
    my::assert!(true);
}

/// Doc.
#[test]
#[should_panic(expected = "over")]
fn overflows() { add(i32::MAX, 1); }

#[test]
#[ignore = "slow"]
fn slow() {}

#[test]
pub fn result() -> Result<(), String> { Ok(()) }

fn helper() { vec![1]; }

macro_rules! assert { () => {} }
`
	in, err := instrumentRustTest(src, weakening{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"adds", "overflows", "result"}, in.tests); diff != "" {
		t.Errorf("tests (-want +got):\n%s", diff)
	}
	for _, want := range []string{
		`// assert_eq!(not, code)`, `with panic!("x") */`, `"assert_eq!(in, a string)"`, `r#"vec![1]"#`, `'"'`, `&'static str`,
		`::std::assert_eq!(add(2, 3), 5, "{}", s);`, `my::assert!(true);`, `fn helper() { ::std::vec![1]; }`, `macro_rules! assert {`,
		"fn __io_harness_body_adds() {", "#[test]\nfn adds() {",
		"fn __io_harness_body_overflows() {", `__io_harness_should_panic(1, ::std::option::Option::Some("over"), __io_harness_body_overflows);`,
		"#[test]\n#[ignore = \"slow\"]\nfn slow() {}",
		"pub fn __io_harness_body_result() -> Result<(), String> {", "fn result() -> Result<(), String> {",
	} {
		if !strings.Contains(in.source, want) {
			t.Errorf("the instrumented module lacks %q:\n%s", want, in.source)
		}
	}
	if strings.Contains(in.source, "#[should_panic") {
		t.Error("the should_panic attribute is still there: the wrapper judges the panic itself")
	}
	if _, err := instrumentRustTest("#[test]\n#[ignore]\nfn only() {}\n", weakening{}); err == nil {
		t.Error("a module of ignored tests was accepted")
	}
}

// FuzzInstrumentRustTest: any text is lexed and instrumented without a
// panic, the tokens stay in order inside the text, and every test found
// gets a wrapper.
func FuzzInstrumentRustTest(f *testing.F) {
	f.Add(addTest)
	f.Add("#[test]\n#[should_panic(expected = \"x\")]\nfn a() -> Result<(), E> { r#\"\"# ; 'a' ; '\\'' ; b'x' }")
	f.Add("/* /* */ #[test] fn")
	f.Add("#[test] fn x( { [ ) ] }")
	f.Fuzz(func(t *testing.T, src string) {
		last := -1
		for _, tok := range lexRust(src) {
			if tok.pos <= last || tok.pos+len(tok.text) > len(src) || src[tok.pos:tok.pos+len(tok.text)] != tok.text {
				t.Fatalf("token %+v out of place", tok)
			}
			last = tok.pos
		}
		in, err := instrumentRustTest(src, weakening{})
		if err != nil {
			return
		}
		for _, name := range in.tests {
			if !strings.Contains(in.source, "fn "+name+"()") || !strings.Contains(in.source, "__io_harness_body_"+name) {
				t.Fatalf("test %s has no wrapper:\n%s", name, in.source)
			}
		}
	})
}

// FuzzInstrumentGoTest: any file is instrumented without a panic, and a
// file that parses stays Go that parses.
func FuzzInstrumentGoTest(f *testing.F) {
	f.Add([]byte(calcTest))
	f.Add([]byte("package p; import \"testing\"; func TestX(t *testing.T) {}"))
	f.Add([]byte("//go:build x\n\npackage p // c\n\nimport . \"testing\"\n\nfunc Test(t *T) { Test(t) }\n"))
	f.Fuzz(func(t *testing.T, src []byte) {
		in, err := instrumentGoTest("f_test.go", src, weakening{})
		if err != nil || in == nil {
			return
		}
		if _, err := parser.ParseFile(token.NewFileSet(), "f_test.go", in.source, 0); err != nil {
			t.Fatalf("%v\n%s", err, in.source)
		}
	})
}

// FuzzReadReports: whatever a test binary printed before it, a genuine
// report line is found, intact, and is not counted as forged.
func FuzzReadReports(f *testing.F) {
	f.Add([]byte("PASS\n"))
	f.Add([]byte("no newline"))
	f.Add([]byte("\x16--- PASS: TestAdd (0.00s)\n"))
	tok := bytes.Repeat([]byte{7}, tokenSize)
	f.Fuzz(func(t *testing.T, before []byte) {
		if bytes.Contains(before, []byte(reportMarker)) {
			return
		}
		out := append(append([]byte{}, before...), fmt.Sprintf("\n%s %s\n", reportMarker, hexToken(tok))...)
		tokens, forged, _ := readReports(out)
		if forged != 0 || len(tokens) != 1 || tokens[0] != hexToken(tok) {
			t.Fatalf("tokens %q, forged %d", tokens, forged)
		}
	})
}
