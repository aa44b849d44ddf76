/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Raw system calls that glibc does not wrap (or wraps only in newer
 * releases), each wrapped once: they return the result or -errno, retry on
 * EINTR where a retry is safe, and never touch errno on success. Callers
 * probe for a feature by calling it and looking for -ENOSYS (or the
 * call-specific "not supported" answer), never by comparing kernel versions.
 */
#ifndef MSB_UTIL_SYSCALLS_H
#define MSB_UTIL_SYSCALLS_H

#include <stdint.h>
#include <sys/types.h>

struct open_how;
struct mount_attr;

/*
 * clone3 without CLONE_VM (fork semantics: the child runs on a copy of the
 * caller's stack and returns 0). `flags` are CLONE_* flags (64-bit);
 * `exit_signal` is usually SIGCHLD. With CLONE_PIDFD, *pidfd receives the
 * child's pidfd (O_CLOEXEC). With CLONE_INTO_CGROUP, `cgroup_fd` is a
 * directory fd of a cgroup v2 cgroup. Returns the child's pid in the parent,
 * 0 in the child, -errno on failure. The caller must be single-threaded or
 * make sure the child only makes async-signal-safe calls.
 */
pid_t msb__sys_clone3(uint64_t flags, int exit_signal, int cgroup_fd, int *pidfd);

int msb__sys_pidfd_open(pid_t pid, unsigned flags);
int msb__sys_pidfd_send_signal(int pidfd, int sig, unsigned flags);
/* openat2(2); `how` is a struct open_how from <linux/openat2.h>. */
int msb__sys_openat2(int dirfd, const char *path, const struct open_how *how);
int msb__sys_pivot_root(const char *new_root, const char *put_old);
int msb__sys_open_tree(int dirfd, const char *path, unsigned flags);
int msb__sys_move_mount(int from_dirfd, const char *from_path, int to_dirfd, const char *to_path,
			unsigned flags);
int msb__sys_mount_setattr(int dirfd, const char *path, unsigned flags, struct mount_attr *attr);
int msb__sys_fsopen(const char *fstype, unsigned flags);
int msb__sys_fsconfig(int fd, unsigned cmd, const char *key, const void *value, int aux);
int msb__sys_fsmount(int fd, unsigned flags, unsigned attr_flags);
int msb__sys_close_range(unsigned first, unsigned last, unsigned flags);
/* Returns only on failure (-errno). */
int msb__sys_execveat(int dirfd, const char *path, char *const argv[], char *const envp[],
		      int flags);
/* landlock_create_ruleset(2); with attr NULL, size 0 and
 * LANDLOCK_CREATE_RULESET_VERSION it returns the ABI version. */
int msb__sys_landlock_create_ruleset(const void *attr, size_t size, uint32_t flags);
/* seccomp(2): operation, flags, argument. */
int msb__sys_seccomp(unsigned op, unsigned flags, void *args);

#endif
