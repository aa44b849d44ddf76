/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The composite parameters of the JSON-RPC methods (invoke.h): objects read
 * member by member as strictly as the parameters themselves, and documents
 * handed to the library's own JSON readers.
 */
#include <stdlib.h>
#include <string.h>

#include "invoke.h"

/* Refuse a member of object `name` that is not in `members`. */
static int only_members(json_t *o, const char *name, const char *const *members, msb_error **err)
{
	const char *member;
	json_t *v;
	json_object_foreach (o, member, v) {
		bool known = false;
		for (size_t i = 0; members[i]; i++)
			known = known || strcmp(member, members[i]) == 0;
		if (!known)
			return rpc_bad_params(err, "`%s` has no member `%.60s`", name, member);
	}
	return 0;
}

static int need_object(json_t *v, const char *name, const char *what, msb_error **err)
{
	return json_is_object(v) ? 0 : rpc_bad_params(err, "`%s` must be %s", name, what);
}

/* TransferLimits read as the files_out of a spec {kind: limits, files_out: v}. */
static int limits_spec(json_t *v, const char *name, msb_spec **out, msb_error **err)
{
	json_t *wrap = json_pack("{s:s, s:O}", "kind", "limits", "files_out", v);
	char *text = wrap ? json_dumps(wrap, JSON_COMPACT) : NULL;
	json_decref(wrap);
	if (!text)
		return msb_error_set(err, MSB_E_NOMEM, "out of memory");
	int r = msb_spec_from_json(text, strlen(text), out, err);
	free(text);
	if (r < 0) {
		msb_error_wrap(err, "%s", name);
		return RPC_INVALID_PARAMS;
	}
	return 0;
}

/* The spec's reader names its document ("spec: ..."): no second prefix. */
static int read_spec(const rpc_param *p, json_t *v, msb_spec **out, msb_error **err)
{
	int r = need_object(v, p->name, "an object", err);
	char *text = r == 0 ? json_dumps(v, JSON_COMPACT) : NULL;
	if (r < 0)
		return r;
	if (!text)
		return msb_error_set(err, MSB_E_NOMEM, "out of memory");
	r = msb_spec_from_json(text, strlen(text), out, err);
	free(text);
	return r;
}

/* A key object {scope, thread_id, agent_dir, call_id?}; strings borrowed. */
static int read_key(const rpc_param *p, json_t *v, rpc_key *out, msb_error **err)
{
	static const char *const members[] = {"scope", "thread_id", "agent_dir", "call_id", NULL};
	if (!json_is_object(v))
		return rpc_bad_params(err, "`%s` must be a key object", p->name);
	msb_key key = {NULL, NULL, NULL, NULL};
	int r;
	if ((r = only_members(v, p->name, members, err)) < 0)
		return r;
	if ((r = rpc_str(v, "scope", true, &key.scope, err)) < 0 ||
	    (r = rpc_str(v, "thread_id", true, &key.thread_id, err)) < 0 ||
	    (r = rpc_str(v, "agent_dir", true, &key.agent_dir, err)) < 0 ||
	    (r = rpc_str(v, "call_id", false, &key.call_id, err)) < 0) {
		msb_error_wrap(err, "%s", p->name);
		return r;
	}
	out->key = key;
	out->present = true;
	return 0;
}

/* A filesystem sink {directory, existing?: "refuse"|"replace"} (msb_fs_sink_new). */
static int read_sink(const rpc_param *p, json_t *v, msb_output_sink **out, msb_error **err)
{
	static const char *const members[] = {"directory", "existing", NULL};
	int r = need_object(v, p->name, "an object {directory, existing}", err);
	if (r < 0 || (r = only_members(v, p->name, members, err)) < 0)
		return r;
	const char *dir = NULL, *existing = "refuse";
	if ((r = rpc_str(v, "directory", true, &dir, err)) < 0 ||
	    (r = rpc_str(v, "existing", false, &existing, err)) < 0) {
		msb_error_wrap(err, "%s", p->name);
		return r;
	}
	msb_fs_sink_options so = MSB_FS_SINK_OPTIONS_INIT;
	if (strcmp(existing, "replace") == 0)
		so.existing = MSB_LANDING_REPLACE;
	else if (strcmp(existing, "refuse") != 0)
		return rpc_bad_params(err, "`%s.existing` must be `refuse` or `replace`", p->name);
	return msb_fs_sink_new(dir, &so, out, err);
}

static int read_outputs(const rpc_param *p, json_t *v, rpc_outputs *out, msb_error **err)
{
	return rpc_call_time_outputs_of(v, p->name, &out->holder, &out->v, &out->n, err);
}

