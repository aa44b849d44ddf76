/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A small, strict JSON Schema subset: the host-side argument check at the
 * registry's one door (13.22). Implemented keywords: type, properties,
 * required, additionalProperties, enum, items, minLength, maxLength, minItems,
 * maxItems, minimum, maximum; annotations title and description. A schema
 * using anything else is refused at registration, so no keyword is ever
 * silently ignored (an ignored constraint would read as enforced).
 */
#include <math.h>
#include <stdio.h>

#include "core/hosttools/hosttools_int.h"
#include "util/json.h"

static const char *const type_names[] = {"object", "array",   "string", "integer",
					 "number", "boolean", "null",	NULL};

static bool is_type_name(const char *s)
{
	for (size_t i = 0; type_names[i]; i++)
		if (strcmp(type_names[i], s) == 0)
			return true;
	return false;
}

static bool nonneg_int(json_t *v)
{
	return json_is_integer(v) && json_integer_value(v) >= 0;
}

static int check(json_t *s, const char *where, unsigned depth, msb_error **err)
{
	if (depth > 32)
		return msb_error_set(err, MSB_E_VALUE, "%s: schema nested too deeply", where);
	if (!json_is_object(s))
		return msb_error_set(err, MSB_E_VALUE, "%s: a schema must be a JSON object", where);
	const char *k;
	json_t *v;
	json_object_foreach (s, k, v) {
		if (strcmp(k, "title") == 0 || strcmp(k, "description") == 0) {
			if (!json_is_string(v))
				return msb_error_set(err, MSB_E_VALUE, "%s.%s must be a string",
						     where, k);
		} else if (strcmp(k, "type") == 0) {
			if (json_is_string(v)) {
				if (!is_type_name(json_string_value(v)))
					return msb_error_set(err, MSB_E_VALUE,
							     "%s.type: `%s` is not a JSON type",
							     where, json_string_value(v));
			} else if (json_is_array(v) && json_array_size(v) > 0) {
				size_t i;
				json_t *t;
				json_array_foreach (v, i, t) {
					if (!json_is_string(t) ||
					    !is_type_name(json_string_value(t)))
						return msb_error_set(err, MSB_E_VALUE,
								     "%s.type: not a JSON type",
								     where);
				}
			} else {
				return msb_error_set(
					err, MSB_E_VALUE,
					"%s.type must be a type name or a list of them", where);
			}
		} else if (strcmp(k, "properties") == 0) {
			if (!json_is_object(v))
				return msb_error_set(err, MSB_E_VALUE,
						     "%s.properties must be an object", where);
			const char *pk;
			json_t *pv;
			json_object_foreach (v, pk, pv) {
				_cleanup_free_ char *w =
					msb__asprintf("%s.properties.%s", where, pk);
				if (!w)
					return msb__error_nomem(err);
				int r = check(pv, w, depth + 1, err);
				if (r < 0)
					return r;
			}
		} else if (strcmp(k, "required") == 0) {
			if (!json_is_array(v))
				return msb_error_set(err, MSB_E_VALUE,
						     "%s.required must be a list of names", where);
			size_t i;
			json_t *t;
			json_array_foreach (v, i, t) {
				if (!json_is_string(t))
					return msb_error_set(err, MSB_E_VALUE,
							     "%s.required must be a list of names",
							     where);
			}
		} else if (strcmp(k, "additionalProperties") == 0) {
			if (!json_is_boolean(v)) {
				_cleanup_free_ char *w =
					msb__asprintf("%s.additionalProperties", where);
				if (!w)
					return msb__error_nomem(err);
				int r = check(v, w, depth + 1, err);
				if (r < 0)
					return r;
			}
		} else if (strcmp(k, "items") == 0) {
			_cleanup_free_ char *w = msb__asprintf("%s.items", where);
			if (!w)
				return msb__error_nomem(err);
			int r = check(v, w, depth + 1, err);
			if (r < 0)
				return r;
		} else if (strcmp(k, "enum") == 0) {
			if (!json_is_array(v) || json_array_size(v) == 0)
				return msb_error_set(err, MSB_E_VALUE,
						     "%s.enum must be a non-empty list", where);
		} else if (strcmp(k, "minLength") == 0 || strcmp(k, "maxLength") == 0 ||
			   strcmp(k, "minItems") == 0 || strcmp(k, "maxItems") == 0) {
			if (!nonneg_int(v))
				return msb_error_set(err, MSB_E_VALUE,
						     "%s.%s must be a non-negative integer", where,
						     k);
		} else if (strcmp(k, "minimum") == 0 || strcmp(k, "maximum") == 0) {
			if (!json_is_number(v))
				return msb_error_set(err, MSB_E_VALUE, "%s.%s must be a number",
						     where, k);
		} else {
			return msb_error_set(err, MSB_E_VALUE,
					     "%s: schema keyword `%s` is not implemented by the "
					     "host-tool argument validator",
					     where, k);
		}
	}
	return 0;
}

int msb_hosttools__schema_check(json_t *schema, const char *where, msb_error **err)
{
	int r = check(schema, where, 0, err);
	if (r < 0)
		return r;
	/* The top level describes keyword arguments: an object. */
	json_t *t = json_object_get(schema, "type");
	if (!t || !json_is_string(t) || strcmp(json_string_value(t), "object") != 0)
		return msb_error_set(err, MSB_E_VALUE,
				     "%s: a parameter schema must have \"type\": \"object\"",
				     where);
	return 0;
}

static size_t utf8_chars(const char *s)
{
	size_t n = 0;
	for (; *s; s++)
		if (((unsigned char)*s & 0xC0) != 0x80)
			n++;
	return n;
}

