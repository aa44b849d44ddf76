/* SPDX-License-Identifier: Apache-2.0 */
/* Shared entry of the proto fuzz target and the corpus replay (see fuzz_proto.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_proto.h"
#include "proto/proto.h"

struct rec {
	uint16_t type, flags;
	uint32_t channel, len;
	uint64_t hash;
	int status;
};

struct log {
	struct rec *v;
	size_t n, cap;
};

static bool rec_eq(const struct rec *a, const struct rec *b)
{
	return a->type == b->type && a->flags == b->flags && a->channel == b->channel &&
	       a->len == b->len && a->hash == b->hash && a->status == b->status;
}

static _Noreturn void fail(const char *what, const msb_proto_frame *f)
{
	fprintf(stderr, "fuzz_proto: property violated: %s (type %s, channel %u, len %u)\n", what,
		msb_proto_type_name(f->type), f->channel, f->len);
	abort();
}

static uint64_t fnv(const uint8_t *p, size_t n)
{
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 1099511628211ull;
	return h;
}

static char *cstr(const msb_proto_str *s)
{
	char *c = malloc((size_t)s->len + 1);
	if (!c)
		abort();
	if (s->len)
		memcpy(c, s->ptr, s->len);
	c[s->len] = 0;
	return c;
}

static char **cstrv(msb_proto_strlist it)
{
	char **v = calloc((size_t)it.count + 1, sizeof(*v));
	msb_proto_str s;
	size_t i = 0;
	if (!v)
		abort();
	while (msb_proto_strlist_next(&it, &s))
		v[i++] = cstr(&s);
	if (it.count != 0)
		abort(); /* a validated list must iterate to its end */
	return v;
}

