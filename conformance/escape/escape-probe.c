/* SPDX-License-Identifier: Apache-2.0 */
/*
 * msb-escape-probe: run inside a sandbox, try what a container or microVM
 * boundary forbids, and report each attempt as one JSON line:
 *
 *   {"probe":"ptrace-pid1","outcome":"blocked","detail":"EPERM","why":"..."}
 *
 * outcome is "blocked" (the attempt was refused, or what it reached was the
 * sandbox's own), "contained" (a resource limit stopped it), "escaped" (it
 * worked), or "error" (the probe could not tell). The verdict is not made
 * here: the guest is untrusted, so `msb conformance --escape` compares each
 * outcome with its own expectations and cross-checks the host (its
 * hostname, clock, canary files, processes). docs/security.md lists every
 * probe.
 *
 * A static binary (musl), placed in the sandbox through the file plane. It
 * never writes outside the sandbox on purpose: every write attempt aims at a
 * path the host created for the test, and every opened-for-write system
 * file is closed without writing.
 */
#include <dirent.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/inotify.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/time.h>
#include <sys/timex.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#ifndef SYS_io_uring_setup
#define SYS_io_uring_setup 425
#endif
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef AF_PACKET
#define AF_PACKET 17
#endif

struct ctx {
	const char *canary;    /* a host file the guest must not read */
	const char *canary_w;  /* a host path the guest must not create */
	const char *neighbour; /* another sandbox's file, by its host path */
	const char *shim_sock; /* this sandbox's shim socket, by its host path */
	const char *abstract;  /* a host abstract unix socket name */
	int tcp_port;	       /* a host TCP listener on 127.0.0.1 */
	int host_pid;	       /* a host process to signal */
	uint64_t memory;       /* the sandbox's limits, for the fill probes */
	uint64_t pids;
	uint64_t writable;
	const char *swap_base;	 /* the storage base, as the guest sees it */
	const char *swap_target; /* a host file, by its host path, for the links */
	const char *swap_dir;	 /* a host directory, by its host path */
	double swap_seconds;	 /* how long the link-swap probe runs */
	const char *bomb;	 /* where to plant the listing bomb (in the storage base) */
	const char *init;	 /* a word of the sandbox's own PID 1's command line */
};

struct res {
	const char *outcome;
	char detail[512];
};

typedef void (*probe_fn)(const struct ctx *c, struct res *r);

struct probe {
	const char *name;
	const char *why;
	probe_fn run;
};

static void set(struct res *r, const char *outcome, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void set(struct res *r, const char *outcome, const char *fmt, ...)
{
	va_list ap;
	r->outcome = outcome;
	va_start(ap, fmt);
	vsnprintf(r->detail, sizeof(r->detail), fmt, ap);
	va_end(ap);
}

static const char *errname(int e)
{
	switch (e) {
	case EPERM:
		return "EPERM";
	case EACCES:
		return "EACCES";
	case ENOENT:
		return "ENOENT";
	case ENOSYS:
		return "ENOSYS";
	case EROFS:
		return "EROFS";
	case EINVAL:
		return "EINVAL";
	case ESRCH:
		return "ESRCH";
	case ECONNREFUSED:
		return "ECONNREFUSED";
	case ENETUNREACH:
		return "ENETUNREACH";
	case EAFNOSUPPORT:
		return "EAFNOSUPPORT";
	case EAGAIN:
		return "EAGAIN";
	case ENOSPC:
		return "ENOSPC";
	case ENOMEM:
		return "ENOMEM";
	case ETXTBSY:
		return "ETXTBSY";
	case EBADF:
		return "EBADF";
	case EOPNOTSUPP:
		return "EOPNOTSUPP";
	case ENODEV:
		return "ENODEV";
	case EDQUOT:
		return "EDQUOT";
	case EEXIST:
		return "EEXIST";
	case ENOTDIR:
		return "ENOTDIR";
	case EHOSTUNREACH:
		return "EHOSTUNREACH";
	case ETIMEDOUT:
		return "ETIMEDOUT";
	default:
		return strerror(e);
	}
}

/* A system call that must fail: rc < 0 is blocked, anything else escaped. */
static void must_fail(struct res *r, long rc, const char *what)
{
	if (rc < 0)
		set(r, "blocked", "%s: %s", what, errname(errno));
	else
		set(r, "escaped", "%s succeeded (returned %ld)", what, rc);
}

/* Read up to 64 bytes of a file: blocked when it cannot be opened. The
 * bytes go into the detail, so the host sees whatever crossed. */
static void must_not_read(struct res *r, const char *path)
{
	if (!path || !*path) {
		set(r, "error", "no path given");
		return;
	}
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		set(r, "blocked", "open `%s`: %s", path, errname(errno));
		return;
	}
	char buf[65] = {0};
	ssize_t n = read(fd, buf, 64);
	close(fd);
	for (ssize_t i = 0; i < n; i++)
		if (buf[i] == '\n' || buf[i] == '"' || buf[i] == '\\' || (unsigned char)buf[i] < 32)
			buf[i] = ' ';
	set(r, "escaped", "read `%s`: %s", path, n > 0 ? buf : "(opened, empty)");
}

/* ---- host files and other sandboxes ------------------------------------------- */

static void p_canary(const struct ctx *c, struct res *r)
{
	must_not_read(r, c->canary);
}

static void p_canary_write(const struct ctx *c, struct res *r)
{
	int fd = open(c->canary_w, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0) {
		set(r, "blocked", "create `%s`: %s", c->canary_w, errname(errno));
		return;
	}
	close(fd);
	/* Inside the sandbox a path can exist too (the guest's own /tmp): the
	 * host checks its own side. Remove ours so the check is the host's. */
	unlink(c->canary_w);
	set(r, "blocked", "created `%s` in the guest's own filesystem (the host checks its side)",
	    c->canary_w);
}

static void p_neighbour(const struct ctx *c, struct res *r)
{
	must_not_read(r, c->neighbour);
}

static void p_proc_root(const struct ctx *c, struct res *r)
{
	/* Every visible process's root, looking for the host's canary. */
	DIR *d = opendir("/proc");
	if (!d) {
		set(r, "blocked", "opendir /proc: %s", errname(errno));
		return;
	}
	struct dirent *e;
	char path[600];
	set(r, "blocked", "no /proc/<pid>/root reaches the canary");
	while ((e = readdir(d))) {
		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/root%s", e->d_name, c->canary);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd >= 0) {
			close(fd);
			set(r, "escaped", "opened `%s`", path);
			break;
		}
	}
	closedir(d);
}

static void p_host_home(const struct ctx *c, struct res *r)
{
	const char *dirs[] = {"/root", "/home", "/var/lib", "/run"};
	for (size_t i = 0; i < 4; i++) {
		DIR *d = opendir(dirs[i]);
		if (!d)
			continue;
		struct dirent *e;
		int n = 0;
		char first[128] = "";
		while ((e = readdir(d)))
			if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && n++ == 0)
				snprintf(first, sizeof(first), "%.100s", e->d_name);
		closedir(d);
		if (n > 0) {
			set(r, "escaped", "`%s` lists %d entries (first `%s`)", dirs[i], n, first);
			return;
		}
	}
	set(r, "blocked", "/root, /home, /var/lib and /run are absent or empty");
}

static void p_shadow(const struct ctx *c, struct res *r)
{
	must_not_read(r, "/etc/shadow");
}

