package sandbox

import (
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// forkExec starts a program like syscall.ForkExec, except that the child
// inherits attr.Files and nothing else. Go's ForkExec leaves the child
// every descriptor of this process that is not close-on-exec, and a host
// process can hold some it inherited (a shell's `exec 8>>file`, a
// Python fd made inheritable): the command could write to them.
//
// It gives the calling thread a file table of its own (unshare
// CLONE_FILES), closes there everything but attr.Files and the
// close-on-exec anonymous-inode descriptors (the Go runtime's epoll and
// eventfd, which it may use on any thread, and which no child inherits),
// forks from it, and then closes attr.Files there too, so that the
// thread holds nothing of the host's for the child's life. The caller must have locked the goroutine to its thread
// and must never unlock it: the thread is spoiled for other goroutines
// and must die with this one. The child's parent-death signal is tied to
// the thread, so the goroutine lives as long as the child.
//
// A root caller's child that switches ids (attr.Sys.Credential) resets
// the dumpable flag of the memory it shares with this process until it
// execs; forkExec puts the flag back.
func forkExec(path string, argv []string, attr *syscall.ProcAttr) (int, error) {
	if err := unix.Unshare(unix.CLONE_FILES); err != nil {
		return 0, os.NewSyscallError("unshare CLONE_FILES", err)
	}
	keep := map[int]bool{}
	for _, fd := range attr.Files {
		keep[int(fd)] = true
	}
	if err := closeExcept(keep); err != nil {
		return 0, err
	}
	dumpable, _ := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0)
	pid, err := syscall.ForkExec(path, argv, attr)
	if attr.Sys != nil && attr.Sys.Credential != nil && (dumpable == 0 || dumpable == 1) {
		unix.Prctl(unix.PR_SET_DUMPABLE, uintptr(dumpable), 0, 0, 0)
	}
	for fd := range keep {
		unix.Close(fd)
	}
	return pid, err
}

// closeExcept closes every descriptor of the calling thread's (private)
// file table but keep and the close-on-exec anonymous inodes.
func closeExcept(keep map[int]bool) error {
	dir, err := unix.Open("/proc/thread-self/fd", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return os.NewSyscallError("open /proc/thread-self/fd", err)
	}
	var fds []int
	buf := make([]byte, 4096)
	for {
		n, err := unix.Getdents(dir, buf)
		if err != nil {
			unix.Close(dir)
			return os.NewSyscallError("getdents /proc/thread-self/fd", err)
		}
		if n == 0 {
			break
		}
		var names []string
		_, _, names = unix.ParseDirent(buf[:n], -1, names)
		for _, name := range names {
			if fd, err := strconv.Atoi(name); err == nil && fd != dir && !keep[fd] {
				fds = append(fds, fd)
			}
		}
	}
	unix.Close(dir)
	link := make([]byte, 256)
	for _, fd := range fds {
		flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
		if err == nil && flags&unix.FD_CLOEXEC != 0 {
			n, err := unix.Readlink("/proc/thread-self/fd/"+strconv.Itoa(fd), link)
			if err == nil && strings.HasPrefix(string(link[:n]), "anon_inode:") {
				continue
			}
		}
		unix.Close(fd)
	}
	return nil
}
