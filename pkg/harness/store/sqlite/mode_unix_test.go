//go:build unix

package sqlite

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// modes returns the permission bits of a store's three files.
func modes(t *testing.T, path string) map[string]fs.FileMode {
	t.Helper()
	out := map[string]fs.FileMode{}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(p)] = fi.Mode().Perm()
	}
	return out
}

// withUmask runs fn under the process umask mask. The tests of this
// package run one at a time, so no other test makes files meanwhile.
func withUmask(t *testing.T, mask int, fn func()) {
	t.Helper()
	old := syscall.Umask(mask)
	defer syscall.Umask(old)
	fn()
}

// A new store is private — the file, its -wal and its -shm are 0600 —
// under the usual umask 022 and under umask 000. The negative control is
// the same open with the private creation switched off: SQLite makes the
// file 0644 less the umask, and the test sees it.
func TestANewStoreIsPrivate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		mask    int
		perm    fs.FileMode
		control bool
	}{
		{"umask 022", 0o022, 0o600, false},
		{"umask 000", 0o000, 0o600, false},
		{"control: umask 022, left to SQLite", 0o022, 0, true},
		{"control: umask 000, left to SQLite", 0o000, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "trace.db")
			var got map[string]fs.FileMode
			withUmask(t, tc.mask, func() {
				s, err := openMode(context.Background(), path, tc.perm)
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				newRun(t, s, "r") // a write: the -wal and -shm exist now
				got = modes(t, path)
			})
			private := true
			for _, m := range got {
				private = private && m == 0o600
			}
			switch {
			case tc.control && private:
				t.Fatalf("the control left the mode to SQLite, and the files are still private: %v", got)
			case tc.control:
				t.Logf("the control's files: %v", got)
			case !private:
				t.Errorf("a new store's files: %v, want 0600 each", got)
			}
		})
	}
}

// A store file that exists keeps the mode its owner gave it, and SQLite
// gives its -wal and -shm that mode too: Open changes no mode.
func TestAnExistingStoreKeepsItsMode(t *testing.T) {
	for _, mode := range []fs.FileMode{0o640, 0o644} {
		t.Run(mode.String(), func(t *testing.T) {
			dir := t.TempDir()
			made := filepath.Join(dir, "made.db") // a store, then chmod-ed
			s, err := Open(context.Background(), made)
			if err != nil {
				t.Fatal(err)
			}
			s.Close()
			empty := filepath.Join(dir, "empty.db") // an empty file the user made
			if err := os.WriteFile(empty, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			for _, path := range []string{made, empty} {
				if err := os.Chmod(path, mode); err != nil {
					t.Fatal(err)
				}
				s, err := Open(context.Background(), path)
				if err != nil {
					t.Fatal(err)
				}
				newRun(t, s, "r")
				got := modes(t, path)
				s.Close()
				for name, m := range got {
					if m != mode {
						t.Errorf("%s: %s is %v, want %v as its owner set it", filepath.Base(path), name, m, mode)
					}
				}
			}
		})
	}
}
