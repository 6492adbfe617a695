//go:build unix

package wasi

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// processCPU is the CPU time, user and system, this process has used.
func processCPU(t testing.TB) time.Duration {
	t.Helper()
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
