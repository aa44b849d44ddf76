/* SPDX-License-Identifier: Apache-2.0 */
/*
 * BackendDeclarations (checklist 4.2-4.12, DESIGN 9.2, 9.3): the default
 * value, the deep copy, method-token membership, and strict JSON.
 *
 * Each field's default is its own silence rule: capabilities read as
 * DEFAULT_CAPABILITIES, limits as DEFAULT_SANDBOX_LIMITS, egress_modes and
 * os_families as the empty set, isolation_scopes as {conversation},
 * egress_method_tokens as the empty set.
 */
#include <stdalign.h>

#include "core/policy/router_int.h"
#include "util/json.h"

const msb_declarations MSB_DEFAULT_BACKEND_DECLARATIONS = MSB_DECLARATIONS_INIT;

#define EGRESS_ALL ((uint32_t)(MSB_EGRESS_UNRESTRICTED | MSB_EGRESS_ALLOWLIST | MSB_EGRESS_CLOSED))
#define OS_ALL ((uint32_t)(MSB_OS_POSIX | MSB_OS_WINDOWS))
#define SCOPE_ALL ((uint32_t)(MSB_SCOPE_CONVERSATION | MSB_SCOPE_CALL))
#define IDENTITY_ALL ((uint32_t)(MSB_IDENTITY_APP | MSB_IDENTITY_USER))

/* ---- copy ------------------------------------------------------------------- */

msb_declarations *msb_declarations__dup(const msb_declarations *d)
{
	if (!d)
		return NULL;

	/* [struct][token pointers][token bytes], one allocation. */
	size_t n = d->egress_method_tokens ? d->n_egress_method_tokens : 0;
	size_t size = sizeof(msb_declarations), ptrs, bytes = 0;
	_Static_assert(sizeof(msb_declarations) % alignof(const char *) == 0,
		       "token pointers follow the struct aligned");
	if (msb__mul_overflow(n, sizeof(const char *), &ptrs) ||
	    msb__add_overflow(size, ptrs, &size))
		return NULL;
	for (size_t i = 0; i < n; i++) {
		const char *t = d->egress_method_tokens[i] ? d->egress_method_tokens[i] : "";
		if (msb__add_overflow(bytes, strlen(t) + 1, &bytes))
			return NULL;
	}
	if (msb__add_overflow(size, bytes, &size))
		return NULL;

	msb_declarations *c = calloc(1, size);
	if (!c)
		return NULL;
	*c = *d;
	c->egress_method_tokens = NULL;
	c->n_egress_method_tokens = n;
	if (n > 0) {
		const char **tokens = (const char **)(c + 1);
		char *p = (char *)(tokens + n);
		for (size_t i = 0; i < n; i++) {
			const char *t =
				d->egress_method_tokens[i] ? d->egress_method_tokens[i] : "";
			size_t l = strlen(t) + 1;
			memcpy(p, t, l);
			tokens[i] = p;
			p += l;
		}
		c->egress_method_tokens = tokens;
	}
	return c;
}

void msb_declarations_free(msb_declarations *d)
{
	/* Values from msb_declarations_from_json and msb_declarations__dup are
	 * one allocation each. */
	free(d);
}

/* ---- membership ----------------------------------------------------------------- */

bool msb_declarations_has_method_token(const msb_declarations *d, const char *token)
{
	if (!d || !msb_http_method_valid(token))
		return false;
	if (d->egress_method_tokens_all)
		return true;
	for (size_t i = 0; i < d->n_egress_method_tokens; i++)
		if (d->egress_method_tokens && d->egress_method_tokens[i] &&
		    strcmp(d->egress_method_tokens[i], token) == 0)
			return true;
	return false;
}

/* ---- validation of a typed value -------------------------------------------------- */

