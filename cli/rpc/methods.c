/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The methods of `msb serve`: one per library call (docs/serve.md). Each is
 * one entry of serve_methods[] at the bottom of this file.
 */
#include <stdlib.h>
#include <string.h>

#include "handles.h"
#include "serve.h"

static rpc_handles *table(rpc_server *srv)
{
	return &((serve_state *)rpc_server_userdata(srv))->handles;
}

rpc_handles *serve_table(rpc_server *srv)
{
	return table(srv);
}

#define P(...) ((const char *const[]){__VA_ARGS__, NULL})
static const char *const no_params[] = {NULL};

/* ---- shared readers and writers ------------------------------------------------------------ */

static int get_spec(json_t *params, const char *key, bool required, msb_spec **out, msb_error **err)
{
	char *text = NULL;
	size_t len = 0;
	int r = rpc_json_text(params, key, required, &text, &len, err);
	if (r < 0 || !text)
		return r;
	/* The spec's reader names its document ("spec: ..."): no second prefix. */
	r = msb_spec_from_json(text, len, out, err);
	free(text);
	return r;
}

static const char *const key_members[] = {"scope", "thread_id", "agent_dir", "call_id", NULL};

/* A key object {scope, thread_id, agent_dir, call_id?}; strings borrowed from params. */
static int get_key(json_t *params, const char *name, bool required, msb_key *out, bool *present,
		   msb_error **err)
{
	json_t *k = json_object_get(params, name);
	if (present)
		*present = false;
	if (!k || json_is_null(k))
		return required ? rpc_bad_params(err, "`%s` is required", name) : 0;
	if (!json_is_object(k))
		return rpc_bad_params(err, "`%s` must be a key object", name);
	const char *member;
	json_t *v;
	json_object_foreach (k, member, v) {
		bool known = false;
		for (size_t i = 0; key_members[i]; i++)
			known = known || strcmp(member, key_members[i]) == 0;
		if (!known)
			return rpc_bad_params(err, "`%s` has no member `%.60s`", name, member);
	}
	msb_key key = {NULL, NULL, NULL, NULL};
	int r;
	if ((r = rpc_str(k, "scope", true, &key.scope, err)) < 0 ||
	    (r = rpc_str(k, "thread_id", true, &key.thread_id, err)) < 0 ||
	    (r = rpc_str(k, "agent_dir", true, &key.agent_dir, err)) < 0 ||
	    (r = rpc_str(k, "call_id", false, &key.call_id, err)) < 0) {
		msb_error_wrap(err, "%s", name);
		return r;
	}
	*out = key;
	if (present)
		*present = true;
	return 0;
}

static json_t *key_json(const msb_key *k)
{
	return json_pack("{s:s, s:s, s:s, s:s?}", "scope", k->scope, "thread_id", k->thread_id,
			 "agent_dir", k->agent_dir, "call_id", k->call_id);
}

static json_t *b64_json(const uint8_t *data, size_t len)
{
	char *t = msb__base64_encode(data, len);
	json_t *v = t ? json_string(t) : NULL;
	free(t);
	return v;
}

static json_t *exec_result_json(const msb_exec_result *r)
{
	return json_pack("{s:o, s:o, s:i, s:i, s:b, s:b, s:b, s:b}", "stdout",
			 b64_json(r->stdout_bytes, r->stdout_len), "stderr",
			 b64_json(r->stderr_bytes, r->stderr_len), "exit_code", r->exit_code,
			 "term_signal", r->term_signal, "truncated", r->truncated, "oom_killed",
			 r->oom_killed, "pids_exhausted", r->pids_exhausted, "no_space",
			 r->no_space);
}

json_t *serve_exec_result_json(const msb_exec_result *r)
{
	return exec_result_json(r);
}

int serve_get_key(json_t *params, const char *name, bool required, msb_key *out, bool *present,
		  msb_error **err)
{
	return get_key(params, name, required, out, present, err);
}

static json_t *entry_json(const msb_entry *e)
{
	json_t *o = json_pack("{s:o, s:s, s:b}", "path", rpc_text(e->path), "kind",
			      msb_entry_kind_name(e->kind), "size_known", e->size_known);
	if (o && e->size_known)
		json_object_set_new(o, "size_bytes", json_integer((json_int_t)e->size_bytes));
	return o;
}

static json_t *sandbox_json(rpc_handle *h)
{
	return json_pack("{s:s, s:s, s:s}", "sandbox", h->id, "instance_id",
			 msb_sandbox_instance_id(h->ptr), "backend",
			 msb_sandbox_backend_name(h->ptr));
}

/* ---- msb.* ----------------------------------------------------------------------------------- */

static int m_version(rpc_server *srv, json_t *params, json_t **result, msb_error **err)
{
	(void)srv;
	(void)params;
	(void)err;
	*result = json_pack("{s:s, s:s}", "version", msb_version(), "protocol", "msb-serve/1");
	return 0;
}

/* ---- router.* -------------------------------------------------------------------------------- */

static int m_router_new(rpc_server *srv, json_t *params, json_t **result, msb_error **err)
{
	char *text = NULL;
	size_t len = 0;
	int r = rpc_json_text(params, "config", true, &text, &len, err);
	if (r < 0)
		return r;
	msb_router_options extra = MSB_ROUTER_OPTIONS_INIT;
	extra.observer = rpc_server_observer(srv);
	extra.log = rpc_log;
	msb_router *router = NULL;
	r = msb_router_from_json(text, len, &extra, &router, err);
	free(text);
	if (r < 0)
		return r;
	rpc_handle *h = rpc_handle_add(table(srv), H_ROUTER, router, NULL, NULL);
	if (!h) {
		msb_router_free(router);
		return msb_error_set(err, MSB_E_NOMEM, "out of memory");
	}
	json_t *backends = json_array();
	for (size_t i = 0; i < msb_router_backend_count(router); i++) {
		msb_backend *b = msb_router_backend_at(router, i);
		json_array_append_new(backends, json_pack("{s:s, s:s}", "name", msb_backend_name(b),
							  "isolation", msb_backend_isolation(b)));
	}
	*result = json_pack("{s:s, s:b, s:o}", "router", h->id, "enabled",
			    msb_router_enabled(router), "backends", backends);
	return 0;
}

