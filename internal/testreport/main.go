// Command testreport reads a test run's results, prints what failed, and
// counts what ran and what skipped, failing the run when a test skipped
// that the checked-in allow-list (.ci/skips) does not name with its
// reason. A skip is a test that did not run: one that skips because a
// tool is missing looks like a pass unless it is counted.
//
// It reads `go test -json` on its standard input, or, with -junit, a
// JUnit XML file (pytest's --junitxml, node --test's junit reporter):
//
//	go test -json ./... | go run ./internal/testreport -suite unit
//	go run ./internal/testreport -suite python -junit report.xml
//
// Go output is passed through as `go test` prints it without -v: each
// package's result line, and the whole output of every test that failed.
// The last line says how many tests ran and skipped. The exit status is 1
// when a test or a build failed, a skip is not on the list, or nothing
// ran at all.
package main

import (
	"bufio"
	"encoding/json"
	"encoding/xml"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
)

func main() {
	suite := flag.String("suite", "", "the name of this run in the allow-list (unit, unprivileged, bench, python, node)")
	skips := flag.String("skips", ".ci/skips", "the allow-list of skips")
	junit := flag.String("junit", "", "read this JUnit XML file instead of go test -json on stdin")
	module := flag.String("module", "github.com/initorigin/io-harness-go", "the module path, left off package names")
	flag.Parse()
	if *suite == "" {
		fmt.Fprintln(os.Stderr, "testreport: -suite is required")
		os.Exit(2)
	}
	allow, err := readAllowList(*skips)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testreport:", err)
		os.Exit(2)
	}
	r := &report{suite: *suite, module: *module, out: os.Stdout}
	if *junit != "" {
		err = r.readJUnit(*junit)
	} else {
		err = r.readGo(os.Stdin)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "testreport:", err)
		os.Exit(2)
	}
	if !r.judge(allow) {
		os.Exit(1)
	}
}

// entry is one line of the allow-list: in suite, a test of pkg whose name
// matches the path.Match pattern test may skip when its message contains
// reason.
type entry struct {
	suite, pkg, test, reason string
	line                     int
}

// readAllowList reads the allow-list: one skip per line, as
// "SUITE PACKAGE TEST REASON…" separated by white space (the reason is
// the rest of the line); # starts a comment. A missing file is an empty
// list.
func readAllowList(name string) ([]entry, error) {
	b, err := os.ReadFile(name)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []entry
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 4 {
			return nil, fmt.Errorf("%s:%d: want SUITE PACKAGE TEST REASON", name, i+1)
		}
		if _, err := path.Match(f[2], ""); err != nil {
			return nil, fmt.Errorf("%s:%d: the test pattern %q: %v", name, i+1, f[2], err)
		}
		out = append(out, entry{suite: f[0], pkg: f[1], test: f[2], reason: strings.Join(f[3:], " "), line: i + 1})
	}
	return out, nil
}

// result is one test's ending.
type result struct {
	pkg, test string
	action    string // pass, fail or skip
	output    string // for a skip, its message; for a failure, all it printed
}

// report accumulates one run.
type report struct {
	suite, module string
	out           io.Writer
	results       []result
	packages      int // package results seen
	broken        []string
	ran           map[string]int // tests that ended, per package
}

// event is one line of go test -json (cmd/test2json).
type event struct {
	Action     string
	Package    string
	Test       string
	Output     string
	ImportPath string
}

// maxKept bounds the output kept per test.
const maxKept = 1 << 20

// readGo reads go test -json from in. A line that is not an event (a
// download message, a vet complaint) is printed as it is.
func (r *report) readGo(in io.Reader) error {
	type key struct{ pkg, test string }
	outputs := map[key]*strings.Builder{}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil || e.Action == "" {
			fmt.Fprintf(r.out, "%s\n", line)
			continue
		}
		pkg := strings.TrimPrefix(strings.TrimPrefix(e.Package, r.module), "/")
		if pkg == "" && e.Package != "" {
			pkg = "."
		}
		k := key{pkg, e.Test}
		switch e.Action {
		case "build-output":
			fmt.Fprint(r.out, e.Output)
		case "build-fail":
			r.broken = append(r.broken, e.ImportPath+": build failed")
		case "output":
			b := outputs[k]
			if b == nil {
				b = &strings.Builder{}
				outputs[k] = b
			}
			if b.Len() < maxKept {
				b.WriteString(e.Output)
			}
		case "pass", "fail", "skip":
			var text string
			if b := outputs[k]; b != nil {
				text = b.String()
				delete(outputs, k)
			}
			if e.Test == "" {
				r.packages++
				r.packageDone(pkg, e.Action, text)
				continue
			}
			if r.ran == nil {
				r.ran = map[string]int{}
			}
			r.ran[pkg]++
			if e.Action == "skip" {
				text = skipMessage(text)
			}
			if e.Action == "fail" {
				fmt.Fprint(r.out, text)
			}
			r.results = append(r.results, result{pkg, e.Test, e.Action, text})
		}
	}
	return sc.Err()
}

