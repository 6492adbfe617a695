package sandbox

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// TestCShared builds package sandbox into a C shared library, loads it
// into Python with ctypes, and runs contained commands from there: the
// library cannot re-execute itself, which is what the in-process spawner
// is for.
func TestCShared(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the in-process spawner is Linux only")
	}
	for _, tool := range []string{"python3", "gcc", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s here: the c-shared smoke test needs python3, gcc and go", tool)
		}
	}
	dir := t.TempDir()
	lib := filepath.Join(dir, "libsandbox.so")
	build := exec.Command("go", "build", "-buildmode=c-shared", "-o", lib, "./testdata/cshared")
	build.Env = append(os.Environ(), "CGO_ENABLED=1")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the c-shared library: %v\n%s", err, out)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(hostScratch(t), "escape")
	spec := func(op string, args ...string) string {
		b, _ := json.Marshal(Spec{
			Argv:     append([]string{exe}, args...),
			Env:      []string{"IOH_PAYLOAD=" + op, "GORACE=atexit_sleep_ms=0"},
			ReadOnly: []string{exeDir(t)},
		})
		return string(b)
	}
	cmd := exec.Command("python3", "testdata/cshared/smoke.py", lib, spec("pid1"), spec("write", outside))
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("python: %v\n%s\n%s", err, out, stderr)
	}
	var replies []struct {
		Result *Result `json:"result"`
		Error  string  `json:"error"`
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var r struct {
			Result *Result `json:"result"`
			Error  string  `json:"error"`
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("reply %q: %v", sc.Text(), err)
		}
		replies = append(replies, r)
	}
	if len(replies) != 2 {
		t.Fatalf("want 2 replies, got %d: %s", len(replies), out)
	}
	for _, r := range replies {
		if r.Error != "" || r.Result == nil {
			t.Fatalf("run failed inside Python: %q", r.Error)
		}
	}
	pid := replies[0].Result
	t.Logf("from Python: backend %s (spawner %s): %s", pid.Backend, pid.Enforced.Spawner, bytes.TrimSpace(pid.Stdout))
	if pid.Backend != BackendLinuxNS || pid.Enforced.Spawner != "cgo" {
		t.Skipf("the strongest backend here is %s (spawner %s), not the in-process linux-ns", pid.Backend, pid.Enforced.Spawner)
	}
	if !bytes.HasPrefix(pid.Stdout, []byte("pid=1 procs=1")) {
		t.Errorf("the command saw %q, want pid 1 alone in its /proc", pid.Stdout)
	}
	w := replies[1].Result
	if w.ExitCode != contained || !bytes.Contains(w.Stdout, []byte("read-only file system")) {
		t.Errorf("a write outside: exit %d %q, want refused with EROFS", w.ExitCode, w.Stdout)
	}
	if _, err := os.Stat(outside); err == nil {
		t.Errorf("the write outside landed")
	}
}
