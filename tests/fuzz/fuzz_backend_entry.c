/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz entry: a backend from JSON (msb_backend_from_json) for the declared
 * and fake types, and backend declarations alone (msb_declarations_from_json).
 * Inputs of type `ns` are skipped (that type makes state directories).
 * Properties (abort on failure): a refusal carries its code and a message
 * and returns nothing; accepted declarations serialise, parse back and
 * serialise to the same text; an accepted backend has a name and an
 * isolation, and rebuilding it from {type, name, isolation, declarations}
 * gives a backend with the same name, isolation and declarations.
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

/* Declarations -> JSON (returned) -> declarations -> the same JSON. */
static char *declarations_round_trip(const msb_declarations *d)
{
	msb_error *err = NULL;
	char *j1 = NULL, *j2 = NULL;
	msb_declarations *d2 = NULL;
	if (msb_declarations_to_json(d, &j1, &err) < 0)
		abort();
	if (msb_declarations_from_json(j1, strlen(j1), &d2, &err) < 0)
		abort();
	if (msb_declarations_to_json(d2, &j2, &err) < 0 || strcmp(j1, j2) != 0)
		abort();
	free(j2);
	msb_declarations_free(d2);
	return j1;
}

/* The "type" string as jansson reads it; NULL when absent or not a string.
 * *is_ns when it is "ns". */
static char *type_of(const uint8_t *data, size_t size, bool *is_ns)
{
	json_t *root = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, NULL);
	json_t *t = json_is_object(root) ? json_object_get(root, "type") : NULL;
	char *type = json_is_string(t) ? strdup(json_string_value(t)) : NULL;
	*is_ns = type && strcmp(type, "ns") == 0;
	json_decref(root);
	return type;
}

static void backend_round_trip(const char *type, msb_backend *b)
{
	const char *name = msb_backend_name(b), *iso = msb_backend_isolation(b);
	const msb_declarations *d = msb_backend_declarations(b);
	if (!name || !iso || !d)
		abort();
	char *dj = declarations_round_trip(d);
	json_error_t je;
	json_t *decl = json_loads(dj, 0, &je);
	json_t *o = json_pack("{s:s, s:s, s:s, s:o}", "type", type, "name", name, "isolation", iso,
			      "declarations", decl);
	char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
	if (!text)
		abort();
	msb_backend *b2 = NULL;
	msb_error *err = NULL;
	if (msb_backend_from_json(text, strlen(text), &b2, &err) < 0)
		abort(); /* what the backend says of itself builds it again */
	if (strcmp(msb_backend_name(b2), name) != 0 || strcmp(msb_backend_isolation(b2), iso) != 0)
		abort();
	char *dj2 = declarations_round_trip(msb_backend_declarations(b2));
	if (strcmp(dj, dj2) != 0)
		abort();
	free(dj2);
	msb_backend_unref(b2);
	free(text);
	json_decref(o);
	free(dj);
}

int msb_fuzz_target_one(const uint8_t *data, size_t size)
{
	bool is_ns;
	char *type = type_of(data, size, &is_ns);
	if (is_ns) {
		free(type);
		return 0;
	}

	msb_error *err = NULL;
	msb_declarations *d = NULL;
	int rc = msb_declarations_from_json((const char *)data, size, &d, &err);
	if (rc < 0) {
		if (d)
			abort();
		check_refusal(rc, err);
		err = NULL;
	} else {
		free(declarations_round_trip(d));
		msb_declarations_free(d);
	}

	msb_backend *b = NULL;
	rc = msb_backend_from_json((const char *)data, size, &b, &err);
	if (rc < 0) {
		if (b)
			abort();
		check_refusal(rc, err);
		free(type);
		return 0;
	}
	if (!b || err || !type)
		abort();
	backend_round_trip(type, b);
	msb_backend_unref(b);
	free(type);
	return 1;
}
