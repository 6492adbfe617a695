//go:build !unix

package wasi

import "errors"

// setNoFile sets this process's RLIMIT_NOFILE, which this OS does not
// have.
func setNoFile(uint64) error { return errors.New("no RLIMIT_NOFILE here") }
