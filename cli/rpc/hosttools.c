/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Host tools over `msb serve` (docs/serve.md "Host tools"): a registry the
 * client fills with tools whose bodies it answers itself. When a guest
 * program calls one, the library's door (msb_host_tool_run_call_request)
 * applies every gate - the schema, the caps, the identities, the call cap -
 * and only then calls the body here, which sends the client a
 * `host_tool.call` request and waits for its response, at most the
 * registry's call_timeout. An error response, a timeout or a closed
 * connection is the tool's failure: the guest sees the door's sentence, the
 * log gets the reason.
 */
#include <math.h>
#include <stdio.h>
#include <unistd.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <msb/hosttools_exec.h>
#include <msb/hosttools_native.h>
#include <msb/ns.h>

#include "host_tools_client_py.h"
#include "serve.h"

#define CALL_TIMEOUT_DEFAULT 60.0
#define CALL_TIMEOUT_MAX 86400.0

struct client_tool {
	struct rpc_registry *owner;
	char *name;
	struct client_tool *next;
};

struct rpc_registry {
	msb_host_tool_registry *reg;
	rpc_server *srv;
	double call_timeout;
	char id[40];
	pthread_mutex_t lock;
	struct client_tool *tools;
};

void rpc_registry_free(void *p)
{
	struct rpc_registry *g = p;
	if (!g)
		return;
	msb_host_tool_registry_unref(g->reg);
	for (struct client_tool *t = g->tools, *next; t; t = next) {
		next = t->next;
		free(t->name);
		free(t);
	}
	pthread_mutex_destroy(&g->lock);
	free(g);
}

/* The body of every client tool: ask the client. */
static int client_tool_fn(void *ud, const char *arguments_json, const char *user_identity,
			  char **result_json, msb_error **err)
{
	struct client_tool *t = ud;
	json_error_t jerr;
	json_t *args = json_loads(arguments_json, 0, &jerr);
	if (!args)
		return msb_error_set(err, MSB_E_RUNTIME, "arguments: %s", jerr.text);
	json_t *params = json_pack("{s:s, s:s, s:o, s:s?}", "registry", t->owner->id, "tool",
				   t->name, "arguments", args, "user_identity", user_identity);
	if (!params)
		return msb_error_set(err, MSB_E_NOMEM, "out of memory");
	json_t *res = NULL;
	int r = rpc_client_request(t->owner->srv, "host_tool.call", params, t->owner->call_timeout,
				   &res, err);
	if (r < 0)
		return r;
	*result_json = json_dumps(res ? res : json_null(), JSON_COMPACT | JSON_ENCODE_ANY);
	json_decref(res);
	return *result_json ? 0 : msb_error_set(err, MSB_E_NOMEM, "out of memory");
}

static int get_registry(rpc_server *srv, json_t *params, rpc_handle **h, msb_error **err)
{
	return rpc_handle_get(serve_table(srv), params, "registry", H_REGISTRY, h, err);
}

/* params[key] as TransferLimits, read by the spec's own reader (its files_out). */
static int get_limits(json_t *params, const char *key, msb_transfer_limits *out, msb_error **err)
{
	json_t *v = json_object_get(params, key);
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_object(v))
		return rpc_bad_params(err, "`%s` must be an object of transfer limits", key);
	json_t *wrap = json_pack("{s:s, s:O}", "kind", "limits", "files_out", v);
	char *text = wrap ? json_dumps(wrap, JSON_COMPACT) : NULL;
	json_decref(wrap);
	if (!text)
		return msb_error_set(err, MSB_E_NOMEM, "out of memory");
	msb_spec *spec = NULL;
	int r = msb_spec_from_json(text, strlen(text), &spec, err);
	free(text);
	if (r < 0) {
		msb_error_wrap(err, "%s", key);
		return RPC_INVALID_PARAMS;
	}
	*out = msb_spec_files_out(spec);
	msb_spec_unref(spec);
	return 0;
}

