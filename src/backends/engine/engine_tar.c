/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The tar the engines speak for files (checklist 21.27, 22.7): a one-entry
 * archive to put a file, and a streaming reader of the first entry of an
 * archive an engine sends, which refuses on the header - before a body byte
 * is kept - what is not a regular file or is over the cap. Every byte the
 * engine sends is counted: the header, at most ENGINE_TAR_EXT_BUDGET of
 * extension headers, then exactly the body the header announced.
 */
#include <inttypes.h>
#include <stdio.h>
#include <time.h>

#include "engine.h"
#include "platform/platform.h"

#define BLOCK 512u

/* ---- writing -------------------------------------------------------------------- */

static void octal(uint8_t *field, size_t width, uint64_t v)
{
	/* width-1 digits and a NUL, zero-padded. */
	field[width - 1] = '\0';
	for (size_t i = width - 1; i > 0; i--) {
		field[i - 1] = (uint8_t)('0' + (v & 7));
		v >>= 3;
	}
}

static void checksum(uint8_t *h)
{
	memset(h + 148, ' ', 8);
	unsigned sum = 0;
	for (size_t i = 0; i < BLOCK; i++)
		sum += h[i];
	octal(h + 148, 7, sum); /* six digits, NUL, and the space already there */
}

static void header(uint8_t *h, const char *name, const char *prefix, char type, uint64_t size,
		   unsigned mode, uint64_t mtime)
{
	memset(h, 0, BLOCK);
	memcpy(h, name, strnlen(name, 100));
	octal(h + 100, 8, mode);
	octal(h + 108, 8, 0);
	octal(h + 116, 8, 0);
	octal(h + 124, 12, size);
	octal(h + 136, 12, mtime);
	h[156] = (uint8_t)type;
	memcpy(h + 257, "ustar", 6);
	memcpy(h + 263, "00", 2);
	memcpy(h + 265, "root", 4);
	memcpy(h + 297, "root", 4);
	if (prefix)
		memcpy(h + 345, prefix, strnlen(prefix, 155));
	checksum(h);
}

static int pad(msb_buf *out)
{
	static const uint8_t zeros[BLOCK];
	size_t rem = out->len % BLOCK;
	return rem ? msb__buf_append(out, zeros, BLOCK - rem) : 0;
}

/* One PAX record "LEN path=NAME\n", LEN counting itself. */
static char *pax_path_record(const char *name)
{
	size_t body = strlen(" path=") + strlen(name) + 1;
	size_t len = body + 1;
	for (;;) {
		char digits[24];
		int d = snprintf(digits, sizeof(digits), "%zu", len);
		if (body + (size_t)d == len)
			break;
		len = body + (size_t)d;
	}
	return msb__asprintf("%zu path=%s\n", len, name);
}

int msb_engine__tar_head(const char *name, size_t len, msb_buf *out, msb_error **err)
{
	uint8_t h[BLOCK];
	const uint64_t now = (uint64_t)time(NULL);
	size_t n = strlen(name);
	if (n == 0 || name[0] == '/' || n > 4096)
		return msb_error_set(err, MSB_E_VALUE, "`%s` cannot be a tar entry name", name);
	const char *short_name = name;
	_cleanup_free_ char *prefix = NULL;
	if (n > 100) {
		/* ustar: split at a "/" so that prefix <= 155 and name <= 100. */
		const char *split = NULL;
		for (const char *p = name; *p; p++)
			if (*p == '/' && p != name && (size_t)(p - name) <= 155 &&
			    n - (size_t)(p - name) - 1 <= 100 && p[1])
				split = p;
		if (split) {
			prefix = msb__strndup(name, (size_t)(split - name));
			if (!prefix)
				return msb__error_nomem(err);
			short_name = split + 1;
		} else {
			_cleanup_free_ char *rec = pax_path_record(name);
			if (!rec)
				return msb__error_nomem(err);
			header(h, "PaxHeader", NULL, 'x', strlen(rec), 0644, now);
			if (msb__buf_append(out, h, BLOCK) < 0 ||
			    msb__buf_append(out, rec, strlen(rec)) < 0 || pad(out) < 0)
				return msb__error_nomem(err);
			short_name = "msb-long-name";
		}
	}
	header(h, short_name, prefix, '0', len, 0644, now);
	if (msb__buf_append(out, h, BLOCK) < 0)
		return msb__error_nomem(err);
	return 0;
}