/* TransferLimits, read by the spec's own reader as its files_out. */
static int read_limits(const rpc_param *p, json_t *v, msb_transfer_limits *out, msb_error **err)
{
	if (!v) {
		*out = MSB_DEFAULT_TRANSFER_LIMITS;
		return 0;
	}
	int r = need_object(v, p->name, "an object of transfer limits", err);
	msb_spec *spec = NULL;
	if (r < 0 || (r = limits_spec(v, p->name, &spec, err)) < 0)
		return r;
	*out = msb_spec_files_out(spec);
	msb_spec_unref(spec);
	return 0;
}

/* A call's outcome {kind: result|refusal|error|cancelled, text?, error?}. */
static int read_outcome(const rpc_param *p, json_t *v, msb_call_outcome *out, msb_error **err)
{
	static const char *const members[] = {"kind", "text", "error", NULL};
	msb_call_outcome oc = MSB_CALL_OUTCOME_INIT;
	const char *kind = "result", *error = NULL;
	int r;
	if (v && !json_is_object(v))
		return rpc_bad_params(err, "`%s` must be an object", p->name);
	if (v && ((r = only_members(v, p->name, members, err)) < 0 ||
		  (r = rpc_str(v, "kind", false, &kind, err)) < 0 ||
		  (r = rpc_str(v, "text", false, &oc.text, err)) < 0 ||
		  (r = rpc_str(v, "error", false, &error, err)) < 0))
		return r;
	if (strcmp(kind, "result") == 0) {
		oc.kind = MSB_CALL_RESULT;
	} else if (strcmp(kind, "refusal") == 0) {
		oc.kind = MSB_CALL_REFUSAL;
	} else if (strcmp(kind, "cancelled") == 0) {
		oc.kind = MSB_CALL_CANCELLED;
	} else if (strcmp(kind, "error") == 0) {
		oc.kind = MSB_CALL_ERROR;
		oc.error_code = error ? msb_code_from_name(error) : MSB_E_RUNTIME;
		if (oc.error_code == 0)
			return rpc_bad_params(err, "`%s.error`: `%.60s` is not an error name",
					      p->name, error);
	} else {
		return rpc_bad_params(err,
				      "`%s.kind` must be one of `result`, `refusal`, "
				      "`error`, `cancelled`",
				      p->name);
	}
	*out = oc;
	return 0;
}

int rpc_read_composite(const rpc_param *p, json_t *v, void *field, msb_error **err)
{
	switch (p->type) {
	case RPC_T_LIMITS:
		return read_limits(p, v, field, err);
	case RPC_T_OUTCOME:
		return read_outcome(p, v, field, err);
	case RPC_T_HANDLE:
	case RPC_T_STR:
	case RPC_T_BOOL:
	case RPC_T_U64:
	case RPC_T_DOUBLE:
	case RPC_T_STRV:
	case RPC_T_BYTES:
	case RPC_T_DOC:
	case RPC_T_OBJECT:
	case RPC_T_SPEC:
	case RPC_T_KEY:
	case RPC_T_SINK:
	case RPC_T_OUTPUTS:
	case RPC_T_ENUM:
	default:
		break;
	}
	if (!v)
		return 0; /* absent: the field stays zero */
	switch (p->type) {
	case RPC_T_OBJECT:
		if (!json_is_object(v))
			return rpc_bad_params(err, "`%s` must be an object", p->name);
		*(json_t **)field = v;
		return 0;
	case RPC_T_SPEC:
		return read_spec(p, v, field, err);
	case RPC_T_KEY:
		return read_key(p, v, field, err);
	case RPC_T_SINK:
		return read_sink(p, v, field, err);
	case RPC_T_OUTPUTS:
		return read_outputs(p, v, field, err);
	case RPC_T_HANDLE:
	case RPC_T_STR:
	case RPC_T_BOOL:
	case RPC_T_U64:
	case RPC_T_DOUBLE:
	case RPC_T_STRV:
	case RPC_T_BYTES:
	case RPC_T_DOC:
	case RPC_T_LIMITS:
	case RPC_T_OUTCOME:
	case RPC_T_ENUM:
	default:
		return msb_error_set(err, MSB_E_RUNTIME, "`%s`: not a composite parameter",
				     p->name);
	}
}

void rpc_free_composite(const rpc_param *p, void *field)
{
	rpc_outputs *o = field;
	switch (p->type) {
	case RPC_T_SPEC:
		msb_spec_unref(*(msb_spec **)field);
		break;
	case RPC_T_SINK:
		msb_output_sink_free(*(msb_output_sink **)field);
		break;
	case RPC_T_OUTPUTS:
		free((void *)o->v);
		msb_spec_unref(o->holder);
		break;
	case RPC_T_HANDLE:
	case RPC_T_STR:
	case RPC_T_BOOL:
	case RPC_T_U64:
	case RPC_T_DOUBLE:
	case RPC_T_STRV:
	case RPC_T_BYTES:
	case RPC_T_DOC:
	case RPC_T_OBJECT:
	case RPC_T_KEY:
	case RPC_T_LIMITS:
	case RPC_T_OUTCOME:
	case RPC_T_ENUM:
	default:
		break;
	}
}
