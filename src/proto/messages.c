/* SPDX-License-Identifier: Apache-2.0 */
/* Encoders and decoders of every message. Layouts: docs/internals/protocol.md. */
#include <string.h>

#include "proto.h"
#include "wire.h"

#define HELLO_SIZE 20u

/* ---- framing helpers ----------------------------------------------------- */

static int frame_begin(uint8_t *out, size_t cap, msb_wr *w)
{
	if (cap < MSB_PROTO_HEADER_SIZE)
		return MSB_PROTO_E_SPACE;
	w->p = out + MSB_PROTO_HEADER_SIZE;
	w->end = out + (cap < MSB_PROTO_FRAME_MAX ? cap : MSB_PROTO_FRAME_MAX);
	w->full = false;
	return MSB_PROTO_OK;
}

static int frame_end(uint8_t *out, const msb_wr *w, uint16_t type, uint16_t flags, uint32_t channel)
{
	if (w->full)
		return MSB_PROTO_E_SPACE;
	size_t len = (size_t)(w->p - out) - MSB_PROTO_HEADER_SIZE;
	if (len > MSB_PROTO_MAX_PAYLOAD)
		return MSB_PROTO_E_LIMIT;
	int rc = msb_proto_header_check(type, flags, channel);
	if (rc < 0)
		return rc;
	msb_proto_put_header(out, (uint32_t)len, type, flags, channel);
	return (int)(MSB_PROTO_HEADER_SIZE + len);
}

static int expect(const msb_proto_frame *f, uint16_t type, msb_rd *r)
{
	if (f->type != type)
		return MSB_PROTO_E_TYPE;
	int rc = msb_proto_header_check(f->type, f->flags, f->channel);
	if (rc < 0)
		return rc;
	r->p = f->payload;
	r->end = f->payload + f->len;
	r->bad = false;
	return MSB_PROTO_OK;
}

/* The cursor ran out, or bytes are left over. */
static int finish(const msb_rd *r)
{
	if (r->bad || msb_rd_left(r) != 0)
		return MSB_PROTO_E_MALFORMED;
	return MSB_PROTO_OK;
}

static bool has_nul(const uint8_t *p, size_t n)
{
	return n > 0 && memchr(p, 0, n) != NULL;
}

/* ---- HELLO --------------------------------------------------------------- */

void msb_proto_hello_default(msb_proto_hello *h, uint8_t role)
{
	h->min_version = MSB_PROTO_VERSION_MIN;
	h->max_version = MSB_PROTO_VERSION_MAX;
	h->max_payload = MSB_PROTO_MAX_PAYLOAD;
	h->max_channels = MSB_PROTO_MAX_CHANNELS;
	h->role = role;
}

static int hello_check(const msb_proto_hello *h)
{
	if (h->min_version == 0 || h->min_version > h->max_version)
		return MSB_PROTO_E_MALFORMED;
	if (h->max_payload < MSB_PROTO_MIN_PAYLOAD || h->max_payload > MSB_PROTO_MAX_PAYLOAD)
		return MSB_PROTO_E_LIMIT;
	if (h->max_channels == 0 || h->max_channels > MSB_PROTO_MAX_CHANNELS)
		return MSB_PROTO_E_LIMIT;
	if (h->role != MSB_PROTO_ROLE_HOST && h->role != MSB_PROTO_ROLE_AGENT)
		return MSB_PROTO_E_MALFORMED;
	return MSB_PROTO_OK;
}

int msb_proto_enc_hello(uint8_t *out, size_t cap, const msb_proto_hello *h)
{
	msb_wr w;
	int rc = hello_check(h);
	if (rc < 0)
		return rc;
	if ((rc = frame_begin(out, cap, &w)) < 0)
		return rc;
	msb_wr_u32(&w, MSB_PROTO_MAGIC);
	msb_wr_u16(&w, h->min_version);
	msb_wr_u16(&w, h->max_version);
	msb_wr_u32(&w, h->max_payload);
	msb_wr_u32(&w, h->max_channels);
	msb_wr_u8(&w, h->role);
	msb_wr_u8(&w, 0);
	msb_wr_u16(&w, 0);
	return frame_end(out, &w, MSB_PROTO_HELLO, 0, 0);
}

