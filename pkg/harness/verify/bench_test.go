package verify

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/initorigin/io-harness-go/pkg/sandbox"
)

// benchCrate is a small real crate: a tokenizer and an evaluator of
// arithmetic, with the test a rust_test_passes gate holds it to.
const benchCrate = `#[derive(Debug, Clone, PartialEq)]
pub enum Token { Num(i64), Op(char), Open, Close }

pub fn tokens(s: &str) -> Result<Vec<Token>, String> {
    let mut out = Vec::new();
    let mut chars = s.chars().peekable();
    while let Some(&c) = chars.peek() {
        match c {
            ' ' => { chars.next(); }
            '0'..='9' => {
                let mut n = 0i64;
                while let Some(&d) = chars.peek() {
                    if let Some(v) = d.to_digit(10) { n = n * 10 + v as i64; chars.next(); } else { break; }
                }
                out.push(Token::Num(n));
            }
            '+' | '-' | '*' | '/' => { out.push(Token::Op(c)); chars.next(); }
            '(' => { out.push(Token::Open); chars.next(); }
            ')' => { out.push(Token::Close); chars.next(); }
            _ => return Err(format!("unexpected {c:?}")),
        }
    }
    Ok(out)
}

struct Parser { toks: Vec<Token>, at: usize }

impl Parser {
    fn peek(&self) -> Option<&Token> { self.toks.get(self.at) }
    fn next(&mut self) -> Option<Token> { let t = self.toks.get(self.at).cloned(); self.at += 1; t }
    fn expr(&mut self) -> Result<i64, String> {
        let mut v = self.term()?;
        while let Some(Token::Op(op @ ('+' | '-'))) = self.peek().cloned() {
            self.next();
            let r = self.term()?;
            v = if op == '+' { v + r } else { v - r };
        }
        Ok(v)
    }
    fn term(&mut self) -> Result<i64, String> {
        let mut v = self.atom()?;
        while let Some(Token::Op(op @ ('*' | '/'))) = self.peek().cloned() {
            self.next();
            let r = self.atom()?;
            if op == '/' && r == 0 { return Err("division by zero".into()); }
            v = if op == '*' { v * r } else { v / r };
        }
        Ok(v)
    }
    fn atom(&mut self) -> Result<i64, String> {
        match self.next() {
            Some(Token::Num(n)) => Ok(n),
            Some(Token::Op('-')) => Ok(-self.atom()?),
            Some(Token::Open) => { let v = self.expr()?; match self.next() { Some(Token::Close) => Ok(v), t => Err(format!("want ), got {t:?}")) } }
            t => Err(format!("unexpected {t:?}")),
        }
    }
}

pub fn eval(s: &str) -> Result<i64, String> {
    let mut p = Parser { toks: tokens(s)?, at: 0 };
    let v = p.expr()?;
    if p.at != p.toks.len() { return Err("trailing input".into()); }
    Ok(v)
}
`

const benchCrateTest = `#[test]
fn evaluates() {
    assert_eq!(eval("1 + 2 * 3"), Ok(7));
    assert_eq!(eval("(1 + 2) * 3"), Ok(9));
    assert_eq!(eval("-4 / 2"), Ok(-2));
    assert!(eval("1 / 0").is_err());
}
`

