/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The bounded outbound queue (src/proto/outq.h): the typed refusal at the
 * maximum, FIFO order across compactions and partial consumes, size
 * arithmetic near SIZE_MAX, and the send helper (issue 14 part 4).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "proto/outq.h"

Test(outq, init_needs_a_maximum)
{
	msb_proto_outq q;
	cr_assert_eq(msb_proto_outq_init(&q, 16, 0), MSB_PROTO_E_LIMIT);
	cr_assert_eq(msb_proto_outq_init(&q, 0, 16), MSB_PROTO_E_LIMIT);
	cr_assert_eq(msb_proto_outq_init(&q, 64, 16), 0);
	cr_assert_eq(q.initial, 16, "initial is clamped to the maximum");
	cr_assert_eq(q.cap, 0, "init allocates nothing");
	cr_assert_eq(msb_proto_outq_pending(&q), 0);
	cr_assert_eq(msb_proto_outq_room(&q), 16);
	msb_proto_outq_free(&q);
	msb_proto_outq_free(NULL);
}

/* Fill with whole 100-byte frames to exactly the maximum; the next byte is
 * refused with MSB_PROTO_E_FULL and leaves the queue as it was. */
Test(outq, full_at_the_maximum)
{
	msb_proto_outq q;
	cr_assert_eq(msb_proto_outq_init(&q, 64, 1000), 0);
	uint8_t frame[100];
	for (int i = 0; i < 10; i++) {
		memset(frame, 'a' + i, sizeof(frame));
		cr_assert_eq(msb_proto_outq_append(&q, frame, sizeof(frame)), 0, "frame %d", i);
		cr_assert_leq(q.cap, 1000, "the allocation never passes the maximum");
	}
	cr_assert_eq(msb_proto_outq_pending(&q), 1000);
	cr_assert_eq(msb_proto_outq_room(&q), 0);
	cr_assert_eq(q.cap, 1000, "doubling from 64 is clamped to the maximum (not 1024)");

	const uint8_t *before;
	cr_assert_eq(msb_proto_outq_peek(&q, &before), 1000);
	cr_assert_eq(msb_proto_outq_append(&q, frame, sizeof(frame)), MSB_PROTO_E_FULL);
	cr_assert_eq(msb_proto_outq_append(&q, "x", 1), MSB_PROTO_E_FULL);
	uint8_t *dst = (uint8_t *)"unchanged";
	cr_assert_eq(msb_proto_outq_reserve(&q, 1, &dst), MSB_PROTO_E_FULL);
	cr_assert_str_eq((const char *)dst, "unchanged", "no output on refusal");
	cr_assert_str_eq(msb_proto_strerror(MSB_PROTO_E_FULL), "outbound queue at its maximum");

	/* the refusals changed nothing */
	const uint8_t *p;
	cr_assert_eq(msb_proto_outq_peek(&q, &p), 1000);
	cr_assert_eq(p, before);
	for (int i = 0; i < 10; i++)
		cr_assert_eq(p[i * 100], 'a' + i);
	cr_assert_eq(p[999], 'j');

	/* an empty reservation still fits; one consumed byte makes room for one */
	cr_assert_eq(msb_proto_outq_reserve(&q, 0, &dst), 0);
	msb_proto_outq_consume(&q, 1);
	cr_assert_eq(msb_proto_outq_append(&q, "z", 1), 0);
	cr_assert_eq(msb_proto_outq_append(&q, "z", 1), MSB_PROTO_E_FULL);
	cr_assert_eq(msb_proto_outq_peek(&q, &p), 1000);
	cr_assert_eq(p[0], 'a');
	cr_assert_eq(p[999], 'z');
	cr_assert_eq(q.cap, 1000);
	msb_proto_outq_free(&q);
	cr_assert_eq(msb_proto_outq_pending(&q), 0);
	cr_assert_eq(msb_proto_outq_append(&q, "again", 5), 0, "usable after free");
	msb_proto_outq_free(&q);
}

/* A small deterministic generator. */
static uint32_t rnd(uint32_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 17;
	*s ^= *s << 5;
	return *s;
}

/* Frames of varying size in, partial consumes out: the bytes come out in
 * the order they went in, across many compactions, growths and refusals. */
