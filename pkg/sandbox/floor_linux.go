package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/initorigin/io-harness-go/pkg/sandbox/internal/spawn"
	"golang.org/x/sys/unix"
)

// floorBackend is the floor (a plain subprocess under Landlock when the
// kernel has it) and host (the same with nothing but the caps).
type floorBackend struct {
	name     string
	landlock int  // the Landlock ABI applied, 0 for none
	root     bool // running as uid 0: the floor runs commands as uid and gid, host as root
	uid, gid int  // the host ids commands run as
}

func (b *floorBackend) privateWorkdir() bool { return false }

func (b *floorBackend) identity() (uid, gid int) { return b.uid, b.gid }

// switchIDs reports whether commands run as other ids than the caller's.
func (b *floorBackend) switchIDs() bool { return b.root && b.name == BackendFloor }

func (b *floorBackend) enforcement(bool) Enforcement {
	e := Enforcement{
		Filesystem: b.landlock > 0, Network: NetworkOpen, HostProcesses: b.landlock >= 6 && !b.root,
		Memory: true, Processes: true, CPU: true, FileSize: true, OpenFiles: true,
		Landlock: b.landlock, NoNewPrivs: b.landlock > 0, Spawner: "os",
	}
	if b.name == BackendHost {
		e.Gaps = "Nothing is protected: the command runs on the host as the caller (root included: a root caller's command is root, and can leave a setuid-root file behind), with the host's filesystem, network and processes. Only the caps and the closing of inherited descriptors apply."
		return e
	}
	e.HostProcesses = b.landlock >= 6
	var g []string
	switch {
	case !b.root:
	case b.landlock == 0:
		g = append(g, fmt.Sprintf("Concurrent runs share uid %d, and can signal and trace one another.", b.uid))
	case b.landlock < 6:
		g = append(g, fmt.Sprintf("Concurrent runs share uid %d, and can signal one another.", b.uid))
	default:
		g = append(g, fmt.Sprintf("Concurrent runs share uid %d.", b.uid))
	}
	if b.landlock == 0 {
		g = append(g, "The kernel has no Landlock: the command can write anywhere "+who(b.root, b.uid)+" can.")
	} else {
		g = append(g, "Landlock confines writes to the workdir, the writable paths and the private TMPDIR; it cannot hide a path under an allowed one, so the command reads every host file that "+who(b.root, b.uid)+" can, the caller's home included.")
		if b.landlock < 6 {
			g = append(g, "Landlock below ABI 6 cannot stop it signalling host processes of the same user.")
		}
	}
	g = append(g, "There is no disk cap, and no seccomp: the command can fill the filesystems it can write, and make setuid files there that run as its user.",
		"The network is open.",
		"There is no pid namespace: it sees every host process, and without Landlock can read a same-user process's memory and environment through /proc.",
		"A descendant that calls setsid escapes the teardown and can outlive the run, and when the host process dies only the command itself is killed; SysV IPC objects it makes are the host's, uncounted by the memory cap, and stay after the run.",
		"Memory and process counts are polled every 20ms; RLIMIT_NPROC is not set, as it would count the caller's other processes.")
	e.Gaps = strings.Join(g, " ")
	return e
}

func (b *floorBackend) start(l *launch) (process, error) {
	p := l.plan
	writable := append([]string{l.workdir}, p.Writable...)
	var cred *syscall.Credential
	if b.switchIDs() {
		// The child changes ids before it changes directory.
		if reason := reachableBy(l.workdir, b.uid, b.gid); reason != "" {
			return nil, &Error{Kind: ErrInvalid, Backend: b.name, Step: "workdir",
				Err: &AccessError{Path: l.workdir, Field: "workdir", UID: b.uid, GID: b.gid, Reason: reason}}
		}
		cred = &syscall.Credential{Uid: uint32(b.uid), Gid: uint32(b.gid), Groups: []uint32{}}
	}
	if b.name == BackendFloor {
		l.env = envWithout(l.env, proxyVars()...)
		tmp, err := privateTmp(l, b.uid, b.gid)
		if err != nil {
			return nil, &Error{Kind: ErrSetup, Backend: b.name, Step: "private TMPDIR", Err: err}
		}
		writable = append(writable, tmp)
		if b.landlock > 0 {
			if err := checkNesting(p); err != nil {
				return nil, &Error{Kind: ErrInvalid, Backend: b.name, Step: "read_only", Err: err}
			}
		}
	}
	path, err := lookPath(p.Argv[0], l.env, l.workdir)
	if err != nil {
		return nil, &execError{err: err, notFound: true}
	}
	fp := &floorProc{exited: make(chan exitStatus, 1)}
	ready := make(chan error, 1)
	go func() {
		// The thread is confined by Landlock and gets a file table of its
		// own (forkExec): it must never run another goroutine, so it stays
		// locked and dies with this one, after the command.
		runtime.LockOSThread()
		if b.landlock > 0 {
			if err := restrictThread(b.landlock, writable); err != nil {
				ready <- fmt.Errorf("landlock: %w", err)
				return
			}
		}
		pid, err := startStopped(path, p.Argv, l, rlimits(p.limits, false), cred)
		if err != nil {
			ready <- err
			return
		}
		fp.hostPid = pid
		ready <- nil
		// Sweep the session while the command is a zombie, so that its pid
		// (the session id) cannot be reused meanwhile.
		var info unix.Siginfo
		for unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil) == unix.EINTR {
		}
		fp.sweep()
		fp.exited <- reap(pid)
	}()
	if err := <-ready; err != nil {
		var ee *execError
		if errors.As(err, &ee) {
			return nil, ee
		}
		return nil, &Error{Kind: ErrSetup, Backend: b.name, Step: "start", Err: err}
	}
	// The command is not reaped before the sweep, so its pid is still its
	// own: open its pidfd here, in the process's file table.
	fp.pidfd = -1
	if fd, err := unix.PidfdOpen(fp.hostPid, 0); err == nil {
		fp.pidfd = fd
	}
	return fp, nil
}

