package verify

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/initorigin/io-harness-go/internal/scratch"
	"github.com/initorigin/io-harness-go/pkg/harness/snapshot"
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
	// the test binary a gate itself builds, nor the fixed shell that starts
	// one in its package's directory on the workspace itself), and only
	// nil passes: a gate cannot wait for a person. Nil allows every
	// program.
	Allow func(program string) error
	// CacheDir is a directory the gates keep build caches in (GOCACHE,
	// rustc's incremental directories), writable by the sandboxed
	// compilers and never by the code under test, so that the second gate
	// of a run does not rebuild the standard library, nor an unchanged
	// crate. Empty means no cache.
	CacheDir string
	// Getenv reads the host's environment for the toolchains' settings
	// (RUSTUP_HOME, CARGO_HOME, GOMODCACHE, …); nil reads nothing.
	Getenv func(string) string
	// Visible is the read policy of the gate's view of the workspace: a
	// file it refuses is left out of a copy, or concealed on the
	// workspace itself, so that nothing a gate runs (and no output of it
	// the model is shown) can read it. Nil shows every file.
	Visible func(rel string) bool
	// Names, when set, remembers the workspace's directory listings
	// between gates (see [snapshot.Names]). Nil lists every directory
	// every time.
	Names *snapshot.Names
	// Shadow, when set, is the run's copy of the workspace for the gates
	// where the sandbox cannot run them on the workspace itself: brought
	// up to date before each gate instead of copied anew, the pinned
	// files and whatever the gate's commands left undone by the next
	// sync (see [snapshot.Shadow]). Nil copies the workspace every gate.
	Shadow *snapshot.Shadow
}

// maxGateOutput bounds the output an execution gate reports.
const maxGateOutput = 4 << 10

// runExec runs an execution gate. Its error is the sandbox's own failure.
func runExec(ctx context.Context, env *Env, c *Check) (Result, error) {
	if env.Sandbox == nil {
		return Result{Detail: "not run: no sandbox is configured, and model-produced code never runs on the host"}, nil
	}
	w, err := newWorkdir(ctx, env, c)
	if err != nil {
		return Result{Detail: "not run: " + err.Error()}, nil
	}
	defer w.remove()
	r, err := runGate(ctx, w, c)
	if r.Backend != "" {
		r.Workspace = snapshot.Seen(w.snap)
	}
	return r, err
}

func runGate(ctx context.Context, w *workdir, c *Check) (Result, error) {
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
	snap  *snapshot.Snapshot // the copy, or nil on the workspace itself
	// overlay, when set, is how the commands run on the workspace itself.
	overlay *overlay
	// show are host paths the gate's commands read (toolchains, module
	// caches), shown read-only where the sandbox would hide them.
	show []string
}