static void p_handle(const struct ctx *c, struct res *r)
{
	/* The "shocker" escape: open a file by handle on the host's filesystem. */
	struct {
		unsigned int bytes;
		int type;
		unsigned char h[8];
	} fh = {8, 1, {2, 0, 0, 0, 0, 0, 0, 0}};
	must_fail(r, syscall(SYS_open_by_handle_at, AT_FDCWD, &fh, O_RDONLY), "open_by_handle_at");
}

static void p_chroot(const struct ctx *c, struct res *r)
{
	/* In a child: a chroot that works must not move the root of the probes
	 * after this one (a container engine grants CAP_SYS_CHROOT by default). */
	pid_t pid = fork();
	if (pid == 0)
		_exit(chroot(".") == 0 ? 0 : (errno > 0 && errno < 256 ? errno : 255));
	int st = 0;
	if (pid < 0 || waitpid(pid, &st, 0) < 0) {
		set(r, "error", "fork: %s", errname(errno));
		return;
	}
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		set(r, "escaped", "chroot succeeded (in a child)");
	else if (WIFEXITED(st))
		set(r, "blocked", "chroot: %s", errname(WEXITSTATUS(st)));
	else
		set(r, "error", "the chroot child died by signal %d", WTERMSIG(st));
}

static void p_exe_write(const struct ctx *c, struct res *r)
{
	/* runc CVE-2019-5736: the runtime's binary, reopened for writing. */
	int fd = open("/proc/1/exe", O_WRONLY | O_CLOEXEC);
	if (fd < 0) {
		set(r, "blocked", "open /proc/1/exe for writing: %s", errname(errno));
		return;
	}
	close(fd);
	set(r, "escaped", "opened the agent's binary for writing (closed unwritten)");
}

static void p_fds(const struct ctx *c, struct res *r)
{
	DIR *d = opendir("/proc/self/fd");
	if (!d) {
		set(r, "error", "opendir /proc/self/fd: %s", errname(errno));
		return;
	}
	int self = dirfd(d), extra = -1;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		int fd = (int)strtol(e->d_name, NULL, 10);
		if (fd > 2 && fd != self)
			extra = fd;
	}
	closedir(d);
	if (extra < 0) {
		set(r, "blocked", "only stdin, stdout and stderr are open");
		return;
	}
	char link[64], target[256] = "";
	snprintf(link, sizeof(link), "/proc/self/fd/%d", extra);
	ssize_t n = readlink(link, target, sizeof(target) - 1);
	target[n > 0 ? n : 0] = '\0';
	set(r, "escaped", "fd %d is inherited: %s", extra, target);
}

/* ---- /proc and /sys ---------------------------------------------------------------- */

static void p_pid1(const struct ctx *c, struct res *r)
{
	char buf[256] = {0};
	int fd = open("/proc/1/cmdline", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	if (fd >= 0)
		close(fd);
	if (n <= 0) {
		set(r, "blocked", "/proc/1/cmdline unreadable");
		return;
	}
	const char *own = c->init ? c->init : "agent";
	if (strstr(buf, own))
		set(r, "blocked", "PID 1 is the sandbox's own init (`%s`)", buf);
	else
		set(r, "escaped", "PID 1 is `%s`: the host's process tree is visible", buf);
}

static void p_host_pids(const struct ctx *c, struct res *r)
{
	DIR *d = opendir("/proc");
	if (!d) {
		set(r, "blocked", "opendir /proc: %s", errname(errno));
		return;
	}
	int n = 0, shims = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		n++;
		char path[64], buf[128] = {0};
		snprintf(path, sizeof(path), "/proc/%.32s/cmdline", e->d_name);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd >= 0) {
			if (read(fd, buf, sizeof(buf) - 1) > 0 && strstr(buf, "msb-shim"))
				shims++;
			close(fd);
		}
	}
	closedir(d);
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d", c->host_pid);
	bool host_visible = c->host_pid > 0 && access(path, F_OK) == 0 && c->host_pid > 1000;
	if (shims || host_visible)
		set(r, "escaped", "%d processes visible, %d msb-shim, host pid %d %s", n, shims,
		    c->host_pid, host_visible ? "visible" : "not visible");
	else
		set(r, "blocked", "%d processes visible, all the sandbox's own", n);
}

static void p_kallsyms(const struct ctx *c, struct res *r)
{
	FILE *f = fopen("/proc/kallsyms", "re");
	if (!f) {
		set(r, "blocked", "open /proc/kallsyms: %s", errname(errno));
		return;
	}
	char line[256];
	int lines = 0, nonzero = 0;
	while (lines < 2000 && fgets(line, sizeof(line), f)) {
		lines++;
		if (strncmp(line, "0000000000000000", 16) != 0)
			nonzero++;
	}
	fclose(f);
	if (nonzero)
		set(r, "escaped", "%d of %d kallsyms lines carry a kernel address", nonzero, lines);
	else
		set(r, "blocked", "kallsyms readable, every address zeroed (%d lines)", lines);
}

static void p_add_key(const struct ctx *c, struct res *r)
{
	must_fail(r, syscall(SYS_add_key, "user", "msb-escape", "x", 1, -3 /* session */),
		  "add_key");
}

static void p_keyctl(const struct ctx *c, struct res *r)
{
	/* KEYCTL_JOIN_SESSION_KEYRING (1): reach the host's session keyring */
	must_fail(r, syscall(SYS_keyctl, 1, NULL), "keyctl(JOIN_SESSION_KEYRING)");
}

static void p_proc_keys(const struct ctx *c, struct res *r)
{
	FILE *f = fopen("/proc/keys", "re");
	if (!f) {
		set(r, "blocked", "open /proc/keys: %s", errname(errno));
		return;
	}
	char line[256];
	int n = 0;
	while (fgets(line, sizeof(line), f))
		n++;
	fclose(f);
	if (n)
		set(r, "escaped", "/proc/keys lists %d keys", n);
	else
		set(r, "blocked", "/proc/keys lists nothing");
}

static void must_not_open_w(struct res *r, const char *path)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0) {
		set(r, "blocked", "open `%s` for writing: %s", path, errname(errno));
		return;
	}
	close(fd);
	set(r, "escaped", "opened `%s` for writing (closed unwritten)", path);
}

static void p_sysrq(const struct ctx *c, struct res *r)
{
	must_not_open_w(r, "/proc/sysrq-trigger");
}

static void p_core_pattern(const struct ctx *c, struct res *r)
{
	must_not_open_w(r, "/proc/sys/kernel/core_pattern");
}

static void p_kcore(const struct ctx *c, struct res *r)
{
	must_not_read(r, "/proc/kcore");
}

static void p_sys_write(const struct ctx *c, struct res *r)
{
	must_not_open_w(r, "/sys/kernel/uevent_helper");
}

static void p_cgroup_write(const struct ctx *c, struct res *r)
{
	must_not_open_w(r, "/sys/fs/cgroup/cgroup.procs");
	if (strcmp(r->outcome, "blocked") == 0)
		must_not_open_w(r, "/sys/fs/cgroup/memory/memory.limit_in_bytes");
}

static void p_dmesg(const struct ctx *c, struct res *r)
{
	char buf[64];
	must_fail(r, syscall(SYS_syslog, 3 /* READ_ALL */, buf, sizeof(buf)), "syslog(READ_ALL)");
}

static void p_uid_map(const struct ctx *c, struct res *r)
{
	FILE *f = fopen("/proc/self/uid_map", "re");
	if (!f) {
		set(r, "error", "open /proc/self/uid_map: %s", errname(errno));
		return;
	}
	unsigned long in = 0, out = 1, len = 0;
	int n = fscanf(f, "%lu %lu %lu", &in, &out, &len);
	fclose(f);
	if (n != 3)
		set(r, "error", "uid_map unreadable");
	else if (out == 0)
		set(r, "escaped", "guest uid %lu is host uid 0 (root)", in);
	else
		set(r, "blocked", "guest uid %lu maps to host uid %lu", in, out);
}

