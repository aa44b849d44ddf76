/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One run and the one door (checklist 13.16-13.29): every host-tool call a
 * guest makes, over any transport, is answered here.
 */
#include <pthread.h>

#include "core/core.h"
#include "core/hosttools/hosttools_int.h"

/* What the smallest response that can cross costs: json "0" is one byte. */
#define SMALLEST_RESPONSE 1
#define NOT_JSON "Error: this host-tool request is not valid JSON"
#define USER_PREREQUISITES                                                                         \
	"a host serves one by giving its registry a mint_user_identity callback, which mints "     \
	"that run's authority"
#define USER_PARAMETER "user_identity"

struct msb_host_tool_run {
	msb_host_tool_registry *reg;
	msb_key *key;
	char *call;
	pthread_mutex_t lock;
	uint64_t calls;
	uint64_t delivered;
	uint64_t delivered_bytes;
	bool minted_tried;
	char *minted;
};

int msb_host_tool_result_make(const char *value_json, const char *refusal,
			      msb_host_tool_result *out, msb_error **err)
{
	if (!out || (value_json == NULL) == (refusal == NULL))
		return msb_error_set(err, MSB_E_VALUE,
				     "a host-tool call result carries exactly one of value_json or "
				     "refusal - both or neither would let a caller read a refused "
				     "call as a delivered one");
	char *v = msb__strdup(value_json), *f = msb__strdup(refusal);
	if ((value_json && !v) || (refusal && !f)) {
		free(v);
		free(f);
		return msb__error_nomem(err);
	}
	out->value_json = v;
	out->refusal = f;
	return 0;
}

void msb_host_tool_result_clear(msb_host_tool_result *res)
{
	if (!res)
		return;
	free(res->value_json);
	free(res->refusal);
	res->value_json = res->refusal = NULL;
}

int msb_host_tool_run_new(msb_host_tool_registry *r, const msb_key *key, const char *call,
			  msb_host_tool_run **out, msb_error **err)
{
	if (!r || !out)
		return msb_error_set(err, MSB_E_VALUE, "host tool run: NULL argument");
	msb_host_tool_run *run = calloc(1, sizeof(*run));
	if (!run)
		return msb__error_nomem(err);
	if (key) {
		int rc = msb_key_dup(key, &run->key, err);
		if (rc < 0) {
			free(run);
			return rc;
		}
	}
	if (call && !(run->call = msb__strdup(call))) {
		msb_key_free(run->key);
		free(run);
		return msb__error_nomem(err);
	}
	pthread_mutex_init(&run->lock, NULL);
	run->reg = msb_host_tool_registry_ref(r);
	*out = run;
	return 0;
}

void msb_host_tool_run_free(msb_host_tool_run *run)
{
	if (!run)
		return;
	msb_host_tool_registry_unref(run->reg);
	msb_key_free(run->key);
	free(run->call);
	free(run->minted);
	pthread_mutex_destroy(&run->lock);
	free(run);
}

#define RUN_GETTER(field)                                                                          \
	uint64_t msb_host_tool_run_##field(const msb_host_tool_run *crun)                          \
	{                                                                                          \
		msb_host_tool_run *run = (msb_host_tool_run *)crun;                                \
		pthread_mutex_lock(&run->lock);                                                    \
		uint64_t v = run->field;                                                           \
		pthread_mutex_unlock(&run->lock);                                                  \
		return v;                                                                          \
	}
RUN_GETTER(calls)
RUN_GETTER(delivered)
RUN_GETTER(delivered_bytes)

/* Python-repr-like quoting, so the sentences read as the seed's do. */
char *msb_hosttools__quote(const char *s, bool bound)
{
	bool has_sq = strchr(s, '\'') != NULL, has_dq = strchr(s, '"') != NULL;
	char q = has_sq && !has_dq ? '"' : '\'';
	msb_buf b = MSB_BUF_INIT;
	msb__buf_append(&b, &q, 1);
	size_t chars = 0;
	bool truncated = false;
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if ((*p & 0xC0) != 0x80 && bound && chars++ == MSB_HOST_TOOL_BOUND) {
			truncated = true;
			break;
		}
		if (*p == '\\' || *p == (unsigned char)q)
			msb__buf_printf(&b, "\\%c", *p);
		else if (*p == '\n')
			msb__buf_puts(&b, "\\n");
		else if (*p == '\t')
			msb__buf_puts(&b, "\\t");
		else if (*p == '\r')
			msb__buf_puts(&b, "\\r");
		else if (*p < 0x20 || *p == 0x7f)
			msb__buf_printf(&b, "\\x%02x", *p);
		else
			msb__buf_append(&b, p, 1);
	}
	if (truncated)
		msb__buf_puts(&b, " (truncated)");
	msb__buf_append(&b, &q, 1);
	return msb__buf_steal_str(&b);
}

