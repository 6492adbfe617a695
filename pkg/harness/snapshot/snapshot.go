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

	skip       func(string) bool
	maxEntries int
	files      map[string]stamp // what was copied, by slash path
	owner      *Owner
}

// own gives path of the copy to the snapshot's owner, if it has one.
func (s *Snapshot) own(path string) error {
	if s.owner == nil {
		return nil
	}
	return os.Lchown(path, s.owner.UID, s.owner.GID)
}

// ErrTooBig is returned by [Take] for a workspace over the limits.
var ErrTooBig = errors.New("snapshot: the workspace is over the copy limit")

// Take copies the regular files and directories of root that o lets
// through into a new temporary directory. On error nothing is left
// behind.
func Take(ctx context.Context, root *os.Root, o Options) (*Snapshot, error) {
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.MaxEntries <= 0 {
		o.MaxEntries = DefaultMaxEntries
	}
	dir, err := os.MkdirTemp("", o.Prefix)
	if err != nil {
		return nil, err
	}
	s := &Snapshot{Dir: dir, skip: o.Skip, maxEntries: o.MaxEntries, files: map[string]stamp{}, owner: o.Owner}
	if err := s.own(dir); err != nil {
		s.Remove()
		return nil, err
	}
	if err := s.copyIn(ctx, root, &o); err != nil {
		s.Remove()
		return nil, err
	}
	return s, nil
}

func (s *Snapshot) copyIn(ctx context.Context, root *os.Root, o *Options) error {
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
		dst := filepath.Join(s.Dir, filepath.FromSlash(p))
		if d.IsDir() {
			if p == "." {
				return nil
			}
			if s.skip != nil && s.skip(d.Name()) {
				return fs.SkipDir
			}
			if err := os.Mkdir(dst, 0o755); err != nil {
				return err
			}
			return s.own(dst)
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
		return s.copyFile(root, p, dst, info, buf)
	})
}

// copyFile copies one file, at most the size it was listed with, and
// records the stamp of the copy.
func (s *Snapshot) copyFile(root *os.Root, p, dst string, info fs.FileInfo, buf []byte) error {
	src, err := root.Open(p)
	if err != nil {
		return err
	}
	defer src.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, info.Mode().Perm()&0o755|0o600)
	if err != nil {
		return err
	}
	if _, err := io.CopyBuffer(out, io.LimitReader(src, info.Size()), buf); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	if err := s.own(dst); err != nil {
		return err
	}
	fi, err := os.Lstat(dst)
	if err != nil {
		return err
	}
	s.files[p] = stampOf(fi)
	return nil
}

// Change is a file the command created or changed.
type Change struct {
	// Path is the file's clean slash path.
	Path string
	// Size is its size when it was listed.
	Size int64
	// Created reports a file that was not in the copy.
	Created bool
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
// in a skipped entry. Deleted files are not reported.
func (s *Snapshot) Changes(ctx context.Context) ([]Change, []Skipped, error) {
	var changes []Change
	var skipped []Skipped
	entries := 0
	err := filepath.WalkDir(s.Dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p != s.Dir && errors.Is(err, fs.ErrPermission) {
				rel, _ := filepath.Rel(s.Dir, p)
				skipped = append(skipped, Skipped{filepath.ToSlash(rel), "the command made it unreadable"})
				return nil
			}
			return err
		}
		if entries++; entries > s.maxEntries {
			skipped = append(skipped, Skipped{".", fmt.Sprintf("the command left more than %d entries; the rest were not looked at", s.maxEntries)})
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
		if existed && old == stampOf(fi) {
			return nil
		}
		changes = append(changes, Change{Path: rel, Size: fi.Size(), Created: !existed})
		return nil
	})
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
func (s *Snapshot) Remove() error { return sandbox.RemoveAll(s.Dir) }
