/* SPDX-License-Identifier: Apache-2.0 */
/* Structure-aware JSON-RPC lines and the response checks (fuzz_jsonrpc.h). */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_jsonrpc.h"

#define MAX_DEPTH 3

uint8_t fz_byte(fz_src *s)
{
	if (!s->n)
		return 0;
	s->n--;
	return *s->p++;
}

static size_t count(const char *const *v)
{
	size_t n = 0;
	while (v[n])
		n++;
	return n;
}

static const char *pick(fz_src *s, const char *const *v)
{
	size_t n = count(v);
	return n ? v[fz_byte(s) % n] : "";
}

/* A string from the input's bytes (up to 24, NULs kept; invalid UTF-8
 * becomes a fixed string, since the encoder writes UTF-8 only). */
static json_t *raw_string(fz_src *s)
{
	size_t n = fz_byte(s) % 25;
	if (n > s->n)
		n = s->n;
	json_t *v = json_stringn((const char *)s->p, n);
	s->p += n;
	s->n -= n;
	return v ? v : json_string("\xc3\xa9t\xc3\xa9");
}

/* A vocabulary string, perhaps with a NUL and a tail after it. */
static json_t *vocab_string(fz_src *s, const fz_vocab *v)
{
	const char *w = pick(s, v->strings);
	uint8_t how = fz_byte(s) % 8;
	if (how == 0) {
		char buf[256];
		size_t n = strlen(w);
		if (n > 200)
			n = 200;
		memcpy(buf, w, n);
		buf[n] = '\0';
		memcpy(buf + n + 1, "evil", 4);
		return json_stringn(buf, n + 5);
	}
	if (how == 1) {
		char buf[256];
		size_t n = strlen(w);
		if (n > 200)
			n = 200;
		memcpy(buf, w, n);
		buf[n] = '/';
		return json_stringn(buf, n + 1);
	}
	return json_string(w);
}

static json_t *value(fz_src *s, const fz_vocab *v, int depth);
static json_t *object(fz_src *s, const fz_vocab *v, int depth);

/* Mostly a value that fits the parameter's name: the open handle of that
 * kind, a key, a spec, a router's config; otherwise any value. */
static json_t *value_for(fz_src *s, const fz_vocab *v, const char *name, int depth)
{
	static const char *const handles[][2] = {{"router", "router-1"},
						 {"sandbox", "sandbox-2"},
						 {"session", "session-3"},
						 {"call", "call-4"},
						 {"registry", "registry-5"}};
	if (fz_byte(s) % 4 == 0)
		return value(s, v, depth);
	if (strcmp(name, "arguments") == 0)
		return object(s, v, depth);
	if (strcmp(name, "name") == 0 && v->names)
		return json_string(pick(s, v->names));
	for (size_t i = 0; i < sizeof(handles) / sizeof(handles[0]); i++)
		if (strcmp(name, handles[i][0]) == 0)
			return json_string(handles[i][1]);
	if (strcmp(name, "key") == 0)
		return json_pack("{s:s, s:s, s:s}", "scope", "s", "thread_id", "t", "agent_dir",
				 "a");
	if (strcmp(name, "spec") == 0)
		return json_pack("{s:s}", "kind", "k");
	if (strcmp(name, "config") == 0)
		return json_pack("{s:s, s:[{s:s}]}", "min_isolation", "none", "backends", "type",
				 fz_byte(s) & 1 ? "fake" : "declared");
	return value(s, v, depth);
}

static json_t *object(fz_src *s, const fz_vocab *v, int depth)
{
	json_t *o = json_object();
	size_t n = fz_byte(s) % 5;
	for (size_t i = 0; o && i < n; i++) {
		const char *name = pick(s, v->params);
		json_object_set_new(o, name, value_for(s, v, name, depth + 1));
	}
	return o;
}

/* A method's parameters: mostly its own names, each with a fitting value. */
static json_t *params_for(fz_src *s, const fz_vocab *v, const char *const *own)
{
	if (!own || fz_byte(s) % 4 == 0)
		return object(s, v, 0);
	json_t *o = json_object();
	for (size_t i = 0; o && own[i]; i++)
		if (fz_byte(s) % 3 != 0)
			json_object_set_new(o, own[i], value_for(s, v, own[i], 1));
	return o;
}

