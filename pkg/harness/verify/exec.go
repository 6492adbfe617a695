package verify

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"

	"github.com/initorigin/io-harness-go/pkg/sandbox"
)

// Env is what the gates may use.
type Env struct {
	// Root is the workspace.
	Root *os.Root
	// Sandbox runs the execution gates. Nil fails every execution gate
	// with the reason: model-produced code never runs on the host.
	Sandbox sandbox.Sandbox
	// Allow is the exec policy. It is asked about every program an
	// execution gate starts (the compiler, go, a command's argv[0]; not
	// the test binary a gate itself builds), and only nil passes: a gate
	// cannot wait for a person. Nil allows every program.
	Allow func(program string) error
	// CacheDir is a directory the gates keep build caches in (GOCACHE),
	// writable by the sandboxed compilers, so that the second gate of a
	// run does not rebuild the standard library. Empty means no cache.
	CacheDir string
	// Getenv reads the host's environment for the toolchains' settings
	// (RUSTUP_HOME, CARGO_HOME, GOMODCACHE, …); nil reads nothing.
	Getenv func(string) string
}

// maxGateOutput bounds the output an execution gate reports.
const maxGateOutput = 4 << 10

// runExec runs an execution gate. Its error is the sandbox's own failure.
func runExec(ctx context.Context, env *Env, c *Check) (Result, error) {
	if env.Sandbox == nil {
		return Result{Detail: "not run: no sandbox is configured, and model-produced code never runs on the host"}, nil
	}
	w, err := newWorkdir(env, c)
	if err != nil {
		return Result{Detail: "not run: " + err.Error()}, nil
	}
	defer w.remove()
	switch c.Kind {
	case CompilesRust:
		return rustCompiles(ctx, w, []string{c.File})
	case EachCompilesRust:
		return rustCompiles(ctx, w, c.Files)
	case RustTestPasses:
		return rustTest(ctx, w, []string{c.File}, c.Test)
	case WorkspaceTestPasses:
		return rustTest(ctx, w, c.Files, c.Test)
	case GoTestPasses:
		return goTest(ctx, w, c)
	case CommandSucceeds, WasmCommandSucceeds:
		return command(ctx, w, c)
	}
	return Result{Detail: fmt.Sprintf("unknown execution gate %q", c.Kind)}, nil
}

// workdir is a gate's private copy of the workspace: the agent's files as
// they are, with the pinned files as they were. The command runs in it,
// so nothing it does reaches the workspace.
type workdir struct {
	env   *Env
	check *Check
	dir   string
}

func newWorkdir(env *Env, c *Check) (*workdir, error) {
	dir, err := os.MkdirTemp("", "io-harness-gate-")
	if err != nil {
		return nil, err
	}
	w := &workdir{env: env, check: c, dir: dir}
	if err := copyTree(env.Root, dir); err != nil {
		w.remove()
		return nil, fmt.Errorf("copy the workspace: %v", err)
	}
	for name, content := range c.Pinned {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			w.remove()
			return nil, err
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			w.remove()
			return nil, err
		}
	}
	return w, nil
}

func (w *workdir) remove() { os.RemoveAll(w.dir) }

// maxCopy bounds the workspace a gate copies.
const maxCopy = 512 << 20

// copyTree copies the regular files and directories of root into dst,
// skipping .git, target and node_modules and never following symlinks.
func copyTree(root *os.Root, dst string) error {
	var total int64
	return fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != "." && (d.Name() == ".git" || d.Name() == "target" || d.Name() == "node_modules") {
				return fs.SkipDir
			}
			return os.MkdirAll(filepath.Join(dst, filepath.FromSlash(p)), 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if total += info.Size(); total > maxCopy {
			return fmt.Errorf("the workspace is over %d bytes", maxCopy)
		}
		src, err := root.Open(p)
		if err != nil {
			return err
		}
		defer src.Close()
		out, err := os.OpenFile(filepath.Join(dst, filepath.FromSlash(p)), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, info.Mode().Perm()|0o600)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, src); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	})
}

