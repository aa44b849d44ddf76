/* SPDX-License-Identifier: Apache-2.0 */
#include "json.h"

int msb__json_load_object(const char *json, size_t len, const char *where, json_t **out,
			  msb_error **err)
{
	json_error_t je;
	if (!json)
		return msb_error_set(err, MSB_E_VALUE, "%s: no JSON given", where);
	json_t *v = json_loadb(json, len, JSON_REJECT_DUPLICATES, &je);
	if (!v)
		return msb_error_set(err, MSB_E_VALUE, "%s: invalid JSON at line %d column %d: %s",
				     where, je.line, je.column, je.text);
	if (!json_is_object(v)) {
		json_decref(v);
		return msb_error_set(err, MSB_E_TYPE, "%s: must be a JSON object", where);
	}
	*out = v;
	return 0;
}

int msb__json_check_keys(json_t *obj, const char *const *allowed, const char *where,
			 msb_error **err)
{
	const char *key;
	json_t *value;
	json_object_foreach (obj, key, value) {
		bool ok = false;
		for (size_t i = 0; allowed[i]; i++)
			if (strcmp(allowed[i], key) == 0) {
				ok = true;
				break;
			}
		if (!ok)
			return msb_error_set(err, MSB_E_VALUE, "%s: unknown key `%s`", where, key);
	}
	return 0;
}

static json_t *fetch(json_t *obj, const char *key, bool *present)
{
	json_t *v = json_object_get(obj, key);
	if (present)
		*present = v && !json_is_null(v);
	if (v && json_is_null(v))
		return NULL;
	return v;
}

int msb__json_get_string(json_t *obj, const char *key, const char *where, const char **out,
			 bool *present, msb_error **err)
{
	json_t *v = fetch(obj, key, present);
	if (!v)
		return 0;
	if (!json_is_string(v))
		return msb_error_set(err, MSB_E_TYPE, "%s.%s: must be a string", where, key);
	if (strlen(json_string_value(v)) != json_string_length(v))
		return msb_error_set(err, MSB_E_VALUE, "%s.%s: must not contain NUL", where, key);
	*out = json_string_value(v);
	return 0;
}

int msb__json_get_bool(json_t *obj, const char *key, const char *where, bool *out, bool *present,
		       msb_error **err)
{
	json_t *v = fetch(obj, key, present);
	if (!v)
		return 0;
	if (!json_is_boolean(v))
		return msb_error_set(err, MSB_E_TYPE, "%s.%s: must be true or false", where, key);
	*out = json_is_true(v);
	return 0;
}

int msb__json_get_u64(json_t *obj, const char *key, const char *where, uint64_t *out, bool *present,
		      msb_error **err)
{
	json_t *v = fetch(obj, key, present);
	if (!v)
		return 0;
	if (!json_is_integer(v))
		return msb_error_set(err, MSB_E_TYPE, "%s.%s: must be an integer", where, key);
	json_int_t i = json_integer_value(v);
	if (i < 0)
		return msb_error_set(err, MSB_E_VALUE, "%s.%s: must not be negative", where, key);
	*out = (uint64_t)i;
	return 0;
}

int msb__json_get_double(json_t *obj, const char *key, const char *where, double *out,
			 bool *present, msb_error **err)
{
	json_t *v = fetch(obj, key, present);
	if (!v)
		return 0;
	if (!json_is_number(v))
		return msb_error_set(err, MSB_E_TYPE, "%s.%s: must be a number", where, key);
	*out = json_number_value(v);
	return 0;
}

int msb__json_get_string_array(json_t *obj, const char *key, const char *where, const char ***out,
			       size_t *n, bool *present, msb_error **err)
{
	json_t *v = fetch(obj, key, present);
	if (!v)
		return 0;
	if (!json_is_array(v))
		return msb_error_set(err, MSB_E_TYPE, "%s.%s: must be a list of strings, not %s",
				     where, key, json_is_string(v) ? "a string" : "this value");
	size_t count = json_array_size(v);
	const char **arr = calloc(count + 1, sizeof(char *));
	if (!arr)
		return msb__error_nomem(err);
	for (size_t i = 0; i < count; i++) {
		json_t *e = json_array_get(v, i);
		if (!json_is_string(e) || strlen(json_string_value(e)) != json_string_length(e)) {
			free(arr);
			return msb_error_set(err, MSB_E_TYPE, "%s.%s[%zu]: must be a string", where,
					     key, i);
		}
		arr[i] = json_string_value(e);
	}
	*out = arr;
	*n = count;
	return 0;
}

int msb__json_get_object(json_t *obj, const char *key, const char *where, json_t **out,
			 bool *present, msb_error **err)
{
	json_t *v = fetch(obj, key, present);
	if (!v)
		return 0;
	if (!json_is_object(v))
		return msb_error_set(err, MSB_E_TYPE, "%s.%s: must be an object", where, key);
	*out = v;
	return 0;
}

char *msb__json_dump(json_t *v)
{
	return json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
}