static json_t *value(fz_src *s, const fz_vocab *v, int depth)
{
	static const json_int_t ints[] = {0,	   1,	      -1,	 2,	   64,
					  1 << 20, INT32_MAX, INT64_MAX, INT64_MIN};
	static const double reals[] = {0.5, -1.0, 1e308, 1e-300, 30.0, 0.0, 86401.0};
	uint8_t k = fz_byte(s) % 12;
	if (depth >= MAX_DEPTH && k >= 6)
		k %= 6;
	switch (k) {
	case 0:
	case 1:
		return vocab_string(s, v);
	case 2:
		return json_integer(ints[fz_byte(s) % (sizeof(ints) / sizeof(ints[0]))]);
	case 3:
		return json_real(reals[fz_byte(s) % (sizeof(reals) / sizeof(reals[0]))]);
	case 4:
		return fz_byte(s) & 1 ? json_true() : json_false();
	case 5:
		return fz_byte(s) & 1 ? json_null() : raw_string(s);
	case 6:
	case 7: {
		json_t *a = json_array();
		size_t n = fz_byte(s) % 4;
		for (size_t i = 0; a && i < n; i++)
			json_array_append_new(a, value(s, v, depth + 1));
		return a;
	}
	case 8:
		return json_pack("{s:o, s:o, s:o}", "scope", vocab_string(s, v), "thread_id",
				 vocab_string(s, v), "agent_dir", vocab_string(s, v));
	case 9:
		return json_pack("{s:s, s:o}", "kind", "k", "requires", value(s, v, depth + 1));
	default:
		return object(s, v, depth);
	}
}

static void expect(fz_out *out, long long id, int code)
{
	if (out->n_expect < FZ_MAX_EXPECT) {
		out->expect[out->n_expect].id = id;
		out->expect[out->n_expect].code = code;
		out->answered[out->n_expect++] = 0;
	}
}

/* One request; its expectation when it has an id. */
static json_t *request(fz_src *s, const fz_vocab *v, long long id, bool with_id, fz_out *out)
{
	uint8_t shape = fz_byte(s);
	bool invalid = false, known = true;
	json_t *r = json_object();
	switch (shape % 16) {
	case 0:
		break; /* no jsonrpc */
	case 1:
		json_object_set_new(r, "jsonrpc", json_stringn("2.0\0x", 5));
		break;
	case 2:
		json_object_set_new(r, "jsonrpc", json_real(2.0));
		break;
	default:
		json_object_set_new(r, "jsonrpc", json_string("2.0"));
		break;
	}
	invalid = shape % 16 < 3;
	size_t mi = count(v->methods) ? fz_byte(s) % count(v->methods) : 0;
	const char *m = v->methods[mi];
	uint8_t mk = fz_byte(s) % 16;
	if (mk == 0) {
		char buf[128];
		size_t n = strlen(m) < 100 ? strlen(m) : 100;
		memcpy(buf, m, n);
		memcpy(buf + n, "\0evil", 5);
		json_object_set_new(r, "method", json_stringn(buf, n + 5));
		invalid = true;
	} else if (mk == 1) {
		json_object_set_new(r, "method", json_integer(7));
		invalid = true;
	} else if (mk == 2) {
		json_t *w = raw_string(s);
		known = false;
		for (size_t i = 0; v->methods[i]; i++)
			known = known || strcmp(v->methods[i], json_string_value(w)) == 0;
		if (memchr(json_string_value(w), '\0', json_string_length(w)))
			invalid = true;
		json_object_set_new(r, "method", w);
	} else {
		json_object_set_new(r, "method", json_string(m));
	}
	uint8_t pk = fz_byte(s) % 16;
	if (pk == 0) {
		json_object_set_new(r, "params", json_string("x"));
		invalid = true;
	} else if (pk == 1) {
		json_object_set_new(r, "params", json_array());
	} else if (pk != 2) {
		json_object_set_new(
			r, "params",
			params_for(s, v, v->method_params ? v->method_params[mi] : NULL));
	}
	if (fz_byte(s) % 32 == 0) {
		json_object_set_new(r, pick(s, v->params), json_null());
		invalid = true; /* an unknown member of the request */
	}
	if (with_id) {
		json_object_set_new(r, "id", json_integer(id));
		expect(out, id, invalid ? -32600 : !known ? -32601 : 0);
	}
	return r;
}

static bool is_exactly(json_t *v, const char *s)
{
	return json_is_string(v) && json_string_length(v) == strlen(s) &&
	       memcmp(json_string_value(v), s, strlen(s)) == 0;
}

/* A raw line that is a request with an integer id is answered once; one
 * whose jsonrpc or method is not exactly a string without NUL, or that has
 * a member beyond the four, is -32600. */
static void expect_raw(const char *line, size_t len, fz_out *out)
{
	json_t *r = json_loadb(line, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, NULL);
	json_t *id = json_object_get(r, "id"), *m = json_object_get(r, "method");
	json_t *params = json_object_get(r, "params");
	if (json_is_object(r) && json_is_integer(id) && m) {
		bool bad = !is_exactly(json_object_get(r, "jsonrpc"), "2.0") ||
			   !json_is_string(m) ||
			   memchr(json_string_value(m), '\0', json_string_length(m)) ||
			   (params && !json_is_object(params) && !json_is_array(params));
		const char *key;
		json_t *x;
		json_object_foreach (r, key, x)
			bad = bad || (strcmp(key, "jsonrpc") && strcmp(key, "id") &&
				      strcmp(key, "method") && strcmp(key, "params"));
		expect(out, json_integer_value(id), bad ? -32600 : 0);
	}
	json_decref(r);
}

