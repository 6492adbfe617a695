package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/initorigin/io-harness-go/pkg/sandbox/internal/spawn"
	"golang.org/x/sys/unix"
)

// TestApply checks that what a command changes in a host workdir through
// linux-ns's overlay reaches the host, every kind of change: and that a
// file with many hard links, or a sparse one, costs the host no more than
// it cost the disk cap.
func TestApply(t *testing.T) {
	var ran int
	for _, n := range linuxSandboxes(t, false) {
		if !n.sb.Enforcement().Disk {
			continue
		}
		ran++
		t.Run(n.label, func(t *testing.T) {
			wd := tempDir(t)
			for name, content := range map[string]string{
				"keep/changed.txt": "old\n", "keep/mode.sh": "#!/bin/sh\n", "gone.txt": "gone\n",
				"gonedir/a": "a", "gonedir/b": "b", "file2dir": "file\n", "dir2file/x": "x",
				"remade/old1": "1", "remade/old2": "2",
			} {
				p := filepath.Join(wd, name)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			res := attempt(t, n.sb, Spec{Workdir: wd, Limits: Limits{Disk: 64 << 20, FileSize: 2 << 30}}, "mutate")
			if res.ExitCode != 0 || res.CapHit != CapNone {
				t.Fatalf("exit %d cap %q: %s %s", res.ExitCode, res.CapHit, res.Stdout, res.Stderr)
			}
			type entry struct {
				Kind    string // "file", "dir" or "link"
				Content string // a file's content, a link's target
				Mode    os.FileMode
			}
			got := map[string]entry{}
			// What the command locked reached the host locked: note its
			// modes, then unlock it to read the rest.
			for _, rel := range []string{"locked", "locked/in", "sealed"} {
				fi, err := os.Lstat(filepath.Join(wd, rel))
				if err != nil {
					t.Errorf("%s did not reach the host: %v", rel, err)
					continue
				}
				got[rel+" (mode)"] = entry{Kind: "mode", Mode: fi.Mode().Perm()}
				mode := os.FileMode(0o600)
				if fi.IsDir() {
					mode = 0o755
				}
				if err := os.Chmod(filepath.Join(wd, rel), mode); err != nil {
					t.Fatal(err)
				}
			}
			filepath.WalkDir(wd, func(p string, d os.DirEntry, err error) error {
				if err != nil || p == wd {
					return err
				}
				rel, _ := filepath.Rel(wd, p)
				fi, _ := d.Info()
				switch {
				case d.Type()&os.ModeSymlink != 0:
					target, _ := os.Readlink(p)
					got[rel] = entry{Kind: "link", Content: target}
				case d.IsDir():
					got[rel] = entry{Kind: "dir", Mode: fi.Mode().Perm()}
				case rel == "sparse" || strings.HasPrefix(rel, "big"):
					got[rel] = entry{Kind: "file", Mode: fi.Mode().Perm()}
				default:
					b, _ := os.ReadFile(p)
					got[rel] = entry{Kind: "file", Content: string(b), Mode: fi.Mode().Perm()}
				}
				return nil
			})
			want := map[string]entry{
				"new.txt":          {"file", "new\n", 0o640},
				"keep":             {"dir", "", 0o755},
				"keep/changed.txt": {"file", "changed\n", 0o644},
				"keep/mode.sh":     {"file", "#!/bin/sh\n", 0o700},
				"file2dir":         {"dir", "", 0o755},
				"file2dir/inner":   {"dir", "", 0o755},
				"file2dir/inner/x": {"file", "x", 0o644},
				"dir2file":         {"file", "was a dir\n", 0o600},
				"remade":           {"dir", "", 0o700},
				"remade/only":      {"file", "only\n", 0o644},
				"link":             {"link", "new.txt", 0},
				"deep":             {"dir", "", 0o755},
				"deep/er":          {"dir", "", 0o755},
				"deep/er/est":      {"dir", "", 0o755},
				"deep/er/est/f":    {"file", "deep\n", 0o644},
				"sparse":           {"file", "", 0o644},
				"locked (mode)":    {"mode", "", 0},
				"locked/in (mode)": {"mode", "", 0},
				"sealed (mode)":    {"mode", "", 0},
				"locked":           {"dir", "", 0o755},
				"locked/in":        {"dir", "", 0o755},
				"locked/in/f":      {"file", "locked\n", 0o644},
				"sealed":           {"file", "sealed\n", 0o600},
				"big":              {"file", "", 0o644},
			}
			for i := range 64 {
				want["big."+strconv.Itoa(i)] = entry{"file", "", 0o644}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("the host workdir after the run (-want +got):\n%s", diff)
			}
			var st syscall.Stat_t
			if err := syscall.Stat(filepath.Join(wd, "sparse"), &st); err != nil || st.Size != 1<<30+4 || st.Blocks*512 > 1<<20 {
				t.Errorf("sparse: %v, size %d, %d bytes allocated; want 1 GiB + 4, almost none allocated", err, st.Size, st.Blocks*512)
			}
			if err := syscall.Stat(filepath.Join(wd, "big"), &st); err != nil || st.Nlink != 65 {
				t.Errorf("big: %v, %d links; want 65 names of one file, not 65 copies", err, st.Nlink)
			}
			if fi, err := os.Stat(filepath.Join(wd, "new.txt")); err != nil || !fi.ModTime().Equal(time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)) {
				t.Errorf("new.txt's mtime: %v %v", fi.ModTime(), err)
			}
			if os.Geteuid() == 0 {
				if err := syscall.Lstat(filepath.Join(wd, "new.txt"), &st); err != nil || int(st.Uid) != res.Enforced.UID {
					t.Errorf("new.txt is owned by uid %d (%v), want the command's %d", st.Uid, err, res.Enforced.UID)
				}
			}
		})
	}
	if ran == 0 {
		t.Skip("no backend here applies a disk cap through an overlay")
	}
}

