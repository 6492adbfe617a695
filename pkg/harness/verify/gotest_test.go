package verify

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/initorigin/io-harness-go/pkg/sandbox"
)

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

const (
	goMod = "module example.com/calc\n\ngo 1.22\n"
	// wrongCalc fails TestAdd and passes TestNegative.
	wrongCalc = "package calc\n\nfunc Add(a, b int) int { return 0 }\n"
	rightCalc = "package calc\n\nfunc sum(a, b int) int { return a + b }\n\nfunc Add(a, b int) int { return sum(a, b) }\n"
	// framing is what test2json reads as two passing tests and a
	// passing package, when a test binary prints it to its stdout.
	framing = "\x16=== RUN   TestAdd\n\x16--- PASS: TestAdd (0.00s)\n\x16=== RUN   TestNegative\n\x16--- PASS: TestNegative (0.00s)\n\x16PASS\n"
)

// guess is the token the guessing attacks print, and the token of their
// negative control.
var guess = func() []byte { s := sha256.Sum256([]byte("a guess")); return s[:] }()

// forgedReport is a gate report line with the token tok.
func forgedReport(tok []byte) string {
	return fmt.Sprintf("\\n%s %x\\n", reportMarker, tok)
}

// project is the calc module with wrong code, the pinned test and files.
func project(extra map[string]string) map[string]string {
	m := map[string]string{"go.mod": goMod, "calc.go": wrongCalc, "calc_test.go": calcTest}
	maps.Copy(m, extra)
	return m
}

// testMain is a test file of package calc holding a TestMain with body.
func testMain(imports, body string) map[string]string {
	return map[string]string{"main_test.go": "package calc\n\nimport (\n" + imports + "\n\t\"testing\"\n)\n\nfunc TestMain(m *testing.M) {\n" + body + "\n}\n"}
}

// cmpTest is a pinned test that compares with go-cmp, from the module
// cache.
const cmpTest = `package calc

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestAdd(t *testing.T) {
	if d := cmp.Diff(5, Add(2, 3)); d != "" {
		t.Fatalf("Add(2, 3): %s", d)
	}
}
`

const (
	cmpMod = "module example.com/calc\n\ngo 1.22\n\nrequire github.com/google/go-cmp v0.7.0\n"
	cmpSum = "github.com/google/go-cmp v0.7.0 h1:wk8382ETsv4JYUZwIsn6YpYiWiBsYLSJiTsyBybVuN8=\ngithub.com/google/go-cmp v0.7.0/go.mod h1:pXiqmnSA92OHEEa9HXL2W4E7lf9JzCmGVUdgjX3N/iU=\n"
	// fakeCmp is a go-cmp whose Diff finds no difference.
	fakeCmp = "package cmp\n\nfunc Diff(x, y any, opts ...any) string { return \"\" }\n"
)

// A goCase is one project judged by go_test_passes.
type goCase struct {
	name  string
	files map[string]string
	// pin and pinned are the pinned files; calc_test.go with calcTest
	// when nil.
	pin    []string
	pinned map[string]string
	pass   bool
	detail string // a substring of the result's detail
	// fooled: the old gate (go test -json, a pass event for every pinned
	// test) passes the same project, so the attack is real. tweak
	// changes the old gate's environment for this control: a
	// protection of it switched off.
	fooled bool
	tweak  func(env []string) []string
	// control: the new gate with this protection off passes the same
	// project.
	control *weakening
	limits  *sandbox.Limits
	// binds: the defence is a bind, which only the backends that bind
	// paths enforce; elsewhere the case is skipped.
	binds bool
	// onWorkspace, when set, is the detail on the workspace itself, where
	// the defence is another (a read-only bind instead of a check).
	onWorkspace string
}

