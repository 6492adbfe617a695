package tool

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/initorigin/io-harness-go/pkg/harness/snapshot"
	"github.com/initorigin/io-harness-go/pkg/sandbox"
)

// overlaySandbox is a sandbox that runs commands on the workspace itself
// (Enforcement.Overlay), and copySandbox one that runs them on a copy:
// the same protections must hold on both ways.
func overlaySandbox(t *testing.T) sandbox.Sandbox {
	t.Helper()
	sb := realSandbox(t)
	if !sb.Enforcement().Overlay {
		t.Fatalf("the default backend %s here holds no changes apart; linux-ns does on this kernel", sb.Name())
	}
	return sb
}

// way is a way exec runs a command: a sandbox, and the run's copy of
// the workspace if it has one.
type way struct {
	sb     sandbox.Sandbox
	shadow *snapshot.Shadow
}

// env is an Env for root on this way.
func (w way) env(root *os.Root, g Gate) *Env {
	return &Env{Root: root, Sandbox: w.sb, Shadow: w.shadow, Gate: g}
}

// ways are the three ways exec runs a command: on the workspace (an
// overlay), on a copy (the same sandbox, its overlay switched off as a
// backend without one would be), and on the run's copy, kept from one
// command of the test to the next.
func ways(t *testing.T) map[string]way {
	sb := overlaySandbox(t)
	sh := snapshot.NewShadow()
	t.Cleanup(func() { sh.Close() })
	return map[string]way{"overlay": {sb: sb}, "copy": {sb: noOverlay{sb}}, "shadow": {sb: noOverlay{sb}, shadow: sh}}
}

// noOverlay is a sandbox that claims no overlay, so that exec takes the
// copy.
type noOverlay struct{ sandbox.Sandbox }

func (n noOverlay) Enforcement() sandbox.Enforcement {
	e := n.Sandbox.Enforcement()
	e.Overlay = false
	return e
}

func runExec(t *testing.T, env *Env, script string) Result {
	t.Helper()
	args, _ := json.Marshal(map[string]any{"argv": []string{"sh", "-c", script}})
	return execTool{}.Call(context.Background(), env, args)
}

// A file the read policy denies cannot be read through a link in the
// workspace either, and a link that leads out of the workspace is not
// followed: on the workspace as on a copy. The control is the same
// command with no gate, which reads the secret through the link.
func TestExecReadDenyThroughLinks(t *testing.T) {
	for name, w := range ways(t) {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			writeTree(t, dir, map[string]string{"secret/key": "hunter2\n", "ok.txt": "fine\n"})
			os.Symlink("secret/key", filepath.Join(dir, "alias"))
			os.Symlink("../secret", filepath.Join(dir, "sub-link"))
			// Outside the workspace and not under /tmp, which the sandbox
			// makes its own.
			outside, err := os.MkdirTemp("/var/tmp", "io-harness-outside-")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(outside) })
			os.WriteFile(filepath.Join(outside, "f"), []byte("outside-data\n"), 0o644)
			os.Symlink(filepath.Join(outside, "f"), filepath.Join(dir, "out"))
			if os.Geteuid() == 0 {
				os.Chmod(outside, 0o755)
			}
			root, _ := os.OpenRoot(dir)
			defer root.Close()
			script := "cat alias; cat secret/key; cat out; cat ok.txt"

			control := runExec(t, w.env(root, nil), script)
			if !strings.Contains(control.Output, "hunter2") {
				t.Fatalf("negative control: with no policy the command reads the secret through the link:\n%s", control.Output)
			}
			// The link out is never followed; its target itself is there to
			// read, so what hides it is the link's being concealed.
			direct := runExec(t, w.env(root, nil), "cat "+filepath.Join(outside, "f"))
			if !strings.Contains(direct.Output, "outside-data") {
				t.Fatalf("negative control: the file outside should be readable at its own path:\n%s", direct.Output)
			}
			g := denyGate(func(p string) bool { return strings.HasPrefix(p, "secret/") }, nil)
			res := runExec(t, w.env(root, g), script)
			if strings.Contains(res.Output, "hunter2") || strings.Contains(res.Output, "outside-data") {
				t.Errorf("the command read a denied file or a file outside:\n%s", res.Output)
			}
			if !strings.Contains(res.Output, "fine") {
				t.Errorf("the command did not read an allowed file:\n%s", res.Output)
			}
		})
	}
}

