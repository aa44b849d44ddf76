/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The VMM's jail, in the manner of Firecracker's jailer: the VMM process is
 * cloned into new mount, pid, net, ipc and uts namespaces (and its cgroup),
 * sees a read-only tmpfs root holding only /usr (read-only: its binary,
 * libraries and firmware), its kernel, initramfs and disk (read-only binds of
 * the files), its run directory (the serial socket), a /dev of null, zero,
 * random, urandom (and kvm, owned by the jail's uid, under KVM) and its own
 * /proc; it has no network interface but a down loopback; it runs as an
 * unprivileged uid with no capabilities and no_new_privs, dies with the
 * shim (parent-death signal), and then installs qemu's own seccomp filter
 * (`-sandbox on`, vmm_qemu.c). Root only: docs/internals/vm.md, "The jail".
 */
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>

#include <linux/sched.h>

#include "util/syscalls.h"
#include "vmm.h"

#ifndef CLONE_INTO_CGROUP
#define CLONE_INTO_CGROUP 0x200000000ULL
#endif

struct jail_ctx {
	const msb_vmm_config *c;
	char **argv;
	int sync_fd;
	char root[4096];
};

static _Noreturn void child_fail(int fd, int e, const char *what)
{
	char msg[512];
	int n = snprintf(msg, sizeof(msg), "%s: %s", what, strerror(e));
	if (n > 0) {
		ssize_t w = send(fd, msg, (size_t)n, MSG_NOSIGNAL);
		(void)w;
	}
	_exit(1);
}

#define TRY(fd, call, what)                                                                        \
	do {                                                                                       \
		if ((call) < 0)                                                                    \
			child_fail(fd, errno, what);                                               \
	} while (0)

static void jpath(const struct jail_ctx *j, const char *rel, char *out, size_t size)
{
	snprintf(out, size, "%s/%s", j->root, rel);
}

static void bind_ro(const struct jail_ctx *j, const char *src, const char *rel, bool file,
		    unsigned long extra)
{
	char dst[4200];
	jpath(j, rel, dst, sizeof(dst));
	if (file) {
		int fd = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444);
		if (fd < 0)
			child_fail(j->sync_fd, errno, rel);
		close(fd);
	} else if (mkdir(dst, 0755) < 0 && errno != EEXIST) {
		child_fail(j->sync_fd, errno, rel);
	}
	TRY(j->sync_fd, mount(src, dst, NULL, MS_BIND | MS_REC, NULL), src);
	TRY(j->sync_fd,
	    mount(NULL, dst, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | extra,
		  NULL),
	    src);
}

static void node(const struct jail_ctx *j, const char *rel, unsigned maj, unsigned min, mode_t mode,
		 bool own)
{
	char p[4200];
	jpath(j, rel, p, sizeof(p));
	TRY(j->sync_fd, mknod(p, S_IFCHR | mode, makedev(maj, min)), rel);
	TRY(j->sync_fd, chmod(p, mode), rel);
	if (own)
		TRY(j->sync_fd, chown(p, j->c->uid, j->c->gid), rel);
}

