package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// events writes go test -json lines for a package from (test, action,
// output) triples; a test of "" is the package itself.
func events(pkg string, evs ...[3]string) string {
	var b strings.Builder
	for _, e := range evs {
		if e[2] != "" {
			line, _ := json.Marshal(event{Action: "output", Package: pkg, Test: e[0], Output: e[2]})
			b.Write(line)
			b.WriteByte('\n')
		}
		if e[1] != "output" {
			line, _ := json.Marshal(event{Action: e[1], Package: pkg, Test: e[0]})
			b.Write(line)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

const mod = "github.com/initorigin/io-harness-go"

// tree makes a module directory with the given files (path: content).
func tree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, content := range files {
		f := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestGoReport(t *testing.T) {
	root := tree(t, map[string]string{
		"pkg/a/a.go":      "package a\n",
		"pkg/a/a_test.go": "package a\n",
		"pkg/b/b.go":      "package b\n",
		"pkg/c/c.go":      "package c\n",
		"pkg/c/c_test.go": "//go:build linux && !linux\n\npackage c\n",
		"pkg/d/d.go":      "package d\n",
	})
	allow := []entry{
		{suite: "unit", pkg: "pkg/a", test: "TestRoot/*", reason: "only root", line: 1},
		{suite: "other", pkg: "pkg/a", test: "TestElsewhere", reason: "x", line: 2},
		{suite: "unit", pkg: "pkg/b", test: "-", reason: "test support: the tests of pkg/a drive it", line: 3},
		{suite: "unit", pkg: "pkg/c", test: "-", reason: "listed, but it has test files", line: 4},
		{suite: "unit", pkg: "pkg/gone", test: "-", reason: "listed, but not there", line: 5},
		{suite: "unit", pkg: "pkg/a", test: "TestFixtures", reason: "recorded provider fixtures not found", line: 6},
	}
	passA := events(mod+"/pkg/a", [3]string{"TestA", "pass", ""}, [3]string{"", "pass", ""})
	noTests := func(pkg string) string {
		return events(mod+"/"+pkg, [3]string{"", "skip", "?   \t" + mod + "/" + pkg + "\t[no test files]\n"})
	}
	// skipAfter is a run of pkg/a in which TestFixtures printed out,
	// one line an event, and then skipped.
	skipAfter := func(out ...string) string {
		evs := [][3]string{{"TestFixtures", "output", "=== RUN   TestFixtures\n"}}
		for _, o := range out {
			evs = append(evs, [3]string{"TestFixtures", "output", o})
		}
		evs = append(evs, [3]string{"TestFixtures", "skip", "--- SKIP: TestFixtures (0.00s)\n"}, [3]string{"TestB", "pass", ""}, [3]string{"", "pass", ""})
		return events(mod+"/pkg/a", evs...)
	}
	for _, tc := range []struct {
		name  string
		input string
		good  bool
		want  []string // lines the report must print
	}{
		{
			name: "all pass",
			input: events(mod+"/pkg/a", [3]string{"TestA", "pass", "=== RUN   TestA\n--- PASS: TestA (0.00s)\n"},
				[3]string{"", "pass", "ok  \t" + mod + "/pkg/a\t0.1s\n"}),
			good: true,
			want: []string{"ok  \t" + mod + "/pkg/a\t0.1s", "ok unit: 1 tests ran: 1 passed, 0 failed, 0 skipped (0 on the allow-list)"},
		},
		{
			name: "a listed skip",
			input: events(mod+"/pkg/a", [3]string{"TestRoot/x", "skip", "=== RUN   TestRoot/x\n    a_test.go:9: only root may do this\n--- SKIP: TestRoot/x (0.00s)\n"},
				[3]string{"TestB", "pass", ""}, [3]string{"", "pass", ""}),
			good: true,
			want: []string{"1 skipped (1 on the allow-list)"},
		},
		{
			name: "a skip for another reason",
			input: events(mod+"/pkg/a", [3]string{"TestRoot/x", "skip", "    a_test.go:9: no postgres here\n"},
				[3]string{"", "pass", ""}),
			good: false,
			want: []string{"unit\tpkg/a\tTestRoot/x\ta_test.go:9: no postgres here", "FAIL unit: 1 tests ran"},
		},
		{
			name: "a skip listed for another suite",
			input: events(mod+"/pkg/a", [3]string{"TestElsewhere", "skip", "    a_test.go:2: x\n"}, [3]string{"TestB", "pass", ""},
				[3]string{"", "pass", ""}),
			good: false,
			want: []string{"1 skips are not on the allow-list"},
		},
		{
			name:  "the listed reason logged before a skip for another",
			input: skipAfter("    a_test.go:3: recorded provider fixtures not found\n", "    a_test.go:4: psql missing\n"),
			good:  false,
			want:  []string{"unit\tpkg/a\tTestFixtures\ta_test.go:4: psql missing"},
		},
		{
			name:  "the listed reason printed before a skip for another",
			input: skipAfter("recorded provider fixtures not found\n", "    a_test.go:4: psql missing\n"),
			good:  false,
			want:  []string{"unit\tpkg/a\tTestFixtures\ta_test.go:4: psql missing"},
		},
		{
			name:  "the listed reason logged, then printed over, then SkipNow",
			input: skipAfter("    a_test.go:3: recorded provider fixtures not found\n", "connecting\n"),
			good:  false,
			want:  []string{"unit\tpkg/a\tTestFixtures\t\n"},
		},
		{
			name:  "the listed reason on the skip message's second line",
			input: skipAfter("    a_test.go:3: other\n", "    a_test.go:4: no shared folder:\n", "        recorded provider fixtures not found\n"),
			good:  true,
			want:  []string{"1 skipped (1 on the allow-list)"},
		},
		{
			name:  "a line of the test's own that looks like go test's",
			input: skipAfter("    a_test.go:3: recorded provider fixtures not found\n", "--- want\n"),
			good:  false,
			want:  []string{"unit\tpkg/a\tTestFixtures\t\n"},
		},
		{
			name:  "the skip message split across events",
			input: skipAfter("    a_test.go:4: recorded provider ", "fixtures not found\n"),
			good:  true,
			want:  []string{"1 skipped (1 on the allow-list)"},
		},
		{
			name:  "the framing of a parallel test between the message and the skip",
			input: skipAfter("=== PAUSE TestFixtures\n", "=== CONT  TestFixtures\n", "    a_test.go:4: recorded provider fixtures not found\n", "=== NAME  TestFixtures\n"),
			good:  true,
			want:  []string{"1 skipped (1 on the allow-list)"},
		},
		{
			name: "a failure prints its output",
			input: events(mod+"/pkg/a", [3]string{"TestA", "fail", "=== RUN   TestA\n    a_test.go:3: got 2, want 3\n--- FAIL: TestA (0.00s)\n"},
				[3]string{"", "fail", "FAIL\n"}),
			good: false,
			want: []string{"    a_test.go:3: got 2, want 3", "FAIL pkg/a: the package failed", "1 failed"},
		},
		{
			name:  "a package that ran no test",
			input: events(mod+"/pkg/a", [3]string{"", "pass", "testing: warning: no tests to run\nok\n"}),
			good:  false,
			want:  []string{"pkg/a: the package passed without running a test"},
		},
		{
			name:  "a package run twice, the second time running no test",
			input: passA + events(mod+"/pkg/a", [3]string{"", "pass", "testing: warning: no tests to run\nok\n"}),
			good:  false,
			want:  []string{"pkg/a: the package passed without running a test"},
		},
		{
			name:  "tests that end without their package's result",
			input: events(mod+"/pkg/a", [3]string{"TestA", "pass", ""}),
			good:  false,
			want:  []string{"FAIL pkg/a: tests ended but the package's result never came"},
		},
		{
			name:  "a listed package without test files",
			input: noTests("pkg/b") + passA,
			good:  true,
			want:  []string{"?   \t" + mod + "/pkg/b\t[no test files]", "ok unit: 1 tests ran"},
		},
		{
			name:  "a package without test files that is not listed",
			input: noTests("pkg/d") + passA,
			good:  false,
			want:  []string{"FAIL pkg/d: [no test files], and .ci/skips does not list it as a package without tests (unit pkg/d - WHY)"},
		},
		{
			name:  "a package whose test files the build left out",
			input: noTests("pkg/c") + passA,
			good:  false,
			want:  []string{"FAIL pkg/c: [no test files], but " + filepath.Join(root, "pkg/c") + " holds 1 (c_test.go): build constraints left every one out"},
		},
		{
			name:  "a listed package without a directory",
			input: noTests("pkg/gone") + passA,
			good:  false,
			want:  []string{"FAIL pkg/gone: listed as a package without tests, but its directory cannot be read"},
		},
		{
			name:  "only packages without test files",
			input: noTests("pkg/b"),
			good:  false,
			want:  []string{"unit: no test ran", "FAIL unit: 0 tests ran"},
		},
		{
			name:  "a build failure",
			input: `{"ImportPath":"x","Action":"build-output","Output":"x.go:1: syntax error\n"}` + "\n" + `{"ImportPath":"x","Action":"build-fail"}` + "\n" + passA,
			good:  false,
			want:  []string{"x.go:1: syntax error", "FAIL x: build failed"},
		},
		{
			name:  "nothing at all",
			input: "",
			good:  false,
			want:  []string{"unit: no test ran"},
		},
		{
			name:  "lines that are not events pass through",
			input: "go: downloading example.com/m v1.0.0\n" + passA,
			good:  true,
			want:  []string{"go: downloading example.com/m v1.0.0"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			r := &report{suite: "unit", module: mod, root: root, out: &out}
			if err := r.readGo(strings.NewReader(tc.input)); err != nil {
				t.Fatal(err)
			}
			if good := r.judge(allow); good != tc.good {
				t.Errorf("good %v, want %v:\n%s", good, tc.good, out.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("the report lacks %q:\n%s", w, out.String())
				}
			}
		})
	}
}

// TestGoTestItself reads what go test -json prints for a module of skips,
// logs and packages without tests, so that the report follows go test's
// own format, not this file's idea of it.
func TestGoTestItself(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go test needs go on PATH: %v", err)
	}
	root := tree(t, map[string]string{
		"go.mod": "module example.com/m\n\ngo 1.22\n",
		"a/a_test.go": `package a

import (
	"fmt"
	"testing"
)

func TestLoggedThenSkipped(t *testing.T) {
	t.Log("recorded provider fixtures not found")
	t.Skip("psql missing")
}

func TestPrintedThenSkipped(t *testing.T) {
	fmt.Println("recorded provider fixtures not found")
	t.Skip("psql missing")
}

func TestListed(t *testing.T) {
	t.Log("looking for the fixtures")
	t.Skip("no shared folder:\nrecorded provider fixtures not found")
}

func TestParallel(t *testing.T) {
	for _, n := range []string{"x", "y"} {
		t.Run(n, func(t *testing.T) {
			t.Parallel()
			t.Log("recorded provider fixtures not found")
			t.Skipf("%s: psql missing", n)
		})
	}
}

func TestPass(t *testing.T) {}
`,
		"b/b.go":      "package b\n",
		"c/c.go":      "package c\n",
		"c/c_test.go": "//go:build linux && !linux\n\npackage c\n\nimport \"testing\"\n\nfunc TestC(t *testing.T) {}\n",
	})
	cmd := exec.Command(goTool, "test", "-json", "-count=1", "./...")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOFLAGS=", "GOWORK=off", "GOTOOLCHAIN=local")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go test: %v\n%s", err, out)
	}
	var printed bytes.Buffer
	r := &report{suite: "unit", module: "example.com/m", root: root, out: &printed}
	if err := r.readGo(bytes.NewReader(out)); err != nil {
		t.Fatal(err)
	}
	allow := []entry{
		{suite: "unit", pkg: "a", test: "*", reason: "recorded provider fixtures not found", line: 1},
		{suite: "unit", pkg: "b", test: "-", reason: "no tests", line: 2},
	}
	if r.judge(allow) {
		t.Errorf("the report is good:\n%s", printed.String())
	}
	var skips []result
	for _, res := range r.results {
		if res.action == "skip" {
			skips = append(skips, res)
		}
	}
	want := []result{
		{"a", "TestLoggedThenSkipped", "skip", "a_test.go:10: psql missing"},
		{"a", "TestPrintedThenSkipped", "skip", "a_test.go:15: psql missing"},
		{"a", "TestListed", "skip", "a_test.go:20: no shared folder: recorded provider fixtures not found"},
		{"a", "TestParallel/x", "skip", "a_test.go:28: x: psql missing"},
		{"a", "TestParallel/y", "skip", "a_test.go:28: y: psql missing"},
	}
	if diff := cmp.Diff(want, skips, cmp.AllowUnexported(result{}), cmpopts.SortSlices(func(a, b result) bool { return a.test < b.test })); diff != "" {
		t.Errorf("skips (-want +got):\n%s", diff)
	}
	for _, w := range []string{
		"unit: 4 skips are not on the allow-list",
		"FAIL c: [no test files], but " + filepath.Join(root, "c") + " holds 1 (c_test.go): build constraints left every one out",
		"FAIL unit: 7 tests ran: 2 passed, 0 failed, 5 skipped (1 on the allow-list)",
	} {
		if !strings.Contains(printed.String(), w) {
			t.Errorf("the report lacks %q:\n%s", w, printed.String())
		}
	}
	if strings.Contains(printed.String(), "FAIL b:") {
		t.Errorf("the listed package without tests failed:\n%s", printed.String())
	}
}

// The JUnit forms of pytest and node --test, nested suites included.
func TestJUnitReport(t *testing.T) {
	dir := t.TempDir()
	pytest := `<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" errors="0" failures="1" skipped="1" tests="3">
<testcase classname="tests.test_a.TestA" name="test_ok" time="0.1"/>
<testcase classname="tests.test_a.TestA" name="test_skip" time="0"><skipped type="pytest.skip" message="no objdump to cross-check">tests/test_a.py:9: no objdump to cross-check</skipped></testcase>
<testcase classname="tests.test_a.TestA" name="test_bad" time="0"><failure message="AssertionError: 1 != 2">trace</failure></testcase>
</testsuite></testsuites>`
	node := `<?xml version="1.0" encoding="utf-8"?><testsuites>
	<testcase name="ok" time="0.001" classname="test"/>
	<testsuite name="outer" tests="1" skipped="1"><testcase name="inner" time="0" classname="test"><skipped type="skipped" message="no postgres"/></testcase></testsuite>
</testsuites>`
	for _, tc := range []struct {
		name, xml, suite string
		allow            []entry
		good             bool
		want             []result // the results read, unless nil
		say              string   // a line the report must print
	}{
		{"pytest", pytest, "python", []entry{{suite: "python", pkg: "tests.test_a.TestA", test: "test_skip", reason: "objdump"}}, false, []result{
			{"tests.test_a.TestA", "test_ok", "pass", ""},
			{"tests.test_a.TestA", "test_skip", "skip", "no objdump to cross-check tests/test_a.py:9: no objdump to cross-check"},
			{"tests.test_a.TestA", "test_bad", "fail", "AssertionError: 1 != 2\ntrace\n"},
		}, "FAIL python: 3 tests ran"},
		{"node", node, "node", nil, false, []result{
			{"test", "ok", "pass", ""},
			{"test", "inner", "skip", "no postgres"},
		}, "FAIL node: 2 tests ran"},
		{"node, the skip listed", node, "node", []entry{{suite: "node", pkg: "test", test: "inner", reason: "postgres"}}, true, nil, "ok node: 2 tests ran"},
		{"a suite of no test cases", `<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" errors="0" failures="0" skipped="0" tests="0"></testsuite></testsuites>`,
			"python", nil, false, nil, "python: no test ran"},
		{"an empty file", ``, "python", nil, false, nil, "python: no test ran"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := filepath.Join(dir, tc.name+".xml")
			if err := os.WriteFile(f, []byte(tc.xml), 0o644); err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			r := &report{suite: tc.suite, out: &out}
			if err := r.readJUnit(f); err != nil {
				t.Fatal(err)
			}
			if tc.want != nil {
				if diff := cmp.Diff(tc.want, r.results, cmp.AllowUnexported(result{})); diff != "" {
					t.Errorf("results (-want +got):\n%s", diff)
				}
			}
			if good := r.judge(tc.allow); good != tc.good {
				t.Errorf("good %v, want %v:\n%s", good, tc.good, out.String())
			}
			if !strings.Contains(out.String(), tc.say) {
				t.Errorf("the report lacks %q:\n%s", tc.say, out.String())
			}
		})
	}
}

