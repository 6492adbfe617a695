// Package wasi is the sandbox backend for WebAssembly programs: it runs
// WASI preview 1 modules in-process with wazero, on every operating
// system, behind the same [sandbox.Sandbox] interface as the native
// backends.
//
// A run's Argv[0] is the host path of a .wasm file (a relative path is
// taken from the workdir; there is no PATH search), and the whole Argv is
// the guest's argv. The guest's world is:
//
//   - Files: the workdir at / (the guest's working directory) and, when
//     the spec names it, at its host path too; a private, empty /tmp
//     (TMPDIR=/tmp) removed with the run; each ReadOnly and Writable
//     directory at its host path. Nothing else exists. Every name,
//     including the target of a symbolic link, resolves inside its mount,
//     through an [os.Root] (wazero's own directory mount follows links out
//     of the mount). Only directories can be mounted, and a read-only one
//     inside a writable one is refused.
//   - Environment: Spec.Env, less the proxy variables, with PWD=/ and
//     TMPDIR=/tmp. Nothing is inherited.
//   - Network: none. WASI preview 1 cannot create sockets, and an
//     allow-list is not served: such a spec runs with the network denied,
//     and [sandbox.Enforcement.Network] says so, as the sandbox.Network
//     contract asks of a backend that cannot serve a proxy.
//   - Clocks and randomness: the host's real clocks and crypto/rand, as a
//     native program has, not wazero's deterministic defaults: tools time
//     out, sleep and make temporary names, and a guest that asks for
//     random bytes must not get predictable ones. Sleeps end when the run
//     is killed.
//
// The caps:
//
//   - Wall and CPU: one deadline, at the smaller of the two, from the
//     start of the guest. WebAssembly has no CPU clock, but a guest runs
//     on one goroutine, so its CPU time never exceeds its wall time, and
//     a wall-clock bound at the CPU limit never lets it exceed that
//     limit (it may end a guest that slept sooner than a CPU clock
//     would). The cap reported is the limit that set the deadline: CPU
//     when Limits.CPU < Limits.Wall (the defaults, 60 s and 120 s), else
//     Wall. Result.CPU is the guest's wall time, an upper bound.
//   - Memory: the guest's linear memory may not grow past Limits.Memory
//     (at most 4 GiB, the WebAssembly limit). A growth past it ends the
//     guest at once, inside its memory.grow, with the memory cap: the
//     guest never sees the failure, so the cap does not depend on what a
//     guest does about one (a Go guest would print "fatal error: out of
//     memory" and exit 2, a C one get NULL from malloc, a Rust one trap).
//     A module whose initial memory is over the limit does not start
//     (exit 126, memory cap). The module's tables count against the same
//     limit, at their maximum size (8 bytes an entry): wazero grows them
//     from the Go heap, where no allocator sees them, so a table's
//     maximum is held to 2^20 entries (an unbounded one gets that
//     maximum, and table.grow past it returns -1 to the guest) and the
//     memory the guest may grow to is the limit less its tables.
//   - The module itself: before wazero reads a module, every count and
//     size it declares is checked against the bytes that must hold it
//     and against fixed limits (those browsers apply; see [Check]): a
//     few bytes that declare 2^32 functions would otherwise make wazero's
//     decoder end the process with "fatal error: runtime: out of memory".
//     A module over a limit is exit 126, with the [LimitError] on stderr.
//     Custom sections (names, debugging information) are dropped unread.
//     What is left takes memory in proportion to the module's size, which
//     the 512 MiB module limit bounds; the guest's call stack, which
//     wazero keeps on the Go heap and ends with a trap once it passes
//     50 MB (the host holds up to about 160 MiB while it grows it), is
//     not counted against the memory limit.
//   - Output: the write that takes stdout or stderr past Limits.Output
//     bytes ends the guest at once, with the output cap.
//   - File size: a write that would make a file larger than
//     Limits.FileSize ends the guest at once, with the file-size cap;
//     the file keeps what was written before.
//   - Disk: what the guest adds to everything it can write (the workdir,
//     /tmp and each Writable directory) counts against Limits.Disk (1 GiB
//     when zero): the growth of every file it writes, sparse ones at
//     their full size, and 4 KiB for every name it creates. The write or
//     create that would cross it fails and ends the guest at once, with
//     the disk cap. Space the guest frees is given back: a file it
//     truncates, or removes when no other name holds it and the run does
//     not have it open, since an open file keeps its blocks.
//   - Open files: the guest's descriptor table (stdin, stdout, stderr,
//     each preopened directory and every file it opens) holds at most
//     Limits.OpenFiles; an open past it fails with EMFILE and the guest
//     goes on, as natively. Each file it opens is a host descriptor, so
//     the guests of all a Sandbox's runs together hold at most half of
//     the process's RLIMIT_NOFILE (16384 where it has none); an open past
//     that fails with ENFILE, and the host keeps the other half.
//   - Processes: a WASI preview 1 guest is one thread and cannot start
//     processes.
//
// A run that a cap ends has ExitCode -1 (for the wall-clock and CPU caps,
// unless the guest exited on its own at that moment). A trap
// (unreachable, out-of-bounds access, stack overflow) is ExitCode -1 with
// the trap described at the end of Stderr. A module that cannot be read
// is exit 127 (not found) or 126, and one that is not a WASI preview 1
// command is 126, as a shell reports a program it cannot execute. None of
// these is an error: Run's errors are the sandbox's own failures.
//
// # Compilation
//
// Compiling a large module takes seconds (3–6 s for the 14 MB Go vet
// built for WASI on the development machine). A Sandbox compiles each
// module once, keyed by the SHA-256 of its content, and keeps the result
// for every later run, concurrent ones included, until Close. With
// Options.CacheDir set, wazero also keeps the compiled code on disk, so
// that the first run in a new process loads it (about 0.25 s for the
// same program) instead of compiling. The caps start with the guest:
// compiling is bounded by Run's context only, and only as far as Run
// stops waiting; the compilation goes on, to serve later runs, and Close
// waits for it. wazero's compiler takes time quadratic in the basic
// blocks of a function (20,000 nested blocks in 60 KB: seconds), so a
// module from an untrusted source can keep a core busy for long.
//
// A Sandbox therefore holds resources, unlike the native ones: it is an
// [io.Closer], and Close releases the compiled modules.
package wasi

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/tetratelabs/wazero"

	"github.com/initorigin/io-harness-go/pkg/sandbox"
)

