/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Router options as JSON (checklist 1.4, 1.5, 1.29, 5.2, 5.3): strict in,
 * rung strings out. Persisted configuration stores spellings, never ranks,
 * and "process" is never a rung.
 *
 * Backends and whole routers from JSON (msb/msb.h, 4.10-4.12, 5.16): the
 * backend's "type" is looked up in the table of built-in types
 * (msb_backend_types(), src/backends/types.c), its keys are checked against
 * the type's list, and what it declares is judged here - once, for every
 * type that carries declarations - before the type's from_json makes it.
 */
#include <msb/msb.h>

#include "core/policy/router_int.h"
#include "util/json.h"

static const char *const option_keys[] = {
	"min_isolation",       "selected",	    "selection",
	"denied_capabilities", "denied_identities", "min_isolation_scope",
	"min_cleanup",	       "reclaim",	    NULL,
};
static const char *const reclaim_keys[] = {"timeout", "failed_reclaim_policy", NULL};

/* Read obj[key] as a string and hand it to `parse`; absent leaves *out. */
#define PARSE_ENUM(obj, key, where, parse, out, err)                                               \
	({                                                                                         \
		const char *_s = NULL;                                                             \
		bool _present = false;                                                             \
		int _r = msb__json_get_string(obj, key, where, &_s, &_present, err);               \
		if (_r == 0 && _present && (_r = parse(_s, out, err)) < 0)                         \
			msb_error_wrap(err, "%s.%s", where, key);                                  \
		_r;                                                                                \
	})

static int check_keys(json_t *obj, const char *where, const char *extra_key, msb_error **err)
{
	const char *key;
	json_t *value;
	json_object_foreach (obj, key, value) {
		if (extra_key && strcmp(key, extra_key) == 0)
			continue;
		bool known = false;
		for (size_t i = 0; option_keys[i] && !known; i++)
			known = strcmp(option_keys[i], key) == 0;
		if (!known)
			return msb_error_set(err, MSB_E_VALUE, "%s: unknown key `%s`", where, key);
	}
	return 0;
}

static int reclaim_from_object(json_t *obj, const char *where, msb_reclaim_config *out,
			       msb_error **err)
{
	json_t *rc = NULL;
	bool present = false;
	int r = msb__json_get_object(obj, "reclaim", where, &rc, &present, err);
	if (r < 0 || !present)
		return r;
	_cleanup_free_ char *w = msb__asprintf("%s.reclaim", where);
	if (!w)
		return msb__error_nomem(err);
	if ((r = msb__json_check_keys(rc, reclaim_keys, w, err)) < 0 ||
	    (r = msb__json_get_double(rc, "timeout", w, &out->timeout, NULL, err)) < 0 ||
	    (r = PARSE_ENUM(rc, "failed_reclaim_policy", w, msb_failed_reclaim_policy_parse,
			    &out->failed_reclaim_policy, err)) < 0)
		return r;
	return 0;
}

int msb_router__options_from_object(json_t *obj, const char *where, const char *extra_key,
				    msb_router_options *out, char **selected_out, msb_error **err)
{
	int r = check_keys(obj, where, extra_key, err);
	if (r < 0)
		return r;

	msb_router_options o = MSB_ROUTER_OPTIONS_INIT;
	const char *selected = NULL;
	if ((r = PARSE_ENUM(obj, "min_isolation", where, msb_isolation_parse, &o.min_isolation,
			    err)) < 0 ||
	    (r = msb__json_get_string(obj, "selected", where, &selected, NULL, err)) < 0 ||
	    (r = PARSE_ENUM(obj, "selection", where, msb_selection_parse, &o.selection, err)) < 0 ||
	    (r = msb_json__get_set(obj, "denied_capabilities", where, MSB_SET_CAPABILITY,
				   &o.denied_capabilities, NULL, err)) < 0 ||
	    (r = msb_json__get_set(obj, "denied_identities", where, MSB_SET_IDENTITY,
				   &o.denied_identities, NULL, err)) < 0 ||
	    (r = PARSE_ENUM(obj, "min_isolation_scope", where, msb_isolation_scope_parse,
			    &o.min_isolation_scope, err)) < 0 ||
	    (r = PARSE_ENUM(obj, "min_cleanup", where, msb_cleanup_parse, &o.min_cleanup, err)) <
		    0 ||
	    (r = reclaim_from_object(obj, where, &o.reclaim, err)) < 0)
		return r;

	o.selected = selected;
	if ((r = msb_router__validate_options(&o, err)) < 0) {
		msb_error_wrap(err, "%s", where);
		return r;
	}
	if (selected && !selected_out)
		return msb_error_set(err, MSB_E_VALUE,
				     "%s.selected: given, but there is no place to return it",
				     where);

	char *sel = NULL;
	if (selected && !(sel = strdup(selected)))
		return msb__error_nomem(err);
	o.selected = sel;
	*out = o;
	if (selected_out)
		*selected_out = sel;
	return 0;
}

