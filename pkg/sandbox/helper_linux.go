package sandbox

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"time"

	"github.com/initorigin/io-harness-go/pkg/sandbox/internal/spawn"
	"golang.org/x/sys/unix"
)

const (
	// helperName is the helper executable's file name.
	helperName = "io-harness-sandbox-exec"
	// helperFlag is the helper's only argument; anything else makes it
	// print its usage.
	helperFlag = "--io-harness-spawn"
)

// helperMsg mirrors struct iohs_msg in spawn.c.
type helperMsg struct {
	Kind   int32
	Pid    int32
	Err    int32
	Status int32
	Fds    int32 // for 'S': the fds attached, in order: 1 pidfd, 2 scratch tmpfs, 4 listener
	_      int32
	Utime  int64 // µs
	Stime  int64 // µs
	Stage  [96]byte
}

func (m *helperMsg) stage() string {
	s, _, _ := bytes.Cut(m.Stage[:], []byte{0})
	return string(s)
}

// findHelper returns the helper to use: the explicit path, or, in a build
// without the in-process spawner, the one next to the running executable.
// It never searches PATH. An empty result means the in-process spawner.
func findHelper(o *Options) (string, error) {
	path := o.HelperPath
	if path == "" {
		if spawn.InProcess {
			return "", nil
		}
		exe, err := os.Executable()
		if err != nil {
			return "", fmt.Errorf("built without cgo, no Options.HelperPath, and no executable path to look beside: %w", err)
		}
		path = filepath.Join(filepath.Dir(exe), helperName)
	}
	if !filepath.IsAbs(path) {
		return "", fmt.Errorf("helper path %q is not absolute", path)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("no %s helper (built without cgo; set Options.HelperPath): %w", helperName, err)
	}
	st, _ := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.Mode().IsRegular() || fi.Mode()&0o111 == 0:
		return "", fmt.Errorf("helper %s is not an executable file", path)
	case fi.Mode()&0o022 != 0:
		return "", fmt.Errorf("helper %s is writable by others", path)
	case st != nil && st.Uid != 0 && int(st.Uid) != os.Geteuid():
		return "", fmt.Errorf("helper %s is owned by uid %d, neither root nor us", path, st.Uid)
	}
	return path, nil
}

// helperRun is a started helper: its process and the status socket.
type helperRun struct {
	proc *os.Process
	sock int
}

// startHelperProcess starts the helper with the run's stdio, sends it the
// spec, and reads its first report. It runs on the caller's thread, which
// the caller keeps locked for the helper's life (its parent-death signal).
func startHelperProcess(path string, req *spawn.Request, l *launch) (*helperRun, helperMsg, []int, error) {
	var m helperMsg
	specR, specW, err := os.Pipe()
	if err != nil {
		return nil, m, nil, err
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		specR.Close()
		specW.Close()
		return nil, m, nil, err
	}
	child := os.NewFile(uintptr(fds[1]), "helper-status")
	proc, err := os.StartProcess(path, []string{path, helperFlag}, &os.ProcAttr{
		Dir:   "/",
		Env:   []string{},
		Files: []*os.File{l.stdin, l.stdout, l.stderr, specR, child},
		Sys:   &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL},
	})
	specR.Close()
	child.Close()
	if err != nil {
		specW.Close()
		unix.Close(fds[0])
		return nil, m, nil, err
	}
	h := &helperRun{proc: proc, sock: fds[0]}
	_, werr := specW.Write(req.Encode())
	specW.Close()
	m, rights, err := h.recv()
	if err == nil && werr != nil {
		err = werr
	}
	switch {
	case err != nil:
	case m.Kind == 'E':
		err = &spawn.SetupError{Stage: m.stage(), Errno: syscall.Errno(m.Err)}
	case m.Kind != 'S':
		err = fmt.Errorf("helper: unexpected report %q", rune(m.Kind))
	}
	if err != nil {
		for _, fd := range rights {
			unix.Close(fd)
		}
		h.finish()
		return nil, m, nil, err
	}
	return h, m, rights, nil
}

