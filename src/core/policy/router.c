/* SPDX-License-Identifier: Apache-2.0 */
/*
 * SandboxRouter: construction (checklist 5.1-5.17), acquire (7.1, 7.2) and
 * the host's disposals (7.3, 7.4, 7.16).
 *
 * A router is immutable once built - options, backends, the resolved
 * backend, each backend's parsed rung - so every call may run on many
 * threads at once without a lock; backends are refcounted atomically.
 */
#include <math.h>

#include "core/lifecycle/lifecycle_int.h"

#define ISOLATION_SCOPE_VALID(s) ((s) == MSB_SCOPE_CONVERSATION || (s) == MSB_SCOPE_CALL)
#define IDENTITY_ALL ((msb_identity_set)(MSB_IDENTITY_APP | MSB_IDENTITY_USER))

/* ---- options (5.2, 5.3, 5.9) ------------------------------------------------------ */

int msb_router__validate_options(const msb_router_options *o, msb_error **err)
{
	if (o->version != MSB_ROUTER_OPTIONS_VERSION)
		return msb_error_set(err, MSB_E_VALUE, "router options: unsupported version %u",
				     o->version);
	if (!msb_isolation_name(o->min_isolation))
		return msb_error_set(
			err, MSB_E_VALUE,
			"router min_isolation: %d is not a rung, not a valid Isolation: the "
			"ladder is %s",
			(int)o->min_isolation, msb_isolation_ladder());
	if (!msb_selection_name(o->selection))
		return msb_error_set(err, MSB_E_VALUE,
				     "router selection: %d is not a selection: expected fixed or "
				     "per_spec",
				     (int)o->selection);
	/* A deny list that cannot match would look like protection (5.3). */
	if (o->denied_capabilities & ~(msb_capset)MSB_CAP_ALL)
		return msb_error_set(err, MSB_E_VALUE,
				     "router denied_capabilities: unknown capability bits 0x%x",
				     o->denied_capabilities & ~(msb_capset)MSB_CAP_ALL);
	if (o->denied_identities & ~IDENTITY_ALL)
		return msb_error_set(err, MSB_E_VALUE,
				     "router denied_identities: unknown identity bits 0x%x",
				     o->denied_identities & ~IDENTITY_ALL);
	if (!ISOLATION_SCOPE_VALID(o->min_isolation_scope))
		return msb_error_set(err, MSB_E_VALUE,
				     "router min_isolation_scope: %d is not an isolation scope: "
				     "expected conversation or call",
				     (int)o->min_isolation_scope);
	if (!msb_cleanup_name(o->min_cleanup))
		return msb_error_set(err, MSB_E_VALUE,
				     "router min_cleanup: %d is not a cleanup rung: expected "
				     "reclaim, reset or dispose",
				     (int)o->min_cleanup);
	int r = msb__check_timeout(o->reclaim.timeout, "router reclaim timeout", err);
	if (r < 0)
		return r;
	if (!msb_failed_reclaim_policy_name(o->reclaim.failed_reclaim_policy))
		return msb_error_set(err, MSB_E_VALUE,
				     "router reclaim failed_reclaim_policy: %d is not a policy: "
				     "expected dispose or keep",
				     (int)o->reclaim.failed_reclaim_policy);
	if (o->observer && o->observer->version != MSB_OBSERVER_VERSION)
		return msb_error_set(err, MSB_E_VALUE, "router observer: unsupported version %u",
				     o->observer->version);
	/* 5.9: a pin and per-spec routing contradict each other. */
	if (o->selected && o->selection == MSB_SELECTION_PER_SPEC)
		return msb_error_set(err, MSB_E_VALUE,
				     "router: selected `%s` and selection per_spec are refused "
				     "together; drop the pin or route per spec",
				     o->selected);
	return 0;
}

/* ---- egress reporter (4.22) --------------------------------------------------------- */

static void report_egress(void *userdata, const msb_key *key, const msb_egress_record *record)
{
	const struct msb_router *r = userdata;
	if (!msb_observer__wants(&r->observer, egress_observed) || !record)
		return;
	msb_ev_egress_observed ev = {.key = key, .record = record, .call = NULL};
	msb_observer__egress_observed(&r->observer, &r->lg, &ev);
}

static void report_nothing(void *userdata, const msb_key *key, const msb_egress_record *record)
{
	/* Handed to backends when their router goes away. */
}

/* ---- construction ---------------------------------------------------------------------- */