int msb_proto_dec_hello(const msb_proto_frame *f, msb_proto_hello *out)
{
	msb_rd r;
	int rc = expect(f, MSB_PROTO_HELLO, &r);
	if (rc < 0)
		return rc;
	/* The first 20 bytes are frozen across versions; a later version may
	 * append fields, which this one ignores. */
	if (f->len < HELLO_SIZE)
		return MSB_PROTO_E_MALFORMED;
	if (msb_rd_u32(&r) != MSB_PROTO_MAGIC)
		return MSB_PROTO_E_VERSION;
	msb_proto_hello h;
	h.min_version = msb_rd_u16(&r);
	h.max_version = msb_rd_u16(&r);
	h.max_payload = msb_rd_u32(&r);
	h.max_channels = msb_rd_u32(&r);
	h.role = msb_rd_u8(&r);
	if (msb_rd_u8(&r) != 0 || msb_rd_u16(&r) != 0)
		return MSB_PROTO_E_MALFORMED;
	if ((rc = hello_check(&h)) < 0)
		return rc;
	*out = h;
	return MSB_PROTO_OK;
}

int msb_proto_hello_negotiate(const msb_proto_hello *local, const msb_proto_hello *remote,
			      uint16_t *version)
{
	if (local->role == remote->role)
		return MSB_PROTO_E_MALFORMED;
	uint16_t lo =
		local->min_version > remote->min_version ? local->min_version : remote->min_version;
	uint16_t hi =
		local->max_version < remote->max_version ? local->max_version : remote->max_version;
	if (lo > hi)
		return MSB_PROTO_E_VERSION;
	*version = hi;
	return MSB_PROTO_OK;
}

/* ---- ERROR --------------------------------------------------------------- */

int msb_proto_enc_error(uint8_t *out, size_t cap, uint32_t channel, uint16_t code,
			const char *message)
{
	msb_wr w;
	int rc;
	if (code == 0 || code > MSB_PROTO_ERR_MAX)
		return MSB_PROTO_E_MALFORMED;
	if ((rc = frame_begin(out, cap, &w)) < 0)
		return rc;
	size_t n = message ? strnlen(message, MSB_PROTO_MAX_ERROR_MSG) : 0;
	msb_wr_u16(&w, code);
	msb_wr_u16(&w, (uint16_t)n);
	uint8_t *p = msb_wr_take(&w, n);
	if (p) {
		/* printable ASCII only: the host may show it */
		for (size_t i = 0; i < n; i++) {
			uint8_t c = (uint8_t)message[i];
			p[i] = c >= 0x20 && c < 0x7f ? c : '?';
		}
	}
	return frame_end(out, &w, MSB_PROTO_ERROR, 0, channel);
}

int msb_proto_dec_error(const msb_proto_frame *f, msb_proto_error *out)
{
	msb_rd r;
	int rc = expect(f, MSB_PROTO_ERROR, &r);
	if (rc < 0)
		return rc;
	uint16_t code = msb_rd_u16(&r);
	uint16_t n = msb_rd_u16(&r);
	if (r.bad)
		return MSB_PROTO_E_MALFORMED;
	if (n > MSB_PROTO_MAX_ERROR_MSG)
		return MSB_PROTO_E_LIMIT;
	const uint8_t *msg = msb_rd_take(&r, n);
	if ((rc = finish(&r)) < 0)
		return rc;
	if (code == 0 || code > MSB_PROTO_ERR_MAX)
		return MSB_PROTO_E_MALFORMED;
	for (size_t i = 0; i < n; i++)
		if (msg[i] < 0x20 || msg[i] >= 0x7f)
			return MSB_PROTO_E_MALFORMED;
	out->code = code;
	out->message.ptr = msg;
	out->message.len = n;
	return MSB_PROTO_OK;
}

/* ---- PING / PONG --------------------------------------------------------- */

int msb_proto_enc_ping(uint8_t *out, size_t cap, uint16_t type, uint64_t cookie)
{
	msb_wr w;
	int rc;
	if (type != MSB_PROTO_PING && type != MSB_PROTO_PONG)
		return MSB_PROTO_E_TYPE;
	if ((rc = frame_begin(out, cap, &w)) < 0)
		return rc;
	msb_wr_u64(&w, cookie);
	return frame_end(out, &w, type, 0, 0);
}

int msb_proto_dec_ping(const msb_proto_frame *f, uint64_t *cookie)
{
	msb_rd r;
	int rc = expect(f, f->type == MSB_PROTO_PONG ? MSB_PROTO_PONG : MSB_PROTO_PING, &r);
	if (rc < 0)
		return rc;
	uint64_t c = msb_rd_u64(&r);
	if ((rc = finish(&r)) < 0)
		return rc;
	*cookie = c;
	return MSB_PROTO_OK;
}

/* ---- EXEC_OPEN ----------------------------------------------------------- */

