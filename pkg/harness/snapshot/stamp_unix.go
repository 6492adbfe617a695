//go:build unix

package snapshot

import (
	"io/fs"
	"syscall"
)

// noFollow makes an open refuse a symlink at the last component.
const noFollow = syscall.O_NOFOLLOW

// stamp identifies a version of a file: a write, a truncation, a rename
// over it or a chmod changes its inode or its change time, which no
// command can set back.
type stamp struct {
	dev, ino     uint64
	size         int64
	mtime, ctime int64
	mode         fs.FileMode
}

func stampOf(fi fs.FileInfo) stamp {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return stamp{size: fi.Size(), mtime: fi.ModTime().UnixNano(), mode: fi.Mode()}
	}
	return stamp{dev: uint64(st.Dev), ino: uint64(st.Ino), size: fi.Size(), mtime: fi.ModTime().UnixNano(), ctime: ctimeOf(st), mode: fi.Mode()}
}

// ownedBy reports whether fi belongs to o (when o is set).
func ownedBy(fi fs.FileInfo, o *Owner) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return o == nil || !ok || int(st.Uid) == o.UID && int(st.Gid) == o.GID
}