void msb_router_free(msb_router *r)
{
	if (!r)
		return;
	const msb_egress_reporter gone = {.report = report_nothing, .userdata = NULL};
	for (size_t i = 0; i < r->n; i++) {
		if (r->reporting)
			msb_backend__set_egress_reporter(r->entries[i].backend, &gone);
		msb_backend_unref(r->entries[i].backend);
	}
	free(r->entries);
	free(r->selected);
	msb_lifecycle__unref(r->lc);
	free(r);
}

static int check_backends(msb_backend *const *backends, size_t n, msb_error **err)
{
	if (n > 0 && !backends)
		return msb_error_set(err, MSB_E_VALUE, "router: %zu backends counted, none given",
				     n);
	for (size_t i = 0; i < n; i++) {
		if (!backends[i])
			return msb_error_set(err, MSB_E_VALUE, "router: backend %zu is NULL", i);
		for (size_t j = 0; j < i; j++)
			if (strcmp(msb_backend_name(backends[j]), msb_backend_name(backends[i])) ==
			    0)
				return msb_error_set(
					err, MSB_E_VALUE,
					"router: backend name `%s` is registered twice",
					msb_backend_name(backends[i]));
	}
	return 0;
}

/* 5.6: NoSandboxBackend listing the registered names, sorted. */
static int unknown_selected(const struct msb_router *r, msb_error **err)
{
	_cleanup_strv_ char **names = NULL;
	for (size_t i = 0; i < r->n; i++)
		if (msb__strv_push(&names, r->entries[i].name) < 0)
			return msb__error_nomem(err);
	msb__strv_sort(names);
	_cleanup_free_ char *list = msb__strv_join(names, ", ");
	if (!list)
		return msb__error_nomem(err);
	return msb_error_set(err, MSB_E_NO_BACKEND,
			     "no sandbox backend named '%s' is registered (registered: %s)",
			     r->selected, list);
}

/* 5.5, 5.7, 5.16: resolve the FIXED backend and refuse it, never promote. */
static int resolve_fixed(struct msb_router *r, msb_error **err)
{
	size_t i = 0;
	if (r->selected) {
		for (i = 0; i < r->n; i++)
			if (strcmp(r->entries[i].name, r->selected) == 0)
				break;
		if (i == r->n)
			return unknown_selected(r, err);
	}
	const struct msb_router_entry *e = &r->entries[i];
	int rc = msb_backend__deferred_refusal(e->backend, err);
	if (rc < 0)
		return rc;
	if (!e->is_rung || !msb_meets_floor(e->rung, r->opts.min_isolation)) {
		_cleanup_free_ char *m =
			msb_router__floor_message(e, r->opts.min_isolation, NULL, false);
		if (!m)
			return msb__error_nomem(err);
		return msb_error_set(err, MSB_E_BACKEND_NOT_PERMITTED, "%s", m);
	}
	r->resolved = i;
	return 0;
}

/* 5.10, 5.11, 5.16: under PER_SPEC the floor is judged across the whole
 * registration; a backend below it stays registered (dispose still reaches
 * it) and is never routed to, and one warning names each. */
static int judge_per_spec(struct msb_router *r, msb_error **err)
{
	for (size_t i = 0; i < r->n; i++) {
		int rc = msb_backend__deferred_refusal(r->entries[i].backend, err);
		if (rc < 0)
			return rc;
	}

	msb_buf below = MSB_BUF_INIT;	 /* for the warning */
	msb_buf refusals = MSB_BUF_INIT; /* for the refusal, if nothing clears */
	size_t n_below = 0;
	for (size_t i = 0; i < r->n; i++) {
		const struct msb_router_entry *e = &r->entries[i];
		if (e->is_rung && msb_meets_floor(e->rung, r->opts.min_isolation))
			continue;
		char *m = msb_router__floor_message(e, r->opts.min_isolation, NULL, false);
		if (!m) {
			msb__buf_free(&below);
			msb__buf_free(&refusals);
			return msb__error_nomem(err);
		}
		if (n_below++ > 0) {
			msb__buf_puts(&below, ", ");
			msb__buf_puts(&refusals, "; ");
		}
		if (e->is_rung)
			msb__buf_printf(&below, "'%s' (%s)", e->name, e->isolation);
		else
			msb__buf_printf(&below, "'%s' ('%s' is not a rung)", e->name, e->isolation);
		msb__buf_puts(&refusals, m);
		free(m);
	}
	_cleanup_free_ char *below_s = msb__buf_steal_str(&below);
	_cleanup_free_ char *refusals_s = msb__buf_steal_str(&refusals);
	if (n_below > 0 && (!below_s || !refusals_s))
		return msb__error_nomem(err);

	if (n_below == r->n)
		return msb_error_set(err, MSB_E_BACKEND_NOT_PERMITTED,
				     "no registered sandbox backend clears the minimum-isolation "
				     "floor '%s': %s",
				     msb_isolation_name(r->opts.min_isolation), refusals_s);
	if (n_below > 0)
		msb__log(&r->lg, MSB_LOG_WARNING, "router",
			 "sandbox backends below the minimum-isolation floor '%s' stay registered "
			 "and are never routed to: %s",
			 msb_isolation_name(r->opts.min_isolation), below_s);
	return 0;
}

