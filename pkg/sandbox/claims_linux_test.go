package sandbox

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/initorigin/io-harness-go/pkg/sandbox/internal/spawn"
)

// hostKind is what this machine offers the Linux backends, found by the
// tests' own means, never by the package's: who calls, whether a user
// namespace can be made, the kernel's Landlock ABI, and what is
// installed. The pinned claims below are chosen by it, so that a
// backend's claim is checked against what this kind of host must give,
// not against what the backend says of itself.
type hostKind struct {
	root     bool
	userns   bool // an unprivileged-style user namespace can be made here
	landlock int  // the kernel's Landlock ABI, 0 for none
	bwrap    bool // bwrap is installed
	cgo      bool // the test binary has the in-process spawner
	gcc      bool // the static helper can be built here
}

func (h hostKind) String() string {
	return fmt.Sprintf("root=%v userns=%v landlock=%d bwrap=%v cgo=%v gcc=%v", h.root, h.userns, h.landlock, h.bwrap, h.cgo, h.gcc)
}

// thisHost finds the host kind.
func thisHost() hostKind {
	h := hostKind{root: os.Geteuid() == 0, cgo: spawn.InProcess}
	// A user namespace: start /bin/true in one, as the kernel allows it or
	// not for this user.
	if p, err := exec.LookPath("true"); err == nil {
		cmd := exec.Command(p)
		cmd.SysProcAttr = &syscall.SysProcAttr{
			Cloneflags:  syscall.CLONE_NEWUSER,
			UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}},
		}
		h.userns = cmd.Run() == nil
	}
	if v, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION); e == 0 {
		h.landlock = int(v)
	}
	for _, p := range []string{"/usr/bin/bwrap", "/bin/bwrap", "/usr/local/bin/bwrap"} {
		if _, err := os.Stat(p); err == nil {
			h.bwrap = true
		}
	}
	_, err := exec.LookPath("gcc")
	h.gcc = err == nil
	return h
}

// kernelABI in a pin's Landlock field means "the kernel's own ABI".
const kernelABI = 1 << 10

// pin is one row of the table: on a host of a kind that when accepts,
// backend must start (or may fail to, when starts is false), and its
// claim must contain must: every true field true, a network no more open,
// at least this Landlock ABI (capped at the kernel's), every path of
// hidden (for the home, the caller's) among Hidden.
type pin struct {
	backend string
	when    func(hostKind) bool
	starts  bool
	must    Enforcement
	hidden  []string
}

