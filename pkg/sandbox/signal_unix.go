//go:build unix

package sandbox

import (
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

const (
	sigXCPU = int(syscall.SIGXCPU)
	sigXFSZ = int(syscall.SIGXFSZ)
	sigKILL = int(syscall.SIGKILL)
)

// signalName is the conventional name of sig, such as "SIGKILL".
func signalName(sig int) string {
	if n := unix.SignalName(syscall.Signal(sig)); n != "" {
		return n
	}
	return fmt.Sprintf("signal %d", sig)
}
