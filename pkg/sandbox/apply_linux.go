package sandbox

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strconv"
	"time"

	"github.com/initorigin/io-harness-go/pkg/sandbox/internal/spawn"
	"golang.org/x/sys/unix"
)

// overlayDir is a host directory that a linux-ns run wrote through an
// overlay: its changes are in upper/<ord> of the run's scratch tmpfs.
type overlayDir struct {
	ord  int
	path string
}

// overlaysOf lists the host directories req mounts as overlays, in the
// spawner's order (the workdir first, then the writable paths), sorted
// for applying: a directory before the ones inside it.
func overlaysOf(req *spawn.Request) []overlayDir {
	var paths []string
	if req.Flags&spawn.EphemeralWorkdir == 0 {
		paths = append(paths, req.Workdir)
	}
	paths = append(paths, req.Writable...)
	var out []overlayDir
	for i, p := range paths {
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			out = append(out, overlayDir{i, p})
		}
	}
	slices.SortStableFunc(out, func(a, b overlayDir) int { return len(a.path) - len(b.path) })
	return out
}

// applyOverlays applies the upper layers of a finished run to the host
// directories they cover. It works inside an os.Root per directory, so
// nothing the command made (a symlink, a name) leads it outside, and
// reads the upper layers through fds that never follow a symlink. owner
// gives applied files the owners they have in the upper layer (the
// caller is root). It applies all it can and returns every failure.
func applyOverlays(scratch int, dirs []overlayDir, owner bool) error {
	var errs []error
	for _, d := range dirs {
		up, err := unix.Openat(scratch, "upper/"+strconv.Itoa(d.ord), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err == unix.ENOENT {
			continue // the spawner did not make this one an overlay
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: the upper layer: %w", d.path, err))
			continue
		}
		root, err := os.OpenRoot(d.path)
		if err != nil {
			unix.Close(up)
			errs = append(errs, err)
			continue
		}
		a := &applier{root: root, host: d.path, owner: owner, links: map[[2]uint64]string{}}
		a.dir(up, ".")
		root.Close()
		errs = append(errs, a.errs...)
	}
	return errors.Join(errs...)
}

// applier applies one upper layer to one host directory.
type applier struct {
	root  *os.Root
	host  string
	owner bool
	// links maps an upper inode already applied to where, so that its
	// other names become hard links and not copies (which could write
	// far more than the disk cap).
	links map[[2]uint64]string
	errs  []error
	n     int // temporary names made so far
}

func (a *applier) fail(rel string, err error) {
	a.errs = append(a.errs, fmt.Errorf("%s: %w", path.Join(a.host, rel), err))
}

// dir applies the upper directory fd (which it closes) to rel.
func (a *applier) dir(fd int, rel string) {
	f := os.NewFile(uintptr(fd), rel)
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		a.fail(rel, err)
		return
	}
	slices.Sort(names)
	for _, name := range names {
		var st unix.Stat_t
		if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			a.fail(path.Join(rel, name), err)
			continue
		}
		target := path.Join(rel, name)
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFCHR:
			if st.Rdev == 0 { // a whiteout: the command removed it
				a.remove(target)
			}
		case unix.S_IFDIR:
			a.subdir(fd, name, target, &st)
		case unix.S_IFREG:
			a.file(fd, name, target, &st)
		case unix.S_IFLNK:
			a.symlink(fd, name, target, &st)
		}
		// Fifos, sockets and device nodes are not carried over.
	}
}

// remove removes rel from the host, giving back their permissions to
// directories that took them away.
func (a *applier) remove(rel string) {
	if err := a.root.RemoveAll(rel); err == nil {
		return
	}
	_ = walkChmod(a.root, rel)
	if err := a.root.RemoveAll(rel); err != nil {
		a.fail(rel, err)
	}
}

