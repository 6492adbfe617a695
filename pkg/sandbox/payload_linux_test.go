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
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
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
	case "alloc": // allocate args[0] MiB, touch every page, hold it
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
	res, err := sb.Run(context.Background(), &spec)
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