// Backend is the name of this backend, in [sandbox.Result.Backend] and in
// every event.
const Backend = sandbox.BackendWASI

// Options configures [New]. The zero value (or nil) is a Sandbox with no
// disk cache.
type Options struct {
	// CacheDir is the directory of wazero's on-disk compilation cache,
	// created (0700) if missing and safely shared by concurrent processes.
	// Empty means no disk cache: every process compiles each module once.
	// The cache holds native code that runs in this process, so the
	// directory must be writable by this user only; one writable by group
	// or others is refused.
	CacheDir string `json:"cache_dir,omitempty"`
	// Observer receives every run's events, from the goroutine that
	// called Run, in order. Nil discards them. It must not block for long.
	Observer func(sandbox.Event) `json:"-"`
}

// New returns a Sandbox that runs WASI preview 1 modules. It uses
// wazero's compiler where wazero has one (amd64 and arm64 on Linux, macOS
// and Windows, among others) and its interpreter elsewhere.
//
// The Sandbox holds compiled modules until it is closed: it implements
// [io.Closer], and its Close ends the runs in flight and waits for them.
//
// # Errors
//
// ErrInvalid when Options.CacheDir cannot be used.
func New(ctx context.Context, opts *Options) (sandbox.Sandbox, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if err := ctx.Err(); err != nil {
		return nil, &sandbox.Error{Kind: err, Backend: Backend, Step: "new"}
	}
	cfg := wazero.NewRuntimeConfig().
		// A deadline or cancellation must stop a spinning guest: without
		// this the guest runs on after its context ends.
		WithCloseOnContextDone(true)
	// The memory cap is applied per run by the allocator, not by
	// WithMemoryLimitPages and WithMemoryCapacityFromMax: those are
	// runtime-wide and baked into each compiled module, and the default
	// allocator behind them is slow; see allocator.
	var cache wazero.CompilationCache
	if o.CacheDir != "" {
		c, err := wazero.NewCompilationCacheWithDir(o.CacheDir)
		if err != nil {
			return nil, &sandbox.Error{Kind: sandbox.ErrInvalid, Backend: Backend, Step: "cache_dir", Err: err}
		}
		if fi, err := os.Stat(o.CacheDir); err != nil || runtime.GOOS != "windows" && fi.Mode().Perm()&0o022 != 0 {
			c.Close(ctx)
			if err == nil {
				err = fmt.Errorf("%s is writable by group or others (mode %v), and its files run as native code in this process", o.CacheDir, fi.Mode().Perm())
			}
			return nil, &sandbox.Error{Kind: sandbox.ErrInvalid, Backend: Backend, Step: "cache_dir", Err: err}
		}
		cache = c
		cfg = cfg.WithCompilationCache(c)
	}
	rt := wazero.NewRuntimeWithConfig(ctx, cfg)
	if err := instantiateWASI(ctx, rt); err != nil {
		rt.Close(ctx)
		if cache != nil {
			cache.Close(ctx)
		}
		return nil, &sandbox.Error{Kind: sandbox.ErrUnavailable, Backend: Backend, Step: "wasi host module", Err: err}
	}
	life, stop := context.WithCancel(context.WithoutCancel(ctx))
	return &wasiSandbox{
		rt:       rt,
		cache:    cache,
		observer: o.Observer,
		life:     life,
		stop:     stop,
		modules:  map[[sha256.Size]byte]*module{},
		files:    map[string]fileHash{},
		fds:      &fdBudget{limit: hostFDBudget()},
	}, nil
}

