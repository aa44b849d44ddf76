/* SPDX-License-Identifier: Apache-2.0 */
/* The stream multiplexer of the `vm` channel (mux.h). */
#include <string.h>

#include "mux.h"
#include "proto.h"

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

void msb_mux_reader_init(msb_mux_reader *r)
{
	r->have = 0;
	r->consumed = 0;
	r->error = 0;
}

static void drop_consumed(msb_mux_reader *r)
{
	if (r->consumed) {
		memmove(r->buf, r->buf + r->consumed, r->have - r->consumed);
		r->have -= r->consumed;
		r->consumed = 0;
	}
}

uint8_t *msb_mux_space(msb_mux_reader *r, size_t *n)
{
	drop_consumed(r);
	*n = sizeof(r->buf) - r->have;
	return r->buf + r->have;
}

void msb_mux_commit(msb_mux_reader *r, size_t n)
{
	r->have += n;
}

size_t msb_mux_feed(msb_mux_reader *r, const uint8_t *p, size_t n)
{
	size_t room;
	uint8_t *dst = msb_mux_space(r, &room);
	if (n > room)
		n = room;
	memcpy(dst, p, n);
	r->have += n;
	return n;
}

/* The header's rules: type known, reserved zero, length as the type wants. */
static int check(uint16_t type, uint16_t zero, uint32_t conn, uint32_t len)
{
	if (zero != 0)
		return MSB_PROTO_E_MALFORMED;
	switch (type) {
	case MSB_MUX_READY:
		return conn != 0 && len == 0 ? 0 : MSB_PROTO_E_MALFORMED;
	case MSB_MUX_SESSION:
		return conn != 0 && len == MSB_MUX_SESSION_LEN ? 0 : MSB_PROTO_E_MALFORMED;
	case MSB_MUX_OPEN:
	case MSB_MUX_CLOSE:
		return conn != 0 && len == 0 ? 0 : MSB_PROTO_E_MALFORMED;
	case MSB_MUX_DATA:
		if (len > MSB_MUX_MAX_DATA)
			return MSB_PROTO_E_LIMIT;
		return conn != 0 && len > 0 ? 0 : MSB_PROTO_E_MALFORMED;
	case MSB_MUX_CREDIT:
		return conn != 0 && len == 4 ? 0 : MSB_PROTO_E_MALFORMED;
	default:
		return MSB_PROTO_E_UNKNOWN;
	}
}

int msb_mux_next(msb_mux_reader *r, msb_mux_record *out)
{
	if (r->error)
		return r->error;
	drop_consumed(r);
	if (r->have < MSB_MUX_HEADER)
		return 0;
	uint32_t len = get32(r->buf);
	uint16_t type = (uint16_t)(r->buf[4] | r->buf[5] << 8);
	uint16_t zero = (uint16_t)(r->buf[6] | r->buf[7] << 8);
	uint32_t conn = get32(r->buf + 8);
	int rc = check(type, zero, conn, len);
	if (rc < 0)
		return r->error = rc;
	if (r->have < MSB_MUX_HEADER + len)
		return 0;
	out->type = type;
	out->conn = conn;
	out->len = len;
	out->data = r->buf + MSB_MUX_HEADER;
	out->credit = 0;
	if (type == MSB_MUX_SESSION &&
	    memcmp(out->data, MSB_MUX_SESSION_MAGIC, MSB_MUX_SESSION_MAGIC_LEN) != 0)
		return r->error = MSB_PROTO_E_MALFORMED;
	if (type == MSB_MUX_CREDIT) {
		out->credit = get32(out->data);
		if (out->credit == 0 || out->credit > MSB_MUX_WINDOW)
			return r->error = MSB_PROTO_E_LIMIT;
	}
	r->consumed = MSB_MUX_HEADER + len;
	return 1;
}

/* Is a record that msb_mux_sync looks for at p (n bytes there)? 1 yes, 0 no,
 * -1 not known yet (too few bytes). */
static int sync_at(const uint8_t *p, size_t n, bool guest_side, uint32_t session)
{
	uint8_t want[MSB_MUX_HEADER + MSB_MUX_SESSION_MAGIC_LEN];
	size_t wlen;
	if (guest_side) {
		msb_mux_put_header(want, MSB_MUX_SESSION, 0, MSB_MUX_SESSION_LEN);
		memcpy(want + MSB_MUX_HEADER, MSB_MUX_SESSION_MAGIC, MSB_MUX_SESSION_MAGIC_LEN);
		wlen = sizeof(want);
	} else {
		msb_mux_put_header(want, MSB_MUX_READY, session, 0);
		wlen = MSB_MUX_HEADER;
	}
	for (size_t i = 0; i < wlen; i++) {
		if (i >= n)
			return -1;
		/* The session number the guest does not know yet: any nonzero. */
		if (guest_side && i >= 8 && i < 12)
			continue;
		if (p[i] != want[i])
			return 0;
	}
	return !guest_side || get32(p + 8) != 0;
}

int msb_mux_sync(msb_mux_reader *r, bool guest_side, uint32_t session)
{
	drop_consumed(r);
	r->error = 0;
	for (size_t i = 0; i < r->have; i++) {
		int k = sync_at(r->buf + i, r->have - i, guest_side, session);
		if (k == 0)
			continue;
		r->consumed = i;
		drop_consumed(r);
		return k == 1;
	}
	r->have = 0;
	return 0;
}

size_t msb_mux_put_header(uint8_t out[MSB_MUX_HEADER], uint16_t type, uint32_t conn, uint32_t len)
{
	put32(out, len);
	out[4] = (uint8_t)type;
	out[5] = (uint8_t)(type >> 8);
	out[6] = 0;
	out[7] = 0;
	put32(out + 8, conn);
	return MSB_MUX_HEADER;
}

size_t msb_mux_put_credit(uint8_t out[MSB_MUX_HEADER + 4], uint32_t conn, uint32_t bytes)
{
	msb_mux_put_header(out, MSB_MUX_CREDIT, conn, 4);
	put32(out + MSB_MUX_HEADER, bytes);
	return MSB_MUX_HEADER + 4;
}