static int m_router_free(rpc_server *srv, json_t *params, json_t **result, msb_error **err)
{
	rpc_handle *h;
	int r = rpc_handle_get(table(srv), params, "router", H_ROUTER, &h, err);
	if (r < 0)
		return r;
	rpc_handle_close(table(srv), h);
	rpc_handle_put(table(srv), h);
	*result = json_object();
	return 0;
}

/* A router handle and an optional spec, for the pure checks. */
static int router_and_spec(rpc_server *srv, json_t *params, bool spec_required, rpc_handle **h,
			   msb_spec **spec, msb_error **err)
{
	int r = rpc_handle_get(table(srv), params, "router", H_ROUTER, h, err);
	if (r < 0)
		return r;
	r = get_spec(params, "spec", spec_required, spec, err);
	if (r < 0)
		rpc_handle_put(table(srv), *h);
	return r;
}

static int m_ensure_can_serve(rpc_server *srv, json_t *params, json_t **result, msb_error **err)
{
	rpc_handle *h;
	msb_spec *spec = NULL;
	int r = router_and_spec(srv, params, true, &h, &spec, err);
	if (r < 0)
		return r;
	r = msb_router_ensure_can_serve(h->ptr, spec, err);
	msb_spec_unref(spec);
	rpc_handle_put(table(srv), h);
	if (r == 0)
		*result = json_object();
	return r;
}

static int m_resolve(rpc_server *srv, json_t *params, json_t **result, msb_error **err)
{
	rpc_handle *h;
	msb_spec *spec = NULL;
	int r = router_and_spec(srv, params, true, &h, &spec, err);
	if (r < 0)
		return r;
	msb_backend *b = NULL;
	msb_isolation_scope scope = MSB_SCOPE_CONVERSATION;
	r = msb_router_resolve(h->ptr, spec, &b, &scope, err);
	if (r == 0)
		*result = json_pack("{s:s, s:s, s:s}", "backend", msb_backend_name(b), "isolation",
				    msb_backend_isolation(b), "isolation_scope",
				    msb_isolation_scope_name(scope));
	msb_spec_unref(spec);
	rpc_handle_put(table(srv), h);
	return r;
}

static int m_effective_cleanup(rpc_server *srv, json_t *params, json_t **result, msb_error **err)
{
	rpc_handle *h;
	msb_spec *spec = NULL;
	int r = router_and_spec(srv, params, true, &h, &spec, err);
	if (r < 0)
		return r;
	msb_cleanup c = MSB_CLEANUP_DISPOSE;
	r = msb_router_effective_cleanup(h->ptr, spec, &c, err);
	if (r == 0)
		*result = json_pack("{s:s}", "cleanup", msb_cleanup_name(c));
	msb_spec_unref(spec);
	rpc_handle_put(table(srv), h);
	return r;
}

static int m_acquire(rpc_server *srv, json_t *params, json_t **result, msb_error **err)
{
	rpc_handle *h;
	msb_spec *spec = NULL;
	msb_key key;
	const char *call = NULL;
	int r = router_and_spec(srv, params, true, &h, &spec, err);
	if (r < 0)
		return r;
	if ((r = get_key(params, "key", true, &key, NULL, err)) < 0 ||
	    (r = rpc_str(params, "call", false, &call, err)) < 0)
		goto out;
	msb_acquire_options ao = MSB_ACQUIRE_OPTIONS_INIT;
	ao.call = call;
	msb_sandbox *sb = NULL;
	r = msb_router_acquire(h->ptr, &key, spec, &ao, &sb, err);
	if (r < 0)
		goto out;
	rpc_handle *sh = rpc_handle_add(table(srv), H_SANDBOX, sb, h, NULL);
	if (!sh) {
		msb_sandbox_release(sb);
		r = msb_error_set(err, MSB_E_NOMEM, "out of memory");
		goto out;
	}
	*result = sandbox_json(sh);
out:
	msb_spec_unref(spec);
	rpc_handle_put(table(srv), h);
	return r;
}

static int m_dispose(rpc_server *srv, json_t *params, json_t **result, msb_error **err)
{
	rpc_handle *h;
	msb_key key;
	int r = rpc_handle_get(table(srv), params, "router", H_ROUTER, &h, err);
	if (r < 0)
		return r;
	bool all = false;
	if ((r = get_key(params, "key", true, &key, NULL, err)) == 0 &&
	    (r = msb_router_dispose(h->ptr, &key, &all, err)) == 0)
		*result = json_pack("{s:b}", "all_disposed", all);
	rpc_handle_put(table(srv), h);
	return r;
}

/* dispose_scope and purge_scoped_thread take and answer the same. */
static int scope_purge(rpc_server *srv, json_t *params, json_t **result, msb_error **err,
		       int (*purge)(msb_router *, const char *, const char *, msb_scope_purge *,
				    msb_error **))
{
	rpc_handle *h;
	const char *scope = NULL, *thread = NULL;
	int r = rpc_handle_get(table(srv), params, "router", H_ROUTER, &h, err);
	if (r < 0)
		return r;
	msb_scope_purge p = {0, 0};
	if ((r = rpc_str(params, "scope", true, &scope, err)) == 0 &&
	    (r = rpc_str(params, "thread_id", true, &thread, err)) == 0 &&
	    (r = purge(h->ptr, scope, thread, &p, err)) == 0)
		*result = json_pack("{s:I, s:I}", "disposed", (json_int_t)p.disposed, "undisposed",
				    (json_int_t)p.undisposed);
	rpc_handle_put(table(srv), h);
	return r;
}

