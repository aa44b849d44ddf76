/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int start(struct agent_proc *ap, bool pid1)
{
	const char *bin = getenv("MSB_AGENT");
	if (!bin)
		return -ENOENT;
	memset(ap, 0, sizeof(*ap));
	snprintf(ap->dir, sizeof(ap->dir), "/tmp/msb-agent-test-XXXXXX");
	if (!mkdtemp(ap->dir))
		return -errno;
	snprintf(ap->sock, sizeof(ap->sock), "%s/agent.sock", ap->dir);
	snprintf(ap->work, sizeof(ap->work), "%s/work", ap->dir);
	if (mkdir(ap->work, 0755) < 0)
		return -errno;

	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", ap->sock);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 64) < 0) {
		int e = errno;
		close(fd);
		return -e;
	}
	pid_t pid = fork();
	if (pid < 0) {
		int e = errno;
		close(fd);
		return -e;
	}
	if (pid == 0) {
		/* dup2 onto itself keeps O_CLOEXEC: clear it then */
		if (fd == 3 ? fcntl(3, F_SETFD, 0) < 0 : dup2(fd, 3) < 0)
			_exit(127);
		setenv("MSB_AGENT_LISTEN_FD", "3", 1);
		if (pid1)
			execlp("unshare", "unshare", "--fork", "--pid", "--mount-proc",
			       "--kill-child=SIGTERM", bin, "--work", ap->work, (char *)NULL);
		else
			execl(bin, "msb-agent", "--work", ap->work, (char *)NULL);
		_exit(127);
	}
	close(fd);
	ap->pid = pid;
	ap->pid1 = pid1;
	return 0;
}

int agent_start(struct agent_proc *ap)
{
	return start(ap, false);
}

int agent_start_pid1(struct agent_proc *ap)
{
	if (geteuid() != 0 || access("/usr/bin/unshare", X_OK) != 0)
		return -ENOTSUP;
	return start(ap, true);
}

int agent_dial(const struct agent_proc *ap)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", ap->sock);
	if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		close(fd);
		fd = -1;
	}
	return fd;
}

bool agent_alive(const struct agent_proc *ap)
{
	int status;
	return ap->pid > 0 && waitpid(ap->pid, &status, WNOHANG) == 0;
}

static void rm_rf(const char *dir)
{
	pid_t pid = fork();
	if (pid == 0) {
		execlp("rm", "rm", "-rf", "--one-file-system", dir, (char *)NULL);
		_exit(127);
	}
	if (pid > 0)
		waitpid(pid, NULL, 0);
}

/* The agent's own pid: unshare's only child in pid1 mode. */
pid_t agent_pid(const struct agent_proc *ap)
{
	if (!ap->pid1)
		return ap->pid;
	char path[64], buf[64];
	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)ap->pid, (int)ap->pid);
	for (int tries = 0; tries < 500; tries++) {
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
		if (fd >= 0)
			close(fd);
		if (n > 0) {
			buf[n] = 0;
			return (pid_t)strtol(buf, NULL, 10);
		}
		usleep(2000);
	}
	return -1;
}

void agent_stop(struct agent_proc *ap)
{
	if (ap->pid > 0) {
		/* unshare ignores SIGTERM and exits with its child */
		pid_t target = agent_pid(ap);
		kill(target > 0 ? target : ap->pid, SIGTERM);
		double until = now_s() + 5;
		int status = 0;
		pid_t w;
		while ((w = waitpid(ap->pid, &status, WNOHANG)) == 0) {
			if (now_s() > until) {
				kill(ap->pid, SIGKILL);
				waitpid(ap->pid, &status, 0);
				w = -1;
				break;
			}
			usleep(2000);
		}
		ap->pid = 0;
		/* The agent leaves on SIGTERM with status 0. Anything else - a
		 * sanitizer's report in a sanitizer build, a crash - crashes the
		 * test that ran it rather than pass unseen. */
		if (w > 0 && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
			fprintf(stderr, "harness: msb-agent ended with %s %d\n",
				WIFSIGNALED(status) ? "signal" : "status",
				WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
			if (ap->dir[0])
				rm_rf(ap->dir);
			abort();
		}
	}
	if (ap->dir[0])
		rm_rf(ap->dir);
}

bool pid_gone(pid_t pid, double seconds)
{
	double until = now_s() + seconds;
	for (;;) {
		char path[64], buf[512];
		snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return true;
		ssize_t n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (n <= 0)
			return true;
		buf[n] = 0;
		const char *rp = strrchr(buf, ')');
		if (rp && (rp[2] == 'Z' || rp[2] == 'X'))
			return true;
		if (now_s() > until)
			return false;
		usleep(5000);
	}
}
