package sandbox

// The tests' sandboxed commands are this test binary itself, re-executed
// with IOH_PAYLOAD naming what to try: no shell, compiler or Python is
// needed inside the sandbox, and every attempt reports the same way.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Exit statuses of an attempt.
const (
	escaped   = 0 // the attempt succeeded
	contained = 3 // the attempt was refused
	broken    = 4 // the payload itself failed
)

func TestMain(m *testing.M) {
	if op := os.Getenv("IOH_PAYLOAD"); op != "" {
		os.Exit(payload(op, os.Args[1:]))
	}
	if backend := os.Getenv("IOH_HOSTRUN"); backend != "" {
		os.Exit(hostRun(backend, os.Getenv("IOH_HELPER"), os.Getenv("IOH_MARKER")))
	}
	if os.Geteuid() == 0 {
		// Run as root, the sandboxes run their commands as nobody, which
		// must reach this binary to run it: go test builds it in a
		// directory only root can search.
		exe, err := os.Executable()
		if err == nil {
			err = searchableTo(exe)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "making the test binary reachable:", err)
			os.Exit(2)
		}
	}
	code := m.Run()
	removeBuilt()
	os.Exit(code)
}

// payload runs one attempt and returns its exit status.
func payload(op string, args []string) int {
	verdict := func(err error) int {
		if err != nil {
			fmt.Println("refused:", err)
			return contained
		}
		fmt.Println("done")
		return escaped
	}
	arg := func(i int) string {
		if i < len(args) {
			return args[i]
		}
		return ""
	}
	switch op {
	case "write": // create a file at args[0]
		return verdict(os.WriteFile(arg(0), []byte("escaped\n"), 0o644))
	case "read": // read at least a byte of args[0]
		f, err := os.Open(arg(0))
		if err == nil {
			_, err = f.Read(make([]byte, 1))
			f.Close()
		}
		return verdict(err)
	case "readeach": // try to read a byte of each of args; print each path, a tab, and "read" or the error
		for _, p := range args {
			f, err := os.Open(p)
			if err == nil {
				_, err = f.Read(make([]byte, 1))
				f.Close()
			}
			verdict := "read"
			if err != nil {
				verdict = err.Error()
			}
			fmt.Printf("%s\t%s\n", p, verdict)
		}
		return 0
	case "truncate": // truncate(2) args[0] to nothing
		return verdict(unix.Truncate(arg(0), 0))
	case "opentrunc": // open args[0] read-only with O_TRUNC
		f, err := os.OpenFile(arg(0), os.O_RDONLY|os.O_TRUNC, 0)
		if err == nil {
			f.Close()
		}
		return verdict(err)
	case "mem": // read a byte of process args[0]'s memory
		return verdict(readMem(arg(0)))
	case "seepid": // is process args[0] visible in /proc?
		_, err := os.Stat("/proc/" + arg(0) + "/status")
		return verdict(err)
	case "tcp": // connect to args[0]
		c, err := net.DialTimeout("tcp", arg(0), 2*time.Second)
		if err == nil {
			c.Close()
		}
		return verdict(err)
	case "dns": // resolve args[1] through the DNS server at args[0]
		r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "udp", arg(0))
		}}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := r.LookupHost(ctx, arg(1))
		return verdict(err)
	case "ptrace": // attach to process args[0]
		pid, _ := strconv.Atoi(arg(0))
		err := syscall.PtraceAttach(pid)
		if err == nil {
			var ws syscall.WaitStatus
			syscall.Wait4(pid, &ws, syscall.WALL, nil)
			syscall.PtraceDetach(pid)
		}
		return verdict(err)
	case "signal": // may we signal process args[0]? (signal 0: no effect)
		pid, _ := strconv.Atoi(arg(0))
		return verdict(syscall.Kill(pid, 0))
	case "mount": // mount a tmpfs on directory args[0]
		err := syscall.Mount("tmpfs", arg(0), "tmpfs", 0, "")
		if err == nil {
			syscall.Unmount(arg(0), syscall.MNT_DETACH)
		}
		return verdict(err)
	case "unix": // connect to the Unix socket args[0]
		c, err := net.DialTimeout("unix", arg(0), 2*time.Second)
		if err == nil {
			c.Close()
		}
		return verdict(err)
	case "spin":
		//lint:ignore SA5002 spinning is the point
		for {
		}
	case "sleep": // args are only markers for the tests to find us by
		time.Sleep(time.Hour)
		return broken
	case "alloc": // allocate args[0] MiB, touch every page, hold it (or exit, given "exit")
		n, _ := strconv.Atoi(arg(0))
		var hold [][]byte
		for i := 0; i < n; i++ {
			b := make([]byte, 1<<20)
			for j := 0; j < len(b); j += 4096 {
				b[j] = 1
			}
			hold = append(hold, b)
		}
		fmt.Println("allocated", len(hold))
		if arg(1) == "exit" {
			return 0
		}
		time.Sleep(time.Hour)
		return broken
	case "forkbomb": // every process starts two more, 8 generations deep
		// The depth bounds the bomb to 511 processes, so that a sandbox
		// that fails to contain it fails the test without taking the
		// machine down with it.
		depth, _ := strconv.Atoi(os.Getenv("IOH_DEPTH"))
		if depth < 8 {
			for i := 0; i < 2; i++ {
				cmd := exec.Command("/proc/self/exe")
				cmd.Env = append(os.Environ(), "IOH_DEPTH="+strconv.Itoa(depth+1))
				cmd.Start()
			}
		}
		time.Sleep(time.Hour)
		return broken
	case "daemon": // leave a setsid'd grandchild (marked by args[0]) holding stdout
		cmd := exec.Command("/proc/self/exe", arg(0))
		cmd.Env = []string{"IOH_PAYLOAD=daemon-child", "GORACE=atexit_sleep_ms=0"}
		cmd.Stdout = os.Stdout
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := cmd.Start(); err != nil {
			fmt.Println(err)
			return broken
		}
		cmd.Wait()
		return 0
	case "daemon-child":
		cmd := exec.Command("/proc/self/exe", arg(0))
		cmd.Env = []string{"IOH_PAYLOAD=sleep"}
		cmd.Stdout = os.Stdout
		if err := cmd.Start(); err != nil {
			return broken
		}
		return 0 // the grandchild is orphaned, in its own session
	case "sleeper": // start a child sleeper marked by args[0], say so, sleep
		cmd := exec.Command("/proc/self/exe", arg(0))
		cmd.Env = []string{"IOH_PAYLOAD=sleep"}
		if err := cmd.Start(); err != nil {
			fmt.Println(err)
			return broken
		}
		fmt.Println("ready")
		time.Sleep(time.Hour)
		return broken
	case "output": // write args[0] bytes to stdout
		n, _ := strconv.Atoi(arg(0))
		w := bufio.NewWriter(os.Stdout)
		for i := 0; i < n; i++ {
			w.WriteByte('x')
		}
		w.Flush()
		return 0
	case "fsize": // write args[1] bytes to file args[0], from a child process
		cmd := exec.Command("/proc/self/exe", arg(0), arg(1))
		cmd.Env = []string{"IOH_PAYLOAD=fsize-child", "GORACE=atexit_sleep_ms=0"}
		err := cmd.Run()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			fmt.Println(ee)
		}
		return 0
	case "fsize-child":
		n, _ := strconv.Atoi(arg(1))
		f, err := os.Create(arg(0))
		if err != nil {
			return broken
		}
		_, err = f.Write(make([]byte, n))
		f.Close()
		return verdict(err)
	case "http": // GET args[0] through the proxy in HTTP_PROXY; print status and body
		proxy, err := url.Parse(os.Getenv("HTTP_PROXY"))
		if err != nil || proxy.Host == "" {
			fmt.Println("no HTTP_PROXY")
			return broken
		}
		client := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxy)}, Timeout: 5 * time.Second}
		resp, err := client.Get(arg(0))
		if err != nil {
			fmt.Println(err)
			return broken
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Printf("%d %s", resp.StatusCode, body)
		if resp.StatusCode == http.StatusOK {
			return escaped
		}
		return contained
	case "connect": // tunnel to args[0] with CONNECT through HTTP_PROXY; echo a line
		proxy, err := url.Parse(os.Getenv("HTTP_PROXY"))
		if err != nil || proxy.Host == "" {
			fmt.Println("no HTTP_PROXY")
			return broken
		}
		c, err := net.DialTimeout("tcp", proxy.Host, 2*time.Second)
		if err != nil {
			fmt.Println(err)
			return broken
		}
		defer c.Close()
		fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", arg(0), arg(0))
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			fmt.Println(err)
			return broken
		}
		if resp.StatusCode != http.StatusOK {
			fmt.Println(resp.Status)
			return contained
		}
		fmt.Fprintln(c, "ping")
		line, err := br.ReadString('\n')
		fmt.Printf("tunnel: %q %v", line, err)
		if line == "ping\n" {
			return escaped
		}
		return broken
	case "setuid": // make setuid files named args[0] + every route: chmod, fchmod, fchmodat2, open, mknod, openat2
		base := arg(0)
		src, err := os.ReadFile("/proc/self/exe")
		if err != nil {
			fmt.Println(err)
			return broken
		}
		for _, n := range []string{".chmod", ".fchmod", ".fchmodat2"} {
			if err := os.WriteFile(base+n, src, 0o755); err != nil {
				fmt.Println(err)
				return broken
			}
		}
		var errs []string
		try := func(route string, err error) {
			if err != nil {
				errs = append(errs, route+": "+err.Error())
			}
		}
		try("chmod", syscall.Chmod(base+".chmod", 0o4755))
		if fd, err := syscall.Open(base+".fchmod", syscall.O_RDONLY|syscall.O_CLOEXEC, 0); err == nil {
			try("fchmod", syscall.Fchmod(fd, 0o4755))
			syscall.Close(fd)
		}
		p, _ := unix.BytePtrFromString(base + ".fchmodat2")
		atFDCWD := unix.AT_FDCWD
		if _, _, e := unix.Syscall6(unix.SYS_FCHMODAT2, uintptr(atFDCWD), uintptr(unsafe.Pointer(p)), 0o4755, 0, 0, 0); e != 0 {
			try("fchmodat2", e)
		}
		fd, err := syscall.Open(base+".open", syscall.O_CREAT|syscall.O_WRONLY|syscall.O_CLOEXEC, 0o4755)
		if err == nil {
			syscall.Close(fd)
		}
		try("open", err)
		try("mknod", syscall.Mknod(base+".mknod", syscall.S_IFREG|0o6755, 0))
		how := &unix.OpenHow{Flags: unix.O_CREAT | unix.O_WRONLY | unix.O_CLOEXEC, Mode: 0o4755}
		if fd, err := unix.Openat2(unix.AT_FDCWD, base+".openat2", how); err == nil {
			unix.Close(fd)
		} else {
			try("openat2", err)
		}
		if len(errs) == 6 {
			return verdict(errors.New(strings.Join(errs, "; ")))
		}
		fmt.Println("some route worked; refused:", strings.Join(errs, "; "))
		return escaped
	case "fdwrite": // write a line to the inherited descriptor args[0]
		n, _ := strconv.Atoi(arg(0))
		_, err := syscall.Write(n, []byte("escaped through an inherited descriptor\n"))
		return verdict(err)
	case "fill": // write args[1] MiB to file args[0], 1 MiB at a time
		n, _ := strconv.Atoi(arg(1))
		f, err := os.Create(arg(0))
		if err != nil {
			return verdict(err)
		}
		buf := make([]byte, 1<<20)
		for i := range buf {
			buf[i] = byte(i)
		}
		for i := 0; i < n && err == nil; i++ {
			_, err = f.Write(buf)
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return verdict(err)
	case "lockdirs": // leave a/b/c in the workdir and in TMPDIR, each chmod 000
		for _, base := range []string{".", os.Getenv("TMPDIR")} {
			if base == "" {
				continue
			}
			c := filepath.Join(base, "a", "b", "c")
			if err := os.MkdirAll(c, 0o755); err != nil {
				fmt.Println(err)
				return broken
			}
			os.WriteFile(filepath.Join(c, "f"), []byte("x"), 0o644)
			for _, d := range []string{c, filepath.Dir(c), filepath.Dir(filepath.Dir(c))} {
				if err := os.Chmod(d, 0); err != nil {
					fmt.Println(err)
					return broken
				}
			}
		}
		fmt.Println("TMPDIR=" + os.Getenv("TMPDIR"))
		return 0
	case "sysvshm": // hold 64 MiB of SysV shared memory that no process has attached
		id, err := unix.SysvShmGet(unix.IPC_PRIVATE, 64<<20, unix.IPC_CREAT|0o600)
		if err != nil {
			return verdict(err)
		}
		b, err := unix.SysvShmAttach(id, 0, 0)
		if err != nil {
			return verdict(err)
		}
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
		unix.SysvShmDetach(b)
		// Still there, with nobody attached?
		b, err = unix.SysvShmAttach(id, 0, 0)
		if err == nil {
			unix.SysvShmDetach(b)
			unix.SysvShmCtl(id, unix.IPC_RMID, nil) // the test leaves nothing behind
		}
		return verdict(err)
	case "syscalls": // make the system calls the seccomp filter checks, harmlessly, and print each errno
		for _, c := range filterProbes() {
			_, _, e := unix.Syscall6(c.nr, c.a[0], c.a[1], c.a[2], c.a[3], c.a[4], c.a[5])
			fmt.Printf("%s=%d\n", c.name, int(e))
		}
		return 0
	case "denied": // make the system calls numbered args without running them; print each number and errno
		return denied(args)
	case "mutate": // change the workdir in every way overlayfs records
		return mutate()
	case "env": // print the environment
		fmt.Println(strings.Join(os.Environ(), "\n"))
		return 0
	case "pid1": // print our pid and what /proc lists
		ents, _ := os.ReadDir("/proc")
		n := 0
		for _, e := range ents {
			if _, err := strconv.Atoi(e.Name()); err == nil {
				n++
			}
		}
		fmt.Printf("pid=%d procs=%d\n", os.Getpid(), n)
		return 0
	}
	fmt.Println("unknown payload", op)
	return broken
}