static int m_dispose_scope(rpc_server *srv, json_t *params, json_t **result, msb_error **err)
{
	return scope_purge(srv, params, result, err, msb_router_dispose_scope);
}

static int m_dispose_kind(rpc_server *srv, json_t *params, json_t **result, msb_error **err)
{
	rpc_handle *h;
	msb_key key;
	const char *kind = NULL;
	double timeout = 30.0;
	msb_dispose_kind_options o = MSB_DISPOSE_KIND_OPTIONS_INIT;
	int r = rpc_handle_get(table(srv), params, "router", H_ROUTER, &h, err);
	if (r < 0)
		return r;
	bool all = false;
	if ((r = get_key(params, "key", true, &key, NULL, err)) == 0 &&
	    (r = rpc_str(params, "kind", true, &kind, err)) == 0 &&
	    (r = rpc_double(params, "timeout", false, &timeout, err)) == 0 &&
	    (r = rpc_str(params, "instance_id", false, &o.instance_id, err)) == 0 &&
	    (r = rpc_str(params, "call", false, &o.call, err)) == 0 &&
	    (r = msb_router_dispose_kind(h->ptr, &key, kind, timeout, &o, &all, err)) == 0)
		*result = json_pack("{s:b}", "all_landed", all);
	rpc_handle_put(table(srv), h);
	return r;
}

static int m_dispose_unclean(rpc_server *srv, json_t *params, json_t **result, msb_error **err)
{
	rpc_handle *h;
	msb_key key;
	double timeout = 30.0;
	msb_dispose_unclean_options o = MSB_DISPOSE_UNCLEAN_OPTIONS_INIT;
	int r = rpc_handle_get(table(srv), params, "router", H_ROUTER, &h, err);
	if (r < 0)
		return r;
	bool all = false;
	if ((r = get_key(params, "key", true, &key, NULL, err)) == 0 &&
	    (r = rpc_str(params, "kind", false, &o.kind, err)) == 0 &&
	    (r = rpc_str(params, "instance_id", false, &o.instance_id, err)) == 0 &&
	    (r = rpc_double(params, "timeout", false, &timeout, err)) == 0 &&
	    (r = msb_router_dispose_unclean(h->ptr, &key, timeout, &o, &all, err)) == 0)
		*result = json_pack("{s:b}", "all_landed", all);
	rpc_handle_put(table(srv), h);
	return r;
}

static int m_key_unclean(rpc_server *srv, json_t *params, json_t **result, msb_error **err)
{
	rpc_handle *h;
	msb_key key;
	int r = rpc_handle_get(table(srv), params, "router", H_ROUTER, &h, err);
	if (r < 0)
		return r;
	if ((r = get_key(params, "key", true, &key, NULL, err)) == 0) {
		size_t n = 0;
		bool unclean = msb_router_key_unclean(h->ptr, &key, &n);
		*result = json_pack("{s:b, s:I}", "unclean", unclean, "targets", (json_int_t)n);
	}
	rpc_handle_put(table(srv), h);
	return r;
}

static int m_purge_scoped_thread(rpc_server *srv, json_t *params, json_t **result, msb_error **err)
{
	return scope_purge(srv, params, result, err, msb_purge_scoped_thread);
}

static int m_router_options(rpc_server *srv, json_t *params, json_t **result, msb_error **err)
{
	rpc_handle *h;
	int r = rpc_handle_get(table(srv), params, "router", H_ROUTER, &h, err);
	if (r < 0)
		return r;
	char *text = NULL;
	if ((r = msb_router_options_to_json(msb_router_options_get(h->ptr), &text, err)) == 0) {
		json_error_t jerr;
		*result = json_loads(text, 0, &jerr);
		if (!*result)
			r = msb_error_set(err, MSB_E_RUNTIME, "router options: %s", jerr.text);
	}
	free(text);
	rpc_handle_put(table(srv), h);
	return r;
}

/* ---- sandbox.* ------------------------------------------------------------------------------- */

static int get_sandbox(rpc_server *srv, json_t *params, rpc_handle **h, msb_error **err)
{
	return rpc_handle_get(table(srv), params, "sandbox", H_SANDBOX, h, err);
}

static int do_exec(rpc_server *srv, json_t *params, json_t **result, bool bounded, msb_error **err)
{
	rpc_handle *h;
	int r = get_sandbox(srv, params, &h, err);
	if (r < 0)
		return r;
	msb_exec_request req = MSB_EXEC_REQUEST_INIT;
	const char **argv = NULL, **env = NULL;
	uint8_t *in = NULL;
	msb_exec_result res = {0};
	if ((r = rpc_strv(params, "argv", false, &argv, err)) < 0 ||
	    (r = rpc_str(params, "shell", false, &req.shell, err)) < 0 ||
	    (r = rpc_str(params, "working_directory", false, &req.working_directory, err)) < 0 ||
	    (r = rpc_strv(params, "env", false, &env, err)) < 0 ||
	    (r = rpc_bytes(params, "stdin", false, &in, &req.stdin_len, err)) < 0 ||
	    (r = rpc_double(params, "timeout", false, &req.timeout, err)) < 0 ||
	    (r = rpc_u64(params, "max_output_bytes", bounded, &req.max_output_bytes, err)) < 0)
		goto out;
	if (!argv == !req.shell) {
		r = rpc_bad_params(err, "exactly one of `argv` and `shell` is required");
		goto out;
	}
	req.argv = argv;
	req.env = env;
	req.stdin_data = in;
	r = bounded ? msb_sandbox_exec_bounded(h->ptr, &req, &res, err)
		    : msb_sandbox_exec(h->ptr, &req, &res, err);
	if (r == 0)
		*result = exec_result_json(&res);
	msb_exec_result_clear(&res);
out:
	free(argv);
	free(env);
	free(in);
	rpc_handle_put(table(srv), h);
	return r;
}

