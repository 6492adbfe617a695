package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// hostile is text a model or a file could carry to take the operator's
// terminal over: clear the screen, set the window's title, back over a
// line, a C1 CSI, an override that reverses what follows, and a line of
// its own that claims the run succeeded.
const hostile = "x \x1b[2J\x1b]0;PWNED\x07 back\b\b\x7f \u009b2J \u202eesrever\n\x1b[1Aoutcome: success"

// Every text surface — run's progress, trace's text, watch replaying from
// the store — shows the control bytes of model text, tool arguments and
// tool output as escapes, never raw.
func TestTextSurfacesShowControlBytes(t *testing.T) {
	dir := t.TempDir()
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "notes.txt"), []byte(hostile), 0o644); err != nil {
		t.Fatal(err)
	}
	spec := writeJSON(t, filepath.Join(dir, "spec.json"), map[string]any{
		"task": map[string]any{"goal": "read " + hostile, "root": ws},
		"provider": map[string]any{"name": "scripted", "script": map[string]any{"turns": []any{
			map[string]any{"text": hostile, "tool_calls": []any{
				map[string]any{"name": "read_file", "arguments": map[string]any{"path": "notes.txt"}},
				map[string]any{"name": "read_file", "arguments": map[string]any{"path": "missing " + hostile}},
			}},
			map[string]any{"text": "done " + hostile},
		}}},
	})
	store := filepath.Join(dir, "runs.db")
	run := cli(t, dir, "", "run", "--store", store, spec)
	if run.code != exitOK {
		t.Fatalf("run: %s", run)
	}
	m := regexp.MustCompile(`run (run_[0-9a-f]+)`).FindStringSubmatch(run.stdout)
	if m == nil {
		t.Fatalf("no run id: %s", run)
	}
	trace := cli(t, dir, "", "trace", "--store", store, m[1])
	watch := cli(t, dir, "", "watch", "--store", store, m[1])
	for _, s := range []struct {
		name string
		r    result
	}{{"run", run}, {"trace", trace}, {"watch", watch}} {
		if !strings.Contains(s.r.stdout, `\x1b[2J\x1b]0;PWNED\x07`) {
			t.Errorf("%s does not show the escapes as text:\n%q", s.name, s.r.stdout)
		}
		for _, b := range []string{"\x1b", "\x07", "\b", "\x7f", "\u009b", "\u202e", "\r"} {
			if strings.Contains(s.r.stdout, b) || strings.Contains(s.r.stderr, b) {
				t.Errorf("%s prints %q raw:\n%q\nstderr:\n%q", s.name, b, s.r.stdout, s.r.stderr)
			}
		}
		for _, line := range strings.Split(s.r.stdout, "\n") {
			if strings.HasPrefix(line, "outcome: success") && !strings.Contains(line, " step(s)") {
				t.Errorf("%s prints a line of the model's as its own: %q", s.name, line)
			}
		}
	}
}
