package wasi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/tetratelabs/wazero/sys"

	"github.com/initorigin/io-harness-go/pkg/sandbox"
)

// rawGuest runs the test guest with args through wazero's own API: its
// directory mount at / and /tmp, and no cap of ours. It returns the exit
// code and stdout. It uses wazero's interpreter, which compiles the guest
// at once where the compiler takes seconds under the race detector.
func rawGuest(t testing.TB, ctx context.Context, wd, wasm string, args ...string) (int, string) {
	t.Helper()
	b, err := os.ReadFile(wasm)
	if err != nil {
		t.Fatal(err)
	}
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter().WithCloseOnContextDone(true))
	defer rt.Close(context.Background())
	wasi_snapshot_preview1.MustInstantiate(ctx, rt)
	tmp := filepath.Join(wd, ".tmp")
	os.Mkdir(tmp, 0o700)
	var out bytes.Buffer
	cfg := wazero.NewModuleConfig().WithArgs(append([]string{"guest"}, args...)...).WithStdout(&out).WithStderr(&out).
		WithFSConfig(wazero.NewFSConfig().WithDirMount(wd, "/").WithDirMount(tmp, "/tmp")).
		WithSysWalltime().WithSysNanotime().WithNanosleep(sleeper(ctx.Done())).WithEnv("PWD", "/")
	_, err = rt.InstantiateWithConfig(ctx, b, cfg)
	var ee *sys.ExitError
	if err == nil {
		return 0, out.String()
	}
	if !errors.As(err, &ee) {
		t.Fatalf("raw guest: %v\n%s", err, out.String())
	}
	return int(ee.ExitCode()), out.String()
}

// TestOpenFilesCap is the attack on the host's descriptors from one run:
// a guest opens a file a thousand times and holds every descriptor.
// Through the backend the run's OpenFiles cap stops it with EMFILE, the
// three standard descriptors counted as in a native process. The
// negative control runs the same guest through wazero's own API, which
// gives it every one.
func TestOpenFilesCap(t *testing.T) {
	code, out := rawGuest(t, context.Background(), realTempDir(t), guest(t), "openmany", "1000")
	if code != escaped || !strings.Contains(out, "held 1000 ") {
		t.Fatalf("control: through wazero's own API the guest did not hold 1000 files (exit %d): %s; the case proves nothing", code, out)
	}

	sb := newSandbox(t, nil)
	for _, tt := range []struct {
		openFiles int
		want      string
		code      int
	}{
		// The descriptor table: stdin, stdout, stderr, the preopened / and
		// /tmp, and the files.
		{40, "held 35 errno EMFILE", contained},
		{0, "held 507 errno EMFILE", contained}, // the default, 512
		{2000, "held 1000 errno none", escaped},
	} {
		res := attempt(t, sb, sandbox.Spec{Limits: sandbox.Limits{OpenFiles: tt.openFiles}}, "openmany", "1000")
		if res.ExitCode != tt.code || !strings.Contains(string(res.Stdout), tt.want) {
			t.Errorf("open_files %d: exit %d, stdout %q, stderr %q; want %d and %q", tt.openFiles, res.ExitCode, res.Stdout, res.Stderr, tt.code, tt.want)
		}
		if res.CapHit != sandbox.CapNone || !res.Enforced.OpenFiles {
			t.Errorf("open_files %d: cap %q, enforced %v; the guest sees EMFILE, the run goes on, and the cap is enforced", tt.openFiles, res.CapHit, res.Enforced.OpenFiles)
		}
	}
}

// TestSandboxDescriptorBudget checks the Sandbox-wide budget: however high
// a spec sets OpenFiles, the guests of all runs together hold at most the
// budget, and a guest past it gets ENFILE. Runs that end give their
// descriptors back.
func TestSandboxDescriptorBudget(t *testing.T) {
	sb := newSandbox(t, nil)
	sb.(*wasiSandbox).fds.limit = 50
	spec := sandbox.Spec{Limits: sandbox.Limits{OpenFiles: 100000}}
	for i := range 2 {
		// The guest's / and /tmp hold a host descriptor each once used.
		res := attempt(t, sb, spec, "openmany", "1000")
		if res.ExitCode != contained || !strings.Contains(string(res.Stdout), "held 48 errno ENFILE") {
			t.Errorf("run %d: exit %d, stdout %q; want %d and 48 held before ENFILE", i, res.ExitCode, res.Stdout, contained)
		}
	}
	if n := sb.(*wasiSandbox).fds.used.Load(); n != 0 {
		t.Errorf("%d descriptors still counted after the runs", n)
	}
}

