/* SPDX-License-Identifier: Apache-2.0 */
/* Typed parameter getters and base64 for the JSON-RPC front. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rpc.h"

static json_t *get(json_t *params, const char *key)
{
	json_t *v = json_object_get(params, key);
	return json_is_null(v) ? NULL : v;
}

static int missing(const char *key, msb_error **err)
{
	return rpc_bad_params(err, "`%s` is required", key);
}

int rpc_str(json_t *params, const char *key, bool required, const char **out, msb_error **err)
{
	json_t *v = get(params, key);
	if (!v)
		return required ? missing(key, err) : 0;
	if (!json_is_string(v))
		return rpc_bad_params(err, "`%s` must be a string", key);
	if (strlen(json_string_value(v)) != json_string_length(v))
		return rpc_bad_params(err, "`%s` must not contain a NUL character", key);
	*out = json_string_value(v);
	return 0;
}

int rpc_bool(json_t *params, const char *key, bool *out, msb_error **err)
{
	json_t *v = get(params, key);
	if (!v)
		return 0;
	if (!json_is_boolean(v))
		return rpc_bad_params(err, "`%s` must be true or false", key);
	*out = json_is_true(v);
	return 0;
}

int rpc_u64(json_t *params, const char *key, bool required, uint64_t *out, msb_error **err)
{
	json_t *v = get(params, key);
	if (!v)
		return required ? missing(key, err) : 0;
	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return rpc_bad_params(err, "`%s` must be a non-negative integer", key);
	*out = (uint64_t)json_integer_value(v);
	return 0;
}

int rpc_double(json_t *params, const char *key, bool required, double *out, msb_error **err)
{
	json_t *v = get(params, key);
	if (!v)
		return required ? missing(key, err) : 0;
	if (!json_is_number(v) || !isfinite(json_number_value(v)))
		return rpc_bad_params(err, "`%s` must be a number", key);
	*out = json_number_value(v);
	return 0;
}

int rpc_json_text(json_t *params, const char *key, bool required, char **out, size_t *len,
		  msb_error **err)
{
	json_t *v = get(params, key);
	if (!v)
		return required ? missing(key, err) : 0;
	if (!json_is_object(v))
		return rpc_bad_params(err, "`%s` must be an object", key);
	char *text = json_dumps(v, JSON_COMPACT);
	if (!text)
		return msb_error_set(err, MSB_E_NOMEM, "out of memory");
	*out = text;
	*len = strlen(text);
	return 0;
}

int rpc_strv(json_t *params, const char *key, bool required, const char ***out, msb_error **err)
{
	json_t *v = get(params, key);
	if (!v)
		return required ? missing(key, err) : 0;
	if (!json_is_array(v))
		return rpc_bad_params(err, "`%s` must be an array of strings", key);
	size_t n = json_array_size(v);
	const char **a = calloc(n + 1, sizeof(*a));
	if (!a)
		return msb_error_set(err, MSB_E_NOMEM, "out of memory");
	for (size_t i = 0; i < n; i++) {
		json_t *s = json_array_get(v, i);
		if (!json_is_string(s) || strlen(json_string_value(s)) != json_string_length(s)) {
			free(a);
			return rpc_bad_params(err, "`%s[%zu]` must be a string without NUL", key,
					      i);
		}
		a[i] = json_string_value(s);
	}
	*out = a;
	return 0;
}

int rpc_base64(json_t *params, const char *key, bool required, uint8_t **out, size_t *len,
	       msb_error **err)
{
	json_t *v = get(params, key);
	if (!v)
		return required ? missing(key, err) : 0;
	if (!json_is_string(v))
		return rpc_bad_params(err, "`%s` must be a base64 string", key);
	if (msb__base64_decode(json_string_value(v), json_string_length(v), false, out, len) < 0)
		return rpc_bad_params(err, "`%s` is not valid base64", key);
	return 0;
}

json_t *rpc_text(const char *s)
{
	if (!s)
		return json_null();
	json_t *v = json_string(s);
	if (v)
		return v;
	size_t n = 0;
	char *fixed = msb_text_from_bytes_len((const uint8_t *)s, strlen(s), &n);
	v = fixed ? json_stringn(fixed, n) : NULL;
	free(fixed);
	return v;
}
