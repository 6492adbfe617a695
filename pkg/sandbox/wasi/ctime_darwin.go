package wasi

import (
	"os"
	"syscall"
)

// changeTime is fi's inode change time, in nanoseconds.
func changeTime(fi os.FileInfo) (int64, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return st.Ctimespec.Nano(), true
}
