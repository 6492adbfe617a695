// Package mod calls a function that only Linux declares, from a file
// every platform builds.
package mod

func Shared() int { return onlyLinux() }
