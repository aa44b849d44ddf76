/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Router options as JSON (checklist 1.4, 1.5, 1.29, 5.2, 5.3): strict in,
 * rung strings out. Persisted configuration stores spellings, never ranks,
 * and "process" is never a rung.
 */
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
