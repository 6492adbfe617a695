//go:build linux && cgo

// The sandbox spawner. The parent prepares everything that needs memory
// or the host's view of the filesystem (decoded strings, the Landlock
// ruleset, the seccomp program, map strings), then clones the first
// sandbox process with CLONE_VM|CLONE_VFORK: the child shares the
// parent's memory until it execs, so no page tables are copied whatever
// the size of the host process, and the calling thread sleeps until the
// child has exec'd or failed. The child makes raw system calls only (no
// malloc, no stdio) in this order:
//
//   1. reset every signal handler, set pdeathsig, check the parent lives;
//   2. namespaces only: write its own uid/gid map, make every mount
//      private, build the private /tmp, /dev, /dev/shm and /proc, bind the
//      workdir and the extra paths, make the whole tree read-only except
//      the writable places, bring lo up, optionally listen inside the
//      netns and hand the socket to the parent;
//   3. chdir to the workdir, rlimits, drop capabilities, setsid,
//      no_new_privs, Landlock, seccomp;
//   4. stdio, close every other fd, empty the signal mask, exec.
//
// A failing step stores its name and errno in the result (shared memory)
// and exits 127, so the parent tells a setup failure from the payload's.

#define _GNU_SOURCE
#include "spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#ifndef SYS_open_tree
#define SYS_open_tree 428
#endif
#ifndef SYS_move_mount
#define SYS_move_mount 429
#endif
#ifndef SYS_fsopen
#define SYS_fsopen 430
#endif
#ifndef SYS_fsconfig
#define SYS_fsconfig 431
#endif
#ifndef SYS_fsmount
#define SYS_fsmount 432
#endif
#ifndef SYS_fspick
#define SYS_fspick 433
#endif
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_clone3
#define SYS_clone3 435
#endif
#ifndef SYS_close_range
#define SYS_close_range 436
#endif
#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
#endif
#ifndef SYS_process_madvise
#define SYS_process_madvise 440
#endif
#ifndef SYS_mount_setattr
#define SYS_mount_setattr 442
#endif
#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#endif
#ifndef SYS_landlock_add_rule
#define SYS_landlock_add_rule 445
#endif
#ifndef SYS_landlock_restrict_self
#define SYS_landlock_restrict_self 446
#endif
#ifndef CLONE_PIDFD
#define CLONE_PIDFD 0x00001000
#endif
#ifndef OPEN_TREE_CLONE
#define OPEN_TREE_CLONE 1
#endif
#ifndef OPEN_TREE_CLOEXEC
#define OPEN_TREE_CLOEXEC O_CLOEXEC
#endif
#ifndef MOVE_MOUNT_F_EMPTY_PATH
#define MOVE_MOUNT_F_EMPTY_PATH 0x00000004
#endif
#ifndef AT_RECURSIVE
#define AT_RECURSIVE 0x8000
#endif
#ifndef MOUNT_ATTR_RDONLY
#define MOUNT_ATTR_RDONLY 0x00000001
#endif
#ifndef MOUNT_ATTR_NOSUID
#define MOUNT_ATTR_NOSUID 0x00000002
#endif
#ifndef SECBIT_NOROOT
#define SECBIT_NOROOT (1 << 0)
#define SECBIT_NOROOT_LOCKED (1 << 1)
#define SECBIT_NO_SETUID_FIXUP (1 << 2)
#define SECBIT_NO_SETUID_FIXUP_LOCKED (1 << 3)
#define SECBIT_KEEP_CAPS_LOCKED (1 << 5)
#define SECBIT_NO_CAP_AMBIENT_RAISE (1 << 6)
#define SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED (1 << 7)
#endif
#ifndef PR_CAP_AMBIENT
#define PR_CAP_AMBIENT 47
#define PR_CAP_AMBIENT_CLEAR_ALL 4
#endif
#ifndef AF_VSOCK
#define AF_VSOCK 40
#endif

#if defined(__x86_64__)
#define IOHS_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define IOHS_AUDIT_ARCH AUDIT_ARCH_AARCH64
#else
#error "the io-harness spawner supports linux/amd64 and linux/arm64"
#endif

// Landlock's uapi, declared here so the build does not depend on the
// kernel headers' age.
struct iohs_ll_ruleset_attr {
	uint64_t handled_access_fs;
	uint64_t handled_access_net;
	uint64_t scoped;
};
struct iohs_ll_path_beneath {
	uint64_t allowed_access;
	int32_t parent_fd;
} __attribute__((packed));
#define LL_CREATE_RULESET_VERSION 1u
#define LL_RULE_PATH_BENEATH 1
#define LL_FS_EXECUTE 0x1ull
#define LL_FS_WRITE_FILE 0x2ull
#define LL_FS_READ_FILE 0x4ull
#define LL_FS_READ_DIR 0x8ull
#define LL_FS_ABI1 0x1fffull      // every right of ABI 1
#define LL_FS_REFER 0x2000ull     // ABI 2
#define LL_FS_TRUNCATE 0x4000ull  // ABI 3
#define LL_FS_IOCTL_DEV 0x8000ull // ABI 5
#define LL_NET_BIND_TCP 0x1ull    // ABI 4
#define LL_NET_CONNECT_TCP 0x2ull // ABI 4
#define LL_SCOPE_ABSTRACT_UNIX 0x1ull // ABI 6
#define LL_SCOPE_SIGNAL 0x2ull        // ABI 6

#define STACK_SIZE (256 * 1024)
#define MAX_BINDS 64
#define MAX_FILTER 256

// A path bound into the sandbox at its own path.
struct bind {
	const char *path;
	int writable;
	int is_dir;
	int fd; // the open_tree clone, made by the child in its mount namespace
};

// Device nodes bound into the private /dev.
static const char *const dev_nodes[] = {"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty"};
#define NDEV (int)(sizeof dev_nodes / sizeof dev_nodes[0])

