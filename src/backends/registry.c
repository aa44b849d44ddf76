/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Backends and routers from JSON (msb/msb.h): the shipped backend types by
 * name, strict keys, and the legacy-declaration refusal (checklist 4.10).
 *
 * Backend JSON: {"type": "declared"|"fake", "name": ..., "isolation": ...,
 * "declarations": {...}}, or {"type": "ns", "name": ..., "state_dir": ...,
 * "image": ..., "memory_bytes", "pids_max", "cpu_millis", "writable_bytes",
 * "start_timeout", "egress": {...}} (msb/ns.h, docs/egress.md; its isolation
 * and declarations are its own).
 * A router's JSON is its options plus "backends".
 *
 * When a whole router is loaded, the refusals that concern what a backend
 * declares - a legacy top-level key (4.10), declarations that are not usable
 * (4.11, 4.12, unknown members) - are judged when the router resolves the
 * backend, as the seed does: FIXED refuses only the backend it resolves,
 * PER_SPEC every registered one (5.16, 23.10). Loaded on its own, a backend
 * is refused at once.
 */
#include <msb/msb.h>
#include <msb/ns.h>
#include <msb/testing.h>

#include "core/core.h"
#include "util/json.h"

static const char *const backend_keys[] = {"type", "name", "isolation", "declarations", NULL};

/* The four declarations a backend used to carry as bare attributes. */
static const char *const legacy_keys[] = {"capabilities", "limits", "egress_modes", "os_families",
					  NULL};

static bool is_legacy_key(const char *key)
{
	for (size_t i = 0; legacy_keys[i]; i++)
		if (strcmp(legacy_keys[i], key) == 0)
			return true;
	return false;
}

static int check_backend_keys(json_t *obj, const char *where, msb_error **err)
{
	const char *key;
	json_t *value;
	json_object_foreach (obj, key, value) {
		if (is_legacy_key(key))
			continue; /* refused on its own terms below */
		bool known = false;
		for (size_t i = 0; backend_keys[i] && !known; i++)
			known = strcmp(backend_keys[i], key) == 0;
		if (!known)
			return msb_error_set(err, MSB_E_VALUE, "%s: unknown key `%s`", where, key);
	}
	return 0;
}

/* 4.10: a stray attribute would be silently replaced by that field's
 * default - on egress_modes one that enforces nothing, on limits one wider
 * than the backend meant - so it is refused with the attribute named. */
