/* SPDX-License-Identifier: Apache-2.0 */
/* `msb serve`: msb.version and router.* (docs/serve.md), one library call each. */
#include <stdlib.h>
#include <string.h>

#include "methods.h"

int serve_version(rpc_call *c, void *frame, msb_error **err)
{
	f_version *a = frame;
	a->version = msb_version();
	a->protocol = "msb-serve/1";
	return 0;
}

int rpc_router_pool_default(json_t *router, unsigned n)
{
	json_t *arr = json_object_get(router, "backends");
	json_t *bo;
	size_t i;
	if (!n || !json_is_array(arr))
		return 0;
	json_array_foreach (arr, i, bo) {
		const char *type = json_string_value(json_object_get(bo, "type"));
		if (!json_is_object(bo) || !type ||
		    (strcmp(type, "ns") != 0 && strcmp(type, "oci") != 0) ||
		    json_object_get(bo, "pool_size"))
			continue;
		if (json_object_set_new(bo, "pool_size", json_integer((json_int_t)n)) < 0)
			return MSB_E_NOMEM;
	}
	return 0;
}

/* The one place this front builds routers (and so backends): from the
 * router JSON of docs/policy.md, with the server's observer and log, and
 * the front end's warm pool in each `ns` or `oci` backend that names none. */
static int router_from_config(rpc_call *c, const rpc_doc *config, msb_router **out, msb_error **err)
{
	msb_router_options extra = MSB_ROUTER_OPTIONS_INIT;
	extra.observer = rpc_server_observer(c->srv);
	extra.log = rpc_log;
	const unsigned pool = rpc_server_pool_default(c->srv);
	json_t *o =
		pool ? json_loadb(config->text, config->len, JSON_REJECT_DUPLICATES, NULL) : NULL;
	if (!json_is_object(o)) {
		/* Not an object: the library refuses it in its own words. */
		json_decref(o);
		return msb_router_from_json(config->text, config->len, &extra, out, err);
	}
	char *text = NULL;
	int r = rpc_router_pool_default(o, pool);
	if (r == 0 && !(text = json_dumps(o, JSON_COMPACT)))
		r = MSB_E_NOMEM;
	json_decref(o);
	if (r < 0)
		return msb_error_set(err, MSB_E_NOMEM, "out of memory");
	r = msb_router_from_json(text, strlen(text), &extra, out, err);
	free(text);
	return r;
}

/* Which backend selection picks for `spec` and why every other was passed
 * over (msb_router_explain), as JSON text; NULL without a spec. */
static int route(const msb_router *router, const msb_spec *spec, char **out, msb_error **err)
{
	msb_route_explanation why = {0};
	if (!spec)
		return 0;
	int r = msb_router_explain(router, spec, &why, err);
	if (r == 0)
		r = msb_route_explanation_to_json(&why, out, err);
	msb_route_explanation_clear(&why);
	return r;
}

int serve_router_new(rpc_call *c, void *frame, msb_error **err)
{
	f_router_new *a = frame;
	msb_router *router = NULL;
	int r = router_from_config(c, &a->config, &router, err);
	if (r < 0)
		return r;
	a->router.obj = router;
	a->enabled = msb_router_enabled(router);
	a->backends = json_array();
	for (size_t i = 0; a->backends && i < msb_router_backend_count(router); i++) {
		msb_backend *b = msb_router_backend_at(router, i);
		json_array_append_new(a->backends,
				      json_pack("{s:s, s:s}", "name", msb_backend_name(b),
						"isolation", msb_backend_isolation(b)));
	}
	return route(router, a->spec, &a->route, err);
}

int serve_router_ensure_can_serve(rpc_call *c, void *frame, msb_error **err)
{
	f_router_spec *a = frame;
	return msb_router_ensure_can_serve(a->router->ptr, a->spec, err);
}

int serve_router_resolve(rpc_call *c, void *frame, msb_error **err)
{
	f_router_spec *a = frame;
	msb_backend *b = NULL;
	msb_isolation_scope scope = MSB_SCOPE_CONVERSATION;
	int r = msb_router_resolve(a->router->ptr, a->spec, &b, &scope, err);
	if (r < 0)
		return r;
	a->backend = msb_backend_name(b);
	a->isolation = msb_backend_isolation(b);
	a->isolation_scope = msb_isolation_scope_name(scope);
	return 0;
}

int serve_router_effective_cleanup(rpc_call *c, void *frame, msb_error **err)
{
	f_router_spec *a = frame;
	msb_cleanup cleanup = MSB_CLEANUP_DISPOSE;
	int r = msb_router_effective_cleanup(a->router->ptr, a->spec, &cleanup, err);
	a->cleanup = msb_cleanup_name(cleanup);
	return r;
}

int serve_router_acquire(rpc_call *c, void *frame, msb_error **err)
{
	f_acquire *a = frame;
	msb_acquire_options ao = MSB_ACQUIRE_OPTIONS_INIT;
	msb_sandbox *sb = NULL;
	ao.call = a->call;
	int r = msb_router_acquire(a->router->ptr, &a->key.key, a->spec, &ao, &sb, err);
	a->sandbox.obj = sb;
	return r;
}

int serve_router_dispose(rpc_call *c, void *frame, msb_error **err)
{
	f_router_key *a = frame;
	return msb_router_dispose(a->router->ptr, &a->key.key, &a->all_disposed, err);
}

int serve_router_dispose_scope(rpc_call *c, void *frame, msb_error **err)
{
	f_scope *a = frame;
	return msb_router_dispose_scope(a->router->ptr, a->scope, a->thread_id, &a->purge, err);
}

int serve_router_purge_scoped_thread(rpc_call *c, void *frame, msb_error **err)
{
	f_scope *a = frame;
	return msb_purge_scoped_thread(a->router->ptr, a->scope, a->thread_id, &a->purge, err);
}

int serve_router_dispose_kind(rpc_call *c, void *frame, msb_error **err)
{
	f_dispose_kind *a = frame;
	msb_dispose_kind_options o = MSB_DISPOSE_KIND_OPTIONS_INIT;
	o.instance_id = a->instance_id;
	o.call = a->call;
	return msb_router_dispose_kind(a->router->ptr, &a->key.key, a->kind, a->timeout, &o,
				       &a->all_landed, err);
}

int serve_router_dispose_unclean(rpc_call *c, void *frame, msb_error **err)
{
	f_dispose_kind *a = frame;
	msb_dispose_unclean_options o = MSB_DISPOSE_UNCLEAN_OPTIONS_INIT;
	o.kind = a->kind;
	o.instance_id = a->instance_id;
	return msb_router_dispose_unclean(a->router->ptr, &a->key.key, a->timeout, &o,
					  &a->all_landed, err);
}

int serve_router_key_unclean(rpc_call *c, void *frame, msb_error **err)
{
	f_router_key *a = frame;
	a->unclean = msb_router_key_unclean(a->router->ptr, &a->key.key, &a->targets);
	return 0;
}

int serve_router_options(rpc_call *c, void *frame, msb_error **err)
{
	f_router_options *a = frame;
	return msb_router_options_to_json(msb_router_options_get(a->router->ptr), &a->options, err);
}