/* Bound free text (a binding message) the same way, unquoted. */
static char *bounded(const char *s)
{
	size_t chars = 0;
	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		if ((*p & 0xC0) != 0x80 && chars++ == MSB_HOST_TOOL_BOUND)
			return msb__asprintf("%.*s (truncated)",
					     (int)(p - (const unsigned char *)s), s);
	return msb__strdup(s);
}

static const char *py_type(json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_OBJECT:
		return "dict";
	case JSON_ARRAY:
		return "list";
	case JSON_STRING:
		return "str";
	case JSON_INTEGER:
		return "int";
	case JSON_REAL:
		return "float";
	case JSON_TRUE:
	case JSON_FALSE:
		return "bool";
	case JSON_NULL:
	default:
		return "NoneType";
	}
}

/* What one call learnt, for its HostToolCalled event. */
struct called {
	char *tool; /* owned */
	bool guest_influenced;
	const char *sink;
	const char *outcome;
	uint64_t response_bytes;
};

MSB_PRINTF(2, 3) static int refuse(msb_host_tool_result *out, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *s = msb__vasprintf(fmt, ap);
	va_end(ap);
	if (!s)
		return -ENOMEM;
	out->value_json = NULL;
	out->refusal = s;
	return 0;
}

/* Mint once per run (13.16). Returns the token (borrowed) or NULL. */
static const char *mint(msb_host_tool_run *run, const char *tool)
{
	pthread_mutex_lock(&run->lock);
	bool tried = run->minted_tried;
	run->minted_tried = true;
	pthread_mutex_unlock(&run->lock);
	if (tried)
		return run->minted;
	msb_error *e = NULL;
	char *tok = NULL;
	int rc = run->reg->mint(run->reg->mint_ud, run->key, &tok, &e);
	if (rc < 0 || !tok) {
		msb__log(&run->reg->log, MSB_LOG_WARNING, "hosttools",
			 "minting the user's identity for `%s` failed: %s", tool,
			 e ? msb_error_message(e) : "no identity returned");
		msb_error_free(e);
		free(tok);
		return NULL;
	}
	pthread_mutex_lock(&run->lock);
	run->minted = tok;
	pthread_mutex_unlock(&run->lock);
	return tok;
}

/* With a response slot reserved: validate, call, serialise and cap. Returns
 * 0 (a value or a refusal in *out), or a negative code (cancelled, OOM). */
