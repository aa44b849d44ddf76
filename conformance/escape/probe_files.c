/* SPDX-License-Identifier: Apache-2.0 */
/* msb-escape-probe's probes of host files, other sandboxes, /proc and /sys (docs/security.md). */
#include "probe.h"

/* ---- host files and other sandboxes ------------------------------------------- */

void p_canary(const struct ctx *c, struct res *r)
{
	must_not_read(r, c->canary);
}

void p_canary_write(const struct ctx *c, struct res *r)
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

void p_neighbour(const struct ctx *c, struct res *r)
{
	must_not_read(r, c->neighbour);
}

void p_proc_root(const struct ctx *c, struct res *r)
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

/* A name the sandbox itself put there, not the host's: a vm guest's own
 * instance id (agent/vm_identity.c writes /run/msb-instance-id). */
static bool own_entry(const char *dir, const char *name)
{
	return !strcmp(name, ".") || !strcmp(name, "..") ||
	       (!strcmp(dir, "/run") && !strcmp(name, "msb-instance-id"));
}

void p_host_home(const struct ctx *c, struct res *r)
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
			if (!own_entry(dirs[i], e->d_name) && n++ == 0)
				snprintf(first, sizeof(first), "%.100s", e->d_name);
		closedir(d);
		if (n > 0) {
			set(r, "escaped", "`%s` lists %d entries (first `%s`)", dirs[i], n, first);
			return;
		}
	}
	set(r, "blocked", "/root, /home, /var/lib and /run are absent or empty");
}

void p_shadow(const struct ctx *c, struct res *r)
{
	must_not_read(r, "/etc/shadow");
}

void p_handle(const struct ctx *c, struct res *r)
{
	/* The "shocker" escape: open a file by handle on the host's filesystem. */
	struct {
		unsigned int bytes;
		int type;
		unsigned char h[8];
	} fh = {8, 1, {2, 0, 0, 0, 0, 0, 0, 0}};
	must_fail(r, syscall(SYS_open_by_handle_at, AT_FDCWD, &fh, O_RDONLY), "open_by_handle_at");
}

void p_chroot(const struct ctx *c, struct res *r)
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

void p_exe_write(const struct ctx *c, struct res *r)
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

void p_fds(const struct ctx *c, struct res *r)
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

void p_pid1(const struct ctx *c, struct res *r)
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

void p_host_pids(const struct ctx *c, struct res *r)
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

void p_kallsyms(const struct ctx *c, struct res *r)
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

void p_add_key(const struct ctx *c, struct res *r)
{
	must_fail(r, syscall(SYS_add_key, "user", "msb-escape", "x", 1, -3 /* session */),
		  "add_key");
}

void p_keyctl(const struct ctx *c, struct res *r)
{
	/* KEYCTL_JOIN_SESSION_KEYRING (1): reach the host's session keyring */
	must_fail(r, syscall(SYS_keyctl, 1, NULL), "keyctl(JOIN_SESSION_KEYRING)");
}

void p_proc_keys(const struct ctx *c, struct res *r)
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

void p_sysrq(const struct ctx *c, struct res *r)
{
	must_not_open_w(r, "/proc/sysrq-trigger");
}

void p_core_pattern(const struct ctx *c, struct res *r)
{
	must_not_open_w(r, "/proc/sys/kernel/core_pattern");
}

/* Masked, /proc/kcore is /dev/null bound over it (src/backends/ns/boundary/
 * rootfs.c, agent/pidns.c): that opens and reads nothing of the kernel. The
 * real one is a regular file (an ELF core of the kernel's memory). */
void p_kcore(const struct ctx *c, struct res *r)
{
	struct stat st;
	if (stat("/proc/kcore", &st) == 0 && S_ISCHR(st.st_mode)) {
		set(r, "blocked", "/proc/kcore is masked by the character device %u:%u",
		    major(st.st_rdev), minor(st.st_rdev));
		return;
	}
	must_not_read(r, "/proc/kcore");
}

void p_sys_write(const struct ctx *c, struct res *r)
{
	must_not_open_w(r, "/sys/kernel/uevent_helper");
}

void p_cgroup_write(const struct ctx *c, struct res *r)
{
	must_not_open_w(r, "/sys/fs/cgroup/cgroup.procs");
	if (strcmp(r->outcome, "blocked") == 0)
		must_not_open_w(r, "/sys/fs/cgroup/memory/memory.limit_in_bytes");
}

void p_dmesg(const struct ctx *c, struct res *r)
{
	char buf[64];
	must_fail(r, syscall(SYS_syslog, 3 /* READ_ALL */, buf, sizeof(buf)), "syslog(READ_ALL)");
}

void p_uid_map(const struct ctx *c, struct res *r)
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