// The Linux backends' pinned claims, per host kind. A backend that stops
// claiming one of these, or that should start here and does not, fails
// TestClaims, and every escape and containment test judges the backend
// by the pin as well as by its own claim: a protection dropped together
// with its claim is an escape, not a quiet change of the oracle.
var pins = []pin{
	// linux-ns, in process and through the helper: everything.
	{BackendLinuxNS, func(h hostKind) bool { return h.cgo && h.userns && h.root }, true, Enforcement{
		Filesystem: true, PrivateTmp: true, Network: NetworkDenied, PIDNamespace: true, HostProcesses: true,
		Memory: true, Processes: true, CPU: true, FileSize: true, OpenFiles: true, Disk: true, SharedMemory: true,
		Teardown: true, HostDeath: true, Seccomp: true, Landlock: kernelABI, NoNewPrivs: true, NoSetuid: true,
		Unprivileged: true, Secrets: true, Overlay: true,
	}, nsHidden},
	// Unprivileged, SysV shared memory is the gap (only root may set
	// shm_rmid_forced in the run's IPC namespace).
	{BackendLinuxNS, func(h hostKind) bool { return h.cgo && h.userns && !h.root }, true, Enforcement{
		Filesystem: true, PrivateTmp: true, Network: NetworkDenied, PIDNamespace: true, HostProcesses: true,
		Memory: true, Processes: true, CPU: true, FileSize: true, OpenFiles: true, Disk: true,
		Teardown: true, HostDeath: true, Seccomp: true, Landlock: kernelABI, NoNewPrivs: true, NoSetuid: true,
		Unprivileged: true, Secrets: true, Overlay: true,
	}, nsHidden},
	{BackendLinuxNS, func(h hostKind) bool { return !h.cgo || !h.userns }, false, Enforcement{}, nil},
	{BackendLinuxNS + "+helper", func(h hostKind) bool { return h.gcc && h.userns && h.root }, true, Enforcement{
		Filesystem: true, PrivateTmp: true, Network: NetworkDenied, PIDNamespace: true, HostProcesses: true,
		Memory: true, Processes: true, CPU: true, FileSize: true, OpenFiles: true, Disk: true, SharedMemory: true,
		Teardown: true, HostDeath: true, Seccomp: true, Landlock: kernelABI, NoNewPrivs: true, NoSetuid: true,
		Unprivileged: true, Secrets: true, Overlay: true,
	}, nsHidden},
	{BackendLinuxNS + "+helper", func(h hostKind) bool { return h.gcc && h.userns && !h.root }, true, Enforcement{
		Filesystem: true, PrivateTmp: true, Network: NetworkDenied, PIDNamespace: true, HostProcesses: true,
		Memory: true, Processes: true, CPU: true, FileSize: true, OpenFiles: true, Disk: true,
		Teardown: true, HostDeath: true, Seccomp: true, Landlock: kernelABI, NoNewPrivs: true, NoSetuid: true,
		Unprivileged: true, Secrets: true, Overlay: true,
	}, nsHidden},
	{BackendLinuxNS + "+helper", func(h hostKind) bool { return !h.gcc || !h.userns }, false, Enforcement{}, nil},
	// linux-landlock: Landlock and seccomp, no namespaces.
	{BackendLinuxLandlock, func(h hostKind) bool { return h.cgo && h.landlock >= 6 }, true, Enforcement{
		Filesystem: true, Network: NetworkDenied, HostProcesses: true, Memory: true, Processes: true, CPU: true,
		FileSize: true, OpenFiles: true, Teardown: true, Seccomp: true, Landlock: kernelABI, NoNewPrivs: true,
		NoSetuid: true, Unprivileged: true,
	}, nil},
	{BackendLinuxLandlock, func(h hostKind) bool { return h.cgo && h.landlock > 0 && h.landlock < 6 }, true, Enforcement{
		Filesystem: true, Network: NetworkDenied, Memory: true, Processes: true, CPU: true,
		FileSize: true, OpenFiles: true, Teardown: true, Seccomp: true, Landlock: kernelABI, NoNewPrivs: true,
		NoSetuid: true, Unprivileged: true,
	}, nil},
	{BackendLinuxLandlock, func(h hostKind) bool { return !h.cgo || h.landlock == 0 }, false, Enforcement{}, nil},
	// bwrap: namespaces and hiding, no seccomp, no Landlock.
	{BackendBwrap, func(h hostKind) bool { return h.bwrap && h.userns }, true, Enforcement{
		Filesystem: true, PrivateTmp: true, Network: NetworkDenied, PIDNamespace: true, HostProcesses: true,
		Memory: true, Processes: true, CPU: true, FileSize: true, OpenFiles: true, Teardown: true, HostDeath: true,
		NoNewPrivs: true, Unprivileged: true, Secrets: true,
	}, nsHidden},
	{BackendBwrap, func(h hostKind) bool { return !h.bwrap || !h.userns }, false, Enforcement{}, nil},
	// The floor: the caps, and Landlock's write confinement where the
	// kernel has it (and, from ABI 6, its signal and ptrace scoping).
	{BackendFloor, func(h hostKind) bool { return h.landlock >= 6 }, true, Enforcement{
		Filesystem: true, Network: NetworkOpen, HostProcesses: true, Memory: true, Processes: true, CPU: true,
		FileSize: true, OpenFiles: true, Landlock: kernelABI, NoNewPrivs: true, Unprivileged: true,
	}, nil},
	{BackendFloor, func(h hostKind) bool { return h.landlock > 0 && h.landlock < 6 }, true, Enforcement{
		Filesystem: true, Network: NetworkOpen, Memory: true, Processes: true, CPU: true,
		FileSize: true, OpenFiles: true, Landlock: kernelABI, NoNewPrivs: true, Unprivileged: true,
	}, nil},
	{BackendFloor, func(h hostKind) bool { return h.landlock == 0 }, true, Enforcement{
		Network: NetworkOpen, Memory: true, Processes: true, CPU: true, FileSize: true, OpenFiles: true,
		Unprivileged: true,
	}, nil},
	// host: only the caps; a root caller's command is root.
	{BackendHost, func(hostKind) bool { return true }, true, Enforcement{
		Network: NetworkOpen, Memory: true, Processes: true, CPU: true, FileSize: true, OpenFiles: true,
	}, nil},
}

