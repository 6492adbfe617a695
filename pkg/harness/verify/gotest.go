package verify

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/initorigin/io-harness-go/pkg/sandbox"
)

// goEnv is the environment go runs with: offline, its own toolchain, no
// cgo, no go env file, the host's module cache to read, and the gate
// cache to write.
func (w *workdir) goEnv(goBin string) (env []string, writable []string) {
	cache := w.out("gocache")
	if w.env.CacheDir != "" {
		cache = filepath.Join(w.env.CacheDir, "go-build")
		writable = append(writable, cache)
	}
	os.MkdirAll(cache, 0o755)
	return w.goVars(goBin, cache), writable
}

// goVars is the environment of every go command a gate starts, and of the
// test binaries, with cache as GOCACHE. GOENV=off: the workspace is HOME,
// and a go env file in it could name a C compiler, a cache program or
// flags. CGO_ENABLED=0: C code could run before any Go code does.
func (w *workdir) goVars(goBin, cache string) []string {
	env := []string{
		"PATH=" + filepath.Dir(goBin) + ":/usr/local/bin:/usr/bin:/bin",
		"HOME=" + w.dir,
		"GOCACHE=" + cache,
		"GOPATH=" + w.out("gopath"),
		"GOENV=off", "CGO_ENABLED=0",
		"GOPROXY=off", "GOSUMDB=off", "GOTOOLCHAIN=local", "GOWORK=off", "GOFLAGS=-mod=mod -buildvcs=false",
	}
	// The toolchain and the module cache may be in the caller's home,
	// which the sandbox hides: they are shown, read-only.
	w.show = append(w.show, filepath.Dir(filepath.Dir(goBin)))
	if mc := w.modCache(); mc != "" {
		env = append(env, "GOMODCACHE="+mc)
		w.show = append(w.show, mc)
	}
	return env
}

// modCache is the host's Go module cache, read by offline builds.
func (w *workdir) modCache() string {
	if mc := w.getenv("GOMODCACHE"); mc != "" {
		return mc
	}
	if gp := w.getenv("GOPATH"); gp != "" {
		return filepath.Join(strings.Split(gp, string(os.PathListSeparator))[0], "pkg", "mod")
	}
	if home := w.getenv("HOME"); home != "" {
		return filepath.Join(home, "go", "pkg", "mod")
	}
	return ""
}

// weakening switches protections of the execution gates off. It exists
// for the negative controls of the gate tests, which show an attack
// succeeding once its protection is gone; the zero value is the real gate.
type weakening struct {
	// token, when set, is every report's token instead of a random one.
	token []byte
	// tokenInSource writes the token itself into the instrumented test
	// source, and leaves that source in the workdir while the tests run.
	tokenInSource bool
	// unbound, on the workspace itself, drops the binds of the gate's
	// files before the code under test runs: it may rewrite them.
	unbound bool
}

// goTest builds the test binaries of the package pattern and runs them.
// Each pinned test file is instrumented so that its tests report a pass
// on a channel the code under test cannot forge: see RATIONALE.md, "Why
// must every pinned Go test report a pass, not just `go test` exit 0?".
func goTest(ctx context.Context, w *workdir, c *Check) (Result, error) {
	return goGate(ctx, w, c, weakening{})
}

// goPackage is one object of `go list -json`.
type goPackage struct {
	ImportPath   string
	TestGoFiles  []string
	XTestGoFiles []string
}

// goBinary is a test binary the gate built.
type goBinary struct {
	path       string            // on the host
	importPath string            // of its package
	dir        string            // its package's directory, on the host
	files      []*goInstrumented // the pinned files whose tests it holds
	sum        [sha256.Size]byte // its content, token included
}

