package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// backend builds one kind of sandbox. A backend is immutable once
// openBackend has probed it, and safe for concurrent use.
type backend interface {
	// enforcement is what a run enforces; proxied says whether the run
	// has a network allow-list.
	enforcement(proxied bool) Enforcement
	// privateWorkdir reports whether an ephemeral workdir lives inside
	// the sandbox rather than in a host directory.
	privateWorkdir() bool
	// start starts l's command and returns once it runs. An error is an
	// *Error of kind ErrSetup: nothing is left running.
	start(l *launch) (process, error)
}

// process is one started run.
type process interface {
	// pid is the host pid of the command (or of the wrapper that runs it).
	pid() int
	// wait blocks until the command has exited and every other process of
	// the run has been killed (as far as the backend can), then returns
	// how the command ended. It is called once.
	wait() exitStatus
	// kill starts killing every process of the run. It may be called any
	// number of times, from any goroutine, before or after wait returns.
	kill()
	// usage samples the run's processes; ok is false when the backend
	// cannot (the caps are then the kernel's alone).
	usage() (u usage, ok bool)
}

// exitStatus is how a command ended.
type exitStatus struct {
	code    int // exit code, -1 when a signal ended it
	signal  int // the signal, 0 for none
	cpu     time.Duration
	capHint Cap   // a cap the backend knows fired
	err     error // the status could not be learned
}

// usage is a sample of a run's processes.
type usage struct {
	rss   int64         // resident bytes, summed
	tasks int           // processes and threads alive
	cpu   time.Duration // CPU time, including reaped descendants
}

// launch is everything a backend needs to start one command.
type launch struct {
	plan *plan
	// workdir is the working directory: a host path, or the path inside
	// the sandbox when ephemeral && privateWorkdir.
	workdir   string
	ephemeral bool
	// env is the environment after the driver's adjustments; a backend
	// may adjust it further.
	env                   []string
	stdin, stdout, stderr *os.File
	// proxied asks the backend for an egress proxy listener: it sets
	// listener (reachable from inside the sandbox) and the proxy
	// variables of env, or leaves listener nil and the network denied.
	proxied  bool
	listener net.Listener
	// cleanup runs at teardown, after every process is gone.
	cleanup []func() error
}

const (
	// privateWorkdirPath is where an ephemeral workdir lives inside a
	// sandbox that has its own /tmp.
	privateWorkdirPath = "/tmp/work"
	// watchInterval is how often the watcher samples a run.
	watchInterval = 20 * time.Millisecond
	// outputGrace is how long Run waits, after the command exits, for
	// output still held by processes the backend could not kill.
	outputGrace = 100 * time.Millisecond
)

func (s *sandbox) emit(e Event) {
	if s.observer == nil {
		return
	}
	e.Backend = s.name
	e.Time = time.Now()
	s.observer(e)
}

// capHit is a cap that fired, with what crossed it.
type capHit struct {
	cap    Cap
	detail string
}

// Run implements Sandbox.
func (s *sandbox) Run(ctx context.Context, spec *Spec) (*Result, error) {
	p, bad := check(spec)
	if bad == nil {
		bad = resolvePaths(p)
	}
	if bad != nil {
		bad.Backend = s.name
		return nil, bad
	}
	if err := ctx.Err(); err != nil {
		return nil, &Error{Kind: err, Backend: s.name, Step: "run"}
	}
	l := &launch{plan: p, env: append([]string(nil), p.Env...)}
	var madeDir string
	switch {
	case p.Workdir != "":
		l.workdir = p.Workdir
	case s.b.privateWorkdir():
		l.workdir, l.ephemeral = privateWorkdirPath, true
	default:
		dir, err := os.MkdirTemp("", "io-harness-run-")
		if err == nil {
			dir, err = filepath.EvalSymlinks(dir)
		}
		if err != nil {
			return nil, &Error{Kind: ErrSetup, Backend: s.name, Step: "workdir", Err: err}
		}
		l.workdir, l.ephemeral, madeDir = dir, true, dir
	}
	res, runErr := s.run(ctx, l)
	var failed []string
	for i := len(l.cleanup) - 1; i >= 0; i-- {
		if err := l.cleanup[i](); err != nil {
			failed = append(failed, err.Error())
		}
	}
	if madeDir != "" {
		if err := removeTree(madeDir); err != nil {
			failed = append(failed, err.Error())
		}
	}
	detail := "every process gone"
	if res != nil && !res.Enforced.Teardown {
		detail = "the command's process group and session killed"
	}
	if len(failed) > 0 {
		detail += "; cleanup failed: " + strings.Join(failed, "; ")
	} else if l.ephemeral {
		detail += "; workdir removed"
	}
	s.emit(Event{Kind: EventTeardown, Workdir: l.workdir, Detail: detail})
	return res, runErr
}