// recv reads one report and the fds it carries. io.EOF means the helper
// is gone without a word.
func (h *helperRun) recv() (helperMsg, []int, error) {
	var m helperMsg
	buf := make([]byte, binary.Size(m))
	oob := make([]byte, unix.CmsgSpace(3*4))
	n, oobn, _, _, err := unix.Recvmsg(h.sock, buf, oob, unix.MSG_CMSG_CLOEXEC)
	for err == unix.EINTR {
		n, oobn, _, _, err = unix.Recvmsg(h.sock, buf, oob, unix.MSG_CMSG_CLOEXEC)
	}
	if err != nil {
		return m, nil, err
	}
	var rights []int
	if oobn > 0 {
		msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
		if err == nil && len(msgs) > 0 {
			rights, _ = unix.ParseUnixRights(&msgs[0])
		}
	}
	if n == 0 {
		return m, rights, io.EOF
	}
	if n != len(buf) {
		return m, rights, fmt.Errorf("helper: short report (%d bytes)", n)
	}
	err = binary.Read(bytes.NewReader(buf), binary.NativeEndian, &m)
	return m, rights, err
}

// finish closes the socket (letting a waiting helper reap and exit) and
// reaps the helper.
func (h *helperRun) finish() (*os.ProcessState, error) {
	unix.Close(h.sock)
	return h.proc.Wait()
}

// startHelper starts req through the helper executable.
func startHelper(path string, req *spawn.Request, l *launch, session bool) (*childProc, error) {
	type started struct {
		cp  *childProc
		err error
	}
	ready := make(chan started, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread() // nothing was applied to this thread
		h, m, rights, err := startHelperProcess(path, req, l)
		if err != nil {
			ready <- started{nil, err}
			return
		}
		cp := &childProc{hostPid: int(m.Pid), session: session, pidfd: -1, listener: -1, scratch: -1, exited: make(chan exitStatus, 1)}
		for bit, slot := range []*int{&cp.pidfd, &cp.scratch, &cp.listener} {
			if m.Fds&(1<<bit) != 0 && len(rights) > 0 {
				*slot, rights = rights[0], rights[1:]
			}
		}
		for _, fd := range rights {
			unix.Close(fd)
		}
		if cp.pidfd < 0 {
			for _, fd := range []int{cp.scratch, cp.listener} {
				if fd >= 0 {
					unix.Close(fd)
				}
			}
			h.proc.Kill()
			h.finish()
			ready <- started{nil, errors.New("helper: no pidfd in its report")}
			return
		}
		ready <- started{cp, nil}
		x, _, err := h.recv()
		var st exitStatus
		switch {
		case err == nil && x.Kind == 'X':
			if session {
				cp.sweep(int(m.Pid))
			}
			cpu := time.Duration(x.Utime+x.Stime) * time.Microsecond
			st = waitStatus(unix.WaitStatus(x.Status), cpu)
		case err == nil && x.Kind == 'E':
			st.err = &spawn.SetupError{Stage: x.stage(), Errno: syscall.Errno(x.Err)}
		default:
			st.err = fmt.Errorf("the helper ended without reporting the command's exit: %v", err)
		}
		h.finish()
		cp.exited <- st
	}()
	s := <-ready
	runtime.KeepAlive(l)
	return s.cp, s.err
}

// probeHelper runs a probe-mode request through the helper.
func probeHelper(path string, req *spawn.Request, l *launch) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		h, m, rights, err := startHelperProcess(path, req, l)
		if err != nil {
			errc <- err
			return
		}
		for _, fd := range rights {
			unix.Close(fd)
		}
		ps, err := h.finish()
		switch {
		case err != nil:
		case m.Pid >= 0:
			err = fmt.Errorf("helper: started a command in probe mode")
		case !ps.Success():
			err = fmt.Errorf("helper: probe ended with %v", ps)
		}
		errc <- err
	}()
	return <-errc
}