// goGate is goTest with the protections weak switches off.
func goGate(ctx context.Context, w *workdir, c *Check, weak weakening) (Result, error) {
	goBin, err := w.program("go")
	if err != nil {
		return Result{Detail: "not run: " + err.Error()}, nil
	}
	// A gate directory the workspace brought along (a planted test
	// binary) is not ours.
	if err := w.prepareGateDir(); err != nil {
		return Result{}, err
	}

	// Instrument the pinned test files in the gate's workdir; the
	// originals are put back before any code under test runs.
	var files []*goInstrumented
	for _, f := range c.Pin {
		if !strings.HasSuffix(f, "_test.go") {
			continue
		}
		in, err := instrumentGoTest(f, []byte(c.Pinned[f]), weak)
		if err != nil {
			return Result{Detail: err.Error()}, nil
		}
		if in == nil {
			continue // no test functions: nothing to report
		}
		files = append(files, in)
	}
	restore := func() error {
		for _, in := range files {
			if err := w.writeFile(in.file, []byte(c.Pinned[in.file])); err != nil {
				return err
			}
		}
		return nil
	}
	for _, in := range files {
		if err := w.writeFile(in.file, in.source); err != nil {
			return failed("go test -c", err)
		}
	}

	env, writable := w.goEnv(goBin)
	binaries, r, err := buildGoTests(ctx, w, c.Package, goBin, env, writable)
	if err != nil || binaries == nil {
		return r, err
	}
	if !weak.tokenInSource {
		if err := restore(); err != nil {
			return Result{}, err
		}
	}
	if d := placeTokens(binaries, files, weak); d != "" {
		return Result{Backend: r.Backend, Detail: d}, nil
	}
	if len(binaries) == 0 {
		return Result{Backend: r.Backend, Detail: fmt.Sprintf("go test %s: no package has test files", c.Package)}, nil
	}
	for _, in := range files {
		if d := shadowedPredeclared(w, in, []byte(c.Pinned[in.file])); d != "" {
			return Result{Backend: r.Backend, Detail: d}, nil
		}
	}
	if r, ok, err := replacedImports(ctx, w, files, c.Pinned, goBin, env, writable); !ok || err != nil {
		return r, err
	}

	if weak.unbound && w.overlay != nil {
		w.overlay.binds = nil
	}
	// The binaries with pinned tests run first; every one must pass.
	slices.SortStableFunc(binaries, func(a, b *goBinary) int { return len(b.files) - len(a.files) })
	runEnv := w.goVars(goBin, w.path(gateDir+"/gocache-tests"))
	tests := 0
	for _, b := range binaries {
		if r, err = runGoBinary(ctx, w, b, runEnv); err != nil || !r.Passed {
			return r, err
		}
		for _, in := range b.files {
			tests += len(in.tests)
		}
	}
	if len(files) == 0 {
		r.Detail = fmt.Sprintf("go test %s passed (%d test binaries exited 0; no pinned test file, so no test's pass is authenticated)", c.Package, len(binaries))
	} else {
		r.Detail = fmt.Sprintf("go test %s passed (%d pinned tests reported a pass; %d test binaries exited 0)", c.Package, tests, len(binaries))
	}
	return r, nil
}