static int legacy_refusal(json_t *obj, const char *where, const char *name, msb_error **err)
{
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

static const char *const ns_keys[] = {"type",	       "name",	   "state_dir",	 "image",
				      "memory_bytes",  "pids_max", "cpu_millis", "writable_bytes",
				      "start_timeout", "egress",   NULL};

/* The `ns` backend: what msb_ns_backend_new takes, by the same names. */
static int ns_from_object(json_t *obj, const char *where, msb_backend **out, msb_error **err)
{
	msb_ns_options o = MSB_NS_OPTIONS_INIT;
	int r;
	if ((r = msb__json_check_keys(obj, ns_keys, where, err)) < 0 ||
	    (r = msb__json_get_string(obj, "name", where, &o.name, NULL, err)) < 0 ||
	    (r = msb__json_get_string(obj, "state_dir", where, &o.state_root, NULL, err)) < 0 ||
	    (r = msb__json_get_string(obj, "image", where, &o.image, NULL, err)) < 0 ||
	    (r = msb__json_get_u64(obj, "memory_bytes", where, &o.memory_bytes, NULL, err)) < 0 ||
	    (r = msb__json_get_u64(obj, "pids_max", where, &o.pids_max, NULL, err)) < 0 ||
	    (r = msb__json_get_u64(obj, "cpu_millis", where, &o.cpu_millis, NULL, err)) < 0 ||
	    (r = msb__json_get_u64(obj, "writable_bytes", where, &o.writable_bytes, NULL, err)) <
		    0 ||
	    (r = msb__json_get_double(obj, "start_timeout", where, &o.start_timeout, NULL, err)) <
		    0)
		return r;
	/* "egress": the proxy's settings (docs/egress.md), checked strictly by
	 * the backend itself. */
	json_t *egress = json_object_get(obj, "egress");
	if (egress && !json_is_object(egress))
		return msb_error_set(err, MSB_E_TYPE, "%s: `egress` must be an object", where);
	_cleanup_free_ char *egress_text = egress ? json_dumps(egress, JSON_COMPACT) : NULL;
	if (egress && !egress_text)
		return msb__error_nomem(err);
	o.egress_config = egress_text;
	return msb_ns_backend_new(&o, out, err);
}

static int backend_from_object(json_t *obj, const char *where, bool defer, msb_backend **out,
			       msb_error **err)
{
	json_t *type_v = json_object_get(obj, "type");
	if (json_is_string(type_v) && strcmp(json_string_value(type_v), "ns") == 0)
		return ns_from_object(obj, where, out, err);
	int r = check_backend_keys(obj, where, err);
	if (r < 0)
		return r;

	const char *type = NULL, *name = NULL, *isolation = NULL;
	bool has_type = false;
	json_t *decl_obj = NULL;
	if ((r = msb__json_get_string(obj, "type", where, &type, &has_type, err)) < 0 ||
	    (r = msb__json_get_string(obj, "name", where, &name, NULL, err)) < 0 ||
	    (r = msb__json_get_string(obj, "isolation", where, &isolation, NULL, err)) < 0 ||
	    (r = msb__json_get_object(obj, "declarations", where, &decl_obj, NULL, err)) < 0)
		return r;
	if (!has_type)
		return msb_error_set(err, MSB_E_VALUE,
				     "%s.type is required: one of `declared`, `fake`, `ns`", where);
	const bool fake = strcmp(type, "fake") == 0;
	if (!fake && strcmp(type, "declared") != 0)
		return msb_error_set(err, MSB_E_VALUE,
				     "%s.type: `%s` is not a backend type: expected one of "
				     "`declared`, `fake`, `ns`",
				     where, type);

	/* What the backend declares, refused now or at resolution. */
	_cleanup_error_ msb_error *deferred = NULL;
	_cleanup_free_ msb_declarations *decl = NULL;
	r = legacy_refusal(obj, where, name, &deferred);
	if (r == 0 && decl_obj) {
		_cleanup_free_ char *w = msb__asprintf("%s.declarations", where);
		if (!w)
			return msb__error_nomem(err);
		r = msb_declarations__from_object(decl_obj, w, &decl, &deferred);
	}
	if (r == MSB_E_NOMEM || (r < 0 && !defer))
		return msb__error_propagate(err, TAKE_PTR(deferred));

	msb_backend *b = NULL;
	if (fake) {
		msb_fake_backend_options fo = MSB_FAKE_BACKEND_OPTIONS_INIT;
		fo.name = name;
		fo.isolation = isolation;
		fo.declarations = decl;
		r = msb_fake_backend_new(&fo, &b, NULL, err);
	} else {
		msb_backend_info info = {
			.version = MSB_BACKEND_INFO_VERSION,
			.name = name,
			.isolation = isolation,
			.declarations = decl,
		};
		r = msb_declared_backend_new(&info, &b, err);
	}
	if (r < 0)
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
	json_t *obj = NULL;
	int r = msb__json_load_object(json, len, "backend", &obj, err);
	if (r < 0)
		return r;
	r = backend_from_object(obj, "backend", false, out, err);
	json_decref(obj);
	return r;
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

	size_t made = 0;
	for (; r == 0 && made < n; made++) {
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
	json_t *obj = NULL;
	int r = msb__json_load_object(json, len, "router", &obj, err);
	if (r < 0)
		return r;
	r = router_from_object(obj, opts_extra, out, err);
	json_decref(obj);
	return r;
}
