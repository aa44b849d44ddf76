/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The `ns` type's doctor (`msb doctor`): probe what this host offers the
 * boundary, by trying each facility (never by comparing kernel versions),
 * and give the `ns` verdict. Namespace probes run in short-lived forked children whose
 * namespaces and mounts die with them; the full `sandbox.host` probe is a
 * real msb_ns__spawn() (with /bin/sleep standing in for the agent) made
 * from a forked, hence single-threaded, child.
 */
#include <fcntl.h>
#include <linux/landlock.h>
#include <linux/mount.h>
#include <linux/openat2.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>

#include "backends/ns/boundary/boundary_int.h"
#include "util/fs.h"
#include "util/syscalls.h"

#define PROBE_TIMEOUT_MS 10000

static void add(msb_ns_probe **arr, size_t *n, size_t *cap, bool *oom, const char *name, bool ok,
		const char *fmt, va_list ap) __attribute__((format(printf, 7, 0)));
static void add(msb_ns_probe **arr, size_t *n, size_t *cap, bool *oom, const char *name, bool ok,
		const char *fmt, va_list ap)
{
	if (*oom)
		return;
	if (*n == *cap) {
		size_t nc = *cap ? *cap * 2 : 16;
		msb_ns_probe *na = msb__reallocarray(*arr, nc, sizeof(*na));
		if (!na) {
			*oom = true;
			return;
		}
		*arr = na;
		*cap = nc;
	}
	char *reason = msb__vasprintf(fmt, ap);
	char *nm = strdup(name);
	if (!reason || !nm) {
		free(reason);
		free(nm);
		*oom = true;
		return;
	}
	(*arr)[*n] = (msb_ns_probe){nm, ok, reason};
	(*n)++;
}

struct doc {
	msb_ns_doctor *d;
	size_t pcap;
	bool oom;
};