static int check_exec_fields(uint32_t flags, uint32_t credit, uint64_t timeout_ms, uint64_t budget)
{
	if (flags & ~MSB_PROTO_EXEC_FLAGS_ALL)
		return MSB_PROTO_E_UNKNOWN;
	if (credit > MSB_PROTO_MAX_WINDOW)
		return MSB_PROTO_E_LIMIT;
	if (timeout_ms == 0 || timeout_ms > MSB_PROTO_MAX_TIMEOUT_MS)
		return MSB_PROTO_E_LIMIT;
	if (((flags & MSB_PROTO_EXEC_BOUNDED) != 0) != (budget != 0))
		return MSB_PROTO_E_MALFORMED;
	if ((flags & MSB_PROTO_EXEC_FILE) && (flags & (MSB_PROTO_EXEC_SHELL | MSB_PROTO_EXEC_TTY)))
		return MSB_PROTO_E_MALFORMED;
	return MSB_PROTO_OK;
}

static bool winsize_ok(const msb_proto_winsize *w)
{
	return w->rows >= 1 && w->rows <= MSB_PROTO_MAX_TTY_DIM && w->cols >= 1 &&
	       w->cols <= MSB_PROTO_MAX_TTY_DIM;
}

/* One argv/env string: length cap, no NUL, argv[0] and env KEY non-empty. */
static int check_string(const uint8_t *p, size_t n, bool is_env, bool first_arg)
{
	if (n > MSB_PROTO_MAX_STRING)
		return MSB_PROTO_E_LIMIT;
	if (has_nul(p, n))
		return MSB_PROTO_E_MALFORMED;
	if (first_arg && n == 0)
		return MSB_PROTO_E_MALFORMED;
	if (is_env) {
		const uint8_t *eq = n > 0 ? memchr(p, '=', n) : NULL;
		if (!eq || eq == p)
			return MSB_PROTO_E_MALFORMED;
	}
	return MSB_PROTO_OK;
}

static size_t strv_count(const char *const *v)
{
	size_t n = 0;
	while (v && v[n])
		n++;
	return n;
}

int msb_proto_enc_exec_open(uint8_t *out, size_t cap, uint32_t channel,
			    const msb_proto_exec_spec *spec)
{
	msb_wr w;
	int rc = check_exec_fields(spec->flags, spec->initial_credit, spec->timeout_ms,
				   spec->output_budget);
	if (rc < 0)
		return rc;
	size_t argc = strv_count(spec->argv), envc = strv_count(spec->env);
	if (argc == 0)
		return MSB_PROTO_E_MALFORMED;
	if (argc > MSB_PROTO_MAX_ARGS || envc > MSB_PROTO_MAX_ENV)
		return MSB_PROTO_E_LIMIT;
	if ((spec->flags & MSB_PROTO_EXEC_SHELL) && argc != 1)
		return MSB_PROTO_E_MALFORMED;
	const char *cwd = spec->cwd ? spec->cwd : "";
	size_t cwdlen = strlen(cwd);
	if (cwdlen > MSB_PROTO_MAX_PATH)
		return MSB_PROTO_E_LIMIT;
	bool tty = (spec->flags & MSB_PROTO_EXEC_TTY) != 0;
	if (tty && !winsize_ok(&spec->winsize))
		return MSB_PROTO_E_LIMIT;
	if (!tty && (spec->winsize.rows || spec->winsize.cols))
		return MSB_PROTO_E_MALFORMED;
	if ((rc = frame_begin(out, cap, &w)) < 0)
		return rc;

	msb_wr_u32(&w, spec->flags);
	msb_wr_u32(&w, spec->initial_credit);
	msb_wr_u64(&w, spec->timeout_ms);
	msb_wr_u64(&w, spec->output_budget);
	msb_wr_u32(&w, (uint32_t)cwdlen);
	msb_wr_bytes(&w, cwd, cwdlen);
	msb_wr_u32(&w, (uint32_t)argc);
	msb_wr_u32(&w, (uint32_t)envc);
	for (size_t i = 0; i < argc + envc; i++) {
		bool is_env = i >= argc;
		const char *s = is_env ? spec->env[i - argc] : spec->argv[i];
		size_t n = strlen(s);
		bool first = i == 0 && !(spec->flags & MSB_PROTO_EXEC_SHELL);
		if ((rc = check_string((const uint8_t *)s, n, is_env, first)) < 0)
			return rc;
		msb_wr_u32(&w, (uint32_t)n);
		msb_wr_bytes(&w, s, n);
	}
	if (tty) {
		msb_wr_u16(&w, spec->winsize.rows);
		msb_wr_u16(&w, spec->winsize.cols);
	}
	if (w.full)
		return (size_t)(w.end - out) >= MSB_PROTO_FRAME_MAX ? MSB_PROTO_E_LIMIT
								    : MSB_PROTO_E_SPACE;
	return frame_end(out, &w, MSB_PROTO_EXEC_OPEN, 0, channel);
}

