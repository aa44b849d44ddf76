/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "boundary.h"
#include "shim.h"

void msb_ns__shim_log(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	msb_ns__shim_vlog(fmt, ap);
	va_end(ap);
}

void msb_ns__shim_vlog(const char *fmt, va_list ap)
{
	char buf[1024];
	int n = vsnprintf(buf, sizeof(buf) - 1, fmt, ap);
	if (n < 0)
		return;
	if ((size_t)n > sizeof(buf) - 2)
		n = (int)sizeof(buf) - 2;
	buf[n++] = '\n';
	ssize_t w = write(STDERR_FILENO, buf, (size_t)n);
	(void)w;
}

void msb_ns__shim_report(int *ready_fd, const char *line)
{
	if (*ready_fd < 0)
		return;
	size_t len = strlen(line);
	while (len > 0) {
		ssize_t n = write(*ready_fd, line, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		line += n;
		len -= (size_t)n;
	}
	close(*ready_fd);
	*ready_fd = -1;
}

int msb_ns__shim_ready_fd(const char *value)
{
	char *end;
	errno = 0;
	long fd = strtol(value, &end, 10);
	if (errno || *end || fd < 3 || fd > INT_MAX || fcntl((int)fd, F_GETFD) < 0)
		return -1;
	fcntl((int)fd, F_SETFD, FD_CLOEXEC);
	return (int)fd;
}

int msb_ns__shim_detach(const char *log_path, char *why, size_t size)
{
	/* A process group of its own: no signal for the caller's group (a
	 * terminal's ^C, a job's kill) reaches the shim. Not a session of its
	 * own: setsid() makes the scheduler build an autogroup, 1.5-3 ms here,
	 * on every sandbox's start; the shim has no terminal open either way
	 * (stdio below). A group leader already is one. */
	if (getpgid(0) != getpid() && setpgid(0, 0) < 0) {
		snprintf(why, size, "setpgid: %s", strerror(errno));
		return -1;
	}
	if (chdir("/") < 0) {
		snprintf(why, size, "chdir /: %s", strerror(errno));
		return -1;
	}
	/* guest-names: ok - /dev/null */
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null < 0) {
		snprintf(why, size, "/dev/null: %s", strerror(errno));
		return -1;
	}
	int out = null;
	if (log_path) {
		/* guest-names: ok - the shim's log, a host path (O_NOFOLLOW) */
		out = open(log_path, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (out < 0) {
			snprintf(why, size, "log `%s`: %s", log_path, strerror(errno));
			close(null);
			return -1;
		}
	}
	if (dup2(null, STDIN_FILENO) < 0 || dup2(out, STDOUT_FILENO) < 0 ||
	    dup2(out, STDERR_FILENO) < 0) {
		snprintf(why, size, "redirect stdio: %s", strerror(errno));
		return -1;
	}
	if (out != null)
		close(out);
	close(null);
	return 0;
}

int msb_ns__shim_daemon(void)
{
	pid_t pid = fork();
	if (pid < 0)
		return -errno;
	if (pid > 0)
		_exit(0);
	return 0;
}

int msb_ns__shim_open_state(const char *state_dir, int *dfd, char *why, size_t size)
{
	/* guest-names: ok - the state dir: host-private */
	*dfd = open(state_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;
	if (*dfd < 0 || fstat(*dfd, &st) < 0) {
		snprintf(why, size, "state dir `%s`: %s", state_dir, strerror(errno));
		return -1;
	}
	if (st.st_uid != geteuid() || (st.st_mode & 022)) {
		snprintf(why, size,
			 "state dir `%s` must belong to uid %u and not be group/other writable",
			 state_dir, (unsigned)geteuid());
		return -1;
	}
	return 0;
}

int msb_ns__shim_pool_lock(int dfd, const char *state_dir, char *why, size_t size)
{
	while (flock(dfd, LOCK_EX) < 0)
		if (errno != EINTR) {
			snprintf(why, size, "lock `%s`: %s", state_dir, strerror(errno));
			return -1;
		}
	struct stat st;
	if (fstat(dfd, &st) < 0 || st.st_nlink == 0 ||
	    faccessat(dfd, MSB_NS_POOL_FILE, F_OK, AT_SYMLINK_NOFOLLOW) < 0) {
		snprintf(why, size, "pooled sandbox `%s` was drained before it started", state_dir);
		return -1;
	}
	return 0;
}

int msb_ns__shim_previous(int dfd, pid_t *pid)
{
	uint64_t start;
	if (msb_ns__read_pid_file(dfd, MSB_NS_STATE_SHIM_PID, pid, &start) != 0)
		return -1;
	int fd = msb_ns__pidfd_if_same(*pid, start);
	if (fd < 0)
		return 0;
	close(fd);
	return 1;
}

int msb_ns__shim_write_pid(int dfd)
{
	uint64_t start;
	int r = msb_ns__proc_start_time(getpid(), &start);
	if (r == 0)
		r = msb_ns__write_pid_file(dfd, MSB_NS_STATE_SHIM_PID, getpid(), start);
	return r;
}

int msb_ns__shim_signalfd(void)
{
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGQUIT);
	if (sigprocmask(SIG_BLOCK, &set, NULL) < 0)
		return -errno;
	int fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	return fd < 0 ? -errno : fd;
}
