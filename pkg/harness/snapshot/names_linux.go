package snapshot

import (
	"bytes"
	"encoding/binary"
	"io/fs"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// dirHandle is an open directory of the walk: a file descriptor, opened
// relative to its parent's by a name the parent listed, never following
// a link, so that the walk cannot leave the root.
type dirHandle int

// openTop opens the root's top directory.
func openTop(root *os.Root) (dirHandle, error) {
	f, err := root.Open(".")
	if err != nil {
		return -1, err
	}
	defer f.Close()
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	return dirHandle(fd), err
}

// openSub opens the directory name of parent.
func openSub(parent dirHandle, name string) (dirHandle, error) {
	for {
		fd, err := unix.Openat(int(parent), name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return -1, &fs.PathError{Op: "open", Path: name, Err: err}
		}
		return dirHandle(fd), nil
	}
}

func (d dirHandle) close() { unix.Close(int(d)) }

// dirKey is what tells a directory's listing from a later one: its
// identity and its modification and change times.
type dirKey struct {
	ok           bool
	dev, ino     uint64
	mtime, ctime int64 // ns
}

// changed is the later of the key's times.
func (k dirKey) changed() time.Time {
	return time.Unix(0, max(k.mtime, k.ctime))
}

// key reads d's key; ok is false when it cannot.
func (d dirHandle) key() dirKey {
	var st unix.Stat_t
	if err := unix.Fstat(int(d), &st); err != nil {
		return dirKey{}
	}
	return dirKey{ok: true, dev: uint64(st.Dev), ino: st.Ino, mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano()}
}

// names lists d: each entry's name and type, from the directory itself
// (getdents), with no stat unless the filesystem gives no type.
func (d dirHandle) names() ([]nameType, error) {
	var out []nameType
	buf := make([]byte, 32<<10)
	for {
		n, err := unix.Getdents(int(d), buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "getdents", Err: err}
		}
		if n <= 0 {
			return out, nil
		}
		for off := 0; off+19 <= n; {
			reclen := int(binary.NativeEndian.Uint16(buf[off+16:]))
			if reclen < 19 || off+reclen > n {
				break
			}
			typ := buf[off+18]
			name := buf[off+19 : off+reclen]
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			off += reclen
			s := string(name)
			if s == "." || s == ".." {
				continue
			}
			e := nameType{name: s}
			switch typ {
			case unix.DT_DIR:
				e.typ = fs.ModeDir
			case unix.DT_LNK:
				e.typ = fs.ModeSymlink
			case unix.DT_REG:
			case unix.DT_UNKNOWN:
				var st unix.Stat_t
				if unix.Fstatat(int(d), s, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
					continue // gone since it was listed
				}
				switch st.Mode & unix.S_IFMT {
				case unix.S_IFDIR:
					e.typ = fs.ModeDir
				case unix.S_IFLNK:
					e.typ = fs.ModeSymlink
				case unix.S_IFREG:
				default:
					e.typ = fs.ModeIrregular
				}
			default:
				e.typ = fs.ModeIrregular
			}
			out = append(out, e)
		}
	}
}