// buildGoTests builds the test binaries of pattern, stripped, in one go
// command; when two packages would get the same binary name, in batches
// that `go list` makes. It returns nil binaries with the failed result
// when the build failed, and a non-nil empty slice when no package has
// tests.
func buildGoTests(ctx context.Context, w *workdir, pattern, goBin string, env, writable []string) ([]*goBinary, Result, error) {
	build := func(k int, pkgs []string) (string, *sandbox.Result, error) {
		out := w.out(fmt.Sprintf("bin/%d", k))
		argv := append([]string{goBin, "test", "-c", "-o", out + string(filepath.Separator), "-ldflags=-s -w"}, pkgs...)
		res, err := w.run(ctx, argv, env, writable...)
		return out, res, err
	}
	out, res, err := build(0, []string{pattern})
	if err != nil {
		r, err := failed("go test -c", err)
		return nil, r, err
	}
	dirs := []string{out}
	if res.ExitCode != 0 && bytes.Contains(res.Stderr, []byte("cannot write test binary")) && bytes.Contains(res.Stderr, []byte("for multiple packages")) {
		// Two packages share a binary name: build in batches.
		res, err = w.run(ctx, []string{goBin, "list", "-json=ImportPath,TestGoFiles,XTestGoFiles", pattern}, env, writable...)
		if err != nil {
			r, err := failed("go list", err)
			return nil, r, err
		}
		if r := outcome(res, "go list "+pattern); !r.Passed {
			return nil, r, nil
		}
		pkgs, err := decodePackages(res.Stdout)
		if err != nil {
			return nil, Result{Backend: res.Backend, Detail: "go list printed what the gate cannot read: " + err.Error()}, nil
		}
		dirs = nil
		for k, batch := range testBatches(pkgs) {
			var out string
			if out, res, err = build(k+1, batch); err != nil {
				r, err := failed("go test -c", err)
				return nil, r, err
			}
			if res.ExitCode != 0 {
				break
			}
			dirs = append(dirs, out)
		}
	}
	if r := outcome(res, "building the tests of "+pattern); !r.Passed {
		return nil, r, nil
	}
	binaries := []*goBinary{}
	for _, dir := range dirs {
		built, err := builtBinaries(w, dir)
		if err != nil {
			return nil, Result{Backend: res.Backend, Detail: "the built test binaries: " + err.Error()}, nil
		}
		binaries = append(binaries, built...)
	}
	return binaries, Result{Backend: res.Backend}, nil
}

// decodePackages reads the stream of JSON objects of `go list -json`.
func decodePackages(out []byte) ([]goPackage, error) {
	var pkgs []goPackage
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p goPackage
		if err := dec.Decode(&p); err == io.EOF {
			return pkgs, nil
		} else if err != nil {
			return nil, err
		}
		pkgs = append(pkgs, p)
	}
}

// testBatches groups the packages that have tests so that no two of a
// batch get the same test binary name, which `go test -c -o dir/` refuses.
func testBatches(pkgs []goPackage) [][]string {
	var batches [][]string
	var names []map[string]bool
	for _, p := range pkgs {
		if len(p.TestGoFiles)+len(p.XTestGoFiles) == 0 {
			continue
		}
		name := execName(p.ImportPath)
		i := slices.IndexFunc(names, func(m map[string]bool) bool { return !m[name] })
		if i < 0 {
			batches, names = append(batches, nil), append(names, map[string]bool{})
			i = len(batches) - 1
		}
		batches[i] = append(batches[i], p.ImportPath)
		names[i][name] = true
	}
	return batches
}

// execName is the name go gives a package's test binary, less ".test":
// the last element of the import path, or the one before a major
// version suffix such as v2 (cmd/go's DefaultExecName).
func execName(importPath string) string {
	dir, elem := path.Split(importPath)
	if elem != importPath && len(elem) >= 2 && elem[0] == 'v' && elem[1] != '0' && !(elem[1] == '1' && len(elem) == 2) &&
		strings.Trim(elem[1:], "0123456789") == "" {
		_, elem = path.Split(path.Clean(dir))
	}
	return elem
}

// builtBinaries reads the test binaries in dir. Each one's package is the
// import path its linker recorded, and the package's directory follows
// from the main module's path: go found the module's go.mod at the
// workdir's root.
func builtBinaries(w *workdir, dir string) ([]*goBinary, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil // no package had tests
	} else if err != nil {
		return nil, err
	}
	var out []*goBinary
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		info, err := buildinfo.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", e.Name(), err)
		}
		b := &goBinary{path: p, importPath: strings.TrimSuffix(info.Path, ".test"), dir: w.dir}
		if rel, ok := strings.CutPrefix(b.importPath, info.Main.Path+"/"); ok && filepath.IsLocal(rel) {
			b.dir = w.path(rel)
		}
		out = append(out, b)
	}
	return out, nil
}

