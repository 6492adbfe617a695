package git

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/initorigin/io-harness-go/pkg/harness/tool"
	"github.com/initorigin/io-harness-go/pkg/sandbox"
)

// repo is the workspace's repository, set up for one tool call: a shadow
// git directory whose config is the harness's, and whose objects, refs and
// logs are the repository's own (symlinks to them).
//
// Git never reads the repository's config, hooks or info/attributes: its
// GIT_DIR is the shadow, made fresh for every call in a private temporary
// directory. The settings it runs with come from the environment the
// harness builds (GIT_CONFIG_COUNT), in which every key that can name a
// program is set to run none, and from the allow-listed keys of the
// repository's config (see readConfig). The index is the repository's,
// through GIT_INDEX_FILE; HEAD is copied in, and copied back when a
// switch changed it.
type repo struct {
	env    *tool.Env
	cfg    Config
	ws     string // the workspace, an absolute path with no symlinks
	dir    string // the private temporary directory
	gitdir string // the shadow git directory in it
	home   string // HOME and XDG_CONFIG_HOME: empty
	head   []byte // HEAD as copied in
	kvs    []keyValue
}

// maxHead bounds the HEAD file the harness copies.
const maxHead = 4 << 10

// openRepo checks the workspace's repository and makes its shadow. The
// repository must be the workspace's own: .git a real directory at the
// workspace root (not a file pointing elsewhere, not a symlink), with
// real objects, refs and logs directories, borrowing no objects from
// another repository (objects/info/alternates) and sharing no common
// directory (commondir). Anything else is refused with its reason.
func openRepo(env *tool.Env, cfg Config) (*repo, *tool.Result) {
	if env == nil || env.Root == nil {
		r := tool.Errorf("the git tools have no workspace to act on")
		return nil, &r
	}
	if env.Sandbox == nil {
		r := tool.Errorf("the git tools are not available: no sandbox is configured, and git never runs on the host")
		return nil, &r
	}
	ws, err := filepath.Abs(env.Root.Name())
	if err == nil {
		ws, err = filepath.EvalSymlinks(ws)
	}
	if err != nil {
		r := tool.Errorf("the workspace cannot be located: %v", err)
		return nil, &r
	}
	refuse := func(format string, a ...any) (*repo, *tool.Result) {
		r := tool.Errorf("the git tools refuse this repository: "+format, a...)
		return nil, &r
	}
	fi, err := env.Root.Lstat(".git")
	switch {
	case errors.Is(err, fs.ErrNotExist):
		r := tool.Errorf("the workspace is not a git repository (it has no .git directory at its root)")
		return nil, &r
	case err != nil:
		return refuse(".git cannot be read: %v", err)
	case fi.Mode()&fs.ModeSymlink != 0:
		return refuse(".git is a symlink; a repository must be the workspace's own")
	case !fi.IsDir():
		return refuse(".git is a file (a worktree or submodule pointing elsewhere); the git tools work on a repository whose .git directory is in the workspace")
	}
	for _, d := range []string{".git/objects", ".git/refs"} {
		fi, err := env.Root.Lstat(d)
		if err != nil || !fi.IsDir() || fi.Mode()&fs.ModeSymlink != 0 {
			return refuse("%s is not a directory of the repository's own", d)
		}
	}
	if fi, err := env.Root.Lstat(".git/logs"); err == nil && (!fi.IsDir() || fi.Mode()&fs.ModeSymlink != 0) {
		return refuse(".git/logs is not a directory of the repository's own")
	}
	for _, f := range []string{".git/commondir", ".git/objects/info/alternates", ".git/objects/info/http-alternates"} {
		if _, err := env.Root.Lstat(f); err == nil {
			return refuse("%s exists: the repository shares objects or refs with another one, which the git tools do not reach", f)
		}
	}
	conf, err := readSmall(env.Root, ".git/config", maxConfig)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return refuse(".git/config cannot be read: %v", err)
	}
	kvs, err := readConfig(conf)
	if err != nil {
		return refuse(".git/config: %v", err)
	}
	shadowConf, err := shadowConfig(kvs)
	if err != nil {
		return refuse(".git/config: %v", err)
	}
	head, err := readSmall(env.Root, ".git/HEAD", maxHead)
	if err != nil {
		return refuse(".git/HEAD cannot be read: %v", err)
	}

	dir, err := os.MkdirTemp("", "io-harness-git-")
	if err != nil {
		r := tool.Errorf("git could not run: make its directory: %v", err)
		return nil, &r
	}
	r := &repo{env: env, cfg: cfg, ws: ws, dir: dir, gitdir: filepath.Join(dir, "gitdir"), home: filepath.Join(dir, "home"), head: head, kvs: kvs}
	if err := r.makeShadow(shadowConf); err != nil {
		r.close()
		res := tool.Errorf("git could not run: make its directory: %v", err)
		return nil, &res
	}
	return r, nil
}

