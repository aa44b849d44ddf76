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

#include "methods.h"

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
	char id[RPC_HANDLE_ID_MAX];
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

int serve_host_tools_new(rpc_call *c, void *frame, msb_error **err)
{
	f_tools_new *a = frame;
	msb_host_tool_registry_options o = MSB_HOST_TOOL_REGISTRY_OPTIONS_INIT;
	o.require_declared = a->require_declared;
	o.max_host_tool_calls_per_run = a->max_calls_per_run;
	o.response_limits = a->response_limits;
	if (!(a->call_timeout > 0) || a->call_timeout > CALL_TIMEOUT_MAX)
		return rpc_bad_params(err, "`call_timeout` must be > 0 and at most %g s",
				      CALL_TIMEOUT_MAX);
	for (size_t i = 0; a->allowed_identities && a->allowed_identities[i]; i++) {
		msb_identity id;
		if (i == 0)
			o.allowed_identities = 0;
		if (msb_identity_parse(a->allowed_identities[i], &id, err) < 0) {
			msb_error_wrap(err, "allowed_identities");
			return RPC_INVALID_PARAMS;
		}
		o.allowed_identities |= (msb_identity_set)id;
	}
	o.observer = rpc_server_observer(c->srv);
	o.log = rpc_log;
	struct rpc_registry *g = calloc(1, sizeof(*g));
	if (!g)
		return msb_error_set(err, MSB_E_NOMEM, "out of memory");
	pthread_mutex_init(&g->lock, NULL);
	g->srv = c->srv;
	g->call_timeout = a->call_timeout;
	int r = msb_host_tool_registry_new(&o, &g->reg, err);
	if (r < 0) {
		rpc_registry_free(g);
		return r;
	}
	a->registry.obj = g;
	a->registry.extra.id_out = g->id; /* for host_tool.call's `registry` */
	return 0;
}

int serve_host_tools_register(rpc_call *c, void *frame, msb_error **err)
{
	f_tools *a = frame;
	struct rpc_registry *g = a->registry->ptr;
	msb_host_tool t = MSB_HOST_TOOL_INIT;
	msb_host_tool_decl decl;
	char *decl_storage = NULL;
	int r;
	t.name = a->name;
	t.description = a->description;
	t.parameters = a->parameters.text;
	if (a->declaration.text) {
		if ((r = msb_host_tool_decl_from_json(a->declaration.text, &decl, &decl_storage,
						      err)) < 0) {
			msb_error_wrap(err, "declaration");
			return r;
		}
		t.decl = &decl;
	}
	struct client_tool *ct = calloc(1, sizeof(*ct));
	if (!ct || !(ct->name = strdup(t.name))) {
		r = msb_error_set(err, MSB_E_NOMEM, "out of memory");
		goto out;
	}
	ct->owner = g;
	t.fn = client_tool_fn;
	t.userdata = ct;
	if ((r = msb_host_tool_registry_register(g->reg, &t, err)) < 0)
		goto out;
	pthread_mutex_lock(&g->lock);
	ct->next = g->tools;
	g->tools = ct;
	pthread_mutex_unlock(&g->lock);
	ct = NULL;
	a->names = msb_host_tool_registry_names(g->reg);
out:
	if (ct)
		free(ct->name);
	free(ct);
	free(decl_storage);
	return r;
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

int serve_host_tools_aggregate(rpc_call *c, void *frame, msb_error **err)
{
	f_tools *a = frame;
	struct rpc_registry *g = a->registry->ptr;
	int r = msb_host_tool_registry_aggregate(g->reg, &a->agg, err);
	if (r < 0)
		return r;
	if (a->agg.has_result_integrity)
		a->result_integrity = msb_integrity_name(a->agg.result_integrity);
	a->identities = identities_json(a->agg.identities);
	return 0;
}

/* ---- running a program ----------------------------------------------------------------------- */

static pthread_mutex_t run_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned long run_counter;

int rpc_write_text(msb_sandbox *sb, const char *path, const char *text, msb_error **err)
{
	return msb_sandbox_write_file(sb, path, (const uint8_t *)text, strlen(text), NULL, err);
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
	if ((r = rpc_write_text(sb, l.program, program, err)) < 0 ||
	    (r = msb_host_tool_shim((const char *const *)names, n, 300, &shim, err)) < 0 ||
	    (r = rpc_write_text(sb, l.shim, shim, err)) < 0 ||
	    (r = msb_host_tool_calls_over_exec(sb, run, &l, xo, res, err)) < 0)
		goto out;
	*where = json_pack("{s:s, s:s}", "run_directory", l.directory, "work", l.work);
out:
	free(shim);
	msb_strv_free(names);
	msb_guest_run_layout_clear(&l);
	return r;
}

int serve_run_with_host_tools(rpc_call *c, void *frame, msb_error **err)
{
	f_run_tools *a = frame;
	struct rpc_registry *g = a->registry->ptr;
	msb_over_exec_options xo = MSB_OVER_EXEC_OPTIONS_INIT;
	msb_host_tool_run *run = NULL;
	const char *dir = a->run_directory;
	char *made_dir = NULL;
	int r;
	if (!(a->timeout > 0))
		return rpc_bad_params(err, "`timeout` must be a finite number > 0");
	if (!dir) {
		pthread_mutex_lock(&run_lock);
		unsigned long n = ++run_counter;
		pthread_mutex_unlock(&run_lock);
		if (asprintf(&made_dir, "msb-runs/run-%d-%lu", (int)getpid(), n) < 0)
			return msb_error_set(err, MSB_E_NOMEM, "out of memory");
		dir = made_dir;
	}
	xo.timeout = a->timeout;
	xo.poll_interval = a->poll_interval;
	xo.interpreter = a->interpreter;
	xo.key = a->key.present ? &a->key.key : NULL;
	xo.call = a->call;
	xo.observer = rpc_server_observer(c->srv);
	xo.log = rpc_log;
	if ((r = msb_host_tool_run_new(g->reg, xo.key, a->call, &run, err)) < 0)
		goto out;
	r = a->transport == TRANSPORT_NATIVE
		    ? rpc_run_native(a->sandbox->ptr, run, dir, a->program_name, a->program,
				     xo.interpreter ? xo.interpreter : "python3", xo.timeout,
				     &a->res, &a->where, err)
		    : run_over_exec(a->sandbox->ptr, g->reg, run, dir, a->program_name, a->program,
				    &xo, &a->res, &a->where, err);
	if (r == 0) {
		a->calls = msb_host_tool_run_calls(run);
		a->delivered = msb_host_tool_run_delivered(run);
	}
out:
	msb_host_tool_run_free(run);
	free(made_dir);
	return r;
}