// TestLeftovers: a command that leaves directories it made unreadable
// (chmod 000, nested) in its workdir and TMPDIR must not keep Run from
// removing every directory the sandbox made. Run unprivileged (make
// sandbox-unprivileged), the command is the directories' owner, as its
// caller is.
func TestLeftovers(t *testing.T) {
	forEach(t, true, func(t *testing.T, n named) {
		var workdir string
		sb := n.with(t, func(e Event) {
			if e.Kind == EventCreate {
				workdir = e.Workdir
			}
		})
		res := attempt(t, sb, Spec{}, "lockdirs")
		if res.ExitCode != 0 {
			t.Fatalf("exit %d: %s %s", res.ExitCode, res.Stdout, res.Stderr)
		}
		tmpdir := strings.TrimSpace(strings.TrimPrefix(string(res.Stdout), "TMPDIR="))
		for _, dir := range []string{workdir, tmpdir} {
			if dir == "" || dir == privateWorkdirPath || !strings.Contains(dir, "io-harness-") {
				continue // inside the sandbox, or not the sandbox's
			}
			if _, err := os.Lstat(dir); err == nil {
				t.Errorf("%s is left behind", dir)
				removeTree(dir)
			}
		}
	})
}

// TestRemoveTree: removeTree removes nested directories a command made
// unreadable, where os.RemoveAll fails (the negative control, for a
// caller that is not root), and never follows a symlink out of the tree
// while it gives permissions back.
func TestRemoveTree(t *testing.T) {
	base := t.TempDir()
	outside := filepath.Join(base, "outside")
	if err := os.Mkdir(outside, 0o500); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(outside, 0o700)
	mkTree := func() string {
		tree, err := os.MkdirTemp(base, "tree-")
		if err != nil {
			t.Fatal(err)
		}
		c := filepath.Join(tree, "a", "b", "c")
		if err := os.MkdirAll(c, 0o755); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(c, "f"), nil, 0o644)
		if err := os.Symlink(outside, filepath.Join(tree, "a", "link")); err != nil {
			t.Fatal(err)
		}
		for _, d := range []string{c, filepath.Dir(c), filepath.Dir(filepath.Dir(c))} {
			os.Chmod(d, 0)
		}
		return tree
	}
	control := mkTree()
	if err := os.RemoveAll(control); err == nil {
		if os.Geteuid() != 0 {
			t.Errorf("os.RemoveAll removed a tree of unreadable directories: the test shows nothing")
		}
	} else {
		removeTree(control)
	}
	tree := mkTree()
	if err := removeTree(tree); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(tree); err == nil {
		t.Errorf("%s is still there", tree)
	}
	if fi, err := os.Stat(outside); err != nil || fi.Mode().Perm() != 0o500 {
		t.Errorf("the directory the symlink pointed at changed: %v %v", fi.Mode(), err)
	}
}

