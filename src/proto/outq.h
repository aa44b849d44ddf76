/* SPDX-License-Identifier: Apache-2.0 */
/*
 * src/proto/outq.h - the bounded outbound queue of one connection: the bytes
 * (whole encoded frames) accepted for sending and not yet taken by the
 * kernel. The reader of proto.h bounds what comes in; this bounds what goes
 * out. Used by the agent (agent/conn.c), the client (src/client/client.c)
 * and the shim's egress proxy (shim/egress_proxy.c).
 *
 * libc only, like the rest of src/proto (the static agent links it); unlike
 * the reader it allocates, lazily, and never more than its maximum.
 *
 * Every queue states its maximum at init: pending bytes never exceed it and
 * neither does the allocation. A reservation that would pass it is refused
 * with MSB_PROTO_E_FULL and changes nothing, so the caller decides what the
 * limit means (stop producing, or drop the connection saying why); a failed
 * allocation is MSB_PROTO_E_NOMEM, likewise without effect. Size arithmetic
 * is overflow-checked: any n up to SIZE_MAX is answered, never wrapped.
 *
 * Storage: the pending bytes are [head, tail) of one buffer of cap bytes.
 * The compaction rule, the only one:
 *   - a queue that empties (consume or send took everything) rewinds to the
 *     start of its buffer, which costs nothing;
 *   - when the free tail is too short for a reservation, the pending bytes
 *     move to the front if the consumed prefix is at least as long as they
 *     are (so a move never copies more than was consumed since the previous
 *     one: O(1) a byte) or if the buffer is already at its maximum;
 *   - only when that leaves too little room does the buffer grow: from
 *     `initial`, doubling, clamped to `max`. It never shrinks before free.
 *
 * Not thread-safe: a queue belongs to one connection and its one owner.
 */
#ifndef MSB_PROTO_OUTQ_H
#define MSB_PROTO_OUTQ_H

#include <stddef.h>
#include <stdint.h>

#include "proto.h"

typedef struct msb_proto_outq {
	uint8_t *buf;
	size_t head;	 /* first pending byte */
	size_t tail;	 /* one past the last pending byte */
	size_t cap;	 /* bytes allocated at buf (0 until the first reservation) */
	size_t reserved; /* bytes the last reservation promised at tail */
	size_t initial;	 /* first allocation */
	size_t max;	 /* hard maximum of pending bytes and of cap */
} msb_proto_outq;

/* An empty queue of at most `max` pending bytes whose first allocation is
 * `initial` bytes (clamped to max). Allocates nothing. MSB_PROTO_E_LIMIT when
 * max or initial is 0. */
int msb_proto_outq_init(msb_proto_outq *q, size_t initial, size_t max);

/* Release the storage; the queue is empty and usable again with the same
 * limits. Accepts NULL. */
void msb_proto_outq_free(msb_proto_outq *q);

/* Drop every pending byte (a connection that is gone); keeps the storage. */
void msb_proto_outq_clear(msb_proto_outq *q);

/* Pending bytes. */
static inline size_t msb_proto_outq_pending(const msb_proto_outq *q)
{
	return q->tail - q->head;
}

/* Bytes that may still be queued before the maximum. */
static inline size_t msb_proto_outq_room(const msb_proto_outq *q)
{
	return q->max - msb_proto_outq_pending(q);
}

/*
 * Space for n bytes at the end of the queue, to encode or read into
 * directly: *dst, valid until the next call on q. Nothing is queued until
 * msb_proto_outq_commit. 0, MSB_PROTO_E_FULL (pending + n would pass the
 * maximum) or MSB_PROTO_E_NOMEM; on failure the queue is unchanged.
 */
int msb_proto_outq_reserve(msb_proto_outq *q, size_t n, uint8_t **dst);

/* Queue n of the bytes the last reservation made room for (at most that
 * many: a larger n is clamped to the reservation). */
void msb_proto_outq_commit(msb_proto_outq *q, size_t n);

/* Queue a copy of n bytes (a whole encoded frame): reserve + copy + commit.
 * Same results as msb_proto_outq_reserve; all or nothing. */
int msb_proto_outq_append(msb_proto_outq *q, const void *bytes, size_t n);

/* The pending bytes, for write(2)/send(2): returns their count and sets *p
 * to the first (NULL when none). Valid until the next change of q. */
size_t msb_proto_outq_peek(const msb_proto_outq *q, const uint8_t **p);

/* The first n pending bytes were sent: drop them (n is clamped to the
 * pending count). */
void msb_proto_outq_consume(msb_proto_outq *q, size_t n);

/*
 * Send what is pending on a connected, stream socket without blocking and
 * without SIGPIPE, consuming what the kernel took. 0 once the queue is empty
 * or the socket is full (EAGAIN); -errno when the connection failed (the
 * bytes stay queued: clear the queue with the connection). EINTR is retried.
 */
int msb_proto_outq_send(msb_proto_outq *q, int fd);

#endif