/* Validate `count` strings at the cursor and describe them as a list;
 * `named` requires a non-empty first string (argv[0] of a program). */
static int read_strlist(msb_rd *r, uint32_t count, bool is_env, bool named, msb_proto_strlist *out)
{
	out->count = count;
	out->pos = r->p;
	for (uint32_t i = 0; i < count; i++) {
		uint32_t n = msb_rd_u32(r);
		if (r->bad)
			return MSB_PROTO_E_MALFORMED;
		if (n > MSB_PROTO_MAX_STRING)
			return MSB_PROTO_E_LIMIT;
		const uint8_t *p = msb_rd_take(r, n);
		if (!p)
			return MSB_PROTO_E_MALFORMED;
		int rc = check_string(p, n, is_env, named && i == 0);
		if (rc < 0)
			return rc;
	}
	out->end = r->p;
	return MSB_PROTO_OK;
}

int msb_proto_dec_exec_open(const msb_proto_frame *f, msb_proto_exec_open *out)
{
	msb_rd r;
	int rc = expect(f, MSB_PROTO_EXEC_OPEN, &r);
	if (rc < 0)
		return rc;
	msb_proto_exec_open m;
	m.flags = msb_rd_u32(&r);
	m.initial_credit = msb_rd_u32(&r);
	m.timeout_ms = msb_rd_u64(&r);
	m.output_budget = msb_rd_u64(&r);
	uint32_t cwdlen = msb_rd_u32(&r);
	if (r.bad)
		return MSB_PROTO_E_MALFORMED;
	if ((rc = check_exec_fields(m.flags, m.initial_credit, m.timeout_ms, m.output_budget)) < 0)
		return rc;
	if (cwdlen > MSB_PROTO_MAX_PATH)
		return MSB_PROTO_E_LIMIT;
	m.cwd.ptr = msb_rd_take(&r, cwdlen);
	m.cwd.len = cwdlen;
	uint32_t argc = msb_rd_u32(&r);
	uint32_t envc = msb_rd_u32(&r);
	if (r.bad)
		return MSB_PROTO_E_MALFORMED;
	if (has_nul(m.cwd.ptr, cwdlen))
		return MSB_PROTO_E_MALFORMED;
	if (argc > MSB_PROTO_MAX_ARGS || envc > MSB_PROTO_MAX_ENV)
		return MSB_PROTO_E_LIMIT;
	if (argc == 0 || ((m.flags & MSB_PROTO_EXEC_SHELL) && argc != 1))
		return MSB_PROTO_E_MALFORMED;
	if ((rc = read_strlist(&r, argc, false, !(m.flags & MSB_PROTO_EXEC_SHELL), &m.argv)) < 0)
		return rc;
	if ((rc = read_strlist(&r, envc, true, false, &m.env)) < 0)
		return rc;
	m.winsize.rows = m.winsize.cols = 0;
	if (m.flags & MSB_PROTO_EXEC_TTY) {
		m.winsize.rows = msb_rd_u16(&r);
		m.winsize.cols = msb_rd_u16(&r);
		if (r.bad)
			return MSB_PROTO_E_MALFORMED;
		if (!winsize_ok(&m.winsize))
			return MSB_PROTO_E_LIMIT;
	}
	if ((rc = finish(&r)) < 0)
		return rc;
	*out = m;
	return MSB_PROTO_OK;
}

bool msb_proto_strlist_next(msb_proto_strlist *it, msb_proto_str *out)
{
	if (it->count == 0 || (size_t)(it->end - it->pos) < 4)
		return false;
	uint32_t n = msb_wire_get32(it->pos);
	if ((size_t)(it->end - it->pos) - 4 < n)
		return false;
	out->ptr = it->pos + 4;
	out->len = n;
	it->pos += 4 + (size_t)n;
	it->count--;
	return true;
}

/* ---- DATA, EOF, CREDIT, CANCEL ------------------------------------------- */

