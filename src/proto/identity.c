/* SPDX-License-Identifier: Apache-2.0 */
/* IDENTITY and IDENTITY_OK (types 5, 6; proto.h, docs/internals/protocol.md). */
#include <string.h>

#include "proto.h"
#include "wire.h"

/* [A-Za-z0-9.-]{1,MSB_PROTO_MAX_HOSTNAME}: what sethostname(2) and the
 * synthesized /etc files take without quoting. */
static int check_hostname(const uint8_t *p, size_t n)
{
	if (n == 0 || n > MSB_PROTO_MAX_HOSTNAME)
		return MSB_PROTO_E_LIMIT;
	for (size_t i = 0; i < n; i++) {
		uint8_t c = p[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '-'))
			return MSB_PROTO_E_MALFORMED;
	}
	return MSB_PROTO_OK;
}

int msb_proto_enc_identity(uint8_t *out, size_t cap, uint64_t cookie, const char *hostname)
{
	size_t n = hostname ? strlen(hostname) : 0;
	int rc = check_hostname((const uint8_t *)hostname, n);
	if (rc < 0)
		return rc;
	size_t len = 12 + n;
	if (cap < MSB_PROTO_HEADER_SIZE + len)
		return MSB_PROTO_E_SPACE;
	msb_proto_put_header(out, (uint32_t)len, MSB_PROTO_IDENTITY, 0, 0);
	uint8_t *p = out + MSB_PROTO_HEADER_SIZE;
	msb_wire_put64(p, cookie);
	msb_wire_put32(p + 8, (uint32_t)n);
	memcpy(p + 12, hostname, n);
	return (int)(MSB_PROTO_HEADER_SIZE + len);
}

int msb_proto_dec_identity(const msb_proto_frame *f, msb_proto_identity *out)
{
	if (f->type != MSB_PROTO_IDENTITY)
		return MSB_PROTO_E_TYPE;
	int rc = msb_proto_header_check(f->type, f->flags, f->channel);
	if (rc < 0)
		return rc;
	if (f->len < 12)
		return MSB_PROTO_E_MALFORMED;
	uint32_t n = msb_wire_get32(f->payload + 8);
	if (n != f->len - 12)
		return MSB_PROTO_E_MALFORMED;
	if ((rc = check_hostname(f->payload + 12, n)) < 0)
		return rc;
	out->cookie = msb_wire_get64(f->payload);
	out->hostname.ptr = f->payload + 12;
	out->hostname.len = n;
	return MSB_PROTO_OK;
}

int msb_proto_enc_identity_ok(uint8_t *out, size_t cap, uint64_t cookie)
{
	if (cap < MSB_PROTO_HEADER_SIZE + 8)
		return MSB_PROTO_E_SPACE;
	msb_proto_put_header(out, 8, MSB_PROTO_IDENTITY_OK, 0, 0);
	msb_wire_put64(out + MSB_PROTO_HEADER_SIZE, cookie);
	return (int)MSB_PROTO_HEADER_SIZE + 8;
}

int msb_proto_dec_identity_ok(const msb_proto_frame *f, uint64_t *cookie)
{
	if (f->type != MSB_PROTO_IDENTITY_OK)
		return MSB_PROTO_E_TYPE;
	int rc = msb_proto_header_check(f->type, f->flags, f->channel);
	if (rc < 0)
		return rc;
	if (f->len != 8)
		return MSB_PROTO_E_MALFORMED;
	*cookie = msb_wire_get64(f->payload);
	return MSB_PROTO_OK;
}