static int m_exec(rpc_server *srv, json_t *params, json_t **result, msb_error **err)
{
	return do_exec(srv, params, result, false, err);
}

static int m_exec_bounded(rpc_server *srv, json_t *params, json_t **result, msb_error **err)
{
	return do_exec(srv, params, result, true, err);
}

static int m_run_code(rpc_server *srv, json_t *params, json_t **result, msb_error **err)
{
	rpc_handle *h;
	const char *code = NULL;
	double timeout = 30.0;
	int r = get_sandbox(srv, params, &h, err);
	if (r < 0)
		return r;
	msb_exec_result res = {0};
	if ((r = rpc_str(params, "code", true, &code, err)) == 0 &&
	    (r = rpc_double(params, "timeout", false, &timeout, err)) == 0 &&
	    (r = msb_sandbox_run_code(h->ptr, code, timeout, NULL, &res, err)) == 0)
		*result = exec_result_json(&res);
	msb_exec_result_clear(&res);
	rpc_handle_put(table(srv), h);
	return r;
}

static int m_write_file(rpc_server *srv, json_t *params, json_t **result, msb_error **err)
{
	rpc_handle *h;
	const char *path = NULL, *wd = NULL;
	uint8_t *data = NULL;
	size_t len = 0;
	int r = get_sandbox(srv, params, &h, err);
	if (r < 0)
		return r;
	if ((r = rpc_str(params, "path", true, &path, err)) == 0 &&
	    (r = rpc_str(params, "working_directory", false, &wd, err)) == 0 &&
	    (r = rpc_bytes(params, "data", true, &data, &len, err)) == 0 &&
	    (r = msb_sandbox_write_file(h->ptr, path, data, len, wd, err)) == 0)
		*result = json_pack("{s:I}", "written", (json_int_t)len);
	free(data);
	rpc_handle_put(table(srv), h);
	return r;
}

static int m_read_file(rpc_server *srv, json_t *params, json_t **result, msb_error **err)
{
	rpc_handle *h;
	const char *path = NULL, *wd = NULL;
	uint64_t max = 64u << 20;
	uint8_t *data = NULL;
	size_t len = 0;
	int r = get_sandbox(srv, params, &h, err);
	if (r < 0)
		return r;
	if ((r = rpc_str(params, "path", true, &path, err)) == 0 &&
	    (r = rpc_str(params, "working_directory", false, &wd, err)) == 0 &&
	    (r = rpc_u64(params, "max_bytes", false, &max, err)) == 0 &&
	    (r = msb_sandbox_read_file(h->ptr, path, wd, max, &data, &len, err)) == 0)
		*result = json_pack("{s:o, s:I}", "data", b64_json(data, len), "size",
				    (json_int_t)len);
	free(data);
	rpc_handle_put(table(srv), h);
	return r;
}

static int m_stat(rpc_server *srv, json_t *params, json_t **result, msb_error **err)
{
	rpc_handle *h;
	const char *path = NULL, *wd = NULL;
	int r = get_sandbox(srv, params, &h, err);
	if (r < 0)
		return r;
	bool present = false;
	msb_entry e = {0};
	if ((r = rpc_str(params, "path", true, &path, err)) == 0 &&
	    (r = rpc_str(params, "working_directory", false, &wd, err)) == 0 &&
	    (r = msb_sandbox_stat_file(h->ptr, path, wd, &present, &e, err)) == 0)
		*result = json_pack("{s:b, s:o}", "present", present, "entry",
				    present ? entry_json(&e) : json_null());
	if (present)
		msb_entry_clear(&e);
	rpc_handle_put(table(srv), h);
	return r;
}

static int m_list(rpc_server *srv, json_t *params, json_t **result, msb_error **err)
{
	rpc_handle *h;
	const char *path = ".", *wd = NULL;
	int r = get_sandbox(srv, params, &h, err);
	if (r < 0)
		return r;
	msb_entry *entries = NULL;
	size_t n = 0;
	if ((r = rpc_str(params, "path", false, &path, err)) == 0 &&
	    (r = rpc_str(params, "working_directory", false, &wd, err)) == 0 &&
	    (r = msb_sandbox_list_dir(h->ptr, path, wd, &entries, &n, err)) == 0) {
		json_t *a = json_array();
		for (size_t i = 0; i < n; i++)
			json_array_append_new(a, entry_json(&entries[i]));
		*result = json_pack("{s:o}", "entries", a);
		msb_entries_free(entries, n);
	}
	rpc_handle_put(table(srv), h);
	return r;
}

static int m_remove(rpc_server *srv, json_t *params, json_t **result, msb_error **err)
{
	rpc_handle *h;
	const char *path = NULL, *wd = NULL;
	bool recursive = false;
	int r = get_sandbox(srv, params, &h, err);
	if (r < 0)
		return r;
	if ((r = rpc_str(params, "path", true, &path, err)) == 0 &&
	    (r = rpc_str(params, "working_directory", false, &wd, err)) == 0 &&
	    (r = rpc_bool(params, "recursive", &recursive, err)) == 0 &&
	    (r = msb_sandbox_remove(h->ptr, path, wd, recursive, err)) == 0)
		*result = json_object();
	rpc_handle_put(table(srv), h);
	return r;
}