Test(outq, fifo_across_compactions)
{
	msb_proto_outq q;
	cr_assert_eq(msb_proto_outq_init(&q, 8, 509), 0);
	uint32_t seed = 0x2545f491u;
	uint64_t produced = 0, consumed = 0;
	unsigned compactions = 0, refusals = 0;
	uint8_t frame[200];
	for (int round = 0; round < 200000; round++) {
		if (rnd(&seed) % 3 != 0) {
			size_t n = rnd(&seed) % sizeof(frame);
			for (size_t i = 0; i < n; i++)
				frame[i] = (uint8_t)((produced + i) * 7 + 3);
			size_t head = q.head, pending = msb_proto_outq_pending(&q);
			int rc = msb_proto_outq_append(&q, frame, n);
			if (rc == MSB_PROTO_E_FULL) {
				cr_assert_gt(n, msb_proto_outq_room(&q));
				cr_assert_eq(msb_proto_outq_pending(&q), pending);
				refusals++;
				continue;
			}
			cr_assert_eq(rc, 0);
			if (head > 0 && pending > 0 && q.head == 0)
				compactions++;
			produced += n;
		} else {
			const uint8_t *p;
			size_t have = msb_proto_outq_peek(&q, &p);
			size_t n = have ? rnd(&seed) % (have + 1) : 0;
			for (size_t i = 0; i < n; i++)
				cr_assert_eq(p[i], (uint8_t)((consumed + i) * 7 + 3),
					     "byte %llu out of order",
					     (unsigned long long)(consumed + i));
			msb_proto_outq_consume(&q, n);
			consumed += n;
		}
		cr_assert_eq(msb_proto_outq_pending(&q), produced - consumed);
		cr_assert_leq(q.cap, 509);
	}
	cr_assert_gt(compactions, 100, "the pattern moved pending bytes (%u)", compactions);
	cr_assert_gt(refusals, 100, "the pattern reached the maximum (%u)", refusals);
	msb_proto_outq_free(&q);
}

Test(outq, partial_consume_and_commit)
{
	msb_proto_outq q;
	cr_assert_eq(msb_proto_outq_init(&q, 16, 64), 0);
	cr_assert_eq(msb_proto_outq_append(&q, "abcdef", 6), 0);
	msb_proto_outq_consume(&q, 0);
	const uint8_t *p;
	cr_assert_eq(msb_proto_outq_peek(&q, &p), 6);
	msb_proto_outq_consume(&q, 2);
	cr_assert_eq(msb_proto_outq_peek(&q, &p), 4);
	cr_assert_eq(memcmp(p, "cdef", 4), 0);
	/* reserve more than is committed: only the commit counts */
	uint8_t *dst;
	cr_assert_eq(msb_proto_outq_reserve(&q, 10, &dst), 0);
	memcpy(dst, "ghij", 4);
	msb_proto_outq_commit(&q, 4);
	cr_assert_eq(msb_proto_outq_peek(&q, &p), 8);
	cr_assert_eq(memcmp(p, "cdefghij", 8), 0);
	/* a commit past the reservation is clamped to it */
	cr_assert_eq(msb_proto_outq_reserve(&q, 2, &dst), 0);
	memcpy(dst, "kl", 2);
	msb_proto_outq_commit(&q, 50);
	cr_assert_eq(msb_proto_outq_pending(&q), 10);
	msb_proto_outq_commit(&q, 5); /* no reservation: nothing */
	cr_assert_eq(msb_proto_outq_pending(&q), 10);
	/* consuming more than is pending empties and rewinds */
	msb_proto_outq_consume(&q, 1000);
	cr_assert_eq(msb_proto_outq_peek(&q, &p), 0);
	cr_assert_null(p);
	cr_assert_eq(q.head, 0);
	cr_assert_eq(q.tail, 0);
	/* clear keeps the storage */
	size_t cap = q.cap;
	cr_assert_eq(msb_proto_outq_append(&q, "x", 1), 0);
	msb_proto_outq_clear(&q);
	cr_assert_eq(msb_proto_outq_pending(&q), 0);
	cr_assert_eq(q.cap, cap);
	msb_proto_outq_free(&q);
}

/* Sizes near SIZE_MAX are refused by the checked arithmetic, never wrapped
 * into a small reservation (nothing large is allocated here). */