static const char *type_of(json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_OBJECT:
		return "object";
	case JSON_ARRAY:
		return "array";
	case JSON_STRING:
		return "string";
	case JSON_INTEGER:
		return "integer";
	case JSON_REAL:
		return "number";
	case JSON_TRUE:
	case JSON_FALSE:
		return "boolean";
	case JSON_NULL:
	default:
		return "null";
	}
}

static bool has_type(json_t *v, const char *t)
{
	if (strcmp(t, "number") == 0)
		return json_is_number(v);
	if (strcmp(t, "integer") == 0) {
		if (json_is_integer(v))
			return true;
		/* 2.0 is an integer in JSON Schema. */
		return json_is_real(v) && floor(json_real_value(v)) == json_real_value(v);
	}
	return strcmp(type_of(v), t) == 0;
}

/* Fail with a message at `at` (a dotted path, "" for the top). */
MSB_PRINTF(3, 4) static int fail(char **msg, const char *at, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	_cleanup_free_ char *m = msb__vasprintf(fmt, ap);
	va_end(ap);
	if (!m)
		return -ENOMEM;
	*msg = at[0] ? msb__asprintf("%s: %s", at, m) : TAKE_PTR(m);
	return *msg ? 1 : -ENOMEM;
}

/* 0 valid, 1 invalid (*msg set), -ENOMEM. */
static int validate(json_t *s, json_t *v, const char *at, bool top, char **msg)
{
	json_t *t = json_object_get(s, "type");
	if (t) {
		bool ok = false;
		if (json_is_string(t)) {
			ok = has_type(v, json_string_value(t));
		} else {
			size_t i;
			json_t *e;
			json_array_foreach (t, i, e)
				ok = ok || has_type(v, json_string_value(e));
		}
		if (!ok)
			return fail(msg, at, "expected %s, got %s",
				    json_is_string(t) ? json_string_value(t)
						      : "one of the listed types",
				    type_of(v));
	}
	json_t *en = json_object_get(s, "enum");
	if (en) {
		bool ok = false;
		size_t i;
		json_t *e;
		json_array_foreach (en, i, e)
			ok = ok || json_equal(e, v);
		if (!ok)
			return fail(msg, at, "value is not one of the allowed values");
	}
	if (json_is_string(v)) {
		size_t n = utf8_chars(json_string_value(v));
		json_t *mn = json_object_get(s, "minLength"), *mx = json_object_get(s, "maxLength");
		if (mn && n < (size_t)json_integer_value(mn))
			return fail(msg, at, "shorter than %lld characters",
				    (long long)json_integer_value(mn));
		if (mx && n > (size_t)json_integer_value(mx))
			return fail(msg, at, "longer than %lld characters",
				    (long long)json_integer_value(mx));
	}
	if (json_is_number(v)) {
		double x = json_number_value(v);
		json_t *mn = json_object_get(s, "minimum"), *mx = json_object_get(s, "maximum");
		if (mn && x < json_number_value(mn))
			return fail(msg, at, "below the minimum %g", json_number_value(mn));
		if (mx && x > json_number_value(mx))
			return fail(msg, at, "above the maximum %g", json_number_value(mx));
	}
	if (json_is_array(v)) {
		size_t n = json_array_size(v);
		json_t *mn = json_object_get(s, "minItems"), *mx = json_object_get(s, "maxItems");
		if (mn && n < (size_t)json_integer_value(mn))
			return fail(msg, at, "fewer than %lld items",
				    (long long)json_integer_value(mn));
		if (mx && n > (size_t)json_integer_value(mx))
			return fail(msg, at, "more than %lld items",
				    (long long)json_integer_value(mx));
		json_t *items = json_object_get(s, "items");
		if (items) {
			size_t i;
			json_t *e;
			json_array_foreach (v, i, e) {
				_cleanup_free_ char *w = msb__asprintf("%s[%zu]", at, i);
				if (!w)
					return -ENOMEM;
				int r = validate(items, e, w, false, msg);
				if (r != 0)
					return r;
			}
		}
	}
	if (json_is_object(v)) {
		json_t *props = json_object_get(s, "properties");
		json_t *req = json_object_get(s, "required");
		json_t *add = json_object_get(s, "additionalProperties");
		if (req) {
			size_t i;
			json_t *e;
			json_array_foreach (req, i, e) {
				if (!json_object_get(v, json_string_value(e)))
					return fail(msg, at,
						    top ? "missing required argument '%s'"
							: "missing required property '%s'",
						    json_string_value(e));
			}
		}
		const char *k;
		json_t *e;
		json_object_foreach (v, k, e) {
			json_t *ps = props ? json_object_get(props, k) : NULL;
			_cleanup_free_ char *w =
				at[0] ? msb__asprintf("%s.%s", at, k) : msb__strdup(k);
			if (!w)
				return -ENOMEM;
			int r = 0;
			if (ps) {
				r = validate(ps, e, w, false, msg);
			} else if (json_is_false(add) || (top && !add)) {
				/* Keyword arguments are closed by default, as a function
				 * signature is: an unknown name is a mistake to report. */
				r = fail(msg, at,
					 top ? "unexpected keyword argument '%s'"
					     : "unexpected property '%s'",
					 k);
			} else if (json_is_object(add)) {
				r = validate(add, e, w, false, msg);
			}
			if (r != 0)
				return r;
		}
	}
	return 0;
}

int msb_hosttools__schema_validate(json_t *schema, json_t *args, char **msg)
{
	*msg = NULL;
	return validate(schema, args, "", true, msg);
}