static int m_reclaim(rpc_server *srv, json_t *params, json_t **result, msb_error **err)
{
	rpc_handle *h;
	const char *dir = NULL, *wd = NULL;
	double timeout = 30.0;
	int r = get_sandbox(srv, params, &h, err);
	if (r < 0)
		return r;
	if ((r = rpc_str(params, "directory", true, &dir, err)) == 0 &&
	    (r = rpc_str(params, "working_directory", false, &wd, err)) == 0 &&
	    (r = rpc_double(params, "timeout", false, &timeout, err)) == 0 &&
	    (r = msb_sandbox_reclaim(h->ptr, dir, wd, timeout, err)) == 0)
		*result = json_object();
	rpc_handle_put(table(srv), h);
	return r;
}

static int m_reset(rpc_server *srv, json_t *params, json_t **result, msb_error **err)
{
	rpc_handle *h;
	double timeout = 30.0;
	int r = get_sandbox(srv, params, &h, err);
	if (r < 0)
		return r;
	if ((r = rpc_double(params, "timeout", false, &timeout, err)) == 0 &&
	    (r = msb_sandbox_reset(h->ptr, timeout, err)) == 0)
		*result = json_object();
	rpc_handle_put(table(srv), h);
	return r;
}

static const char *const sink_members[] = {"directory", "existing", NULL};

/* A filesystem sink {directory, existing?: "refuse"|"replace"} (msb_fs_sink_new). */
static int get_fs_sink(json_t *params, const char *name, msb_output_sink **out, msb_error **err)
{
	json_t *o = json_object_get(params, name);
	*out = NULL;
	if (!o || json_is_null(o))
		return 0;
	if (!json_is_object(o))
		return rpc_bad_params(err, "`%s` must be an object {directory, existing}", name);
	const char *member;
	json_t *v;
	json_object_foreach (o, member, v) {
		bool known = false;
		for (size_t i = 0; sink_members[i]; i++)
			known = known || strcmp(member, sink_members[i]) == 0;
		if (!known)
			return rpc_bad_params(err, "`%s` has no member `%.60s`", name, member);
	}
	const char *dir = NULL, *existing = "refuse";
	int r;
	if ((r = rpc_str(o, "directory", true, &dir, err)) < 0 ||
	    (r = rpc_str(o, "existing", false, &existing, err)) < 0) {
		msb_error_wrap(err, "%s", name);
		return r;
	}
	msb_fs_sink_options so = MSB_FS_SINK_OPTIONS_INIT;
	if (strcmp(existing, "replace") == 0)
		so.existing = MSB_LANDING_REPLACE;
	else if (strcmp(existing, "refuse") != 0)
		return rpc_bad_params(err, "`%s.existing` must be `refuse` or `replace`", name);
	return msb_fs_sink_new(dir, &so, out, err);
}

static int m_collect_outputs(rpc_server *srv, json_t *params, json_t **result, msb_error **err)
{
	rpc_handle *h;
	int r = get_sandbox(srv, params, &h, err);
	if (r < 0)
		return r;
	msb_spec *spec = NULL, *holder = NULL;
	msb_output_sink *sink = NULL;
	msb_collect_options co = MSB_COLLECT_OPTIONS_INIT;
	msb_key key;
	bool have_key = false;
	const msb_declared_output *outs = NULL;
	msb_landed_artifact *landed = NULL;
	size_t n = 0;
	if ((r = get_spec(params, "spec", true, &spec, err)) < 0 ||
	    (r = rpc_call_time_outputs(params, "outputs", &holder, &outs, &co.n_outputs, err)) <
		    0 ||
	    (r = rpc_str(params, "call_id", false, &co.call_id, err)) < 0 ||
	    (r = rpc_str(params, "working_directory", false, &co.working_directory, err)) < 0 ||
	    (r = get_key(params, "key", false, &key, &have_key, err)) < 0 ||
	    (r = get_fs_sink(params, "sink", &sink, err)) < 0)
		goto out;
	co.sink = sink;
	if (h->call_owned && h->parent && h->parent->parent) {
		/* A call's sandbox: the session's sink and the call's id by default. */
		if (!sink)
			co.sink = h->parent->parent->aux;
		if (!co.call_id)
			co.call_id = msb_tool_call_id(h->parent->ptr);
	}
	co.outputs = outs;
	co.key = have_key ? &key : NULL;
	co.observer = rpc_server_observer(srv);
	co.log = rpc_log;
	if ((r = msb_collect_outputs(h->ptr, spec, &co, &landed, &n, err)) == 0)
		*result = json_pack("{s:o}", "artifacts", rpc_landed_json(landed, n));
	msb_landed_artifacts_free(landed, n);
out:
	msb_output_sink_free(sink);
	free((void *)outs);
	msb_spec_unref(holder);
	msb_spec_unref(spec);
	rpc_handle_put(table(srv), h);
	return r;
}

static json_t *strv_json(char **v)
{
	json_t *a = json_array();
	for (size_t i = 0; v && v[i]; i++)
		json_array_append_new(a, rpc_text(v[i]));
	return a;
}

static int m_fingerprint(rpc_server *srv, json_t *params, json_t **result, msb_error **err)
{
	rpc_handle *h;
	int r = get_sandbox(srv, params, &h, err);
	if (r < 0)
		return r;
	bool supported = false;
	msb_fingerprint fp = {NULL, NULL};
	if ((r = msb_sandbox_fingerprint(h->ptr, &supported, &fp, err)) == 0) {
		*result = supported ? json_pack("{s:b, s:o, s:o}", "supported", 1, "changed_paths",
						strv_json(fp.changed_paths), "running_programs",
						strv_json(fp.running_programs))
				    : json_pack("{s:b}", "supported", 0);
		if (supported)
			msb_fingerprint_clear(&fp);
	}
	rpc_handle_put(table(srv), h);
	return r;
}