size_t msb_engine__tar_tail_len(size_t len)
{
	size_t rem = len % BLOCK;
	return (rem ? BLOCK - rem : 0) + 2 * BLOCK;
}

int msb_engine__tar_one(const char *name, const uint8_t *data, size_t len, msb_buf *out,
			msb_error **err)
{
	int r = msb_engine__tar_head(name, len, out, err);
	if (r < 0)
		return r;
	static const uint8_t zeros[3 * BLOCK];
	if (msb__buf_append(out, data, len) < 0 ||
	    msb__buf_append(out, zeros, msb_engine__tar_tail_len(len)) < 0)
		return msb__error_nomem(err);
	return 0;
}

int msb_engine__tar_add(msb_buf *out, const char *name, char type, unsigned mode,
			const uint8_t *data, size_t len, msb_error **err)
{
	if (!*name || strlen(name) > 100 || (type != '0' && type != '5') || (type == '5' && len))
		return msb_error_set(err, MSB_E_VALUE, "`%s` cannot be such a tar entry", name);
	uint8_t h[BLOCK];
	header(h, name, NULL, type, len, mode, (uint64_t)time(NULL));
	if (msb__buf_append(out, h, BLOCK) < 0 || (len && msb__buf_append(out, data, len) < 0) ||
	    pad(out) < 0)
		return msb__error_nomem(err);
	return 0;
}

int msb_engine__tar_end(msb_buf *out, msb_error **err)
{
	static const uint8_t zeros[2 * BLOCK];
	return msb__buf_append(out, zeros, sizeof(zeros)) < 0 ? msb__error_nomem(err) : 0;
}

/* ---- reading -------------------------------------------------------------------- */

void msb_engine__tar_reader_init(engine_tar_reader *r, engine_tar_on_header on_header, void *ud)
{
	memset(r, 0, sizeof(*r));
	r->on_header = on_header;
	r->ud = ud;
	r->ext = (msb_buf)MSB_BUF_INIT;
}

void msb_engine__tar_reader_clear(engine_tar_reader *r)
{
	free(r->body);
	msb__buf_free(&r->ext);
	r->body = NULL;
}

/* An octal field (NUL/space terminated), or GNU base-256 when the high bit
 * of the first byte is set. false when malformed or past 2^63. */
static bool number(const uint8_t *f, size_t width, uint64_t *out)
{
	uint64_t v = 0;
	if (f[0] & 0x80) {
		if (f[0] & 0x40)
			return false; /* negative */
		v = f[0] & 0x3f;
		for (size_t i = 1; i < width; i++) {
			if (v >> 55)
				return false;
			v = (v << 8) | f[i];
		}
		*out = v;
		return true;
	}
	size_t i = 0;
	while (i < width && f[i] == ' ')
		i++;
	for (; i < width && f[i] >= '0' && f[i] <= '7'; i++) {
		if (v >> 60)
			return false;
		v = (v << 3) | (uint64_t)(f[i] - '0');
	}
	for (; i < width; i++)
		if (f[i] != ' ' && f[i] != '\0')
			return false;
	*out = v;
	return true;
}

static bool checksum_ok(const uint8_t *h)
{
	uint64_t want;
	if (!number(h + 148, 8, &want))
		return false;
	uint64_t sum = 0;
	for (size_t i = 0; i < BLOCK; i++)
		sum += (i >= 148 && i < 156) ? ' ' : h[i];
	return sum == want;
}