int msb_router_new(msb_backend *const *backends, size_t n_backends, const msb_router_options *opts,
		   msb_router **out, msb_error **err)
{
	const msb_router_options defaults = MSB_ROUTER_OPTIONS_INIT;
	if (!opts)
		opts = &defaults;
	if (!out)
		return msb_error_set(err, MSB_E_VALUE, "router: no place for the result");
	int rc = msb_router__validate_options(opts, err);
	if (rc == 0)
		rc = check_backends(backends, n_backends, err);
	if (rc < 0)
		return rc;

	struct msb_router *r = calloc(1, sizeof(*r));
	if (!r)
		return msb__error_nomem(err);
	r->resolved = SIZE_MAX;
	r->opts = *opts;
	r->opts.selected = NULL;
	r->opts.observer = NULL;
	r->lg.fn = opts->log;
	r->lg.ud = opts->log_userdata;
	if (opts->selected) {
		if (!(r->selected = strdup(opts->selected)))
			goto nomem;
		r->opts.selected = r->selected;
	}
	if (opts->observer) {
		r->observer = *opts->observer;
		r->opts.observer = &r->observer;
	}
	if (n_backends > 0) {
		r->entries = calloc(n_backends, sizeof(*r->entries));
		if (!r->entries)
			goto nomem;
	}
	for (size_t i = 0; i < n_backends; i++) {
		struct msb_router_entry *e = &r->entries[i];
		e->backend = msb_backend_ref(backends[i]);
		e->name = msb_backend_name(e->backend);
		e->isolation = msb_backend_isolation(e->backend);
		e->decl = msb_backend_declarations(e->backend);
		e->is_rung = msb_isolation_parse(e->isolation, &e->rung, NULL) == 0;
		r->n++;
	}

	rc = msb_lifecycle__new(r, err);
	if (rc < 0) {
		msb_router_free(r);
		return rc;
	}

	/* With no backends the router is disabled (5.4). */
	if (r->n > 0) {
		if (r->opts.selection == MSB_SELECTION_FIXED)
			rc = resolve_fixed(r, err);
		else
			rc = judge_per_spec(r, err);
		if (rc < 0) {
			msb_router_free(r);
			return rc;
		}
	}

	const msb_egress_reporter reporter = {.report = report_egress, .userdata = r};
	for (size_t i = 0; i < r->n; i++)
		msb_backend__set_egress_reporter(r->entries[i].backend, &reporter);
	r->reporting = true;
	*out = r;
	return 0;

nomem:
	msb_router_free(r);
	return msb__error_nomem(err);
}

/* ---- accessors (5.17) -------------------------------------------------------------------- */

bool msb_router_enabled(const msb_router *r)
{
	return r && r->n > 0;
}

msb_backend *msb_router_backend(const msb_router *r)
{
	if (!r || r->resolved == SIZE_MAX)
		return NULL;
	return r->entries[r->resolved].backend;
}

size_t msb_router_backend_count(const msb_router *r)
{
	return r ? r->n : 0;
}

msb_backend *msb_router_backend_at(const msb_router *r, size_t i)
{
	if (!r || i >= r->n)
		return NULL;
	return r->entries[i].backend;
}

const msb_router_options *msb_router_options_get(const msb_router *r)
{
	return r ? &r->opts : NULL;
}

/* ---- acquire (7.1, 7.2) ---------------------------------------------------------------------- */

size_t msb_router__backend_index(const struct msb_router *r, const char *name)
{
	for (size_t i = 0; name && i < r->n; i++)
		if (strcmp(r->entries[i].name, name) == 0)
			return i;
	return SIZE_MAX;
}

