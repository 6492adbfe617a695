package sandbox

import (
	"context"
	"errors"
	"fmt"
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

// identifier is a backend that runs commands as another host user than
// the caller (a root caller's commands run as Options.UID).
type identifier interface {
	identity() (uid, gid int)
}

// finisher is a process that leaves work for after its exit: the
// overlays' changes to apply to the host, a disk cap to report.
type finisher interface {
	// finish is called once, after wait and after the watcher has
	// stopped. It returns a cap the run's end reached (CapDisk for a full
	// scratch tmpfs), and an error of kind ErrApply when changes could not
	// all be applied; either way it releases the run's resources.
	// killed says the command did not end by itself: a cap or a signal
	// stopped it, so what it left may be cut short.
	finish(killed bool) (Cap, error)
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
	disk  int64         // bytes stored in the run's capped scratch space, -1 when not measured
	// diskRAM: the scratch space is RAM (a tmpfs), so disk counts against
	// the memory cap too.
	diskRAM bool
}

// launch is everything a backend needs to start one command.
type launch struct {
	ctx  context.Context // the run's, for Collect
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

func (s *sandbox) emit(ctx context.Context, e Event) {
	also := ObserverOf(ctx)
	if s.observer == nil && also == nil {
		return
	}
	e.Backend = s.name
	e.Time = time.Now()
	if s.observer != nil {
		s.observer(e)
	}
	if also != nil {
		also(e)
	}
}

// capHit is a cap that fired, with what crossed it.
type capHit struct {
	cap    Cap
	detail string
}

// Run implements Sandbox.
func (s *sandbox) Run(ctx context.Context, spec *Spec) (*Result, error) {
	p, bad := check(spec)
	if bad == nil && (p.Collect != nil || len(p.Conceal) > 0 || len(p.ReadOnlyAt) > 0) && !s.b.enforcement(false).Overlay {
		bad = &Error{Kind: ErrInvalid, Step: "collect", Err: fmt.Errorf("%s holds no workdir changes apart: collect, conceal and read_only_at need a backend whose Enforcement says overlay", s.name)}
	}
	if bad == nil {
		bad = resolvePaths(p)
	}
	if bad == nil {
		bad = s.grant(p)
	}
	if bad != nil {
		bad.Backend = s.name
		return nil, bad
	}
	if err := ctx.Err(); err != nil {
		return nil, &Error{Kind: err, Backend: s.name, Step: "run"}
	}
	l := &launch{ctx: ctx, plan: p, env: append([]string(nil), p.Env...)}
	var madeDir string
	switch {
	case p.Workdir != "":
		l.workdir = p.Workdir
	case s.b.privateWorkdir():
		l.workdir, l.ephemeral = privateWorkdirPath, true
	default:
		dir, err := makeDir("io-harness-run-", s.uid, s.gid)
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
	s.emit(ctx, Event{Kind: EventTeardown, Workdir: l.workdir, Detail: detail})
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

	s.emit(ctx, Event{Kind: EventCreate, Workdir: l.workdir})
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
	s.emit(ctx, Event{Kind: EventExec, Argv: p.Argv, Pid: proc.pid()})
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
			s.emit(ctx, Event{Kind: EventCapHit, Cap: c.cap, Detail: c.detail})
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
	var applyErr error
	if f, ok := proc.(finisher); ok {
		var end Cap
		end, applyErr = f.finish(hit != CapNone || st.capHint != CapNone || st.signal != 0 || cancelled != nil)
		if st.capHint == CapNone {
			st.capHint = end
		}
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
			s.emit(ctx, Event{Kind: EventCapHit, Cap: hit, Detail: "reported at exit"})
		}
	}
	enf := s.enforcement(proxy != nil, p)
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
	if applyErr != nil {
		// The command ran: its result stands beside the changes that
		// did not reach the host.
		return res, &Error{Kind: ErrApply, Backend: s.name, Step: "apply the changes", Err: applyErr}
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
	enf := s.enforcement(false, l.plan)
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
		mem, memWhat := u.rss, "resident memory"
		if u.diskRAM && u.disk > 0 {
			mem, memWhat = mem+u.disk, "resident memory and RAM-backed files"
		}
		var c capHit
		switch {
		case diskFull(u.disk, l.Disk):
			c = capHit{CapDisk, fmt.Sprintf("%d bytes stored, at the %d limit", u.disk, l.Disk)}
		case mem > l.Memory:
			c = capHit{CapMemory, fmt.Sprintf("%s %d bytes over the %d limit", memWhat, mem, l.Memory)}
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

// diskFull reports whether a run that stores used bytes has reached the
// disk limit: within a page of it, where a tmpfs of that size refuses the
// next write.
func diskFull(used, limit int64) bool {
	return used > 0 && used+pageSize > limit
}

// pageSize is the granularity of a tmpfs's size.
const pageSize = 4096

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

// grant makes sure that the user commands run as can write the workdir
// and the writable paths: when that user is not the caller, Spec.Lend
// gives them to it, and otherwise a path it cannot write is an
// *AccessError.
func (s *sandbox) grant(p *plan) *Error {
	if !s.switched {
		return nil
	}
	type place struct{ field, path string }
	var places []place
	if p.Workdir != "" {
		places = append(places, place{"workdir", p.Workdir})
	}
	for i, w := range p.Writable {
		places = append(places, place{fmt.Sprintf("writable[%d]", i), w})
	}
	for _, pl := range places {
		if p.Collect != nil {
			// Idmapped lower layers: the command sees the caller's files
			// as its own, so the workdir needs nothing, and a writable
			// path is lent to the caller (one lent to the command's user
			// before would be no one's in the sandbox).
			if pl.field == "workdir" {
				continue
			}
			if p.Lend {
				if err := lend(pl.path, os.Geteuid(), os.Getegid()); err != nil {
					return &Error{Kind: ErrSetup, Step: "lend " + pl.field, Err: err}
				}
			} else if reason := writableBy(pl.path, os.Geteuid(), os.Getegid()); reason != "" {
				return &Error{Kind: ErrInvalid, Step: pl.field,
					Err: &AccessError{Path: pl.path, Field: pl.field, UID: s.uid, GID: s.gid, Reason: reason + ", and the command sees the caller's files as its own"}}
			}
			continue
		}
		if p.Lend {
			if reason := notLendable(pl.path); reason != "" {
				return &Error{Kind: ErrInvalid, Step: pl.field, Err: fmt.Errorf("lend %s: %s", pl.path, reason)}
			}
			if err := lend(pl.path, s.uid, s.gid); err != nil {
				return &Error{Kind: ErrSetup, Step: "lend " + pl.field, Err: err}
			}
			continue
		}
		if reason := writableBy(pl.path, s.uid, s.gid); reason != "" {
			return &Error{Kind: ErrInvalid, Step: pl.field,
				Err: &AccessError{Path: pl.path, Field: pl.field, UID: s.uid, GID: s.gid, Reason: reason}}
		}
	}
	return nil
}

// notLendable says why path must not be lent (given away, everything in
// it): the root, a top-level directory, or the caller's home or a
// directory holding it are never a directory made for a run.
func notLendable(path string) string {
	if path == "/" || filepath.Dir(path) == "/" {
		return "the root or a top-level directory is not a directory made for a run"
	}
	if home, err := os.UserHomeDir(); err == nil && (path == home || strings.HasPrefix(home, path+string(filepath.Separator))) {
		return "the caller's home, or a directory holding it, is not a directory made for a run"
	}
	return ""
}

// CopyGap is the sentence the Gaps of a backend without an overlay end
// with: the harness runs a command on a copy of the workspace there.
const CopyGap = "The command's changes to a workdir cannot be held apart (no overlay): the harness runs its exec tool and gates on a copy of the workspace, kept for the run and brought up to date before each command, rather than on the workspace itself."

// enforcement is what a run of p (nil: any run) enforces, with what the
// driver knows: the fallbacks, the ids, the hidden paths of p.
func (s *sandbox) enforcement(proxied bool, p *plan) Enforcement {
	e := s.b.enforcement(proxied)
	if !e.Overlay {
		e.Gaps = strings.TrimSpace(e.Gaps + " " + CopyGap)
	}
	e.Fallbacks = s.fallbacks
	e.UID, e.GID = s.uid, s.gid
	e.Unprivileged = s.uid > 0
	if e.Secrets && p != nil && len(p.Hide) > 0 {
		e.Hidden = append(e.Hidden[:len(e.Hidden):len(e.Hidden)], p.Hide...)
	}
	return e
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
	for i := range p.ReadOnlyAt {
		if p.ReadOnlyAt[i].Source, err = resolve(fmt.Sprintf("read_only_at[%d].source", i), p.ReadOnlyAt[i].Source, false); err != nil {
			return err
		}
	}
	// A path to hide that is not there is nothing to hide.
	hide := p.Hide[:0:0]
	for _, h := range p.Hide {
		if real, err := filepath.EvalSymlinks(h); err == nil {
			hide = append(hide, real)
		}
	}
	p.Hide = hide
	return nil
}

// RemoveAll removes dir and everything in it, like os.RemoveAll, also
// where a sandboxed command took their permissions away from directories
// it made (chmod 000, at any depth), and never following a symlink out of
// dir. Remove the directories made for runs with it.
func RemoveAll(dir string) error { return removeTree(dir) }

// makeDir makes a fresh temporary directory, owned by uid and gid when
// they are not the caller's, and returns its real path.
func makeDir(prefix string, uid, gid int) (string, error) {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		return "", err
	}
	if dir, err = filepath.EvalSymlinks(dir); err == nil && uid >= 0 && uid != os.Geteuid() {
		err = os.Chown(dir, uid, gid)
	}
	if err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	return dir, nil
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
