package snapshot

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sync"
	"time"

	"github.com/initorigin/io-harness-go/internal/scratch"
	"github.com/initorigin/io-harness-go/pkg/sandbox"
)

// Shadow is a run's copy of a workspace, kept from one command to the
// next and brought up to date before each instead of made anew, for a
// sandbox that cannot run commands on the workspace itself.
//
// After [Shadow.Take] the copy holds what [Take] would copy, and
// nothing else: a file is copied again unless both its workspace file
// (size, times, inode, mode) and its copy (as the shadow last wrote it)
// are unchanged, so that a command's change to the copy, kept or not,
// never reaches the next command; what the workspace no longer has, or
// the read policy now refuses, is removed. A workspace file changed
// within the racy window before a sync (a filesystem's clock moves in
// ticks) is copied again at the next one. Copies are new files (a
// reflink where the filesystem makes one), never hard links.
//
// The copy lives in a directory the process holds (a lock the kernel
// drops when the process dies), removed by [Shadow.Close]; [NewShadow]
// removes those that processes which died without closing theirs left
// behind. A Shadow is safe for concurrent
// use: one command at a time has the copy, and another gets a copy made
// anew.
type Shadow struct {
	mu     sync.Mutex
	dir    string       // the run's directory, made on first use
	held   *scratch.Dir // dir, held while the shadow lives
	snap   *Snapshot    // the copy and its record, nil until first use
	of     fs.FileInfo  // the workspace's top directory the copy is of
	busy   bool         // a command has the copy
	closed bool

	// The tests' hooks: a clock, the stamp of a workspace file, and
	// protections switched off for negative controls.
	now      func() time.Time
	srcStamp func(fs.FileInfo) stamp
	window   time.Duration // 0: racyWindow
	off      struct{ record, shadowCheck, racy, prune bool }
}

// shadowPrefix begins the name of a run's shadow directory in the
// temporary directory.
const shadowPrefix = "io-harness-shadow."

// NewShadow returns an empty shadow, and removes the shadows that no
// live process holds (a run killed with kill -9 closes nothing).
func NewShadow() *Shadow { return newShadow(true) }

func newShadow(sweep bool) *Shadow {
	if sweep {
		scratch.Sweep(shadowPrefix)
	}
	return &Shadow{}
}

// Take returns the run's copy of root, brought up to date with o as
// [Take] would make it, at the cost of a stat of each file and a copy
// of each that changed. Its Remove gives it back for the next command.
// While it is out, Take makes a copy anew (Busy), as [Take] does. A nil
// Shadow always makes a copy anew.
func (sh *Shadow) Take(ctx context.Context, root *os.Root, o Options) (*Snapshot, error) {
	if sh == nil {
		return Take(ctx, root, o)
	}
	sh.mu.Lock()
	if sh.busy || sh.closed {
		busy := sh.busy
		o.Dir = sh.dir
		sh.mu.Unlock()
		s, err := Take(ctx, root, o)
		if s != nil {
			s.Busy = busy
		}
		return s, err
	}
	sh.busy = true
	sh.mu.Unlock()
	s, err := sh.sync(ctx, root, o)
	if err != nil {
		sh.release()
		return nil, err
	}
	return s, nil
}

// release gives the copy back; after Close, it removes it.
func (sh *Shadow) release() {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.busy = false
	if sh.closed {
		sh.removeLocked()
	}
}