int msb_proto_enc_data(uint8_t *out, size_t cap, uint32_t channel, uint8_t stream,
		       const void *bytes, uint32_t len)
{
	msb_wr w;
	int rc;
	if (stream > MSB_PROTO_STDERR || len == 0)
		return MSB_PROTO_E_MALFORMED;
	if (len > MSB_PROTO_MAX_PAYLOAD - 1)
		return MSB_PROTO_E_LIMIT;
	if ((rc = frame_begin(out, cap, &w)) < 0)
		return rc;
	msb_wr_u8(&w, stream);
	msb_wr_bytes(&w, bytes, len);
	return frame_end(out, &w, MSB_PROTO_DATA, 0, channel);
}

int msb_proto_dec_data(const msb_proto_frame *f, msb_proto_data *out)
{
	msb_rd r;
	int rc = expect(f, MSB_PROTO_DATA, &r);
	if (rc < 0)
		return rc;
	uint8_t stream = msb_rd_u8(&r);
	if (r.bad || stream > MSB_PROTO_STDERR || msb_rd_left(&r) == 0)
		return MSB_PROTO_E_MALFORMED;
	out->stream = stream;
	out->bytes = r.p;
	out->len = (uint32_t)msb_rd_left(&r);
	return MSB_PROTO_OK;
}

/* Frames whose payload is one small field. */
static int enc_u8(uint8_t *out, size_t cap, uint16_t type, uint32_t channel, uint8_t v)
{
	msb_wr w;
	int rc = frame_begin(out, cap, &w);
	if (rc < 0)
		return rc;
	msb_wr_u8(&w, v);
	return frame_end(out, &w, type, 0, channel);
}

static int dec_u8(const msb_proto_frame *f, uint16_t type, uint8_t max, uint8_t *v)
{
	msb_rd r;
	int rc = expect(f, type, &r);
	if (rc < 0)
		return rc;
	uint8_t x = msb_rd_u8(&r);
	if ((rc = finish(&r)) < 0)
		return rc;
	if (x > max)
		return MSB_PROTO_E_MALFORMED;
	*v = x;
	return MSB_PROTO_OK;
}

int msb_proto_enc_eof(uint8_t *out, size_t cap, uint32_t channel, uint8_t stream)
{
	if (stream > MSB_PROTO_STDERR)
		return MSB_PROTO_E_MALFORMED;
	return enc_u8(out, cap, MSB_PROTO_EOF, channel, stream);
}

int msb_proto_dec_eof(const msb_proto_frame *f, uint8_t *stream)
{
	return dec_u8(f, MSB_PROTO_EOF, MSB_PROTO_STDERR, stream);
}

int msb_proto_enc_cancel(uint8_t *out, size_t cap, uint32_t channel, uint8_t reason)
{
	if (reason > MSB_PROTO_CANCEL_TIMEOUT)
		return MSB_PROTO_E_MALFORMED;
	return enc_u8(out, cap, MSB_PROTO_CANCEL, channel, reason);
}

int msb_proto_dec_cancel(const msb_proto_frame *f, uint8_t *reason)
{
	return dec_u8(f, MSB_PROTO_CANCEL, MSB_PROTO_CANCEL_TIMEOUT, reason);
}

int msb_proto_enc_winsize(uint8_t *out, size_t cap, uint32_t channel, const msb_proto_winsize *ws)
{
	msb_wr w;
	int rc;
	if (!winsize_ok(ws))
		return MSB_PROTO_E_LIMIT;
	if ((rc = frame_begin(out, cap, &w)) < 0)
		return rc;
	msb_wr_u16(&w, ws->rows);
	msb_wr_u16(&w, ws->cols);
	msb_wr_u32(&w, 0);
	return frame_end(out, &w, MSB_PROTO_WINSIZE, 0, channel);
}

int msb_proto_dec_winsize(const msb_proto_frame *f, msb_proto_winsize *out)
{
	msb_rd r;
	int rc = expect(f, MSB_PROTO_WINSIZE, &r);
	if (rc < 0)
		return rc;
	msb_proto_winsize ws;
	ws.rows = msb_rd_u16(&r);
	ws.cols = msb_rd_u16(&r);
	uint32_t reserved = msb_rd_u32(&r);
	if ((rc = finish(&r)) < 0)
		return rc;
	if (reserved != 0)
		return MSB_PROTO_E_MALFORMED;
	if (!winsize_ok(&ws))
		return MSB_PROTO_E_LIMIT;
	*out = ws;
	return MSB_PROTO_OK;
}

