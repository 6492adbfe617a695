package git

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/initorigin/io-harness-go/pkg/harness/policy"
)

// The tools work on a real repository: status, diff, add, commit, log,
// show, branch create and switch, each checked against what plain git
// says of the repository afterwards.
func TestToolsOnARepository(t *testing.T) {
	sb := realSandbox(t)
	dir := newRepo(t, map[string]string{"a.txt": "one\n", "docs/b.md": "# b\n"})
	env := envOn(t, dir, sb, nil)

	if out := mustOK(t, env, "git_status", nil); !strings.Contains(out, "nothing to commit") || !strings.Contains(out, "branch: main") {
		t.Errorf("clean status:\n%s", out)
	}
	writeFiles(t, dir, map[string]string{"a.txt": "one\ntwo\n", "new.txt": "fresh\n"})
	out := mustOK(t, env, "git_status", nil)
	for _, want := range []string{" M a.txt", "?? new.txt"} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	out = mustOK(t, env, "git_diff", nil)
	if !strings.Contains(out, "+two") || !strings.Contains(out, "a.txt | 1 +") {
		t.Errorf("diff:\n%s", out)
	}
	out = mustOK(t, env, "git_add", map[string]any{"paths": []string{"a.txt", "new.txt"}})
	if !strings.Contains(out, "staged 2 files") {
		t.Errorf("add: %s", out)
	}
	if got := hostGit(t, dir, "diff", "--cached", "--name-only"); got != "a.txt\nnew.txt\n" {
		t.Errorf("the index after add holds %q", got)
	}
	if out := mustOK(t, env, "git_diff", map[string]any{"staged": true}); !strings.Contains(out, "+fresh") {
		t.Errorf("staged diff:\n%s", out)
	}
	out = mustOK(t, env, "git_commit", map[string]any{"message": "Add two and new\n\nThe body."})
	if !strings.Contains(out, "Add two and new") {
		t.Errorf("commit: %s", out)
	}
	if got := hostGit(t, dir, "log", "-1", "--format=%an <%ae>|%cn <%ce>|%B"); got != "Test Agent <agent@example.invalid>|Test Agent <agent@example.invalid>|Add two and new\n\nThe body.\n\n" {
		t.Errorf("the commit is %q", got)
	}
	out = mustOK(t, env, "git_log", nil)
	if lines := strings.Split(out, "\n"); len(lines) != 2 || !strings.Contains(lines[0], "Add two and new") || !strings.Contains(lines[1], "initial") {
		t.Errorf("log:\n%s", out)
	}
	if out := mustOK(t, env, "git_show", nil); !strings.Contains(out, "+fresh") || !strings.Contains(out, "Add two and new") {
		t.Errorf("show:\n%s", out)
	}
	if out := mustOK(t, env, "git_show", map[string]any{"rev": "HEAD~1", "path": "a.txt"}); !strings.HasSuffix(out, "\none\n") {
		t.Errorf("show of a file:\n%s", out)
	}
	mustOK(t, env, "git_branch", map[string]any{"action": "create", "name": "topic", "start": "HEAD~1"})
	out = mustOK(t, env, "git_branch", map[string]any{"action": "switch", "name": "topic"})
	if head := hostGit(t, dir, "rev-parse", "--abbrev-ref", "HEAD"); head != "topic\n" {
		t.Errorf("after the switch HEAD is %q (%s)", head, out)
	}
	if data, _ := os.ReadFile(filepath.Join(dir, "a.txt")); string(data) != "one\n" {
		t.Errorf("after the switch a.txt holds %q", data)
	}
	if _, err := os.Stat(filepath.Join(dir, "new.txt")); err == nil {
		t.Errorf("new.txt survived the switch to a branch without it")
	}
	if st := hostGit(t, dir, "status", "--porcelain"); st != "" {
		t.Errorf("plain git sees a dirty tree after the switch: %q", st)
	}
	if out := mustOK(t, env, "git_branch", nil); out != "  main\n* topic" {
		t.Errorf("branch list: %q", out)
	}
}