// Everything the child needs, prepared by the parent.
struct prep {
	const struct iohs_spec *s;
	struct iohs_result *r;
	char uid_map[64], gid_map[64];
	char tmpfs_opts[64];
	struct bind binds[MAX_BINDS]; // the workdir and the extra paths, shortest first
	int nbinds;
	int dev_fd[NDEV];
	int ruleset_fd;          // -1 without Landlock
	uint64_t ll_handled;     // the rights the ruleset handles
	struct sock_fprog prog;  // the seccomp program (len 0 without seccomp)
	struct sock_filter filter[MAX_FILTER];
	int cap_last;
	int drop_caps;
	int parent_pidfd;
	int sock[2]; // socketpair: [0] parent, [1] child (listener hand-over)
	sigset_t oldmask;
};

static int add_rule(int ruleset, const char *path, uint64_t access, uint64_t handled);

// fail records the failing step and its errno in the shared result and
// ends the child.
static void __attribute__((noreturn)) fail(struct prep *p, const char *stage) {
	p->r->stage = stage;
	p->r->err = errno;
	_exit(127);
}

static int sys_open_tree(int dfd, const char *path, unsigned flags) {
	return (int)syscall(SYS_open_tree, dfd, path, flags);
}

static int sys_move_mount(int from_dfd, const char *from, int to_dfd, const char *to, unsigned flags) {
	return (int)syscall(SYS_move_mount, from_dfd, from, to_dfd, to, flags);
}

struct iohs_mount_attr {
	uint64_t attr_set, attr_clr, propagation, userns_fd;
};

static int set_attr(const char *path, uint64_t set, uint64_t clr) {
	struct iohs_mount_attr a = {set, clr, 0, 0};
	return (int)syscall(SYS_mount_setattr, AT_FDCWD, path, AT_RECURSIVE, &a, sizeof a);
}

static int write_file(const char *path, const char *data) {
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	size_t n = strlen(data);
	ssize_t w = write(fd, data, n);
	int saved = errno;
	close(fd);
	errno = saved;
	return w == (ssize_t)n ? 0 : -1;
}

// mkdir_p creates path and its missing parents (mode 0755).
static int mkdir_p(const char *path) {
	char buf[4096];
	size_t n = strlen(path);
	if (n == 0 || n >= sizeof buf) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memcpy(buf, path, n + 1);
	for (size_t i = 1; i <= n; i++) {
		if (buf[i] != '/' && buf[i] != 0)
			continue;
		char c = buf[i];
		buf[i] = 0;
		if (mkdir(buf, 0755) < 0 && errno != EEXIST)
			return -1;
		buf[i] = c;
	}
	return 0;
}

// ensure_target makes the mount point for a bind that does not exist yet
// (a path inside the private /tmp): a directory or an empty file.
static int ensure_target(const struct bind *b) {
	struct stat st;
	if (stat(b->path, &st) == 0)
		return 0;
	if (b->is_dir)
		return mkdir_p(b->path);
	char dir[4096];
	size_t n = strlen(b->path);
	if (n >= sizeof dir) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memcpy(dir, b->path, n + 1);
	char *slash = strrchr(dir, '/');
	if (slash && slash != dir) {
		*slash = 0;
		if (mkdir_p(dir) < 0)
			return -1;
	}
	int fd = open(b->path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		return -1;
	close(fd);
	return 0;
}

// reset_signals sets every handler to the default, so that no host
// handler (Go's, Python's) can run in the child and the payload starts
// clean. Signals stay blocked until just before exec.
static void reset_signals(struct prep *p) {
	struct {
		void *handler;
		unsigned long flags;
		void *restorer;
		uint64_t mask;
	} ksa;
	memset(&ksa, 0, sizeof ksa); // SIG_DFL, whatever the arch's layout
	for (int sig = 1; sig < 65; sig++) {
		if (sig == SIGKILL || sig == SIGSTOP)
			continue;
		if (syscall(SYS_rt_sigaction, sig, &ksa, NULL, 8) < 0)
			fail(p, "signals: reset a handler");
	}
}

// lo_up brings the loopback interface of the new netns up.
static int lo_up(void) {
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -1;
	struct ifreq ifr;
	memset(&ifr, 0, sizeof ifr);
	strcpy(ifr.ifr_name, "lo");
	if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
		goto bad;
	ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
	if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
		goto bad;
	close(s);
	return 0;
bad:;
	int saved = errno;
	close(s);
	errno = saved;
	return -1;
}

// hand_listener listens on 127.0.0.1:port inside the netns and passes the
// socket to the parent over the socketpair.
static void hand_listener(struct prep *p) {
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		fail(p, "listener: socket");
	struct sockaddr_in a;
	memset(&a, 0, sizeof a);
	a.sin_family = AF_INET;
	a.sin_port = htons((uint16_t)p->s->listen_port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(s, (struct sockaddr *)&a, sizeof a) < 0)
		fail(p, "listener: bind");
	if (listen(s, 128) < 0)
		fail(p, "listener: listen");
	char cbuf[CMSG_SPACE(sizeof(int))];
	memset(cbuf, 0, sizeof cbuf);
	char byte = 'L';
	struct iovec iov = {&byte, 1};
	struct msghdr m;
	memset(&m, 0, sizeof m);
	m.msg_iov = &iov;
	m.msg_iovlen = 1;
	m.msg_control = cbuf;
	m.msg_controllen = sizeof cbuf;
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &s, sizeof s);
	if (sendmsg(p->sock[1], &m, 0) < 0)
		fail(p, "listener: sendmsg");
	close(s);
}

