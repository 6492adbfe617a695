// Package sandbox runs model-produced commands (compilers, test binaries,
// any argv) in an ephemeral, per-run sandbox whose caps kill.
//
// Quick start:
//
//	sb, err := sandbox.New(ctx, nil) // the strongest backend that works here
//	if err != nil {
//		return err // sandbox.ErrUnavailable: nothing works on this host
//	}
//	res, err := sb.Run(ctx, &sandbox.Spec{
//		Argv:    []string{"go", "test", "./..."},
//		Env:     []string{"PATH=/usr/local/go/bin:/usr/bin:/bin", "HOME=/tmp"},
//		Workdir: "/path/to/checkout",
//		Limits:  sandbox.Limits{Wall: sandbox.Duration(5 * time.Minute)},
//	})
//	if err != nil {
//		return err // the sandbox failed (ErrSetup, ErrInvalid) or ctx ended
//	}
//	fmt.Println(res.ExitCode, res.CapHit, res.Backend, res.Enforced.Gaps)
//
// A [Spec] and a [Result] are plain JSON-tagged data: the same JSON
// crosses the C ABI. A command that ran is a Result whatever its exit
// status; a cap that fired is [Result.CapHit]; a failure of the sandbox
// itself is an [*Error]. Every Result says which backend ran and what it
// really enforced ([Enforcement]), including, in plain words, what it
// does not protect.
//
// # Backends
//
// [New] probes the candidates strongest first, each by building a real
// sandbox and checking that a write outside it is refused, and keeps the
// first that works; a named backend that does not work is an error. The
// ones skipped are listed in [Enforcement.Fallbacks]. The probe also
// dials a listener of the host on loopback: a backend whose probe reaches
// it claims an open network.
//
// On Linux:
//
//   - linux-ns: mount, pid, net, ipc and uts namespaces (and a user
//     namespace when the caller is not root); a read-only root with a
//     private /tmp, /dev, /dev/shm and /proc; the hidden paths covered;
//     the writable directories mounted as overlays whose changes are
//     applied to the host when the command exits; Landlock and a seccomp
//     deny-list as second walls; no capabilities, no_new_privs; rlimits;
//     the network an empty namespace (or, with an allow-list, an egress
//     proxy reached through a listener made inside it); teardown by
//     killing the namespace's init. It is built by a small C spawner,
//     compiled in with cgo (so that it works inside a c-shared library,
//     which cannot re-execute itself), or, in a build without cgo, run as
//     the io-harness-sandbox-exec helper executable.
//   - linux-landlock: the same spawner without namespaces, for hosts that
//     refuse user namespaces: Landlock, seccomp (no sockets, no setsid),
//     rlimits, teardown by session.
//   - bwrap: bubblewrap at a fixed path, when the above are unavailable.
//   - floor: a plain subprocess with rlimits, a new session, a scrubbed
//     environment and a wall clock, under Landlock when the kernel has it.
//
// On macOS, macos-seatbelt (sandbox-exec with a generated deny-default
// profile) and the floor; on Windows, windows-job (a Job Object). The
// host backend, on every OS, runs the command directly with the caps and
// protects nothing; it is used only when named.
//
// # What a command can read and write
//
// A command reads the host's files as its user can, and writes only its
// workdir, the writable paths and its own temporary directory (on every
// backend but floor without Landlock, and host).
//
// Its user is the caller's, except that a root caller's commands run as
// an unprivileged user ([Options.UID], 65534 by default) on every backend
// but host: files only root may read are closed to them, and what they
// write is never root's. The workdir and the writable paths must then be
// writable by that user; [Spec.Lend] hands over a directory made for the
// run.
//
// linux-ns and bwrap also hide [DefaultHide]: the caller's home, /root,
// /home, the per-user runtime directories, the password and host-key
// files of /etc, container secrets and engine sockets, and the usual
// credential files inside a home. The command sees an empty read-only
// directory or file there (or, where its user could not read the path
// anyway, the path as it is, closed to it). A path named in ReadOnly,
// Writable or Workdir is shown, except the credential files inside it;
// Spec.Hide hides more.
// Every other file the command's user may read, it can read. Landlock
// cannot hide a path under an allowed one, so linux-landlock and the
// floor hide nothing: there the command reads every file its user can,
// the caller's home included.
//
// [Enforcement] says what a run really got, and its Gaps say in plain
// words what it does not protect.
//
// # Caps
//
// CPU time, wall clock, memory, processes, file size, open files, output
// bytes and disk, each with a default ([DefaultLimits]). Memory and
// process counts are polled every 20ms (cgroups are not used), so a burst
// can overshoot before the kill; Enforcement.Gaps says so. The disk cap
// is the size of linux-ns's scratch tmpfs, which holds /tmp, /dev/shm and
// what the command writes to host directories until it exits: those
// bytes are RAM, so they count against the memory cap too.
package sandbox