// walkChmod makes every directory at or under rel searchable and
// writable by its owner.
func walkChmod(root *os.Root, rel string) error {
	fi, err := root.Lstat(rel)
	if err != nil || !fi.IsDir() {
		return err
	}
	if err := root.Chmod(rel, 0o700); err != nil {
		return err
	}
	d, err := root.Open(rel)
	if err != nil {
		return err
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	for _, n := range names {
		walkChmod(root, path.Join(rel, n))
	}
	return err
}

func (a *applier) subdir(parent int, name, rel string, st *unix.Stat_t) {
	fd, err := unix.Openat(parent, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err == unix.EACCES {
		// The command took the permissions away from a directory it
		// made; the upper layer is the run's own, so give them back to
		// read it (the host's copy gets the command's mode at the end).
		if unix.Fchmodat(parent, name, 0o700, 0) == nil {
			fd, err = unix.Openat(parent, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		}
	}
	if err != nil {
		a.fail(rel, err)
		return
	}
	hst, herr := a.root.Lstat(rel)
	if opaque(fd) || (herr == nil && !hst.IsDir()) {
		// A directory made anew where the host has something else, or
		// whose old contents the command removed.
		a.remove(rel)
		herr = os.ErrNotExist
	}
	if herr != nil {
		err = a.root.Mkdir(rel, 0o700)
	} else {
		err = a.root.Chmod(rel, 0o700)
	}
	if err != nil {
		unix.Close(fd)
		a.fail(rel, err)
		return
	}
	a.dir(fd, rel)
	a.attrs(rel, st)
}

// opaque reports whether overlayfs marked the upper directory fd opaque:
// it hides the lower directory's contents.
func opaque(fd int) bool {
	buf := make([]byte, 8)
	for _, attr := range []string{"trusted.overlay.opaque", "user.overlay.opaque"} {
		if n, err := unix.Fgetxattr(fd, attr, buf); err == nil && n == 1 && buf[0] == 'y' {
			return true
		}
	}
	return false
}

func (a *applier) file(parent int, name, rel string, st *unix.Stat_t) {
	key := [2]uint64{st.Dev, st.Ino}
	if first, ok := a.links[key]; ok && st.Nlink > 1 {
		a.replace(rel, func(tmp string) error { return a.root.Link(first, tmp) })
		return
	}
	fd, err := unix.Openat(parent, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err == unix.EACCES && unix.Fchmodat(parent, name, 0o600, 0) == nil {
		// The command took the read permission away from a file it made
		// (the host's copy gets its mode back from st).
		fd, err = unix.Openat(parent, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		a.fail(rel, err)
		return
	}
	in := os.NewFile(uintptr(fd), name)
	defer in.Close()
	if a.replace(rel, func(tmp string) error {
		out, err := a.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return err
		}
		err = copySparse(out, in, st.Size)
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = a.attrsErr(tmp, st)
		}
		return err
	}) {
		a.links[key] = rel
	}
}

func (a *applier) symlink(parent int, name, rel string, st *unix.Stat_t) {
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(parent, name, buf)
	if err != nil {
		a.fail(rel, err)
		return
	}
	target := string(buf[:n])
	a.replace(rel, func(tmp string) error {
		if err := a.root.Symlink(target, tmp); err != nil {
			return err
		}
		if a.owner {
			return a.root.Lchown(tmp, int(st.Uid), int(st.Gid))
		}
		return nil
	})
}

// replace makes rel anew: make writes it under a temporary name beside
// it, which then replaces rel in one rename (a directory there is
// removed first). It reports success.
func (a *applier) replace(rel string, make func(tmp string) error) bool {
	a.n++
	tmp := path.Join(path.Dir(rel), fmt.Sprintf(".io-harness-apply-%d-%d", os.Getpid(), a.n))
	a.root.RemoveAll(tmp)
	if err := make(tmp); err != nil {
		a.root.RemoveAll(tmp)
		a.fail(rel, err)
		return false
	}
	if fi, err := a.root.Lstat(rel); err == nil && fi.IsDir() {
		a.remove(rel)
	}
	if err := a.root.Rename(tmp, rel); err != nil {
		a.root.RemoveAll(tmp)
		a.fail(rel, err)
		return false
	}
	return true
}

// attrs gives rel the mode, owner and times of st.
func (a *applier) attrs(rel string, st *unix.Stat_t) {
	if err := a.attrsErr(rel, st); err != nil {
		a.fail(rel, err)
	}
}

func (a *applier) attrsErr(rel string, st *unix.Stat_t) error {
	if a.owner {
		if err := a.root.Lchown(rel, int(st.Uid), int(st.Gid)); err != nil {
			return err
		}
	}
	// After the owner: chown clears the setgid bit a directory may keep.
	if err := a.root.Chmod(rel, os.FileMode(st.Mode&0o777)|modeBits(st.Mode)); err != nil {
		return err
	}
	return a.root.Chtimes(rel, time.Unix(st.Atim.Unix()), time.Unix(st.Mtim.Unix()))
}

// modeBits converts the setuid, setgid and sticky bits of a raw mode.
func modeBits(m uint32) os.FileMode {
	var out os.FileMode
	if m&unix.S_ISUID != 0 {
		out |= os.ModeSetuid
	}
	if m&unix.S_ISGID != 0 {
		out |= os.ModeSetgid
	}
	if m&unix.S_ISVTX != 0 {
		out |= os.ModeSticky
	}
	return out
}

// copySparse copies size bytes of in to out, leaving the holes of in
// holes: a sparse file in the upper layer costs the host no more than it
// cost the disk cap.
func copySparse(out, in *os.File, size int64) error {
	var off int64
	for off < size {
		data, err := unix.Seek(int(in.Fd()), off, unix.SEEK_DATA)
		if err == unix.ENXIO {
			break // only a hole is left
		}
		if err != nil {
			return err
		}
		hole, err := unix.Seek(int(in.Fd()), data, unix.SEEK_HOLE)
		if err != nil {
			return err
		}
		if _, err := io.Copy(io.NewOffsetWriter(out, data), io.NewSectionReader(in, data, hole-data)); err != nil {
			return err
		}
		off = hole
	}
	return out.Truncate(size)
}
