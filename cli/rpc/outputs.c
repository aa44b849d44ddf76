/* SPDX-License-Identifier: Apache-2.0 */
/*
 * collect_outputs for the JSON-RPC fronts (docs/serve.md "sandbox.collect_outputs",
 * docs/mcp.md "collect_outputs"): call-time outputs read with the spec's own
 * strict reader, and landed artifacts as JSON.
 */
#include <stdlib.h>
#include <string.h>

#include "rpc.h"

int rpc_call_time_outputs_of(json_t *v, const char *name, msb_spec **holder,
			     const msb_declared_output **outs, size_t *n, msb_error **err)
{
	*holder = NULL;
	*outs = NULL;
	*n = 0;
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_array(v))
		return rpc_bad_params(err, "`%s` must be a list of declared outputs", name);
	/* The spec's reader checks each entry exactly as it checks declared_outputs. */
	json_t *wrap = json_pack("{s:s, s:O}", "kind", "call-time", "declared_outputs", v);
	char *text = wrap ? json_dumps(wrap, JSON_COMPACT) : NULL;
	json_decref(wrap);
	if (!text)
		return msb_error_set(err, MSB_E_NOMEM, "out of memory");
	int r = msb_spec_from_json(text, strlen(text), holder, err);
	free(text);
	if (r < 0) {
		msb_error_wrap(err, "%s", name);
		return RPC_INVALID_PARAMS;
	}
	*n = msb_spec_declared_output_count(*holder);
	if (*n == 0)
		return 0;
	msb_declared_output *v2 = calloc(*n, sizeof(*v2));
	if (!v2) {
		msb_spec_unref(*holder);
		*holder = NULL;
		*n = 0;
		return msb_error_set(err, MSB_E_NOMEM, "out of memory");
	}
	for (size_t i = 0; i < *n; i++)
		v2[i] = *msb_spec_declared_output(*holder, i);
	*outs = v2;
	return 0;
}

json_t *rpc_landed_json(const msb_landed_artifact *v, size_t n)
{
	json_t *a = json_array();
	for (size_t i = 0; a && i < n; i++) {
		json_t *o =
			json_pack("{s:o, s:o, s:o, s:o, s:I, s:s}", "name", rpc_text(v[i].name),
				  "display", rpc_text(v[i].display), "handle",
				  rpc_text(v[i].handle), "media_type", rpc_text(v[i].media_type),
				  "size_bytes", (json_int_t)v[i].size_bytes, "sha256", v[i].sha256);
		json_array_append_new(a, o);
	}
	return a;
}