/* ---- mounting and namespaces ------------------------------------------------------ */

static void p_mount_tmpfs(const struct ctx *c, struct res *r)
{
	must_fail(r, mount("none", "/tmp", "tmpfs", 0, NULL), "mount tmpfs");
}

static void p_remount(const struct ctx *c, struct res *r)
{
	must_fail(r, mount(NULL, "/usr", NULL, MS_REMOUNT | MS_BIND, NULL), "remount /usr rw");
}

static void p_umount_mask(const struct ctx *c, struct res *r)
{
	must_fail(r, umount2("/proc/kcore", MNT_DETACH), "umount the /proc/kcore mask");
}

/* In a child: unshare, and when that works try what it was for. */
static void p_unshare_user(const struct ctx *c, struct res *r)
{
	int pipefd[2];
	if (pipe(pipefd) < 0) {
		set(r, "error", "pipe: %s", errname(errno));
		return;
	}
	pid_t pid = fork();
	if (pid == 0) {
		close(pipefd[0]);
		char msg[200];
		if (unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0) {
			snprintf(msg, sizeof(msg), "B unshare(NEWUSER|NEWNS): %s", errname(errno));
		} else if (mount("none", "/tmp", "tmpfs", 0, NULL) < 0) {
			snprintf(msg, sizeof(msg),
				 "E unshare worked; mount in the new namespace then failed: %s",
				 errname(errno));
		} else {
			snprintf(msg, sizeof(msg),
				 "E unshare worked and mounted a tmpfs with the regained "
				 "capabilities");
		}
		if (write(pipefd[1], msg, strlen(msg)) < 0)
			_exit(1);
		_exit(0);
	}
	close(pipefd[1]);
	char buf[256] = {0};
	ssize_t n = pid > 0 ? read(pipefd[0], buf, sizeof(buf) - 1) : -1;
	close(pipefd[0]);
	if (pid > 0)
		waitpid(pid, NULL, 0);
	if (n <= 0)
		set(r, "error", "the child reported nothing");
	else
		set(r, buf[0] == 'B' ? "blocked" : "escaped", "%s", buf + 2);
}

static void p_clone_newuser(const struct ctx *c, struct res *r)
{
	long rc = syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, NULL, NULL, NULL, NULL);
	if (rc == 0)
		_exit(0);
	if (rc > 0)
		waitpid((pid_t)rc, NULL, 0);
	must_fail(r, rc, "clone(CLONE_NEWUSER)");
}

static void p_setns(const struct ctx *c, struct res *r)
{
	int fd = open("/proc/1/ns/mnt", O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		set(r, "blocked", "open /proc/1/ns/mnt: %s", errname(errno));
		return;
	}
	long rc = setns(fd, 0);
	close(fd);
	must_fail(r, rc, "setns(PID 1's mount namespace)");
}

static void p_pivot_root(const struct ctx *c, struct res *r)
{
	must_fail(r, syscall(SYS_pivot_root, "/tmp", "/tmp"), "pivot_root");
}

/* ---- ptrace and process_vm on PID 1 ------------------------------------------------ */

static void p_ptrace(const struct ctx *c, struct res *r)
{
	long rc = syscall(SYS_ptrace, 16 /* PTRACE_ATTACH */, 1, 0, 0);
	must_fail(r, rc, "ptrace(ATTACH, 1)");
	/* Never leave PID 1 stopped under this probe for the rest of the run. */
	if (rc == 0) {
		waitpid(1, NULL, __WALL);
		syscall(SYS_ptrace, 17 /* PTRACE_DETACH */, 1, 0, 0);
	}
}

static void p_process_vm(const struct ctx *c, struct res *r)
{
	char buf[8];
	struct iovec local = {buf, sizeof(buf)}, remote = {(void *)0x400000, sizeof(buf)};
	must_fail(r, syscall(SYS_process_vm_readv, 1, &local, 1, &remote, 1, 0),
		  "process_vm_readv(1)");
}

static void p_proc_mem(const struct ctx *c, struct res *r)
{
	must_not_read(r, "/proc/1/mem");
	if (strcmp(r->outcome, "escaped") == 0)
		return;
	int fd = open("/proc/1/mem", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		close(fd);
		set(r, "escaped", "opened /proc/1/mem");
	}
}

static void p_kill_pid1(const struct ctx *c, struct res *r)
{
	long rc = kill(1, SIGKILL);
	usleep(100000);
	if (rc < 0)
		set(r, "blocked", "kill(1, SIGKILL): %s", errname(errno));
	else if (kill(1, 0) == 0)
		set(r, "blocked", "kill(1, SIGKILL) was delivered nowhere: PID 1 lives on");
	else
		set(r, "escaped", "PID 1 is gone");
}

/* ---- PID 1's /proc entries and signals (issue 15 finding 2) ----------------------- */

/* Raising the agent's OOM score made the next memory fill kill it. The file
 * is only opened for writing, never written. */
static void p_pid1_oom_score(const struct ctx *c, struct res *r)
{
	int fd = open("/proc/1/oom_score_adj", O_WRONLY | O_CLOEXEC);
	if (fd < 0) {
		set(r, "blocked", "open `/proc/1/oom_score_adj` for writing: %s", errname(errno));
		return;
	}
	close(fd);
	set(r, "escaped", "opened `/proc/1/oom_score_adj` for writing");
}

static void p_pid1_environ(const struct ctx *c, struct res *r)
{
	must_not_read(r, "/proc/1/environ");
}

static void p_pid1_maps(const struct ctx *c, struct res *r)
{
	must_not_read(r, "/proc/1/maps");
}

/* PID 1's caught signals (SigCgt of /proc/1/status), if it can be read. */
static bool pid1_caught(uint64_t *mask)
{
	FILE *f = fopen("/proc/1/status", "re");
	if (!f)
		return false;
	char line[256];
	bool found = false;
	while (!found && fgets(line, sizeof(line), f))
		if (strncmp(line, "SigCgt:", 7) == 0) {
			*mask = strtoull(line + 7, NULL, 16);
			found = true;
		}
	fclose(f);
	return found;
}

/* Every signal an agent may catch (the one kill-pid1 sends cannot be). A
 * PID 1 of this namespace gets a signal from it only if it catches that
 * signal; an agent that took one as an order to stop would take the sandbox
 * - and this run - down. So when PID 1 can be seen catching one that this
 * process may send it, that is the finding, and nothing is sent; otherwise
 * they are all sent and PID 1 must live on. */
static void p_signal_pid1(const struct ctx *c, struct res *r)
{
	static const int sigs[] = {SIGTERM, SIGINT, SIGQUIT, SIGHUP, SIGUSR1, SIGUSR2, SIGALRM};
	uint64_t caught = 0;
	if (pid1_caught(&caught) && kill(1, 0) == 0) {
		for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
			if (caught & (1ull << (sigs[i] - 1))) {
				set(r, "escaped",
				    "PID 1 catches signal %d and this process may send it one",
				    sigs[i]);
				return;
			}
	}
	int sent = 0, refused = 0, err = 0;
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
		if (kill(1, sigs[i]) == 0) {
			sent++;
		} else {
			refused++;
			err = errno;
		}
	}
	usleep(200000);
	if (sent == 0)
		set(r, "blocked", "kill(1, ...): %s", errname(err));
	else if (kill(1, 0) == 0 || errno == EPERM)
		set(r, "blocked", "%d signals sent to PID 1 (%d refused), and it lives on", sent,
		    refused);
	else
		set(r, "escaped", "PID 1 is gone after %d signals", sent);
}

