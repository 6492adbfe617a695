package tool

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/initorigin/io-harness-go/pkg/harness/policy"
	"github.com/initorigin/io-harness-go/pkg/harness/snapshot"
	"github.com/initorigin/io-harness-go/pkg/sandbox"
)

// runOnWorkspace runs a command in the sandbox on the workspace itself,
// where the sandbox can hold the command's changes apart (an overlay
// whose lower layer is the workspace: Enforcement.Overlay), and on a
// copy of it elsewhere (runOnCopy). On the workspace, what the read
// policy refuses is concealed (snapshot.Conceal), .git is shown
// read-only, and what the command changed comes back from the upper
// layer through the write policy (collectBack). spec makes the command
// for the directory it runs in and the home it is given.
func runOnWorkspace(ctx context.Context, env *Env, prefix string, spec func(dir, home string) *sandbox.Spec) (*sandbox.Result, copied, error) {
	if !env.Sandbox.Enforcement().Overlay {
		return runOnCopy(ctx, env, prefix, func(dir string) *sandbox.Spec { return spec(dir, dir) })
	}
	c := copied{seen: snapshot.Seen(nil)}
	c.since = mark(env)
	dir, err := filepath.Abs(env.Root.Name())
	if err != nil {
		return nil, c, fmt.Errorf("the workspace: %w", err)
	}
	conceal, err := snapshot.Conceal(ctx, env.Root, func(rel string) bool {
		v := peek(env, policy.Read, rel)
		if v.Effect != policy.Allow {
			c.verdicts = append(c.verdicts, v)
		}
		return v.Effect == policy.Allow
	}, 0, env.Names)
	if err != nil {
		return nil, c, fmt.Errorf("judge the workspace's files: %w", err)
	}
	s := spec(dir, "/tmp")
	s.Lend = false
	s.Conceal = conceal
	if fi, err := env.Root.Lstat(".git"); err == nil && fi.IsDir() && !slices.Contains(conceal, ".git") {
		// The repository is the user's: shown as it is, never written.
		g := filepath.Join(dir, ".git")
		s.ReadOnlyAt = append(s.ReadOnlyAt, sandbox.Bind{Source: g, Target: g})
	}
	var tainted bool // a refused file appeared while the command ran
	s.Collect = func(ctx context.Context, u *sandbox.Upper) error {
		// What the command was shown concealed was fixed when it began:
		// a refused file that appeared since may have been read.
		appeared, err := snapshot.Appeared(ctx, env.Root, func(rel string) bool { return peek(env, policy.Read, rel).Effect == policy.Allow }, conceal, env.Names)
		switch tainted = err != nil || len(appeared) > 0; {
		case tainted:
			c.withheld = append(c.withheld, appearedNote)
		case u.Killed:
			c.withheld = append(c.withheld, killedNote)
		default:
			collectBack(ctx, env, u, &c)
		}
		return nil
	}
	res, err := env.Sandbox.Run(ctx, s)
	switch {
	case res != nil && errors.Is(err, sandbox.ErrApply):
		c.withheld = append(c.withheld, fmt.Sprintf("some of the command's changes could not be brought out of the sandbox: %v", err))
	case err != nil:
		return nil, c, err
	}
	if tainted {
		res.Stdout, res.Stderr = []byte{}, []byte{}
		res.StdoutTruncated, res.StderrTruncated = false, false
	}
	return res, c, nil
}

