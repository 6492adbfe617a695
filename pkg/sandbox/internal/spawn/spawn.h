// The io-harness sandbox spawner: one C implementation shared by the cgo
// build of package sandbox and by the io-harness-sandbox-exec helper.
// See spawn.c for the order of the steps and wire.go for the spec format.
#ifndef IOHS_SPAWN_H
#define IOHS_SPAWN_H

#include <stddef.h>
#include <stdint.h>

// Record tags of the spec wire format. Keep in sync with wire.go.
enum {
	IOHS_ARG = 1,         // one argv element
	IOHS_ENV = 2,         // one KEY=value
	IOHS_WORKDIR = 3,     // the working directory
	IOHS_RO = 4,          // an extra read-only path
	IOHS_RW = 5,          // an extra writable path
	IOHS_RLIMIT = 6,      // u32 resource, u32 pad, u64 soft, u64 hard
	IOHS_FLAGS = 7,       // u64 IOHS_F_* bits
	IOHS_TMPFS_SIZE = 8,  // u64 bytes of the scratch tmpfs (namespaces only): /tmp, /dev/shm, the overlays' upper layers
	IOHS_STDIO = 9,       // 3 x i32: the payload's stdin, stdout, stderr
	IOHS_PROBE_PATH = 10, // probe mode: a host path the payload must fail to create
	IOHS_LISTEN_PORT = 11, // u32: a 127.0.0.1 port to listen on inside the netns
	IOHS_HIDE = 12,       // a host path to hide behind an empty directory or file (namespaces only)
	IOHS_RUN_AS = 13,     // 2 x u32: uid, gid the payload runs as; the spawner is root and makes no user namespace
	IOHS_PROBE_DIAL = 14, // u32: probe mode: a 127.0.0.1 port the payload tries to connect to
	IOHS_RO_AT = 15,      // "source\0target": a host path bound read-only at another path (namespaces only)
	IOHS_CONCEAL = 16     // a path relative to the workdir that its overlay shows as absent (IOHS_F_OVERLAY)
};

// Flags.
#define IOHS_F_NS (1u << 0)          // mount, pid, net, ipc, uts (and, without IOHS_RUN_AS, user) namespaces; private root
#define IOHS_F_LANDLOCK (1u << 1)    // a Landlock ruleset as a second wall
#define IOHS_F_SECCOMP (1u << 2)     // the seccomp deny-list
#define IOHS_F_DENY_INET (1u << 3)   // no network sockets at all (rungs without a netns)
#define IOHS_F_PROBE (1u << 4)       // do every step but exec, check containment, exit 0
#define IOHS_F_EPHEMERAL_WD (1u << 5) // create the workdir inside the private /tmp
#define IOHS_F_DENY_SETSID (1u << 6) // keep every process in the run's session
#define IOHS_F_OVERLAY (1u << 7)     // writable directories are overlays whose changes stay in the scratch tmpfs
#define IOHS_F_IDMAP (1u << 8)       // with IOHS_RUN_AS: the overlays' lower layers show the caller's files as the run's

#define IOHS_MAX_RLIMITS 16

struct iohs_rlimit {
	uint32_t resource;
	uint64_t soft, hard;
};

// iohs_spec is a decoded spec. Every string is NUL-terminated and owned
// by the spec (iohs_spec_free releases them).
struct iohs_spec {
	char **argv;
	int argc;
	char **envp;
	int envc;
	char *workdir;
	char **ro;
	int nro;
	char **rw;
	int nrw;
	char **hide;
	int nhide;
	char **ro_at; // "source\0target" pairs
	int nro_at;
	char **conceal;
	int nconceal;
	struct iohs_rlimit rl[IOHS_MAX_RLIMITS];
	int nrl;
	uint64_t flags;
	uint64_t tmpfs_size;
	int stdio[3];
	char *probe_path;
	int listen_port;
	int run_as; // run_uid and run_gid are set
	uint32_t run_uid, run_gid;
	int probe_dial;
};

// iohs_result is what a spawn reports. On failure stage names the step
// that failed (a static string) and err is its errno; on success stage is
// NULL, pid and pidfd identify the sandbox's first process (the pid
// namespace's init when IOHS_F_NS is set), listener is the listening
// socket made inside the netns, or -1, and scratch is the root of the
// scratch tmpfs (IOHS_F_NS), which outlives the namespace while it is
// open, or -1.
struct iohs_result {
	const char *stage;
	int err;
	int pid;
	int pidfd;
	int listener;
	int scratch;
};

// iohs_decode parses the wire format into s. It returns 0, or -1 with
// r->stage and r->err set.
int iohs_decode(const uint8_t *buf, size_t n, struct iohs_spec *s, struct iohs_result *r);

// iohs_spec_free releases what iohs_decode allocated.
void iohs_spec_free(struct iohs_spec *s);

// iohs_spawn starts the payload (or, in probe mode, checks the setup and
// exits) and returns once it has exec'd or failed. It returns 0 on
// success, -1 on failure; r is filled in both cases. The child is created
// with no exit signal, so only a waiter using __WALL sees it.
int iohs_spawn(const struct iohs_spec *s, struct iohs_result *r);

// iohs_spawn_wire is iohs_decode + iohs_spawn + iohs_spec_free with the
// given stdio, for callers that hold the encoded spec.
int iohs_spawn_wire(const uint8_t *buf, size_t n, int in, int out, int err, struct iohs_result *r);

// iohs_helper_main is the helper executable's whole life: read the spec
// from fd 3, spawn, report on fd 4, wait, report the exit, exit. It does
// not return.
void iohs_helper_main(void);

#endif