static int deliver(msb_host_tool_run *run, const struct msb_hosttools_entry *e, const char *qname,
		   json_t *args, int64_t framing, msb_host_tool_result *out, struct called *c,
		   msb_error **err)
{
	msb_host_tool_registry *r = run->reg;
	/* 13.22: host-side, at the one door. */
	_cleanup_free_ char *why = NULL;
	int v = msb_hosttools__schema_validate(e->schema, args, &why);
	if (v < 0)
		return msb__error_nomem(err);
	if (v > 0) {
		_cleanup_free_ char *b = bounded(why);
		if (!b)
			return msb__error_nomem(err);
		return refuse(out, "Error: arguments do not bind to host tool %s: %s", qname, b) < 0
			       ? msb__error_nomem(err)
			       : 0;
	}
	const char *user = NULL;
	if (e->declared && e->decl.identity_leg == MSB_LEG_VALUE &&
	    e->decl.identity == MSB_IDENTITY_USER) {
		user = mint(run, e->name);
		if (!user)
			return refuse(out,
				      "Error: the user's identity could not be minted for this "
				      "run, "
				      "so %s was not called — the reason is in the host's log",
				      qname) < 0
				       ? msb__error_nomem(err)
				       : 0;
	}
	_cleanup_free_ char *args_text = json_dumps(args, JSON_COMPACT | JSON_PRESERVE_ORDER);
	if (!args_text)
		return msb__error_nomem(err);
	_cleanup_free_ char *result = NULL;
	msb_error *te = NULL;
	int rc = e->fn(e->ud, args_text, user, &result, &te);
	if (rc == MSB_E_CANCELLED) {
		msb__log(&r->log, MSB_LOG_WARNING, "hosttools",
			 "the call of `%s` was cancelled mid-effect - nothing was delivered, but "
			 "any outward effect the tool had begun is not recorded and may have "
			 "completed",
			 e->name);
		c->outcome = "cancelled";
		if (te)
			return msb__error_propagate(err, te);
		return msb_error_set(err, MSB_E_CANCELLED, "host tool `%s` was cancelled", e->name);
	}
	if (rc < 0) {
		/* 13.23: the detail goes to the log, never to the guest. */
		msb__log(&r->log, MSB_LOG_WARNING, "hosttools", "host tool `%s` failed: %s%s%s",
			 e->name, te ? msb_error_message(te) : msb_code_name(rc),
			 te && msb_error_detail(te) ? ": " : "",
			 te && msb_error_detail(te) ? msb_error_detail(te) : "");
		msb_error_free(te);
		return refuse(out, "Error: host tool %s failed — the reason is in the host's log",
			      qname) < 0
			       ? msb__error_nomem(err)
			       : 0;
	}
	msb_error_free(te);
	/* 13.24: strict JSON, non-ASCII kept, NaN/Infinity never. */
	json_t *val = NULL;
	if (result) {
		json_error_t je;
		val = json_loads(result, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &je);
		if (!val)
			msb__log(&r->log, MSB_LOG_WARNING, "hosttools",
				 "host tool `%s` returned a value that is not strict JSON: %s",
				 e->name, je.text);
	}
	_cleanup_free_ char *enc = val ? json_dumps(val, JSON_ENCODE_ANY | JSON_PRESERVE_ORDER |
								 JSON_REAL_PRECISION(17))
				       : NULL;
	json_decref(val);
	if (!enc)
		return refuse(out,
			      "Error: host tool %s returned a value that cannot be carried as JSON",
			      qname) < 0
			       ? msb__error_nomem(err)
			       : 0;
	/* 13.25: what crosses is the value plus the transport's framing. */
	uint64_t crossing = (uint64_t)strlen(enc) + (uint64_t)framing;
	if (crossing > r->limits.max_bytes_per_file)
		return refuse(out,
			      "Error: host tool %s's response is %llu bytes and the per-response "
			      "cap allows %llu",
			      qname, (unsigned long long)crossing,
			      (unsigned long long)r->limits.max_bytes_per_file) < 0
			       ? msb__error_nomem(err)
			       : 0;
	pthread_mutex_lock(&run->lock);
	bool over = run->delivered_bytes + crossing > r->limits.max_total_bytes;
	if (!over)
		run->delivered_bytes += crossing;
	pthread_mutex_unlock(&run->lock);
	if (over)
		return refuse(out,
			      "Error: delivering host tool %s's %llu-byte response would exceed "
			      "this run's total response cap (%llu bytes)",
			      qname, (unsigned long long)crossing,
			      (unsigned long long)r->limits.max_total_bytes) < 0
			       ? msb__error_nomem(err)
			       : 0;
	c->response_bytes = crossing;
	out->refusal = NULL;
	out->value_json = TAKE_PTR(enc);
	return 0;
}

/* 13.21: what is knowable before the body runs, so a sink tool never acts
 * for a response nobody can be handed. Reserves the delivery slot (true), or
 * refuses into *out with *rc refuse()'s return (false). */
static bool reserve_slot(msb_host_tool_run *run, int64_t framing, msb_host_tool_result *out,
			 int *rc)
{
	msb_host_tool_registry *r = run->reg;
	const msb_transfer_limits *l = &r->limits;
	pthread_mutex_lock(&run->lock);
	int budget = 0;
	if (run->delivered + 1 > l->max_files)
		budget = 1;
	else if (run->delivered_bytes + SMALLEST_RESPONSE + (uint64_t)framing > l->max_total_bytes)
		budget = 2;
	else if (SMALLEST_RESPONSE + (uint64_t)framing > l->max_bytes_per_file)
		budget = 3;
	else
		run->delivered++;
	pthread_mutex_unlock(&run->lock);
	if (!budget)
		return true;
	if (budget == 1)
		*rc = refuse(out,
			     "Error: this run's delivered-response cap (%llu) is exhausted — "
			     "finish with the results already delivered",
			     (unsigned long long)l->max_files);
	else if (budget == 2)
		*rc = refuse(out,
			     "Error: this run's response byte budget (%llu) is exhausted — "
			     "finish with the results already delivered",
			     (unsigned long long)l->max_total_bytes);
	else {
		msb__log(&r->log, MSB_LOG_WARNING, "hosttools",
			 "the per-response cap (%llu bytes) cannot hold a one-byte value "
			 "inside this transport's %lld bytes of framing, so nothing can be "
			 "delivered",
			 (unsigned long long)l->max_bytes_per_file, (long long)framing);
		*rc = refuse(out, "Error: no host-tool response can fit this run's "
				  "per-response cap — report this and carry on without host "
				  "tools");
	}
	return false;
}