char *fz_line(fz_src *s, const fz_vocab *v, fz_out *out, size_t *len)
{
	static long long next_id = 1ll << 40;
	if (!s->n)
		return NULL;
	uint8_t mode = fz_byte(s) % 16;
	if (mode == 0) {
		/* A raw line, to the next newline or 120 bytes: the parser's share. */
		size_t n = 0;
		while (n < s->n && n < 120 && s->p[n] != '\n')
			n++;
		char *line = malloc(n + 1);
		if (!line)
			abort();
		memcpy(line, s->p, n);
		s->p += n + (n < s->n);
		s->n -= n + (n < s->n);
		*len = n;
		expect_raw(line, n, out);
		return line;
	}
	json_t *msg;
	if (mode == 1) {
		msg = json_array();
		size_t n = 1 + fz_byte(s) % 4;
		for (size_t i = 0; i < n; i++)
			json_array_append_new(msg,
					      request(s, v, next_id++, fz_byte(s) % 4 != 0, out));
	} else {
		msg = request(s, v, next_id++, mode != 2, out);
	}
	char *text = json_dumps(msg, JSON_COMPACT);
	json_decref(msg);
	if (!text)
		abort();
	*len = strlen(text);
	return text;
}

/* ---- safety --------------------------------------------------------------------------------- */

static bool safe_value(json_t *v)
{
	const char *key;
	json_t *m;
	size_t i;
	if (json_is_string(v))
		return !memmem(json_string_value(v), json_string_length(v), "sleep", 5);
	if (json_is_array(v)) {
		json_array_foreach (v, i, m)
			if (!safe_value(m))
				return false;
		return true;
	}
	if (!json_is_object(v))
		return true;
	json_object_foreach (v, key, m) {
		if (strcmp(key, "sink") == 0 || strcmp(key, "state_dir") == 0)
			return false;
		if (strcmp(key, "type") == 0 &&
		    !(json_is_string(m) && (strcmp(json_string_value(m), "fake") == 0 ||
					    strcmp(json_string_value(m), "declared") == 0)))
			return false;
		if (!safe_value(m))
			return false;
	}
	return true;
}

bool fz_safe(const char *line, size_t len)
{
	json_t *v = json_loadb(line, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
	if (!v)
		return true; /* only the parser sees it */
	bool ok = safe_value(v);
	json_decref(v);
	return ok;
}

/* ---- checks --------------------------------------------------------------------------------- */

static void check_response(json_t *r, fz_out *out)
{
	if (!json_is_object(r))
		abort();
	if (!json_is_string(json_object_get(r, "jsonrpc")) ||
	    strcmp(json_string_value(json_object_get(r, "jsonrpc")), "2.0") != 0)
		abort();
	json_t *res = json_object_get(r, "result"), *e = json_object_get(r, "error");
	if (json_object_get(r, "method"))
		return; /* a request or notification of the server's */
	if (!res == !e)
		abort(); /* exactly one of result and error */
	int code = 0;
	if (e) {
		json_t *c = json_object_get(e, "code"), *m = json_object_get(e, "message");
		if (!json_is_integer(c) || !json_is_string(m))
			abort();
		code = (int)json_integer_value(c);
		if (code != -32700 && code != -32600 && code != -32601 && code != -32602 &&
		    code != -32603 && code != -32000)
			abort();
		if (code == -32000 &&
		    !json_is_string(json_object_get(json_object_get(e, "data"), "name")))
			abort();
	}
	json_t *id = json_object_get(r, "id");
	if (!json_is_integer(id))
		return;
	/* The first request with this id not yet answered (lines are served in order). */
	for (size_t i = 0; i < out->n_expect; i++) {
		if (out->expect[i].id != json_integer_value(id) || out->answered[i])
			continue;
		out->answered[i]++;
		if (out->expect[i].code && out->expect[i].code != code)
			abort(); /* e.g. a NUL in `method` served as the method before it */
		return;
	}
}

void fz_check_line(const char *line, size_t len, fz_out *out)
{
	json_t *v = json_loadb(line, len, JSON_ALLOW_NUL, NULL);
	if (!v)
		abort(); /* every line written is one JSON object or array */
	size_t i;
	json_t *r;
	if (json_is_array(v)) {
		if (json_array_size(v) == 0)
			abort();
		json_array_foreach (v, i, r)
			check_response(r, out);
	} else {
		check_response(v, out);
	}
	json_decref(v);
}

void fz_check_done(const fz_out *out)
{
	for (size_t i = 0; i < out->n_expect; i++)
		if (out->answered[i] != 1)
			abort();
}
