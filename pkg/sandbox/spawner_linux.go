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
	"slices"
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
	root     bool   // running as uid 0: commands run as uid and gid instead
	uid, gid int    // the host ids commands run as
	hide     hiding
	// dialed: the probe's connection to a listener of the host on
	// loopback arrived, so the network is not confined.
	dialed bool
}

func (b *spawnerBackend) ns() bool { return b.flags&spawn.NS != 0 }

func (b *spawnerBackend) privateWorkdir() bool { return b.ns() }

func (b *spawnerBackend) identity() (uid, gid int) { return b.uid, b.gid }

func (b *spawnerBackend) enforcement(proxied bool) Enforcement {
	e := Enforcement{
		Filesystem: true, Network: NetworkDenied, Memory: true, Processes: true, CPU: true,
		FileSize: true, OpenFiles: true, Teardown: true, Seccomp: true, Landlock: b.landlock,
		NoNewPrivs: true, NoSetuid: true, Spawner: "cgo",
	}
	if b.helper != "" {
		e.Spawner = "helper"
	}
	var g []string
	if b.ns() {
		e.PrivateTmp, e.PIDNamespace, e.HostProcesses, e.HostDeath = true, true, true, true
		e.Disk, e.SharedMemory, e.Secrets, e.Hidden = true, b.root, len(b.hide.paths) > 0, b.hide.paths
		e.Overlay = true
		g = append(g,
			"The command reads the host's files as "+who(b.root, b.uid)+" through a read-only root, except the hidden paths (Enforcement.Hidden: the caller's home, /root, /home, the password and host-key files, container secrets and sockets, and credential files inside a home), which it sees empty; a hidden path it is given in ReadOnly, Writable or Workdir is shown.",
			"What it writes to the workdir, the writable paths, /tmp and /dev/shm is held in a RAM-backed tmpfs of Limits.Disk bytes, which counts against the memory cap too; changes to host directories reach them when the command exits (not if the host process dies first), a renamed directory is copied rather than renamed, and sockets, fifos and device nodes it makes are not carried over.",
			"The command is pid 1 of its namespace: signals it has no handler for are ignored, the kernel's SIGXCPU and SIGXFSZ included, so the CPU cap lands by the watcher or at the hard limit and a write past the file-size limit fails with EFBIG instead of killing it.",
			"A writable path that is a file is bound as it is: it can grow up to Limits.FileSize.")
		if !b.root {
			g = append(g, "SysV shared memory the command makes and detaches is no process's memory until the run ends: the memory cap does not count it (only root may set shm_rmid_forced in the run's IPC namespace).")
		}
	} else {
		e.HostProcesses = b.landlock >= 6
		g = append(g,
			"Landlock cannot hide a path under an allowed one: the command reads every host file that "+who(b.root, b.uid)+" can, the caller's home included.",
			"There is no disk cap: it can fill the filesystems of the workdir, the writable paths and its TMPDIR (a private directory of the host's temporary directory).",
			"No namespaces: the command sees every host process and the host's /proc, /tmp is not writable, and when the host process dies only the command itself is killed: its descendants survive and the workdir stays. Network sockets and Unix sockets are refused by seccomp. SysV IPC objects it makes are the host's, uncounted by the memory cap, and stay after the run.")
		if b.root {
			g = append(g, fmt.Sprintf("Concurrent runs share uid %d.", b.uid))
		}
		if b.landlock < 6 {
			g = append(g, "Landlock below ABI 6 cannot stop it signalling host processes of the same user.")
		}
	}
	g = append(g, "Memory and process counts are polled every 20ms (cgroups are not used), so a fast allocation or fork burst can overshoot before the kill.")
	if !b.ns() || b.root {
		g = append(g, "The process cap is the watcher's alone (RLIMIT_NPROC would count other processes of the same host user).")
	}
	if proxied && b.ns() {
		e.Network = NetworkAllowList
	}
	if b.dialed {
		e.Network = NetworkOpen
		g = append(g, "The probe's connection to a listener of the host on 127.0.0.1 arrived: the network is open.")
	}
	e.Gaps = strings.Join(g, " ")
	return e
}

