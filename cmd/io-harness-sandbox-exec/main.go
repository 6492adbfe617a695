// Command io-harness-sandbox-exec is the helper that builds the Linux
// sandbox for programs that use package sandbox without cgo. It is the
// same C spawner the cgo build compiles in, run as its own executable:
// package sandbox starts it with the spec on fd 3 and a status socket on
// fd 4; it builds the sandbox, starts the command in it, reports the
// command's pid (with a pidfd) and later its exit, and exits. The spawner
// runs from a C constructor before the Go runtime starts, so the helper
// costs one small exec and no Go start-up.
//
// Build it with cgo, statically, and install it next to the program that
// uses package sandbox (or point Options.HelperPath at it):
//
//	CGO_ENABLED=1 go build -tags netgo,osusergo \
//	    -ldflags='-s -w -linkmode=external -extldflags=-static' \
//	    -o io-harness-sandbox-exec ./cmd/io-harness-sandbox-exec
//
// (netgo and osusergo keep glibc's resolver and user lookup out of the
// static link; the helper uses neither.)
//
// Run by hand, it only prints this usage.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "io-harness-sandbox-exec: the sandbox helper of package "+
		"github.com/initorigin/io-harness-go/pkg/sandbox; it is started by that package, not by hand.")
	if !cgoSpawner {
		fmt.Fprintln(os.Stderr, "This build has no spawner: build it on Linux with CGO_ENABLED=1.")
	}
	os.Exit(2)
}