// Close removes the shadow's directory (once the command that has the
// copy gives it back). Later Takes make copies anew.
func (sh *Shadow) Close() error {
	if sh == nil {
		return nil
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.closed = true
	if sh.busy {
		return nil
	}
	return sh.removeLocked()
}

func (sh *Shadow) removeLocked() error {
	if sh.dir == "" {
		return nil
	}
	err := sh.held.Remove()
	sh.dir, sh.held, sh.snap = "", nil, nil
	return err
}

// Dir is the shadow's directory, or "" before its first Take.
func (sh *Shadow) Dir() string {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.dir
}

// start makes the copy's directory anew: on first use, after the owner
// or the workspace changed, or when a command took the directory itself
// away.
func (sh *Shadow) start(o *Options) error {
	// Only the command that has the copy writes sh.dir, under the lock,
	// for a concurrent Take's copy made anew in it.
	if sh.Dir() == "" {
		// Searchable by the user a root caller's commands run as, who
		// is given the copy in it, and listable by no one else.
		held, err := scratch.Make(shadowPrefix, 0o711)
		if err != nil {
			return err
		}
		sh.mu.Lock()
		sh.dir, sh.held = held.Path, held
		sh.mu.Unlock()
	}
	copyDir := filepath.Join(sh.Dir(), "copy")
	if err := sandbox.RemoveAll(copyDir); err != nil {
		return err
	}
	if err := os.Mkdir(copyDir, 0o700); err != nil {
		return err
	}
	if o.Owner != nil {
		if err := os.Lchown(copyDir, o.Owner.UID, o.Owner.GID); err != nil {
			return err
		}
	}
	sh.snap = &Snapshot{Dir: copyDir, files: map[string]record{}, owner: o.Owner}
	return nil
}

// sync brings the copy up to date with root.
func (sh *Shadow) sync(ctx context.Context, root *os.Root, o Options) (*Snapshot, error) {
	o.defaults()
	top, err := root.Lstat(".")
	if err != nil {
		return nil, err
	}
	if s := sh.snap; s == nil || sh.of == nil || !os.SameFile(sh.of, top) || !sameOwner(s.owner, o.Owner) || !isDir(s.Dir) {
		if err := sh.start(&o); err != nil {
			return nil, err
		}
		sh.of = top
	}
	s := sh.snap
	dst, err := os.OpenRoot(s.Dir)
	if err != nil {
		return nil, err
	}
	defer dst.Close()
	y := &syncer{sh: sh, ctx: ctx, root: root, dst: dst, dstDir: s.Dir, o: &o,
		prev: s.files, files: make(map[string]record, len(s.files)), buf: make([]byte, 64<<10)}
	y.start = time.Now()
	if sh.now != nil {
		y.start = sh.now()
	}
	y.window = racyWindow
	if sh.window != 0 {
		y.window = sh.window
	}
	if sh.off.racy {
		y.window = -1
	}
	err = y.fixDir(".", 0o700)
	if err == nil {
		err = y.dir(".")
	}
	// What was not looked at has no record, and is copied next time.
	s.files = y.files
	if err != nil {
		return nil, err
	}
	return &Snapshot{Dir: s.Dir, Hidden: y.hidden, Reused: true, Updated: y.updated,
		skip: o.Skip, maxEntries: o.MaxEntries, files: s.files, owner: o.Owner, release: sh.release}, nil
}

func sameOwner(a, b *Owner) bool { return a == nil && b == nil || a != nil && b != nil && *a == *b }

func isDir(p string) bool {
	fi, err := os.Lstat(p)
	return err == nil && fi.IsDir()
}

// syncer is one sync of a shadow's copy.
type syncer struct {
	sh      *Shadow
	ctx     context.Context
	root    *os.Root // the workspace
	dst     *os.Root // the copy
	dstDir  string
	o       *Options
	start   time.Time // before any file was looked at
	window  time.Duration
	prev    map[string]record // the record of the last sync
	files   map[string]record // this sync's
	hidden  []string
	updated int
	entries int
	total   int64
	buf     []byte
}

// dir brings the directory rel of the copy, which exists and is a
// directory, up to date with the workspace's.
func (y *syncer) dir(rel string) error {
	if err := y.ctx.Err(); err != nil {
		return err
	}
	theirs, err := fs.ReadDir(y.root.FS(), rel)
	if err != nil {
		return err
	}
	ours, err := fs.ReadDir(y.dst.FS(), rel)
	if err != nil {
		return err
	}
	have := make(map[string]fs.DirEntry, len(ours))
	for _, e := range ours {
		have[e.Name()] = e
	}
	for _, e := range theirs {
		if y.entries++; y.entries > y.o.MaxEntries {
			return fmt.Errorf("%w: more than %d entries", ErrTooBig, y.o.MaxEntries)
		}
		name := e.Name()
		p := path.Join(rel, name)
		old, inCopy := have[name]
		switch {
		case e.IsDir():
			if y.o.Skip != nil && y.o.Skip(name) {
				continue
			}
			delete(have, name)
			if inCopy && old.IsDir() {
				if err := y.fixDir(p, 0o755); err != nil {
					return err
				}
			} else {
				if inCopy {
					if err := y.remove(p, old); err != nil {
						return err
					}
				}
				if err := y.dst.Mkdir(p, 0o755); err != nil {
					return err
				}
				if err := own(y.dst, p, y.o.Owner); err != nil {
					return err
				}
				y.updated++
			}
			if err := y.dir(p); err != nil {
				return err
			}
		case e.Type().IsRegular():
			if y.o.Visible != nil && !y.o.Visible(p) {
				y.hidden = append(y.hidden, p)
				continue
			}
			info, err := e.Info()
			if errors.Is(err, fs.ErrNotExist) {
				continue // gone since it was listed
			}
			if err != nil {
				return err
			}
			if y.total += info.Size(); y.total > y.o.MaxBytes {
				return fmt.Errorf("%w: more than %d bytes", ErrTooBig, y.o.MaxBytes)
			}
			delete(have, name)
			if err := y.file(p, info, old, inCopy); err != nil {
				return err
			}
		}
	}
	if y.sh.off.prune {
		return nil
	}
	// What the workspace does not have (or the policy now refuses, or a
	// command left) goes.
	for name, e := range have {
		if err := y.remove(path.Join(rel, name), e); err != nil {
			return err
		}
		y.updated++
	}
	return nil
}

// file brings the file p of the copy up to date with the workspace's,
// listed with info; old is the copy's entry at p, if inCopy.
func (y *syncer) file(p string, info fs.FileInfo, old fs.DirEntry, inCopy bool) error {
	src := stampOf(info)
	if y.sh.srcStamp != nil {
		src = y.sh.srcStamp(info)
	}
	if rec, ok := y.prev[p]; ok && inCopy && old.Type().IsRegular() && !y.sh.off.record && rec.settled && rec.src == src {
		if y.sh.off.shadowCheck {
			y.files[p] = rec
			return nil
		}
		if fi, err := y.dst.Lstat(p); err == nil && stampOf(fi) == rec.dst && ownedBy(fi, y.o.Owner) {
			y.files[p] = rec
			return nil
		}
	}
	if inCopy {
		if err := y.remove(p, old); err != nil {
			return err
		}
	}
	rec, err := copyFile(y.root, y.dst, p, info, y.buf, y.o.Owner)
	if err != nil {
		return err
	}
	rec.src, rec.settled = src, settled(src, y.start, y.window)
	y.files[p] = rec
	y.updated++
	return nil
}

// fixDir gives the copy's directory p back the mode and owner the copy
// made it with, if a command changed them.
func (y *syncer) fixDir(p string, perm fs.FileMode) error {
	fi, err := y.dst.Lstat(p)
	if err != nil {
		return err
	}
	if m := fi.Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky); m != perm {
		if err := y.dst.Chmod(p, perm); err != nil {
			return err
		}
	}
	if !ownedBy(fi, y.o.Owner) {
		return own(y.dst, p, y.o.Owner)
	}
	return nil
}

// remove removes the copy's entry p, whatever the command made of it
// (a directory it made unsearchable included), never following a link.
func (y *syncer) remove(p string, e fs.DirEntry) error {
	if e.IsDir() {
		return sandbox.RemoveAll(filepath.Join(y.dstDir, filepath.FromSlash(p)))
	}
	return y.dst.Remove(p)
}

// Seen says, in the few words an observation's header has for it, how a
// command saw the workspace: on the workspace itself (s nil: the
// sandbox's overlay), or on a copy because the sandbox has no overlay
// (the run's, brought up to date, or one made anew).
func Seen(s *Snapshot) string {
	switch {
	case s == nil:
		return "on the workspace"
	case s.Reused:
		return fmt.Sprintf("on the run's copy (%d updated): no overlay", s.Updated)
	case s.Busy:
		return "on a copy: no overlay, the run's copy in use"
	}
	return "on a copy: no overlay"
}
