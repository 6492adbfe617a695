//go:build unix

package scratch

import (
	"os"

	"golang.org/x/sys/unix"
)

// lock takes f's lock: shared and waiting when hold (the holder's), or
// exclusive and failing at once when another process holds it (a sweep's).
func lock(f *os.File, hold bool) error {
	if hold {
		return unix.Flock(int(f.Fd()), unix.LOCK_SH)
	}
	return unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
}