// setup_ns builds the private root. It runs in the new user and mount
// namespaces, as uid 0 of the new user namespace with every capability
// there.
static void setup_ns(struct prep *p) {
	const struct iohs_spec *s = p->s;
	if (write_file("/proc/self/setgroups", "deny") < 0)
		fail(p, "userns: write setgroups");
	if (write_file("/proc/self/uid_map", p->uid_map) < 0)
		fail(p, "userns: write uid_map");
	if (write_file("/proc/self/gid_map", p->gid_map) < 0)
		fail(p, "userns: write gid_map");
	// Nothing done below may propagate back to the host.
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		fail(p, "mount: make / private");
	// Clone every bind source and device node before the private /tmp and
	// /dev hide them.
	for (int i = 0; i < p->nbinds; i++) {
		p->binds[i].fd = sys_open_tree(AT_FDCWD, p->binds[i].path, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
		if (p->binds[i].fd < 0)
			fail(p, "mount: open_tree of a bind source");
	}
	for (int i = 0; i < NDEV; i++) { // a node the host lacks (some containers) is left out
		p->dev_fd[i] = sys_open_tree(AT_FDCWD, dev_nodes[i], OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
		if (p->dev_fd[i] < 0 && errno != ENOENT)
			fail(p, "mount: open_tree of a device node");
	}
	if (mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, p->tmpfs_opts) < 0)
		fail(p, "mount: private /tmp");
	if ((s->flags & IOHS_F_EPHEMERAL_WD) && mkdir_p(s->workdir) < 0)
		fail(p, "mount: make the workdir in /tmp");
	if (mount("tmpfs", "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=65536") < 0)
		fail(p, "mount: private /dev");
	for (int i = 0; i < NDEV; i++) {
		if (p->dev_fd[i] < 0)
			continue;
		int fd = open(dev_nodes[i], O_WRONLY | O_CREAT | O_CLOEXEC, 0666);
		if (fd < 0)
			fail(p, "mount: create a device mount point");
		close(fd);
		if (sys_move_mount(p->dev_fd[i], "", AT_FDCWD, dev_nodes[i], MOVE_MOUNT_F_EMPTY_PATH) < 0)
			fail(p, "mount: bind a device node");
		close(p->dev_fd[i]);
	}
	static const char *const links[][2] = {
	    {"/proc/self/fd", "/dev/fd"},     {"/proc/self/fd/0", "/dev/stdin"}, {"/proc/self/fd/1", "/dev/stdout"},
	    {"/proc/self/fd/2", "/dev/stderr"}, {"pts/ptmx", "/dev/ptmx"},
	};
	for (size_t i = 0; i < sizeof links / sizeof links[0]; i++)
		if (symlink(links[i][0], links[i][1]) < 0)
			fail(p, "mount: /dev symlink");
	if (mkdir("/dev/shm", 01777) < 0)
		fail(p, "mount: mkdir /dev/shm");
	if (mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, p->tmpfs_opts) < 0)
		fail(p, "mount: private /dev/shm");
	if (mkdir("/dev/pts", 0755) < 0)
		fail(p, "mount: mkdir /dev/pts");
	if (mount("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620") < 0)
		fail(p, "mount: private /dev/pts");
	if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
		fail(p, "mount: private /proc");
	for (int i = 0; i < p->nbinds; i++) {
		if (ensure_target(&p->binds[i]) < 0)
			fail(p, "mount: make a bind target");
		if (sys_move_mount(p->binds[i].fd, "", AT_FDCWD, p->binds[i].path, MOVE_MOUNT_F_EMPTY_PATH) < 0)
			fail(p, "mount: bind a path");
		close(p->binds[i].fd);
	}
	// Everything read-only and nosuid, then the writable places back,
	// shortest path first so that a deeper bind wins.
	if (set_attr("/", MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID, 0) < 0)
		fail(p, "mount: make / read-only");
	if (set_attr("/tmp", 0, MOUNT_ATTR_RDONLY) < 0 || set_attr("/dev/shm", 0, MOUNT_ATTR_RDONLY) < 0)
		fail(p, "mount: make the private /tmp writable");
	for (int i = 0; i < p->nbinds; i++) {
		const struct bind *b = &p->binds[i];
		if (set_attr(b->path, b->writable ? 0 : MOUNT_ATTR_RDONLY, b->writable ? MOUNT_ATTR_RDONLY : 0) < 0)
			fail(p, b->writable ? "mount: make a writable path writable" : "mount: make a read-only path read-only");
	}
	// Landlock ignores the directory a mount hides, so the private
	// mounts made here are granted here, by their own roots.
	if (p->ruleset_fd >= 0) {
		uint64_t all = p->ll_handled;
		if (add_rule(p->ruleset_fd, "/tmp", all, all) < 0 || add_rule(p->ruleset_fd, "/dev/shm", all, all) < 0 ||
		    add_rule(p->ruleset_fd, "/dev/pts", LL_FS_READ_FILE | LL_FS_WRITE_FILE | LL_FS_IOCTL_DEV, all) < 0)
			fail(p, "landlock: add_rule for a private mount");
	}
	if (lo_up() < 0)
		fail(p, "net: bring lo up");
	if (s->listen_port > 0)
		hand_listener(p);
}

// drop_caps empties the bounding and ambient sets and locks the
// securebits so that the payload, even as uid 0, execs with no
// capability.
static void drop_caps(struct prep *p) {
	for (int c = 0; c <= p->cap_last; c++)
		if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0)
			fail(p, "caps: drop the bounding set");
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
		fail(p, "caps: clear the ambient set");
	int bits = SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP | SECBIT_NO_SETUID_FIXUP_LOCKED |
		   SECBIT_KEEP_CAPS_LOCKED | SECBIT_NO_CAP_AMBIENT_RAISE | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED;
	if (prctl(PR_SET_SECUREBITS, bits, 0, 0, 0) < 0)
		fail(p, "caps: set securebits");
}

// exec_payload execs argv[0], searching the spec's PATH when it has no
// slash, the way execvp does.
static void exec_payload(struct prep *p) {
	char *const *argv = p->s->argv;
	char *const *envp = p->s->envp;
	const char *file = argv[0];
	if (strchr(file, '/')) {
		execve(file, argv, envp);
		fail(p, "exec");
	}
	const char *path = "/usr/local/bin:/usr/bin:/bin";
	for (int i = 0; envp[i]; i++)
		if (strncmp(envp[i], "PATH=", 5) == 0)
			path = envp[i] + 5;
	size_t flen = strlen(file);
	int saw_eacces = 0;
	char buf[4096];
	for (const char *dir = path;; dir++) {
		const char *end = strchr(dir, ':');
		size_t dlen = end ? (size_t)(end - dir) : strlen(dir);
		if (dlen == 0) { // an empty entry is the working directory
			buf[0] = '.';
			dlen = 1;
		} else if (dlen + flen + 2 <= sizeof buf) {
			memcpy(buf, dir, dlen);
		} else {
			dlen = 0;
		}
		if (dlen > 0 && dlen + flen + 2 <= sizeof buf) {
			buf[dlen] = '/';
			memcpy(buf + dlen + 1, file, flen + 1);
			execve(buf, argv, envp);
			if (errno == EACCES)
				saw_eacces = 1;
			else if (errno != ENOENT && errno != ENOTDIR)
				fail(p, "exec");
		}
		if (!end)
			break;
		dir = end;
	}
	errno = saw_eacces ? EACCES : ENOENT;
	fail(p, "exec: look up the program in PATH");
}

