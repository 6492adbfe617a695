//go:build !unix

package mcp

import (
	"context"
	"errors"

	"github.com/initorigin/io-harness-go/pkg/sandbox"
)

// SandboxLauncher runs each server in a sandbox. It needs named pipes,
// which this operating system does not have: Launch fails, and a server
// that must be contained does not start.
type SandboxLauncher struct {
	Sandbox  sandbox.Sandbox
	Network  sandbox.Network
	ReadOnly []string
	Writable []string
	Limits   sandbox.Limits
}

// Launch implements Launcher; here it always fails.
func (l *SandboxLauncher) Launch(ctx context.Context, c Command) (*Process, error) {
	return nil, errors.New("a contained server needs named pipes, which this operating system does not have")
}