int msb_proto_enc_credit(uint8_t *out, size_t cap, uint32_t channel, uint32_t bytes)
{
	msb_wr w;
	int rc;
	if (bytes == 0)
		return MSB_PROTO_E_MALFORMED;
	if (bytes > MSB_PROTO_MAX_WINDOW)
		return MSB_PROTO_E_LIMIT;
	if ((rc = frame_begin(out, cap, &w)) < 0)
		return rc;
	msb_wr_u32(&w, bytes);
	return frame_end(out, &w, MSB_PROTO_CREDIT, 0, channel);
}

int msb_proto_dec_credit(const msb_proto_frame *f, uint32_t *bytes)
{
	msb_rd r;
	int rc = expect(f, MSB_PROTO_CREDIT, &r);
	if (rc < 0)
		return rc;
	uint32_t n = msb_rd_u32(&r);
	if ((rc = finish(&r)) < 0)
		return rc;
	if (n == 0)
		return MSB_PROTO_E_MALFORMED;
	if (n > MSB_PROTO_MAX_WINDOW)
		return MSB_PROTO_E_LIMIT;
	*bytes = n;
	return MSB_PROTO_OK;
}

/* ---- EXIT ---------------------------------------------------------------- */

static int exit_check(const msb_proto_exit *e)
{
	if (e->flags & ~MSB_PROTO_EXIT_FLAGS_ALL)
		return MSB_PROTO_E_UNKNOWN;
	if (e->how == MSB_PROTO_EXITED) {
		if (e->value < 0 || e->value > 255)
			return MSB_PROTO_E_MALFORMED;
	} else if (e->how == MSB_PROTO_SIGNALED) {
		if (e->value < 1 || e->value > 127)
			return MSB_PROTO_E_MALFORMED;
	} else {
		return MSB_PROTO_E_MALFORMED;
	}
	unsigned reasons = e->flags & (MSB_PROTO_EXIT_TIMED_OUT | MSB_PROTO_EXIT_CANCELLED);
	if (reasons == (MSB_PROTO_EXIT_TIMED_OUT | MSB_PROTO_EXIT_CANCELLED))
		return MSB_PROTO_E_MALFORMED;
	/* a kill has a reason, and only a kill can be confirmed */
	if ((reasons != 0) != ((e->flags & MSB_PROTO_EXIT_KILLED) != 0))
		return MSB_PROTO_E_MALFORMED;
	if ((e->flags & MSB_PROTO_EXIT_NO_SURVIVOR) && !(e->flags & MSB_PROTO_EXIT_KILLED))
		return MSB_PROTO_E_MALFORMED;
	return MSB_PROTO_OK;
}

int msb_proto_enc_exit(uint8_t *out, size_t cap, uint32_t channel, const msb_proto_exit *e)
{
	msb_wr w;
	int rc = exit_check(e);
	if (rc < 0)
		return rc;
	if ((rc = frame_begin(out, cap, &w)) < 0)
		return rc;
	msb_wr_u8(&w, e->how);
	msb_wr_u8(&w, e->flags);
	msb_wr_u16(&w, 0);
	msb_wr_u32(&w, (uint32_t)e->value);
	return frame_end(out, &w, MSB_PROTO_EXIT, 0, channel);
}

int msb_proto_dec_exit(const msb_proto_frame *f, msb_proto_exit *out)
{
	msb_rd r;
	int rc = expect(f, MSB_PROTO_EXIT, &r);
	if (rc < 0)
		return rc;
	msb_proto_exit e;
	e.how = msb_rd_u8(&r);
	e.flags = msb_rd_u8(&r);
	uint16_t reserved = msb_rd_u16(&r);
	e.value = (int32_t)msb_rd_u32(&r);
	if ((rc = finish(&r)) < 0)
		return rc;
	if (reserved != 0)
		return MSB_PROTO_E_MALFORMED;
	if ((rc = exit_check(&e)) < 0)
		return rc;
	*out = e;
	return MSB_PROTO_OK;
}

/* ---- PS_REQUEST / PS_REPLY ----------------------------------------------- */

static int ps_request_check(const msb_proto_ps_request *q)
{
	if (q->max_entries == 0 || q->max_entries > MSB_PROTO_MAX_PS_ENTRIES)
		return MSB_PROTO_E_LIMIT;
	if (q->max_argv > MSB_PROTO_MAX_PS_ARGV)
		return MSB_PROTO_E_LIMIT;
	return MSB_PROTO_OK;
}

