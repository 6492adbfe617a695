package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Walk calls fn for every change of the layer, a directory before what
// is in it and names in byte order. An error from fn ends the walk and
// is returned; fs.SkipDir from fn for a directory skips what is in it.
// A whiteout the sandbox made to conceal a path is not a change.
func (u *Upper) Walk(fn func(Change) error) error {
	fd, err := unix.Openat(u.fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("the upper layer: %w", err)
	}
	return u.walk(fd, "", fn)
}

// walk walks the directory fd (which it closes) at rel.
func (u *Upper) walk(fd int, rel string, fn func(Change) error) error {
	f := os.NewFile(uintptr(fd), rel)
	names, err := f.Readdirnames(-1)
	if err != nil {
		f.Close()
		return fmt.Errorf("the upper layer: %s: %w", rel, err)
	}
	defer f.Close()
	slices.Sort(names)
	for _, name := range names {
		p := path.Join(rel, name)
		var st unix.Stat_t
		if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return fmt.Errorf("the upper layer: %s: %w", p, err)
		}
		c := Change{Path: p, Mode: fs.FileMode(st.Mode&0o777) | modeBits(st.Mode), Size: st.Size,
			ModTime: time.Unix(st.Mtim.Unix()), Links: int(st.Nlink), Inode: st.Ino}
		var sub int = -1
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFCHR:
			if st.Rdev != 0 {
				c.Kind, c.Mode = ChangeOther, c.Mode|fs.ModeDevice|fs.ModeCharDevice
				break
			}
			if u.conceal[p] {
				continue
			}
			c.Kind = ChangeRemoved
		case unix.S_IFDIR:
			c.Kind, c.Mode = ChangeDir, c.Mode|fs.ModeDir
			sub, err = openDir(fd, name)
			if err != nil {
				return fmt.Errorf("the upper layer: %s: %w", p, err)
			}
			c.Opaque = opaque(sub)
		case unix.S_IFREG:
			c.Kind = ChangeFile
		case unix.S_IFLNK:
			buf := make([]byte, unix.PathMax)
			n, err := unix.Readlinkat(fd, name, buf)
			if err != nil {
				return fmt.Errorf("the upper layer: %s: %w", p, err)
			}
			c.Kind, c.Target, c.Mode = ChangeSymlink, string(buf[:n]), c.Mode|fs.ModeSymlink
		case unix.S_IFIFO:
			c.Kind, c.Mode = ChangeOther, c.Mode|fs.ModeNamedPipe
		case unix.S_IFSOCK:
			c.Kind, c.Mode = ChangeOther, c.Mode|fs.ModeSocket
		default:
			c.Kind, c.Mode = ChangeOther, c.Mode|fs.ModeDevice
		}
		err := fn(c)
		if sub >= 0 {
			if err == nil {
				err = u.walk(sub, p, fn)
			} else {
				unix.Close(sub)
				if errors.Is(err, fs.SkipDir) {
					err = nil
				}
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// openDir opens the directory name of parent, giving back the search
// and read permissions a command took from a directory it made (the
// layer is the run's own; Change.Mode keeps the command's mode).
func openDir(parent int, name string) (int, error) {
	fd, err := unix.Openat(parent, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err == unix.EACCES && unix.Fchmodat(parent, name, 0o700, 0) == nil {
		fd, err = unix.Openat(parent, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	}
	return fd, err
}

// Open opens the regular file at rel (slash-separated, relative to the
// workdir) of the layer for reading, through no symbolic link.
func (u *Upper) Open(rel string) (*os.File, error) {
	clean := path.Clean(rel)
	if clean == "." || clean == ".." || strings.HasPrefix(clean, "../") || path.IsAbs(clean) {
		return nil, fmt.Errorf("the upper layer: %q is not a path inside it", rel)
	}
	parts := strings.Split(clean, "/")
	dir, err := unix.Openat(u.fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	for _, d := range parts[:len(parts)-1] {
		next, err := openDir(dir, d)
		unix.Close(dir)
		if err != nil {
			return nil, fmt.Errorf("the upper layer: %s: %w", clean, err)
		}
		dir = next
	}
	defer unix.Close(dir)
	name := parts[len(parts)-1]
	fd, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err == unix.EACCES && unix.Fchmodat(dir, name, 0o600, 0) == nil {
		fd, err = unix.Openat(dir, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		return nil, fmt.Errorf("the upper layer: %s: %w", clean, err)
	}
	f := os.NewFile(uintptr(fd), clean)
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("the upper layer: %s is not a regular file", clean)
	}
	return f, nil
}
