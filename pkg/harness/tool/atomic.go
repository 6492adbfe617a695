package tool

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
)

// newFileMode is the mode of a file write_file creates, before umask.
const newFileMode fs.FileMode = 0o644

// newDirMode is the mode of a parent directory write_file creates.
const newDirMode fs.FileMode = 0o755

// writeAtomic replaces the content of the file p in root with data, or
// creates it with its parent directories. The data goes to a temporary
// file in the same directory, which is synced and renamed over p, so a
// reader sees the old content or the new, never a mix. An existing file
// keeps its mode. When p is a symlink inside the root the file it leads
// to is written and the link is kept. It reports whether the file is new.
func writeAtomic(ctx context.Context, root *os.Root, p string, data []byte) (created bool, err error) {
	target, err := resolveLinks(root, p)
	if err != nil {
		return false, err
	}
	mode := newFileMode
	switch fi, err := root.Stat(target); {
	case err == nil && fi.IsDir():
		return false, fmt.Errorf("%s is a directory", p)
	case err == nil && !fi.Mode().IsRegular():
		return false, fmt.Errorf("%s is not a regular file", p)
	case err == nil:
		mode = fi.Mode().Perm()
	case errors.Is(err, fs.ErrNotExist):
		created = true
	default:
		return false, err
	}

	dir := path.Dir(target)
	if dir != "." {
		if err := root.MkdirAll(dir, newDirMode); err != nil {
			return false, err
		}
	}
	base := path.Base(target)
	if len(base) > 200 { // keep the temporary name within NAME_MAX
		base = base[:200]
	}
	tmp := path.Join(dir, "."+base+".tmp-"+rand.Text()[:12])
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return false, err
	}
	err = writeSync(f, data, mode)
	if err == nil {
		err = ctx.Err()
	}
	if err == nil {
		err = root.Rename(tmp, target)
	}
	if err != nil {
		_ = root.Remove(tmp)
		return false, err
	}
	return created, nil
}

// writeSync writes data to f, sets its mode (which the umask may have
// narrowed at creation), syncs and closes it.
func writeSync(f *os.File, data []byte, mode fs.FileMode) error {
	_, err := f.Write(data)
	if err == nil {
		err = f.Chmod(mode)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path.Base(f.Name()), err)
	}
	return nil
}