/* ---- kernel facilities -------------------------------------------------------------- */

static void p_init_module(const struct ctx *c, struct res *r)
{
	must_fail(r, syscall(SYS_init_module, "", 0, ""), "init_module");
}

static void p_finit_module(const struct ctx *c, struct res *r)
{
	must_fail(r, syscall(SYS_finit_module, 0, "", 0), "finit_module");
}

static void p_kexec(const struct ctx *c, struct res *r)
{
	must_fail(r, syscall(SYS_kexec_load, 0, 0, NULL, 0), "kexec_load");
}

static void p_bpf(const struct ctx *c, struct res *r)
{
	/* BPF_MAP_CREATE of a one-entry array: the smallest valid request. */
	uint32_t attr[32] = {2 /* ARRAY */, 4, 4, 1};
	long rc = syscall(SYS_bpf, 0, attr, sizeof(attr));
	if (rc >= 0)
		close((int)rc);
	must_fail(r, rc, "bpf(MAP_CREATE)");
}

static void p_perf(const struct ctx *c, struct res *r)
{
	uint32_t attr[32] = {1 /* SOFTWARE */, 112 /* size */};
	long rc = syscall(SYS_perf_event_open, attr, 0, -1, -1, 0);
	if (rc >= 0)
		close((int)rc);
	must_fail(r, rc, "perf_event_open");
}

static void p_userfaultfd(const struct ctx *c, struct res *r)
{
	long rc = syscall(SYS_userfaultfd, O_CLOEXEC);
	if (rc >= 0)
		close((int)rc);
	must_fail(r, rc, "userfaultfd");
}

static void p_io_uring(const struct ctx *c, struct res *r)
{
	uint32_t params[30] = {0};
	long rc = syscall(SYS_io_uring_setup, 1, params);
	if (rc >= 0)
		close((int)rc);
	must_fail(r, rc, "io_uring_setup");
}

static void p_reboot(const struct ctx *c, struct res *r)
{
	/* LINUX_REBOOT_CMD_CAD_OFF: harmless even where it works. */
	must_fail(r, syscall(SYS_reboot, 0xfee1dead, 672274793, 0, NULL), "reboot(CAD_OFF)");
}

static void p_swapon(const struct ctx *c, struct res *r)
{
	must_fail(r, syscall(SYS_swapon, "/dev/null", 0), "swapon");
}

static void p_iopl(const struct ctx *c, struct res *r)
{
#ifdef SYS_iopl
	must_fail(r, syscall(SYS_iopl, 3), "iopl(3)");
#else
	set(r, "blocked", "no iopl on this architecture");
#endif
}

/* ---- sockets ------------------------------------------------------------------------ */

static void p_raw(const struct ctx *c, struct res *r)
{
	int fd = socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_ICMP);
	if (fd >= 0)
		close(fd);
	must_fail(r, fd, "socket(AF_INET, SOCK_RAW)");
}

static void p_packet(const struct ctx *c, struct res *r)
{
	int fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0);
	if (fd >= 0)
		close(fd);
	must_fail(r, fd, "socket(AF_PACKET)");
}

static int tcp_connect(const char *ip, int port, int timeout_ms)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -1;
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	inet_pton(AF_INET, ip, &a.sin_addr);
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0)
		return fd;
	if (errno != EINPROGRESS) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	fd_set w;
	FD_ZERO(&w);
	FD_SET(fd, &w);
	struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
	if (select(fd + 1, NULL, &w, NULL, &tv) <= 0) {
		close(fd);
		errno = ETIMEDOUT;
		return -1;
	}
	int soerr = 0;
	socklen_t sl = sizeof(soerr);
	getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
	if (soerr) {
		close(fd);
		errno = soerr;
		return -1;
	}
	return fd;
}

static void p_outbound(const struct ctx *c, struct res *r)
{
	int fd = tcp_connect("1.1.1.1", 443, 2000);
	if (fd >= 0)
		close(fd);
	must_fail(r, fd, "connect 1.1.1.1:443");
}

static void p_host_tcp(const struct ctx *c, struct res *r)
{
	int fd = tcp_connect("127.0.0.1", c->tcp_port, 1000);
	if (fd >= 0)
		close(fd);
	char what[64];
	snprintf(what, sizeof(what), "connect to the host's 127.0.0.1:%d", c->tcp_port);
	must_fail(r, fd, what);
}

static void p_metadata(const struct ctx *c, struct res *r)
{
	int fd = tcp_connect("169.254.169.254", 80, 1000);
	if (fd >= 0)
		close(fd);
	must_fail(r, fd, "connect to the metadata address 169.254.169.254:80");
}

static int unix_connect(const char *name, bool abstract)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	size_t n = strlen(name);
	if (n + 2 > sizeof(a.sun_path)) {
		close(fd);
		errno = EINVAL;
		return -1;
	}
	memcpy(a.sun_path + (abstract ? 1 : 0), name, n);
	socklen_t len =
		(socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + (abstract ? 1 : 0));
	if (connect(fd, (struct sockaddr *)&a, len) < 0) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

static void p_abstract(const struct ctx *c, struct res *r)
{
	int fd = unix_connect(c->abstract, true);
	if (fd >= 0)
		close(fd);
	must_fail(r, fd, "connect to the host's abstract socket");
}

static void p_shim_sock(const struct ctx *c, struct res *r)
{
	int fd = unix_connect(c->shim_sock, false);
	if (fd >= 0)
		close(fd);
	must_fail(r, fd, "connect to the shim's socket by its host path");
}

static void p_proxy(const struct ctx *c, struct res *r)
{
	/* The allowlist proxy's port inside the sandbox: with `closed` egress
	 * nothing listens; with `allowlist` a CONNECT to a private address or
	 * an unlisted host must be refused. */
	int fd = tcp_connect("127.0.0.1", 3128, 1000);
	if (fd < 0) {
		set(r, "blocked", "connect 127.0.0.1:3128: %s", errname(errno));
		return;
	}
	const char req[] = "CONNECT 127.0.0.1:22 HTTP/1.1\r\nHost: 127.0.0.1:22\r\n\r\n";
	char buf[128] = {0};
	ssize_t n = -1;
	if (write(fd, req, sizeof(req) - 1) == (ssize_t)(sizeof(req) - 1)) {
		fd_set rd;
		FD_ZERO(&rd);
		FD_SET(fd, &rd);
		struct timeval tv = {3, 0};
		if (select(fd + 1, &rd, NULL, NULL, &tv) > 0)
			n = read(fd, buf, sizeof(buf) - 1);
	}
	close(fd);
	for (ssize_t i = 0; i < n; i++)
		if (buf[i] == '\r' || buf[i] == '\n' || buf[i] == '"' || buf[i] == '\\')
			buf[i] = ' ';
	if (n > 12 && strncmp(buf + 9, "2", 1) == 0)
		set(r, "escaped", "the proxy tunnelled to the host's loopback: %s", buf);
	else
		set(r, "blocked", "the proxy refused: %s", n > 0 ? buf : "(no answer)");
}

/* ---- signals and rlimits ---------------------------------------------------------------- */

static void p_signal_host(const struct ctx *c, struct res *r)
{
	if (c->host_pid <= 0) {
		set(r, "error", "no host pid given");
		return;
	}
	/* Only a pid this sandbox cannot have: its own pids are small. */
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/cmdline", c->host_pid);
	if (access(path, F_OK) == 0) {
		set(r, "escaped", "the host's pid %d is visible in this sandbox", c->host_pid);
		return;
	}
	must_fail(r, kill(c->host_pid, SIGTERM), "kill(the host's sleeper, SIGTERM)");
}

