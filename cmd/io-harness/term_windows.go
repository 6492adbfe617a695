package main

import "golang.org/x/sys/windows"

// ttyFD reports whether fd is a console: whether it has a console mode.
// NUL and pipes have none.
func ttyFD(fd uintptr) bool {
	var mode uint32
	return windows.GetConsoleMode(windows.Handle(fd), &mode) == nil
}
