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

	"github.com/initorigin/io-harness-go/pkg/sandbox/internal/spawn"
	"golang.org/x/sys/unix"
)

// floorBackend is the floor (a plain subprocess under Landlock when the
// kernel has it) and host (the same with nothing but the caps).
type floorBackend struct {
	name     string
	landlock int  // the Landlock ABI applied, 0 for none
	root     bool // running as uid 0, with every capability
}

func (b *floorBackend) privateWorkdir() bool { return false }

func (b *floorBackend) enforcement(bool) Enforcement {
	e := Enforcement{
		Filesystem: b.landlock > 0, Network: NetworkOpen, HostProcesses: b.landlock >= 6 && !b.root,
		Memory: true, Processes: true, CPU: true, FileSize: true, OpenFiles: true,
		Landlock: b.landlock, NoNewPrivs: b.landlock > 0, Spawner: "os",
	}
	if b.name == BackendHost {
		e.Gaps = "Nothing is protected: the command runs on the host as the caller, with the host's filesystem, network and processes. Only the caps apply."
		return e
	}
	var g []string
	if b.landlock == 0 {
		g = append(g, "The kernel has no Landlock: the command can write anywhere the caller can.")
	} else {
		g = append(g, "Landlock confines writes to the workdir and the writable paths; every host file is readable.")
		if b.landlock < 6 {
			g = append(g, "Landlock below ABI 6 cannot stop it signalling host processes of the same user.")
		}
	}
	if b.root {
		g = append(g, "It runs as root with every capability: it can read other processes' environment through /proc, and do whatever else root may that Landlock does not refuse.")
	}
	g = append(g, "The network is open.",
		"There is no pid namespace: it sees every host process, and without Landlock can read a same-user process's memory and environment through /proc.",
		"A descendant that calls setsid escapes the teardown and can outlive the run, and when the host process dies only the command itself is killed.",
		"Memory and process counts are polled every 20ms; RLIMIT_NPROC is not set, as it would count the caller's other processes.")
	e.Gaps = strings.Join(g, " ")
	return e
}

func (b *floorBackend) start(l *launch) (process, error) {
	p := l.plan
	writable := append([]string{l.workdir}, p.Writable...)
	if b.name == BackendFloor {
		l.env = envWithout(l.env, proxyVars()...)
		tmp, err := privateTmp(l)
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
		runtime.LockOSThread()
		if b.landlock > 0 {
			// The thread is now confined: it must never run another
			// goroutine, so it stays locked and dies with this one.
			if err := restrictThread(b.landlock, writable); err != nil {
				ready <- fmt.Errorf("landlock: %w", err)
				return
			}
		} else {
			defer runtime.UnlockOSThread()
		}
		proc, err := startStopped(path, p.Argv, l, rlimits(p.limits, false))
		if err != nil {
			ready <- err
			return
		}
		fp.proc = proc
		ready <- nil
		// Sweep the session while the command is a zombie, so that its pid
		// (the session id) cannot be reused meanwhile.
		var info unix.Siginfo
		for unix.Waitid(unix.P_PID, proc.Pid, &info, unix.WEXITED|unix.WNOWAIT, nil) == unix.EINTR {
		}
		fp.sweep()
		ps, err := proc.Wait()
		if err != nil {
			fp.exited <- exitStatus{err: err}
			return
		}
		ws := ps.Sys().(syscall.WaitStatus)
		fp.exited <- waitStatus(unix.WaitStatus(ws), ps.UserTime()+ps.SystemTime())
	}()
	if err := <-ready; err != nil {
		var ee *execError
		if errors.As(err, &ee) {
			return nil, ee
		}
		return nil, &Error{Kind: ErrSetup, Backend: b.name, Step: "start", Err: err}
	}
	return fp, nil
}

// startStopped starts argv in a new session with the given limits. The
// child stops at its exec (it asks to be traced), the limits are set on
// it, and it is let go: no window in which it runs unlimited, and no
// limit set on the host process. extra are more files for it, from fd 3
// on. The calling thread must be locked: only the tracing thread may
// detach.
func startStopped(path string, argv []string, l *launch, limits []spawn.Rlimit, extra ...*os.File) (*os.Process, error) {
	proc, err := os.StartProcess(path, argv, &os.ProcAttr{
		Dir:   l.workdir,
		Env:   l.env,
		Files: append([]*os.File{l.stdin, l.stdout, l.stderr}, extra...),
		Sys:   &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL, Ptrace: true},
	})
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			return nil, &execError{err: pe.Err, notFound: errors.Is(pe.Err, syscall.ENOENT)}
		}
		return nil, err
	}
	fail := func(step string, err error) (*os.Process, error) {
		proc.Kill()
		proc.Wait()
		return nil, fmt.Errorf("%s: %w", step, err)
	}
	var ws unix.WaitStatus
	_, err = unix.Wait4(proc.Pid, &ws, unix.WALL, nil)
	for err == unix.EINTR {
		_, err = unix.Wait4(proc.Pid, &ws, unix.WALL, nil)
	}
	if err != nil {
		return fail("wait for the exec stop", err)
	}
	if !ws.Stopped() || ws.StopSignal() != syscall.SIGTRAP {
		return fail("wait for the exec stop", fmt.Errorf("unexpected status %#x", int(ws)))
	}
	for _, r := range limits {
		if err := unix.Prlimit(proc.Pid, r.Resource, &unix.Rlimit{Cur: r.Soft, Max: r.Hard}, nil); err != nil {
			return fail(fmt.Sprintf("prlimit %d", r.Resource), err)
		}
	}
	if err := unix.PtraceDetach(proc.Pid); err != nil {
		return fail("ptrace detach", err)
	}
	return proc, nil
}

// floorProc is a run of the floor or host backend.
type floorProc struct {
	proc   *os.Process
	exited chan exitStatus

	mu      sync.Mutex // guards reaping
	reaping bool       // the command is about to be reaped
}

func (f *floorProc) pid() int { return f.proc.Pid }

func (f *floorProc) wait() exitStatus { return <-f.exited }

// kill kills the command's process group at once (until the command is
// reaped, when the group id could be reused); wait sweeps the rest of the
// session once the command is gone.
func (f *floorProc) kill() {
	f.mu.Lock()
	if !f.reaping {
		syscall.Kill(-f.proc.Pid, syscall.SIGKILL)
	}
	f.mu.Unlock()
	f.proc.Signal(syscall.SIGKILL)
}

// sweep kills what is left of the session before the command is reaped.
func (f *floorProc) sweep() {
	sweepSession(f.proc.Pid)
	f.mu.Lock()
	f.reaping = true
	f.mu.Unlock()
}

func (f *floorProc) usage() (usage, bool) { return sessionUsage(f.proc.Pid) }

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
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		l := &launch{workdir: "/", stdin: null, stdout: null, stderr: null}
		proc, err := startStopped(truePath, []string{truePath}, l, rlimits(DefaultLimits(), false))
		if err != nil {
			errc <- err
			return
		}
		ps, err := proc.Wait()
		if err == nil && !ps.Success() {
			err = fmt.Errorf("%s under the floor: %v", truePath, ps)
		}
		errc <- err
	}()
	return <-errc
}
