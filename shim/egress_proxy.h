/* SPDX-License-Identifier: Apache-2.0 */
/*
 * msb-shim's egress proxy (docs/internals/egress.md): one host connection to
 * the sandbox's agent, on which the agent opens a channel per connection
 * accepted on 127.0.0.1:3128 inside; the proxy parses each request head
 * (src/egress), decides, resolves, dials and relays with the protocol's
 * credit flow, and appends a decision record to <state>/egress.log.
 * Single-threaded, non-blocking (epoll), except name resolution, which is
 * bounded by the resolver's timeout.
 */
#ifndef MSB_SHIM_EGRESS_PROXY_H
#define MSB_SHIM_EGRESS_PROXY_H

#include <stddef.h>
#include <stdint.h>

#include "egress/egress.h"

typedef struct proxy proxy;

/* One line to the shim's log (stderr), in one write (msb-shim.c). */
void shim_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Connect to <state>/agent.sock (dfd is the state directory), say HELLO,
 * ask the agent to listen, and wait for it. `handover`: ask for the agent's
 * listener itself (one relay; only where the agent's connection is a unix
 * socket on this host - not through a VM's serial mux, which carries no
 * descriptors). Takes ownership of *cfg (its contents; *cfg is zeroed). 0,
 * or -1 with a reason in errbuf. */
int proxy_start(proxy **out, msb_egress_config *cfg, int dfd, bool handover, char *errbuf,
		size_t errlen);
/* The epoll fd to wait on. */
int proxy_fd(const proxy *p);
/* Milliseconds until the next deadline (-1: none). */
int proxy_timeout_ms(const proxy *p);
/* Serve what is ready and what is due. Returns -1 once the agent connection
 * is lost (the proxy then holds nothing). */
int proxy_run(proxy *p);
/* Decide with another configuration from now on (a claimed pooled
 * sandbox's allowlist). Takes ownership of *cfg's contents on success.
 * -1 when it cannot apply to this proxy (another tunnel limit, which the
 * agent was told at start). */
int proxy_reconfigure(proxy *p, msb_egress_config *cfg);
/* Close every tunnel (their records are written) and the connection. */
void proxy_stop(proxy *p);

#endif