// collectBack brings a command's changes from the upper layer of its
// workdir into the workspace, each through the write policy without
// asking, as copyBack does with a copy's: a created or changed file is
// written (judged through the workspace's links, as write_file is), a
// removed file or directory is removed (every file in it allowed, or
// none is), a directory made anew loses what the command did not put
// back in it, and links, fifos, sockets and devices are reported, never
// made. It goes on past each refusal.
func collectBack(ctx context.Context, env *Env, u *sandbox.Upper, c *copied) {
	var total int64
	entries := 0
	var opaque []string
	inUpper := map[string]bool{}
	err := u.Walk(func(ch sandbox.Change) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		inUpper[ch.Path] = true
		if entries++; entries > maxCopyBackEntries {
			c.err = fmt.Errorf("the command changed more than %d paths; the first %d were considered, the rest are not copied back", maxCopyBackEntries, maxCopyBackEntries)
			return errStopCollect
		}
		switch ch.Kind {
		case sandbox.ChangeDir:
			if ch.Opaque {
				opaque = append(opaque, ch.Path)
			}
			if InGitDir(ch.Path) {
				return fs.SkipDir
			}
			if depth(ch.Path) > maxCopyBackDepth {
				c.withheld = append(c.withheld, fmt.Sprintf("%s/: deeper than %d directories; nothing in it is copied back", ch.Path, maxCopyBackDepth))
				return fs.SkipDir
			}
			fi, err := env.Root.Lstat(ch.Path)
			if err == nil && !fi.IsDir() {
				// The command replaced a file or a link with a directory: the
				// entry itself goes (a link, never what it leads to), then
				// the directory is made.
				if !removeEntry(env, ch.Path, fi, c) {
					return fs.SkipDir
				}
				err = fs.ErrNotExist
			}
			if errors.Is(err, fs.ErrNotExist) {
				if v := peekWrite(env, ch.Path); v.Effect != policy.Allow {
					c.verdicts = append(c.verdicts, v)
					c.withheld = append(c.withheld, fmt.Sprintf("%s/: the write policy does not allow it without asking (%s)", ch.Path, v.Effect))
					return fs.SkipDir
				}
				if err := env.Root.MkdirAll(ch.Path, 0o755); err != nil {
					c.withheld = append(c.withheld, fmt.Sprintf("%s/: %s", ch.Path, fsFailure(ch.Path, err).Output))
					return fs.SkipDir
				}
			}
		case sandbox.ChangeFile:
			if v := peekWrite(env, ch.Path); v.Effect != policy.Allow {
				c.verdicts = append(c.verdicts, v)
				c.withheld = append(c.withheld, fmt.Sprintf("%s: the write policy does not allow it without asking (%s)", ch.Path, v.Effect))
				return nil
			}
			if total+ch.Size > maxCopyBack {
				c.withheld = append(c.withheld, fmt.Sprintf("%s: %d bytes, over what is left of the %d-byte copy-back limit", ch.Path, ch.Size, maxCopyBack))
				return nil
			}
			data, err := readUpper(u, ch)
			if err != nil {
				c.withheld = append(c.withheld, fmt.Sprintf("%s: %v", ch.Path, err))
				return nil
			}
			total += int64(len(data))
			if old, err := env.Root.ReadFile(ch.Path); err == nil && string(old) == string(data) {
				if carryExec(env, ch.Path, ch.Mode) {
					c.copied = append(c.copied, ch.Path)
				}
				return nil // touched, or its mode changed
			}
			if _, err := writeAtomic(ctx, env, ch.Path, data, c.since); err != nil {
				c.withheld = append(c.withheld, fmt.Sprintf("%s: %s", ch.Path, fsFailure(ch.Path, err).Output))
				return nil
			}
			carryExec(env, ch.Path, ch.Mode)
			c.copied = append(c.copied, ch.Path)
		case sandbox.ChangeRemoved:
			removeBack(env, ch.Path, c)
		case sandbox.ChangeSymlink:
			c.withheld = append(c.withheld, fmt.Sprintf("%s: a symlink (to %s) is not copied back", ch.Path, ch.Target))
		default:
			c.withheld = append(c.withheld, fmt.Sprintf("%s: a %s is not copied back (only files and directories are)", ch.Path, specialName(ch.Mode)))
		}
		return nil
	})
	if err != nil && !errors.Is(err, errStopCollect) {
		c.err = err
	}
	// A directory made anew: what the workspace had in it and the
	// command did not put back is gone.
	for _, d := range opaque {
		if fi, err := env.Root.Lstat(d); err != nil || !fi.IsDir() {
			continue
		}
		names, err := listTree(env.Root, d)
		if err != nil {
			continue
		}
		for _, n := range names {
			if !inUpper[n] {
				removeBack(env, n, c)
			}
		}
	}
}

// carryExec gives the workspace's file p (through its links) the
// executable bits the command gave it or took from it (x where it can be
// read), and no other bit of its mode: never setuid, setgid or sticky,
// never another's write. It reports whether the mode changed.
func carryExec(env *Env, p string, upper fs.FileMode) bool {
	target, err := resolveLinks(env.Root, p)
	if err != nil {
		return false
	}
	fi, err := env.Root.Stat(target)
	if err != nil || !fi.Mode().IsRegular() {
		return false
	}
	have := fi.Mode().Perm()
	want := have &^ 0o111
	if upper&0o111 != 0 {
		want |= (have & 0o444) >> 2
	}
	if want == have {
		return false
	}
	return env.Root.Chmod(target, want) == nil
}

