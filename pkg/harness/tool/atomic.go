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

// errGitDir is returned by [writeAtomic] for a write into a .git
// directory; see [gitFloor].
const errGitDir = constError(ReasonGitDir)

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
//
// In a shared workspace (env.Files) the write is judged against what the
// agent has seen of the file — since the mark since, when it is not zero —
// and refused with a *ConflictError if another agent wrote it after.
func writeAtomic(ctx context.Context, env *Env, p string, data []byte, since uint64) (created bool, err error) {
	target, err := resolveLinks(env.Root, p)
	if err != nil {
		return false, err
	}
	if gitFloor(env, p) != nil || gitFloor(env, target) != nil {
		return false, errGitDir
	}
	if env.Files == nil {
		return replace(ctx, env, target, p, data)
	}
	err = env.Files.Write(target, since, func() error {
		created, err = replace(ctx, env, target, p, data)
		return err
	})
	return created, err
}

// replace is writeAtomic's write of the file target, which p resolves to.
func replace(ctx context.Context, env *Env, target, p string, data []byte) (created bool, err error) {
	root := env.Root
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
	err = writeOut(f, data, mode, !env.NoSync)
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

// writeOut writes data to f, sets its mode (which the umask may have
// narrowed at creation), syncs it when asked, and closes it.
func writeOut(f *os.File, data []byte, mode fs.FileMode, sync bool) error {
	_, err := f.Write(data)
	if err == nil {
		err = f.Chmod(mode)
	}
	if err == nil && sync {
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
