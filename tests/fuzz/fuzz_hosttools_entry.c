/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz entry for the host-tool door (src/core/hosttools/hosttools_run.c) and the
 * schema validator (hosttools_schema.c), both fed guest- or host-supplied
 * JSON. Input: a parameter schema, a NUL byte, then a request as a guest
 * would send it. The schema registers or is refused; the request goes
 * through msb_host_tool_run_call_request. Properties (abort on failure):
 * the door answers exactly one of a value and a refusal, a refusal starts
 * with "Error: ", and a value is valid JSON.
 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include <msb/msb.h>

#include "fuzz_hosttools.h"

static int echo_fn(void *ud, const char *args, const char *user, char **result, msb_error **err)
{
	*result = strdup(args);
	return *result ? 0 : -1;
}

void msb_fuzz_hosttools_one(const uint8_t *data, size_t size)
{
	const uint8_t *nul = memchr(data, 0, size);
	char *schema = NULL;
	const uint8_t *req = data;
	size_t req_len = size;
	if (nul) {
		schema = strndup((const char *)data, (size_t)(nul - data));
		req = nul + 1;
		req_len = size - (size_t)(nul - data) - 1;
	}
	msb_host_tools_suppress_notice();
	msb_host_tool_registry_options o = MSB_HOST_TOOL_REGISTRY_OPTIONS_INIT;
	o.response_limits.max_bytes_per_file = 4096;
	msb_host_tool_registry *reg = NULL;
	if (msb_host_tool_registry_new(&o, &reg, NULL) < 0)
		abort();
	static const msb_host_tool_decl d = {MSB_HOST_TOOL_DECL_VERSION,
					     MSB_LEG_NONE,
					     MSB_INTEGRITY_UNTRUSTED,
					     MSB_LEG_NONE,
					     NULL,
					     MSB_LEG_NONE,
					     MSB_IDENTITY_APP};
	msb_host_tool t = MSB_HOST_TOOL_INIT;
	t.name = "f";
	t.fn = echo_fn;
	t.decl = &d;
	t.parameters = schema;
	if (msb_host_tool_registry_register(reg, &t, NULL) < 0) {
		t.parameters = NULL;
		if (msb_host_tool_registry_register(reg, &t, NULL) < 0)
			abort();
	}
	msb_host_tool_run *run = NULL;
	if (msb_host_tool_run_new(reg, NULL, NULL, &run, NULL) < 0)
		abort();
	msb_host_tool_result res = {NULL, NULL};
	if (msb_host_tool_run_call_request(run, (const char *)req, req_len, 11, &res, NULL) < 0)
		abort();
	if ((res.value_json == NULL) == (res.refusal == NULL))
		abort();
	if (res.refusal && strncmp(res.refusal, "Error: ", 7) != 0)
		abort();
	if (res.value_json) {
		json_t *j = json_loads(res.value_json, JSON_DECODE_ANY, NULL);
		if (!j)
			abort();
		json_decref(j);
	}
	msb_host_tool_result_clear(&res);
	msb_host_tool_run_free(run);
	msb_host_tool_registry_unref(reg);
	free(schema);
}
