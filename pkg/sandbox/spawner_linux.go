package sandbox

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/initorigin/io-harness-go/pkg/sandbox/internal/spawn"
	"golang.org/x/sys/unix"
)

// proxyPort is where the egress proxy listens inside a sandbox that has
// its own network namespace (any port is free there).
const proxyPort = 3128

// spawnerBackend is the linux-ns and linux-landlock rungs: the C spawner,
// compiled in with cgo or run as the helper executable.
type spawnerBackend struct {
	name     string
	flags    spawn.Flags
	helper   string // the helper executable; empty for the in-process spawner
	landlock int    // the Landlock ABI applied, 0 for none
	root     bool   // running as uid 0
}

func (b *spawnerBackend) ns() bool { return b.flags&spawn.NS != 0 }

func (b *spawnerBackend) privateWorkdir() bool { return b.ns() }

func (b *spawnerBackend) enforcement(proxied bool) Enforcement {
	e := Enforcement{
		Filesystem: true, Network: NetworkDenied, Memory: true, Processes: true, CPU: true,
		FileSize: true, OpenFiles: true, Teardown: true, Seccomp: true, Landlock: b.landlock,
		NoNewPrivs: true, Spawner: "cgo",
	}
	if b.helper != "" {
		e.Spawner = "helper"
	}
	gaps := "Memory and process counts are polled every 20ms (cgroups are not used), so a fast allocation or fork burst can overshoot before the kill, and RAM-backed tmpfs is not counted. Every host file is readable."
	if b.ns() {
		e.PrivateTmp, e.PIDNamespace, e.HostProcesses, e.HostDeath = true, true, true, true
		gaps += " The command is pid 1 of its namespace: signals it has no handler for are ignored, the kernel's SIGXCPU and SIGXFSZ included, so the CPU cap lands by the watcher or at the hard limit and a write past the file-size limit fails with EFBIG instead of killing it. The private /tmp and /dev/shm are RAM-backed, each up to the memory limit."
		if b.root {
			gaps += " Running as root, RLIMIT_NPROC does not apply (the kernel exempts uid 0), so the process cap is the watcher's alone."
		}
	} else {
		e.HostProcesses = b.landlock >= 6
		gaps += " No namespaces: the command sees every host process and the host's /proc, /tmp is not writable (TMPDIR is a private directory), and when the host process dies only the command itself is killed: its descendants survive and the workdir stays. Network sockets and Unix sockets are refused by seccomp. The process cap is the watcher's alone."
		if b.landlock < 6 {
			gaps += " Landlock below ABI 6 cannot stop it signalling host processes of the same user."
		}
	}
	if proxied && b.ns() {
		e.Network = NetworkAllowList
	}
	e.Gaps = gaps
	return e
}

// rlimits maps the limits onto the kernel's. The CPU hard limit is one
// second above the soft one, so that SIGXCPU comes first and says why.
// RLIMIT_NPROC only means "this run" inside a fresh user namespace.
func rlimits(l Limits, perRun bool) []spawn.Rlimit {
	cpu := uint64(math.Ceil(time.Duration(l.CPU).Seconds()))
	out := []spawn.Rlimit{
		{Resource: unix.RLIMIT_CPU, Soft: cpu, Hard: cpu + 1},
		{Resource: unix.RLIMIT_FSIZE, Soft: uint64(l.FileSize), Hard: uint64(l.FileSize)},
		{Resource: unix.RLIMIT_NOFILE, Soft: uint64(l.OpenFiles), Hard: uint64(l.OpenFiles)},
		{Resource: unix.RLIMIT_CORE, Soft: 0, Hard: 0},
	}
	if perRun {
		out = append(out, spawn.Rlimit{Resource: unix.RLIMIT_NPROC, Soft: uint64(l.Processes), Hard: uint64(l.Processes)})
	}
	return out
}

func (b *spawnerBackend) request(l *launch) *spawn.Request {
	p := l.plan
	r := &spawn.Request{
		Argv: p.Argv, Env: l.env, Workdir: l.workdir, ReadOnly: p.ReadOnly, Writable: p.Writable,
		Rlimits: rlimits(p.limits, b.ns()), Flags: b.flags, TmpfsSize: uint64(p.limits.Memory),
	}
	if l.ephemeral && b.ns() {
		r.Flags |= spawn.EphemeralWorkdir
	}
	if l.proxied && b.ns() {
		r.ListenPort = proxyPort
	}
	return r
}

