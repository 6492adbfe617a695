package sandbox

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"unsafe"

	"golang.org/x/sys/windows"
)

// jobBackend is windows-job (a Job Object with the run's limits) and
// host (the same job, named for what it protects: nothing).
type jobBackend struct {
	name string
}

func openBackend(ctx context.Context, name string, o *Options) (backend, error) {
	switch name {
	case BackendWindowsJob, BackendHost:
	default:
		return nil, &Error{Kind: ErrUnavailable, Backend: name,
			Err: fmt.Errorf("unknown backend on windows (want %s or %s)", BackendWindowsJob, BackendHost)}
	}
	// Probe: a job with the limits must be creatable here.
	job, err := newJob(DefaultLimits())
	if err != nil {
		return nil, &Error{Kind: ErrUnavailable, Backend: name, Err: fmt.Errorf("probe: %w", err)}
	}
	windows.CloseHandle(job)
	return &jobBackend{name: name}, ctx.Err()
}

func (b *jobBackend) privateWorkdir() bool { return false }

func (b *jobBackend) enforcement(bool) Enforcement {
	return Enforcement{
		Network: NetworkOpen, Memory: true, Processes: true, CPU: true, Teardown: true, Spawner: "os",
		Gaps: "A Job Object bounds resources only: the command can read and write anything the caller can, reach the network, and see other processes. " +
			"The CPU cap counts user-mode time only; there is no file-size, open-file or disk cap. " +
			"Every process of the job dies when the run ends or the host process exits.",
	}
}

// newJob makes a Job Object with the limits.
func newJob(l Limits) (windows.Handle, error) {
	job, err := windows.CreateJobObject(nil, nil)
	if err != nil {
		return 0, err
	}
	jl := jobLimitsFor(l)
	var info windows.JOBOBJECT_EXTENDED_LIMIT_INFORMATION
	info.BasicLimitInformation.LimitFlags = jl.flags
	info.BasicLimitInformation.PerJobUserTimeLimit = jl.userTime
	info.BasicLimitInformation.ActiveProcessLimit = jl.processes
	info.JobMemoryLimit = uintptr(jl.memory)
	if _, err := windows.SetInformationJobObject(job, windows.JobObjectExtendedLimitInformation,
		uintptr(unsafe.Pointer(&info)), uint32(unsafe.Sizeof(info))); err != nil {
		windows.CloseHandle(job)
		return 0, err
	}
	return job, nil
}

func (b *jobBackend) start(l *launch) (process, error) {
	p := l.plan
	if b.name != BackendHost {
		l.env = envWithout(l.env, proxyVars()...)
	}
	setup := func(step string, err error) (process, error) {
		return nil, &Error{Kind: ErrSetup, Backend: b.name, Step: step, Err: err}
	}
	path, err := lookPathWindows(p.Argv[0], l.env, l.workdir)
	if err != nil {
		return nil, &execError{err: err, notFound: true}
	}
	job, err := newJob(p.limits)
	if err != nil {
		return setup("job", err)
	}
	port, err := windows.CreateIoCompletionPort(windows.InvalidHandle, 0, 0, 1)
	if err != nil {
		windows.CloseHandle(job)
		return setup("completion port", err)
	}
	assoc := jobCompletionPort{key: job, port: port}
	if _, err := windows.SetInformationJobObject(job, windows.JobObjectAssociateCompletionPortInformation,
		uintptr(unsafe.Pointer(&assoc)), uint32(unsafe.Sizeof(assoc))); err != nil {
		windows.CloseHandle(port)
		windows.CloseHandle(job)
		return setup("completion port", err)
	}
	// Start suspended, put it in the job, then let it run: it cannot
	// start a process outside the job first.
	proc, err := os.StartProcess(path, p.Argv, &os.ProcAttr{
		Dir: l.workdir, Env: l.env, Files: []*os.File{l.stdin, l.stdout, l.stderr},
		Sys: &windows.SysProcAttr{CreationFlags: windows.CREATE_SUSPENDED | windows.CREATE_NEW_PROCESS_GROUP},
	})
	if err != nil {
		windows.CloseHandle(port)
		windows.CloseHandle(job)
		return nil, &execError{err: err, notFound: false}
	}
	jp := &jobProc{proc: proc, job: job, port: port, exited: make(chan exitStatus, 1), caps: make(chan Cap, 1)}
	if err := jp.assignAndResume(); err != nil {
		proc.Kill()
		proc.Wait()
		jp.close()
		return setup("assign to the job", err)
	}
	jp.wg.Add(1)
	go jp.watchPort()
	go func() {
		ps, err := proc.Wait()
		jp.kill() // the rest of the job dies with the command
		jp.close()
		jp.wg.Wait()
		if err != nil {
			jp.exited <- exitStatus{err: err}
			return
		}
		st := exitStatus{code: ps.ExitCode(), cpu: ps.UserTime() + ps.SystemTime()}
		select {
		case c := <-jp.caps:
			st.capHint = c
		default:
		}
		jp.exited <- st
	}()
	return jp, nil
}

