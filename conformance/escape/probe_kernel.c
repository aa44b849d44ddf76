/* SPDX-License-Identifier: Apache-2.0 */
/* msb-escape-probe's probes of mounting and namespaces, ptrace and process_vm on PID 1, kernel
 * facilities (docs/security.md). */
#include "probe.h"

/* ---- mounting and namespaces ------------------------------------------------------ */

void p_mount_tmpfs(const struct ctx *c, struct res *r)
{
	must_fail(r, mount("none", "/tmp", "tmpfs", 0, NULL), "mount tmpfs");
}

void p_remount(const struct ctx *c, struct res *r)
{
	must_fail(r, mount(NULL, "/usr", NULL, MS_REMOUNT | MS_BIND, NULL), "remount /usr rw");
}

void p_umount_mask(const struct ctx *c, struct res *r)
{
	must_fail(r, umount2("/proc/kcore", MNT_DETACH), "umount the /proc/kcore mask");
}

/* In a child: unshare, and when that works try what it was for. */
void p_unshare_user(const struct ctx *c, struct res *r)
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

void p_clone_newuser(const struct ctx *c, struct res *r)
{
	long rc = syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, NULL, NULL, NULL, NULL);
	if (rc == 0)
		_exit(0);
	if (rc > 0)
		waitpid((pid_t)rc, NULL, 0);
	must_fail(r, rc, "clone(CLONE_NEWUSER)");
}

void p_setns(const struct ctx *c, struct res *r)
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

void p_pivot_root(const struct ctx *c, struct res *r)
{
	must_fail(r, syscall(SYS_pivot_root, "/tmp", "/tmp"), "pivot_root");
}

/* ---- ptrace and process_vm on PID 1 ------------------------------------------------ */

void p_ptrace(const struct ctx *c, struct res *r)
{
	long rc = syscall(SYS_ptrace, 16 /* PTRACE_ATTACH */, 1, 0, 0);
	must_fail(r, rc, "ptrace(ATTACH, 1)");
	/* Never leave PID 1 stopped under this probe for the rest of the run. */
	if (rc == 0) {
		waitpid(1, NULL, __WALL);
		syscall(SYS_ptrace, 17 /* PTRACE_DETACH */, 1, 0, 0);
	}
}

void p_process_vm(const struct ctx *c, struct res *r)
{
	char buf[8];
	struct iovec local = {buf, sizeof(buf)}, remote = {(void *)0x400000, sizeof(buf)};
	must_fail(r, syscall(SYS_process_vm_readv, 1, &local, 1, &remote, 1, 0),
		  "process_vm_readv(1)");
}

void p_proc_mem(const struct ctx *c, struct res *r)
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

void p_kill_pid1(const struct ctx *c, struct res *r)
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

/* ---- kernel facilities -------------------------------------------------------------- */

void p_init_module(const struct ctx *c, struct res *r)
{
	must_fail(r, syscall(SYS_init_module, "", 0, ""), "init_module");
}

void p_finit_module(const struct ctx *c, struct res *r)
{
	must_fail(r, syscall(SYS_finit_module, 0, "", 0), "finit_module");
}

void p_kexec(const struct ctx *c, struct res *r)
{
	must_fail(r, syscall(SYS_kexec_load, 0, 0, NULL, 0), "kexec_load");
}

void p_bpf(const struct ctx *c, struct res *r)
{
	/* BPF_MAP_CREATE of a one-entry array: the smallest valid request. */
	uint32_t attr[32] = {2 /* ARRAY */, 4, 4, 1};
	long rc = syscall(SYS_bpf, 0, attr, sizeof(attr));
	if (rc >= 0)
		close((int)rc);
	must_fail(r, rc, "bpf(MAP_CREATE)");
}

void p_perf(const struct ctx *c, struct res *r)
{
	uint32_t attr[32] = {1 /* SOFTWARE */, 112 /* size */};
	long rc = syscall(SYS_perf_event_open, attr, 0, -1, -1, 0);
	if (rc >= 0)
		close((int)rc);
	must_fail(r, rc, "perf_event_open");
}

void p_userfaultfd(const struct ctx *c, struct res *r)
{
	long rc = syscall(SYS_userfaultfd, O_CLOEXEC);
	if (rc >= 0)
		close((int)rc);
	must_fail(r, rc, "userfaultfd");
}

void p_io_uring(const struct ctx *c, struct res *r)
{
	uint32_t params[30] = {0};
	long rc = syscall(SYS_io_uring_setup, 1, params);
	if (rc >= 0)
		close((int)rc);
	must_fail(r, rc, "io_uring_setup");
}

void p_reboot(const struct ctx *c, struct res *r)
{
	/* LINUX_REBOOT_CMD_CAD_OFF: harmless even where it works. */
	must_fail(r, syscall(SYS_reboot, 0xfee1dead, 672274793, 0, NULL), "reboot(CAD_OFF)");
}

void p_swapon(const struct ctx *c, struct res *r)
{
	must_fail(r, syscall(SYS_swapon, "/dev/null", 0), "swapon");
}

void p_iopl(const struct ctx *c, struct res *r)
{
#ifdef SYS_iopl
	must_fail(r, syscall(SYS_iopl, 3), "iopl(3)");
#else
	set(r, "blocked", "no iopl on this architecture");
#endif
}
