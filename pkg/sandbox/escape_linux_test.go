package sandbox

import (
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

// hostScratch makes a host directory the caller can write that is not
// under the system temp directory, so that no backend's temp grant can
// hide an escape into it.
func hostScratch(t *testing.T) string {
	t.Helper()
	for _, base := range []string{"/var/tmp", os.Getenv("HOME")} {
		if base == "" {
			continue
		}
		dir, err := os.MkdirTemp(base, "io-harness-escape-")
		if err != nil {
			continue
		}
		t.Cleanup(func() { removeTree(dir) })
		if os.Geteuid() == 0 {
			// Run as root, the sandboxes run their commands as nobody:
			// let nobody write here, so that only a sandbox refuses.
			if err := searchableTo(dir); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(dir, 0o777); err != nil {
				t.Fatal(err)
			}
		}
		real, err := filepath.EvalSymlinks(dir)
		if err != nil {
			t.Fatal(err)
		}
		return real
	}
	t.Skip("no writable directory outside the system temp directory (tried /var/tmp and $HOME)")
	return ""
}

// victim starts an unrelated host process of the same user, for the
// sandboxed command to reach for.
func victim(t *testing.T) int {
	t.Helper()
	exe, _ := os.Executable()
	cmd := exec.Command(exe, "victim")
	cmd.Env = []string{"IOH_PAYLOAD=sleep"}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return cmd.Process.Pid
}

// tcpListener accepts (and drops) connections on addr until the test ends.
func tcpListener(t *testing.T, addr string) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("cannot listen on %s: %v", addr, err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return ln
}

// dnsServer answers every A query with 192.0.2.1, on a host UDP port.
func dnsServer(t *testing.T) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 512)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if n < 12 {
				continue
			}
			q := buf[:n]
			end := 12 // the question: the name's labels, then type and class
			for end < n && q[end] != 0 {
				end += int(q[end]) + 1
			}
			end += 5
			if end > n {
				continue
			}
			resp := append([]byte{}, q[:2]...)                      // id
			resp = append(resp, 0x81, 0x80, 0, 1, 0, 1, 0, 0, 0, 0) // flags, 1 question, 1 answer
			resp = append(resp, q[12:end]...)                       // the question
			resp = append(resp, 0xc0, 0x0c, 0, 1, 0, 1)             // name pointer, A, IN
			resp = binary.BigEndian.AppendUint32(resp, 60)          // TTL
			resp = append(resp, 0, 4, 192, 0, 2, 1)                 // the address
			pc.WriteTo(resp, from)
		}
	}()
	return pc.LocalAddr().String()
}

// escapeCase is one attempt to reach past the sandbox. protects says
// whether a backend's reported enforcement claims to stop it: the oracle
// is what the Result says, so that every backend is checked against its
// own claim, and a backend that claims nothing is the negative control
// that shows the attempt really works.
type escapeCase struct {
	name     string
	protects func(e Enforcement) bool
	try      func(t *testing.T, sb Sandbox) *Result
	// noControl marks a case whose negative control cannot run here, and
	// why.
	noControl bool
	why       string
	// control, for a case every backend must stop, is the same attempt
	// outside any sandbox (a plain exec, the old code path): the negative
	// control, which must succeed.
	control func(t *testing.T) bool
}

// judge replaces the payload's verdict in res by the host's: escaped
// when landed, else contained. A run a cap killed is then judged too.
func judge(res *Result, landed bool) *Result {
	res.ExitCode = contained
	if landed {
		res.ExitCode = escaped
	}
	return res
}

// setuidOnHost reports whether any of paths is a setuid or setgid file.
func setuidOnHost(paths ...string) bool {
	for _, p := range paths {
		if fi, err := os.Lstat(p); err == nil && fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
			return true
		}
	}
	return false
}

