package main

import "golang.org/x/sys/unix"

// ttyFD reports whether fd is a terminal: whether it answers the ioctl
// that reads a terminal's settings. A character device such as /dev/null
// is not a terminal.
func ttyFD(fd uintptr) bool {
	_, err := unix.IoctlGetTermios(int(fd), unix.TCGETS)
	return err == nil
}