// placeTokens finds each instrumented file's slot in the binaries, exactly
// once in exactly one of them, and writes its token there.
func placeTokens(binaries []*goBinary, files []*goInstrumented, weak weakening) string {
	found := make([]int, len(files))
	for _, b := range binaries {
		data, err := os.ReadFile(b.path)
		if err != nil {
			return "reading a test binary: " + err.Error()
		}
		changed := false
		for i, in := range files {
			needle := in.slot
			if weak.tokenInSource {
				needle = in.token
			}
			switch n := bytes.Count(data, needle); {
			case n == 0:
				continue
			case n > 1:
				return fmt.Sprintf("the test binary of %s holds the report slot of %s %d times: the gate cannot judge it", b.importPath, in.file, n)
			}
			found[i]++
			b.files = append(b.files, in)
			if !weak.tokenInSource {
				copy(data[bytes.Index(data, needle):], in.token)
				changed = true
			}
		}
		if changed {
			if err := os.WriteFile(b.path, data, 0o755); err != nil {
				return "writing a test binary: " + err.Error()
			}
		}
		b.sum = sha256.Sum256(data)
	}
	for i, in := range files {
		if found[i] != 1 {
			return fmt.Sprintf("the tests of the pinned file %s were not built: it is outside the package pattern, or a build constraint excludes it", in.file)
		}
	}
	return ""
}

// replacedImports refuses a build in which a package that a pinned file
// imports from outside the main module comes from a replaced module
// (go.mod's or go.work's replace): the judge's own tools (go-cmp, say)
// would then be code of the workspace's choosing. It asks `go list -m`
// only when a pinned file imports such a package.
func replacedImports(ctx context.Context, w *workdir, files []*goInstrumented, pinned map[string]string, goBin string, env, writable []string) (Result, bool, error) {
	var imports []string
	for _, in := range files {
		f, err := parser.ParseFile(token.NewFileSet(), in.file, pinned[in.file], parser.ImportsOnly)
		if err != nil {
			continue
		}
		for _, spec := range f.Imports {
			ip := strings.Trim(spec.Path.Value, "`\"")
			if first, _, _ := strings.Cut(ip, "/"); strings.Contains(first, ".") {
				imports = append(imports, in.file+"\x00"+ip)
			}
		}
	}
	if len(imports) == 0 {
		return Result{}, true, nil
	}
	res, err := w.run(ctx, []string{goBin, "list", "-m", "-json=Path,Main,Replace", "all"}, env, writable...)
	if err != nil {
		r, err := failed("go list -m", err)
		return r, false, err
	}
	if r := outcome(res, "go list -m all"); !r.Passed {
		return r, false, nil
	}
	var mods []goModule
	dec := json.NewDecoder(bytes.NewReader(res.Stdout))
	for {
		var m goModule
		if err := dec.Decode(&m); err == io.EOF {
			break
		} else if err != nil {
			return Result{Backend: res.Backend, Detail: "go list -m printed what the gate cannot read: " + err.Error()}, false, nil
		}
		mods = append(mods, m)
	}
	for _, fi := range imports {
		file, ip, _ := strings.Cut(fi, "\x00")
		var mod *goModule
		for i, m := range mods {
			if inModule(ip, m.Path) && (mod == nil || len(m.Path) > len(mod.Path)) {
				mod = &mods[i]
			}
		}
		if mod != nil && !mod.Main && mod.Replace != nil {
			return Result{Backend: res.Backend, Detail: fmt.Sprintf("the pinned test file %s imports %s, whose module %s the workspace replaces with %s: what a pinned test judges with must come from the module cache",
				file, ip, mod.Path, mod.Replace.Path)}, false, nil
		}
	}
	return Result{}, true, nil
}

// goModule is one object of `go list -m -json`.
type goModule struct {
	Path    string
	Main    bool
	Replace *struct{ Path string }
}

// inModule reports whether the package path p is in the module mod.
func inModule(p, mod string) bool { return p == mod || strings.HasPrefix(p, mod+"/") }