int msb_declarations__validate(const msb_declarations *d, const char *where, msb_error **err)
{
	if (!d)
		return msb_error_set(err, MSB_E_VALUE, "%s: no declarations given", where);
	if (d->version != MSB_DECLARATIONS_VERSION)
		return msb_error_set(err, MSB_E_VALUE, "%s: unsupported declarations version %u",
				     where, d->version);
	if (d->capabilities & ~(msb_capset)MSB_CAP_ALL)
		return msb_error_set(err, MSB_E_VALUE,
				     "%s.capabilities: unknown capability bits 0x%x", where,
				     d->capabilities & ~(msb_capset)MSB_CAP_ALL);
	if (d->egress_modes & ~EGRESS_ALL)
		return msb_error_set(err, MSB_E_VALUE, "%s.egress_modes: unknown egress bits 0x%x",
				     where, d->egress_modes & ~EGRESS_ALL);
	if (d->os_families & ~OS_ALL)
		return msb_error_set(err, MSB_E_VALUE,
				     "%s.os_families: unknown os family bits 0x%x", where,
				     d->os_families & ~OS_ALL);
	if (d->isolation_scopes & ~SCOPE_ALL)
		return msb_error_set(err, MSB_E_VALUE,
				     "%s.isolation_scopes: unknown isolation scope bits 0x%x",
				     where, d->isolation_scopes & ~SCOPE_ALL);
	if (d->n_egress_method_tokens > 0 && !d->egress_method_tokens)
		return msb_error_set(err, MSB_E_VALUE,
				     "%s.egress_method_tokens: %zu tokens counted but none given",
				     where, d->n_egress_method_tokens);
	for (size_t i = 0; i < d->n_egress_method_tokens; i++) {
		const char *t = d->egress_method_tokens[i];
		if (!msb_http_method_valid(t))
			return msb_error_set(err, MSB_E_VALUE,
					     "%s.egress_method_tokens: `%s` is not an uppercase "
					     "HTTP method token",
					     where, t ? t : "(null)");
		for (size_t j = 0; j < i; j++)
			if (strcmp(d->egress_method_tokens[j], t) == 0)
				return msb_error_set(
					err, MSB_E_VALUE,
					"%s.egress_method_tokens: `%s` is listed twice", where, t);
	}
	return 0;
}

/* ---- JSON sets ---------------------------------------------------------------------- */

static const struct set_kind_info {
	const char *member; /* "a capability", for messages */
	uint32_t all;
	unsigned bits;
} set_kinds[] = {
	[MSB_SET_CAPABILITY] = {"capability", MSB_CAP_ALL, MSB_CAPABILITY_COUNT},
	[MSB_SET_EGRESS] = {"egress mode", EGRESS_ALL, 3},
	[MSB_SET_OS_FAMILY] = {"os family", OS_ALL, 2},
	[MSB_SET_SCOPE] = {"isolation scope", SCOPE_ALL, 2},
	[MSB_SET_IDENTITY] = {"identity", IDENTITY_ALL, 2},
};

static int set_member_parse(enum msb_set_kind kind, const char *s, uint32_t *bit, msb_error **err)
{
	int r;
	switch (kind) {
	case MSB_SET_CAPABILITY: {
		msb_capability v;
		r = msb_capability_parse(s, &v, err);
		*bit = (uint32_t)v;
		break;
	}
	case MSB_SET_EGRESS: {
		msb_egress v;
		r = msb_egress_parse(s, &v, err);
		*bit = (uint32_t)v;
		break;
	}
	case MSB_SET_OS_FAMILY: {
		msb_os_family v;
		r = msb_os_family_parse(s, &v, err);
		*bit = (uint32_t)v;
		break;
	}
	case MSB_SET_SCOPE: {
		msb_isolation_scope v;
		r = msb_isolation_scope_parse(s, &v, err);
		*bit = (uint32_t)v;
		break;
	}
	case MSB_SET_IDENTITY: {
		msb_identity v;
		r = msb_identity_parse(s, &v, err);
		*bit = (uint32_t)v;
		break;
	}
	default:
		return msb_error_set(err, MSB_E_VALUE, "unknown set kind %d", (int)kind);
	}
	return r;
}