static void p_pidfd(const struct ctx *c, struct res *r)
{
	long rc = syscall(SYS_pidfd_open, c->host_pid, 0);
	if (rc >= 0)
		close((int)rc);
	must_fail(r, rc, "pidfd_open(the host's sleeper)");
}

static void raise_limit(struct res *r, int which, const char *name)
{
	struct rlimit l;
	if (getrlimit(which, &l) < 0) {
		set(r, "error", "getrlimit(%s): %s", name, errname(errno));
		return;
	}
	if (l.rlim_max == RLIM_INFINITY) {
		set(r, "escaped", "%s hard limit is already unlimited", name);
		return;
	}
	struct rlimit up = {l.rlim_max + 1024, l.rlim_max + 1024};
	char what[64];
	snprintf(what, sizeof(what), "raise the %s hard limit above %llu", name,
		 (unsigned long long)l.rlim_max);
	must_fail(r, setrlimit(which, &up), what);
}

static void p_rlimit_nofile(const struct ctx *c, struct res *r)
{
	raise_limit(r, RLIMIT_NOFILE, "RLIMIT_NOFILE");
}

static void p_rlimit_nproc(const struct ctx *c, struct res *r)
{
	raise_limit(r, RLIMIT_NPROC, "RLIMIT_NPROC");
}

static void p_rlimit_core(const struct ctx *c, struct res *r)
{
	raise_limit(r, RLIMIT_MEMLOCK, "RLIMIT_MEMLOCK");
}

/* ---- resource limits --------------------------------------------------------------------- */

static void p_memory(const struct ctx *c, struct res *r)
{
	uint64_t goal = c->memory ? 4 * c->memory : (2ull << 30);
	pid_t pid = fork();
	if (pid == 0) {
		uint64_t got = 0;
		while (got < goal) {
			size_t chunk = 8u << 20;
			char *p = mmap(NULL, chunk, PROT_READ | PROT_WRITE,
				       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			if (p == MAP_FAILED)
				_exit(3);
			memset(p, 0x5a, chunk);
			got += chunk;
		}
		_exit(0);
	}
	int st = 0;
	if (pid < 0 || waitpid(pid, &st, 0) < 0) {
		set(r, "error", "fork: %s", errname(errno));
		return;
	}
	if (WIFSIGNALED(st))
		set(r, "contained", "the filler was killed by signal %d before %llu bytes",
		    WTERMSIG(st), (unsigned long long)goal);
	else if (WEXITSTATUS(st) == 3)
		set(r, "contained", "mmap refused memory before %llu bytes",
		    (unsigned long long)goal);
	else
		set(r, "escaped", "%llu bytes, four times the limit, were touched",
		    (unsigned long long)goal);
}

static void p_pids(const struct ctx *c, struct res *r)
{
	uint64_t goal = c->pids ? 4 * c->pids : 4096;
	pid_t *kids = calloc(goal, sizeof(pid_t));
	uint64_t n = 0;
	int e = 0;
	while (kids && n < goal) {
		pid_t p = fork();
		if (p == 0) {
			pause();
			_exit(0);
		}
		if (p < 0) {
			e = errno;
			break;
		}
		kids[n++] = p;
	}
	for (uint64_t i = 0; i < n; i++)
		kill(kids[i], SIGKILL);
	for (uint64_t i = 0; i < n; i++)
		waitpid(kids[i], NULL, 0);
	free(kids);
	if (n < goal)
		set(r, "contained", "fork refused after %llu processes: %s", (unsigned long long)n,
		    errname(e));
	else
		set(r, "escaped", "%llu processes, four times the limit, were forked",
		    (unsigned long long)goal);
}

static void fill(struct res *r, const char *path, uint64_t limit)
{
	uint64_t goal = limit ? 4 * limit : (1ull << 30);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0) {
		set(r, "blocked", "create `%s`: %s", path, errname(errno));
		return;
	}
	static char block[1 << 16];
	memset(block, 0x5a, sizeof(block));
	uint64_t done = 0;
	int e = 0;
	while (done < goal) {
		ssize_t w = write(fd, block, sizeof(block));
		if (w <= 0) {
			e = w < 0 ? errno : ENOSPC;
			break;
		}
		done += (uint64_t)w;
	}
	close(fd);
	unlink(path);
	if (done < goal)
		set(r, "contained", "`%s` stopped at %llu bytes: %s", path,
		    (unsigned long long)done, errname(e));
	else
		set(r, "escaped", "`%s` took %llu bytes, four times the limit", path,
		    (unsigned long long)goal);
}

static void p_disk(const struct ctx *c, struct res *r)
{
	fill(r, "/var/tmp/msb-escape-fill", c->writable);
}

static void p_shm(const struct ctx *c, struct res *r)
{
	/* /dev/shm is a tmpfs charged to the memory cgroup: bounded by memory. */
	pid_t pid = fork();
	if (pid == 0) {
		struct res child;
		fill(&child, "/dev/shm/msb-escape-fill", c->memory ? c->memory : c->writable);
		_exit(strcmp(child.outcome, "contained") == 0 ? 0 : 4);
	}
	int st = 0;
	waitpid(pid, &st, 0);
	unlink("/dev/shm/msb-escape-fill");
	if (WIFSIGNALED(st))
		set(r, "contained", "the /dev/shm filler was killed by signal %d", WTERMSIG(st));
	else if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		set(r, "contained", "/dev/shm refused writes before four times the memory limit");
	else
		set(r, "escaped", "/dev/shm took four times the memory limit");
}

/* ---- listings the host reads -------------------------------------------------------- */

/* Budgets on guest bytes (docs/security.md): a directory of many long names
 * - ~26 MB of paths, past what a host should take in from one listing - for
 * the host to fingerprint and list once the probes are done. The verdict is
 * the host's (host:listing-bomb): a typed refusal with bounded memory. */
#define BOMB_ENTRIES 100000
#define BOMB_NAME 250

static void p_listing_bomb(const struct ctx *c, struct res *r)
{
	if (!c->bomb) {
		set(r, "error", "no --bomb directory was given");
		return;
	}
	if (mkdir(c->bomb, 0755) < 0 && errno != EEXIST) {
		set(r, "contained", "mkdir `%s`: %s", c->bomb, errname(errno));
		return;
	}
	int dfd = open(c->bomb, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0) {
		set(r, "error", "open `%s`: %s", c->bomb, errname(errno));
		return;
	}
	char name[BOMB_NAME + 1];
	memset(name, 'b', BOMB_NAME);
	name[BOMB_NAME] = '\0';
	unsigned long n = 0;
	int e = 0;
	for (; n < BOMB_ENTRIES; n++) {
		snprintf(name + BOMB_NAME - 8, 9, "%08lu", n);
		int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		if (fd < 0) {
			e = errno;
			break;
		}
		close(fd);
	}
	close(dfd);
	if (n < BOMB_ENTRIES)
		set(r, "contained", "the storage stopped the bomb at %lu entries: %s", n,
		    errname(e));
	else
		set(r, "contained", "planted %lu entries of %d-byte names in `%s` for the host", n,
		    BOMB_NAME, c->bomb);
}

/* ---- devices, privileges --------------------------------------------------------------- */

static void p_mknod(const struct ctx *c, struct res *r)
{
	long rc = mknod("/tmp/msb-escape-sda", S_IFBLK | 0600, makedev(8, 0));
	if (rc == 0)
		unlink("/tmp/msb-escape-sda");
	must_fail(r, rc, "mknod a block device");
}

