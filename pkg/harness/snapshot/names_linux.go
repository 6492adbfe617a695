package snapshot

import (
	"bytes"
	"encoding/binary"
	"io/fs"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// readNames lists the directory f: each entry's name and type, from the
// directory itself (getdents), with no stat unless the filesystem does
// not give types. (A directory opened in an os.Root has its ReadDir stat
// every entry.)
func readNames(f *os.File, lstat func(name string) (fs.FileMode, error)) ([]nameType, error) {
	var out []nameType
	buf := make([]byte, 32<<10)
	fd := int(f.Fd())
	for {
		n, err := unix.Getdents(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "getdents", Path: f.Name(), Err: err}
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
			if s := string(name); s != "." && s != ".." {
				e := nameType{name: s}
				switch typ {
				case unix.DT_DIR:
					e.typ = fs.ModeDir
				case unix.DT_LNK:
					e.typ = fs.ModeSymlink
				case unix.DT_REG:
				case unix.DT_UNKNOWN:
					if e.typ, err = lstat(s); err != nil {
						continue // gone since it was listed
					}
				default:
					e.typ = fs.ModeIrregular
				}
				out = append(out, e)
			}
		}
	}
}

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

// keyOf reads f's key; ok is false when it cannot.
func keyOf(f *os.File) dirKey {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return dirKey{}
	}
	return dirKey{ok: true, dev: uint64(st.Dev), ino: st.Ino, mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano()}
}