static int m_sandbox_release(rpc_server *srv, json_t *params, json_t **result, msb_error **err)
{
	rpc_handle *h;
	int r = get_sandbox(srv, params, &h, err);
	if (r < 0)
		return r;
	rpc_handle_close(table(srv), h);
	rpc_handle_put(table(srv), h);
	*result = json_object();
	return 0;
}

/* ---- session.* and call.* (msb/session.h) ----------------------------------------------------
 *
 * The caller context of a session reads the scope and thread the client gave
 * at session.begin_call, through the call handle the worker is serving. */

static __thread rpc_handle *tls_call;

static int ctx_scope(void *ud, char **out, msb_error **err)
{
	(void)ud;
	if (!tls_call || !tls_call->scope)
		return msb_error_set(err, MSB_E_LOOKUP, "no scope for this call");
	*out = strdup(tls_call->scope);
	return *out ? 0 : msb_error_set(err, MSB_E_NOMEM, "out of memory");
}

static int ctx_thread(void *ud, char **out, msb_error **err)
{
	(void)ud;
	*out = NULL;
	if (!tls_call || !tls_call->thread_id)
		return 0; /* no active thread: the session answers with its sentence */
	*out = strdup(tls_call->thread_id);
	return *out ? 0 : msb_error_set(err, MSB_E_NOMEM, "out of memory");
}

static void free_sink(void *sink)
{
	msb_output_sink_free(sink);
}

static int m_session_attach(rpc_server *srv, json_t *params, json_t **result, msb_error **err)
{
	rpc_handle *h;
	msb_spec *spec = NULL;
	int r = router_and_spec(srv, params, true, &h, &spec, err);
	if (r < 0)
		return r;
	static const msb_caller_context ctx = {MSB_CALLER_CONTEXT_VERSION, NULL, ctx_scope,
					       ctx_thread, NULL};
	msb_tool_session_options o = MSB_TOOL_SESSION_OPTIONS_INIT;
	o.router = h->ptr;
	o.context = &ctx;
	o.spec = spec;
	o.agent_dir = "rpc";
	o.name = "sandbox";
	msb_tool_session *s = NULL;
	msb_output_sink *sink = NULL;
	if ((r = get_fs_sink(params, "sink", &sink, err)) < 0)
		goto out;
	o.output_sink = sink;
	if ((r = rpc_str(params, "name", false, &o.name, err)) < 0 ||
	    (r = rpc_str(params, "agent_dir", false, &o.agent_dir, err)) < 0 ||
	    (r = rpc_str(params, "description", false, &o.description, err)) < 0 ||
	    (r = rpc_double(params, "reclaim_timeout", false, &o.reclaim_timeout, err)) < 0 ||
	    (r = rpc_double(params, "admission_timeout", false, &o.admission_timeout, err)) < 0 ||
	    (r = msb_tool_session_attach(&o, &s, err)) < 0)
		goto out;
	if (!s) {
		/* No router or a disabled one: no tool is made (15.1). */
		*result = json_pack("{s:n}", "session");
		goto out;
	}
	rpc_handle *sh = rpc_handle_add(table(srv), H_SESSION, s, h, NULL);
	if (!sh) {
		msb_tool_session_unref(s);
		r = msb_error_set(err, MSB_E_NOMEM, "out of memory");
		goto out;
	}
	/* The session's sink lives as long as the session (set before anyone
	 * can name the handle). */
	sh->aux = sink;
	sh->aux_free = free_sink;
	sink = NULL;
	*result = json_pack("{s:s, s:s, s:s}", "session", sh->id, "name", msb_tool_session_name(s),
			    "cleanup", msb_cleanup_name(msb_tool_session_cleanup(s)));
out:
	msb_output_sink_free(sink);
	msb_spec_unref(spec);
	rpc_handle_put(table(srv), h);
	return r;
}

static int m_session_properties(rpc_server *srv, json_t *params, json_t **result, msb_error **err)
{
	rpc_handle *h;
	int r = rpc_handle_get(table(srv), params, "session", H_SESSION, &h, err);
	if (r < 0)
		return r;
	char *text = NULL;
	if ((r = msb_tool_session_properties(h->ptr, &text, err)) == 0) {
		json_error_t jerr;
		*result = json_loads(text, 0, &jerr);
		if (!*result)
			r = msb_error_set(err, MSB_E_RUNTIME, "session properties: %s", jerr.text);
	}
	free(text);
	rpc_handle_put(table(srv), h);
	return r;
}

static int m_session_detach(rpc_server *srv, json_t *params, json_t **result, msb_error **err)
{
	rpc_handle *h;
	int r = rpc_handle_get(table(srv), params, "session", H_SESSION, &h, err);
	if (r < 0)
		return r;
	rpc_handle_close(table(srv), h);
	rpc_handle_put(table(srv), h);
	*result = json_object();
	return 0;
}

static int m_begin_call(rpc_server *srv, json_t *params, json_t **result, msb_error **err)
{
	rpc_handle *h;
	const char *scope = NULL, *thread = NULL;
	int r = rpc_handle_get(table(srv), params, "session", H_SESSION, &h, err);
	if (r < 0)
		return r;
	msb_tool_call *c = NULL;
	if ((r = rpc_str(params, "scope", false, &scope, err)) < 0 ||
	    (r = rpc_str(params, "thread_id", false, &thread, err)) < 0 ||
	    (r = msb_tool_session_begin_call(h->ptr, NULL, &c, err)) < 0)
		goto out;
	rpc_handle_extra extra = {false, scope ? scope : "rpc", thread};
	rpc_handle *ch = rpc_handle_add(table(srv), H_CALL, c, h, &extra);
	if (!ch) {
		msb_call_outcome oc = MSB_CALL_OUTCOME_INIT;
		oc.kind = MSB_CALL_CANCELLED;
		msb_tool_call_end(c, &oc, NULL, NULL);
		r = msb_error_set(err, MSB_E_NOMEM, "out of memory");
		goto out;
	}
	*result = json_pack("{s:s, s:s}", "call", ch->id, "call_id", msb_tool_call_id(c));
out:
	rpc_handle_put(table(srv), h);
	return r;
}