static const char *set_member_name(enum msb_set_kind kind, uint32_t bit)
{
	switch (kind) {
	case MSB_SET_CAPABILITY:
		return msb_capability_name((msb_capability)bit);
	case MSB_SET_EGRESS:
		return msb_egress_name((msb_egress)bit);
	case MSB_SET_OS_FAMILY:
		return msb_os_family_name((msb_os_family)bit);
	case MSB_SET_SCOPE:
		return msb_isolation_scope_name((msb_isolation_scope)bit);
	case MSB_SET_IDENTITY:
		return msb_identity_name((msb_identity)bit);
	}
	return NULL;
}

int msb_json__get_set(json_t *obj, const char *key, const char *where, enum msb_set_kind kind,
		      uint32_t *out, bool *present, msb_error **err)
{
	json_t *v = json_object_get(obj, key);
	if (present)
		*present = v && !json_is_null(v);
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_array(v))
		return msb_error_set(err, MSB_E_TYPE,
				     "%s.%s must be a set (a JSON array of %s names), not %s",
				     where, key, set_kinds[kind].member,
				     json_is_string(v) ? "a string" : "this value");

	uint32_t set = 0;
	size_t i;
	json_t *e;
	json_array_foreach (v, i, e) {
		if (!json_is_string(e) || strlen(json_string_value(e)) != json_string_length(e))
			return msb_error_set(err, MSB_E_TYPE, "%s.%s[%zu] must be a %s name", where,
					     key, i, set_kinds[kind].member);
		uint32_t bit = 0;
		int r = set_member_parse(kind, json_string_value(e), &bit, err);
		if (r < 0) {
			msb_error_wrap(err, "%s.%s", where, key);
			return r;
		}
		if (set & bit)
			return msb_error_set(err, MSB_E_VALUE, "%s.%s: `%s` is listed twice", where,
					     key, json_string_value(e));
		set |= bit;
	}
	*out = set;
	return 0;
}

