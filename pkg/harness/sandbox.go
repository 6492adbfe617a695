package harness

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/initorigin/io-harness-go/pkg/harness/policy"
	"github.com/initorigin/io-harness-go/pkg/sandbox"
	"github.com/initorigin/io-harness-go/pkg/sandbox/wasi"
)

// runSandbox is the sandbox a run runs commands in: a native backend for
// programs and the wasi backend for WebAssembly modules. A command
// whose program ends in ".wasm" runs in the wasi backend; every other one
// in the native backend Options.Backend names (the strongest that works
// here when it names none), or in wasi too when it names "wasi".
//
// Each backend is made the first time a command needs it, so a user of
// one never probes the other. A Sandbox is safe for concurrent use, and
// must be closed: the wasi backend holds compiled modules.
type runSandbox struct {
	opts     sandbox.Options
	wasmDir  string
	observer func(sandbox.Event)

	mu      sync.Mutex // guards the fields below
	native  sandbox.Sandbox
	wasm    sandbox.Sandbox
	trusted *runSandbox // runs as the caller: see Trusted
	closed  bool
	// lent says native is the caller's (Options.NativeSandbox): its
	// events reach the run through the context of each Run.
	lent bool
}

// Trusted returns the sandbox of commands whose argv the harness builds
// and trusts (the git tools): the same backend and containment, but run
// as the caller's own user, root included, so that they can write the
// caller's repository (sandbox.Options.Caller).
func (s *runSandbox) Trusted() sandbox.Sandbox {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.trusted == nil {
		o := s.opts
		o.Caller = true
		s.trusted = newSandbox(&o)
	}
	return s.trusted
}

var (
	_ sandbox.Sandbox = (*runSandbox)(nil)
	_ io.Closer       = (*runSandbox)(nil)
)

// newSandbox returns a run's sandbox for opts (nil: the strongest native
// backend). Compiled WebAssembly is cached on disk under the user's cache
// directory, so a module compiles once per machine.
func newSandbox(opts *sandbox.Options) *runSandbox {
	s := &runSandbox{}
	if opts != nil {
		s.opts = *opts
		s.observer = opts.Observer
	}
	s.wasmDir = wasi.UserCacheDir()
	return s
}

func (s *runSandbox) backend(ctx context.Context, program string) (sandbox.Sandbox, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, &sandbox.Error{Kind: sandbox.ErrUnavailable, Step: "closed"}
	}
	if wasi.IsModule(program) || s.opts.Backend == sandbox.BackendWASI {
		if s.wasm == nil {
			sb, err := wasi.New(ctx, &wasi.Options{CacheDir: s.wasmDir, Observer: s.observer})
			if err != nil && s.wasmDir != "" {
				// A cache directory we cannot use is no reason not to run.
				sb, err = wasi.New(ctx, &wasi.Options{Observer: s.observer})
			}
			if err != nil {
				return nil, err
			}
			s.wasm = sb
		}
		return s.wasm, nil
	}
	if s.native == nil {
		o := s.opts
		sb, err := sandbox.New(ctx, &o)
		if err != nil {
			return nil, err
		}
		s.native = sb
	}
	return s.native, nil
}

// Name returns the native backend's name, once it is chosen, or "wasi"
// when that is the backend Options named.
func (s *runSandbox) Name() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.opts.Backend == sandbox.BackendWASI:
		return sandbox.BackendWASI
	case s.native != nil:
		return s.native.Name()
	}
	return s.opts.Backend
}

// Enforcement returns the native backend's enforcement.
//
// It chooses the native backend, as a first command would, when none is
// chosen yet: callers ask it to know whom a command will run as.
func (s *runSandbox) Enforcement() sandbox.Enforcement {
	if s.opts.Backend != sandbox.BackendWASI {
		if _, err := s.backend(context.Background(), ""); err != nil {
			return sandbox.Enforcement{}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.opts.Backend == sandbox.BackendWASI && s.wasm != nil:
		return s.wasm.Enforcement()
	case s.native != nil:
		return s.native.Enforcement()
	}
	return sandbox.Enforcement{}
}

// Run runs a command in the backend its program calls for.
func (s *runSandbox) Run(ctx context.Context, spec *sandbox.Spec) (*sandbox.Result, error) {
	program := ""
	if spec != nil && len(spec.Argv) > 0 {
		program = spec.Argv[0]
	}
	sb, err := s.backend(ctx, program)
	if err != nil {
		return nil, err
	}
	if s.lent && sb == s.native && s.observer != nil {
		ctx = sandbox.WithObserver(ctx, s.observer)
	}
	return sb.Run(ctx, spec)
}

// Close releases the wasi backend's compiled modules. It is idempotent.
func (s *runSandbox) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if s.trusted != nil {
		s.trusted.Close()
	}
	if c, ok := s.wasm.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// newRunSandbox makes a run's sandbox, its events traced in the run; on
// the caller's native sandbox when Options give one.
func (r *runner) newRunSandbox() *runSandbox {
	var o sandbox.Options
	if r.opts.Sandbox != nil {
		o = *r.opts.Sandbox
	}
	// Events come from the goroutine that called Run: the run's own.
	o.Observer = func(e sandbox.Event) {
		ev := e
		r.emit(Event{Kind: EventSandbox, Step: r.cur, Sandbox: &ev})
	}
	s := newSandbox(&o)
	if r.opts.NativeSandbox != nil {
		s.native, s.lent = r.opts.NativeSandbox, true
	}
	return s
}

// allowGateExec is the exec policy of the verification gates: only an
// allow passes, because a gate cannot wait for a person. Every check is
// traced.
func (r *runner) allowGateExec(program string) error {
	if r.policy == nil {
		return nil
	}
	v := r.policy.ExplainArgv([]string{program}, r.env.Programs.Resolve)
	r.emitVerdict(r.cur, v)
	if v.Effect != policy.Allow {
		return fmt.Errorf("the exec policy does not allow %s for a verification gate (%s); a gate cannot wait for a person, so allow it in the policy", program, refusal(v))
	}
	return nil
}

// gateCache is where the execution gates keep build caches: under the
// user's cache directory, shared by runs, or nowhere. It is made once per
// run.
func (r *runner) gateCache() string {
	if !r.gateCacheMade {
		r.gateCacheDir, r.gateCacheMade = makeGateCache(), true
	}
	return r.gateCacheDir
}

// A root caller's gates run as an unprivileged user, who cannot reach a
// cache in root's home (which the sandbox hides besides): root's cache
// is under /var/cache instead, lent to that user by the gates.
func makeGateCache() string {
	dir, err := os.UserCacheDir()
	if os.Geteuid() == 0 {
		dir, err = "/var/cache", nil
	}
	if err != nil {
		return ""
	}
	dir = filepath.Join(dir, "io-harness", "gates")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return ""
	}
	return dir
}