static void strv_free(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

/* Encode the decoded message again: it must give the very same frame. */
static void roundtrip(const msb_proto_frame *f, const msb_proto_msg *m)
{
	static uint8_t out[MSB_PROTO_FRAME_MAX];
	int n = -1;

	switch (m->type) {
	case MSB_PROTO_HELLO:
		if (f->len != 20)
			return; /* later versions may append; only the frozen part is ours */
		n = msb_proto_enc_hello(out, sizeof(out), &m->u.hello);
		break;
	case MSB_PROTO_ERROR: {
		char *msg = cstr(&m->u.error.message);
		n = msb_proto_enc_error(out, sizeof(out), f->channel, m->u.error.code, msg);
		free(msg);
		break;
	}
	case MSB_PROTO_PING:
	case MSB_PROTO_PONG:
		n = msb_proto_enc_ping(out, sizeof(out), m->type, m->u.cookie);
		break;
	case MSB_PROTO_IDENTITY: {
		char *name = cstr(&m->u.identity.hostname);
		n = msb_proto_enc_identity(out, sizeof(out), m->u.identity.cookie, name);
		free(name);
		break;
	}
	case MSB_PROTO_IDENTITY_OK:
		n = msb_proto_enc_identity_ok(out, sizeof(out), m->u.cookie);
		break;
	case MSB_PROTO_EXEC_OPEN: {
		const msb_proto_exec_open *x = &m->u.exec_open;
		char *cwd = cstr(&x->cwd);
		char **argv = cstrv(x->argv);
		char **env = cstrv(x->env);
		msb_proto_exec_spec spec = {
			.flags = x->flags,
			.initial_credit = x->initial_credit,
			.timeout_ms = x->timeout_ms,
			.output_budget = x->output_budget,
			.cwd = cwd,
			.argv = (const char *const *)argv,
			.env = (const char *const *)env,
			.winsize = x->winsize,
		};
		n = msb_proto_enc_exec_open(out, sizeof(out), f->channel, &spec);
		free(cwd);
		strv_free(argv);
		strv_free(env);
		break;
	}
	case MSB_PROTO_DATA:
		n = msb_proto_enc_data(out, sizeof(out), f->channel, m->u.data.stream,
				       m->u.data.bytes, m->u.data.len);
		break;
	case MSB_PROTO_EOF:
		n = msb_proto_enc_eof(out, sizeof(out), f->channel, m->u.stream);
		break;
	case MSB_PROTO_CREDIT:
		n = msb_proto_enc_credit(out, sizeof(out), f->channel, m->u.credit);
		break;
	case MSB_PROTO_EXIT:
		n = msb_proto_enc_exit(out, sizeof(out), f->channel, &m->u.exit);
		break;
	case MSB_PROTO_CANCEL:
		n = msb_proto_enc_cancel(out, sizeof(out), f->channel, m->u.cancel_reason);
		break;
	case MSB_PROTO_WINSIZE:
		n = msb_proto_enc_winsize(out, sizeof(out), f->channel, &m->u.winsize);
		break;
	case MSB_PROTO_PS_REQUEST:
		n = msb_proto_enc_ps_request(out, sizeof(out), f->channel, &m->u.ps_request);
		break;
	case MSB_PROTO_PS_REPLY: {
		msb_proto_ps_writer w;
		msb_proto_ps_reply it = m->u.ps_reply;
		msb_proto_ps_entry e;
		unsigned count = it.count;
		msb_proto_ps_writer_init(&w, out, sizeof(out), f->channel);
		while (msb_proto_ps_next(&it, &e)) {
			if (msb_proto_ps_writer_add(&w, &e) < 0)
				fail("PS entry refused by the writer", f);
			count--;
		}
		if (count != 0)
			fail("PS reply did not iterate to its count", f);
		n = msb_proto_ps_writer_finish(&w, (f->flags & MSB_PROTO_FLAG_MORE) != 0);
		break;
	}
	case MSB_PROTO_EGRESS_LISTEN:
		n = msb_proto_enc_egress_listen(out, sizeof(out), f->channel, &m->u.egress_listen);
		break;
	case MSB_PROTO_EGRESS_READY:
	case MSB_PROTO_EGRESS_OPEN:
		n = msb_proto_enc_egress_empty(out, sizeof(out), m->type, f->channel);
		break;
	default:
		fail("decoded an unknown type", f);
	}
	if (n < 0)
		fail("decoded message refused by its encoder", f);
	uint8_t hdr[MSB_PROTO_HEADER_SIZE];
	msb_proto_put_header(hdr, f->len, f->type, f->flags, f->channel);
	if ((size_t)n != MSB_PROTO_HEADER_SIZE + f->len || memcmp(out, hdr, sizeof(hdr)) != 0 ||
	    (f->len > 0 && memcmp(out + MSB_PROTO_HEADER_SIZE, f->payload, f->len) != 0))
		fail("re-encoding differs from the frame", f);
}

static void on_frame(const msb_proto_frame *f, struct log *lg, struct msb_fuzz_stats *st)
{
	msb_proto_msg m;
	int rc = msb_proto_decode(f, &m);
	st->frames++;
	if (rc == 0) {
		st->decoded++;
		roundtrip(f, &m);
		/* exercise the direction rules as a peer would */
		(void)msb_proto_host_may_send(m.type);
		(void)msb_proto_agent_may_send(m.type);
	} else if (st->first_error == 0) {
		st->first_error = rc;
	}
	if (lg->n == lg->cap) {
		lg->cap = lg->cap ? lg->cap * 2 : 64;
		lg->v = realloc(lg->v, lg->cap * sizeof(*lg->v));
		if (!lg->v)
			abort();
	}
	lg->v[lg->n++] =
		(struct rec){f->type, f->flags, f->channel, f->len, fnv(f->payload, f->len), rc};
}

/* Run the stream through a reader in chunks; chunk 0 = all at once. */
static void run(const uint8_t *data, size_t size, uint32_t max_payload, uint32_t seed,
		struct log *lg, struct msb_fuzz_stats *st)
{
	static msb_proto_reader rd;
	msb_proto_reader_init(&rd, max_payload);
	memset(st, 0, sizeof(*st));
	size_t off = 0;
	uint32_t x = seed | 1;
	while (off < size) {
		size_t chunk = size - off;
		if (seed) {
			x ^= x << 13;
			x ^= x >> 17;
			x ^= x << 5;
			size_t c = 1 + x % 23;
			if ((x >> 24) % 5 == 0)
				c = 1 + x % 4099;
			if (c < chunk)
				chunk = c;
		}
		size_t took = msb_proto_reader_feed(&rd, data + off, chunk);
		off += took;
		msb_proto_frame f;
		int rc;
		while ((rc = msb_proto_reader_next(&rd, &f)) == 1)
			on_frame(&f, lg, st);
		if (rc < 0) {
			if (st->first_error == 0)
				st->first_error = rc;
			return; /* the stream is broken: a real peer hangs up here */
		}
		if (took == 0)
			abort(); /* a healthy reader always has room for a frame */
	}
	st->partial = !msb_proto_reader_idle(&rd);
}

void msb_fuzz_proto_one(const uint8_t *data, size_t size, struct msb_fuzz_stats *st)
{
	struct log whole = {0}, split = {0}, small = {0};
	struct msb_fuzz_stats st2, st3;
	uint32_t seed = (uint32_t)size * 2654435761u;
	for (size_t i = 0; i < size && i < 8; i++)
		seed = (seed ^ data[i]) * 16777619u;

	run(data, size, MSB_PROTO_MAX_PAYLOAD, 0, &whole, st);
	run(data, size, MSB_PROTO_MAX_PAYLOAD, seed ? seed : 1, &split, &st2);
	bool same = whole.n == split.n && st->first_error == st2.first_error &&
		    st->partial == st2.partial && st->frames == st2.frames;
	for (size_t i = 0; same && i < whole.n; i++)
		same = rec_eq(&whole.v[i], &split.v[i]);
	if (!same) {
		fprintf(stderr,
			"fuzz_proto: property violated: split stream decodes differently\n");
		abort();
	}
	/* a reader with the smallest maximum: same frames up to where it refuses */
	run(data, size, MSB_PROTO_MIN_PAYLOAD, seed ^ 0x9e3779b9u, &small, &st3);
	for (size_t i = 0; i < small.n; i++) {
		if (i >= whole.n || !rec_eq(&small.v[i], &whole.v[i])) {
			fprintf(stderr, "fuzz_proto: property violated: small reader differs\n");
			abort();
		}
	}
	free(whole.v);
	free(split.v);
	free(small.v);
}