static int get_call(rpc_server *srv, json_t *params, rpc_handle **h, msb_error **err)
{
	int r = rpc_handle_get(table(srv), params, "call", H_CALL, h, err);
	if (r == 0)
		tls_call = *h;
	return r;
}

static void put_call(rpc_server *srv, rpc_handle *h)
{
	tls_call = NULL;
	rpc_handle_put(table(srv), h);
}

static int m_call_key(rpc_server *srv, json_t *params, json_t **result, msb_error **err)
{
	rpc_handle *h;
	int r = get_call(srv, params, &h, err);
	if (r < 0)
		return r;
	msb_key *key = NULL;
	char *sentence = NULL;
	if ((r = msb_tool_call_key(h->ptr, &key, &sentence, err)) == 0)
		*result = key ? json_pack("{s:o}", "key", key_json(key))
			      : json_pack("{s:o}", "sentence", rpc_text(sentence));
	msb_key_free(key);
	free(sentence);
	put_call(srv, h);
	return r;
}

static int m_call_acquire(rpc_server *srv, json_t *params, json_t **result, msb_error **err)
{
	rpc_handle *h;
	int r = get_call(srv, params, &h, err);
	if (r < 0)
		return r;
	msb_key given, *made = NULL;
	bool present = false;
	char *sentence = NULL;
	msb_sandbox *sb = NULL;
	if ((r = get_key(params, "key", false, &given, &present, err)) < 0)
		goto out;
	if (!present) {
		if ((r = msb_tool_call_key(h->ptr, &made, &sentence, err)) < 0 || sentence)
			goto answer;
	}
	r = msb_tool_call_acquire(h->ptr, present ? &given : made, &sb, &sentence, err);
answer:
	if (r == 0 && sentence) {
		*result = json_pack("{s:o}", "sentence", rpc_text(sentence));
	} else if (r == 0) {
		rpc_handle_extra extra = {true, NULL, NULL};
		rpc_handle *sh = rpc_handle_add(table(srv), H_SANDBOX, sb, h, &extra);
		if (!sh) {
			r = msb_error_set(err, MSB_E_NOMEM, "out of memory");
			goto out;
		}
		*result = sandbox_json(sh);
	}
out:
	msb_key_free(made);
	free(sentence);
	put_call(srv, h);
	return r;
}

static int m_call_path(rpc_server *srv, json_t *params, json_t **result, msb_error **err)
{
	rpc_handle *h;
	int r = get_call(srv, params, &h, err);
	if (r < 0)
		return r;
	const char *path = NULL;
	if ((r = msb_tool_call_guest_call_path(h->ptr, &path, err)) == 0)
		*result = json_pack("{s:s}", "path", path);
	put_call(srv, h);
	return r;
}

static int m_call_report_unclean(rpc_server *srv, json_t *params, json_t **result, msb_error **err)
{
	rpc_handle *h, *sh = NULL;
	const char *reason = NULL;
	int r = get_call(srv, params, &h, err);
	if (r < 0)
		return r;
	if ((r = rpc_str(params, "reason", true, &reason, err)) < 0 ||
	    (r = rpc_handle_get(table(srv), params, "sandbox", H_SANDBOX, &sh, err)) < 0)
		goto out;
	if (sh->parent != h) {
		r = rpc_bad_params(err, "`sandbox`: `%s` was not acquired by this call", sh->id);
		goto out;
	}
	if ((r = msb_tool_call_report_unclean(h->ptr, sh->ptr, reason, err)) == 0)
		*result = json_object();
out:
	rpc_handle_put(table(srv), sh);
	put_call(srv, h);
	return r;
}

static const char *const outcome_members[] = {"kind", "text", "error", NULL};