func (b *spawnerBackend) start(l *launch) (process, error) {
	l.env = envWithout(l.env, proxyVars()...)
	if b.ns() {
		l.env = envWith(l.env, "TMPDIR", "/tmp")
		if l.proxied {
			l.env = proxyEnv(l.env, proxyPort)
		}
	} else {
		if err := checkNesting(l.plan); err != nil {
			return nil, &Error{Kind: ErrInvalid, Backend: b.name, Step: "read_only", Err: err}
		}
		tmp, err := privateTmp(l)
		if err != nil {
			return nil, &Error{Kind: ErrSetup, Backend: b.name, Step: "private TMPDIR", Err: err}
		}
		l.plan.Writable = append(l.plan.Writable[:len(l.plan.Writable):len(l.plan.Writable)], tmp)
	}
	req := b.request(l)
	var proc *childProc
	var err error
	if b.helper != "" {
		proc, err = startHelper(b.helper, req, l, !b.ns())
	} else {
		proc, err = startInProcess(req, l, !b.ns())
	}
	var se *spawn.SetupError
	if errors.As(err, &se) && strings.HasPrefix(se.Stage, "exec") {
		return nil, &execError{err: se, notFound: se.Errno == unix.ENOENT}
	}
	if err != nil {
		return nil, &Error{Kind: ErrSetup, Backend: b.name, Step: "spawn", Err: err}
	}
	if proc.listener >= 0 {
		f := os.NewFile(uintptr(proc.listener), "egress")
		ln, err := net.FileListener(f)
		f.Close()
		if err != nil {
			proc.kill()
			proc.wait()
			return nil, &Error{Kind: ErrSetup, Backend: b.name, Step: "egress listener", Err: err}
		}
		l.listener = ln
	}
	return proc, nil
}

// privateTmp makes the run's own temporary directory on the host, points
// TMPDIR at it and registers its removal.
func privateTmp(l *launch) (string, error) {
	tmp, err := os.MkdirTemp("", "io-harness-tmp-")
	if err == nil {
		tmp, err = filepath.EvalSymlinks(tmp)
	}
	if err != nil {
		return "", err
	}
	l.cleanup = append(l.cleanup, func() error { return removeTree(tmp) })
	l.env = envWith(l.env, "TMPDIR", tmp)
	return tmp, nil
}

// childProc is a run whose first process the spawner made (directly or
// through the helper).
type childProc struct {
	hostPid  int
	session  bool // no pid namespace: the session is the run
	listener int  // the egress listener made inside the netns, or -1

	mu      sync.Mutex // guards the fields below
	pidfd   int        // -1 once closed
	reaping bool       // the command is about to be reaped

	exited chan exitStatus
}

func (c *childProc) pid() int { return c.hostPid }

func (c *childProc) kill() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pidfd < 0 {
		return
	}
	if c.session && !c.reaping {
		// The command leads its process group; until it is reaped the
		// group id cannot be reused.
		unix.Kill(-c.hostPid, unix.SIGKILL)
	}
	unix.PidfdSendSignal(c.pidfd, unix.SIGKILL, nil, 0)
}

// sweep kills what is left of the run's session once the command has
// exited and before it is reaped, and from then on keeps kill off the
// process group, whose id is about to be free for reuse.
func (c *childProc) sweep(pid int) {
	sweepSession(pid)
	c.mu.Lock()
	c.reaping = true
	c.mu.Unlock()
}

func (c *childProc) closePidfd() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pidfd >= 0 {
		unix.Close(c.pidfd)
		c.pidfd = -1
	}
}

func (c *childProc) wait() exitStatus {
	st := <-c.exited
	c.closePidfd()
	return st
}

func (c *childProc) usage() (usage, bool) {
	if c.session {
		return sessionUsage(c.hostPid)
	}
	return nsUsage(c.hostPid)
}

