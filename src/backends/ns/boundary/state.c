/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The sandbox's state directory on the host: pid files with start times,
 * atomic small files, safe recursive removal, and the purge that takes down
 * whatever a dead (or live) shim left behind.
 */
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/stat.h>

#include "backends/ns/boundary/boundary_int.h"
#include "util/fs.h"
#include "util/syscalls.h"

/* include/linux/sched.h: "getting shut down" */
#define MSB_NS_PF_EXITING 0x00000004ull

void msb_ns__fmt_err(char *buf, size_t size, int r, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf, size, fmt, ap);
	va_end(ap);
	if (r < 0 && n >= 0 && (size_t)n < size) {
		char eb[96];
		const char *es = strerror_r(-r, eb, sizeof(eb));
		snprintf(buf + n, size - (size_t)n, ": %s", es);
	}
}

int msb_ns__write_string(int dirfd, const char *path, const char *s)
{
	_cleanup_close_ int fd = openat(dirfd, path, O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	size_t len = strlen(s);
	ssize_t n;
	do
		n = write(fd, s, len);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -EIO;
}

int msb_ns__proc_stat(pid_t pid, char *state, uint64_t *start_time)
{
	char path[48];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	_cleanup_free_ char *stat = NULL;
	/* guest-names: ok - /proc/PID/stat: procfs */
	int r = msb__read_file_at(AT_FDCWD, path, 4096, &stat, NULL);
	if (r < 0)
		return r == -ENOENT ? -ESRCH : r;
	const char *p = strrchr(stat, ')');
	if (!p || p[1] != ' ' || !p[2])
		return -EINVAL;
	*state = p[2];
	/* Field 3 (state) follows ") "; flags are field 9, start time field 22.
	 * A process that has begun to exit (PF_EXITING: its files, sockets
	 * among them, are being closed) but is not a zombie yet is shown as
	 * 'X' too: it is as good as dead. */
	int field = 2;
	unsigned long long flags = 0;
	for (p++; *p && field < 22; p++) {
		if (*p != ' ')
			continue;
		if (++field == 9) {
			errno = 0;
			flags = strtoull(p + 1, NULL, 10);
		}
	}
	char *end;
	errno = 0;
	unsigned long long v = strtoull(p, &end, 10);
	if (errno || end == p)
		return -EINVAL;
	if ((flags & MSB_NS_PF_EXITING) && *state != 'Z')
		*state = 'X';
	*start_time = v;
	return 0;
}

int msb_ns__proc_start_time(pid_t pid, uint64_t *out)
{
	char state;
	return msb_ns__proc_stat(pid, &state, out);
}

int msb_ns__write_pid_file(int dirfd, const char *name, pid_t pid, uint64_t start_time)
{
	char buf[64];
	snprintf(buf, sizeof(buf), "%d %llu\n", (int)pid, (unsigned long long)start_time);
	return msb__write_file_atomic_at(dirfd, name, buf, strlen(buf), 0644);
}

int msb_ns__read_pid_file(int dirfd, const char *name, pid_t *pid, uint64_t *start_time)
{
	_cleanup_free_ char *s = NULL;
	int r = msb__read_file_at(dirfd, name, 128, &s, NULL);
	if (r < 0)
		return r;
	char *end;
	errno = 0;
	long p = strtol(s, &end, 10);
	if (errno || end == s || *end != ' ' || p <= 0 || p > INT32_MAX)
		return -EINVAL;
	char *q = end + 1;
	unsigned long long st = strtoull(q, &end, 10);
	if (errno || end == q || (*end != '\n' && *end != '\0'))
		return -EINVAL;
	*pid = (pid_t)p;
	*start_time = st;
	return 0;
}

int msb_ns__pidfd_if_same(pid_t pid, uint64_t start_time)
{
	int fd = msb__sys_pidfd_open(pid, 0);
	if (fd < 0)
		return fd == -EINVAL ? -ESRCH : fd;
	/* The pidfd pins this process: if the start time matches now, it is
	 * the one recorded and cannot be replaced behind our back. A zombie is
	 * dead: it only waits for a parent to collect it (issue 15 finding 5:
	 * a killed shim whose parent does not reap it is not alive). */
	uint64_t now;
	char state = 0;
	int r = msb_ns__proc_stat(pid, &state, &now);
	if (r < 0 || now != start_time || state == 'Z' || state == 'X') {
		close(fd);
		return r < 0 ? r : -ESRCH;
	}
	return fd; /* pidfds are always close-on-exec */
}

/* ---- purge --------------------------------------------------------------------- */

/* Wait for a pidfd to become readable (the process exited). */
static bool wait_exit(int pidfd, int timeout_ms)
{
	int64_t deadline = msb__now_ns() + (int64_t)timeout_ms * 1000000;
	for (;;) {
		int64_t left = (deadline - msb__now_ns()) / 1000000;
		struct pollfd p = {.fd = pidfd, .events = POLLIN};
		int r = poll(&p, 1, left > 0 ? (int)left : 0);
		if (r > 0)
			return true;
		if (r == 0)
			return false;
		if (errno != EINTR)
			return false;
	}
}

static int stop_recorded(int dfd, const char *file, int first_sig, int timeout_ms, bool *ok)
{
	pid_t pid;
	uint64_t st;
	int r = msb_ns__read_pid_file(dfd, file, &pid, &st);
	if (r < 0)
		return r == -ENOENT || r == -EINVAL ? 0 : r;
	if (pid == getpid())
		return 0;
	int fd = msb_ns__pidfd_if_same(pid, st);
	if (fd < 0)
		return fd == -ESRCH ? 0 : fd;
	if (first_sig != SIGKILL) {
		msb__sys_pidfd_send_signal(fd, first_sig, 0);
		if (wait_exit(fd, timeout_ms)) {
			close(fd);
			return 0;
		}
	}
	msb__sys_pidfd_send_signal(fd, SIGKILL, 0);
	if (!wait_exit(fd, timeout_ms > 1000 ? timeout_ms : 1000))
		*ok = false;
	close(fd);
	return 0;
}

int msb_ns__state_remove_files(int dfd, bool keep_work)
{
	int r = 0, k;
	static const char *const files[] = {MSB_NS_STATE_SOCKET,
					    MSB_NS_STATE_CONTROL,
					    MSB_NS_STATE_INIT_PID,
					    MSB_NS_STATE_CGROUPS,
					    "." MSB_NS_STATE_INIT_PID ".tmp",
					    "." MSB_NS_STATE_CGROUPS ".tmp",
					    "." MSB_NS_STATE_SHIM_PID ".tmp",
					    "." MSB_NS_STATE_DEAD ".tmp",
					    NULL};
	if (!keep_work) {
		if ((k = msb__rm_rf_at(dfd, MSB_NS_STATE_WORK)) < 0)
			r = k;
		if (unlinkat(dfd, MSB_NS_STATE_DEAD, 0) < 0 && errno != ENOENT && r == 0)
			r = -errno;
	}
	for (size_t i = 0; files[i]; i++)
		if (unlinkat(dfd, files[i], 0) < 0 && errno != ENOENT && r == 0)
			r = -errno;
	/* Last: its absence says the teardown finished. */
	if (unlinkat(dfd, MSB_NS_STATE_SHIM_PID, 0) < 0 && errno != ENOENT && r == 0)
		r = -errno;
	return r;
}

int msb_ns__state_remove_cgroups(int dfd, msb_error **err)
{
	_cleanup_free_ char *rec = NULL;
	int r = msb__read_file_at(dfd, MSB_NS_STATE_CGROUPS, 64 * 1024, &rec, NULL);
	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return msb__error_errno(err, r, "read the cgroup record");
	int ret = 0;
	char *save = rec;
	while (*save) {
		char *line = save;
		char *nl = strchr(line, '\n');
		if (nl) {
			*nl = '\0';
			save = nl + 1;
		} else {
			save = line + strlen(line);
		}
		if (!line[0])
			continue;
		msb_error *e = NULL;
		r = msb_ns__cgroup_remove_recorded(line, &e);
		if (r < 0 && ret == 0)
			ret = msb__error_propagate(err, e);
		else
			msb_error_free(e);
	}
	return ret;
}

int msb_ns__state_purge(const char *state_dir, bool remove_dir, int timeout_ms, msb_error **err)
{
	/* guest-names: ok - the sandbox's state dir, host-private; work/ is removed from it
	 * fd-relative */
	_cleanup_close_ int dfd = open(state_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0) {
		if (errno == ENOENT)
			return 0;
		return msb__error_errno(err, -errno, "purge `%s`", state_dir);
	}
	bool ok = true;
	int r = stop_recorded(dfd, MSB_NS_STATE_SHIM_PID, SIGTERM, timeout_ms, &ok);
	if (r == 0)
		r = stop_recorded(dfd, MSB_NS_STATE_INIT_PID, SIGKILL, timeout_ms, &ok);
	if (r < 0)
		return msb__error_errno(err, r, "purge `%s`: stop the sandbox", state_dir);
	if (!ok)
		return msb_error_set(err, MSB_E_RUNTIME,
				     "purge `%s`: a sandbox process did not exit", state_dir);
	if ((r = msb_ns__state_remove_cgroups(dfd, err)) < 0)
		return msb_error_wrap(err, "purge `%s`", state_dir);
	if ((r = msb_ns__state_remove_files(dfd, false)) < 0)
		return msb__error_errno(err, r, "purge `%s`: remove files", state_dir);
	/* guest-names: ok - the sandbox's state dir, host-private; rmdir never follows */
	if (remove_dir && rmdir(state_dir) < 0 && errno != ENOENT)
		return msb__error_errno(err, -errno, "purge: remove `%s`", state_dir);
	return 0;
}
