package fleet

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// entry is one member of a crafted archive.
type entry struct {
	name, link, body string
	dir              bool
}

func archive(t testing.TB, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: 0o644}
		switch {
		case e.dir:
			h.Typeflag, h.Mode = tar.TypeDir, 0o755
		case e.link != "":
			h.Typeflag, h.Linkname = tar.TypeSymlink, e.link
		default:
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.body))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(e.body))
	}
	tw.Close()
	gz.Close()
	return buf.Bytes()
}

// naiveUnpack is how a snapshot is often unpacked: names joined to the
// directory, links made as they come. It is the negative control.
func naiveUnpack(data []byte, dir string) error {
	gz, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return err
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err != nil {
			return nil
		}
		p := filepath.Join(dir, h.Name)
		switch h.Typeflag {
		case tar.TypeDir:
			os.MkdirAll(p, 0o755)
		case tar.TypeSymlink:
			os.Symlink(h.Linkname, p)
		default:
			os.MkdirAll(filepath.Dir(p), 0o755)
			body := new(bytes.Buffer)
			body.ReadFrom(tr)
			os.WriteFile(p, body.Bytes(), 0o644)
		}
	}
}

// A snapshot from the database is input: every way an archive can reach
// outside the directory it is unpacked into is refused, and nothing lands
// outside — where the naive unpacking writes the file outside.
func TestUnpackStaysInside(t *testing.T) {
	for _, c := range []struct {
		name     string
		entries  []entry
		absolute bool
	}{
		{"dot-dot", []entry{{name: "../outside.txt", body: "x"}}, false},
		{"absolute", []entry{{name: "/outside-io-harness-test.txt", body: "x"}}, true},
		{"link out, file through it", []entry{{name: "ln", link: ".."}, {name: "ln/outside.txt", body: "x"}}, false},
		{"absolute link", []entry{{name: "ln", link: "/"}, {name: "ln/outside-io-harness-test.txt", body: "x"}}, true},
		{"link chain", []entry{{name: "d", link: "."}, {name: "d/up", link: ".."}, {name: "up/outside.txt", body: "x"}}, false},
		{"deep dot-dot", []entry{{name: "a/b/../../../outside.txt", body: "x"}}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			base := t.TempDir()
			data := archive(t, c.entries...)
			dir := filepath.Join(base, "ws")
			if _, err := unpack(data, dir); !errors.Is(err, ErrSnapshot) {
				t.Errorf("unpack: %v", err)
			}
			for _, p := range []string{filepath.Join(base, "outside.txt"), "/outside-io-harness-test.txt"} {
				if _, err := os.Stat(p); err == nil {
					os.Remove(p)
					t.Fatalf("a file landed outside the workspace: %s", p)
				}
			}
			if _, err := os.Stat(dir); err == nil {
				t.Error("a refused snapshot left a workspace behind")
			}
			// The negative control, in a directory of its own. (Not for
			// the absolute names: the naive unpacking would write at the
			// machine's root.)
			if c.absolute {
				return
			}
			naive := t.TempDir()
			os.Mkdir(filepath.Join(naive, "ws"), 0o755)
			naiveUnpack(data, filepath.Join(naive, "ws"))
			if _, err := os.Stat(filepath.Join(naive, "outside.txt")); err != nil {
				t.Errorf("the naive unpacking kept this one inside too: the attack is not one")
			}
		})
	}
}

// What pack takes, unpack gives back: files, modes, directories and links
// that stay inside; a link out of the workspace is refused at packing.
func TestPackRoundTrip(t *testing.T) {
	src := t.TempDir()
	os.MkdirAll(filepath.Join(src, "a", "b"), 0o755)
	os.WriteFile(filepath.Join(src, "a", "b", "run.sh"), []byte("#!/bin/sh\n"), 0o755)
	os.WriteFile(filepath.Join(src, "top.txt"), []byte("top"), 0o600)
	os.Symlink("a/b/run.sh", filepath.Join(src, "link"))
	os.Mkdir(filepath.Join(src, "empty"), 0o755)
	data, files, size, err := pack(src)
	if err != nil {
		t.Fatal(err)
	}
	if files != 6 || size != int64(len("#!/bin/sh\n")+len("top")) {
		t.Errorf("%d files, %d bytes", files, size)
	}
	out := filepath.Join(t.TempDir(), "out")
	if _, err := unpack(data, out); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(out, "a", "b", "run.sh"))
	if err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("run.sh: %v %v", fi, err)
	}
	if data, _ := os.ReadFile(filepath.Join(out, "link")); string(data) != "#!/bin/sh\n" {
		t.Errorf("link reads %q", data)
	}
	if fi, err := os.Stat(filepath.Join(out, "empty")); err != nil || !fi.IsDir() {
		t.Errorf("empty: %v", err)
	}
	os.Symlink("/etc/passwd", filepath.Join(src, "leak"))
	if _, _, _, err := pack(src); !errors.Is(err, ErrSnapshot) || !strings.Contains(err.Error(), "outside the workspace") {
		t.Errorf("a link out: %v", err)
	}
}

// Whatever bytes a snapshot holds, unpacking them never writes outside
// the directory: it unpacks, or refuses, and leaves nothing beside it.
func FuzzUnpack(f *testing.F) {
	f.Add(archive(f, entry{name: "a.txt", body: "x"}))
	f.Add(archive(f, entry{name: "d", dir: true}, entry{name: "d/b", body: "y"}, entry{name: "l", link: "d/b"}))
	f.Add(archive(f, entry{name: "../x", body: "x"}))
	f.Add(archive(f, entry{name: "ln", link: ".."}, entry{name: "ln/x", body: "x"}))
	f.Add([]byte("not gzip"))
	f.Fuzz(func(t *testing.T, data []byte) {
		base := t.TempDir()
		unpack(data, filepath.Join(base, "inner", "ws"))
		entries, _ := os.ReadDir(base)
		if len(entries) != 1 || entries[0].Name() != "inner" {
			t.Fatalf("unpacking wrote beside its directory: %v", entries)
		}
		inner, _ := os.ReadDir(filepath.Join(base, "inner"))
		for _, e := range inner {
			if e.Name() != "ws" {
				t.Fatalf("unpacking left %s beside the workspace", e.Name())
			}
		}
	})
}
