package tool

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// confineTree builds, in a temporary directory, a workspace "ws" next to
// an "outside" tree, with symlinks that lead out and symlinks that stay
// in. It returns the base directory and an Env on ws.
func confineTree(t *testing.T) (string, *Env) {
	t.Helper()
	base := t.TempDir()
	writeTree(t, base, map[string]string{
		"outside/secret.txt":    "secret outside\n",
		"outside/dir/x.txt":     "secret x\n",
		"ws/inside.txt":         "inside secret\n",
		"ws/sub/a.txt":          "a secret\n",
		"ws/sub/deeper/b.txt":   "b\n",
		"ws/sub/deeper/keep.md": "keep\n",
	})
	ws := filepath.Join(base, "ws")
	abs := filepath.Join(base, "outside")
	symlink(t, filepath.Join(abs, "secret.txt"), filepath.Join(ws, "link_abs_out"))
	symlink(t, "../outside/secret.txt", filepath.Join(ws, "link_rel_out"))
	symlink(t, "../outside/dir", filepath.Join(ws, "link_dir_out"))
	symlink(t, abs, filepath.Join(ws, "link_dir_abs_out"))
	symlink(t, "chain2", filepath.Join(ws, "chain1"))
	symlink(t, "sub/chain3", filepath.Join(ws, "chain2"))
	symlink(t, "../../outside/secret.txt", filepath.Join(ws, "sub", "chain3"))
	symlink(t, "../../outside/secret.txt", filepath.Join(ws, "sub", "deep_rel"))
	symlink(t, "../../../outside/dir", filepath.Join(ws, "sub", "deeper", "up_dir"))
	symlink(t, "sub/a.txt", filepath.Join(ws, "link_in"))
	symlink(t, "sub", filepath.Join(ws, "link_in_dir"))
	symlink(t, "../inside.txt", filepath.Join(ws, "sub", "up_in"))
	root, err := os.OpenRoot(ws)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	return base, &Env{Root: root}
}

