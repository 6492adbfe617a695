//go:build unix

package wasi

import "golang.org/x/sys/unix"

// hostFDBudget is how many host descriptors the guests of a Sandbox may
// hold at once: half of the process's RLIMIT_NOFILE (which Go raises to
// the hard limit at start), so that the host always keeps the other half.
func hostFDBudget() int64 {
	var l unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &l); err != nil || l.Cur == unix.RLIM_INFINITY {
		return defaultFDBudget
	}
	return int64(l.Cur / 2)
}
