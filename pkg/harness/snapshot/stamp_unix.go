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
	ino   uint64
	size  int64
	ctime int64
}

func stampOf(fi fs.FileInfo) stamp {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return stamp{size: fi.Size(), ctime: fi.ModTime().UnixNano()}
	}
	return stamp{ino: uint64(st.Ino), size: fi.Size(), ctime: ctimeOf(st)}
}
