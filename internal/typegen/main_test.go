package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The generated files are what the schema says now: a schema change
// without go run ./internal/typegen fails here (make test runs it).
func TestGeneratedFilesAreCurrent(t *testing.T) {
	root := filepath.Join("..", "..")
	data, err := os.ReadFile(filepath.Join(root, schemaFile))
	if err != nil {
		t.Fatal(err)
	}
	files, err := Generate(data)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			t.Fatalf("%v (run go run ./internal/typegen)", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale: run go run ./internal/typegen", name)
		}
	}
	// Negative control: a changed schema changes the output.
	changed, err := Generate(bytes.Replace(data, []byte(`"max_steps"`), []byte(`"max_stepz"`), 1))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(changed[tsFile], files[tsFile]) || bytes.Equal(changed[pyFile], files[pyFile]) {
		t.Error("control: a changed field did not change the generated files")
	}
}

// What the generator cannot say is an error, not a silent Any.
func TestGeneratorRefusesWhatItCannotSay(t *testing.T) {
	for _, tc := range []struct{ name, doc, want string }{
		{"unknown keyword", `{"$defs":{"A":{"type":"string","patternProperties":{}}}}`, "patternProperties"},
		{"inline record", `{"$defs":{"A":{"type":"object","properties":{"b":{"type":"object","properties":{"c":{"type":"string"}}}}}}}`, "must be a $defs entry"},
		{"dangling ref", `{"$defs":{"A":{"type":"object","properties":{"b":{"$ref":"#/$defs/B"}}}}}`, "names no definition"},
	} {
		if _, err := Generate([]byte(tc.doc)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}
