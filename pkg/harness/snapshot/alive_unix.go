//go:build unix

package snapshot

import "syscall"

// alive reports whether a process pid exists.
func alive(pid int) bool {
	return syscall.Kill(pid, 0) != syscall.ESRCH
}
