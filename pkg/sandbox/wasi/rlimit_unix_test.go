//go:build unix

package wasi

import "golang.org/x/sys/unix"

// setNoFile sets this process's RLIMIT_NOFILE, soft and hard, to n.
func setNoFile(n uint64) error {
	return unix.Setrlimit(unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: n, Max: n})
}
