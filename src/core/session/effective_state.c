/* SPDX-License-Identifier: Apache-2.0 */
/*
 * EffectiveState (checklist 17.19, 17.20; C form 24.16): one served acquire
 * as a JSON value - the backend that answered, its isolation rung, the
 * resolved isolation scope, the egress mode with its allowlist, both sides
 * of the capability match, the sealed host-tool registry's names and the
 * call id. Posture, never payload: no key, no spec labels, no model text.
 */
#include "core/lifecycle/lifecycle_int.h"
#include "util/json.h"

#include <msb/session.h>

static json_t *allowlist(const msb_spec *spec)
{
	json_t *a = json_array();
	for (size_t i = 0; a && i < msb_spec_egress_allow_count(spec); i++) {
		const char *host = NULL;
		const char *const *methods = NULL;
		size_t n = 0;
		msb_spec_egress_entry(spec, i, &host, &methods, &n);
		json_t *e;
		if (n == 0) {
			e = json_string(host);
		} else {
			json_t *m = json_array();
			for (size_t j = 0; m && j < n; j++)
				json_array_append_new(m, json_string(methods[j]));
			e = json_pack("{s:s, s:o*}", "host", host, "methods", m);
		}
		if (!e || json_array_append_new(a, e) < 0) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

int msb_effective_state_json(const msb_router *r, const msb_spec *spec, const char *backend,
			     const char *const *host_tools, size_t n_host_tools, const char *call,
			     char **out, msb_error **err)
{
	if (!r || !spec || !backend || !out || (n_host_tools > 0 && !host_tools))
		return msb_error_set(err, MSB_E_VALUE, "effective state: missing argument");
	size_t i = msb_router__backend_index(r, backend);
	if (i == SIZE_MAX)
		return msb_error_set(err, MSB_E_VALUE,
				     "effective state: no backend named `%s` is registered",
				     backend);
	/* The resolved scope is the stricter of the host's floor and the
	 * spec's ask, as the checks resolved it. */
	size_t routed = SIZE_MAX;
	msb_isolation_scope scope = MSB_SCOPE_CONVERSATION;
	int rc = msb_router__route(r, spec, &routed, &scope, err);
	if (rc < 0)
		return rc;
	const struct msb_router_entry *e = &r->entries[i];

	json_t *tools = json_array();
	for (size_t t = 0; tools && t < n_host_tools; t++)
		if (json_array_append_new(tools, json_string(host_tools[t])) < 0) {
			json_decref(tools);
			tools = NULL;
		}
	json_t *o = json_pack(
		"{s:s, s:s, s:s, s:s, s:o*, s:o*, s:o*, s:o*, s:s?}", "backend", e->name,
		"isolation", e->isolation, "isolation_scope", msb_isolation_scope_name(scope),
		"egress", msb_egress_name(msb_spec_egress(spec)), "egress_allow", allowlist(spec),
		"required_capabilities",
		msb_json__set_array(MSB_SET_CAPABILITY, msb_spec_required_capabilities(spec)),
		"declared_capabilities",
		msb_json__set_array(MSB_SET_CAPABILITY, e->decl->capabilities), "host_tools", tools,
		"call", call);
	if (!o || json_object_size(o) != 9) {
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
