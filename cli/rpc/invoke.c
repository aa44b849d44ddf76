/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The generic layer between a request and a method's handler (invoke.h):
 * parameters read by their descriptors into the method's frame, the
 * handler called, the result built from the frame, the frame released.
 */
#include <stdlib.h>
#include <string.h>

#include "invoke.h"

static __thread rpc_call *current;

rpc_call *rpc_call_current(void)
{
	return current;
}

static void *at(void *frame, size_t off)
{
	return (char *)frame + off;
}

/* A method's parameters (a row without RPC_PARAMS takes none). */
static const rpc_param *params_of(const rpc_method *m)
{
	static const rpc_param none[] = {{.name = NULL}};
	return m->params ? m->params : none;
}

rpc_handle *rpc_call_handle(const rpc_call *c, rpc_hkind kind)
{
	for (const rpc_param *p = params_of(c->method); p->name; p++)
		if (p->type == RPC_T_HANDLE && p->kind == kind)
			return *(rpc_handle **)at(c->frame, p->off);
	return NULL;
}

/* ---- parameters ---------------------------------------------------------------------------- */

static bool declared(const rpc_method *m, const char *key)
{
	for (const rpc_param *p = params_of(m); p->name; p++)
		if (strcmp(p->name, key) == 0)
			return true;
	return false;
}

/* Strict: a parameter the method does not declare is refused (names
 * compare as C strings: the parser refuses a NUL in a member name). */
static int check_known(const rpc_method *m, json_t *params, msb_error **err)
{
	const char *key;
	json_t *v;
	if (m->flags & RPC_M_OPEN)
		return 0;
	json_object_foreach (params, key, v) {
		if (!declared(m, key))
			return rpc_bad_params(err, "`%s` takes no parameter `%.100s`", m->name,
					      key);
	}
	return 0;
}

static int read_handle(rpc_handles *t, const rpc_param *p, json_t *params, rpc_handle **out,
		       msb_error **err)
{
	const char *id = NULL;
	int r = rpc_str(params, p->name, true, &id, err);
	if (r < 0)
		return r;
	if (!t)
		return msb_error_set(err, MSB_E_RUNTIME, "no handle table for `%s`", p->name);
	return rpc_handle_find(t, id, p->name, p->kind, out, err);
}

static int read_enum(const rpc_param *p, json_t *params, int *out, msb_error **err)
{
	const char *s = NULL;
	int r = rpc_str(params, p->name, false, &s, err);
	if (r < 0 || !s)
		return r;
	for (int i = 0; p->names[i]; i++) {
		if (strcmp(p->names[i], s) == 0) {
			*out = i;
			return 0;
		}
	}
	char list[256] = "";
	size_t used = 0;
	for (int i = 0; p->names[i] && used < sizeof(list); i++) {
		int w = snprintf(list + used, sizeof(list) - used, "%s`%s`",
				 i == 0		   ? ""
				 : p->names[i + 1] ? ", "
						   : " or ",
				 p->names[i]);
		used += w > 0 ? (size_t)w : 0;
	}
	return rpc_bad_params(err, "`%s` must be %s", p->name, list);
}

/* One parameter into its field: the default first, then the value if present. */
static int read_param(rpc_handles *t, const rpc_param *p, json_t *params, void *frame,
		      msb_error **err)
{
	void *f = at(frame, p->off);
	bool req = p->flags & RPC_REQUIRED;
	rpc_bytes *b = f;
	rpc_doc *d = f;
	json_t *v = json_object_get(params, p->name);
	switch (p->type) {
	case RPC_T_HANDLE:
		return read_handle(t, p, params, f, err);
	case RPC_T_STR:
		*(const char **)f = p->str;
		return rpc_str(params, p->name, req, f, err);
	case RPC_T_BOOL:
		return rpc_bool(params, p->name, f, err);
	case RPC_T_U64:
		*(uint64_t *)f = (uint64_t)p->num;
		return rpc_u64(params, p->name, req, f, err);
	case RPC_T_DOUBLE:
		*(double *)f = p->num;
		return rpc_double(params, p->name, req, f, err);
	case RPC_T_STRV:
		return rpc_strv(params, p->name, req, f, err);
	case RPC_T_BYTES:
		return rpc_base64(params, p->name, req, &b->data, &b->len, err);
	case RPC_T_DOC:
		return rpc_json_text(params, p->name, req, &d->text, &d->len, err);
	case RPC_T_ENUM:
		*(int *)f = (int)p->num;
		return read_enum(p, params, f, err);
	case RPC_T_OBJECT:
	case RPC_T_SPEC:
	case RPC_T_KEY:
	case RPC_T_SINK:
	case RPC_T_OUTPUTS:
	case RPC_T_LIMITS:
	case RPC_T_OUTCOME:
	default:
		break;
	}
	if (v && json_is_null(v))
		v = NULL;
	if (!v)
		return req ? rpc_bad_params(err, "`%s` is required", p->name)
			   : rpc_read_composite(p, NULL, f, err);
	return rpc_read_composite(p, v, f, err);
}