static bool all_zero(const uint8_t *h)
{
	for (size_t i = 0; i < BLOCK; i++)
		if (h[i])
			return false;
	return true;
}

static uint64_t padded(uint64_t n)
{
	return (n + BLOCK - 1) / BLOCK * BLOCK;
}

/* The PAX records we act on: "size" and "path". Malformed records refuse. */
static int pax_apply(engine_tar_reader *r, msb_error **err)
{
	const char *p = (const char *)r->ext.data;
	size_t left = r->ext.len;
	while (left > 0) {
		size_t len = 0, i = 0;
		while (i < left && p[i] >= '0' && p[i] <= '9' && len < (1u << 20))
			len = len * 10 + (size_t)(p[i++] - '0');
		if (i == 0 || i >= left || p[i] != ' ' || len > left || len <= i + 1 ||
		    p[len - 1] != '\n')
			return msb_error_set(err, MSB_E_PROTOCOL,
					     "the engine sent a malformed PAX header");
		const char *kv = p + i + 1;
		size_t kvlen = len - i - 2;
		if (kvlen > 5 && memcmp(kv, "size=", 5) == 0) {
			uint64_t v = 0;
			for (size_t j = 5; j < kvlen; j++) {
				if (kv[j] < '0' || kv[j] > '9' || v > (UINT64_MAX - 9) / 10)
					return msb_error_set(
						err, MSB_E_PROTOCOL,
						"the engine sent a malformed PAX size");
				v = v * 10 + (uint64_t)(kv[j] - '0');
			}
			r->pax_size = v;
			r->pax_size_set = true;
		} else if (kvlen > 5 && memcmp(kv, "path=", 5) == 0) {
			size_t nl = kvlen - 5 < sizeof(r->long_name) - 1 ? kvlen - 5
									 : sizeof(r->long_name) - 1;
			memcpy(r->long_name, kv + 5, nl);
			r->long_name[nl] = '\0';
		}
		p += len;
		left -= len;
	}
	return 0;
}

static int take_header(engine_tar_reader *r, msb_error **err)
{
	const uint8_t *h = r->block;
	if (all_zero(h))
		return msb_error_set(err, MSB_E_PROTOCOL, "the engine sent an empty archive");
	if (!checksum_ok(h))
		return msb_error_set(err, MSB_E_PROTOCOL,
				     "the engine sent a tar header with a bad checksum");
	uint64_t size;
	if (!number(h + 124, 12, &size))
		return msb_error_set(err, MSB_E_PROTOCOL,
				     "the engine sent a tar header with a bad size");
	char type = (char)h[156];
	if (type == 'x' || type == 'g' || type == 'L' || type == 'K') {
		if (size > ENGINE_TAR_EXT_BUDGET ||
		    r->ext_used + padded(size) > ENGINE_TAR_EXT_BUDGET)
			return msb_error_set(err, MSB_E_PROTOCOL,
					     "the engine's tar extension headers exceed %u bytes",
					     ENGINE_TAR_EXT_BUDGET);
		r->ext_used += padded(size);
		r->ext_type = type;
		r->ext_size = size;
		r->ext_left = padded(size);
		r->ext.len = 0;
		if (r->ext_left == 0)
			r->ext_type = 0;
		return 0;
	}
	engine_tar_header *o = &r->hdr;
	memset(o, 0, sizeof(*o));
	o->type = type ? type : '0';
	o->size = r->pax_size_set ? r->pax_size : size;
	if (r->long_name[0]) {
		memcpy(o->name, r->long_name, sizeof(o->name));
	} else {
		char pre[156] = {0}, nm[101] = {0};
		memcpy(nm, h, 100);
		if (memcmp(h + 257, "ustar", 5) == 0)
			memcpy(pre, h + 345, 155);
		snprintf(o->name, sizeof(o->name), "%s%s%s", pre, pre[0] ? "/" : "", nm);
	}
	/* Only a regular file has a body we keep; the check refuses the rest. */
	if (o->type != '0' && o->type != '7')
		o->size = 0;
	r->header_done = true;
	int rc = r->on_header(r->ud, o, err);
	if (rc < 0)
		return rc;
	if (rc > 0) {
		/* The header was all the caller wanted. */
		r->done = true;
		return 0;
	}
	r->body = msb__plat_alloc_large((size_t)o->size);
	if (!r->body)
		return msb__error_nomem(err);
	if (o->size == 0)
		r->done = true;
	return 0;
}

