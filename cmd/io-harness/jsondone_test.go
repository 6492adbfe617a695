package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/initorigin/io-harness-go/pkg/harness/verify"
)

// schemaDef compiles docs/spec.schema.json with its root at one of its
// definitions.
func schemaDef(t *testing.T, name string) *verify.Schema {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "docs", "spec.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	doc["$ref"] = "#/$defs/" + name
	data, _ = json.Marshal(doc)
	s, err := verify.CompileSchema(data)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Every run, resume, approve and watch with --json ends with exactly one done event,
// valid against the published schema, also when the run cannot start: a
// spec that is missing, not JSON or invalid, a store that cannot be
// opened, a run that is not there, a usage mistake. Such a done has
// status "error" and says why; the exit code is the one stderr's line
// has.
func TestJSONEndsWithOneDone(t *testing.T) {
	dir := t.TempDir()
	event, done := schemaDef(t, "Event"), schemaDef(t, "DoneEvent")
	good := writeFixture(t, dir, "success")
	bad := writeJSON(t, filepath.Join(dir, "bad.json"), map[string]any{"task": map[string]any{"goal": ""}, "provider": map[string]any{"name": "scripted"}})
	notJSON := filepath.Join(dir, "notjson.json")
	os.WriteFile(notJSON, []byte("{not json"), 0o644)
	blocker := filepath.Join(dir, "file")
	os.WriteFile(blocker, nil, 0o644)
	store := filepath.Join(dir, "runs.db")
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		status string
	}{
		{"success", []string{"run", "--json", "--store", store, good}, exitOK, "ok"},
		{"missing spec", []string{"run", "--json", "--store", store, filepath.Join(dir, "nope.json")}, exitError, "error"},
		{"not JSON", []string{"run", "--json", "--store", store, notJSON}, exitError, "error"},
		{"invalid spec", []string{"run", "--json", "--store", store, bad}, exitError, "error"},
		{"store cannot be opened", []string{"run", "--json", "--store", filepath.Join(blocker, "runs.db"), good}, exitError, "error"},
		{"bad --approvals", []string{"run", "--json", "--approvals", "maybe", "--store", store, good}, exitUsage, "error"},
		{"no spec", []string{"run", "--json", "--store", store}, exitUsage, "error"},
		{"resume of no run", []string{"resume", "--json", "--store", store, good, "run_0000000000000000000000"}, exitError, "error"},
		{"approve without --spec", []string{"approve", "--json", "--store", store, "--allow", "run_0000000000000000000000", "req_1"}, exitUsage, "error"},
		{"watch of no store", []string{"watch", "--json", "--store", filepath.Join(dir, "none.db"), "run_0000000000000000000000"}, exitError, "error"},
		{"watch of no run", []string{"watch", "--json", "--store", store, "run_0000000000000000000000"}, exitError, "error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := cli(t, dir, "", tc.args...)
			if r.code != tc.code {
				t.Errorf("exit %d, want %d: %s", r.code, tc.code, r)
			}
			lines := strings.Split(strings.TrimRight(r.stdout, "\n"), "\n")
			var dones []string
			for _, l := range lines {
				if err := event.Check([]byte(l)); err != nil {
					t.Errorf("not an event of the schema: %v\n%s", err, l)
				}
				var ev struct{ Kind string }
				json.Unmarshal([]byte(l), &ev)
				if ev.Kind == "done" {
					dones = append(dones, l)
				}
			}
			if len(dones) != 1 || dones[0] != lines[len(lines)-1] {
				t.Fatalf("want exactly one done event, last: %s", r)
			}
			if err := done.Check([]byte(dones[0])); err != nil {
				t.Errorf("done: %v\n%s", err, dones[0])
			}
			var d struct {
				Status string
				Error  *struct{ Code, Message string }
			}
			json.Unmarshal([]byte(dones[0]), &d)
			if d.Status != tc.status || (tc.status == "error") != (d.Error != nil && d.Error.Message != "") {
				t.Errorf("done %s, want status %s with an error exactly when it is error", dones[0], tc.status)
			}
		})
	}
}

// The CLI's front door refuses a value the published schema does not
// have, naming its field: a scripted failure of kind "server_error" (the
// schema's is "server") used to run.
func TestRunRefusesAValueTheSchemaLacks(t *testing.T) {
	dir := t.TempDir()
	spec := writeJSON(t, filepath.Join(dir, "spec.json"), map[string]any{
		"task":     map[string]any{"goal": "g", "root": t.TempDir()},
		"provider": map[string]any{"name": "scripted", "script": map[string]any{"turns": []any{map[string]any{"text": "x", "fail": map[string]any{"kind": "server_error"}}}}},
	})
	r := cli(t, dir, "", "run", "--store", filepath.Join(dir, "runs.db"), spec)
	if r.code != exitError || !strings.Contains(r.stderr, "field: spec.provider.script.turns[0].fail.kind") || !strings.Contains(r.stderr, `"server_error"`) {
		t.Errorf("%s", r)
	}
}