static void free_param(rpc_handles *t, const rpc_param *p, void *frame)
{
	void *f = at(frame, p->off);
	switch (p->type) {
	case RPC_T_HANDLE:
		if (*(rpc_handle **)f)
			rpc_handle_put(t, *(rpc_handle **)f);
		break;
	case RPC_T_STRV:
		free(*(const char ***)f);
		break;
	case RPC_T_BYTES:
		free(((rpc_bytes *)f)->data);
		break;
	case RPC_T_DOC:
		free(((rpc_doc *)f)->text);
		break;
	case RPC_T_STR:
	case RPC_T_BOOL:
	case RPC_T_U64:
	case RPC_T_DOUBLE:
	case RPC_T_OBJECT:
	case RPC_T_ENUM:
		break;
	case RPC_T_SPEC:
	case RPC_T_KEY:
	case RPC_T_SINK:
	case RPC_T_OUTPUTS:
	case RPC_T_LIMITS:
	case RPC_T_OUTCOME:
	default:
		rpc_free_composite(p, f);
		break;
	}
}

/* ---- results ------------------------------------------------------------------------------- */

static json_t *b64_json(const uint8_t *data, size_t len)
{
	char *t = msb__base64_encode(data, len);
	json_t *v = t ? json_string(t) : NULL;
	free(t);
	return v;
}

json_t *rpc_exec_result_json(const msb_exec_result *r)
{
	return json_pack("{s:o, s:o, s:i, s:i, s:b, s:b, s:b, s:b}", "stdout",
			 b64_json(r->stdout_bytes, r->stdout_len), "stderr",
			 b64_json(r->stderr_bytes, r->stderr_len), "exit_code", r->exit_code,
			 "term_signal", r->term_signal, "truncated", r->truncated, "oom_killed",
			 r->oom_killed, "pids_exhausted", r->pids_exhausted, "no_space",
			 r->no_space);
}

static json_t *entry_json(const msb_entry *e)
{
	json_t *o = json_pack("{s:o, s:s, s:b}", "path", rpc_text(e->path), "kind",
			      msb_entry_kind_name(e->kind), "size_known", e->size_known);
	if (o && e->size_known)
		json_object_set_new(o, "size_bytes", json_integer((json_int_t)e->size_bytes));
	return o;
}

static json_t *key_json(const msb_key *k)
{
	return json_pack("{s:s, s:s, s:s, s:s?}", "scope", k->scope, "thread_id", k->thread_id,
			 "agent_dir", k->agent_dir, "call_id", k->call_id);
}

json_t *rpc_strv_json(char *const *v)
{
	json_t *a = json_array();
	for (size_t i = 0; a && v && v[i]; i++)
		json_array_append_new(a, rpc_text(v[i]));
	return a;
}

static rpc_handle *first_handle(const rpc_call *c)
{
	for (const rpc_param *p = params_of(c->method); p->name; p++)
		if (p->type == RPC_T_HANDLE)
			return *(rpc_handle **)at(c->frame, p->off);
	return NULL;
}

/* The object into a new handle; its name (a sandbox's with its instance
 * and backend) into out. */
static int put_handle(const rpc_call *c, const rpc_result *rs, rpc_new *n, json_t *out,
		      msb_error **err)
{
	rpc_handle *parent = first_handle(c);
	n->extra.call_owned = rs->kind == H_SANDBOX && parent && parent->kind == H_CALL;
	void *obj = n->obj;
	n->obj = NULL;
	rpc_handle *h = rpc_handle_add(c->handles, rs->kind, obj, parent, &n->extra);
	n->extra.aux = NULL;
	n->extra.aux_free = NULL;
	if (!h)
		return msb_error_set(err, MSB_E_NOMEM, "out of memory");
	json_object_set_new(out, rs->name, json_string(h->id));
	if (rs->kind == H_SANDBOX) {
		json_object_set_new(out, "instance_id", rpc_text(msb_sandbox_instance_id(obj)));
		json_object_set_new(out, "backend", rpc_text(msb_sandbox_backend_name(obj)));
	}
	return 0;
}