// filterProbe is one system call of the seccomp filter's list, with
// arguments that make it fail harmlessly (or succeed harmlessly) and
// with another errno than the filter's when no filter runs.
type filterProbe struct {
	name string
	nr   uintptr
	a    [6]uintptr
	want syscall.Errno // under the filter
}

// filterProbes lists them.
func filterProbes() []filterProbe {
	buf := make([]byte, 8)
	iov := []unix.Iovec{{Base: &buf[0], Len: 8}}
	return []filterProbe{
		{"process_vm_readv", unix.SYS_PROCESS_VM_READV, [6]uintptr{uintptr(os.Getpid()), uintptr(unsafe.Pointer(&iov[0])), 1, uintptr(unsafe.Pointer(&iov[0])), 1, 0}, unix.EPERM},
		{"pidfd_getfd", unix.SYS_PIDFD_GETFD, [6]uintptr{^uintptr(0), 0, 0}, unix.EPERM},
		{"setns", unix.SYS_SETNS, [6]uintptr{^uintptr(0), 0}, unix.EPERM},
		{"keyctl", unix.SYS_KEYCTL, [6]uintptr{0 /* KEYCTL_GET_KEYRING_ID */, ^uintptr(3) /* session keyring */, 0}, unix.EPERM},
		{"add_key", unix.SYS_ADD_KEY, [6]uintptr{0, 0, 0, 0, 0}, unix.EPERM},
		{"perf_event_open", unix.SYS_PERF_EVENT_OPEN, [6]uintptr{0, 0, ^uintptr(0), ^uintptr(0), 0}, unix.EPERM},
		{"io_uring_setup", unix.SYS_IO_URING_SETUP, [6]uintptr{0, 0}, unix.EPERM},
		{"name_to_handle_at", unix.SYS_NAME_TO_HANDLE_AT, [6]uintptr{^uintptr(0), 0, 0, 0, 0}, unix.EPERM},
		{"unshare_user", unix.SYS_UNSHARE, [6]uintptr{unix.CLONE_NEWUSER}, unix.EPERM},
		{"clone3", unix.SYS_CLONE3, [6]uintptr{0, 0}, unix.ENOSYS},
		{"openat2", unix.SYS_OPENAT2, [6]uintptr{^uintptr(99), 0, 0, 0}, unix.ENOSYS},
		{"ioctl_tiocsti", unix.SYS_IOCTL, [6]uintptr{0, unix.TIOCSTI, 0}, unix.EPERM},
		{"socket_unix", unix.SYS_SOCKET, [6]uintptr{unix.AF_UNIX, unix.SOCK_STREAM | unix.SOCK_CLOEXEC, 0}, unix.EPERM},
		{"socketpair_dgram", unix.SYS_SOCKETPAIR, [6]uintptr{unix.AF_UNIX, unix.SOCK_DGRAM, 0, 0}, unix.EPERM},
		{"fchmod_setuid", unix.SYS_FCHMOD, [6]uintptr{^uintptr(0), 0o4755}, unix.EPERM},
		{"mknodat_setgid", unix.SYS_MKNODAT, [6]uintptr{^uintptr(99), 0, unix.S_IFREG | 0o2755, 0}, unix.EPERM},
		// Allowed: the filter must let these through.
		{"getpid", unix.SYS_GETPID, [6]uintptr{}, 0},
		{"fchmod_plain", unix.SYS_FCHMOD, [6]uintptr{^uintptr(0), 0o755}, unix.EBADF},
		{"ioctl_plain", unix.SYS_IOCTL, [6]uintptr{^uintptr(0), unix.TCGETS, 0}, unix.EBADF},
		{"socketpair_stream", unix.SYS_SOCKETPAIR, [6]uintptr{unix.AF_UNIX, unix.SOCK_STREAM, 0, 0}, unix.EFAULT},
	}
}