// readUpper reads a changed file of the upper layer, no more than the
// size it was listed with.
func readUpper(u *sandbox.Upper, ch sandbox.Change) ([]byte, error) {
	f, err := u.Open(ch.Path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, ch.Size+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) != ch.Size {
		return nil, errors.New("the file changed while it was being read")
	}
	return data, nil
}

// removeBack removes p from the workspace, as the command removed it in
// its upper layer: a file or a link (the link itself, never what it leads
// to), or a real directory with everything in it. Every file removed must be one the write
// policy allows without asking, or nothing is removed.
func removeBack(env *Env, p string, c *copied) {
	fi, err := env.Root.Lstat(p)
	if err != nil {
		return // gone already
	}
	if !fi.IsDir() {
		removeEntry(env, p, fi, c)
		return
	}
	names, err := listTree(env.Root, p)
	if err != nil {
		c.withheld = append(c.withheld, fmt.Sprintf("%s: not removed: %v", p, err))
		return
	}
	for _, n := range append(names, p) {
		if v := peekWrite(env, n); v.Effect != policy.Allow {
			c.verdicts = append(c.verdicts, v)
			c.withheld = append(c.withheld, fmt.Sprintf("%s: not removed: the write policy does not allow %s without asking (%s)", p, n, v.Effect))
			return
		}
	}
	// A directory's files are its own (links in it are removed as links).
	remove := func() error { return env.Root.RemoveAll(p) }
	if env.Files != nil {
		f := remove
		remove = func() error { return env.Files.Write(p, c.since, f) }
	}
	if err := remove(); err != nil {
		c.withheld = append(c.withheld, fmt.Sprintf("%s: not removed: %s", p, fsFailure(p, err).Output))
		return
	}
	c.removed = append(c.removed, p)
}

// removeEntry removes the file or link p (never what a link leads to),
// judged by the write policy at p itself and at what p leads to, and
// reports whether it is gone.
func removeEntry(env *Env, p string, fi fs.FileInfo, c *copied) bool {
	if v := peekWrite(env, p); v.Effect != policy.Allow {
		c.verdicts = append(c.verdicts, v)
		c.withheld = append(c.withheld, fmt.Sprintf("%s: not removed: the write policy does not allow it without asking (%s)", p, v.Effect))
		return false
	}
	remove := func() error { return env.Root.Remove(p) }
	if env.Files != nil && fi.Mode()&fs.ModeSymlink == 0 {
		f := remove
		remove = func() error { return env.Files.Write(p, c.since, f) }
	}
	if err := remove(); err != nil && !errors.Is(err, fs.ErrNotExist) {
		c.withheld = append(c.withheld, fmt.Sprintf("%s: not removed: %s", p, fsFailure(p, err).Output))
		return false
	}
	c.removed = append(c.removed, p)
	return true
}

// The bounds of a copy-back from an upper layer: the paths it considers
// and how deep it goes. Past them it stops, or skips, and says so.
const (
	maxCopyBackEntries = 20_000
	maxCopyBackDepth   = 64
)

// errStopCollect ends a walk of the upper layer at maxCopyBackEntries.
var errStopCollect = errors.New("copy-back stopped")

// depth is the number of components of the slash path p.
func depth(p string) int { return strings.Count(p, "/") + 1 }

// listTree returns every path under the directory d of root, children
// before their directory, d excluded.
func listTree(root *os.Root, d string) ([]string, error) {
	var out []string
	f, err := root.Open(d)
	if err != nil {
		return nil, err
	}
	entries, err := f.ReadDir(-1)
	f.Close()
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		p := path.Join(d, e.Name())
		if e.IsDir() {
			sub, err := listTree(root, p)
			if err != nil {
				return nil, err
			}
			out = append(out, sub...)
		}
		out = append(out, p)
	}
	return out, nil
}

// specialName names a file type that is not copied back.
func specialName(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "fifo"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeDevice != 0:
		return "device node"
	}
	return "special file"
}

// appearedNote is what exec reports of a command during which a file the
// read policy refuses appeared in the workspace (another process wrote
// it): the command may have read it, so neither its output nor its
// changes come back.
const appearedNote = "none of the command's changes, and not its output: a file the read policy refuses appeared in the workspace while it ran, and it may have read it"
