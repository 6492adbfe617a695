package sandbox

import "fmt"

// Windows has no signals; these never match an exit.
const (
	sigXCPU = -1
	sigXFSZ = -2
	sigKILL = -3
)

func signalName(sig int) string { return fmt.Sprintf("signal %d", sig) }