// supervised is the errno the payload "denied" answers, itself, to a
// call that no filter of the sandbox refused.
const supervised = unix.ENOANO

// seccompNotif and seccompNotifResp are the kernel's struct seccomp_notif
// and struct seccomp_notif_resp.
type seccompNotif struct {
	id    uint64
	pid   uint32
	flags uint32
	nr    int32
	arch  uint32
	ip    uint64
	args  [6]uint64
}

type seccompNotifResp struct {
	id    uint64
	val   int64
	error int32
	flags uint32
}

// denied makes each system call numbered in nrs, with zero arguments,
// from a thread under a seccomp filter of its own that hands every one of
// them to this process to answer (SECCOMP_RET_USER_NOTIF): the answer is
// always supervised, so the kernel runs none of them, whatever they are.
// The sandbox's filter comes first: a call it refuses gets its errno and
// never reaches the answer. It prints "number=errno" for each.
func denied(nrs []string) int {
	var calls []uintptr
	for _, s := range nrs {
		nr, err := strconv.ParseUint(s, 10, 32)
		if err != nil {
			fmt.Println(err)
			return broken
		}
		calls = append(calls, uintptr(nr))
	}
	// getppid, which no filter refuses, comes last and marks the end.
	all := append(calls, unix.SYS_GETPPID)
	prog := []unix.SockFilter{{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: 0}} // seccomp_data.nr
	for _, nr := range all {
		prog = append(prog,
			unix.SockFilter{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: uint32(nr), Jf: 1},
			unix.SockFilter{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_USER_NOTIF})
	}
	prog = append(prog, unix.SockFilter{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ALLOW})
	listener := make(chan int, 1) // the filter's descriptor, or -1
	errnos := make(chan []syscall.Errno, 1)
	go func() {
		// The filter is this thread's alone, and the thread ends with
		// the goroutine, still locked.
		runtime.LockOSThread()
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			fmt.Println("no_new_privs:", err)
			listener <- -1
			return
		}
		fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
		fd, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_NEW_LISTENER,
			uintptr(unsafe.Pointer(&fprog)))
		if e != 0 {
			fmt.Println("installing the filter:", e)
			listener <- -1
			return
		}
		listener <- int(fd)
		var got []syscall.Errno
		for _, nr := range all {
			_, _, e := unix.Syscall6(nr, 0, 0, 0, 0, 0, 0)
			got = append(got, e)
		}
		errnos <- got
	}()
	fd := <-listener
	if fd < 0 {
		return broken
	}
	for {
		var n seccompNotif
		if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SECCOMP_IOCTL_NOTIF_RECV, uintptr(unsafe.Pointer(&n))); e != 0 {
			if e == unix.EINTR {
				continue
			}
			fmt.Println("receiving a call:", e)
			return broken
		}
		resp := seccompNotifResp{id: n.id, error: -int32(supervised)}
		_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SECCOMP_IOCTL_NOTIF_SEND, uintptr(unsafe.Pointer(&resp)))
		switch {
		case e == unix.ENOENT: // the call was interrupted, and comes again
			continue
		case e != 0:
			fmt.Println("answering a call:", e)
			return broken
		}
		if uintptr(n.nr) == unix.SYS_GETPPID {
			break
		}
	}
	got := <-errnos
	for i, nr := range calls {
		fmt.Printf("%d=%d\n", nr, int(got[i]))
	}
	return 0
}