int msb_router_options_from_json(const char *json, size_t len, msb_router_options *out,
				 char **selected_out, msb_error **err)
{
	if (!out)
		return msb_error_set(err, MSB_E_VALUE, "router: no place for the result");
	json_t *obj = NULL;
	int r = msb__json_load_object(json, len, "router", &obj, err);
	if (r < 0)
		return r;
	r = msb_router__options_from_object(obj, "router", NULL, out, selected_out, err);
	json_decref(obj);
	return r;
}

int msb_router_options_to_json(const msb_router_options *opts, char **out, msb_error **err)
{
	if (!opts || !out)
		return msb_error_set(err, MSB_E_VALUE, "router options: missing argument");
	int r = msb_router__validate_options(opts, err);
	if (r < 0)
		return r;

	json_t *reclaim =
		json_pack("{s:f, s:s}", "timeout", opts->reclaim.timeout, "failed_reclaim_policy",
			  msb_failed_reclaim_policy_name(opts->reclaim.failed_reclaim_policy));
	json_t *o = json_pack(
		"{s:s, s:s, s:o, s:o, s:s, s:s, s:o}", "min_isolation",
		msb_isolation_name(opts->min_isolation), "selection",
		msb_selection_name(opts->selection), "denied_capabilities",
		msb_json__set_array(MSB_SET_CAPABILITY, opts->denied_capabilities),
		"denied_identities", msb_json__set_array(MSB_SET_IDENTITY, opts->denied_identities),
		"min_isolation_scope", msb_isolation_scope_name(opts->min_isolation_scope),
		"min_cleanup", msb_cleanup_name(opts->min_cleanup), "reclaim", reclaim);
	if (o && opts->selected &&
	    json_object_set_new(o, "selected", json_string(opts->selected))) {
		json_decref(o);
		o = NULL;
	}
	char *s = o ? msb__json_dump(o) : NULL;
	json_decref(o);
	if (!s)
		return msb__error_nomem(err);
	*out = s;
	return 0;
}

/* ---- backends from JSON, through the backend-type table ------------------------------- */

/* The four declarations a backend used to carry as bare attributes. */
static const char *const legacy_keys[] = {"capabilities", "limits", "egress_modes", "os_families",
					  NULL};

static bool listed(const char *const *list, const char *key)
{
	for (size_t i = 0; list && list[i]; i++)
		if (strcmp(list[i], key) == 0)
			return true;
	return false;
}

/* "`declared`, `fake`, `ns`": the table's names, for a refusal. */
static char *type_names(void)
{
	size_t n = 0;
	const msb_backend_type *const *t = msb_backend_types(&n);
	msb_buf b = MSB_BUF_INIT;
	for (size_t i = 0; i < n; i++)
		msb__buf_printf(&b, "%s`%s`", i ? ", " : "", t[i]->name);
	return msb__buf_steal_str(&b);
}

static int type_refusal(const char *where, const char *type, msb_error **err)
{
	_cleanup_free_ char *names = type_names();
	if (!names)
		return msb__error_nomem(err);
	if (!type)
		return msb_error_set(err, MSB_E_VALUE, "%s.type is required: one of %s", where,
				     names);
	return msb_error_set(err, MSB_E_VALUE,
			     "%s.type: `%s` is not a backend type: expected one of %s", where, type,
			     names);
}

static int check_backend_keys(json_t *obj, const msb_backend_type *t, bool takes_decl,
			      const char *where, msb_error **err)
{
	const char *key;
	json_t *value;
	json_object_foreach (obj, key, value) {
		if (strcmp(key, "type") == 0 || listed(t->keys, key) ||
		    (takes_decl && listed(legacy_keys, key)))
			continue; /* a legacy key is refused on its own terms below */
		return msb_error_set(err, MSB_E_VALUE, "%s: unknown key `%s`", where, key);
	}
	return 0;
}

/* 4.10: a stray attribute would be silently replaced by that field's
 * default - on egress_modes one that enforces nothing, on limits one wider
 * than the backend meant - so it is refused with the attribute named. */
static int legacy_refusal(json_t *obj, const char *where, msb_error **err)
{
	json_t *name_v = json_object_get(obj, "name");
	const char *name = json_is_string(name_v) ? json_string_value(name_v) : NULL;
	for (size_t i = 0; legacy_keys[i]; i++) {
		if (!json_object_get(obj, legacy_keys[i]))
			continue;
		if (name)
			return msb_error_set(err, MSB_E_VALUE,
					     "sandbox backend '%s' declares `%s` outside its "
					     "declarations: move it into `declarations` (one "
					     "BackendDeclarations value)",
					     name, legacy_keys[i]);
		return msb_error_set(err, MSB_E_VALUE,
				     "%s declares `%s` outside its declarations: move it into "
				     "`declarations` (one BackendDeclarations value)",
				     where, legacy_keys[i]);
	}
	return 0;
}

/*
 * One backend object. When `defer` (inside a router), a refusal of what the
 * backend declares does not fail the load: the backend is made with its
 * type's default declarations and carries the refusal, which the router
 * raises if it resolves that backend (5.16, 23.10).
 */
