/* SPDX-License-Identifier: Apache-2.0 */
/* Frame headers, the incremental reader, type rules and credit accounting. */
#include <string.h>

#include "proto.h"
#include "wire.h"

const char *msb_proto_strerror(int status)
{
	switch (status) {
	case MSB_PROTO_OK:
		return "ok";
	case MSB_PROTO_E_MALFORMED:
		return "malformed frame";
	case MSB_PROTO_E_LIMIT:
		return "a size or count exceeds its limit";
	case MSB_PROTO_E_UNKNOWN:
		return "unknown frame type or flag";
	case MSB_PROTO_E_CHANNEL:
		return "message not allowed on this channel";
	case MSB_PROTO_E_SPACE:
		return "output buffer too small";
	case MSB_PROTO_E_VERSION:
		return "no common protocol version";
	case MSB_PROTO_E_TYPE:
		return "frame of another type";
	case MSB_PROTO_E_FULL:
		return "outbound queue at its maximum";
	case MSB_PROTO_E_NOMEM:
		return "out of memory";
	default:
		return "unknown status";
	}
}

const char *msb_proto_type_name(uint16_t type)
{
	switch (type) {
	case MSB_PROTO_HELLO:
		return "HELLO";
	case MSB_PROTO_ERROR:
		return "ERROR";
	case MSB_PROTO_PING:
		return "PING";
	case MSB_PROTO_PONG:
		return "PONG";
	case MSB_PROTO_IDENTITY:
		return "IDENTITY";
	case MSB_PROTO_IDENTITY_OK:
		return "IDENTITY_OK";
	case MSB_PROTO_EXEC_OPEN:
		return "EXEC_OPEN";
	case MSB_PROTO_DATA:
		return "DATA";
	case MSB_PROTO_EOF:
		return "EOF";
	case MSB_PROTO_CREDIT:
		return "CREDIT";
	case MSB_PROTO_EXIT:
		return "EXIT";
	case MSB_PROTO_CANCEL:
		return "CANCEL";
	case MSB_PROTO_WINSIZE:
		return "WINSIZE";
	case MSB_PROTO_PS_REQUEST:
		return "PS_REQUEST";
	case MSB_PROTO_PS_REPLY:
		return "PS_REPLY";
	case MSB_PROTO_EGRESS_LISTEN:
		return "EGRESS_LISTEN";
	case MSB_PROTO_EGRESS_READY:
		return "EGRESS_READY";
	case MSB_PROTO_EGRESS_OPEN:
		return "EGRESS_OPEN";
	default:
		return "UNKNOWN";
	}
}

bool msb_proto_host_may_send(uint16_t type)
{
	switch (type) {
	case MSB_PROTO_HELLO:
	case MSB_PROTO_ERROR:
	case MSB_PROTO_PING:
	case MSB_PROTO_PONG:
	case MSB_PROTO_IDENTITY:
	case MSB_PROTO_EXEC_OPEN:
	case MSB_PROTO_DATA:
	case MSB_PROTO_EOF:
	case MSB_PROTO_CREDIT:
	case MSB_PROTO_CANCEL:
	case MSB_PROTO_WINSIZE:
	case MSB_PROTO_PS_REQUEST:
	case MSB_PROTO_EGRESS_LISTEN:
		return true;
	default:
		return false;
	}
}

bool msb_proto_agent_may_send(uint16_t type)
{
	switch (type) {
	case MSB_PROTO_HELLO:
	case MSB_PROTO_ERROR:
	case MSB_PROTO_PING:
	case MSB_PROTO_PONG:
	case MSB_PROTO_IDENTITY_OK:
	case MSB_PROTO_DATA:
	case MSB_PROTO_EOF:
	case MSB_PROTO_CREDIT:
	case MSB_PROTO_EXIT:
	case MSB_PROTO_PS_REPLY:
	case MSB_PROTO_EGRESS_READY:
	case MSB_PROTO_EGRESS_OPEN:
		return true;
	default:
		return false;
	}
}

