package tool

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// FuzzArgs feeds arbitrary bytes as the arguments of every tool, against a
// small workspace next to an outside tree that symlinks in the workspace
// lead to, and checks that no call panics, that every result keeps the
// Result contract, and that nothing outside the workspace changes.
func FuzzArgs(f *testing.F) {
	seeds := []string{
		``, `null`, `{}`, `[]`, `"x"`, `42`, `{"path": null}`, `{"path": 1}`, `{"path": ""}`, `{"path": "."}`,
		`{"path": "a.txt"}`, `{"path": "a.txt", "start_line": 2, "end_line": 1}`, `{"path": "a.txt", "start_line": -9223372036854775808}`,
		`{"path": "a.txt", "start_line": 1e400}`, `{"path": "a.txt", "end_line": 18446744073709551616}`,
		`{"path": "../outside/secret.txt"}`, `{"path": "/etc/passwd"}`, `{"path": "C:\\x"}`, `{"path": "\\\\srv\\x"}`,
		`{"path": "out/secret.txt"}`, `{"path": "out/new.txt", "content": "x"}`, `{"path": "chain", "content": "x"}`,
		`{"path": "a.txt\u0000"}`, `{"path": "sub/../../outside/secret.txt", "content": "pwned"}`,
		`{"path": "a.txt", "content": "new\n"}`, `{"path": "d/e/f.txt", "content": ""}`,
		`{"path": "a.txt", "old_text": "hello", "new_text": "bye"}`, `{"path": "a.txt", "old_text": "", "new_text": "x"}`,
		`{"path": "a.txt", "old_text": "l", "new_text": "L", "replace_all": true}`, `{"path": "secretlink", "old_text": "secret", "new_text": "x"}`,
		`{"pattern": "hel+o"}`, `{"pattern": "(", "literal": true}`, `{"pattern": "("}`, `{"pattern": "x", "include": ["[", "**"]}`,
		`{"pattern": "a|b|c", "ignore_case": true, "context": 3, "max_results": 1}`, `{"pattern": "secret", "path": "out"}`,
		`{"pattern": "\\x{FFFD}", "context": -1}`, `{"pattern": "(?i)ſ+k", "path": "sub"}`, `{"pattern": "a\nb", "literal": true}`,
		`{"pattern": "**/*.go"}`, `{"pattern": "{a,b", "path": "sub"}`, `{"pattern": "*", "max_results": 0}`, `{"pattern": "*", "path": "out"}`,
		`{"path": "a.txt", "path": "../x"}`, `{"Path": "a.txt"}`, `{"path": "a.txt"} trailing`, `{"path": "\xff\xfe"}`,
		`{"pattern": "x", "include": "notalist"}`, `{"pattern": ["x"]}`, `{"content": {"a": [1, 2]}}`,
	}
	for _, s := range seeds {
		for i := range 6 {
			f.Add(uint8(i), []byte(s))
		}
	}
	tools := Workspace()
	// One workspace serves every input of this process; it is rebuilt
	// after an input that changed it, so each input starts from the same
	// tree.
	base := f.TempDir()
	ws := filepath.Join(base, "ws")
	outside := filepath.Join(base, "outside")
	build := func(t testing.TB) {
		if err := os.RemoveAll(ws); err != nil {
			t.Fatal(err)
		}
		writeTree(t, ws, map[string]string{
			"a.txt":    "hello\nworld\n",
			"sub/b.go": "package b // secret hello\n",
			"bin":      "\x00\x01",
		})
		symlink(t, "../outside", filepath.Join(ws, "out"))
		symlink(t, "../outside/secret.txt", filepath.Join(ws, "secretlink"))
		symlink(t, "secretlink", filepath.Join(ws, "chain"))
	}
	writeTree(f, outside, map[string]string{"secret.txt": "secret\n"})
	build(f)
	before := treeState(f, outside)
	pristine := treeState(f, ws)

	f.Fuzz(func(t *testing.T, which uint8, args []byte) {
		if !cmp.Equal(pristine, treeState(t, ws)) {
			build(t)
		}
		root, err := os.OpenRoot(ws)
		if err != nil {
			t.Fatal(err)
		}
		defer root.Close()
		env := &Env{Root: root}
		if which >= 128 {
			env.Only = []string{"a.txt"}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		tl := tools[int(which)%len(tools)]
		r := tl.Call(ctx, env, json.RawMessage(args))

		if len(r.Output) > maxOutput {
			t.Errorf("%s: output of %d bytes", tl.Spec().Name, len(r.Output))
		}
		if r.Refusal != "" && !r.IsError {
			t.Errorf("%s: a refusal that is not an error: %+v", tl.Spec().Name, r)
		}
		if r.Output == "" {
			t.Errorf("%s: empty output", tl.Spec().Name)
		}
		if diff := cmp.Diff(before, treeState(t, outside)); diff != "" {
			t.Fatalf("%s %q changed the outside tree (-before +after):\n%s", tl.Spec().Name, args, diff)
		}
		ents, err := os.ReadDir(base)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		if !slices.Equal(names, []string{"outside", "ws"}) {
			t.Fatalf("%s %q created %v next to the workspace", tl.Spec().Name, args, names)
		}
	})
}
