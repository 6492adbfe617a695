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
// when a test or a build failed, a skip is not on the list, a package ran
// no test, or nothing ran at all.
//
// A skip is judged by its message: the log entry the test printed last
// before it skipped, which is what t.Skip(args) and t.Skipf print. What
// else the test logged or printed is not its reason. (A test that skips
// with SkipNow has no message of its own: its last log entry stands in.
// A cleanup that logs after the skip becomes its last entry.)
//
// A package without test files ([no test files]) tested nothing: the
// allow-list names each package that is meant to have none, with why, and
// a package whose directory holds test files that the build left out
// (build constraints that exclude them all) fails whether listed or not.
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
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

func main() {
	suite := flag.String("suite", "", "the name of this run in the allow-list (unit, unprivileged, bench, python, node)")
	skips := flag.String("skips", ".ci/skips", "the allow-list of skips")
	junit := flag.String("junit", "", "read this JUnit XML file instead of go test -json on stdin")
	module := flag.String("module", "github.com/initorigin/io-harness-go", "the module path, left off package names")
	root := flag.String("root", ".", "the directory of the module, where a package without test files is looked for test files")
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
	r := &report{suite: *suite, module: *module, root: *root, out: os.Stdout}
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
// reason. An entry whose test is [wholePackage] says instead that pkg has
// no test files, and reason says why.
type entry struct {
	suite, pkg, test, reason string
	line                     int
}

// wholePackage is the test field of an allow-list entry for a package
// that has no test files.
const wholePackage = "-"

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
	root          string // the module's directory
	out           io.Writer
	results       []result
	packages      int // packages in which a test ran
	broken        []string
	untested      []string       // packages that reported [no test files]
	ran           map[string]int // tests that ended, per package, until the package's result
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
	outputs := map[key]*output{}
	r.ran = map[string]int{}
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
			o := outputs[k]
			if o == nil {
				o = &output{}
				outputs[k] = o
			}
			o.write(e.Output)
		case "pass", "fail", "skip":
			o := outputs[k]
			if o == nil {
				o = &output{}
			}
			delete(outputs, k)
			if e.Test == "" {
				r.packageDone(pkg, e.Action, o.all.String())
				continue
			}
			r.ran[pkg]++
			text := o.all.String()
			switch e.Action {
			case "skip":
				text = o.skipMessage()
			case "fail":
				fmt.Fprint(r.out, text)
			}
			r.results = append(r.results, result{pkg, e.Test, e.Action, text})
		}
	}
	var cut []string
	for pkg := range r.ran {
		cut = append(cut, pkg+": tests ended but the package's result never came (the run was cut short)")
	}
	sort.Strings(cut)
	r.broken = append(r.broken, cut...)
	return sc.Err()
}

// output is what one test (or a package, outside its tests) printed.
type output struct {
	all     strings.Builder // everything, up to maxKept
	line    strings.Builder // a line not yet ended (test2json splits a long one)
	entry   strings.Builder // the log entry printed last, while nothing else followed it
	inEntry bool            // the last line was part of entry
}

// logEntry matches the first line of what t.Log and t.Skip print in a
// verbose run: the caller's file and line, indented by four spaces.
// Later lines of the same entry are indented by eight.
var logEntry = regexp.MustCompile(`^    [^ ]+:[0-9]+:( |$)`)

// framing matches the lines go test prints about a test.
var framing = regexp.MustCompile(`^(=== (RUN|PAUSE|CONT|NAME)|--- (PASS|FAIL|SKIP):) `)

// write adds a fragment of output.
func (o *output) write(s string) {
	if o.all.Len() < maxKept {
		o.all.WriteString(s)
	}
	for _, l := range strings.SplitAfter(s, "\n") {
		if o.line.Len() < maxKept {
			o.line.WriteString(l)
		}
		if strings.HasSuffix(l, "\n") {
			o.endLine()
		}
	}
}

