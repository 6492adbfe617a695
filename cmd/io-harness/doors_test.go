package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Issue 15: --help went to stderr, "help run" printed the general help,
// and flags showed as -json.
func TestHelpOnStdout(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{{"run", "--help"}, {"help", "run"}, {"run", "-h"}} {
		r := cli(t, dir, "", args...)
		if r.code != exitOK || r.stderr != "" || !strings.HasPrefix(r.stdout, "Usage: io-harness run") {
			t.Errorf("%v: %s", args, r)
		}
		if !strings.Contains(r.stdout, "  --store PATH") && !strings.Contains(r.stdout, "  --store string") {
			t.Errorf("%v: no --store in the flags:\n%s", args, r.stdout)
		}
		if regexp.MustCompile(`(?m)^  -[a-z]`).MatchString(r.stdout) {
			t.Errorf("%v: a flag shown with one dash:\n%s", args, r.stdout)
		}
	}
	if r := cli(t, dir, "", "help", "policy", "explain"); r.code != exitOK || !strings.Contains(r.stdout, "POLICY ACT TARGET") {
		t.Errorf("help policy explain: %s", r)
	}
	// A usage error still goes to stderr, with the usage.
	if r := cli(t, dir, "", "run", "--nope"); r.code != exitUsage || r.stdout != "" || !strings.Contains(r.stderr, "Usage: io-harness run") {
		t.Errorf("usage error: %s", r)
	}
}

// Issue 15: run - reads the spec from stdin.
func TestRunSpecFromStdin(t *testing.T) {
	dir := t.TempDir()
	data, err := os.ReadFile(writeFixture(t, dir, "success"))
	if err != nil {
		t.Fatal(err)
	}
	if r := cli(t, dir, string(data), "run", "-"); r.code != exitOK || !strings.Contains(r.stdout, "outcome: success") {
		t.Errorf("run -: %s", r)
	}
	if r := cli(t, dir, string(data), "run", "--approvals", "ask", "-"); r.code != exitUsage || !strings.Contains(r.stderr, "stdin") {
		t.Errorf("run --approvals ask -: %s", r)
	}
	if r := cli(t, dir, "{", "run", "-"); r.code != exitError || !strings.Contains(r.stderr, "the spec on stdin is not valid JSON") {
		t.Errorf("run - with bad JSON: %s", r)
	}
}

// Issue 15: the printed approve and resume commands dropped --store; run
// as printed they answered the wrong store. The printed command now works
// as it is.
func TestHintsKeepStore(t *testing.T) {
	dir := t.TempDir()
	spec := writeFixture(t, dir, "defer_resume")
	store := filepath.Join(t.TempDir(), "my runs.db")
	r := cli(t, dir, "", "run", "--store", store, spec)
	if r.code != exitAwaiting {
		t.Fatalf("%s", r)
	}
	m := regexp.MustCompile(`(?m)^  io-harness (approve .*) --allow`).FindStringSubmatch(r.stdout)
	if m == nil || !strings.Contains(m[1], "--store '"+store+"'") {
		t.Fatalf("the hint does not keep --store:\n%s", r.stdout)
	}
	args := shellWords(t, m[1]+" --allow")
	if a := cli(t, dir, "", args...); a.code != exitOK || !strings.Contains(a.stdout, "outcome: success") {
		t.Errorf("the printed command: %v: %s", args, a)
	}
}

// shellWords splits a command line with single quotes, as printed.
func shellWords(t *testing.T, s string) []string {
	var out []string
	var cur strings.Builder
	in, has := false, false
	for _, r := range s {
		switch {
		case r == '\'':
			in, has = !in, true
		case r == ' ' && !in:
			if has {
				out = append(out, cur.String())
			}
			cur.Reset()
			has = false
		default:
			cur.WriteRune(r)
			has = true
		}
	}
	if has {
		out = append(out, cur.String())
	}
	return out
}

// Issue 15: a spec nested too deep said "not a JSON object".
func TestSpecNestedTooDeep(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "deep.json")
	os.WriteFile(p, []byte(`{"task":`+strings.Repeat("[", 5000)+strings.Repeat("]", 5000)+`}`), 0o644)
	r := cli(t, dir, "", "run", p)
	if r.code != exitError || !strings.Contains(r.stderr, "deep; at most 1000") {
		t.Errorf("%s", r)
	}
}

// Issue 15: a spec's "policy": "default" was refused though policy
// explain accepts it.
func TestSpecPolicyByName(t *testing.T) {
	dir := t.TempDir()
	spec := writeFixture(t, dir, "approve")
	data, _ := os.ReadFile(spec)
	named := regexp.MustCompile(`(?s)"policy": \{.*\}\s*\}\s*$`).ReplaceAll(data, []byte(`"policy": "default"}`))
	os.WriteFile(spec, named, 0o644)
	// The default policy asks about the write; piped, the ask defers.
	if r := cli(t, dir, "", "run", spec); r.code != exitAwaiting {
		t.Errorf("%s\n%s", r, named)
	}
}