json_t *msb_json__set_array(enum msb_set_kind kind, uint32_t set)
{
	json_t *a = json_array();
	if (!a)
		return NULL;
	for (unsigned i = 0; i < set_kinds[kind].bits; i++) {
		uint32_t bit = 1u << i;
		if (!(set & bit))
			continue;
		const char *name = set_member_name(kind, bit);
		if (!name || json_array_append_new(a, json_string(name)) < 0) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

/* ---- JSON limits (4.12) -------------------------------------------------------------- */

static const char *const limits_keys[] = {"files_in", "files_out", NULL};

static int limits_shape_error(const char *where, const char *what, msb_error **err)
{
	return msb_error_set(err, MSB_E_TRANSFER_LIMITS_NOT_PERMITTED,
			     "%s.limits must be a SandboxLimits pair {files_in, files_out} of "
			     "TransferLimits (max_bytes_per_file, max_total_bytes, max_files), "
			     "not %s",
			     where, what);
}

static int limits_from_json(json_t *v, const char *where, msb_sandbox_limits *out, msb_error **err)
{
	if (!json_is_object(v))
		return limits_shape_error(where, json_is_array(v) ? "a list" : "this value", err);

	/* One direction's TransferLimits where the pair belongs: refused with
	 * the pair shape explained, never read as both directions. */
	const char *const *transfer_keys = msb_vocab__transfer_limits_keys();
	const char *key;
	json_t *value;
	json_object_foreach (v, key, value) {
		for (size_t i = 0; transfer_keys[i]; i++)
			if (strcmp(key, transfer_keys[i]) == 0)
				return limits_shape_error(where, "a single TransferLimits", err);
		bool known = false;
		for (size_t i = 0; limits_keys[i]; i++)
			if (strcmp(key, limits_keys[i]) == 0)
				known = true;
		if (!known) {
			_cleanup_free_ char *what = msb__asprintf("an object with key `%s`", key);
			if (!what)
				return msb__error_nomem(err);
			return limits_shape_error(where, what, err);
		}
	}

	msb_sandbox_limits l = MSB_DEFAULT_SANDBOX_LIMITS;
	for (size_t i = 0; limits_keys[i]; i++) {
		json_t *d = json_object_get(v, limits_keys[i]);
		if (!d)
			continue; /* absent: that direction's default */
		_cleanup_free_ char *w = msb__asprintf("%s.limits.%s", where, limits_keys[i]);
		if (!w)
			return msb__error_nomem(err);
		if (!json_is_object(d)) {
			_cleanup_free_ char *what = msb__asprintf(
				"a pair whose %s is %s", limits_keys[i],
				json_is_null(d) ? "null" : "not a TransferLimits object");
			if (!what)
				return msb__error_nomem(err);
			return limits_shape_error(where, what, err);
		}
		const char *field;
		json_t *fv;
		json_object_foreach (d, field, fv) {
			if (json_is_null(fv))
				return msb_error_set(
					err, MSB_E_TYPE,
					"%s.%s must be a non-negative integer, not null "
					"(leave it out to keep its default)",
					w, field);
		}
		int r = msb_vocab__transfer_limits_from_json(
			d, w, i == 0 ? &l.files_in : &l.files_out, err);
		if (r < 0)
			return r;
	}
	*out = l;
	return 0;
}

/* ---- JSON declarations ------------------------------------------------------------------ */

static const char *const declarations_keys[] = {
	"capabilities",	    "limits",
	"egress_modes",	    "os_families",
	"isolation_scopes", "egress_method_tokens",
	"observes_egress",  NULL,
};

/*
 * An absent key keeps its default; an explicit null is no value of any
 * declaration (a set, the limits pair, a flag) and is refused like any other
 * malformed value (4.11, 4.12), never read as the default.
 */
static int refuse_nulls(json_t *obj, const char *where, msb_error **err)
{
	const char *key;
	json_t *v;
	json_object_foreach (obj, key, v) {
		if (!json_is_null(v))
			continue;
		if (strcmp(key, "limits") == 0)
			return limits_shape_error(where,
						  "null (leave `limits` out for the default)", err);
		return msb_error_set(err, MSB_E_TYPE,
				     "%s.%s must be %s, not null (leave it out for the default)",
				     where, key,
				     strcmp(key, "observes_egress") == 0 ? "true or false"
				     : strcmp(key, "egress_method_tokens") == 0
					     ? "a set of method tokens or \"*\""
					     : "a set (a JSON array of names)");
	}
	return 0;
}

static int method_tokens_from_json(json_t *v, const char *where, msb_declarations *d,
				   const char ***tokens, msb_error **err)
{
	if (json_is_string(v)) {
		if (strcmp(json_string_value(v), "*") != 0)
			return msb_error_set(err, MSB_E_TYPE,
					     "%s.egress_method_tokens must be a set (a JSON array "
					     "of uppercase HTTP method tokens) or the string \"*\" "
					     "for every token, not the string `%s`",
					     where, json_string_value(v));
		d->egress_method_tokens_all = true;
		return 0;
	}
	if (!json_is_array(v))
		return msb_error_set(err, MSB_E_TYPE,
				     "%s.egress_method_tokens must be a set (a JSON array of "
				     "uppercase HTTP method tokens) or the string \"*\"",
				     where);
	size_t n = json_array_size(v);
	const char **t = calloc(n + 1, sizeof(char *));
	if (!t)
		return msb__error_nomem(err);
	for (size_t i = 0; i < n; i++) {
		json_t *e = json_array_get(v, i);
		if (!json_is_string(e) || strlen(json_string_value(e)) != json_string_length(e)) {
			free(t);
			return msb_error_set(err, MSB_E_TYPE,
					     "%s.egress_method_tokens[%zu] must be a string", where,
					     i);
		}
		t[i] = json_string_value(e);
	}
	d->egress_method_tokens = t;
	d->n_egress_method_tokens = n;
	*tokens = t;
	return 0;
}

int msb_declarations__from_object(json_t *obj, const char *where, msb_declarations **out,
				  msb_error **err)
{
	int r = msb__json_check_keys(obj, declarations_keys, where, err);
	if (r < 0)
		return r;

	if ((r = refuse_nulls(obj, where, err)) < 0)
		return r;

	msb_declarations d = MSB_DEFAULT_BACKEND_DECLARATIONS;
	_cleanup_free_ const char **tokens = NULL;
	if ((r = msb_json__get_set(obj, "capabilities", where, MSB_SET_CAPABILITY, &d.capabilities,
				   NULL, err)) < 0 ||
	    (r = msb_json__get_set(obj, "egress_modes", where, MSB_SET_EGRESS, &d.egress_modes,
				   NULL, err)) < 0 ||
	    (r = msb_json__get_set(obj, "os_families", where, MSB_SET_OS_FAMILY, &d.os_families,
				   NULL, err)) < 0 ||
	    (r = msb_json__get_set(obj, "isolation_scopes", where, MSB_SET_SCOPE,
				   &d.isolation_scopes, NULL, err)) < 0 ||
	    (r = msb__json_get_bool(obj, "observes_egress", where, &d.observes_egress, NULL, err)) <
		    0)
		return r;

	json_t *limits = json_object_get(obj, "limits");
	if (limits && (r = limits_from_json(limits, where, &d.limits, err)) < 0)
		return r;

	json_t *mt = json_object_get(obj, "egress_method_tokens");
	if (mt && (r = method_tokens_from_json(mt, where, &d, &tokens, err)) < 0)
		return r;

	/* Tokens: uppercase RFC 9110 tokens, each once (3.7, 23.5). */
	if ((r = msb_declarations__validate(&d, where, err)) < 0)
		return r;

	msb_declarations *c = msb_declarations__dup(&d);
	if (!c)
		return msb__error_nomem(err);
	*out = c;
	return 0;
}

int msb_declarations_from_json(const char *json, size_t len, msb_declarations **out,
			       msb_error **err)
{
	if (!out)
		return msb_error_set(err, MSB_E_VALUE, "declarations: no place for the result");
	json_t *obj = NULL;
	int r = msb__json_load_object(json, len, "declarations", &obj, err);
	if (r < 0)
		return r;
	r = msb_declarations__from_object(obj, "declarations", out, err);
	json_decref(obj);
	return r;
}

int msb_declarations_to_json(const msb_declarations *d, char **out, msb_error **err)
{
	if (!out)
		return msb_error_set(err, MSB_E_VALUE, "declarations: no place for the result");
	int r = msb_declarations__validate(d, "declarations", err);
	if (r < 0)
		return r;

	json_t *o = json_object();
	json_t *tokens;
	if (d->egress_method_tokens_all) {
		tokens = json_string("*");
	} else {
		tokens = json_array();
		for (size_t i = 0; tokens && i < d->n_egress_method_tokens; i++)
			if (json_array_append_new(tokens, json_string(d->egress_method_tokens[i])) <
			    0) {
				json_decref(tokens);
				tokens = NULL;
			}
	}
	json_t *limits = json_pack(
		"{s:o, s:o}", "files_in", msb_vocab__transfer_limits_to_json(&d->limits.files_in),
		"files_out", msb_vocab__transfer_limits_to_json(&d->limits.files_out));
	/* Each set_new consumes its value, even on failure. */
	bool failed = !o;
	failed |= json_object_set_new(o, "capabilities",
				      msb_json__set_array(MSB_SET_CAPABILITY, d->capabilities)) < 0;
	failed |= json_object_set_new(o, "egress_modes",
				      msb_json__set_array(MSB_SET_EGRESS, d->egress_modes)) < 0;
	failed |= json_object_set_new(o, "os_families",
				      msb_json__set_array(MSB_SET_OS_FAMILY, d->os_families)) < 0;
	failed |= json_object_set_new(o, "isolation_scopes",
				      msb_json__set_array(MSB_SET_SCOPE, d->isolation_scopes)) < 0;
	failed |= json_object_set_new(o, "egress_method_tokens", tokens) < 0;
	failed |= json_object_set_new(o, "limits", limits) < 0;
	failed |= json_object_set_new(o, "observes_egress", json_boolean(d->observes_egress)) < 0;
	if (failed) {
		json_decref(o);
		return msb__error_nomem(err);
	}
	char *s = msb__json_dump(o);
	json_decref(o);
	if (!s)
		return msb__error_nomem(err);
	*out = s;
	return 0;
}
