package tool

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/initorigin/io-harness-go/pkg/harness/policy"
)

// .git is never written through the file tools, with no policy at all:
// not by name in any spelling, not through a symlink to it, not by an
// exec's copy-back. The negative control is the same writes one letter
// away (git/hooks), which land.
func TestGitDirFloor(t *testing.T) {
	dir, env := newEnv(t, map[string]string{".git/HEAD": "ref: refs/heads/main\n", "sub/.git/config": "", "src/a.go": "package a\n"})
	symlink(t, ".git", filepath.Join(dir, "repo"))
	symlink(t, "../.git/hooks", filepath.Join(dir, "src", "hooks"))

	for _, p := range []string{".git/hooks/pre-commit", ".git/config", ".GIT/hooks/post-commit", ".git./config", "GIT~1/config",
		"sub/.git/hooks/pre-commit", "repo/hooks/pre-commit", "src/hooks/pre-commit", ".git"} {
		r := call(t, env, "write_file", obj{"path": p, "content": "#!/bin/sh\ntouch /tmp/pwned\n"})
		if !r.IsError || r.Refusal == "" || !strings.Contains(r.Output, ".git") {
			t.Errorf("write_file %s was not refused: %+v", p, r)
		}
	}
	if r := call(t, env, "edit_file", obj{"path": ".git/HEAD", "old_text": "main", "new_text": "evil"}); !r.IsError || r.Refusal == "" {
		t.Errorf("edit_file .git/HEAD was not refused: %+v", r)
	}
	if data := readOut(t, dir, ".git/HEAD"); data != "ref: refs/heads/main\n" {
		t.Errorf(".git/HEAD changed: %q", data)
	}
	for _, p := range []string{".git/hooks/pre-commit", ".git/hooks/post-commit", "sub/.git/hooks/pre-commit"} {
		if _, err := os.Lstat(filepath.Join(dir, p)); err == nil {
			t.Errorf("%s was written", p)
		}
	}
	// Negative control: the same writes outside .git land.
	for _, p := range []string{"git/hooks/pre-commit", "src/git.go", ".github/workflows/ci.yml", ".gitignore"} {
		if r := call(t, env, "write_file", obj{"path": p, "content": "x\n"}); r.IsError {
			t.Errorf("write_file %s failed: %s", p, r.Output)
		}
	}
	// Copy-back judges the floor too.
	if v := peekWrite(env, ".git/hooks/pre-commit"); v.Effect != policy.Deny || v.Layer != "builtin-gitdir" {
		t.Errorf("copy-back's verdict on .git/hooks/pre-commit: %+v", v)
	}
}

func TestInGitDir(t *testing.T) {
	for p, want := range map[string]bool{
		".git": true, ".git/x": true, "a/.git/x": true, ".GIT/config": true, ".git. /x": true, "git~1/x": true,
		"git": false, ".github": false, ".gitignore": false, "a/git/x": false, "x.git": false,
	} {
		if got := InGitDir(p); got != want {
			t.Errorf("InGitDir(%q) = %v, want %v", p, got, want)
		}
	}
}
