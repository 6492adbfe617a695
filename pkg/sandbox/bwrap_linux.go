package sandbox

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// bwrapBackend runs commands under bubblewrap, found at a fixed path.
type bwrapBackend struct {
	path string
}

// bwrapPaths are where bwrap is looked for; PATH is never searched.
func bwrapPaths() []string { return []string{"/usr/bin/bwrap", "/usr/local/bin/bwrap", "/bin/bwrap"} }

func (b *bwrapBackend) privateWorkdir() bool { return true }

func (b *bwrapBackend) enforcement(bool) Enforcement {
	return Enforcement{
		Filesystem: true, PrivateTmp: true, Network: NetworkDenied, PIDNamespace: true, HostProcesses: true,
		Memory: true, Processes: true, CPU: true, FileSize: true, OpenFiles: true, Teardown: true,
		HostDeath: true, NoNewPrivs: true, Spawner: b.path,
		Gaps: "No seccomp and no Landlock: the command can connect to any Unix socket of the host that the caller can (they are reached by path, not through the network namespace), and use io_uring, ptrace within the sandbox, and every other system call. " +
			"Memory and process counts are polled every 20ms. A command killed by a signal shows as exit status 128+n; 152 and 153 are read as the CPU and file-size caps. " +
			"A setup failure is told from the command's failure only by bwrap's \"bwrap: \" message.",
	}
}

// bwrapArgs is bwrap's command line for one run: everything unshared
// (the network too), a read-only root, private /dev, /proc, /tmp and
// /dev/shm, the workdir and the extra paths bound (shortest first, so a
// deeper bind wins), no capabilities, a new session, and death with us.
func bwrapArgs(path string, l *launch, statusFD int) []string {
	p := l.plan
	args := []string{path, "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
		"--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--tmpfs", "/dev/shm",
		"--json-status-fd", fmt.Sprint(statusFD)}
	type bind struct {
		path     string
		writable bool
	}
	var binds []bind
	if !l.ephemeral {
		binds = append(binds, bind{l.workdir, true})
	}
	for _, w := range p.Writable {
		binds = append(binds, bind{w, true})
	}
	for _, r := range p.ReadOnly {
		binds = append(binds, bind{r, false})
	}
	slices.SortStableFunc(binds, func(a, b bind) int { return len(a.path) - len(b.path) })
	for _, bd := range binds {
		flag := "--ro-bind"
		if bd.writable {
			flag = "--bind"
		}
		args = append(args, flag, bd.path, bd.path)
	}
	if l.ephemeral {
		args = append(args, "--dir", l.workdir)
	}
	args = append(args, "--chdir", l.workdir, "--")
	return append(args, p.Argv...)
}

func (b *bwrapBackend) start(l *launch) (process, error) {
	l.env = envWith(envWithout(l.env, proxyVars()...), "TMPDIR", "/tmp")
	statusR, statusW, err := os.Pipe()
	if err != nil {
		return nil, &Error{Kind: ErrSetup, Backend: BackendBwrap, Step: "status pipe", Err: err}
	}
	bp := &bwrapProc{exited: make(chan exitStatus, 1)}
	ready := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread() // nothing was applied to this thread
		proc, err := startStopped(b.path, bwrapArgs(b.path, l, 3), &launch{
			workdir: "/", env: l.env, stdin: l.stdin, stdout: l.stdout, stderr: l.stderr,
		}, rlimits(l.plan.limits, false), statusW)
		statusW.Close()
		if err != nil {
			ready <- err
			return
		}
		bp.proc = proc
		ready <- nil
		ps, err := proc.Wait()
		if err != nil {
			bp.exited <- exitStatus{err: err}
			return
		}
		ws := ps.Sys().(syscall.WaitStatus)
		st := waitStatus(unix.WaitStatus(ws), ps.UserTime()+ps.SystemTime())
		switch st.code {
		case 128 + sigXCPU:
			st.capHint = CapCPU
		case 128 + sigXFSZ:
			st.capHint = CapFileSize
		}
		bp.exited <- st
	}()
	if err := <-ready; err != nil {
		statusW.Close()
		return nil, &Error{Kind: ErrSetup, Backend: BackendBwrap, Step: "start", Err: err}
	}
	// bwrap reports the pid of its init inside the namespaces first.
	var first struct {
		ChildPid int `json:"child-pid"`
	}
	status := bufio.NewReader(statusR)
	line, err := status.ReadBytes('\n')
	if err == nil {
		err = json.Unmarshal(line, &first)
	}
	// bwrap writes the exit code at the end, and would die of SIGPIPE
	// if nobody read it; the reader ends with bwrap.
	go func() {
		io.Copy(io.Discard, status)
		statusR.Close()
	}()
	if err != nil || first.ChildPid <= 0 {
		bp.kill()
		st := bp.wait()
		return nil, &Error{Kind: ErrSetup, Backend: BackendBwrap, Step: "start",
			Err: fmt.Errorf("bwrap exited with %d before starting the command", st.code)}
	}
	if fd, err := unix.PidfdOpen(first.ChildPid, 0); err == nil {
		bp.mu.Lock()
		bp.initPid, bp.initPidfd = first.ChildPid, fd
		bp.mu.Unlock()
	}
	return bp, nil
}