// wasiSandbox is the Sandbox. It is safe for concurrent use.
type wasiSandbox struct {
	rt       wazero.Runtime
	cache    wazero.CompilationCache // nil without a CacheDir
	observer func(sandbox.Event)
	// life ends when Close is called, and ends the runs in flight.
	life context.Context
	stop context.CancelFunc

	mu      sync.Mutex // guards modules, files and closed, and orders inflight.Add before Wait
	modules map[[sha256.Size]byte]*module
	files   map[string]fileHash // by module path
	closed  bool
	// inflight counts the runs and compilations in progress.
	inflight sync.WaitGroup
	// fds are the host descriptors all runs' guests may hold at once.
	fds *fdBudget
}

// errClosed ends the runs in flight when the Sandbox is closed.
var errClosed = errors.New("the sandbox was closed")

func (s *wasiSandbox) Name() string { return Backend }

func (s *wasiSandbox) Enforcement() sandbox.Enforcement { return enforcement() }

// enforcement is what every run enforces, whatever its spec.
func enforcement() sandbox.Enforcement {
	return sandbox.Enforcement{
		Filesystem:    true,
		PrivateTmp:    true,
		Network:       sandbox.NetworkDenied,
		PIDNamespace:  false, // not applicable: there are no processes to isolate
		HostProcesses: true,  // WASI preview 1 has no call that reaches a process
		Memory:        true,
		Processes:     true, // one thread, and no way to start another
		CPU:           true, // as a wall-clock bound; see the package documentation
		FileSize:      true,
		OpenFiles:     true,
		Teardown:      true,
		HostDeath:     true, // the guest lives in the host process
		Seccomp:       false,
		Landlock:      0,
		NoNewPrivs:    true, // nothing can be executed
		Spawner:       "wazero",
		Gaps: "The guest runs inside the host process: a bug in wazero or in its WASI host functions is a bug in the host. " +
			"WebAssembly has no CPU clock: the CPU cap is a wall-clock bound and Result.CPU the guest's wall time. " +
			"Compiling a module is bounded by the run's context only, not by its caps. " +
			"The network is always denied; an allow-list is not served. " +
			"There are no processes, so a pid namespace does not apply. " + sandbox.CopyGap,
	}
}

// Close ends the runs in flight (they return an ErrUnavailable error),
// waits for them and for any compilation in progress, and releases the
// compiled modules. Later runs fail with ErrUnavailable. Close is safe to
// call more than once.
func (s *wasiSandbox) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	s.stop()
	s.inflight.Wait()
	ctx := context.Background()
	var err error
	for _, m := range s.modules {
		if m.cm != nil {
			err = errors.Join(err, m.cm.Close(ctx))
		}
	}
	clear(s.modules)
	err = errors.Join(err, s.rt.Close(ctx))
	if s.cache != nil {
		err = errors.Join(err, s.cache.Close(ctx))
	}
	return err
}

// enter counts a run or compilation in, unless the Sandbox is closed.
func (s *wasiSandbox) enter() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.inflight.Add(1)
	return true
}

func (s *wasiSandbox) emit(ctx context.Context, e sandbox.Event) {
	also := sandbox.ObserverOf(ctx)
	if s.observer == nil && also == nil {
		return
	}
	e.Backend = Backend
	e.Time = time.Now()
	if s.observer != nil {
		s.observer(e)
	}
	if also != nil {
		also(e)
	}
}

// UserCacheDir is where a process keeps compiled modules by default: under
// the user's cache directory, so that a module compiles once per machine;
// "" when there is no such directory.
func UserCacheDir() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "io-harness", "wasm")
}

// IsModule reports whether program names a WebAssembly module, the
// programs this backend runs: a path ending in .wasm.
func IsModule(program string) bool { return strings.HasSuffix(strings.ToLower(program), ".wasm") }
