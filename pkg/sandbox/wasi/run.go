package wasi

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
	"github.com/tetratelabs/wazero/experimental/sysfs"
	"github.com/tetratelabs/wazero/sys"

	"github.com/initorigin/io-harness-go/pkg/sandbox"
)

// run is one Run in progress. Its fields are used by the goroutine that
// called Run only: the guest, and the host functions it calls (which
// fire the output, memory and file-size caps), run on that goroutine.
type run struct {
	s *wasiSandbox
	p *plan
	// base is the run's host directory: the private /tmp and, when the
	// spec names no workdir, the workdir. Teardown removes it.
	base      string
	workdir   string
	ephemeral bool
	roots     []*os.Root
	mod       api.Module
	// alloc gives the guest its memory; files are the files it has open.
	alloc *allocator
	files *openFiles
	// hit is the first cap that fired.
	hit *capHit
}

// capHit is a cap that fired, with what crossed it.
type capHit struct {
	cap    sandbox.Cap
	detail string
}

func (c *capHit) Error() string { return string(c.cap) + " cap: " + c.detail }

// kill records the cap that fired and ends the guest at once. It is
// called from the host functions the guest calls (writes, memory.grow),
// on the guest's goroutine: its panic unwinds the guest, and wazero
// recovers it and returns it from the guest's call, wrapped. The guest
// gets no chance to go on, whatever it would do about a failed write or
// allocation.
func (r *run) kill(c sandbox.Cap, detail string) {
	if r.hit == nil {
		r.hit = &capHit{c, detail}
	}
	panic(r.hit)
}

// Run implements [sandbox.Sandbox]. The caps start when the guest does:
// compiling a module the Sandbox has not seen is bounded by ctx only.
func (s *wasiSandbox) Run(ctx context.Context, spec *sandbox.Spec) (*sandbox.Result, error) {
	p, serr := check(spec)
	if serr != nil {
		return nil, serr
	}
	if err := ctx.Err(); err != nil {
		return nil, &sandbox.Error{Kind: err, Backend: Backend, Step: "run"}
	}
	if serr := resolve(p); serr != nil {
		return nil, serr
	}
	// The layout is checked before anything is made; the host paths of
	// the workdir and /tmp are filled in below.
	ms, serr := mounts(p, p.Workdir, "", p.Workdir == "")
	if serr != nil {
		return nil, serr
	}
	if !s.enter() {
		return nil, closedError("run")
	}
	defer s.inflight.Done()

	base, err := os.MkdirTemp("", "io-harness-wasi-")
	if err == nil {
		base, err = filepath.EvalSymlinks(base)
	}
	if err != nil {
		return nil, &sandbox.Error{Kind: sandbox.ErrSetup, Backend: Backend, Step: "workdir", Err: err}
	}
	r := &run{s: s, p: p, base: base, workdir: p.Workdir}
	if r.workdir == "" {
		r.workdir, r.ephemeral = filepath.Join(base, "work"), true
	}
	res, runErr := r.run(ctx, ms)
	detail := r.teardown()
	s.emit(ctx, sandbox.Event{Kind: sandbox.EventTeardown, Workdir: r.workdir, Detail: detail})
	return res, runErr
}