int serve_host_tools_new(rpc_server *srv, json_t *params, json_t **result, msb_error **err)
{
	msb_host_tool_registry_options o = MSB_HOST_TOOL_REGISTRY_OPTIONS_INIT;
	const char **ids = NULL;
	double timeout = CALL_TIMEOUT_DEFAULT;
	int r;
	if ((r = rpc_bool(params, "require_declared", &o.require_declared, err)) < 0 ||
	    (r = rpc_u64(params, "max_calls_per_run", false, &o.max_host_tool_calls_per_run, err)) <
		    0 ||
	    (r = rpc_double(params, "call_timeout", false, &timeout, err)) < 0 ||
	    (r = get_limits(params, "response_limits", &o.response_limits, err)) < 0 ||
	    (r = rpc_strv(params, "allowed_identities", false, &ids, err)) < 0)
		goto out;
	if (!isfinite(timeout) || timeout <= 0 || timeout > CALL_TIMEOUT_MAX) {
		r = rpc_bad_params(err, "`call_timeout` must be > 0 and at most %g s",
				   CALL_TIMEOUT_MAX);
		goto out;
	}
	if (ids) {
		o.allowed_identities = 0;
		for (size_t i = 0; ids[i]; i++) {
			msb_identity id;
			if (msb_identity_parse(ids[i], &id, err) < 0) {
				msb_error_wrap(err, "allowed_identities");
				r = RPC_INVALID_PARAMS;
				goto out;
			}
			o.allowed_identities |= (msb_identity_set)id;
		}
	}
	o.observer = rpc_server_observer(srv);
	o.log = rpc_log;
	struct rpc_registry *g = calloc(1, sizeof(*g));
	if (!g) {
		r = msb_error_set(err, MSB_E_NOMEM, "out of memory");
		goto out;
	}
	pthread_mutex_init(&g->lock, NULL);
	g->srv = srv;
	g->call_timeout = timeout;
	if ((r = msb_host_tool_registry_new(&o, &g->reg, err)) < 0) {
		rpc_registry_free(g);
		goto out;
	}
	rpc_handle *h = rpc_handle_add(serve_table(srv), H_REGISTRY, g, NULL, NULL);
	if (!h) {
		rpc_registry_free(g);
		r = msb_error_set(err, MSB_E_NOMEM, "out of memory");
		goto out;
	}
	/* No tool exists yet, so no body reads the id before it is set. */
	memcpy(g->id, h->id, sizeof(g->id));
	*result = json_pack("{s:s, s:f}", "registry", h->id, "call_timeout", timeout);
out:
	free(ids);
	return r;
}

int serve_host_tools_register(rpc_server *srv, json_t *params, json_t **result, msb_error **err)
{
	rpc_handle *h;
	int r = get_registry(srv, params, &h, err);
	if (r < 0)
		return r;
	struct rpc_registry *g = h->ptr;
	msb_host_tool t = MSB_HOST_TOOL_INIT;
	msb_host_tool_decl decl;
	char *schema = NULL, *decl_text = NULL, *decl_storage = NULL;
	size_t len = 0;
	struct client_tool *ct = NULL;
	if ((r = rpc_str(params, "name", true, &t.name, err)) < 0 ||
	    (r = rpc_str(params, "description", false, &t.description, err)) < 0 ||
	    (r = rpc_json_text(params, "parameters", false, &schema, &len, err)) < 0 ||
	    (r = rpc_json_text(params, "declaration", false, &decl_text, &len, err)) < 0)
		goto out;
	if (decl_text) {
		if ((r = msb_host_tool_decl_from_json(decl_text, &decl, &decl_storage, err)) < 0) {
			msb_error_wrap(err, "declaration");
			goto out;
		}
		t.decl = &decl;
	}
	ct = calloc(1, sizeof(*ct));
	if (!ct || !(ct->name = strdup(t.name))) {
		r = msb_error_set(err, MSB_E_NOMEM, "out of memory");
		goto out;
	}
	ct->owner = g;
	t.parameters = schema;
	t.fn = client_tool_fn;
	t.userdata = ct;
	if ((r = msb_host_tool_registry_register(g->reg, &t, err)) < 0)
		goto out;
	pthread_mutex_lock(&g->lock);
	ct->next = g->tools;
	g->tools = ct;
	pthread_mutex_unlock(&g->lock);
	ct = NULL;
	char **names = msb_host_tool_registry_names(g->reg);
	json_t *a = json_array();
	for (size_t i = 0; names && names[i]; i++)
		json_array_append_new(a, json_string(names[i]));
	msb_strv_free(names);
	*result = json_pack("{s:o}", "names", a);
out:
	if (ct)
		free(ct->name);
	free(ct);
	free(schema);
	free(decl_text);
	free(decl_storage);
	rpc_handle_put(serve_table(srv), h);
	return r;
}

static json_t *strv_json(char **v)
{
	json_t *a = json_array();
	for (size_t i = 0; v && v[i]; i++)
		json_array_append_new(a, json_string(v[i]));
	return a;
}

static json_t *identities_json(msb_identity_set set)
{
	json_t *a = json_array();
	if (set & MSB_IDENTITY_APP)
		json_array_append_new(a, json_string("app"));
	if (set & MSB_IDENTITY_USER)
		json_array_append_new(a, json_string("user"));
	return a;
}

