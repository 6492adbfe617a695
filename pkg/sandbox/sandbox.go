package sandbox

import (
	"context"
	"errors"
	"fmt"
	"runtime"
)

// Sandbox runs commands in an ephemeral, per-run sandbox.
//
// A Sandbox is safe for concurrent use: runs do not share state. The
// native backends hold no resources between runs and need no Close; a
// backend that does hold some (the wasi backend's compiled modules)
// implements io.Closer, and its owner closes it.
type Sandbox interface {
	// Name is the backend every run uses, e.g. "linux-ns".
	Name() string
	// Enforcement is what the backend enforces for a spec that denies
	// the network. Every Result carries the enforcement of its own run.
	Enforcement() Enforcement
	// Run runs one command to completion. Every cap kills; Run never
	// waits on the command beyond its wall-clock limit. When Run returns,
	// every process of the run is gone (on the backends whose
	// Enforcement says Teardown) and the workdir it made is removed, on
	// every path, ctx cancellation included.
	//
	// A command that ran is a *Result, whatever its exit status or cap.
	// A failure of the sandbox itself is an *Error: ErrInvalid for a bad
	// spec, ErrSetup when the sandbox could not be built (the command
	// never started), or the context's error when ctx ended first.
	Run(ctx context.Context, spec *Spec) (*Result, error)
}

// Backend names, strongest first per operating system.
const (
	// BackendLinuxNS: user, mount, pid, net, ipc and uts namespaces, a
	// read-only root, Landlock and seccomp, built by the C spawner (cgo)
	// or the io-harness-sandbox-exec helper.
	BackendLinuxNS = "linux-ns"
	// BackendLinuxLandlock: Landlock, seccomp and rlimits without
	// namespaces, for hosts that refuse user namespaces.
	BackendLinuxLandlock = "linux-landlock"
	// BackendBwrap: the bubblewrap program.
	BackendBwrap = "bwrap"
	// BackendSeatbelt: macOS sandbox-exec with a generated profile.
	BackendSeatbelt = "macos-seatbelt"
	// BackendWindowsJob: a Windows Job Object.
	BackendWindowsJob = "windows-job"
	// BackendFloor: a plain subprocess with rlimits, a fresh session, a
	// scrubbed environment and a wall clock, under Landlock where the
	// kernel has it. It confines little; its Enforcement says what.
	BackendFloor = "floor"
	// BackendHost: direct execution on the host with the caps and
	// nothing else. It protects nothing. Never chosen automatically.
	BackendHost = "host"
	// BackendWASI: WebAssembly (WASI preview 1) modules in wazero, on any
	// operating system; package pkg/sandbox/wasi. It runs .wasm programs
	// only, so New does not choose it; a caller that routes .wasm
	// programs to it names it.
	BackendWASI = "wasi"
)

// Options configures [New]. The zero value picks the strongest backend.
type Options struct {
	// Backend names the backend to use. Empty means the strongest that
	// works here, probed in order; a named backend that does not work is
	// an error, never a silent fallback.
	Backend string `json:"backend,omitempty"`
	// HelperPath is the io-harness-sandbox-exec executable. When set, the
	// Linux backends use it instead of the in-process spawner. When empty
	// and the library was built without cgo, the helper is looked for
	// next to the running executable; PATH is never searched.
	HelperPath string `json:"helper_path,omitempty"`
	// Observer receives every run's events, from the goroutine that
	// called Run, in order. Nil discards them. It must not block for long.
	Observer func(Event) `json:"-"`
}

// New selects a backend, probing each candidate by building a real
// sandbox and checking that a write outside it is refused. Probing costs
// a few milliseconds per candidate and happens here only: keep the
// Sandbox and reuse it.
//
// # Errors
//
// ErrUnavailable when the named backend (or, with no name, every
// backend) cannot run here.
func New(ctx context.Context, opts *Options) (Sandbox, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	opened := map[string]backend{}
	probe := func(name string) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		b, err := openBackend(ctx, name, &o)
		if err != nil {
			return err
		}
		opened[name] = b
		return nil
	}
	name, fallbacks, err := choose(runtime.GOOS, o.Backend, probe)
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return nil, &Error{Kind: cerr, Step: "probe"}
		}
		var se *Error
		if errors.As(err, &se) {
			return nil, err
		}
		return nil, &Error{Kind: ErrUnavailable, Backend: o.Backend, Err: err}
	}
	return &sandbox{name: name, b: opened[name], fallbacks: fallbacks, observer: o.Observer}, nil
}

// ladder is the order in which backends are tried on goos when none is
// named. Host is never on it.
func ladder(goos string) []string {
	switch goos {
	case "linux":
		return []string{BackendLinuxNS, BackendLinuxLandlock, BackendBwrap, BackendFloor}
	case "darwin":
		return []string{BackendSeatbelt, BackendFloor}
	case "windows":
		return []string{BackendWindowsJob}
	}
	return nil
}

// choose picks the backend: want if named (and it probes fine), else the
// first rung of goos's ladder whose probe succeeds. It reports the rungs
// it skipped and why. It is a pure function of the probe's answers.
func choose(goos, want string, probe func(name string) error) (string, []Fallback, error) {
	if want != "" {
		if err := probe(want); err != nil {
			return "", nil, err
		}
		return want, nil, nil
	}
	var skipped []Fallback
	for _, name := range ladder(goos) {
		err := probe(name)
		if err == nil {
			return name, skipped, nil
		}
		skipped = append(skipped, Fallback{Backend: name, Reason: err.Error()})
	}
	return "", skipped, fmt.Errorf("no backend works on %s: %v", goos, skipped)
}

// sandbox is the Sandbox every backend shares: the run driver around a
// backend.
type sandbox struct {
	name      string
	b         backend
	fallbacks []Fallback
	observer  func(Event)
}

func (s *sandbox) Name() string { return s.name }

func (s *sandbox) Enforcement() Enforcement {
	e := s.b.enforcement(false)
	e.Fallbacks = s.fallbacks
	return e
}