// makeShadow lays out the shadow git directory.
func (r *repo) makeShadow(conf string) error {
	// The sandbox may run git as another uid than ours; the directory
	// is private by its random name, and must be usable by that uid.
	for _, d := range []string{r.gitdir, r.home, filepath.Join(r.gitdir, "info")} {
		if err := os.MkdirAll(d, 0o777); err != nil {
			return err
		}
		os.Chmod(d, 0o777)
	}
	os.Chmod(r.dir, 0o711)
	files := map[string][]byte{"config": []byte(conf), "HEAD": r.head}
	if ex, err := readSmall(r.env.Root, ".git/info/exclude", maxConfig); err == nil {
		files["info/exclude"] = ex
	}
	if sh, err := readSmall(r.env.Root, ".git/shallow", 16<<20); err == nil {
		files["shallow"] = sh
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(r.gitdir, name), data, 0o666); err != nil {
			return err
		}
		os.Chmod(filepath.Join(r.gitdir, name), 0o666)
	}
	links := []string{"objects", "refs"}
	for _, opt := range []string{"logs", "packed-refs"} {
		if _, err := r.env.Root.Lstat(".git/" + opt); err == nil {
			links = append(links, opt)
		}
	}
	// A split index keeps its shared part beside the index.
	if entries, err := fs.ReadDir(r.env.Root.FS(), ".git"); err == nil {
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), "sharedindex.") && e.Type().IsRegular() {
				links = append(links, e.Name())
			}
		}
	}
	for _, l := range links {
		if err := os.Symlink(filepath.Join(r.ws, ".git", l), filepath.Join(r.gitdir, l)); err != nil {
			return err
		}
	}
	return nil
}

func (r *repo) close() { os.RemoveAll(r.dir) }

// readSmall reads a file of the workspace that must be a regular file
// of at most max bytes.
func readSmall(root *os.Root, name string, max int64) ([]byte, error) {
	fi, err := root.Lstat(name)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", name)
	}
	if fi.Size() > max {
		return nil, fmt.Errorf("%s is over %d bytes", name, max)
	}
	f, err := root.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, max))
}

// settings are the config git runs with, beside the shadow's file: the
// command scope, which no repository file can override. Every key that
// can make git run a program is set to run none; the carried keys follow.
func (r *repo) settings() []keyValue {
	kvs := []keyValue{
		{"core.hooksPath", "/dev/null"},
		{"core.fsmonitor", "false"},
		{"core.untrackedCache", "false"},
		{"core.sshCommand", "false"},
		{"core.gitProxy", ""},
		{"core.askPass", ""},
		{"core.pager", "cat"},
		{"core.editor", ":"},
		{"sequence.editor", ":"},
		{"core.alternateRefsCommand", ""},
		{"core.protectNTFS", "true"},
		{"core.protectHFS", "true"},
		{"core.quotePath", "false"},
		{"credential.helper", ""},
		{"diff.external", ""},
		{"diff.ignoreSubmodules", "all"},
		{"diff.renames", "false"},
		{"status.submoduleSummary", "false"},
		{"submodule.recurse", "false"},
		{"commit.gpgSign", "false"},
		{"tag.gpgSign", "false"},
		{"log.showSignature", "false"},
		{"gpg.program", "false"},
		{"gc.auto", "0"},
		{"maintenance.auto", "false"},
		{"fetch.fsckObjects", "false"},
		{"protocol.allow", "never"},
		{"color.ui", "false"},
		{"advice.detachedHead", "false"},
		{"safe.directory", "*"},
		{"user.name", r.cfg.Name},
		{"user.email", r.cfg.Email},
		{"user.useConfigOnly", "true"},
	}
	for _, kv := range r.kvs {
		if kv.key != "core.repositoryformatversion" && !strings.HasPrefix(kv.key, "extensions.") {
			kvs = append(kvs, kv)
		}
	}
	return kvs
}

