//go:build unix

package mcp

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/initorigin/io-harness-go/pkg/sandbox"
)

// SandboxLauncher runs each server as one long [sandbox.Sandbox.Run]: its
// filesystem view, process limits and network are the sandbox's. The
// server's standard streams are named pipes in a private directory that
// the sandbox binds writable; the server is started by /bin/sh inside the
// sandbox with its streams redirected to them. Killing the server cancels
// the Run, which tears down every process of it.
//
// It is built on the sandbox's public Run, which runs a command to
// completion; a sandbox that gains a call to start a long-lived process
// with pipes can replace it behind [Launcher].
type SandboxLauncher struct {
	// Sandbox runs the servers. Required.
	Sandbox sandbox.Sandbox
	// Network is the servers' network: denied unless Allow names hosts,
	// which they then reach through the sandbox's egress proxy. See
	// [NetAllow] for an allow-list that follows a policy.
	Network sandbox.Network
	// ReadOnly and Writable are extra host paths the servers may read, or
	// read and write (a server's program and its packages, when the
	// sandbox hides where they live).
	ReadOnly []string
	Writable []string
	// Limits are the caps of each server. A zero CPU or Wall means 24
	// hours (a server lives as long as its run); the others take the
	// sandbox's defaults.
	Limits sandbox.Limits
}

// serverLife is the CPU and wall-clock cap of a server whose limits set
// none.
const serverLife = 24 * time.Hour

// Launch implements Launcher.
func (l *SandboxLauncher) Launch(ctx context.Context, c Command) (*Process, error) {
	if l.Sandbox == nil {
		return nil, errors.New("no sandbox")
	}
	if len(c.Argv) == 0 || c.Argv[0] == "" {
		return nil, errors.New("no program to run")
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "io-harness-mcp-pipes-")
	if err != nil {
		return nil, fmt.Errorf("make the pipes' directory: %w", err)
	}
	var files []*os.File
	fail := func(err error) (*Process, error) {
		for _, f := range files {
			f.Close()
		}
		os.RemoveAll(dir)
		return nil, err
	}
	// The sandbox may run the server as another user: it must be able to
	// reach the pipes, not list the directory.
	if err := os.Chmod(dir, 0o711); err != nil {
		return fail(err)
	}
	in, out, errp := filepath.Join(dir, "in"), filepath.Join(dir, "out"), filepath.Join(dir, "err")
	for _, p := range []string{in, out, errp} {
		if err := syscall.Mkfifo(p, 0o600); err != nil {
			return fail(fmt.Errorf("make a pipe: %w", err))
		}
		if err := os.Chmod(p, 0o666); err != nil {
			return fail(err)
		}
	}
	open := func(p string, flag int) (*os.File, error) {
		f, err := os.OpenFile(p, flag|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
		if err == nil {
			files = append(files, f)
		}
		return f, err
	}
	// Our ends never block on open: stdin is opened for reading too, so
	// that the server's open finds a writer; stdout and stderr are held
	// open for writing (keepers) until the server is gone, so that a read
	// before the server opens them waits instead of ending.
	stdin, err := open(in, os.O_RDWR)
	if err != nil {
		return fail(err)
	}
	stdout, err := open(out, os.O_RDONLY)
	if err != nil {
		return fail(err)
	}
	keepOut, err := open(out, os.O_WRONLY)
	if err != nil {
		return fail(err)
	}
	stderr, err := open(errp, os.O_RDONLY)
	if err != nil {
		return fail(err)
	}
	keepErr, err := open(errp, os.O_WRONLY)
	if err != nil {
		return fail(err)
	}
	limits := l.Limits
	if limits.CPU == 0 {
		limits.CPU = sandbox.Duration(serverLife)
	}
	if limits.Wall == 0 {
		limits.Wall = sandbox.Duration(serverLife)
	}
	script := fmt.Sprintf(`exec "$0" "$@" <'%s' >'%s' 2>'%s'`, in, out, errp)
	spec := &sandbox.Spec{
		Argv:     append([]string{"/bin/sh", "-c", script}, c.Argv...),
		Env:      c.Env,
		Workdir:  c.Dir,
		ReadOnly: l.ReadOnly,
		// The pipes themselves, not their directory: a writable
		// directory may be an overlay whose changes are applied at exit,
		// where a pipe opened for writing would be a new one, while a
		// writable file is bound as it is.
		Writable: append(append([]string{}, l.Writable...), in, out, errp),
		Limits:   limits,
		Network:  l.Network,
	}
	if err := spec.Validate(); err != nil {
		return fail(err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var (
		res    *sandbox.Result
		runErr error
	)
	go func() {
		defer close(done)
		res, runErr = l.Sandbox.Run(runCtx, spec)
		// Every process of the server is gone: the readers see the
		// end of the streams once they have drained them.
		keepOut.Close()
		keepErr.Close()
		stdin.Close()
		os.RemoveAll(dir)
	}()
	var once sync.Once
	var waitErr error
	wait := func() error {
		<-done
		once.Do(func() {
			cancel()
			switch {
			case runErr != nil:
				waitErr = runErr
			case res.CapHit != sandbox.CapNone:
				waitErr = fmt.Errorf("killed by the sandbox: it hit the %s limit", res.CapHit)
			case res.Signal != "" && res.Signal != "SIGKILL":
				waitErr = fmt.Errorf("killed by %s", res.Signal)
			case res.ExitCode != 0:
				waitErr = fmt.Errorf("exit status %d", res.ExitCode)
			}
		})
		return waitErr
	}
	return &Process{
		Stdin: stdin, Stdout: stdout, Stderr: stderr,
		Wait: wait, Kill: cancel,
		Backend:     l.Sandbox.Name(),
		Enforcement: l.Sandbox.Enforcement(),
	}, nil
}
