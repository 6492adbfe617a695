package git

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// hostile makes a repository that runs a program at every chance git
// gives it: a clean, smudge and process filter and a textconv and diff
// command for every file (through .gitattributes and the repository's
// config, and through a config file it includes), a long-running filter
// process (for *.p when process is set: its failing protocol stops the
// commands after it, so the negative control adds it last), an external
// diff, an
// fsmonitor, a pager, an editor, a gpg program with signing on, an ssh
// command, a credential helper, and every hook. Each program appends its
// name to the file "ran" in markers and passes its input through. It
// returns the repository, with a change staged and one not, and a
// branch "other" to switch to.
func hostile(t *testing.T, markers string, process bool) string {
	t.Helper()
	dir := newRepo(t, map[string]string{"a.txt": "one\n", "b.txt": "bee\n", "d.md": "dee\n", "e.p": "pea\n"})
	hostGit(t, dir, "branch", "other")
	writeFiles(t, dir, map[string]string{"a.txt": "two\n", "c.txt": "sea\n", "b.txt": "bee bee\n", "d.md": "dee dee\n"})
	hostGit(t, dir, "add", "c.txt")

	prog := filepath.Join(markers, "prog")
	script := fmt.Sprintf(`#!/bin/sh
echo "$1" >> %s/ran
case "$1" in
  editor) echo "a message" > "$2" ;;
  clean|smudge|include-clean|pager) cat ;;
  textconv) cat "$2" ;;
esac
exit 0
`, markers)
	if err := os.WriteFile(prog, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	// Programs git runs by path, not through a shell, get a file each.
	for _, name := range []string{"gpg", "askpass"} {
		wrapper := fmt.Sprintf("#!/bin/sh\nexec %s %s \"$@\"\n", prog, name)
		if err := os.WriteFile(prog+"-"+name, []byte(wrapper), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.Chmod(markers, 0o777)
	writeFiles(t, dir, map[string]string{
		".gitattributes": "* filter=evil\n*.txt filter=evil2 diff=evil\n" + pick(process, "*.p filter=evilp\n", ""),
		"extra.cfg":      fmt.Sprintf("[filter \"evil2\"]\n\tclean = %s include-clean\n\tsmudge = %s include-smudge\n", prog, prog),
	})
	cfg := fmt.Sprintf(`
[include]
	path = ../extra.cfg
[filter "evil"]
	clean = %[1]s clean
	smudge = %[1]s smudge
[filter "evilp"]
	process = %[1]s process
[diff "evil"]
	textconv = %[1]s textconv
	command = %[1]s diffcommand
[diff]
	external = %[1]s external
[core]
	fsmonitor = %[1]s fsmonitor
	pager = %[1]s pager
	editor = %[1]s editor
	sshCommand = %[1]s ssh
	askPass = %[1]s-askpass
[commit]
	gpgSign = true
[gpg]
	program = %[1]s-gpg
[credential]
	helper = %[1]s credential
[uploadpack]
	packObjectsHook = %[1]s packobjects
`, prog)
	f, err := os.OpenFile(filepath.Join(dir, ".git", "config"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(cfg)
	f.Close()
	for _, h := range []string{"pre-commit", "prepare-commit-msg", "commit-msg", "post-commit", "post-checkout",
		"post-index-change", "reference-transaction", "pre-auto-gc", "post-rewrite"} {
		hook := fmt.Sprintf("#!/bin/sh\n%s hook-%s\n", prog, h)
		if err := os.WriteFile(filepath.Join(dir, ".git", "hooks", h), []byte(hook), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// ran returns the names of the programs that ran, sorted, once each.
func ran(t *testing.T, markers string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(markers, "ran"))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var out []string
	for _, l := range strings.Fields(string(data)) {
		if !seen[l] {
			seen[l] = true
			out = append(out, l)
		}
	}
	sort.Strings(out)
	return out
}

// A repository that would run a program at every chance git gives it
// runs none through the git tools — every tool, on a repository with
// staged and unstaged changes, a commit and a switch included. The
// negative control runs plain git on the same repository in the same
// sandbox (whose marker directory is writable to both): each vector
// does run there, so the marker's absence is the tools' doing, not the
// sandbox's.
func TestUntrustedRepositoryRunsNoCode(t *testing.T) {
	sb := realSandbox(t)

	// Negative control first, on its own copy of the repository.
	markers := t.TempDir()
	dir := hostile(t, markers, false)
	plain := withWritable{sb, markers}
	script := strings.Join([]string{
		"git status",
		"git diff",
		"git -c core.pager= log -p -1 >/dev/null",
		"git diff --cached --no-ext-diff",
		"git add a.txt d.md",
		"echo '*.p filter=evilp' >> .gitattributes; echo more >> e.p; git add e.p",
		"git commit -q -m signed",
		"git -c commit.gpgSign=false commit -q -m msg",
		"git -c commit.gpgSign=false commit -q --allow-empty",
		"git switch -q other",
		"git ls-remote ssh://example.invalid/repo",
		"printf 'protocol=https\\nhost=example.invalid\\n\\n' | git credential fill",
	}, " ; ") + " ; true"
	res, err := plain.Run(t.Context(), plainSpec(dir, "sh", "-c", script))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"clean", "credential", "diffcommand", "editor", "external", "fsmonitor", "gpg", "hook-commit-msg",
		"hook-post-checkout", "hook-post-commit", "hook-post-index-change", "hook-pre-commit", "hook-prepare-commit-msg",
		"hook-reference-transaction", "include-clean", "include-smudge", "process", "ssh", "textconv"}
	got := ran(t, markers)
	for _, w := range want {
		if !contains(got, w) {
			t.Errorf("negative control: plain git did not run the %s vector (it ran %v); stderr:\n%s", w, got, res.Stderr)
		}
	}

	// The tools, on a fresh copy.
	markers = t.TempDir()
	dir = hostile(t, markers, true)
	env := envOn(t, dir, withWritable{sb, markers}, nil)
	steps := []struct {
		tool string
		args any
	}{
		{"git_status", nil},
		{"git_diff", nil},
		{"git_diff", map[string]any{"staged": true}},
		{"git_diff", map[string]any{"base": "HEAD"}},
		{"git_log", nil},
		{"git_show", nil},
		{"git_show", map[string]any{"path": "a.txt"}},
		{"git_add", map[string]any{"paths": []string{"a.txt"}}},
		{"git_add", map[string]any{"all": true}},
		{"git_commit", map[string]any{"message": "through the tools"}},
		{"git_branch", map[string]any{"action": "create", "name": "made"}},
		{"git_branch", map[string]any{"action": "switch", "name": "other"}},
		{"git_branch", nil},
	}
	for _, s := range steps {
		if r := call(t, env, s.tool, s.args); r.IsError {
			t.Errorf("%s %v failed: %s", s.tool, s.args, r.Output)
		}
	}
	if got := ran(t, markers); len(got) > 0 {
		t.Errorf("the git tools ran the repository's programs: %v", got)
	}
	// The work happened: the commit is there, by the configured identity,
	// unsigned, and the switch took.
	if got := hostGit(t, dir, "log", "-1", "--format=%s|%an", "main"); got != "through the tools|Test Agent\n" {
		t.Errorf("the commit on main is %q", got)
	}
	if head := hostGit(t, dir, "symbolic-ref", "HEAD"); head != "refs/heads/other\n" {
		t.Errorf("HEAD is %q", head)
	}
}

func contains(list []string, s string) bool {
	for _, l := range list {
		if l == s {
			return true
		}
	}
	return false
}

// The repository's config reaches git only through the allow-list.
func TestReadConfig(t *testing.T) {
	conf := `# a comment
[core]
	repositoryformatversion = 1
	filemode = true
	fsmonitor = /bin/evil ; ignored: not carried
	bare
[extensions]
	objectFormat = sha256
[filter "evil"]
	clean = "sh -c \"touch x\""
[Core]
	FileMode = "false" # last wins
[branch "Main"]
	remote = origin
`
	got, err := readConfig([]byte(conf))
	if err != nil {
		t.Fatal(err)
	}
	want := []keyValue{{"core.repositoryformatversion", "1"}, {"core.filemode", "false"}, {"extensions.objectformat", "sha256"}}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(keyValue{})); diff != "" {
		t.Errorf("carried (-want +got):\n%s", diff)
	}
	for name, bad := range map[string]string{
		"unterminated quote":     "[core]\n\tfilemode = \"true\n",
		"bad escape":             "[core]\n\tfilemode = tr\\ue\n",
		"setting before section": "filemode = true\n",
		"bad section":            "[core\n",
		"bad value of a carried": "[core]\n\trepositoryformatversion = 7\n",
		"format without version": "[extensions]\n\tobjectformat = sha256\n",
	} {
		kvs, err := readConfig([]byte(bad))
		if err == nil {
			_, err = shadowConfig(kvs)
		}
		if err == nil {
			t.Errorf("%s: %q was accepted", name, bad)
		}
	}
}
