/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Strict JSON helpers over jansson: every loader refuses unknown keys (naming
 * the key and where), wrong types (MSB_E_TYPE) and out-of-range values
 * (MSB_E_VALUE). `where` is a human path like "spec" or "router.reclaim".
 */
#ifndef MSB_UTIL_JSON_H
#define MSB_UTIL_JSON_H

#include <jansson.h>

#include "util.h"

static inline void msb__json_decrefp(json_t **p)
{
	json_decref(*p);
}
#define _cleanup_json_ _cleanup_(msb__json_decrefp)

/* Parse a document whose top level must be an object. Rejects NaN/Inf,
 * duplicate keys, and trailing data. */
int msb__json_load_object(const char *json, size_t len, const char *where, json_t **out,
			  msb_error **err);
/* Refuse any key of `obj` not in the NULL-terminated `allowed`. */
int msb__json_check_keys(json_t *obj, const char *const *allowed, const char *where,
			 msb_error **err);
/* Each getter: absent key (or JSON null when allow_null) leaves *out alone and
 * sets *present = false (present may be NULL). */
int msb__json_get_string(json_t *obj, const char *key, const char *where, const char **out,
			 bool *present, msb_error **err);
int msb__json_get_bool(json_t *obj, const char *key, const char *where, bool *out, bool *present,
		       msb_error **err);
/* A non-negative integer (a JSON real or a negative number is refused). */
int msb__json_get_u64(json_t *obj, const char *key, const char *where, uint64_t *out, bool *present,
		      msb_error **err);
/* A finite number. */
int msb__json_get_double(json_t *obj, const char *key, const char *where, double *out,
			 bool *present, msb_error **err);
/* An array of strings (a bare string is refused: "must be a list"). *out is a
 * borrowed array view: n entries, valid while obj lives; malloc()ed array. */
int msb__json_get_string_array(json_t *obj, const char *key, const char *where, const char ***out,
			       size_t *n, bool *present, msb_error **err);
/* An object value. */
int msb__json_get_object(json_t *obj, const char *key, const char *where, json_t **out,
			 bool *present, msb_error **err);
/* Compact, sorted keys, UTF-8, no NaN. NULL on failure. */
char *msb__json_dump(json_t *v);

#endif