static void probe(struct doc *dc, const char *name, bool ok, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void probe(struct doc *dc, const char *name, bool ok, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	add(&dc->d->probes, &dc->d->n_probes, &dc->pcap, &dc->oom, name, ok, fmt, ap);
	va_end(ap);
}

static void verdict(struct doc *dc, bool ok, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void verdict(struct doc *dc, bool ok, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	dc->d->ok = ok;
	if (!(dc->d->reason = msb__vasprintf(fmt, ap)))
		dc->oom = true;
	va_end(ap);
}

static const msb_ns_probe *find(const struct doc *dc, const char *name)
{
	for (size_t i = 0; i < dc->d->n_probes; i++)
		if (strcmp(dc->d->probes[i].name, name) == 0)
			return &dc->d->probes[i];
	return NULL;
}

static bool ok_of(const struct doc *dc, const char *name)
{
	const msb_ns_probe *p = find(dc, name);
	return p && p->ok;
}

/* ---- forked probes: the child reports one line on a pipe ------------------- */

typedef int (*child_fn)(void *arg, char *msg, size_t size);

/* Run fn in a forked child; true when it returned 0. `msg` gets its line. */
static bool run_child(child_fn fn, void *arg, char *msg, size_t size)
{
	int p[2];
	msg[0] = '\0';
	if (pipe2(p, O_CLOEXEC) < 0) {
		snprintf(msg, size, "pipe: %s", strerror(errno));
		return false;
	}
	pid_t pid = fork();
	if (pid < 0) {
		snprintf(msg, size, "fork: %s", strerror(errno));
		close(p[0]);
		close(p[1]);
		return false;
	}
	if (pid == 0) {
		close(p[0]);
		char out[256] = "";
		int r = fn(arg, out, sizeof(out));
		ssize_t w = write(p[1], out, strlen(out));
		(void)w;
		_exit(r == 0 ? 0 : 1);
	}
	close(p[1]);
	size_t len = 0;
	int64_t deadline = msb__now_ns() + (int64_t)PROBE_TIMEOUT_MS * 1000000;
	bool timed_out = false;
	for (;;) {
		int64_t left = (deadline - msb__now_ns()) / 1000000;
		struct pollfd pfd = {.fd = p[0], .events = POLLIN};
		int pr = left > 0 ? poll(&pfd, 1, (int)left) : 0;
		if (pr < 0 && errno == EINTR)
			continue;
		if (pr <= 0) {
			timed_out = true;
			break;
		}
		ssize_t n = read(p[0], msg + len, size - 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
		if (len >= size - 1)
			break;
	}
	msg[len] = '\0';
	close(p[0]);
	if (timed_out)
		kill(pid, SIGKILL);
	int status = 0;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (timed_out) {
		snprintf(msg, size, "no answer within %d ms", PROBE_TIMEOUT_MS);
		return false;
	}
	if (WIFSIGNALED(status)) {
		snprintf(msg, size, "probe killed by signal %d", WTERMSIG(status));
		return false;
	}
	return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/*
 * Run fn inside a new user + mount namespace whose ids are mapped the way a
 * sandbox's would be (a range as root, our own id otherwise). Called in a
 * forked probe process; returns fn's result.
 */
static int in_userns(int (*fn)(char *msg, size_t size), char *msg, size_t size)
{
	int sp[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0) {
		snprintf(msg, size, "socketpair: %s", strerror(errno));
		return -1;
	}
	bool root = geteuid() == 0;
	char umap[64], gmap[64];
	snprintf(umap, sizeof(umap), "0 %u %u\n", root ? MSB_NS_DEFAULT_ID_BASE : geteuid(),
		 root ? MSB_NS_ID_COUNT : 1);
	snprintf(gmap, sizeof(gmap), "0 %u %u\n", root ? MSB_NS_DEFAULT_ID_BASE : getegid(),
		 root ? MSB_NS_ID_COUNT : 1);
	int pidfd = -1;
	pid_t pid = msb__sys_clone3(CLONE_NEWUSER | CLONE_NEWNS | CLONE_PIDFD, SIGCHLD, -1, &pidfd);
	if (pid == 0) {
		char b;
		close(sp[0]);
		if (read(sp[1], &b, 1) != 1)
			_exit(2);
		int r = -1;
		if (setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0)
			snprintf(msg, size, "become the namespace's root: %s", strerror(errno));
		else
			r = fn(msg, size);
		ssize_t w = write(sp[1], msg, strlen(msg));
		(void)w;
		_exit(r == 0 ? 0 : 1);
	}
	close(sp[1]);
	if (pid < 0) {
		close(sp[0]);
		snprintf(msg, size, "clone3(CLONE_NEWUSER|CLONE_NEWNS): %s", strerror(-pid));
		return -1;
	}
	char path[64];
	int r = 0;
	snprintf(path, sizeof(path), "/proc/%d/setgroups", (int)pid);
	if (!root)
		r = msb_ns__write_string(AT_FDCWD, path, "deny");
	snprintf(path, sizeof(path), "/proc/%d/uid_map", (int)pid);
	if (r == 0)
		r = msb_ns__write_string(AT_FDCWD, path, umap);
	snprintf(path, sizeof(path), "/proc/%d/gid_map", (int)pid);
	if (r == 0)
		r = msb_ns__write_string(AT_FDCWD, path, gmap);
	if (r == 0 && write(sp[0], "g", 1) != 1)
		r = -EPIPE;
	size_t len = 0;
	ssize_t n;
	while (r == 0 && len < size - 1 && (n = read(sp[0], msg + len, size - 1 - len)) > 0)
		len += (size_t)n;
	if (r == 0)
		msg[len] = '\0';
	close(sp[0]);
	siginfo_t si;
	memset(&si, 0, sizeof(si));
	while (waitid((idtype_t)P_PIDFD, (id_t)pidfd, &si, WEXITED) < 0 && errno == EINTR)
		;
	close(pidfd);
	if (r < 0) {
		snprintf(msg, size, "map ids: %s", strerror(-r));
		return -1;
	}
	return si.si_code == CLD_EXITED && si.si_status == 0 ? 0 : -1;
}

/* As an ordinary user (nobody when we are root): may we unshare a user ns? */
static int child_userns_unpriv(void *arg, char *msg, size_t size)
{
	if (geteuid() == 0) {
		if (setgroups(0, NULL) < 0 || setresgid(65534, 65534, 65534) < 0 ||
		    setresuid(65534, 65534, 65534) < 0) {
			snprintf(msg, size, "drop to nobody: %s", strerror(errno));
			return -1;
		}
	}
	if (unshare(CLONE_NEWUSER) < 0) {
		snprintf(msg, size, "unshare(CLONE_NEWUSER) as uid %u: %s", (unsigned)geteuid(),
			 strerror(errno));
		return -1;
	}
	snprintf(msg, size, "an ordinary user can create a user namespace");
	return 0;
}

/* As root: a user ns whose root maps to an unprivileged range. */
static int child_userns_root(void *arg, char *msg, size_t size)
{
	int p[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, p) < 0)
		return -1;
	int pidfd = -1;
	pid_t pid = msb__sys_clone3(CLONE_NEWUSER | CLONE_PIDFD, SIGCHLD, -1, &pidfd);
	if (pid == 0) {
		char b;
		if (read(p[1], &b, 1) != 1)
			_exit(2);
		_exit(setresuid(0, 0, 0) == 0 && getuid() == 0 ? 0 : 1);
	}
	if (pid < 0) {
		snprintf(msg, size, "clone3(CLONE_NEWUSER): %s", strerror(-pid));
		return -1;
	}
	char path[64], map[64];
	snprintf(path, sizeof(path), "/proc/%d/uid_map", (int)pid);
	snprintf(map, sizeof(map), "0 %u %u\n", MSB_NS_DEFAULT_ID_BASE, MSB_NS_ID_COUNT);
	int r = msb_ns__write_string(AT_FDCWD, path, map);
	ssize_t w = write(p[0], "g", 1);
	(void)w;
	int status = 0;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (r < 0) {
		snprintf(msg, size, "map 0..65535 to %u..: %s", MSB_NS_DEFAULT_ID_BASE,
			 strerror(-r));
		return -1;
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		snprintf(msg, size, "the mapped root could not become uid 0");
		return -1;
	}
	snprintf(msg, size, "root maps guest 0..65535 to host %u..", MSB_NS_DEFAULT_ID_BASE);
	return 0;
}

static int mount_fs(const char *type, const char *const *kv, int target_fd)
{
	int fs = msb__sys_fsopen(type, FSOPEN_CLOEXEC);
	if (fs < 0)
		return fs;
	int r = 0;
	for (size_t i = 0; kv && kv[i]; i += 2) {
		r = kv[i + 1] ? msb__sys_fsconfig(fs, FSCONFIG_SET_STRING, kv[i], kv[i + 1], 0)
			      : msb__sys_fsconfig(fs, FSCONFIG_SET_FLAG, kv[i], NULL, 0);
		if (r < 0)
			break;
	}
	if (r == 0)
		r = msb__sys_fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0);
	int mnt = r == 0 ? msb__sys_fsmount(fs, FSMOUNT_CLOEXEC, 0) : r;
	close(fs);
	if (mnt < 0)
		return mnt;
	if (target_fd >= 0) {
		r = msb__sys_move_mount(mnt, "", target_fd, "",
					MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH);
		if (r < 0) {
			close(mnt);
			return r;
		}
	}
	return mnt;
}

/* overlayfs mounted inside a user namespace, upper on tmpfs (runs in the
 * namespace; the message is written by the caller). */
static int overlay_in_ns(char *msg, size_t size)
{
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
		snprintf(msg, size, "make / private: %s", strerror(errno));
		return -1;
	}
	int tmp = open("/tmp", O_PATH | O_DIRECTORY | O_CLOEXEC);
	int t = tmp < 0 ? -errno : mount_fs("tmpfs", NULL, tmp);
	if (t < 0) {
		snprintf(msg, size, "tmpfs in a user namespace: %s", strerror(-t));
		return -1;
	}
	const char *dirs[] = {"lower", "upper", "work", "merged"};
	int fds[4];
	for (int i = 0; i < 4; i++) {
		if (mkdirat(t, dirs[i], 0755) < 0 ||
		    (fds[i] = openat(t, dirs[i], O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0) {
			snprintf(msg, size, "mkdir %s: %s", dirs[i], strerror(errno));
			return -1;
		}
	}
	char lower[40], upper[40], work[40];
	snprintf(lower, sizeof(lower), "/proc/self/fd/%d", fds[0]);
	snprintf(upper, sizeof(upper), "/proc/self/fd/%d", fds[1]);
	snprintf(work, sizeof(work), "/proc/self/fd/%d", fds[2]);
	const char *kv[] = {"lowerdir", lower,	     "upperdir", upper, "workdir",
			    work,	"userxattr", NULL,	 NULL};
	int o = mount_fs("overlay", kv, fds[3]);
	if (o < 0) {
		snprintf(msg, size, "overlay (userxattr) in a user namespace: %s", strerror(-o));
		return -1;
	}
	snprintf(msg, size, "overlay with a tmpfs upper mounts in a user namespace");
	return 0;
}

static int child_overlay(void *arg, char *msg, size_t size)
{
	return in_userns(overlay_in_ns, msg, size);
}

struct sandbox_arg {
	const char *stage;
	const char *work;
};

/* The real thing: a sandbox on the `host` image with /bin/sleep as init. */
static int child_sandbox(void *arg, char *msg, size_t size)
{
	struct sandbox_arg *a = arg;
	msb_ns_config cfg;
	if (msb_ns__config_init(&cfg) < 0)
		return -1;
	int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int wfd = open(a->work, O_PATH | O_DIRECTORY | O_CLOEXEC);
	char *argv[] = {(char *)"sleep", (char *)"30", NULL};
	msb_ns_spawn_opts o = MSB_NS_SPAWN_OPTS_INIT;
	o.state_dir = a->stage;
	o.name = "doctor";
	o.agent_path = "/bin/sleep";
	o.agent_argv = argv;
	o.listen_fd = lfd;
	o.work_path = a->work;
	o.work_fd = wfd;
	msb_ns_sandbox *sb = NULL;
	msb_error *e = NULL;
	int r = msb_ns__spawn(&cfg, &o, &sb, &e);
	if (r < 0) {
		snprintf(msg, size, "%s", msb_error_message(e));
		msb_error_free(e);
		msb_ns__config_clear(&cfg);
		return -1;
	}
	snprintf(msg, size,
		 "user, mount, pid, net, ipc, uts and cgroup namespaces, rootfs and pivot_root "
		 "work (%.2f ms)",
		 (double)sb->timing.total_ns / 1e6);
	msb_ns__sandbox_free(sb);
	msb_ns__config_clear(&cfg);
	return 0;
}

/* ---- the probes ------------------------------------------------------------ */

static void probe_syscalls(struct doc *dc)
{
	/* CLONE_THREAD without CLONE_SIGHAND is refused before anything is
	 * copied: EINVAL where clone3 exists, ENOSYS where it does not. */
	pid_t c3 = msb__sys_clone3(CLONE_THREAD, 0, -1, NULL);
	probe(dc, "clone3", c3 != -ENOSYS, c3 == -ENOSYS ? "clone3 is not available" : "available");

	int fd = msb__sys_pidfd_open(getpid(), 0);
	probe(dc, "pidfd", fd >= 0, fd >= 0 ? "pidfd_open works" : "pidfd_open: %s",
	      fd >= 0 ? "" : strerror(-fd));
	if (fd >= 0)
		close(fd);

	struct open_how how = {.flags = O_PATH | O_CLOEXEC, .resolve = RESOLVE_BENEATH};
	fd = msb__sys_openat2(AT_FDCWD, ".", &how);
	probe(dc, "openat2", fd >= 0, fd >= 0 ? "RESOLVE_BENEATH works" : "openat2: %s",
	      fd >= 0 ? "" : strerror(-fd));
	if (fd >= 0)
		close(fd);

	int a = msb__sys_mount_setattr(-1, "", 0, NULL);
	int b = msb__sys_fsopen("", 0);
	int ot = msb__sys_open_tree(AT_FDCWD, "/", OPEN_TREE_CLOEXEC);
	if (ot >= 0)
		close(ot);
	if (b >= 0)
		close(b);
	bool mount_api = a != -ENOSYS && b != -ENOSYS && ot != -ENOSYS;
	probe(dc, "mount_api", mount_api,
	      mount_api ? "fsopen, open_tree and mount_setattr are available"
			: "the new mount API (fsopen, open_tree, mount_setattr) is missing");

	int cr = msb__sys_close_range(~0U, ~0U, 0);
	probe(dc, "close_range", cr != -ENOSYS,
	      cr != -ENOSYS ? "available" : "close_range is not available");
}

static void probe_sysctl_userns(struct doc *dc, char *why, size_t size)
{
	_cleanup_free_ char *s = NULL;
	why[0] = '\0';
	if (msb__read_file_at(AT_FDCWD, "/proc/sys/kernel/unprivileged_userns_clone", 64, &s,
			      NULL) == 0 &&
	    strtol(s, NULL, 10) == 0)
		snprintf(why, size, "kernel.unprivileged_userns_clone = 0");
	free(s);
	s = NULL;
	if (msb__read_file_at(AT_FDCWD, "/proc/sys/user/max_user_namespaces", 64, &s, NULL) == 0 &&
	    strtol(s, NULL, 10) == 0)
		snprintf(why, size, "user.max_user_namespaces = 0");
	free(s);
	s = NULL;
	if (msb__read_file_at(AT_FDCWD, "/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
			      64, &s, NULL) == 0 &&
	    strtol(s, NULL, 10) != 0)
		snprintf(why, size, "kernel.apparmor_restrict_unprivileged_userns = 1");
	(void)dc;
}

static void probe_userns(struct doc *dc)
{
	char msg[256];
	if (geteuid() == 0) {
		bool ok = run_child(child_userns_root, NULL, msg, sizeof(msg));
		probe(dc, "userns.root", ok, "%s", msg);
	} else {
		probe(dc, "userns.root", false, "not running as root (uid %u)",
		      (unsigned)geteuid());
	}
	char why[128];
	probe_sysctl_userns(dc, why, sizeof(why));
	bool ok = run_child(child_userns_unpriv, NULL, msg, sizeof(msg));
	if (!ok && why[0])
		probe(dc, "userns.unprivileged", false, "%s (%s)", msg, why);
	else
		probe(dc, "userns.unprivileged", ok, "%s", msg);
}

static void probe_mounts(struct doc *dc)
{
	char msg[256];
	bool ok = run_child(child_overlay, NULL, msg, sizeof(msg));
	probe(dc, "overlayfs.userns", ok, "%s", msg);

	char stage[] = "/tmp/msb-doctor-XXXXXX";
	if (!mkdtemp(stage)) {
		probe(dc, "sandbox.host", false, "mkdtemp: %s", strerror(errno));
		return;
	}
	_cleanup_free_ char *work = msb__asprintf("%s/work", stage);
	if (!work || mkdir(work, 0700) < 0) {
		probe(dc, "sandbox.host", false, "mkdir: %s", strerror(errno));
		rmdir(stage);
		return;
	}
	if (geteuid() == 0 && chown(work, MSB_NS_DEFAULT_ID_BASE, MSB_NS_DEFAULT_ID_BASE) < 0) {
		probe(dc, "sandbox.host", false, "chown: %s", strerror(errno));
	} else {
		struct sandbox_arg a = {stage, work};
		ok = run_child(child_sandbox, &a, msg, sizeof(msg));
		probe(dc, "sandbox.host", ok, "%s", msg);
	}
	rmdir(work);
	rmdir(stage);
}

static void probe_cgroups(struct doc *dc)
{
	_cleanup_error_ msb_error *e = NULL;
	msb_ns_config cfg;
	if (msb_ns__config_init(&cfg) < 0) {
		dc->oom = true;
		return;
	}
	/* Which hierarchy would carry memory + pids + cpu limits? */
	cfg.memory_max = 64ull << 20;
	cfg.pids_max = 64;
	cfg.cpu_quota_us = MSB_NS_CPU_PERIOD_US;
	static const char *const ctrls[] = {"memory", "pids", "cpu"};

	msb_ns_config v2 = cfg;
	v2.cgroup = MSB_NS_CGROUP_V2;
	msb_ns_cgroup *cg = NULL;
	if (msb_ns__cgroup_plan(&v2, "doctor", &cg, &e) == 0) {
		const char *dir = msb_ns__cgroup_path(cg, "memory");
		probe(dc, "cgroup.v2", true, "memory, pids and cpu available below `%s`", dir);
		msb_ns__cgroup_free(cg);
	} else {
		probe(dc, "cgroup.v2", false, "%s", msb_error_message(e));
	}
	msb_error_free(e);
	e = NULL;

	msb_ns_config v1 = cfg;
	v1.cgroup = MSB_NS_CGROUP_V1;
	cg = NULL;
	if (msb_ns__cgroup_plan(&v1, "doctor", &cg, &e) == 0) {
		msb_buf b = MSB_BUF_INIT;
		bool writable = true;
		for (size_t i = 0; i < MSB_ARRAY_SIZE(ctrls); i++) {
			const char *p = msb_ns__cgroup_path(cg, ctrls[i]);
			_cleanup_free_ char *base = p ? strdup(p) : NULL;
			char *slash = base ? strrchr(base, '/') : NULL;
			if (slash) {
				*slash = '\0';
				slash = strrchr(base, '/');
				if (slash)
					*slash = '\0';
			}
			if (base && access(base, W_OK) < 0)
				writable = false;
			msb__buf_printf(&b, "%s%s at `%s`", i ? ", " : "", ctrls[i],
					base ? base : "?");
		}
		_cleanup_free_ char *s = msb__buf_steal_str(&b);
		probe(dc, "cgroup.v1", writable, "%s%s", s ? s : "",
		      writable ? "" : " (not writable by this user)");
		msb_ns__cgroup_free(cg);
	} else {
		probe(dc, "cgroup.v1", false, "%s", msb_error_message(e));
	}
	msb_ns__config_clear(&cfg);
}

static void probe_seccomp_landlock(struct doc *dc)
{
	uint32_t action = SECCOMP_RET_KILL_PROCESS;
	int r = msb__sys_seccomp(SECCOMP_GET_ACTION_AVAIL, 0, &action);
	probe(dc, "seccomp", r == 0, r == 0 ? "seccomp filters available" : "seccomp: %s",
	      r == 0 ? "" : strerror(-r));
	action = SECCOMP_RET_USER_NOTIF;
	r = msb__sys_seccomp(SECCOMP_GET_ACTION_AVAIL, 0, &action);
	probe(dc, "seccomp.user_notif", r == 0,
	      r == 0 ? "SECCOMP_RET_USER_NOTIF available" : "user notification: %s",
	      r == 0 ? "" : strerror(-r));

	int v = msb__sys_landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
	if (v > 0)
		probe(dc, "landlock", true, "Landlock ABI version %d", v);
	else
		probe(dc, "landlock", false, "Landlock unavailable: %s",
		      v == -EOPNOTSUPP ? "disabled at boot" : strerror(-v));
}

static void verdicts(struct doc *dc)
{
	/* ns: everything the boundary needs, in the mode this process runs in. */
	const char *need[] = {"clone3",	     "pidfd",
			      "openat2",     "mount_api",
			      "close_range", geteuid() == 0 ? "userns.root" : "userns.unprivileged",
			      "sandbox.host"};
	const msb_ns_probe *bad = NULL;
	for (size_t i = 0; i < MSB_ARRAY_SIZE(need) && !bad; i++)
		if (!ok_of(dc, need[i]))
			bad = find(dc, need[i]);
	if (bad) {
		verdict(dc, false, "cannot create sandboxes here: %s: %s", bad->name, bad->reason);
	} else {
		bool ovl = ok_of(dc, "overlayfs.userns");
		verdict(dc, true, "container rung, %s; image `host`%s; cgroup limits %s",
			geteuid() == 0 ? "as root (id range mapping)"
				       : "unprivileged (one-id mapping)",
			ovl ? " and `dir:PATH`" : " only (no overlayfs in a user namespace)",
			ok_of(dc, "cgroup.v2")	 ? "via cgroup v2"
			: ok_of(dc, "cgroup.v1") ? "via cgroup v1 (attach costs a grace period "
						   "after idle)"
						 : "unavailable: acquire with limits fails closed");
	}
}

int msb_ns__doctor(msb_ns_doctor **out, msb_error **err)
{
	struct doc dc = {0};
	dc.d = calloc(1, sizeof(*dc.d));
	if (!dc.d)
		return msb__error_nomem(err);
	probe_syscalls(&dc);
	probe_userns(&dc);
	probe_mounts(&dc);
	probe_cgroups(&dc);
	probe_seccomp_landlock(&dc);
	verdicts(&dc);
	if (dc.oom) {
		msb_ns__doctor_free(dc.d);
		return msb__error_nomem(err);
	}
	*out = dc.d;
	return 0;
}

static void free_list(msb_ns_probe *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(p[i].name);
		free(p[i].reason);
	}
	free(p);
}

void msb_ns__doctor_free(msb_ns_doctor *d)
{
	if (!d)
		return;
	free_list(d->probes, d->n_probes);
	free(d->reason);
	free(d);
}
