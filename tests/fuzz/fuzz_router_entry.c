/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz entry: router JSON through the two public readers,
 * msb_router_options_from_json and msb_router_from_json (options plus
 * "backends" of the declared and fake types). Inputs naming an `ns` backend
 * are skipped: that type makes state directories, which is the ns tests'
 * business, not a parser's. Properties (abort on failure): a refusal carries
 * its code and a message; accepted options serialise, parse back and
 * serialise to the same text; an accepted router holds one backend per
 * entry of "backends" and its options round-trip the same way.
 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include <msb/msb.h>

#include "fuzz_target.h"

static void check_refusal(int rc, msb_error *err)
{
	if (rc >= 0 || !err || msb_error_code(err) != rc || !msb_error_message(err) ||
	    !*msb_error_message(err))
		abort();
	msb_error_free(err);
}

/* Options -> JSON -> options -> the same JSON. */
static void options_round_trip(const msb_router_options *o)
{
	msb_error *err = NULL;
	char *j1 = NULL, *j2 = NULL, *sel = NULL;
	msb_router_options o2;
	if (msb_router_options_to_json(o, &j1, &err) < 0)
		abort();
	if (msb_router_options_from_json(j1, strlen(j1), &o2, &sel, &err) < 0)
		abort();
	if (msb_router_options_to_json(&o2, &j2, &err) < 0 || strcmp(j1, j2) != 0)
		abort();
	free(j1);
	free(j2);
	free(sel);
}

/* -1: an `ns` backend is named (skip); else the number of "backends"
 * entries as jansson reads them (0 when the text is not such an object). */
static long count_backends(const uint8_t *data, size_t size)
{
	json_t *root = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, NULL);
	long n = 0;
	json_t *arr = json_is_object(root) ? json_object_get(root, "backends") : NULL;
	if (json_is_array(arr)) {
		size_t i;
		json_t *b;
		json_array_foreach (arr, i, b) {
			json_t *t = json_is_object(b) ? json_object_get(b, "type") : NULL;
			if (json_is_string(t) && strcmp(json_string_value(t), "ns") == 0) {
				n = -1;
				break;
			}
			n++;
		}
	}
	json_decref(root);
	return n;
}

int msb_fuzz_target_one(const uint8_t *data, size_t size)
{
	long nb = count_backends(data, size);
	if (nb < 0)
		return 0;

	msb_error *err = NULL;
	msb_router_options o;
	char *sel = NULL;
	int rc = msb_router_options_from_json((const char *)data, size, &o, &sel, &err);
	if (rc < 0) {
		check_refusal(rc, err);
		err = NULL;
	} else {
		if (sel != o.selected)
			abort(); /* *selected_out is the string the options point at */
		options_round_trip(&o);
		free(sel);
	}

	msb_router *r = NULL;
	rc = msb_router_from_json((const char *)data, size, NULL, &r, &err);
	if (rc < 0) {
		if (r)
			abort();
		check_refusal(rc, err);
		return 0;
	}
	if (!r || err || msb_router_backend_count(r) != (size_t)nb)
		abort();
	for (size_t i = 0; i < msb_router_backend_count(r); i++)
		if (!msb_router_backend_at(r, i) || !msb_backend_name(msb_router_backend_at(r, i)))
			abort();
	options_round_trip(msb_router_options_get(r));
	msb_router_free(r);
	return 1;
}