int msb_router__acquire(struct msb_router *r, const msb_key *key, const msb_spec *spec,
			const char *call, msb_cancel *cancel, struct msb_call_hold *hold,
			msb_sandbox **out, msb_error **err)
{
	int rc = msb_key_validate(key, err);
	if (rc < 0)
		return rc;

	/* Every refusal ensure_can_serve performs, before any backend is
	 * called (6.1); then the unclean-key refusal (7.10), admission (8.14)
	 * and the serving backend's get-or-create. */
	msb_error *e = NULL;
	msb_sandbox *sb = NULL;
	size_t i = SIZE_MAX;
	msb_isolation_scope scope = MSB_SCOPE_CONVERSATION;
	if (r->n == 0)
		rc = msb_error_set(&e, MSB_E_NO_BACKEND, "no sandbox backend is configured");
	else
		rc = msb_router__route(r, spec, &i, &scope, &e);
	if (rc == 0 && scope == MSB_SCOPE_CALL && !key->call_id)
		/* A call-scoped sandbox is named by its call: without one the
		 * backend could only answer by sharing (2.7, 6.11). */
		rc = msb_error_set(&e, MSB_E_VALUE,
				   "the '%s' workload runs at the call isolation scope, so its key "
				   "must carry the call id",
				   msb_spec_kind(spec));
	if (rc == 0)
		rc = msb_unclean__refuse(r->lc, key, &e);
	if (rc == 0 && !hold) {
		/* A cleanup waited for may not have landed (8.14). */
		rc = msb_admission__wait_open(r, i, key, msb_spec_kind(spec), cancel, &e);
		if (rc == 0)
			rc = msb_unclean__refuse(r->lc, key, &e);
	}
	if (rc == 0 && cancel && msb_cancel_requested(cancel))
		rc = msb_error_set(&e, MSB_E_CANCELLED, "acquire cancelled");
	if (rc == 0)
		rc = msb_backend_acquire(r->entries[i].backend, key, spec, &sb, &e);
	if (rc == 0 && hold)
		rc = msb_admission__add_instance(hold, sb, &sb, &e);

	if (msb_observer__wants(&r->observer, sandbox_acquired)) {
		/* A refusal is recorded by its name, never its message (7.2). */
		msb_ev_sandbox_acquired ev = {
			.key = key,
			.spec = spec,
			.refusal = rc < 0 ? msb_code_name(rc) : NULL,
			.call = call,
			.backend = rc < 0 ? NULL : r->entries[i].name,
			.instance_id = rc < 0 ? NULL : msb_sandbox_instance_id(sb),
		};
		msb_observer__sandbox_acquired(&r->observer, &r->lg, &ev);
	}
	if (rc < 0)
		return msb__error_propagate(err, e);
	*out = sb;
	return 0;
}

int msb_router_acquire(msb_router *r, const msb_key *key, const msb_spec *spec,
		       const msb_acquire_options *opts, msb_sandbox **out, msb_error **err)
{
	if (!r || !spec || !out)
		return msb_error_set(err, MSB_E_VALUE, "acquire: missing argument");
	if (opts && opts->version != MSB_ACQUIRE_OPTIONS_VERSION)
		return msb_error_set(err, MSB_E_VALUE, "acquire options: unsupported version %u",
				     opts->version);
	return msb_router__acquire(r, key, spec, opts ? opts->call : NULL,
				   opts ? opts->cancel : NULL, NULL, out, err);
}

/* ---- disposal (7.3, 7.4, 7.16) ------------------------------------------------------------------
 */

/* Never raised into the caller: logged with the detail (logs may carry it). */
static void log_dispose_failure(const struct msb_router *r, const struct msb_router_entry *e,
				const msb_key *key, const char *what, const msb_error *be)
{
	const char *detail = msb_error_detail(be);
	msb__log(&r->lg, MSB_LOG_WARNING, "router",
		 "sandbox backend '%s' failed to dispose %s (scope `%s`, thread `%s`, agent "
		 "`%s`): %s: %s%s%s",
		 e->name, what, key->scope, key->thread_id, key->agent_dir, msb_error_name(be),
		 msb_error_message(be), detail ? ": " : "", detail ? detail : "");
}

