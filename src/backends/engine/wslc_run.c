/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The wslc runner (checklist 21.11, 21.12): one child per invocation,
 * spawned in its own process group with pipes on all three standard streams;
 * every byte read from it counts against the invocation's budget; any
 * abnormal end of waiting - the bound, a cancellation, a sink that has what
 * it wants, an error here - kills the group and reaps the child before
 * returning, so no invocation outlives its call.
 */
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "wslc.h"

extern char **environ;

void msb_wslc__outcome_clear(wslc_outcome *o)
{
	msb__buf_free(&o->out);
	msb__buf_free(&o->err);
	memset(o, 0, sizeof(*o));
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

static int reap(pid_t pid, int *status)
{
	while (waitpid(pid, status, 0) < 0)
		if (errno != EINTR)
			return -errno;
	return 0;
}

static int code_of(int status)
{
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return -1;
}

/* Write what fits of stdin's three parts; true when all is written. */
static bool feed_stdin(int fd, const wslc_io *io, size_t *sent, bool *broken)
{
	static const uint8_t zeros[4096];
	size_t total = io->in_head_len + io->in_data_len + io->in_tail_len;
	while (*sent < total) {
		const uint8_t *p;
		size_t n;
		if (*sent < io->in_head_len) {
			p = io->in_head + *sent;
			n = io->in_head_len - *sent;
		} else if (*sent < io->in_head_len + io->in_data_len) {
			size_t off = *sent - io->in_head_len;
			p = io->in_data + off;
			n = io->in_data_len - off;
		} else {
			p = zeros;
			n = total - *sent;
			if (n > sizeof(zeros))
				n = sizeof(zeros);
		}
		/* stdin is a socket so that a child gone early is EPIPE, not a
		 * SIGPIPE for the whole host process. */
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0) {
			if (errno != EAGAIN)
				*broken = true; /* the child closed its stdin */
			return *broken;
		}
		*sent += (size_t)w;
	}
	return true;
}

/* Spawn argv in a process group of its own, its stdin a socket (or
 * /dev/null), its stdout and stderr pipes; the parent's ends are left in
 * in[1], o[0] and e[0]. */
static int spawn_child(char *const *argv, const wslc_io *io, int in[2], int o[2], int e[2],
		       pid_t *pid, msb_error **err)
{
	if ((io->has_stdin && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, in) < 0) ||
	    pipe2(o, O_CLOEXEC) < 0 || pipe2(e, O_CLOEXEC) < 0) {
		int saved = errno;
		close_fd(&in[0]), close_fd(&in[1]), close_fd(&o[0]), close_fd(&o[1]);
		close_fd(&e[0]), close_fd(&e[1]);
		return msb__error_errno(err, saved, "cannot make pipes for `%s`", argv[0]);
	}
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	posix_spawn_file_actions_init(&fa);
	posix_spawnattr_init(&at);
	if (io->has_stdin)
		posix_spawn_file_actions_adddup2(&fa, in[0], 0);
	else
		posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, o[1], 1);
	posix_spawn_file_actions_adddup2(&fa, e[1], 2);
	sigset_t none, all;
	sigemptyset(&none);
	sigfillset(&all);
	posix_spawnattr_setsigmask(&at, &none);
	posix_spawnattr_setsigdefault(&at, &all);
	posix_spawnattr_setpgroup(&at, 0);
	posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
					      POSIX_SPAWN_SETSIGDEF);
	int sr = posix_spawnp(pid, argv[0], &fa, &at, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&at);
	close_fd(&in[0]), close_fd(&o[1]), close_fd(&e[1]);
	if (sr != 0) {
		close_fd(&in[1]), close_fd(&o[0]), close_fd(&e[0]);
		if (sr == ENOENT || sr == EACCES)
			return msb__error_errno(
				err, sr,
				"cannot run `%s` (wslc_path): is WSL 2.9.3 or later "
				"installed?",
				argv[0]);
		if (sr == ENOSYS || sr == EPERM)
			return msb_error_set(err, MSB_E_VALUE,
					     "this host cannot spawn subprocesses, which the wslc "
					     "backend needs for every call: %s",
					     strerror(sr));
		return msb__error_errno(err, sr, "cannot run `%s`", argv[0]);
	}
	return 0;
}

/* Reap the child: both pipes are closed, so it is exiting (or was killed);
 * one that closed its output but lingers is still bounded by the deadline. */
