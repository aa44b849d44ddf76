/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The relay of msb-oci-shim: many host connections onto the agent's one.
 *
 * An OCI runtime gives the container's init nothing but stdio, so msb-agent
 * runs with `--stdio`: one connection, its stdin socket, whose other end the
 * shim holds ("upstream"). Hosts connect to `<state>/agent.sock` as they do
 * on `ns` ("downstream"); the relay speaks the protocol of src/proto to each
 * (it answers HELLO with the version it agreed with the agent) and carries
 * their channels upstream under ids of its own, so every host sees a private
 * connection: its channel ids, its PINGs, its stale frames. Each frame is
 * decoded and checked in both directions before it is copied with its new
 * channel id; nothing is reinterpreted. Credit is end to end (CREDIT frames
 * pass through), so the relay holds no more than the hosts granted.
 *
 * Trust: upstream is the guest's agent, untrusted like everywhere else: a
 * frame it may not send, a channel it never got, a HELLO that does not
 * agree, end the relay (the shim then takes the sandbox down). A host that
 * breaks the protocol gets an ERROR and is dropped alone; its execs are
 * cancelled, as the agent does for a connection that closes.
 *
 * Bounds: at most OCI_RELAY_MAX_PEERS hosts, OCI_RELAY_MAX_CHANNELS
 * channels in flight over all of them (the agent serves 64 per connection
 * and refuses the rest with ERROR LIMIT, which reaches the host), every
 * queue bounded (a host that stops reading is dropped at OCI_RELAY_PEER_MAX
 * queued bytes; hosts are not read while the agent's queue is over
 * OCI_RELAY_UP_HIGH).
 *
 * Single-threaded; nonblocking everywhere except oci_relay_handshake().
 */
#ifndef MSB_BACKENDS_OCI_RELAY_H
#define MSB_BACKENDS_OCI_RELAY_H

#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define OCI_RELAY_MAX_PEERS 256u
#define OCI_RELAY_MAX_CHANNELS 1024u
#define OCI_RELAY_MAX_PINGS 64u
#define OCI_RELAY_UP_HIGH (256u * 1024)
#define OCI_RELAY_UP_MAX (4u * 1024 * 1024)
#define OCI_RELAY_PEER_MAX (48u * 1024 * 1024)

typedef struct oci_relay oci_relay;

/* A relay on `up_fd`, a connected stream socket to the agent (taken; made
 * nonblocking). 0 or -ENOMEM. */
int oci_relay_new(int up_fd, oci_relay **out);

/* HELLO with the agent, waiting at most timeout_ms. 0, or -1 with the
 * reason in why. */
int oci_relay_handshake(oci_relay *r, int timeout_ms, char *why, size_t size);

/* Serve hosts that connect on `listen_fd` (a listening stream socket, taken). */
void oci_relay_listen(oci_relay *r, int listen_fd);

/* The fds to poll and their events, at most `cap` (oci_relay_nfds()). */
size_t oci_relay_nfds(const oci_relay *r);
size_t oci_relay_fill(oci_relay *r, struct pollfd *fds, size_t cap);

/* Serve what poll() reported for the fds oci_relay_fill() gave (in the same
 * order). 0, or -1 when the agent's connection is gone or broke the
 * protocol (why says which): the relay is then finished. */
int oci_relay_run(oci_relay *r, const struct pollfd *fds, size_t n, char *why, size_t size);

/* Milliseconds until the relay needs a turn without an event (a closing
 * host's linger), or -1. */
int oci_relay_timeout_ms(const oci_relay *r);

/* Hosts currently connected. */
size_t oci_relay_peers(const oci_relay *r);

/* Drop every host and the agent's connection, free. NULL accepted. */
void oci_relay_free(oci_relay *r);

#endif