Test(outq, size_arithmetic_near_size_max)
{
	msb_proto_outq q;
	uint8_t *dst;
	cr_assert_eq(msb_proto_outq_init(&q, 16, 100), 0);
	cr_assert_eq(msb_proto_outq_append(&q, "0123456789", 10), 0);
	cr_assert_eq(msb_proto_outq_reserve(&q, SIZE_MAX, &dst), MSB_PROTO_E_FULL);
	cr_assert_eq(msb_proto_outq_reserve(&q, SIZE_MAX - 5, &dst), MSB_PROTO_E_FULL);
	cr_assert_eq(msb_proto_outq_reserve(&q, SIZE_MAX - 9, &dst), MSB_PROTO_E_FULL);
	cr_assert_eq(msb_proto_outq_reserve(&q, 91, &dst), MSB_PROTO_E_FULL);
	cr_assert_eq(msb_proto_outq_reserve(&q, 90, &dst), 0);
	cr_assert_eq(msb_proto_outq_pending(&q), 10);
	msb_proto_outq_free(&q);

	/* the largest maximum: pending + n would wrap for these n */
	cr_assert_eq(msb_proto_outq_init(&q, 16, SIZE_MAX), 0);
	cr_assert_eq(msb_proto_outq_append(&q, "0123456789", 10), 0);
	cr_assert_eq(msb_proto_outq_room(&q), SIZE_MAX - 10);
	cr_assert_eq(msb_proto_outq_reserve(&q, SIZE_MAX, &dst), MSB_PROTO_E_FULL);
	cr_assert_eq(msb_proto_outq_reserve(&q, SIZE_MAX - 9, &dst), MSB_PROTO_E_FULL);
	cr_assert_eq(msb_proto_outq_pending(&q), 10);
	/* growth doubles without overflow: 16 -> 32 */
	cr_assert_eq(msb_proto_outq_append(&q, "0123456789", 10), 0);
	cr_assert_eq(q.cap, 32);
	msb_proto_outq_free(&q);

	/* one past a maximum just above half of SIZE_MAX */
	cr_assert_eq(msb_proto_outq_init(&q, SIZE_MAX / 2 + 1, SIZE_MAX / 2 + 2), 0);
	cr_assert_eq(msb_proto_outq_reserve(&q, SIZE_MAX / 2 + 3, &dst), MSB_PROTO_E_FULL);
	msb_proto_outq_free(&q);
}

Test(outq, send_drains_into_a_socket)
{
	int sv[2];
	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	int sz = 4096;
	setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
	msb_proto_outq q;
	cr_assert_eq(msb_proto_outq_init(&q, 4096, 4u << 20), 0);
	static uint8_t big[1u << 20];
	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (uint8_t)(i * 13);
	cr_assert_eq(msb_proto_outq_append(&q, big, sizeof(big)), 0);
	/* the socket fills: 0 with bytes still pending */
	cr_assert_eq(msb_proto_outq_send(&q, sv[0]), 0);
	size_t left = msb_proto_outq_pending(&q);
	cr_assert_gt(left, 0);
	cr_assert_lt(left, sizeof(big));
	/* the peer reads; what arrives is the queue's bytes in order */
	static uint8_t got[1u << 20];
	size_t n = 0;
	while (n < sizeof(big)) {
		ssize_t r = recv(sv[1], got + n, sizeof(got) - n, MSG_DONTWAIT);
		if (r < 0 && errno == EAGAIN) {
			cr_assert_eq(msb_proto_outq_send(&q, sv[0]), 0);
			continue;
		}
		cr_assert_gt(r, 0);
		n += (size_t)r;
	}
	cr_assert_eq(memcmp(got, big, sizeof(big)), 0);
	cr_assert_eq(msb_proto_outq_pending(&q), 0);
	/* a peer that is gone: -EPIPE, no SIGPIPE, the bytes stay */
	close(sv[1]);
	cr_assert_eq(msb_proto_outq_append(&q, "tail", 4), 0);
	cr_assert_eq(msb_proto_outq_send(&q, sv[0]), -EPIPE);
	cr_assert_eq(msb_proto_outq_pending(&q), 4);
	close(sv[0]);
	msb_proto_outq_free(&q);
}