// jobCompletionPort mirrors JOBOBJECT_ASSOCIATE_COMPLETION_PORT.
type jobCompletionPort struct {
	key  windows.Handle
	port windows.Handle
}

// jobProc is a run in a Job Object.
type jobProc struct {
	proc   *os.Process
	exited chan exitStatus
	caps   chan Cap // the first cap the job reported
	wg     sync.WaitGroup

	mu   sync.Mutex // guards job and port
	job  windows.Handle
	port windows.Handle
}

func (j *jobProc) assignAndResume() error {
	h, err := windows.OpenProcess(windows.PROCESS_SET_QUOTA|windows.PROCESS_TERMINATE, false, uint32(j.proc.Pid))
	if err != nil {
		return err
	}
	defer windows.CloseHandle(h)
	if err := windows.AssignProcessToJobObject(j.job, h); err != nil {
		return err
	}
	snap, err := windows.CreateToolhelp32Snapshot(windows.TH32CS_SNAPTHREAD, 0)
	if err != nil {
		return err
	}
	defer windows.CloseHandle(snap)
	var te windows.ThreadEntry32
	te.Size = uint32(unsafe.Sizeof(te))
	for err = windows.Thread32First(snap, &te); err == nil; err = windows.Thread32Next(snap, &te) {
		if te.OwnerProcessID != uint32(j.proc.Pid) {
			continue
		}
		th, err := windows.OpenThread(windows.THREAD_SUSPEND_RESUME, false, te.ThreadID)
		if err != nil {
			return err
		}
		_, err = windows.ResumeThread(th)
		windows.CloseHandle(th)
		if err != nil {
			return err
		}
	}
	return nil
}

// watchPort reads the job's messages until the port closes, and kills
// the job on the first cap: Windows refuses the allocation or the process
// past a limit rather than killing, and a cap here always kills.
func (j *jobProc) watchPort() {
	defer j.wg.Done()
	for {
		var msg uint32
		var key uintptr
		var ov *windows.Overlapped
		j.mu.Lock()
		port := j.port
		j.mu.Unlock()
		if port == 0 {
			return
		}
		err := windows.GetQueuedCompletionStatus(port, &msg, &key, &ov, 100)
		if err != nil {
			continue // a timeout, or the port closing
		}
		if c := jobCap(msg); c != CapNone {
			select {
			case j.caps <- c:
			default:
			}
			j.kill()
		}
	}
}

func (j *jobProc) pid() int { return j.proc.Pid }

func (j *jobProc) wait() exitStatus { return <-j.exited }

func (j *jobProc) kill() {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.job != 0 {
		windows.TerminateJobObject(j.job, 1)
	}
}

func (j *jobProc) close() {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.job != 0 {
		windows.CloseHandle(j.job)
		j.job = 0
	}
	if j.port != 0 {
		windows.CloseHandle(j.port)
		j.port = 0
	}
}

func (j *jobProc) usage() (usage, bool) { return usage{}, false }

// lookPathWindows finds file in env's PATH (not the host's), trying it as
// given and with .exe.
func lookPathWindows(file string, env []string, dir string) (string, error) {
	cands := []string{file}
	if filepath.Ext(file) == "" {
		cands = append(cands, file+".exe")
	}
	if strings.ContainsAny(file, `\/:`) {
		for _, c := range cands {
			if !filepath.IsAbs(c) {
				c = filepath.Join(dir, c)
			}
			if fi, err := os.Stat(c); err == nil && fi.Mode().IsRegular() {
				return c, nil
			}
		}
		return "", fmt.Errorf("%s: not found", file)
	}
	var path string
	for _, e := range env {
		if k, v, ok := strings.Cut(e, "="); ok && strings.EqualFold(k, "PATH") {
			path = v
		}
	}
	for _, d := range filepath.SplitList(path) {
		for _, c := range cands {
			p := filepath.Join(d, c)
			if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
				return p, nil
			}
		}
	}
	return "", fmt.Errorf("%s: not found in the spec's PATH", file)
}
