package scratch

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A held directory survives a sweep, by this process or another, and one
// whose process was killed with kill -9 does not. The control is a
// directory of the same name that nothing holds (the lock switched off):
// a sweep removes it, so the survival is the lock's doing.
func TestSweep(t *testing.T) {
	if os.Getenv("IOH_SCRATCH_CHILD") != "" {
		d, err := Make("io-harness-scratchtest.", 0o700)
		if err != nil {
			panic(err)
		}
		os.WriteFile(filepath.Join(d.Path, "f"), []byte("x"), 0o600)
		os.Stdout.WriteString(d.Path + "\n")
		select {} // until killed
	}
	t.Setenv("TMPDIR", t.TempDir())
	const prefix = "io-harness-scratchtest."

	mine, err := Make(prefix, 0o700)
	if err != nil {
		t.Fatal(err)
	}
	self, _ := os.Executable()
	child := exec.Command(self, "-test.run", "^TestSweep$")
	child.Env = append(os.Environ(), "IOH_SCRATCH_CHILD=1")
	out, _ := child.StdoutPipe()
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	theirs, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	theirs = strings.TrimSpace(theirs)
	unheld, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}

	Sweep(prefix)
	for _, p := range []string{mine.Path, theirs} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("a held directory was swept: %v", err)
		}
	}
	if _, err := os.Stat(unheld); err == nil {
		t.Error("control: a directory nothing holds survived the sweep: the test cannot tell a held one")
	}

	child.Process.Kill() // SIGKILL
	child.Wait()
	Sweep(prefix)
	if _, err := os.Stat(theirs); err == nil {
		t.Errorf("the directory of a process killed with kill -9 survived the sweep: %s", theirs)
	}
	if _, err := os.Stat(mine.Path); err != nil {
		t.Errorf("a held directory was swept: %v", err)
	}
	if err := mine.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(mine.Path); err == nil {
		t.Error("Remove left the directory")
	}
}
