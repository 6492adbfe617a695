package tty

import "golang.org/x/sys/windows"

// IsTerminal reports whether fd is a console: whether it has a console mode.
// NUL and pipes have none.
func IsTerminal(fd uintptr) bool {
	var mode uint32
	return windows.GetConsoleMode(windows.Handle(fd), &mode) == nil
}