// Removing and renaming come back through the write policy: a file the
// policy denies is neither removed nor renamed away, and every refusal is
// reported; the control is the same command under a policy that allows
// the writes, which removes and renames.
func TestExecRemovesThroughThePolicy(t *testing.T) {
	for name, w := range ways(t) {
		t.Run(name, func(t *testing.T) {
			for _, deny := range []bool{false, true} {
				dir := t.TempDir()
				writeTree(t, dir, map[string]string{"locked/a": "a\n", "locked/b": "b\n", "free.txt": "x\n", "old.txt": "o\n", "gone/x": "x\n"})
				root, _ := os.OpenRoot(dir)
				g := denyGate(nil, func(p string) bool { return deny && (strings.HasPrefix(p, "locked") || p == "old.txt") })
				res := runExec(t, w.env(root, g), "rm -r locked free.txt gone && mv old.txt new.txt")
				root.Close()
				_, lockedErr := os.Stat(filepath.Join(dir, "locked/a"))
				_, oldErr := os.Stat(filepath.Join(dir, "old.txt"))
				_, freeErr := os.Stat(filepath.Join(dir, "free.txt"))
				_, goneErr := os.Stat(filepath.Join(dir, "gone"))
				data, _ := os.ReadFile(filepath.Join(dir, "new.txt"))
				if freeErr == nil || goneErr == nil || string(data) != "o\n" {
					t.Errorf("deny=%v: allowed removals and the rename's new name did not come back:\n%s", deny, res.Output)
				}
				if !deny && (lockedErr == nil || oldErr == nil) {
					t.Errorf("control: with the writes allowed, locked/ and old.txt should be gone:\n%s", res.Output)
				}
				if deny {
					if lockedErr != nil || oldErr != nil {
						t.Errorf("a removal the write policy denies reached the workspace:\n%s", res.Output)
					}
					// On the workspace the directory is refused whole; on a
					// copy, each of its files.
					for _, want := range []string{`locked(/a)?: not removed`, `old.txt: not removed`} {
						if !regexp.MustCompile(want).MatchString(res.Output) {
							t.Errorf("output lacks %q:\n%s", want, res.Output)
						}
					}
				}
			}
		})
	}
}

// .git is shown read-only: a command cannot write it, on the workspace or
// on a copy (where it is not there at all), while it can read it (git
// describe works on the workspace).
func TestExecGitReadOnly(t *testing.T) {
	sb := overlaySandbox(t)
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{".git/HEAD": "ref: refs/heads/main\n", "a.txt": "a\n"})
	root, _ := os.OpenRoot(dir)
	defer root.Close()
	res := runExec(t, &Env{Root: root, Sandbox: sb}, "cat .git/HEAD; echo evil > .git/HEAD; echo made > .git/new; echo done")
	if !strings.Contains(res.Output, "ref: refs/heads/main") {
		t.Errorf("the command could not read .git:\n%s", res.Output)
	}
	if data, _ := os.ReadFile(filepath.Join(dir, ".git/HEAD")); string(data) != "ref: refs/heads/main\n" {
		t.Errorf(".git/HEAD = %q: a command wrote the repository", data)
	}
	if _, err := os.Stat(filepath.Join(dir, ".git/new")); err == nil {
		t.Error("a command made a file in .git")
	}
	if !strings.Contains(res.Output, "Read-only file system") {
		t.Errorf("the write to .git should fail inside the sandbox:\n%s", res.Output)
	}
}

// Special files, links and setuid bits never come back: a fifo and a
// link are reported, a setuid file comes back as a plain file, and a hard
// link to a file outside the workspace brings nothing of it back.
func TestExecSpecialFiles(t *testing.T) {
	sb := overlaySandbox(t)
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"a.txt": "a\n"})
	root, _ := os.OpenRoot(dir)
	defer root.Close()
	res := runExec(t, &Env{Root: root, Sandbox: sb}, "mkfifo p; ln -s /etc/passwd l; echo s > s; chmod 4755 s; ln /etc/hostname h 2>/dev/null; echo done")
	for _, want := range []string{"p: a fifo is not copied back", "l: a symlink"} {
		if !strings.Contains(res.Output, want) {
			t.Errorf("output lacks %q:\n%s", want, res.Output)
		}
	}
	if fi, err := os.Lstat(filepath.Join(dir, "s")); err != nil || fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
		t.Errorf("s: %v %v: a setuid file came back", fi.Mode(), err)
	}
	for _, f := range []string{"p", "l", "h"} {
		if fi, err := os.Lstat(filepath.Join(dir, f)); err == nil && !fi.Mode().IsRegular() {
			t.Errorf("%s came back as %v", f, fi.Mode())
		}
	}
}