// probe checks, instead of exec, that the setup confines: the probe path
// (outside every writable place) must not be creatable, and in a pid
// namespace this process must be pid 1.
static void __attribute__((noreturn)) probe(struct prep *p) {
	int fd = open(p->s->probe_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd >= 0) {
		unlink(p->s->probe_path);
		errno = 0;
		fail(p, "probe: a write outside the workdir succeeded");
	}
	if (errno != EROFS && errno != EACCES && errno != EPERM)
		fail(p, "probe: unexpected error from a write outside the workdir");
	if ((p->s->flags & IOHS_F_NS) && syscall(SYS_getpid) != 1) {
		errno = 0;
		fail(p, "probe: not pid 1 in the new pid namespace");
	}
	_exit(0);
}

static int child(void *arg) {
	struct prep *p = arg;
	const struct iohs_spec *s = p->s;
	reset_signals(p);
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
		fail(p, "pdeathsig");
	struct pollfd pf = {p->parent_pidfd, POLLIN, 0};
	if (poll(&pf, 1, 0) != 0) { // the parent is gone, or poll failed
		errno = ESRCH;
		fail(p, "pdeathsig: parent gone");
	}
	if (s->flags & IOHS_F_NS)
		setup_ns(p);
	if (chdir(s->workdir) < 0)
		fail(p, "chdir to the workdir");
	for (int i = 0; i < s->nrl; i++) {
		struct rlimit64 rl = {s->rl[i].soft, s->rl[i].hard};
		if (prlimit64(0, (int)s->rl[i].resource, &rl, NULL) < 0)
			fail(p, "setrlimit");
	}
	if (p->drop_caps)
		drop_caps(p);
	if (setsid() < 0)
		fail(p, "setsid");
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		fail(p, "no_new_privs");
	if (p->ruleset_fd >= 0 && syscall(SYS_landlock_restrict_self, p->ruleset_fd, 0) < 0)
		fail(p, "landlock: restrict_self");
	if (p->prog.len > 0 && syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &p->prog) < 0)
		fail(p, "seccomp: install the filter");
	if (s->flags & IOHS_F_PROBE)
		probe(p);
	// Stdio: move the three fds above 2 first, so that overlapping
	// numbers cannot clobber each other, then onto 0, 1, 2.
	int tmp[3];
	for (int i = 0; i < 3; i++) {
		tmp[i] = fcntl(s->stdio[i], F_DUPFD_CLOEXEC, 3);
		if (tmp[i] < 0)
			fail(p, "stdio: dup");
	}
	for (int i = 0; i < 3; i++)
		if (dup2(tmp[i], i) < 0)
			fail(p, "stdio: dup2");
	if (syscall(SYS_close_range, 3, ~0u, 0) < 0) {
		if (errno != ENOSYS)
			fail(p, "close_range");
		struct rlimit nofile;
		getrlimit(RLIMIT_NOFILE, &nofile);
		for (rlim_t fd = 3; fd < nofile.rlim_cur && fd < 65536; fd++)
			close((int)fd);
	}
	sigset_t none;
	sigemptyset(&none);
	if (syscall(SYS_rt_sigprocmask, SIG_SETMASK, &none, NULL, 8) < 0)
		fail(p, "signals: unblock");
	exec_payload(p);
	return 127;
}

// --- parent side: preparation -------------------------------------------

// emit appends a check on one system call: load the number, and when it
// matches run blk, which must end in a return.
static int emit(struct prep *p, int n, int nr, const struct sock_filter *blk, int blen) {
	if (n + 2 + blen > MAX_FILTER)
		return -1;
	p->filter[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr));
	p->filter[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)nr, 0, (uint8_t)blen);
	memcpy(&p->filter[n], blk, (size_t)blen * sizeof *blk);
	return n + blen;
}

#define RET(v) BPF_STMT(BPF_RET | BPF_K, (v))
#define EPERM_RET RET(SECCOMP_RET_ERRNO | EPERM)
#define ALLOW_RET RET(SECCOMP_RET_ALLOW)
#define ARG_LO(i) BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[i]))

// build_filter makes the seccomp deny-list: a foreign architecture is
// killed; the listed calls fail with EPERM (clone3 with ENOSYS, so that
// libc falls back to clone, whose flags can be checked); everything else
// is allowed.
static int build_filter(struct prep *p) {
	uint64_t flags = p->s->flags;
	int n = 0;
	p->filter[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch));
	p->filter[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, IOHS_AUDIT_ARCH, 1, 0);
	p->filter[n++] = (struct sock_filter)RET(SECCOMP_RET_KILL_PROCESS);
#if defined(__x86_64__)
	// x32 system calls share the arch value; refuse them all.
	p->filter[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr));
	p->filter[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000, 0, 1);
	p->filter[n++] = (struct sock_filter)EPERM_RET;