static json_t *parse_text(const char *text, msb_error **err)
{
	json_error_t jerr;
	json_t *v = json_loads(text, JSON_DECODE_ANY, &jerr);
	if (!v)
		msb_error_set(err, MSB_E_RUNTIME, "the library's JSON does not parse: %s",
			      jerr.text);
	return v;
}

/* The JSON value of one result field: 0 and *out (NULL for a NULL pointer). */
static int result_value(const rpc_result *rs, void *f, json_t **out, msb_error **err)
{
	const rpc_bytes *b = f;
	const rpc_entries *es = f;
	const rpc_landed *l = f;
	json_t *v = NULL;
	*out = NULL;
	switch (rs->type) {
	case RPC_R_STR:
	case RPC_R_TEXT:
	case RPC_R_KEY:
	case RPC_R_JSON:
	case RPC_R_JSON_TEXT:
		if (!*(void **)f)
			return 0;
		break;
	case RPC_R_END:
	case RPC_R_BOOL:
	case RPC_R_U64:
	case RPC_R_SIZE:
	case RPC_R_DOUBLE:
	case RPC_R_BYTES:
	case RPC_R_EXEC:
	case RPC_R_ENTRY:
	case RPC_R_ENTRIES:
	case RPC_R_LANDED:
	case RPC_R_STRV:
	case RPC_R_HANDLE:
	default:
		break;
	}
	switch (rs->type) {
	case RPC_R_STR:
	case RPC_R_TEXT:
		v = rpc_text(*(const char **)f);
		break;
	case RPC_R_BOOL:
		v = json_boolean(*(bool *)f);
		break;
	case RPC_R_U64:
		v = json_integer((json_int_t) * (uint64_t *)f);
		break;
	case RPC_R_SIZE:
		v = json_integer((json_int_t) * (size_t *)f);
		break;
	case RPC_R_DOUBLE:
		v = json_real(*(double *)f);
		break;
	case RPC_R_BYTES:
		v = b64_json(b->data, b->len);
		break;
	case RPC_R_EXEC:
		v = rpc_exec_result_json(f);
		break;
	case RPC_R_ENTRY:
		v = ((msb_entry *)f)->path ? entry_json(f) : json_null();
		break;
	case RPC_R_ENTRIES:
		v = json_array();
		for (size_t i = 0; v && i < es->n; i++)
			json_array_append_new(v, entry_json(&es->v[i]));
		break;
	case RPC_R_LANDED:
		v = rpc_landed_json(l->v, l->n);
		break;
	case RPC_R_KEY:
		v = key_json(*(msb_key **)f);
		break;
	case RPC_R_STRV:
		v = rpc_strv_json(*(char ***)f);
		break;
	case RPC_R_JSON:
		v = json_incref(*(json_t **)f);
		break;
	case RPC_R_JSON_TEXT:
		if (!(v = parse_text(*(char **)f, err)))
			return MSB_E_RUNTIME;
		break;
	case RPC_R_HANDLE:
	case RPC_R_END:
		break;
	}
	if (!v)
		return msb_error_set(err, MSB_E_NOMEM, "out of memory");
	*out = v;
	return 0;
}

static int put_value(const rpc_result *rs, json_t *v, json_t *out, msb_error **err)
{
	if (!v) {
		if (rs->name && !(rs->flags & RPC_OMIT_NULL))
			json_object_set_new(out, rs->name, json_null());
		return 0;
	}
	if (rs->name) {
		json_object_set_new(out, rs->name, v);
		return 0;
	}
	int r = json_is_object(v) ? json_object_update(out, v) : -1;
	json_decref(v);
	return r < 0 ? msb_error_set(err, MSB_E_RUNTIME, "a merged result is not an object") : 0;
}

