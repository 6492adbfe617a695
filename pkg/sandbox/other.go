//go:build !linux && !darwin && !windows

package sandbox

import (
	"context"
	"fmt"
	"runtime"
)

// openBackend: no backend is implemented on this operating system.
func openBackend(ctx context.Context, name string, o *Options) (backend, error) {
	return nil, &Error{Kind: ErrUnavailable, Backend: name, Err: fmt.Errorf("no sandbox backend on %s", runtime.GOOS)}
}
