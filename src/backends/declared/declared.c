/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The declared-only backend (type `declared`): it answers every policy
 * question from its declarations and refuses to acquire. For the wiring test
 * of a third-party backend whose declarations are known (msb check).
 */
#include <msb/backend.h>

#include "backends/types.h"
#include "util/json.h"

/* ---- the backend ------------------------------------------------------------------ */

/* impl: the backend's name, for messages. */
static int declared_acquire(void *impl, const msb_key *key, const msb_spec *spec, msb_sandbox **out,
			    msb_error **err)
{
	return msb_error_set(err, MSB_E_NOT_IMPLEMENTED,
			     "backend `%s` only declares its policy (type `declared`); it cannot "
			     "acquire a sandbox",
			     (const char *)impl);
}

static int declared_dispose(void *impl, const msb_key *key, const char *kind,
			    const char *instance_id, msb_disposal_failure **failure,
			    msb_error **err)
{
	/* Nothing was ever made: nothing to report. */
	*failure = NULL;
	return 0;
}

static int declared_dispose_scope(void *impl, const char *scope, const char *thread_id,
				  msb_scope_purge *out, msb_error **err)
{
	out->disposed = 0;
	out->undisposed = 0;
	return 0;
}

static void declared_set_egress_reporter(void *impl, const msb_egress_reporter *reporter)
{
	/* It runs nothing, so it observes nothing. */
}

static void declared_free(void *impl)
{
	free(impl);
}

static const msb_backend_ops declared_ops = {
	.version = MSB_BACKEND_OPS_VERSION,
	.acquire = declared_acquire,
	.dispose = declared_dispose,
	.dispose_scope = declared_dispose_scope,
	.set_egress_reporter = declared_set_egress_reporter,
	.free = declared_free,
};

int msb_declared_backend_new(const msb_backend_info *info, msb_backend **out, msb_error **err)
{
	if (!info)
		return msb_error_set(err, MSB_E_VALUE, "backend: no info given");
	char *impl = NULL;
	if (info->name && !(impl = strdup(info->name)))
		return msb__error_nomem(err);
	return msb_backend_new(&declared_ops, info, impl, out, err);
}

/* ---- the type ------------------------------------------------------------------------ */

static const char *const declared_keys[] = {"name", "isolation", "declarations", NULL};

static int declared_from_json(const msb_backend_json *in, msb_backend **out, msb_error **err)
{
	_cleanup_json_ json_t *obj = NULL;
	int r = msb__json_load_object(in->json, in->len, in->where, &obj, err);
	if (r < 0)
		return r;
	msb_backend_info info = {
		.version = MSB_BACKEND_INFO_VERSION,
		.declarations = in->declarations,
	};
	if ((r = msb__json_get_string(obj, "name", in->where, &info.name, NULL, err)) < 0 ||
	    (r = msb__json_get_string(obj, "isolation", in->where, &info.isolation, NULL, err)) < 0)
		return r;
	return msb_declared_backend_new(&info, out, err);
}

static int declared_doctor(msb_backend_probe *out, msb_error **err)
{
	return msb_backends__verdict(out, true,
				     "declarations only, on any host: answers policy, acquires "
				     "nothing",
				     err);
}

const msb_backend_type msb_declared__type = {
	.version = MSB_BACKEND_TYPE_VERSION,
	.name = "declared",
	.summary = "a backend that only declares: policy answers for a wiring test, no sandboxes",
	.keys = declared_keys,
	.from_json = declared_from_json,
	.doctor = declared_doctor,
};
