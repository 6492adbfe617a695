package tool

import (
	"strings"
	"testing"
)

func TestEditFile(t *testing.T) {
	const code = "package a\n\nfunc f() int {\n\treturn 1\n}\n\nfunc g() int {\n\treturn 1\n}\n\nfunc h() int {\n\treturn 1\n}\n"
	tests := []struct {
		name    string
		args    any
		want    string // the exact output
		isError bool
		has     []string
		content string // the file after the call; "" means unchanged
	}{
		{name: "unique", args: obj{"path": "a.go", "old_text": "func g() int {\n\treturn 1", "new_text": "func g() int {\n\treturn 2"},
			want:    "edited a.go: replaced 1 occurrence, at line 7",
			content: strings.Replace(code, "func g() int {\n\treturn 1", "func g() int {\n\treturn 2", 1)},
		{name: "delete", args: obj{"path": "a.go", "old_text": "package a\n\n", "new_text": ""},
			want: "edited a.go: replaced 1 occurrence, at line 1", content: strings.TrimPrefix(code, "package a\n\n")},
		{name: "ambiguous", args: obj{"path": "a.go", "old_text": "\treturn 1\n", "new_text": "\treturn 2\n"}, isError: true,
			want: "old_text occurs 3 times in a.go, at lines 4, 8, 12; include more surrounding lines to make it unique, or set replace_all to true to replace every occurrence"},
		{name: "replace all", args: obj{"path": "a.go", "old_text": "return 1", "new_text": "return 0", "replace_all": true},
			want: "edited a.go: replaced 3 occurrences, at lines 4, 8, 12", content: strings.ReplaceAll(code, "return 1", "return 0")},
		{name: "replace all of one", args: obj{"path": "a.go", "old_text": "package a", "new_text": "package b", "replace_all": true},
			want: "edited a.go: replaced 1 occurrence, at line 1", content: strings.Replace(code, "package a", "package b", 1)},
		{name: "absent", args: obj{"path": "a.go", "old_text": "func z()", "new_text": "func y()"}, isError: true,
			want: "old_text was not found in a.go; read the file again and copy the text exactly"},
		{name: "absent but whitespace differs", args: obj{"path": "a.go", "old_text": "func h() int {\n    return 1\n}", "new_text": "x"}, isError: true,
			has: []string{"old_text was not found in a.go exactly", "differs from it only in whitespace", "lines 11-13"}},
		{name: "absent but spacing differs on one line", args: obj{"path": "a.go", "old_text": "func  f()  int", "new_text": "x"}, isError: true,
			has: []string{"only in whitespace", "at line 3;"}},
		{name: "crlf file", args: obj{"path": "crlf.txt", "old_text": "two\r\n", "new_text": "2\r\n"},
			want: "edited crlf.txt: replaced 1 occurrence, at line 2", content: "one\r\n2\r\nthree\r\n"},
		{name: "crlf file edited with lf", args: obj{"path": "crlf.txt", "old_text": "one\ntwo", "new_text": "x"}, isError: true,
			has: []string{"only in whitespace", "lines 1-2"}},
		{name: "empty old_text", args: obj{"path": "a.go", "old_text": "", "new_text": "x"}, isError: true, has: []string{`"old_text"`, "empty", "write_file"}},
		{name: "same text", args: obj{"path": "a.go", "old_text": "f", "new_text": "f"}, isError: true, has: []string{`"new_text"`, "nothing to change"}},
		{name: "missing new_text", args: obj{"path": "a.go", "old_text": "f"}, isError: true, has: []string{`"new_text"`, "missing required field"}},
		{name: "replace_all not a bool", args: `{"path": "a.go", "old_text": "f", "new_text": "g", "replace_all": "yes"}`, isError: true,
			has: []string{`"replace_all"`, "a boolean", "got string"}},
		{name: "missing file", args: obj{"path": "nope.go", "old_text": "a", "new_text": "b"}, isError: true, want: "nope.go: no such file or directory"},
		{name: "binary file", args: obj{"path": "bin", "old_text": "a", "new_text": "b"}, isError: true, has: []string{"binary file, 3 bytes"}},
		{name: "directory", args: obj{"path": "d", "old_text": "a", "new_text": "b"}, isError: true, has: []string{"d is a directory"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files := map[string]string{"a.go": code, "crlf.txt": "one\r\ntwo\r\nthree\r\n", "bin": "a\x00b", "d/": ""}
			dir, env := newEnv(t, files)
			r := call(t, env, "edit_file", tt.args)
			if r.IsError != tt.isError {
				t.Fatalf("IsError = %v, want %v: %q", r.IsError, tt.isError, r.Output)
			}
			if tt.want != "" && r.Output != tt.want {
				t.Errorf("got  %q\nwant %q", r.Output, tt.want)
			}
			for _, h := range tt.has {
				if !strings.Contains(r.Output, h) {
					t.Errorf("output %q does not contain %q", r.Output, h)
				}
			}
			for name, before := range files {
				if strings.HasSuffix(name, "/") {
					continue
				}
				want := before
				if tt.content != "" && name == tt.args.(obj)["path"] {
					want = tt.content
				}
				if got := readOut(t, dir, name); got != want {
					t.Errorf("%s = %q, want %q", name, got, want)
				}
			}
			assertNoTemp(t, dir)
		})
	}
}

func TestEditFileCopiedFromReadFile(t *testing.T) {
	_, env := newEnv(t, map[string]string{"f.txt": "alpha\n\tbeta  gamma\r\ndelta ✓\n"})
	r := call(t, env, "read_file", obj{"path": "f.txt", "start_line": 2, "end_line": 3})
	_, body, _ := strings.Cut(r.Output, "\n")
	if r := call(t, env, "edit_file", obj{"path": "f.txt", "old_text": body, "new_text": "replaced\n"}); r.IsError {
		t.Fatalf("text copied from read_file does not match: %s", r.Output)
	}
	if r := call(t, env, "read_file", obj{"path": "f.txt"}); r.Output != "f.txt (lines 1-2 of 2)\nalpha\nreplaced\n" {
		t.Errorf("got %q", r.Output)
	}
}