// The forgery corpus of go_test_passes: every case but the honest ones
// has wrong code (Add returns 0, so TestAdd fails and TestNegative passes)
// and an attack that tries to make the gate pass anyway. Each must fail.
// Where the attack beat the old gate (go test -json, trusting test2json's
// framing), the old gate is run on the same project and must pass: the
// attack is real. Where the new gate's defence is a secret, the new gate
// with that secret given away must pass: the attack would work without
// it.
func TestGoGateDefeats(t *testing.T) {
	need(t, "go")
	cache := warmCache(t)
	cgo := "/*\n#include <stdio.h>\n#include <stdlib.h>\n__attribute__((constructor)) static void forge(void) {\n\tfputs(\"" +
		strings.ReplaceAll(strings.ReplaceAll(framing, "\x16", `\x16`), "\n", `\n`) + "\", stdout);\n\tfflush(stdout);\n\texit(0);\n}\n*/\nimport \"C\"\n"
	reader := `	var found []string
	look := func(b []byte) {
		for _, m := range regexp.MustCompile(` + "`" + `_token = "((?:\\x[0-9a-f]{2})+)"` + "`" + `).FindAllSubmatch(b, -1) {
			found = append(found, string(m[1]))
		}
	}
	look([]byte(embedded))
	filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if b, err := os.ReadFile(p); err == nil {
				look(b)
			}
		}
		return nil
	})
	for _, p := range []string{"/proc/self/cmdline", "/proc/self/environ", "/proc/self/exe"} {
		if b, err := os.ReadFile(p); err == nil {
			look(b)
		}
	}
	for _, f := range found {
		var tok []byte
		for i := 2; i+2 <= len(f); i += 4 {
			var c byte
			fmt.Sscanf(f[i:i+2], "%02x", &c)
			tok = append(tok, c)
		}
		fmt.Printf("\n` + reportMarker + ` %x\n", tok)
	}
	os.Exit(0)`
	trueTest := "package calc\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {\n\tif ok := Add(2, 3) == 5; ok != true {\n\t\tt.Fatal(\"Add(2, 3) != 5\")\n\t}\n}\n"
	setupTest := "package calc\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {\n\tsetup(t)\n\tif got := Add(2, 3); got != 5 {\n\t\tt.Errorf(\"Add(2, 3) = %d\", got)\n\t}\n}\n"
	subtestTest := "package calc\n\nimport (\n\t\"fmt\"\n\t\"testing\"\n)\n\nfunc TestAdd(t *testing.T) {\n" +
		"\tfor _, c := range []struct{ a, b, want int }{{2, 3, 5}, {-1, 1, 0}} {\n\t\tt.Run(fmt.Sprint(c.a, c.b), func(t *testing.T) {\n" +
		"\t\t\tt.Parallel()\n\t\t\tif got := Add(c.a, c.b); got != c.want {\n\t\t\t\tt.Errorf(\"Add = %d\", got)\n\t\t\t}\n\t\t})\n\t}\n}\n"
	extTest := "package calc_test\n\nimport (\n\t\"testing\"\n\n\t\"example.com/calc\"\n)\n\nfunc TestAddExternal(t *testing.T) {\n\tif calc.Add(1, 1) != 2 {\n\t\tt.Fatal(\"Add(1, 1) != 2\")\n\t}\n}\n"
	subTest := "package sub\n\nimport (\n\t\"os\"\n\t\"testing\"\n)\n\nfunc TestData(t *testing.T) {\n\tb, err := os.ReadFile(\"testdata/in.txt\")\n\tif err != nil || string(b) != \"in\" {\n\t\tt.Fatalf(\"%q, %v\", b, err)\n\t}\n}\n"
	cmpCached := func() bool {
		mc := os.Getenv("GOMODCACHE")
		if mc == "" {
			home, _ := os.UserHomeDir()
			mc = filepath.Join(home, "go", "pkg", "mod")
		}
		_, err := os.Stat(filepath.Join(mc, "github.com", "google", "go-cmp@v0.7.0", "cmp"))
		return err == nil
	}()
	dropEnv := func(key string) func([]string) []string {
		return func(env []string) []string {
			return slices.DeleteFunc(env, func(e string) bool { return strings.HasPrefix(e, key+"=") })
		}
	}
	setEnv := func(kv string) func([]string) []string {
		return func(env []string) []string {
			k, _, _ := strings.Cut(kv, "=")
			return append(dropEnv(k)(env), kv)
		}
	}
	dataTest := "package calc\n\nimport (\n\t\"os\"\n\t\"strconv\"\n\t\"strings\"\n\t\"testing\"\n)\n\nfunc TestAdd(t *testing.T) {\n" +
		"\tb, err := os.ReadFile(\"testdata/want.txt\")\n\tif err != nil {\n\t\tt.Fatal(err)\n\t}\n\twant, _ := strconv.Atoi(strings.TrimSpace(string(b)))\n" +
		"\tif got := Add(2, 3); got != want {\n\t\tt.Fatalf(\"Add(2, 3) = %d, want %d\", got, want)\n\t}\n}\n"
	dataPins := map[string]string{"calc_test.go": dataTest, "testdata/want.txt": "5\n"}
	twoPkgs := map[string]string{"go.mod": goMod,
		"a/a.go":      "package a\n\nfunc One() int { return 1 }\n",
		"a/a_test.go": "package a\n\nimport (\n\t\"os\"\n\t\"path/filepath\"\n\t\"testing\"\n)\n\nfunc TestA(t *testing.T) {\n\texe, _ := os.Executable()\n\tos.WriteFile(filepath.Join(filepath.Dir(exe), \"b.test\"), []byte(\"#!/bin/sh\\nexit 0\\n\"), 0o755)\n\tif One() != 1 {\n\t\tt.Fatal()\n\t}\n}\n",
		"b/b.go":      "package b\n\nfunc Two() int { return 0 }\n",
		"b/b_test.go": "package b\n\nimport \"testing\"\n\nfunc TestB(t *testing.T) {\n\tif Two() != 2 {\n\t\tt.Fatal()\n\t}\n}\n"}
	cpuCap := sandbox.Limits{Wall: gateLimits.Wall, CPU: sandbox.Duration(20 * time.Second)}

	tests := []goCase{
		// Honest solutions pass. The first warms the build cache.
		{name: "honest with a private helper", files: project(map[string]string{"calc.go": rightCalc}), pass: true, detail: "2 pinned tests reported a pass"},
		{name: "honest, with TestMain, a skipped extra test and a goroutine", pass: true, files: project(map[string]string{"calc.go": rightCalc,
			"extra_test.go": "package calc\n\nimport (\n\t\"os\"\n\t\"testing\"\n)\n\nfunc TestMain(m *testing.M) { os.Exit(m.Run()) }\n\nfunc TestLater(t *testing.T) { t.Skip(\"not yet\") }\n\nfunc TestBackground(t *testing.T) { go func() {}() }\n"})},
		{name: "honest, pinned parallel subtests", pass: true, files: project(map[string]string{"calc.go": rightCalc, "calc_test.go": subtestTest}),
			pinned: map[string]string{"calc_test.go": subtestTest}},
		{name: "honest, two pinned files, one an external test package", pass: true, detail: "3 pinned tests",
			files: project(map[string]string{"calc.go": rightCalc, "ext_test.go": extTest}), pin: []string{"calc_test.go", "ext_test.go"},
			pinned: map[string]string{"calc_test.go": calcTest, "ext_test.go": extTest}},
		{name: "honest, pinned test in a subpackage reading its testdata", pass: true,
			files: project(map[string]string{"calc.go": rightCalc, "sub/sub_test.go": subTest, "sub/testdata/in.txt": "in"}),
			pin:   []string{"sub/sub_test.go"}, pinned: map[string]string{"sub/sub_test.go": subTest}},
		{name: "honest, two packages whose test binaries share a name", pass: true, detail: "3 test binaries",
			files: project(map[string]string{"calc.go": rightCalc,
				"a/util/util_test.go": "package util\n\nimport \"testing\"\n\nfunc TestA(t *testing.T) {}\n",
				"b/util/util_test.go": "package util\n\nimport \"testing\"\n\nfunc TestB(t *testing.T) {}\n"})},
		{name: "honest, the package declares min, which the pinned test does not use", pass: true,
			files: project(map[string]string{"calc.go": rightCalc + "\nfunc min(a, b int) int { return a }\n"})},
		{name: "honest, nothing pinned", pass: true, detail: "no test's pass is authenticated", pin: []string{}, pinned: map[string]string{},
			files: project(map[string]string{"calc.go": rightCalc})},

		// Plain failures.
		{name: "stub", files: project(nil), detail: "TestAdd"},
		{name: "substring in a comment", files: project(map[string]string{"calc.go": "package calc\n\n// return a + b\nfunc Add(a, b int) int { return a * b }\n"}), detail: "failed"},
		{name: "rewritten test file", files: project(map[string]string{"calc_test.go": "package calc\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {}\nfunc TestNegative(t *testing.T) {}\n"}), detail: "TestAdd"},
		{name: "a failing test in another package", detail: "example.com/calc/other",
			files: project(map[string]string{"calc.go": rightCalc, "other/o_test.go": "package other\n\nimport \"testing\"\n\nfunc TestO(t *testing.T) { t.Fatal(\"no\") }\n"})},
		{name: "infinite loop", files: project(map[string]string{"calc.go": "package calc\n\nfunc Add(a, b int) int { for {} }\n"}), detail: "killed", limits: &cpuCap},
		{name: "the contract pins a file a build constraint excludes", detail: "were not built",
			files: project(map[string]string{"calc_test.go": "//go:build never\n\n" + calcTest}), pinned: map[string]string{"calc_test.go": "//go:build never\n\n" + calcTest}},

		// What the test binary prints, and where.
		{name: "framing bytes on stdout", files: project(testMain("\t\"fmt\"\n\t\"os\"", "\tfmt.Print("+fmt.Sprintf("%q", framing)+")\n\tos.Exit(0)")),
			detail: "did not all report a pass", fooled: true},
		{name: "framing bytes on stderr", files: project(testMain("\t\"fmt\"\n\t\"os\"", "\tfmt.Fprint(os.Stderr, "+fmt.Sprintf("%q", framing)+")\n\tos.Exit(0)")),
			detail: "did not all report a pass", fooled: true},
		{name: "writes to every inherited fd", files: project(testMain("\t\"os\"\n\t\"syscall\"", `	line := []byte(`+fmt.Sprintf("%q", framing)+` + "`+forgedReport(make([]byte, 32))+`")
	for fd := 0; fd < 64; fd++ {
		syscall.Write(fd, line)
	}
	if ents, err := os.ReadDir("/proc/self/fd"); err == nil {
		for _, e := range ents {
			if f, err := os.OpenFile("/proc/self/fd/"+e.Name(), os.O_WRONLY, 0); err == nil {
				f.Write(line)
				f.Close()
			}
		}
	}
	os.Exit(0)`)), detail: "forged", fooled: true},
		{name: "init in the code under test prints forged reports and exits 0", detail: "forged", fooled: true,
			files: project(map[string]string{"calc.go": "package calc\n\nimport (\n\t\"fmt\"\n\t\"os\"\n)\n\nfunc init() {\n\tfmt.Print(" +
				fmt.Sprintf("%q", framing) + " + \"" + forgedReport(guess) + "\")\n\tos.Exit(0)\n}\n\nfunc Add(a, b int) int { return 0 }\n"})},
		{name: "a cgo constructor prints the framing before Go starts", detail: "TestAdd", fooled: true,
			files: project(map[string]string{"forge.go": "package calc\n\n" + cgo})},

		// Exits, Goexit, panics.
		{name: "TestMain exits 0 without m.Run", files: project(testMain("\t\"os\"", "\tos.Exit(0)")), detail: "did not all report a pass"},
		{name: "m.Run, then framing and os.Exit(0) after the failures", files: project(testMain("\t\"fmt\"\n\t\"os\"", "\tm.Run()\n\tfmt.Print("+fmt.Sprintf("%q", framing)+")\n\tos.Exit(0)")),
			detail: "did not all report a pass", fooled: true},
		{name: "os.Exit(0) in a deferred call of TestMain", files: project(testMain("\t\"fmt\"\n\t\"os\"", "\tdefer func() {\n\t\tfmt.Print("+fmt.Sprintf("%q", framing)+")\n\t\tos.Exit(0)\n\t}()\n\tm.Run()")),
			detail: "did not all report a pass", fooled: true},
		{name: "os.Exit(0) deferred in the code under test", detail: "TestAdd",
			files: project(map[string]string{"calc.go": "package calc\n\nimport \"os\"\n\nfunc Add(a, b int) int {\n\tif a == 2 {\n\t\tdefer os.Exit(0)\n\t}\n\treturn 0\n}\n"})},
		{name: "runtime.Goexit in the code under test", detail: "TestAdd",
			files: project(map[string]string{"calc.go": "package calc\n\nimport \"runtime\"\n\nfunc Add(a, b int) int {\n\tif a == 2 {\n\t\truntime.Goexit()\n\t}\n\treturn 0\n}\n"})},
		{name: "runtime.Goexit in init after the framing", detail: "exit code",
			files: project(map[string]string{"calc.go": "package calc\n\nimport (\n\t\"fmt\"\n\t\"runtime\"\n)\n\nfunc init() {\n\tfmt.Print(" + fmt.Sprintf("%q", framing) + ")\n\truntime.Goexit()\n}\n\nfunc Add(a, b int) int { return 0 }\n"})},
		{name: "a panic in the code under test, recovered in TestMain", detail: "exit code",
			files: project(map[string]string{"calc.go": "package calc\n\nfunc Add(a, b int) int { panic(\"no\") }\n",
				"main_test.go": "package calc\n\nimport (\n\t\"fmt\"\n\t\"os\"\n\t\"testing\"\n)\n\nfunc TestMain(m *testing.M) {\n\tdefer func() {\n\t\trecover()\n\t\tfmt.Print(" + fmt.Sprintf("%q", framing) + ")\n\t\tos.Exit(0)\n\t}()\n\tm.Run()\n}\n"})},
		{name: "a goroutine prints the framing after the tests return", detail: "did not all report a pass", fooled: true,
			files: project(map[string]string{
				"calc.go": "package calc\n\nimport \"fmt\"\n\nvar Release, Done = make(chan struct{}), make(chan struct{})\n\nfunc Add(a, b int) int {\n\tif a == 2 {\n\t\tgo func() {\n\t\t\t<-Release\n\t\t\tfmt.Print(" +
					fmt.Sprintf("%q", framing) + ")\n\t\t\tclose(Done)\n\t\t}()\n\t}\n\treturn 0\n}\n",
				"main_test.go": "package calc\n\nimport (\n\t\"os\"\n\t\"testing\"\n)\n\nfunc TestMain(m *testing.M) {\n\tm.Run()\n\tclose(Release)\n\t<-Done\n\tos.Exit(0)\n}\n"})},

		// The testing package's own levers.
		{name: "a parallel test prints the framing while the pinned ones run", detail: "did not all report a pass", fooled: true,
			files: project(map[string]string{"z_test.go": "package calc\n\nimport (\n\t\"fmt\"\n\t\"os\"\n\t\"testing\"\n)\n\nfunc TestMain(m *testing.M) {\n\tm.Run()\n\tos.Exit(0)\n}\n\nfunc TestZ(t *testing.T) {\n\tt.Parallel()\n\tfmt.Print(" +
				fmt.Sprintf("%q", framing) + ")\n}\n"})},
		{name: "flag.Set(test.run) drops the failing pinned test", detail: "did not all report a pass", fooled: true,
			files: project(testMain("\t\"flag\"\n\t\"fmt\"\n\t\"os\"", "\tflag.Set(\"test.run\", \"TestNegative\")\n\tcode := m.Run()\n\tfmt.Print("+fmt.Sprintf("%q", framing)+")\n\tos.Exit(code)"))},
		{name: "TestMain runs another test function under the pinned test's name", detail: "did not all report a pass", fooled: true,
			files: project(testMain("\t\"flag\"\n\t\"os\"", "\tflag.Set(\"test.run\", \"^$\")\n\tm.Run()\n\tflag.Set(\"test.run\", \"\")\n\ttesting.RunTests(func(_, _ string) (bool, error) { return true, nil }, []testing.InternalTest{\n"+
				"\t\t{Name: \"TestAdd\", F: TestNegative},\n\t\t{Name: \"TestNegative\", F: TestNegative},\n\t\t{Name: \"TestZ\", F: func(t *testing.T) { t.Run(\"TestAdd\", TestAdd) }},\n\t})\n\tos.Exit(0)"))},
		{name: "a helper the pinned test calls skips it", detail: "did not all report a pass", pinned: map[string]string{"calc_test.go": setupTest},
			files: project(map[string]string{"calc_test.go": setupTest, "setup.go": "package calc\n\nimport \"testing\"\n\nfunc setup(t *testing.T) { t.Skip(\"skipped\") }\n"})},
		{name: "a helper skips from a cleanup it registers", detail: "TestAdd", pinned: map[string]string{"calc_test.go": setupTest},
			files: project(map[string]string{"calc_test.go": setupTest, "setup.go": "package calc\n\nimport \"testing\"\n\nfunc setup(t *testing.T) { t.Cleanup(func() { t.SkipNow() }) }\n"})},
		{name: "a helper calls runtime.Goexit", detail: "TestAdd", pinned: map[string]string{"calc_test.go": setupTest},
			files: project(map[string]string{"calc_test.go": setupTest, "setup.go": "package calc\n\nimport (\n\t\"runtime\"\n\t\"testing\"\n)\n\nfunc setup(t *testing.T) { runtime.Goexit() }\n"})},
		{name: "a parallel subtest fails after the parent returned", detail: "TestAdd", pinned: map[string]string{"calc_test.go": subtestTest},
			files: project(map[string]string{"calc_test.go": subtestTest})},
		{name: "//go:debug panicnil=1 and a nil panic", detail: "TestAdd",
			files: project(map[string]string{"calc.go": "package calc\n\nfunc Add(a, b int) int { panic(nil) }\n", "debug_test.go": "//go:debug panicnil=1\n\npackage calc\n"})},

		// The pinned files and the binaries, while code under test runs.
		{name: "the code under test rewrites a pinned data file", detail: "TestAdd", fooled: true, binds: true,
			pin: []string{"calc_test.go", "testdata/want.txt"}, pinned: dataPins,
			files: project(map[string]string{"calc_test.go": dataTest, "testdata/want.txt": "5\n",
				"init.go": "package calc\n\nimport \"os\"\n\nfunc init() { os.WriteFile(\"testdata/want.txt\", []byte(\"0\\n\"), 0o644) }\n"})},
		{name: "the code under test renames a pinned file's directory and makes another", detail: "TestAdd", fooled: true, binds: true,
			pin: []string{"calc_test.go", "testdata/want.txt"}, pinned: dataPins,
			files: project(map[string]string{"calc_test.go": dataTest, "testdata/want.txt": "5\n",
				"init.go": "package calc\n\nimport \"os\"\n\nfunc init() {\n\tos.Rename(\"testdata\", \"td\")\n\tos.MkdirAll(\"testdata\", 0o755)\n\tos.WriteFile(\"testdata/want.txt\", []byte(\"0\\n\"), 0o644)\n}\n"})},
		{name: "an earlier test binary rewrites a later one", detail: "changed after the gate built it", onWorkspace: "failing: TestB", files: twoPkgs,
			pin: []string{"a/a_test.go", "b/b_test.go"}, pinned: map[string]string{"a/a_test.go": twoPkgs["a/a_test.go"], "b/b_test.go": twoPkgs["b/b_test.go"]}},

		// Names: the gate's, and Go's predeclared ones.
		{name: "the package redeclares true, false, len, append and make", detail: "TestAdd",
			files: project(map[string]string{"calc.go": wrongCalc + "\nconst true, false = 1 == 0, 0 == 0\n\nfunc len(v any) int { return 2 }\n\nfunc append(v ...any) int { return 0 }\n\nfunc make(v ...any) int { return 0 }\n"})},
		{name: "the package redeclares true, which the pinned test uses", detail: "redeclares", fooled: true, pinned: map[string]string{"calc_test.go": trueTest},
			files: project(map[string]string{"calc_test.go": trueTest, "calc.go": wrongCalc + "\nconst true = false\n"})},
		{name: "files named like the gate's: its identifiers guessed, a planted test binary", detail: "TestAdd",
			files: project(map[string]string{
				"zz_gate_test.go":                  "package calc\n\nvar ioHarnessGate0000000000000000_token = \"\"\n\nfunc ioHarnessGate0000000000000000_report() {}\n",
				".io-harness-gate/bin/0/calc.test": "#!/bin/sh\necho; echo '" + reportMarker + " " + strings.Repeat("00", 32) + "'\nexit 0\n"})},

		// The secret.
		{name: "reads the generated source, its environment and its binary for the token", detail: "forged",
			files:   project(map[string]string{"steal_test.go": "package calc\n\nimport (\n\t_ \"embed\"\n\t\"fmt\"\n\t\"io/fs\"\n\t\"os\"\n\t\"path/filepath\"\n\t\"regexp\"\n\t\"testing\"\n)\n\n//go:embed calc_test.go\nvar embedded string\n\nfunc TestMain(m *testing.M) {\n" + reader + "\n}\n"}),
			control: &weakening{tokenInSource: true}},
		{name: "guesses the token", detail: "forged",
			files:   project(testMain("\t\"fmt\"\n\t\"os\"", "\tfmt.Print(\""+forgedReport(guess)+"\")\n\tos.Exit(0)")),
			control: &weakening{token: guess}},

		// The build's configuration.
		{name: "a build constraint drops the file the pinned test needs", detail: "building the tests",
			files: project(map[string]string{"calc.go": "//go:build ignore\n\n" + rightCalc})},
		{name: "a package clause change", detail: "building the tests", files: project(map[string]string{"calc.go": "package calc2\n\nfunc Add(a, b int) int { return a + b }\n"})},
		{name: "go.mod asks for a newer toolchain", detail: "building the tests", files: project(map[string]string{"go.mod": "module example.com/calc\n\ngo 1.99\n\ntoolchain go1.99.0\n"})},
		{name: "go.mod replaces the testing package", files: project(map[string]string{
			"go.mod":                 goMod + "\nrequire testing v0.0.0\n\nreplace testing => ./faketesting\n",
			"faketesting/go.mod":     "module testing\n\ngo 1.22\n",
			"faketesting/testing.go": "package testing\n\ntype T struct{}\n\nfunc (*T) Fatalf(string, ...any) {}\n",
		})},
		{name: "go.mod replaces a module the pinned test imports", detail: "replace", fooled: true, pinned: map[string]string{"calc_test.go": cmpTest},
			files: project(map[string]string{"calc_test.go": cmpTest, "go.mod": cmpMod + "\nreplace github.com/google/go-cmp => ./fakecmp\n",
				"fakecmp/go.mod": "module github.com/google/go-cmp\n\ngo 1.22\n", "fakecmp/cmp/cmp.go": fakeCmp})},
		{name: "a go.work replaces a module the pinned test imports", fooled: true, tweak: func(env []string) []string { return setEnv("GOFLAGS=-buildvcs=false")(dropEnv("GOWORK")(env)) }, pinned: map[string]string{"calc_test.go": cmpTest},
			files: project(map[string]string{"calc_test.go": cmpTest, "go.mod": cmpMod, "go.sum": cmpSum,
				"go.work":        "go 1.22\n\nuse .\n\nreplace github.com/google/go-cmp => ./fakecmp\n",
				"fakecmp/go.mod": "module github.com/google/go-cmp\n\ngo 1.22\n", "fakecmp/cmp/cmp.go": fakeCmp})},
		{name: "a vendored fake of a module the pinned test imports", fooled: true, tweak: setEnv("GOFLAGS=-mod=vendor -buildvcs=false"), pinned: map[string]string{"calc_test.go": cmpTest},
			files: project(map[string]string{"calc_test.go": cmpTest, "go.mod": cmpMod, "go.sum": cmpSum,
				"vendor/modules.txt":                         "# github.com/google/go-cmp v0.7.0\n## explicit; go 1.21\ngithub.com/google/go-cmp/cmp\n",
				"vendor/github.com/google/go-cmp/cmp/cmp.go": fakeCmp,
				".config/go/env":                             "GOFLAGS=-mod=vendor\n"})},
		// What a pinned test imports from outside the module is the
		// workspace's to define when the workspace names its own module
		// after it: a residual the contract closes by pinning go.mod.
		{name: "residual: the module names itself after the module the pinned test imports", pass: true, pinned: map[string]string{"calc_test.go": cmpTest},
			files: project(map[string]string{"calc_test.go": cmpTest, "go.mod": "module github.com/google/go-cmp\n\ngo 1.22\n", "cmp/cmp.go": fakeCmp})},
		{name: "the module names itself after the module the pinned test imports, and go.mod is pinned", pin: []string{"calc_test.go", "go.mod"},
			pinned: map[string]string{"calc_test.go": cmpTest, "go.mod": cmpMod},
			files:  project(map[string]string{"calc_test.go": cmpTest, "go.mod": "module github.com/google/go-cmp\n\ngo 1.22\n", "cmp/cmp.go": fakeCmp})},
	}
	if cmpCached {
		tests = append(tests, goCase{name: "honest, the pinned test uses go-cmp from the module cache", pass: true, pinned: map[string]string{"calc_test.go": cmpTest},
			files: project(map[string]string{"calc.go": rightCalc, "calc_test.go": cmpTest, "go.mod": cmpMod, "go.sum": cmpSum})})
	} else {
		t.Log("github.com/google/go-cmp v0.7.0 is not in the module cache: the honest go-cmp case is left out")
	}

	run := func(t *testing.T, tt goCase, copied bool) {
		ctx := context.Background()
		c := Check{Kind: GoTestPasses, Pin: tt.pin, Pinned: tt.pinned, Limits: gateLimits}
		if c.Pin == nil {
			c.Pin = []string{"calc_test.go"}
		}
		if c.Pinned == nil {
			c.Pinned = map[string]string{"calc_test.go": calcTest}
		}
		if tt.limits != nil {
			c.Limits = *tt.limits
		}
		if err := c.Validate(""); err != nil {
			t.Fatal(err)
		}
		env := execEnv(t, tt.files, cache)
		if copied {
			env.Sandbox = noOverlay{env.Sandbox}
		}
		if tt.binds && !bindsPaths(env.Sandbox.Name()) {
			t.Skipf("the %s backend does not bind paths, so a pinned file in the workdir stays writable", env.Sandbox.Name())
		}
		detail := tt.detail
		if tt.onWorkspace != "" && env.Sandbox.Enforcement().Overlay {
			detail = tt.onWorkspace
		}
		r, err := Run(ctx, env, &c)
		if err != nil {
			t.Fatal(err)
		}
		if r.Passed != tt.pass || !strings.Contains(r.Detail, detail) {
			t.Errorf("passed %v (%s), want %v with %q\n%s", r.Passed, r.Detail, tt.pass, detail, r.Output)
		}
		if r.Backend == "" {
			t.Error("the result does not name the sandbox backend")
		}
		// The workspace's own files are never changed by a gate.
		for name, content := range tt.files {
			if data, _ := env.Root.ReadFile(name); string(data) != content {
				t.Errorf("the gate changed the workspace's %s", name)
			}
		}
		if tt.fooled {
			if old := legacyGoGate(t, env, &c, tt.tweak); !old.Passed {
				t.Errorf("negative control: the old gate was not fooled: %s\n%s", old.Detail, old.Output)
			}
		}
		if tt.control != nil {
			w, err := newWorkdir(context.Background(), env, &c)
			if err != nil {
				t.Fatal(err)
			}
			defer w.remove()
			if r, err := goGate(ctx, w, &c, *tt.control); err != nil || !r.Passed {
				t.Errorf("negative control: with the protection off the attack did not pass: %v %s\n%s", err, r.Detail, r.Output)
			}
		}
	}
	// Each case on the workspace itself and on a copy. The first case
	// warms the cache; the rest run in parallel.
	for _, way := range []string{"overlay", "copy"} {
		t.Run(way, func(t *testing.T) {
			copied := way == "copy"
			t.Run(tests[0].name, func(t *testing.T) { run(t, tests[0], copied) })
			for _, tt := range tests[1:] {
				t.Run(tt.name, func(t *testing.T) {
					t.Parallel()
					run(t, tt, copied)
				})
			}
		})
	}
}