static _Noreturn void child_main(struct jail_ctx *j)
{
	const msb_vmm_config *c = j->c;
	int fd = j->sync_fd;
	TRY(fd, prctl(PR_SET_PDEATHSIG, SIGKILL), "parent-death signal");
	char go;
	if (recv(fd, &go, 1, 0) != 1)
		_exit(1); /* the shim went away, or refused */

	umask(022); /* the jail's own directories are searchable by its uid */
	TRY(fd, mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), "private mounts");
	snprintf(j->root, sizeof(j->root), "%s/root", c->jail_dir);
	TRY(fd, mount("tmpfs", j->root, "tmpfs", MS_NOSUID, "size=1m,mode=0755"), "jail root");
	static const char *const dirs[] = {"vm", "run", "run/vm", "dev", "proc", "etc", "tmp"};
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		char p[4200];
		jpath(j, dirs[i], p, sizeof(p));
		TRY(fd, mkdir(p, 0755), dirs[i]);
	}
	bind_ro(j, "/usr", "usr", false, 0);
	/* The top-level links (or directories) of the host's layout. */
	static const char *const top[] = {"bin", "sbin", "lib", "lib64", "lib32", "libx32"};
	for (size_t i = 0; i < sizeof(top) / sizeof(top[0]); i++) {
		char host[32], target[256], p[4200];
		snprintf(host, sizeof(host), "/%s", top[i]);
		struct stat st;
		if (lstat(host, &st) < 0)
			continue;
		if (S_ISLNK(st.st_mode)) {
			ssize_t n = readlink(host, target, sizeof(target) - 1);
			if (n <= 0)
				continue;
			target[n] = '\0';
			jpath(j, top[i], p, sizeof(p));
			TRY(fd, symlink(target, p), top[i]);
		} else if (S_ISDIR(st.st_mode)) {
			bind_ro(j, host, top[i], false, 0);
		}
	}
	if (access("/etc/ld.so.cache", R_OK) == 0)
		bind_ro(j, "/etc/ld.so.cache", "etc/ld.so.cache", true, MS_NOEXEC);
	bind_ro(j, c->kernel, "vm/kernel", true, MS_NOEXEC);
	bind_ro(j, c->initrd, "vm/initrd", true, MS_NOEXEC);
	bind_ro(j, c->disk, "vm/disk", true, MS_NOEXEC);
	char run[4200], p[4200];
	snprintf(run, sizeof(run), "%s/run", c->jail_dir);
	jpath(j, "run/vm", p, sizeof(p));
	TRY(fd, mount(run, p, NULL, MS_BIND, NULL), "run dir");
	TRY(fd, mount(NULL, p, NULL, MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL),
	    "run dir");
	jpath(j, "dev", p, sizeof(p));
	TRY(fd, mount("tmpfs", p, "tmpfs", MS_NOSUID | MS_NOEXEC, "size=64k,mode=0755"), "/dev");
	node(j, "dev/null", 1, 3, 0666, false);
	node(j, "dev/zero", 1, 5, 0666, false);
	node(j, "dev/random", 1, 8, 0666, false);
	node(j, "dev/urandom", 1, 9, 0666, false);
	if (c->kvm)
		node(j, "dev/kvm", 10, 232, 0600, true);
	TRY(fd, mount(NULL, p, NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NOEXEC, "size=64k"),
	    "/dev read-only");
	jpath(j, "proc", p, sizeof(p));
	TRY(fd, mount("proc", p, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL), "/proc");

	TRY(fd, chdir(j->root), "jail root");
	int pr = msb__sys_pivot_root(".", ".");
	if (pr < 0)
		child_fail(fd, -pr, "pivot_root");
	TRY(fd, umount2(".", MNT_DETACH), "detach the old root");
	TRY(fd, chdir("/"), "chdir /");
	TRY(fd, mount(NULL, "/", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID, NULL),
	    "read-only root");
	TRY(fd, sethostname("vmm", 3), "hostname");

	struct rlimit core = {0, 0}, nofile = {4096, 4096};
	setrlimit(RLIMIT_CORE, &core);
	setrlimit(RLIMIT_NOFILE, &nofile);
	TRY(fd, setgroups(0, NULL), "setgroups");
	TRY(fd, setresgid(c->gid, c->gid, c->gid), "setresgid");
	TRY(fd, setresuid(c->uid, c->uid, c->uid), "setresuid");
	/* The id change cleared it. */
	TRY(fd, prctl(PR_SET_PDEATHSIG, SIGKILL), "parent-death signal");
	TRY(fd, prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs");
	int sr = msb_vmm__seccomp();
	if (sr < 0)
		child_fail(fd, -sr, "seccomp filter");

	int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (null < 0 || dup2(null, 0) < 0 || dup2(c->console_fd, 1) < 0 ||
	    dup2(c->console_fd, 2) < 0)
		child_fail(fd, errno, "stdio");
	msb__sys_close_range(3, ~0u, CLOSE_RANGE_CLOEXEC);
	/* The saved state to restore stays open, at the number argv names. */
	if (c->incoming && fcntl(c->incoming_fd, F_SETFD, 0) < 0)
		child_fail(fd, errno, "the saved state's descriptor");
	/* So does the guest's RAM file (a sealed memfd on a restore). */
	if (c->ram && fcntl(c->ram_fd, F_SETFD, 0) < 0)
		child_fail(fd, errno, "the guest RAM's descriptor");
	/* fd (the sync socket) is close-on-exec too: its end of file tells the
	 * shim the exec happened. */
	char *envp[] = {(char *)"PATH=/usr/bin", NULL};
	execve(c->binary, j->argv, envp);
	child_fail(fd, errno, c->binary);
}

