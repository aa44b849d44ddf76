/* SPDX-License-Identifier: Apache-2.0 */
/*
 * src/proto/mux_link - both ends of the `vm` channel's multiplexer (mux.h):
 * local stream sockets on one side, the one link (the virtio-serial port in
 * the guest, qemu's chardev socket on the host) on the other. msb-vm-shim
 * runs the host end (each host connection to agent.sock is a stream), the
 * agent's port pump runs the guest end (each stream is a connection to the
 * agent's listening socket).
 *
 * Unlike the codecs of src/proto this allocates: one buffer per open stream
 * (at most MSB_MUX_WINDOW bytes, as the peer's credit allows) and the link's
 * send queue. Every count from the peer is checked; a violation ends the link.
 * Single-threaded; the caller polls.
 */
#ifndef MSB_PROTO_MUX_LINK_H
#define MSB_PROTO_MUX_LINK_H

#include <poll.h>
#include <stdbool.h>
#include <stdint.h>

#include "mux.h"

typedef struct msb_mux_link msb_mux_link;

/* Guest end: a stream was opened by the host; return a connected nonblocking
 * socket for it, or -errno (the stream is closed again). */
typedef int (*msb_mux_open_fn)(void *ud);

/* Guest end: a host session began (SESSION's MSB_MUX_SESSION_LEN bytes, the
 * magic checked). 0 when its identity is applied (the link answers READY),
 * -errno to refuse it (the link fails). */
typedef int (*msb_mux_session_fn)(void *ud, const uint8_t *payload);

/* host: true on the shim's side (opens streams, receives READY). The link
 * fd is made nonblocking and owned by the link. */
msb_mux_link *msb_mux_link_new(int link_fd, bool host, msb_mux_open_fn open_fn, void *ud);
void msb_mux_link_free(msb_mux_link *l);

/* Host end: a new local connection becomes a stream (fd owned from now on,
 * closed on failure). -EMFILE past MSB_MUX_MAX_STREAMS. */
int msb_mux_link_add(msb_mux_link *l, int fd);
/* Guest end: what applies a new session's identity (none: accepted). */
void msb_mux_link_on_session(msb_mux_link *l, msb_mux_session_fn fn);
/* Host end, first on a new link: begin session `session` (nonzero, best
 * random) with that identity payload; every byte from the guest ahead of
 * its READY for this session is skipped. */
int msb_mux_link_send_session(msb_mux_link *l, uint32_t session,
			      const uint8_t payload[MSB_MUX_SESSION_LEN]);
/* Host end: the guest's READY for our session was received. */
bool msb_mux_link_ready(const msb_mux_link *l);
/* Streams open now. */
unsigned msb_mux_link_streams(const msb_mux_link *l);

/* Fill fds (at most cap entries: 1 + MSB_MUX_MAX_STREAMS is always enough)
 * with what the link waits for; returns the count. */
size_t msb_mux_link_pollfds(msb_mux_link *l, struct pollfd *fds, size_t cap);
/* Handle what poll() reported on those entries. Returns 0, or -EPIPE when
 * the link reached end of file (the peer went away), or -EPROTO when the
 * peer broke the mux rules, or another -errno of the link. */
int msb_mux_link_handle(msb_mux_link *l, const struct pollfd *fds, size_t n);
/* The link's last fatal reason, for logs ("" when none). */
const char *msb_mux_link_why(const msb_mux_link *l);

#endif