// sizeOnHost returns the size of path, 0 when it is not there.
func sizeOnHost(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

func TestEscapes(t *testing.T) {
	sandboxes := linuxSandboxes(t, true)
	scratch := hostScratch(t)
	vpid := strconv.Itoa(victim(t))
	loop := tcpListener(t, "127.0.0.1:0")
	port := loop.Addr().(*net.TCPAddr).Port
	// The same port on another loopback address, which a port-only rule
	// (Landlock's) would let through.
	tcpListener(t, "127.0.0.2:"+strconv.Itoa(port))
	dns := dnsServer(t)
	sock := filepath.Join(scratch, "host.sock")
	ul, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ul.Close()
	root := os.Geteuid() == 0
	// A file only root may read, in a directory anyone may search.
	rootOnly := filepath.Join(scratch, "root-only")
	if err := os.WriteFile(rootOnly, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A secret in a directory a Spec hides.
	secrets := hostScratch(t)
	if err := os.WriteFile(filepath.Join(secrets, "key"), []byte("secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	fsClaim := func(e Enforcement) bool { return e.Filesystem }
	// Landlock refuses ptrace-attach access to processes outside its
	// domain at every ABI; signals need ABI 6 (HostProcesses).
	attachClaim := func(e Enforcement) bool { return e.HostProcesses || e.Landlock > 0 }
	netClaim := func(e Enforcement) bool { return e.Network != NetworkOpen }
	cases := []escapeCase{
		{
			name:     "write outside the workdir",
			protects: fsClaim,
			try: func(t *testing.T, sb Sandbox) *Result {
				return attempt(t, sb, Spec{}, "write", filepath.Join(scratch, "escape-"+sb.Name()))
			},
		},
		{
			name:     "write beside a workdir inside /tmp",
			protects: fsClaim,
			try: func(t *testing.T, sb Sandbox) *Result {
				wd, beside := tempDir(t), tempDir(t)
				res := attempt(t, sb, Spec{Workdir: wd}, "write", filepath.Join(beside, "escape"))
				if _, err := os.Stat(filepath.Join(beside, "escape")); (err == nil) != (res.ExitCode == escaped) {
					t.Errorf("the payload's verdict (exit %d) disagrees with the host's view (%v)", res.ExitCode, err)
				}
				return res
			},
		},
		{
			// Landlock without LANDLOCK_ACCESS_FS_TRUNCATE handled lets
			// truncate(2) through where it refuses writes. (Before ABI 3
			// it cannot handle it: there a Filesystem claim resting on
			// Landlock alone is wider than the kernel enforces, and
			// fails here.)
			name:     "truncate a file of the command's own user outside the workdir",
			protects: fsClaim,
			try: func(t *testing.T, sb Sandbox) *Result {
				f := commandsFile(t, scratch)
				return judge(attempt(t, sb, Spec{}, "truncate", f), sizeOnHost(f) == 0)
			},
		},
		{
			// Opened read-only, O_TRUNC needs no write access of Landlock's:
			// only its TRUNCATE right stops it.
			name:     "open with O_TRUNC a file of the command's own user outside the workdir",
			protects: fsClaim,
			try: func(t *testing.T, sb Sandbox) *Result {
				f := commandsFile(t, scratch)
				return judge(attempt(t, sb, Spec{}, "opentrunc", f), sizeOnHost(f) == 0)
			},
		},
		{
			name:     "read a host process's environment",
			protects: func(e Enforcement) bool { return e.HostProcesses },
			try: func(t *testing.T, sb Sandbox) *Result {
				return attempt(t, sb, Spec{}, "read", "/proc/"+vpid+"/environ")
			},
		},
		{
			name:     "read a host process's memory",
			protects: attachClaim,
			try:      func(t *testing.T, sb Sandbox) *Result { return attempt(t, sb, Spec{}, "mem", vpid) },
		},
		{
			name:     "ptrace a host process",
			protects: func(e Enforcement) bool { return attachClaim(e) || e.Seccomp },
			try:      func(t *testing.T, sb Sandbox) *Result { return attempt(t, sb, Spec{}, "ptrace", vpid) },
		},
		{
			name:     "signal a host process",
			protects: func(e Enforcement) bool { return e.HostProcesses },
			try:      func(t *testing.T, sb Sandbox) *Result { return attempt(t, sb, Spec{}, "signal", vpid) },
		},
		{
			name:     "see host pids",
			protects: func(e Enforcement) bool { return e.PIDNamespace },
			try:      func(t *testing.T, sb Sandbox) *Result { return attempt(t, sb, Spec{}, "seepid", vpid) },
		},
		{
			name:     "TCP to a loopback server of the host",
			protects: netClaim,
			try: func(t *testing.T, sb Sandbox) *Result {
				return attempt(t, sb, Spec{}, "tcp", loop.Addr().String())
			},
		},
		{
			name:     "TCP to another address on an allow-listed port",
			protects: netClaim,
			try: func(t *testing.T, sb Sandbox) *Result {
				spec := Spec{Network: Network{Allow: []string{loop.Addr().String()}}}
				return attempt(t, sb, spec, "tcp", "127.0.0.2:"+strconv.Itoa(port))
			},
		},
		{
			name:     "DNS through a resolver the host can reach",
			protects: netClaim,
			try:      func(t *testing.T, sb Sandbox) *Result { return attempt(t, sb, Spec{}, "dns", dns, "example.com") },
		},
		{
			name:     "connect to a host Unix socket",
			protects: func(e Enforcement) bool { return e.Seccomp },
			try:      func(t *testing.T, sb Sandbox) *Result { return attempt(t, sb, Spec{}, "unix", sock) },
		},
		{
			name: "mount a filesystem",
			// Only root can mount on the host at all; in the sandbox the
			// capabilities are gone and seccomp and Landlock refuse it.
			protects:  func(e Enforcement) bool { return !root || e.Seccomp || e.Landlock > 0 || e.PIDNamespace },
			noControl: !root,
			why:       "only root can mount on the host, and these tests run unprivileged",
			try: func(t *testing.T, sb Sandbox) *Result {
				return attempt(t, sb, Spec{Workdir: tempDir(t)}, "mount", ".")
			},
		},
		{
			// Left in a host directory, a setuid file runs as its owner for
			// whoever starts it later: the command's user (or, without the
			// id switch, root).
			name:     "leave a setuid file in the workdir",
			protects: func(e Enforcement) bool { return e.NoSetuid },
			try: func(t *testing.T, sb Sandbox) *Result {
				wd := tempDir(t)
				base := filepath.Join(wd, "s")
				res := attempt(t, sb, Spec{Workdir: wd}, "setuid", base)
				var files []string
				for _, r := range []string{"chmod", "fchmod", "fchmodat2", "open", "mknod", "openat2"} {
					files = append(files, base+"."+r)
				}
				t.Logf("%s", res.Stdout)
				return judge(res, setuidOnHost(files...))
			},
		},
		{
			name:      "own a file as the host's root",
			protects:  func(e Enforcement) bool { return e.Unprivileged },
			noControl: !root,
			why:       "only a root caller's command can be root",
			try: func(t *testing.T, sb Sandbox) *Result {
				if !root {
					t.Skip("only a root caller's command can be root")
				}
				wd := tempDir(t)
				f := filepath.Join(wd, "owned")
				res := attempt(t, sb, Spec{Workdir: wd}, "write", f)
				fi, err := os.Stat(f)
				return judge(res, err == nil && fi.Sys().(*syscall.Stat_t).Uid == 0)
			},
		},
		{
			name:      "read a file only root may read",
			protects:  func(e Enforcement) bool { return e.Unprivileged },
			noControl: !root,
			why:       "only a root caller's command can read what only root may",
			try: func(t *testing.T, sb Sandbox) *Result {
				if !root {
					t.Skip("the file is the test user's, not root's: only a root caller's command can read what only root may")
				}
				return attempt(t, sb, Spec{}, "read", rootOnly)
			},
		},
		{
			name:     "read a file in a hidden directory",
			protects: func(e Enforcement) bool { return e.Secrets },
			try: func(t *testing.T, sb Sandbox) *Result {
				return attempt(t, sb, Spec{Hide: []string{secrets}}, "read", filepath.Join(secrets, "key"))
			},
		},
		{
			name:     "fill the disk under a host workdir",
			protects: func(e Enforcement) bool { return e.Disk },
			try: func(t *testing.T, sb Sandbox) *Result {
				wd := hostScratch(t)
				fill := filepath.Join(wd, "fill")
				res := attempt(t, sb, Spec{Workdir: wd, Limits: Limits{Disk: 16 << 20}}, "fill", fill, "96")
				if res.Enforced.Disk && res.CapHit != CapDisk {
					t.Errorf("cap %q, want disk (exit %d: %s)", res.CapHit, res.ExitCode, res.Stdout)
				}
				return judge(res, sizeOnHost(fill) > 16<<20)
			},
		},
		{
			// /dev/shm is RAM: filled past the memory cap, it would hold more
			// memory than the cap allows. Its bytes count against both caps:
			// here the disk cap, below the memory cap, ends it.
			name:     "fill /dev/shm past the memory cap, under a smaller disk cap",
			protects: func(e Enforcement) bool { return e.Disk },
			try: func(t *testing.T, sb Sandbox) *Result {
				return fillShm(t, sb, Limits{Memory: 96 << 20, Disk: 32 << 20}, CapDisk)
			},
		},
		{
			name:     "fill /dev/shm past the memory cap, under a larger disk cap",
			protects: func(e Enforcement) bool { return e.Disk },
			try: func(t *testing.T, sb Sandbox) *Result {
				return fillShm(t, sb, Limits{Memory: 96 << 20, Disk: 1 << 30}, CapMemory)
			},
		},
		{
			// Detached SysV shared memory is no process's resident memory:
			// the memory cap would not see it.
			name:     "hold SysV shared memory no process has attached",
			protects: func(e Enforcement) bool { return e.SharedMemory },
			try:      func(t *testing.T, sb Sandbox) *Result { return attempt(t, sb, Spec{}, "sysvshm") },
		},
		{
			// The test process holds a descriptor without close-on-exec, as
			// a host process does that inherited one (a shell's exec 8>>f).
			name:     "write to a descriptor the host inherited",
			protects: func(Enforcement) bool { return true },
			try: func(t *testing.T, sb Sandbox) *Result {
				f, fd := inheritable(t)
				res := attempt(t, sb, Spec{}, "fdwrite", strconv.Itoa(fd))
				return judge(res, sizeOnHost(f) > 0)
			},
			control: func(t *testing.T) bool {
				f, fd := inheritable(t)
				exe, _ := os.Executable()
				cmd := exec.Command(exe, strconv.Itoa(fd))
				cmd.Env = []string{"IOH_PAYLOAD=fdwrite", "GORACE=atexit_sleep_ms=0"}
				cmd.Run()
				return sizeOnHost(f) > 0
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			negative := false
			if c.control != nil {
				if negative = c.control(t); !negative {
					t.Errorf("outside any sandbox the attempt failed too, so it is not shown to work at all")
				}
			}
			for _, n := range sandboxes {
				t.Run(n.label, func(t *testing.T) {
					res := c.try(t, n.sb)
					esc := outcome(t, res)
					switch claim := c.protects(res.Enforced); {
					case claim && esc:
						t.Errorf("ESCAPED: %s claims to stop this but it succeeded:\n%s", n.label, res.Stdout)
					case !claim && esc:
						negative = true
					case !claim:
						t.Logf("%s claims nothing against this, yet it was refused here: %s", n.label, res.Stdout)
					}
				})
			}
			// The negative control: on some backend that claims nothing, the
			// attempt must succeed, or it proves nothing where it fails.
			if !negative && !c.noControl {
				t.Errorf("no backend let this through, so the attempt is not shown to work at all")
			}
			if c.noControl {
				t.Logf("no negative control for this case: %s", c.why)
			}
		})
	}
}

// fillShm writes 160 MiB to /dev/shm under limits: a backend that claims
// the disk cap must end it with the cap want, before more than the memory
// cap is stored.
func fillShm(t *testing.T, sb Sandbox, limits Limits, want Cap) *Result {
	fill := "/dev/shm/io-harness-fill-" + newMarker(t)
	t.Cleanup(func() { os.Remove(fill) })
	res := attempt(t, sb, Spec{Limits: limits}, "fill", fill, "160")
	if res.Enforced.Disk && res.CapHit != want {
		t.Errorf("cap %q, want %q (exit %d: %s)", res.CapHit, want, res.ExitCode, res.Stdout)
	}
	landed := sizeOnHost(fill) > limits.Memory || (res.CapHit == CapNone && res.ExitCode == escaped)
	return judge(res, landed)
}

// commandsFile makes a fresh file in dir, not empty, owned by the user a
// sandboxed command runs as (for a root caller, unprivileged), that the
// command could truncate were it not for the sandbox.
func commandsFile(t *testing.T, dir string) string {
	t.Helper()
	f, err := os.CreateTemp(dir, "own-")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString("the command's own data\n"); err != nil {
		t.Fatal(err)
	}
	if err := f.Chmod(0o644); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		if err := f.Chown(unprivileged, unprivileged); err != nil {
			t.Fatal(err)
		}
	}
	return f.Name()
}

// inheritable opens a fresh host file and leaves its descriptor in this
// process without close-on-exec until the test ends.
func inheritable(t *testing.T) (path string, fd int) {
	t.Helper()
	path = filepath.Join(hostScratch(t), "inherited")
	fd, err := syscall.Open(path, syscall.O_WRONLY|syscall.O_CREAT|syscall.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	return path, fd
}

// TestWriteInside checks the other side: every backend lets the command
// write its workdir, a writable path and its TMPDIR, and read a read-only
// path.
func TestWriteInside(t *testing.T) {
	for _, n := range linuxSandboxes(t, true) {
		t.Run(n.label, func(t *testing.T) {
			wd, rw, ro := tempDir(t), hostScratch(t), hostScratch(t)
			if err := os.WriteFile(filepath.Join(ro, "data"), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
			for _, target := range []string{filepath.Join(wd, "f"), filepath.Join(rw, "f")} {
				res := attempt(t, n.sb, Spec{Workdir: wd, Writable: []string{rw}, ReadOnly: []string{ro}}, "write", target)
				if !outcome(t, res) {
					t.Errorf("writing %s was refused: %s", target, res.Stdout)
				}
			}
			res := attempt(t, n.sb, Spec{Workdir: wd, ReadOnly: []string{ro}}, "read", filepath.Join(ro, "data"))
			if !outcome(t, res) {
				t.Errorf("reading the read-only path was refused: %s", res.Stdout)
			}
			res = attempt(t, n.sb, Spec{}, "write", "tmpfile-in-ephemeral-workdir")
			if !outcome(t, res) {
				t.Errorf("writing the ephemeral workdir was refused: %s", res.Stdout)
			}
		})
	}
}

// TestPidOne checks that a pid-namespace backend's command sees itself as
// pid 1 (or bwrap's pid 2) and only the sandbox's processes.
func TestPidOne(t *testing.T) {
	for _, n := range linuxSandboxes(t, false) {
		if !n.sb.Enforcement().PIDNamespace {
			continue
		}
		t.Run(n.label, func(t *testing.T) {
			res := attempt(t, n.sb, Spec{}, "pid1")
			var pid, procs int
			if _, err := fmt.Sscanf(string(res.Stdout), "pid=%d procs=%d", &pid, &procs); err != nil {
				t.Fatalf("%s: %q", err, res.Stdout)
			}
			if pid > 2 || procs > 2 {
				t.Errorf("pid %d, %d processes in /proc; want pid 1 (2 under bwrap's init) and at most 2", pid, procs)
			}
		})
	}
}
