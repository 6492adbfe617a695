package sandbox

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// bwrapBackend runs commands under bubblewrap, found at a fixed path.
type bwrapBackend struct {
	path     string
	root     bool // running as uid 0: bwrap runs as uid and gid instead
	uid, gid int  // the host ids commands run as
	hide     hiding
	// dialed: the probe's connection to a listener of the host on
	// loopback arrived, so the network is not confined.
	dialed bool
}

func (b *bwrapBackend) identity() (uid, gid int) { return b.uid, b.gid }

// bwrapPaths are where bwrap is looked for; PATH is never searched.
func bwrapPaths() []string { return []string{"/usr/bin/bwrap", "/usr/local/bin/bwrap", "/bin/bwrap"} }

func (b *bwrapBackend) privateWorkdir() bool { return true }

func (b *bwrapBackend) enforcement(bool) Enforcement {
	e := Enforcement{
		Filesystem: true, PrivateTmp: true, Network: NetworkDenied, PIDNamespace: true, HostProcesses: true,
		Memory: true, Processes: true, CPU: true, FileSize: true, OpenFiles: true, Teardown: true,
		HostDeath: true, NoNewPrivs: true, Secrets: len(b.hide.paths) > 0, Hidden: b.hide.paths, Spawner: b.path,
	}
	g := []string{
		"The command reads the host's files as " + who(b.root, b.uid) + " through a read-only root, except the hidden paths (Enforcement.Hidden), which it sees empty; a hidden path it is given in ReadOnly, Writable or Workdir is shown.",
		"No seccomp and no Landlock: the command can connect to any Unix socket of the host that its user can (they are reached by path, not through the network namespace), make setuid files in the places it can write, and use io_uring, ptrace within the sandbox, and every other system call.",
		"The disk cap applies to its private /tmp and /dev/shm (RAM-backed, up to Limits.Disk bytes each, killed by the watcher past Limits.Disk between them) but not to a host workdir or writable path, whose filesystem it can fill. SysV shared memory it detaches is not counted by the memory cap until the run ends.",
		"Memory and process counts are polled every 20ms. A command killed by a signal shows as exit status 128+n; 152 and 153 are read as the CPU and file-size caps.",
		"A setup failure is told from the command's failure only by bwrap's \"bwrap: \" message.",
	}
	if b.root {
		g = append(g, "The caller is root, so bwrap itself runs as that unprivileged user: the paths it binds must be reachable by it.")
	}
	if b.dialed {
		e.Network = NetworkOpen
		g = append(g, "The probe's connection to a listener of the host on 127.0.0.1 arrived: the network is open.")
	}
	e.Gaps = strings.Join(g, " ")
	return e
}