// mutate changes the workdir the way TestApply expects: it creates,
// rewrites, removes and replaces files and directories, makes a symlink,
// a sparse file and a file with many hard links, and changes modes and
// times.
func mutate() int {
	steps := []func() error{
		func() error { return os.WriteFile("new.txt", []byte("new\n"), 0o640) },
		func() error { return os.WriteFile("keep/changed.txt", []byte("changed\n"), 0o644) },
		func() error { return os.Remove("gone.txt") },
		func() error { return os.RemoveAll("gonedir") },
		func() error { return os.Remove("file2dir") },
		func() error { return os.MkdirAll("file2dir/inner", 0o755) },
		func() error { return os.WriteFile("file2dir/inner/x", []byte("x"), 0o644) },
		func() error { return os.RemoveAll("dir2file") },
		func() error { return os.WriteFile("dir2file", []byte("was a dir\n"), 0o600) },
		// A directory emptied and remade: overlayfs marks it opaque.
		func() error { return os.RemoveAll("remade") },
		func() error { return os.Mkdir("remade", 0o700) },
		func() error { return os.WriteFile("remade/only", []byte("only\n"), 0o644) },
		func() error { return os.Symlink("new.txt", "link") },
		func() error { return os.Chmod("keep/mode.sh", 0o700) },
		func() error {
			t := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
			return os.Chtimes("new.txt", t, t)
		},
		func() error { return os.MkdirAll("deep/er/est", 0o755) },
		func() error { return os.WriteFile("deep/er/est/f", []byte("deep\n"), 0o644) },
		func() error {
			f, err := os.Create("sparse")
			if err == nil {
				_, err = f.WriteAt([]byte("tail"), 1<<30)
				f.Close()
			}
			return err
		},
		// What the command locks itself out of is still its change: a
		// caller that is not root must apply it too.
		func() error { return os.MkdirAll("locked/in", 0o755) },
		func() error { return os.WriteFile("locked/in/f", []byte("locked\n"), 0o644) },
		func() error { return os.Chmod("locked/in", 0) },
		func() error { return os.Chmod("locked", 0) },
		func() error { return os.WriteFile("sealed", []byte("sealed\n"), 0o644) },
		func() error { return os.Chmod("sealed", 0) },
		func() error { return os.WriteFile("big", make([]byte, 4<<20), 0o644) },
		func() error {
			for i := range 64 {
				if err := os.Link("big", fmt.Sprintf("big.%d", i)); err != nil {
					return err
				}
			}
			return nil
		},
	}
	for i, step := range steps {
		if err := step(); err != nil {
			fmt.Printf("step %d: %v\n", i, err)
			return broken
		}
	}
	fmt.Println("done")
	return 0
}

