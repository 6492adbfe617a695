package snapshot

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func concealTree(t *testing.T, files map[string]string) (*os.Root, string) {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	return root, dir
}

// Conceal lists what the read policy refuses, file by file, and the
// links that lead out or to a refused file, and nothing else.
func TestConceal(t *testing.T) {
	root, dir := concealTree(t, map[string]string{"a.txt": "", "secret/key": "", "sub/.env": "", "sub/ok": ""})
	os.Symlink("../secret/key", filepath.Join(dir, "sub", "alias"))
	os.Symlink("/etc/passwd", filepath.Join(dir, "out"))
	os.Symlink("a.txt", filepath.Join(dir, "fine"))
	refuse := func(rel string) bool { return rel != "secret/key" && filepath.Base(rel) != ".env" }
	got, err := Conceal(context.Background(), root, refuse, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"out", "secret/key", "sub/.env", "sub/alias"}, got); diff != "" {
		t.Errorf("concealed (-want +got):\n%s", diff)
	}
	if _, err := Conceal(context.Background(), root, nil, 3, nil); err == nil {
		t.Error("a tree over maxNames should be an error")
	}
}

// A remembered listing is used while its directory is unchanged, and a
// change to the directory (a new, refused file) is seen at once. The
// control is the planted listing: it is what the walk returns while the
// directory is still.
func TestConcealRemembers(t *testing.T) {
	root, dir := concealTree(t, map[string]string{"d/a": ""})
	names := &Names{window: -time.Hour} // keep every listing, however fresh
	refuse := func(rel string) bool { return filepath.Base(rel) != ".env" }
	if got, _ := Conceal(context.Background(), root, refuse, 0, names); len(got) != 0 {
		t.Fatalf("concealed %v", got)
	}
	// Plant a listing with a refused name: used, since d did not change.
	names.mu.Lock()
	l := names.dirs["d"]
	l.entries = append(l.entries, nameType{name: ".env"})
	names.dirs["d"] = l
	names.mu.Unlock()
	if got, _ := Conceal(context.Background(), root, refuse, 0, names); !cmp.Equal(got, []string{"d/.env"}) {
		t.Fatalf("control: the remembered listing of d should be used: %v", got)
	}
	// A real change to d: listed again.
	if err := os.WriteFile(filepath.Join(dir, "d", "x.env"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	os.Rename(filepath.Join(dir, "d", "x.env"), filepath.Join(dir, "d", ".env2"))
	os.Rename(filepath.Join(dir, "d", ".env2"), filepath.Join(dir, "d", ".env"))
	got, _ := Conceal(context.Background(), root, refuse, 0, names)
	if !cmp.Equal(got, []string{"d/.env"}) {
		t.Fatalf("after a change: %v", got)
	}
	names.mu.Lock()
	_, planted := names.dirs["d"]
	names.mu.Unlock()
	if !planted {
		t.Fatal("d's new listing was not remembered")
	}
}

// A listing of a directory changed within the racy window is not kept:
// a change in the same tick of the filesystem's clock would not move
// the directory's times.
func TestConcealRacyListing(t *testing.T) {
	root, _ := concealTree(t, map[string]string{"d/a": ""})
	names := &Names{}
	if _, err := Conceal(context.Background(), root, nil, 0, names); err != nil {
		t.Fatal(err)
	}
	if len(names.dirs) != 0 {
		t.Errorf("listings of a tree made just now were kept: %v", names.dirs)
	}
	names.window = -time.Hour // the control: a window that keeps everything
	Conceal(context.Background(), root, nil, 0, names)
	if len(names.dirs) == 0 {
		t.Error("control: with no window the listings should be kept")
	}
}