// bwrapProc is a run under bwrap. Killing bwrap kills its init (it dies
// with its parent), and the init's death empties the pid namespace.
type bwrapProc struct {
	proc   *os.Process
	exited chan exitStatus

	mu        sync.Mutex // guards the fields below
	initPid   int
	initPidfd int
}

func (b *bwrapProc) pid() int { return b.proc.Pid }

func (b *bwrapProc) kill() {
	b.mu.Lock()
	if b.initPid > 0 {
		unix.PidfdSendSignal(b.initPidfd, unix.SIGKILL, nil, 0)
	}
	b.mu.Unlock()
	b.proc.Signal(syscall.SIGKILL)
}

func (b *bwrapProc) wait() exitStatus {
	st := <-b.exited
	b.mu.Lock()
	if b.initPid > 0 {
		unix.Close(b.initPidfd)
		b.initPid = 0
	}
	b.mu.Unlock()
	return st
}

func (b *bwrapProc) usage() (usage, bool) {
	b.mu.Lock()
	pid := b.initPid
	b.mu.Unlock()
	if pid == 0 {
		return usage{}, true
	}
	return nsUsage(pid)
}

// findBwrap returns the first bwrap at a fixed path.
func findBwrap() (string, error) {
	for _, p := range bwrapPaths() {
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p, nil
		}
	}
	return "", fmt.Errorf("no bwrap at %s", strings.Join(bwrapPaths(), ", "))
}

// probeBwrap runs bwrap once with the run's setup; with a shell on the
// host it also checks that a write to a read-only bound host directory is
// refused.
func probeBwrap(ctx context.Context, b *bwrapBackend) error {
	scratch, err := os.MkdirTemp("", "io-harness-probe-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(scratch)
	if scratch, err = filepath.EvalSymlinks(scratch); err != nil {
		return err
	}
	escape := filepath.Join(scratch, "escape")
	argv := []string{b.path, "--version"}
	if _, err := os.Stat("/bin/sh"); err == nil {
		argv = []string{"/bin/sh", "-c", "if true 2>/dev/null >" + escape + "; then exit 1; fi"}
	}
	s := &sandbox{name: BackendBwrap, b: b}
	res, err := s.Run(ctx, &Spec{Argv: argv, ReadOnly: []string{scratch}, Limits: Limits{Wall: Duration(10 * time.Second)}})
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("bwrap probe exited %d: %s", res.ExitCode, strings.TrimSpace(string(res.Stderr)))
	}
	if _, err := os.Stat(escape); err == nil {
		return errors.New("bwrap: a write to a read-only bind landed")
	}
	return nil
}

// checkResult tells bwrap's own failures from the command's: bwrap exits
// 1 with a "bwrap: " message on the command's stderr.
func (b *bwrapBackend) checkResult(res *Result) error {
	msg, ok := bytes.CutPrefix(res.Stderr, []byte("bwrap: "))
	if res.ExitCode != 1 || !ok {
		return nil
	}
	first, _, _ := bytes.Cut(msg, []byte("\n"))
	if bytes.HasPrefix(first, []byte("execvp ")) {
		res.ExitCode = 127 // like a shell: the command was not found or not executable
		return nil
	}
	return &Error{Kind: ErrSetup, Backend: BackendBwrap, Step: "bwrap", Err: errors.New(string(first))}
}
