package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Spec is one command to run: what to run, with what it may touch, and
// its limits. It is plain data: the same JSON crosses the C ABI.
type Spec struct {
	// Argv is the program and its arguments. A program without a slash
	// is looked up in the PATH of Env (not the host's), or in
	// /usr/local/bin:/usr/bin:/bin when Env has no PATH.
	Argv []string `json:"argv"`
	// Env is the whole environment, KEY=value; nothing is inherited from
	// the host. Every backend but host drops the proxy variables
	// (HTTP_PROXY and friends), setting them only to the run's own egress
	// proxy; the Linux backends and macos-seatbelt point TMPDIR at the
	// run's private temporary directory.
	Env []string `json:"env,omitempty"`
	// Workdir is a host directory bound writable as the working
	// directory. Empty means a fresh directory that the sandbox makes and
	// removes; on the namespace backends it lives in the run's private
	// /tmp and never touches the host. On linux-ns the command's changes
	// to a host directory are held in the run's scratch space (see
	// Limits.Disk) and applied to it when the command exits.
	//
	// When the caller is root, the command runs as an unprivileged user
	// ([Enforcement.UID]), which must be able to write the workdir and
	// the writable paths: a path it cannot write is an [*AccessError],
	// unless Lend is set.
	Workdir string `json:"workdir,omitempty"`
	// ReadOnly are extra host paths the command may read but not write
	// (on the namespace backends, a read-only bind, which also shows a
	// path that is hidden (see Hide); elsewhere the whole host is
	// readable anyway).
	ReadOnly []string `json:"read_only,omitempty"`
	// Writable are extra host paths the command may write.
	Writable []string `json:"writable,omitempty"`
	// Hide are more host paths to hide, on the backends that hide paths
	// ([Enforcement.Secrets]), besides [DefaultHide]: the command sees an
	// empty read-only directory or file there. A path that does not
	// exist is nothing to hide. A path that is also in ReadOnly,
	// Writable or Workdir is shown.
	Hide []string `json:"hide,omitempty"`
	// Lend gives the workdir and the writable paths, with everything in
	// them, to the user the command runs as when that is not the caller
	// (a root caller's commands run as [Options.UID]), so that the
	// command can write them. Set it only for directories made for the
	// run: their ownership is not given back. The root, a top-level
	// directory, and the caller's home or a directory holding it are
	// refused (ErrInvalid).
	Lend bool `json:"lend,omitempty"`
	// Stdin is the command's standard input; empty means /dev/null.
	Stdin []byte `json:"stdin,omitempty"`
	// ReadOnlyAt binds host paths read-only at other paths of the
	// sandbox, on the backends whose Enforcement says Overlay: a file
	// captured elsewhere shown in the workdir, over whatever is there.
	// A target in the workdir is reached without following a symbolic
	// link (one on the way fails the run), what is missing of it is made
	// in the upper layer, and the directories on its way cannot be
	// renamed. A workdir path bound at itself is the workdir's own view
	// of it made read-only (its .git, say).
	ReadOnlyAt []Bind `json:"read_only_at,omitempty"`
	// Conceal are paths relative to the workdir that the command sees
	// absent, on the backends whose Enforcement says Overlay: a
	// directory with everything in it. What is concealed is never shown
	// to Collect as removed. A path that is not there, or is reached
	// through a symbolic link, is nothing to conceal.
	Conceal []string `json:"conceal,omitempty"`
	// Collect, when set, receives the command's changes to the workdir,
	// which are then not applied to it: it is called once, after the
	// command has exited and before Run returns, with the workdir's upper
	// layer, which it may read until it returns. Only the backends whose
	// Enforcement says Overlay take it (elsewhere it is ErrInvalid). A
	// root caller's command may then change the caller's files of the
	// workdir, which it sees as its own user's (an idmapped lower layer);
	// nothing is lent. An error from Collect is Run's, of kind ErrApply,
	// with the result.
	Collect func(ctx context.Context, u *Upper) error `json:"-"`
	// Limits are the caps; a zero field takes its default.
	Limits Limits `json:"limits,omitzero"`
	// Network is denied unless Allow names hosts.
	Network Network `json:"network,omitzero"`
}

// Bind is a host path (Source) shown read-only at another absolute
// path of the sandbox (Target).
type Bind struct {
	Source string `json:"source"`
	Target string `json:"target"`
}

