/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The workloads' own pid namespace. As PID 1 of the sandbox the agent runs
 * every workload one pid namespace further down, so that no workload can
 * name the agent: not by pid (kill, prlimit, sched_*, setpriority,
 * pidfd_open, ptrace all look pids up in the caller's namespace), not by uid
 * (setpriority/ioprio PRIO_USER and kill(-1) skip processes the caller
 * cannot see), not through /proc.
 *
 *   agent (PID 1 of the sandbox, level 1)
 *     ├─ reaper (PID 1 of the workloads' namespace, level 2)
 *     └─ workloads (level 2; the agent's children, so it waits for them)
 *
 * The agent unshares CLONE_NEWPID (only its children move) and forks the
 * reaper first: the namespace's init, which mounts the namespace's own
 * procfs over /proc (with hidepid=2, the usual masks and read-only paths)
 * and then only reaps orphans. The agent keeps a descriptor of the procfs it
 * started with for its own use (procs.c). Workloads see their parent as pid
 * 0 (it is outside their namespace, as with `docker exec`), orphans are
 * adopted by the reaper, and /proc/1 - the reaper, which keeps every
 * capability - is hidden from them by hidepid: a workload without
 * capabilities fails the kernel's ptrace-read check against it.
 *
 * The agent starts the reaper and serves at once; the first exec waits for
 * the reaper's report (its /proc mounted) before a workload forks. When the
 * reaper dies (an OOM kill), the kernel kills every workload with it and no
 * process can enter that namespace again; the next exec makes a new one
 * (pidns_ensure) and a new procfs replaces the old one on /proc.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent.h"

#ifndef PR_CAPBSET_DROP
#define PR_CAPBSET_DROP 24
#endif
#ifndef CLONE_NEWPID
#define CLONE_NEWPID 0x20000000
#endif
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
#ifndef SYS_close_range
#define SYS_close_range 436
#endif
#ifndef SYS_mount_setattr
#define SYS_mount_setattr 442
#endif
#ifndef AT_EMPTY_PATH
#define AT_EMPTY_PATH 0x1000
#endif
#ifndef AT_RECURSIVE
#define AT_RECURSIVE 0x8000
#endif
#ifndef MNT_DETACH
#define MNT_DETACH 2
#endif

/* linux/mount.h, spelt out where the libc headers lack it: the agent builds
 * against musl (a sanitized agent against glibc, which has most of them). */
#ifndef FSOPEN_CLOEXEC
#define FSOPEN_CLOEXEC 0x1u
#endif
#ifndef FSCONFIG_SET_FLAG
#define FSCONFIG_SET_FLAG 0u
#endif
#ifndef FSCONFIG_SET_STRING
#define FSCONFIG_SET_STRING 1u
#endif
#ifndef FSCONFIG_CMD_CREATE
#define FSCONFIG_CMD_CREATE 6u
#endif
#ifndef FSMOUNT_CLOEXEC
#define FSMOUNT_CLOEXEC 0x1u
#endif
#ifndef MOUNT_ATTR_RDONLY
#define MOUNT_ATTR_RDONLY 0x1u
#endif
#ifndef MOUNT_ATTR_NOSUID
#define MOUNT_ATTR_NOSUID 0x2u
#endif
#ifndef MOUNT_ATTR_NODEV
#define MOUNT_ATTR_NODEV 0x4u
#endif
#ifndef MOUNT_ATTR_NOEXEC
#define MOUNT_ATTR_NOEXEC 0x8u
#endif
#ifndef MOVE_MOUNT_F_EMPTY_PATH
#define MOVE_MOUNT_F_EMPTY_PATH 0x4u
#endif
#ifndef MOVE_MOUNT_T_EMPTY_PATH
#define MOVE_MOUNT_T_EMPTY_PATH 0x40u
#endif
#ifndef OPEN_TREE_CLONE
#define OPEN_TREE_CLONE 0x1u
#endif

struct mount_attr_v0 {
	uint64_t attr_set, attr_clr, propagation, userns_fd;
};

/* How long the agent waits for a new reaper to report. */
#define REAPER_READY_MS 5000

/* The same masks as the sandbox's first /proc (src/backends/ns/boundary/
 * rootfs.c, proc_masked and proc_readonly): keep the lists in step. */
static const char *const masked[] = {
	"acpi",	      "asound",	     "kcore",	    "keys", "latency_stats",
	"timer_list", "timer_stats", "sched_debug", "scsi", NULL,
};
static const char *const readonly[] = {
	"bus", "fs", "irq", "sys", "sysrq-trigger", NULL,
};

/* ---- in the reaper --------------------------------------------------------- */

struct why {
	char text[200];
};

static int fail(struct why *w, int err, const char *what, const char *arg)
{
	snprintf(w->text, sizeof(w->text), "%s%s%s: %s", what, arg ? " " : "", arg ? arg : "",
		 strerror(err));
	return -err;
}

static void close_fd(int *fd)
{
	if (*fd >= 0) {
		close(*fd);
		*fd = -1;
	}
}

/* A fresh filesystem of `type` with options, mounted on target (an O_PATH
 * fd); *root_out (optional) gets the mount's root. */
static int new_mount(const char *type, const char *const *opts, unsigned attrs, int target,
		     int *root_out, struct why *w)
{
	int fs = (int)syscall(SYS_fsopen, type, FSOPEN_CLOEXEC);
	if (fs < 0)
		return fail(w, errno, "fsopen", type);
	for (size_t i = 0; opts && opts[i]; i += 2) {
		if (syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, opts[i], opts[i + 1], 0) < 0) {
			int e = errno;
			close(fs);
			return fail(w, e, "fsconfig", opts[i]);
		}
	}
	if (syscall(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0) {
		int e = errno;
		close(fs);
		return fail(w, e, "create", type);
	}
	int mnt = (int)syscall(SYS_fsmount, fs, FSMOUNT_CLOEXEC, attrs);
	int e = errno;
	close(fs);
	if (mnt < 0)
		return fail(w, e, "fsmount", type);
	if (syscall(SYS_move_mount, mnt, "", target, "",
		    MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0) {
		e = errno;
		close(mnt);
		return fail(w, e, "attach", type);
	}
	if (root_out)
		*root_out = mnt;
	else
		close(mnt);
	return 0;
}

/* A copy of src (dirfd + path, or the fd itself) with attrs set, onto target. */
static int bind_onto(int src_dirfd, const char *src, unsigned attrs, int target, struct why *w)
{
	unsigned flags = OPEN_TREE_CLONE | O_CLOEXEC | AT_RECURSIVE | (src[0] ? 0 : AT_EMPTY_PATH);
	int tree = (int)syscall(SYS_open_tree, src_dirfd, src, flags);
	if (tree < 0)
		return fail(w, errno, "clone mount", src[0] ? src : "(fd)");
	struct mount_attr_v0 attr = {.attr_set = attrs};
	if (syscall(SYS_mount_setattr, tree, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr,
		    sizeof(attr)) < 0 ||
	    syscall(SYS_move_mount, tree, "", target, "",
		    MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0) {
		int e = errno;
		close(tree);
		return fail(w, e, "bind", src[0] ? src : "(fd)");
	}
	close(tree);
	return 0;
}

static int mask(int proc, const char *name, struct why *w)
{
	int t = openat(proc, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (t < 0)
		return errno == ENOENT ? 0 : fail(w, errno, "mask", name);
	struct stat st;
	int r;
	if (fstat(t, &st) < 0) {
		r = fail(w, errno, "mask", name);
	} else if (S_ISDIR(st.st_mode)) {
		static const char *const opts[] = {"size", "4k",   "nr_inodes", "1",
						   "mode", "0555", NULL};
		r = new_mount("tmpfs", opts,
			      MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
				      MOUNT_ATTR_NOEXEC,
			      t, NULL, w);
	} else {
		r = bind_onto(AT_FDCWD, "/dev/null",
			      MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC, t, w);
	}
	close(t);
	return r;
}

static int make_readonly(int proc, const char *name, struct why *w)
{
	int t = openat(proc, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (t < 0)
		return errno == ENOENT ? 0 : fail(w, errno, "read-only", name);
	int r = bind_onto(
		t, "", MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC,
		t, w);
	close(t);
	return r;
}

/* The namespace's procfs on /proc. Runs in the new namespace (a procfs
 * shows the pid namespace of the process that creates it). A previous
 * reaper's procfs (`replace`: it is on top of /proc) goes first. On failure
 * nothing of ours stays mounted. */
static int mount_proc(bool replace, struct why *w)
{
	if (replace && umount2("/proc", MNT_DETACH) < 0)
		return fail(w, errno, "unmount the previous", "/proc");
	int target = open("/proc", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (target < 0)
		return fail(w, errno, "open", "/proc");
	/* hidepid=2: a process is listed only to those that pass the kernel's
	 * ptrace-read check on it, or that are in the mount's `gid` - by
	 * default gid 0 of the initial namespace, which an unprivileged
	 * caller's supplementary groups (or a test as root) may hold. -1 is no
	 * group at all. */
	static const char *const opts[] = {"hidepid", "2", "gid", "4294967295", NULL};
	int proc = -1;
	int r = new_mount("proc", opts, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC,
			  target, &proc, w);
	close(target);
	for (size_t i = 0; r == 0 && masked[i]; i++)
		r = mask(proc, masked[i], w);
	for (size_t i = 0; r == 0 && readonly[i]; i++)
		r = make_readonly(proc, readonly[i], w);
	if (r < 0 && proc >= 0)
		umount2("/proc", MNT_DETACH);
	close_fd(&proc);
	return r;
}

static void report(int fd, const char *line)
{
	size_t len = strlen(line);
	while (len > 0) {
		ssize_t n = write(fd, line, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		line += n;
		len -= (size_t)n;
	}
}

static _Noreturn void reaper_run(int ready, bool replace)
{
	struct sigaction dfl;
	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	for (int sig = 1; sig <= 64; sig++)
		sigaction(sig, &dfl, NULL);
	/* Only SIGCHLD, blocked and waited for. Everything else keeps its
	 * default, which the kernel drops for a namespace's init when a
	 * process of the namespace sends it. */
	sigset_t chld;
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_SETMASK, &chld, NULL);

	struct why w = {{0}};
	int r = mount_proc(replace, &w);
	char line[256];
	snprintf(line, sizeof(line), r == 0 ? "ok\n" : "error: %s\n", w.text);
	report(ready, line);
	if (r < 0)
		_exit(1);
	/* Nothing of the agent's: no socket, no connection, no pipe. */
	syscall(SYS_close_range, 3u, ~0u, 0u);
	for (;;) {
		while (waitpid(-1, NULL, WNOHANG) > 0)
			;
		siginfo_t si;
		sigwaitinfo(&chld, &si);
	}
}

/* ---- in the agent ---------------------------------------------------------- */

/* Is a procfs other than the agent's own on top of /proc (a previous
 * reaper's)? Each procfs instance has a device of its own. */
static bool proc_is_covered(const struct agent *a)
{
	struct stat mine, top;
	return fstat(a->proc_fd, &mine) == 0 && stat("/proc", &top) == 0 &&
	       mine.st_dev != top.st_dev;
}

/* /proc as the agent found it is its own pid namespace's: "self" is "1". */
static bool proc_is_ours(const struct agent *a)
{
	char buf[16];
	ssize_t n = readlinkat(a->proc_fd, "self", buf, sizeof(buf) - 1);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	return strcmp(buf, "1") == 0;
}

static int wait_ready(int fd, char *why, size_t size)
{
	char buf[256];
	size_t got = 0;
	int64_t deadline = agent_now_ns() + (int64_t)REAPER_READY_MS * 1000000;
	while (got < sizeof(buf) - 1 && !memchr(buf, '\n', got)) {
		int64_t left = (deadline - agent_now_ns()) / 1000000;
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (left <= 0) {
			snprintf(why, size, "the workloads' reaper did not report within %d ms",
				 REAPER_READY_MS);
			return -ETIMEDOUT;
		}
		int n = poll(&p, 1, (int)left);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			break;
		if (n == 0)
			continue;
		ssize_t r = read(fd, buf + got, sizeof(buf) - 1 - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	buf[got] = '\0';
	char *nl = strchr(buf, '\n');
	if (nl)
		*nl = '\0';
	if (strcmp(buf, "ok") == 0)
		return 0;
	snprintf(why, size, "the workloads' pid namespace: %.200s",
		 strncmp(buf, "error: ", 7) == 0 ? buf + 7 : "the reaper exited without a word");
	return -EIO;
}

static int start_reaper(struct agent *a, char *why, size_t size)
{
	/* Children from here on go into a new namespace. unshare() makes one
	 * only while the children's namespace is still the agent's own, and a
	 * namespace whose init died takes no new process: so the agent first
	 * points its children back at its own namespace (always allowed). */
	if (setns(a->pidns_fd, CLONE_NEWPID) < 0) {
		snprintf(why, size, "setns(own pid namespace): %s", strerror(errno));
		return -errno;
	}
	if (unshare(CLONE_NEWPID) < 0) {
		snprintf(why, size, "unshare(CLONE_NEWPID): %s", strerror(errno));
		return -errno;
	}
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0) {
		snprintf(why, size, "pipe: %s", strerror(errno));
		return -errno;
	}
	pid_t pid = fork();
	if (pid < 0) {
		int e = errno;
		close(p[0]);
		close(p[1]);
		snprintf(why, size, "fork the workloads' reaper: %s", strerror(e));
		return -e;
	}
	if (pid == 0) {
		close(p[0]);
		reaper_run(p[1], proc_is_covered(a));
	}
	close(p[1]);
	/* Its report is read by the first exec that needs it (reaper_check):
	 * the reaper mounts its /proc while the agent already serves. */
	a->reaper = pid;
	a->reaper_ready = p[0];
	return 0;
}

#define CAP_MKNOD_BIT 27
#define CAP_SYS_ADMIN_BIT 21
#define CAP_VERSION_3 0x20080522u

struct cap_header {
	uint32_t version;
	int pid;
};
struct cap_data {
	uint32_t effective, permitted, inheritable;
};

/* CAP_SYS_ADMIN and CAP_MKNOD out of every set of the agent's, the
 * bounding set too (with CAP_SETPCAP, which the agent keeps for its
 * workloads' bounding sets). */
static int drop_admin(struct agent *a)
{
	struct cap_header hdr = {CAP_VERSION_3, 0};
	struct cap_data d[2];
	memset(d, 0, sizeof(d));
	if (syscall(SYS_capget, &hdr, d) < 0) {
		int e = errno;
		snprintf(a->nest_error, sizeof(a->nest_error), "capget: %s", strerror(e));
		return -e;
	}
	uint32_t bits = (1u << CAP_SYS_ADMIN_BIT) | (1u << CAP_MKNOD_BIT);
	d[0].effective &= ~bits;
	d[0].permitted &= ~bits;
	d[0].inheritable &= ~bits;
	if (prctl(PR_CAPBSET_DROP, CAP_SYS_ADMIN_BIT, 0, 0, 0) < 0 ||
	    prctl(PR_CAPBSET_DROP, CAP_MKNOD_BIT, 0, 0, 0) < 0 ||
	    syscall(SYS_capset, &hdr, d) < 0) {
		int e = errno;
		snprintf(a->nest_error, sizeof(a->nest_error), "drop CAP_SYS_ADMIN, CAP_MKNOD: %s",
			 strerror(e));
		return -e;
	}
	a->cap_bset &= ~((1ull << CAP_SYS_ADMIN_BIT) | (1ull << CAP_MKNOD_BIT));
	return 0;
}

/* The bundle's /dev is read-only (nothing can hide there), and this gVisor
 * refuses every open for writing on a read-only mount, device nodes
 * included (EROFS): `> /dev/null` would fail. A bind mount takes its
 * source's flags, and gVisor has no remount, so each node is made afresh
 * (mknod, the same device) in a writable tmpfs staged on /proc/1 - about
 * to be covered anyway - and bound over its namesake: the nodes take
 * writes, /dev still takes no new name. Then the staging goes. */
static int writable_dev_nodes(struct agent *a)
{
	static const char *const nodes[] = {"null",    "zero", "full", "random",
					    "urandom", "tty",  NULL};
	if (mount("msb-dev", "/proc/1", "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0700") < 0) {
		int e = errno;
		snprintf(a->nest_error, sizeof(a->nest_error), "stage /dev nodes: %s", strerror(e));
		return -e;
	}
	int r = 0;
	for (size_t i = 0; r == 0 && nodes[i]; i++) {
		char dev[32], staged[32];
		snprintf(dev, sizeof(dev), "/dev/%s", nodes[i]);
		snprintf(staged, sizeof(staged), "/proc/1/%s", nodes[i]);
		struct stat st;
		if (lstat(dev, &st) < 0 || !S_ISCHR(st.st_mode))
			continue; /* absent stays absent */
		if (mknod(staged, S_IFCHR | 0666, st.st_rdev) < 0 || chmod(staged, 0666) < 0 ||
		    mount(staged, dev, NULL, MS_BIND, NULL) < 0) {
			r = -errno;
			snprintf(a->nest_error, sizeof(a->nest_error), "writable %s: %s", dev,
				 strerror(errno));
		}
	}
	if (umount2("/proc/1", MNT_DETACH) < 0 && r == 0) {
		r = -errno;
		snprintf(a->nest_error, sizeof(a->nest_error), "unstage /dev nodes: %s",
			 strerror(errno));
	}
	return r;
}

/* The reaper started by start_reaper reported ready, or failed (then it is
 * killed and reaped, and why says what went wrong). */
static int reaper_check(struct agent *a, char *why, size_t size)
{
	if (a->reaper_ready < 0)
		return 0;
	int r = wait_ready(a->reaper_ready, why, size);
	close(a->reaper_ready);
	a->reaper_ready = -1;
	if (r < 0 && a->reaper > 0) {
		kill(a->reaper, SIGKILL);
		while (waitpid(a->reaper, NULL, 0) < 0 && errno == EINTR)
			;
		a->reaper = 0;
	}
	return r;
}

/* --no-nest: gVisor's procfs serves a process's environ, maps, smaps and
 * auxv to anyone (mode 0444, no ptrace check) and its oom_score_adj to
 * its uid, which workloads share. So the agent covers its own /proc/1
 * with an empty, read-only tmpfs of mode 0 owned by a uid no workload
 * has: a workload (no capability, the workload filter refusing umount)
 * can neither look beneath it nor chmod it, and finds nothing in it.
 * Then the agent gives up CAP_SYS_ADMIN and CAP_MKNOD, which it held for
 * this and for writable_dev_nodes only - and for sethostname when a pooled
 * sandbox is claimed (identity.c): so they go when the host names the
 * sandbox or before the first child (a workload, a file request) forks,
 * whichever comes first; until then nothing but the agent runs in the
 * sandbox and only the host speaks to it. The agent itself reads /proc only
 * through its own processes' entries (procs.c); its own stat going
 * unreadable only leaves it out of listings, where it never counted. */
static int cover_own_proc(struct agent *a)
{
	if (!proc_is_ours(a)) {
		snprintf(a->nest_error, sizeof(a->nest_error),
			 "/proc is not this pid namespace's: the agent cannot be hidden from "
			 "workloads");
		return -EPERM;
	}
	int r = writable_dev_nodes(a);
	if (r < 0)
		return r;
	if (mount("msb-pid1", "/proc/1", "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
		  "mode=0,uid=65534,gid=65534") < 0) {
		int e = errno;
		snprintf(a->nest_error, sizeof(a->nest_error), "cover /proc/1: %s", strerror(e));
		return -e;
	}
	a->admin_held = true;
	return 0;
}

int pidns_drop_admin(struct agent *a)
{
	if (!a->admin_held)
		return 0;
	int r = drop_admin(a);
	if (r == 0)
		a->admin_held = false;
	return r;
}

/* The first reaper, not waited for. */
static int pidns_start(struct agent *a)
{
	int r = start_reaper(a, a->nest_error, sizeof(a->nest_error));
	if (r < 0)
		agent_log("%s", a->nest_error);
	return r;
}

int pidns_init(struct agent *a)
{
	a->reaper = 0;
	a->reaper_ready = -1;
	a->pidns_fd = -1;
	if (!a->is_init)
		return 0; /* an ordinary process (tests): workloads are its children */
	/* --no-nest (oci under gVisor, whose sentry lets no init make a pid
	 * namespace without CAP_SYS_ADMIN, which it refuses to run with): the
	 * workloads share PID 1's namespace. The workload filter still refuses
	 * every signal, pidfd and ptrace aimed at pid 1, and cover_own_proc
	 * hides PID 1's own /proc entries (docs/security.md, the oci section). */
	if (a->no_nest) {
		/* Not dumpable: PID 1's mem, cwd, root and exe then want
		 * CAP_SYS_PTRACE, which no workload has (a workload's execve
		 * makes it dumpable again; only the agent stays so). */
		if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0) {
			snprintf(a->nest_error, sizeof(a->nest_error), "PR_SET_DUMPABLE: %s",
				 strerror(errno));
			return -errno;
		}
		return cover_own_proc(a);
	}
	a->nested = true;
	if (!proc_is_ours(a)) {
		snprintf(a->nest_error, sizeof(a->nest_error),
			 "/proc is not this pid namespace's: the agent cannot be hidden from "
			 "workloads");
		return -EPERM;
	}
	a->pidns_fd = openat(a->proc_fd, "self/ns/pid", O_RDONLY | O_CLOEXEC);
	if (a->pidns_fd < 0) {
		snprintf(a->nest_error, sizeof(a->nest_error), "open /proc/self/ns/pid: %s",
			 strerror(errno));
		return -errno;
	}
	/* Started, not waited for: the first exec checks its report. */
	return pidns_start(a);
}

int pidns_ensure(struct agent *a)
{
	int r = pidns_drop_admin(a);
	if (r < 0) {
		agent_log("%s", a->nest_error);
		return r;
	}
	if (!a->nested)
		return 0;
	if (a->pidns_fd < 0)
		return -EPERM; /* pidns_init said why */
	r = reaper_check(a, a->nest_error, sizeof(a->nest_error));
	if (r < 0) {
		agent_log("%s", a->nest_error);
		return r;
	}
	if (a->reaper > 0) {
		/* Reaped here, not by the main loop, if it died since. */
		int st;
		if (waitpid(a->reaper, &st, WNOHANG) == 0)
			return 0;
		pidns_reaped(a, a->reaper);
	}
	r = start_reaper(a, a->nest_error, sizeof(a->nest_error));
	if (r == 0)
		r = reaper_check(a, a->nest_error, sizeof(a->nest_error));
	if (r < 0)
		agent_log("%s", a->nest_error);
	return r;
}

bool pidns_reaped(struct agent *a, pid_t pid)
{
	if (pid <= 0 || pid != a->reaper)
		return false;
	agent_log("the workloads' reaper (pid %d) died: their pid namespace is gone", (int)pid);
	a->reaper = 0;
	if (a->reaper_ready >= 0) {
		close(a->reaper_ready);
		a->reaper_ready = -1;
	}
	return true;
}
