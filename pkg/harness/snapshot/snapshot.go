// Package snapshot copies a workspace into a private directory for a
// sandboxed command, and reads back what the command changed.
//
// The copy holds only what its caller lets the command see (the read
// policy): files the filter refuses never reach the directory, so no
// command run there can read them. Reading back is bounded by what the
// caller will accept: sizes come from the directory entries before any
// byte is read, the walk stops after a number of entries, and a file is
// read only up to the size it had when it was listed.
//
// Symlinks are neither copied nor followed, in either direction: a
// command cannot plant a link that a later write goes through.
package snapshot

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/initorigin/io-harness-go/pkg/sandbox"
)

// Defaults of [Options].
const (
	// DefaultMaxBytes bounds the bytes a snapshot copies.
	DefaultMaxBytes = 256 << 20
	// DefaultMaxEntries bounds the directory entries a walk visits, in
	// the workspace and in the copy.
	DefaultMaxEntries = 200_000
)

// Options says what [Take] copies.
type Options struct {
	// Visible reports whether the regular file rel (a clean slash path
	// relative to the workspace root) may be copied. Nil copies every
	// regular file. Directories are always made, so that a command sees
	// the tree's shape.
	Visible func(rel string) bool
	// Skip reports whether the directory named name is left out with
	// everything under it (.git, node_modules, ...). Nil skips nothing.
	Skip func(name string) bool
	// MaxBytes bounds the total size of the files copied; a workspace
	// over it is an error. Zero means DefaultMaxBytes.
	MaxBytes int64
	// MaxEntries bounds the directory entries visited. Zero means
	// DefaultMaxEntries.
	MaxEntries int
	// Prefix begins the name of the temporary directory.
	Prefix string
	// Dir is the directory the temporary directory is made in; empty
	// means the system's ([os.TempDir]).
	Dir string
	// Owner, when set, is the user the copy is given to, every file and
	// directory as it is made and before it is stamped: the user a
	// sandbox runs its command as when the caller is root. The sandbox's
	// own lending then changes nothing, and no file reads as changed for
	// it. Nil leaves the copy the caller's.
	Owner *Owner
}

// Owner is a host user and group.
type Owner struct{ UID, GID int }

// Snapshot is a copy of a workspace in a private directory.
type Snapshot struct {
	// Dir is the directory that holds the copy.
	Dir string
	// Hidden lists the files Visible refused, as clean slash paths.
	Hidden []string
	// Reused reports a run's copy brought up to date ([Shadow.Take])
	// rather than made anew; Updated is then the number of files and
	// directories that were copied into it or removed from it.
	Reused  bool
	Updated int
	// Busy reports a copy made anew because the run's copy was in use by
	// another command.
	Busy bool

	skip       func(string) bool
	maxEntries int
	files      map[string]record // what was copied, by slash path
	owner      *Owner
	release    func() // for a run's copy: what Remove does instead
}

// record is what a copy knows of one of its files: the stamp of the
// workspace's file it was copied from, the stamp of the copy as it was
// written, and whether the workspace's file had been still for the racy
// window when it was looked at (its stamp can then be trusted to tell a
// later change).
type record struct {
	src, dst stamp
	settled  bool
}

// ErrTooBig is returned by [Take] for a workspace over the limits.
var ErrTooBig = errors.New("snapshot: the workspace is over the copy limit")

// Take copies the regular files and directories of root that o lets
// through into a new temporary directory. On error nothing is left
// behind.
func Take(ctx context.Context, root *os.Root, o Options) (*Snapshot, error) {
	o.defaults()
	dir, err := os.MkdirTemp(o.Dir, o.Prefix)
	if err != nil {
		return nil, err
	}
	s := &Snapshot{Dir: dir, skip: o.Skip, maxEntries: o.MaxEntries, files: map[string]record{}, owner: o.Owner}
	if err := s.copyIn(ctx, root, &o); err != nil {
		s.Remove()
		return nil, err
	}
	return s, nil
}