// legacyGoGate is the go_test_passes gate as it was: `go test -json` in
// the sandbox, passed when it exits 0 and test2json reports a pass for
// every test function of the pinned files. It is the negative control of
// the attacks on test2json's framing. tweak, when set, changes its
// environment.
func legacyGoGate(t testing.TB, env *Env, c *Check, tweak func([]string) []string) Result {
	t.Helper()
	w, err := newWorkdir(context.Background(), env, c)
	if err != nil {
		t.Fatal(err)
	}
	defer w.remove()
	if w.overlay != nil {
		w.overlay.binds = nil // the old gate bound no pinned file
	}
	goBin, err := w.program("go")
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, f := range c.Pin {
		for _, line := range strings.Split(c.Pinned[f], "\n") {
			if name, ok := strings.CutPrefix(line, "func Test"); ok && strings.Contains(name, "*testing.T") {
				want = append(want, "Test"+name[:strings.IndexByte(name, '(')])
			}
		}
	}
	cache := filepath.Join(env.CacheDir, "go-build")
	envv := []string{
		"PATH=" + filepath.Dir(goBin) + ":/usr/local/bin:/usr/bin:/bin", "HOME=" + w.dir, "GOCACHE=" + cache,
		"GOPATH=" + w.out("gopath"),
		"GOPROXY=off", "GOSUMDB=off", "GOTOOLCHAIN=local", "GOWORK=off", "GOFLAGS=-mod=mod -buildvcs=false",
	}
	if mc := w.modCache(); mc != "" {
		envv = append(envv, "GOMODCACHE="+mc)
	}
	if tweak != nil {
		envv = tweak(envv)
	}
	res, err := w.run(context.Background(), []string{goBin, "test", "-count=1", "-json", c.Package}, envv, cache)
	if err != nil {
		t.Fatal(err)
	}
	r := outcome(res, "go test")
	passed := legacyPasses(res.Stdout)
	r.Output = string(res.Stderr) + string(res.Stdout)
	for _, name := range want {
		if !slices.Contains(passed, name) {
			r.Passed, r.Detail = false, "did not pass: "+name
		}
	}
	return r
}

