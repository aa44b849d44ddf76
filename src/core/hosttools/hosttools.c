/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The host-tool registry: declarations, registration gates, the aggregate
 * and its seal (checklist 13.1-13.15, 13.31).
 */
#include <pthread.h>
#include <stdatomic.h>

#include "core/core.h"
#include "core/hosttools/hosttools_int.h"
#include "util/json.h"

static atomic_bool notice_given;
static atomic_bool notice_suppressed;

void msb_host_tools_suppress_notice(void)
{
	atomic_store(&notice_suppressed, true);
}

void msb_hosttools__notice_reset(void)
{
	atomic_store(&notice_given, false);
	atomic_store(&notice_suppressed, false);
}

/* 13.2: one notice per process, through the log callback only, so nothing a
 * host configures can turn it into a failed registration. */
static void notice_once(const msb_logger *lg)
{
	if (atomic_load(&notice_suppressed) || atomic_exchange(&notice_given, true))
		return;
	msb__log(lg, MSB_LOG_WARNING, "hosttools",
		 "MafSandboxHostToolsWarning: a host tool was registered for calling from a "
		 "sandbox: host-tool calls run in the host process with the host's authority and "
		 "bypass the middleware chain; suppress this notice with "
		 "msb_host_tools_suppress_notice() once read");
}

bool msb_host_tool_decl_complete(const msb_host_tool_decl *d)
{
	return d && d->source_leg != MSB_LEG_UNANSWERED && d->sink_leg != MSB_LEG_UNANSWERED &&
	       d->identity_leg != MSB_LEG_UNANSWERED;
}

static bool leg_valid(msb_leg l)
{
	return l == MSB_LEG_UNANSWERED || l == MSB_LEG_NONE || l == MSB_LEG_VALUE;
}

/* 13.4: the legs' values. */
static int decl_validate(const msb_host_tool_decl *d, msb_error **err)
{
	if (d->version != MSB_HOST_TOOL_DECL_VERSION)
		return msb_error_set(err, MSB_E_VALUE, "host tool declaration: unknown version %u",
				     d->version);
	if (!leg_valid(d->source_leg) || !leg_valid(d->sink_leg) || !leg_valid(d->identity_leg))
		return msb_error_set(err, MSB_E_VALUE,
				     "host tool declaration: a leg state is "
				     "neither unanswered, none nor a value");
	if (d->source_leg == MSB_LEG_VALUE && d->source != MSB_INTEGRITY_UNTRUSTED &&
	    d->source != MSB_INTEGRITY_TRUSTED)
		return msb_error_set(err, MSB_E_VALUE,
				     "host tool declaration: source must be a SourceIntegrity "
				     "(trusted or untrusted) or none");
	if (d->identity_leg == MSB_LEG_VALUE && d->identity != MSB_IDENTITY_APP &&
	    d->identity != MSB_IDENTITY_USER)
		return msb_error_set(err, MSB_E_VALUE,
				     "host tool declaration: identity must be an Identity (app or "
				     "user) or none");
	if (d->sink_leg == MSB_LEG_VALUE && !d->sink)
		return msb_error_set(err, MSB_E_TYPE,
				     "sink must be a string in the host's own confidentiality "
				     "vocabulary, or none for a tool nothing flows out through");
	return 0;
}