#endif
	static const int denied[] = {
	    SYS_ptrace, SYS_process_vm_readv, SYS_process_vm_writev, SYS_pidfd_getfd, SYS_process_madvise,
	    SYS_mount, SYS_umount2, SYS_pivot_root, SYS_chroot, SYS_open_tree, SYS_move_mount, SYS_fsopen,
	    SYS_fsconfig, SYS_fsmount, SYS_fspick, SYS_mount_setattr, SYS_setns, SYS_kexec_load,
#ifdef SYS_kexec_file_load
	    SYS_kexec_file_load,
#endif
	    SYS_init_module, SYS_finit_module, SYS_delete_module, SYS_bpf, SYS_perf_event_open, SYS_keyctl,
	    SYS_add_key, SYS_request_key, SYS_io_uring_setup, SYS_io_uring_enter, SYS_io_uring_register,
	    SYS_userfaultfd, SYS_open_by_handle_at, SYS_name_to_handle_at, SYS_acct, SYS_swapon, SYS_swapoff,
	    SYS_reboot, SYS_quotactl, SYS_vhangup,
	};
	const struct sock_filter deny[] = {EPERM_RET};
	for (size_t i = 0; i < sizeof denied / sizeof denied[0]; i++)
		if ((n = emit(p, n, denied[i], deny, 1)) < 0)
			return -1;
	const struct sock_filter enosys[] = {RET(SECCOMP_RET_ERRNO | ENOSYS)};
	if ((n = emit(p, n, SYS_clone3, enosys, 1)) < 0)
		return -1;
	// No new user namespace: it would hand the payload a fresh set of
	// capabilities over a fresh mount namespace.
	const struct sock_filter no_userns[] = {
	    ARG_LO(0),
	    BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, CLONE_NEWUSER, 0, 1),
	    EPERM_RET,
	    ALLOW_RET,
	};
	if ((n = emit(p, n, SYS_clone, no_userns, 4)) < 0 || (n = emit(p, n, SYS_unshare, no_userns, 4)) < 0)
		return -1;
	// No terminal input injection.
	const struct sock_filter ioctl_blk[] = {
	    ARG_LO(1),
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, TIOCSTI, 0, 1),
	    EPERM_RET,
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, TIOCLINUX, 0, 1),
	    EPERM_RET,
	    ALLOW_RET,
	};
	if ((n = emit(p, n, SYS_ioctl, ioctl_blk, 6)) < 0)
		return -1;
	// Sockets: AF_UNIX reaches host sockets by path whatever the netns,
	// and AF_VSOCK reaches the hypervisor; only inet and netlink are
	// left, and only netlink when the rung has no netns.
	if (flags & IOHS_F_DENY_INET) {
		const struct sock_filter sock_blk[] = {
		    ARG_LO(0),
		    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_NETLINK, 0, 1),
		    ALLOW_RET,
		    EPERM_RET,
		};
		if ((n = emit(p, n, SYS_socket, sock_blk, 4)) < 0)
			return -1;
	} else {
		const struct sock_filter sock_blk[] = {
		    ARG_LO(0),
		    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_INET, 3, 0),
		    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_INET6, 2, 0),
		    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_NETLINK, 1, 0),
		    EPERM_RET,
		    ALLOW_RET,
		};
		if ((n = emit(p, n, SYS_socket, sock_blk, 6)) < 0)
			return -1;
	}
	// A datagram socketpair can sendto() any named host socket.
	const struct sock_filter pair_blk[] = {
	    ARG_LO(1),
	    BPF_STMT(BPF_ALU | BPF_AND | BPF_K, ~(uint32_t)(SOCK_NONBLOCK | SOCK_CLOEXEC)),
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SOCK_STREAM, 1, 0),
	    EPERM_RET,
	    ALLOW_RET,
	};
	if ((n = emit(p, n, SYS_socketpair, pair_blk, 5)) < 0)
		return -1;
	if ((flags & IOHS_F_DENY_SETSID) && (n = emit(p, n, SYS_setsid, deny, 1)) < 0)
		return -1;
	if (n + 1 > MAX_FILTER)
		return -1;
	p->filter[n++] = (struct sock_filter)ALLOW_RET;
	p->prog.len = (unsigned short)n;
	p->prog.filter = p->filter;
	return 0;
}

// add_rule grants access beneath path, masked to what the ruleset
// handles. A path that does not exist is skipped.
static int add_rule(int ruleset, const char *path, uint64_t access, uint64_t handled) {
	int fd = open(path, O_PATH | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : -1;
	struct iohs_ll_path_beneath pb = {access & handled, fd};
	struct stat st;
	if (fstat(fd, &st) == 0 && !S_ISDIR(st.st_mode))
		pb.allowed_access &= LL_FS_EXECUTE | LL_FS_WRITE_FILE | LL_FS_READ_FILE | LL_FS_TRUNCATE | LL_FS_IOCTL_DEV;
	long rc = syscall(SYS_landlock_add_rule, ruleset, LL_RULE_PATH_BENEATH, &pb, 0);
	int saved = errno;
	close(fd);
	errno = saved;
	return rc < 0 ? -1 : 0;
}

// build_ruleset makes the Landlock ruleset: read and execute everywhere,
// everything in the writable places, read/write on the harmless device
// nodes. With namespaces the private /tmp and /dev are granted through
// their mount points. Without a netns, TCP bind and connect are refused
// (ABI 4) and abstract unix sockets and signals are scoped (ABI 6).
static int build_ruleset(struct prep *p, const char **stage) {
	const struct iohs_spec *s = p->s;
	long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LL_CREATE_RULESET_VERSION);
	if (abi < 1) {
		*stage = "landlock: not supported by the kernel";
		return -1;
	}
	struct iohs_ll_ruleset_attr attr = {LL_FS_ABI1, 0, 0};
	if (abi >= 2)
		attr.handled_access_fs |= LL_FS_REFER;
	if (abi >= 3)
		attr.handled_access_fs |= LL_FS_TRUNCATE;
	if (abi >= 5)
		attr.handled_access_fs |= LL_FS_IOCTL_DEV;
	if (abi >= 4 && (s->flags & IOHS_F_DENY_INET))
		attr.handled_access_net = LL_NET_BIND_TCP | LL_NET_CONNECT_TCP;
	if (abi >= 6 && !(s->flags & IOHS_F_NS))
		attr.scoped = LL_SCOPE_ABSTRACT_UNIX | LL_SCOPE_SIGNAL;
	size_t size = abi >= 6 ? sizeof attr : abi >= 4 ? 2 * sizeof(uint64_t) : sizeof(uint64_t);
	int rs = (int)syscall(SYS_landlock_create_ruleset, &attr, size, 0);
	if (rs < 0) {
		*stage = "landlock: create_ruleset";
		return -1;
	}
	uint64_t all = attr.handled_access_fs;
	uint64_t rx = LL_FS_EXECUTE | LL_FS_READ_FILE | LL_FS_READ_DIR;
	uint64_t dev = LL_FS_READ_FILE | LL_FS_WRITE_FILE | LL_FS_IOCTL_DEV;
	*stage = "landlock: add_rule";
	if (add_rule(rs, "/", rx, all) < 0)
		goto bad;
	// With namespaces these are bound at the same paths, and a rule on a
	// mount's root inode holds.
	static const char *const devs[] = {"/dev/null", "/dev/zero", "/dev/full", "/dev/tty"};
	for (size_t i = 0; i < sizeof devs / sizeof devs[0]; i++)
		if (add_rule(rs, devs[i], dev, all) < 0)
			goto bad;
	if (!(s->flags & IOHS_F_EPHEMERAL_WD) && add_rule(rs, s->workdir, all, all) < 0)
		goto bad;
	for (int i = 0; i < s->nrw; i++)
		if (add_rule(rs, s->rw[i], all, all) < 0)
			goto bad;
	p->ruleset_fd = rs;
	p->ll_handled = all;
	return 0;
bad:;
	int saved = errno;
	close(rs);
	errno = saved;
	return -1;
}