func TestConfinement(t *testing.T) {
	base, env := confineTree(t)
	outside := filepath.Join(base, "outside")
	before := treeState(t, outside)

	escapes := []struct {
		name   string
		file   string // the path given to the file tools
		dir    string // the path given to the directory tools
		reason string
	}{
		{"absolute unix", "/etc/passwd", "/etc", reasonAbsolute},
		{"absolute outside file", filepath.Join(outside, "secret.txt"), outside, reasonAbsolute},
		{"windows drive", `C:\x`, `C:\`, reasonAbsolute},
		{"windows drive relative", `C:x`, `C:`, reasonAbsolute},
		{"windows UNC", `\\server\share\x`, `\\server\share`, reasonAbsolute},
		{"windows rooted", `\x`, `\`, reasonAbsolute},
		{"dotdot", "../outside/secret.txt", "../outside", reasonClimbs},
		{"dotdot bare", "..", "..", reasonClimbs},
		{"dotdot after dir", "sub/../../outside/secret.txt", "sub/../../outside", reasonClimbs},
		{"dotdot backslash", `sub\..\..\outside\secret.txt`, `sub\..\..`, reasonClimbs},
		{"file symlink absolute", "link_abs_out", "link_dir_abs_out", reasonSymlinkOut},
		{"file symlink relative", "link_rel_out", "link_dir_out", reasonSymlinkOut},
		{"through dir symlink", "link_dir_out/x.txt", "link_dir_out", reasonSymlinkOut},
		{"through absolute dir symlink", "link_dir_abs_out/secret.txt", "link_dir_abs_out/dir", reasonSymlinkOut},
		{"new file through dir symlink", "link_dir_out/new.txt", "link_dir_out/", reasonSymlinkOut},
		{"chain ending outside", "chain1", "sub/deeper/up_dir", reasonSymlinkOut},
		{"relative symlink ../..", "sub/deep_rel", "sub/deeper/up_dir", reasonSymlinkOut},
		{"NUL byte", "inside.txt\x00", "sub\x00", reasonNUL},
		{"empty", "", "", reasonEmpty},
	}
	for _, e := range escapes {
		calls := []struct {
			tool string
			args obj
		}{
			{"read_file", obj{"path": e.file}},
			{"read_file", obj{"path": e.file, "start_line": 1, "end_line": 2}},
			{"write_file", obj{"path": e.file, "content": "pwned\n"}},
			{"edit_file", obj{"path": e.file, "old_text": "secret", "new_text": "pwned"}},
			{"list_dir", obj{"path": e.dir}},
			{"grep", obj{"pattern": "secret", "path": e.dir}},
			{"grep", obj{"pattern": "secret", "path": e.file}},
			{"find", obj{"pattern": "*", "path": e.dir}},
		}
		for _, c := range calls {
			if e.reason == reasonEmpty && c.tool != "read_file" && c.tool != "write_file" && c.tool != "edit_file" {
				continue // an empty path means the default for this tool
			}
			t.Run(e.name+"/"+c.tool, func(t *testing.T) {
				r := call(t, env, c.tool, c.args)
				p := c.args["path"].(string)
				if e.reason == reasonSymlinkOut {
					// Past the lexical checks, observations name the clean path.
					p, _ = cleanPath(p)
				}
				want := Result{IsError: true, Refusal: e.reason, Output: "[refused] " + p + ": " + e.reason}
				if e.reason == reasonEmpty {
					// A missing path and an empty one are the same to JSON
					// tools: a missing argument.
					if !r.IsError || !strings.Contains(r.Output, `"path"`) {
						t.Errorf("got %+v, want a missing path error", r)
					}
					return
				}
				if diff := cmp.Diff(want, r); diff != "" {
					t.Errorf("%s %v (-want +got):\n%s", c.tool, c.args, diff)
				}
			})
		}
	}
	if diff := cmp.Diff(before, treeState(t, outside)); diff != "" {
		t.Errorf("the outside tree changed (-before +after):\n%s", diff)
	}
	if _, err := os.Stat(filepath.Join(base, "x")); err == nil {
		t.Errorf("a file was created next to the workspace")
	}
}

func TestConfinementInside(t *testing.T) {
	base, env := confineTree(t)
	ws := filepath.Join(base, "ws")
	outside := filepath.Join(base, "outside")
	before := treeState(t, outside)

	tests := []struct {
		name string
		tool string
		args obj
		want string
	}{
		{"read through symlink inside", "read_file", obj{"path": "link_in"}, "link_in (lines 1-1 of 1)\na secret\n"},
		{"read through dir symlink inside", "read_file", obj{"path": "link_in_dir/a.txt"}, "link_in_dir/a.txt (lines 1-1 of 1)\na secret\n"},
		{"read relative symlink up inside", "read_file", obj{"path": "sub/up_in"}, "sub/up_in (lines 1-1 of 1)\ninside secret\n"},
		{"dotdot that stays inside", "read_file", obj{"path": "sub/../inside.txt"}, "inside.txt (lines 1-1 of 1)\ninside secret\n"},
		{"list dir symlink inside", "list_dir", obj{"path": "link_in_dir"}, "link_in_dir/ (5 entries)\na.txt (9 bytes)\nchain3 -> ../../outside/secret.txt\ndeep_rel -> ../../outside/secret.txt\ndeeper/\nup_in -> ../inside.txt\n"},
		{"grep does not follow symlinks", "grep", obj{"pattern": "secret"}, "inside.txt:1:inside secret\nsub/a.txt:1:a secret"},
		{"find lists symlinks, does not enter them", "find", obj{"pattern": "**"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := call(t, env, tt.tool, tt.args)
			if r.IsError {
				t.Fatalf("got error %q", r.Output)
			}
			if tt.want != "" && strings.TrimSuffix(r.Output, "\n") != strings.TrimSuffix(tt.want, "\n") {
				t.Errorf("got\n%s\nwant\n%s", r.Output, tt.want)
			}
		})
	}

	t.Run("find output", func(t *testing.T) {
		r := call(t, env, "find", obj{"pattern": "**"})
		want := strings.Join([]string{
			"chain1", "chain2", "inside.txt", "link_abs_out", "link_dir_abs_out", "link_dir_out",
			"link_in", "link_in_dir", "link_rel_out", "sub/", "sub/a.txt", "sub/chain3", "sub/deep_rel",
			"sub/deeper/", "sub/deeper/b.txt", "sub/deeper/keep.md", "sub/deeper/up_dir", "sub/up_in",
		}, "\n")
		if diff := cmp.Diff(want, r.Output); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})

	t.Run("write through symlink inside keeps the link", func(t *testing.T) {
		r := call(t, env, "write_file", obj{"path": "link_in", "content": "new a\n"})
		if r.IsError {
			t.Fatal(r.Output)
		}
		if got := readOut(t, ws, "sub/a.txt"); got != "new a\n" {
			t.Errorf("sub/a.txt = %q", got)
		}
		if fi, err := os.Lstat(filepath.Join(ws, "link_in")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Errorf("link_in is no longer a symlink: %v %v", fi, err)
		}
	})

	t.Run("edit through symlink inside", func(t *testing.T) {
		r := call(t, env, "edit_file", obj{"path": "sub/up_in", "old_text": "inside", "new_text": "within"})
		if r.IsError {
			t.Fatal(r.Output)
		}
		if got := readOut(t, ws, "inside.txt"); got != "within secret\n" {
			t.Errorf("inside.txt = %q", got)
		}
	})

	if diff := cmp.Diff(before, treeState(t, outside)); diff != "" {
		t.Errorf("the outside tree changed (-before +after):\n%s", diff)
	}
}

func TestCleanPath(t *testing.T) {
	tests := []struct {
		in, clean, reason string
	}{
		{"a.txt", "a.txt", ""},
		{"./a/b/../c", "a/c", ""},
		{".", ".", ""},
		{"a/", "a", ""},
		{`a\b`, "a/b", ""},
		{"a/..", ".", ""},
		{"", "", reasonEmpty},
		{"a\x00b", "", reasonNUL},
		{"/a", "", reasonAbsolute},
		{"//a", "", reasonAbsolute},
		{`C:\a`, "", reasonAbsolute},
		{`c:a`, "", reasonAbsolute},
		{`\\srv\share`, "", reasonAbsolute},
		{`\a`, "", reasonAbsolute},
		{"..", "", reasonClimbs},
		{"../a", "", reasonClimbs},
		{"a/../../b", "", reasonClimbs},
		{"a/./../..", "", reasonClimbs},
		{"...", "...", ""},
		{"..a", "..a", ""},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			clean, reason := cleanPath(tt.in)
			if clean != tt.clean || reason != tt.reason {
				t.Errorf("cleanPath(%q) = %q, %q; want %q, %q", tt.in, clean, reason, tt.clean, tt.reason)
			}
		})
	}
}

func TestOnly(t *testing.T) {
	dir, env := newEnv(t, map[string]string{"task.txt": "hello\n", "other.txt": "other\n"})
	env.Only = []string{"task.txt"}
	tests := []struct {
		name    string
		tool    string
		args    any
		want    string
		refusal bool
	}{
		{"read default path", "read_file", obj{}, "task.txt (lines 1-1 of 1)\nhello\n", false},
		{"read null args", "read_file", "null", "task.txt (lines 1-1 of 1)\nhello\n", false},
		{"read the file by name", "read_file", obj{"path": "./task.txt"}, "task.txt (lines 1-1 of 1)\nhello\n", false},
		{"read another file", "read_file", obj{"path": "other.txt"}, "", true},
		{"write another file", "write_file", obj{"path": "other.txt", "content": "x"}, "", true},
		{"edit another file", "edit_file", obj{"path": "other.txt", "old_text": "other", "new_text": "x"}, "", true},
		{"list the root", "list_dir", obj{"path": "."}, "", true},
		{"grep the root", "grep", obj{"pattern": "o", "path": "."}, "", true},
		{"grep default path", "grep", obj{"pattern": "l+"}, "task.txt:1:hello", false},
		{"edit default path", "edit_file", obj{"old_text": "hello", "new_text": "bye"}, "edited task.txt: replaced 1 occurrence, at line 1", false},
		{"write default path", "write_file", obj{"content": "done\n"}, "wrote task.txt (5 bytes, 1 line)", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := call(t, env, tt.tool, tt.args)
			if tt.refusal {
				if !strings.HasPrefix(r.Refusal, reasonNotAllowed) || !r.IsError {
					t.Errorf("got %+v, want a refusal", r)
				}
				return
			}
			if r.IsError || r.Output != tt.want {
				t.Errorf("got %+v, want output %q", r, tt.want)
			}
		})
	}
	if got := readOut(t, dir, "other.txt"); got != "other\n" {
		t.Errorf("other.txt changed: %q", got)
	}
	env.Only = []string{"a.txt", "b.txt"}
	if r := call(t, env, "read_file", obj{}); !r.IsError || !strings.Contains(r.Output, `"path"`) {
		t.Errorf("with two files the path is required, got %+v", r)
	}
}
