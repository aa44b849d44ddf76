/* SPDX-License-Identifier: Apache-2.0 */
/*
 * msb-vm-shim's egress allowlist proxy (docs/internals/vm.md, "Egress"):
 * msb-shim's proxy (egress_proxy.c) in a child process of the shim, on one
 * host connection to the shim's own agent.sock, which the shim carries over
 * the serial mux like any other. A process of its own: name resolution
 * blocks, and the shim is in the data path of every other connection.
 */
#ifndef MSB_SHIM_VM_EGRESS_H
#define MSB_SHIM_VM_EGRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* The proxy's configuration, beside shim.json (written by the backend for a
 * spec with egress `allowlist`). */
#define VM_EGRESS_FILE "egress.json"

typedef struct vm_egress {
	pid_t pid;  /* the proxy's process; 0 none */
	int pidfd;  /* readable once it exited; -1 */
	int report; /* its start report, until read; -1 */
} vm_egress;
#define VM_EGRESS_INIT                                                                             \
	{                                                                                          \
		0, -1, -1                                                                          \
	}

/* Read and check <state_dir>/egress.json: 0 with *json NULL when there is
 * none; -1 with the reason in why. */
int vm_egress_load(const char *state_dir, char **json, size_t *len, char *why, size_t size);
/* Fork the proxy (dfd: the state directory, for agent.sock and egress.log).
 * The caller serves (its listener on) until e->report is readable, then
 * calls vm_egress_report. -1 with the reason in why. */
int vm_egress_start(vm_egress *e, int dfd, const char *json, size_t len, char *why, size_t size);
/* The start report: 0 when the agent listens, -1 with the reason. */
int vm_egress_report(vm_egress *e, char *why, size_t size);
/* Stop the proxy (SIGTERM: it closes its tunnels and writes their records;
 * SIGKILL after 2 s) and reap it. */
void vm_egress_stop(vm_egress *e);

#endif