// Limits are the caps of one run. Every cap kills the run and is reported
// as a [Cap]. A zero field means the default from [DefaultLimits].
type Limits struct {
	// CPU is the CPU time (user + system) of all the run's processes.
	CPU Duration `json:"cpu,omitempty"`
	// Wall is the wall-clock time from start to exit.
	Wall Duration `json:"wall,omitempty"`
	// Memory is the resident memory of all the run's processes, in bytes,
	// and, on the backends whose /tmp and /dev/shm are RAM (linux-ns and
	// bwrap), the bytes the run stores there (on linux-ns, also what it
	// writes to host directories, held in RAM until it exits): a file is
	// memory as long as it is in RAM.
	Memory int64 `json:"memory,omitempty"`
	// Processes is the number of processes and threads alive at once.
	Processes int `json:"processes,omitempty"`
	// FileSize is the largest file a process may write, in bytes.
	FileSize int64 `json:"file_size,omitempty"`
	// OpenFiles is the number of open files per process.
	OpenFiles int `json:"open_files,omitempty"`
	// Output is the most kept of each of stdout and stderr, in bytes; a
	// command that writes more is killed.
	Output int64 `json:"output,omitempty"`
	// Disk is the most the command may store in files, in bytes: what it
	// writes to the workdir, the writable paths, /tmp and /dev/shm. On
	// linux-ns these bytes are held in a RAM-backed tmpfs of this size,
	// which counts against Memory too, and the changes to host
	// directories are applied when the command exits; a command that fills
	// it is killed. [Enforcement.Disk] says where the cap applies; the wasi
	// backend counts what a module adds to its writable mounts.
	Disk int64 `json:"disk,omitempty"`
}

// DefaultLimits returns the limits a zero [Limits] field stands for.
func DefaultLimits() Limits {
	return Limits{
		CPU:       Duration(60 * time.Second),
		Wall:      Duration(120 * time.Second),
		Memory:    2 << 30,
		Processes: 1024,
		FileSize:  1 << 30,
		OpenFiles: 512,
		Output:    1 << 20,
		Disk:      1 << 30,
	}
}

// WithDefaults returns l with every zero field replaced by its default.
func (l Limits) WithDefaults() Limits { return l.withDefaults() }

// withDefaults returns l with every zero field replaced by its default.
func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	if l.CPU == 0 {
		l.CPU = d.CPU
	}
	if l.Wall == 0 {
		l.Wall = d.Wall
	}
	if l.Memory == 0 {
		l.Memory = d.Memory
	}
	if l.Processes == 0 {
		l.Processes = d.Processes
	}
	if l.FileSize == 0 {
		l.FileSize = d.FileSize
	}
	if l.OpenFiles == 0 {
		l.OpenFiles = d.OpenFiles
	}
	if l.Output == 0 {
		l.Output = d.Output
	}
	if l.Disk == 0 {
		l.Disk = d.Disk
	}
	return l
}

// Network is the run's network access.
type Network struct {
	// Allow lists the hosts the command may reach, as "host" (any port),
	// "host:port" or "*.domain", through the run's egress proxy (HTTP
	// CONNECT and absolute-form HTTP, announced in HTTP_PROXY and
	// friends). Empty means no network at all. A backend that cannot
	// serve the proxy either denies everything (linux-landlock, bwrap) or
	// confines nothing (floor, host); [Enforcement.Network] says which.
	Allow []string `json:"allow,omitempty"`
}

// Duration is a time.Duration whose JSON form is a Go duration string
// such as "90s" or "1m30s".
type Duration time.Duration

// MarshalJSON implements json.Marshaler.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON implements json.Unmarshaler.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a duration is a string such as \"90s\"")
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("invalid duration %q: want a string such as \"90s\"", s)
	}
	*d = Duration(v)
	return nil
}

// plan is a validated spec with its defaults filled in.
type plan struct {
	Spec
	limits Limits
	allow  []hostPort
}

// hostPort is one entry of the network allow-list; port 0 means any.
type hostPort struct {
	host string
	port int
}

// Validate checks a spec the way every backend does, so that a spec one
// backend takes, another takes too. A bad field is an *Error of kind
// ErrInvalid whose Step names it.
func (s *Spec) Validate() error {
	if _, err := check(s); err != nil {
		return err
	}
	return nil
}

