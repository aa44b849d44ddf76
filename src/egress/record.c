/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The decision record: one JSON line per proxy decision in
 * <state dir>/egress.log, written by msb-shim and read (and truncated) by the
 * ns backend, which turns each into an EgressObserved event.
 *
 *   {"time_ns":N,"decision":"ALLOW"|"DENY","host":S,"port":N,
 *    "method":S|null,"reason":S,"bytes_up":N,"bytes_down":N}
 */
#include <errno.h>
#include <jansson.h>
#include <string.h>

#include "egress/egress.h"
#include "util/json.h"

int msb_egress__record_format(const msb_egress_entry *e, char *out, size_t cap)
{
	json_t *o =
		json_pack("{s:I, s:s, s:s, s:i, s:s, s:I, s:I}", "time_ns", (json_int_t)e->time_ns,
			  "decision", e->allow ? "ALLOW" : "DENY", "host", e->host, "port",
			  (int)e->port, "reason", e->reason ? e->reason : "", "bytes_up",
			  (json_int_t)e->bytes_up, "bytes_down", (json_int_t)e->bytes_down);
	if (!o)
		return -ENOMEM;
	json_t *m = e->method[0] ? json_string(e->method) : json_null();
	if (!m || json_object_set_new(o, "method", m) < 0) {
		json_decref(o);
		return -ENOMEM;
	}
	char *s = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENSURE_ASCII);
	json_decref(o);
	if (!s)
		return -ENOMEM;
	size_t n = strlen(s);
	if (n + 2 > cap) {
		free(s);
		return -ENOSPC;
	}
	memcpy(out, s, n);
	out[n++] = '\n';
	out[n] = '\0';
	free(s);
	return (int)n;
}

static const char *const record_keys[] = {"time_ns", "decision", "host",       "port", "method",
					  "reason",  "bytes_up", "bytes_down", NULL};

static int copy_str(json_t *o, const char *key, char *out, size_t cap)
{
	json_t *v = json_object_get(o, key);
	if (!json_is_string(v) || json_string_length(v) >= cap ||
	    strlen(json_string_value(v)) != json_string_length(v))
		return -EINVAL;
	memcpy(out, json_string_value(v), json_string_length(v) + 1);
	return 0;
}

static int get_uint(json_t *o, const char *key, uint64_t max, uint64_t *out)
{
	json_t *v = json_object_get(o, key);
	if (!json_is_integer(v) || json_integer_value(v) < 0 ||
	    (uint64_t)json_integer_value(v) > max)
		return -EINVAL;
	*out = (uint64_t)json_integer_value(v);
	return 0;
}

int msb_egress__record_parse(const char *line, size_t len, msb_egress_entry *e, char *reason_buf,
			     size_t reason_cap)
{
	if (len > MSB_EGRESS_RECORD_MAX)
		return -EINVAL;
	json_error_t je;
	json_t *o = json_loadb(line, len, JSON_REJECT_DUPLICATES, &je);
	if (!json_is_object(o)) {
		json_decref(o);
		return -EINVAL;
	}
	int r = msb__json_check_keys(o, record_keys, "egress record", NULL);
	memset(e, 0, sizeof(*e));
	uint64_t t = 0, port = 0;
	char decision[8];
	if (r == 0)
		r = get_uint(o, "time_ns", INT64_MAX, &t);
	if (r == 0)
		r = get_uint(o, "port", 65535, &port);
	if (r == 0)
		r = get_uint(o, "bytes_up", UINT64_MAX, &e->bytes_up);
	if (r == 0)
		r = get_uint(o, "bytes_down", UINT64_MAX, &e->bytes_down);
	if (r == 0)
		r = copy_str(o, "decision", decision, sizeof(decision));
	if (r == 0)
		r = copy_str(o, "host", e->host, sizeof(e->host));
	if (r == 0)
		r = copy_str(o, "reason", reason_buf, reason_cap);
	if (r == 0) {
		json_t *m = json_object_get(o, "method");
		if (!json_is_null(m))
			r = copy_str(o, "method", e->method, sizeof(e->method));
	}
	if (r == 0 && strcmp(decision, "ALLOW") != 0 && strcmp(decision, "DENY") != 0)
		r = -EINVAL;
	json_decref(o);
	if (r < 0)
		return -EINVAL;
	e->time_ns = (int64_t)t;
	e->port = (uint16_t)port;
	e->allow = decision[0] == 'A';
	e->reason = reason_buf;
	return 0;
}
