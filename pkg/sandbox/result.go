package sandbox

import "time"

// Cap names the limit that ended a run.
type Cap string

// The caps. CapNone means the command ended on its own.
const (
	CapNone      Cap = ""
	CapCPU       Cap = "cpu"
	CapWall      Cap = "wall"
	CapMemory    Cap = "memory"
	CapProcesses Cap = "processes"
	CapFileSize  Cap = "file_size"
	CapOutput    Cap = "output"
	CapDisk      Cap = "disk"
)

// Result is what a command that ran did. It is plain data.
type Result struct {
	// ExitCode is the command's exit status, or -1 when a signal ended it.
	ExitCode int `json:"exit_code"`
	// Signal names the signal that ended the command ("SIGKILL"), if any.
	Signal string `json:"signal,omitempty"`
	// Stdout and Stderr are the command's output, at most Limits.Output
	// bytes each.
	Stdout []byte `json:"stdout"`
	Stderr []byte `json:"stderr"`
	// StdoutTruncated and StderrTruncated report output beyond the limit.
	StdoutTruncated bool `json:"stdout_truncated,omitempty"`
	StderrTruncated bool `json:"stderr_truncated,omitempty"`
	// CapHit is the limit that killed the command, if one did.
	CapHit Cap `json:"cap_hit,omitempty"`
	// Backend names the backend that ran the command.
	Backend string `json:"backend"`
	// Enforced is what that backend really enforced for this run.
	Enforced Enforcement `json:"enforced"`
	// Duration is the wall-clock time from start to exit.
	Duration Duration `json:"duration"`
	// CPU is the CPU time of the command and the descendants it waited
	// for, as the kernel accounted it.
	CPU Duration `json:"cpu"`
	// Egress lists the egress proxy's decisions, when the run had an
	// allow-list and the backend served it.
	Egress []Connection `json:"egress,omitempty"`
}

// NetworkMode is what a run can reach on the network.
type NetworkMode string

// The network modes.
const (
	// NetworkDenied: nothing; the kernel refuses every connection.
	NetworkDenied NetworkMode = "denied"
	// NetworkAllowList: only the allow-listed hosts, through the run's
	// egress proxy; direct connections are refused by the kernel.
	NetworkAllowList NetworkMode = "allow_list"
	// NetworkOpen: whatever the host can reach. Nothing is enforced.
	NetworkOpen NetworkMode = "open"
)

// Enforcement is what a backend really enforces, measured by attempting
// it, not by reading sysctls. A false field is not protected.
type Enforcement struct {
	// Filesystem: writes outside the workdir and the writable paths are
	// refused.
	Filesystem bool `json:"filesystem"`
	// PrivateTmp: /tmp and /dev/shm are the run's own and vanish with it.
	PrivateTmp bool `json:"private_tmp"`
	// Network is what the run can reach.
	Network NetworkMode `json:"network"`
	// PIDNamespace: host processes are invisible; the command is pid 1 of
	// its own pid namespace.
	PIDNamespace bool `json:"pid_namespace"`
	// HostProcesses: the host's processes cannot be ptraced, signalled,
	// or have their memory or environment read.
	HostProcesses bool `json:"host_processes"`
	// Memory, Processes, CPU, FileSize and OpenFiles: that cap is applied.
	Memory    bool `json:"memory"`
	Processes bool `json:"processes"`
	CPU       bool `json:"cpu"`
	FileSize  bool `json:"file_size"`
	OpenFiles bool `json:"open_files"`
	// Overlay: the command's changes to a host workdir are held apart
	// until it exits (an overlay whose upper layer is the run's), so that
	// Spec.Collect can take them instead, Spec.Conceal can hide paths of
	// the workdir and Spec.ReadOnlyAt can show other files in it.
	Overlay bool `json:"overlay"`
	// Disk: the disk cap is applied to every place the command can write
	// (the workdir, the writable paths, /tmp and /dev/shm).
	Disk bool `json:"disk"`
	// SharedMemory: SysV shared memory dies with the last process that
	// has it attached, so it is always counted as some process's memory,
	// and it dies with the run.
	SharedMemory bool `json:"shared_memory"`
	// Teardown: when Run returns, every process the command started is
	// gone, including ones that called setsid or forked twice.
	Teardown bool `json:"teardown"`
	// HostDeath: if the host process dies, even by SIGKILL, every process
	// of the run dies too.
	HostDeath bool `json:"host_death"`
	// Seccomp: the system-call deny-list is installed.
	Seccomp bool `json:"seccomp"`
	// Landlock is the Landlock ABI version applied, 0 for none.
	Landlock int `json:"landlock"`
	// NoNewPrivs: setuid binaries cannot raise privileges.
	NoNewPrivs bool `json:"no_new_privs"`
	// NoSetuid: the command cannot make a setuid or setgid file (seccomp
	// refuses those mode bits), so it cannot leave behind a program that
	// runs as its user for whoever starts it later.
	NoSetuid bool `json:"no_setuid"`
	// Unprivileged: the command never runs as the host's root. When the
	// caller is root it runs as UID and GID instead: its files are that
	// user's, and files only root may read are unreadable to it.
	Unprivileged bool `json:"unprivileged"`
	// UID and GID are the host user and group the command runs as (-1
	// where the OS has none).
	UID int `json:"uid"`
	GID int `json:"gid"`
	// Secrets: the caller's home, /root, /home and the usual credential
	// files are hidden (Hidden lists them), and Spec.Hide hides more.
	Secrets bool `json:"secrets"`
	// Hidden are the host paths the command cannot read: it sees an empty
	// directory or file there, or, where its user could not read the path
	// anyway, the path closed to it as it is.
	Hidden []string `json:"hidden,omitempty"`
	// Spawner is how the sandbox was built: "cgo" (in-process C
	// spawner), "helper" (the io-harness-sandbox-exec executable), a
	// wrapper program's path, or "os" (a plain subprocess).
	Spawner string `json:"spawner"`
	// Gaps says in plain words what this backend does not protect.
	Gaps string `json:"gaps"`
	// Fallbacks lists the stronger backends that were skipped, and why.
	Fallbacks []Fallback `json:"fallbacks,omitempty"`
}

// Fallback is a backend that selection skipped.
type Fallback struct {
	Backend string `json:"backend"`
	Reason  string `json:"reason"`
}

// EventKind names a sandbox event.
type EventKind string

// The event kinds, in the order a run emits them.
const (
	// EventCreate: the run's sandbox and workdir exist.
	EventCreate EventKind = "create"
	// EventExec: the command started.
	EventExec EventKind = "exec"
	// EventCapHit: a cap fired and the run is being killed.
	EventCapHit EventKind = "cap_hit"
	// EventTeardown: every process is gone and the workdir removed.
	EventTeardown EventKind = "teardown"
)

// Event is one step of a run, for tracing.
type Event struct {
	Kind    EventKind `json:"kind"`
	Backend string    `json:"backend"`
	Time    time.Time `json:"time"`
	// Workdir is the run's working directory (create).
	Workdir string `json:"workdir,omitempty"`
	// Argv is the command (exec).
	Argv []string `json:"argv,omitempty"`
	// Pid is the command's host pid (exec).
	Pid int `json:"pid,omitempty"`
	// Cap is the cap that fired (cap_hit).
	Cap Cap `json:"cap,omitempty"`
	// Detail says more in plain words: what crossed the cap, what the
	// teardown removed, or why it could not.
	Detail string `json:"detail,omitempty"`
}
