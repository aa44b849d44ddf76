/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Test harness: runs msb-agent as an ordinary child process (not PID 1, no
 * namespaces) on a listening socket in a temporary directory, the way
 * msb-shim hands it one (fd 3, MSB_AGENT_LISTEN_FD=3, --work DIR).
 */
#ifndef MSB_TESTS_AGENT_HARNESS_H
#define MSB_TESTS_AGENT_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct agent_proc {
	pid_t pid;
	char dir[64];  /* the temporary directory */
	char sock[96]; /* <dir>/agent.sock */
	char work[96]; /* <dir>/work: the storage base */
	bool pid1;     /* under unshare: pid is unshare's, the agent is its child */
};

/* Start msb-agent ($MSB_AGENT). Returns 0 or -errno. */
int agent_start(struct agent_proc *ap);
/* The same as PID 1 of new pid and mount namespaces (util-linux unshare,
 * root only); ap->pid is then unshare's pid. -ENOTSUP when not possible. */
int agent_start_pid1(struct agent_proc *ap);
/* SIGTERM, wait, remove the directory. An agent that ends otherwise than
 * with status 0 aborts the test (a sanitizer's report, a crash). */
void agent_stop(struct agent_proc *ap);
/* A raw stream connection to the agent's socket (-1 on failure). */
int agent_dial(const struct agent_proc *ap);
/* The agent's pid as this process sees it (in pid1 mode: unshare's child),
 * -1 when it cannot be found. */
pid_t agent_pid(const struct agent_proc *ap);
/* true while the agent process is alive. */
bool agent_alive(const struct agent_proc *ap);

/* true when pid no longer exists or is a zombie, waiting up to `seconds`. */
bool pid_gone(pid_t pid, double seconds);

double now_s(void);

#endif
