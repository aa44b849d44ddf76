/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The tool-call session (checklist section 15, 2.4-2.8, 10.9-10.11, 17.4,
 * 17.5, 17.14): the C form of `sandboxed_tool` and `SandboxToolSession`.
 * A session is attached once and holds host configuration only; each call
 * is a handle with its own id, key(s), instances, call path and file fold.
 * The end of a call is session_end.c's; the result's information flow is
 * infoflow.c's.
 */
#include <math.h>
#include <stdio.h>

#include "core/session/session_int.h"
#include "platform/platform.h"

/* ---- attach (15.1-15.11) -----------------------------------------------------------------------
 */

static void session_free(struct msb_tool_session *s)
{
	if (!s)
		return;
	free(s->agent_dir);
	free(s->name);
	free(s->description);
	free(s->parameters_schema);
	free(s->declarations);
	free(s->source_integrity);
	free(s->outbound_max_confidentiality);
	free(s->confidentiality);
	msb_spec_unref(s->spec);
	msb_strv_free(s->guidance);
	msb_file_store_provenance_unref(s->provenance);
	free(s->store_name);
	msb_strv_free(s->host_tools);
	free(s);
}

msb_tool_session *msb_tool_session_ref(msb_tool_session *s)
{
	if (s)
		atomic_fetch_add(&s->refs, 1);
	return s;
}

void msb_tool_session_unref(msb_tool_session *s)
{
	if (s && atomic_fetch_sub(&s->refs, 1) == 1)
		session_free(s);
}

int msb_session__dup_opt(const char *in, char **out)
{
	*out = NULL;
	if (in && !(*out = strdup(in)))
		return -ENOMEM;
	return 0;
}

static int dup_strv(const char *const *v, size_t n, char ***out)
{
	char **copy = calloc(n + 1, sizeof(char *));
	if (!copy)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		if (!(copy[i] = strdup(v[i]))) {
			msb_strv_free(copy);
			return -ENOMEM;
		}
	*out = copy;
	return 0;
}

/* 15.7: a call path directly under the guest root, or the root itself,
 * cannot be removed recursively (the reference rule). */
static bool work_dir_at_root(const char *wd)
{
	if (!wd)
		return false; /* the backend allocates */
	size_t parts = 0;
	for (const char *p = wd; *p;) {
		while (*p == '/')
			p++;
		if (!*p)
			break;
		parts++;
		while (*p && *p != '/')
			p++;
	}
	return parts <= 1;
}

static int preflight(const msb_tool_session_options *o, msb_error **err)
{
	if (!o->spec || !o->context || !o->agent_dir || !o->name)
		return msb_error_set(err, MSB_E_VALUE,
				     "sandboxed tool: spec, context, agent_dir and name are "
				     "required");
	if (o->context->version != MSB_CALLER_CONTEXT_VERSION || !o->context->current_scope ||
	    !o->context->current_thread_id)
		return msb_error_set(err, MSB_E_VALUE,
				     "sandboxed tool: the caller context needs current_scope and "
				     "current_thread_id");
	/* Misconfiguration is loud at attach (15.2). */
	int rc = msb_router_ensure_can_serve(o->router, o->spec, err);
	if (rc < 0)
		return rc;
	if (o->output_sink && o->declarations)
		return msb_error_set(err, MSB_E_VALUE,
				     "sandboxed tool `%s`: output_sink and declarations are "
				     "refused together: the sink's declarations are derived",
				     o->name);
	if ((msb_spec_declared_output_count(o->spec) > 0 ||
	     msb_spec_outputs_named_at_call_time(o->spec)) &&
	    !(msb_spec_requires(o->spec) & MSB_CAP_FILES_OUT))
		return msb_error_set(err, MSB_E_VALUE,
				     "sandboxed tool `%s`: the '%s' workload declares outputs but "
				     "its requires lacks files_out",
				     o->name, msb_spec_kind(o->spec));
	if (msb_infoflow__spec_lands(o->spec) && !o->output_sink)
		return msb_error_set(err, MSB_E_OUTPUT_SINK_REQUIRED,
				     "sandboxed tool `%s`: the '%s' workload lands artifacts and "
				     "no output sink was given",
				     o->name, msb_spec_kind(o->spec));
	if (o->reclaim_timeout != 0 &&
	    (rc = msb__check_timeout(o->reclaim_timeout, "reclaim_timeout", err)) < 0)
		return rc;
	if (o->admission_timeout != 0 &&
	    (rc = msb__check_timeout(o->admission_timeout, "admission_timeout", err)) < 0)
		return rc;
	if (work_dir_at_root(msb_spec_work_dir(o->spec)))
		return msb_error_set(err, MSB_E_VALUE,
				     "sandboxed tool `%s`: work_dir `%s` is at or directly below "
				     "the guest root, where a call path cannot be removed "
				     "recursively",
				     o->name, msb_spec_work_dir(o->spec));
	rc = msb_infoflow__check_guidance(o->standing_guidance, o->n_standing_guidance, err);
	if (rc < 0)
		return rc;
	if (o->requires_file_integrity_set && !msb_integrity_name(o->requires_file_integrity))
		return msb_error_set(err, MSB_E_VALUE,
				     "requires_file_integrity: %d is not an integrity level",
				     (int)o->requires_file_integrity);
	if (o->file_store &&
	    (o->file_store->version != MSB_FILE_STORE_VERSION || !o->file_store->read))
		return msb_error_set(err, MSB_E_VALUE, "file_store: needs version 1 and read");
	if (o->n_host_tools > 0 && !o->host_tools)
		return msb_error_set(err, MSB_E_VALUE, "host_tools: counted, none given");
	return 0;
}