int msb_proto_enc_ps_request(uint8_t *out, size_t cap, uint32_t channel,
			     const msb_proto_ps_request *q)
{
	msb_wr w;
	int rc = ps_request_check(q);
	if (rc < 0)
		return rc;
	if ((rc = frame_begin(out, cap, &w)) < 0)
		return rc;
	msb_wr_u32(&w, q->max_entries);
	msb_wr_u32(&w, q->max_argv);
	return frame_end(out, &w, MSB_PROTO_PS_REQUEST, 0, channel);
}

int msb_proto_dec_ps_request(const msb_proto_frame *f, msb_proto_ps_request *out)
{
	msb_rd r;
	int rc = expect(f, MSB_PROTO_PS_REQUEST, &r);
	if (rc < 0)
		return rc;
	msb_proto_ps_request q;
	q.max_entries = msb_rd_u32(&r);
	q.max_argv = msb_rd_u32(&r);
	if ((rc = finish(&r)) < 0)
		return rc;
	if ((rc = ps_request_check(&q)) < 0)
		return rc;
	*out = q;
	return MSB_PROTO_OK;
}

/* pid ppid pgid sid uid start state flags comm_len argv_len */
#define PS_FIXED MSB_PROTO_PS_ENTRY_FIXED

static int ps_entry_check(const msb_proto_ps_entry *e)
{
	if (e->pid == 0)
		return MSB_PROTO_E_MALFORMED;
	if (e->state < 0x21 || e->state > 0x7e)
		return MSB_PROTO_E_MALFORMED;
	if (e->flags & ~MSB_PROTO_PS_ARGV_TRUNCATED)
		return MSB_PROTO_E_UNKNOWN;
	if (e->comm.len > MSB_PROTO_MAX_COMM || e->argv.len > MSB_PROTO_MAX_PS_ARGV)
		return MSB_PROTO_E_LIMIT;
	if (has_nul(e->comm.ptr, e->comm.len))
		return MSB_PROTO_E_MALFORMED;
	return MSB_PROTO_OK;
}

void msb_proto_ps_writer_init(msb_proto_ps_writer *w, uint8_t *out, size_t cap, uint32_t channel)
{
	w->out = out;
	w->cap = cap < MSB_PROTO_FRAME_MAX ? cap : MSB_PROTO_FRAME_MAX;
	w->channel = channel;
	w->count = 0;
	w->len = MSB_PROTO_HEADER_SIZE + 4; /* count + reserved */
}

int msb_proto_ps_writer_add(msb_proto_ps_writer *w, const msb_proto_ps_entry *e)
{
	int rc = ps_entry_check(e);
	if (rc < 0)
		return rc;
	size_t need = PS_FIXED + e->comm.len + e->argv.len;
	if (w->count == UINT16_MAX || w->len > w->cap || w->cap - w->len < need)
		return MSB_PROTO_E_SPACE;
	msb_wr wr = {w->out + w->len, w->out + w->cap, false};
	msb_wr_u32(&wr, e->pid);
	msb_wr_u32(&wr, e->ppid);
	msb_wr_u32(&wr, e->pgid);
	msb_wr_u32(&wr, e->sid);
	msb_wr_u32(&wr, e->uid);
	msb_wr_u64(&wr, e->start_ticks);
	msb_wr_u8(&wr, e->state);
	msb_wr_u8(&wr, e->flags);
	msb_wr_u16(&wr, (uint16_t)e->comm.len);
	msb_wr_u16(&wr, (uint16_t)e->argv.len);
	msb_wr_bytes(&wr, e->comm.ptr, e->comm.len);
	msb_wr_bytes(&wr, e->argv.ptr, e->argv.len);
	if (wr.full)
		return MSB_PROTO_E_SPACE;
	w->len += need;
	w->count++;
	return MSB_PROTO_OK;
}

int msb_proto_ps_writer_finish(msb_proto_ps_writer *w, bool more)
{
	if (w->len > w->cap || w->cap < MSB_PROTO_HEADER_SIZE + 4)
		return MSB_PROTO_E_SPACE;
	msb_wire_put16(w->out + MSB_PROTO_HEADER_SIZE, w->count);
	msb_wire_put16(w->out + MSB_PROTO_HEADER_SIZE + 2, 0);
	msb_wr end = {w->out + w->len, w->out + w->cap, false};
	int rc = frame_end(w->out, &end, MSB_PROTO_PS_REPLY, more ? MSB_PROTO_FLAG_MORE : 0,
			   w->channel);
	w->count = 0;
	w->len = MSB_PROTO_HEADER_SIZE + 4;
	return rc;
}