// who names the host user a command runs as, for the gaps.
func who(root bool, uid int) string {
	if root {
		return fmt.Sprintf("the unprivileged uid %d (the caller is root; root-only files stay unreadable)", uid)
	}
	return "the caller"
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
		Rlimits: rlimits(p.limits, b.ns() && !b.root), Flags: b.flags, TmpfsSize: uint64(p.limits.Disk),
	}
	if b.ns() {
		shown := append(append([]string{l.workdir}, p.ReadOnly...), p.Writable...)
		if l.ephemeral {
			shown = shown[1:]
		}
		for _, ro := range p.ReadOnlyAt {
			r.ReadOnlyAt = append(r.ReadOnlyAt, spawn.Bind{Source: ro.Source, Target: ro.Target})
			shown = append(shown, ro.Source, ro.Target)
		}
		r.Hide = b.hide.forRun(shown, p.Hide)
		r.Conceal = p.Conceal
		r.Flags |= spawn.Overlay
		if b.root && p.Collect != nil {
			r.Flags |= spawn.Idmap
		}
	}
	if b.root {
		r.RunAs, r.UID, r.GID = true, uint32(b.uid), uint32(b.gid)
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
		tmp, err := privateTmp(l, b.uid, b.gid)
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
	if b.ns() {
		proc.overlays = overlaysOf(req)
		// Applied files keep the owners they have in the upper layer, but
		// where the lower layers are idmapped the caller's own files are
		// the command's user's: they are applied as the caller's.
		proc.owner = b.root && req.Flags&spawn.Idmap == 0
		proc.limits = l.plan.limits
		if c := l.plan.Collect; c != nil {
			conceal := map[string]bool{}
			for _, p := range l.plan.Conceal {
				conceal[p] = true
			}
			proc.collect = func(fd int, killed bool) error {
				return c(l.ctx, &Upper{fd: fd, conceal: conceal, Killed: killed})
			}
		}
	}
	if proc.listener >= 0 {
		f := os.NewFile(uintptr(proc.listener), "egress")
		ln, err := net.FileListener(f)
		f.Close()
		if err != nil {
			proc.kill()
			proc.wait()
			if proc.scratch >= 0 {
				unix.Close(proc.scratch) // the run never was: nothing to apply
			}
			return nil, &Error{Kind: ErrSetup, Backend: b.name, Step: "egress listener", Err: err}
		}
		l.listener = ln
	}
	return proc, nil
}

// privateTmp makes the run's own temporary directory on the host, for
// uid and gid, points TMPDIR at it and registers its removal.
func privateTmp(l *launch, uid, gid int) (string, error) {
	tmp, err := makeDir("io-harness-tmp-", uid, gid)
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
	session  bool   // no pid namespace: the session is the run
	listener int    // the egress listener made inside the netns, or -1
	scratch  int    // the scratch tmpfs, or -1; finish closes it
	limits   Limits // the run's, to judge the scratch tmpfs at the end
	overlays []overlayDir
	// collect, when set, receives the workdir's upper layer (an fd of
	// its root) instead of its being applied.
	collect func(upper int, killed bool) error
	owner   bool // give the applied files the owners they have in the upper layers (we are root)

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
	u, ok := nsUsage(c.hostPid)
	u.disk, u.diskRAM = scratchUsed(c.scratch), true
	return u, ok
}

// finish reports a cap the scratch tmpfs reached by the run's end (the
// watcher polls, and a fast writer can be done between two polls): full
// is the disk cap, and more than the memory cap in RAM-backed files is
// the memory cap. Then it applies the overlays' changes to the host and
// closes the scratch tmpfs, which frees it.
func (c *childProc) finish(killed bool) (Cap, error) {
	if c.scratch < 0 {
		return CapNone, nil
	}
	defer func() {
		unix.Close(c.scratch)
		c.scratch = -1
	}()
	var hit Cap
	switch used := scratchUsed(c.scratch); {
	case diskFull(used, c.limits.Disk) || outOfInodes(c.scratch):
		hit = CapDisk
	case c.limits.Memory > 0 && used > c.limits.Memory:
		hit = CapMemory
	}
	dirs := c.overlays
	var collected error
	if c.collect != nil {
		dirs = slices.DeleteFunc(slices.Clone(dirs), func(d overlayDir) bool { return d.ord == 0 })
		collected = c.collectWorkdir(killed || hit != CapNone)
	}
	return hit, errors.Join(collected, applyOverlays(c.scratch, dirs, c.owner))
}

