/* SPDX-License-Identifier: Apache-2.0 */
/* The `vm` channel's multiplexer under hostile guest bytes (fuzz_mux_entry.h). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fuzz_mux_entry.h"
#include "proto/mux_link.h"
#include "proto/proto.h"

#define CHECK(c)                                                                                   \
	do {                                                                                       \
		if (!(c))                                                                          \
			abort();                                                                   \
	} while (0)

/* Decode everything; returns the record count, or the latched error. */
static int decode(const uint8_t *data, size_t len, size_t step, uint32_t *sum)
{
	static msb_mux_reader rd;
	msb_mux_reader_init(&rd);
	int n = 0;
	*sum = 0;
	for (size_t off = 0; off < len;) {
		size_t k = len - off < step ? len - off : step;
		size_t took = msb_mux_feed(&rd, data + off, k);
		off += took;
		msb_mux_record m;
		int rc;
		while ((rc = msb_mux_next(&rd, &m)) == 1) {
			n++;
			*sum = *sum * 31 + m.type + m.conn * 7 + m.len * 13 + m.credit;
			for (uint32_t i = 0; i < m.len; i++)
				*sum = *sum * 3 + m.data[i];
		}
		if (rc < 0)
			return rc;
		CHECK(took > 0);
	}
	return n;
}

int msb_fuzz_mux(const uint8_t *data, size_t len)
{
	uint32_t a, b;
	int whole = decode(data, len, len ? len : 1, &a);
	int split = decode(data, len, 1, &b);
	CHECK(whole == split);
	CHECK(whole < 0 || a == b);

	int sp[2], c1[2], c2[2];
	CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) == 0);
	CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, c1) == 0);
	CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, c2) == 0);
	/* The host's connections read nothing: what the guest sends stays in
	 * the link (small socket buffers), so its window is what bounds it. */
	int small = 4096;
	setsockopt(c1[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
	setsockopt(c2[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
	msb_mux_link *l = msb_mux_link_new(sp[0], true, NULL, NULL);
	CHECK(l);
	/* A session the guest answered: the input is then parsed as records,
	 * not skipped as the bytes ahead of READY are. */
	static const uint8_t id[MSB_MUX_SESSION_LEN] = MSB_MUX_SESSION_MAGIC;
	CHECK(msb_mux_link_send_session(l, 1, id) == 0);
	uint8_t ready[MSB_MUX_HEADER];
	msb_mux_put_header(ready, MSB_MUX_READY, 1, 0);
	CHECK(write(sp[1], ready, sizeof(ready)) == (ssize_t)sizeof(ready));
	CHECK(msb_mux_link_add(l, c1[0]) == 0);
	CHECK(msb_mux_link_add(l, c2[0]) == 0);
	fcntl(sp[1], F_SETFL, O_NONBLOCK);
	int r = 0;
	size_t off = 0;
	struct pollfd f[1 + MSB_MUX_MAX_STREAMS];
	char sink[65536];
	for (int turn = 0; turn < 10000 && r == 0; turn++) {
		if (off < len) {
			ssize_t w = write(sp[1], data + off, len - off);
			if (w > 0)
				off += (size_t)w;
		}
		/* The guest's side drains what the host sends (OPEN, CREDIT). */
		while (recv(sp[1], sink, sizeof(sink), MSG_DONTWAIT) > 0)
			;
		size_t n = msb_mux_link_pollfds(l, f, 1 + MSB_MUX_MAX_STREAMS);
		poll(f, n, 0);
		r = msb_mux_link_handle(l, f, n);
		if (off == len && !(f[0].revents & POLLIN))
			break;
	}
	CHECK(msb_mux_link_streams(l) <= 2);
	msb_mux_link_free(l);
	close(sp[1]);
	close(c1[1]);
	close(c2[1]);
	return r;
}