// TestAccess: a root caller's commands run as an unprivileged user, which
// must be able to write the workdir: one it cannot is an *AccessError
// naming the path and the user, unless Spec.Lend hands it over.
func TestAccess(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only a root caller's commands run as another user")
	}
	for _, n := range linuxSandboxes(t, false) {
		t.Run(n.label, func(t *testing.T) {
			wd := t.TempDir() // 0700, root's
			if err := searchableTo(wd); err != nil {
				t.Fatal(err)
			}
			spec := Spec{Argv: []string{"/bin/true"}, Workdir: wd}
			_, err := n.sb.Run(context.Background(), &spec)
			var ae *AccessError
			if !errors.Is(err, ErrInvalid) || !errors.As(err, &ae) || ae.Path != wd || ae.UID != unprivileged {
				t.Fatalf("err %v, want an ErrInvalid *AccessError for %s and uid %d", err, wd, unprivileged)
			}
			spec.Lend = true
			if res, err := n.sb.Run(context.Background(), &spec); err != nil || res.ExitCode != 0 {
				t.Fatalf("with Lend: %v %+v", err, res)
			}
			var st syscall.Stat_t
			if err := syscall.Stat(wd, &st); err != nil || st.Uid != unprivileged {
				t.Errorf("after Lend the workdir is owned by %d (%v), want %d", st.Uid, err, unprivileged)
			}
		})
	}
	// Options.UID and GID choose the user.
	wd := tempDir(t)
	sb, err := New(context.Background(), &Options{UID: 12345, GID: 12346})
	if err != nil {
		t.Fatal(err)
	}
	res := attempt(t, sb, Spec{Workdir: wd}, "write", filepath.Join(wd, "f"))
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(wd, "f"), &st); err != nil || st.Uid != 12345 || st.Gid != 12346 || res.Enforced.UID != 12345 {
		t.Errorf("%s: the file is %d:%d (%v), enforced uid %d; want 12345:12346", sb.Name(), st.Uid, st.Gid, err, res.Enforced.UID)
	}
}

// hiddenCase is one read of TestHidden: with show given in ReadOnly, the
// command reads read (both relative to the home); a backend that hides
// must refuse it when hidden.
type hiddenCase struct {
	name   string
	show   []string
	read   string
	hidden bool // on a backend that hides
}

var hiddenCases = []hiddenCase{
	{"a file in the home", nil, "notes.txt", true},
	{"a part of the home shown again", []string{".cargo"}, ".cargo/bin/tool", false},
	{"a credential inside the part shown", []string{".cargo"}, ".cargo/credentials.toml", true},
	{"a credential shown by name", []string{".cargo/credentials.toml"}, ".cargo/credentials.toml", false},
}

