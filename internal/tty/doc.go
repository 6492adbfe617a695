// Package tty tells a terminal from anything else an *os.File can be
// open on. It is the CLI's only code that differs by operating system,
// kept apart so that the CLI itself builds the same everywhere.
package tty
