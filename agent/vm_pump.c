/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The port pump of a `vm` guest: the one virtio-serial port on one side,
 * connections to the agent's listening socket on the other, the mux of
 * src/proto/mux_link.h in between (docs/internals/vm.md, "The channel").
 * It runs as its own process, left in the initramfs's root by vm_init.c and
 * under its own uid, so workloads can neither reach its socket nor signal it.
 */
#include <errno.h>
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

int vm_pump_run(int port, const char *path)
{
	sock_path = path;
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
	msb_mux_link *l = msb_mux_link_new(port, false, connect_agent, NULL);
	if (!l || msb_mux_link_send_ready(l) < 0) {
		agent_log("vm pump: out of memory");
		return 1;
	}
	struct pollfd fds[1 + MSB_MUX_MAX_STREAMS];
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
			agent_log("vm pump: %s", msb_mux_link_why(l));
			msb_mux_link_free(l);
			return 1;
		}
	}
}