/* The guest-answerable half of the door. */
static int answer(msb_host_tool_run *run, json_t *name, json_t *args, const char *unreadable,
		  int64_t framing, msb_host_tool_result *out, struct called *c, msb_error **err)
{
	msb_host_tool_registry *r = run->reg;
	/* 13.18: every attempt counts, refusals included. */
	pthread_mutex_lock(&run->lock);
	uint64_t n = ++run->calls;
	pthread_mutex_unlock(&run->lock);
	if (n > r->max_calls)
		return refuse(out,
			      "Error: this run's host-tool-call cap (%llu) is exhausted — finish "
			      "with the results already delivered and report what remains undone",
			      (unsigned long long)r->max_calls) < 0
			       ? msb__error_nomem(err)
			       : 0;
	if (unreadable)
		return refuse(out, "%s", unreadable) < 0 ? msb__error_nomem(err) : 0;
	/* 13.20: the guest's input. */
	if (!name || !json_is_string(name))
		return refuse(out, "Error: a host tool name must be a string, not %s",
			      name ? py_type(name) : "NoneType") < 0
			       ? msb__error_nomem(err)
			       : 0;
	const char *nm = json_string_value(name);
	pthread_mutex_lock(&r->lock);
	const struct msb_hosttools_entry *found = msb_hosttools__lookup(r, nm);
	struct msb_hosttools_entry e = found ? *found : (struct msb_hosttools_entry){0};
	if (found)
		json_incref(e.schema);
	pthread_mutex_unlock(&r->lock);
	if (!found) {
		/* The last refusal whose name is the guest's: bounded and flagged. */
		_cleanup_free_ char *q = msb_hosttools__quote(nm, true);
		if (!q)
			return msb__error_nomem(err);
		c->tool = msb__strndup(q + 1, strlen(q) - 2);
		c->guest_influenced = true;
		return refuse(out, "Error: %s is not a registered host tool", q) < 0
			       ? msb__error_nomem(err)
			       : 0;
	}
	int rc = 0;
	_cleanup_free_ char *q = msb_hosttools__quote(e.name, false);
	c->tool = msb__strdup(e.name);
	c->sink = e.declared && e.decl.sink_leg == MSB_LEG_VALUE ? e.sink : NULL;
	if (!q || !c->tool) {
		rc = msb__error_nomem(err);
		goto out;
	}
	if (!e.declared && r->require_declared) {
		/* Unreachable while registration is the only way in; kept because the
		 * cost of being wrong is a tool called unclassified. */
		rc = refuse(out,
			    "Error: %s carries no complete information-flow declaration, and this "
			    "host calls declared tools only",
			    q);
		goto out;
	}
	bool acts_as_user = e.declared && e.decl.identity_leg == MSB_LEG_VALUE &&
			    e.decl.identity == MSB_IDENTITY_USER;
	if (acts_as_user && !r->mint) {
		/* 13.16, 13.28 */
		rc = refuse(out,
			    "Error: %s exercises the user's identity, which this host cannot serve "
			    "— " USER_PREREQUISITES,
			    q);
		goto out;
	}
	json_t *given = args && !json_is_null(args) ? json_incref(args) : json_object();
	if (!given) {
		rc = msb__error_nomem(err);
		goto out;
	}
	if (!json_is_object(given)) {
		json_decref(given);
		rc = refuse(out,
			    "Error: arguments for %s must be a JSON object of keyword arguments",
			    q);
		goto out;
	}
	if (acts_as_user && json_object_get(given, USER_PARAMETER)) {
		json_decref(given);
		rc = refuse(out,
			    "Error: '" USER_PARAMETER
			    "' is not an argument a caller may send to %s "
			    "— the host mints the identity this tool acts under",
			    q);
		goto out;
	}
	if (!reserve_slot(run, framing, out, &rc)) {
		json_decref(given);
		goto out;
	}
	rc = deliver(run, &e, q, given, framing, out, c, err);
	json_decref(given);
	if (rc < 0 || !out->value_json) {
		/* 13.27: nothing delivered, the slot goes back; the call stays spent. */
		pthread_mutex_lock(&run->lock);
		run->delivered--;
		pthread_mutex_unlock(&run->lock);
	}
out:
	json_decref(e.schema);
	if (rc == -ENOMEM)
		rc = msb__error_nomem(err);
	return rc;
}