int msb_host_tool_decl_from_json(const char *json, msb_host_tool_decl *out, char **storage,
				 msb_error **err)
{
	if (!json || !out || !storage)
		return msb_error_set(err, MSB_E_VALUE, "host tool declaration: NULL argument");
	json_t *o = NULL;
	int r = msb__json_load_object(json, strlen(json), "declaration", &o, err);
	if (r < 0)
		return r;
	static const char *const keys[] = {"source", "sink", "identity", NULL};
	msb_host_tool_decl d = MSB_HOST_TOOL_DECL_INIT;
	_cleanup_free_ char *sink = NULL;
	r = msb__json_check_keys(o, keys, "declaration", err);
	if (r < 0)
		goto out;
	json_t *v = json_object_get(o, "source");
	if (v) {
		d.source_leg = json_is_null(v) ? MSB_LEG_NONE : MSB_LEG_VALUE;
		if (!json_is_null(v)) {
			if (!json_is_string(v)) {
				r = msb_error_set(err, MSB_E_TYPE,
						  "declaration.source must be a string or null");
				goto out;
			}
			r = msb_integrity_parse(json_string_value(v), &d.source, err);
			if (r < 0)
				goto out;
		}
	}
	v = json_object_get(o, "identity");
	if (v) {
		d.identity_leg = json_is_null(v) ? MSB_LEG_NONE : MSB_LEG_VALUE;
		if (!json_is_null(v)) {
			if (!json_is_string(v)) {
				r = msb_error_set(err, MSB_E_TYPE,
						  "declaration.identity must be a string or null");
				goto out;
			}
			r = msb_identity_parse(json_string_value(v), &d.identity, err);
			if (r < 0)
				goto out;
		}
	}
	v = json_object_get(o, "sink");
	if (v) {
		d.sink_leg = json_is_null(v) ? MSB_LEG_NONE : MSB_LEG_VALUE;
		if (!json_is_null(v)) {
			if (!json_is_string(v)) {
				r = msb_error_set(err, MSB_E_TYPE,
						  "sink must be a string in the host's own "
						  "confidentiality vocabulary, or null for a tool "
						  "nothing flows out through - not %s",
						  json_is_integer(v) ? "int" : "a non-string");
				goto out;
			}
			sink = msb__strdup(json_string_value(v));
			if (!sink) {
				r = msb__error_nomem(err);
				goto out;
			}
		}
	}
	d.sink = sink;
	r = decl_validate(&d, err);
	if (r < 0)
		goto out;
	*storage = TAKE_PTR(sink);
	*out = d;
out:
	json_decref(o);
	return r;
}

/* ---- the registry ---------------------------------------------------------- */

int msb_host_tool_registry_new(const msb_host_tool_registry_options *opts,
			       msb_host_tool_registry **out, msb_error **err)
{
	static const msb_host_tool_registry_options defaults = MSB_HOST_TOOL_REGISTRY_OPTIONS_INIT;
	if (!out)
		return msb_error_set(err, MSB_E_VALUE, "host tool registry: NULL out");
	if (!opts)
		opts = &defaults;
	if (opts->version != MSB_HOST_TOOL_REGISTRY_OPTIONS_VERSION)
		return msb_error_set(err, MSB_E_VALUE,
				     "host tool registry: unknown options version %u",
				     opts->version);
	/* 13.9 */
	if (opts->max_host_tool_calls_per_run < 1)
		return msb_error_set(err, MSB_E_VALUE,
				     "max_host_tool_calls_per_run must be at least 1, got %llu",
				     (unsigned long long)opts->max_host_tool_calls_per_run);
	const msb_transfer_limits *l = &opts->response_limits;
	if (l->max_bytes_per_file < 1 || l->max_total_bytes < 1 || l->max_files < 1)
		return msb_error_set(err, MSB_E_VALUE,
				     "response_limits: every leg of the TransferLimits must be at "
				     "least 1");
	if (opts->allowed_identities & ~(msb_identity_set)(MSB_IDENTITY_APP | MSB_IDENTITY_USER))
		return msb_error_set(err, MSB_E_VALUE,
				     "allowed_identities must be a set of Identity (app, user)");
	if (opts->observer && opts->observer->version != MSB_OBSERVER_VERSION)
		return msb_error_set(err, MSB_E_VALUE, "observer: unknown version %u",
				     opts->observer->version);
	msb_host_tool_registry *r = calloc(1, sizeof(*r));
	if (!r)
		return msb__error_nomem(err);
	atomic_init(&r->refs, 1);
	pthread_mutex_init(&r->lock, NULL);
	r->require_declared = opts->require_declared;
	r->allowed = opts->allowed_identities;
	r->max_calls = opts->max_host_tool_calls_per_run;
	r->limits = opts->response_limits;
	if (opts->observer) {
		r->observer = *opts->observer;
		r->has_observer = true;
	}
	r->mint = opts->mint_user_identity;
	r->mint_ud = opts->mint_userdata;
	r->log.fn = opts->log;
	r->log.ud = opts->log_userdata;
	*out = r;
	return 0;
}

msb_host_tool_registry *msb_host_tool_registry_ref(msb_host_tool_registry *r)
{
	if (r)
		atomic_fetch_add(&r->refs, 1);
	return r;
}

void msb_host_tool_registry_unref(msb_host_tool_registry *r)
{
	if (!r || atomic_fetch_sub(&r->refs, 1) != 1)
		return;
	for (size_t i = 0; i < r->n; i++) {
		struct msb_hosttools_entry *e = &r->tools[i];
		free(e->name);
		free(e->description);
		free(e->sink);
		json_decref(e->schema);
	}
	free(r->tools);
	pthread_mutex_destroy(&r->lock);
	free(r);
}

