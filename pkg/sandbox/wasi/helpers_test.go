package wasi

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/initorigin/io-harness-go/pkg/sandbox"
)

// Exit statuses of the guest's attempts (testdata/guest).
const (
	escaped   = 0
	contained = 3
	broken    = 4
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(benchChild())
	}
	if os.Getenv(rssChildEnv) != "" {
		os.Exit(rssChild())
	}
	code := m.Run()
	built.remove()
	os.Exit(code)
}

// hangGuard bounds a wait only so that a hung test fails instead of
// hanging: it is far beyond what any wait here takes, however loaded the
// machine, and no test judges a duration by it.
const hangGuard = 2 * time.Minute

// built holds the wasm programs the tests build, once per test binary,
// into one temporary directory that TestMain removes.
var built = &programs{out: map[string]*program{}}

type programs struct {
	mu  sync.Mutex
	dir string
	out map[string]*program
}

type program struct {
	once sync.Once
	path string
	err  error
}

// builtDir is the directory of the built programs and the shared cache.
func builtDir(t testing.TB) string {
	t.Helper()
	built.mu.Lock()
	defer built.mu.Unlock()
	if built.dir == "" {
		dir, err := os.MkdirTemp("", "io-harness-wasi-test-")
		if err != nil {
			t.Fatal(err)
		}
		built.dir = dir
	}
	return built.dir
}

func (p *programs) remove() {
	if p.dir != "" {
		os.RemoveAll(p.dir)
	}
}

// goBuild builds the Go package pkg (a path relative to this package's
// directory, or a standard command such as "cmd/vet") for goos/goarch,
// once per test binary, and returns the executable's path.
func goBuild(t testing.TB, pkg, goos, goarch string) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH: cannot build the test programs")
	}
	key := pkg + " " + goos + "/" + goarch
	dir := builtDir(t)
	built.mu.Lock()
	p := built.out[key]
	if p == nil {
		p = &program{}
		built.out[key] = p
	}
	built.mu.Unlock()
	p.once.Do(func() {
		out := filepath.Join(dir, filepath.Base(pkg)+"-"+goos+"-"+goarch)
		cmd := exec.Command(goBin, "build", "-o", out, pkg)
		cmd.Env = append(os.Environ(), "GOOS="+goos, "GOARCH="+goarch, "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			p.err = &buildError{pkg, string(b), err}
			return
		}
		p.path = out
	})
	if p.err != nil {
		t.Fatal(p.err)
	}
	return p.path
}

type buildError struct {
	pkg, out string
	err      error
}

func (e *buildError) Error() string { return "go build " + e.pkg + ": " + e.err.Error() + "\n" + e.out }

// guest builds testdata/guest for wasip1.
func guest(t testing.TB) string {
	t.Helper()
	return goBuild(t, "./testdata/guest", "wasip1", "wasm")
}

// newSandbox opens a Sandbox that the test closes when it ends. Unless
// opts names one, it shares a disk cache with the test binary's other
// Sandboxes: compiling the guest takes seconds under the race detector.
func newSandbox(t testing.TB, opts *Options) sandbox.Sandbox {
	t.Helper()
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.CacheDir == "" {
		o.CacheDir = filepath.Join(builtDir(t), "cache")
	}
	sb, err := New(context.Background(), &o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := sb.(io.Closer).Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return sb
}

// attempt runs the guest with op and args under spec and fails the test
// if the sandbox itself fails.
func attempt(t *testing.T, sb sandbox.Sandbox, spec sandbox.Spec, op string, args ...string) *sandbox.Result {
	t.Helper()
	spec.Argv = append([]string{guest(t), op}, args...)
	if spec.Limits.Wall == 0 {
		spec.Limits.Wall = sandbox.Duration(30 * time.Second)
	}
	res, err := sb.Run(context.Background(), &spec)
	if err != nil {
		t.Fatalf("%s %v: %v", op, args, err)
	}
	return res
}

// outcome reads an attempt's verdict from its exit status.
func outcome(t *testing.T, res *sandbox.Result) (escapedNow bool) {
	t.Helper()
	switch res.ExitCode {
	case escaped:
		return true
	case contained:
		return false
	}
	t.Fatalf("the guest broke: exit %d cap %q\nstdout: %s\nstderr: %s", res.ExitCode, res.CapHit, res.Stdout, res.Stderr)
	return false
}

// hostScratch makes a host directory outside the system temp directory,
// so that no temp grant could hide an escape into it.
func hostScratch(t *testing.T) string {
	t.Helper()
	for _, base := range []string{"/var/tmp", os.Getenv("HOME")} {
		if base == "" {
			continue
		}
		dir, err := os.MkdirTemp(base, "io-harness-wasi-escape-")
		if err != nil {
			continue
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		real, err := filepath.EvalSymlinks(dir)
		if err != nil {
			t.Fatal(err)
		}
		return real
	}
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// realTempDir is t.TempDir with symbolic links resolved (macOS's /var).
func realTempDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// recorder collects events from any number of runs.
type recorder struct {
	mu     sync.Mutex
	events []sandbox.Event
}

func (r *recorder) observe(e sandbox.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func (r *recorder) all() []sandbox.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]sandbox.Event(nil), r.events...)
}
