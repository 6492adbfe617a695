package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
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
	// never started), or the context's error when ctx ended first. The
	// one error that comes with a Result is ErrApply: the command ran,
	// and some of its changes to a host directory could not be applied.
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
	// UID and GID are the unprivileged host user and group that commands
	// run as when the calling process is root, on every backend but host:
	// uid 0 inside a sandbox is never uid 0 on the host's files. Zero
	// means 65534 (nobody and nogroup). A caller that is not root runs
	// commands as itself.
	UID int `json:"uid,omitempty"`
	GID int `json:"gid,omitempty"`
	// Caller runs commands as the calling process's own user, root
	// included, instead of UID and GID: for commands whose argv the
	// caller builds and trusts, such as the harness's git tools, which
	// must write the caller's repository. The namespaces, seccomp (no
	// setuid bits), Landlock and the hidden paths still apply; the
	// Enforcement says Unprivileged false for a root caller.
	Caller bool `json:"-"`
	// Observer receives every run's events, from the goroutine that
	// called Run, in order. Nil discards them. It must not block for long.
	Observer func(Event) `json:"-"`
}

// unprivileged is the id that Options.UID and GID default to.
const unprivileged = 65534

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
	if o.UID < 0 || o.GID < 0 {
		return nil, &Error{Kind: ErrInvalid, Backend: o.Backend, Step: "options", Err: fmt.Errorf("negative uid or gid")}
	}
	if o.UID == 0 {
		o.UID = unprivileged
	}
	if o.GID == 0 {
		o.GID = unprivileged
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
	return newSandbox(name, opened[name], fallbacks, o.Observer), nil
}

// newSandbox is the run driver around backend b.
func newSandbox(name string, b backend, fallbacks []Fallback, observer func(Event)) *sandbox {
	s := &sandbox{name: name, b: b, fallbacks: fallbacks, observer: observer}
	s.uid, s.gid = callerIDs()
	if id, ok := b.(identifier); ok {
		s.uid, s.gid = id.identity()
	}
	s.switched = s.uid != os.Geteuid()
	return s
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
	// uid and gid are the host user and group commands run as; switched
	// says they are not the caller's.
	uid, gid int
	switched bool
}

func (s *sandbox) Name() string { return s.name }

func (s *sandbox) Enforcement() Enforcement { return s.enforcement(false, nil) }

// observerKey is the context key of WithObserver.
type observerKey struct{}

// WithObserver returns a context whose runs report their events to fn
// too, beside the Sandbox's own Observer: a sandbox made once and shared
// by many runs (a caller's, given to each harness run) reports each run's
// events to that run. fn is called from the goroutine that called Run.
func WithObserver(ctx context.Context, fn func(Event)) context.Context {
	return context.WithValue(ctx, observerKey{}, fn)
}

// ObserverOf returns the observer WithObserver put in ctx, or nil: for
// backends outside this package.
func ObserverOf(ctx context.Context) func(Event) {
	fn, _ := ctx.Value(observerKey{}).(func(Event))
	return fn
}
