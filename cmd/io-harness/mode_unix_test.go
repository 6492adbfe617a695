//go:build unix

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// The store run makes is private under any umask: it holds the prompts
// and the tools' output. (pkg/harness/store/sqlite tests the -wal and
// -shm, and the control.)
func TestTheStoreRunMakesIsPrivate(t *testing.T) {
	for _, mask := range []string{"022", "000"} {
		t.Run("umask "+mask, func(t *testing.T) {
			dir := t.TempDir()
			spec := writeFixture(t, dir, "success")
			cmd := exec.Command("sh", "-c", `umask `+mask+` && exec "$0" "$@"`, bin, "run", spec)
			cmd.Dir = dir
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("run: %v\n%s", err, out)
			}
			fi, err := os.Stat(filepath.Join(dir, defaultStore))
			if err != nil {
				t.Fatal(err)
			}
			if m := fi.Mode().Perm(); m != 0o600 {
				t.Errorf("%s is %v, want 0600", defaultStore, m)
			}
		})
	}
}
