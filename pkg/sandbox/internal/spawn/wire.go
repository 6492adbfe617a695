// Package spawn is the Go side of the C spawner that builds the Linux
// sandbox (spawn.c): the spec's wire format and the cgo entry point. The
// io-harness-sandbox-exec helper runs the same C code (iohs_helper_main)
// for builds without cgo; package sandbox speaks its protocol.
package spawn

import (
	"encoding/binary"
	"fmt"
	"syscall"
)

// Record tags of the wire format; keep in sync with spawn.h.
const (
	tagArg        = 1
	tagEnv        = 2
	tagWorkdir    = 3
	tagRO         = 4
	tagRW         = 5
	tagRlimit     = 6
	tagFlags      = 7
	tagTmpfsSize  = 8
	tagStdio      = 9
	tagProbePath  = 10
	tagListenPort = 11
	tagHide       = 12
	tagRunAs      = 13
	tagProbeDial  = 14
	tagROAt       = 15
	tagConceal    = 16
)

// Flags select what the spawner builds; keep in sync with spawn.h.
type Flags uint64

const (
	// NS makes mount, pid, net, ipc and uts namespaces (and a user
	// namespace, unless the request has RunAs) and the private read-only
	// root.
	NS Flags = 1 << 0
	// Landlock adds a Landlock ruleset as a second wall.
	Landlock Flags = 1 << 1
	// Seccomp adds the seccomp deny-list.
	Seccomp Flags = 1 << 2
	// DenyInet refuses every network socket (for rungs without a netns).
	DenyInet Flags = 1 << 3
	// Probe does every step but exec, checks that a write to ProbePath is
	// refused (and pid 1 under NS), and exits 0.
	Probe Flags = 1 << 4
	// EphemeralWorkdir creates Workdir inside the private /tmp instead of
	// binding a host directory.
	EphemeralWorkdir Flags = 1 << 5
	// DenySetsid keeps every process in the run's session, so that a
	// session sweep finds them all.
	DenySetsid Flags = 1 << 6
	// Overlay mounts every writable directory (NS only) as an overlay
	// whose upper layer is in the scratch tmpfs, so that what the payload
	// writes counts against its size and reaches the host only when the
	// caller applies it.
	Overlay Flags = 1 << 7
	// Idmap, with RunAs, shows the caller's files in the overlays' lower
	// layers as the run's user's, so that it can change them (in the
	// upper layers).
	Idmap Flags = 1 << 8
)

// Bind is a host path bound read-only at another path in the sandbox
// (NS only).
type Bind struct {
	Source, Target string
}

// Rlimit is one resource limit set in the child before exec.
type Rlimit struct {
	Resource   int
	Soft, Hard uint64
}

// Request is what the spawner needs. Paths are absolute and resolved.
type Request struct {
	Argv     []string
	Env      []string
	Workdir  string
	ReadOnly []string
	Writable []string
	// Hide are paths covered by an empty directory or file (NS only).
	Hide []string
	// ReadOnlyAt are host paths bound read-only elsewhere (NS only).
	ReadOnlyAt []Bind
	// Conceal are paths relative to the workdir that its overlay shows
	// as absent (Overlay only).
	Conceal []string
	Rlimits []Rlimit
	Flags   Flags
	// TmpfsSize is the size of the scratch tmpfs (NS only).
	TmpfsSize uint64
	// RunAs, when set, runs the payload as the host ids UID and GID: the
	// spawner must be root, and makes no user namespace.
	RunAs    bool
	UID, GID uint32
	// ProbePath and ProbeDial are for probe mode: a host path the payload
	// must fail to create, and a 127.0.0.1 port it tries to connect to.
	ProbePath  string
	ProbeDial  int
	ListenPort int
}

// Encode returns the request in the wire format spawn.c decodes: records
// of a native-endian u32 tag, a u32 length and the value.
func (r *Request) Encode() []byte {
	var b []byte
	str := func(tag uint32, s string) {
		b = binary.NativeEndian.AppendUint32(b, tag)
		b = binary.NativeEndian.AppendUint32(b, uint32(len(s)))
		b = append(b, s...)
	}
	u64 := func(tag uint32, v uint64) {
		b = binary.NativeEndian.AppendUint32(b, tag)
		b = binary.NativeEndian.AppendUint32(b, 8)
		b = binary.NativeEndian.AppendUint64(b, v)
	}
	for _, a := range r.Argv {
		str(tagArg, a)
	}
	for _, e := range r.Env {
		str(tagEnv, e)
	}
	str(tagWorkdir, r.Workdir)
	for _, p := range r.ReadOnly {
		str(tagRO, p)
	}
	for _, p := range r.Writable {
		str(tagRW, p)
	}
	for _, p := range r.Hide {
		str(tagHide, p)
	}
	for _, b := range r.ReadOnlyAt {
		str(tagROAt, b.Source+"\x00"+b.Target+"\x00")
	}
	for _, p := range r.Conceal {
		str(tagConceal, p)
	}
	for _, l := range r.Rlimits {
		b = binary.NativeEndian.AppendUint32(b, tagRlimit)
		b = binary.NativeEndian.AppendUint32(b, 24)
		b = binary.NativeEndian.AppendUint32(b, uint32(l.Resource))
		b = binary.NativeEndian.AppendUint32(b, 0)
		b = binary.NativeEndian.AppendUint64(b, l.Soft)
		b = binary.NativeEndian.AppendUint64(b, l.Hard)
	}
	u64(tagFlags, uint64(r.Flags))
	u64(tagTmpfsSize, r.TmpfsSize)
	if r.ProbePath != "" {
		str(tagProbePath, r.ProbePath)
	}
	u32 := func(tag uint32, v uint32) {
		b = binary.NativeEndian.AppendUint32(b, tag)
		b = binary.NativeEndian.AppendUint32(b, 4)
		b = binary.NativeEndian.AppendUint32(b, v)
	}
	if r.ListenPort > 0 {
		u32(tagListenPort, uint32(r.ListenPort))
	}
	if r.ProbeDial > 0 {
		u32(tagProbeDial, uint32(r.ProbeDial))
	}
	if r.RunAs {
		b = binary.NativeEndian.AppendUint32(b, tagRunAs)
		b = binary.NativeEndian.AppendUint32(b, 8)
		b = binary.NativeEndian.AppendUint32(b, r.UID)
		b = binary.NativeEndian.AppendUint32(b, r.GID)
	}
	return b
}

// SetupError is a failed step of the spawner: the sandbox could not be
// built, and the payload never ran.
type SetupError struct {
	// Stage names the step, e.g. "mount: private /proc".
	Stage string
	// Errno is the step's error number; 0 when the step failed a check
	// rather than a system call.
	Errno syscall.Errno
}

func (e *SetupError) Error() string {
	if e.Errno == 0 {
		return e.Stage
	}
	return fmt.Sprintf("%s: %v", e.Stage, e.Errno)
}

// Unwrap returns the errno, so that errors.Is(err, syscall.EPERM) works.
func (e *SetupError) Unwrap() error {
	if e.Errno == 0 {
		return nil
	}
	return e.Errno
}

// Child is a started sandbox: its first process, a pidfd for it, the
// listener made inside its netns (-1 when none was asked for) and the
// root of its scratch tmpfs (NS only, else -1), which stays alive, with
// the overlays' upper layers in it, while the fd is open. The caller owns
// the fds.
type Child struct {
	Pid      int
	Pidfd    int
	Listener int
	Scratch  int
}