const struct msb_hosttools_entry *msb_hosttools__lookup(const msb_host_tool_registry *r,
							const char *name)
{
	for (size_t i = 0; i < r->n; i++)
		if (strcmp(r->tools[i].name, name) == 0)
			return &r->tools[i];
	return NULL;
}

/* The authority a tool exercises: declared, APP when unstamped, 0 for none. */
static msb_identity_set effective_identity(const struct msb_hosttools_entry *e)
{
	if (!e->declared)
		return MSB_IDENTITY_APP;
	return e->decl.identity_leg == MSB_LEG_VALUE ? (msb_identity_set)e->decl.identity : 0;
}

int msb_host_tool_registry_register(msb_host_tool_registry *r, const msb_host_tool *tool,
				    msb_error **err)
{
	if (!r || !tool)
		return msb_error_set(err, MSB_E_VALUE, "register: NULL argument");
	if (tool->version != MSB_HOST_TOOL_VERSION)
		return msb_error_set(err, MSB_E_VALUE, "register: unknown host tool version %u",
				     tool->version);
	if (!tool->fn)
		return msb_error_set(err, MSB_E_TYPE, "register: a host tool must be callable");
	if (!tool->name)
		return msb_error_set(err, MSB_E_TYPE,
				     "register: a host tool name must be a string");
	if (!tool->name[0])
		return msb_error_set(err, MSB_E_VALUE,
				     "register: a host tool name must not be empty");
	/* The declaration is read here and only here (13.7). */
	struct msb_hosttools_entry e = {0};
	if (tool->decl) {
		int v = decl_validate(tool->decl, err);
		if (v < 0)
			return msb_error_wrap(err, "register `%s`", tool->name);
		if (msb_host_tool_decl_complete(tool->decl)) {
			e.declared = true;
			e.decl = *tool->decl;
		}
	}
	if (!e.declared && r->require_declared)
		return msb_error_set(
			err, MSB_E_HOST_TOOL_NOT_DECLARED,
			"host tool `%s` carries no complete information-flow "
			"declaration, and this registry requires one: answer every leg "
			"(source, sink, identity) - none is an answer",
			tool->name);
	msb_identity_set id = effective_identity(&e);
	if (id & ~r->allowed) {
		_cleanup_free_ char *allowed = msb_identity_set_format(r->allowed);
		return msb_error_set(err, MSB_E_HOST_TOOL_IDENTITY_NOT_ALLOWED,
				     "host tool `%s` exercises the %s identity%s, which this "
				     "registry's allowed_identities (%s) does not include",
				     tool->name, msb_identity_name((msb_identity)id),
				     e.declared ? "" : " (unstamped, read as app)",
				     allowed ? allowed : "?");
	}
	json_t *schema = NULL;
	if (tool->parameters) {
		json_error_t je;
		schema = json_loads(tool->parameters, JSON_REJECT_DUPLICATES, &je);
		if (!schema)
			return msb_error_set(
				err, MSB_E_VALUE,
				"register `%s`: the parameter schema is not valid JSON: %s",
				tool->name, je.text);
	} else {
		schema = json_pack("{s:s, s:{}, s:b}", "type", "object", "properties",
				   "additionalProperties", 0);
		if (!schema)
			return msb__error_nomem(err);
	}
	_cleanup_free_ char *where = msb__asprintf("host tool `%s` parameters", tool->name);
	int rc = where ? msb_hosttools__schema_check(schema, where, err) : msb__error_nomem(err);
	if (rc < 0) {
		json_decref(schema);
		return rc;
	}
	e.schema = schema;
	e.name = msb__strdup(tool->name);
	e.description = msb__strdup(tool->description);
	e.sink = e.declared && e.decl.sink_leg == MSB_LEG_VALUE ? msb__strdup(e.decl.sink) : NULL;
	e.decl.sink = e.sink;
	e.fn = tool->fn;
	e.ud = tool->userdata;
	if (!e.name || (tool->description && !e.description) ||
	    (e.declared && e.decl.sink_leg == MSB_LEG_VALUE && !e.sink)) {
		rc = msb__error_nomem(err);
		goto fail;
	}
	pthread_mutex_lock(&r->lock);
	if (r->sealed) {
		pthread_mutex_unlock(&r->lock);
		rc = msb_error_set(
			err, MSB_E_VALUE,
			"register `%s`: the registry is sealed - its aggregate was taken, "
			"and policy derived from it would no longer describe it",
			tool->name);
		goto fail;
	}
	if (msb_hosttools__lookup(r, tool->name)) {
		pthread_mutex_unlock(&r->lock);
		rc = msb_error_set(err, MSB_E_VALUE,
				   "register: a host tool named `%s` is already registered (never "
				   "replaced)",
				   tool->name);
		goto fail;
	}
	struct msb_hosttools_entry *grown = msb__reallocarray(r->tools, r->n + 1, sizeof(e));
	if (!grown) {
		pthread_mutex_unlock(&r->lock);
		rc = msb__error_nomem(err);
		goto fail;
	}
	r->tools = grown;
	r->tools[r->n++] = e;
	pthread_mutex_unlock(&r->lock);
	notice_once(&r->log);
	return 0;
fail:
	free(e.name);
	free(e.description);
	free(e.sink);
	json_decref(e.schema);
	return rc;
}