int serve_host_tools_aggregate(rpc_server *srv, json_t *params, json_t **result, msb_error **err)
{
	rpc_handle *h;
	int r = get_registry(srv, params, &h, err);
	if (r < 0)
		return r;
	struct rpc_registry *g = h->ptr;
	msb_host_tool_aggregate a;
	if ((r = msb_host_tool_registry_aggregate(g->reg, &a, err)) == 0) {
		*result = json_pack(
			"{s:o, s:o, s:o, s:b, s:b, s:o}", "result_integrity",
			a.has_result_integrity ? json_string(msb_integrity_name(a.result_integrity))
					       : json_null(),
			"outbound_caps", strv_json(a.outbound_caps), "identities",
			identities_json(a.identities), "requires_approval", a.requires_approval,
			"has_undeclared", a.has_undeclared, "names", strv_json(a.names));
		msb_host_tool_aggregate_clear(&a);
	}
	rpc_handle_put(serve_table(srv), h);
	return r;
}

int serve_host_tools_free(rpc_server *srv, json_t *params, json_t **result, msb_error **err)
{
	rpc_handle *h;
	int r = get_registry(srv, params, &h, err);
	if (r < 0)
		return r;
	rpc_handle_close(serve_table(srv), h);
	rpc_handle_put(serve_table(srv), h);
	*result = json_object();
	return 0;
}

/* ---- running a program ----------------------------------------------------------------------- */

static pthread_mutex_t run_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned long run_counter;

static int write_text(msb_sandbox *sb, const char *path, const char *text, msb_error **err)
{
	return msb_sandbox_write_file(sb, path, (const uint8_t *)text, strlen(text), NULL, err);
}

static char *join(const char *a, const char *b)
{
	char *p = NULL;
	return asprintf(&p, "%s/%s", a, b) < 0 ? NULL : p;
}

/* Over exec: the program and the shim in a fresh layout, served through the door. */
static int run_over_exec(msb_sandbox *sb, msb_host_tool_registry *reg, msb_host_tool_run *run,
			 const char *dir, const char *program_name, const char *program,
			 const msb_over_exec_options *xo, msb_exec_result *res, json_t **where,
			 msb_error **err)
{
	msb_guest_run_layout l;
	int r = msb_guest_run_layout_new(dir, program_name, &l, err);
	if (r < 0)
		return r;
	char **names = msb_host_tool_registry_names(reg);
	char *shim = NULL;
	size_t n = 0;
	while (names && names[n])
		n++;
	if (!names) {
		r = msb_error_set(err, MSB_E_NOMEM, "out of memory");
		goto out;
	}
	if ((r = write_text(sb, l.program, program, err)) < 0 ||
	    (r = msb_host_tool_shim((const char *const *)names, n, 300, &shim, err)) < 0 ||
	    (r = write_text(sb, l.shim, shim, err)) < 0 ||
	    (r = msb_host_tool_calls_over_exec(sb, run, &l, xo, res, err)) < 0)
		goto out;
	*where = json_pack("{s:s, s:s}", "run_directory", l.directory, "work", l.work);
out:
	free(shim);
	msb_strv_free(names);
	msb_guest_run_layout_clear(&l);
	return r;
}

/* Native (ns): the socket in the storage base, the program and the guest
 * client beside each other in <dir>, run with one bounded exec. */
static int run_native(msb_sandbox *sb, msb_host_tool_run *run, const char *dir,
		      const char *program_name, const char *program, const char *interpreter,
		      double timeout, msb_exec_result *res, json_t **where, msb_error **err)
{
	if (strchr(program_name, '/') || strcmp(program_name, ".") == 0 ||
	    strcmp(program_name, "..") == 0 || strcmp(program_name, "msb_host_tools.py") == 0)
		return rpc_bad_params(err, "`program_name` must be a plain file name other than "
					   "`msb_host_tools.py`");
	msb_native_server *ns = NULL;
	char *prog_path = join(dir, program_name), *client_path = join(dir, "msb_host_tools.py");
	char *env0 = NULL;
	int r;
	if (!prog_path || !client_path) {
		r = msb_error_set(err, MSB_E_NOMEM, "out of memory");
		goto out;
	}
	if ((r = msb_ns_host_tools_attach(sb, run, rpc_log, NULL, &ns, err)) < 0 ||
	    (r = write_text(sb, prog_path, program, err)) < 0 ||
	    (r = write_text(sb, client_path, HOST_TOOLS_CLIENT_PY, err)) < 0)
		goto out;
	if (asprintf(&env0, "%s=%s", MSB_HOST_TOOLS_SOCKET_ENV, msb_native_server_guest_path(ns)) <
	    0) {
		env0 = NULL;
		r = msb_error_set(err, MSB_E_NOMEM, "out of memory");
		goto out;
	}
	const char *argv[] = {interpreter, program_name, NULL};
	const char *env[] = {env0, "PYTHONDONTWRITEBYTECODE=1", NULL};
	msb_exec_request req = MSB_EXEC_REQUEST_INIT;
	req.argv = argv;
	req.env = env;
	req.working_directory = dir;
	req.timeout = timeout;
	if ((r = msb_sandbox_exec(sb, &req, res, err)) == 0)
		*where = json_pack("{s:s, s:s}", "run_directory", dir, "work", dir);
out:
	msb_native_server_stop(ns);
	free(env0);
	free(prog_path);
	free(client_path);
	return r;
}