int msb_tool_session_attach(const msb_tool_session_options *o, msb_tool_session **out,
			    msb_error **err)
{
	if (!o || !out)
		return msb_error_set(err, MSB_E_VALUE, "sandboxed tool: missing argument");
	if (o->version != MSB_TOOL_SESSION_OPTIONS_VERSION)
		return msb_error_set(err, MSB_E_VALUE,
				     "sandboxed tool options: unsupported version %u", o->version);
	*out = NULL;
	/* Nothing configured: no tool, and build never runs (15.1, 15.8). */
	if (!msb_router_enabled(o->router))
		return 0;
	int rc = preflight(o, err);
	if (rc < 0)
		return rc;

	struct msb_tool_session *s = calloc(1, sizeof(*s));
	if (!s)
		return msb__error_nomem(err);
	atomic_init(&s->refs, 1);
	s->r = o->router;
	s->ctx = *o->context;
	s->spec = msb_spec_ref((msb_spec *)o->spec);
	s->approval_mode = o->approval_mode;
	s->output_sink = o->output_sink;
	s->also_carries_out = o->also_carries_out;
	s->on_reclaim_failure = o->on_reclaim_failure;
	s->on_reclaim_failure_ud = o->on_reclaim_failure_userdata;
	s->reclaim_timeout =
		o->reclaim_timeout != 0 ? o->reclaim_timeout : o->router->opts.reclaim.timeout;
	s->admission_timeout =
		o->admission_timeout != 0 ? o->admission_timeout : MSB_ADMISSION_TIMEOUT_DEFAULT;
	s->requires_set = o->requires_file_integrity_set;
	s->requires = o->requires_file_integrity;
	s->state_set = o->state_set;
	s->state_set_ud = o->state_set_userdata;
	s->provenance = msb_file_store_provenance_ref(o->provenance);
	if (o->file_store) {
		s->has_store = true;
		s->store = *o->file_store;
	}
	s->n_guidance = o->n_standing_guidance;
	s->n_host_tools = o->n_host_tools;
	if (msb_session__dup_opt(o->agent_dir, &s->agent_dir) < 0 ||
	    msb_session__dup_opt(o->name, &s->name) < 0 ||
	    msb_session__dup_opt(o->description, &s->description) < 0 ||
	    msb_session__dup_opt(o->parameters_schema, &s->parameters_schema) < 0 ||
	    msb_session__dup_opt(o->declarations, &s->declarations) < 0 ||
	    msb_session__dup_opt(o->source_integrity, &s->source_integrity) < 0 ||
	    msb_session__dup_opt(o->outbound_max_confidentiality,
				 &s->outbound_max_confidentiality) < 0 ||
	    msb_session__dup_opt(o->confidentiality, &s->confidentiality) < 0 ||
	    msb_session__dup_opt(o->file_store_name, &s->store_name) < 0 ||
	    dup_strv(o->standing_guidance, o->n_standing_guidance, &s->guidance) < 0 ||
	    dup_strv(o->host_tools, o->n_host_tools, &s->host_tools) < 0) {
		session_free(s);
		return msb__error_nomem(err);
	}
	/* Stamping needs both declarations, valid (16.10); the outbound cap
	 * plays no part (16.15). */
	s->stamping = s->confidentiality && s->source_integrity &&
		      msb_integrity_parse(s->source_integrity, &s->declared, NULL) == 0;

	/* The serving backend and the rung: the checks are a pure function of
	 * the spec and the declarations, so this is what every call meets. */
	rc = msb_router__route(s->r, s->spec, &s->backend, &s->scope, err);
	if (rc < 0) {
		session_free(s);
		return rc;
	}
	s->cleanup = msb_lifecycle__rung(s->r, s->backend, s->spec, s->scope);
	s->backend_reclaims = s->r->entries[s->backend].decl->capabilities & MSB_CAP_RECLAIM;

	if (o->build && (rc = o->build(o->build_userdata, s, err)) < 0) {
		session_free(s);
		return rc;
	}
	*out = s;
	return 0;
}