// runGoBinary runs one test binary in its package's directory and judges
// it: it must end on its own with exit code 0, and every pinned file it
// holds must have reported with its token.
func runGoBinary(ctx context.Context, w *workdir, b *goBinary, env []string) (Result, error) {
	dir := b.dir
	if info, err := os.Stat(dir); err != nil || !info.IsDir() {
		dir = w.dir
	}
	// The code an earlier binary ran could write this one.
	if data, err := os.ReadFile(b.path); err != nil || sha256.Sum256(data) != b.sum {
		return Result{Backend: w.env.Sandbox.Name(), Detail: fmt.Sprintf("the test binary of %s changed after the gate built it: the code an earlier test binary ran wrote it", b.importPath)}, nil
	}
	res, err := w.runSubject(ctx, dir, []string{b.path, "-test.paniconexit0"}, env, w.dir)
	if err != nil {
		return failed("the test binary", err)
	}
	what := "the tests of " + b.importPath
	reports, forged, text := readReports(res.Stdout)
	r := outcome(res, what)
	r.Output = boundTail(strings.TrimSpace(string(res.Stderr)) + "\n" + text)
	if forged > 0 {
		r.Passed = false
		r.Detail = fmt.Sprintf("%s printed %d gate report lines without this gate's token: the code under test forged them", what, forged)
		return r, nil
	}
	if !r.Passed {
		if f := failingGoTests(text); len(f) > 0 {
			r.Detail += "; failing: " + strings.Join(f, ", ")
		}
		return r, nil
	}
	want := map[string]bool{}
	for _, in := range b.files {
		want[hexToken(in.token)] = true
	}
	for _, tok := range reports {
		if !want[tok] {
			r.Passed = false
			r.Detail = fmt.Sprintf("%s printed a gate report whose token is not this gate's: the code under test forged it", what)
			return r, nil
		}
	}
	for _, in := range b.files {
		if !slices.Contains(reports, hexToken(in.token)) {
			r.Passed = false
			r.Detail = fmt.Sprintf("%s exited 0, but the tests of %s did not all report a pass (%s): each must run and return, and none may fail or skip",
				what, in.file, strings.Join(in.tests, ", "))
			return r, nil
		}
	}
	return r, nil
}

// reportMarker begins the line an instrumented test file prints, with its
// token, once every one of its tests has passed.
const reportMarker = "io-harness-gate-report"

// readReports takes the report lines out of a test binary's output: the
// tokens of well-formed ones, the number of others that claim to be one,
// and the rest of the output.
func readReports(out []byte) (tokens []string, forged int, text string) {
	var b strings.Builder
	for line := range strings.Lines(string(out)) {
		i := strings.Index(line, reportMarker)
		if i < 0 {
			b.WriteString(line)
			continue
		}
		tok, ok := strings.CutPrefix(strings.TrimSpace(line[i:]), reportMarker+" ")
		if !ok || len(tok) != 2*tokenSize || i > 0 {
			forged++
			continue
		}
		tokens = append(tokens, tok)
	}
	return tokens, forged, b.String()
}

// failingGoTests lists the tests a test binary's output says failed.
func failingGoTests(out string) []string {
	var names []string
	for line := range strings.Lines(out) {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "--- FAIL: "); ok {
			if name, _, ok := strings.Cut(rest, " "); ok && !strings.Contains(name, "/") && !slices.Contains(names, name) {
				names = append(names, name)
			}
		}
	}
	return names
}

// tokenSize is the number of random bytes in a report token.
const tokenSize = 32

func hexToken(tok []byte) string { return fmt.Sprintf("%x", tok) }

// goInstrumented is a pinned test file with its tests wrapped.
type goInstrumented struct {
	file   string   // workspace-relative slash path
	pkg    string   // its package clause
	source []byte   // the instrumented source
	tests  []string // the test functions it reports on
	// slot is what the built binary holds where the token goes: random
	// bytes, spelled in the source as escapes, so that a copy of the
	// source (go:embed) does not hold them.
	slot  []byte
	token []byte
}

