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

func TestCount(t *testing.T) {
	tests := []struct {
		name  string
		in    string
		want  Stats
		words map[string]int
	}{
		{"empty", "", Stats{}, map[string]int{}},
		{"one line", "Hello, world!\n", Stats{Lines: 1, Words: 2, Bytes: 14}, map[string]int{"hello": 1, "world": 1}},
		{"no final newline", "a b\nA", Stats{Lines: 2, Words: 3, Bytes: 5}, map[string]int{"a": 2, "b": 1}},
		{"punctuation only", "-- ...\n", Stats{Lines: 1, Words: 2, Bytes: 7}, map[string]int{}},
		{"unicode", "Grüße, grüße\n", Stats{Lines: 1, Words: 2, Bytes: 17}, map[string]int{"grüße": 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			words := map[string]int{}
			got, err := count(strings.NewReader(tt.in), words)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("stats (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.words, words); diff != "" {
				t.Errorf("words (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRun(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.txt"), filepath.Join(dir, "b.txt")
	os.WriteFile(a, []byte("the cat and the dog\n"), 0o644)
	os.WriteFile(b, []byte("The end.\n"), 0o644)
	var out, errb bytes.Buffer
	if code := run([]string{"-top", "2", a, b}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var got Report
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	want := Report{
		Files: []Stats{
			{Path: a, Lines: 1, Words: 5, Bytes: 20, Top: []WordCount{{"the", 2}, {"and", 1}}},
			{Path: b, Lines: 1, Words: 2, Bytes: 9, Top: []WordCount{{"end", 1}, {"the", 1}}},
		},
		Total: Stats{Lines: 2, Words: 7, Bytes: 29, Top: []WordCount{{"the", 3}, {"and", 1}}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("report (-want +got):\n%s", diff)
	}
	if code := run([]string{filepath.Join(dir, "missing")}, &out, &errb); code != 1 {
		t.Errorf("a missing file: exit %d, want 1", code)
	}
	if code := run(nil, &out, &errb); code != 2 {
		t.Errorf("no files: exit %d, want 2", code)
	}
}

// As a registered tool wordcount takes its arguments as JSON on standard
// input; as a gate, -min-words sets its exit status.
func TestStdinAndMinWords(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "notes.md")
	os.WriteFile(f, []byte("one two three four five\n"), 0o644)
	var out, errb bytes.Buffer
	if code := runWith([]string{"-stdin"}, strings.NewReader(`{"files":["`+f+`"],"top":1}`), &out, &errb); code != 0 {
		t.Fatalf("-stdin: exit %d: %s", code, errb.String())
	}
	var rep Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil || rep.Total.Words != 5 || len(rep.Total.Top) != 1 {
		t.Errorf("report %+v, %v", rep, err)
	}
	for _, c := range []struct {
		args []string
		want int
	}{{[]string{"-min-words", "5", f}, 0}, {[]string{"-min-words", "6", f}, 1}} {
		if code := runWith(c.args, strings.NewReader(""), &out, &errb); code != c.want {
			t.Errorf("%v: exit %d, want %d", c.args, code, c.want)
		}
	}
	if code := runWith([]string{"-stdin"}, strings.NewReader(`{"file":"x"}`), &out, &errb); code != 2 {
		t.Errorf("unknown argument field: exit %d, want 2", code)
	}
}
