package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
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

func TestGoReport(t *testing.T) {
	allow := []entry{
		{suite: "unit", pkg: "pkg/a", test: "TestRoot/*", reason: "only root", line: 1},
		{suite: "other", pkg: "pkg/a", test: "TestElsewhere", reason: "x", line: 2},
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
			input: events(mod+"/pkg/a", [3]string{"TestElsewhere", "skip", "    x\n"}, [3]string{"TestB", "pass", ""},
				[3]string{"", "pass", ""}),
			good: false,
			want: []string{"1 skips are not on the allow-list"},
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
			name:  "a package without test files",
			input: events(mod+"/pkg/b", [3]string{"", "skip", "?   \t" + mod + "/pkg/b\t[no test files]\n"}) + events(mod+"/pkg/a", [3]string{"TestA", "pass", ""}, [3]string{"", "pass", ""}),
			good:  true,
			want:  []string{"[no test files]"},
		},
		{
			name:  "a build failure",
			input: `{"ImportPath":"x","Action":"build-output","Output":"x.go:1: syntax error\n"}` + "\n" + `{"ImportPath":"x","Action":"build-fail"}` + "\n" + events(mod+"/pkg/a", [3]string{"TestA", "pass", ""}, [3]string{"", "pass", ""}),
			good:  false,
			want:  []string{"x.go:1: syntax error", "FAIL x: build failed"},
		},
		{
			name:  "nothing at all",
			input: "",
			good:  false,
			want:  []string{"unit: no test results were read"},
		},
		{
			name:  "lines that are not events pass through",
			input: "go: downloading example.com/m v1.0.0\n" + events(mod+"/pkg/a", [3]string{"TestA", "pass", ""}, [3]string{"", "pass", ""}),
			good:  true,
			want:  []string{"go: downloading example.com/m v1.0.0"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			r := &report{suite: "unit", module: mod, out: &out}
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
		want             []result
	}{
		{"pytest", pytest, "python", []entry{{suite: "python", pkg: "tests.test_a.TestA", test: "test_skip", reason: "objdump"}}, false, []result{
			{"tests.test_a.TestA", "test_ok", "pass", ""},
			{"tests.test_a.TestA", "test_skip", "skip", "no objdump to cross-check tests/test_a.py:9: no objdump to cross-check"},
			{"tests.test_a.TestA", "test_bad", "fail", "AssertionError: 1 != 2\ntrace\n"},
		}},
		{"node", node, "node", nil, false, []result{
			{"test", "ok", "pass", ""},
			{"test", "inner", "skip", "no postgres"},
		}},
		{"node, the skip listed", node, "node", []entry{{suite: "node", pkg: "test", test: "inner", reason: "postgres"}}, true, nil},
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