func newWorkdir(ctx context.Context, env *Env, c *Check) (*workdir, error) {
	if c.Kind != WasmCommandSucceeds && env.Sandbox.Enforcement().Overlay {
		return onWorkspace(ctx, env, c)
	}
	// The copy is given, as it is made, to the user a root caller's
	// commands run as: the sandbox's lending then changes nothing in it,
	// and the run's copy reads as unchanged at the next gate.
	var owner *snapshot.Owner
	if e := env.Sandbox.Enforcement(); e.Unprivileged && e.UID > 0 && e.UID != os.Geteuid() {
		owner = &snapshot.Owner{UID: e.UID, GID: e.GID}
	}
	snap, err := env.Shadow.Take(ctx, env.Root, snapshot.Options{Prefix: "io-harness-gate-", Visible: env.Visible, MaxBytes: maxCopy, Owner: owner,
		Skip: func(name string) bool { return name == ".git" || name == "target" || name == "node_modules" }})
	if err != nil {
		return nil, fmt.Errorf("copy the workspace: %v", err)
	}
	w := &workdir{env: env, check: c, dir: snap.Dir, snap: snap}
	for name, content := range c.Pinned {
		p := filepath.Join(w.dir, filepath.FromSlash(name))
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

// onWorkspace is a gate's workdir on the workspace itself, for a sandbox
// that holds a command's changes apart (Enforcement.Overlay): what the
// read policy refuses is concealed, .git is shown read-only, and whatever
// a command changes is dropped when it exits. What the gate itself puts
// in the workspace (the pinned files, an instrumented test, a generated
// crate root) is written in the gate's private layer, a directory of its
// own in the temporary directory, and bound read-only at its place
// (writeFile); what it builds goes to that layer too (out). Nothing is
// copied, whatever the workspace's size, and nothing is written in it.
func onWorkspace(ctx context.Context, env *Env, c *Check) (*workdir, error) {
	dir, err := filepath.Abs(env.Root.Name())
	if err != nil {
		return nil, fmt.Errorf("the workspace: %w", err)
	}
	conceal, err := snapshot.Conceal(ctx, env.Root, env.Visible, 0, env.Names)
	if err != nil {
		return nil, fmt.Errorf("judge the workspace's files: %w", err)
	}
	if _, err := env.Root.Lstat(gateDir); err == nil && !slices.Contains(conceal, gateDir) {
		// A gate directory the workspace brought along (a planted test
		// binary, a cache) is not the gate's.
		conceal = append(conceal, gateDir)
		slices.Sort(conceal)
	}
	o := &overlay{conceal: conceal}
	if fi, err := env.Root.Lstat(".git"); err == nil && fi.IsDir() && !slices.Contains(conceal, ".git") {
		g := filepath.Join(dir, ".git")
		o.binds = append(o.binds, sandbox.Bind{Source: g, Target: g})
	}
	if len(c.Pinned) > maxPinBinds {
		return nil, fmt.Errorf("%w: %d files, over %d; pin fewer files", errTooManyPins, len(c.Pinned), maxPinBinds)
	}
	// The layer is readable by the user the commands run as; what they
	// may write in it (out) is lent to that user when they run.
	Sweep()
	if o.held, err = scratch.Make(layerPrefix, 0o755); err != nil {
		return nil, err
	}
	o.layer = o.held.Path
	w := &workdir{env: env, check: c, dir: dir, overlay: o}
	// The pinned files as the contract has them, each bound over the
	// agent's.
	names := make([]string, 0, len(c.Pinned))
	for name := range c.Pinned {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if err := w.writeFile(name, []byte(c.Pinned[name])); err != nil {
			w.remove()
			return nil, err
		}
	}
	return w, nil
}

// Sweep removes the private layers that gates of processes which died
// mid-gate (kill -9) left behind. A gate sweeps before it makes its own;
// a run sweeps when it starts, whether or not it has gates.
func Sweep() { scratch.Sweep(layerPrefix) }

// layerPrefix begins the name of a gate's private layer in the
// temporary directory; a layer is held by its process (scratch), and
// those of processes that died mid-gate (kill -9) are swept by the next.
const layerPrefix = "io-harness-gate."

// overlay is what a gate on the workspace itself adds to each command.
type overlay struct {
	conceal []string       // what the read policy refuses, and a planted gate directory
	binds   []sandbox.Bind // .git and the gate's files, read-only
	// layer is the gate's private directory: the contents of the files
	// it binds (f<n>) and its build outputs (out).
	layer string
	held  *scratch.Dir // the layer, held while the gate runs
	files int          // the files written in the layer
}

func (w *workdir) remove() {
	if w.snap != nil {
		w.snap.Remove()
	}
	if w.overlay != nil {
		w.overlay.held.Remove()
	}
}

// maxGateBinds bounds the binds of a gate on the workspace: the pinned
// files, .git and the files the gate generates.
const maxGateBinds = maxPinBinds + 4

// writeFile puts a file of the gate at rel in its workdir, over what the
// workspace has there: on a copy, in the copy; on the workspace itself,
// in the gate's layer, bound read-only at rel for every later command
// (the code under test cannot rewrite it).
func (w *workdir) writeFile(rel string, data []byte) error {
	o := w.overlay
	if o == nil {
		p := w.path(rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		return os.WriteFile(p, data, 0o644)
	}
	src := filepath.Join(o.layer, fmt.Sprintf("f%d", o.files))
	o.files++
	if err := os.WriteFile(src, data, 0o644); err != nil {
		return err
	}
	target := w.path(rel)
	if i := slices.IndexFunc(o.binds, func(b sandbox.Bind) bool { return b.Target == target }); i >= 0 {
		o.drop(o.binds[i])
		o.binds[i].Source = src
		return nil
	}
	if len(o.binds) >= maxGateBinds {
		return fmt.Errorf("%w: %d binds, over %d", errTooManyPins, len(o.binds)+1, maxGateBinds)
	}
	o.binds = append(o.binds, sandbox.Bind{Source: src, Target: target})
	return nil
}

// removeFile takes a file writeFile put at rel out of the workdir.
func (w *workdir) removeFile(rel string) error {
	o := w.overlay
	if o == nil {
		return os.Remove(w.path(rel))
	}
	target := w.path(rel)
	o.binds = slices.DeleteFunc(o.binds, func(b sandbox.Bind) bool {
		if b.Target == target {
			o.drop(b)
			return true
		}
		return false
	})
	return nil
}

// drop removes the layer's file that b binds, when it is the layer's.
func (o *overlay) drop(b sandbox.Bind) {
	if filepath.Dir(b.Source) == o.layer {
		os.Remove(b.Source)
	}
}

// readFile reads a file of the workspace as the gate's commands see it:
// on a copy, the copy's; on the workspace itself, the workspace's, never
// through a link out of it, and what the read policy refuses is not
// there.
func (w *workdir) readFile(rel string) ([]byte, error) {
	if w.overlay == nil {
		return os.ReadFile(w.path(rel))
	}
	if w.concealed(rel) {
		return nil, &fs.PathError{Op: "open", Path: rel, Err: fs.ErrNotExist}
	}
	return w.env.Root.ReadFile(filepath.FromSlash(path.Clean(rel)))
}

// concealed reports whether the gate's commands do not see rel, a
// workspace-relative slash path, because it or a directory above it is
// concealed. On a copy, what they do not see is not there.
func (w *workdir) concealed(rel string) bool {
	if w.overlay == nil {
		return false
	}
	rel = path.Clean(rel)
	for _, c := range w.overlay.conceal {
		if rel == c || strings.HasPrefix(rel, c+"/") {
			return true
		}
	}
	return false
}

// prepareGateDir makes a fresh directory for the gate's own files (out):
// on a copy, gateDir in it, removing any the workspace brought along; on
// the workspace itself, out in the gate's layer.
func (w *workdir) prepareGateDir() error {
	d := w.out("")
	if err := sandbox.RemoveAll(d); err != nil {
		return err
	}
	return os.MkdirAll(d, 0o755)
}

// out is the host path of name in the directory of the gate's own files
// (build outputs, probes, caches), which the commands that build may
// write and the code under test may only read. On the workspace itself it
// is in the gate's layer, never in the workspace.
func (w *workdir) out(name string) string {
	if w.overlay == nil {
		return filepath.Join(w.path(gateDir), filepath.FromSlash(name))
	}
	return filepath.Join(w.overlay.layer, "out", filepath.FromSlash(name))
}

// maxCopy bounds the workspace a gate copies.
const maxCopy = 512 << 20

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

// gateDir is the directory of a gate's own files in its workdir: build
// outputs, caches, generated sources. A gate removes any the workspace
// brought along before it uses it.
const gateDir = ".io-harness-gate"

// run runs argv in the workdir, in the sandbox, and reports the sandbox's
// own failure as an error.
func (w *workdir) run(ctx context.Context, argv, envv []string, writable ...string) (*sandbox.Result, error) {
	return w.runIn(ctx, w.dir, argv, envv, writable...)
}

// runIn is run with dir, the workdir or a directory in it, as the working
// directory.
func (w *workdir) runIn(ctx context.Context, dir string, argv, envv []string, writable ...string) (*sandbox.Result, error) {
	return w.runSpec(ctx, w.spec(dir, argv, envv, writable), false)
}

// spec is the command argv with dir as its working directory. On the
// workspace itself the workdir is the workspace, the lower layer of the
// overlay, whatever dir is: a shell of the gate's own changes to dir
// before it runs argv.
func (w *workdir) spec(dir string, argv, envv, writable []string) *sandbox.Spec {
	if w.overlay != nil && dir != w.dir {
		argv = append([]string{"/bin/sh", "-c", `cd -- "$0" && exec "$@"`, dir}, argv...)
		dir = w.dir
	}
	return &sandbox.Spec{Argv: argv, Env: envv, Workdir: dir, Writable: writable}
}

// runSubject runs code under test: runIn, with the pinned files bound
// read-only (pinBinds on a copy; on the workspace itself the gate's files
// are all bound already), and the gate's own files readable only.
func (w *workdir) runSubject(ctx context.Context, dir string, argv, envv []string, writable ...string) (*sandbox.Result, error) {
	spec := w.spec(dir, argv, envv, writable)
	if w.overlay == nil {
		ro, dirs, err := w.pinBinds()
		if err != nil {
			return nil, err
		}
		spec.ReadOnly, spec.Writable = ro, append(spec.Writable, dirs...)
	}
	return w.runSpec(ctx, spec, true)
}

// runSpec runs spec with the check's limits, each writable path once.
//
// The workdir and the writable paths are lent to the user the command
// runs as (a root caller's commands run as an unprivileged one): they are
// the gate's own. On the workspace itself, the workspace is not lent
// (the overlay shows the user's files as that user's), and no path in it
// is writable but through the overlay; the gate's out directory is
// writable to a build and read-only to the code under test (subject).
func (w *workdir) runSpec(ctx context.Context, spec *sandbox.Spec, subject bool) (*sandbox.Result, error) {
	spec.Limits = w.check.Limits
	var tainted bool // a file the read policy refuses appeared while it ran
	spec.Lend = true
	if o := w.overlay; o != nil {
		// The workspace is the user's, seen through the overlay and never
		// changed: the command's changes are dropped.
		spec.Conceal = o.conceal
		spec.ReadOnlyAt = o.binds
		spec.Collect = func(ctx context.Context, _ *sandbox.Upper) error {
			// What the command was shown concealed was fixed when it
			// began: a refused file that appeared since may have been
			// read, and the command's output cannot be trusted with it.
			appeared, err := snapshot.Appeared(ctx, w.env.Root, w.env.Visible, o.conceal, w.env.Names)
			tainted = err != nil || len(appeared) > 0
			return nil
		}
		spec.Writable = slices.DeleteFunc(spec.Writable, func(p string) bool { return p == w.dir || strings.HasPrefix(p, w.dir+string(filepath.Separator)) })
		if out := w.out(""); exists(out) {
			if subject {
				spec.ReadOnly = append(spec.ReadOnly, out)
			} else {
				spec.Writable = append(spec.Writable, out)
			}
		}
	}
	for _, p := range w.show {
		if p != "" && exists(p) && !slices.Contains(spec.ReadOnly, p) {
			spec.ReadOnly = append(spec.ReadOnly, p)
		}
	}
	seen := map[string]bool{spec.Workdir: true}
	writable := spec.Writable
	spec.Writable = nil
	for _, p := range writable {
		if p != "" && !seen[p] {
			seen[p] = true
			spec.Writable = append(spec.Writable, p)
		}
	}
	res, err := w.env.Sandbox.Run(ctx, spec)
	if tainted && res != nil {
		// Its output is withheld, and it failed: the gate does not pass
		// on what it cannot show.
		*res = sandbox.Result{ExitCode: 1, Backend: res.Backend, Enforced: res.Enforced, Duration: res.Duration, CPU: res.CPU,
			Stdout: []byte{}, Stderr: []byte("[io-harness: a file the read policy refuses appeared in the workspace while the command ran; its output is withheld and it counts as failed]\n")}
	}
	switch {
	case res != nil && errors.Is(err, sandbox.ErrApply):
		// The command ran, and its result is the verdict; what it left
		// in the gate's throwaway workspace that could not be applied
		// (a full filesystem) is told in its output, in case a later
		// command of the gate misses it.
		res.Stderr = fmt.Appendf(res.Stderr, "\n[io-harness: some of the command's changes to the gate's workspace were not applied: %v]\n", err)
		return res, nil
	case err != nil:
		return nil, err
	}
	return res, nil
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// maxPinBinds bounds the paths a gate binds to keep pinned files as they
// were; the namespace backends take 64 binds in all.
const maxPinBinds = 48

// errTooManyPins is a contract that pins more files than a gate can bind.
var errTooManyPins = errors.New("verify: too many pinned files to bind read-only")

// pinBinds returns the binds that keep the pinned files as they were while
// code under test runs: each file read-only, and each directory between
// the workdir and it bound writable onto itself. The directories matter:
// a read-only file in a plain directory is replaced by renaming the
// directory and making a new one with the same name, but a mount point
// cannot be renamed or removed. The backends that bind paths (linux-ns,
// bwrap) enforce this; the others cannot make part of the workdir
// read-only, and the result names the backend.
func (w *workdir) pinBinds() (readOnly, dirs []string, err error) {
	seen := map[string]bool{}
	for _, f := range w.check.Pin {
		p := w.path(f)
		if info, err := os.Lstat(p); err != nil || !info.Mode().IsRegular() {
			continue
		}
		readOnly = append(readOnly, p)
		for d := filepath.Dir(p); d != w.dir && strings.HasPrefix(d, w.dir+string(filepath.Separator)); d = filepath.Dir(d) {
			if !seen[d] {
				seen[d] = true
				dirs = append(dirs, d)
			}
		}
	}
	if n := len(readOnly) + len(dirs); n > maxPinBinds {
		return nil, nil, fmt.Errorf("%w: %d binds, over %d", errTooManyPins, n, maxPinBinds)
	}
	return readOnly, dirs, nil
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
	if errors.Is(err, errTooManyPins) {
		return Result{Detail: fmt.Sprintf("%s was not run: %v; pin fewer files", what, err)}, nil
	}
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
