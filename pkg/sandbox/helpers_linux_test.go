package sandbox

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// built holds what the tests build once per test binary: the helper
// executable. It is removed by TestMain.
var built struct {
	once   sync.Once
	dir    string
	helper string
	err    error
}

// helperPath builds cmd/io-harness-sandbox-exec (with cgo, statically)
// into a temporary directory, once, and returns its path.
func helperPath() (string, error) {
	built.once.Do(func() {
		// A helper built beforehand, for runs where this user cannot build
		// (an unprivileged test run without a Go cache of its own).
		if p := os.Getenv("IOH_TEST_HELPER"); p != "" {
			built.helper = p
			return
		}
		goBin, err := exec.LookPath("go")
		if err != nil {
			built.err = err
			return
		}
		built.dir, built.err = os.MkdirTemp("", "io-harness-helper-")
		if built.err != nil {
			return
		}
		out := filepath.Join(built.dir, helperName)
		cmd := exec.Command(goBin, "build", "-tags", "netgo,osusergo",
			"-ldflags=-s -w -linkmode=external -extldflags=-static", "-o", out,
			"github.com/initorigin/io-harness-go/cmd/io-harness-sandbox-exec")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
		if b, err := cmd.CombinedOutput(); err != nil {
			built.err = &buildError{out: string(b), err: err}
			return
		}
		built.helper = out
	})
	return built.helper, built.err
}

// buildHelper is helperPath, skipping the test when the helper cannot be
// built here.
func buildHelper(t *testing.T) string {
	t.Helper()
	path, err := helperPath()
	if err != nil {
		t.Skipf("cannot build the helper executable: %v", err)
	}
	return path
}

type buildError struct {
	out string
	err error
}

func (e *buildError) Error() string { return e.err.Error() + ": " + e.out }

func removeBuilt() {
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
}

// named is a Sandbox with the label a test reports it under and the
// options that made it.
type named struct {
	label string
	opts  Options
	sb    Sandbox
}

// with reopens n's backend with an observer.
func (n named) with(t *testing.T, observer func(Event)) Sandbox {
	t.Helper()
	o := n.opts
	o.Observer = observer
	sb, err := New(context.Background(), &o)
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := n.sb.(pinned); ok {
		return pinned{sb, p.pin, p.host}
	}
	return sb
}

// linuxSandboxes opens every Linux backend (the ns rung twice: in-process
// and through the helper), each wrapped so that its results claim at
// least what the claims table pins for this kind of host. A backend the
// table says must start here and that does not fails the test; one it
// lets off is logged and left out.
func linuxSandboxes(t *testing.T, withHost bool) []named {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("the Linux backends run on Linux only")
	}
	type want struct {
		label string
		opts  Options
	}
	h := thisHost()
	helper, helperErr := helperPath()
	wants := []want{
		{BackendLinuxNS, Options{Backend: BackendLinuxNS}},
		{BackendLinuxNS + "+helper", Options{Backend: BackendLinuxNS, HelperPath: helper}},
		{BackendLinuxLandlock, Options{Backend: BackendLinuxLandlock}},
		{BackendBwrap, Options{Backend: BackendBwrap}},
		{BackendFloor, Options{Backend: BackendFloor}},
	}
	if withHost {
		wants = append(wants, want{BackendHost, Options{Backend: BackendHost}})
	}
	var out []named
	for _, w := range wants {
		p := pinFor(t, w.label, h)
		if w.label == BackendLinuxNS+"+helper" && helperErr != nil {
			if p.starts {
				t.Fatalf("the helper must build on this host (%s): %v", h, helperErr)
			}
			t.Logf("skipping %s: the helper could not be built: %v", w.label, helperErr)
			continue
		}
		sb, err := New(context.Background(), &w.opts)
		if err != nil && p.starts {
			t.Fatalf("%s must start on this host (%s), says the claims table: %v", w.label, h, err)
		}
		if err != nil {
			t.Logf("skipping %s, which need not start on this host (%s): %v", w.label, h, err)
			continue
		}
		out = append(out, named{w.label, w.opts, pinned{sb, p, h}})
	}
	return out
}

// TestHelperBesideExecutable builds a program without cgo and checks that
// it uses the helper only from beside itself, never from PATH.
func TestHelperBesideExecutable(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the helper is Linux only")
	}
	helper := buildHelper(t)
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to build the fixture with")
	}
	dir, onPath := t.TempDir(), t.TempDir()
	prog := filepath.Join(dir, "nocgo")
	build := exec.Command(goBin, "build", "-o", prog, "./testdata/nocgo")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the fixture: %v\n%s", err, out)
	}
	copyFile := func(to string) {
		b, err := os.ReadFile(helper)
		if err == nil {
			err = os.WriteFile(to, b, 0o755)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	run := func() (backend string, enf Enforcement) {
		cmd := exec.Command(prog)
		cmd.Env = []string{"PATH=" + onPath + ":/usr/bin:/bin"}
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		var got struct {
			Backend string      `json:"backend"`
			Enf     Enforcement `json:"enforced"`
		}
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		return got.Backend, got.Enf
	}
	// A helper on PATH only: not used.
	copyFile(filepath.Join(onPath, helperName))
	backend, enf := run()
	if backend == BackendLinuxNS || len(enf.Fallbacks) == 0 || !strings.Contains(enf.Fallbacks[0].Reason, helperName) {
		t.Errorf("with the helper on PATH only: backend %s, fallbacks %+v; want linux-ns skipped for want of the helper", backend, enf.Fallbacks)
	}
	// Beside the executable: used.
	copyFile(filepath.Join(dir, helperName))
	backend, enf = run()
	if backend != BackendLinuxNS || enf.Spawner != "helper" {
		t.Errorf("with the helper beside the program: backend %s, spawner %s, fallbacks %+v; want linux-ns through the helper",
			backend, enf.Spawner, enf.Fallbacks)
	}
}
