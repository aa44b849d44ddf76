/* SPDX-License-Identifier: Apache-2.0 */
/* Egress tunnel messages (types 64..66); layouts in docs/internals/egress.md. */
#include "proto.h"
#include "wire.h"

static int check_listen(const msb_proto_egress_listen *l)
{
	if (l->port == 0)
		return MSB_PROTO_E_MALFORMED;
	if (l->max_tunnels == 0 || l->max_tunnels >= MSB_PROTO_MAX_CHANNELS)
		return MSB_PROTO_E_LIMIT;
	if (l->window < MSB_PROTO_MIN_PAYLOAD || l->window > MSB_PROTO_MAX_WINDOW)
		return MSB_PROTO_E_LIMIT;
	if (l->flags & ~MSB_PROTO_EGRESS_HANDOVER)
		return MSB_PROTO_E_MALFORMED;
	return MSB_PROTO_OK;
}

int msb_proto_enc_egress_listen(uint8_t *out, size_t cap, uint32_t channel,
				const msb_proto_egress_listen *l)
{
	int rc = check_listen(l);
	if (rc < 0)
		return rc;
	if ((rc = msb_proto_header_check(MSB_PROTO_EGRESS_LISTEN, 0, channel)) < 0)
		return rc;
	uint32_t len = l->flags ? 12 : 8;
	if (cap < MSB_PROTO_HEADER_SIZE + len)
		return MSB_PROTO_E_SPACE;
	msb_proto_put_header(out, len, MSB_PROTO_EGRESS_LISTEN, 0, channel);
	msb_wire_put16(out + MSB_PROTO_HEADER_SIZE, l->port);
	msb_wire_put16(out + MSB_PROTO_HEADER_SIZE + 2, l->max_tunnels);
	msb_wire_put32(out + MSB_PROTO_HEADER_SIZE + 4, l->window);
	if (l->flags)
		msb_wire_put32(out + MSB_PROTO_HEADER_SIZE + 8, l->flags);
	return (int)(MSB_PROTO_HEADER_SIZE + len);
}

int msb_proto_dec_egress_listen(const msb_proto_frame *f, msb_proto_egress_listen *out)
{
	if (f->type != MSB_PROTO_EGRESS_LISTEN)
		return MSB_PROTO_E_TYPE;
	int rc = msb_proto_header_check(f->type, f->flags, f->channel);
	if (rc < 0)
		return rc;
	if (f->len != 8 && f->len != 12)
		return MSB_PROTO_E_MALFORMED;
	msb_proto_egress_listen l = {
		.port = msb_wire_get16(f->payload),
		.max_tunnels = msb_wire_get16(f->payload + 2),
		.window = msb_wire_get32(f->payload + 4),
		.flags = f->len == 12 ? msb_wire_get32(f->payload + 8) : 0,
	};
	/* flags 0 has one spelling: the 8-byte form */
	if (f->len == 12 && l.flags == 0)
		return MSB_PROTO_E_MALFORMED;
	if ((rc = check_listen(&l)) < 0)
		return rc;
	*out = l;
	return MSB_PROTO_OK;
}

int msb_proto_enc_egress_empty(uint8_t *out, size_t cap, uint16_t type, uint32_t channel)
{
	if (type != MSB_PROTO_EGRESS_READY && type != MSB_PROTO_EGRESS_OPEN)
		return MSB_PROTO_E_TYPE;
	int rc = msb_proto_header_check(type, 0, channel);
	if (rc < 0)
		return rc;
	if (cap < MSB_PROTO_HEADER_SIZE + 4)
		return MSB_PROTO_E_SPACE;
	msb_proto_put_header(out, 4, type, 0, channel);
	msb_wire_put32(out + MSB_PROTO_HEADER_SIZE, 0);
	return (int)MSB_PROTO_HEADER_SIZE + 4;
}

int msb_proto_dec_egress_empty(const msb_proto_frame *f, uint16_t type)
{
	if (f->type != type || (type != MSB_PROTO_EGRESS_READY && type != MSB_PROTO_EGRESS_OPEN))
		return MSB_PROTO_E_TYPE;
	int rc = msb_proto_header_check(f->type, f->flags, f->channel);
	if (rc < 0)
		return rc;
	if (f->len != 4 || msb_wire_get32(f->payload) != 0)
		return MSB_PROTO_E_MALFORMED;
	return MSB_PROTO_OK;
}