// nsHidden is what linux-ns and bwrap must hide on any host: "~" is the
// caller's home.
var nsHidden = []string{"~", "/root", "/home", "/etc/shadow", "~/.ssh", "~/.aws", "~/.netrc", "~/.cargo/credentials.toml"}

// homeCredentials is every place inside a home where credentials live
// that linux-ns and bwrap must keep hidden when the home itself is shown:
// a name ending in "/" is a directory. TestHiddenCredentials reads a
// secret in each. The list is the oracle: a place dropped from the
// sandbox's own list is a failure, not a change of what is expected.
var homeCredentials = []string{
	".ssh/", ".gnupg/", ".aws/", ".azure/", ".config/", ".docker/", ".kube/", ".netrc", ".npmrc", ".pypirc",
	".git-credentials", ".pgpass", ".my.cnf", ".vault-token", ".password-store/", ".local/share/keyrings/",
	".cargo/credentials", ".cargo/credentials.toml", ".m2/settings.xml", ".gradle/gradle.properties",
	".terraform.d/credentials.tfrc.json", ".bash_history", ".zsh_history", ".python_history",
}

// pinFor returns the row of the table for label on host h. No row, or
// two, is a hole in the table, and fails the test.
func pinFor(t testing.TB, label string, h hostKind) pin {
	t.Helper()
	var found []pin
	for _, p := range pins {
		if p.backend == label && p.when(h) {
			found = append(found, p)
		}
	}
	if len(found) != 1 {
		t.Fatalf("the claims table has %d rows for %s on a host of kind %s; want exactly one", len(found), label, h)
	}
	return found[0]
}

// missing lists what got lacks of the pin p on host h: each name is a
// JSON field of Enforcement.
func (p pin) missing(got Enforcement, h hostKind) []string {
	var out []string
	gv, wv := reflect.ValueOf(got), reflect.ValueOf(p.must)
	for i := range wv.NumField() {
		f := wv.Type().Field(i)
		if f.Type.Kind() == reflect.Bool && wv.Field(i).Bool() && !gv.Field(i).Bool() {
			out = append(out, f.Tag.Get("json"))
		}
	}
	if p.must.Network != "" && openness(got.Network) > openness(p.must.Network) {
		out = append(out, fmt.Sprintf("network (%s, want %s)", got.Network, p.must.Network))
	}
	if want := min(p.must.Landlock, h.landlock); got.Landlock < want {
		out = append(out, fmt.Sprintf("landlock (ABI %d, want %d)", got.Landlock, want))
	}
	for _, path := range p.hiddenPaths() {
		if !slices.Contains(got.Hidden, path) {
			out = append(out, "hidden "+path)
		}
	}
	return out
}

// hiddenPaths is p.hidden as host paths that exist here, "~" read as the
// caller's home.
func (p pin) hiddenPaths() []string {
	home, _ := os.UserHomeDir()
	var out []string
	for _, path := range p.hidden {
		if rest, ok := cutHome(path); ok {
			if home == "" {
				continue
			}
			path = filepath.Join(home, rest)
		}
		if real, err := filepath.EvalSymlinks(path); err == nil && real != "/" && !slices.Contains(out, real) {
			out = append(out, real)
		}
	}
	return out
}

func cutHome(p string) (string, bool) {
	if p == "~" {
		return "", true
	}
	if len(p) > 2 && p[:2] == "~/" {
		return p[2:], true
	}
	return "", false
}

