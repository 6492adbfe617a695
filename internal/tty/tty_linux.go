package tty

import "golang.org/x/sys/unix"

// IsTerminal reports whether fd is a terminal: whether it answers the ioctl
// that reads a terminal's settings. A character device such as /dev/null
// is not a terminal.
func IsTerminal(fd uintptr) bool {
	_, err := unix.IoctlGetTermios(int(fd), unix.TCGETS)
	return err == nil
}