int msb_engine__tar_feed(engine_tar_reader *r, const uint8_t *p, size_t n, msb_error **err)
{
	while (n > 0 && !r->done) {
		if (r->header_done) {
			uint64_t want = r->hdr.size - r->body_have;
			size_t take = n < want ? n : (size_t)want;
			memcpy(r->body + r->body_have, p, take);
			r->body_have += take;
			p += take;
			n -= take;
			if (r->body_have == r->hdr.size)
				r->done = true;
			continue;
		}
		if (r->ext_type) {
			size_t take = n < r->ext_left ? n : (size_t)r->ext_left;
			uint64_t consumed = padded(r->ext_size) - r->ext_left;
			if (consumed < r->ext_size) {
				size_t keep = (size_t)(r->ext_size - consumed);
				if (keep > take)
					keep = take;
				if (msb__buf_append(&r->ext, p, keep) < 0)
					return msb__error_nomem(err);
			}
			r->ext_left -= take;
			p += take;
			n -= take;
			if (r->ext_left == 0) {
				int rc = 0;
				if (r->ext_type == 'x') {
					rc = pax_apply(r, err);
				} else if (r->ext_type == 'L') {
					size_t nl = r->ext.len < sizeof(r->long_name) - 1
							    ? r->ext.len
							    : sizeof(r->long_name) - 1;
					memcpy(r->long_name, r->ext.data, nl);
					r->long_name[nl] = '\0';
				}
				r->ext_type = 0;
				if (rc < 0)
					return rc;
			}
			continue;
		}
		size_t take = BLOCK - r->have < n ? BLOCK - r->have : n;
		memcpy(r->block + r->have, p, take);
		r->have += take;
		p += take;
		n -= take;
		if (r->have == BLOCK) {
			r->have = 0;
			int rc = take_header(r, err);
			if (rc < 0)
				return rc;
		}
	}
	return 0;
}

msb_entry_kind msb_engine__tar_kind(char type)
{
	switch (type) {
	case '0':
	case '7':
	case '\0':
		return MSB_ENTRY_FILE;
	case '5':
		return MSB_ENTRY_DIRECTORY;
	case '2':
		return MSB_ENTRY_SYMLINK;
	default:
		return MSB_ENTRY_OTHER;
	}
}

int msb_engine__tar_check(const engine_tar_header *h, const char *abs_path, uint64_t max_bytes,
			  msb_error **err)
{
	switch (msb_engine__tar_kind(h->type)) {
	case MSB_ENTRY_DIRECTORY:
		return msb_error_set(err, MSB_E_IS_DIRECTORY, "`%s` is a directory", abs_path);
	case MSB_ENTRY_SYMLINK:
		return msb_error_set(err, MSB_E_OS, "`%s` is a link: refusing to read through it",
				     abs_path);
	case MSB_ENTRY_OTHER:
		return msb_error_set(err, MSB_E_OS, "`%s` is not a regular file", abs_path);
	case MSB_ENTRY_FILE:
		break;
	}
	if (h->size > max_bytes) {
		int r = msb_error_set(err, MSB_E_TRANSFER_CAP_EXCEEDED,
				      "`%s` is %" PRIu64
				      " bytes, over the max_bytes_per_file cap of %" PRIu64
				      " bytes",
				      abs_path, h->size, max_bytes);
		msb__error_set_cap(err, "max_bytes_per_file", abs_path);
		return r;
	}
	return 0;
}
