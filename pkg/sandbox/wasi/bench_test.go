package wasi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"

	"github.com/initorigin/io-harness-go/pkg/sandbox"
)

// childEnv, when set, makes the test binary a benchmark child: it runs
// one module in a new Sandbox on the disk cache the parent filled, prints
// how long Run took and exits. Its value is a childJob in JSON.
const childEnv = "IOH_WASI_BENCH_CHILD"

type childJob struct {
	Argv     []string `json:"argv"`
	CacheDir string   `json:"cache_dir"`
	Workdir  string   `json:"workdir"`
}

// benchChild is the child's main: it reports "run <nanoseconds>" on
// stdout, and exits 0 when the module ran and exited 0.
func benchChild() int {
	var job childJob
	if err := json.Unmarshal([]byte(os.Getenv(childEnv)), &job); err != nil {
		fmt.Fprintln(os.Stderr, "bench child:", err)
		return 2
	}
	sb, err := New(context.Background(), &Options{CacheDir: job.CacheDir})
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench child:", err)
		return 2
	}
	defer sb.(io.Closer).Close()
	start := time.Now()
	res, err := sb.Run(context.Background(), &sandbox.Spec{Argv: job.Argv, Workdir: job.Workdir})
	d := time.Since(start)
	if err != nil || res.ExitCode != 0 {
		fmt.Fprintln(os.Stderr, "bench child:", err, res)
		return 1
	}
	fmt.Printf("run %d\n", d.Nanoseconds())
	return 0
}

// BenchmarkModuleStartup measures starting a large real module four ways,
// in the same run, against a native build of the same program, and what
// checking the module's shape costs (check-ms, part of every cold and
// disk run):
//
//   - cold: a new Sandbox with an empty disk cache (read, hash, compile,
//     instantiate, run);
//   - inproc: a second Run on the same Sandbox (the compiled module is
//     reused: read, hash, instantiate, run);
//   - disk: a new process (this test binary, re-executed) whose new
//     Sandbox finds the compiled code in the disk cache the cold run
//     wrote; reported for the whole process and for its Run alone;
//   - native: exec of the program built for this machine.
//
// Each figure is the median over b.N rounds, in milliseconds, with the
// ratios of each to native. Run it with -benchtime=Nx (each cold round
// compiles for seconds).
func BenchmarkModuleStartup(b *testing.B) {
	type module struct {
		name         string
		wasm, native func(b *testing.B) string
		args         []string
	}
	modules := []module{
		{
			name:   "go-vet",
			wasm:   func(b *testing.B) string { return goBuild(b, "cmd/vet", "wasip1", "wasm") },
			native: func(b *testing.B) string { return goBuild(b, "cmd/vet", runtime.GOOS, runtime.GOARCH) },
			args:   []string{"-flags"}, // initialises every analyzer and prints their flags
		},
		{
			name: "flite",
			wasm: func(b *testing.B) string { return fliteWasm(b) },
			native: func(b *testing.B) string {
				p, err := exec.LookPath("flite")
				if err != nil {
					b.Logf("no native flite on PATH (Debian: apt-get install flite); no native figure")
				}
				return p
			},
			args: []string{"-t", "Hello from the WebAssembly sandbox.", "out.wav"},
		},
	}
	for _, m := range modules {
		b.Run(m.name, func(b *testing.B) {
			wasm := m.wasm(b)
			native := m.native(b)
			fi, err := os.Stat(wasm)
			if err != nil {
				b.Fatal(err)
			}
			argv := append([]string{wasm}, m.args...)
			module, err := os.ReadFile(wasm)
			if err != nil {
				b.Fatal(err)
			}
			var diskCPU []time.Duration
			var cold, inproc, diskProc, diskRun, nat, check []time.Duration
			for i := 0; i < b.N; i++ {
				start := time.Now()
				if _, err := inspect(module); err != nil {
					b.Fatal(err)
				}
				check = append(check, time.Since(start))

				wd := b.TempDir()
				cache := filepath.Join(b.TempDir(), "cache")
				sb, err := New(context.Background(), &Options{CacheDir: cache})
				if err != nil {
					b.Fatal(err)
				}
				cold = append(cold, timeRun(b, sb, argv, wd))
				inproc = append(inproc, timeRun(b, sb, argv, wd))
				sb.(io.Closer).Close()

				p, r, c := timeChild(b, childJob{Argv: argv, CacheDir: cache, Workdir: wd})
				diskProc, diskRun, diskCPU = append(diskProc, p), append(diskRun, r), append(diskCPU, c)

				if native != "" {
					start := time.Now()
					cmd := exec.Command(native, m.args...)
					cmd.Dir = wd
					if out, err := cmd.CombinedOutput(); err != nil {
						b.Fatalf("native %s: %v\n%s", native, err, out)
					}
					nat = append(nat, time.Since(start))
				}
			}
			ms := func(ds []time.Duration) float64 {
				slices.Sort(ds)
				return float64(ds[len(ds)/2]) / float64(time.Millisecond)
			}
			b.ReportMetric(float64(fi.Size())/(1<<20), "module-MiB")
			b.ReportMetric(ms(cold), "cold-ms")
			b.ReportMetric(ms(inproc), "inproc-ms")
			b.ReportMetric(ms(diskProc), "disk-newproc-ms")
			b.ReportMetric(ms(diskRun), "disk-run-ms")
			// The new process's CPU time, user and system: steadier than
			// its wall time on a loaded machine.
			b.ReportMetric(ms(diskCPU), "disk-newproc-cpu-ms")
			b.ReportMetric(ms(cold)/ms(inproc), "cold/inproc")
			b.ReportMetric(ms(cold)/ms(diskRun), "cold/disk-run")
			// What checking the module's shape (shape.go) adds to every
			// load that is not from the in-process cache.
			b.ReportMetric(ms(check), "check-ms")
			b.ReportMetric(ms(check)/ms(diskRun), "check/disk-run")
			if len(nat) > 0 {
				n := ms(nat)
				b.ReportMetric(n, "native-ms")
				b.ReportMetric(ms(cold)/n, "cold/native")
				b.ReportMetric(ms(diskProc)/n, "disk-newproc/native")
				b.ReportMetric(ms(inproc)/n, "inproc/native")
			}
		})
	}
}