// waitStatus converts a wait status and CPU time into an exitStatus.
func waitStatus(ws unix.WaitStatus, cpu time.Duration) exitStatus {
	if ws.Signaled() {
		return exitStatus{code: -1, signal: int(ws.Signal()), cpu: cpu}
	}
	return exitStatus{code: ws.ExitStatus(), cpu: cpu}
}

// spawnOnThread runs the C spawner on a thread of its own, locked for the
// child's whole life: the child's parent-death signal is tied to the
// thread that made it. It returns what the spawner returned; then, unless
// the spawn failed or was a probe, the thread waits for the child, calls
// sweep (when not nil) between its exit and its reaping, and sends its
// end on exited.
func spawnOnThread(req *spawn.Request, l *launch, sweep func(pid int), exited chan<- exitStatus) (spawn.Child, error) {
	type started struct {
		c   spawn.Child
		err error
	}
	ready := make(chan started, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread() // nothing was applied to this thread
		c, err := spawn.Spawn(req, int(l.stdin.Fd()), int(l.stdout.Fd()), int(l.stderr.Fd()))
		ready <- started{c, err}
		if err != nil || c.Pid < 0 {
			return
		}
		if sweep != nil {
			// Sweep the session while the command is a zombie, so that its
			// pid (the session id) cannot be reused meanwhile.
			var info unix.Siginfo
			for unix.Waitid(unix.P_PID, c.Pid, &info, unix.WEXITED|unix.WNOWAIT|unix.WALL, nil) == unix.EINTR {
			}
			sweep(c.Pid)
		}
		var ws unix.WaitStatus
		var ru unix.Rusage
		_, err = unix.Wait4(c.Pid, &ws, unix.WALL, &ru)
		for err == unix.EINTR {
			_, err = unix.Wait4(c.Pid, &ws, unix.WALL, &ru)
		}
		if err != nil {
			exited <- exitStatus{err: fmt.Errorf("wait4: %w", err)}
			return
		}
		exited <- waitStatus(ws, time.Duration(ru.Utime.Nano()+ru.Stime.Nano()))
	}()
	s := <-ready
	runtime.KeepAlive(l)
	return s.c, s.err
}

// startInProcess starts req with the spawner compiled into this binary.
func startInProcess(req *spawn.Request, l *launch, session bool) (*childProc, error) {
	cp := &childProc{session: session, pidfd: -1, exited: make(chan exitStatus, 1)}
	var sweep func(int)
	if session {
		sweep = cp.sweep
	}
	c, err := spawnOnThread(req, l, sweep, cp.exited)
	if err != nil {
		return nil, err
	}
	cp.hostPid, cp.pidfd, cp.listener = c.Pid, c.Pidfd, c.Listener
	return cp, nil
}

// probeSpawner checks that b builds a sandbox here: a full build in probe
// mode, which must refuse a write to a host directory that the host can
// write, and (with namespaces) be pid 1.
func probeSpawner(ctx context.Context, b *spawnerBackend) error {
	scratch, err := os.MkdirTemp("", "io-harness-probe-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(scratch)
	if scratch, err = filepath.EvalSymlinks(scratch); err != nil {
		return err
	}
	outside := filepath.Join(scratch, "outside")
	wd := filepath.Join(scratch, "wd")
	for _, d := range []string{outside, wd} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return err
		}
	}
	req := &spawn.Request{
		Argv: []string{"probe"}, Workdir: wd, Flags: b.flags | spawn.Probe,
		TmpfsSize: 1 << 20, ProbePath: filepath.Join(outside, "escape"),
		Rlimits: rlimits(DefaultLimits(), b.ns()),
	}
	if b.ns() {
		req.ReadOnly = []string{outside}
		req.Workdir = privateWorkdirPath
		req.Flags |= spawn.EphemeralWorkdir
	}
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer null.Close()
	l := &launch{stdin: null, stdout: null, stderr: null}
	if b.helper != "" {
		err = probeHelper(b.helper, req, l)
	} else {
		_, err = spawnOnThread(req, l, nil, nil)
	}
	if err != nil {
		return err
	}
	if _, err := os.Stat(req.ProbePath); err == nil {
		return fmt.Errorf("the probe's write outside the sandbox landed")
	}
	return ctx.Err()
}
