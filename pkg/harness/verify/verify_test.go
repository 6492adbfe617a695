package verify

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func root(t *testing.T, files map[string]string) *os.Root {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func str(s string) *string { return &s }

func TestRun(t *testing.T) {
	r := root(t, map[string]string{
		"main.go":    "package main\n\nfunc main() {}\n",
		"out.json":   `{"ok": true, "n": 3}`,
		"bad.json":   `{"ok": "yes"}`,
		"notjson":    `{"ok": `,
		"sub/dir/x":  "deep",
		"empty.txt":  "",
		"binary.bin": "\x00\x01\x02",
	})
	os.Symlink("/etc/passwd", filepath.Join(r.Name(), "escape"))
	schema := json.RawMessage(`{"type":"object","required":["ok"],"properties":{"ok":{"type":"boolean"}}}`)
	tests := []struct {
		name   string
		check  Check
		passed bool
		detail string
	}{
		{"contains", Check{Kind: FileContains, File: "main.go", Text: "func main()"}, true, "contains"},
		{"lacks", Check{Kind: FileContains, File: "main.go", Text: "func helper()"}, false, "does not contain"},
		{"workspace contains", Check{Kind: WorkspaceFileContains, File: "sub/dir/x", Text: "dee"}, true, ""},
		{"missing file", Check{Kind: WorkspaceFileContains, File: "nope.txt", Text: "x"}, false, "does not exist"},
		{"directory", Check{Kind: WorkspaceFileContains, File: "sub", Text: "x"}, false, "is a directory"},
		{"symlink out", Check{Kind: WorkspaceFileContains, File: "escape", Text: "root"}, false, "cannot be read"},
		{"equals", Check{Kind: FileEquals, File: "sub/dir/x", Content: str("deep")}, true, ""},
		{"equals empty", Check{Kind: FileEquals, File: "empty.txt", Content: str("")}, true, ""},
		{"differs", Check{Kind: FileEquals, File: "main.go", Content: str("package main\n\nfunc main() { run() }\n")}, false, "first difference at line 3"},
		{"too short", Check{Kind: FileEquals, File: "sub/dir/x", Content: str("deeper")}, false, "ends at line 1"},
		{"too long", Check{Kind: FileEquals, File: "sub/dir/x", Content: str("de")}, false, "2 extra bytes"},
		{"schema ok", Check{Kind: JSONSchema, File: "out.json", Schema: schema}, true, "matches"},
		{"schema violated", Check{Kind: JSONSchema, File: "bad.json", Schema: schema}, false, "does not match the schema"},
		{"not json", Check{Kind: JSONSchema, File: "notjson", Schema: schema}, false, "not valid JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.check
			if err := c.Validate(""); err != nil {
				t.Fatal(err)
			}
			got, err := Run(context.Background(), &Env{Root: r}, &c)
			if err != nil {
				t.Fatal(err)
			}
			if got.Passed != tt.passed || !strings.Contains(got.Detail, tt.detail) {
				t.Errorf("Run = passed %v, %q; want passed %v with %q", got.Passed, got.Detail, tt.passed, tt.detail)
			}
			if got.Kind != c.Kind || got.File != c.File {
				t.Errorf("result names %s %s", got.Kind, got.File)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name  string
		check Check
		deflt string
		field string
	}{
		{"no kind", Check{File: "a", Text: "x"}, "", "kind"},
		{"unknown kind", Check{Kind: "compiles_cobol", File: "a"}, "", "kind"},
		{"no file in workspace", Check{Kind: FileContains, Text: "x"}, "", "file"},
		{"workspace check needs a file", Check{Kind: WorkspaceFileContains, Text: "x"}, "main.go", "file"},
		{"absolute", Check{Kind: WorkspaceFileContains, File: "/etc/passwd", Text: "x"}, "", "file"},
		{"windows absolute", Check{Kind: WorkspaceFileContains, File: `C:\x`, Text: "x"}, "", "file"},
		{"climbs out", Check{Kind: WorkspaceFileContains, File: "a/../../x", Text: "x"}, "", "file"},
		{"root itself", Check{Kind: WorkspaceFileContains, File: "a/..", Text: "x"}, "", "file"},
		{"empty needle", Check{Kind: FileContains, File: "a"}, "", "text"},
		{"no content", Check{Kind: FileEquals, File: "a"}, "", "content"},
		{"no schema", Check{Kind: JSONSchema, File: "a"}, "", "schema"},
		{"schema not json", Check{Kind: JSONSchema, File: "a", Schema: json.RawMessage(`{`)}, "", "schema"},
		{"file ref", Check{Kind: JSONSchema, File: "a", Schema: json.RawMessage(`{"$ref":"file:///etc/passwd"}`)}, "", "schema"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.check
			err := c.Validate(tt.deflt)
			fe, ok := err.(*FieldError)
			if !ok || fe.Field != tt.field {
				t.Fatalf("Validate = %v, want a FieldError on %q", err, tt.field)
			}
		})
	}
	c := Check{Kind: FileContains, Text: "x"}
	if err := c.Validate("main.go"); err != nil || c.File != "main.go" {
		t.Errorf("single-file default: %v, file %q", err, c.File)
	}
	c = Check{Kind: WorkspaceFileContains, File: `sub\dir/./x`, Text: "x"}
	if err := c.Validate(""); err != nil || c.File != "sub/dir/x" {
		t.Errorf("normalised file: %v, %q", err, c.File)
	}
}

func TestDescribe(t *testing.T) {
	checks := map[string]Check{
		`a.go must contain "func main()"`:                 {Kind: FileContains, File: "a.go", Text: "func main()"},
		`VERSION must be exactly "1.0\n"`:                 {Kind: FileEquals, File: "VERSION", Content: str("1.0\n")},
		`o.json must hold JSON valid against this schema`: {Kind: JSONSchema, File: "o.json", Schema: json.RawMessage(`{ "type": "object" }`)},
	}
	for want, c := range checks {
		if got := c.Describe(); !strings.HasPrefix(got, want) {
			t.Errorf("Describe = %q, want prefix %q", got, want)
		}
	}
}