func (r *run) run(ctx context.Context, ms []mount) (*sandbox.Result, error) {
	s, p := r.s, r.p
	tmp := filepath.Join(r.base, "tmp")
	for _, d := range []string{r.workdir, tmp} {
		if d == p.Workdir {
			continue
		}
		if err := os.Mkdir(d, 0o700); err != nil {
			return nil, &sandbox.Error{Kind: sandbox.ErrSetup, Backend: Backend, Step: "workdir", Err: err}
		}
	}
	ms[0].host, ms[1].host = r.workdir, tmp
	s.emit(ctx, sandbox.Event{Kind: sandbox.EventCreate, Workdir: r.workdir})

	prog := p.Argv[0]
	if !filepath.IsAbs(prog) {
		prog = filepath.Join(r.workdir, prog)
	}
	m, cached, lerr, err := s.load(ctx, prog)
	if err != nil {
		return nil, err
	}
	if lerr != nil {
		return r.notRun(lerr.code, lerr.msg, sandbox.CapNone), nil
	}
	// The tables are charged at their maximum before the guest starts:
	// wazero grows them from the Go heap, where the allocator cannot see.
	// What is left is the limit of the linear memory.
	memCap := uint64(p.limits.Memory)
	if need := m.minMemory + m.tableBytes; need > memCap {
		d := fmt.Sprintf("the module starts with %d bytes of memory, over the %d limit", m.minMemory, memCap)
		if m.tableBytes > 0 {
			d = fmt.Sprintf("the module needs %d bytes: %d of memory to start with and %d for its tables at their maximum, over the %d limit",
				need, m.minMemory, m.tableBytes, memCap)
		}
		s.emit(ctx, sandbox.Event{Kind: sandbox.EventCapHit, Cap: sandbox.CapMemory, Detail: d})
		return r.notRun(126, d, sandbox.CapMemory), nil
	}
	memLimit := min(memCap-m.tableBytes, maxMemory)

	size := &sizeCap{limit: p.limits.FileSize, hit: func(d string) { r.kill(sandbox.CapFileSize, d) }}
	disk := &diskUse{limit: p.disk, hit: func(d string) { r.kill(sandbox.CapDisk, d) }}
	// The guest's descriptor table holds at most OpenFiles: stdin,
	// stdout and stderr, as in a native process's RLIMIT_NOFILE, and the
	// preopened directories count.
	r.files = &openFiles{limit: max(p.limits.OpenFiles-3-len(ms), 0), host: s.fds}
	fsc := wazero.NewFSConfig()
	for _, mt := range ms {
		root, err := os.OpenRoot(mt.host)
		if err != nil {
			return nil, &sandbox.Error{Kind: sandbox.ErrSetup, Backend: Backend, Step: "mount " + mt.guest, Err: err}
		}
		r.roots = append(r.roots, root)
		var dir experimentalsys.FS = &sysfs.ReadFS{FS: &rootFS{root: root, open: r.files}}
		if mt.writable {
			dir = &rootFS{root: root, size: size, disk: disk, open: r.files}
		}
		fsc = fsc.(sysfs.FSConfig).WithSysFSMount(dir, mt.guest)
	}

	// The guest's context ends at the deadline, when ctx does, or when
	// the Sandbox is closed; wazero then closes the guest.
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer context.AfterFunc(s.life, func() { cancel(errClosed) })()
	limit := time.Duration(p.limits.Wall)
	deadline := &capHit{sandbox.CapWall, fmt.Sprintf("still running after %s", limit)}
	if p.limits.CPU < p.limits.Wall {
		limit = time.Duration(p.limits.CPU)
		deadline = &capHit{sandbox.CapCPU, fmt.Sprintf("still running after %s, the CPU limit, applied as a wall-clock bound", limit)}
	}
	guestCtx, stop := context.WithTimeoutCause(runCtx, limit, deadline)
	defer stop()
	guestCtx = context.WithValue(guestCtx, runKey{}, r)

	stdout := &capture{limit: p.limits.Output, over: func() {
		r.kill(sandbox.CapOutput, fmt.Sprintf("more than %d bytes on stdout", p.limits.Output))
	}}
	stderr := &capture{limit: p.limits.Output, over: func() {
		r.kill(sandbox.CapOutput, fmt.Sprintf("more than %d bytes on stderr", p.limits.Output))
	}}
	mc := wazero.NewModuleConfig().
		WithName(""). // concurrent instances of one module
		WithStartFunctions().
		WithArgs(p.Argv...).
		WithStdin(bytes.NewReader(p.Stdin)).
		WithStdout(stdout).
		WithStderr(stderr).
		WithFSConfig(fsc).
		WithSysWalltime().
		WithSysNanotime().
		WithNanosleep(sleeper(guestCtx.Done())).
		WithRandSource(rand.Reader)
	for _, kv := range guestEnv(p.Env) {
		k, v, _ := strings.Cut(kv, "=")
		mc = mc.WithEnv(k, v)
	}
	r.alloc = &allocator{limit: memLimit, fail: func(detail string) { r.kill(sandbox.CapMemory, detail) }}

	how := "from the in-process cache"
	if !cached {
		how = fmt.Sprintf("compiled (or loaded from the disk cache) in %s", m.took.Round(time.Millisecond))
	}
	s.emit(ctx, sandbox.Event{Kind: sandbox.EventExec, Argv: p.Argv,
		Detail: fmt.Sprintf("module sha256:%s, %s", hex.EncodeToString(m.hash[:6]), how)})
	start := time.Now()
	err = r.guest(experimental.WithMemoryAllocator(guestCtx, r.alloc), m.cm, mc)
	elapsed := time.Since(start)

	// How the guest ended: on its own (returned, or called proc_exit), by
	// a trap, or closed because guestCtx ended.
	code, exited := -1, false
	var trap error
	var ee *sys.ExitError
	switch {
	case err == nil:
		code, exited = 0, true
	case errors.As(err, &ee):
		c := ee.ExitCode()
		if guestCtx.Err() == nil || c != sys.ExitCodeDeadlineExceeded && c != sys.ExitCodeContextCanceled {
			code, exited = int(c), true
		}
	default:
		trap = err
	}
	if r.hit == nil && !exited && guestCtx.Err() != nil {
		switch cause := context.Cause(guestCtx); {
		case cause == deadline:
			r.hit = deadline
		case errors.Is(cause, errClosed):
			return nil, closedError("run")
		default:
			return nil, &sandbox.Error{Kind: ctx.Err(), Backend: Backend, Step: "run"}
		}
	}
	res := &sandbox.Result{
		ExitCode:        code,
		Stdout:          stdout.bytes(),
		Stderr:          stderr.bytes(),
		StdoutTruncated: stdout.truncated,
		StderrTruncated: stderr.truncated,
		Backend:         Backend,
		Enforced:        enforcement(),
		Duration:        sandbox.Duration(elapsed),
		CPU:             sandbox.Duration(elapsed),
	}
	if r.hit != nil {
		res.CapHit = r.hit.cap
		s.emit(ctx, sandbox.Event{Kind: sandbox.EventCapHit, Cap: r.hit.cap, Detail: r.hit.detail})
	} else if trap != nil {
		first, _, _ := strings.Cut(trap.Error(), "\n")
		res.Stderr = append(res.Stderr, "io-harness sandbox: wasm trap: "+first+"\n"...)
	}
	return res, nil
}

