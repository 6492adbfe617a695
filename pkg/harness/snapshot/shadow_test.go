package snapshot

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// tree reads every entry under dir: a file's content, a directory as
// "dir", a link as "-> target".
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		switch {
		case rel == ".":
		case d.IsDir():
			out[filepath.ToSlash(rel)] = "dir"
		case d.Type()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			out[filepath.ToSlash(rel)] = "-> " + target
		default:
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[filepath.ToSlash(rel)] = string(data)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// testShadow is a shadow whose clock runs an hour ahead, so that the
// files a test has just written count as settled: only the racy test
// looks at the window.
func testShadow(t *testing.T) *Shadow {
	t.Helper()
	sh := newShadow(false)
	sh.now = func() time.Time { return time.Now().Add(time.Hour) }
	t.Cleanup(func() {
		if err := sh.Close(); err != nil {
			t.Error(err)
		}
	})
	return sh
}

func syncShadow(t *testing.T, sh *Shadow, root *os.Root, o Options) *Snapshot {
	t.Helper()
	s, err := sh.Take(context.Background(), root, o)
	if err != nil {
		t.Fatal(err)
	}
	if !s.Reused || s.Busy {
		t.Fatalf("Take gave a copy made anew (busy %v)", s.Busy)
	}
	return s
}

func lstat(t *testing.T, p string) fs.FileInfo {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi
}

// A file unchanged in the workspace and in the copy is not copied again:
// the second sync of 60 files updates none, and the copy's file keeps
// its inode and change time; a changed, a new and a removed file are
// the three updates of the third. The negative control ignores the
// shadow's record, and copies every file again.
func TestShadowCopiesOnlyWhatChanged(t *testing.T) {
	ws := t.TempDir()
	for i := range 60 {
		write(t, ws, fmt.Sprintf("d%d/f%02d.txt", i/20, i), strings.Repeat("x", i))
	}
	root := openRoot(t, ws)
	for _, control := range []bool{false, true} {
		sh := testShadow(t)
		sh.off.record = control
		s := syncShadow(t, sh, root, Options{})
		if s.Updated != 63 {
			t.Errorf("first sync updated %d, want 60 files and 3 directories", s.Updated)
		}
		probe := filepath.Join(s.Dir, "d1", "f30.txt")
		before := lstat(t, probe)
		s.Remove()

		s = syncShadow(t, sh, root, Options{})
		after := lstat(t, probe)
		if control {
			// (The inode may come back: a file removed and made again
			// can get its number.)
			if s.Updated != 60 {
				t.Errorf("negative control: with the record ignored, the second sync updated %d; want every file copied again", s.Updated)
			}
			s.Remove()
			continue
		}
		if s.Updated != 0 || !os.SameFile(before, after) || stampOf(before) != stampOf(after) {
			t.Errorf("second sync updated %d; the copy's file went from %+v to %+v", s.Updated, stampOf(before), stampOf(after))
		}
		s.Remove()

		write(t, ws, "d0/f05.txt", "changed")
		write(t, ws, "d2/new.txt", "new")
		os.Remove(filepath.Join(ws, "d1", "f31.txt"))
		s = syncShadow(t, sh, root, Options{})
		if s.Updated != 3 {
			t.Errorf("third sync updated %d, want 3", s.Updated)
		}
		if diff := cmp.Diff(tree(t, ws), tree(t, s.Dir)); diff != "" {
			t.Errorf("the copy is not the workspace (-workspace +copy):\n%s", diff)
		}
		s.Remove()
	}
}

// A command's changes to the copy (a file rewritten with the same size,
// a file made, one removed, a directory made unsearchable, a file made
// a directory, a directory made a link out) are undone by the next
// sync, whether or not they were copied back: the copy is the workspace
// again, and nothing outside it is touched. Changes, after the command,
// lists the command's files only. The negative control skips the check
// of the copy's own files, and the rewritten file survives.
func TestShadowUndoesACommandsChanges(t *testing.T) {
	ws := t.TempDir()
	write(t, ws, "a.txt", "aaaa")
	write(t, ws, "b.txt", "bbbb")
	write(t, ws, "c.txt", "cccc")
	write(t, ws, "d/f.txt", "ffff")
	write(t, ws, "e/g.txt", "gggg")
	outside := t.TempDir()
	write(t, outside, "keep.txt", "keep")
	root := openRoot(t, ws)
	for _, control := range []bool{false, true} {
		sh := testShadow(t)
		sh.off.shadowCheck = control
		syncShadow(t, sh, root, Options{}).Remove()
		s := syncShadow(t, sh, root, Options{})
		d := s.Dir
		write(t, d, "a.txt", "AAAA")
		write(t, d, "x.txt", "made")
		os.Remove(filepath.Join(d, "b.txt"))
		os.Remove(filepath.Join(d, "c.txt"))
		write(t, d, "c.txt/inner", "i")
		write(t, d, "d/h.txt", "h")
		os.Chmod(filepath.Join(d, "d"), 0)
		os.RemoveAll(filepath.Join(d, "e"))
		os.Symlink(outside, filepath.Join(d, "e"))
		if !control {
			os.Chmod(filepath.Join(d, "d"), 0o755)
			changes, _, err := s.Changes(context.Background())
			os.Chmod(filepath.Join(d, "d"), 0)
			if err != nil {
				t.Fatal(err)
			}
			want := []Change{{Path: "a.txt", Size: 4}, {Path: "b.txt", Removed: true}, {Path: "c.txt", Removed: true},
				{Path: "c.txt/inner", Size: 1, Created: true}, {Path: "d/h.txt", Size: 1, Created: true},
				{Path: "e/g.txt", Removed: true}, {Path: "x.txt", Size: 4, Created: true}}
			if diff := cmp.Diff(want, changes, cmpopts.IgnoreFields(Change{}, "Mode")); diff != "" {
				t.Errorf("Changes (-want +got):\n%s", diff)
			}
		}
		s.Remove()

		s = syncShadow(t, sh, root, Options{})
		got := tree(t, s.Dir)
		s.Remove()
		if diff := cmp.Diff(map[string]string{"keep.txt": "keep"}, tree(t, outside)); diff != "" {
			t.Fatalf("the sync reached outside the copy (-want +got):\n%s", diff)
		}
		if control {
			if got["a.txt"] != "AAAA" {
				t.Errorf("negative control: without the copy's own check a.txt = %q, want the command's AAAA", got["a.txt"])
			}
			continue
		}
		if diff := cmp.Diff(tree(t, ws), got); diff != "" {
			t.Errorf("a command's changes survived the sync (-workspace +copy):\n%s", diff)
		}
	}
}

// A file rewritten in the workspace, in place and with the same size,
// within the same tick of the filesystem's clock as the sync that copied
// it (here a clock that never ticks: the file's times and the sync's are
// one instant) is copied again by the next sync. The negative control
// trusts the stamp whatever its age, and the next command sees the old
// content.
func TestShadowRacyChange(t *testing.T) {
	ws := t.TempDir()
	write(t, ws, "f.txt", "aaaa")
	root := openRoot(t, ws)
	for _, control := range []bool{false, true} {
		write(t, ws, "f.txt", "aaaa")
		instant := time.Now()
		sh := testShadow(t)
		sh.now = func() time.Time { return instant }
		sh.srcStamp = func(fi fs.FileInfo) stamp {
			s := stampOf(fi)
			s.mtime, s.ctime = instant.UnixNano(), instant.UnixNano()
			return s
		}
		sh.off.racy = control
		syncShadow(t, sh, root, Options{}).Remove()
		before := lstat(t, filepath.Join(ws, "f.txt"))
		write(t, ws, "f.txt", "bbbb")
		if !os.SameFile(before, lstat(t, filepath.Join(ws, "f.txt"))) {
			t.Fatal("the rewrite made a new file: not the case under test")
		}
		s := syncShadow(t, sh, root, Options{})
		data, _ := os.ReadFile(filepath.Join(s.Dir, "f.txt"))
		s.Remove()
		switch {
		case control && string(data) != "aaaa":
			t.Errorf("negative control: trusting the stamp alone, the copy has %q, want the stale aaaa", data)
		case !control && string(data) != "bbbb":
			t.Errorf("the copy has %q after a change in the sync's tick, want bbbb", data)
		}
	}
}

// A file the read policy starts refusing mid-run (an approval withdrawn,
// a rule added) is gone from the copy at the next sync. The negative
// control keeps what the workspace walk did not want, and the secret
// stays readable.
func TestShadowFollowsTheReadPolicy(t *testing.T) {
	ws := t.TempDir()
	write(t, ws, "secret.txt", "hunter2")
	write(t, ws, "ok.txt", "fine")
	root := openRoot(t, ws)
	for _, control := range []bool{false, true} {
		sh := testShadow(t)
		sh.off.prune = control
		refuse := false
		o := Options{Visible: func(rel string) bool { return !refuse || rel != "secret.txt" }}
		s := syncShadow(t, sh, root, o)
		if _, err := os.Stat(filepath.Join(s.Dir, "secret.txt")); err != nil {
			t.Fatalf("allowed at first, secret.txt is not in the copy: %v", err)
		}
		s.Remove()
		refuse = true
		s = syncShadow(t, sh, root, o)
		_, err := os.Stat(filepath.Join(s.Dir, "secret.txt"))
		hidden := s.Hidden
		s.Remove()
		if control {
			if err != nil {
				t.Errorf("negative control: without pruning, secret.txt is gone: %v", err)
			}
			continue
		}
		if !errors.Is(err, fs.ErrNotExist) || !cmp.Equal(hidden, []string{"secret.txt"}) {
			t.Errorf("refused now, secret.txt is still in the copy (%v), hidden %v", err, hidden)
		}
	}
}

// One command at a time has the run's copy: a second Take while it is
// out gets a copy made anew in the shadow's directory, removed by its
// Remove; the run's copy is there again once given back, and Close
// while it is out removes it when it is given back.
func TestShadowOneCommandAtATime(t *testing.T) {
	ws := t.TempDir()
	write(t, ws, "f.txt", "f")
	root := openRoot(t, ws)
	sh := testShadow(t)
	first := syncShadow(t, sh, root, Options{})
	second, err := sh.Take(context.Background(), root, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if second.Reused || !second.Busy || second.Dir == first.Dir || filepath.Dir(second.Dir) != sh.Dir() {
		t.Fatalf("while the copy is out: %+v, first at %s", second, first.Dir)
	}
	if data, _ := os.ReadFile(filepath.Join(second.Dir, "f.txt")); string(data) != "f" {
		t.Errorf("the fresh copy has f.txt = %q", data)
	}
	second.Remove()
	if _, err := os.Stat(second.Dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the fresh copy is still there: %v", err)
	}
	first.Remove()
	third := syncShadow(t, sh, root, Options{})
	if third.Dir != first.Dir || third.Updated != 0 {
		t.Errorf("given back, the copy is %s with %d updates", third.Dir, third.Updated)
	}
	dir := sh.Dir()
	sh.Close()
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("Close removed the copy while a command had it: %v", err)
	}
	third.Remove()
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the shadow outlived Close: %v", err)
	}
}