const char *msb_tool_session_name(const msb_tool_session *s)
{
	return s ? s->name : NULL;
}
const char *msb_tool_session_description(const msb_tool_session *s)
{
	return s ? s->description : NULL;
}
const char *msb_tool_session_parameters_schema(const msb_tool_session *s)
{
	return s ? s->parameters_schema : NULL;
}
msb_approval_mode msb_tool_session_approval_mode(const msb_tool_session *s)
{
	return s ? s->approval_mode : MSB_APPROVAL_NEVER_REQUIRE;
}
const msb_spec *msb_tool_session_spec(const msb_tool_session *s)
{
	return s ? s->spec : NULL;
}
const struct msb_output_sink *msb_tool_session_output_sink(const msb_tool_session *s)
{
	return s ? s->output_sink : NULL;
}
msb_cleanup msb_tool_session_cleanup(const msb_tool_session *s)
{
	return s ? s->cleanup : MSB_CLEANUP_DISPOSE;
}

int msb_tool_session_properties(const msb_tool_session *s, char **out, msb_error **err)
{
	if (!s || !out)
		return msb_error_set(err, MSB_E_VALUE, "tool properties: missing argument");
	_cleanup_free_ char *base = NULL;
	int rc;
	if (s->declarations) {
		base = strdup(s->declarations);
		if (!base)
			return msb__error_nomem(err);
	} else {
		msb_tool_declarations_options d = MSB_TOOL_DECLARATIONS_OPTIONS_INIT;
		d.source_integrity = s->source_integrity;
		d.outbound_max_confidentiality = s->outbound_max_confidentiality;
		d.has_output_sink = s->output_sink != NULL;
		d.also_carries_out = s->also_carries_out;
		if ((rc = msb_sandbox_tool_declarations(s->spec, &d, &base, err)) < 0)
			return rc;
	}
	json_error_t je;
	json_t *o = json_loads(base, JSON_REJECT_DUPLICATES, &je);
	if (!o || !json_is_object(o)) {
		json_decref(o);
		return msb_error_set(err, MSB_E_VALUE,
				     "tool `%s`: declarations are not a JSON object", s->name);
	}
	if (s->confidentiality)
		json_object_set_new(o, "confidentiality", json_string(s->confidentiality));
	char *txt = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(o);
	if (!txt)
		return msb__error_nomem(err);
	*out = txt;
	return 0;
}

/* ---- calls
 * --------------------------------------------------------------------------------------- */

static int mint_id(char id[13], msb_error **err)
{
	uint8_t b[6];
	int rc = msb__plat_random(b, sizeof(b));
	if (rc < 0)
		return msb__error_errno(err, rc, "cannot mint a call id");
	static const char hex[] = "0123456789abcdef";
	for (size_t i = 0; i < sizeof(b); i++) {
		id[2 * i] = hex[b[i] >> 4];
		id[2 * i + 1] = hex[b[i] & 15];
	}
	id[12] = 0;
	return 0;
}

