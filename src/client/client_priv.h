/* SPDX-License-Identifier: Apache-2.0 */
/* Private to src/client: the connection and its I/O, shared by client.c and
 * client_exec.c. */
#ifndef MSB_CLIENT_CLIENT_PRIV_H
#define MSB_CLIENT_CLIENT_PRIV_H

#include <pthread.h>

#include "client/client.h"
#include "util/util.h"

/* Stop queueing stdin while this much is waiting to be sent. */
#define MSB_CLIENT_OUTQ_HIGH (256u * 1024)

struct msb_client {
	pthread_mutex_t lock;
	char *path; /* NULL: made from an fd, no reconnection */
	int fd;	    /* -1 once closed */
	msb_proto_reader *rd;
	uint16_t version;
	uint32_t peer_max_payload;
	uint32_t last_channel;
	uint8_t *out; /* queued frames: [out_head, out_len) */
	size_t out_head, out_len, out_cap;
};

/* Connected, or reconnect (path clients) before `deadline`. */
int msb_client__ensure(msb_client *c, int64_t deadline, msb_error **err);
/* Close the connection; a path client reconnects on its next call. */
void msb_client__drop(msb_client *c);
/* A fresh channel id (odd, increasing). 0 when the ids are used up (then
 * the connection must be renewed). */
uint32_t msb_client__channel(msb_client *c);

/* Space for n bytes at the tail of the send queue; NULL on OOM. */
uint8_t *msb_client__reserve(msb_client *c, size_t n);
void msb_client__commit(msb_client *c, size_t n);
size_t msb_client__queued(const msb_client *c);
/* Queue one frame built by `enc` (its length or a negative status). */
int msb_client__queue_small(msb_client *c, const uint8_t *frame, int len);

/*
 * Send what is queued and wait for bytes until `deadline` (ns, monotonic).
 * Also watches cancel_fd (>= 0) and sets *cancelled when it is readable.
 * Returns 1 after progress, 0 at the deadline, or -errno (-EPIPE: the peer
 * closed the connection).
 */
int msb_client__io(msb_client *c, int64_t deadline, int cancel_fd, bool *cancelled);

/* Fail with MSB_E_PROTOCOL and close the connection. Returns the code. */
int msb_client__violation(msb_client *c, msb_error **err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Report a lost connection (rc from msb_client__io) and close it. */
int msb_client__lost(msb_client *c, int rc, const char *during, msb_error **err);
/* The agent's ERROR on channel 0: the connection is over. */
int msb_client__peer_error(msb_client *c, const msb_proto_frame *f, msb_error **err);

/* Deadline `seconds` from now, saturating. */
int64_t msb_client__deadline(double seconds);

#endif