static int reap_child(pid_t pid, int64_t deadline, wslc_outcome *out)
{
	int status = 0;
	for (;;) {
		pid_t w = waitpid(pid, &status, WNOHANG);
		if (w == pid || (w < 0 && errno != EINTR))
			break;
		if (w == 0 && msb__now_ns() >= deadline) {
			out->timed_out = true;
			kill(-pid, SIGKILL);
			reap(pid, &status);
			break;
		}
		if (w == 0) {
			struct timespec ts = {0, 1000000};
			nanosleep(&ts, NULL);
		}
	}
	return status;
}

int msb_wslc__spawn(void *ud, char *const *argv, const wslc_io *io, wslc_outcome *out,
		    msb_error **err)
{
	memset(out, 0, sizeof(*out));
	out->out = (msb_buf)MSB_BUF_INIT;
	out->err = (msb_buf)MSB_BUF_INIT;
	int in[2] = {-1, -1}, o[2] = {-1, -1}, e[2] = {-1, -1};
	pid_t pid;
	int sr = spawn_child(argv, io, in, o, e, &pid, err);
	if (sr < 0)
		return sr;

	int64_t deadline = msb__now_ns() + (int64_t)(io->timeout * 1e9);
	int cancel_fd = io->cancel ? msb_cancel_fd(io->cancel) : -1;
	size_t sent = 0;
	bool broken = false;
	int rc = 0;
	bool kill_it = false;
	uint8_t buf[65536];
	if (io->has_stdin && feed_stdin(in[1], io, &sent, &broken))
		close_fd(&in[1]);
	while (o[0] >= 0 || e[0] >= 0) {
		if (io->cancel && msb_cancel_requested(io->cancel)) {
			out->cancelled = kill_it = true;
			break;
		}
		int64_t left = (deadline - msb__now_ns()) / 1000000;
		if (left <= 0) {
			out->timed_out = kill_it = true;
			break;
		}
		struct pollfd p[4] = {{.fd = o[0], .events = POLLIN},
				      {.fd = e[0], .events = POLLIN},
				      {.fd = in[1], .events = POLLOUT},
				      {.fd = cancel_fd, .events = POLLIN}};
		int pr = poll(p, 4, left > 1000000 ? 1000000 : (int)left);
		if (pr < 0 && errno == EINTR)
			continue;
		if (pr < 0) {
			rc = msb__error_errno(err, errno, "`%s`: poll", argv[0]);
			kill_it = true;
			break;
		}
		if (in[1] >= 0 && (p[2].revents & (POLLOUT | POLLERR | POLLHUP)) &&
		    feed_stdin(in[1], io, &sent, &broken))
			close_fd(&in[1]);
		for (int s = 0; s < 2 && rc == 0 && !kill_it; s++) {
			int *fd = s == 0 ? &o[0] : &e[0];
			if (*fd < 0 || !(p[s].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			ssize_t n = read(*fd, buf, sizeof(buf));
			if (n < 0 && (errno == EINTR || errno == EAGAIN))
				continue;
			if (n <= 0) {
				close_fd(fd);
				continue;
			}
			if (s == 1) {
				size_t keep = (size_t)n;
				if (out->err.len + keep > io->max_err)
					keep = out->err.len < io->max_err
						       ? (size_t)(io->max_err - out->err.len)
						       : 0;
				if (keep && msb__buf_append(&out->err, buf, keep) < 0)
					rc = msb__error_nomem(err);
			} else if (io->sink) {
				int q = io->sink(io->sink_ud, buf, (size_t)n, err);
				if (q < 0)
					rc = q;
				else if (q == WSLC_SINK_DONE)
					out->stopped = kill_it = true;
			} else {
				size_t keep = (size_t)n;
				if (out->out.len + keep > io->max_out) {
					keep = out->out.len < io->max_out
						       ? (size_t)(io->max_out - out->out.len)
						       : 0;
					if (io->bounded)
						out->truncated = true;
					else
						rc = msb_error_set(
							err, MSB_E_RUNTIME,
							"`%s` wrote more than %llu bytes", argv[0],
							(unsigned long long)io->max_out);
				}
				if (keep && msb__buf_append(&out->out, buf, keep) < 0)
					rc = msb__error_nomem(err);
			}
		}
		if (rc < 0)
			kill_it = true;
		if (kill_it)
			break;
	}
	/* Kill before closing our ends: a child writing to a closed pipe would
	 * otherwise die of SIGPIPE first, and the outcome would depend on who ran. */
	if (kill_it)
		kill(-pid, SIGKILL);
	close_fd(&in[1]), close_fd(&o[0]), close_fd(&e[0]);
	int status = reap_child(pid, deadline, out);
	out->exit_code = code_of(status);
	if (rc < 0)
		msb_wslc__outcome_clear(out);
	return rc;
}