// asRealIDs runs f with the calling thread's real user and group set to
// uid and gid, its effective ids staying root's. A root without
// CAP_SYS_RESOURCE (some containers and VMs drop it) may set the limits
// of a process of another user only when its real ids are that user's.
// The ids are the thread's alone (raw system calls), and put back after.
func asRealIDs(uid, gid int, f func() error) error {
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESGID, uintptr(gid), ^uintptr(0), ^uintptr(0)); e != 0 {
		return fmt.Errorf("setresgid: %w", e)
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, uintptr(uid), ^uintptr(0), ^uintptr(0)); e != 0 {
		unix.RawSyscall(unix.SYS_SETRESGID, 0, ^uintptr(0), ^uintptr(0))
		return fmt.Errorf("setresuid: %w", e)
	}
	err := f()
	_, _, e1 := unix.RawSyscall(unix.SYS_SETRESUID, 0, ^uintptr(0), ^uintptr(0))
	_, _, e2 := unix.RawSyscall(unix.SYS_SETRESGID, 0, ^uintptr(0), ^uintptr(0))
	if err == nil && (e1 != 0 || e2 != 0) {
		err = fmt.Errorf("put back the real ids: %v %v", e1, e2)
	}
	return err
}

// reap waits for pid and returns how it ended.
func reap(pid int) exitStatus {
	var ws unix.WaitStatus
	var ru unix.Rusage
	_, err := unix.Wait4(pid, &ws, unix.WALL, &ru)
	for err == unix.EINTR {
		_, err = unix.Wait4(pid, &ws, unix.WALL, &ru)
	}
	if err != nil {
		return exitStatus{err: fmt.Errorf("wait4: %w", err)}
	}
	return waitStatus(ws, time.Duration(ru.Utime.Nano()+ru.Stime.Nano()))
}

// startStopped starts argv in a new session with the given limits, as
// cred when it is not nil, with the files of l and extra (from fd 3 on)
// and no other descriptor of this process (forkExec). The child stops at
// its exec (it asks to be traced), the limits are set on it, and it is
// let go: no window in which it runs unlimited, and no limit set on the
// host process. The calling goroutine must be locked to its thread for
// good: forkExec gives the thread a file table of its own, and only the
// tracing thread may detach.
func startStopped(path string, argv []string, l *launch, limits []spawn.Rlimit, cred *syscall.Credential, extra ...*os.File) (int, error) {
	files := []uintptr{l.stdin.Fd(), l.stdout.Fd(), l.stderr.Fd()}
	for _, f := range extra {
		files = append(files, f.Fd())
	}
	pid, err := forkExec(path, argv, &syscall.ProcAttr{
		Dir: l.workdir, Env: l.env, Files: files,
		Sys: &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL, Ptrace: true, Credential: cred},
	})
	runtime.KeepAlive(l)
	runtime.KeepAlive(extra)
	if err != nil {
		switch err {
		case syscall.ENOENT, syscall.EACCES, syscall.ENOEXEC, syscall.ENOTDIR, syscall.ELOOP, syscall.EISDIR, syscall.ETXTBSY:
			return 0, &execError{err: err, notFound: err == syscall.ENOENT}
		}
		return 0, err
	}
	fail := func(step string, err error) (int, error) {
		unix.Kill(pid, unix.SIGKILL)
		var ws unix.WaitStatus
		unix.Wait4(pid, &ws, unix.WALL, nil)
		return 0, fmt.Errorf("%s: %w", step, err)
	}
	var ws unix.WaitStatus
	_, err = unix.Wait4(pid, &ws, unix.WALL, nil)
	for err == unix.EINTR {
		_, err = unix.Wait4(pid, &ws, unix.WALL, nil)
	}
	if err != nil {
		return fail("wait for the exec stop", err)
	}
	if !ws.Stopped() || ws.StopSignal() != syscall.SIGTRAP {
		return fail("wait for the exec stop", fmt.Errorf("unexpected status %#x", int(ws)))
	}
	setLimits := func() error {
		for _, r := range limits {
			if err := unix.Prlimit(pid, r.Resource, &unix.Rlimit{Cur: r.Soft, Max: r.Hard}, nil); err != nil {
				return fmt.Errorf("prlimit %d: %w", r.Resource, err)
			}
		}
		return nil
	}
	if cred != nil {
		err = asRealIDs(int(cred.Uid), int(cred.Gid), setLimits)
	} else {
		err = setLimits()
	}
	if err != nil {
		return fail("limits", err)
	}
	if err := unix.PtraceDetach(pid); err != nil {
		return fail("ptrace detach", err)
	}
	return pid, nil
}