// A run killed with kill -9 mid-command leaves its shadow; the next run's
// NewShadow removes it (nothing holds it) and leaves a live process's
// alone. The negative control is a shadow made without the sweep, after
// which the dead run's copy is still there.
func TestShadowAfterKill(t *testing.T) {
	if ws := os.Getenv("IOH_SHADOW_CHILD"); ws != "" {
		sh := NewShadow()
		root, err := os.OpenRoot(ws)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sh.Take(context.Background(), root, Options{}); err != nil {
			t.Fatal(err)
		}
		fmt.Printf("shadow %s\n", sh.Dir())
		os.Stdin.Read(make([]byte, 1)) // mid-command, until killed
		return
	}
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	ws := t.TempDir()
	write(t, ws, "f.txt", "f")
	cmd := exec.Command(os.Args[0], "-test.run", "^TestShadowAfterKill$", "-test.count=1")
	cmd.Env = append(os.Environ(), "IOH_SHADOW_CHILD="+ws)
	stdin, _ := cmd.StdinPipe()
	defer stdin.Close()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	dir, ok := strings.CutPrefix(strings.TrimSpace(line), "shadow ")
	if err != nil || !ok || !strings.HasPrefix(dir, tmp) {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("the child said %q, %v", line, err)
	}
	cmd.Process.Kill()
	cmd.Wait()
	live := testShadow(t)
	syncShadow(t, live, openRoot(t, ws), Options{}).Remove()

	newShadow(false)
	if _, err := os.Stat(filepath.Join(dir, "copy", "f.txt")); err != nil {
		t.Fatalf("negative control: without the sweep the dead run's copy is gone: %v", err)
	}
	NewShadow()
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the dead run's shadow %s is still there: %v", dir, err)
	}
	if _, err := os.Stat(live.Dir()); err != nil {
		t.Errorf("the sweep removed a live run's shadow: %v", err)
	}
}

// Commands of a run that take the copy at once (parallel tool calls)
// each get a whole copy, the run's or one made anew, and leave nothing
// but the run's copy behind.
func TestShadowConcurrentTakes(t *testing.T) {
	ws := t.TempDir()
	for i := range 20 {
		write(t, ws, fmt.Sprintf("f%02d.txt", i), "x")
	}
	root := openRoot(t, ws)
	sh := testShadow(t)
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			s, err := sh.Take(context.Background(), root, Options{})
			if err == nil {
				if names, _ := os.ReadDir(s.Dir); len(names) != 20 {
					err = fmt.Errorf("a copy (reused %v) holds %d files, want 20", s.Reused, len(names))
				}
				s.Remove()
			}
			errs <- err
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	entries, _ := os.ReadDir(sh.Dir())
	if len(entries) != 1 || entries[0].Name() != "copy" {
		t.Errorf("left in the shadow's directory: %v", entries)
	}
}
