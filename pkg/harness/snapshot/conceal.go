package snapshot

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrLinkEscapes is the error [ResolveLinks] wraps for a symbolic link
// that leads out of the root. Its text is the one [os.Root] gives a path
// that does.
var ErrLinkEscapes = errors.New("path escapes from parent")

// ResolveLinks follows the symbolic links that end the path p, inside
// root, and returns the path of the file they lead to, which may not
// exist yet. A link that leads out of the root (an absolute target, or
// one that climbs above it) is an error wrapping [ErrLinkEscapes]. Links
// in directories along the way are left to root.
func ResolveLinks(root *os.Root, p string) (string, error) {
	for range 40 {
		fi, err := root.Lstat(p)
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			return p, nil
		}
		target, err := root.Readlink(p)
		if err != nil {
			return "", fmt.Errorf("read symlink %s: %w", p, err)
		}
		target = strings.ReplaceAll(target, `\`, "/")
		if target == "" || target[0] == '/' || hasDrive(target) {
			return "", fmt.Errorf("symlink %s: %w", p, ErrLinkEscapes)
		}
		next := path.Join(path.Dir(p), target)
		if next == ".." || strings.HasPrefix(next, "../") {
			return "", fmt.Errorf("symlink %s: %w", p, ErrLinkEscapes)
		}
		p = next
	}
	return "", fmt.Errorf("%s: %w", p, syscall.ELOOP)
}

// hasDrive reports whether s begins with a Windows drive letter.
func hasDrive(s string) bool {
	if len(s) < 2 || s[1] != ':' {
		return false
	}
	c := s[0] | 0x20
	return 'a' <= c && c <= 'z'
}

// nameType is a directory entry's name and type.
type nameType struct {
	name string
	typ  fs.FileMode
}

// DefaultMaxNames bounds the names [Conceal] visits.
const DefaultMaxNames = 2_000_000

// Names remembers a workspace's directory listings between walks, each
// with its directory's identity and times, so that a walk of a tree
// that did not change costs a stat per directory instead of a listing.
// A listing is kept only once its directory has been still for a while
// (racyWindow): a filesystem's clock moves in ticks, and a change within
// the tick of a listing would not move the directory's times. The zero
// value is ready; it is safe for concurrent use.
type Names struct {
	mu   sync.Mutex
	dirs map[string]listing
	// window, when not zero, replaces racyWindow (tests).
	window time.Duration
}

// listing is a directory's entries as they were when it had key.
type listing struct {
	key     dirKey
	entries []nameType
}

// racyWindow is how long a directory must have been unchanged for its
// listing to be kept.
const racyWindow = time.Second

func (n *Names) get(dir string, key dirKey) ([]nameType, bool) {
	if n == nil || !key.ok {
		return nil, false
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	l, ok := n.dirs[dir]
	return l.entries, ok && l.key == key
}

func (n *Names) put(dir string, key dirKey, entries []nameType, listed time.Time) {
	if n == nil || !key.ok {
		return
	}
	window := racyWindow
	if n.window != 0 {
		window = n.window
	}
	if listed.Sub(key.changed()) < window {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.dirs == nil {
		n.dirs = map[string]listing{}
	}
	n.dirs[dir] = listing{key, entries}
}

// Conceal walks the names under root and returns, sorted, what a command that
// runs on the workspace itself (not on a copy) must not see: each file
// visible refuses (rel is a clean slash path), and each symbolic link
// that leads out of the workspace or to a file visible refuses — the
// same files a copy made by [Take] would leave out. It opens directories
// and reads links, and never stats or opens a file, so that its cost is
// that of listing the names; with cache (nil for none), a directory
// unchanged since an earlier walk is not listed again. A directory is
// walked, not judged: what the policy refuses is refused file by file.
// At most maxNames names are visited (zero means [DefaultMaxNames]); a
// tree over it is an error, as is one Conceal cannot list.
func Conceal(ctx context.Context, root *os.Root, visible func(rel string) bool, maxNames int, cache *Names) ([]string, error) {
	if maxNames <= 0 {
		maxNames = DefaultMaxNames
	}
	var out []string
	seen := 0
	var walk func(d dirHandle, dir string) error
	walk = func(d dirHandle, dir string) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		entries, err := listDir(d, dir, cache)
		if err != nil {
			return fmt.Errorf("list %s: %w", dir, err)
		}
		if seen += len(entries); seen > maxNames {
			return fmt.Errorf("the workspace has over %d names", maxNames)
		}
		for _, e := range entries {
			rel := path.Join(dir, e.name)
			switch t := e.typ; {
			case t.IsDir():
				sub, err := openSub(d, e.name)
				if err != nil {
					return fmt.Errorf("list %s: %w", rel, err)
				}
				err = walk(sub, rel)
				sub.close()
				if err != nil {
					return err
				}
			case t&fs.ModeSymlink != 0:
				target, err := ResolveLinks(root, rel)
				if err != nil || (visible != nil && !visible(target)) {
					out = append(out, rel)
				}
			default:
				if visible != nil && !visible(rel) {
					out = append(out, rel)
				}
			}
		}
		return nil
	}
	top, err := openTop(root)
	if err != nil {
		return nil, fmt.Errorf("list the workspace: %w", err)
	}
	defer top.close()
	if err := walk(top, "."); err != nil {
		return nil, err
	}
	slices.Sort(out)
	return out, nil
}

// listDir lists the directory d, at dir, from cache when it has not
// changed since.
func listDir(d dirHandle, dir string, cache *Names) ([]nameType, error) {
	var key dirKey
	if cache != nil {
		key = d.key()
		if entries, ok := cache.get(dir, key); ok {
			return entries, nil
		}
	}
	listed := time.Now()
	entries, err := d.names()
	if err != nil {
		return nil, err
	}
	if cache != nil && d.key() == key {
		// The directory is what was listed only if it did not change
		// while it was.
		cache.put(dir, key, entries, listed)
	}
	return entries, nil
}

// Appeared walks root again as [Conceal] does and returns, sorted, what
// it must conceal now that before (an earlier Conceal's result) did not
// hold: a file the read policy refuses, or a link out, that appeared in
// the workspace after before was taken. A command that ran on the
// workspace meanwhile may have read it, since what it was shown
// concealed was fixed when it started.
func Appeared(ctx context.Context, root *os.Root, visible func(rel string) bool, before []string, cache *Names) ([]string, error) {
	now, err := Conceal(ctx, root, visible, 0, cache)
	if err != nil {
		return nil, err
	}
	held := make(map[string]bool, len(before))
	for _, p := range before {
		held[p] = true
	}
	var out []string
	for _, p := range now {
		if !held[p] {
			out = append(out, p)
		}
	}
	return out, nil
}
