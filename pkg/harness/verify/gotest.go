package verify

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

var goTestFn = regexp.MustCompile(`(?m)^func\s+(Test[A-Za-z0-9_]*)\s*\(\s*\w+\s+\*testing\.T\s*\)`)

// goEnv is the environment go runs with: offline, its own toolchain, the
// host's module cache to read, and the gate cache to write.
func (w *workdir) goEnv(goBin string) (env []string, writable []string) {
	cache := filepath.Join(w.dir, ".io-harness-gate", "gocache")
	if w.env.CacheDir != "" {
		cache = filepath.Join(w.env.CacheDir, "go-build")
		writable = append(writable, cache)
	}
	os.MkdirAll(cache, 0o755)
	env = []string{
		"PATH=" + filepath.Dir(goBin) + ":/usr/local/bin:/usr/bin:/bin",
		"HOME=" + w.dir,
		"GOCACHE=" + cache,
		"GOPATH=" + filepath.Join(w.dir, ".io-harness-gate", "gopath"),
		"GOPROXY=off", "GOSUMDB=off", "GOTOOLCHAIN=local", "GOWORK=off", "GOFLAGS=-mod=mod -buildvcs=false",
	}
	if mc := w.modCache(); mc != "" {
		env = append(env, "GOMODCACHE="+mc)
	}
	return env, writable
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

// testEvent is one line of `go test -json`.
type testEvent struct {
	Action  string
	Package string
	Test    string
	Output  string
}

// goTest runs `go test -json` in the gate's copy of the workspace. The
// test functions of the pinned test files must each report a pass: a
// TestMain that exits without running them, or a test file the agent
// rewrote, does not pass.
func goTest(ctx context.Context, w *workdir, c *Check) (Result, error) {
	goBin, err := w.program("go")
	if err != nil {
		return Result{Detail: "not run: " + err.Error()}, nil
	}
	var want []string
	for _, f := range c.Pin {
		if !strings.HasSuffix(f, "_test.go") {
			continue
		}
		for _, m := range goTestFn.FindAllStringSubmatch(c.Pinned[f], -1) {
			want = append(want, m[1])
		}
	}
	env, writable := w.goEnv(goBin)
	res, err := w.run(ctx, []string{goBin, "test", "-count=1", "-json", c.Package}, env, writable...)
	if err != nil {
		return failed("go test", err)
	}
	r := outcome(res, "go test "+c.Package)
	passed, failedTests, text := parseTestJSON(res.Stdout)
	r.Output = boundTail(strings.TrimSpace(string(res.Stderr)) + "\n" + text)
	if !r.Passed {
		if len(failedTests) > 0 {
			r.Detail += "; failing: " + strings.Join(failedTests, ", ")
		}
		return r, nil
	}
	var missing []string
	for _, name := range want {
		if !slices.Contains(passed, name) {
			missing = append(missing, name)
		}
	}
	switch {
	case len(missing) > 0:
		r.Passed, r.Detail = false, fmt.Sprintf("go test exited 0, but these tests did not run and pass: %s", strings.Join(missing, ", "))
	case len(passed) == 0:
		r.Passed, r.Detail = false, "go test exited 0, but no test ran"
	default:
		r.Detail = fmt.Sprintf("go test %s passed (%d tests)", c.Package, len(passed))
	}
	return r, nil
}

// parseTestJSON reads `go test -json` output: the top-level tests that
// passed and failed, and the output worth showing (that of failures and
// build errors).
func parseTestJSON(out []byte) (passed, failed []string, text string) {
	var b strings.Builder
	outputs := map[string]*strings.Builder{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		var e testEvent
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			b.WriteString(sc.Text() + "\n") // build errors are not JSON
			continue
		}
		top := e.Test != "" && !strings.Contains(e.Test, "/")
		switch e.Action {
		case "output":
			key := e.Package + " " + e.Test
			if outputs[key] == nil {
				outputs[key] = &strings.Builder{}
			}
			outputs[key].WriteString(e.Output)
		case "pass":
			if top {
				passed = append(passed, e.Test)
			}
		case "fail":
			if top {
				failed = append(failed, e.Test)
			}
			if o := outputs[e.Package+" "+e.Test]; o != nil {
				b.WriteString(o.String())
			}
		}
	}
	return passed, failed, b.String()
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
	res, err := w.run(ctx, argv, env)
	if err != nil {
		return failed(c.Argv[0], err)
	}
	return outcome(res, strings.Join(c.Argv, " ")), nil
}
