package pgtest

import "syscall"

// setDeathSignal kills the child when the test binary dies.
func setDeathSignal(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