func TestReadAllowList(t *testing.T) {
	dir := t.TempDir()
	write := func(s string) string {
		f := filepath.Join(dir, "skips")
		if err := os.WriteFile(f, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return f
	}
	got, err := readAllowList(write("# a comment\n\nunit\tpkg/a\tTestX/*\tonly a root caller can\n"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]entry{{suite: "unit", pkg: "pkg/a", test: "TestX/*", reason: "only a root caller can", line: 3}}, got, cmp.AllowUnexported(entry{})); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	for _, bad := range []string{"unit pkg/a TestX\n", "unit pkg/a Test[ why\n"} {
		if _, err := readAllowList(write(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	if got, err := readAllowList(filepath.Join(dir, "missing")); err != nil || got != nil {
		t.Errorf("a missing list: %v, %v; want an empty one", got, err)
	}
}

// FuzzReadGo: no input makes the reader fail or panic, and what it
// counts adds up.
func FuzzReadGo(f *testing.F) {
	f.Add(events(mod+"/pkg/a", [3]string{"TestA", "pass", "x\n"}, [3]string{"", "pass", ""}))
	f.Add(`{"Action":"skip","Test":"T","Package":"p"}` + "\n{\n")
	f.Fuzz(func(t *testing.T, in string) {
		r := &report{suite: "unit", module: mod, out: &bytes.Buffer{}}
		if err := r.readGo(strings.NewReader(in)); err != nil {
			return // a line longer than the scanner takes
		}
		r.judge(nil)
		for _, res := range r.results {
			if res.action != "pass" && res.action != "fail" && res.action != "skip" {
				t.Fatalf("a result of action %q", res.action)
			}
		}
	})
}