// A link the command replaced with a directory goes as a link: what it
// led to stays, however the directory's entries are ordered (a link to
// the workspace itself would otherwise take the workspace with it). The
// control is the same replacement of a real directory, whose old files
// go.
func TestExecReplacedLinkKeepsItsTarget(t *testing.T) {
	sb := overlaySandbox(t)
	for _, link := range []string{"a", "l", "self", "zz"} {
		for _, target := range []string{"sub", "."} {
			dir := t.TempDir()
			writeTree(t, dir, map[string]string{"sub/f1": "keep1\n", "sub/f2": "keep2\n", "README": "readme\n"})
			if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
				t.Fatal(err)
			}
			root, _ := os.OpenRoot(dir)
			res := runExec(t, &Env{Root: root, Sandbox: sb}, "rm "+link+" && mkdir "+link+" && echo new > "+link+"/n")
			root.Close()
			for _, f := range []string{"sub/f1", "sub/f2", "README"} {
				if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
					t.Errorf("%s -> %s replaced by a directory: %s is gone:\n%s", link, target, f, res.Output)
				}
			}
			if fi, err := os.Lstat(filepath.Join(dir, link)); err != nil || !fi.IsDir() {
				t.Errorf("%s: want the command's new directory, got %v %v", link, fi, err)
			}
			if data, _ := os.ReadFile(filepath.Join(dir, link, "n")); string(data) != "new\n" {
				t.Errorf("%s/n = %q", link, data)
			}
			if _, err := os.Stat(filepath.Join(dir, "sub", "n")); err == nil {
				t.Errorf("%s/n was written through the old link into sub/", link)
			}
		}
	}
	// Control: a real directory made anew loses its old files.
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"d/old": "old\n"})
	root, _ := os.OpenRoot(dir)
	defer root.Close()
	res := runExec(t, &Env{Root: root, Sandbox: sb}, "rm -r d && mkdir d && echo new > d/n")
	if _, err := os.Stat(filepath.Join(dir, "d", "old")); err == nil {
		t.Errorf("control: d/old should be gone with the old directory:\n%s", res.Output)
	}
}

// Copy-back is bounded in the paths it considers and in depth, and says
// where it stopped: a command that makes 30,000 files, or a chain of 100
// directories, costs a bounded copy-back, not one that grows with what
// it made.
func TestExecCopyBackBounds(t *testing.T) {
	sb := overlaySandbox(t)
	dir := t.TempDir()
	root, _ := os.OpenRoot(dir)
	defer root.Close()
	res := runExec(t, &Env{Root: root, Sandbox: sb}, "mkdir m && cd m && seq 1 30000 | xargs touch")
	if !strings.Contains(res.Output, "changed more than 20000 paths") {
		t.Errorf("no bound reported:\n%.2000s", res.Output)
	}
	if n, _ := os.ReadDir(filepath.Join(dir, "m")); len(n) > maxCopyBackEntries {
		t.Errorf("%d files copied back, over the bound %d", len(n), maxCopyBackEntries)
	}
	res = runExec(t, &Env{Root: root, Sandbox: sb}, "mkdir w; cd w; for i in $(seq 100); do mkdir d && cd d || break; done; echo bottom > f")
	if !strings.Contains(res.Output, "deeper than 64 directories") {
		t.Errorf("no depth bound reported:\n%.2000s", res.Output)
	}
}