// check validates s and returns the plan a backend runs.
func check(s *Spec) (*plan, *Error) {
	bad := func(field, msg string) *Error {
		return &Error{Kind: ErrInvalid, Step: field, Err: fmt.Errorf("%s", msg)}
	}
	if s == nil {
		return nil, bad("spec", "nil spec")
	}
	if len(s.Argv) == 0 || s.Argv[0] == "" {
		return nil, bad("argv", "no program to run")
	}
	for i, a := range s.Argv {
		if strings.IndexByte(a, 0) >= 0 {
			return nil, bad(fmt.Sprintf("argv[%d]", i), "contains a NUL byte")
		}
	}
	for i, e := range s.Env {
		if strings.IndexByte(e, 0) >= 0 || !strings.Contains(e, "=") || strings.HasPrefix(e, "=") {
			return nil, bad(fmt.Sprintf("env[%d]", i), "want KEY=value without NUL bytes")
		}
	}
	p := &plan{Spec: *s, limits: s.Limits.withDefaults()}
	paths := func(field string, in []string) ([]string, *Error) {
		out := make([]string, 0, len(in))
		for i, v := range in {
			if !filepath.IsAbs(v) || strings.IndexByte(v, 0) >= 0 {
				return nil, bad(fmt.Sprintf("%s[%d]", field, i), "want an absolute path")
			}
			out = append(out, filepath.Clean(v))
		}
		return out, nil
	}
	var err *Error
	if p.ReadOnly, err = paths("read_only", s.ReadOnly); err != nil {
		return nil, err
	}
	if p.Writable, err = paths("writable", s.Writable); err != nil {
		return nil, err
	}
	if p.Hide, err = paths("hide", s.Hide); err != nil {
		return nil, err
	}
	for i, h := range p.Hide {
		if h == "/" {
			return nil, bad(fmt.Sprintf("hide[%d]", i), "the root cannot be hidden")
		}
	}
	p.ReadOnlyAt = nil
	for i, b := range s.ReadOnlyAt {
		field := fmt.Sprintf("read_only_at[%d]", i)
		if !filepath.IsAbs(b.Source) || strings.IndexByte(b.Source, 0) >= 0 {
			return nil, bad(field+".source", "want an absolute path")
		}
		if !filepath.IsAbs(b.Target) || strings.IndexByte(b.Target, 0) >= 0 || filepath.Clean(b.Target) == "/" {
			return nil, bad(field+".target", "want an absolute path other than the root")
		}
		p.ReadOnlyAt = append(p.ReadOnlyAt, Bind{filepath.Clean(b.Source), filepath.Clean(b.Target)})
	}
	p.Conceal = nil
	for i, c := range s.Conceal {
		rel := filepath.ToSlash(filepath.Clean(c))
		if c == "" || filepath.IsAbs(c) || rel == "." || rel == ".." || strings.HasPrefix(rel, "../") || strings.IndexByte(c, 0) >= 0 {
			return nil, bad(fmt.Sprintf("conceal[%d]", i), "want a path inside the workdir, relative to it")
		}
		p.Conceal = append(p.Conceal, rel)
	}
	if (s.Collect != nil || len(s.Conceal) > 0) && s.Workdir == "" {
		return nil, bad("workdir", "collect and conceal need a host workdir")
	}
	if s.Workdir != "" {
		if !filepath.IsAbs(s.Workdir) || strings.IndexByte(s.Workdir, 0) >= 0 {
			return nil, bad("workdir", "want an absolute path")
		}
		p.Workdir = filepath.Clean(s.Workdir)
	}
	l := s.Limits
	switch {
	case l.CPU < 0:
		return nil, bad("limits.cpu", "negative")
	case l.Wall < 0:
		return nil, bad("limits.wall", "negative")
	case l.Memory < 0:
		return nil, bad("limits.memory", "negative")
	case l.Processes < 0:
		return nil, bad("limits.processes", "negative")
	case l.FileSize < 0:
		return nil, bad("limits.file_size", "negative")
	case l.OpenFiles < 0:
		return nil, bad("limits.open_files", "negative")
	case l.Output < 0:
		return nil, bad("limits.output", "negative")
	case l.Disk < 0:
		return nil, bad("limits.disk", "negative")
	}
	if p.limits.CPU < Duration(time.Second) {
		return nil, bad("limits.cpu", "below the 1s granularity of the CPU limit")
	}
	for i, a := range s.Network.Allow {
		hp, perr := parseHostPort(a)
		if perr != nil {
			return nil, bad(fmt.Sprintf("network.allow[%d]", i), perr.Error())
		}
		p.allow = append(p.allow, hp)
	}
	return p, nil
}

// parseHostPort parses "host" or "host:port" ("[::1]:443" for IPv6).
func parseHostPort(s string) (hostPort, error) {
	if s == "" {
		return hostPort{}, fmt.Errorf("empty host")
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		if strings.Contains(s, ":") && !strings.HasPrefix(s, "[") && net.ParseIP(s) == nil {
			return hostPort{}, fmt.Errorf("want host or host:port, got %q", s)
		}
		return hostPort{host: strings.ToLower(strings.Trim(s, "[]"))}, nil
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		return hostPort{}, fmt.Errorf("invalid port in %q", s)
	}
	if host == "" {
		return hostPort{}, fmt.Errorf("empty host in %q", s)
	}
	return hostPort{host: strings.ToLower(host), port: n}, nil
}