// fakeHome makes a home with a note and a cargo directory holding a tool
// and a credential, and points HOME at it (DefaultHide reads it when a
// backend opens).
func fakeHome(t *testing.T) string {
	t.Helper()
	home := hostScratch(t)
	files := map[string]string{
		"notes.txt": "private\n", ".cargo/bin/tool": "tool\n", ".cargo/credentials.toml": "token\n",
	}
	for name, content := range files {
		p := filepath.Join(home, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("HOME", home)
	return home
}

// judgeHidden runs c on sb and returns what is wrong ("" for nothing) and
// whether the read got through on a backend that does not claim to hide
// (the negative control's evidence).
func judgeHidden(t *testing.T, sb Sandbox, home string, c hiddenCase) (wrong string, negative bool) {
	t.Helper()
	var show []string
	for _, s := range c.show {
		show = append(show, filepath.Join(home, s))
	}
	res := attempt(t, sb, Spec{ReadOnly: show}, "read", filepath.Join(home, c.read))
	read := outcome(t, res)
	switch {
	case res.Enforced.Secrets && c.hidden && read:
		return fmt.Sprintf("ESCAPED: %s read %s, which it hides", sb.Name(), c.read), false
	case res.Enforced.Secrets && !c.hidden && !read:
		return fmt.Sprintf("%s hid %s, which the spec shows: %s", sb.Name(), c.read, res.Stdout), false
	case !res.Enforced.Secrets && read:
		negative = true
	}
	if res.Enforced.Secrets && !slices.Contains(res.Enforced.Hidden, home) {
		return fmt.Sprintf("Enforcement.Hidden does not list the home %s: %v", home, res.Enforced.Hidden), negative
	}
	return "", negative
}

// TestHidden: the caller's home is hidden by default, and so are the
// credential files inside a part of it a Spec shows again; a path named
// in ReadOnly is shown. Backends that do not hide paths are the negative
// control; the claims table holds linux-ns and bwrap to hiding.
func TestHidden(t *testing.T) {
	home := fakeHome(t)
	sandboxes := linuxSandboxes(t, true)
	for _, c := range hiddenCases {
		t.Run(c.name, func(t *testing.T) {
			negative := !c.hidden
			for _, n := range sandboxes {
				t.Run(n.label, func(t *testing.T) {
					wrong, neg := judgeHidden(t, n.sb, home, c)
					if wrong != "" {
						t.Error(wrong)
					}
					negative = negative || neg
				})
			}
			if !negative {
				t.Errorf("no backend that hides nothing read it, so the attempt is not shown to work")
			}
		})
	}
}

// TestHiddenCredentials: with the whole home shown read-only, a secret in
// each place of homeCredentials stays hidden on the backends that hide,
// while a plain file of the home is read. The backends that hide nothing
// read every secret: the negative control.
func TestHiddenCredentials(t *testing.T) {
	home := hostScratch(t)
	secrets := make([]string, 0, len(homeCredentials))
	for _, c := range homeCredentials {
		p := filepath.Join(home, c)
		if strings.HasSuffix(c, "/") {
			p = filepath.Join(p, "secret")
		}
		secrets = append(secrets, p)
	}
	plain := filepath.Join(home, "notes.txt")
	for _, p := range append([]string{plain}, secrets...) {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("secret\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("HOME", home) // DefaultHide reads it when a backend opens
	negative := false
	for _, n := range linuxSandboxes(t, true) {
		t.Run(n.label, func(t *testing.T) {
			res := attempt(t, n.sb, Spec{ReadOnly: []string{home}}, "readeach", append([]string{plain}, secrets...)...)
			if res.ExitCode != 0 {
				t.Fatalf("exit %d: %s %s", res.ExitCode, res.Stdout, res.Stderr)
			}
			read := map[string]bool{}
			for _, line := range strings.Split(strings.TrimSpace(string(res.Stdout)), "\n") {
				path, verdict, _ := strings.Cut(line, "\t")
				read[path] = verdict == "read"
			}
			if !read[plain] {
				t.Fatalf("the home is shown, yet %s was not read:\n%s", plain, res.Stdout)
			}
			all := true
			for i, p := range secrets {
				if res.Enforced.Secrets && read[p] {
					t.Errorf("ESCAPED: %s read %s, inside ~/%s, with the home shown", n.label, p, homeCredentials[i])
				}
				all = all && read[p]
			}
			if !res.Enforced.Secrets && all {
				negative = true
			}
		})
	}
	if !negative {
		t.Errorf("no backend that hides nothing read every secret, so the reads are not shown to work")
	}
}

// TestHiddenControl is TestHidden's negative control on the real
// backends: linux-ns and bwrap with their hiding switched off (their
// claim goes with it, as it follows the mechanism) read the home, and
// the pinned claim makes that an escape.
func TestHiddenControl(t *testing.T) {
	home := fakeHome(t)
	h := thisHost()
	for _, label := range []string{BackendLinuxNS, BackendBwrap} {
		t.Run(label, func(t *testing.T) {
			p := pinFor(t, label, h)
			if !p.starts {
				t.Logf("%s need not start on this host (%s): nothing to control", label, h)
				return
			}
			sb, err := New(context.Background(), &Options{Backend: label})
			if err != nil {
				t.Fatal(err)
			}
			switch b := sb.(*sandbox).b.(type) {
			case *spawnerBackend:
				b.hide = hiding{}
			case *bwrapBackend:
				b.hide = hiding{}
			}
			if sb.Enforcement().Secrets {
				t.Fatalf("%s without its hiding still claims to hide", label)
			}
			if m := p.missing(sb.Enforcement(), h); !slices.Contains(m, "secrets") {
				t.Errorf("the claims table does not miss the hiding: %v", m)
			}
			wrong, _ := judgeHidden(t, pinned{sb, p, h}, home, hiddenCases[0])
			if !strings.HasPrefix(wrong, "ESCAPED") {
				t.Errorf("without its hiding, %s read the home and TestHidden's judge says %q", label, wrong)
			}
		})
	}
}

// TestProbeDial: a backend's probe dials a listener of the host on
// loopback, and the backend's network claim follows: a spawner rung whose
// seccomp filter lets network sockets through (the negative control)
// reaches it and claims an open network; the real rungs do not.
func TestProbeDial(t *testing.T) {
	abi := landlockVersion()
	if abi == 0 {
		t.Skip("the rung without a network namespace needs Landlock, which this kernel lacks")
	}
	uid, gid := os.Geteuid(), os.Getegid()
	root := uid == 0
	if root {
		uid, gid = unprivileged, unprivileged
	}
	tests := []struct {
		name   string
		flags  spawn.Flags
		dialed bool
	}{
		{"network sockets allowed (negative control)", spawn.Landlock | spawn.Seccomp, true},
		{"linux-landlock", spawn.Landlock | spawn.Seccomp | spawn.DenyInet | spawn.DenySetsid, false},
		{"linux-ns", spawn.NS | spawn.Seccomp | spawn.Landlock, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &spawnerBackend{name: tt.name, flags: tt.flags, landlock: abi, root: root, uid: uid, gid: gid}
			if err := probeSpawner(context.Background(), b); err != nil {
				t.Skipf("this rung does not work here: %v", err)
			}
			if b.dialed != tt.dialed {
				t.Errorf("dialed %v, want %v", b.dialed, tt.dialed)
			}
			if open := b.enforcement(false).Network == NetworkOpen; open != tt.dialed {
				t.Errorf("network %q after a probe that dialed=%v", b.enforcement(false).Network, b.dialed)
			}
		})
	}
	// arrived itself, against a connection that is there and one that is not.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if arrived(ln) {
		t.Errorf("arrived with no connection")
	}
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if !arrived(ln) {
		t.Errorf("not arrived after a connection")
	}
}

// TestDumpable: switching a child to other ids resets the dumpable flag
// of the memory it shares with the host (vfork): the host must get its
// own back, or it would stop being debuggable and dumping core, and its
// /proc files would change owner. Only a root caller's commands switch.
func TestDumpable(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only a root caller's commands switch ids")
	}
	before, err := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range linuxSandboxes(t, false) {
		if res := attempt(t, n.sb, Spec{}, "env"); res.ExitCode != 0 {
			t.Fatalf("%s: exit %d", n.label, res.ExitCode)
		}
		if after, _ := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0); after != before {
			t.Errorf("after a run on %s the host's dumpable flag is %d, was %d", n.label, after, before)
		}
	}
}