// timeRun times one Run of argv, which must exit 0.
func timeRun(b *testing.B, sb sandbox.Sandbox, argv []string, wd string) time.Duration {
	b.Helper()
	start := time.Now()
	res, err := sb.Run(context.Background(), &sandbox.Spec{Argv: argv, Workdir: wd})
	d := time.Since(start)
	if err != nil {
		b.Fatal(err)
	}
	if res.ExitCode != 0 {
		b.Fatalf("%s: exit %d cap %q\n%s", argv[0], res.ExitCode, res.CapHit, res.Stderr)
	}
	return d
}

// timeChild runs job in a new process of this test binary, bounded to two
// minutes and always reaped, and returns the process's wall time, the
// time its Run took, and the process's CPU time.
func timeChild(b *testing.B, job childJob) (proc, run, cpu time.Duration) {
	b.Helper()
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	j, err := json.Marshal(job)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+string(j))
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err = cmd.Run() // Run waits: the child is reaped on every path
	proc = time.Since(start)
	if err != nil {
		b.Fatalf("bench child: %v\n%s%s", err, out.String(), errb.String())
	}
	cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	var ns int64
	if _, err := fmt.Sscanf(out.String(), "run %d", &ns); err != nil {
		b.Fatalf("bench child printed %q: %v", out.String(), err)
	}
	return proc, time.Duration(ns), cpu
}

// BenchmarkCheckOverhead measures what checking a module (shape.go) adds
// to loading it from wazero's disk cache, the path of every first run in
// a new process: wazero's own load of the file as it is, against the
// check and the load of what the check hands wazero, alternated in the
// same run. It reports the median of each and their ratio.
func BenchmarkCheckOverhead(b *testing.B) {
	modules := map[string]func(b *testing.B) string{
		"go-vet": func(b *testing.B) string { return goBuild(b, "cmd/vet", "wasip1", "wasm") },
		"flite":  func(b *testing.B) string { return fliteWasm(b) },
	}
	for _, name := range []string{"go-vet", "flite"} {
		b.Run(name, func(b *testing.B) {
			orig, err := os.ReadFile(modules[name](b))
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			dir := b.TempDir()
			load := func(check bool) time.Duration {
				cache, err := wazero.NewCompilationCacheWithDir(dir)
				if err != nil {
					b.Fatal(err)
				}
				defer cache.Close(ctx)
				rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCompilationCache(cache))
				defer rt.Close(ctx)
				start := time.Now()
				m := orig
				if check {
					sh, err := inspect(orig)
					if err != nil {
						b.Fatal(err)
					}
					m = sh.wasm
				}
				if _, err := rt.CompileModule(ctx, m); err != nil {
					b.Fatal(err)
				}
				return time.Since(start)
			}
			load(false) // fill the disk cache with both forms
			load(true)
			var plain, checked []time.Duration
			for i := 0; i < b.N; i++ {
				plain = append(plain, load(false))
				checked = append(checked, load(true))
			}
			ms := func(ds []time.Duration) float64 {
				slices.Sort(ds)
				return float64(ds[len(ds)/2]) / float64(time.Millisecond)
			}
			b.ReportMetric(ms(plain), "wazero-load-ms")
			b.ReportMetric(ms(checked), "checked-load-ms")
			b.ReportMetric(ms(checked)/ms(plain), "checked/wazero")
		})
	}
}