// guest instantiates cm and calls its _start.
func (r *run) guest(ctx context.Context, cm wazero.CompiledModule, mc wazero.ModuleConfig) (err error) {
	defer func() {
		// A cap that fired outside a guest call, where wazero does not
		// recover the panic: kill cannot know where it is called from.
		if v := recover(); v != nil {
			if _, ok := v.(*capHit); !ok {
				panic(v)
			}
			err = v.(*capHit)
		}
	}()
	r.mod, err = r.s.rt.InstantiateModule(ctx, cm, mc)
	if err == nil {
		_, err = r.mod.ExportedFunction("_start").Call(ctx)
	}
	return err
}

// notRun is the result of a module that did not start.
func (r *run) notRun(code int, msg string, c sandbox.Cap) *sandbox.Result {
	return &sandbox.Result{
		ExitCode: code,
		Stdout:   []byte{},
		Stderr:   []byte(fmt.Sprintf("io-harness sandbox: %s: %s\n", r.p.Argv[0], msg)),
		CapHit:   c,
		Backend:  Backend,
		Enforced: enforcement(),
	}
}

// teardown closes the guest and its mounts and removes the run's
// directory. It returns what it did, for the teardown event.
func (r *run) teardown() string {
	var failed []string
	if r.mod != nil {
		if err := r.mod.Close(context.Background()); err != nil {
			failed = append(failed, err.Error())
		}
	}
	// wazero leaves the guest's memory and files open when it closed the
	// guest for its context at the moment the guest trapped or exited:
	// the guest's goroutine never reaches the step that releases them,
	// and Close sees a closed module. Release them here; both are no-ops
	// when wazero did.
	if r.alloc != nil {
		r.alloc.free()
	}
	if r.files != nil {
		r.files.closeAll()
	}
	for _, root := range r.roots {
		root.Close()
	}
	if err := removeTree(r.base); err != nil {
		failed = append(failed, err.Error())
	}
	detail := "module closed; private /tmp removed"
	if r.ephemeral {
		detail += "; workdir removed"
	}
	if len(failed) > 0 {
		detail += "; cleanup failed: " + strings.Join(failed, "; ")
	}
	return detail
}

// guestEnv is the guest's environment: env without the proxy variables
// (there is no network), with PWD and TMPDIR set to the guest's working
// directory and private /tmp.
func guestEnv(env []string) []string {
	drop := map[string]bool{"PWD": true, "TMPDIR": true}
	for _, k := range []string{
		"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "FTP_PROXY", "NO_PROXY",
		"http_proxy", "https_proxy", "all_proxy", "ftp_proxy", "no_proxy",
		"npm_config_proxy", "npm_config_https_proxy", "PIP_PROXY",
	} {
		drop[k] = true
	}
	out := make([]string, 0, len(env)+2)
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); !drop[k] {
			out = append(out, kv)
		}
	}
	return append(out, "PWD=/", "TMPDIR=/tmp")
}

// sleeper is the guest's sleep: the host's clock, cut short when the run
// ends, so that a sleeping guest cannot outlive its deadline.
func sleeper(done <-chan struct{}) sys.Nanosleep {
	return func(ns int64) {
		t := time.NewTimer(time.Duration(ns))
		defer t.Stop()
		select {
		case <-t.C:
		case <-done:
		}
	}
}

// capture keeps the first limit bytes written to it, and calls over once
// when there are more.
type capture struct {
	limit     int64
	buf       []byte
	truncated bool
	over      func()
}

func (c *capture) Write(p []byte) (int, error) {
	room := c.limit - int64(len(c.buf))
	if int64(len(p)) <= room {
		c.buf = append(c.buf, p...)
		return len(p), nil
	}
	c.buf = append(c.buf, p[:max(room, 0)]...)
	if !c.truncated {
		c.truncated = true
		c.over()
	}
	return len(p), nil
}

func (c *capture) bytes() []byte {
	if c.buf == nil {
		return []byte{}
	}
	return c.buf
}
