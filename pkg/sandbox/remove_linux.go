package sandbox

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// removeTree removes dir like os.RemoveAll, first giving back search and
// write permission to every directory a command took them from (chmod 000
// on a directory it made, at any depth). It works through directory fds
// opened without following symlinks, so that a process the run left
// behind cannot turn it onto a path outside dir.
func removeTree(dir string) error {
	if err := os.RemoveAll(dir); err == nil {
		return nil
	}
	parent, err := unix.Open(filepath.Dir(dir), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(parent)
	if err := clearTree(parent, filepath.Base(dir), 0); err != nil {
		return err
	}
	return os.RemoveAll(dir)
}

// clearTree empties the directory name of dirfd, recursively, making
// each directory searchable and writable by its owner first.
func clearTree(dirfd int, name string, depth int) error {
	if depth > 4096 {
		return errors.New("removeTree: directories nested too deep")
	}
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err == unix.EACCES {
		// Unreadable: give it back its permissions, through a descriptor
		// that cannot be a symlink, and try again.
		if pfd, perr := unix.Openat(dirfd, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0); perr == nil {
			unix.Chmod("/proc/thread-self/fd/"+strconv.Itoa(pfd), 0o700)
			unix.Close(pfd)
			fd, err = unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		}
	}
	if err == unix.ENOTDIR || err == unix.ELOOP || err == unix.ENOENT {
		return nil // a file or a symlink: os.RemoveAll removes it
	}
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	unix.Fchmod(fd, 0o700)
	names, err := f.Readdirnames(-1)
	if err != nil {
		return err
	}
	var first error
	for _, n := range names {
		var st unix.Stat_t
		if unix.Fstatat(fd, n, &st, unix.AT_SYMLINK_NOFOLLOW) != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
			continue
		}
		if err := clearTree(fd, n, depth+1); err != nil && first == nil {
			first = err
		}
	}
	return first
}