// run starts l's command and supervises it to the end.
func (s *sandbox) run(ctx context.Context, l *launch) (*Result, error) {
	p := l.plan
	var parentEnds []*os.File
	closeAll := func(fs ...*os.File) {
		for _, f := range fs {
			if f != nil {
				f.Close()
			}
		}
	}
	stdoutR, stdoutW, err := os.Pipe()
	if err != nil {
		return nil, &Error{Kind: ErrSetup, Backend: s.name, Step: "stdout pipe", Err: err}
	}
	stderrR, stderrW, err := os.Pipe()
	if err != nil {
		closeAll(stdoutR, stdoutW)
		return nil, &Error{Kind: ErrSetup, Backend: s.name, Step: "stderr pipe", Err: err}
	}
	var stdinR, stdinW *os.File
	if len(p.Stdin) > 0 {
		stdinR, stdinW, err = os.Pipe()
	} else {
		stdinR, err = os.Open(os.DevNull)
	}
	if err != nil {
		closeAll(stdoutR, stdoutW, stderrR, stderrW)
		return nil, &Error{Kind: ErrSetup, Backend: s.name, Step: "stdin", Err: err}
	}
	parentEnds = []*os.File{stdoutR, stderrR, stdinW}
	l.stdin, l.stdout, l.stderr = stdinR, stdoutW, stderrW
	l.proxied = len(p.allow) > 0

	s.emit(Event{Kind: EventCreate, Workdir: l.workdir})
	start := time.Now()
	proc, err := s.b.start(l)
	closeAll(stdinR, stdoutW, stderrW)
	var ee *execError
	if errors.As(err, &ee) {
		closeAll(parentEnds...)
		return ee.result(s, l, time.Since(start)), nil
	}
	if err != nil {
		closeAll(parentEnds...)
		return nil, err
	}
	s.emit(Event{Kind: EventExec, Argv: p.Argv, Pid: proc.pid()})
	var proxy *egress
	if l.listener != nil {
		proxy = serveEgress(l.listener, p.allow)
	}

	caps := make(chan capHit, 4)
	var readers, others sync.WaitGroup
	stdout, stderr := &capture{limit: p.limits.Output}, &capture{limit: p.limits.Output}
	readers.Add(2)
	go stdout.drain(&readers, stdoutR, caps)
	go stderr.drain(&readers, stderrR, caps)
	if stdinW != nil {
		others.Add(1)
		go func() {
			defer others.Done()
			stdinW.Write(p.Stdin) // a command that stops reading is not an error
			stdinW.Close()
		}()
	}
	done := make(chan struct{})
	var last usage // the watcher's last sample; read after others.Wait
	others.Add(2)
	go func() {
		defer others.Done()
		last = watch(proc, p.limits, caps, done)
	}()
	exited := make(chan exitStatus, 1)
	go func() {
		defer others.Done()
		exited <- proc.wait()
	}()

	wall := time.NewTimer(time.Duration(p.limits.Wall))
	defer wall.Stop()
	var hit Cap
	var cancelled error
	ctxDone := ctx.Done()
	fire := func(c capHit) {
		if hit == CapNone && cancelled == nil {
			hit = c.cap
			s.emit(Event{Kind: EventCapHit, Cap: c.cap, Detail: c.detail})
		}
		proc.kill()
	}
	var st exitStatus
loop:
	for {
		// An exit that is already there wins over a cap that fires at the
		// same moment.
		select {
		case st = <-exited:
			break loop
		default:
		}
		select {
		case st = <-exited:
			break loop
		case <-wall.C:
			fire(capHit{CapWall, fmt.Sprintf("still running after %s", time.Duration(p.limits.Wall))})
		case c := <-caps:
			fire(c)
		case <-ctxDone:
			cancelled = ctx.Err()
			ctxDone = nil
			proc.kill()
		}
	}
	elapsed := time.Since(start)
	close(done)
	// Output still held by a process the backend could not kill must not
	// hold Run: give it a moment, then close our ends.
	readersDone := make(chan struct{})
	go func() {
		readers.Wait()
		close(readersDone)
	}()
	select {
	case <-readersDone:
	case <-time.After(outputGrace):
		stdoutR.Close()
		stderrR.Close()
		<-readersDone
	}
	closeAll(parentEnds...)
	others.Wait()
	var decisions []Connection
	if proxy != nil {
		decisions = proxy.close()
	}
	if cancelled != nil {
		return nil, &Error{Kind: cancelled, Backend: s.name, Step: "run"}
	}
	if st.err != nil {
		return nil, &Error{Kind: ErrSetup, Backend: s.name, Step: "wait", Err: st.err}
	}
	if hit == CapNone {
		hit = attribute(st, p.limits)
		if hit != CapNone {
			s.emit(Event{Kind: EventCapHit, Cap: hit, Detail: "reported by the kernel at exit"})
		}
	}
	enf := s.b.enforcement(proxy != nil)
	enf.Fallbacks = s.fallbacks
	res := &Result{
		ExitCode:        st.code,
		Stdout:          stdout.buf,
		Stderr:          stderr.buf,
		StdoutTruncated: stdout.truncated,
		StderrTruncated: stderr.truncated,
		CapHit:          hit,
		Backend:         s.name,
		Enforced:        enf,
		Duration:        Duration(elapsed),
		// A wrapper's rusage can miss what its own init reaped; the
		// watcher's sample of the live processes cannot.
		CPU:    Duration(max(st.cpu, last.cpu)),
		Egress: decisions,
	}
	if res.Stdout == nil {
		res.Stdout = []byte{}
	}
	if res.Stderr == nil {
		res.Stderr = []byte{}
	}
	if st.signal != 0 {
		res.ExitCode = -1
		res.Signal = signalName(st.signal)
	}
	if c, ok := s.b.(resultChecker); ok {
		if err := c.checkResult(res); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// resultChecker is a backend that can tell its own failure from the
// command's only by looking at the result.
type resultChecker interface {
	checkResult(*Result) error
}

// execError is a command that could not be executed: not found, not
// executable. That is the command's failure, not the sandbox's, and is
// reported like a shell does: exit status 127 (not found) or 126.
type execError struct {
	err      error
	notFound bool
}

func (e *execError) Error() string { return "exec: " + e.err.Error() }

func (e *execError) result(s *sandbox, l *launch, elapsed time.Duration) *Result {
	enf := s.b.enforcement(false)
	enf.Fallbacks = s.fallbacks
	code := 126
	if e.notFound {
		code = 127
	}
	return &Result{
		ExitCode: code,
		Stdout:   []byte{},
		Stderr:   []byte(fmt.Sprintf("io-harness sandbox: %s: %v\n", l.plan.Argv[0], e.err)),
		Backend:  s.name,
		Enforced: enf,
		Duration: Duration(elapsed),
	}
}

// attribute names the cap behind an exit the driver did not cause: the
// kernel's CPU and file-size limits.
func attribute(st exitStatus, l Limits) Cap {
	switch {
	case st.capHint != CapNone:
		return st.capHint
	case st.signal == 0:
		return CapNone
	case st.signal == sigXCPU:
		return CapCPU
	case st.signal == sigXFSZ:
		return CapFileSize
	case st.signal == sigKILL && st.cpu >= time.Duration(l.CPU):
		return CapCPU // the hard CPU limit, for a process that ignores SIGXCPU
	}
	return CapNone
}

// watch samples p until done is closed, and reports the first cap its
// usage crosses. It returns its last sample.
func watch(p process, l Limits, caps chan<- capHit, done <-chan struct{}) (last usage) {
	t := time.NewTicker(watchInterval)
	defer t.Stop()
	for {
		select {
		case <-done:
			return last
		case <-t.C:
		}
		u, ok := p.usage()
		if !ok {
			return last
		}
		if u.cpu > last.cpu {
			last.cpu = u.cpu
		}
		var c capHit
		switch {
		case u.rss > l.Memory:
			c = capHit{CapMemory, fmt.Sprintf("resident memory %d bytes over the %d limit", u.rss, l.Memory)}
		case u.tasks >= l.Processes:
			// At the limit, the kernel (where it enforces one) refuses the
			// next fork: the cap is reached, and a cap kills.
			c = capHit{CapProcesses, fmt.Sprintf("%d processes and threads, at the %d limit", u.tasks, l.Processes)}
		case u.cpu >= time.Duration(l.CPU):
			c = capHit{CapCPU, fmt.Sprintf("CPU time %s reached the %s limit", u.cpu.Round(time.Millisecond), time.Duration(l.CPU))}
		default:
			continue
		}
		select {
		case caps <- c:
		case <-done:
		}
		return last
	}
}

// capture keeps the first limit bytes of a stream and reports the
// output cap when there are more.
type capture struct {
	limit     int64
	buf       []byte
	truncated bool
}

func (c *capture) drain(wg *sync.WaitGroup, f *os.File, caps chan<- capHit) {
	defer wg.Done()
	b := make([]byte, 32<<10)
	for {
		n, err := f.Read(b)
		if n > 0 {
			room := int(c.limit) - len(c.buf)
			if n <= room {
				c.buf = append(c.buf, b[:n]...)
			} else {
				c.buf = append(c.buf, b[:max(room, 0)]...)
				if !c.truncated {
					c.truncated = true
					select {
					case caps <- capHit{CapOutput, fmt.Sprintf("more than %d bytes of output", c.limit)}:
					default:
					}
				}
			}
		}
		if err != nil {
			return
		}
	}
}

// resolvePaths checks that the workdir and the extra paths exist and
// replaces them with their real paths, which is where they are bound.
func resolvePaths(p *plan) *Error {
	resolve := func(field, path string, wantDir bool) (string, *Error) {
		real, err := filepath.EvalSymlinks(path)
		if err != nil {
			return "", &Error{Kind: ErrInvalid, Step: field, Err: err}
		}
		if wantDir {
			fi, err := os.Stat(real)
			if err != nil || !fi.IsDir() {
				return "", &Error{Kind: ErrInvalid, Step: field, Err: fmt.Errorf("%s is not a directory", path)}
			}
		}
		return real, nil
	}
	var err *Error
	if p.Workdir != "" {
		if p.Workdir, err = resolve("workdir", p.Workdir, true); err != nil {
			return err
		}
	}
	for i := range p.ReadOnly {
		if p.ReadOnly[i], err = resolve(fmt.Sprintf("read_only[%d]", i), p.ReadOnly[i], false); err != nil {
			return err
		}
	}
	for i := range p.Writable {
		if p.Writable[i], err = resolve(fmt.Sprintf("writable[%d]", i), p.Writable[i], false); err != nil {
			return err
		}
	}
	return nil
}

// removeTree removes dir, first giving back write permission to any
// directory the command took it from.
func removeTree(dir string) error {
	if err := os.RemoveAll(dir); err == nil {
		return nil
	}
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if d != nil && d.IsDir() {
			os.Chmod(path, 0o700)
		}
		return nil
	})
	return os.RemoveAll(dir)
}

// envWith returns env with key set to value, replacing any earlier entry.
func envWith(env []string, key, value string) []string {
	out := envWithout(env, key)
	return append(out, key+"="+value)
}

// envWithout returns env without the given keys.
func envWithout(env []string, keys ...string) []string {
	out := make([]string, 0, len(env))
outer:
	for _, e := range env {
		k, _, _ := strings.Cut(e, "=")
		for _, key := range keys {
			if k == key {
				continue outer
			}
		}
		out = append(out, e)
	}
	return out
}

// proxyVars are the variables that send traffic through a proxy: a
// sandbox without network drops them, and a proxied one sets them.
func proxyVars() []string {
	return []string{
		"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "FTP_PROXY", "NO_PROXY",
		"http_proxy", "https_proxy", "all_proxy", "ftp_proxy", "no_proxy",
		"npm_config_proxy", "npm_config_https_proxy", "PIP_PROXY",
	}
}