func (o *Options) defaults() {
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.MaxEntries <= 0 {
		o.MaxEntries = DefaultMaxEntries
	}
}

func (s *Snapshot) copyIn(ctx context.Context, root *os.Root, o *Options) error {
	dst, err := os.OpenRoot(s.Dir)
	if err != nil {
		return err
	}
	defer dst.Close()
	if err := own(dst, ".", s.owner); err != nil {
		return err
	}
	start := time.Now()
	var total int64
	entries := 0
	buf := make([]byte, 64<<10)
	return fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if entries++; entries > o.MaxEntries {
			return fmt.Errorf("%w: more than %d entries", ErrTooBig, o.MaxEntries)
		}
		if entries%256 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		if d.IsDir() {
			if p == "." {
				return nil
			}
			if s.skip != nil && s.skip(d.Name()) {
				return fs.SkipDir
			}
			if err := dst.Mkdir(p, 0o755); err != nil {
				return err
			}
			return own(dst, p, s.owner)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		if o.Visible != nil && !o.Visible(p) {
			s.Hidden = append(s.Hidden, p)
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if total += info.Size(); total > o.MaxBytes {
			return fmt.Errorf("%w: more than %d bytes", ErrTooBig, o.MaxBytes)
		}
		src := stampOf(info)
		rec, err := copyFile(root, dst, p, info, buf, s.owner)
		if err != nil {
			return err
		}
		rec.src, rec.settled = src, settled(src, start, racyWindow)
		s.files[p] = rec
		return nil
	})
}

// own gives p of root to o, if o is set.
func own(root *os.Root, p string, o *Owner) error {
	if o == nil {
		return nil
	}
	return root.Lchown(p, o.UID, o.GID)
}

// settled reports whether a file last changed at the times of st had
// been still for window at start: a change made after start then moves
// its times. A negative window trusts every stamp.
func settled(st stamp, start time.Time, window time.Duration) bool {
	return window < 0 || start.Sub(time.Unix(0, max(st.mtime, st.ctime))) >= window
}

// copyFile copies the file p of root to p of dst, at most the size it
// was listed with (a reflink where the filesystem makes one), given to
// owner and with the workspace file's modification time, and returns
// the stamp of the copy. A file already at p is an error: the copy is
// always a new file, never a link to another.
func copyFile(root, dst *os.Root, p string, info fs.FileInfo, buf []byte, owner *Owner) (record, error) {
	src, err := root.Open(p)
	if err != nil {
		return record{}, err
	}
	defer src.Close()
	out, err := dst.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY|noFollow, info.Mode().Perm()&0o755|0o600)
	if err != nil {
		return record{}, err
	}
	if !cloneInto(out, src, info.Size()) {
		if _, err := io.CopyBuffer(out, io.LimitReader(src, info.Size()), buf); err != nil {
			out.Close()
			return record{}, err
		}
	}
	if err := out.Close(); err != nil {
		return record{}, err
	}
	if err := own(dst, p, owner); err != nil {
		return record{}, err
	}
	// The workspace's time, as cp -p keeps it: a build tool in the copy
	// sees what is older than what, and a command's write moves it.
	if err := dst.Chtimes(p, time.Time{}, info.ModTime()); err != nil {
		return record{}, err
	}
	fi, err := dst.Lstat(p)
	if err != nil {
		return record{}, err
	}
	return record{dst: stampOf(fi)}, nil
}

// Change is a file the command created or changed.
type Change struct {
	// Path is the file's clean slash path.
	Path string
	// Size is its size when it was listed.
	Size int64
	// Mode is its permission bits when it was listed.
	Mode fs.FileMode
	// Created reports a file that was not in the copy.
	Created bool
	// Removed reports a file of the copy that the command removed (or
	// put something other than a regular file in the place of).
	Removed bool
}

// Skipped is an entry of the copy that is not read back, and why.
type Skipped struct {
	Path   string
	Reason string
}