int msb_tool_session_begin_call(msb_tool_session *s, const msb_call_begin_options *opts,
				msb_tool_call **out, msb_error **err)
{
	if (!s || !out)
		return msb_error_set(err, MSB_E_VALUE, "begin_call: missing argument");
	if (opts && opts->version != MSB_CALL_BEGIN_OPTIONS_VERSION)
		return msb_error_set(err, MSB_E_VALUE, "begin_call options: unsupported version %u",
				     opts->version);
	struct msb_tool_call *c = calloc(1, sizeof(*c));
	if (!c)
		return msb__error_nomem(err);
	int rc = mint_id(c->id, err);
	if (rc < 0) {
		free(c);
		return rc;
	}
	atomic_init(&c->refs, 1);
	c->s = msb_tool_session_ref(s);
	c->cancel = opts ? opts->cancel : NULL;
	c->fed_weakest = MSB_INTEGRITY_TRUSTED;
	pthread_mutex_init(&c->lock, NULL);
	pthread_mutex_init(&c->acquire_lock, NULL);
	*out = c;
	return 0;
}

static void call_free(struct msb_tool_call *c)
{
	/* Holds left open (a call never ended) are released without cleanup
	 * queued: the instance is left as it is, and logged. */
	if (c->n_holds > 0)
		msb__log(&c->s->r->lg, MSB_LOG_WARNING, "session",
			 "tool call `%s` was dropped without ending: its sandboxes were not "
			 "cleaned",
			 c->id);
	for (size_t i = 0; i < c->n_holds; i++)
		msb_admission__release(c->holds[i], NULL);
	free(c->holds);
	for (size_t i = 0; i < c->n_insts; i++)
		free(c->insts[i].reason);
	free(c->insts);
	for (size_t i = 0; i < c->n_keys; i++)
		msb_key_free(c->keys[i]);
	free(c->keys);
	pthread_mutex_destroy(&c->lock);
	pthread_mutex_destroy(&c->acquire_lock);
	msb_tool_session_unref(c->s);
	free(c);
}

msb_tool_call *msb_tool_call_ref(msb_tool_call *c)
{
	if (c)
		atomic_fetch_add(&c->refs, 1);
	return c;
}

void msb_tool_call_unref(msb_tool_call *c)
{
	if (c && atomic_fetch_sub(&c->refs, 1) == 1)
		call_free(c);
}

const char *msb_tool_call_id(const msb_tool_call *c)
{
	return c ? c->id : NULL;
}

msb_tool_session *msb_tool_call_session(const msb_tool_call *c)
{
	return c ? c->s : NULL;
}

static bool call_closed(struct msb_tool_call *c)
{
	pthread_mutex_lock(&c->lock);
	bool closed = c->closed;
	pthread_mutex_unlock(&c->lock);
	return closed;
}

void msb_session__touch_key(struct msb_tool_call *c, const msb_key *key)
{
	pthread_mutex_lock(&c->lock);
	bool have = false;
	for (size_t i = 0; i < c->n_keys && !have; i++)
		have = msb_key_equal(c->keys[i], key);
	msb_key **v = NULL;
	msb_key *k = NULL;
	/* Recording stops once the call is closed (15.14). */
	if (!have && !c->closed && msb_key_dup(key, &k, NULL) == 0 &&
	    (v = msb__reallocarray(c->keys, c->n_keys + 1, sizeof(*v)))) {
		c->keys = v;
		c->keys[c->n_keys++] = TAKE_PTR(k);
	}
	msb_key_free(k);
	pthread_mutex_unlock(&c->lock);
}

msb_key *msb_session__event_key(struct msb_tool_call *c)
{
	struct msb_tool_session *s = c->s;
	msb_key *k = NULL;
	const char *cid = s->scope == MSB_SCOPE_CALL ? c->id : NULL;
	if (msb_caller_context_key(&s->ctx, s->agent_dir, cid, &k, NULL) < 0)
		return NULL;
	return k;
}

int msb_tool_call_key(msb_tool_call *c, msb_key **key, char **sentence, msb_error **err)
{
	if (!c)
		return msb_error_set(err, MSB_E_RUNTIME, "key: outside a tool call");
	if (!key || !sentence)
		return msb_error_set(err, MSB_E_VALUE, "key: missing argument");
	*key = NULL;
	*sentence = NULL;
	struct msb_tool_session *s = c->s;
	/* Read now, from the host's request context (2.4); at the call scope
	 * the key carries this call's id (2.7). */
	const char *cid = s->scope == MSB_SCOPE_CALL ? c->id : NULL;
	msb_error *e = NULL;
	int rc = msb_caller_context_key(&s->ctx, s->agent_dir, cid, key, &e);
	if (rc == MSB_E_LOOKUP) {
		/* No conversation: a refusal, never a placeholder key (2.5). */
		msb_error_free(e);
		*sentence = strdup("Error: no active thread context — the sandbox is keyed to a "
				   "conversation and this call has none");
		return *sentence ? 0 : msb__error_nomem(err);
	}
	if (rc < 0)
		return msb__error_propagate(err, e);
	return 0;
}