static int add_bind(struct prep *p, const char *path, int writable) {
	if (p->nbinds >= MAX_BINDS) {
		errno = E2BIG;
		return -1;
	}
	struct stat st;
	if (stat(path, &st) < 0)
		return -1;
	p->binds[p->nbinds++] = (struct bind){path, writable, S_ISDIR(st.st_mode), -1};
	return 0;
}

static int by_length(const void *a, const void *b) {
	size_t la = strlen(((const struct bind *)a)->path), lb = strlen(((const struct bind *)b)->path);
	return la < lb ? -1 : la > lb;
}

static int read_int(const char *path, int *v) {
	char buf[32];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	*v = atoi(buf);
	return 0;
}

// prepare fills p; on failure it returns -1 with *stage set and errno.
static int prepare(struct prep *p, const char **stage) {
	const struct iohs_spec *s = p->s;
	p->ruleset_fd = -1;
	p->parent_pidfd = -1;
	p->sock[0] = p->sock[1] = -1;
	if (s->argc < 1 || !s->workdir || s->stdio[0] < 0 || s->stdio[1] < 0 || s->stdio[2] < 0) {
		*stage = "spec: argv, workdir and stdio are required";
		errno = EINVAL;
		return -1;
	}
	if ((s->flags & IOHS_F_PROBE) && !s->probe_path) {
		*stage = "spec: probe mode needs a probe path";
		errno = EINVAL;
		return -1;
	}
	uid_t uid = geteuid();
	gid_t gid = getegid();
	snprintf(p->uid_map, sizeof p->uid_map, "%u %u 1\n", uid, uid);
	snprintf(p->gid_map, sizeof p->gid_map, "%u %u 1\n", gid, gid);
	snprintf(p->tmpfs_opts, sizeof p->tmpfs_opts, "mode=1777,size=%llu", (unsigned long long)s->tmpfs_size);
	if (s->flags & IOHS_F_NS) {
		*stage = "prepare: stat a bind source";
		if (!(s->flags & IOHS_F_EPHEMERAL_WD) && add_bind(p, s->workdir, 1) < 0)
			return -1;
		for (int i = 0; i < s->nrw; i++)
			if (add_bind(p, s->rw[i], 1) < 0)
				return -1;
		for (int i = 0; i < s->nro; i++)
			if (add_bind(p, s->ro[i], 0) < 0)
				return -1;
		qsort(p->binds, (size_t)p->nbinds, sizeof p->binds[0], by_length);
	}
	// Capabilities: the payload of a new user namespace, and root's
	// payload without one, would otherwise exec with a full set.
	p->drop_caps = (s->flags & IOHS_F_NS) || uid == 0;
	if (p->drop_caps && read_int("/proc/sys/kernel/cap_last_cap", &p->cap_last) < 0) {
		*stage = "prepare: read cap_last_cap";
		return -1;
	}
	if ((s->flags & IOHS_F_LANDLOCK) && build_ruleset(p, stage) < 0)
		return -1;
	if ((s->flags & IOHS_F_SECCOMP) && build_filter(p) < 0) {
		*stage = "seccomp: the filter is too long";
		errno = E2BIG;
		return -1;
	}
	p->parent_pidfd = (int)syscall(SYS_pidfd_open, getpid(), 0);
	if (p->parent_pidfd < 0) {
		*stage = "prepare: pidfd_open of the parent";
		return -1;
	}
	if (s->listen_port > 0 && socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, p->sock) < 0) {
		*stage = "prepare: socketpair for the listener";
		return -1;
	}
	return 0;
}

static void release(struct prep *p) {
	if (p->ruleset_fd >= 0)
		close(p->ruleset_fd);
	if (p->parent_pidfd >= 0)
		close(p->parent_pidfd);
	if (p->sock[0] >= 0)
		close(p->sock[0]);
	if (p->sock[1] >= 0)
		close(p->sock[1]);
}

// recv_listener takes the listening socket the child sent.
static int recv_listener(int sock) {
	char cbuf[CMSG_SPACE(sizeof(int))];
	char byte;
	struct iovec iov = {&byte, 1};
	struct msghdr m;
	memset(&m, 0, sizeof m);
	m.msg_iov = &iov;
	m.msg_iovlen = 1;
	m.msg_control = cbuf;
	m.msg_controllen = sizeof cbuf;
	if (recvmsg(sock, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC) < 0)
		return -1;
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);
	if (!c || c->cmsg_type != SCM_RIGHTS) {
		errno = EPROTO;
		return -1;
	}
	int fd;
	memcpy(&fd, CMSG_DATA(c), sizeof fd);
	return fd;
}

