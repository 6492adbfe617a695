//go:build unix && !linux

package store

import (
	"errors"
	"syscall"
	"time"
)

// processStart is not known here.
func processStart(int) (time.Time, bool) { return time.Time{}, false }

// processAlive reports whether a process with the pid exists; a later
// process reusing the pid cannot be told from it here.
func processAlive(pid int, _ time.Time) (alive, known bool) {
	if pid <= 0 {
		return false, false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM), true
}
