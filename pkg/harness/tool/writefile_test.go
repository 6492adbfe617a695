package tool

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func TestWriteFile(t *testing.T) {
	tests := []struct {
		name    string
		args    any
		want    string
		isError bool
		has     []string
		file    string // a file whose content to check
		content string
	}{
		{name: "create", args: obj{"path": "new.txt", "content": "hello\n"}, want: "created new.txt (6 bytes, 1 line)", file: "new.txt", content: "hello\n"},
		{name: "create with parents", args: obj{"path": "a/b/c.txt", "content": "x\ny"}, want: "created a/b/c.txt (3 bytes, 2 lines)", file: "a/b/c.txt", content: "x\ny"},
		{name: "overwrite", args: obj{"path": "old.txt", "content": "new\n"}, want: "wrote old.txt (4 bytes, 1 line)", file: "old.txt", content: "new\n"},
		{name: "empty content", args: obj{"path": "empty.txt", "content": ""}, want: "created empty.txt (0 bytes, 0 lines)", file: "empty.txt", content: ""},
		{name: "backslash path", args: obj{"path": `dir\w.txt`, "content": "w"}, want: "created dir/w.txt (1 byte, 1 line)", file: "dir/w.txt", content: "w"},
		{name: "a directory", args: obj{"path": "dir", "content": "x"}, isError: true, has: []string{"dir is a directory"}},
		{name: "the root", args: obj{"path": ".", "content": "x"}, isError: true, has: []string{"workspace root"}},
		{name: "under a file", args: obj{"path": "old.txt/x", "content": "x"}, isError: true, has: []string{"old.txt/x"}},
		{name: "missing content", args: obj{"path": "m.txt"}, isError: true, has: []string{`"content"`, "missing required field", "a string"}},
		{name: "null content", args: obj{"path": "m.txt", "content": nil}, isError: true, has: []string{`"content"`, "missing required field"}},
		{name: "content not a string", args: `{"path": "m.txt", "content": 42}`, isError: true, has: []string{`"content"`, "expected a string, got number"}},
		{name: "path not a string", args: `{"path": ["m.txt"], "content": ""}`, isError: true, has: []string{`"path"`, "expected a string, got array"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir, env := newEnv(t, map[string]string{"old.txt": "old\n", "dir/": ""})
			r := call(t, env, "write_file", tt.args)
			if r.IsError != tt.isError {
				t.Fatalf("IsError = %v, want %v: %q", r.IsError, tt.isError, r.Output)
			}
			if tt.want != "" && r.Output != tt.want {
				t.Errorf("got %q, want %q", r.Output, tt.want)
			}
			for _, h := range tt.has {
				if !strings.Contains(r.Output, h) {
					t.Errorf("output %q does not contain %q", r.Output, h)
				}
			}
			if tt.file != "" {
				if got := readOut(t, dir, tt.file); got != tt.content {
					t.Errorf("%s = %q, want %q", tt.file, got, tt.content)
				}
			}
			assertNoTemp(t, dir)
		})
	}
}

func TestWriteFileKeepsMode(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("Unix permission bits")
	}
	dir, env := newEnv(t, map[string]string{"run.sh": "#!/bin/sh\n", "secret.txt": "s\n"})
	for name, mode := range map[string]os.FileMode{"run.sh": 0o755, "secret.txt": 0o600} {
		p := filepath.Join(dir, name)
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		if r := call(t, env, "write_file", obj{"path": name, "content": "changed\n"}); r.IsError {
			t.Fatal(r.Output)
		}
		if r := call(t, env, "edit_file", obj{"path": name, "old_text": "changed", "new_text": "edited"}); r.IsError {
			t.Fatal(r.Output)
		}
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != mode {
			t.Errorf("%s: mode %v, want %v", name, fi.Mode().Perm(), mode)
		}
		if got := readOut(t, dir, name); got != "edited\n" {
			t.Errorf("%s = %q", name, got)
		}
	}
	assertNoTemp(t, dir)
}

func TestIdempotent(t *testing.T) {
	want := map[string]bool{"read_file": true, "write_file": true, "edit_file": false, "list_dir": true, "grep": true, "find": true}
	for _, tl := range Workspace() {
		if got := IsIdempotent(tl); got != want[tl.Spec().Name] {
			t.Errorf("IsIdempotent(%s) = %v, want %v", tl.Spec().Name, got, want[tl.Spec().Name])
		}
	}
}

// assertNoTemp fails if a temporary file of an atomic write is left in
// the tree at dir.
func assertNoTemp(t *testing.T, dir string) {
	t.Helper()
	for name := range treeState(t, dir) {
		if strings.Contains(filepath.Base(name), ".tmp-") {
			t.Errorf("temporary file left behind: %s", name)
		}
	}
}
