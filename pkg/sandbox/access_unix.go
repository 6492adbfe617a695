//go:build unix

package sandbox

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// callerIDs returns the effective user and group of this process.
func callerIDs() (uid, gid int) { return os.Geteuid(), os.Getegid() }

// lend gives path, and everything beneath it, to uid and gid. It works
// inside an os.Root, so that a symlink (or a directory swapped for one
// meanwhile) never leads it out of path.
func lend(path string, uid, gid int) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return os.Lchown(path, uid, gid)
	}
	root, err := os.OpenRoot(path)
	if err != nil {
		return err
	}
	defer root.Close()
	return fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if info, err := d.Info(); err == nil {
			if st, ok := info.Sys().(*syscall.Stat_t); ok && int(st.Uid) == uid && int(st.Gid) == gid {
				return nil
			}
		}
		return root.Lchown(p, uid, gid)
	})
}

// writableBy says why uid and gid (with no supplementary groups) cannot
// write path by its owner and mode bits, or "" when they can. A directory
// must also be searchable.
func writableBy(path string, uid, gid int) string {
	fi, err := os.Stat(path)
	if err != nil {
		return err.Error()
	}
	want := fs.FileMode(0o2)
	if fi.IsDir() {
		want = 0o3
	}
	if !allowed(fi, uid, gid, want) {
		if fi.IsDir() {
			return "the directory is not writable and searchable"
		}
		return "the file is not writable"
	}
	return ""
}

// reachableBy says why uid and gid cannot search every directory leading
// to path, or "" when they can.
func reachableBy(path string, uid, gid int) string {
	for dir := filepath.Dir(path); ; dir = filepath.Dir(dir) {
		fi, err := os.Stat(dir)
		if err != nil {
			return err.Error()
		}
		if !allowed(fi, uid, gid, 0o1) {
			return "the directory " + dir + " leading to it is not searchable"
		}
		if dir == "/" || dir == "." {
			return ""
		}
	}
}

// allowed applies the owner, group or other bits of fi, whichever class
// uid and gid fall in, to the rwx bits want (0o1 search, 0o2 write, 0o4
// read).
func allowed(fi fs.FileInfo, uid, gid int, want fs.FileMode) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return false
	}
	perm := fi.Mode().Perm()
	switch {
	case int(st.Uid) == uid:
		perm >>= 6
	case int(st.Gid) == gid:
		perm >>= 3
	}
	return perm&want == want
}