// floorProc is a run of the floor or host backend.
type floorProc struct {
	hostPid int
	exited  chan exitStatus

	mu      sync.Mutex // guards the fields below
	pidfd   int        // the command's pidfd (-1 without one, or once closed)
	reaping bool       // the command is about to be reaped
}

func (f *floorProc) pid() int { return f.hostPid }

func (f *floorProc) wait() exitStatus {
	st := <-f.exited
	f.mu.Lock()
	if f.pidfd >= 0 {
		unix.Close(f.pidfd)
		f.pidfd = -1
	}
	f.mu.Unlock()
	return st
}

// kill kills the command's process group at once (until the command is
// reaped, when the group id could be reused); wait sweeps the rest of the
// session once the command is gone.
func (f *floorProc) kill() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.reaping {
		syscall.Kill(-f.hostPid, syscall.SIGKILL)
	}
	if f.pidfd >= 0 {
		unix.PidfdSendSignal(f.pidfd, unix.SIGKILL, nil, 0)
	}
}

// sweep kills what is left of the session before the command is reaped.
func (f *floorProc) sweep() {
	sweepSession(f.hostPid)
	f.mu.Lock()
	f.reaping = true
	f.mu.Unlock()
}

func (f *floorProc) usage() (usage, bool) {
	u, ok := sessionUsage(f.hostPid)
	u.disk = -1
	return u, ok
}

// lookPath finds file the way execvp would with env's PATH (or the
// default one), relative entries taken from dir. It never looks at the
// host's environment.
func lookPath(file string, env []string, dir string) (string, error) {
	if strings.Contains(file, "/") {
		if !filepath.IsAbs(file) {
			file = filepath.Join(dir, file)
		}
		return file, nil
	}
	path := "/usr/local/bin:/usr/bin:/bin"
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, "PATH="); ok {
			path = v
		}
	}
	for _, d := range filepath.SplitList(path) {
		if d == "" {
			d = "."
		}
		if !filepath.IsAbs(d) {
			d = filepath.Join(dir, d)
		}
		c := filepath.Join(d, file)
		if fi, err := os.Stat(c); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return c, nil
		}
	}
	return "", fmt.Errorf("%s: not found in PATH %q: %w", file, path, syscall.ENOENT)
}

// floorProbe checks the floor here: Landlock (when the kernel has it)
// must refuse a write to a host directory the host can write, tried on
// a throwaway thread; and a program must start and stop under the caps.
func floorProbe(b *floorBackend) error {
	if b.landlock > 0 {
		scratch, err := os.MkdirTemp("", "io-harness-probe-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(scratch)
		errc := make(chan error, 1)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
			if err := restrictThread(b.landlock, nil); err != nil {
				errc <- fmt.Errorf("landlock: %w", err)
				return
			}
			f, err := os.Create(filepath.Join(scratch, "escape"))
			if err == nil {
				f.Close()
				errc <- errors.New("landlock: a write outside the workdir succeeded")
				return
			}
			errc <- nil
		}()
		if err := <-errc; err != nil {
			return err
		}
	}
	var truePath string
	for _, c := range []string{"/usr/bin/true", "/bin/true"} {
		if _, err := os.Stat(c); err == nil {
			truePath = c
			break
		}
	}
	if truePath == "" {
		return nil // nothing to run the start-up check with
	}
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer null.Close()
	var cred *syscall.Credential
	if b.switchIDs() {
		cred = &syscall.Credential{Uid: uint32(b.uid), Gid: uint32(b.gid), Groups: []uint32{}}
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: forkExec spoils the thread
		l := &launch{workdir: "/", stdin: null, stdout: null, stderr: null}
		pid, err := startStopped(truePath, []string{truePath}, l, rlimits(DefaultLimits(), false), cred)
		if err != nil {
			errc <- err
			return
		}
		st := reap(pid)
		if err = st.err; err == nil && (st.code != 0 || st.signal != 0) {
			err = fmt.Errorf("%s under the floor: exit %d, signal %d", truePath, st.code, st.signal)
		}
		errc <- err
	}()
	return <-errc
}