char **msb_host_tool_registry_names(const msb_host_tool_registry *cr)
{
	msb_host_tool_registry *r = (msb_host_tool_registry *)cr;
	if (!r)
		return NULL;
	pthread_mutex_lock(&r->lock);
	char **v = calloc(r->n + 1, sizeof(char *));
	bool ok = v != NULL;
	for (size_t i = 0; ok && i < r->n; i++)
		ok = (v[i] = msb__strdup(r->tools[i].name)) != NULL;
	pthread_mutex_unlock(&r->lock);
	if (!ok) {
		msb_strv_free(v);
		return NULL;
	}
	msb__strv_sort(v);
	return v;
}

bool msb_host_tool_registry_sealed(const msb_host_tool_registry *cr)
{
	msb_host_tool_registry *r = (msb_host_tool_registry *)cr;
	pthread_mutex_lock(&r->lock);
	bool s = r->sealed;
	pthread_mutex_unlock(&r->lock);
	return s;
}

void msb_host_tool_aggregate_clear(msb_host_tool_aggregate *a)
{
	if (!a)
		return;
	msb_strv_free(a->outbound_caps);
	msb_strv_free(a->names);
	memset(a, 0, sizeof(*a));
}

int msb_host_tool_registry_aggregate(msb_host_tool_registry *r, msb_host_tool_aggregate *out,
				     msb_error **err)
{
	if (!r || !out)
		return msb_error_set(err, MSB_E_VALUE, "aggregate: NULL argument");
	msb_host_tool_aggregate a = {0};
	int rc = 0;
	pthread_mutex_lock(&r->lock);
	r->sealed = true; /* 13.11 */
	a.names = calloc(1, sizeof(char *));
	a.outbound_caps = calloc(1, sizeof(char *));
	if (!a.names || !a.outbound_caps)
		rc = -ENOMEM;
	for (size_t i = 0; rc == 0 && i < r->n; i++) {
		const struct msb_hosttools_entry *e = &r->tools[i];
		if (msb__strv_push(&a.names, e->name) < 0) {
			rc = -ENOMEM;
			break;
		}
		if (!e->declared) {
			/* 13.12, 13.14: unstamped reads as an untrusted source and APP. */
			a.has_undeclared = true;
			a.result_integrity =
				a.has_result_integrity
					? msb_integrity_weakest(a.result_integrity,
								MSB_INTEGRITY_UNTRUSTED)
					: MSB_INTEGRITY_UNTRUSTED;
			a.has_result_integrity = true;
			a.identities |= MSB_IDENTITY_APP;
			continue;
		}
		if (e->decl.source_leg == MSB_LEG_VALUE) {
			a.result_integrity =
				a.has_result_integrity
					? msb_integrity_weakest(a.result_integrity, e->decl.source)
					: e->decl.source;
			a.has_result_integrity = true;
		}
		if (e->decl.sink_leg == MSB_LEG_VALUE &&
		    !msb__strv_contains(a.outbound_caps, e->sink) &&
		    msb__strv_push(&a.outbound_caps, e->sink) < 0)
			rc = -ENOMEM;
		if (e->decl.identity_leg == MSB_LEG_VALUE)
			a.identities |= e->decl.identity;
	}
	pthread_mutex_unlock(&r->lock);
	if (rc < 0) {
		msb_host_tool_aggregate_clear(&a);
		return msb__error_nomem(err);
	}
	msb__strv_sort(a.names);
	msb__strv_sort(a.outbound_caps);
	a.requires_approval = (a.identities & MSB_IDENTITY_USER) != 0;
	*out = a;
	return 0;
}
