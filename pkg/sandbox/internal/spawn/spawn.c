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
//   2. namespaces only: write its own uid/gid map (unless it runs as root
//      and will switch to IOHS_RUN_AS ids instead), make every mount
//      private, make the scratch tmpfs (the disk cap: /tmp, /dev/shm and
//      the overlays' upper layers all live in it), build the private /tmp,
//      /dev, /dev/shm and /proc, bind the extra paths, mount an overlay
//      over every writable directory, hide the hidden paths, make the
//      whole tree read-only except the writable places, bring lo up, hand
//      the scratch tmpfs (and optionally a listener made inside the netns)
//      to the parent;
//   3. chdir to the workdir, rlimits, drop capabilities (and switch to
//      the IOHS_RUN_AS ids), setsid, no_new_privs, Landlock, seccomp;
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
#include <sys/sysmacros.h>
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
#ifndef SYS_openat2
#define SYS_openat2 437
#endif
#ifndef SYS_fchmodat2
#define SYS_fchmodat2 452
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
#ifndef MOUNT_ATTR_IDMAP
#define MOUNT_ATTR_IDMAP 0x00100000
#endif
#ifndef OPEN_TREE_CLONE
#define OPEN_TREE_CLONE 1
#endif
#ifndef OPEN_TREE_CLOEXEC
#define OPEN_TREE_CLOEXEC O_CLOEXEC
#endif
#ifndef AT_EMPTY_PATH
#define AT_EMPTY_PATH 0x1000
#endif
#ifndef MOUNT_ATTR_NODEV
#define MOUNT_ATTR_NODEV 0x00000004
#endif
#ifndef FSOPEN_CLOEXEC
#define FSOPEN_CLOEXEC 0x00000001
#endif
#ifndef FSMOUNT_CLOEXEC
#define FSMOUNT_CLOEXEC 0x00000001
#endif
#ifndef FSCONFIG_SET_FLAG
#define FSCONFIG_SET_FLAG 0
#define FSCONFIG_SET_STRING 1
#define FSCONFIG_CMD_CREATE 6
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
#define MAX_BINDS 128
#define MAX_FILTER 512
#define MAX_RULES 96

// A check on one system call: its code is blocks[off, off+len) of the
// prep, and ends in a return.
struct rule {
	uint32_t nr;
	int off, len;
};

// The kinds of path the child mounts at its own path.
enum { BIND_RO, BIND_RW, HIDE };

// A path bound into the sandbox at its own path, or hidden there.
struct bind {
	const char *path;
	const char *src; // what is bound there: path itself, or another host path (IOHS_RO_AT)
	int kind;
	int is_dir;
	int overlay; // a writable directory mounted as an overlay over the scratch tmpfs
	int ord;     // BIND_RW: its place among the writable paths, the workdir first; names its upper layer
	int fd;      // an O_PATH fd of the source, or the overlay, made by the child before /tmp and /dev hide them
};

// Device nodes bound into the private /dev.
static const char *const dev_nodes[] = {"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty"};
#define NDEV (int)(sizeof dev_nodes / sizeof dev_nodes[0])

// Everything the child needs, prepared by the parent.
struct prep {
	const struct iohs_spec *s;
	struct iohs_result *r;
	char uid_map[64], gid_map[64];
	struct bind binds[MAX_BINDS]; // the workdir and the extra paths, shortest first
	int nbinds;
	int dev_fd[NDEV];
	int ruleset_fd;          // -1 without Landlock
	int idmap_ns;            // IOHS_F_IDMAP: the user namespace of the lower layers' mapping, else -1
	uint64_t ll_handled;     // the rights the ruleset handles
	struct sock_fprog prog;  // the seccomp program (len 0 without seccomp)
	struct sock_filter filter[MAX_FILTER];
	struct rule rules[MAX_RULES]; // build_filter's checks, by system call
	int nrules;
	struct sock_filter blocks[MAX_FILTER]; // their code
	int nblocks;
	int cap_last;
	int drop_caps;
	int dumpable; // the host's dumpable flag, which the child's id switch resets on the memory they share
	int parent_pidfd;
	int sock[2]; // socketpair: [0] parent, [1] child (fd hand-over)
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

static int bind_fd(int fd, const char *target, unsigned long flags);

// is_mount_root reports whether the directory fd is the root of a mount.
static int is_mount_root(int fd) {
	struct statx stx;
	if (statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW, 0, &stx) < 0)
		return -1;
	return (stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) && (stx.stx_attributes & STATX_ATTR_MOUNT_ROOT);
}

