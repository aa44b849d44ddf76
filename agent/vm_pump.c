/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The port pump of a `vm` guest: the one virtio-serial port on one side,
 * connections to the agent's listening socket on the other, the mux of
 * src/proto/mux_link.h in between (docs/internals/vm.md, "The channel").
 * It runs as its own process, left in the initramfs's root by vm_init.c and
 * under its own uid, so workloads can neither reach its socket nor signal it.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <time.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "agent.h"
#include "proto/mux_link.h"

static const char *sock_path;

static int connect_agent(void *ud)
{
	(void)ud;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock_path);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int e = -errno;
		close(fd);
		return e;
	}
	return fd;
}

/* The identity helper (vm_identity.c) applies a new session's payload; the
 * READY waits for its answer. */
static int id_req = -1, id_ack = -1;

static int apply_session(void *ud, const uint8_t *payload)
{
	(void)ud;
	size_t off = 0;
	while (off < MSB_MUX_SESSION_LEN) {
		ssize_t n = write(id_req, payload + off, MSB_MUX_SESSION_LEN - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -EIO;
		off += (size_t)n;
	}
	char answer = 0;
	ssize_t n;
	do
		n = read(id_ack, &answer, 1);
	while (n < 0 && errno == EINTR);
	return n == 1 && answer == 'y' ? 0 : -EIO;
}

/* Until the port's host end is connected again: a new session follows.
 * While no host is, poll reports a hang-up at once and a read returns 0,
 * so neither can wait; the driver signals a host's connection with SIGIO
 * to the port's owner (set up in vm_pump_run, the signal blocked), which
 * is waited for here - a second at most, should one ever be lost. */
static void wait_host(int port, const sigset_t *io)
{
	for (;;) {
		struct pollfd p = {.fd = port, .events = POLLIN};
		if (poll(&p, 1, 0) >= 0 && !(p.revents & POLLHUP))
			return;
		struct timespec ts = {1, 0};
		sigtimedwait(io, NULL, &ts);
	}
}

int vm_pump_run(int port, const char *path, int req, int ack)
{
	sock_path = path;
	id_req = req;
	id_ack = ack;
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGPIPE, SIG_IGN);
	/* Not root: a workload (guest uid 0 without capabilities) cannot
	 * signal or trace a process of another uid. */
	if (setgroups(0, NULL) < 0 ||
	    setresgid(AGENT_VM_PUMP_ID, AGENT_VM_PUMP_ID, AGENT_VM_PUMP_ID) < 0 ||
	    setresuid(AGENT_VM_PUMP_ID, AGENT_VM_PUMP_ID, AGENT_VM_PUMP_ID) < 0) {
		agent_log("vm pump: cannot drop to uid %d: %s", AGENT_VM_PUMP_ID, strerror(errno));
		return 1;
	}
	prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	/* The port's host connecting raises SIGIO (kept pending: blocked). */
	sigset_t io;
	sigemptyset(&io);
	sigaddset(&io, SIGIO);
	sigprocmask(SIG_BLOCK, &io, NULL);
	int fl = fcntl(port, F_GETFL);
	if (fcntl(port, F_SETOWN, getpid()) < 0 || fl < 0 || fcntl(port, F_SETFL, fl | O_ASYNC) < 0)
		agent_log("vm pump: no SIGIO on the port (%s): waiting by the second",
			  strerror(errno));
	/* One link per host connection: it skips everything until the host's
	 * SESSION (mux.h), which also ends a session whose hang-up was never
	 * seen (qemu may deliver a close and a new connection at once). A
	 * hang-up or a broken link ends the session, never the guest. */
	struct pollfd fds[1 + MSB_MUX_MAX_STREAMS];
	for (;;) {
		wait_host(port, &io);
		int fd = fcntl(port, F_DUPFD_CLOEXEC, 3);
		msb_mux_link *l = fd < 0 ? NULL : msb_mux_link_new(fd, false, connect_agent, NULL);
		if (!l) {
			agent_log("vm pump: a new link: %s",
				  fd < 0 ? strerror(errno) : "no memory");
			return 1;
		}
		msb_mux_link_on_session(l, apply_session);
		for (;;) {
			size_t n = msb_mux_link_pollfds(l, fds, sizeof(fds) / sizeof(fds[0]));
			if (poll(fds, n, -1) < 0) {
				if (errno == EINTR)
					continue;
				agent_log("vm pump: poll: %s", strerror(errno));
				return 1;
			}
			int r = msb_mux_link_handle(l, fds, n);
			if (r < 0) {
				if (r != -EPIPE)
					agent_log("vm pump: %s", msb_mux_link_why(l));
				msb_mux_link_free(l);
				break;
			}
		}
	}
}