// legacyPasses is the top-level tests go test -json reports as passed.
func legacyPasses(out []byte) []string {
	var passed []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		var e struct{ Action, Test string }
		if json.Unmarshal(sc.Bytes(), &e) == nil && e.Action == "pass" && e.Test != "" && !strings.Contains(e.Test, "/") {
			passed = append(passed, e.Test)
		}
	}
	return passed
}

// BenchmarkGoTestGate times one go_test_passes gate on the quickstart
// project, fixed, against the old gate (one `go test -json`) in the same
// run, alternating; it reports new/old. "edited" changes the code before
// every gate, as an agent's step does; "unchanged" does not, which lets
// the old gate's build come wholly from the cache.
func BenchmarkGoTestGate(b *testing.B) {
	if _, err := exec.LookPath("go"); err != nil {
		b.Skip("go is not installed")
	}
	sb, err := testSandbox()
	if err != nil {
		b.Skipf("no sandbox backend works here: %v", err)
	}
	files := map[string]string{}
	for _, n := range []string{"calc.go", "calc_test.go", "go.mod"} {
		data, err := os.ReadFile(filepath.Join("..", "..", "..", "examples", "quickstart", "project", n+".txt"))
		if err != nil {
			b.Fatal(err)
		}
		files[n] = string(data)
	}
	files["calc.go"] = strings.Replace(files["calc.go"], "a - b", "a + b", 1)
	for _, edited := range []bool{false, true} {
		b.Run(map[bool]string{false: "unchanged", true: "edited"}[edited], func(b *testing.B) {
			dir := b.TempDir()
			for n, content := range files {
				if err := os.WriteFile(filepath.Join(dir, n), []byte(content), 0o644); err != nil {
					b.Fatal(err)
				}
			}
			r, err := os.OpenRoot(dir)
			if err != nil {
				b.Fatal(err)
			}
			defer r.Close()
			env := &Env{Root: r, Sandbox: sb, CacheDir: warmCache(b), Getenv: os.Getenv}
			c := Check{Kind: GoTestPasses, Pin: []string{"calc_test.go"}, Pinned: map[string]string{"calc_test.go": files["calc_test.go"]}, Limits: gateLimits}
			if err := c.Validate(""); err != nil {
				b.Fatal(err)
			}
			edit := func(i int) {
				if edited {
					os.WriteFile(filepath.Join(dir, "calc.go"), []byte(fmt.Sprintf("%s\n// edit %d %d\n", files["calc.go"], i, time.Now().UnixNano())), 0o644)
				}
			}
			// Warm both.
			legacyGoGate(b, env, &c, nil)
			Run(context.Background(), env, &c)
			var old, cur time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				edit(i)
				start := time.Now()
				if r := legacyGoGate(b, env, &c, nil); !r.Passed {
					b.Fatalf("the old gate: %s\n%s", r.Detail, r.Output)
				}
				old += time.Since(start)
				edit(i)
				start = time.Now()
				if r, err := Run(context.Background(), env, &c); err != nil || !r.Passed {
					b.Fatalf("the gate: %v %s\n%s", err, r.Detail, r.Output)
				}
				cur += time.Since(start)
			}
			b.ReportMetric(float64(old.Milliseconds())/float64(b.N), "old-ms/gate")
			b.ReportMetric(float64(cur.Milliseconds())/float64(b.N), "new-ms/gate")
			b.ReportMetric(float64(cur)/float64(old), "new/old")
		})
	}
}