// environ is git's whole environment: nothing is inherited from the
// host, and nothing tells git where a config other than the shadow's is.
func (r *repo) environ(write bool) []string {
	env := []string{
		"PATH=" + r.env.Programs.Path(),
		"HOME=" + r.home,
		"XDG_CONFIG_HOME=" + r.home,
		"LANG=C.UTF-8",
		"LC_ALL=C.UTF-8",
		"GIT_DIR=" + r.gitdir,
		"GIT_WORK_TREE=" + r.ws,
		"GIT_INDEX_FILE=" + filepath.Join(r.ws, ".git", "index"),
		"GIT_CEILING_DIRECTORIES=" + filepath.Dir(r.ws),
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_ATTR_NOSYSTEM=1",
		"GIT_NO_REPLACE_OBJECTS=1",
		"GIT_LITERAL_PATHSPECS=1",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_PAGER=cat",
		"PAGER=cat",
		"GIT_EDITOR=:",
		"GIT_AUTHOR_NAME=" + r.cfg.Name,
		"GIT_AUTHOR_EMAIL=" + r.cfg.Email,
		"GIT_COMMITTER_NAME=" + r.cfg.Name,
		"GIT_COMMITTER_EMAIL=" + r.cfg.Email,
	}
	if !write {
		env = append(env, "GIT_OPTIONAL_LOCKS=0")
	}
	kvs := r.settings()
	env = append(env, "GIT_CONFIG_COUNT="+strconv.Itoa(len(kvs)))
	for i, kv := range kvs {
		env = append(env, fmt.Sprintf("GIT_CONFIG_KEY_%d=%s", i, kv.key), fmt.Sprintf("GIT_CONFIG_VALUE_%d=%s", i, kv.value))
	}
	return env
}

// gitTimeout bounds one git command.
const gitTimeout = 120 * time.Second

// run runs git with args in the sandbox: in the workspace, which is
// bound writable only when write is set (read-only otherwise, and git
// takes no optional locks), with stdin on its standard input. out is the
// most each of stdout and stderr keeps; a command that writes more is
// stopped, and its result says so.
func (r *repo) run(ctx context.Context, write bool, stdin []byte, out int64, args ...string) (*sandbox.Result, error) {
	argv := append([]string{"git", "--no-pager", "-C", r.ws}, args...)
	spec := &sandbox.Spec{Argv: argv, Env: r.environ(write), Stdin: stdin,
		Limits: sandbox.Limits{Wall: sandbox.Duration(gitTimeout), Output: out}}
	if write {
		spec.Workdir = r.ws
		spec.Writable = []string{r.dir}
	} else {
		spec.Workdir = r.dir
		spec.ReadOnly = []string{r.ws}
	}
	// Git writes the caller's repository: it runs as the caller, its
	// argv and its configuration the harness's own.
	sb := r.env.Sandbox
	if r.env.Trusted != nil {
		sb = r.env.Trusted
	}
	return sb.Run(ctx, spec)
}

// failure describes a git command that did not succeed.
func failure(what string, res *sandbox.Result) string {
	var b strings.Builder
	switch {
	case res.CapHit != sandbox.CapNone:
		fmt.Fprintf(&b, "%s was stopped: it hit the sandbox's %s limit", what, res.CapHit)
	case res.Signal != "":
		fmt.Fprintf(&b, "%s was killed by %s", what, res.Signal)
	default:
		fmt.Fprintf(&b, "%s failed (git exited with status %d)", what, res.ExitCode)
	}
	if msg := strings.TrimSpace(string(res.Stderr)); msg != "" {
		fmt.Fprintf(&b, ":\n%s", msg)
	}
	return b.String()
}

// syncHead copies the shadow's HEAD back into the repository when the
// command changed it (a switch, a commit on a detached HEAD), through
// git's own lock: HEAD.lock, written and renamed over HEAD.
func (r *repo) syncHead() error {
	now, err := os.ReadFile(filepath.Join(r.gitdir, "HEAD"))
	if err != nil {
		return err
	}
	if bytes.Equal(now, r.head) {
		return nil
	}
	f, err := r.env.Root.OpenFile(".git/HEAD.lock", os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("lock HEAD: %w", err)
	}
	_, err = f.Write(now)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = r.env.Root.Rename(".git/HEAD.lock", ".git/HEAD")
	}
	if err != nil {
		r.env.Root.Remove(".git/HEAD.lock")
		return err
	}
	r.head = now
	return nil
}

// splitNUL splits git's -z output into its fields.
func splitNUL(b []byte) []string {
	s := strings.TrimSuffix(string(b), "\x00")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\x00")
}