// TestHostKeepsDescriptors runs the attack where it can exhaust the
// host: in a child process whose RLIMIT_NOFILE is 256, a guest opens
// files until it cannot, then holds them while the host opens a file.
// Through wazero's own API (the negative control) the host's open fails
// with EMFILE. Through the backend, with OpenFiles far above the process
// limit, the guest stops at half of it with ENFILE and the host's open
// succeeds.
func TestHostKeepsDescriptors(t *testing.T) {
	if runtime.GOOS != "linux" && runtime.GOOS != "darwin" {
		t.Skip("the child lowers RLIMIT_NOFILE, which this OS does not have")
	}
	guest(t)
	ctl, crashed, out := rssRun(t, rssJob{Mode: "fds-raw", Wasm: guest(t), NoFile: 256})
	if crashed {
		t.Fatalf("the control child died: %s", out)
	}
	if !strings.Contains(ctl.HostOpen, "too many open files") {
		t.Fatalf("control: the guest said %q and the host's open %q; want the guest stopped by the process limit and the host refused",
			ctl.Stdout, ctl.HostOpen)
	}
	t.Logf("control: guest %q; host open: %s", strings.TrimSpace(ctl.Stdout), ctl.HostOpen)

	rep, crashed, out := rssRun(t, rssJob{Mode: "fds-backend", Wasm: guest(t), NoFile: 256, CacheDir: filepath.Join(builtDir(t), "cache")})
	if crashed {
		t.Fatalf("the backend child died: %s", out)
	}
	// The budget is 128, half the limit: the guest's marker and the
	// mounted directories it used (/, /tmp and the workdir's host path)
	// take up to four of them.
	var held int
	if _, err := fmt.Sscanf(rep.Stdout, "held %d errno ENFILE", &held); err != nil || held < 128-4 || held > 128-1 || rep.HostOpen != "ok" {
		t.Errorf("backend: the guest said %q and the host's open %q; want 124 to 127 held, ENFILE, and the host's open ok", rep.Stdout, rep.HostOpen)
	}
}

// fdsChild runs job's guest "exhaust" under RLIMIT_NOFILE job.NoFile,
// opens a file on the host while the guest holds its files, and reports
// both: what the guest wrote to its marker file, and the host's open.
func fdsChild(job rssJob, rep *rssReport) error {
	if err := setNoFile(job.NoFile); err != nil {
		return err
	}
	wd, err := os.MkdirTemp("", "io-harness-wasi-fds-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(wd)
	// The host opens the marker first: once the guest holds every
	// descriptor the process has, the host could not open it to look.
	mark, err := os.Create(filepath.Join(wd, "marker"))
	if err != nil {
		return err
	}
	defer mark.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan string, 1)
	switch job.Mode {
	case "fds-raw":
		go func() {
			_, out := rawGuest(panicTB{}, ctx, wd, job.Wasm, "exhaust", "marker")
			done <- out
		}()
	case "fds-backend":
		sb, err := New(ctx, &Options{CacheDir: job.CacheDir})
		if err != nil {
			return err
		}
		defer sb.(io.Closer).Close()
		go func() {
			var out string
			res, err := sb.Run(ctx, &sandbox.Spec{Argv: []string{job.Wasm, "exhaust", "marker"}, Workdir: wd,
				Limits: sandbox.Limits{OpenFiles: 100000}})
			if res != nil {
				out = string(res.Stdout)
			} else if !errors.Is(err, context.Canceled) {
				out = err.Error()
			}
			done <- out
		}()
	}
	// Wait for the guest to hold its files; then the host opens one.
	for {
		b := make([]byte, 100)
		if n, _ := mark.ReadAt(b, 0); strings.HasSuffix(string(b[:n]), "\n") {
			rep.Stdout = string(b[:n])
			break
		}
		select {
		case out := <-done:
			rep.Stdout = out
			return errors.New("the guest ended before it held its files")
		case <-time.After(10 * time.Millisecond):
		}
	}
	if f, err := os.Open(os.DevNull); err != nil {
		rep.HostOpen = err.Error()
	} else {
		rep.HostOpen = "ok"
		f.Close()
	}
	cancel()
	<-done
	return nil
}

// panicTB lets rawGuest run outside a test: a failure panics.
type panicTB struct{ testing.TB }

func (panicTB) Helper()                   {}
func (panicTB) Fatal(args ...any)         { panic(args) }
func (panicTB) Fatalf(f string, a ...any) { panic(f) }