static int put_results(const rpc_call *c, json_t *out, msb_error **err)
{
	for (const rpc_result *rs = c->method->results; rs && rs->type != RPC_R_END; rs++) {
		void *f = at(c->frame, rs->off);
		json_t *v = NULL;
		int r;
		if (rs->type == RPC_R_HANDLE && ((rpc_new *)f)->obj)
			r = put_handle(c, rs, f, out, err);
		else if (rs->type == RPC_R_HANDLE)
			r = put_value(rs, NULL, out, err);
		else if ((r = result_value(rs, f, &v, err)) == 0)
			r = put_value(rs, v, out, err);
		if (r < 0)
			return r;
	}
	return 0;
}

static void free_result(const rpc_call *c, const rpc_result *rs)
{
	void *f = at(c->frame, rs->off);
	switch (rs->type) {
	case RPC_R_TEXT:
	case RPC_R_JSON_TEXT:
		free(*(char **)f);
		break;
	case RPC_R_BYTES:
		free(((rpc_bytes *)f)->data);
		break;
	case RPC_R_EXEC:
		msb_exec_result_clear(f);
		break;
	case RPC_R_ENTRY:
		if (((msb_entry *)f)->path)
			msb_entry_clear(f);
		break;
	case RPC_R_ENTRIES:
		msb_entries_free(((rpc_entries *)f)->v, ((rpc_entries *)f)->n);
		break;
	case RPC_R_LANDED:
		msb_landed_artifacts_free(((rpc_landed *)f)->v, ((rpc_landed *)f)->n);
		break;
	case RPC_R_KEY:
		msb_key_free(*(msb_key **)f);
		break;
	case RPC_R_STRV:
		msb_strv_free(*(char ***)f);
		break;
	case RPC_R_JSON:
		json_decref(*(json_t **)f);
		break;
	case RPC_R_HANDLE:
		if (((rpc_new *)f)->obj || ((rpc_new *)f)->extra.aux)
			rpc_object_free(rs->kind, ((rpc_new *)f)->obj, &((rpc_new *)f)->extra);
		break;
	case RPC_R_STR:
	case RPC_R_BOOL:
	case RPC_R_U64:
	case RPC_R_SIZE:
	case RPC_R_DOUBLE:
	case RPC_R_END:
		break;
	}
}

/* ---- one call ------------------------------------------------------------------------------- */

/* The handler with the call's context published, then the closing
 * parameters closed and the result built. */
static int call_handler(rpc_call *c, json_t **result, msb_error **err)
{
	const rpc_method *m = c->method;
	current = c;
	int r = m->fn ? m->fn(c, c->frame, err) : 0;
	current = NULL;
	if (r < 0)
		return r;
	for (const rpc_param *p = params_of(m); p->name; p++)
		if (p->type == RPC_T_HANDLE && (p->flags & RPC_CLOSE))
			rpc_handle_close(c->handles, *(rpc_handle **)at(c->frame, p->off));
	if (m->flags & RPC_M_NULL_RESULT)
		return 0;
	json_t *out = json_object();
	if (!out)
		return msb_error_set(err, MSB_E_NOMEM, "out of memory");
	r = put_results(c, out, err);
	if (r < 0) {
		json_decref(out);
		return r;
	}
	*result = out;
	return 0;
}

int rpc_invoke(rpc_server *srv, rpc_handles *handles, const rpc_method *m, json_t *params,
	       json_t **result, msb_error **err)
{
	if (params && !json_is_object(params))
		return rpc_bad_params(err, "`%s` takes named parameters (an object)", m->name);
	json_t *empty = params ? NULL : json_object();
	if (!params)
		params = empty;
	int r = check_known(m, params, err);
	void *frame = r == 0 ? calloc(1, m->frame_size ? m->frame_size : 1) : NULL;
	if (r == 0 && !frame)
		r = msb_error_set(err, MSB_E_NOMEM, "out of memory");
	rpc_call c = {srv, handles, m, frame};
	for (const rpc_param *p = params_of(m); r == 0 && p->name; p++)
		r = read_param(handles, p, params, frame, err);
	if (r == 0)
		r = call_handler(&c, result, err);
	/* The frame starts zeroed: every field is released, read or not. */
	for (const rpc_param *q = params_of(m); frame && q->name; q++)
		free_param(handles, q, frame);
	for (const rpc_result *rs = m->results; frame && rs && rs->type != RPC_R_END; rs++)
		free_result(&c, rs);
	free(frame);
	json_decref(empty);
	return r;
}