int msb_tool_call_guest_call_path(msb_tool_call *c, const char **path, msb_error **err)
{
	if (!c)
		return msb_error_set(err, MSB_E_RUNTIME,
				     "guest_call_path: outside a tool call (call it from the tool "
				     "body with its call)");
	if (!path)
		return msb_error_set(err, MSB_E_VALUE, "guest_call_path: missing argument");
	pthread_mutex_lock(&c->lock);
	bool closed = c->closed;
	if (!closed)
		c->path_allocated = true;
	pthread_mutex_unlock(&c->lock);
	/* Closed before cleanup begins: a lingering task cannot obtain a path
	 * that is being removed (15.16). */
	if (closed)
		return msb_error_set(err, MSB_E_RUNTIME,
				     "guest_call_path: tool call `%s` has ended", c->id);
	*path = c->id;
	return 0;
}

/* ---- acquire (15.13, 15.14, 15.22, 15.25) ------------------------------------------------------
 */

static int ladder(struct msb_tool_call *c, int code, msb_error *e, char **sentence, msb_error **err)
{
	const char *detail = msb_error_detail(e);
	msb__log(&c->s->r->lg, MSB_LOG_WARNING, "session",
		 "tool `%s` call `%s`: sandbox acquire failed: %s: %s%s%s", c->s->name, c->id,
		 msb_code_name(code), e ? msb_error_message(e) : "", detail ? ": " : "",
		 detail ? detail : "");
	char *out = NULL;
	switch (code) {
	case MSB_E_NOT_IMPLEMENTED:
		out = strdup(MSB_SENTENCE_NOT_INSTALLED);
		break;
	case MSB_E_NO_BACKEND:
		out = strdup(MSB_SENTENCE_NO_BACKEND);
		break;
	case MSB_E_VALUE:
		/* A stack-authored configuration message, not a backend's. */
		out = msb__asprintf("Error: %s", e ? msb_error_message(e) : "invalid request");
		break;
	case MSB_E_UNCLEAN:
		out = strdup(MSB_SENTENCE_UNCLEAN);
		break;
	default:
		out = strdup(MSB_SENTENCE_UNAVAILABLE);
		break;
	}
	if (!out)
		return msb__error_nomem(err);
	*sentence = out;
	return 0;
}

static void emit_refused(struct msb_tool_call *c, const msb_key *key, int code)
{
	msb_router *r = c->s->r;
	if (!msb_observer__wants(&r->observer, sandbox_acquired))
		return;
	msb_ev_sandbox_acquired ev = {
		.key = key, .spec = c->s->spec, .refusal = msb_code_name(code), .call = c->id};
	msb_observer__sandbox_acquired(&r->observer, &r->lg, &ev);
}

static void write_state(struct msb_tool_call *c, msb_sandbox *sb)
{
	struct msb_tool_session *s = c->s;
	if (!s->state_set)
		return;
	_cleanup_free_ char *json = NULL;
	msb_error *e = NULL;
	if (msb_effective_state_json(s->r, s->spec, msb_sandbox_backend_name(sb),
				     (const char *const *)s->host_tools, s->n_host_tools, c->id,
				     &json, &e) < 0 ||
	    s->state_set(s->state_set_ud, s->name, json) != 0)
		msb__log(&s->r->lg, MSB_LOG_WARNING, "session",
			 "tool `%s`: EffectiveState was not written: %s", s->name,
			 e ? msb_error_message(e) : "the setter failed");
	msb_error_free(e);
}

static struct msb_call_hold *find_hold(struct msb_tool_call *c, const msb_key *key)
{
	for (size_t i = 0; i < c->n_holds; i++)
		if (msb_key_equal(c->holds[i]->key, key))
			return c->holds[i];
	return NULL;
}

static int add_hold(struct msb_tool_call *c, struct msb_call_hold *h)
{
	pthread_mutex_lock(&c->lock);
	struct msb_call_hold **v = msb__reallocarray(c->holds, c->n_holds + 1, sizeof(*v));
	if (v) {
		c->holds = v;
		c->holds[c->n_holds++] = h;
	}
	pthread_mutex_unlock(&c->lock);
	return v ? 0 : -ENOMEM;
}