// openness orders the network modes from closed to open.
func openness(m NetworkMode) int {
	switch m {
	case NetworkDenied:
		return 0
	case NetworkAllowList:
		return 1
	}
	return 2
}

// atLeast is e with every claim of the pin p added: what a test must hold
// the backend to, whatever it says of itself. A network the pin closes is
// judged closed, or, for a run whose spec has an allow-list
// (allowList), no more open than the allow-list.
func (p pin) atLeast(e Enforcement, h hostKind, allowList bool) Enforcement {
	gv, wv := reflect.ValueOf(&e).Elem(), reflect.ValueOf(p.must)
	for i := range wv.NumField() {
		if wv.Field(i).Kind() == reflect.Bool && wv.Field(i).Bool() {
			gv.Field(i).SetBool(true)
		}
	}
	if p.must.Network != "" && openness(e.Network) > openness(p.must.Network) {
		e.Network = p.must.Network
		if allowList && p.must.Network == NetworkDenied {
			e.Network = NetworkAllowList
		}
	}
	e.Landlock = max(e.Landlock, min(p.must.Landlock, h.landlock))
	for _, path := range p.hiddenPaths() {
		if !slices.Contains(e.Hidden, path) {
			e.Hidden = append(e.Hidden, path)
		}
	}
	return e
}

// pinned is a Sandbox whose results claim at least its pin: the tests
// that judge a backend by its claim judge it by the table too.
type pinned struct {
	Sandbox
	pin  pin
	host hostKind
}

func (s pinned) Enforcement() Enforcement {
	return s.pin.atLeast(s.Sandbox.Enforcement(), s.host, false)
}

func (s pinned) Run(ctx context.Context, spec *Spec) (*Result, error) {
	res, err := s.Sandbox.Run(ctx, spec)
	if res != nil {
		res.Enforced = s.pin.atLeast(res.Enforced, s.host, spec != nil && len(spec.Network.Allow) > 0)
	}
	return res, err
}

// TestClaims: every Linux backend that must start on this kind of host
// starts, and claims at least what the table pins for it, by the
// sandbox's Enforcement and by a run's.
func TestClaims(t *testing.T) {
	h := thisHost()
	t.Logf("host kind: %s", h)
	helper, helperErr := helperPath()
	backends := []struct {
		label string
		opts  Options
	}{
		{BackendLinuxNS, Options{Backend: BackendLinuxNS}},
		{BackendLinuxNS + "+helper", Options{Backend: BackendLinuxNS, HelperPath: helper}},
		{BackendLinuxLandlock, Options{Backend: BackendLinuxLandlock}},
		{BackendBwrap, Options{Backend: BackendBwrap}},
		{BackendFloor, Options{Backend: BackendFloor}},
		{BackendHost, Options{Backend: BackendHost}},
	}
	for _, b := range backends {
		t.Run(b.label, func(t *testing.T) {
			p := pinFor(t, b.label, h)
			if b.label == BackendLinuxNS+"+helper" && helperErr != nil {
				if p.starts {
					t.Fatalf("the helper must build on this host (%s): %v", h, helperErr)
				}
				return
			}
			sb, err := New(context.Background(), &b.opts)
			if err != nil {
				if p.starts {
					t.Fatalf("%s must start on this host (%s): %v", b.label, h, err)
				}
				t.Logf("%s does not start here, as the table allows: %v", b.label, err)
				return
			}
			if m := p.missing(sb.Enforcement(), h); len(m) > 0 {
				t.Errorf("%s's Enforcement lacks what the table pins for this host: %v", b.label, m)
			}
			res, err := sb.Run(context.Background(), &Spec{Argv: []string{"/bin/true"}})
			if err != nil {
				t.Fatal(err)
			}
			if m := p.missing(res.Enforced, h); len(m) > 0 {
				t.Errorf("a run's Enforced lacks what the table pins for this host: %v", m)
			}
			if h.root && p.must.Unprivileged && res.Enforced.UID == 0 {
				t.Errorf("a root caller's command runs as uid 0")
			}
		})
	}
}