// TestSeccompFilter: every system call the spawner's filter checks,
// made harmlessly, fails with the filter's errno on the backends that
// claim Seccomp, and those it lets through get through. The same calls
// on a backend without seccomp (the negative control) fail otherwise,
// or succeed: the probes tell the filter's answer from the kernel's.
func TestSeccompFilter(t *testing.T) {
	probes := map[string]syscall.Errno{}
	for _, p := range filterProbes() {
		probes[p.name] = p.want
	}
	negative := false
	for _, n := range linuxSandboxes(t, true) {
		t.Run(n.label, func(t *testing.T) {
			res := attempt(t, n.sb, Spec{}, "syscalls")
			if res.ExitCode != 0 {
				t.Fatalf("exit %d: %s %s", res.ExitCode, res.Stdout, res.Stderr)
			}
			got := map[string]syscall.Errno{}
			for _, line := range strings.Split(strings.TrimSpace(string(res.Stdout)), "\n") {
				name, v, _ := strings.Cut(line, "=")
				e, _ := strconv.Atoi(v)
				got[name] = syscall.Errno(e)
			}
			same := 0
			for name, want := range probes {
				if res.Enforced.Seccomp && got[name] != want {
					t.Errorf("%s: errno %d (%v), want %d (%v)", name, got[name], got[name], want, want)
				}
				if got[name] == want {
					same++
				}
			}
			if !res.Enforced.Seccomp && same < len(probes)-2 {
				negative = true // most probes answered otherwise without a filter
			}
		})
	}
	if !negative {
		t.Errorf("no backend without seccomp answered the probes otherwise: they do not tell the filter apart")
	}
}
