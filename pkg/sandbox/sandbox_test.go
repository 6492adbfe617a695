package sandbox

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestChoose(t *testing.T) {
	refused := errors.New("refused")
	tests := []struct {
		name      string
		goos      string
		want      string
		works     map[string]bool
		chosen    string
		fallbacks []string
		probed    []string
		err       bool
	}{
		{name: "linux, namespaces work", goos: "linux", works: map[string]bool{"linux-ns": true, "floor": true},
			chosen: "linux-ns", probed: []string{"linux-ns"}},
		{name: "linux, userns refused (Ubuntu 24.04 AppArmor)", goos: "linux",
			works:  map[string]bool{"linux-landlock": true, "bwrap": true, "floor": true},
			chosen: "linux-landlock", fallbacks: []string{"linux-ns"}, probed: []string{"linux-ns", "linux-landlock"}},
		{name: "linux, no Landlock, bwrap present", goos: "linux", works: map[string]bool{"bwrap": true, "floor": true},
			chosen: "bwrap", fallbacks: []string{"linux-ns", "linux-landlock"}, probed: []string{"linux-ns", "linux-landlock", "bwrap"}},
		{name: "linux, only the floor", goos: "linux", works: map[string]bool{"floor": true},
			chosen: "floor", fallbacks: []string{"linux-ns", "linux-landlock", "bwrap"}, probed: []string{"linux-ns", "linux-landlock", "bwrap", "floor"}},
		{name: "linux, nothing works", goos: "linux", works: map[string]bool{},
			fallbacks: []string{"linux-ns", "linux-landlock", "bwrap", "floor"}, probed: []string{"linux-ns", "linux-landlock", "bwrap", "floor"}, err: true},
		{name: "host is never chosen automatically", goos: "linux", works: map[string]bool{"host": true},
			fallbacks: []string{"linux-ns", "linux-landlock", "bwrap", "floor"}, probed: []string{"linux-ns", "linux-landlock", "bwrap", "floor"}, err: true},
		{name: "named backend that works", goos: "linux", want: "bwrap", works: map[string]bool{"linux-ns": true, "bwrap": true},
			chosen: "bwrap", probed: []string{"bwrap"}},
		{name: "named backend that fails is an error, not a fallback", goos: "linux", want: "linux-ns", works: map[string]bool{"floor": true},
			probed: []string{"linux-ns"}, err: true},
		{name: "host by name", goos: "linux", want: "host", works: map[string]bool{"host": true}, chosen: "host", probed: []string{"host"}},
		{name: "darwin", goos: "darwin", works: map[string]bool{"macos-seatbelt": true}, chosen: "macos-seatbelt", probed: []string{"macos-seatbelt"}},
		{name: "darwin without sandbox-exec", goos: "darwin", works: map[string]bool{"floor": true},
			chosen: "floor", fallbacks: []string{"macos-seatbelt"}, probed: []string{"macos-seatbelt", "floor"}},
		{name: "windows", goos: "windows", works: map[string]bool{"windows-job": true}, chosen: "windows-job", probed: []string{"windows-job"}},
		{name: "an OS with no backend", goos: "plan9", works: map[string]bool{"floor": true}, err: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var probed []string
			chosen, fallbacks, err := choose(tt.goos, tt.want, func(name string) error {
				probed = append(probed, name)
				if tt.works[name] {
					return nil
				}
				return refused
			})
			if (err != nil) != tt.err {
				t.Fatalf("err %v, want error %v", err, tt.err)
			}
			var skipped []string
			for _, f := range fallbacks {
				skipped = append(skipped, f.Backend)
				if f.Reason != "refused" {
					t.Errorf("fallback %s: reason %q, want the probe's error", f.Backend, f.Reason)
				}
			}
			if diff := cmp.Diff(tt.chosen, chosen); diff != "" {
				t.Errorf("chosen (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.fallbacks, skipped); diff != "" {
				t.Errorf("fallbacks (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.probed, probed); diff != "" {
				t.Errorf("probed (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name string
		spec *Spec
		step string // "" when valid
	}{
		{"nil", nil, "spec"},
		{"no argv", &Spec{}, "argv"},
		{"empty program", &Spec{Argv: []string{""}}, "argv"},
		{"NUL in an argument", &Spec{Argv: []string{"a", "b\x00c"}}, "argv[1]"},
		{"env without =", &Spec{Argv: []string{"a"}, Env: []string{"PATH"}}, "env[0]"},
		{"env with an empty key", &Spec{Argv: []string{"a"}, Env: []string{"=x"}}, "env[0]"},
		{"relative workdir", &Spec{Argv: []string{"a"}, Workdir: "rel"}, "workdir"},
		{"relative read-only path", &Spec{Argv: []string{"a"}, ReadOnly: []string{"/ok", "rel"}}, "read_only[1]"},
		{"relative writable path", &Spec{Argv: []string{"a"}, Writable: []string{"rel"}}, "writable[0]"},
		{"relative path to hide", &Spec{Argv: []string{"a"}, Hide: []string{"rel"}}, "hide[0]"},
		{"hide the root", &Spec{Argv: []string{"a"}, Hide: []string{"/x", "/.."}}, "hide[1]"},
		{"negative disk", &Spec{Argv: []string{"a"}, Limits: Limits{Disk: -1}}, "limits.disk"},
		{"negative memory", &Spec{Argv: []string{"a"}, Limits: Limits{Memory: -1}}, "limits.memory"},
		{"negative wall", &Spec{Argv: []string{"a"}, Limits: Limits{Wall: -1}}, "limits.wall"},
		{"CPU under a second", &Spec{Argv: []string{"a"}, Limits: Limits{CPU: Duration(500 * time.Millisecond)}}, "limits.cpu"},
		{"bad allow entry", &Spec{Argv: []string{"a"}, Network: Network{Allow: []string{"example.com:99999"}}}, "network.allow[0]"},
		{"empty allow entry", &Spec{Argv: []string{"a"}, Network: Network{Allow: []string{""}}}, "network.allow[0]"},
		{"valid", &Spec{Argv: []string{"a"}, Env: []string{"A=b=c"}, Workdir: "/w/../w", Network: Network{Allow: []string{"example.com", "[::1]:443"}}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := check(tt.spec)
			if tt.step == "" {
				if err != nil {
					t.Fatalf("unexpected error %v", err)
				}
				if p.Workdir != "/w" {
					t.Errorf("workdir %q not cleaned", p.Workdir)
				}
				if diff := cmp.Diff(DefaultLimits(), p.limits); diff != "" {
					t.Errorf("defaults (-want +got):\n%s", diff)
				}
				return
			}
			if err == nil || !errors.Is(err, ErrInvalid) || err.Step != tt.step {
				t.Fatalf("err %v, want ErrInvalid at %q", err, tt.step)
			}
		})
	}
}

func TestNotLendable(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", filepath.Join(home, "user"))
	tests := []struct {
		path string
		ok   bool
	}{
		{"/", false},
		{"/usr", false},
		{"/tmp", false},
		{home, false}, // holds the home
		{filepath.Join(home, "user"), false},
		{filepath.Join(home, "user", "copy"), true},
		{filepath.Join(home, "other"), true},
		{"/tmp/io-harness-exec-1", true},
	}
	for _, tt := range tests {
		if got := notLendable(tt.path) == ""; got != tt.ok {
			t.Errorf("%s: lendable %v, want %v (%s)", tt.path, got, tt.ok, notLendable(tt.path))
		}
	}
}

func TestParseHostPort(t *testing.T) {
	tests := []struct {
		in   string
		want hostPort
		err  bool
	}{
		{"example.com", hostPort{"example.com", 0}, false},
		{"Example.COM:443", hostPort{"example.com", 443}, false},
		{"*.pypi.org", hostPort{"*.pypi.org", 0}, false},
		{"127.0.0.1:8080", hostPort{"127.0.0.1", 8080}, false},
		{"[::1]:443", hostPort{"::1", 443}, false},
		{"::1", hostPort{"::1", 0}, false},
		{"example.com:0", hostPort{}, true},
		{"example.com:http", hostPort{}, true},
		{":80", hostPort{}, true},
		{"a:b:c", hostPort{}, true},
	}
	for _, tt := range tests {
		got, err := parseHostPort(tt.in)
		if (err != nil) != tt.err || got != tt.want {
			t.Errorf("parseHostPort(%q) = %+v, %v; want %+v, error %v", tt.in, got, err, tt.want, tt.err)
		}
	}
}

func TestEgressMatch(t *testing.T) {
	e := &egress{allow: []hostPort{{"example.com", 0}, {"api.example.org", 443}, {"*.pypi.org", 0}}}
	tests := []struct {
		host string
		port int
		ok   bool
	}{
		{"example.com", 80, true},
		{"example.com", 8443, true},
		{"sub.example.com", 80, false},
		{"api.example.org", 443, true},
		{"api.example.org", 80, false},
		{"files.pypi.org", 443, true},
		{"pypi.org", 443, false},
		{"evilpypi.org", 443, false},
		{"example.com.evil.net", 80, false},
	}
	for _, tt := range tests {
		if _, ok := e.match(tt.host, tt.port); ok != tt.ok {
			t.Errorf("match(%s, %d) = %v, want %v", tt.host, tt.port, ok, tt.ok)
		}
	}
}

func TestSpecJSON(t *testing.T) {
	in := `{"argv":["go","test","./..."],"env":["PATH=/usr/bin"],"workdir":"/src","read_only":["/opt/sdk"],` +
		`"writable":["/cache"],"stdin":"aGk=","limits":{"cpu":"30s","wall":"1m0s","memory":1073741824,"processes":64,` +
		`"file_size":1048576,"open_files":256,"output":65536},"network":{"allow":["proxy.golang.org:443"]}}`
	var s Spec
	if err := json.Unmarshal([]byte(in), &s); err != nil {
		t.Fatal(err)
	}
	want := Spec{
		Argv: []string{"go", "test", "./..."}, Env: []string{"PATH=/usr/bin"}, Workdir: "/src",
		ReadOnly: []string{"/opt/sdk"}, Writable: []string{"/cache"}, Stdin: []byte("hi"),
		Limits: Limits{CPU: Duration(30 * time.Second), Wall: Duration(time.Minute), Memory: 1 << 30, Processes: 64,
			FileSize: 1 << 20, OpenFiles: 256, Output: 64 << 10},
		Network: Network{Allow: []string{"proxy.golang.org:443"}},
	}
	if diff := cmp.Diff(want, s); diff != "" {
		t.Fatalf("decoded (-want +got):\n%s", diff)
	}
	out, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != in {
		t.Errorf("round trip:\n got %s\nwant %s", out, in)
	}
	if err := json.Unmarshal([]byte(`{"argv":["a"],"limits":{"cpu":30}}`), &s); err == nil {
		t.Errorf("a number for a duration was accepted")
	}
	// The zero spec encodes without empty sections.
	out, _ = json.Marshal(Spec{Argv: []string{"true"}})
	if string(out) != `{"argv":["true"]}` {
		t.Errorf("minimal spec encodes as %s", out)
	}
}

func TestResultJSON(t *testing.T) {
	r := Result{ExitCode: -1, Signal: "SIGKILL", Stdout: []byte("out"), Stderr: []byte{}, CapHit: CapMemory,
		Backend: "linux-ns", Enforced: Enforcement{Filesystem: true, Network: NetworkDenied, Spawner: "cgo", Gaps: "g"},
		Duration: Duration(1500 * time.Millisecond), CPU: Duration(time.Second)}
	out, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"exit_code":-1,"signal":"SIGKILL","stdout":"b3V0","stderr":"","cap_hit":"memory","backend":"linux-ns",` +
		`"enforced":{"filesystem":true,"private_tmp":false,"network":"denied","pid_namespace":false,"host_processes":false,` +
		`"memory":false,"processes":false,"cpu":false,"file_size":false,"open_files":false,"overlay":false,"disk":false,"shared_memory":false,"teardown":false,"host_death":false,` +
		`"seccomp":false,"landlock":0,"no_new_privs":false,"no_setuid":false,"unprivileged":false,"uid":0,"gid":0,"secrets":false,` +
		`"spawner":"cgo","gaps":"g"},"duration":"1.5s","cpu":"1s"}`
	if string(out) != want {
		t.Errorf("got  %s\nwant %s", out, want)
	}
}

func TestAttribute(t *testing.T) {
	l := DefaultLimits()
	l.CPU = Duration(2 * time.Second)
	tests := []struct {
		name string
		st   exitStatus
		want Cap
	}{
		{"clean exit", exitStatus{code: 0}, CapNone},
		{"failed exit", exitStatus{code: 152}, CapNone},
		{"SIGXCPU at the soft limit", exitStatus{code: -1, signal: sigXCPU, cpu: 2 * time.Second}, CapCPU},
		{"SIGXFSZ", exitStatus{code: -1, signal: sigXFSZ}, CapFileSize},
		{"SIGKILL at the hard CPU limit (SIGXCPU ignored)", exitStatus{code: -1, signal: sigKILL, cpu: 3 * time.Second}, CapCPU},
		{"SIGKILL from elsewhere", exitStatus{code: -1, signal: sigKILL, cpu: time.Second}, CapNone},
		{"SIGSEGV", exitStatus{code: -1, signal: int(syscall.SIGSEGV)}, CapNone},
		{"the backend knows", exitStatus{code: 153, capHint: CapFileSize}, CapFileSize},
	}
	for _, tt := range tests {
		if got := attribute(tt.st, l); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestEnv(t *testing.T) {
	env := []string{"PATH=/bin", "HTTP_PROXY=http://corp:3128", "https_proxy=x", "TMPDIR=/host/tmp", "KEEP=1"}
	got := envWith(envWithout(env, proxyVars()...), "TMPDIR", "/tmp")
	if diff := cmp.Diff([]string{"PATH=/bin", "KEEP=1", "TMPDIR=/tmp"}, got); diff != "" {
		t.Errorf("scrubbed (-want +got):\n%s", diff)
	}
	got = proxyEnv(env, 3128)
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"} {
		n := 0
		for _, e := range got {
			if strings.HasPrefix(e, k+"=") {
				n++
				if e != k+"=http://127.0.0.1:3128" {
					t.Errorf("%s", e)
				}
			}
		}
		if n != 1 {
			t.Errorf("%s set %d times", k, n)
		}
	}
}

func TestErrorIs(t *testing.T) {
	err := error(&Error{Kind: ErrSetup, Backend: "linux-ns", Step: "spawn", Err: syscall.EPERM})
	if !errors.Is(err, ErrSetup) || !errors.Is(err, syscall.EPERM) || errors.Is(err, ErrInvalid) {
		t.Errorf("errors.Is does not see the kind and the errno")
	}
	if got := err.Error(); got != "sandbox: linux-ns: setup failed: spawn: operation not permitted" {
		t.Errorf("message %q", got)
	}
}