// Changes lists the regular files the command created or changed, by
// their directory entries alone: nothing is read. Entries that are not
// regular files (a symlink, a device, a socket) are skipped with their
// reason. The walk stops after the snapshot's entry limit, and says so
// in a skipped entry. A file of the copy the command removed, or put
// something other than a regular file in the place of, is a Removed
// change, unless the walk stopped early or could not read its directory.
func (s *Snapshot) Changes(ctx context.Context) ([]Change, []Skipped, error) {
	var changes []Change
	var skipped []Skipped
	entries := 0
	seen := make(map[string]bool, len(s.files))
	var unseen []string // directories whose files were not looked at
	complete := true
	err := filepath.WalkDir(s.Dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p != s.Dir && errors.Is(err, fs.ErrPermission) {
				rel, _ := filepath.Rel(s.Dir, p)
				skipped = append(skipped, Skipped{filepath.ToSlash(rel), "the command made it unreadable"})
				unseen = append(unseen, filepath.ToSlash(rel))
				return nil
			}
			return err
		}
		if entries++; entries > s.maxEntries {
			skipped = append(skipped, Skipped{".", fmt.Sprintf("the command left more than %d entries; the rest were not looked at", s.maxEntries)})
			complete = false
			return fs.SkipAll
		}
		if entries%256 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		rel, _ := filepath.Rel(s.Dir, p)
		rel = filepath.ToSlash(rel)
		switch {
		case d.IsDir():
			if rel != "." && s.skip != nil && s.skip(d.Name()) {
				// Never copied, so the command made it.
				skipped = append(skipped, Skipped{rel, d.Name() + " is left out of the copy, so nothing the command wrote in it is copied back"})
				return fs.SkipDir
			}
			return nil
		case d.Type()&fs.ModeSymlink != 0:
			skipped = append(skipped, Skipped{rel, "a symlink (links are not copied back)"})
			return nil
		case !d.Type().IsRegular():
			skipped = append(skipped, Skipped{rel, "not a regular file"})
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		old, existed := s.files[rel]
		seen[rel] = true
		if existed && old.dst == stampOf(fi) {
			return nil
		}
		changes = append(changes, Change{Path: rel, Size: fi.Size(), Mode: fi.Mode().Perm(), Created: !existed})
		return nil
	})
	if err == nil && complete {
		// A file of the copy the walk did not meet is gone, unless it is
		// under a directory the walk could not read.
	files:
		for p := range s.files {
			if seen[p] {
				continue
			}
			for _, d := range unseen {
				if strings.HasPrefix(p, d+"/") {
					continue files
				}
			}
			changes = append(changes, Change{Path: p, Removed: true})
		}
	}
	slices.SortFunc(changes, func(a, b Change) int { return strings.Compare(a.Path, b.Path) })
	return changes, skipped, err
}

// ReadFile reads a changed file of the copy, which must still be a
// regular file of at most size bytes.
func (s *Snapshot) ReadFile(rel string, size int64) ([]byte, error) {
	root, err := os.OpenRoot(s.Dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	f, err := root.OpenFile(rel, os.O_RDONLY|noFollow, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	switch {
	case err != nil:
		return nil, err
	case !fi.Mode().IsRegular():
		return nil, fmt.Errorf("%s is no longer a regular file", rel)
	case fi.Size() > size:
		return nil, fmt.Errorf("%s grew from %d to %d bytes after it was listed", rel, size, fi.Size())
	}
	data, err := io.ReadAll(io.LimitReader(f, size+1))
	if err == nil && int64(len(data)) > size {
		err = fmt.Errorf("%s grew past %d bytes while it was read", rel, size)
	}
	return data, err
}

// Remove removes the copy, also where the command left directories it
// made unreadable (sandbox.RemoveAll), never following a link out of it.
// A run's copy ([Shadow.Take]) is kept for the run's next command
// instead, and freed for it. The snapshot is not used after Remove.
func (s *Snapshot) Remove() error {
	if s.release != nil {
		s.release()
		s.release = nil
		return nil
	}
	return sandbox.RemoveAll(s.Dir)
}