static void p_dev_nodes(const struct ctx *c, struct res *r)
{
	const char *nodes[] = {"/dev/mem",     "/dev/kmem",    "/dev/port", "/dev/sda",
			       "/dev/vda",     "/dev/nvme0n1", "/dev/kvm",  "/dev/fuse",
			       "/dev/net/tun", "/dev/dm-0"};
	for (size_t i = 0; i < sizeof(nodes) / sizeof(nodes[0]); i++) {
		int fd = open(nodes[i], O_RDONLY | O_CLOEXEC | O_NONBLOCK);
		if (fd >= 0) {
			close(fd);
			set(r, "escaped", "opened `%s`", nodes[i]);
			return;
		}
	}
	set(r, "blocked", "no host device node opens (/dev/mem, disks, kvm, fuse, tun)");
}

static bool status_field(const char *key, char *out, size_t size)
{
	FILE *f = fopen("/proc/self/status", "re");
	if (!f)
		return false;
	char line[256];
	bool found = false;
	size_t kl = strlen(key);
	while (!found && fgets(line, sizeof(line), f)) {
		if (strncmp(line, key, kl) == 0 && line[kl] == ':') {
			char *v = line + kl + 1;
			while (*v == ' ' || *v == '\t')
				v++;
			v[strcspn(v, "\n")] = '\0';
			snprintf(out, size, "%s", v);
			found = true;
		}
	}
	fclose(f);
	return found;
}

static void p_caps(const struct ctx *c, struct res *r)
{
	const char *keys[] = {"CapEff", "CapPrm", "CapBnd", "CapAmb", "CapInh"};
	for (size_t i = 0; i < 5; i++) {
		char v[64] = "";
		if (!status_field(keys[i], v, sizeof(v))) {
			set(r, "error", "no %s in /proc/self/status", keys[i]);
			return;
		}
		if (strspn(v, "0") != strlen(v)) {
			set(r, "escaped", "%s is %s", keys[i], v);
			return;
		}
	}
	set(r, "blocked", "every capability set is empty, the bounding set included");
}

static void p_nnp(const struct ctx *c, struct res *r)
{
	int v = prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0);
	if (v == 1)
		set(r, "blocked", "no_new_privs is set: a setuid binary gains nothing");
	else
		set(r, "escaped", "no_new_privs is %d: a setuid binary would raise privileges", v);
}

static void p_setuid_bin(const struct ctx *c, struct res *r)
{
	/* Make a setuid copy of ourselves and check the kernel does not grant it. */
	char self[512];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0) {
		set(r, "error", "readlink /proc/self/exe: %s", errname(errno));
		return;
	}
	self[n] = '\0';
	if (chmod(self, 04755) < 0) {
		set(r, "blocked", "chmod u+s: %s", errname(errno));
		return;
	}
	int pipefd[2];
	if (pipe(pipefd) < 0) {
		set(r, "error", "pipe: %s", errname(errno));
		return;
	}
	pid_t pid = fork();
	if (pid == 0) {
		dup2(pipefd[1], 1);
		char *argv[] = {self, (char *)"--caps-only", NULL};
		execv(self, argv);
		_exit(127);
	}
	close(pipefd[1]);
	char buf[128] = {0};
	ssize_t got = read(pipefd[0], buf, sizeof(buf) - 1);
	close(pipefd[0]);
	waitpid(pid, NULL, 0);
	chmod(self, 0755);
	if (got <= 0)
		set(r, "error", "the setuid copy printed nothing");
	else if (strspn(buf, "0\n") == strlen(buf))
		set(r, "blocked", "a setuid-root binary ran with no capabilities");
	else
		set(r, "escaped", "a setuid-root binary ran with CapEff %s", buf);
}

static void p_seccomp(const struct ctx *c, struct res *r)
{
	char v[16] = "";
	if (status_field("Seccomp", v, sizeof(v)) && strcmp(v, "2") == 0)
		set(r, "blocked", "a seccomp filter is installed");
	else
		set(r, "escaped", "Seccomp is `%s`: no filter", v);
}

/* ---- time and hostname ------------------------------------------------------------------ */

static void p_settimeofday(const struct ctx *c, struct res *r)
{
	struct timeval tv;
	gettimeofday(&tv, NULL);
	tv.tv_sec += 3600;
	must_fail(r, settimeofday(&tv, NULL), "settimeofday(+1 h)");
}

static void p_clock_settime(const struct ctx *c, struct res *r)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 3600;
	must_fail(r, clock_settime(CLOCK_REALTIME, &ts), "clock_settime(+1 h)");
}

static void p_adjtimex(const struct ctx *c, struct res *r)
{
	struct timex tx = {0};
	tx.modes = ADJ_SETOFFSET;
	tx.time.tv_sec = 3600;
	must_fail(r, adjtimex(&tx), "adjtimex(ADJ_SETOFFSET +1 h)");
}

static void p_sethostname(const struct ctx *c, struct res *r)
{
	must_fail(r, sethostname("msb-escaped", 11), "sethostname");
}

static void p_setdomainname(const struct ctx *c, struct res *r)
{
	must_fail(r, setdomainname("msb-escaped", 11), "setdomainname");
}

/* ---- the table ------------------------------------------------------------------------ */

/* ---- link swaps in the storage base (issue 15) ---------------------------------
 *
 * The host works on names inside the storage base, a host directory the
 * guest writes: it binds the native host-tools socket there, writes files,
 * removes trees, and removes the whole base at disposal. Any of those that
 * followed a link, or went by path, would let the guest aim it at a host
 * file. This probe swaps every name the host is about to use for a link to a
 * host file (and a host directory) while the host does those things (`msb
 * conformance --escape` runs it in an exec of its own and works meanwhile),
 * and leaves links behind for the disposal. It cannot see the host: the
 * verdict is the host's check that its sentinel is unchanged
 * (host:link-swap-sentinel, host:disposal-sentinel).
 */

#define SWAP_SOCKET ".msb-host-tools.sock"
#define SWAP_WRITE "swap-target.txt"
#define SWAP_TREE "swap-tree"
#define SWAP_KEEP "swap-keep"

static double mono_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* The socket name, as fast as a guest can: swapped the moment it appears.
 * Runs in a child; returns the number of swaps. */
static unsigned long swap_socket(const char *target, double end)
{
	unsigned long swaps = 0;
	struct stat st;
	for (unsigned long i = 0;; i++) {
		if ((i & 1023) == 0 && mono_s() >= end)
			break;
		if (lstat(SWAP_SOCKET, &st) < 0 || !S_ISSOCK(st.st_mode))
			continue;
		unlink(SWAP_SOCKET);
		if (symlink(target, SWAP_SOCKET) == 0) {
			swaps++;
			for (volatile int k = 0; k < 20000; k++)
				;
			unlink(SWAP_SOCKET);
		}
	}
	return swaps;
}

/* A tree for the host's recursive removal, its middle swapped for a link to
 * the host directory and back. */
