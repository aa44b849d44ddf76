/* SPDX-License-Identifier: Apache-2.0 */
/* The bounded outbound queue; the rules are in outq.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "outq.h"

int msb_proto_outq_init(msb_proto_outq *q, size_t initial, size_t max)
{
	if (max == 0 || initial == 0)
		return MSB_PROTO_E_LIMIT;
	*q = (msb_proto_outq){
		.initial = initial < max ? initial : max,
		.max = max,
	};
	return 0;
}

void msb_proto_outq_free(msb_proto_outq *q)
{
	if (!q)
		return;
	free(q->buf);
	q->buf = NULL;
	q->cap = q->head = q->tail = q->reserved = 0;
}

void msb_proto_outq_clear(msb_proto_outq *q)
{
	q->head = q->tail = q->reserved = 0;
}

static void compact(msb_proto_outq *q)
{
	size_t pending = q->tail - q->head;
	if (q->head == 0)
		return;
	memmove(q->buf, q->buf + q->head, pending);
	q->head = 0;
	q->tail = pending;
}

int msb_proto_outq_reserve(msb_proto_outq *q, size_t n, uint8_t **dst)
{
	size_t pending = q->tail - q->head;
	/* pending <= max always holds, so this cannot wrap */
	if (n > q->max - pending)
		return MSB_PROTO_E_FULL;
	size_t need = pending + n; /* <= max */
	if (pending == 0)
		q->head = q->tail = 0;
	if (q->buf && q->cap - q->tail >= n)
		goto done;
	if (q->buf && q->cap - pending >= n && (q->head >= pending || q->cap == q->max)) {
		compact(q);
		goto done;
	}
	/* Grow: the first allocation is `initial`; after that at least one
	 * doubling (here cap < max, else the move above made room). */
	size_t cap = q->initial;
	if (q->buf)
		cap = q->cap > q->max / 2 ? q->max : q->cap * 2;
	while (cap < need)
		cap = cap > q->max / 2 ? q->max : cap * 2;
	uint8_t *b = realloc(q->buf, cap);
	if (!b)
		return MSB_PROTO_E_NOMEM;
	q->buf = b;
	q->cap = cap;
	compact(q);
done:
	q->reserved = n;
	*dst = q->buf + q->tail;
	return 0;
}

void msb_proto_outq_commit(msb_proto_outq *q, size_t n)
{
	if (n > q->reserved)
		n = q->reserved;
	q->tail += n;
	q->reserved = 0;
}

int msb_proto_outq_append(msb_proto_outq *q, const void *bytes, size_t n)
{
	uint8_t *dst;
	int rc = msb_proto_outq_reserve(q, n, &dst);
	if (rc < 0)
		return rc;
	if (n > 0)
		memcpy(dst, bytes, n);
	msb_proto_outq_commit(q, n);
	return 0;
}

size_t msb_proto_outq_peek(const msb_proto_outq *q, const uint8_t **p)
{
	size_t pending = q->tail - q->head;
	*p = pending ? q->buf + q->head : NULL;
	return pending;
}

void msb_proto_outq_consume(msb_proto_outq *q, size_t n)
{
	size_t pending = q->tail - q->head;
	if (n >= pending) {
		q->head = q->tail = 0;
		return;
	}
	q->head += n;
}

int msb_proto_outq_send(msb_proto_outq *q, int fd)
{
	const uint8_t *p;
	size_t n;
	while ((n = msb_proto_outq_peek(q, &p)) > 0) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return 0;
			return -errno;
		}
		msb_proto_outq_consume(q, (size_t)w);
	}
	return 0;
}