int iohs_spawn(const struct iohs_spec *s, struct iohs_result *r) {
	memset(r, 0, sizeof *r);
	r->pid = r->pidfd = r->listener = -1;
	struct prep *p = calloc(1, sizeof *p);
	if (!p) {
		r->stage = "prepare: allocate";
		r->err = ENOMEM;
		return -1;
	}
	p->s = s;
	p->r = r;
	const char *stage = NULL;
	if (prepare(p, &stage) < 0) {
		r->stage = stage;
		r->err = errno;
		release(p);
		free(p);
		return -1;
	}
	void *stack = mmap(NULL, STACK_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	if (stack == MAP_FAILED) {
		r->stage = "prepare: allocate the child stack";
		r->err = errno;
		release(p);
		free(p);
		return -1;
	}
	int flags = CLONE_VM | CLONE_VFORK | CLONE_PIDFD;
	if (s->flags & IOHS_F_NS)
		flags |= CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS;
	// Block every signal, so that no handler of the host runs in the
	// child before it resets them; the child unblocks just before exec.
	sigset_t all;
	sigfillset(&all);
	syscall(SYS_rt_sigprocmask, SIG_SETMASK, &all, &p->oldmask, 8);
	int pidfd = -1;
	int pid = clone(child, (char *)stack + STACK_SIZE, flags, p, &pidfd);
	int clone_errno = errno;
	syscall(SYS_rt_sigprocmask, SIG_SETMASK, &p->oldmask, NULL, 8);
	munmap(stack, STACK_SIZE);
	int rc = 0;
	if (pid < 0) {
		r->stage = "clone";
		r->err = clone_errno;
		rc = -1;
	} else if (r->stage) { // the child failed and has exited
		int st;
		while (waitpid(pid, &st, __WALL) < 0 && errno == EINTR)
			;
		close(pidfd);
		rc = -1;
	} else if (s->flags & IOHS_F_PROBE) { // the child exited 0 after its checks
		int st;
		while (waitpid(pid, &st, __WALL) < 0 && errno == EINTR)
			;
		close(pidfd);
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			r->stage = "probe: the child did not exit cleanly";
			r->err = 0;
			rc = -1;
		}
	} else {
		r->pid = pid;
		r->pidfd = pidfd;
		if (s->listen_port > 0) {
			r->listener = recv_listener(p->sock[0]);
			if (r->listener < 0) {
				r->stage = "listener: recvmsg";
				r->err = errno;
				syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
				int st;
				while (waitpid(pid, &st, __WALL) < 0 && errno == EINTR)
					;
				close(pidfd);
				r->pid = r->pidfd = -1;
				rc = -1;
			}
		}
	}
	release(p);
	free(p);
	return rc;
}

// --- the wire format ----------------------------------------------------

static char *dup_bytes(const uint8_t *b, uint32_t n) {
	char *s = malloc((size_t)n + 1);
	if (!s)
		return NULL;
	memcpy(s, b, n);
	s[n] = 0;
	return s;
}

static int push(char ***list, int *n, char *v) {
	char **l = realloc(*list, (size_t)(*n + 2) * sizeof **list);
	if (!l)
		return -1;
	l[(*n)++] = v;
	l[*n] = NULL;
	*list = l;
	return 0;
}

int iohs_decode(const uint8_t *buf, size_t n, struct iohs_spec *s, struct iohs_result *r) {
	memset(s, 0, sizeof *s);
	s->stdio[0] = s->stdio[1] = s->stdio[2] = -1;
	r->stage = "decode: malformed spec";
	r->err = EINVAL;
	size_t off = 0;
	while (off < n) {
		uint32_t tag, len;
		if (n - off < 8)
			return -1;
		memcpy(&tag, buf + off, 4);
		memcpy(&len, buf + off + 4, 4);
		off += 8;
		if (len > n - off)
			return -1;
		const uint8_t *v = buf + off;
		off += len;
		char *str = NULL;
		switch (tag) {
		case IOHS_ARG:
		case IOHS_ENV:
		case IOHS_RO:
		case IOHS_RW:
			if (!(str = dup_bytes(v, len)))
				goto nomem;
			if (push(tag == IOHS_ARG ? &s->argv : tag == IOHS_ENV ? &s->envp : tag == IOHS_RO ? &s->ro : &s->rw,
				 tag == IOHS_ARG ? &s->argc : tag == IOHS_ENV ? &s->envc : tag == IOHS_RO ? &s->nro : &s->nrw,
				 str) < 0) {
				free(str);
				goto nomem;
			}
			break;
		case IOHS_WORKDIR:
		case IOHS_PROBE_PATH:
			if (!(str = dup_bytes(v, len)))
				goto nomem;
			free(tag == IOHS_WORKDIR ? s->workdir : s->probe_path);
			*(tag == IOHS_WORKDIR ? &s->workdir : &s->probe_path) = str;
			break;
		case IOHS_RLIMIT:
			if (len != 24 || s->nrl >= IOHS_MAX_RLIMITS)
				return -1;
			memcpy(&s->rl[s->nrl].resource, v, 4);
			memcpy(&s->rl[s->nrl].soft, v + 8, 8);
			memcpy(&s->rl[s->nrl].hard, v + 16, 8);
			s->nrl++;
			break;
		case IOHS_FLAGS:
		case IOHS_TMPFS_SIZE:
			if (len != 8)
				return -1;
			memcpy(tag == IOHS_FLAGS ? &s->flags : &s->tmpfs_size, v, 8);
			break;
		case IOHS_STDIO:
			if (len != 12)
				return -1;
			memcpy(s->stdio, v, 12);
			break;
		case IOHS_LISTEN_PORT: {
			uint32_t port;
			if (len != 4)
				return -1;
			memcpy(&port, v, 4);
			if (port > 65535)
				return -1;
			s->listen_port = (int)port;
			break;
		}
		default:
			return -1;
		}
	}
	if (!s->envp && !(s->envp = calloc(1, sizeof *s->envp))) // an empty environment
		goto nomem;
	r->stage = NULL;
	r->err = 0;
	return 0;
nomem:
	r->stage = "decode: allocate";
	r->err = ENOMEM;
	return -1;
}

