package git

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkHugeRepository times git_status and git_diff on a repository
// of 20,000 files with 200 changed, against plain git doing the same on
// the host, measured in the same run; it reports the tools' time as a
// ratio of plain git's. The tools pay for a sandbox start and a shadow
// git directory per call, and for nothing that grows with the
// repository: no copy of the workspace or of .git.
func BenchmarkHugeRepository(b *testing.B) {
	sb := realSandbox(b)
	dir := b.TempDir()
	hostGit(b, dir, "init", "-q", "-b", "main")
	for i := range 20000 {
		p := filepath.Join(dir, fmt.Sprintf("d%03d", i%200), fmt.Sprintf("f%05d.txt", i))
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte(fmt.Sprintf("line %d\n", i)), 0o644)
	}
	hostGit(b, dir, "add", "-A")
	hostGit(b, dir, "commit", "-q", "-m", "many files")
	for i := 0; i < 20000; i += 100 {
		p := filepath.Join(dir, fmt.Sprintf("d%03d", i%200), fmt.Sprintf("f%05d.txt", i))
		os.WriteFile(p, []byte("changed\n"), 0o644)
	}
	env := envOn(b, dir, sb, nil)
	plain := func(args ...string) {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_OPTIONAL_LOCKS=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	var toolTime, plainTime time.Duration
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		if r := call(b, env, "git_status", nil); r.IsError {
			b.Fatal(r.Output)
		}
		if r := call(b, env, "git_diff", nil); r.IsError {
			b.Fatal(r.Output)
		}
		toolTime += time.Since(t0)
		t0 = time.Now()
		plain("status", "--porcelain=v1", "-z", "--branch")
		plain("diff", "--name-only", "-z")
		plain("diff", "--patch-with-stat")
		plainTime += time.Since(t0)
	}
	b.ReportMetric(float64(toolTime)/float64(b.N)/1e6, "tools-ms/op")
	b.ReportMetric(float64(plainTime)/float64(b.N)/1e6, "plain-git-ms/op")
	b.ReportMetric(float64(toolTime)/float64(plainTime), "ratio")
}
