package snapshot

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/initorigin/io-harness-go/pkg/sandbox"
)

func write(t *testing.T, dir, rel, data string) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func openRoot(t *testing.T, dir string) *os.Root {
	t.Helper()
	r, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func take(t *testing.T, dir string, o Options) *Snapshot {
	t.Helper()
	s, err := Take(context.Background(), openRoot(t, dir), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Remove() })
	return s
}

// A file the filter refuses never reaches the copy; the negative control
// is the same workspace copied with no filter.
func TestTakeHidesWhatTheFilterRefuses(t *testing.T) {
	ws := t.TempDir()
	write(t, ws, ".env", "SECRET=1")
	write(t, ws, "config/.env", "SECRET=2")
	write(t, ws, "main.go", "package main")
	write(t, ws, "node_modules/x/y.js", "x")
	if err := os.Symlink(".env", filepath.Join(ws, "notenv")); err != nil {
		t.Fatal(err)
	}
	hide := func(rel string) bool { return filepath.Base(rel) != ".env" }
	s := take(t, ws, Options{Visible: hide, Skip: func(n string) bool { return n == "node_modules" }})
	if diff := cmp.Diff([]string{".env", "config/.env"}, s.Hidden); diff != "" {
		t.Errorf("Hidden (-want +got):\n%s", diff)
	}
	for _, rel := range []string{".env", "config/.env", "notenv", "node_modules"} {
		if _, err := os.Lstat(filepath.Join(s.Dir, rel)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s is in the copy (%v)", rel, err)
		}
	}
	if data, _ := os.ReadFile(filepath.Join(s.Dir, "main.go")); string(data) != "package main" {
		t.Errorf("main.go = %q", data)
	}
	control := take(t, ws, Options{})
	if data, err := os.ReadFile(filepath.Join(control.Dir, ".env")); err != nil || string(data) != "SECRET=1" {
		t.Fatalf("negative control: without a filter .env = %q, %v", data, err)
	}
}

func TestTakeLimits(t *testing.T) {
	ws := t.TempDir()
	write(t, ws, "a", strings.Repeat("x", 1000))
	write(t, ws, "b", strings.Repeat("x", 1000))
	if _, err := Take(context.Background(), openRoot(t, ws), Options{MaxBytes: 1500}); !errors.Is(err, ErrTooBig) {
		t.Errorf("over MaxBytes: %v", err)
	}
	if _, err := Take(context.Background(), openRoot(t, ws), Options{MaxEntries: 2}); !errors.Is(err, ErrTooBig) {
		t.Errorf("over MaxEntries: %v", err)
	}
	left, _ := filepath.Glob(filepath.Join(os.TempDir(), "io-harness-limit-test-*"))
	if _, err := Take(context.Background(), openRoot(t, ws), Options{MaxBytes: 10, Prefix: "io-harness-limit-test-"}); err == nil {
		t.Fatal("no error")
	}
	if after, _ := filepath.Glob(filepath.Join(os.TempDir(), "io-harness-limit-test-*")); len(after) != len(left) {
		t.Errorf("a failed Take left %v", after)
	}
}

