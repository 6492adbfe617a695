package tool

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

func TestListDir(t *testing.T) {
	files := map[string]string{
		"b.txt":             "bb\n",
		"a.go":              "package a\n",
		"sub/x.txt":         "x",
		"empty/":            "",
		".git/HEAD":         "ref\n",
		"node_modules/m.js": "m",
		"target/out":        "o",
		"Zeta/":             "",
	}
	for i := range 1100 {
		files[fmt.Sprintf("many/f%04d", i)] = ""
	}
	dir, env := newEnv(t, files)
	symlink(t, "a.go", filepath.Join(dir, "link.go"))

	root := "./ (9 entries)\n.git/ (skipped by grep and find)\nZeta/\na.go (10 bytes)\nb.txt (3 bytes)\nempty/\nlink.go -> a.go\nmany/\nnode_modules/ (skipped by grep and find)\nsub/\ntarget/ (skipped by grep and find)"
	tests := []struct {
		name    string
		args    any
		want    string
		isError bool
		has     []string
	}{
		{name: "root by default", args: obj{}, want: strings.Replace(root, "(9 entries)", "(10 entries)", 1)},
		{name: "root by null", args: "null", want: strings.Replace(root, "(9 entries)", "(10 entries)", 1)},
		{name: "sub", args: obj{"path": "sub"}, want: "sub/ (1 entry)\nx.txt (1 byte)"},
		{name: "sub with slash", args: obj{"path": "sub/"}, want: "sub/ (1 entry)\nx.txt (1 byte)"},
		{name: "empty", args: obj{"path": "empty"}, want: "empty/ (empty directory)"},
		{name: "bounded", args: obj{"path": "many"}, has: []string{"many/ (1100 entries)\nf0000 (0 bytes)\n", "\nf0999 (0 bytes)\n[100 more entries not shown]"}},
		{name: "a file", args: obj{"path": "a.go"}, isError: true, want: "a.go is not a directory; use read_file to read a file"},
		{name: "missing", args: obj{"path": "nope"}, isError: true, want: "nope: no such file or directory"},
		{name: "unknown field", args: obj{"dir": "sub"}, isError: true, has: []string{`"dir"`, "unknown field", "allowed fields are path"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := call(t, env, "list_dir", tt.args)
			if r.IsError != tt.isError {
				t.Fatalf("IsError = %v, want %v: %q", r.IsError, tt.isError, r.Output)
			}
			if tt.want != "" && r.Output != tt.want {
				t.Errorf("got\n%s\nwant\n%s", r.Output, tt.want)
			}
			for _, h := range tt.has {
				if !strings.Contains(r.Output, h) {
					t.Errorf("output does not contain %q", h)
				}
			}
		})
	}
}
