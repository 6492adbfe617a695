package harness

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/initorigin/io-harness-go/pkg/harness/policy"
	"github.com/initorigin/io-harness-go/pkg/sandbox"
	"github.com/initorigin/io-harness-go/pkg/sandbox/wasi"
)

// Sandbox is the sandbox the harness runs commands in: a native backend
// for programs and the wasi backend for WebAssembly modules. A command
// whose program ends in ".wasm" runs in the wasi backend; every other one
// in the native backend Options.Backend names (the strongest that works
// here when it names none), or in wasi too when it names "wasi".
//
// Each backend is made the first time a command needs it, so a user of
// one never probes the other. A Sandbox is safe for concurrent use, and
// must be closed: the wasi backend holds compiled modules.
type Sandbox struct {
	opts     sandbox.Options
	wasmDir  string
	observer func(sandbox.Event)

	mu     sync.Mutex // guards the fields below
	native sandbox.Sandbox
	wasm   sandbox.Sandbox
	closed bool
}

var (
	_ sandbox.Sandbox = (*Sandbox)(nil)
	_ io.Closer       = (*Sandbox)(nil)
)

// NewSandbox returns the harness's sandbox for opts (nil: the strongest
// native backend). Compiled WebAssembly is cached on disk under the user's
// cache directory, so a module compiles once per machine.
func NewSandbox(opts *sandbox.Options) *Sandbox {
	s := &Sandbox{}
	if opts != nil {
		s.opts = *opts
		s.observer = opts.Observer
	}
	if dir, err := os.UserCacheDir(); err == nil {
		s.wasmDir = filepath.Join(dir, "io-harness", "wasm")
	}
	return s
}

// IsWasm reports whether a program is a WebAssembly module the wasi
// backend runs.
func IsWasm(program string) bool { return strings.HasSuffix(strings.ToLower(program), ".wasm") }

func (s *Sandbox) backend(ctx context.Context, program string) (sandbox.Sandbox, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, &sandbox.Error{Kind: sandbox.ErrUnavailable, Step: "closed"}
	}
	if IsWasm(program) || s.opts.Backend == sandbox.BackendWASI {
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
func (s *Sandbox) Name() string {
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

// Enforcement returns the native backend's enforcement once it is chosen.
func (s *Sandbox) Enforcement() sandbox.Enforcement {
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
func (s *Sandbox) Run(ctx context.Context, spec *sandbox.Spec) (*sandbox.Result, error) {
	program := ""
	if spec != nil && len(spec.Argv) > 0 {
		program = spec.Argv[0]
	}
	sb, err := s.backend(ctx, program)
	if err != nil {
		return nil, err
	}
	return sb.Run(ctx, spec)
}

// Close releases the wasi backend's compiled modules. It is idempotent.
func (s *Sandbox) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if c, ok := s.wasm.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// newRunSandbox makes a run's sandbox, its events traced in the run.
func (r *runner) newRunSandbox() *Sandbox {
	var o sandbox.Options
	if r.opts.Sandbox != nil {
		o = *r.opts.Sandbox
	}
	// Events come from the goroutine that called Run: the run's own.
	o.Observer = func(e sandbox.Event) {
		ev := e
		r.emit(Event{Kind: EventSandbox, Step: r.cur, Sandbox: &ev})
	}
	return NewSandbox(&o)
}

// allowGateExec is the exec policy of the verification gates: only an
// allow passes, because a gate cannot wait for a person. Every check is
// traced.
func (r *runner) allowGateExec(program string) error {
	if r.policy == nil {
		return nil
	}
	v := r.policy.Explain(policy.Exec, program)
	r.emitVerdict(r.cur, v)
	if v.Effect != policy.Allow {
		return fmt.Errorf("the exec policy does not allow %s for a verification gate (%s); a gate cannot wait for a person, so allow it in the policy", program, refusal(v))
	}
	return nil
}

// gateCache is where the execution gates keep build caches: under the
// user's cache directory, shared by runs, or nowhere.
func gateCache() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	dir = filepath.Join(dir, "io-harness", "gates")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return ""
	}
	return dir
}