// readMem reads one byte of a readable mapping of process pid.
func readMem(pid string) error {
	maps, err := os.ReadFile("/proc/" + pid + "/maps")
	if err != nil {
		return err
	}
	for _, line := range strings.Split(string(maps), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || !strings.HasPrefix(f[1], "r") {
			continue
		}
		lo, _, _ := strings.Cut(f[0], "-")
		addr, err := strconv.ParseUint(lo, 16, 64)
		if err != nil {
			continue
		}
		mem, err := os.Open("/proc/" + pid + "/mem")
		if err != nil {
			return err
		}
		defer mem.Close()
		_, err = mem.ReadAt(make([]byte, 1), int64(addr))
		return err
	}
	return errors.New("no readable mapping")
}

// attempt runs payload op under sb and returns the result.
func attempt(t *testing.T, sb Sandbox, spec Spec, op string, args ...string) *Result {
	t.Helper()
	p := payloadSpec(t, spec, op, args...)
	res, err := sb.Run(context.Background(), &p)
	if err != nil {
		t.Fatalf("%s %s: %v", sb.Name(), op, err)
	}
	return res
}

// outcome reads an attempt's verdict from its exit status.
func outcome(t *testing.T, res *Result) (escapedNow bool) {
	t.Helper()
	switch res.ExitCode {
	case escaped:
		return true
	case contained:
		return false
	}
	t.Fatalf("%s: the payload broke: exit %d signal %q cap %q\nstdout: %s\nstderr: %s",
		res.Backend, res.ExitCode, res.Signal, res.CapHit, res.Stdout, res.Stderr)
	return false
}