static int m_call_end(rpc_server *srv, json_t *params, json_t **result, msb_error **err)
{
	rpc_handle *h;
	int r = get_call(srv, params, &h, err);
	if (r < 0)
		return r;
	msb_call_outcome oc = MSB_CALL_OUTCOME_INIT;
	json_t *o = json_object_get(params, "outcome");
	const char *kind = "result", *error = NULL;
	if (o && !json_is_object(o)) {
		r = rpc_bad_params(err, "`outcome` must be an object");
		goto out;
	}
	if (o) {
		const char *member;
		json_t *v;
		json_object_foreach (o, member, v) {
			bool known = false;
			for (size_t i = 0; outcome_members[i]; i++)
				known = known || strcmp(member, outcome_members[i]) == 0;
			if (!known) {
				r = rpc_bad_params(err, "`outcome` has no member `%.60s`", member);
				goto out;
			}
		}
		if ((r = rpc_str(o, "kind", false, &kind, err)) < 0 ||
		    (r = rpc_str(o, "text", false, &oc.text, err)) < 0 ||
		    (r = rpc_str(o, "error", false, &error, err)) < 0)
			goto out;
	}
	if (strcmp(kind, "result") == 0) {
		oc.kind = MSB_CALL_RESULT;
	} else if (strcmp(kind, "refusal") == 0) {
		oc.kind = MSB_CALL_REFUSAL;
	} else if (strcmp(kind, "cancelled") == 0) {
		oc.kind = MSB_CALL_CANCELLED;
	} else if (strcmp(kind, "error") == 0) {
		oc.kind = MSB_CALL_ERROR;
		oc.error_code = error ? msb_code_from_name(error) : MSB_E_RUNTIME;
		if (oc.error_code == 0) {
			r = rpc_bad_params(err, "`outcome.error`: `%.60s` is not an error name",
					   error);
			goto out;
		}
	} else {
		r = rpc_bad_params(err, "`outcome.kind` must be one of `result`, `refusal`, "
					"`error`, `cancelled`");
		goto out;
	}
	pthread_mutex_lock(&table(srv)->lock);
	bool ended = h->ended;
	h->ended = true;
	pthread_mutex_unlock(&table(srv)->lock);
	if (ended) {
		r = msb_error_set(err, MSB_E_RUNTIME, "the call has already ended");
		goto out;
	}
	/* The call's sandboxes go with it. Requests still running on them, or
	 * on the call (a call.acquire may still add a sandbox), finish first:
	 * the library frees both at the end. */
	rpc_handle_close(table(srv), h);
	do
		rpc_handle_close_children(table(srv), H_SANDBOX, h);
	while (!rpc_handle_wait_refs(table(srv), h, 1));
	msb_tool_result *res = NULL;
	r = msb_tool_call_end(h->ptr, &oc, &res, err);
	if (r == 0) {
		json_t *items = json_array();
		for (size_t i = 0; res && i < res->n_items; i++) {
			const msb_result_item *it = &res->items[i];
			json_t *item =
				json_pack("{s:s, s:b}", "text", it->text, "guidance", it->guidance);
			if (it->has_label) {
				json_object_set_new(item, "integrity",
						    json_string(msb_integrity_name(it->integrity)));
				json_object_set_new(item, "confidentiality",
						    it->confidentiality
							    ? json_string(it->confidentiality)
							    : json_null());
			}
			json_array_append_new(items, item);
		}
		*result = json_pack("{s:o}", "items", items);
	}
	msb_tool_result_free(res);
out:
	put_call(srv, h);
	return r;
}

const rpc_method serve_methods[] = {
	{"msb.version", no_params, m_version},
	{"router.new", P("config"), m_router_new},
	{"router.free", P("router"), m_router_free},
	{"router.ensure_can_serve", P("router", "spec"), m_ensure_can_serve},
	{"router.resolve", P("router", "spec"), m_resolve},
	{"router.effective_cleanup", P("router", "spec"), m_effective_cleanup},
	{"router.acquire", P("router", "key", "spec", "call"), m_acquire},
	{"router.dispose", P("router", "key"), m_dispose},
	{"router.dispose_scope", P("router", "scope", "thread_id"), m_dispose_scope},
	{"router.dispose_kind", P("router", "key", "kind", "timeout", "instance_id", "call"),
	 m_dispose_kind},
	{"router.dispose_unclean", P("router", "key", "kind", "instance_id", "timeout"),
	 m_dispose_unclean},
	{"router.key_unclean", P("router", "key"), m_key_unclean},
	{"router.purge_scoped_thread", P("router", "scope", "thread_id"), m_purge_scoped_thread},
	{"router.options", P("router"), m_router_options},
	{"sandbox.exec",
	 P("sandbox", "argv", "shell", "working_directory", "env", "stdin", "timeout"), m_exec},
	{"sandbox.exec_bounded",
	 P("sandbox", "argv", "shell", "working_directory", "env", "stdin", "timeout",
	   "max_output_bytes"),
	 m_exec_bounded},
	{"sandbox.run_code", P("sandbox", "code", "timeout"), m_run_code},
	{"sandbox.write_file", P("sandbox", "path", "data", "working_directory"), m_write_file},
	{"sandbox.read_file", P("sandbox", "path", "working_directory", "max_bytes"), m_read_file},
	{"sandbox.stat", P("sandbox", "path", "working_directory"), m_stat},
	{"sandbox.list", P("sandbox", "path", "working_directory"), m_list},
	{"sandbox.remove", P("sandbox", "path", "working_directory", "recursive"), m_remove},
	{"sandbox.reclaim", P("sandbox", "directory", "working_directory", "timeout"), m_reclaim},
	{"sandbox.reset", P("sandbox", "timeout"), m_reset},
	{"sandbox.fingerprint", P("sandbox"), m_fingerprint},
	{"sandbox.release", P("sandbox"), m_sandbox_release},
	{"sandbox.collect_outputs",
	 P("sandbox", "spec", "sink", "outputs", "call_id", "key", "working_directory"),
	 m_collect_outputs},
	{"session.attach",
	 P("router", "spec", "name", "agent_dir", "description", "reclaim_timeout",
	   "admission_timeout", "sink"),
	 m_session_attach},
	{"session.detach", P("session"), m_session_detach},
	{"session.properties", P("session"), m_session_properties},
	{"session.begin_call", P("session", "scope", "thread_id"), m_begin_call},
	{"call.key", P("call"), m_call_key},
	{"call.acquire", P("call", "key"), m_call_acquire},
	{"call.guest_call_path", P("call"), m_call_path},
	{"call.report_unclean", P("call", "sandbox", "reason"), m_call_report_unclean},
	{"call.end", P("call", "outcome"), m_call_end},
	{"host_tools.new",
	 P("require_declared", "allowed_identities", "max_calls_per_run", "call_timeout",
	   "response_limits"),
	 serve_host_tools_new},
	{"host_tools.register", P("registry", "name", "description", "parameters", "declaration"),
	 serve_host_tools_register},
	{"host_tools.aggregate", P("registry"), serve_host_tools_aggregate},
	{"host_tools.free", P("registry"), serve_host_tools_free},
	{"sandbox.run_with_host_tools",
	 P("sandbox", "registry", "program", "transport", "program_name", "run_directory",
	   "timeout", "poll_interval", "interpreter", "key", "call"),
	 serve_run_with_host_tools},
	{NULL, NULL, NULL},
};