static int add_instance(struct msb_tool_call *c, struct msb_call_hold *h, msb_sandbox *sb)
{
	struct msb_sbref *inst = NULL;
	for (size_t i = 0; i < h->n_instances; i++)
		if (h->instances[i]->sb == sb)
			inst = h->instances[i];
	pthread_mutex_lock(&c->lock);
	bool have = false;
	for (size_t i = 0; i < c->n_insts; i++)
		have = have || c->insts[i].inst == inst;
	int rc = 0;
	if (!have && inst) {
		struct msb_call_instance *v =
			msb__reallocarray(c->insts, c->n_insts + 1, sizeof(*v));
		if (v) {
			c->insts = v;
			c->insts[c->n_insts++] = (struct msb_call_instance){h, inst, NULL};
		} else {
			rc = -ENOMEM;
		}
	}
	pthread_mutex_unlock(&c->lock);
	return rc;
}

int msb_tool_call_acquire(msb_tool_call *c, const msb_key *key, msb_sandbox **sandbox,
			  char **sentence, msb_error **err)
{
	if (!c)
		return msb_error_set(err, MSB_E_RUNTIME, "acquire: outside a tool call");
	if (!key || !sandbox || !sentence)
		return msb_error_set(err, MSB_E_VALUE, "acquire: missing argument");
	struct msb_tool_session *s = c->s;
	*sandbox = NULL;
	*sentence = NULL;

	pthread_mutex_lock(&c->acquire_lock);
	if (call_closed(c)) {
		pthread_mutex_unlock(&c->acquire_lock);
		return msb_error_set(err, MSB_E_RUNTIME, "acquire: tool call `%s` has ended",
				     c->id);
	}
	/* At the call scope the call id is folded into the key (2.7). */
	msb_key k = *key;
	if (s->scope == MSB_SCOPE_CALL && !k.call_id)
		k.call_id = c->id;
	msb_session__touch_key(c, &k);

	int rc = 0;
	msb_error *e = NULL;
	struct msb_call_hold *h = find_hold(c, &k);
	if (!h) {
		/* Admission around the call, automatically (15.22). */
		msb_enter_call_options eo = MSB_ENTER_CALL_OPTIONS_INIT;
		eo.admission_timeout = s->admission_timeout;
		eo.cleanup_timeout = s->reclaim_timeout;
		eo.call = c->id;
		eo.cancel = c->cancel;
		rc = msb_router_enter_call(s->r, &k, s->spec, &eo, &h, &e);
		if (rc < 0)
			emit_refused(c, &k, rc);
		else if (add_hold(c, h) < 0) {
			msb_admission__release(h, NULL);
			rc = msb__error_nomem(&e);
		}
	}
	msb_sandbox *sb = NULL;
	if (rc == 0)
		rc = msb_call_hold_acquire(h, &sb, &e);
	if (rc == 0 && add_instance(c, h, sb) < 0)
		rc = msb__error_nomem(&e);
	pthread_mutex_unlock(&c->acquire_lock);

	if (rc == MSB_E_CANCELLED)
		/* Cancellation is never turned into a sentence. */
		return msb__error_propagate(err, e);
	if (rc < 0) {
		rc = ladder(c, rc, e, sentence, err);
		msb_error_free(e);
		return rc;
	}
	write_state(c, sb);
	*sandbox = sb;
	return 0;
}

int msb_tool_call_report_unclean(msb_tool_call *c, msb_sandbox *sandbox, const char *reason,
				 msb_error **err)
{
	if (!c)
		return msb_error_set(err, MSB_E_RUNTIME, "report_unclean: outside a tool call");
	pthread_mutex_lock(&c->lock);
	struct msb_call_instance *ci = NULL;
	for (size_t i = 0; !c->closed && i < c->n_insts; i++)
		if (c->insts[i].inst->sb == sandbox)
			ci = &c->insts[i];
	int rc = 0;
	if (c->closed)
		rc = msb_error_set(err, MSB_E_RUNTIME, "report_unclean: tool call `%s` has ended",
				   c->id);
	else if (!ci)
		rc = msb_error_set(err, MSB_E_VALUE,
				   "report_unclean: the sandbox was not acquired by call `%s`",
				   c->id);
	else if (!ci->reason && !(ci->reason = strdup(reason ? reason : "unclean")))
		rc = msb__error_nomem(err);
	pthread_mutex_unlock(&c->lock);
	return rc;
}