// searchableTo makes every directory leading to path searchable by
// others.
func searchableTo(path string) error {
	path, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	for dir := filepath.Dir(path); dir != "/"; dir = filepath.Dir(dir) {
		fi, err := os.Stat(dir)
		if err != nil {
			return err
		}
		if fi.Mode().Perm()&0o001 == 0 {
			if err := os.Chmod(dir, fi.Mode().Perm()|0o001); err != nil {
				return err
			}
		}
	}
	return nil
}

// tempDir is t.TempDir, which a run's user can reach and write, so that
// only the sandbox can refuse a write there: run as root, the sandboxes
// run their commands as nobody.
func tempDir(t *testing.T) string {
	t.Helper()
	d := t.TempDir()
	if os.Geteuid() == 0 {
		if err := searchableTo(d); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// exeDir is the directory of this test binary, which payload runs bind
// read-only (a private /tmp would hide it otherwise).
func exeDir(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	exe, err = filepath.EvalSymlinks(exe)
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Dir(exe)
}

// hostRun stands in for a host process (a Python interpreter, say) that
// the tests kill while its sandbox runs: it reports the run's workdir and
// enforcement on stdout, then runs a sleeper that starts a child.
func hostRun(backend, helper, marker string) int {
	sb, err := New(context.Background(), &Options{Backend: backend, HelperPath: helper, Observer: func(e Event) {
		if e.Kind == EventCreate {
			fmt.Println("workdir=" + e.Workdir)
		}
	}})
	if err != nil {
		fmt.Println(err)
		return broken
	}
	fmt.Printf("host_death=%v\n", sb.Enforcement().HostDeath)
	exe, _ := os.Executable()
	dir, _ := filepath.EvalSymlinks(filepath.Dir(exe))
	_, err = sb.Run(context.Background(), &Spec{
		Argv: []string{exe, marker}, Env: []string{"IOH_PAYLOAD=sleeper", "GORACE=atexit_sleep_ms=0"}, ReadOnly: []string{dir},
		Limits: Limits{Wall: Duration(time.Minute)},
	})
	fmt.Println("run ended:", err)
	return broken
}

// payloadSpec is spec set to run payload op with args.
func payloadSpec(t *testing.T, spec Spec, op string, args ...string) Spec {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	spec.Argv = append([]string{exe}, args...)
	// A race-enabled payload would otherwise sleep a second at exit.
	spec.Env = append(spec.Env, "IOH_PAYLOAD="+op, "GORACE=atexit_sleep_ms=0")
	spec.ReadOnly = append(spec.ReadOnly, exeDir(t))
	if spec.Limits.Wall == 0 {
		spec.Limits.Wall = Duration(20 * time.Second)
	}
	// The tests' workdirs are made for the run.
	spec.Lend = true
	return spec
}
