package sandbox

import (
	"errors"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// landlockVersion returns the kernel's Landlock ABI version, 0 without.
func landlockVersion() int {
	v, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if e != 0 {
		return 0
	}
	return int(v)
}

// landlockRuleset mirrors struct landlock_ruleset_attr up to ABI 6.
type landlockRuleset struct {
	handledFS, handledNet, scoped uint64
}

// landlockPathBeneath mirrors the packed struct landlock_path_beneath_attr.
type landlockPathBeneath struct {
	allowed  uint64
	parentFD int32
}

// restrictThread confines the calling thread, and every process it starts
// afterwards, with Landlock: read and execute everywhere, everything in
// writable, read and write on the harmless device nodes; with ABI 6,
// abstract Unix sockets and signals are scoped to the domain. The caller
// must have locked the goroutine to its thread and must never unlock it:
// the thread is spoiled for other goroutines and must die with this one.
func restrictThread(abi int, writable []string) error {
	if abi < 1 {
		return errors.ErrUnsupported
	}
	all := uint64(0x1fff) // ABI 1: every filesystem right
	if abi >= 2 {
		all |= unix.LANDLOCK_ACCESS_FS_REFER
	}
	if abi >= 3 {
		all |= unix.LANDLOCK_ACCESS_FS_TRUNCATE
	}
	if abi >= 5 {
		all |= unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
	}
	attr := landlockRuleset{handledFS: all}
	size := unsafe.Sizeof(uint64(0))
	if abi >= 6 {
		attr.scoped = unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | unix.LANDLOCK_SCOPE_SIGNAL
		size = unsafe.Sizeof(attr)
	}
	fd, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), size, 0)
	if e != 0 {
		return e
	}
	defer unix.Close(int(fd))
	rx := uint64(unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_READ_DIR)
	dev := uint64(unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_IOCTL_DEV)
	rules := []struct {
		path   string
		access uint64
	}{{"/", rx}, {"/dev/null", dev}, {"/dev/zero", dev}, {"/dev/full", dev}, {"/dev/tty", dev}}
	for _, w := range writable {
		rules = append(rules, struct {
			path   string
			access uint64
		}{w, all})
	}
	for _, r := range rules {
		if err := addPathRule(int(fd), r.path, r.access&all); err != nil {
			return err
		}
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return err
	}
	if _, _, e := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, fd, 0, 0); e != 0 {
		return e
	}
	return nil
}

// addPathRule grants access beneath path; a missing path is skipped.
func addPathRule(ruleset int, path string, access uint64) error {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err == unix.ENOENT {
		return nil
	}
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err == nil && st.Mode&unix.S_IFMT != unix.S_IFDIR {
		access &= unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_READ_FILE |
			unix.LANDLOCK_ACCESS_FS_TRUNCATE | unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
	}
	pb := landlockPathBeneath{allowed: access, parentFD: int32(fd)}
	_, _, e := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(ruleset), unix.LANDLOCK_RULE_PATH_BENEATH,
		uintptr(unsafe.Pointer(&pb)), 0, 0, 0)
	runtime.KeepAlive(pb)
	if e != 0 {
		return e
	}
	return nil
}