int msb_vmm__start(const msb_vmm_ops *ops, const msb_vmm_config *c, msb_vmm *out, msb_error **err)
{
	if (strncmp(c->binary, "/usr/", 5) != 0)
		return msb_error_set(err, MSB_E_VALUE,
				     "vmm: `%s` is outside /usr: the jail shows /usr only",
				     c->binary);
	_cleanup_strv_ char **argv = NULL;
	int r = ops->argv(c, &argv);
	if (r < 0)
		return msb__error_errno(err, r, "vmm: %s arguments", ops->name);
	bool v1 = c->cgroup && msb_ns__cgroup_version(c->cgroup) == 1;
	if (c->cgroup && !v1 && (r = msb_ns__cgroup_setup(c->cgroup, err)) < 0)
		return r;
	int cgroup_fd = c->cgroup ? msb_ns__cgroup_clone_fd(c->cgroup) : -1;
	int sp[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
		return msb__error_errno(err, -errno, "vmm: socketpair");
	struct jail_ctx j = {.c = c, .argv = argv, .sync_fd = sp[1]};
	uint64_t flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS |
			 CLONE_PIDFD | (cgroup_fd >= 0 ? CLONE_INTO_CGROUP : 0);
	int pidfd = -1;
	pid_t pid = msb__sys_clone3(flags, SIGCHLD, cgroup_fd, &pidfd);
	if (pid == 0) {
		close(sp[0]);
		child_main(&j);
	}
	close(sp[1]);
	if (pid < 0) {
		close(sp[0]);
		return msb__error_errno(err, pid, "vmm: clone3 into the jail's namespaces");
	}
	memset(out, 0, sizeof(*out));
	out->pid = pid;
	out->pidfd = pidfd;
	msb_ns__proc_start_time(pid, &out->start_time);
	if (v1) {
		r = msb_ns__cgroup_setup(c->cgroup, err);
		if (r == 0)
			r = msb_ns__cgroup_attach(c->cgroup, pid, err);
		if (r < 0) {
			close(sp[0]);
			msb_vmm__stop(out);
			return r;
		}
	}
	char go = 'g';
	ssize_t w = send(sp[0], &go, 1, MSG_NOSIGNAL);
	(void)w;
	char msg[512];
	ssize_t n;
	do
		n = recv(sp[0], msg, sizeof(msg) - 1, 0);
	while (n < 0 && errno == EINTR);
	close(sp[0]);
	if (n > 0) {
		msg[n] = '\0';
		msb_vmm__stop(out);
		return msb_error_set(err, MSB_E_RUNTIME, "vmm jail: %s", msg);
	}
	return 0;
}

void msb_vmm__reap(msb_vmm *v)
{
	if (v->exited || v->pid <= 0)
		return;
	int status;
	while (waitpid(v->pid, &status, 0) < 0)
		if (errno != EINTR)
			return;
	v->exited = true;
	v->status = status;
	if (v->pidfd >= 0) {
		close(v->pidfd);
		v->pidfd = -1;
	}
}

void msb_vmm__stop(msb_vmm *v)
{
	if (v->exited || v->pid <= 0)
		return;
	if (v->pidfd >= 0)
		msb__sys_pidfd_send_signal(v->pidfd, SIGKILL, 0);
	msb_vmm__reap(v);
}