// pin_target opens the mount point of a bind from elsewhere (IOHS_RO_AT)
// whose target is inside the overlay w, making what is missing of it in
// the overlay, and never through a symbolic link: a link the command's
// files put on the way fails the run instead of leading the bind (or the
// mount point it makes) out. Each directory between w and the target is
// bound onto itself, so that the command cannot rename it away and put
// another file where the bound one was. It returns an O_PATH fd of the
// target, or -1.
static int pin_target(const struct bind *w, const struct bind *b) {
	char rel[4096];
	size_t n = strlen(b->path), wn = strlen(w->path);
	if (n >= sizeof rel || n <= wn + 1) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memcpy(rel, b->path + wn + 1, n - wn);
	int dfd = open(w->path, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return -1;
	char *name = rel;
	for (char *slash; (slash = strchr(name, '/')) != NULL; name = slash + 1) {
		*slash = 0;
		if (mkdirat(dfd, name, 0755) < 0 && errno != EEXIST)
			goto fail;
		int sub = openat(dfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (sub < 0)
			goto fail;
		int root = is_mount_root(sub);
		if (root == 0) {
			char at[32];
			snprintf(at, sizeof at, "/proc/self/fd/%d", sub);
			if (mount(at, at, NULL, MS_BIND | MS_REC, NULL) < 0) {
				close(sub);
				goto fail;
			}
			close(sub);
			sub = openat(dfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		} else if (root < 0) {
			close(sub);
			goto fail;
		}
		close(dfd);
		if ((dfd = sub) < 0)
			return -1;
	}
	if (b->is_dir) {
		if (mkdirat(dfd, name, 0755) < 0 && errno != EEXIST)
			goto fail;
	} else {
		int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
		if (fd < 0 && errno == EISDIR)
			errno = ENOTDIR;
		if (fd < 0)
			goto fail;
		close(fd);
	}
	int t = openat(dfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC | (b->is_dir ? O_DIRECTORY : 0));
	close(dfd);
	return t;
fail:;
	int saved = errno;
	close(dfd);
	errno = saved;
	return -1;
}

// overlay_of returns the overlay bind that holds the target of b, or NULL.
static const struct bind *overlay_of(const struct prep *p, const struct bind *b) {
	for (int i = 0; i < p->nbinds; i++) {
		const struct bind *w = &p->binds[i];
		size_t n = strlen(w->path);
		if (w->overlay && w != b && strncmp(b->path, w->path, n) == 0 && b->path[n] == '/')
			return w;
	}
	return NULL;
}

// mount_source mounts a bind's source (the fd the child opened) at its
// target: through pin_target when the target is inside an overlay and
// the source is another path. A path of the overlay bound at itself
// (IOHS_RO_AT with the same source and target: the workdir's .git) is the
// overlay's own view of it bound onto itself, so that it shows what the
// overlay shows (the lower layer's ids as the run's) and can be made
// read-only on its own.
static int mount_source(struct prep *p, struct bind *b) {
	const struct bind *w = b->src != b->path ? overlay_of(p, b) : NULL;
	if (!w) {
		if (ensure_target(b) < 0)
			return -1;
		return b->overlay ? sys_move_mount(b->fd, "", AT_FDCWD, b->path, MOVE_MOUNT_F_EMPTY_PATH) : bind_fd(b->fd, b->path, MS_REC);
	}
	int t = pin_target(w, b);
	if (t < 0)
		return -1;
	char at[32];
	snprintf(at, sizeof at, "/proc/self/fd/%d", t);
	int r = strcmp(b->src, b->path) == 0 ? mount(at, at, NULL, MS_BIND | MS_REC, NULL) : bind_fd(b->fd, at, MS_REC);
	int saved = errno;
	close(t);
	errno = saved;
	return r;
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

// send_fd passes fd to the parent over the socketpair, in a message whose
// one byte says what it is.
static void send_fd(struct prep *p, char tag, int fd, const char *stage) {
	char cbuf[CMSG_SPACE(sizeof(int))];
	memset(cbuf, 0, sizeof cbuf);
	struct iovec iov = {&tag, 1};
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
	memcpy(CMSG_DATA(c), &fd, sizeof fd);
	if (sendmsg(p->sock[1], &m, MSG_NOSIGNAL) < 0)
		fail(p, stage);
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
	send_fd(p, 'L', s, "listener: sendmsg");
	close(s);
}

static int sys_fsopen(const char *name) { return (int)syscall(SYS_fsopen, name, FSOPEN_CLOEXEC); }

static int sys_fsconfig(int fd, unsigned cmd, const char *key, const char *value) {
	return (int)syscall(SYS_fsconfig, fd, cmd, key, value, 0);
}

static int sys_fsmount(int fd, unsigned attrs) { return (int)syscall(SYS_fsmount, fd, FSMOUNT_CLOEXEC, attrs); }

// make_scratch makes the scratch tmpfs, detached (setup_ns attaches it
// at SCRATCH once /dev exists): its size is the run's disk cap,
// and the private /tmp and /dev/shm, the overlays' upper and work
// directories and the hiding places are directories of it. It returns
// the mount's fd.
static int make_scratch(struct prep *p) {
	int fs = sys_fsopen("tmpfs");
	if (fs < 0)
		fail(p, "scratch: fsopen tmpfs");
	// Files, not only bytes: each one the payload leaves in a host
	// directory becomes a host inode when the parent applies the changes.
	char size[32], inodes[32];
	unsigned long long n = p->s->tmpfs_size / 2048;
	snprintf(size, sizeof size, "%llu", (unsigned long long)p->s->tmpfs_size);
	snprintf(inodes, sizeof inodes, "%llu", n < 65536 ? 65536 : n);
	if (sys_fsconfig(fs, FSCONFIG_SET_STRING, "size", size) < 0 ||
	    sys_fsconfig(fs, FSCONFIG_SET_STRING, "nr_inodes", inodes) < 0 ||
	    sys_fsconfig(fs, FSCONFIG_SET_STRING, "mode", "0700") < 0 ||
	    sys_fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL) < 0)
		fail(p, "scratch: configure the tmpfs");
	int m = sys_fsmount(fs, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
	if (m < 0)
		fail(p, "scratch: fsmount");
	close(fs);
	// The child's umask is 0 (see child): modes are as written.
	if (mkdirat(m, "tmp", 01777) < 0 || mkdirat(m, "shm", 01777) < 0)
		fail(p, "scratch: make a directory");
	int overlays = 0, hides = 0;
	for (int i = 0; i < p->nbinds; i++) {
		overlays |= p->binds[i].overlay;
		hides |= p->binds[i].kind == HIDE;
	}
	if (overlays && (mkdirat(m, "upper", 0755) < 0 || mkdirat(m, "work", 0700) < 0))
		fail(p, "scratch: make a directory");
	if (hides) {
		if (mkdirat(m, "hide", 0755) < 0)
			fail(p, "scratch: make a directory");
		int fd = openat(m, "empty", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444);
		if (fd < 0)
			fail(p, "scratch: make the empty file");
		close(fd);
	}
	return m;
}

// The scratch tmpfs's root inside the sandbox.
#define SCRATCH "/dev/.io-harness"

// bind_fd binds what the O_PATH fd holds on target.
static int bind_fd(int fd, const char *target, unsigned long flags) {
	char src[32];
	snprintf(src, sizeof src, "/proc/self/fd/%d", fd);
	return mount(src, target, NULL, MS_BIND | flags, NULL);
}

// mount_from_scratch binds the scratch tmpfs's directory or file name on
// target, once the scratch tmpfs is attached at SCRATCH: a plain bind, one
// system call (a clone with open_tree would make and dissolve an
// anonymous mount namespace each time).
static void mount_from_scratch(struct prep *p, const char *name, const char *target, const char *stage) {
	char src[64];
	snprintf(src, sizeof src, SCRATCH "/%s", name);
	if (mount(src, target, NULL, MS_BIND, NULL) < 0)
		fail(p, stage);
}

// conceal makes the lower layer's rel absent from the overlay: a
// whiteout in the upper layer up (a directory fd), under directories
// that copy the lower ones' modes, owners and times, so that the merged
// view shows them as they are. A path the lower layer does not have, or
// reaches through a symbolic link, is left alone.
static void conceal(struct prep *p, int lower, int up, const char *rel) {
	char buf[4096];
	size_t n = strlen(rel);
	if (n == 0 || n >= sizeof buf || rel[0] == '/')
		return;
	memcpy(buf, rel, n + 1);
	int lo = dup(lower), hi = dup(up);
	if (lo < 0 || hi < 0)
		fail(p, "conceal: dup");
	char *name = buf;
	for (char *slash; (slash = strchr(name, '/')); name = slash + 1) {
		*slash = 0;
		if (!*name || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
			goto out;
		int nlo = openat(lo, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (nlo < 0)
			goto out; // not a directory of the lower layer: nothing to conceal
		struct stat st;
		if (fstat(nlo, &st) < 0)
			fail(p, "conceal: stat a lower directory");
		if (mkdirat(hi, name, st.st_mode & 07777) < 0 && errno != EEXIST)
			fail(p, "conceal: make an upper directory");
		int nhi = openat(hi, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (nhi < 0)
			fail(p, "conceal: open an upper directory");
		if (p->s->run_as) {
			uid_t u = (p->s->flags & IOHS_F_IDMAP) && st.st_uid == geteuid() ? p->s->run_uid : st.st_uid;
			gid_t g = (p->s->flags & IOHS_F_IDMAP) && st.st_gid == getegid() ? p->s->run_gid : st.st_gid;
			if (fchown(nhi, u, g) < 0)
				fail(p, "conceal: give an upper directory its owner");
		}
		if (fchmod(nhi, st.st_mode & 07777) < 0)
			fail(p, "conceal: give an upper directory its mode");
		struct timespec ts[2] = {st.st_atim, st.st_mtim};
		futimens(nhi, ts);
		close(lo);
		close(hi);
		lo = nlo;
		hi = nhi;
	}
	if (!*name || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
		goto out;
	struct stat st;
	if (fstatat(lo, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		goto out;
	if (mknodat(hi, name, S_IFCHR | 0, makedev(0, 0)) < 0 && errno != EEXIST)
		fail(p, "conceal: make a whiteout");
out:
	close(lo);
	close(hi);
}

// make_overlay makes, detached, an overlay whose lower layer is the host
// directory b->path (still visible: it runs before the private /tmp hides
// anything) and whose upper layer is upper/<i> of the scratch tmpfs, so
// that what the payload writes there counts against the disk cap and
// reaches the host only when the parent applies it. With IOHS_F_IDMAP
// the lower layer is an idmapped clone of the host directory in which
// the caller's files are the run's, so that the run's user can change
// them (in its upper layer). The workdir's overlay conceals the spec's
// IOHS_CONCEAL paths.
static int make_overlay(struct prep *p, int scratch, const struct bind *b) {
	char name[32], upper[64], work[64], lowerdir[64];
	int idmap = p->s->run_as && (p->s->flags & IOHS_F_IDMAP);
	// The overlay's root takes the upper directory's owner and mode: give
	// it the lower one's, so that it is writable by whoever could write
	// the host directory (through the mapping, with IOHS_F_IDMAP).
	struct stat st;
	if (stat(b->path, &st) < 0)
		fail(p, "overlay: stat the lower directory");
	if (idmap) {
		if (st.st_uid == geteuid())
			st.st_uid = p->s->run_uid;
		if (st.st_gid == getegid())
			st.st_gid = p->s->run_gid;
	}
	snprintf(name, sizeof name, "upper/%d", b->ord);
	if (mkdirat(scratch, name, 0700) < 0)
		fail(p, "overlay: make the upper directory");
	if (fchownat(scratch, name, st.st_uid, st.st_gid, 0) < 0 && errno != EINVAL && errno != EPERM)
		fail(p, "overlay: give the upper directory its owner");
	if (fchmodat(scratch, name, st.st_mode & 07777, 0) < 0)
		fail(p, "overlay: give the upper directory its mode");
	snprintf(upper, sizeof upper, "/proc/self/fd/%d/upper/%d", scratch, b->ord);
	snprintf(name, sizeof name, "work/%d", b->ord);
	if (mkdirat(scratch, name, 0700) < 0)
		fail(p, "overlay: make the work directory");
	snprintf(work, sizeof work, "/proc/self/fd/%d/work/%d", scratch, b->ord);
	int lower = -1;
	if (idmap) {
		lower = (int)syscall(SYS_open_tree, AT_FDCWD, b->path, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
		if (lower < 0)
			fail(p, "idmap: clone the lower directory");
		struct iohs_mount_attr a = {MOUNT_ATTR_IDMAP | MOUNT_ATTR_RDONLY, 0, 0, (uint64_t)p->idmap_ns};
		if (syscall(SYS_mount_setattr, lower, "", AT_EMPTY_PATH, &a, sizeof a) < 0)
			fail(p, "idmap: map the lower directory");
		snprintf(lowerdir, sizeof lowerdir, "/proc/self/fd/%d", lower);
	}
	if (b->ord == 0 && p->s->nconceal > 0) {
		char up[64];
		snprintf(up, sizeof up, "upper/%d", b->ord);
		int hi = openat(scratch, up, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		int lo = open(b->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (hi < 0 || lo < 0)
			fail(p, "conceal: open the layers");
		for (int i = 0; i < p->s->nconceal; i++)
			conceal(p, lo, hi, p->s->conceal[i]);
		close(hi);
		close(lo);
	}
	int fs = sys_fsopen("overlay");
	if (fs < 0)
		fail(p, "overlay: fsopen");
	if (sys_fsconfig(fs, FSCONFIG_SET_STRING, "lowerdir", idmap ? lowerdir : b->path) < 0 ||
	    sys_fsconfig(fs, FSCONFIG_SET_STRING, "upperdir", upper) < 0 ||
	    sys_fsconfig(fs, FSCONFIG_SET_STRING, "workdir", work) < 0)
		fail(p, "overlay: configure the layers");
	// The parent applies the upper layer to the host: no renamed
	// directories (a rename across layers fails with EXDEV and tools
	// copy instead) and no metadata-only copies. In a user namespace
	// overlayfs keeps its metadata in user.* xattrs, which turns both off.
	if (p->s->run_as) {
		if (sys_fsconfig(fs, FSCONFIG_SET_STRING, "redirect_dir", "off") < 0 ||
		    sys_fsconfig(fs, FSCONFIG_SET_STRING, "metacopy", "off") < 0)
			fail(p, "overlay: configure redirect_dir and metacopy");
	} else if (sys_fsconfig(fs, FSCONFIG_SET_FLAG, "userxattr", NULL) < 0) {
		fail(p, "overlay: userxattr");
	}
	if (sys_fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL) < 0)
		fail(p, "overlay: create over a writable directory");
	int m = sys_fsmount(fs, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
	if (m < 0)
		fail(p, "overlay: fsmount");
	close(fs);
	if (lower >= 0)
		close(lower);
	return m;
}

// hide mounts an empty read-only directory or file of the scratch tmpfs
// over b->path, if the path is there to hide in the view built so far.
static void hide(struct prep *p, int scratch, int i, const struct bind *b) {
	struct stat st;
	if (lstat(b->path, &st) < 0)
		return; // not visible: nothing to hide
	if (!S_ISDIR(st.st_mode)) {
		mount_from_scratch(p, "empty", b->path, "hide: mount an empty file");
		return;
	}
	char name[32];
	snprintf(name, sizeof name, "hide/%d", i);
	if (mkdirat(scratch, name, 0755) < 0)
		fail(p, "hide: make an empty directory");
	mount_from_scratch(p, name, b->path, "hide: mount an empty directory");
}

// setup_ns builds the private root. It runs in the new mount namespace
// either in a new user namespace (as the caller's uid, with every
// capability there), or (IOHS_RUN_AS) as the host's root, which switches
// to the run's ids later.
static void setup_ns(struct prep *p) {
	const struct iohs_spec *s = p->s;
	if (!s->run_as) {
		if (write_file("/proc/self/setgroups", "deny") < 0)
			fail(p, "userns: write setgroups");
		if (write_file("/proc/self/uid_map", p->uid_map) < 0)
			fail(p, "userns: write uid_map");
		if (write_file("/proc/self/gid_map", p->gid_map) < 0)
			fail(p, "userns: write gid_map");
	}
	// Nothing done below may propagate back to the host.
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		fail(p, "mount: make / private");
	int scratch = make_scratch(p);
	// Hold every bind source, and make every overlay, before the private
	// /tmp and /dev hide them. A source is held by an O_PATH fd and bound
	// later from /proc/self/fd: a plain bind is cheaper than a clone made
	// with open_tree, which makes and dissolves a mount namespace.
	for (int i = 0; i < p->nbinds; i++) {
		struct bind *b = &p->binds[i];
		if (b->kind == HIDE)
			continue;
		if (b->overlay) {
			b->fd = make_overlay(p, scratch, b);
			continue;
		}
		b->fd = open(b->src, O_PATH | O_CLOEXEC);
		if (b->fd < 0)
			fail(p, "mount: open a bind source");
	}
	for (int i = 0; i < NDEV; i++) { // a node the host lacks (some containers) is left out
		p->dev_fd[i] = open(dev_nodes[i], O_PATH | O_CLOEXEC);
		if (p->dev_fd[i] < 0 && errno != ENOENT)
			fail(p, "mount: open a device node");
	}
	if (mount("tmpfs", "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=65536") < 0)
		fail(p, "mount: private /dev");
	// The scratch tmpfs's root goes to SCRATCH (0700, read-only like the
	// rest): attached, it dies with the namespace like any other mount (a
	// detached one would cost the parent an RCU grace period when it lets
	// go), the fd the parent gets is opened there, and /tmp, /dev/shm and
	// the hiding places are bound from there.
	if (mkdir(SCRATCH, 0700) < 0 || sys_move_mount(scratch, "", AT_FDCWD, SCRATCH, MOVE_MOUNT_F_EMPTY_PATH) < 0)
		fail(p, "scratch: attach");
	mount_from_scratch(p, "tmp", "/tmp", "mount: private /tmp");
	if (s->flags & IOHS_F_EPHEMERAL_WD) {
		if (mkdir_p(s->workdir) < 0)
			fail(p, "mount: make the workdir in /tmp");
		if (s->run_as && chown(s->workdir, s->run_uid, s->run_gid) < 0)
			fail(p, "mount: give the workdir to the run's user");
	}
	for (int i = 0; i < NDEV; i++) {
		if (p->dev_fd[i] < 0)
			continue;
		int fd = open(dev_nodes[i], O_WRONLY | O_CREAT | O_CLOEXEC, 0666);
		if (fd < 0)
			fail(p, "mount: create a device mount point");
		close(fd);
		if (bind_fd(p->dev_fd[i], dev_nodes[i], 0) < 0)
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
	if (mkdir("/dev/shm", 0755) < 0)
		fail(p, "mount: mkdir /dev/shm");
	mount_from_scratch(p, "shm", "/dev/shm", "mount: private /dev/shm");
	if (mkdir("/dev/pts", 0755) < 0)
		fail(p, "mount: mkdir /dev/pts");
	if (mount("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620") < 0)
		fail(p, "mount: private /dev/pts");
	if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
		fail(p, "mount: private /proc");
	// The run's IPC namespace: SysV shared memory dies with the last
	// process that has it attached, so that it is always some process's
	// resident memory, which the memory cap counts; few message queues.
	// Only the namespace's root may say so: the host's root, before it
	// switches ids (in a user namespace the spawner is its caller's uid,
	// not root).
	if (s->run_as && (write_file("/proc/sys/kernel/shm_rmid_forced", "1") < 0 ||
			  write_file("/proc/sys/kernel/msgmni", "16") < 0))
		fail(p, "ipc: limit SysV shared memory and message queues");
	// Shortest path first, so that a deeper bind or hiding place wins.
	for (int i = 0; i < p->nbinds; i++) {
		struct bind *b = &p->binds[i];
		if (b->kind == HIDE) {
			hide(p, scratch, i, b);
			continue;
		}
		if (mount_source(p, b) < 0)
			fail(p, b->overlay ? "mount: mount an overlay" : "mount: bind a path");
		close(b->fd);
		b->fd = -1;
	}
	// Everything read-only and nosuid, then the writable places back,
	// shortest path first so that a deeper bind wins.
	if (set_attr("/", MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID, 0) < 0)
		fail(p, "mount: make / read-only");
	if (set_attr("/tmp", 0, MOUNT_ATTR_RDONLY) < 0 || set_attr("/dev/shm", 0, MOUNT_ATTR_RDONLY) < 0)
		fail(p, "mount: make the private /tmp writable");
	// The scratch tmpfs's own mount stays writable for the parent, which
	// must give back the permissions a command took from what it made
	// (chmod 000 d) to read the upper layers when it is not root. The
	// payload gains nothing by it: Landlock does not grant it SCRATCH,
	// and without Landlock what it could write there directly (the upper
	// layers, its own hiding places) it can write through the overlays
	// and its own view anyway.
	if (set_attr(SCRATCH, 0, MOUNT_ATTR_RDONLY) < 0)
		fail(p, "mount: keep the scratch tmpfs writable");
	for (int i = 0; i < p->nbinds; i++) {
		const struct bind *b = &p->binds[i];
		if (b->kind == HIDE)
			continue; // read-only already, and perhaps not mounted at all
		int rw = b->kind == BIND_RW;
		if (set_attr(b->path, rw ? 0 : MOUNT_ATTR_RDONLY, rw ? MOUNT_ATTR_RDONLY : 0) < 0)
			fail(p, rw ? "mount: make a writable path writable" : "mount: make a read-only path read-only");
	}
	// Landlock ignores the directory a mount hides, so the private
	// mounts made here are granted here, by their own roots.
	if (p->ruleset_fd >= 0) {
		uint64_t all = p->ll_handled;
		if (add_rule(p->ruleset_fd, "/tmp", all, all) < 0 || add_rule(p->ruleset_fd, "/dev/shm", all, all) < 0 ||
		    add_rule(p->ruleset_fd, "/dev/pts", LL_FS_READ_FILE | LL_FS_WRITE_FILE | LL_FS_IOCTL_DEV, all) < 0)
			fail(p, "landlock: add_rule for a private mount");
		for (int i = 0; i < p->nbinds; i++)
			if (p->binds[i].overlay && add_rule(p->ruleset_fd, p->binds[i].path, all, all) < 0)
				fail(p, "landlock: add_rule for an overlay");
	}
	if (lo_up() < 0)
		fail(p, "net: bring lo up");
	int root = open(SCRATCH, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root < 0)
		fail(p, "scratch: open its root");
	send_fd(p, 'T', root, "scratch: sendmsg");
	close(root);
	close(scratch);
	if (s->listen_port > 0)
		hand_listener(p);
}

// drop_caps empties the bounding and ambient sets and locks the
// securebits so that the payload, even as uid 0, execs with no
// capability. With IOHS_RUN_AS it then switches to the run's ids, which
// clears every capability: the payload is never the host's root.
static void drop_caps(struct prep *p) {
	const struct iohs_spec *s = p->s;
	for (int c = 0; c <= p->cap_last; c++)
		if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0)
			fail(p, "caps: drop the bounding set");
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
		fail(p, "caps: clear the ambient set");
	// NO_SETUID_FIXUP stays off, and locked: leaving uid 0 must clear
	// every capability.
	int bits = SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_KEEP_CAPS_LOCKED |
		   SECBIT_NO_CAP_AMBIENT_RAISE | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED;
	if (prctl(PR_SET_SECUREBITS, bits, 0, 0, 0) < 0)
		fail(p, "caps: set securebits");
	if (!s->run_as)
		return;
	// Raw system calls: libc's would signal every thread of the host,
	// with which this child shares its memory.
	if (syscall(SYS_setgroups, 0, NULL) < 0)
		fail(p, "ids: drop the supplementary groups");
	if (syscall(SYS_setresgid, s->run_gid, s->run_gid, s->run_gid) < 0)
		fail(p, "ids: setresgid");
	if (syscall(SYS_setresuid, s->run_uid, s->run_uid, s->run_uid) < 0)
		fail(p, "ids: setresuid");
	struct {
		uint32_t version;
		int pid;
	} hdr = {0x20080522, 0}; // _LINUX_CAPABILITY_VERSION_3
	struct {
		uint32_t effective, permitted, inheritable;
	} data[2];
	memset(data, 0, sizeof data);
	if (syscall(SYS_capset, &hdr, data) < 0)
		fail(p, "caps: empty every set");
	if (syscall(SYS_capget, &hdr, data) < 0)
		fail(p, "caps: capget");
	if (data[0].effective | data[0].permitted | data[1].effective | data[1].permitted) {
		errno = EPERM;
		fail(p, "caps: a capability survived the id switch");
	}
	// Changing ids reset the dumpable flag of the memory this child
	// shares with the host (put it back) and cleared the parent-death
	// signal (set it again, and check that the parent did not die
	// meanwhile).
	if ((p->dumpable == 0 || p->dumpable == 1) && prctl(PR_SET_DUMPABLE, p->dumpable, 0, 0, 0) < 0)
		fail(p, "ids: restore the dumpable flag");
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
		fail(p, "pdeathsig: after the id switch");
	struct pollfd pf = {p->parent_pidfd, POLLIN, 0};
	if (poll(&pf, 1, 0) != 0) {
		errno = ESRCH;
		fail(p, "pdeathsig: parent gone");
	}
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
// (outside every writable place) must not be creatable, the workdir must
// be, a connection to the probe's port on 127.0.0.1 is attempted (the
// host, which listens there, tells whether it arrived), and in a pid
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
	fd = open(".io-harness-probe", O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		fail(p, "probe: a write in the workdir failed");
	close(fd);
	unlink(".io-harness-probe");
	if (p->s->probe_dial > 0) {
		int sk = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (sk >= 0) {
			struct sockaddr_in a;
			memset(&a, 0, sizeof a);
			a.sin_family = AF_INET;
			a.sin_port = htons((uint16_t)p->s->probe_dial);
			a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
			connect(sk, (struct sockaddr *)&a, sizeof a); // refused or not: the host judges
			close(sk);
		}
	}
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
	// What the setup makes gets the modes it asks for; the payload gets
	// the host's umask back.
	mode_t umask_host = umask(0);
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
	umask(umask_host);
	sigset_t none;
	sigemptyset(&none);
	if (syscall(SYS_rt_sigprocmask, SIG_SETMASK, &none, NULL, 8) < 0)
		fail(p, "signals: unblock");
	exec_payload(p);
	return 127;
}

// --- parent side: preparation -------------------------------------------

// rule adds a check on system call nr: when it is made, blk runs; blk
// must end in a return.
static int rule(struct prep *p, int nr, const struct sock_filter *blk, int blen) {
	if (p->nrules >= MAX_RULES || p->nblocks + blen > MAX_FILTER)
		return -1;
	p->rules[p->nrules++] = (struct rule){(uint32_t)nr, p->nblocks, blen};
	memcpy(&p->blocks[p->nblocks], blk, (size_t)blen * sizeof *blk);
	p->nblocks += blen;
	return 0;
}

static int by_nr(const void *a, const void *b) {
	uint32_t x = ((const struct rule *)a)->nr, y = ((const struct rule *)b)->nr;
	return x < y ? -1 : x > y;
}

// tree_size is the length of emit_tree's code for rules [lo, hi).
static int tree_size(int lo, int hi) {
	if (hi - lo <= 4)
		return 2 * (hi - lo) + 1;
	int mid = (lo + hi) / 2;
	return 1 + tree_size(lo, mid) + tree_size(mid, hi);
}

// emit_tree writes at filter[n] a binary search over the system call
// number (in the accumulator) among rules [lo, hi), sorted: a match jumps
// to its block at filter[base + off], no match to filter[dflt]. A search
// tree, not a chain: the kernel evaluates the filter for every system
// call, and once per system call number when it installs it (the
// seccomp cache), so its depth is what costs. It returns the new n, or
// -1 when a jump would not fit.
static int emit_tree(struct prep *p, int n, int lo, int hi, int base, int dflt) {
	if (hi - lo <= 4) {
		for (int k = lo; k < hi; k++) {
			p->filter[n] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, p->rules[k].nr, 0, 1);
			n++;
			p->filter[n] = (struct sock_filter)BPF_STMT(BPF_JMP | BPF_JA, (uint32_t)(base + p->rules[k].off - (n + 1)));
			n++;
		}
		p->filter[n] = (struct sock_filter)BPF_STMT(BPF_JMP | BPF_JA, (uint32_t)(dflt - (n + 1)));
		return n + 1;
	}
	int mid = (lo + hi) / 2, left = tree_size(lo, mid);
	if (left > 255)
		return -1;
	p->filter[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, p->rules[mid].nr, (uint8_t)left, 0);
	if ((n = emit_tree(p, n, lo, mid, base, dflt)) < 0)
		return -1;
	return emit_tree(p, n, mid, hi, base, dflt);
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
		if (rule(p, denied[i], deny, 1) < 0)
			return -1;
	const struct sock_filter enosys[] = {RET(SECCOMP_RET_ERRNO | ENOSYS)};
	if (rule(p, SYS_clone3, enosys, 1) < 0)
		return -1;
	// No new user namespace: it would hand the payload a fresh set of
	// capabilities over a fresh mount namespace.
	const struct sock_filter no_userns[] = {
	    ARG_LO(0),
	    BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, CLONE_NEWUSER, 0, 1),
	    EPERM_RET,
	    ALLOW_RET,
	};
	if (rule(p, SYS_clone, no_userns, 4) < 0 || rule(p, SYS_unshare, no_userns, 4) < 0)
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
	if (rule(p, SYS_ioctl, ioctl_blk, 6) < 0)
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
		if (rule(p, SYS_socket, sock_blk, 4) < 0)
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
		if (rule(p, SYS_socket, sock_blk, 6) < 0)
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
	if (rule(p, SYS_socketpair, pair_blk, 5) < 0)
		return -1;
	if ((flags & IOHS_F_DENY_SETSID) && rule(p, SYS_setsid, deny, 1) < 0)
		return -1;
	// No setuid or setgid file: one the payload leaves in a writable place
	// would run, for whoever starts it later, as the payload's user. The
	// mode bits are refused wherever a mode is set: chmod and creation.
	// openat2 carries its mode in a struct the filter cannot read: ENOSYS,
	// and libc falls back to openat.
	static const struct {
		int nr, arg;
	} modes[] = {
#ifdef SYS_chmod
	    {SYS_chmod, 1},
#endif
#ifdef SYS_creat
	    {SYS_creat, 1},
#endif
#ifdef SYS_open
	    {SYS_open, 2},
#endif
#ifdef SYS_mknod
	    {SYS_mknod, 1},
#endif
	    {SYS_fchmod, 1},  {SYS_fchmodat, 2}, {SYS_fchmodat2, 2},
	    {SYS_openat, 3}, {SYS_mknodat, 2},
	};
	for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
		const struct sock_filter blk[] = {
		    ARG_LO(modes[i].arg),
		    BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, S_ISUID | S_ISGID, 0, 1),
		    EPERM_RET,
		    ALLOW_RET,
		};
		if (rule(p, modes[i].nr, blk, 4) < 0)
			return -1;
	}
	if (rule(p, SYS_openat2, enosys, 1) < 0)
		return -1;
	// The number, the search, the default (allow), the checks' code.
	qsort(p->rules, (size_t)p->nrules, sizeof p->rules[0], by_nr);
	p->filter[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr));
	int dflt = n + tree_size(0, p->nrules), base = dflt + 1;
	if (base + p->nblocks > MAX_FILTER || (n = emit_tree(p, n, 0, p->nrules, base, dflt)) != dflt)
		return -1;
	p->filter[n++] = (struct sock_filter)ALLOW_RET;
	memcpy(&p->filter[n], p->blocks, (size_t)p->nblocks * sizeof p->blocks[0]);
	n += p->nblocks;
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

// add_bind adds a path to bind or hide. Hiding places come first; a bind
// of the same path replaces one (a path bound explicitly is shown), and a
// hiding place that does not exist is nothing to hide.
static int add_bind_from(struct prep *p, const char *src, const char *path, int kind, int ord) {
	struct stat st;
	if (stat(src, &st) < 0)
		return kind == HIDE && errno == ENOENT ? 0 : -1;
	struct bind *b = NULL;
	for (int i = 0; i < p->nbinds && !b; i++)
		if (p->binds[i].kind == HIDE && strcmp(p->binds[i].path, path) == 0)
			b = &p->binds[i];
	if (b && kind == HIDE)
		return 0;
	if (!b) {
		if (p->nbinds >= MAX_BINDS) {
			errno = E2BIG;
			return -1;
		}
		b = &p->binds[p->nbinds++];
	}
	*b = (struct bind){path, src, kind, S_ISDIR(st.st_mode), 0, ord, -1};
	b->overlay = kind == BIND_RW && b->is_dir && (p->s->flags & IOHS_F_OVERLAY);
	return 0;
}

static int add_bind(struct prep *p, const char *path, int kind, int ord) {
	return add_bind_from(p, path, path, kind, ord);
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

// idmap_child is the process that holds the user namespace of an
// idmapped mount while its maps are written: it closes its copy of the
// pipe's write end, waits for the parent's to close, and exits. It
// shares the parent's memory, so it makes raw system calls only.
static int idmap_child(void *arg) {
	(void)arg;
	// Every signal is blocked: it sleeps until its parent's SIGKILL. It
	// waits on no fd, since a sibling spawn on another thread may have
	// cloned this one's fds into its own child and hold them open.
	for (;;)
		syscall(SYS_pause);
	return 0;
}

// idmap_userns returns a user namespace whose maps say the caller's ids
// (the host's root's: IOHS_RUN_AS) are the run's, for the idmapped
// lower layers, or -1 with *stage set.
static int idmap_userns(struct prep *p, const char **stage) {
	void *stack = mmap(NULL, 64 * 1024, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	if (stack == MAP_FAILED) {
		*stage = "idmap: allocate a stack";
		return -1;
	}
	sigset_t all, old;
	sigfillset(&all);
	syscall(SYS_rt_sigprocmask, SIG_SETMASK, &all, &old, 8);
	int pid = clone(idmap_child, (char *)stack + 64 * 1024, CLONE_NEWUSER | CLONE_VM, NULL);
	int saved = errno;
	syscall(SYS_rt_sigprocmask, SIG_SETMASK, &old, NULL, 8);
	int fd = -1;
	if (pid < 0) {
		*stage = "idmap: clone a user namespace";
	} else {
		char path[64], map[64];
		snprintf(map, sizeof map, "%u %u 1\n", (unsigned)geteuid(), p->s->run_uid);
		snprintf(path, sizeof path, "/proc/%d/uid_map", pid);
		if (write_file(path, map) < 0) {
			*stage = "idmap: write uid_map";
		} else {
			snprintf(map, sizeof map, "%u %u 1\n", (unsigned)getegid(), p->s->run_gid);
			snprintf(path, sizeof path, "/proc/%d/gid_map", pid);
			if (write_file(path, map) < 0) {
				*stage = "idmap: write gid_map";
			} else {
				snprintf(path, sizeof path, "/proc/%d/ns/user", pid);
				if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
					*stage = "idmap: open the user namespace";
			}
		}
		saved = errno;
	}
	if (pid > 0) {
		kill(pid, SIGKILL);
		while (waitpid(pid, NULL, __WALL) < 0 && errno == EINTR)
			;
	}
	munmap(stack, 64 * 1024);
	errno = saved;
	return fd;
}

// prepare fills p; on failure it returns -1 with *stage set and errno.
static int prepare(struct prep *p, const char **stage) {
	const struct iohs_spec *s = p->s;
	p->ruleset_fd = -1;
	p->idmap_ns = -1;
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
	if (s->run_as && uid != 0) {
		*stage = "spec: running as other ids needs root";
		errno = EPERM;
		return -1;
	}
	if (s->run_as && (s->run_uid == 0 || s->run_gid == 0)) {
		*stage = "spec: the run's ids must not be root's";
		errno = EINVAL;
		return -1;
	}
	snprintf(p->uid_map, sizeof p->uid_map, "%u %u 1\n", uid, uid);
	snprintf(p->gid_map, sizeof p->gid_map, "%u %u 1\n", gid, gid);
	if (s->flags & IOHS_F_NS) {
		*stage = "prepare: stat a bind source";
		for (int i = 0; i < s->nhide; i++)
			if (add_bind(p, s->hide[i], HIDE, -1) < 0)
				return -1;
		int ord = 0;
		if (!(s->flags & IOHS_F_EPHEMERAL_WD) && add_bind(p, s->workdir, BIND_RW, ord++) < 0)
			return -1;
		for (int i = 0; i < s->nrw; i++)
			if (add_bind(p, s->rw[i], BIND_RW, ord++) < 0)
				return -1;
		for (int i = 0; i < s->nro; i++)
			if (add_bind(p, s->ro[i], BIND_RO, -1) < 0)
				return -1;
		for (int i = 0; i < s->nro_at; i++) {
			const char *src = s->ro_at[i], *dst = src + strlen(src) + 1;
			if (add_bind_from(p, src, dst, BIND_RO, -1) < 0)
				return -1;
		}
		qsort(p->binds, (size_t)p->nbinds, sizeof p->binds[0], by_length);
		if (s->run_as && (s->flags & IOHS_F_IDMAP) && (p->idmap_ns = idmap_userns(p, stage)) < 0)
			return -1;
	}
	// Capabilities: the payload of a new user namespace, and root's
	// payload without one, would otherwise exec with a full set.
	p->drop_caps = (s->flags & IOHS_F_NS) || uid == 0;
	p->dumpable = prctl(PR_GET_DUMPABLE, 0, 0, 0, 0);
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
	if ((s->flags & IOHS_F_NS) && socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, p->sock) < 0) {
		*stage = "prepare: socketpair for the fd hand-over";
		return -1;
	}
	return 0;
}

static void release(struct prep *p) {
	if (p->ruleset_fd >= 0)
		close(p->ruleset_fd);
	if (p->idmap_ns >= 0)
		close(p->idmap_ns);
	if (p->parent_pidfd >= 0)
		close(p->parent_pidfd);
	if (p->sock[0] >= 0)
		close(p->sock[0]);
	if (p->sock[1] >= 0)
		close(p->sock[1]);
}

// recv_fds takes the fds the child sent, each in a message whose byte
// says what it is: 'T' the scratch tmpfs, 'L' the listener. It closes
// anything else.
static void recv_fds(int sock, int *scratch, int *listener) {
	for (;;) {
		char cbuf[CMSG_SPACE(sizeof(int))];
		char tag;
		struct iovec iov = {&tag, 1};
		struct msghdr m;
		memset(&m, 0, sizeof m);
		m.msg_iov = &iov;
		m.msg_iovlen = 1;
		m.msg_control = cbuf;
		m.msg_controllen = sizeof cbuf;
		ssize_t n = recvmsg(sock, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return;
		struct cmsghdr *c = CMSG_FIRSTHDR(&m);
		if (!c || c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		int fd;
		memcpy(&fd, CMSG_DATA(c), sizeof fd);
		int *slot = tag == 'T' ? scratch : tag == 'L' ? listener : NULL;
		if (slot && *slot < 0)
			*slot = fd;
		else
			close(fd);
	}
}

int iohs_spawn(const struct iohs_spec *s, struct iohs_result *r) {
	memset(r, 0, sizeof *r);
	r->pid = r->pidfd = r->listener = r->scratch = -1;
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
	if (s->flags & IOHS_F_NS) {
		flags |= CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS;
		if (!s->run_as)
			flags |= CLONE_NEWUSER;
	}
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
	int scratch = -1, listener = -1;
	if (pid >= 0 && p->sock[0] >= 0)
		recv_fds(p->sock[0], &scratch, &listener);
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
	} else if (((s->flags & IOHS_F_NS) && scratch < 0) || (s->listen_port > 0 && listener < 0)) {
		r->stage = (s->flags & IOHS_F_NS) && scratch < 0 ? "scratch: recvmsg" : "listener: recvmsg";
		r->err = EPROTO;
		syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
		int st;
		while (waitpid(pid, &st, __WALL) < 0 && errno == EINTR)
			;
		close(pidfd);
		rc = -1;
	} else {
		r->pid = pid;
		r->pidfd = pidfd;
		r->scratch = scratch;
		r->listener = listener;
		scratch = listener = -1;
	}
	if (scratch >= 0)
		close(scratch);
	if (listener >= 0)
		close(listener);
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
		case IOHS_HIDE: {
			char ***list = tag == IOHS_ARG ? &s->argv : tag == IOHS_ENV ? &s->envp : tag == IOHS_RO ? &s->ro
				     : tag == IOHS_RW ? &s->rw : &s->hide;
			int *count = tag == IOHS_ARG ? &s->argc : tag == IOHS_ENV ? &s->envc : tag == IOHS_RO ? &s->nro
				   : tag == IOHS_RW ? &s->nrw : &s->nhide;
			if (!(str = dup_bytes(v, len)))
				goto nomem;
			if (push(list, count, str) < 0) {
				free(str);
				goto nomem;
			}
			break;
		}
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
		case IOHS_PROBE_DIAL: {
			uint32_t port;
			if (len != 4)
				return -1;
			memcpy(&port, v, 4);
			if (port > 65535)
				return -1;
			s->probe_dial = (int)port;
			break;
		}
		case IOHS_RO_AT:
		case IOHS_CONCEAL: {
			// A pair is two paths, each NUL-terminated in the value.
			if (tag == IOHS_RO_AT && (len < 3 || v[len - 1] != 0 || !memchr(v, 0, len - 1) ||
						  memchr(v, 0, len - 1) == (const void *)v))
				return -1;
			if (!(str = malloc(len + 1)))
				goto nomem;
			memcpy(str, v, len);
			str[len] = 0;
			if (push(tag == IOHS_RO_AT ? &s->ro_at : &s->conceal, tag == IOHS_RO_AT ? &s->nro_at : &s->nconceal, str) < 0) {
				free(str);
				goto nomem;
			}
			break;
		}
		case IOHS_RUN_AS:
			if (len != 8)
				return -1;
			memcpy(&s->run_uid, v, 4);
			memcpy(&s->run_gid, v + 4, 4);
			s->run_as = 1;
			break;
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
	free_list(s->hide, s->nhide);
	free_list(s->ro_at, s->nro_at);
	free_list(s->conceal, s->nconceal);
	free(s->workdir);
	free(s->probe_path);
	memset(s, 0, sizeof *s);
}

int iohs_spawn_wire(const uint8_t *buf, size_t n, int in, int out, int err, struct iohs_result *r) {
	struct iohs_spec s;
	memset(r, 0, sizeof *r);
	r->pid = r->pidfd = r->listener = r->scratch = -1;
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
	int32_t kind; // 'S' started (fds attached), 'E' setup error, 'X' exited
	int32_t pid;
	int32_t err;
	int32_t status; // the wait status, for 'X'
	int32_t fds;    // for 'S', the fds attached, in this order: 1 the pidfd, 2 the scratch tmpfs, 4 the listener
	int32_t pad;
	int64_t utime_us, stime_us;
	char stage[96];
};

static void send_msg(const struct iohs_msg *m, const int *fds, int nfds) {
	char cbuf[CMSG_SPACE(3 * sizeof(int))];
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
	// Whatever the host left open without close-on-exec is not ours.
	syscall(SYS_close_range, 5, ~0u, 0);
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
	int fds[3], nfds = 0;
	fds[nfds++] = res.pidfd;
	m.fds = 1;
	if (res.scratch >= 0) {
		fds[nfds++] = res.scratch;
		m.fds |= 2;
	}
	if (res.listener >= 0) {
		fds[nfds++] = res.listener;
		m.fds |= 4;
	}
	send_msg(&m, fds, nfds);
	if (res.scratch >= 0)
		close(res.scratch);
	if (res.listener >= 0)
		close(res.listener);
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