int msb_hosttools__door(msb_host_tool_run *run, json_t *name, json_t *args, const char *unreadable,
			int64_t framing, msb_host_tool_result *out, msb_error **err)
{
	if (!run || !out)
		return msb_error_set(err, MSB_E_VALUE, "host tool call: NULL argument");
	/* 13.19: a transport's programming error, not a guest refusal: raised,
	 * and not observed as a call. */
	if (framing < 0)
		return msb_error_set(err, MSB_E_VALUE,
				     "framing_bytes must not be negative, got %lld",
				     (long long)framing);
	msb_host_tool_result res = {NULL, NULL};
	struct called c = {NULL, false, NULL, NULL, 0};
	int rc = answer(run, name, args, unreadable, framing, &res, &c, err);
	const msb_observer *o = run->reg->has_observer ? &run->reg->observer : NULL;
	if (msb_observer__wants(o, host_tool_called) && (rc == 0 || c.outcome)) {
		/* 13.29: every way out is recorded, refusals and exhausted caps included. */
		msb_ev_host_tool_called ev = {
			.tool = c.tool,
			.tool_guest_influenced = c.guest_influenced || !c.tool,
			.sink = c.sink,
			.outcome = rc < 0	    ? c.outcome
				   : res.value_json ? "result"
						    : "refused",
			.response_bytes = c.response_bytes,
			.refusal = res.refusal,
			.key = run->key,
			.call = run->call,
		};
		msb_observer__host_tool_called(o, &run->reg->log, &ev);
	}
	free(c.tool);
	if (rc < 0) {
		msb_host_tool_result_clear(&res);
		return rc;
	}
	*out = res;
	return 0;
}

int msb_host_tool_run_call(msb_host_tool_run *run, const char *name, const char *arguments_json,
			   int64_t framing_bytes, msb_host_tool_result *out, msb_error **err)
{
	if (!run || !out)
		return msb_error_set(err, MSB_E_VALUE, "host tool call: NULL argument");
	json_t *jn = name ? json_string(name) : json_null();
	json_t *ja = NULL;
	bool bad = false;
	if (arguments_json) {
		json_error_t je;
		ja = json_loads(arguments_json, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &je);
		bad = ja == NULL;
	}
	int rc = (name && !jn) ? msb__error_nomem(err)
			       : msb_hosttools__door(run, jn, ja, bad ? NOT_JSON : NULL,
						     framing_bytes, out, err);
	json_decref(jn);
	json_decref(ja);
	return rc;
}

int msb_host_tool_run_call_request(msb_host_tool_run *run, const char *request_json, size_t len,
				   int64_t framing_bytes, msb_host_tool_result *out,
				   msb_error **err)
{
	if (!run || !out || (!request_json && len))
		return msb_error_set(err, MSB_E_VALUE, "host tool request: NULL argument");
	json_error_t je;
	json_t *req =
		request_json ? json_loadb(request_json, len, JSON_REJECT_DUPLICATES, &je) : NULL;
	bool bad = !req || !json_is_object(req);
	int rc = msb_hosttools__door(run, bad ? NULL : json_object_get(req, "name"),
				     bad ? NULL : json_object_get(req, "arguments"),
				     bad ? NOT_JSON : NULL, framing_bytes, out, err);
	json_decref(req);
	return rc;
}

int msb_hosttools__refuse_request(msb_host_tool_run *run, const char *sentence,
				  int64_t framing_bytes, msb_host_tool_result *out, msb_error **err)
{
	return msb_hosttools__door(run, NULL, NULL, sentence, framing_bytes, out, err);
}

char *msb_hosttools__response_body(msb_host_tool_result *res)
{
	char *body;
	if (res->value_json) {
		body = msb__asprintf(MSB_HOSTTOOLS_FRAME_OPEN "%s" MSB_HOSTTOOLS_FRAME_CLOSE,
				     res->value_json);
	} else {
		json_t *j = json_pack("{s:s}", "refusal", res->refusal);
		body = j ? json_dumps(j, JSON_COMPACT) : NULL;
		json_decref(j);
	}
	msb_host_tool_result_clear(res);
	return body;
}