// BenchmarkRustGateIncremental runs a rust_test_passes gate twice on a
// small real crate, with a fresh gate cache each time and the crate
// changed slightly between the two, as an agent's step does; it reports
// the second gate's time over the first's, and the same for rustc's CPU
// time: the incremental build's gain.
func BenchmarkRustGateIncremental(b *testing.B) {
	if _, err := exec.LookPath("rustc"); err != nil {
		b.Skip("rustc is not installed")
	}
	sb, err := testSandbox()
	if err != nil {
		b.Skipf("no sandbox backend works here: %v", err)
	}
	if !sb.Enforcement().Overlay {
		b.Skipf("%s holds no changes apart: the gates copy the workspace", sb.Name())
	}
	dir := b.TempDir()
	lib := filepath.Join(dir, "lib.rs")
	r, err := os.OpenRoot(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	c := Check{Kind: RustTestPasses, File: "lib.rs", Test: benchCrateTest, Limits: gateLimits}
	if err := c.Validate(""); err != nil {
		b.Fatal(err)
	}
	var first, second time.Duration
	var cpu [2]sandbox.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rec := &recorder{Sandbox: sb}
		env := &Env{Root: r, Sandbox: rec, CacheDir: b.TempDir(), Getenv: os.Getenv}
		for step, took := range []*time.Duration{&first, &second} {
			os.WriteFile(lib, []byte(fmt.Sprintf("%s\npub const STEP: usize = %d;\n", benchCrate, step)), 0o644)
			rec.runs = nil
			start := time.Now()
			if res, err := Run(context.Background(), env, &c); err != nil || !res.Passed {
				b.Fatalf("%v %s\n%s", err, res.Detail, res.Output)
			}
			*took += time.Since(start)
			for _, run := range rec.runs {
				if filepath.Base(run.argv[0]) == "rustc" {
					cpu[step] += run.cpu
				}
			}
		}
	}
	b.ReportMetric(float64(cpu[1])/float64(cpu[0]), "rustc-cpu-second/first")
	b.ReportMetric(float64(first.Milliseconds())/float64(b.N), "first-ms/gate")
	b.ReportMetric(float64(second.Milliseconds())/float64(b.N), "second-ms/gate")
	b.ReportMetric(float64(second)/float64(first), "second/first")
}

// BenchmarkGoGateWorkspaceSize runs a go_test_passes gate on the calc
// module in a workspace of 100 files and in one of 20,000 files of 4 KB
// (in 200 directories), alternating, and reports the large workspace's
// time over the small one's: on the workspace itself the gate's cost does
// not grow with the files it does not build.
func BenchmarkGoGateWorkspaceSize(b *testing.B) {
	if _, err := exec.LookPath("go"); err != nil {
		b.Skip("go is not installed")
	}
	sb, err := testSandbox()
	if err != nil {
		b.Skipf("no sandbox backend works here: %v", err)
	}
	cache := warmCache(b)
	workspace := func(n int) *os.Root {
		dir := b.TempDir()
		files := map[string]string{"go.mod": goMod, "calc.go": rightCalc, "calc_test.go": calcTest}
		for i := range n - len(files) {
			files[fmt.Sprintf("data/d%03d/f%05d.txt", i/100, i)] = strings.Repeat("x", 4096)
		}
		for name, content := range files {
			p := filepath.Join(dir, name)
			os.MkdirAll(filepath.Dir(p), 0o755)
			if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
				b.Fatal(err)
			}
		}
		r, err := os.OpenRoot(dir)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { r.Close() })
		return r
	}
	small, large := workspace(100), workspace(20000)
	c := Check{Kind: GoTestPasses, Package: ".", Pin: []string{"calc_test.go"}, Pinned: map[string]string{"calc_test.go": calcTest}, Limits: gateLimits}
	if err := c.Validate(""); err != nil {
		b.Fatal(err)
	}
	gate := func(r *os.Root) time.Duration {
		start := time.Now()
		if res, err := Run(context.Background(), &Env{Root: r, Sandbox: sb, CacheDir: cache, Getenv: os.Getenv}, &c); err != nil || !res.Passed {
			b.Fatalf("%v %s\n%s", err, res.Detail, res.Output)
		}
		return time.Since(start)
	}
	gate(small) // warm the cache
	var ts, tl time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ts += gate(small)
		tl += gate(large)
	}
	b.ReportMetric(float64(ts.Milliseconds())/float64(b.N), "100-files-ms/gate")
	b.ReportMetric(float64(tl.Milliseconds())/float64(b.N), "20000-files-ms/gate")
	b.ReportMetric(float64(tl)/float64(ts), "20000/100")
}
