package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

const (
	// sandboxExec is macOS's sandbox-exec, by absolute path.
	sandboxExec = "/usr/bin/sandbox-exec"
	// bashPath runs the limits script (bash 3.2 ships with every macOS).
	bashPath = "/bin/bash"
)

// darwinBackend is macos-seatbelt (sandbox-exec with a generated
// profile), the floor (the limits alone) and host (the same, named for
// what it is).
type darwinBackend struct {
	name string
}

func openBackend(ctx context.Context, name string, o *Options) (backend, error) {
	unavailable := func(err error) (backend, error) {
		return nil, &Error{Kind: ErrUnavailable, Backend: name, Err: err}
	}
	switch name {
	case BackendSeatbelt, BackendFloor, BackendHost:
	default:
		return unavailable(fmt.Errorf("unknown backend on darwin (want %s, %s or %s)", BackendSeatbelt, BackendFloor, BackendHost))
	}
	if _, err := os.Stat(bashPath); err != nil {
		return unavailable(err)
	}
	b := &darwinBackend{name: name}
	if name == BackendSeatbelt {
		if _, err := os.Stat(sandboxExec); err != nil {
			return unavailable(err)
		}
	}
	if err := b.probe(ctx); err != nil {
		return unavailable(fmt.Errorf("probe: %w", err))
	}
	return b, nil
}

// probe runs a command that tries to write to a host directory outside
// the workdir: it must run, and under seatbelt the write must be refused.
func (b *darwinBackend) probe(ctx context.Context) error {
	scratch, err := os.MkdirTemp("", "io-harness-probe-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(scratch)
	if scratch, err = filepath.EvalSymlinks(scratch); err != nil {
		return err
	}
	escape := filepath.Join(scratch, "escape")
	s := newSandbox(b.name, b, nil, nil)
	res, err := s.Run(ctx, &Spec{
		Argv:   []string{"/bin/sh", "-c", "true 2>/dev/null >" + escape + "; exit 0"},
		Limits: Limits{Wall: Duration(10 * time.Second)},
	})
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("probe exited %d: %s", res.ExitCode, strings.TrimSpace(string(res.Stderr)))
	}
	_, err = os.Stat(escape)
	if b.name == BackendSeatbelt && err == nil {
		return errors.New("a write outside the workdir landed")
	}
	return nil
}

func (b *darwinBackend) privateWorkdir() bool { return false }

func (b *darwinBackend) enforcement(proxied bool) Enforcement {
	e := Enforcement{
		Network: NetworkOpen, CPU: true, FileSize: true, OpenFiles: true, Spawner: "os",
	}
	common := " There is no pid namespace, no memory cap and no process cap (macOS offers neither per run); the CPU limit is per process (RLIMIT_CPU), not the run's total. A descendant that calls setsid escapes the teardown, and when the host process dies the run goes on. There is no disk cap, a root caller's command runs as root, and a descriptor the host process holds without close-on-exec reaches the command."
	switch b.name {
	case BackendSeatbelt:
		e.Filesystem, e.Network, e.HostProcesses, e.Spawner = true, NetworkDenied, true, sandboxExec
		if proxied {
			e.Network = NetworkAllowList
		}
		e.Gaps = "sandbox-exec is deprecated by Apple but still enforced; every host file is readable." + common
	case BackendFloor:
		e.Gaps = "Nothing but the limits: the command can write anywhere the caller can and reach the network." + common
	default:
		e.Gaps = "Nothing is protected: the command runs on the host as the caller. Only the limits apply." + common
	}
	return e
}

func (b *darwinBackend) start(l *launch) (process, error) {
	p := l.plan
	if b.name != BackendHost {
		l.env = envWithout(l.env, proxyVars()...)
	}
	argv := append([]string{bashPath, "-c", ulimitScript(p.limits), "bash"}, p.Argv...)
	if b.name == BackendSeatbelt {
		if err := checkNesting(p); err != nil {
			return nil, &Error{Kind: ErrInvalid, Backend: b.name, Step: "read_only", Err: err}
		}
		tmp, err := os.MkdirTemp("", "io-harness-tmp-")
		if err == nil {
			tmp, err = filepath.EvalSymlinks(tmp)
		}
		if err != nil {
			return nil, &Error{Kind: ErrSetup, Backend: b.name, Step: "private TMPDIR", Err: err}
		}
		l.cleanup = append(l.cleanup, func() error { return removeTree(tmp) })
		l.env = envWith(l.env, "TMPDIR", tmp)
		writable := append([]string{l.workdir, tmp}, p.Writable...)
		port := 0
		if l.proxied {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				return nil, &Error{Kind: ErrSetup, Backend: b.name, Step: "egress listener", Err: err}
			}
			port = ln.Addr().(*net.TCPAddr).Port
			l.listener = ln
			l.env = proxyEnv(l.env, port)
		}
		argv = append([]string{sandboxExec, "-p", seatbeltProfile(writable, port)}, argv...)
	}
	proc, err := os.StartProcess(argv[0], argv, &os.ProcAttr{
		Dir: l.workdir, Env: l.env, Files: []*os.File{l.stdin, l.stdout, l.stderr},
		Sys: &syscall.SysProcAttr{Setsid: true},
	})
	if err != nil {
		if l.listener != nil {
			l.listener.Close()
			l.listener = nil
		}
		return nil, &Error{Kind: ErrSetup, Backend: b.name, Step: "start", Err: err}
	}
	dp := &darwinProc{proc: proc, exited: make(chan exitStatus, 1)}
	go func() {
		ps, err := proc.Wait()
		if err != nil {
			dp.exited <- exitStatus{err: err}
			return
		}
		// The command's process group dies with it.
		syscall.Kill(-proc.Pid, syscall.SIGKILL)
		ws := ps.Sys().(syscall.WaitStatus)
		st := exitStatus{code: ws.ExitStatus(), cpu: ps.UserTime() + ps.SystemTime()}
		if ws.Signaled() {
			st.code, st.signal = -1, int(ws.Signal())
		}
		dp.exited <- st
	}()
	return dp, nil
}

// darwinProc is a run on macOS: the command leads its own session and
// process group.
type darwinProc struct {
	proc   *os.Process
	exited chan exitStatus
}

func (d *darwinProc) pid() int { return d.proc.Pid }

func (d *darwinProc) wait() exitStatus { return <-d.exited }

func (d *darwinProc) kill() {
	syscall.Kill(-d.proc.Pid, syscall.SIGKILL)
	d.proc.Signal(syscall.SIGKILL)
}

func (d *darwinProc) usage() (usage, bool) { return usage{}, false }