int serve_run_with_host_tools(rpc_server *srv, json_t *params, json_t **result, msb_error **err)
{
	rpc_handle *sh = NULL, *gh = NULL;
	int r = rpc_handle_get(serve_table(srv), params, "sandbox", H_SANDBOX, &sh, err);
	if (r < 0)
		return r;
	if ((r = get_registry(srv, params, &gh, err)) < 0) {
		rpc_handle_put(serve_table(srv), sh);
		return r;
	}
	struct rpc_registry *g = gh->ptr;
	const char *program = NULL, *transport = "exec", *program_name = "program.py";
	const char *dir = NULL, *call = NULL;
	char *made_dir = NULL;
	msb_over_exec_options xo = MSB_OVER_EXEC_OPTIONS_INIT;
	msb_key key;
	bool have_key = false;
	msb_host_tool_run *run = NULL;
	msb_exec_result res = {0};
	json_t *where = NULL;
	if ((r = rpc_str(params, "program", true, &program, err)) < 0 ||
	    (r = rpc_str(params, "transport", false, &transport, err)) < 0 ||
	    (r = rpc_str(params, "program_name", false, &program_name, err)) < 0 ||
	    (r = rpc_str(params, "run_directory", false, &dir, err)) < 0 ||
	    (r = rpc_double(params, "timeout", false, &xo.timeout, err)) < 0 ||
	    (r = rpc_double(params, "poll_interval", false, &xo.poll_interval, err)) < 0 ||
	    (r = rpc_str(params, "interpreter", false, &xo.interpreter, err)) < 0 ||
	    (r = rpc_str(params, "call", false, &call, err)) < 0 ||
	    (r = serve_get_key(params, "key", false, &key, &have_key, err)) < 0)
		goto out;
	bool native = strcmp(transport, "native") == 0;
	if (!native && strcmp(transport, "exec") != 0) {
		r = rpc_bad_params(err, "`transport` must be `exec` or `native`");
		goto out;
	}
	if (!isfinite(xo.timeout) || xo.timeout <= 0) {
		r = rpc_bad_params(err, "`timeout` must be a finite number > 0");
		goto out;
	}
	if (!dir) {
		pthread_mutex_lock(&run_lock);
		unsigned long n = ++run_counter;
		pthread_mutex_unlock(&run_lock);
		if (asprintf(&made_dir, "msb-runs/run-%d-%lu", (int)getpid(), n) < 0) {
			made_dir = NULL;
			r = msb_error_set(err, MSB_E_NOMEM, "out of memory");
			goto out;
		}
		dir = made_dir;
	}
	xo.key = have_key ? &key : NULL;
	xo.call = call;
	xo.observer = rpc_server_observer(srv);
	xo.log = rpc_log;
	if ((r = msb_host_tool_run_new(g->reg, xo.key, call, &run, err)) < 0)
		goto out;
	r = native ? run_native(sh->ptr, run, dir, program_name, program,
				xo.interpreter ? xo.interpreter : "python3", xo.timeout, &res,
				&where, err)
		   : run_over_exec(sh->ptr, g->reg, run, dir, program_name, program, &xo, &res,
				   &where, err);
	if (r == 0) {
		*result = serve_exec_result_json(&res);
		json_object_update(*result, where);
		json_object_set_new(*result, "calls",
				    json_integer((json_int_t)msb_host_tool_run_calls(run)));
		json_object_set_new(*result, "delivered",
				    json_integer((json_int_t)msb_host_tool_run_delivered(run)));
	}
out:
	json_decref(where);
	msb_exec_result_clear(&res);
	msb_host_tool_run_free(run);
	free(made_dir);
	rpc_handle_put(serve_table(srv), gh);
	rpc_handle_put(serve_table(srv), sh);
	return r;
}