int msb_router_dispose(msb_router *r, const msb_key *key, bool *all_disposed, msb_error **err)
{
	if (!r)
		return msb_error_set(err, MSB_E_VALUE, "dispose: missing router");
	int rc = msb_key_validate(key, err);
	if (rc < 0)
		return rc;

	msb_ev_disposal_result *results = NULL;
	if (r->n > 0 && !(results = calloc(r->n, sizeof(*results))))
		return msb__error_nomem(err);

	/* Every registered backend, including ones no longer serving new
	 * calls: two kinds of one key may live on different backends (5.15).
	 * A host disposal records no refusal; where it lands it clears the
	 * key's unclean targets older than itself (23.16). */
	uint64_t since = msb_unclean__snapshot(r->lc);
	bool all = true;
	for (size_t i = 0; i < r->n; i++) {
		const struct msb_router_entry *e = &r->entries[i];
		msb_disposal_failure *f = NULL;
		msb_error *be = NULL;
		rc = msb_backend_dispose(e->backend, key, NULL, NULL, &f, &be);
		results[i].backend = e->name;
		if (rc == MSB_E_CANCELLED) {
			/* Cancellation is the one thing cleanup re-raises. */
			free(results);
			return msb__error_propagate(err, be);
		}
		if (rc < 0) {
			log_dispose_failure(r, e, key, "key", be);
			results[i].failed = true;
			results[i].code = MSB_DISPOSAL_UNKNOWN;
			all = false;
		} else if (f) {
			msb__log(&r->lg, MSB_LOG_WARNING, "router",
				 "sandbox backend '%s' reports the disposal of key (scope `%s`, "
				 "thread `%s`, agent `%s`) did not land: %s%s%s",
				 e->name, key->scope, key->thread_id, key->agent_dir,
				 msb_disposal_code_name(f->code), f->detail ? ": " : "",
				 f->detail ? f->detail : "");
			results[i].failed = true;
			results[i].code = f->code;
			all = false;
		} else {
			msb_unclean__clear(r->lc, key, i, NULL, NULL, MSB_CLEAR_KEY, since, 0);
		}
		msb_disposal_failure_free(f);
		msb_error_free(be);
	}

	if (r->n > 0 && msb_observer__wants(&r->observer, sandbox_disposed)) {
		msb_ev_sandbox_disposed ev = {
			.key = key,
			.kind = NULL,
			.instance_id = NULL,
			.disposed = all,
			.results = results,
			.n_results = r->n,
			.origin = "host",
			.call = NULL,
		};
		msb_observer__sandbox_disposed(&r->observer, &r->lg, &ev);
	}
	free(results);
	if (all_disposed)
		*all_disposed = all;
	return 0;
}

static uint64_t add_saturating(uint64_t a, uint64_t b)
{
	uint64_t s;
	return __builtin_add_overflow(a, b, &s) ? UINT64_MAX : s;
}

int msb_router_dispose_scope(msb_router *r, const char *scope, const char *thread_id,
			     msb_scope_purge *out, msb_error **err)
{
	if (!r || !scope || !thread_id)
		return msb_error_set(err, MSB_E_VALUE, "dispose_scope: missing argument");

	msb_scope_purge total = {0, 0};
	for (size_t i = 0; i < r->n; i++) {
		const struct msb_router_entry *e = &r->entries[i];
		msb_scope_purge p = {0, 0};
		msb_error *be = NULL;
		int rc = msb_backend_dispose_scope(e->backend, scope, thread_id, &p, &be);
		if (rc == MSB_E_CANCELLED)
			return msb__error_propagate(err, be);
		if (rc < 0) {
			const char *detail = msb_error_detail(be);
			msb__log(&r->lg, MSB_LOG_WARNING, "router",
				 "sandbox backend '%s' failed to dispose scope `%s` thread `%s`: "
				 "%s: %s%s%s",
				 e->name, scope, thread_id, msb_error_name(be),
				 msb_error_message(be), detail ? ": " : "", detail ? detail : "");
			msb_error_free(be);
			continue;
		}
		total.disposed = add_saturating(total.disposed, p.disposed);
		total.undisposed = add_saturating(total.undisposed, p.undisposed);
	}

	if (msb_observer__wants(&r->observer, scope_disposed)) {
		msb_ev_scope_disposed ev = {
			.scope = scope,
			.thread_id = thread_id,
			.disposed = total.disposed,
			.undisposed = total.undisposed,
		};
		msb_observer__scope_disposed(&r->observer, &r->lg, &ev);
	}
	if (out)
		*out = total;
	return 0;
}