// The executable bit comes back, as the command set or cleared it, and
// nothing else of a mode: chmod +x of an unchanged script, a new script
// made 0755, chmod -x; a setuid bit never.
func TestExecCarriesTheExecutableBit(t *testing.T) {
	for name, w := range ways(t) {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			writeTree(t, dir, map[string]string{"run.sh": "echo run\n", "tool.sh": "echo tool\n"})
			os.Chmod(filepath.Join(dir, "tool.sh"), 0o755)
			root, _ := os.OpenRoot(dir)
			defer root.Close()
			res := runExec(t, w.env(root, nil), "chmod +x run.sh; echo new > new.sh; chmod 4755 new.sh 2>/dev/null || chmod 755 new.sh; chmod -x tool.sh")
			for name, want := range map[string]os.FileMode{"run.sh": 0o755, "new.sh": 0o755, "tool.sh": 0o644} {
				fi, err := os.Stat(filepath.Join(dir, name))
				if err != nil || fi.Mode() != want {
					t.Errorf("%s: %v %v, want %v\n%s", name, fi.Mode(), err, want, res.Output)
				}
			}
		})
	}
}

// diskCapped is a sandbox whose commands have a disk cap of disk bytes.
type diskCapped struct {
	sandbox.Sandbox
	disk int64
}

func (d diskCapped) Run(ctx context.Context, s *sandbox.Spec) (*sandbox.Result, error) {
	s.Limits.Disk = d.disk
	return d.Sandbox.Run(ctx, s)
}

// A command that a cap kills brings none of its changes back: not the
// file it was writing when its upper layer (or its copy) filled, cut
// short, and not the edit it made before, whole. A 10 GB sparse file is
// stopped by the file-size cap where it is written, and nothing of its
// size comes back. The control is the same edit by a command that ends
// by itself, which comes back.
func TestExecKilledBringsNothingBack(t *testing.T) {
	for name, w := range ways(t) {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			writeTree(t, dir, map[string]string{"a.txt": "old\n"})
			root, _ := os.OpenRoot(dir)
			defer root.Close()
			env := w.env(root, nil)
			env.Sandbox = diskCapped{w.sb, 16 << 20}
			res := runExec(t, env, "dd if=/dev/zero of=sparse bs=1 count=1 seek=10G; echo end")
			if fi, err := os.Lstat(filepath.Join(dir, "sparse")); err == nil && fi.Size() > 16<<20 {
				t.Errorf("a %d-byte sparse file came back:\n%s", fi.Size(), res.Output)
			}
			os.Remove(filepath.Join(dir, "sparse"))
			scripts := map[string]int{ // the script and its timeout
				"echo new > a.txt; dd if=/dev/zero of=fill bs=1M count=64; echo end": 60,
				"echo new > a.txt; echo part > fill; exec sleep 30":                  1, // the wall cap
			}
			if name == "overlay" {
				// Files until the upper layer has no inode left: the disk
				// cap too, though the command goes on to exit 0. (A copy
				// on the host's disk has its inodes; the disk cap there
				// is the bytes.)
				scripts["echo new > a.txt; mkdir many && cd many && seq 1 300000 | xargs touch 2>/dev/null; echo end"] = 60
			}
			for script, timeout := range scripts {
				args, _ := json.Marshal(map[string]any{"argv": []string{"sh", "-c", script}, "timeout_seconds": timeout})
				res := execTool{}.Call(context.Background(), env, args)
				if !strings.Contains(res.Output, "was killed") || !strings.Contains(res.Output, "it was killed before it finished") {
					t.Errorf("%s: not reported as a cap hit whose changes were dropped:\n%s", script, res.Output)
				}
				if got, _ := os.ReadFile(filepath.Join(dir, "a.txt")); string(got) != "old\n" {
					t.Errorf("%s: a.txt is %q: a killed command's edit came back", script, got)
				}
				for _, f := range []string{"fill", "sparse", "many"} {
					if _, err := os.Lstat(filepath.Join(dir, f)); err == nil {
						t.Errorf("%s: %s came back from a killed command", script, f)
					}
				}
			}
			res = runExec(t, env, "echo new > a.txt; dd if=/dev/zero of=fill bs=1M count=1; echo end")
			if got, _ := os.ReadFile(filepath.Join(dir, "a.txt")); string(got) != "new\n" || res.IsError {
				t.Errorf("control: a command that ends by itself brings its edit back: a.txt %q\n%s", got, res.Output)
			}
		})
	}
}

