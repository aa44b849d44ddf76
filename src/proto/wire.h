/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Private to src/proto: little-endian accessors, a bounds-checked read cursor
 * and a bounds-checked write cursor. Every read is checked against what
 * remains; a failed read sets `bad` and yields zeroes, so decoders test once.
 */
#ifndef MSB_PROTO_WIRE_H
#define MSB_PROTO_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline void msb_wire_put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}
static inline void msb_wire_put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}
static inline void msb_wire_put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}
static inline uint16_t msb_wire_get16(const uint8_t *p)
{
	return (uint16_t)(p[0] | (p[1] << 8));
}
static inline uint32_t msb_wire_get32(const uint8_t *p)
{
	return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
	       ((uint32_t)p[3] << 24);
}
static inline uint64_t msb_wire_get64(const uint8_t *p)
{
	return (uint64_t)msb_wire_get32(p) | ((uint64_t)msb_wire_get32(p + 4) << 32);
}

/* ---- read cursor --------------------------------------------------------- */

typedef struct msb_rd {
	const uint8_t *p;
	const uint8_t *end;
	bool bad;
} msb_rd;

static inline size_t msb_rd_left(const msb_rd *r)
{
	return (size_t)(r->end - r->p);
}
static inline const uint8_t *msb_rd_take(msb_rd *r, size_t n)
{
	if (r->bad || msb_rd_left(r) < n) {
		r->bad = true;
		return NULL;
	}
	const uint8_t *p = r->p;
	r->p += n;
	return p;
}
static inline uint8_t msb_rd_u8(msb_rd *r)
{
	const uint8_t *p = msb_rd_take(r, 1);
	return p ? p[0] : 0;
}
static inline uint16_t msb_rd_u16(msb_rd *r)
{
	const uint8_t *p = msb_rd_take(r, 2);
	return p ? msb_wire_get16(p) : 0;
}
static inline uint32_t msb_rd_u32(msb_rd *r)
{
	const uint8_t *p = msb_rd_take(r, 4);
	return p ? msb_wire_get32(p) : 0;
}
static inline uint64_t msb_rd_u64(msb_rd *r)
{
	const uint8_t *p = msb_rd_take(r, 8);
	return p ? msb_wire_get64(p) : 0;
}

/* ---- write cursor -------------------------------------------------------- */

typedef struct msb_wr {
	uint8_t *p;
	uint8_t *end;
	bool full;
} msb_wr;

static inline uint8_t *msb_wr_take(msb_wr *w, size_t n)
{
	if (w->full || (size_t)(w->end - w->p) < n) {
		w->full = true;
		return NULL;
	}
	uint8_t *p = w->p;
	w->p += n;
	return p;
}
static inline void msb_wr_u8(msb_wr *w, uint8_t v)
{
	uint8_t *p = msb_wr_take(w, 1);
	if (p)
		p[0] = v;
}
static inline void msb_wr_u16(msb_wr *w, uint16_t v)
{
	uint8_t *p = msb_wr_take(w, 2);
	if (p)
		msb_wire_put16(p, v);
}
static inline void msb_wr_u32(msb_wr *w, uint32_t v)
{
	uint8_t *p = msb_wr_take(w, 4);
	if (p)
		msb_wire_put32(p, v);
}
static inline void msb_wr_u64(msb_wr *w, uint64_t v)
{
	uint8_t *p = msb_wr_take(w, 8);
	if (p)
		msb_wire_put64(p, v);
}
static inline void msb_wr_bytes(msb_wr *w, const void *data, size_t n)
{
	uint8_t *p = msb_wr_take(w, n);
	if (p && n > 0)
		memcpy(p, data, n);
}

#endif
