package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A watch that comes late, replaying the run from the store, shows the
// same events the run's driver printed: the model's text, each call's
// arguments and each result's output included (the store keeps them once,
// in the step's record, and not in the step's events).
func TestLateWatchHasTheContent(t *testing.T) {
	dir := t.TempDir()
	spec := writeJSON(t, filepath.Join(dir, "spec.json"), map[string]any{
		"task": map[string]any{"goal": "write", "root": t.TempDir()},
		"provider": map[string]any{"name": "scripted", "script": map[string]any{"turns": []any{
			map[string]any{"text": "Writing it.", "tool_calls": []any{
				map[string]any{"name": "write_file", "arguments": map[string]any{"path": "out.txt", "content": "hello"}},
				map[string]any{"name": "read_file", "arguments": map[string]any{"path": "missing.txt"}},
			}},
			map[string]any{"text": "Done."},
		}}},
	})
	store := filepath.Join(dir, "runs.db")
	run := cli(t, dir, "", "run", "--json", "--store", store, spec)
	if run.code != exitOK {
		t.Fatalf("run: %s", run)
	}
	byseq := func(out string) (map[int64]map[string]any, string) {
		m := map[int64]map[string]any{}
		id := ""
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			var ev map[string]any
			if err := json.Unmarshal([]byte(l), &ev); err != nil {
				t.Fatalf("%v: %s", err, l)
			}
			id, _ = ev["run_id"].(string)
			seq, _ := ev["seq"].(float64)
			if seq == 0 {
				continue // a delta or the done event
			}
			delete(ev, "run")
			m[int64(seq)] = ev
		}
		return m, id
	}
	driven, runID := byseq(run.stdout)
	w := cli(t, dir, "", "watch", "--json", "--store", store, runID)
	if w.code != exitOK {
		t.Fatalf("watch: %s", w)
	}
	watched, _ := byseq(w.stdout)
	kinds := map[string]bool{}
	for seq, ev := range driven {
		kinds[ev["kind"].(string)] = true
		if diff := cmp.Diff(ev, watched[seq]); diff != "" {
			t.Errorf("event %d (-driven +watched):\n%s", seq, diff)
		}
	}
	for _, k := range []string{"model_done", "tool_call", "tool_result"} {
		if !kinds[k] {
			t.Errorf("the run had no %s event: %s", k, run.stdout)
		}
	}
	text := cli(t, dir, "", "watch", "--store", store, runID)
	for _, want := range []string{`tool:  write_file {"content":"hello","path":"out.txt"}`, "model: Writing it.", "error: "} {
		if !strings.Contains(text.stdout, want) {
			t.Errorf("watch does not show %q:\n%s", want, text.stdout)
		}
	}
	if strings.Contains(text.stdout, "error: \n") {
		t.Errorf("watch shows an empty error:\n%s", text.stdout)
	}
}
