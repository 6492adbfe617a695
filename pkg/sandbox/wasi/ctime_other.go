//go:build !linux && !darwin

package wasi

import "os"

// changeTime reports that the inode change time is not known here.
func changeTime(os.FileInfo) (int64, bool) { return 0, false }