func TestChanges(t *testing.T) {
	ws := t.TempDir()
	write(t, ws, "same.txt", "same")
	write(t, ws, "edit.txt", "aaaa")
	write(t, ws, "touched.txt", "t")
	write(t, ws, "gone.txt", "g")
	s := take(t, ws, Options{})
	d := s.Dir
	write(t, d, "edit.txt", "bbbb") // same size: the change time tells
	write(t, d, "new/deep.txt", "new")
	os.Remove(filepath.Join(d, "gone.txt"))
	os.Symlink("/etc/passwd", filepath.Join(d, "link"))
	os.Chmod(filepath.Join(d, "touched.txt"), 0o600)
	changes, skipped, err := s.Changes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := []Change{{Path: "edit.txt", Size: 4}, {Path: "gone.txt", Removed: true}, {Path: "new/deep.txt", Size: 3, Created: true}, {Path: "touched.txt", Size: 1}}
	if diff := cmp.Diff(want, changes, cmpopts.IgnoreFields(Change{}, "Mode")); diff != "" {
		t.Errorf("Changes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]Skipped{{"link", "a symlink (links are not copied back)"}}, skipped); diff != "" {
		t.Errorf("skipped (-want +got):\n%s", diff)
	}
	if data, err := s.ReadFile("edit.txt", 4); err != nil || string(data) != "bbbb" {
		t.Errorf("ReadFile = %q, %v", data, err)
	}
	if _, err := s.ReadFile("link", 100); err == nil {
		t.Error("ReadFile followed a symlink")
	}
	write(t, d, "edit.txt", "bbbbbbbb")
	if _, err := s.ReadFile("edit.txt", 4); err == nil {
		t.Error("ReadFile read past the size the file was listed with")
	}
}

// Listing huge files reads none of them: three sparse 1 GiB files cost
// neither time nor memory. Reading them, as copy-back used to before it
// checked the size, allocates gigabytes.
func TestChangesReadNothing(t *testing.T) {
	s := take(t, t.TempDir(), Options{})
	for _, n := range []string{"s1", "s2", "s3"} {
		f, err := os.Create(filepath.Join(s.Dir, n))
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Truncate(1 << 30); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	changes, _, err := s.Changes(context.Background())
	runtime.ReadMemStats(&after)
	if err != nil || len(changes) != 3 || changes[0].Size != 1<<30 {
		t.Fatalf("Changes = %+v, %v", changes, err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
		t.Errorf("listing allocated %d bytes", grew)
	}
}

func TestChangesStopsAtTheEntryLimit(t *testing.T) {
	s := take(t, t.TempDir(), Options{MaxEntries: 50})
	for i := range 200 {
		write(t, s.Dir, filepath.Join("d", strings.Repeat("f", 1+i%40)+string(rune('a'+i%26))+string(rune('a'+i/26))), "x")
	}
	changes, skipped, err := s.Changes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) >= 50 || len(skipped) != 1 || !strings.Contains(skipped[0].Reason, "more than 50 entries") {
		t.Errorf("%d changes, skipped %+v", len(changes), skipped)
	}
}

// A command run as a user that is not root can make a directory it
// cannot itself empty (chmod 000); Remove still removes the copy. The
// negative control is os.RemoveAll, which fails there.
func TestRemoveUnsearchable(t *testing.T) {
	if os.Getenv("IOH_SNAPSHOT_CHILD") != "" {
		dir := os.Getenv("IOH_SNAPSHOT_CHILD")
		mk := func() string {
			d, err := os.MkdirTemp(dir, "copy-")
			if err != nil {
				t.Fatal(err)
			}
			write(t, d, "a/b/c.txt", "x")
			os.Chmod(filepath.Join(d, "a", "b"), 0)
			os.Chmod(filepath.Join(d, "a"), 0)
			return d
		}
		control := mk()
		if err := os.RemoveAll(control); err == nil {
			t.Fatal("negative control: os.RemoveAll removed a tree with mode-000 directories")
		}
		sandbox.RemoveAll(control)
		d := mk()
		if err := sandbox.RemoveAll(d); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("the copy is still there: %v", err)
		}
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to run the check as another user (unprivileged here, where it would run directly: see IOH_SNAPSHOT_CHILD)")
	}
	dir, err := os.MkdirTemp("", "io-harness-rm-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o777)
	// The test binary lives where only root may look: run a copy.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "snapshot.test")
	if err := os.WriteFile(exe, data, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run", "^TestRemoveUnsearchable$", "-test.count=1")
	cmd.Env = append(os.Environ(), "IOH_SNAPSHOT_CHILD="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("as nobody: %v\n%s", err, out)
	}
}

// What a command writes in a directory the copy leaves out (node_modules,
// .git) is not copied back, and is said to be: never dropped unheard.
func TestChangesReportsLeftOutDirectories(t *testing.T) {
	ws := t.TempDir()
	write(t, ws, "a.txt", "a")
	write(t, ws, "node_modules/dep/index.js", "old")
	s := take(t, ws, Options{Skip: func(name string) bool { return name == "node_modules" }})
	write(t, s.Dir, "node_modules/dep/index.js", "new")
	changes, skipped, err := s.Changes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) != 0 {
		t.Errorf("changes %+v, want none", changes)
	}
	want := []Skipped{{"node_modules", "node_modules is left out of the copy, so nothing the command wrote in it is copied back"}}
	if diff := cmp.Diff(want, skipped); diff != "" {
		t.Errorf("skipped (-want +got):\n%s", diff)
	}
}
