package snapshot

import (
	"os"

	"golang.org/x/sys/unix"
)

// cloneInto makes dst share src's first size bytes (a reflink, FICLONERANGE)
// where the filesystem can, and reports whether it did. The copy is then
// the filesystem's to split on the first write, never a hard link: a
// write in one is not seen in the other.
func cloneInto(dst, src *os.File, size int64) bool {
	if size <= 0 {
		return false
	}
	r := unix.FileCloneRange{Src_fd: int64(src.Fd()), Src_length: uint64(size)}
	return unix.IoctlFileCloneRange(int(dst.Fd()), &r) == nil
}