// exec on the run's copy: the header says which way the command saw the
// workspace; a change the write policy refused does not reach the next
// command (it starts from the workspace again), an allowed one does,
// and a file the read policy starts refusing mid-run is gone from the
// copy. Nil Shadow is the negative control of the header: a copy made
// anew every call.
func TestExecOnTheRunsCopy(t *testing.T) {
	w := ways(t)["shadow"]
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"ro.txt": "original\n", "secret.txt": "hunter2\n"})
	root, _ := os.OpenRoot(dir)
	defer root.Close()
	deny := false
	g := denyGate(func(p string) bool { return deny && p == "secret.txt" }, func(p string) bool { return p == "ro.txt" })

	res := runExec(t, w.env(root, g), "echo changed > ro.txt; echo made > out.txt; cat secret.txt")
	if !strings.Contains(res.Output, ", on the run's copy (") || !strings.Contains(res.Output, "- ro.txt: the write policy does not allow it") || !strings.Contains(res.Output, "hunter2") {
		t.Fatalf("first call:\n%s", res.Output)
	}
	deny = true
	res = runExec(t, w.env(root, g), "cat ro.txt out.txt; cat secret.txt 2>&1 || true")
	for _, want := range []string{"original", "made"} {
		if !strings.Contains(res.Output, want) {
			t.Errorf("second call lacks %q:\n%s", want, res.Output)
		}
	}
	if strings.Contains(res.Output, "changed") || strings.Contains(res.Output, "hunter2") {
		t.Errorf("the second call saw the refused change or the now-denied secret:\n%s", res.Output)
	}
	control := runExec(t, &Env{Root: root, Sandbox: w.sb}, "true")
	if !strings.Contains(control.Output, ", on a copy: no overlay)") {
		t.Errorf("with no shadow:\n%s", control.Output)
	}
	if over := runExec(t, ways(t)["overlay"].env(root, nil), "true"); !strings.Contains(over.Output, ", on the workspace)") {
		t.Errorf("on the overlay:\n%s", over.Output)
	}
}

// lateWriter is a sandbox that writes a file into the workspace as each
// command starts: another process's write, after what the command is
// shown concealed was fixed.
type lateWriter struct {
	sandbox.Sandbox
	path, content string
}

func (l lateWriter) Run(ctx context.Context, s *sandbox.Spec) (*sandbox.Result, error) {
	if err := os.WriteFile(l.path, []byte(l.content), 0o644); err != nil {
		return nil, err
	}
	return l.Sandbox.Run(ctx, s)
}

// A file the read policy refuses that appears in the workspace while a
// command runs (another process writes it) does not reach the model: the
// command may have read it, so its output and its changes are withheld,
// and it says why. On a copy the file is not there at all. The control
// is the same command under no read rule, which reads the late file: so
// the file does reach the command, and only the check keeps it from the
// model.
func TestExecRefusedFileAppearingMidCommand(t *testing.T) {
	for name, w := range ways(t) {
		t.Run(name, func(t *testing.T) {
			for _, deny := range []bool{true, false} {
				dir := t.TempDir()
				writeTree(t, dir, map[string]string{"a.txt": "a\n"})
				root, _ := os.OpenRoot(dir)
				defer root.Close()
				var g Gate
				if deny {
					g = denyGate(func(p string) bool { return p == "secret.txt" }, nil)
				}
				env := w.env(root, g)
				env.Sandbox = lateWriter{w.sb, filepath.Join(dir, "secret.txt"), "LATE-SECRET\n"}
				res := runExec(t, env, "cat secret.txt; cp secret.txt leak.txt; echo end")
				os.Remove(filepath.Join(dir, "secret.txt"))
				_, leakErr := os.Stat(filepath.Join(dir, "leak.txt"))
				switch {
				case deny && (strings.Contains(res.Output, "LATE-SECRET") || leakErr == nil):
					t.Errorf("a refused file that appeared mid-command reached the model or the workspace:\n%s", res.Output)
				case deny && name == "overlay" && !strings.Contains(res.Output, "a file the read policy refuses appeared"):
					t.Errorf("the withheld output is not explained:\n%s", res.Output)
				case !deny && name == "overlay" && !strings.Contains(res.Output, "LATE-SECRET"):
					t.Errorf("control: with no read rule the command should read the late file:\n%s", res.Output)
				}
			}
		})
	}
}