int msb_proto_header_check(uint16_t type, uint16_t flags, uint32_t channel)
{
	bool control;

	switch (type) {
	case MSB_PROTO_HELLO:
	case MSB_PROTO_PING:
	case MSB_PROTO_PONG:
	case MSB_PROTO_IDENTITY:
	case MSB_PROTO_IDENTITY_OK:
		control = true;
		break;
	case MSB_PROTO_ERROR:
		/* either: channel 0 ends the connection, another ends a channel */
		if (flags != 0)
			return MSB_PROTO_E_UNKNOWN;
		return MSB_PROTO_OK;
	case MSB_PROTO_EXEC_OPEN:
	case MSB_PROTO_DATA:
	case MSB_PROTO_EOF:
	case MSB_PROTO_CREDIT:
	case MSB_PROTO_EXIT:
	case MSB_PROTO_CANCEL:
	case MSB_PROTO_WINSIZE:
	case MSB_PROTO_PS_REQUEST:
	case MSB_PROTO_PS_REPLY:
	case MSB_PROTO_EGRESS_LISTEN:
	case MSB_PROTO_EGRESS_READY:
		control = false;
		break;
	case MSB_PROTO_EGRESS_OPEN:
		if (flags != 0)
			return MSB_PROTO_E_UNKNOWN;
		return msb_proto_channel_is_agent(channel) ? MSB_PROTO_OK : MSB_PROTO_E_CHANNEL;
	default:
		return MSB_PROTO_E_UNKNOWN;
	}
	uint16_t allowed = type == MSB_PROTO_PS_REPLY ? MSB_PROTO_FLAG_MORE : 0;
	if (flags & ~allowed)
		return MSB_PROTO_E_UNKNOWN;
	if (control != (channel == 0))
		return MSB_PROTO_E_CHANNEL;
	return MSB_PROTO_OK;
}

void msb_proto_put_header(uint8_t *out, uint32_t len, uint16_t type, uint16_t flags,
			  uint32_t channel)
{
	msb_wire_put32(out, len);
	msb_wire_put16(out + 4, type);
	msb_wire_put16(out + 6, flags);
	msb_wire_put32(out + 8, channel);
}

/* ---- reader -------------------------------------------------------------- */

void msb_proto_reader_init(msb_proto_reader *r, uint32_t max_payload)
{
	if (max_payload < MSB_PROTO_MIN_PAYLOAD)
		max_payload = MSB_PROTO_MIN_PAYLOAD;
	if (max_payload > MSB_PROTO_MAX_PAYLOAD)
		max_payload = MSB_PROTO_MAX_PAYLOAD;
	r->max_payload = max_payload;
	r->error = 0;
	r->len = 0;
	r->consumed = 0;
}

/* Drop the frame handed out last. */
static void reader_compact(msb_proto_reader *r)
{
	if (r->consumed == 0)
		return;
	r->len -= r->consumed;
	if (r->len > 0)
		memmove(r->buf, r->buf + r->consumed, r->len);
	r->consumed = 0;
}

size_t msb_proto_reader_space(msb_proto_reader *r, uint8_t **dst)
{
	reader_compact(r);
	*dst = r->buf + r->len;
	if (r->error)
		return 0;
	return sizeof(r->buf) - r->len;
}

void msb_proto_reader_commit(msb_proto_reader *r, size_t n)
{
	size_t room = sizeof(r->buf) - r->len;
	r->len += n < room ? n : room;
}

size_t msb_proto_reader_feed(msb_proto_reader *r, const void *data, size_t n)
{
	uint8_t *dst;
	size_t room = msb_proto_reader_space(r, &dst);
	if (n > room)
		n = room;
	if (n > 0)
		memcpy(dst, data, n);
	r->len += n;
	return n;
}

int msb_proto_reader_next(msb_proto_reader *r, msb_proto_frame *f)
{
	if (r->error)
		return r->error;
	reader_compact(r);
	if (r->len < MSB_PROTO_HEADER_SIZE)
		return 0;

	uint32_t len = msb_wire_get32(r->buf);
	uint16_t type = msb_wire_get16(r->buf + 4);
	uint16_t flags = msb_wire_get16(r->buf + 6);
	uint32_t channel = msb_wire_get32(r->buf + 8);

	int rc = msb_proto_header_check(type, flags, channel);
	if (rc < 0)
		return r->error = rc;
	if (len > r->max_payload)
		return r->error = MSB_PROTO_E_LIMIT;
	if (r->len - MSB_PROTO_HEADER_SIZE < len)
		return 0;

	f->type = type;
	f->flags = flags;
	f->channel = channel;
	f->len = len;
	f->payload = r->buf + MSB_PROTO_HEADER_SIZE;
	r->consumed = MSB_PROTO_HEADER_SIZE + (size_t)len;
	return 1;
}

bool msb_proto_reader_idle(const msb_proto_reader *r)
{
	return r->len == r->consumed;
}

/* ---- credit -------------------------------------------------------------- */

int msb_proto_credit_grant(msb_proto_credit *c, uint32_t bytes)
{
	if (bytes > MSB_PROTO_MAX_WINDOW || c->avail > MSB_PROTO_MAX_WINDOW - bytes)
		return MSB_PROTO_E_LIMIT;
	c->avail += bytes;
	return MSB_PROTO_OK;
}

int msb_proto_credit_take(msb_proto_credit *c, uint32_t bytes)
{
	if (bytes > c->avail)
		return MSB_PROTO_E_LIMIT;
	c->avail -= bytes;
	return MSB_PROTO_OK;
}
