/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Call admission (checklist 8.11-8.21): one gate per sandbox slot (serving
 * backend, key, kind) of one router.
 *
 * Calls overlap unless one is exclusive. A call needing whole-instance
 * cleanup (RESET, DISPOSE, or a failed reclaim's escalation) queues a record
 * when it releases; a slot with records admits nobody. The last holder to
 * leave takes every record and cleans each physical instance once with the
 * strongest rung among them, then reopens the slot. Entrants wait, bounded:
 * while calls are ahead, by admission_timeout + 2 x cleanup bound, restarting
 * whenever one leaves or completes a cleanup step; while the cleanup runs, by
 * MSB_CLEANUP_WAIT_TIMEOUT. A waiter that gives up changes nothing.
 */
#include "core/lifecycle/lifecycle_int.h"

struct msb_cleanup_record {
	struct msb_cleanup_record *next;
	msb_cleanup rung;
	struct msb_sbref *inst; /* NULL when the call never acquired */
	char *instance_id;	/* NULL = the slot's kind as a whole */
	char *call;
	double timeout;
	struct msb_cleanup_notice notice;
	msb_reclaim_disposal outcome;
	bool landed;
};

struct msb_slot {
	struct msb_slot *next;
	size_t backend;
	msb_key *key;
	char *kind;
	size_t holders;
	bool exclusive;
	size_t waiters;
	bool cleaning;
	struct msb_cleanup_record *records;
	uint64_t progress; /* bumped when a holder leaves or a cleanup step completes */
};

/* ---- slots (lc->lock held) ------------------------------------------------------------------- */

static struct msb_slot *slot_find(struct msb_lifecycle *lc, size_t backend, const msb_key *key,
				  const char *kind, bool create)
{
	for (struct msb_slot *s = lc->slots; s; s = s->next)
		if (s->backend == backend && strcmp(s->kind, kind) == 0 &&
		    msb_key_equal(s->key, key))
			return s;
	if (!create)
		return NULL;
	struct msb_slot *s = calloc(1, sizeof(*s));
	if (!s || msb_key_dup(key, &s->key, NULL) < 0 || !(s->kind = strdup(kind))) {
		if (s)
			msb_key_free(s->key);
		free(s);
		return NULL;
	}
	s->backend = backend;
	s->next = lc->slots;
	lc->slots = s;
	return s;
}

static void slot_gc(struct msb_lifecycle *lc, struct msb_slot *s)
{
	if (s->holders || s->waiters || s->cleaning || s->records)
		return;
	for (struct msb_slot **p = &lc->slots; *p; p = &(*p)->next)
		if (*p == s) {
			*p = s->next;
			break;
		}
	msb_key_free(s->key);
	free(s->kind);
	free(s);
}

static void record_free(struct msb_cleanup_record *rec)
{
	if (rec->notice.free)
		rec->notice.free(rec->notice.ud);
	msb_lifecycle__sbref_unref(rec->inst);
	free(rec->instance_id);
	free(rec->call);
	free(rec);
}

/* ---- waiting
 * ------------------------------------------------------------------------------------- */

enum wait_for {
	WAIT_ENTER, /* a call entering: also respects exclusive holds */
	WAIT_OPEN,  /* a direct acquire: only a queued or running cleanup closes it */
};

static bool admissible(const struct msb_slot *s, enum wait_for w, bool exclusive)
{
	if (s->records || s->cleaning)
		return false;
	if (w == WAIT_OPEN)
		return true;
	if (s->exclusive)
		return false;
	return !exclusive || s->holders == 0;
}

static int64_t seconds_ns(double s)
{
	return s >= 9e9 ? INT64_MAX / 2 : (int64_t)(s * 1e9);
}

/* lc->lock held; the caller counts itself among s->waiters. */
static int wait_admitted(struct msb_lifecycle *lc, struct msb_slot *s, enum wait_for w,
			 bool exclusive, double calls_bound, msb_cancel *cancel, msb_error **err)
{
	enum { NONE, CALLS_AHEAD, CLEANUP } phase = NONE;
	uint64_t progress = 0;
	int64_t deadline = 0;
	double bound = 0;
	while (!admissible(s, w, exclusive)) {
		if (cancel && msb_cancel_requested(cancel))
			return msb_error_set(err, MSB_E_CANCELLED,
					     "admission to the `%s` sandbox cancelled", s->kind);
		int64_t now = msb_lifecycle__now(lc);
		int ph = s->holders > 0 ? CALLS_AHEAD : CLEANUP;
		/* Calls ahead: the bound restarts as each leaves and as each
		 * cleanup step completes (8.17). A running cleanup: one fixed
		 * bound for its completion (8.18). */
		if (ph != (int)phase || (ph == CALLS_AHEAD && s->progress != progress)) {
			phase = ph;
			progress = s->progress;
			bound = ph == CALLS_AHEAD ? calls_bound : MSB_CLEANUP_WAIT_TIMEOUT;
			deadline = now + seconds_ns(bound);
		}
		if (now >= deadline) {
			if (phase == CALLS_AHEAD)
				return msb_error_set(
					err, MSB_E_TIMEOUT,
					"admission to the `%s` sandbox timed out: %zu call%s ahead "
					"made no progress within %g s",
					s->kind, s->holders, s->holders == 1 ? "" : "s", bound);
			return msb_error_set(err, MSB_E_TIMEOUT,
					     "the pending cleanup of the `%s` sandbox did not "
					     "complete within %g s",
					     s->kind, bound);
		}
		msb_lifecycle__wait(lc, deadline, cancel != NULL);
	}
	return 0;
}

int msb_admission__wait_open(struct msb_router *r, size_t backend, const msb_key *key,
			     const char *kind, msb_cancel *cancel, msb_error **err)
{
	struct msb_lifecycle *lc = r->lc;
	pthread_mutex_lock(&lc->lock);
	struct msb_slot *s = slot_find(lc, backend, key, kind, false);
	int rc = 0;
	if (s && !admissible(s, WAIT_OPEN, false)) {
		s->waiters++;
		rc = wait_admitted(lc, s, WAIT_OPEN, false,
				   MSB_ADMISSION_TIMEOUT_DEFAULT + 2 * r->opts.reclaim.timeout,
				   cancel, err);
		s->waiters--;
		slot_gc(lc, s);
	}
	pthread_mutex_unlock(&lc->lock);
	return rc;
}

/* ---- enter_call --------------------------------------------------------------------------------
 */

static void hold_free(struct msb_call_hold *h)
{
	if (!h)
		return;
	for (size_t i = 0; i < h->n_instances; i++)
		msb_lifecycle__sbref_unref(h->instances[i]);
	free(h->instances);
	msb_key_free(h->key);
	msb_spec_unref(h->spec);
	free(h->call);
	free(h);
}

static int bound_or(double v, double dflt, const char *what, double *out, msb_error **err)
{
	if (v == 0) {
		*out = dflt;
		return 0;
	}
	int rc = msb__check_timeout(v, what, err);
	if (rc == 0)
		*out = v;
	return rc;
}

int msb_router_enter_call(msb_router *r, const msb_key *key, const msb_spec *spec,
			  const msb_enter_call_options *opts, msb_call_hold **out, msb_error **err)
{
	static const msb_enter_call_options defaults = MSB_ENTER_CALL_OPTIONS_INIT;
	if (!r || !spec || !out)
		return msb_error_set(err, MSB_E_VALUE, "enter_call: missing argument");
	if (!opts)
		opts = &defaults;
	if (opts->version != MSB_ENTER_CALL_OPTIONS_VERSION)
		return msb_error_set(err, MSB_E_VALUE, "enter_call options: unsupported version %u",
				     opts->version);
	double admission = 0, cleanup = 0;
	int rc = msb_key_validate(key, err);
	if (rc == 0)
		rc = bound_or(opts->admission_timeout, MSB_ADMISSION_TIMEOUT_DEFAULT,
			      "admission_timeout", &admission, err);
	if (rc == 0)
		rc = bound_or(opts->cleanup_timeout, r->opts.reclaim.timeout, "cleanup timeout",
			      &cleanup, err);
	if (rc < 0)
		return rc;
	if (r->n == 0)
		return msb_error_set(err, MSB_E_NO_BACKEND, "no sandbox backend is configured");

	size_t backend = SIZE_MAX;
	msb_isolation_scope scope = MSB_SCOPE_CONVERSATION;
	rc = msb_router__route(r, spec, &backend, &scope, err);
	if (rc < 0)
		return rc;
	if (scope == MSB_SCOPE_CALL && !key->call_id)
		return msb_error_set(err, MSB_E_VALUE,
				     "the '%s' workload runs at the call isolation scope, so its "
				     "key must carry the call id",
				     msb_spec_kind(spec));
	rc = msb_unclean__refuse(r->lc, key, err);
	if (rc < 0)
		return rc;

	struct msb_call_hold *h = calloc(1, sizeof(*h));
	if (!h || msb_key_dup(key, &h->key, NULL) < 0 ||
	    (opts->call && !(h->call = strdup(opts->call)))) {
		hold_free(h);
		return msb__error_nomem(err);
	}
	h->r = r;
	h->backend = backend;
	h->spec = msb_spec_ref((msb_spec *)spec);
	h->cancel = opts->cancel;
	h->cleanup_timeout = cleanup;
	h->scope = scope;
	h->exclusive = opts->exclusive || msb_spec_exclusive_admission(spec);

	struct msb_lifecycle *lc = r->lc;
	pthread_mutex_lock(&lc->lock);
	struct msb_slot *s = slot_find(lc, backend, key, msb_spec_kind(spec), true);
	if (!s) {
		pthread_mutex_unlock(&lc->lock);
		hold_free(h);
		return msb__error_nomem(err);
	}
	s->waiters++;
	rc = wait_admitted(lc, s, WAIT_ENTER, h->exclusive, admission + 2 * cleanup, opts->cancel,
			   err);
	s->waiters--;
	if (rc == 0) {
		s->holders++;
		s->exclusive = h->exclusive;
		h->slot = s;
	} else {
		slot_gc(lc, s);
	}
	pthread_mutex_unlock(&lc->lock);
	if (rc < 0) {
		hold_free(h);
		return rc;
	}

	/* The cleanup waited for may not have landed (8.14). */
	rc = msb_unclean__refuse(lc, key, err);
	if (rc < 0) {
		msb_admission__release(h, NULL);
		return rc;
	}
	*out = h;
	return 0;
}

int msb_call_hold_acquire(msb_call_hold *h, msb_sandbox **out, msb_error **err)
{
	if (!h || !out)
		return msb_error_set(err, MSB_E_VALUE, "hold acquire: missing argument");
	return msb_router__acquire(h->r, h->key, h->spec, h->call, h->cancel, h, out, err);
}

int msb_admission__add_instance(struct msb_call_hold *h, msb_sandbox *sb, msb_sandbox **out,
				msb_error **err)
{
	const char *id = msb_sandbox_instance_id(sb);
	for (size_t i = 0; i < h->n_instances; i++)
		if (msb__streq_null(h->instances[i]->instance_id, id)) {
			msb_sandbox_free(sb);
			*out = h->instances[i]->sb;
			return 0;
		}
	struct msb_sbref **v = msb__reallocarray(h->instances, h->n_instances + 1, sizeof(*v));
	if (!v) {
		msb_sandbox_free(sb);
		return msb__error_nomem(err);
	}
	h->instances = v;
	struct msb_sbref *ref = msb_lifecycle__sbref_new(sb, h->backend);
	if (!ref)
		return msb__error_nomem(err);
	h->instances[h->n_instances++] = ref;
	*out = sb;
	return 0;
}

void msb_admission__step_done(struct msb_call_hold *h)
{
	struct msb_lifecycle *lc = h->r->lc;
	pthread_mutex_lock(&lc->lock);
	h->slot->progress++;
	pthread_cond_broadcast(&lc->cond);
	pthread_mutex_unlock(&lc->lock);
}

int msb_admission__queue(struct msb_call_hold *h, struct msb_sbref *inst, msb_cleanup rung,
			 double timeout, const struct msb_cleanup_notice *notice, msb_error **err)
{
	struct msb_cleanup_record *rec = calloc(1, sizeof(*rec));
	if (!rec ||
	    (inst && inst->instance_id && !(rec->instance_id = strdup(inst->instance_id))) ||
	    (h->call && !(rec->call = strdup(h->call)))) {
		if (rec)
			free(rec->instance_id);
		free(rec);
		if (notice && notice->free)
			notice->free(notice->ud);
		return msb__error_nomem(err);
	}
	rec->rung = rung;
	rec->inst = msb_lifecycle__sbref_ref(inst);
	rec->timeout = timeout > 0 ? timeout : h->cleanup_timeout;
	if (notice)
		rec->notice = *notice;
	rec->outcome = MSB_RECLAIM_KEPT;

	/* Admission closes now: entrants wait for the cleanup's outcome. */
	struct msb_lifecycle *lc = h->r->lc;
	pthread_mutex_lock(&lc->lock);
	struct msb_cleanup_record **tail = &h->slot->records;
	while (*tail)
		tail = &(*tail)->next;
	*tail = rec;
	pthread_cond_broadcast(&lc->cond);
	pthread_mutex_unlock(&lc->lock);
	return 0;
}

/* ---- executing queued cleanup -------------------------------------------------------------------
 */

static void progress(struct msb_lifecycle *lc, struct msb_slot *s)
{
	pthread_mutex_lock(&lc->lock);
	s->progress++;
	pthread_cond_broadcast(&lc->cond);
	pthread_mutex_unlock(&lc->lock);
}

/* One physical instance, once, with the strongest rung queued for it. */
static bool clean_instance(struct msb_router *r, struct msb_slot *s,
			   struct msb_cleanup_record *group, msb_reclaim_disposal *outcome)
{
	struct msb_lifecycle *lc = r->lc;
	msb_cleanup rung = MSB_CLEANUP_RECLAIM;
	struct msb_sbref *inst = NULL;
	double timeout = 0;
	const char *call = NULL;
	for (struct msb_cleanup_record *x = group; x; x = x->next) {
		if (!msb__streq_null(x->instance_id, group->instance_id))
			continue;
		rung = msb_cleanup_strongest(rung, x->rung);
		if (!inst)
			inst = x->inst;
		if (x->timeout > timeout)
			timeout = x->timeout;
		if (!call)
			call = x->call;
	}
	const char *id = group->instance_id;

	if (rung == MSB_CLEANUP_RESET) {
		msb_error *e = NULL;
		int rc = inst ? msb_lifecycle__sandbox_step(inst, MSB_STEP_RESET, NULL, timeout,
							    NULL, &e)
			      : msb_error_set(&e, MSB_E_RUNTIME, "no handle on the instance");
		progress(lc, s);
		if (rc == 0) {
			*outcome = MSB_RECLAIM_KEPT;
			return true;
		}
		msb__log(&lc->lg, MSB_LOG_WARNING, "router",
			 "reset of the `%s` sandbox instance `%s` (scope `%s`, thread `%s`, agent "
			 "`%s`) failed: %s: %s",
			 s->kind, id ? id : "*", s->key->scope, s->key->thread_id,
			 s->key->agent_dir, msb_error_name(e), msb_error_message(e));
		msb_error_free(e);
		if (lc->policy == MSB_FAILED_RECLAIM_KEEP) {
			*outcome = MSB_RECLAIM_KEPT;
			return false;
		}
		rung = MSB_CLEANUP_DISPOSE; /* escalation (8.10) */
	}
	if (rung != MSB_CLEANUP_DISPOSE) {
		*outcome = MSB_RECLAIM_KEPT;
		return true;
	}

	struct msb_dispose_outcome o;
	msb_lifecycle__dispose_one(r, s->backend, s->key, s->kind, id,
				   msb_lifecycle__deadline_after(timeout), NULL,
				   lc->policy != MSB_FAILED_RECLAIM_KEEP, MSB_CLEAR_INSTANCE, &o);
	msb_ev_disposal_result res = {
		.backend = r->entries[s->backend].name, .failed = !o.landed, .code = o.code};
	msb_lifecycle__emit_disposed(r, s->key, s->kind, id, o.landed, &res, 1, "framework", call);
	progress(lc, s);
	bool landed = o.landed;
	msb_dispose_outcome__clear(&o);
	*outcome = landed ? MSB_RECLAIM_DISPOSED : MSB_RECLAIM_FAILED;
	return landed;
}

static void execute(struct msb_router *r, struct msb_slot *s, struct msb_cleanup_record *records,
		    msb_release_report *report)
{
	/* Every distinct instance once, in the order first queued. */
	for (struct msb_cleanup_record *x = records; x; x = x->next) {
		bool seen = false;
		for (struct msb_cleanup_record *y = records; y != x; y = y->next)
			if (msb__streq_null(y->instance_id, x->instance_id))
				seen = true;
		if (seen)
			continue;
		msb_reclaim_disposal outcome;
		bool landed = clean_instance(r, s, x, &outcome);
		for (struct msb_cleanup_record *y = x; y; y = y->next)
			if (msb__streq_null(y->instance_id, x->instance_id)) {
				y->outcome = outcome;
				y->landed = landed;
			}
		if (report) {
			report->instances_cleaned++;
			report->landed = report->landed && landed;
		}
	}
}

void msb_admission__release(struct msb_call_hold *h, msb_release_report *report)
{
	if (report)
		*report = (msb_release_report){
			.executed = false, .instances_cleaned = 0, .landed = true};
	if (!h)
		return;
	struct msb_lifecycle *lc = h->r->lc;
	struct msb_slot *s = h->slot;
	pthread_mutex_lock(&lc->lock);
	s->holders--;
	if (h->exclusive)
		s->exclusive = false;
	s->progress++;
	struct msb_cleanup_record *records = NULL;
	if (s->holders == 0 && s->records && !s->cleaning) {
		/* The last call leaving cleans (8.13, 8.16). */
		records = s->records;
		s->records = NULL;
		s->cleaning = true;
	}
	pthread_cond_broadcast(&lc->cond);
	if (!records)
		slot_gc(lc, s);
	pthread_mutex_unlock(&lc->lock);

	if (records) {
		if (report)
			report->executed = true;
		execute(h->r, s, records, report);
		pthread_mutex_lock(&lc->lock);
		s->cleaning = false;
		pthread_cond_broadcast(&lc->cond);
		slot_gc(lc, s);
		pthread_mutex_unlock(&lc->lock);
		/* After the framework has cleaned, the callers that queued hear
		 * how it went (15.20). */
		for (struct msb_cleanup_record *x = records, *next; x; x = next) {
			next = x->next;
			if (x->notice.fn)
				x->notice.fn(x->notice.ud, x->outcome);
			record_free(x);
		}
	}
	hold_free(h);
}

int msb_router_release_call(msb_call_hold *h, const msb_release_options *opts,
			    msb_release_report *report, msb_error **err)
{
	static const msb_release_options defaults = MSB_RELEASE_OPTIONS_INIT;
	if (!h) {
		if (report)
			*report = (msb_release_report){false, 0, true};
		return 0;
	}
	if (!opts)
		opts = &defaults;
	int rc = 0;
	msb_cleanup rung = opts->cleanup;
	double timeout = h->cleanup_timeout;
	if (opts->version != MSB_RELEASE_OPTIONS_VERSION)
		rc = msb_error_set(err, MSB_E_VALUE, "release options: unsupported version %u",
				   opts->version);
	else if (rung != MSB_RELEASE_CLEANUP_EFFECTIVE && !msb_cleanup_name(rung))
		rc = msb_error_set(err, MSB_E_VALUE, "release: %d is not a cleanup rung",
				   (int)rung);
	else if (opts->cleanup_timeout != 0)
		rc = bound_or(opts->cleanup_timeout, timeout, "cleanup timeout", &timeout, err);
	/* A bad argument still releases, with the safe rung: never a leaked hold. */
	if (rc < 0 || rung == MSB_RELEASE_CLEANUP_EFFECTIVE)
		rung = msb_lifecycle__rung(h->r, h->backend, h->spec, h->scope);

	/* Whole-instance cleanup for each instance the hold acquired; a hold
	 * that acquired nothing leaves nothing to clean. */
	for (size_t i = 0; rung != MSB_CLEANUP_RECLAIM && i < h->n_instances; i++)
		msb_admission__queue(h, h->instances[i], rung, timeout, NULL, NULL);
	msb_admission__release(h, report);
	return rc;
}