// program resolves a program to an absolute path on the host and asks the
// exec policy about it.
func (w *workdir) program(name string) (string, error) {
	p := name
	switch {
	case w.check.Kind == WasmCommandSucceeds && !filepath.IsAbs(name):
		// A module in the workspace: the gate's copy of it.
		p = w.path(name)
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%s does not exist in the workspace", name)
		}
	case w.check.Kind == WasmCommandSucceeds:
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("the module %s: %v", name, err)
		}
	case !strings.Contains(name, "/"):
		var err error
		if p, err = exec.LookPath(name); err != nil {
			return "", fmt.Errorf("%s is not installed: %v", name, err)
		}
	}
	if w.env.Allow != nil {
		if err := w.env.Allow(p); err != nil {
			return "", err
		}
	}
	return p, nil
}

// getenv reads the host's environment through the env.
func (w *workdir) getenv(k string) string {
	if w.env.Getenv == nil {
		return ""
	}
	return w.env.Getenv(k)
}

// run runs argv in the workdir, in the sandbox, and reports the sandbox's
// own failure as an error.
func (w *workdir) run(ctx context.Context, argv, envv []string, writable ...string) (*sandbox.Result, error) {
	spec := &sandbox.Spec{Argv: argv, Env: envv, Workdir: w.dir, Limits: w.check.Limits}
	for _, p := range writable {
		if p != "" {
			spec.Writable = append(spec.Writable, p)
		}
	}
	res, err := w.env.Sandbox.Run(ctx, spec)
	if err != nil {
		return nil, err
	}
	return res, nil
}

// outcome judges a sandboxed command: passed only when it ended on its
// own with exit code 0. A cap or a signal never passes, whatever else.
func outcome(res *sandbox.Result, what string) Result {
	r := Result{Backend: res.Backend, CapHit: res.CapHit, Output: tail(res)}
	switch {
	case res.CapHit != sandbox.CapNone:
		r.Detail = fmt.Sprintf("%s was killed: it hit the %s limit", what, res.CapHit)
	case res.Signal != "":
		r.Detail = fmt.Sprintf("%s was killed by %s", what, res.Signal)
	case res.ExitCode != 0:
		r.Detail = fmt.Sprintf("%s failed with exit code %d", what, res.ExitCode)
	default:
		r.Passed, r.Detail = true, what+" succeeded"
	}
	return r
}

// tail returns the end of a command's output: stderr, then stdout.
func tail(res *sandbox.Result) string {
	out := strings.TrimSpace(string(res.Stderr))
	if so := strings.TrimSpace(string(res.Stdout)); so != "" {
		if out != "" {
			out += "\n"
		}
		out += so
	}
	if len(out) > maxGateOutput {
		cut := len(out) - maxGateOutput
		for cut < len(out) && out[cut]&0xC0 == 0x80 {
			cut++
		}
		out = fmt.Sprintf("[... %d bytes cut ...]\n", cut) + out[cut:]
	}
	return out
}

// errSandbox marks a failure of the sandbox itself.
var errSandbox = errors.New("verify: the sandbox failed")

// failed returns a result for a gate that could not run, with the
// sandbox's failure as the error when it was one.
func failed(what string, err error) (Result, error) {
	var se *sandbox.Error
	if errors.As(err, &se) && !errors.Is(err, sandbox.ErrInvalid) {
		return Result{Detail: fmt.Sprintf("%s could not run: %v", what, err)}, fmt.Errorf("%w: %w", errSandbox, err)
	}
	return Result{Detail: fmt.Sprintf("%s could not run: %v", what, err)}, nil
}

// slash joins a workdir-relative slash path onto the workdir.
func (w *workdir) path(p string) string {
	return filepath.Join(w.dir, filepath.FromSlash(path.Clean(p)))
}