// instrumentGoTest rewrites a pinned test file: every test function TestX
// is renamed, and a wrapper named TestX runs it and, from a t.Cleanup,
// notes whether it passed (the body returned, and the test neither failed
// nor skipped, subtests included). When every test of the file has
// passed and none failed, the file prints its report: the marker and the
// token. The generated code names no predeclared identifier (true, len,
// string, ...), which the package could redeclare, and its own names
// carry a random prefix, which the code under test cannot know.
//
// It returns nil for a file without test functions.
func instrumentGoTest(file string, src []byte, weak weakening) (*goInstrumented, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, fmt.Errorf("the pinned test file %s does not parse: %v", file, err)
	}
	var tests []*ast.FuncDecl
	for _, d := range f.Decls {
		if fn, ok := d.(*ast.FuncDecl); ok && isGoTest(fn) {
			tests = append(tests, fn)
		}
	}
	if len(tests) == 0 {
		return nil, nil
	}
	in := &goInstrumented{file: file, pkg: f.Name.Name, slot: make([]byte, tokenSize), token: weak.token}
	var id [8]byte
	rand.Read(id[:])
	rand.Read(in.slot)
	if in.token == nil {
		in.token = make([]byte, tokenSize)
		rand.Read(in.token)
	}
	p := fmt.Sprintf("ioHarnessGate%x_", id)

	// Edits, by offset: the imports after the package clause, and the
	// test functions' new names.
	type edit struct {
		at, end int
		text    string
	}
	off := func(pos token.Pos) int { return fset.Position(pos).Offset }
	edits := []edit{{off(f.Name.End()), off(f.Name.End()), fmt.Sprintf(`; import (%[1]stesting "testing"; %[1]sos "os"; %[1]ssync "sync"; %[1]sfmt "fmt")`, p)}}
	for _, fn := range tests {
		edits = append(edits, edit{off(fn.Name.Pos()), off(fn.Name.End()), p + fn.Name.Name})
		in.tests = append(in.tests, fn.Name.Name)
	}
	var b bytes.Buffer
	last := 0
	for _, e := range edits {
		b.Write(src[last:e.at])
		b.WriteString(e.text)
		last = e.end
	}
	b.Write(src[last:])

	lit := in.slot
	if weak.tokenInSource {
		lit = in.token
	}
	fmt.Fprintf(&b, "\n\n// The rest of this file is generated by io-harness for a go_test_passes gate.\n\n")
	fmt.Fprintf(&b, "var %stoken = \"", p)
	for _, c := range lit {
		fmt.Fprintf(&b, `\x%02x`, c)
	}
	fmt.Fprintf(&b, "\"\n\nvar %[1]smu %[1]ssync.Mutex\n\nvar %[1]stainted, %[1]sdone = 0 != 0, 0 != 0\n\n", p)
	for i := range tests {
		fmt.Fprintf(&b, "var %spassed%d = 0 != 0\n", p, i)
	}
	fmt.Fprintf(&b, "\nfunc %[1]sreport() {\n\tif %[1]stainted || %[1]sdone", p)
	for i := range tests {
		fmt.Fprintf(&b, " || !%spassed%d", p, i)
	}
	fmt.Fprintf(&b, " {\n\t\treturn\n\t}\n\t%[1]sdone = 0 == 0\n\t%[1]sos.Stdout.WriteString(\"\\n%[2]s \" + %[1]sfmt.Sprintf(\"%%x\", %[1]stoken) + \"\\n\")\n}\n", p, reportMarker)
	for i, fn := range tests {
		name := fn.Name.Name
		fmt.Fprintf(&b, `
func %[2]s(t *%[1]stesting.T) {
	%[1]sreturned := 0 != 0
	t.Cleanup(func() {
		if t.Name() != %[2]q {
			return
		}
		%[1]smu.Lock()
		defer %[1]smu.Unlock()
		if !%[1]sreturned || t.Failed() || t.Skipped() {
			%[1]stainted = 0 == 0
			return
		}
		%[1]spassed%[3]d = 0 == 0
		%[1]sreport()
	})
	%[1]s%[2]s(t)
	%[1]sreturned = 0 == 0
}
`, p, name, i)
	}
	in.source = b.Bytes()
	return in, nil
}