// packageDone prints a package's result the way go test does: its ok or
// FAIL line, and on failure what the package printed outside any test
// (a panic, a timeout, TestMain's output).
func (r *report) packageDone(pkg, action, text string) {
	var lines []string
	for _, l := range strings.SplitAfter(text, "\n") {
		switch {
		case l == "":
		case action == "fail":
			lines = append(lines, l)
		case strings.HasPrefix(l, "ok ") || strings.HasPrefix(l, "?") || strings.HasPrefix(l, "--- "):
			lines = append(lines, l)
		}
	}
	switch {
	case action == "fail":
		r.broken = append(r.broken, pkg+": the package failed")
	case action == "pass" && r.ran[pkg] == 0:
		// A package with tests that ran none (a TestMain that exits
		// early, a -run that matches nothing) tested nothing.
		r.broken = append(r.broken, pkg+": the package passed without running a test")
	}
	fmt.Fprint(r.out, strings.Join(lines, ""))
}

// skipMessage is what a skipped test printed, less the framing lines
// (=== RUN, --- SKIP).
func skipMessage(out string) string {
	var keep []string
	for _, l := range strings.Split(out, "\n") {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "=== ") || strings.HasPrefix(t, "--- SKIP") {
			continue
		}
		keep = append(keep, t)
	}
	return strings.Join(keep, " ")
}

// junitCase is a testcase element of JUnit XML, wherever it nests.
type junitCase struct {
	Name      string `xml:"name,attr"`
	ClassName string `xml:"classname,attr"`
	File      string `xml:"file,attr"`
	Skipped   *struct {
		Message string `xml:"message,attr"`
		Text    string `xml:",chardata"`
	} `xml:"skipped"`
	Failure []junitProblem `xml:"failure"`
	Error   []junitProblem `xml:"error"`
}

type junitProblem struct {
	Message string `xml:"message,attr"`
	Text    string `xml:",chardata"`
}

// readJUnit reads every testcase of a JUnit XML file, at any depth.
func (r *report) readJUnit(name string) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	dec := xml.NewDecoder(f)
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		se, ok := tok.(xml.StartElement)
		if !ok || se.Name.Local != "testcase" {
			continue
		}
		var c junitCase
		if err := dec.DecodeElement(&c, &se); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		pkg := c.ClassName
		if c.File != "" {
			pkg = c.File
		}
		res := result{pkg: pkg, test: c.Name, action: "pass"}
		switch {
		case len(c.Failure)+len(c.Error) > 0:
			res.action = "fail"
			for _, p := range append(c.Failure, c.Error...) {
				res.output += p.Message + "\n" + p.Text + "\n"
			}
			fmt.Fprintf(r.out, "--- FAIL: %s %s\n%s", pkg, c.Name, res.output)
		case c.Skipped != nil:
			res.action = "skip"
			res.output = strings.TrimSpace(c.Skipped.Message + " " + c.Skipped.Text)
		}
		r.results = append(r.results, res)
	}
	r.packages++
	return nil
}

// judge prints the counts and every skip the allow-list does not name,
// and reports whether the run is good.
func (r *report) judge(allow []entry) bool {
	var passed, failed, skipped, allowed int
	var unlisted []result
	used := map[int]bool{}
	for _, res := range r.results {
		switch res.action {
		case "pass":
			passed++
		case "fail":
			failed++
		case "skip":
			skipped++
			if e, ok := r.allowed(allow, res); ok {
				allowed++
				used[e.line] = true
			} else {
				unlisted = append(unlisted, res)
			}
		}
	}
	good := failed == 0 && len(r.broken) == 0 && len(unlisted) == 0 && r.packages > 0
	sort.Slice(unlisted, func(i, j int) bool {
		if unlisted[i].pkg != unlisted[j].pkg {
			return unlisted[i].pkg < unlisted[j].pkg
		}
		return unlisted[i].test < unlisted[j].test
	})
	for _, b := range r.broken {
		fmt.Fprintf(r.out, "FAIL %s\n", b)
	}
	if len(unlisted) > 0 {
		fmt.Fprintf(r.out, "%s: %d skips are not on the allow-list (.ci/skips); install what they need, or list them with why:\n", r.suite, len(unlisted))
		for _, u := range unlisted {
			fmt.Fprintf(r.out, "  %s\t%s\t%s\t%s\n", r.suite, u.pkg, u.test, u.output)
		}
	}
	for _, e := range allow {
		if e.suite == r.suite && !used[e.line] {
			fmt.Fprintf(r.out, "%s: note: .ci/skips:%d (%s %s) matched no skip in this run\n", r.suite, e.line, e.pkg, e.test)
		}
	}
	if r.packages == 0 {
		fmt.Fprintf(r.out, "%s: no test results were read\n", r.suite)
	}
	verdict := "ok"
	if !good {
		verdict = "FAIL"
	}
	fmt.Fprintf(r.out, "%s %s: %d tests ran: %d passed, %d failed, %d skipped (%d on the allow-list)\n",
		verdict, r.suite, passed+failed+skipped, passed, failed, skipped, allowed)
	return good
}

// allowed finds the allow-list entry for a skip.
func (r *report) allowed(allow []entry, res result) (entry, bool) {
	for _, e := range allow {
		if e.suite != r.suite || e.pkg != res.pkg {
			continue
		}
		if ok, _ := path.Match(e.test, res.test); ok && strings.Contains(res.output, e.reason) {
			return e, true
		}
	}
	return entry{}, false
}