// bwrapArgs is bwrap's command line for one run: everything unshared
// (the network too), a read-only root, private /dev, /proc, and /tmp and
// /dev/shm of the disk cap's size, the hidden paths covered, the workdir
// and the extra paths bound (shortest first, so a deeper bind or hiding
// place wins), no capabilities, a new session, and death with us.
func bwrapArgs(path string, l *launch, hide hiding, statusFD int) []string {
	p := l.plan
	size := fmt.Sprint(p.limits.Disk)
	args := []string{path, "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
		"--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
		"--size", size, "--tmpfs", "/tmp", "--size", size, "--tmpfs", "/dev/shm",
		"--json-status-fd", fmt.Sprint(statusFD)}
	const (
		ro = iota
		rw
		hidden
	)
	type bind struct {
		path string
		kind int
	}
	var binds []bind
	shown := map[string]bool{}
	if !l.ephemeral {
		binds = append(binds, bind{l.workdir, rw})
	}
	for _, w := range p.Writable {
		binds = append(binds, bind{w, rw})
	}
	for _, r := range p.ReadOnly {
		binds = append(binds, bind{r, ro})
	}
	for _, bd := range binds {
		shown[bd.path] = true
	}
	var shownPaths []string
	for _, bd := range binds {
		shownPaths = append(shownPaths, bd.path)
	}
	for _, h := range hide.forRun(shownPaths, p.Hide) {
		if !shown[h] {
			shown[h] = true
			binds = append(binds, bind{h, hidden})
		}
	}
	slices.SortStableFunc(binds, func(a, b bind) int { return len(a.path) - len(b.path) })
	var readOnly []string
	for _, bd := range binds {
		switch bd.kind {
		case ro:
			args = append(args, "--ro-bind", bd.path, bd.path)
		case rw:
			args = append(args, "--bind", bd.path, bd.path)
		case hidden:
			fi, err := os.Lstat(bd.path)
			switch {
			case err != nil:
			case fi.IsDir():
				args = append(args, "--size", "65536", "--tmpfs", bd.path)
				readOnly = append(readOnly, bd.path)
			default:
				args = append(args, "--ro-bind", "/dev/null", bd.path)
			}
		}
	}
	if l.ephemeral {
		args = append(args, "--dir", l.workdir)
	}
	// The hiding places become read-only once the binds inside them have
	// their mount points.
	for _, d := range readOnly {
		args = append(args, "--remount-ro", d)
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
	var cred *syscall.Credential
	if b.root {
		cred = &syscall.Credential{Uid: uint32(b.uid), Gid: uint32(b.gid), Groups: []uint32{}}
	}
	bp := &bwrapProc{exited: make(chan exitStatus, 1), pidfd: -1}
	ready := make(chan error, 1)
	go func() {
		// forkExec gives the thread a file table of its own: it stays
		// locked and dies with this goroutine, after bwrap.
		runtime.LockOSThread()
		pid, err := startStopped(b.path, bwrapArgs(b.path, l, b.hide, 3), &launch{
			workdir: "/", env: l.env, stdin: l.stdin, stdout: l.stdout, stderr: l.stderr,
		}, rlimits(l.plan.limits, false), cred, statusW)
		if err != nil {
			ready <- err
			return
		}
		bp.hostPid = pid
		ready <- nil
		st := reap(pid)
		switch st.code {
		case 128 + sigXCPU:
			st.capHint = CapCPU
		case 128 + sigXFSZ:
			st.capHint = CapFileSize
		}
		bp.exited <- st
	}()
	err = <-ready
	statusW.Close()
	if err != nil {
		statusR.Close()
		return nil, &Error{Kind: ErrSetup, Backend: BackendBwrap, Step: "start", Err: err}
	}
	if fd, err := unix.PidfdOpen(bp.hostPid, 0); err == nil {
		bp.pidfd = fd
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
	hostPid int
	exited  chan exitStatus

	mu        sync.Mutex // guards the fields below
	pidfd     int        // bwrap's pidfd, -1 once closed
	initPid   int
	initPidfd int
}

func (b *bwrapProc) pid() int { return b.hostPid }

func (b *bwrapProc) kill() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.initPid > 0 {
		unix.PidfdSendSignal(b.initPidfd, unix.SIGKILL, nil, 0)
	}
	if b.pidfd >= 0 {
		unix.PidfdSendSignal(b.pidfd, unix.SIGKILL, nil, 0)
	}
}

func (b *bwrapProc) wait() exitStatus {
	st := <-b.exited
	b.mu.Lock()
	if b.initPid > 0 {
		unix.Close(b.initPidfd)
		b.initPid = 0
	}
	if b.pidfd >= 0 {
		unix.Close(b.pidfd)
		b.pidfd = -1
	}
	b.mu.Unlock()
	return st
}

func (b *bwrapProc) usage() (usage, bool) {
	b.mu.Lock()
	pid := b.initPid
	b.mu.Unlock()
	if pid == 0 {
		return usage{disk: -1}, true
	}
	u, ok := nsUsage(pid)
	u.disk, u.diskRAM = -1, true
	// The disk cap's share of the sandbox: its private /tmp and /dev/shm,
	// seen through the init's root.
	root := "/proc/" + strconv.Itoa(pid) + "/root"
	for _, m := range []string{"/tmp", "/dev/shm"} {
		var st unix.Statfs_t
		if unix.Statfs(root+m, &st) == nil && st.Type == unix.TMPFS_MAGIC {
			u.disk = max(u.disk, 0) + int64(st.Blocks-st.Bfree)*st.Bsize
		}
	}
	return u, ok
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
	if b.root {
		if err := os.Chown(scratch, b.uid, b.gid); err != nil {
			return err
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer ln.Close()
	escape := filepath.Join(scratch, "escape")
	argv := []string{b.path, "--version"}
	if _, err := os.Stat("/bin/sh"); err == nil {
		argv = []string{"/bin/sh", "-c", "if true 2>/dev/null >" + escape + "; then exit 1; fi"}
	}
	// bash can dial; a plain sh cannot, and then the network namespace
	// --unshare-all requires is what denies the network.
	if _, err := os.Stat("/bin/bash"); err == nil {
		port := ln.Addr().(*net.TCPAddr).Port
		argv = []string{"/bin/bash", "-c", fmt.Sprintf("(exec 3<>/dev/tcp/127.0.0.1/%d) 2>/dev/null; if true 2>/dev/null >%s; then exit 1; fi", port, escape)}
	}
	s := newSandbox(BackendBwrap, b, nil, nil)
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
	b.dialed = arrived(ln)
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
