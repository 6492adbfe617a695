package tool

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkGrepVsRipgrep runs grep and ripgrep over the Go distribution's
// source tree with the same pattern, alternating the two in one loop so
// that machine noise hits both, and reports each one's time per search
// and the ratio. Both must count the same matching lines.
//
// rg is given the flags that make it do grep's work: no ignore files
// (--no-ignore), hidden files searched (--hidden) but not the directories
// grep skips (-g '!.git/' and so on), binary files skipped (its default),
// symlinks not followed (its default). It runs as a process, so its arm
// includes a process start, about a millisecond.
func BenchmarkGrepVsRipgrep(b *testing.B) {
	rg, err := exec.LookPath("rg")
	if err != nil {
		b.Skip("ripgrep (rg) is not on PATH; install it (Debian: apt-get install ripgrep) to run this benchmark")
	}
	goroot, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		b.Skipf("cannot find the Go source tree with go env GOROOT: %v", err)
	}
	src := filepath.Join(strings.TrimSpace(string(goroot)), "src")
	root, err := os.OpenRoot(src)
	if err != nil {
		b.Skipf("the Go source tree is not available: %v", err)
	}
	defer root.Close()
	env := &Env{Root: root}

	cases := []struct {
		name    string
		pattern string
		literal bool
	}{
		{"regex", `func \w+Context\(`, false},
		{"literal", "errors.New(", true},
	}
	for _, bc := range cases {
		b.Run(bc.name, func(b *testing.B) {
			args, err := json.Marshal(grepArgs{Pattern: bc.pattern, Literal: bc.literal, MaxResults: ptr(grepHardMax)})
			if err != nil {
				b.Fatal(err)
			}
			rgArgs := []string{"--no-config", "--no-ignore", "--hidden",
				"-g", "!.git/", "-g", "!target/", "-g", "!node_modules/",
				"--count", "--no-messages"}
			if bc.literal {
				rgArgs = append(rgArgs, "--fixed-strings")
			}
			rgArgs = append(rgArgs, "-e", bc.pattern, ".")

			ours := func() (int, time.Duration) {
				start := time.Now()
				r := grep{}.Call(context.Background(), env, args)
				d := time.Since(start)
				if r.IsError {
					b.Fatal(r.Output)
				}
				return grepCount(b, r.Output), d
			}
			theirs := func() (int, time.Duration) {
				cmd := exec.Command(rg, rgArgs...)
				cmd.Dir = src
				start := time.Now()
				out, err := cmd.Output()
				d := time.Since(start)
				if err != nil {
					b.Fatalf("rg: %v", err)
				}
				return rgCount(b, out), d
			}

			// One untimed round warms the page cache for both.
			if c1, _ := ours(); c1 == 0 {
				b.Fatal("no matches: the benchmark would measure nothing")
			}
			theirs()

			var oursTime, rgTime time.Duration
			n := 0
			for b.Loop() {
				var c1, c2 int
				var d1, d2 time.Duration
				if n%2 == 0 {
					c1, d1 = ours()
					c2, d2 = theirs()
				} else {
					c2, d2 = theirs()
					c1, d1 = ours()
				}
				if c1 != c2 {
					b.Fatalf("grep counts %d matching lines, rg %d", c1, c2)
				}
				oursTime += d1
				rgTime += d2
				n++
			}
			b.ReportMetric(float64(oursTime.Nanoseconds())/float64(n), "ours-ns/op")
			b.ReportMetric(float64(rgTime.Nanoseconds())/float64(n), "rg-ns/op")
			b.ReportMetric(float64(oursTime)/float64(rgTime), "ours/rg")
		})
	}
}

// grepCount returns the number of matching lines a grep output reports.
func grepCount(tb testing.TB, out string) int {
	tb.Helper()
	if m := regexp.MustCompile(`, (\d+) in \d+ files? in all`).FindStringSubmatch(out); m != nil {
		n, _ := strconv.Atoi(m[1])
		return n
	}
	if strings.HasPrefix(out, "no matches") {
		return 0
	}
	return strings.Count(out, "\n") + 1
}

// rgCount sums the per-file counts of rg --count.
func rgCount(tb testing.TB, out []byte) int {
	tb.Helper()
	total := 0
	for line := range bytes.Lines(out) {
		i := bytes.LastIndexByte(line, ':')
		n, err := strconv.Atoi(string(bytes.TrimSpace(line[i+1:])))
		if err != nil {
			tb.Fatalf("rg output %q: %v", line, err)
		}
		total += n
	}
	return total
}
