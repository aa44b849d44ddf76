/* SPDX-License-Identifier: Apache-2.0 */
/*
 * src/proto/mux - many byte streams over one: how the `vm` backend carries
 * every host connection to msb-agent over the guest's single virtio-serial
 * port (docs/internals/vm.md, "The channel").
 *
 * The shim (host) and msb-agent's port pump (guest) exchange records. A
 * record is a 12-byte little-endian header and `length` payload bytes:
 *
 *	u32 length   payload bytes (DATA: 1..MSB_MUX_MAX_DATA; CREDIT: 4; else 0)
 *	u16 type     enum msb_mux_type
 *	u16 zero
 *	u32 conn     the stream: an id the shim opened; for SESSION and READY
 *	             the host session's number
 *
 * Every host connection to the port is one session: the host's first record
 * is SESSION (a nonzero random number, MSB_MUX_SESSION_LEN bytes of identity:
 * the magic, fresh entropy, the host name, the instance id); the guest
 * drops every stream and byte of the session before, applies the identity
 * and answers READY with the same number. Until then each side skips what
 * is ahead of that record (msb_mux_sync): bytes of an old session may still
 * be in the port.
 *
 * The shim opens streams with strictly increasing ids and never reuses one.
 * Each side may have at most MSB_MUX_WINDOW bytes of DATA in flight per
 * stream; the receiver returns credit (CREDIT) as it hands bytes on, so one
 * stalled stream never blocks the others. CLOSE from either side ends a
 * stream; records for a stream already closed are dropped, records for an id
 * never opened break the link. The bytes carried are the wire protocol of
 * proto.h, unparsed: the mux knows nothing of them.
 *
 * libc only, no allocation, like the rest of src/proto.
 */
#ifndef MSB_PROTO_MUX_H
#define MSB_PROTO_MUX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MSB_MUX_HEADER 12u
#define MSB_MUX_MAX_DATA 65536u
#define MSB_MUX_WINDOW (256u * 1024) /* per stream and direction */
#define MSB_MUX_MAX_STREAMS 64u	     /* open at once */
#define MSB_MUX_RECORD_MAX (MSB_MUX_HEADER + MSB_MUX_MAX_DATA)

enum msb_mux_type {
	MSB_MUX_READY = 1,   /* guest -> host, stream 0: the agent listens */
	MSB_MUX_OPEN = 2,    /* host -> guest: a new stream */
	MSB_MUX_DATA = 3,    /* both: bytes of the stream */
	MSB_MUX_CREDIT = 4,  /* both: u32 bytes handed on since the last CREDIT */
	MSB_MUX_CLOSE = 5,   /* both: the stream is over */
	MSB_MUX_SESSION = 6, /* host -> guest, first on a connection: a new session */
};

/* SESSION's payload: magic, entropy, host name and instance id (each
 * NUL-padded; a name of MSB_MUX_SESSION_NAME bytes has no NUL). */
#define MSB_MUX_SESSION_MAGIC "msb-sess"
#define MSB_MUX_SESSION_MAGIC_LEN 8u
#define MSB_MUX_SESSION_SEED 32u
#define MSB_MUX_SESSION_NAME 64u
#define MSB_MUX_SESSION_ID 32u
#define MSB_MUX_SESSION_LEN                                                                        \
	(MSB_MUX_SESSION_MAGIC_LEN + MSB_MUX_SESSION_SEED + MSB_MUX_SESSION_NAME +                 \
	 MSB_MUX_SESSION_ID)

typedef struct msb_mux_record {
	uint16_t type;
	uint32_t conn;
	const uint8_t *data; /* DATA: a view into the reader's buffer */
	uint32_t len;
	uint32_t credit; /* CREDIT */
} msb_mux_record;

/* Incremental reader: feed bytes, take whole records. Holds one record. */
typedef struct msb_mux_reader {
	uint8_t buf[MSB_MUX_RECORD_MAX];
	size_t have;
	size_t consumed; /* bytes of the record last returned */
	int error;	 /* latched MSB_PROTO_E_* */
} msb_mux_reader;

void msb_mux_reader_init(msb_mux_reader *r);
/* Copy up to n bytes in; returns how many were taken (0 when a whole record
 * waits to be taken with msb_mux_next). */
size_t msb_mux_feed(msb_mux_reader *r, const uint8_t *p, size_t n);
/* Where and how much may be read straight into the reader (for read(2)). */
uint8_t *msb_mux_space(msb_mux_reader *r, size_t *n);
void msb_mux_commit(msb_mux_reader *r, size_t n);
/* 1 and *out when a record is complete, 0 when more bytes are needed, or a
 * negative MSB_PROTO_E_* (latched) when the stream is malformed. The record's
 * data stays valid until the next call. */
int msb_mux_next(msb_mux_reader *r, msb_mux_record *out);

/* Encode a header (and a CREDIT's payload) into out; returns the bytes
 * written (DATA: the header only, the payload follows). */
size_t msb_mux_put_header(uint8_t out[MSB_MUX_HEADER], uint16_t type, uint32_t conn, uint32_t len);
/* Drop buffered bytes ahead of the first READY of `session` (host:
 * guest_side false) or the first SESSION record (guest). 1 when such a
 * record is now first in the reader, else 0 (keeps only a possible prefix). */
int msb_mux_sync(msb_mux_reader *r, bool guest_side, uint32_t session);

size_t msb_mux_put_credit(uint8_t out[MSB_MUX_HEADER + 4], uint32_t conn, uint32_t bytes);

#endif
