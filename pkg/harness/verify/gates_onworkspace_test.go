package verify

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/initorigin/io-harness-go/pkg/sandbox"
)

// recorder is a sandbox that notes every command it runs: its argv, its
// workdir and the CPU time it took.
type recorder struct {
	sandbox.Sandbox
	mu   sync.Mutex
	runs []recorded
}

type recorded struct {
	argv    []string
	workdir string
	cpu     sandbox.Duration
}

func (r *recorder) Run(ctx context.Context, spec *sandbox.Spec) (*sandbox.Result, error) {
	res, err := r.Sandbox.Run(ctx, spec)
	rec := recorded{argv: spec.Argv, workdir: spec.Workdir}
	if res != nil {
		rec.cpu = res.CPU
	}
	r.mu.Lock()
	r.runs = append(r.runs, rec)
	r.mu.Unlock()
	return res, err
}

// gateRun validates c and runs it, failing the test on the sandbox's error.
func gateRun(t *testing.T, env *Env, c Check) Result {
	t.Helper()
	if c.Limits == (sandbox.Limits{}) {
		c.Limits = gateLimits
	}
	if err := c.Validate(""); err != nil {
		t.Fatal(err)
	}
	r, err := Run(context.Background(), env, &c)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// manyFiles adds n small files in n/100 directories to files.
func manyFiles(files map[string]string, n int) map[string]string {
	for i := range n {
		files[fmt.Sprintf("data/d%03d/f%05d.txt", i/100, i)] = strings.Repeat("x", 64)
	}
	return files
}

// tree is every file and directory under dir, with its content (files)
// or "/" (directories), and where each link points.
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			out[rel] = "-> " + target
		case d.IsDir():
			out[rel] = "/"
		default:
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[rel] = string(data)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// The Go and Rust gates on an Overlay sandbox run on the workspace
// itself: every command's workdir is the workspace, whatever its size, a
// Go test binary runs in its package's directory there, and it sees
// what a copy leaves out (node_modules). The control: the same gates on
// a sandbox that claims no overlay run in a copy, and the same tests fail.
func TestGoAndRustGatesOnTheWorkspace(t *testing.T) {
	need(t, "go")
	need(t, "rustc")
	for _, way := range []string{"overlay", "copy"} {
		t.Run(way, func(t *testing.T) {
			files := manyFiles(map[string]string{"go.mod": goMod, "calc.go": rightCalc, "node_modules/dep/index.js": "x\n", "sub/testdata/in.txt": "in\n"}, 5000)
			env := execEnv(t, files, warmCache(t))
			dir, _ := filepath.Abs(env.Root.Name())
			dir, _ = filepath.EvalSymlinks(dir)
			rec := &recorder{Sandbox: env.Sandbox}
			env.Sandbox = rec
			if way == "copy" {
				env.Sandbox = noOverlay{rec}
			} else if !rec.Enforcement().Overlay {
				t.Fatalf("%s holds no changes apart here; linux-ns does on this kernel", rec.Name())
			}
			goTest := fmt.Sprintf("package sub\n\nimport (\n\t\"os\"\n\t\"path/filepath\"\n\t\"testing\"\n)\n\n"+
				"func TestWhere(t *testing.T) {\n\twd, _ := os.Getwd()\n\tif wd != %q {\n\t\tt.Fatalf(\"in %%s\", wd)\n\t}\n"+
				"\tif _, err := os.Stat(filepath.Join(\"..\", \"node_modules\", \"dep\", \"index.js\")); err != nil {\n\t\tt.Fatal(err)\n\t}\n"+
				"\tif b, err := os.ReadFile(\"testdata/in.txt\"); err != nil || string(b) != \"in\\n\" {\n\t\tt.Fatal(err)\n\t}\n}\n", filepath.Join(dir, "sub"))
			rustTest := fmt.Sprintf("#[test]\nfn where_() {\n    assert_eq!(std::env::current_dir().unwrap(), std::path::PathBuf::from(%q));\n    assert!(std::path::Path::new(\"node_modules/dep/index.js\").exists());\n}\n", dir)
			if err := os.WriteFile(filepath.Join(dir, "lib.rs"), []byte("pub fn one() -> u8 { 1 }\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			g := gateRun(t, env, Check{Kind: GoTestPasses, Package: "./sub", Pin: []string{"sub/sub_test.go"}, Pinned: map[string]string{"sub/sub_test.go": goTest}})
			r := gateRun(t, env, Check{Kind: RustTestPasses, File: "lib.rs", Test: rustTest})
			for _, run := range rec.runs {
				if onWorkspace := run.workdir == dir; onWorkspace != (way == "overlay") {
					t.Errorf("%s ran in %s", filepath.Base(run.argv[0]), run.workdir)
				}
			}
			if way == "overlay" {
				if !g.Passed || !r.Passed {
					t.Errorf("on the workspace itself: go %v (%s)\n%s\nrust %v (%s)\n%s", g.Passed, g.Detail, g.Output, r.Passed, r.Detail, r.Output)
				}
				return
			}
			if g.Passed || r.Passed {
				t.Errorf("control: on a copy the gates should not see the workspace: go %v, rust %v", g.Passed, r.Passed)
			}
		})
	}
}

// A file the read policy refuses is not readable to a Go test nor to a
// Rust include_str!, on the workspace itself; the output does not show
// it. The control: with no read policy (Visible nil) both read it.
func TestGatesReadPolicyOnTheWorkspace(t *testing.T) {
	need(t, "go")
	need(t, "rustc")
	const secret = "hunter2-in-the-gate"
	goTest := "package calc\n\nimport (\n\t\"os\"\n\t\"testing\"\n)\n\nfunc TestSecret(t *testing.T) {\n\tif b, err := os.ReadFile(\"secret.env\"); err == nil {\n\t\tt.Fatalf(\"read %s\", b)\n\t}\n}\n"
	files := map[string]string{"go.mod": goMod, "calc.go": rightCalc, "secret.env": secret, "src/lib.rs": "pub const S: &str = include_str!(\"../secret.env\");\n"}
	env := execEnv(t, files, warmCache(t))
	if !env.Sandbox.Enforcement().Overlay {
		t.Fatalf("%s holds no changes apart here", env.Sandbox.Name())
	}
	gates := func() (Result, Result) {
		return gateRun(t, env, Check{Kind: GoTestPasses, Pin: []string{"secret_test.go"}, Pinned: map[string]string{"secret_test.go": goTest}}),
			gateRun(t, env, Check{Kind: CompilesRust, File: "src/lib.rs"})
	}
	g, r := gates()
	if g.Passed || !r.Passed {
		t.Fatalf("control: with no read policy the Go test should read the secret (passed %v: %s) and the crate compile (passed %v: %s\n%s)", g.Passed, g.Detail, r.Passed, r.Detail, r.Output)
	}
	env.Visible = func(rel string) bool { return rel != "secret.env" }
	g, r = gates()
	if !g.Passed {
		t.Errorf("the Go test read a file the read policy refuses: %s\n%s", g.Detail, g.Output)
	}
	if r.Passed {
		t.Errorf("include_str! read a file the read policy refuses: %s", r.Detail)
	}
	for _, out := range []string{g.Output, r.Output, g.Detail, r.Detail} {
		if strings.Contains(out, secret) {
			t.Errorf("a gate's output shows the secret: %s", out)
		}
	}
}

// The code under test cannot rewrite the gate's files while it runs (the
// pinned Go test, the generated Rust crate root: read-only binds), and
// nothing the gate wrote is left in the workspace or the temporary
// directory after it. The control: the same gates with the binds
// dropped before the code under test runs (weakening.unbound) are
// rewritten, and still leave nothing.
func TestGateFilesReadOnlyOnTheWorkspace(t *testing.T) {
	need(t, "go")
	need(t, "rustc")
	goTest := "package calc\n\nimport \"testing\"\n\nfunc TestKept(t *testing.T) {\n\tif Attack() {\n\t\tt.Fatal(\"the code under test rewrote the pinned test\")\n\t}\n}\n"
	files := map[string]string{"go.mod": goMod, "calc_test.go": goTest,
		"calc.go":    "package calc\n\nimport \"os\"\n\nfunc Attack() bool { return os.WriteFile(\"calc_test.go\", []byte(\"package calc\\n\"), 0o644) == nil }\n",
		"src/lib.rs": "pub fn attack() -> bool { std::fs::write(\"src/.io-harness-gate-test.rs\", \"\").is_ok() }\n",
	}
	rustTest := "#[test]\nfn kept() {\n    assert!(!attack(), \"the subject rewrote the gate's crate root\");\n}\n"
	for _, weak := range []weakening{{}, {unbound: true}} {
		t.Run(fmt.Sprintf("unbound=%v", weak.unbound), func(t *testing.T) {
			tmp := t.TempDir()
			os.Chmod(tmp, 0o755)
			t.Setenv("TMPDIR", tmp)
			env := execEnv(t, files, warmCache(t))
			if !env.Sandbox.Enforcement().Overlay {
				t.Fatalf("%s holds no changes apart here", env.Sandbox.Name())
			}
			dir := env.Root.Name()
			before := tree(t, dir)
			gate := func(c Check) Result {
				if err := c.Validate(""); err != nil {
					t.Fatal(err)
				}
				w, err := newWorkdir(context.Background(), env, &c)
				if err != nil {
					t.Fatal(err)
				}
				defer w.remove()
				var r Result
				if c.Kind == GoTestPasses {
					r, err = goGate(context.Background(), w, &c, weak)
				} else {
					r, err = rustGate(context.Background(), w, []string{c.File}, c.Test, weak)
				}
				if err != nil {
					t.Fatal(err)
				}
				return r
			}
			g := gate(Check{Kind: GoTestPasses, Pin: []string{"calc_test.go"}, Pinned: map[string]string{"calc_test.go": goTest}, Limits: gateLimits})
			r := gate(Check{Kind: RustTestPasses, File: "src/lib.rs", Test: rustTest, Limits: gateLimits})
			if weak.unbound {
				if g.Passed || r.Passed {
					t.Errorf("control: without the binds the code under test should rewrite the gate's files: go %v (%s), rust %v (%s)", g.Passed, g.Detail, r.Passed, r.Detail)
				}
			} else if !g.Passed || !r.Passed {
				t.Errorf("the code under test rewrote a gate's file: go %v (%s)\n%s\nrust %v (%s)\n%s", g.Passed, g.Detail, g.Output, r.Passed, r.Detail, r.Output)
			}
			if diff := cmp.Diff(before, tree(t, dir)); diff != "" {
				t.Errorf("the gates changed the workspace (-before +after):\n%s", diff)
			}
			if left, _ := os.ReadDir(tmp); len(left) != 0 {
				t.Errorf("the gates left in the temporary directory: %v", left)
			}
		})
	}
}

// The second rust_test_passes gate on a slightly changed crate is an
// incremental build: rustc's CPU time is under half of the first's. The
// control: the same two gates without a gate cache, where rustc has no
// incremental directory, take about the same CPU time twice.
func TestRustGateIncremental(t *testing.T) {
	need(t, "rustc")
	var b strings.Builder
	for i := range 1500 {
		fmt.Fprintf(&b, "pub fn f%d(x: u64) -> u64 { let v: Vec<u64> = (0..x).map(|k| k * %d + 1).collect(); v.iter().sum::<u64>() + format!(\"{}\", x).len() as u64 }\n", i, i)
	}
	crate := b.String()
	test := "#[test]\nfn one() {\n    assert_eq!(f1(0), 1);\n}\n"
	ratio := func(t *testing.T, cache string) float64 {
		env := execEnv(t, map[string]string{"src/lib.rs": crate}, cache)
		rec := &recorder{Sandbox: env.Sandbox}
		env.Sandbox = rec
		var cpu []sandbox.Duration
		for step := range 2 {
			if step == 1 {
				// The agent's step: one function changed.
				if err := os.WriteFile(filepath.Join(env.Root.Name(), "src/lib.rs"), []byte(strings.Replace(crate, "k * 7 + 1", "k * 7 + 2", 1)), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			rec.runs = nil
			if r := gateRun(t, env, Check{Kind: RustTestPasses, File: "src/lib.rs", Test: test}); !r.Passed {
				t.Fatalf("%s\n%s", r.Detail, r.Output)
			}
			for _, run := range rec.runs {
				if filepath.Base(run.argv[0]) == "rustc" {
					cpu = append(cpu, run.cpu)
				}
			}
		}
		if len(cpu) != 2 {
			t.Fatalf("rustc ran %d times, want 2", len(cpu))
		}
		t.Logf("rustc CPU: first %v, second %v", cpu[0], cpu[1])
		return float64(cpu[1]) / float64(cpu[0])
	}
	cache := t.TempDir()
	if r := ratio(t, cache); r >= 0.5 {
		t.Errorf("the second build took %.2f of the first's CPU time; an incremental build takes under half", r)
	}
	if dirs, _ := filepath.Glob(filepath.Join(cache, "rust-incremental", "*", "*")); len(dirs) == 0 {
		t.Error("no incremental session in the gate cache")
	}
	if r := ratio(t, ""); r < 0.5 {
		t.Errorf("control: without an incremental directory the second build took %.2f of the first's CPU time", r)
	}
}
