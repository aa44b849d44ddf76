/* SPDX-License-Identifier: Apache-2.0 */
/* The egress proxy's configuration for one sandbox, shared by every backend
 * that runs msb's proxy (ns through its shim, docker through a proxy
 * container): the backend's egress settings with the spec's allowlist as
 * "allow", refused here if the proxy would refuse it. */
#include <string.h>

#include <msb/spec.h>

#include "backends/types.h"
#include "egress/egress.h"
#include "util/json.h"

static json_t *allow_rules(const msb_spec *spec)
{
	json_t *allow = json_array();
	size_t n = msb_spec_egress_allow_count(spec);
	for (size_t i = 0; allow && i < n; i++) {
		const char *host;
		const char *const *methods;
		size_t nm;
		msb_spec_egress_entry(spec, i, &host, &methods, &nm);
		json_t *rule = json_pack("{s:s}", "host", host);
		json_t *ms = nm ? json_array() : json_null();
		for (size_t k = 0; ms && k < nm; k++)
			if (json_array_append_new(ms, json_string(methods[k])) < 0)
				ms = NULL;
		if (!rule || !ms || json_object_set_new(rule, "methods", ms) < 0 ||
		    json_array_append_new(allow, rule) < 0) {
			json_decref(rule);
			json_decref(allow);
			allow = NULL;
		}
	}
	return allow;
}

int msb_backends__egress_rules(const char *base, const char *base_what, const char *who,
			       const msb_spec *spec, char **out, msb_error **err)
{
	json_t *o = NULL;
	if (base) {
		int r = msb__json_load_object(base, strlen(base), base_what, &o, err);
		if (r < 0)
			return r;
	} else {
		o = json_object();
	}
	json_t *allow = allow_rules(spec);
	if (!o || !allow || json_object_set_new(o, "allow", allow) < 0) {
		json_decref(o);
		return msb__error_nomem(err);
	}
	char *text = msb__json_dump(o);
	json_decref(o);
	if (!text)
		return msb__error_nomem(err);
	/* The proxy parses it again; refuse here what it would refuse there. */
	msb_egress_config c;
	msb_egress__config_init(&c);
	int r = msb_egress__config_from_json(&c, text, strlen(text), true, err);
	msb_egress__config_clear(&c);
	if (r < 0) {
		free(text);
		return msb_error_wrap(err, "%s: the spec's egress rules", who);
	}
	*out = text;
	return 0;
}
