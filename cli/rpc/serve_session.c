/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `msb serve`: session.* and call.* (msb/session.h, docs/serve.md).
 *
 * The caller context of a session reads the scope and thread the client
 * gave at session.begin_call, through the call handle of the request this
 * thread is serving.
 */
#include <stdlib.h>
#include <string.h>

#include "methods.h"

static rpc_handle *serving_call(void)
{
	rpc_call *c = rpc_call_current();
	return c ? rpc_call_handle(c, H_CALL) : NULL;
}

static int ctx_scope(void *ud, char **out, msb_error **err)
{
	rpc_handle *call = serving_call();
	if (!call || !call->scope)
		return msb_error_set(err, MSB_E_LOOKUP, "no scope for this call");
	*out = strdup(call->scope);
	return *out ? 0 : msb_error_set(err, MSB_E_NOMEM, "out of memory");
}

static int ctx_thread(void *ud, char **out, msb_error **err)
{
	rpc_handle *call = serving_call();
	*out = NULL;
	if (!call || !call->thread_id)
		return 0; /* no active thread: the session answers with its sentence */
	*out = strdup(call->thread_id);
	return *out ? 0 : msb_error_set(err, MSB_E_NOMEM, "out of memory");
}

static void free_sink(void *sink)
{
	msb_output_sink_free(sink);
}

int serve_session_attach(rpc_call *c, void *frame, msb_error **err)
{
	f_attach *a = frame;
	static const msb_caller_context ctx = {MSB_CALLER_CONTEXT_VERSION, NULL, ctx_scope,
					       ctx_thread, NULL};
	msb_tool_session_options o = MSB_TOOL_SESSION_OPTIONS_INIT;
	o.router = a->router->ptr;
	o.context = &ctx;
	o.spec = a->spec;
	o.agent_dir = a->agent_dir;
	o.name = a->name;
	o.description = a->description;
	o.reclaim_timeout = a->reclaim_timeout;
	o.admission_timeout = a->admission_timeout;
	o.output_sink = a->sink;
	msb_tool_session *s = NULL;
	int r = msb_tool_session_attach(&o, &s, err);
	if (r < 0 || !s)
		return r; /* no router or a disabled one: no tool is made (15.1) */
	a->session.obj = s;
	/* The session's sink lives as long as the session. */
	a->session.extra.aux = a->sink;
	a->session.extra.aux_free = free_sink;
	a->sink = NULL;
	a->session_name = msb_tool_session_name(s);
	a->cleanup = msb_cleanup_name(msb_tool_session_cleanup(s));
	return 0;
}

int serve_session_properties(rpc_call *c, void *frame, msb_error **err)
{
	f_session *a = frame;
	return msb_tool_session_properties(a->session->ptr, &a->properties, err);
}

int serve_session_begin_call(rpc_call *c, void *frame, msb_error **err)
{
	f_begin_call *a = frame;
	msb_tool_call *call = NULL;
	int r = msb_tool_session_begin_call(a->session->ptr, NULL, &call, err);
	if (r < 0)
		return r;
	a->call.obj = call;
	a->call.extra.scope = a->scope;
	a->call.extra.thread_id = a->thread_id;
	a->call_id = msb_tool_call_id(call);
	return 0;
}

int serve_call_key(rpc_call *c, void *frame, msb_error **err)
{
	f_call *a = frame;
	return msb_tool_call_key(a->call->ptr, &a->made_key, &a->sentence, err);
}

/* With no key given, call.key's; a sentence instead of a sandbox when the
 * call has none to give. */
int serve_call_acquire(rpc_call *c, void *frame, msb_error **err)
{
	f_call *a = frame;
	msb_key *made = NULL;
	msb_sandbox *sb = NULL;
	int r = 0;
	if (!a->key.present)
		r = msb_tool_call_key(a->call->ptr, &made, &a->sentence, err);
	if (r == 0 && !a->sentence)
		r = msb_tool_call_acquire(a->call->ptr, a->key.present ? &a->key.key : made, &sb,
					  &a->sentence, err);
	msb_key_free(made);
	a->sandbox.obj = sb;
	return r;
}

int serve_call_guest_call_path(rpc_call *c, void *frame, msb_error **err)
{
	f_call *a = frame;
	return msb_tool_call_guest_call_path(a->call->ptr, &a->path, err);
}

int serve_call_report_unclean(rpc_call *c, void *frame, msb_error **err)
{
	f_report_unclean *a = frame;
	if (a->sandbox->parent != a->call)
		return rpc_bad_params(err, "`sandbox`: `%s` was not acquired by this call",
				      a->sandbox->id);
	return msb_tool_call_report_unclean(a->call->ptr, a->sandbox->ptr, a->reason, err);
}

static json_t *items_json(const msb_tool_result *res)
{
	json_t *items = json_array();
	for (size_t i = 0; items && res && i < res->n_items; i++) {
		const msb_result_item *it = &res->items[i];
		json_t *item = json_pack("{s:o, s:b}", "text", rpc_text(it->text), "guidance",
					 it->guidance);
		if (item && it->has_label) {
			json_object_set_new(item, "integrity",
					    json_string(msb_integrity_name(it->integrity)));
			json_object_set_new(item, "confidentiality",
					    it->confidentiality ? rpc_text(it->confidentiality)
								: json_null());
		}
		json_array_append_new(items, item);
	}
	return items;
}

int serve_call_end(rpc_call *c, void *frame, msb_error **err)
{
	f_call_end *a = frame;
	rpc_handle *h = a->call;
	pthread_mutex_lock(&c->handles->lock);
	bool ended = h->ended;
	h->ended = true;
	pthread_mutex_unlock(&c->handles->lock);
	if (ended)
		return msb_error_set(err, MSB_E_RUNTIME, "the call has already ended");
	/* The call's sandboxes go with it. Requests still running on them, or
	 * on the call (a call.acquire may still add a sandbox), finish first:
	 * the library frees both at the end. */
	rpc_handle_close(c->handles, h);
	do
		rpc_handle_close_children(c->handles, H_SANDBOX, h);
	while (!rpc_handle_wait_refs(c->handles, h, 1));
	msb_tool_result *res = NULL;
	int r = msb_tool_call_end(h->ptr, &a->outcome, &res, err);
	if (r == 0)
		a->items = items_json(res);
	msb_tool_result_free(res);
	return r;
}