// isGoTest reports whether go test runs fn as a test: TestX(t *T) with no
// receiver or results, X not starting with a lower-case letter (cmd/go's
// isTest and isTestFunc).
func isGoTest(fn *ast.FuncDecl) bool {
	name := fn.Name.Name
	if fn.Recv != nil || fn.Body == nil || !strings.HasPrefix(name, "Test") {
		return false
	}
	if len(name) > 4 {
		if r, _ := utf8.DecodeRuneInString(name[4:]); unicode.IsLower(r) {
			return false
		}
	}
	ft := fn.Type
	if ft.TypeParams != nil || ft.Results != nil && len(ft.Results.List) > 0 || len(ft.Params.List) != 1 || len(ft.Params.List[0].Names) > 1 {
		return false
	}
	star, ok := ft.Params.List[0].Type.(*ast.StarExpr)
	if !ok {
		return false
	}
	switch x := star.X.(type) {
	case *ast.Ident:
		return x.Name == "T"
	case *ast.SelectorExpr:
		return x.Sel.Name == "T"
	}
	return false
}

// shadowedPredeclared refuses a package that redeclares a predeclared
// identifier (true, len, nil, int, ...) that the pinned file uses: the
// pinned test would then mean what the code under test says. Files that do
// not parse are left to the build.
func shadowedPredeclared(w *workdir, in *goInstrumented, pinned []byte) string {
	used := map[string]bool{}
	if f, err := parser.ParseFile(token.NewFileSet(), in.file, pinned, parser.SkipObjectResolution); err == nil {
		ast.Inspect(f, func(n ast.Node) bool {
			if id, ok := n.(*ast.Ident); ok && types.Universe.Lookup(id.Name) != nil {
				used[id.Name] = true
			}
			return true
		})
	}
	dir := path.Dir(in.file)
	entries, _ := os.ReadDir(w.path(dir))
	for _, e := range entries {
		name := path.Join(dir, e.Name())
		if !strings.HasSuffix(name, ".go") || name == in.file || !e.Type().IsRegular() {
			continue
		}
		src, err := w.readFile(name)
		if err != nil {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, src, parser.SkipObjectResolution)
		if err != nil || f.Name.Name != in.pkg {
			continue
		}
		for _, id := range topLevelNames(f) {
			if used[id] {
				return fmt.Sprintf("%s redeclares %q, which the pinned test file %s uses as Go's predeclared identifier: the gate refuses to let the code under test change what the test means", name, id, in.file)
			}
		}
	}
	return ""
}

// topLevelNames lists the package-level names a file declares.
func topLevelNames(f *ast.File) []string {
	var names []string
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil {
				names = append(names, d.Name.Name)
			}
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.ValueSpec:
					for _, n := range s.Names {
						names = append(names, n.Name)
					}
				case *ast.TypeSpec:
					names = append(names, s.Name.Name)
				}
			}
		}
	}
	return names
}

func boundTail(s string) string {
	s = strings.TrimSpace(s)
	if len(s) <= maxGateOutput {
		return s
	}
	cut := len(s) - maxGateOutput
	for cut < len(s) && s[cut]&0xC0 == 0x80 {
		cut++
	}
	return fmt.Sprintf("[... %d bytes cut ...]\n", cut) + s[cut:]
}

// command runs a caller's command in the gate's copy of the workspace.
func command(ctx context.Context, w *workdir, c *Check) (Result, error) {
	prog, err := w.program(c.Argv[0])
	if err != nil {
		return Result{Detail: "not run: " + err.Error()}, nil
	}
	argv := append([]string{prog}, c.Argv[1:]...)
	env := []string{"PATH=" + filepath.Dir(prog) + ":/usr/local/bin:/usr/bin:/bin", "HOME=" + w.dir}
	run := w.runSubject
	if c.Kind == WasmCommandSucceeds {
		run = w.runIn // the wasi backend mounts directories only
	} else {
		w.show = append(w.show, filepath.Dir(prog)) // in case the sandbox hides it
	}
	res, err := run(ctx, w.dir, argv, env)
	if err != nil {
		return failed(c.Argv[0], err)
	}
	return outcome(res, strings.Join(c.Argv, " ")), nil
}
