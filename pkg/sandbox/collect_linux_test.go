package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// collectDir is a workdir of the caller's own, as a user keeps a
// project: not writable by anyone else (a root caller's commands run as
// another user, which sees these files as its own only through the
// idmapped lower layer Collect asks for).
func collectDir(t *testing.T, files map[string]string) string {
	t.Helper()
	d := t.TempDir()
	if os.Geteuid() == 0 {
		if err := searchableTo(d); err != nil {
			t.Fatal(err)
		}
	}
	for name, content := range files {
		p := filepath.Join(d, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// snapshotOf reads every file under d with its mode.
func snapshotOf(t *testing.T, d string) map[string]string {
	t.Helper()
	out := map[string]string{}
	filepath.WalkDir(d, func(p string, e os.DirEntry, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(d, p)
		fi, _ := e.Info()
		if e.Type().IsRegular() {
			b, _ := os.ReadFile(p)
			out[rel] = fi.Mode().String() + " " + string(b)
		} else {
			out[rel] = fi.Mode().String()
		}
		return nil
	})
	return out
}

func overlaySandboxes(t *testing.T) []named {
	t.Helper()
	var out []named
	for _, n := range linuxSandboxes(t, false) {
		if n.sb.Enforcement().Overlay {
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		t.Fatal("no backend here holds a workdir's changes apart, and the claims table says linux-ns must")
	}
	return out
}

// TestCollect: a command changes the workdir in every way; nothing of it
// reaches the workdir, and Collect is shown each change, concealed paths
// excepted, with the new contents readable through Open. A root caller's
// command changes the caller's files without their being lent.
func TestCollect(t *testing.T) {
	files := map[string]string{"a.txt": "old\n", "gone.txt": "gone\n", "dir/x": "x", "remade/old": "old",
		"keep/unchanged": "same", "secret.txt": "the key\n", "private/key": "k", "sub/deep/.env": "TOKEN=1"}
	script := `set -e
echo new >> a.txt; rm gone.txt; rm -r dir; rm -r remade; mkdir remade; echo only > remade/only
mkdir -p made/in; echo deep > made/in/f; ln -s a.txt link; mkfifo fifo; chmod 600 keep/unchanged
ls -A > listing; ls -A sub/deep > listing2
if cat secret.txt private/key sub/deep/.env 2>/dev/null; then echo READ; fi`
	for _, n := range overlaySandboxes(t) {
		t.Run(n.label, func(t *testing.T) {
			wd := collectDir(t, files)
			before := snapshotOf(t, wd)
			var got []string
			contents := map[string]string{}
			spec := &Spec{Argv: []string{"sh", "-c", script}, Workdir: wd, Env: []string{"PATH=/usr/bin:/bin"},
				Conceal: []string{"secret.txt", "private", "sub/deep/.env", "not/there"},
				Collect: func(ctx context.Context, u *Upper) error {
					return u.Walk(func(c Change) error {
						got = append(got, string(c.Kind)+" "+c.Path)
						if c.Kind == ChangeFile {
							f, err := u.Open(c.Path)
							if err != nil {
								return err
							}
							b, err := io.ReadAll(f)
							f.Close()
							contents[c.Path] = string(b)
							return err
						}
						return nil
					})
				}}
			res, err := n.sb.Run(context.Background(), spec)
			if err != nil {
				t.Fatalf("%v (%+v)", err, res)
			}
			if res.ExitCode != 0 || strings.Contains(string(res.Stdout), "READ") {
				t.Fatalf("exit %d, stdout %q, stderr %q", res.ExitCode, res.Stdout, res.Stderr)
			}
			if diff := cmp.Diff(before, snapshotOf(t, wd)); diff != "" {
				t.Errorf("the workdir changed (-before +after):\n%s", diff)
			}
			sort.Strings(got)
			want := []string{
				"dir made", "dir made/in", "dir remade", "dir sub", "dir sub/deep",
				"file a.txt", "file keep/unchanged", "file listing", "file listing2", "file made/in/f", "file remade/only",
				"other fifo", "removed dir", "removed gone.txt", "symlink link",
			}
			// The directories above a concealed path are the layer's (the
			// whiteouts' parents), and keep the workdir's attributes; keep
			// is copied up for its changed file.
			want = append(want, "dir keep")
			sort.Strings(want)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("changes (-want +got):\n%s", diff)
			}
			if contents["a.txt"] != "old\nnew\n" || contents["made/in/f"] != "deep\n" {
				t.Errorf("contents %q", contents)
			}
			if l := contents["listing"]; strings.Contains(l, "secret.txt") || strings.Contains(l, "private") || !strings.Contains(l, "a.txt") {
				t.Errorf("the command listed %q", l)
			}
			if l := contents["listing2"]; l != "" {
				t.Errorf("the command listed sub/deep as %q", l)
			}
		})
	}
}

// TestConcealControl is TestCollect's negative control: without Conceal
// the same command reads the secret.
func TestConcealControl(t *testing.T) {
	for _, n := range overlaySandboxes(t) {
		wd := collectDir(t, map[string]string{"secret.txt": "the key\n"})
		res, err := n.sb.Run(context.Background(), &Spec{Argv: []string{"cat", "secret.txt"}, Workdir: wd,
			Env: []string{"PATH=/usr/bin:/bin"}, Collect: func(context.Context, *Upper) error { return nil }})
		if err != nil || res.ExitCode != 0 || string(res.Stdout) != "the key\n" {
			t.Errorf("%s: %v, exit %d, %q: the unconcealed file should be read", n.label, err, res.ExitCode, res.Stdout)
		}
	}
}

// TestReadOnlyAt: a file bound at a path of the workdir is what the
// command reads there, and it cannot change it.
func TestReadOnlyAt(t *testing.T) {
	for _, n := range overlaySandboxes(t) {
		t.Run(n.label, func(t *testing.T) {
			wd := collectDir(t, map[string]string{"pinned_test.go": "the agent's\n"})
			pins := collectDir(t, map[string]string{"p": "PINNED\n"})
			res, err := n.sb.Run(context.Background(), &Spec{
				Argv:       []string{"sh", "-c", "cat pinned_test.go; echo x > pinned_test.go && echo WROTE"},
				Workdir:    wd,
				Env:        []string{"PATH=/usr/bin:/bin"},
				ReadOnlyAt: []Bind{{Source: filepath.Join(pins, "p"), Target: filepath.Join(wd, "pinned_test.go")}},
				Collect:    func(context.Context, *Upper) error { return nil }})
			if err != nil {
				t.Fatal(err)
			}
			if string(res.Stdout) != "PINNED\n" {
				t.Errorf("stdout %q, stderr %q; want the pinned file and no write", res.Stdout, res.Stderr)
			}
		})
	}
}

// A backend that cannot hold the changes apart refuses Collect, Conceal
// and ReadOnlyAt instead of ignoring them.
func TestCollectNeedsAnOverlay(t *testing.T) {
	for _, n := range linuxSandboxes(t, true) {
		if n.sb.Enforcement().Overlay {
			continue
		}
		wd := collectDir(t, nil)
		for _, spec := range []Spec{
			{Collect: func(context.Context, *Upper) error { return nil }},
			{Conceal: []string{"x"}},
			{ReadOnlyAt: []Bind{{Source: wd, Target: filepath.Join(wd, "y")}}},
		} {
			spec.Argv, spec.Workdir = []string{"true"}, wd
			if _, err := n.sb.Run(context.Background(), &spec); !errors.Is(err, ErrInvalid) {
				t.Errorf("%s: %v; want ErrInvalid", n.label, err)
			}
		}
	}
}

// A file bound from elsewhere into the workdir stays where it was put:
// the command cannot rename the directory that holds it away and put
// another file in its place, and a missing target is made in the upper
// layer, not in the workdir. (A directory of the lower layer cannot be
// renamed in an overlay anyway; one made for the target can, unless it
// is held.)
func TestReadOnlyAtHoldsItsPlace(t *testing.T) {
	for _, n := range overlaySandboxes(t) {
		t.Run(n.label, func(t *testing.T) {
			wd := collectDir(t, map[string]string{"tests/pinned_test.go": "the agent's\n"})
			pins := collectDir(t, map[string]string{"p": "PINNED\n", "q": "NEW\n"})
			res, err := n.sb.Run(context.Background(), &Spec{
				Argv:    []string{"sh", "-c", "mv tests tests2; mkdir -p tests; echo fake > tests/pinned_test.go; mv made made2; mkdir -p made/deep; echo fake > made/deep/q; cat tests/pinned_test.go made/deep/q"},
				Workdir: wd,
				Env:     []string{"PATH=/usr/bin:/bin"},
				ReadOnlyAt: []Bind{
					{Source: filepath.Join(pins, "p"), Target: filepath.Join(wd, "tests/pinned_test.go")},
					{Source: filepath.Join(pins, "q"), Target: filepath.Join(wd, "made/deep/q")},
				},
				Collect: func(context.Context, *Upper) error { return nil }})
			if err != nil {
				t.Fatal(err)
			}
			if string(res.Stdout) != "PINNED\nNEW\n" {
				t.Errorf("stdout %q, stderr %q; want the pinned files where they were bound", res.Stdout, res.Stderr)
			}
			if _, err := os.Stat(filepath.Join(wd, "made")); err == nil {
				t.Error("a missing bind target was made in the workdir")
			}
		})
	}
}

// A symbolic link on the way to a bind target fails the run: the bind,
// and the mount point it would make, never follow a link the workdir's
// files put there. The control is the same target with a directory where
// the link was, which binds.
func TestReadOnlyAtRefusesLinks(t *testing.T) {
	for _, n := range overlaySandboxes(t) {
		t.Run(n.label, func(t *testing.T) {
			for _, link := range []bool{false, true} {
				wd := collectDir(t, nil)
				outside := collectDir(t, nil)
				pins := collectDir(t, map[string]string{"p": "PINNED\n"})
				if link {
					os.Symlink(outside, filepath.Join(wd, "tests"))
				} else {
					os.Mkdir(filepath.Join(wd, "tests"), 0o755)
				}
				res, err := n.sb.Run(context.Background(), &Spec{
					Argv: []string{"cat", "tests/pinned_test.go"}, Workdir: wd, Env: []string{"PATH=/usr/bin:/bin"},
					ReadOnlyAt: []Bind{{Source: filepath.Join(pins, "p"), Target: filepath.Join(wd, "tests/pinned_test.go")}},
					Collect:    func(context.Context, *Upper) error { return nil }})
				if !link {
					if err != nil || string(res.Stdout) != "PINNED\n" {
						t.Fatalf("control: a plain directory on the way should bind: %v %+v", err, res)
					}
					continue
				}
				if err == nil {
					t.Errorf("a link on the way to the target was followed: stdout %q", res.Stdout)
				}
				if entries, _ := os.ReadDir(outside); len(entries) != 0 {
					t.Errorf("the bind made %v outside the workdir", entries)
				}
			}
		})
	}
}

// Commands started at once on many threads each get their lower layers
// and finish: no spawn waits on a descriptor that a sibling spawn's
// child, cloned at the same moment, holds open. A root caller's spawn
// makes a helper user namespace for its idmapped layers, and a helper
// that waited for its pipe's end to close hung when another spawn's
// helper had inherited that end; this hung within a few rounds.
func TestConcurrentOverlaySpawns(t *testing.T) {
	for _, n := range overlaySandboxes(t) {
		t.Run(n.label, func(t *testing.T) {
			wd := collectDir(t, map[string]string{"a.txt": "a\n"})
			const workers, rounds = 8, 25
			var wg sync.WaitGroup
			errs := make(chan error, workers)
			for range workers {
				wg.Go(func() {
					for range rounds {
						res, err := n.sb.Run(context.Background(), &Spec{Argv: []string{"cat", "a.txt"}, Workdir: wd,
							Env: []string{"PATH=/usr/bin:/bin"}, Collect: func(context.Context, *Upper) error { return nil }})
						if err == nil && string(res.Stdout) != "a\n" {
							err = fmt.Errorf("stdout %q, stderr %q", res.Stdout, res.Stderr)
						}
						if err != nil {
							errs <- err
							return
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
		})
	}
}

// TestCollectWritable: a writable path of a Collect run (a build cache)
// is written by one run and rewritten by the next: with a root caller the
// overlays' lower layers are idmapped, so what a run applies to it stays
// the caller's, whose files the command sees as its own; and with Lend,
// a path that a run without Collect lent to the command's user before
// (a gate on a copy) is lent back to the caller.
func TestCollectWritable(t *testing.T) {
	for _, n := range overlaySandboxes(t) {
		for _, lent := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/lend=%v", n.label, lent), func(t *testing.T) {
				wd := collectDir(t, map[string]string{"a.txt": "a\n"})
				cache := collectDir(t, nil)
				if e := n.sb.Enforcement(); lent && os.Geteuid() == 0 {
					if err := lend(cache, e.UID, e.GID); err != nil {
						t.Fatal(err)
					}
				}
				for i, script := range []string{"mkdir -p d && echo 1 > d/f", "echo 2 > d/f && mkdir d/e && echo x > d/e/g"} {
					res, err := n.sb.Run(context.Background(), &Spec{Argv: []string{"sh", "-c", `cd -- "$0" && ` + script, cache}, Workdir: wd, Writable: []string{cache}, Lend: lent,
						Env: []string{"PATH=/usr/bin:/bin"}, Collect: func(context.Context, *Upper) error { return nil }})
					if err != nil {
						t.Fatalf("run %d: %v", i, err)
					}
					if res.ExitCode != 0 {
						t.Fatalf("run %d: exit %d: %s", i, res.ExitCode, res.Stderr)
					}
				}
				if b, err := os.ReadFile(filepath.Join(cache, "d", "f")); err != nil || string(b) != "2\n" {
					t.Errorf("d/f = %q, %v; want the second run's", b, err)
				}
				if _, err := os.Stat(filepath.Join(cache, "d", "e", "g")); err != nil {
					t.Error(err)
				}
			})
		}
	}
}