/* Read one entry at the cursor (validated). */
static int ps_read_entry(msb_rd *r, msb_proto_ps_entry *e)
{
	e->pid = msb_rd_u32(r);
	e->ppid = msb_rd_u32(r);
	e->pgid = msb_rd_u32(r);
	e->sid = msb_rd_u32(r);
	e->uid = msb_rd_u32(r);
	e->start_ticks = msb_rd_u64(r);
	e->state = msb_rd_u8(r);
	e->flags = msb_rd_u8(r);
	e->comm.len = msb_rd_u16(r);
	e->argv.len = msb_rd_u16(r);
	if (r->bad)
		return MSB_PROTO_E_MALFORMED;
	if (e->comm.len > MSB_PROTO_MAX_COMM || e->argv.len > MSB_PROTO_MAX_PS_ARGV)
		return MSB_PROTO_E_LIMIT;
	e->comm.ptr = msb_rd_take(r, e->comm.len);
	e->argv.ptr = msb_rd_take(r, e->argv.len);
	if (r->bad)
		return MSB_PROTO_E_MALFORMED;
	return ps_entry_check(e);
}

int msb_proto_dec_ps_reply(const msb_proto_frame *f, msb_proto_ps_reply *out)
{
	msb_rd r;
	int rc = expect(f, MSB_PROTO_PS_REPLY, &r);
	if (rc < 0)
		return rc;
	uint16_t count = msb_rd_u16(&r);
	uint16_t reserved = msb_rd_u16(&r);
	if (r.bad || reserved != 0)
		return MSB_PROTO_E_MALFORMED;
	const uint8_t *start = r.p;
	for (uint16_t i = 0; i < count; i++) {
		msb_proto_ps_entry e;
		if ((rc = ps_read_entry(&r, &e)) < 0)
			return rc;
	}
	if ((rc = finish(&r)) < 0)
		return rc;
	out->count = count;
	out->pos = start;
	out->end = r.p;
	return MSB_PROTO_OK;
}

bool msb_proto_ps_next(msb_proto_ps_reply *it, msb_proto_ps_entry *out)
{
	if (it->count == 0)
		return false;
	msb_rd r = {it->pos, it->end, false};
	if (ps_read_entry(&r, out) < 0)
		return false;
	it->pos = r.p;
	it->count--;
	return true;
}

/* ---- any frame ----------------------------------------------------------- */

int msb_proto_decode(const msb_proto_frame *f, msb_proto_msg *out)
{
	int rc = msb_proto_header_check(f->type, f->flags, f->channel);
	if (rc < 0)
		return rc;
	out->type = f->type;
	out->flags = f->flags;
	out->channel = f->channel;
	switch (f->type) {
	case MSB_PROTO_HELLO:
		return msb_proto_dec_hello(f, &out->u.hello);
	case MSB_PROTO_ERROR:
		return msb_proto_dec_error(f, &out->u.error);
	case MSB_PROTO_PING:
	case MSB_PROTO_PONG:
		return msb_proto_dec_ping(f, &out->u.cookie);
	case MSB_PROTO_IDENTITY:
		return msb_proto_dec_identity(f, &out->u.identity);
	case MSB_PROTO_IDENTITY_OK:
		return msb_proto_dec_identity_ok(f, &out->u.cookie);
	case MSB_PROTO_EXEC_OPEN:
		return msb_proto_dec_exec_open(f, &out->u.exec_open);
	case MSB_PROTO_DATA:
		return msb_proto_dec_data(f, &out->u.data);
	case MSB_PROTO_EOF:
		return msb_proto_dec_eof(f, &out->u.stream);
	case MSB_PROTO_CREDIT:
		return msb_proto_dec_credit(f, &out->u.credit);
	case MSB_PROTO_EXIT:
		return msb_proto_dec_exit(f, &out->u.exit);
	case MSB_PROTO_CANCEL:
		return msb_proto_dec_cancel(f, &out->u.cancel_reason);
	case MSB_PROTO_WINSIZE:
		return msb_proto_dec_winsize(f, &out->u.winsize);
	case MSB_PROTO_PS_REQUEST:
		return msb_proto_dec_ps_request(f, &out->u.ps_request);
	case MSB_PROTO_PS_REPLY:
		return msb_proto_dec_ps_reply(f, &out->u.ps_reply);
	case MSB_PROTO_EGRESS_LISTEN:
		return msb_proto_dec_egress_listen(f, &out->u.egress_listen);
	case MSB_PROTO_EGRESS_READY:
	case MSB_PROTO_EGRESS_OPEN:
		return msb_proto_dec_egress_empty(f, f->type);
	default:
		return MSB_PROTO_E_UNKNOWN;
	}
}
