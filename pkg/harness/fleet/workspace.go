package fleet

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/initorigin/io-harness-go/pkg/harness"
	"github.com/initorigin/io-harness-go/pkg/harness/store/postgres"
)

// The bounds of a workspace snapshot, packed or unpacked: a snapshot in
// the database is input like any other, and unpacking one must not fill
// a worker's disk.
const (
	maxSnapshotFiles = 50_000
	maxSnapshotBytes = 256 << 20 // the files' contents, uncompressed
)

// ErrSnapshot reports a workspace that cannot be packed, or a snapshot
// that cannot be unpacked safely.
var ErrSnapshot = errors.New("fleet: workspace snapshot")

// workspaceDir is the directory a task works in: its root, or its file's
// directory.
func workspaceDir(t *harness.TaskContract) string {
	if t.SingleFile() {
		return filepath.Dir(t.File)
	}
	return t.Root
}

// pack archives dir: its directories, regular files and links that stay
// inside it, as a gzip-compressed tar. A link that leaves the workspace,
// a special file, or a workspace over the bounds is refused.
func pack(dir string) (data []byte, files int, size int64, err error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("%w: %v", ErrSnapshot, err)
	}
	defer root.Close()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	err = fs.WalkDir(root.FS(), ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if name == "." {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if files++; files > maxSnapshotFiles {
			return fmt.Errorf("more than %d files", maxSnapshotFiles)
		}
		h := &tar.Header{Name: name, Mode: int64(info.Mode().Perm()), ModTime: info.ModTime()}
		switch {
		case d.IsDir():
			h.Typeflag, h.Name = tar.TypeDir, name+"/"
		case info.Mode().IsRegular():
			h.Typeflag, h.Size = tar.TypeReg, info.Size()
			if size += info.Size(); size > maxSnapshotBytes {
				return fmt.Errorf("more than %d bytes", maxSnapshotBytes)
			}
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := root.Readlink(name)
			if err != nil {
				return err
			}
			if !linkStaysInside(name, target) {
				return fmt.Errorf("%s links to %s, outside the workspace: an uploaded workspace must be self-contained", name, target)
			}
			h.Typeflag, h.Linkname = tar.TypeSymlink, target
		default:
			return fmt.Errorf("%s is not a file, a directory or a link", name)
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if h.Typeflag == tar.TypeReg {
			f, err := root.Open(name)
			if err != nil {
				return err
			}
			defer f.Close()
			if n, err := io.Copy(tw, io.LimitReader(f, h.Size)); err != nil || n != h.Size {
				return fmt.Errorf("%s changed while it was read", name)
			}
		}
		return nil
	})
	if err == nil {
		err = tw.Close()
	}
	if err == nil {
		err = gz.Close()
	}
	if err != nil {
		return nil, 0, 0, fmt.Errorf("%w: %s: %v", ErrSnapshot, dir, err)
	}
	return buf.Bytes(), files, size, nil
}

// linkStaysInside reports whether a link at name (a slash path inside the
// workspace) to target resolves inside the workspace, by its text alone.
func linkStaysInside(name, target string) bool {
	if target == "" || path.IsAbs(target) || filepath.IsAbs(target) || strings.ContainsRune(target, '\\') {
		return false
	}
	return filepath.IsLocal(path.Join(path.Dir(name), target))
}

// unpack writes a snapshot into dir, which must not exist or be empty. It
// writes through an os.Root on a fresh directory beside dir, so no entry
// — a name with "..", an absolute name, a link out followed by a file
// through it — can land outside, and renames it into place at the end: a
// worker that dies midway leaves no half workspace at dir.
func unpack(data []byte, dir string) (files int, err error) {
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return 0, fmt.Errorf("%w: %s is not empty", ErrSnapshot, dir)
	} else if err == nil {
		os.Remove(dir)
	}
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return 0, fmt.Errorf("%w: %v", ErrSnapshot, err)
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(dir)+".unpacking-")
	if err != nil {
		return 0, fmt.Errorf("%w: %v", ErrSnapshot, err)
	}
	defer os.RemoveAll(tmp)
	if files, err = unpackInto(data, tmp); err != nil {
		return 0, fmt.Errorf("%w: %v", ErrSnapshot, err)
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return 0, fmt.Errorf("%w: %v", ErrSnapshot, err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return 0, fmt.Errorf("%w: %v", ErrSnapshot, err)
	}
	return files, nil
}

func unpackInto(data []byte, dir string) (int, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return 0, err
	}
	defer root.Close()
	gz, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return 0, err
	}
	tr := tar.NewReader(gz)
	var files int
	var size int64
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files, nil
		}
		if err != nil {
			return files, err
		}
		if files++; files > maxSnapshotFiles {
			return files, fmt.Errorf("more than %d files", maxSnapshotFiles)
		}
		name := strings.TrimSuffix(h.Name, "/")
		if !filepath.IsLocal(name) || strings.ContainsRune(name, '\\') {
			return files, fmt.Errorf("the entry %q would land outside the workspace", h.Name)
		}
		mode := fs.FileMode(h.Mode).Perm()
		switch h.Typeflag {
		case tar.TypeDir:
			if err := root.MkdirAll(name, 0o755); err != nil {
				return files, err
			}
		case tar.TypeReg:
			if size += h.Size; h.Size < 0 || size > maxSnapshotBytes {
				return files, fmt.Errorf("more than %d bytes", maxSnapshotBytes)
			}
			if d := path.Dir(name); d != "." {
				if err := root.MkdirAll(d, 0o755); err != nil {
					return files, err
				}
			}
			f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode|0o600)
			if err != nil {
				return files, err
			}
			n, err := io.Copy(f, io.LimitReader(tr, h.Size))
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil || n != h.Size {
				return files, fmt.Errorf("%s: short or failed write: %v", name, err)
			}
		case tar.TypeSymlink:
			if !linkStaysInside(name, h.Linkname) {
				return files, fmt.Errorf("the link %s -> %s leaves the workspace", name, h.Linkname)
			}
			if err := root.Symlink(h.Linkname, name); err != nil {
				return files, err
			}
			// By its text the link stays inside, but links it passes
			// through may not: resolve it through the root, which refuses
			// a path that leaves it.
			if _, err := root.Stat(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return files, fmt.Errorf("the link %s -> %s leaves the workspace: %v", name, h.Linkname, err)
			}
		default:
			return files, fmt.Errorf("the entry %s is of a kind a workspace does not hold (%c)", name, h.Typeflag)
		}
	}
}

// Fetch writes the workspace a run left, stored when it finished, into
// dir, which must not exist or be empty. Only an uploaded run stores one.
//
// # Errors
//
// A run with no stored result wraps store.ErrNotFound; a dir that is not
// empty, or a snapshot that would write outside dir, wraps ErrSnapshot.
func Fetch(ctx context.Context, st *postgres.Store, runID, dir string) (files int, err error) {
	snap, err := st.Snapshot(ctx, runID, "result")
	if err != nil {
		return 0, err
	}
	return unpack(snap.Data, dir)
}
