package tool

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

func TestFind(t *testing.T) {
	files := map[string]string{
		"main.go":                 "",
		"README.md":               "",
		"cmd/tool/main.go":        "",
		"cmd/tool/main_test.go":   "",
		"pkg/a/a.go":              "",
		"pkg/a/testdata/x.txt":    "",
		"pkg/b/b.go":              "",
		".hidden/h.go":            "",
		".git/objects/x.go":       "",
		"node_modules/m/index.js": "",
		"node_modules/m/x.go":     "",
		"sub/target/t.go":         "",
		"emptydir/":               "",
	}
	for i := range 30 {
		files[fmt.Sprintf("gen/f%02d.txt", i)] = ""
	}
	dir, env := newEnv(t, files)
	symlink(t, "pkg", filepath.Join(dir, "pkglink"))

	tests := []struct {
		name    string
		args    any
		want    []string
		isError bool
		has     []string
	}{
		{name: "basename glob at any depth", args: obj{"pattern": "*.go"},
			want: []string{".hidden/h.go", "cmd/tool/main.go", "cmd/tool/main_test.go", "main.go", "pkg/a/a.go", "pkg/b/b.go"}},
		{name: "doublestar", args: obj{"pattern": "**/*.go"},
			want: []string{".hidden/h.go", "cmd/tool/main.go", "cmd/tool/main_test.go", "main.go", "pkg/a/a.go", "pkg/b/b.go"}},
		{name: "path glob", args: obj{"pattern": "pkg/*/*.go"}, want: []string{"pkg/a/a.go", "pkg/b/b.go"}},
		{name: "path glob with leading ./", args: obj{"pattern": "./pkg/*/*.go"}, want: []string{"pkg/a/a.go", "pkg/b/b.go"}},
		{name: "test files", args: obj{"pattern": "*_test.go"}, want: []string{"cmd/tool/main_test.go"}},
		{name: "directories", args: obj{"pattern": "testdata"}, want: []string{"pkg/a/testdata/"}},
		{name: "directory glob", args: obj{"pattern": "cmd/**"}, want: []string{"cmd/", "cmd/tool/", "cmd/tool/main.go", "cmd/tool/main_test.go"}},
		{name: "empty directory", args: obj{"pattern": "empty*"}, want: []string{"emptydir/"}},
		{name: "alternatives", args: obj{"pattern": "{README,main}.*"}, want: []string{"README.md", "cmd/tool/main.go", "main.go"}},
		{name: "symlink listed, not entered", args: obj{"pattern": "pkg*"}, want: []string{"pkg/", "pkglink"}},
		{name: "in a subdirectory", args: obj{"pattern": "*.go", "path": "pkg"}, want: []string{"pkg/a/a.go", "pkg/b/b.go"}},
		{name: "relative to the subdirectory", args: obj{"pattern": "a/*.go", "path": "pkg"}, want: []string{"pkg/a/a.go"}},
		{name: "skipped dirs not entered", args: obj{"pattern": "x.go"}, want: nil, has: []string{`no paths match "x.go" in .`}},
		{name: "skipped dir named explicitly", args: obj{"pattern": "*.go", "path": "node_modules"}, want: []string{"node_modules/m/x.go"}},
		{name: "cap", args: obj{"pattern": "gen/*.txt", "max_results": 3},
			want: []string{"gen/f00.txt", "gen/f01.txt", "gen/f02.txt", "[27 more paths not shown, 30 in all; narrow the pattern or the path, or raise max_results (at most 1000)]"}},
		{name: "malformed glob", args: obj{"pattern": "[a-"}, isError: true, has: []string{`"pattern"`, "malformed glob"}},
		{name: "empty glob", args: obj{"pattern": ""}, isError: true, has: []string{`"pattern"`, "empty"}},
		{name: "missing pattern", args: obj{}, isError: true, has: []string{`"pattern"`, "missing required field"}},
		{name: "zero max", args: obj{"pattern": "*", "max_results": 0}, isError: true, has: []string{`"max_results"`, "1 or more"}},
		{name: "negative max", args: obj{"pattern": "*", "max_results": -5}, isError: true, has: []string{`"max_results"`}},
		{name: "path is a file", args: obj{"pattern": "*", "path": "main.go"}, isError: true, has: []string{"not a directory"}},
		{name: "missing path", args: obj{"pattern": "*", "path": "nope"}, isError: true, has: []string{"nope: no such file or directory"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := call(t, env, "find", tt.args)
			if r.IsError != tt.isError {
				t.Fatalf("IsError = %v, want %v: %q", r.IsError, tt.isError, r.Output)
			}
			if tt.want != nil && r.Output != strings.Join(tt.want, "\n") {
				t.Errorf("got\n%s\nwant\n%s", r.Output, strings.Join(tt.want, "\n"))
			}
			for _, h := range tt.has {
				if !strings.Contains(r.Output, h) {
					t.Errorf("output %q does not contain %q", r.Output, h)
				}
			}
		})
	}
}
