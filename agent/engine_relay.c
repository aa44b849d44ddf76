/* SPDX-License-Identifier: Apache-2.0 */
/*
 * --engine: msb-agent started by a container engine's exec (the `docker`
 * backend's kept stream, docs/engine.md). The engine gives the exec pipes
 * (stdin one way, stdout the other), while the agent serves one connected
 * stream socket (--stdio). So the process the engine started forks: the
 * child is the agent, on one end of a socketpair; this process stays behind
 * and copies bytes between the pipes and the other end until either side
 * ends, then waits for the agent and exits. The engine's end of stdin
 * closing (the host dropped the stream) reaches the agent as the end of its
 * connection, and it shuts down as --stdio does; the agent ending (killed)
 * closes the socket, and this process exits, which ends the engine's
 * stream: the host sees it.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent.h"

#define RELAY_BUF (256u << 10)

typedef struct relay_dir {
	int from, to;
	uint8_t *buf;
	size_t have, off;
	bool eof; /* `from` ended; `to` is shut once the buffer is out */
	bool shut;
} relay_dir;

static void dir_shut(relay_dir *d, bool to_is_socket)
{
	if (d->shut)
		return;
	d->shut = true;
	if (to_is_socket)
		shutdown(d->to, SHUT_WR);
	else
		close(d->to);
}

static int relay_loop(int sock, pid_t agent)
{
	static uint8_t in_buf[RELAY_BUF], out_buf[RELAY_BUF];
	relay_dir in = {.from = STDIN_FILENO, .to = sock, .buf = in_buf};
	relay_dir out = {.from = sock, .to = STDOUT_FILENO, .buf = out_buf};
	relay_dir *dirs[2] = {&in, &out};
	for (;;) {
		struct pollfd p[4];
		int np = 0, idx[4];
		for (int k = 0; k < 2; k++) {
			relay_dir *d = dirs[k];
			if (!d->eof && d->have == 0) {
				p[np] = (struct pollfd){.fd = d->from, .events = POLLIN};
				idx[np++] = k * 2;
			} else if (d->have > d->off) {
				p[np] = (struct pollfd){.fd = d->to, .events = POLLOUT};
				idx[np++] = k * 2 + 1;
			}
		}
		if (np == 0 || out.shut)
			break; /* the agent's side is over: nothing more to say */
		if (poll(p, (nfds_t)np, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		for (int i = 0; i < np; i++) {
			if (!p[i].revents)
				continue;
			relay_dir *d = dirs[idx[i] / 2];
			bool to_sock = d == &in;
			if (idx[i] % 2 == 0) {
				ssize_t n = read(d->from, d->buf, RELAY_BUF);
				if (n < 0 && (errno == EINTR || errno == EAGAIN))
					continue;
				if (n <= 0) {
					d->eof = true;
					dir_shut(d, to_sock);
				} else {
					d->have = (size_t)n;
					d->off = 0;
				}
			} else {
				ssize_t n =
					to_sock ? send(d->to, d->buf + d->off, d->have - d->off,
						       MSG_NOSIGNAL)
						: write(d->to, d->buf + d->off, d->have - d->off);
				if (n < 0 && (errno == EINTR || errno == EAGAIN))
					continue;
				if (n <= 0) {
					/* the reader is gone: so is this direction */
					d->eof = true;
					d->have = d->off = 0;
					dir_shut(d, to_sock);
					continue;
				}
				d->off += (size_t)n;
				if (d->off == d->have)
					d->have = d->off = 0;
			}
		}
	}
	close(sock);
	int st = 0;
	while (waitpid(agent, &st, 0) < 0 && errno == EINTR)
		;
	return 0;
}

int engine_relay_start(void)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
		agent_log("--engine: socketpair: %s", strerror(errno));
		return -1;
	}
	signal(SIGPIPE, SIG_IGN);
	pid_t pid = fork();
	if (pid < 0) {
		agent_log("--engine: fork: %s", strerror(errno));
		return -1;
	}
	if (pid == 0) {
		/* The agent: stdin is its connection, stdout nothing of the
		 * engine's (stderr stays: the agent's log lines). */
		close(sv[1]);
		int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
		if (dup2(sv[0], STDIN_FILENO) < 0 || null < 0 || dup2(null, STDOUT_FILENO) < 0)
			_exit(2);
		close(sv[0]);
		close(null);
		signal(SIGPIPE, SIG_DFL);
		return 0;
	}
	close(sv[0]);
	_exit(relay_loop(sv[1], pid));
}
