package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// docExample is a fenced block of README.md or docs/*.md.
type docExample struct {
	file, mark, body string
	line             int
	claim            string // the prose just before it
}

// docExamples returns every fenced block of README.md and docs/*.md, with
// the marker (<!-- example: KIND -->) on the line before its fence, if any.
func docExamples(t *testing.T) []docExample {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	files = append(files, filepath.Join("..", "..", "README.md"))
	marker := regexp.MustCompile(`^<!-- example: (\S+) -->$`)
	var out []docExample
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(data), "\n")
		var prose []string
		for i := 0; i < len(lines); i++ {
			if !strings.HasPrefix(lines[i], "```") {
				if strings.TrimSpace(lines[i]) != "" && !marker.MatchString(lines[i]) {
					prose = append(prose, lines[i])
				}
				continue
			}
			ex := docExample{file: filepath.Base(f), line: i + 1}
			if i > 0 {
				if m := marker.FindStringSubmatch(lines[i-1]); m != nil {
					ex.mark = m[1]
				}
			}
			ex.claim = strings.Join(prose[max(0, len(prose)-4):], " ")
			var body []string
			for i++; i < len(lines) && !strings.HasPrefix(lines[i], "```"); i++ {
				body = append(body, lines[i])
			}
			ex.body = strings.Join(body, "\n") + "\n"
			out = append(out, ex)
			prose = nil
		}
	}
	return out
}

// Every example of README.md and docs/ that claims to run is run here
// exactly as written: a block marked <!-- example: spec --> is saved as
// spec.json in an empty directory and io-harness run spec.json there must
// end in success. A block whose prose says it runs ("runs offline", "runs
// as written") and carries no marker fails the test, so a new claim cannot
// go unchecked.
func TestDocExamplesRunAsWritten(t *testing.T) {
	claims := regexp.MustCompile(`(?i)\bruns? (offline|as written)\b|example that runs|\bA test runs it\b`)
	ran := 0
	for _, ex := range docExamples(t) {
		where := ex.file + ":" + itoa(ex.line)
		switch ex.mark {
		case "":
			if claims.MatchString(ex.claim) {
				t.Errorf("%s: the prose says the example runs, but it has no <!-- example: KIND --> marker: %q", where, ex.claim)
			}
		case "spec":
			ran++
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "spec.json"), []byte(ex.body), 0o644); err != nil {
				t.Fatal(err)
			}
			r := cli(t, dir, "", "run", "spec.json")
			if r.code != exitOK || !strings.Contains(r.stdout, "outcome: success") {
				t.Errorf("%s: io-harness run spec.json: %s", where, r)
			}
		default:
			t.Errorf("%s: unknown example kind %q", where, ex.mark)
		}
	}
	if ran == 0 {
		t.Errorf("no example marked to run: the markers were lost")
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
