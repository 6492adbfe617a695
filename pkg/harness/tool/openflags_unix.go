//go:build unix

package tool

import (
	"os"
	"syscall"
)

// searchOpenFlags are the flags grep opens files with. O_NONBLOCK spares
// the two fcntl calls the os package otherwise makes to try each file with
// the poller, and keeps a FIFO put in a file's place from blocking the
// open; a regular file's reads ignore it.
const searchOpenFlags = os.O_RDONLY | syscall.O_NONBLOCK
