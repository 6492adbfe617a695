//go:build !linux && !darwin && !freebsd && !netbsd && !openbsd && !dragonfly && !windows

package tty

// IsTerminal reports false: this system has no terminal check, so the CLI
// behaves as it does when piped.
func IsTerminal(uintptr) bool { return false }