// collectWorkdir hands the workdir's upper layer to collect.
func (c *childProc) collectWorkdir(killed bool) error {
	up, err := unix.Openat(c.scratch, "upper/0", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("the workdir's upper layer: %w", err)
	}
	defer unix.Close(up)
	return c.collect(up, killed)
}

// scratchUsed returns the bytes stored in the scratch tmpfs fd, or -1.
func scratchUsed(fd int) int64 {
	if fd < 0 {
		return -1
	}
	var st unix.Statfs_t
	if unix.Fstatfs(fd, &st) != nil {
		return -1
	}
	return int64(st.Blocks-st.Bfree) * st.Bsize
}

// outOfInodes reports whether the scratch tmpfs has no inode left: a
// command that made files until it could make no more filled its disk
// as surely as one that wrote bytes until it could write no more.
func outOfInodes(fd int) bool {
	var st unix.Statfs_t
	return fd >= 0 && unix.Fstatfs(fd, &st) == nil && st.Files > 0 && st.Ffree == 0
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
	cp := &childProc{session: session, pidfd: -1, scratch: -1, exited: make(chan exitStatus, 1)}
	var sweep func(int)
	if session {
		sweep = cp.sweep
	}
	c, err := spawnOnThread(req, l, sweep, cp.exited)
	if err != nil {
		return nil, err
	}
	cp.hostPid, cp.pidfd, cp.listener, cp.scratch = c.Pid, c.Pidfd, c.Listener, c.Scratch
	return cp, nil
}

// probeSpawner checks that b builds a sandbox here: a full build in probe
// mode, which must refuse a write to a host directory that the command's
// user could write, allow one to its host-bound workdir (through the
// overlay, with namespaces), and (with namespaces) be pid 1. The probe
// also dials a listener of the host on loopback: b.dialed records
// whether the connection arrived.
func probeSpawner(ctx context.Context, b *spawnerBackend) error {
	scratch, err := makeDir("io-harness-probe-", b.uid, b.gid)
	if err != nil {
		return err
	}
	defer os.RemoveAll(scratch)
	outside := filepath.Join(scratch, "outside")
	wd := filepath.Join(scratch, "wd")
	for _, d := range []string{outside, wd} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return err
		}
		if b.root {
			if err := os.Chown(d, b.uid, b.gid); err != nil {
				return err
			}
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer ln.Close()
	req := &spawn.Request{
		Argv: []string{"probe"}, Workdir: wd, Flags: b.flags | spawn.Probe,
		TmpfsSize: 1 << 20, ProbePath: filepath.Join(outside, "escape"),
		ProbeDial: ln.Addr().(*net.TCPAddr).Port,
		Rlimits:   rlimits(DefaultLimits(), b.ns() && !b.root),
	}
	if b.ns() {
		req.ReadOnly = []string{outside}
		req.Hide = b.hide.paths
		req.Flags |= spawn.Overlay
	}
	if b.root {
		req.RunAs, req.UID, req.GID = true, uint32(b.uid), uint32(b.gid)
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
	b.dialed = arrived(ln)
	return ctx.Err()
}

// arrived reports whether a connection is waiting on ln, without
// waiting for one.
func arrived(ln net.Listener) bool {
	rc, err := ln.(*net.TCPListener).SyscallConn()
	if err != nil {
		return false
	}
	got := false
	rc.Control(func(fd uintptr) {
		if nfd, _, err := unix.Accept4(int(fd), unix.SOCK_CLOEXEC); err == nil {
			unix.Close(nfd)
			got = true
		}
	})
	return got
}
