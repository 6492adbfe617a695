//go:build !linux && !darwin && !freebsd && !netbsd && !openbsd && !dragonfly && !windows

package main

// ttyFD reports false: this system has no terminal check, so the CLI
// behaves as it does when piped.
func ttyFD(uintptr) bool { return false }