// endLine follows the last log entry through the line just ended.
func (o *output) endLine() {
	l := strings.TrimSuffix(o.line.String(), "\n")
	o.line.Reset()
	switch {
	case framing.MatchString(l):
		// go test's own lines (=== RUN, === CONT, --- SKIP) are not output.
	case logEntry.MatchString(l):
		o.entry.Reset()
		o.entry.WriteString(strings.TrimSpace(l))
		o.inEntry = true
	case o.inEntry && strings.HasPrefix(l, "        "):
		if o.entry.Len() < maxKept {
			o.entry.WriteString(" " + strings.TrimSpace(l))
		}
	default:
		// What the test printed itself ends the entry: the skip that
		// follows has no message of its own.
		o.entry.Reset()
		o.inEntry = false
	}
}

// skipMessage is the message of a test that skipped: the log entry it
// printed last, if nothing else followed.
func (o *output) skipMessage() string {
	if o.line.Len() > 0 {
		o.endLine()
	}
	return o.entry.String()
}

// packageDone prints a package's result the way go test does: its ok or
// FAIL line, and on failure what the package printed outside any test
// (a panic, a timeout, TestMain's output). A package's skip is its
// report of no test files.
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
	case action == "skip":
		r.untested = append(r.untested, pkg)
	case action == "fail":
		r.broken = append(r.broken, pkg+": the package failed")
	case r.ran[pkg] == 0:
		// A package with tests that ran none (a TestMain that exits
		// early, a -run that matches nothing) tested nothing.
		r.broken = append(r.broken, pkg+": the package passed without running a test")
	}
	if r.ran[pkg] > 0 {
		r.packages++
	}
	delete(r.ran, pkg)
	fmt.Fprint(r.out, strings.Join(lines, ""))
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

// readJUnit reads every testcase of a JUnit XML file, at any depth. A
// package is a testcase's file or class.
func (r *report) readJUnit(name string) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	packages := map[string]bool{}
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
		packages[pkg] = true
	}
	r.packages += len(packages)
	return nil
}

// judge prints the counts, every skip the allow-list does not name and
// every package that tested nothing, and reports whether the run is good.
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
	broken := r.broken
	for _, pkg := range r.untested {
		e, listed := r.allowedUntested(allow, pkg)
		if listed {
			used[e.line] = true
		}
		if why := r.untestedProblem(pkg, listed); why != "" {
			broken = append(broken, pkg+": "+why)
		}
	}
	good := failed == 0 && len(broken) == 0 && len(unlisted) == 0 && r.packages > 0
	sort.Slice(unlisted, func(i, j int) bool {
		if unlisted[i].pkg != unlisted[j].pkg {
			return unlisted[i].pkg < unlisted[j].pkg
		}
		return unlisted[i].test < unlisted[j].test
	})
	for _, b := range broken {
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
		fmt.Fprintf(r.out, "%s: no test ran\n", r.suite)
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
		if e.suite != r.suite || e.pkg != res.pkg || e.test == wholePackage {
			continue
		}
		if ok, _ := path.Match(e.test, res.test); ok && strings.Contains(res.output, e.reason) {
			return e, true
		}
	}
	return entry{}, false
}

// allowedUntested finds the allow-list entry of a package without test
// files.
func (r *report) allowedUntested(allow []entry, pkg string) (entry, bool) {
	for _, e := range allow {
		if e.suite == r.suite && e.pkg == pkg && e.test == wholePackage {
			return e, true
		}
	}
	return entry{}, false
}

// untestedProblem says what is wrong with a package that reported no test
// files, or "" when nothing is: it must be listed, and its directory must
// hold no test file (one that is there was left out of the build).
func (r *report) untestedProblem(pkg string, listed bool) string {
	dir := filepath.Join(r.root, filepath.FromSlash(pkg))
	des, err := os.ReadDir(dir)
	var tests []string
	for _, de := range des {
		if strings.HasSuffix(de.Name(), "_test.go") {
			tests = append(tests, de.Name())
		}
	}
	switch {
	case len(tests) > 0:
		return fmt.Sprintf("[no test files], but %s holds %d (%s): build constraints left every one out", dir, len(tests), strings.Join(tests, ", "))
	case !listed:
		return fmt.Sprintf("[no test files], and .ci/skips does not list it as a package without tests (%s %s %s WHY)", r.suite, pkg, wholePackage)
	case err != nil:
		return fmt.Sprintf("listed as a package without tests, but its directory cannot be read to check: %v", err)
	}
	return ""
}
