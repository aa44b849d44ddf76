/* SPDX-License-Identifier: Apache-2.0 */
/* Raw system calls, wrapped once (see syscalls.h). */
#include <errno.h>
#include <linux/openat2.h>
#include <linux/sched.h>
#include <signal.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "syscalls.h"

/* syscall(2) returns -1 with errno set; turn that into -errno. */
static long sysret(long r)
{
	return r < 0 ? -errno : r;
}

pid_t msb__sys_clone3(uint64_t flags, int exit_signal, int cgroup_fd, int *pidfd)
{
	struct clone_args args;
	int fd = -1;

	memset(&args, 0, sizeof(args));
	args.flags = flags;
	args.exit_signal = (uint64_t)exit_signal;
	if (flags & CLONE_PIDFD)
		args.pidfd = (uint64_t)(uintptr_t)&fd;
	if (flags & CLONE_INTO_CGROUP)
		args.cgroup = (uint64_t)cgroup_fd;
	long r = syscall(SYS_clone3, &args, sizeof(args));
	if (r < 0)
		return (pid_t)-errno;
	if (r > 0 && pidfd)
		*pidfd = fd;
	return (pid_t)r;
}

int msb__sys_pidfd_open(pid_t pid, unsigned flags)
{
	return (int)sysret(syscall(SYS_pidfd_open, pid, flags));
}

int msb__sys_pidfd_send_signal(int pidfd, int sig, unsigned flags)
{
	return (int)sysret(syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, flags));
}

int msb__sys_openat2(int dirfd, const char *path, const struct open_how *how)
{
	long r;
	do
		r = syscall(SYS_openat2, dirfd, path, how, sizeof(*how));
	while (r < 0 && errno == EINTR);
	return (int)sysret(r);
}

int msb__sys_pivot_root(const char *new_root, const char *put_old)
{
	return (int)sysret(syscall(SYS_pivot_root, new_root, put_old));
}

int msb__sys_open_tree(int dirfd, const char *path, unsigned flags)
{
	return (int)sysret(syscall(SYS_open_tree, dirfd, path, flags));
}

int msb__sys_move_mount(int from_dirfd, const char *from_path, int to_dirfd, const char *to_path,
			unsigned flags)
{
	return (int)sysret(
		syscall(SYS_move_mount, from_dirfd, from_path, to_dirfd, to_path, flags));
}

int msb__sys_mount_setattr(int dirfd, const char *path, unsigned flags, struct mount_attr *attr)
{
	return (int)sysret(
		syscall(SYS_mount_setattr, dirfd, path, flags, attr, sizeof(struct mount_attr)));
}

int msb__sys_fsopen(const char *fstype, unsigned flags)
{
	return (int)sysret(syscall(SYS_fsopen, fstype, flags));
}

int msb__sys_fsconfig(int fd, unsigned cmd, const char *key, const void *value, int aux)
{
	return (int)sysret(syscall(SYS_fsconfig, fd, cmd, key, value, aux));
}

int msb__sys_fsmount(int fd, unsigned flags, unsigned attr_flags)
{
	return (int)sysret(syscall(SYS_fsmount, fd, flags, attr_flags));
}

int msb__sys_close_range(unsigned first, unsigned last, unsigned flags)
{
	return (int)sysret(syscall(SYS_close_range, first, last, flags));
}

int msb__sys_execveat(int dirfd, const char *path, char *const argv[], char *const envp[],
		      int flags)
{
	return (int)sysret(syscall(SYS_execveat, dirfd, path, argv, envp, flags));
}

int msb__sys_landlock_create_ruleset(const void *attr, size_t size, uint32_t flags)
{
	return (int)sysret(syscall(SYS_landlock_create_ruleset, attr, size, flags));
}

int msb__sys_seccomp(unsigned op, unsigned flags, void *args)
{
	return (int)sysret(syscall(SYS_seccomp, op, flags, args));
}
