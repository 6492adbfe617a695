package mcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"

	"github.com/initorigin/io-harness-go/pkg/sandbox"
)

// Command is a stdio server to start.
type Command struct {
	// Server is the server's configured name.
	Server string
	// Argv is the program and its arguments. A program without a slash
	// is looked up in the PATH of Env.
	Argv []string
	// Env is the whole environment, KEY=value: nothing is inherited.
	Env []string
	// Dir is the working directory, an absolute host path; empty means a
	// fresh empty directory that the launcher makes and removes.
	Dir string
}

// Process is a started server: its standard streams and its life.
type Process struct {
	// Stdin, Stdout and Stderr are the server's standard streams. A
	// Stdin that implements SetWriteDeadline(time.Time) error (as an
	// *os.File pipe does) lets a write to a server that stopped reading
	// fail instead of block.
	Stdin  io.WriteCloser
	Stdout io.ReadCloser
	Stderr io.ReadCloser
	// Wait blocks until every process of the server is gone and returns
	// how it ended. It is called once.
	Wait func() error
	// Kill starts killing every process of the server. It may be called
	// any number of times, from any goroutine, before or after Wait
	// returns.
	Kill func()
	// Backend is where the server runs: "host", or the sandbox backend.
	Backend string
	// Enforcement is what confines the server, as the sandbox reports it.
	Enforcement sandbox.Enforcement
}

// Launcher starts long-lived stdio servers.
//
// # Contract
//
//   - ctx bounds the start only: once Launch has returned, the process
//     lives until Kill, whatever happens to ctx.
//   - Launch either returns a running process or an error and leaves
//     nothing running.
//   - Kill ends every process the server started, its children too.
//   - Launch must be safe for concurrent use.
type Launcher interface {
	Launch(ctx context.Context, cmd Command) (*Process, error)
}

// HostLauncher runs servers directly on the host, in a process group of
// their own (killed whole), with only the environment the configuration
// gives them. It confines nothing; a server runs on it only when its
// configuration says host: true, and the trace says so.
type HostLauncher struct{}

// hostGaps is what HostLauncher's Enforcement says it does not protect.
const hostGaps = "the server runs on the host, outside any sandbox, as the harness's own user: " +
	"it can read and write every file that user can, reach every host the machine can, and see every process; " +
	"only its environment is limited to what its configuration gives it"

// HostEnforcement is the Enforcement of a server run by HostLauncher.
func HostEnforcement() sandbox.Enforcement {
	return sandbox.Enforcement{Network: sandbox.NetworkOpen, Spawner: "os", Teardown: processGroups, Gaps: hostGaps}
}

// Launch implements Launcher.
func (HostLauncher) Launch(ctx context.Context, c Command) (*Process, error) {
	if len(c.Argv) == 0 || c.Argv[0] == "" {
		return nil, errors.New("no program to run")
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	prog, err := lookPath(c.Argv[0], c.Env)
	if err != nil {
		return nil, err
	}
	dir, removeDir := c.Dir, func() {}
	if dir == "" {
		d, err := os.MkdirTemp("", "io-harness-mcp-")
		if err != nil {
			return nil, fmt.Errorf("make a working directory: %w", err)
		}
		dir, removeDir = d, func() { os.RemoveAll(d) }
	}
	cmd := exec.Command(prog, c.Argv[1:]...)
	cmd.Args[0] = c.Argv[0]
	cmd.Env = append([]string{}, c.Env...)
	cmd.Dir = dir
	setGroup(cmd)
	var closers []io.Closer
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err == nil {
			closers = append(closers, r, w)
		}
		return
	}
	fail := func(err error) (*Process, error) {
		for _, c := range closers {
			c.Close()
		}
		removeDir()
		return nil, err
	}
	inR, inW, err := pipe()
	if err != nil {
		return fail(err)
	}
	outR, outW, err := pipe()
	if err != nil {
		return fail(err)
	}
	errR, errW, err := pipe()
	if err != nil {
		return fail(err)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	if err := cmd.Start(); err != nil {
		return fail(err)
	}
	// The child holds its ends now.
	inR.Close()
	outW.Close()
	errW.Close()
	var once sync.Once
	kill := func() { killGroup(cmd) }
	return &Process{
		Stdin: inW, Stdout: outR, Stderr: errR,
		Wait: func() error {
			err := cmd.Wait()
			once.Do(func() {
				// The group may outlive its leader: end it, then
				// clean up.
				kill()
				removeDir()
			})
			return err
		},
		Kill:        kill,
		Backend:     sandbox.BackendHost,
		Enforcement: HostEnforcement(),
	}, nil
}

// lookPath finds a program as the server's own PATH would: a name with
// a slash is taken as given; a bare name is searched in env's PATH, or
// in /usr/local/bin:/usr/bin:/bin without one, never in the harness's.
func lookPath(prog string, env []string) (string, error) {
	if containsSlash(prog) {
		return prog, nil
	}
	path := "/usr/local/bin:/usr/bin:/bin"
	for _, kv := range env {
		if len(kv) > 5 && kv[:5] == "PATH=" {
			path = kv[5:]
		}
	}
	for _, dir := range splitList(path) {
		if dir == "" {
			continue
		}
		cand := dir + string(os.PathSeparator) + prog
		if fi, err := os.Stat(cand); err == nil && !fi.IsDir() && executable(fi) {
			return cand, nil
		}
	}
	return "", fmt.Errorf("%s: not found in PATH %s", prog, path)
}

func containsSlash(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == '/' || s[i] == os.PathSeparator {
			return true
		}
	}
	return false
}
