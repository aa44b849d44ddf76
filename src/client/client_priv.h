/* SPDX-License-Identifier: Apache-2.0 */
/* Private to src/client: the connection and its I/O, shared by client.c and
 * client_exec.c. */
#ifndef MSB_CLIENT_CLIENT_PRIV_H
#define MSB_CLIENT_CLIENT_PRIV_H

#include <pthread.h>

#include "client/client.h"
#include "proto/outq.h"
#include "util/util.h"

/* Stop queueing stdin while this much is waiting to be sent. */
#define MSB_CLIENT_OUTQ_HIGH (256u * 1024)
/* First allocation of the send queue. */
#define MSB_CLIENT_OUTQ_INITIAL (16u * 1024)
/*
 * The send queue's hard maximum. One call at a time uses a connection (the
 * lock), and it queues stdin only below MSB_CLIENT_OUTQ_HIGH, so the queue
 * holds at most that mark, one stdin frame, one EXEC_OPEN reservation (a
 * frame of the agent's size, <= 64 KiB) and control frames (CREDIT, EOF,
 * CANCEL) whose number the agent's output, itself bounded by our credit,
 * limits. Reaching the maximum means the agent stopped reading: the call
 * fails with MSB_E_PROTOCOL and the connection is dropped.
 */
#define MSB_CLIENT_OUTQ_MAX (1024u * 1024)

struct msb_client {
	pthread_mutex_t lock;
	char *path; /* NULL: made from an fd, no reconnection */
	int fd;	    /* -1 once closed */
	msb_proto_reader *rd;
	uint16_t version;
	uint32_t peer_max_payload;
	uint32_t last_channel;
	msb_proto_outq out; /* queued frames, at most MSB_CLIENT_OUTQ_MAX bytes */
};

/* Connected, or reconnect (path clients) before `deadline`. */
int msb_client__ensure(msb_client *c, int64_t deadline, msb_error **err);
/* The same in two halves, so that a small first request can go out behind
 * our HELLO: begin connects and queues HELLO when there is no connection
 * (*fresh = true; the peer's maximum is then MSB_PROTO_MIN_PAYLOAD until
 * finish); finish reads the agent's HELLO. */
int msb_client__ensure_begin(msb_client *c, int64_t deadline, bool *fresh, msb_error **err);
int msb_client__ensure_finish(msb_client *c, int64_t deadline, msb_error **err);
/* Close the connection; a path client reconnects on its next call. */
void msb_client__drop(msb_client *c);
/* A fresh channel id (odd, increasing). 0 when the ids are used up (then
 * the connection must be renewed). */
uint32_t msb_client__channel(msb_client *c);

/* Space for n bytes at the tail of the send queue: *dst. When the queue
 * refuses (at MSB_CLIENT_OUTQ_MAX: MSB_E_PROTOCOL; no memory: MSB_E_NOMEM)
 * the connection is dropped and the error set. */
int msb_client__reserve(msb_client *c, size_t n, uint8_t **dst, msb_error **err);
void msb_client__commit(msb_client *c, size_t n);
size_t msb_client__queued(const msb_client *c);
/* Queue one frame built by an msb_proto_enc_* into `frame` (its length or a
 * negative status); errors as msb_client__reserve, or MSB_E_RUNTIME when the
 * encoder refused. */
int msb_client__queue_small(msb_client *c, const uint8_t *frame, int len, msb_error **err);

/* A descriptor the I/O wait also watches: events 0 = not now; revents is
 * set on return. */
typedef struct msb_client_watch {
	int fd;
	short events;
	short revents;
} msb_client_watch;
#define MSB_CLIENT_MAX_WATCH 4

/*
 * Send what is queued and wait for bytes until `deadline` (ns, monotonic).
 * Also watches w[0..nw) (nw <= MSB_CLIENT_MAX_WATCH) and returns as soon as
 * one of them has events. Returns 1 after progress, 0 at the deadline, or
 * -errno (-EPIPE: the peer closed the connection).
 */
int msb_client__io(msb_client *c, int64_t deadline, msb_client_watch *w, size_t nw);

/* Fail with MSB_E_PROTOCOL and close the connection. Returns the code. */
int msb_client__violation(msb_client *c, msb_error **err, const char *fmt, ...) MSB_PRINTF(3, 4);
/* Report a lost connection (rc from msb_client__io) and close it. */
int msb_client__lost(msb_client *c, int rc, const char *during, msb_error **err);
/* The agent's ERROR on channel 0: the connection is over. */
int msb_client__peer_error(msb_client *c, const msb_proto_frame *f, msb_error **err);

/* Deadline `seconds` from now, saturating. */
int64_t msb_client__deadline(double seconds);

#endif