// A path and a revision are never options: a file named like one is
// staged, diffed and shown as the file it is, and a branch or revision
// that looks like one is refused.
func TestNoOptionInjection(t *testing.T) {
	sb := realSandbox(t)
	outside := t.TempDir()
	target := filepath.Join(outside, "x")
	name := "--output=" + target // a workspace path: the directory "--output=" and below
	dir := newRepo(t, map[string]string{name: "v1\n"})
	env := envOn(t, dir, withWritable{sb, outside}, nil)

	// Negative control: plain git, in the same sandbox, reads the name as
	// its --output option and writes the file outside.
	res, err := withWritable{sb, outside}.Run(t.Context(), plainSpec(dir, "git", "diff", "HEAD", name))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(target); err != nil {
		t.Fatalf("negative control: plain git did not write %s (%v); stderr: %s", target, err, res.Stderr)
	}
	os.Remove(target)

	writeFiles(t, dir, map[string]string{name: "v2\n"})
	if out := mustOK(t, env, "git_diff", map[string]any{"paths": []string{name}}); !strings.Contains(out, "+v2") {
		t.Errorf("diff of the file named %s:\n%s", name, out)
	}
	mustOK(t, env, "git_add", map[string]any{"paths": []string{name}})
	mustOK(t, env, "git_commit", map[string]any{"message": "--amend"})
	mustOK(t, env, "git_log", map[string]any{"paths": []string{name}})
	if out := mustOK(t, env, "git_show", map[string]any{"path": name}); !strings.HasSuffix(out, "v2\n") {
		t.Errorf("show of the file: %s", out)
	}
	if _, err := os.Stat(target); err == nil {
		t.Errorf("a git tool wrote %s: a path was read as an option", target)
	}
	if got := hostGit(t, dir, "log", "-1", "--format=%s"); got != "--amend\n" {
		t.Errorf("the message %q became %q", "--amend", got)
	}
	for _, tc := range []struct {
		tool string
		args map[string]any
	}{
		{"git_branch", map[string]any{"action": "create", "name": "--output=" + target}},
		{"git_branch", map[string]any{"action": "create", "name": "-D"}},
		{"git_branch", map[string]any{"action": "switch", "name": "--orphan=x"}},
		{"git_branch", map[string]any{"action": "create", "name": "ok", "start": "--output=" + target}},
		{"git_diff", map[string]any{"base": "--output=" + target}},
		{"git_log", map[string]any{"rev": "--all"}},
		{"git_show", map[string]any{"rev": "HEAD:a.txt"}},
		{"git_show", map[string]any{"rev": "main..HEAD"}},
		{"git_diff", map[string]any{"paths": []string{"../outside"}}},
		{"git_add", map[string]any{"paths": []string{".git/config"}}},
	} {
		r := call(t, env, tc.tool, tc.args)
		if !r.IsError || !strings.Contains(r.Output, "invalid arguments") {
			t.Errorf("%s %v was not refused as a bad argument: %s", tc.tool, tc.args, r.Output)
		}
	}
	if _, err := os.Stat(target); err == nil {
		t.Errorf("a refused call wrote %s", target)
	}
}

// What the read policy hides, the git tools never show: a changed .env
// is not listed by status, its content not diffed or shown, and all does
// not stage it. The negative control is the same calls without a gate.
func TestReadPolicyHides(t *testing.T) {
	sb := realSandbox(t)
	dir := newRepo(t, map[string]string{".env": "TOKEN=old-secret\n", "main.go": "package main\n"})
	writeFiles(t, dir, map[string]string{".env": "TOKEN=new-secret\n", "main.go": "package main // changed\n"})
	g := &policyGate{p: policy.Default()}
	g.p.Defaults.Exec = policy.Allow
	g.p.Defaults.Write = policy.Allow
	env := envOn(t, dir, sb, g)
	open := envOn(t, dir, sb, nil)

	for _, tc := range []struct {
		tool string
		args any
	}{
		{"git_status", nil},
		{"git_diff", nil},
		{"git_diff", map[string]any{"paths": []string{".env"}}},
		{"git_show", map[string]any{"rev": "HEAD"}},
	} {
		if out := mustOK(t, open, tc.tool, tc.args); !strings.Contains(out, ".env") && !strings.Contains(out, "TOKEN") {
			t.Errorf("negative control: %s %v without a gate does not show .env:\n%s", tc.tool, tc.args, out)
		}
		out := call(t, env, tc.tool, tc.args).Output
		if strings.Contains(out, "TOKEN") || strings.Contains(out, ".env") {
			t.Errorf("%s %v shows what the read policy hides:\n%s", tc.tool, tc.args, out)
		}
	}
	if r := call(t, env, "git_show", map[string]any{"path": ".env"}); !r.IsError || strings.Contains(r.Output, "TOKEN") {
		t.Errorf("git_show of .env was not refused: %s", r.Output)
	}
	out := mustOK(t, env, "git_add", map[string]any{"all": true})
	if strings.Contains(out, ".env") {
		t.Errorf("add all names .env: %s", out)
	}
	if got := hostGit(t, dir, "diff", "--cached", "--name-only"); got != "main.go\n" {
		t.Errorf("add all staged %q", got)
	}
	if r := call(t, env, "git_add", map[string]any{"paths": []string{".env"}}); !r.IsError {
		t.Errorf("staging .env by name was not refused: %s", r.Output)
	}
}