static int backend_from_object(json_t *obj, const char *where, bool defer, msb_backend **out,
			       msb_error **err)
{
	const char *type = NULL;
	int r = msb__json_get_string(obj, "type", where, &type, NULL, err);
	if (r < 0)
		return r;
	const msb_backend_type *t = msb_backend_type_find(type);
	if (!t)
		return type_refusal(where, type, err);
	const bool takes_decl = listed(t->keys, "declarations");
	if ((r = check_backend_keys(obj, t, takes_decl, where, err)) < 0)
		return r;

	_cleanup_error_ msb_error *deferred = NULL;
	_cleanup_free_ msb_declarations *decl = NULL;
	if (takes_decl) {
		json_t *decl_obj = NULL;
		if ((r = msb__json_get_object(obj, "declarations", where, &decl_obj, NULL, err)) <
		    0)
			return r;
		r = legacy_refusal(obj, where, &deferred);
		/* Absent keeps the type's default; null is no BackendDeclarations. */
		if (r == 0 && json_is_null(json_object_get(obj, "declarations")))
			r = msb_error_set(&deferred, MSB_E_TYPE,
					  "%s.declarations must be a BackendDeclarations object, "
					  "not null (leave it out for the type's default)",
					  where);
		if (r == 0 && decl_obj) {
			_cleanup_free_ char *w = msb__asprintf("%s.declarations", where);
			if (!w)
				return msb__error_nomem(err);
			r = msb_declarations__from_object(decl_obj, w, &decl, &deferred);
		}
		if (r == MSB_E_NOMEM || (r < 0 && !defer))
			return msb__error_propagate(err, TAKE_PTR(deferred));
	}

	_cleanup_free_ char *text = json_dumps(obj, JSON_COMPACT);
	if (!text)
		return msb__error_nomem(err);
	const msb_backend_json in = {
		.version = MSB_BACKEND_JSON_VERSION,
		.json = text,
		.len = strlen(text),
		.where = where,
		.declarations = decl,
	};
	msb_backend *b = NULL;
	if ((r = t->from_json(&in, &b, err)) < 0)
		return r;
	if (deferred &&
	    (r = msb_backend__set_deferred_refusal(b, msb_error_code(deferred),
						   msb_error_message(deferred), err)) < 0) {
		msb_backend_unref(b);
		return r;
	}
	*out = b;
	return 0;
}

int msb_backend_from_json(const char *json, size_t len, msb_backend **out, msb_error **err)
{
	if (!out)
		return msb_error_set(err, MSB_E_VALUE, "backend: no place for the result");
	_cleanup_json_ json_t *obj = NULL;
	int r = msb__json_load_object(json, len, "backend", &obj, err);
	if (r < 0)
		return r;
	return backend_from_object(obj, "backend", false, out, err);
}

static int router_from_object(json_t *obj, const msb_router_options *opts_extra, msb_router **out,
			      msb_error **err)
{
	msb_router_options o;
	_cleanup_free_ char *selected = NULL;
	int r = msb_router__options_from_object(obj, "router", "backends", &o, &selected, err);
	if (r < 0)
		return r;
	if (opts_extra) {
		if (opts_extra->version != MSB_ROUTER_OPTIONS_VERSION)
			return msb_error_set(err, MSB_E_VALUE,
					     "router options: unsupported version %u",
					     opts_extra->version);
		o.observer = opts_extra->observer;
		o.log = opts_extra->log;
		o.log_userdata = opts_extra->log_userdata;
	}

	json_t *arr = json_object_get(obj, "backends");
	size_t n = 0;
	if (arr && !json_is_null(arr)) {
		if (!json_is_array(arr))
			return msb_error_set(err, MSB_E_TYPE,
					     "router.backends must be a list of backend objects");
		n = json_array_size(arr);
	}
	msb_backend **backends = n ? calloc(n, sizeof(*backends)) : NULL;
	if (n && !backends)
		return msb__error_nomem(err);

	for (size_t made = 0; r == 0 && made < n; made++) {
		json_t *bo = json_array_get(arr, made);
		_cleanup_free_ char *where = msb__asprintf("router.backends[%zu]", made);
		if (!where)
			r = msb__error_nomem(err);
		else if (!json_is_object(bo))
			r = msb_error_set(err, MSB_E_TYPE, "%s must be a backend object", where);
		else
			r = backend_from_object(bo, where, true, &backends[made], err);
	}
	if (r == 0)
		r = msb_router_new(backends, n, &o, out, err);
	for (size_t i = 0; i < n; i++)
		msb_backend_unref(backends[i]);
	free(backends);
	return r;
}

int msb_router_from_json(const char *json, size_t len, const msb_router_options *opts_extra,
			 msb_router **out, msb_error **err)
{
	if (!out)
		return msb_error_set(err, MSB_E_VALUE, "router: no place for the result");
	_cleanup_json_ json_t *obj = NULL;
	int r = msb__json_load_object(json, len, "router", &obj, err);
	if (r < 0)
		return r;
	return router_from_object(obj, opts_extra, out, err);
}