static void free_list(char **l, int n) {
	for (int i = 0; i < n; i++)
		free(l[i]);
	free(l);
}

void iohs_spec_free(struct iohs_spec *s) {
	free_list(s->argv, s->argc);
	free_list(s->envp, s->envc);
	free_list(s->ro, s->nro);
	free_list(s->rw, s->nrw);
	free(s->workdir);
	free(s->probe_path);
	memset(s, 0, sizeof *s);
}

int iohs_spawn_wire(const uint8_t *buf, size_t n, int in, int out, int err, struct iohs_result *r) {
	struct iohs_spec s;
	memset(r, 0, sizeof *r);
	r->pid = r->pidfd = r->listener = -1;
	if (iohs_decode(buf, n, &s, r) < 0) {
		iohs_spec_free(&s);
		return -1;
	}
	s.stdio[0] = in;
	s.stdio[1] = out;
	s.stdio[2] = err;
	int rc = iohs_spawn(&s, r);
	iohs_spec_free(&s);
	return rc;
}

// --- the helper executable ----------------------------------------------

// The helper's report, one SOCK_SEQPACKET message each. Keep in sync
// with helper.go.
struct iohs_msg {
	int32_t kind; // 'S' started (pidfd, listener attached), 'E' setup error, 'X' exited
	int32_t pid;
	int32_t err;
	int32_t status; // the wait status, for 'X'
	int64_t utime_us, stime_us;
	char stage[96];
};

static void send_msg(const struct iohs_msg *m, const int *fds, int nfds) {
	char cbuf[CMSG_SPACE(2 * sizeof(int))];
	struct iovec iov = {(void *)m, sizeof *m};
	struct msghdr h;
	memset(&h, 0, sizeof h);
	memset(cbuf, 0, sizeof cbuf);
	h.msg_iov = &iov;
	h.msg_iovlen = 1;
	if (nfds > 0) {
		h.msg_control = cbuf;
		h.msg_controllen = CMSG_SPACE((size_t)nfds * sizeof(int));
		struct cmsghdr *c = CMSG_FIRSTHDR(&h);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN((size_t)nfds * sizeof(int));
		memcpy(CMSG_DATA(c), fds, (size_t)nfds * sizeof(int));
	}
	while (sendmsg(4, &h, MSG_NOSIGNAL) < 0 && errno == EINTR)
		;
}

void iohs_helper_main(void) {
	struct iohs_msg m;
	memset(&m, 0, sizeof m);
	size_t cap = 4096, n = 0;
	uint8_t *buf = malloc(cap);
	for (;;) {
		if (!buf) {
			m.kind = 'E';
			m.err = ENOMEM;
			snprintf(m.stage, sizeof m.stage, "helper: read the spec");
			send_msg(&m, NULL, 0);
			_exit(125);
		}
		ssize_t r = read(3, buf + n, cap - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			m.kind = 'E';
			m.err = errno;
			snprintf(m.stage, sizeof m.stage, "helper: read the spec");
			send_msg(&m, NULL, 0);
			_exit(125);
		}
		if (r == 0)
			break;
		n += (size_t)r;
		if (n == cap) {
			cap *= 2;
			uint8_t *nb = realloc(buf, cap);
			if (!nb)
				free(buf);
			buf = nb;
		}
	}
	close(3);
	struct iohs_spec spec;
	struct iohs_result res;
	memset(&res, 0, sizeof res);
	if (iohs_decode(buf, n, &spec, &res) < 0) {
		m.kind = 'E';
		m.err = res.err;
		snprintf(m.stage, sizeof m.stage, "%s", res.stage);
		send_msg(&m, NULL, 0);
		_exit(125);
	}
	free(buf);
	spec.stdio[0] = 0;
	spec.stdio[1] = 1;
	spec.stdio[2] = 2;
	if (iohs_spawn(&spec, &res) < 0) {
		m.kind = 'E';
		m.err = res.err;
		snprintf(m.stage, sizeof m.stage, "%s", res.stage);
		send_msg(&m, NULL, 0);
		_exit(125);
	}
	// The payload has its own copies; holding ours would keep the host's
	// pipes open after the payload is gone.
	int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
	for (int fd = 0; fd < 3; fd++)
		if (devnull >= 0)
			dup2(devnull, fd);
	m.kind = 'S';
	m.pid = res.pid;
	if (res.pid < 0) { // probe mode: the checks passed
		send_msg(&m, NULL, 0);
		_exit(0);
	}
	int fds[2] = {res.pidfd, res.listener};
	send_msg(&m, fds, res.listener >= 0 ? 2 : 1);
	// Report the exit without reaping, so that the pid (the session id of
	// a run without a pid namespace) stays taken while the host sweeps
	// the session; reap when the host says so (a byte, or its end).
	siginfo_t info;
	struct rusage ru;
	memset(&info, 0, sizeof info);
	memset(&ru, 0, sizeof ru);
	while (syscall(SYS_waitid, P_PID, res.pid, &info, WEXITED | WNOWAIT | __WALL, &ru) < 0) {
		if (errno != EINTR) {
			m.kind = 'E';
			m.err = errno;
			snprintf(m.stage, sizeof m.stage, "helper: waitid");
			send_msg(&m, NULL, 0);
			_exit(125);
		}
	}
	m.kind = 'X';
	if (info.si_code == CLD_EXITED)
		m.status = (info.si_status & 0xff) << 8;
	else
		m.status = (info.si_status & 0x7f) | (info.si_code == CLD_DUMPED ? 0x80 : 0);
	m.utime_us = (int64_t)ru.ru_utime.tv_sec * 1000000 + ru.ru_utime.tv_usec;
	m.stime_us = (int64_t)ru.ru_stime.tv_sec * 1000000 + ru.ru_stime.tv_usec;
	send_msg(&m, NULL, 0);
	if (!(spec.flags & IOHS_F_NS)) {
		char go;
		while (recv(4, &go, 1, 0) < 0 && errno == EINTR)
			;
	}
	int st;
	while (waitpid(res.pid, &st, __WALL) < 0 && errno == EINTR)
		;
	_exit(0);
}