static void swap_tree(const char *dir)
{
	mkdir(SWAP_TREE, 0755);
	mkdir(SWAP_TREE "/a", 0755);
	mkdir(SWAP_TREE "/a/b", 0755);
	close(open(SWAP_TREE "/a/b/f", O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
	symlink(dir, SWAP_TREE "/a/b/up");
	rename(SWAP_TREE "/a", SWAP_TREE "/a2");
	symlink(dir, SWAP_TREE "/a");
	unlink(SWAP_TREE "/a");
	rename(SWAP_TREE "/a2", SWAP_TREE "/a");
}

/* What the disposal removes after the guest is gone: links out, a dangling
 * one, and a directory closed to everyone holding another. */
static int plant_for_disposal(const struct ctx *c)
{
	int bad = 0;
	mkdir(SWAP_KEEP, 0755);
	mkdir(SWAP_KEEP "/closed", 0755);
	bad += symlink(c->swap_dir, SWAP_KEEP "/dir-link") < 0;
	bad += symlink(c->swap_target, SWAP_KEEP "/file-link") < 0;
	bad += symlink("/nonexistent/msb-escape", SWAP_KEEP "/dangling") < 0;
	bad += symlink(c->swap_dir, SWAP_KEEP "/closed/dir-link") < 0;
	bad += chmod(SWAP_KEEP "/closed", 0) < 0;
	return bad;
}

static void p_link_swap(const struct ctx *c, struct res *r)
{
	if (!c->swap_target || !c->swap_dir || !c->swap_base || c->swap_seconds <= 0) {
		set(r, "error", "needs --swap-base, --swap-target, --swap-dir and --swap-seconds");
		return;
	}
	if (chdir(c->swap_base) < 0) {
		set(r, "error", "chdir `%s`: %s", c->swap_base, errname(errno));
		return;
	}
	double end = mono_s() + c->swap_seconds;
	int pfd[2];
	if (pipe(pfd) < 0) {
		set(r, "error", "pipe: %s", errname(errno));
		return;
	}
	pid_t pid = fork();
	if (pid == 0) {
		close(pfd[0]);
		unsigned long n = swap_socket(c->swap_target, end);
		ssize_t w = write(pfd[1], &n, sizeof(n));
		_exit(w == (ssize_t)sizeof(n) ? 0 : 1);
	}
	close(pfd[1]);
	/* Every name the host creates here is swapped for a link as soon as it
	 * shows: its temporaries, and the file it writes. */
	int in = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (in >= 0)
		inotify_add_watch(in, ".", IN_CREATE | IN_MOVED_TO);
	unsigned long temps = 0, writes = 0, trees = 0;
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	while (mono_s() < end) {
		/* The write target flips between a link and nothing. */
		unlink(SWAP_WRITE);
		if (symlink(c->swap_target, SWAP_WRITE) == 0)
			writes++;
		ssize_t n = in >= 0 ? read(in, buf, sizeof(buf)) : -1;
		for (ssize_t off = 0; n > 0 && off < n;) {
			const struct inotify_event *ev = (const void *)(buf + off);
			off += (ssize_t)(sizeof(*ev) + ev->len);
			if (!ev->len || strcmp(ev->name, SWAP_SOCKET) == 0)
				continue;
			/* Not our own links: only what the host made. */
			struct stat st;
			if (lstat(ev->name, &st) < 0 || S_ISLNK(st.st_mode))
				continue;
			if (strncmp(ev->name, ".msb-", 5) == 0 ||
			    strcmp(ev->name, SWAP_WRITE) == 0) {
				unlink(ev->name);
				if (symlink(c->swap_target, ev->name) == 0)
					temps++;
			}
		}
		unlink(SWAP_WRITE);
		swap_tree(c->swap_dir);
		trees++;
	}
	if (in >= 0)
		close(in);
	unsigned long sockets = 0;
	ssize_t got = read(pfd[0], &sockets, sizeof(sockets));
	close(pfd[0]);
	waitpid(pid, NULL, 0);
	if (got != (ssize_t)sizeof(sockets))
		sockets = 0;
	int bad = plant_for_disposal(c);
	unsigned long all = sockets + writes + temps + trees;
	set(r, all && !bad ? "blocked" : "error",
	    "%.1f s of swaps: the host-tools socket %lu times, the written file %lu, the host's "
	    "temporary names %lu, the removed tree %lu; %s (the host checks its sentinel)",
	    c->swap_seconds, sockets, writes, temps, trees,
	    bad ? "some links for the disposal could not be planted"
		: "links to the host left for the disposal");
}

static const struct probe probes[] = {
	{"read-host-canary", "a host file outside the sandbox, by its host path", p_canary},
	{"write-host-canary", "creating a file at a host path the test made", p_canary_write},
	{"read-other-sandbox", "another sandbox's storage base, by its host path", p_neighbour},
	{"read-via-proc-root", "every visible /proc/PID/root, for the host's canary", p_proc_root},
	{"list-host-homes", "/root, /home, /var/lib, /run of the host", p_host_home},
	{"read-etc-shadow", "the host's password hashes", p_shadow},
	{"open-by-handle", "the shocker escape: a host inode by file handle", p_handle},
	{"chroot-out", "chroot needs CAP_SYS_CHROOT, the classic way out of a jail", p_chroot},
	{"write-agent-binary", "runc CVE-2019-5736: the runtime's binary via /proc/1/exe",
	 p_exe_write},
	{"inherited-fds", "a descriptor the agent leaked is a door to the host", p_fds},
	{"pid1-is-own-agent", "a pid namespace: PID 1 is the sandbox's agent, not the host's init",
	 p_pid1},
	{"host-pids-hidden", "the host's processes (msb-shim, a host sleeper) must not be visible",
	 p_host_pids},
	{"kallsyms-addresses", "kernel addresses defeat KASLR", p_kallsyms},
	{"add-key", "the kernel keyring is not namespaced: keys of the host", p_add_key},
	{"keyctl-session", "joining a session keyring reaches the host's keys", p_keyctl},
	{"proc-keys", "/proc/keys lists keys the caller can view", p_proc_keys},
	{"sysrq-trigger", "one write reboots or crashes the host", p_sysrq},
	{"core-pattern", "a writable core_pattern runs a host command as root", p_core_pattern},
	{"proc-kcore", "the host kernel's memory", p_kcore},
	{"sys-uevent-helper", "a writable uevent_helper runs a host command as root", p_sys_write},
	{"cgroup-write", "moving out of, or raising, the sandbox's cgroup", p_cgroup_write},
	{"dmesg", "the kernel log leaks addresses and host activity", p_dmesg},
	{"uid-not-host-root", "guest root must not be host root", p_uid_map},
	{"mount-tmpfs", "mounting is how a guest rearranges its view of the host", p_mount_tmpfs},
	{"remount-usr-rw", "the host's /usr is bound read-only", p_remount},
	{"unmount-proc-mask", "removing a /proc mask exposes what it hides", p_umount_mask},
	{"unshare-user-ns", "a nested user namespace regains every capability", p_unshare_user},
	{"clone-user-ns", "the same through clone(CLONE_NEWUSER)", p_clone_newuser},
	{"setns-pid1", "joining another namespace by its /proc entry", p_setns},
	{"pivot-root", "changing the root filesystem", p_pivot_root},
	{"ptrace-pid1", "tracing the agent takes over what it can do", p_ptrace},
	{"process-vm-pid1", "reading the agent's memory", p_process_vm},
	{"proc-pid1-mem", "the agent's memory through /proc", p_proc_mem},
	{"kill-pid1", "a workload must not be able to kill its agent", p_kill_pid1},
	{"pid1-oom-score-adj", "raising the agent's OOM score gets it killed by a memory fill",
	 p_pid1_oom_score},
	{"pid1-environ", "the agent's environment", p_pid1_environ},
	{"pid1-maps", "the agent's memory layout, the first step to its memory", p_pid1_maps},
	{"init-module", "loading kernel code", p_init_module},
	{"finit-module", "loading kernel code from a file", p_finit_module},
	{"kexec-load", "replacing the running kernel", p_kexec},
	{"bpf", "kernel programs and maps: a large attack surface", p_bpf},
	{"perf-event-open", "performance counters leak and have had exploitable bugs", p_perf},
	{"userfaultfd", "a tool for winning kernel races", p_userfaultfd},
	{"io-uring", "a large, frequently exploited kernel interface", p_io_uring},
	{"reboot", "rebooting the host", p_reboot},
	{"swapon", "host swap configuration", p_swapon},
	{"iopl", "raw I/O port access", p_iopl},
	{"raw-socket", "crafting packets (spoofing) needs CAP_NET_RAW", p_raw},
	{"packet-socket", "sniffing and injecting frames", p_packet},
	{"outbound-tcp", "closed egress: no route out", p_outbound},
	{"metadata-address", "the cloud metadata service hands out credentials", p_metadata},
	{"host-loopback-tcp", "a service on the host's loopback", p_host_tcp},
	{"host-abstract-socket", "abstract unix sockets belong to the network namespace",
	 p_abstract},
	{"shim-socket", "the shim's control socket would let the guest drive the host side",
	 p_shim_sock},
	{"proxy-port", "the egress proxy must not tunnel to loopback or unlisted hosts", p_proxy},
	{"signal-host-process", "a process outside the sandbox, by its host pid", p_signal_host},
	{"pidfd-host-process", "a host process by pidfd", p_pidfd},
	{"raise-rlimit-nofile", "hard rlimits only go down", p_rlimit_nofile},
	{"raise-rlimit-nproc", "hard rlimits only go down", p_rlimit_nproc},
	{"raise-rlimit-memlock", "hard rlimits only go down", p_rlimit_core},
	{"mknod-block-device", "a device node is raw access to host hardware", p_mknod},
	{"host-device-nodes", "the minimal /dev holds no host disk, memory or kvm", p_dev_nodes},
	{"capabilities-empty", "workloads run with every capability set empty", p_caps},
	{"no-new-privs", "setuid binaries must not raise privileges", p_nnp},
	{"setuid-binary", "a setuid-root copy of a binary runs without capabilities", p_setuid_bin},
	{"seccomp-filter", "the syscall filter behind half of these refusals", p_seccomp},
	{"settimeofday", "the clock is not namespaced: a change moves the host's", p_settimeofday},
	{"clock-settime", "the same through clock_settime", p_clock_settime},
	{"adjtimex", "the same through adjtimex", p_adjtimex},
	{"sethostname", "the hostname must not leak out of the UTS namespace", p_sethostname},
	{"setdomainname", "the same for the NIS domain name", p_setdomainname},
	{"listing-bomb", "a guest listing the host reads must not make it allocate without bound",
	 p_listing_bomb},
	/* Last: a limit that does not hold could take the sandbox down. */
	{"fill-memory", "memory past the limit starves the host", p_memory},
	{"fork-bomb", "processes past the limit starve the host", p_pids},
	{"fill-writable-layer", "disk past the writable limit fills the host", p_disk},
	{"fill-dev-shm", "/dev/shm is memory: it must count against the limit", p_shm},
	/* Very last: where it works it takes the sandbox, and this run, down. */
	{"signal-pid1", "a signal the agent catches must not stop it", p_signal_pid1},
};

/* Probes run only when named with --only (and given --swap-seconds): the host
 * runs each in an exec of its own and works on the sandbox while it runs. */
static const struct probe alone_probes[] = {
	{"link-swap-storage-base",
	 "the host's syscalls on names in the storage base must never follow a link the guest "
	 "swapped in",
	 p_link_swap},
};

static void json_str(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;
		if (ch == '"' || ch == '\\')
			printf("\\%c", ch);
		else if (ch < 32)
			printf("\\u%04x", ch);
		else
			putchar(ch);
	}
	putchar('"');
}

/* `name` is one of the comma-separated names in `list`. */
static bool listed(const char *list, const char *name)
{
	size_t n = strlen(name);
	for (const char *p = list; p && *p;) {
		const char *comma = strchr(p, ',');
		size_t len = comma ? (size_t)(comma - p) : strlen(p);
		if (len == n && strncmp(p, name, n) == 0)
			return true;
		p = comma ? comma + 1 : NULL;
	}
	return false;
}

static void report(const struct ctx *c, const struct probe *p)
{
	struct res r = {"error", "the probe did not report"};
	p->run(c, &r);
	printf("{\"probe\":");
	json_str(p->name);
	printf(",\"outcome\":");
	json_str(r.outcome);
	printf(",\"detail\":");
	json_str(r.detail);
	printf(",\"why\":");
	json_str(p->why);
	printf("}\n");
}

static uint64_t num(const char *s)
{
	return s ? strtoull(s, NULL, 10) : 0;
}

int main(int argc, char **argv)
{
	if (argc == 2 && strcmp(argv[1], "--caps-only") == 0) {
		char v[64] = "";
		status_field("CapEff", v, sizeof(v));
		printf("%s\n", v);
		return 0;
	}
	if (argc == 2 && strcmp(argv[1], "--list") == 0) {
		for (size_t i = 0; i < sizeof(probes) / sizeof(probes[0]); i++)
			printf("%s\n", probes[i].name);
		for (size_t i = 0; i < sizeof(alone_probes) / sizeof(alone_probes[0]); i++)
			printf("%s\n", alone_probes[i].name);
		return 0;
	}
	struct ctx c = {0};
	const char *only = NULL; /* a comma-separated subset, for diagnosis */
	for (int i = 1; i + 1 < argc; i += 2) {
		const char *k = argv[i], *v = argv[i + 1];
		if (!strcmp(k, "--canary"))
			c.canary = v;
		else if (!strcmp(k, "--canary-write"))
			c.canary_w = v;
		else if (!strcmp(k, "--neighbour"))
			c.neighbour = v;
		else if (!strcmp(k, "--shim-sock"))
			c.shim_sock = v;
		else if (!strcmp(k, "--abstract"))
			c.abstract = v;
		else if (!strcmp(k, "--tcp-port"))
			c.tcp_port = (int)num(v);
		else if (!strcmp(k, "--host-pid"))
			c.host_pid = (int)num(v);
		else if (!strcmp(k, "--memory"))
			c.memory = num(v);
		else if (!strcmp(k, "--pids"))
			c.pids = num(v);
		else if (!strcmp(k, "--writable"))
			c.writable = num(v);
		else if (!strcmp(k, "--only"))
			only = v;
		else if (!strcmp(k, "--swap-base"))
			c.swap_base = v;
		else if (!strcmp(k, "--swap-target"))
			c.swap_target = v;
		else if (!strcmp(k, "--swap-dir"))
			c.swap_dir = v;
		else if (!strcmp(k, "--swap-seconds"))
			c.swap_seconds = strtod(v, NULL);
		else if (!strcmp(k, "--bomb"))
			c.bomb = v;
		else if (!strcmp(k, "--init"))
			c.init = v;
	}
	if (!c.canary || !c.canary_w || !c.neighbour || !c.shim_sock || !c.abstract) {
		fprintf(stderr, "usage: msb-escape-probe --canary P --canary-write P --neighbour P "
				"--shim-sock P --abstract NAME --tcp-port N --host-pid N "
				"[--memory B --pids N --writable B --bomb DIR] [--init WORD] "
				"[--only NAMES] "
				"[--swap-base D "
				"--swap-target P --swap-dir D --swap-seconds S]\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGPIPE, SIG_IGN);
	for (size_t i = 0; i < sizeof(probes) / sizeof(probes[0]); i++)
		if (!only || listed(only, probes[i].name))
			report(&c, &probes[i]);
	for (size_t i = 0; i < sizeof(alone_probes) / sizeof(alone_probes[0]); i++)
		if (only && listed(only, alone_probes[i].name) && c.swap_seconds > 0)
			report(&c, &alone_probes[i]);
	return 0;
}