// A repository that is not the workspace's own is refused before git
// runs: a .git file pointing elsewhere, a symlinked .git, objects
// borrowed from another repository.
func TestForeignRepositoryRefused(t *testing.T) {
	sb := realSandbox(t)
	other := newRepo(t, map[string]string{"secret.txt": "elsewhere\n"})
	for name, setup := range map[string]func(dir string){
		"gitfile": func(dir string) {
			os.RemoveAll(filepath.Join(dir, ".git"))
			os.WriteFile(filepath.Join(dir, ".git"), []byte("gitdir: "+filepath.Join(other, ".git")+"\n"), 0o644)
		},
		"symlink": func(dir string) {
			os.RemoveAll(filepath.Join(dir, ".git"))
			os.Symlink(filepath.Join(other, ".git"), filepath.Join(dir, ".git"))
		},
		"alternates": func(dir string) {
			os.WriteFile(filepath.Join(dir, ".git", "objects", "info", "alternates"), []byte(filepath.Join(other, ".git", "objects")+"\n"), 0o644)
		},
		"commondir": func(dir string) {
			os.WriteFile(filepath.Join(dir, ".git", "commondir"), []byte(filepath.Join(other, ".git")+"\n"), 0o644)
		},
	} {
		t.Run(name, func(t *testing.T) {
			dir := newRepo(t, map[string]string{"a.txt": "a\n"})
			os.MkdirAll(filepath.Join(dir, ".git", "objects", "info"), 0o755)
			setup(dir)
			r := call(t, envOn(t, dir, sb, nil), "git_log", nil)
			if !r.IsError || !strings.Contains(r.Output, "refuse") {
				t.Errorf("git_log on a %s repository: %s", name, r.Output)
			}
		})
	}
	// Negative control: a workspace that is not a repository is told so,
	// and one that is works.
	if r := call(t, envOn(t, t.TempDir(), sb, nil), "git_status", nil); !r.IsError || !strings.Contains(r.Output, "not a git repository") {
		t.Errorf("git_status outside a repository: %s", r.Output)
	}
	if r := call(t, envOn(t, other, sb, nil), "git_log", nil); r.IsError {
		t.Errorf("git_log on a plain repository: %s", r.Output)
	}
}

// A change through git is the exec of the command the tool builds, and
// the policy judges it as one: a deny of "git commit*" stops the commit
// and nothing else; a switch that would rewrite a file the write policy
// asks about is refused whole.
func TestChangesAreJudged(t *testing.T) {
	sb := realSandbox(t)
	dir := newRepo(t, map[string]string{"a.txt": "one\n", "locked/b.txt": "bee\n"})
	hostGit(t, dir, "switch", "-q", "-c", "other")
	writeFiles(t, dir, map[string]string{"locked/b.txt": "changed on other\n"})
	hostGit(t, dir, "commit", "-q", "-am", "other")
	hostGit(t, dir, "switch", "-q", "main")
	g := &policyGate{p: policy.Policy{Version: 1, Defaults: policy.Defaults{Read: policy.Allow, Write: policy.Allow, Exec: policy.Allow, Net: policy.Deny},
		Layers: []policy.Layer{{Name: "t", Rules: []policy.Rule{
			{Act: policy.Exec, Effect: policy.Deny, Pattern: "git commit*"},
			{Act: policy.Write, Effect: policy.Ask, Pattern: "locked/**"},
		}}}}}
	env := envOn(t, dir, sb, g)
	writeFiles(t, dir, map[string]string{"a.txt": "two\n"})
	mustOK(t, env, "git_add", map[string]any{"paths": []string{"a.txt"}})
	if a := g.actions[len(g.actions)-1]; a.Target != "git add -- a.txt" {
		t.Errorf("git_add asked about %q", a.Target)
	}
	if r := call(t, env, "git_commit", map[string]any{"message": "m"}); !r.IsError || r.Refusal == "" {
		t.Errorf("a commit the policy denies: %+v", r)
	}
	if got := hostGit(t, dir, "rev-list", "--count", "HEAD"); got != "1\n" {
		t.Errorf("a denied commit was made: %s commits", got)
	}
	if r := call(t, env, "git_branch", map[string]any{"action": "switch", "name": "other"}); !r.IsError || !strings.Contains(r.Output, "locked/b.txt") {
		t.Errorf("a switch rewriting an asked-about file: %+v", r)
	}
	if head := hostGit(t, dir, "symbolic-ref", "--short", "HEAD"); head != "main\n" {
		t.Errorf("the refused switch moved HEAD to %s", head)
	}
	// Negative control: the same calls under a policy that allows them.
	g.p.Layers = nil
	mustOK(t, env, "git_commit", map[string]any{"message": "m"})
	mustOK(t, env, "git_branch", map[string]any{"action": "switch", "name": "other"})
	if data, _ := os.ReadFile(filepath.Join(dir, "locked", "b.txt")); string(data) != "changed on other\n" {
		t.Errorf("after the allowed switch locked/b.txt holds %q", data)
	}
}
