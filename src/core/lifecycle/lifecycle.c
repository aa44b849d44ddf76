/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The router's lifecycle state and its disposals (checklist 7.5-7.16, 8.1-8.7):
 * per-key disposal locks, one backend's disposal as a bounded step,
 * dispose_kind, the scope helper, the purger and the cleanup rung.
 * Unclean keys are in unclean.c, call admission in admission.c.
 */
#include <math.h>
#include <time.h>

#include "core/lifecycle/lifecycle_int.h"

#define SLICE_NS 10000000

/* ---- state
 * --------------------------------------------------------------------------------------- */

int msb_lifecycle__new(struct msb_router *r, msb_error **err)
{
	struct msb_lifecycle *lc = calloc(1, sizeof(*lc));
	if (!lc)
		return msb__error_nomem(err);
	atomic_init(&lc->refs, 1);
	pthread_mutex_init(&lc->lock, NULL);
	pthread_condattr_t a;
	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_cond_init(&lc->cond, &a);
	pthread_condattr_destroy(&a);
	lc->lg = r->lg;
	lc->policy = r->opts.reclaim.failed_reclaim_policy;
	r->lc = lc;
	return 0;
}

struct msb_lifecycle *msb_lifecycle__ref(struct msb_lifecycle *lc)
{
	if (lc)
		atomic_fetch_add(&lc->refs, 1);
	return lc;
}

void msb_lifecycle__unref(struct msb_lifecycle *lc)
{
	if (!lc || atomic_fetch_sub(&lc->refs, 1) != 1)
		return;
	msb_unclean__free_all(lc);
	for (struct msb_lc_keylock *k = lc->locks, *next; k; k = next) {
		next = k->next;
		msb_key_free(k->key);
		free(k);
	}
	/* Slots outlive no hold: a router is freed after its calls end. */
	pthread_mutex_destroy(&lc->lock);
	pthread_cond_destroy(&lc->cond);
	free(lc);
}

void msb_router_set_clock(msb_router *r, msb_clock_fn fn, void *userdata)
{
	if (!r || !r->lc)
		return;
	pthread_mutex_lock(&r->lc->lock);
	r->lc->clock = fn;
	r->lc->clock_ud = userdata;
	pthread_mutex_unlock(&r->lc->lock);
}

/* Called with lc->lock held. */
int64_t msb_lifecycle__now(struct msb_lifecycle *lc)
{
	return lc->clock ? lc->clock(lc->clock_ud) : msb__now_ns();
}

void msb_lifecycle__wait(struct msb_lifecycle *lc, int64_t deadline_ns, bool short_slices)
{
	int64_t now = msb__now_ns();
	int64_t until = deadline_ns;
	if ((short_slices || lc->clock) && (until <= now || until - now > SLICE_NS))
		until = now + SLICE_NS;
	if (until <= now)
		return;
	struct timespec ts = {.tv_sec = (time_t)(until / 1000000000),
			      .tv_nsec = (long)(until % 1000000000)};
	pthread_cond_timedwait(&lc->cond, &lc->lock, &ts);
}

/* ---- per-key disposal locks (7.7) ---------------------------------------------------------------
 */

static struct msb_lc_keylock *keylock_get(struct msb_lifecycle *lc, const msb_key *key)
{
	for (struct msb_lc_keylock *k = lc->locks; k; k = k->next)
		if (msb_key_equal(k->key, key)) {
			k->refs++;
			return k;
		}
	struct msb_lc_keylock *k = calloc(1, sizeof(*k));
	if (!k || msb_key_dup(key, &k->key, NULL) < 0) {
		free(k);
		return NULL;
	}
	k->refs = 1;
	k->next = lc->locks;
	lc->locks = k;
	return k;
}

static void keylock_put(struct msb_lifecycle *lc, struct msb_lc_keylock *k)
{
	if (--k->refs > 0)
		return;
	for (struct msb_lc_keylock **p = &lc->locks; *p; p = &(*p)->next)
		if (*p == k) {
			*p = k->next;
			break;
		}
	msb_key_free(k->key);
	free(k);
}

int msb_lifecycle__key_lock(struct msb_lifecycle *lc, const msb_key *key, int64_t deadline_ns,
			    msb_cancel *cancel, msb_error **err)
{
	pthread_mutex_lock(&lc->lock);
	struct msb_lc_keylock *k = keylock_get(lc, key);
	if (!k) {
		pthread_mutex_unlock(&lc->lock);
		return msb__error_nomem(err);
	}
	int rc = 0;
	while (k->held) {
		if (cancel && msb_cancel_requested(cancel)) {
			rc = msb_error_set(err, MSB_E_CANCELLED, "disposal cancelled");
			break;
		}
		if (msb__now_ns() >= deadline_ns) {
			rc = msb_error_set(err, MSB_E_TIMEOUT,
					   "the key's disposal lock was not free in time");
			break;
		}
		/* The lifecycle clock may be injected; this bound is real time. */
		int64_t now = msb__now_ns(), until = deadline_ns;
		if (cancel && until - now > SLICE_NS)
			until = now + SLICE_NS;
		struct timespec ts = {.tv_sec = (time_t)(until / 1000000000),
				      .tv_nsec = (long)(until % 1000000000)};
		pthread_cond_timedwait(&lc->cond, &lc->lock, &ts);
	}
	if (rc == 0)
		k->held = true;
	else
		keylock_put(lc, k);
	pthread_mutex_unlock(&lc->lock);
	return rc;
}

void msb_lifecycle__key_unlock(struct msb_lifecycle *lc, const msb_key *key)
{
	pthread_mutex_lock(&lc->lock);
	for (struct msb_lc_keylock *k = lc->locks; k; k = k->next)
		if (msb_key_equal(k->key, key) && k->held) {
			k->held = false;
			keylock_put(lc, k);
			break;
		}
	pthread_cond_broadcast(&lc->cond);
	pthread_mutex_unlock(&lc->lock);
}

/* ---- one backend's disposal as a bounded step ---------------------------------------------------
 */

void msb_dispose_outcome__clear(struct msb_dispose_outcome *o)
{
	free(o->detail);
	*o = (struct msb_dispose_outcome){0};
}

struct dispose_step {
	struct msb_step base;
	struct msb_lifecycle *lc;
	msb_backend *backend;
	size_t index;
	msb_key *key;
	char *kind;
	char *instance_id;
	enum msb_clear_mode mode;
	uint64_t since;	      /* generation when the attempt started */
	uint64_t own_timeout; /* the generation of its own timeout record */
	int rc;
	msb_error *e;
	msb_disposal_failure *f;
};

static void dispose_run(struct msb_step *s)
{
	struct dispose_step *d = (struct dispose_step *)s;
	d->rc = msb_backend_dispose(d->backend, d->key, d->kind, d->instance_id, &d->f, &d->e);
}

/* A step given up on still reports a landed disposal: it clears what is
 * not newer than itself, never a failure recorded meanwhile (7.12). */
static void dispose_late(struct msb_step *s)
{
	struct dispose_step *d = (struct dispose_step *)s;
	if (d->rc == 0 && !d->f)
		msb_unclean__clear(d->lc, d->key, d->index, d->kind, d->instance_id, d->mode,
				   d->since, d->own_timeout);
	msb__log(&d->lc->lg, MSB_LOG_INFO, "router",
		 "a disposal on sandbox backend '%s' given up at its bound has returned: %s",
		 msb_backend_name(d->backend), d->rc == 0 && !d->f ? "landed" : "did not land");
}

static void dispose_destroy(struct msb_step *s)
{
	struct dispose_step *d = (struct dispose_step *)s;
	msb_lifecycle__unref(d->lc);
	msb_backend_unref(d->backend);
	msb_key_free(d->key);
	free(d->kind);
	free(d->instance_id);
	msb_error_free(d->e);
	msb_disposal_failure_free(d->f);
	free(d);
}

static const char *or_any(const char *s)
{
	return s ? s : "*";
}

void msb_lifecycle__dispose_one(struct msb_router *r, size_t backend, const msb_key *key,
				const char *kind, const char *instance_id, int64_t deadline_ns,
				msb_cancel *cancel, bool record, enum msb_clear_mode mode,
				struct msb_dispose_outcome *out)
{
	struct msb_lifecycle *lc = r->lc;
	const char *bname = r->entries[backend].name;
	*out = (struct msb_dispose_outcome){.landed = false, .code = MSB_DISPOSAL_UNKNOWN};

	struct dispose_step *d = calloc(1, sizeof(*d));
	if (!d || msb_key_dup(key, &d->key, NULL) < 0 || (kind && !(d->kind = strdup(kind))) ||
	    (instance_id && !(d->instance_id = strdup(instance_id)))) {
		if (d) {
			msb_key_free(d->key);
			free(d->kind);
			free(d);
		}
		out->detail = msb__strdup("out of memory");
		return;
	}
	msb_lifecycle__step_init(&d->base, dispose_run, dispose_late, dispose_destroy);
	d->lc = msb_lifecycle__ref(lc);
	d->backend = msb_backend_ref(r->entries[backend].backend);
	d->index = backend;
	d->mode = mode;
	d->since = msb_unclean__snapshot(lc);

	msb_lifecycle__step_start(&d->base);
	int rc = msb_lifecycle__step_wait(&d->base, deadline_ns, cancel);
	uint64_t own = 0;
	if (rc < 0) {
		/* Given up at the bound. The timeout is recorded first, and the
		 * step told its generation before it is abandoned, so that its
		 * late success clears its own record and nothing newer (7.12). */
		if (record)
			own = msb_unclean__record(
				lc, key, backend, bname, kind, instance_id, MSB_DISPOSAL_TIMEOUT,
				rc == MSB_E_CANCELLED ? "the disposal was cancelled"
						      : "the disposal did not finish in time");
		d->own_timeout = own;
		if (msb_lifecycle__step_abandon(&d->base)) {
			out->cancelled = rc == MSB_E_CANCELLED;
			out->code = MSB_DISPOSAL_TIMEOUT;
			out->detail =
				msb__strdup(out->cancelled ? "the disposal was cancelled"
							   : "the disposal did not finish in time");
			msb__log(&lc->lg, MSB_LOG_WARNING, "router",
				 "sandbox backend '%s' did not finish disposing kind `%s` "
				 "instance `%s` (scope `%s`, thread `%s`, agent `%s`): %s",
				 bname, or_any(kind), or_any(instance_id), key->scope,
				 key->thread_id, key->agent_dir,
				 out->cancelled ? "cancelled" : "timed out");
			return;
		}
		/* It finished after all: its answer stands. */
	}

	if (d->rc == 0 && !d->f) {
		out->landed = true;
		msb_unclean__clear(lc, key, backend, kind, instance_id, mode, d->since, own);
	} else if (d->rc == MSB_E_CANCELLED) {
		out->cancelled = true;
		out->code = MSB_DISPOSAL_UNKNOWN;
		out->detail = msb__strdup("the disposal was cancelled");
	} else {
		if (d->f) {
			out->code = d->f->code;
			out->detail = msb__strdup(d->f->detail ? d->f->detail : "");
		} else {
			/* The backend "raised": an unknown failure, in its words. */
			out->code = MSB_DISPOSAL_UNKNOWN;
			out->detail = msb__strdup(msb_error_message(d->e));
		}
		const char *detail = d->e ? msb_error_detail(d->e) : NULL;
		msb__log(&lc->lg, MSB_LOG_WARNING, "router",
			 "sandbox backend '%s' reports the disposal of kind `%s` instance `%s` "
			 "(scope `%s`, thread `%s`, agent `%s`) did not land: %s: %s%s%s",
			 bname, or_any(kind), or_any(instance_id), key->scope, key->thread_id,
			 key->agent_dir, msb_disposal_code_name(out->code),
			 out->detail ? out->detail : "", detail ? ": " : "", detail ? detail : "");
		if (record)
			msb_unclean__record(lc, key, backend, bname, kind, instance_id, out->code,
					    out->detail);
	}
	msb_lifecycle__step_destroy(&d->base);
}

void msb_lifecycle__emit_disposed(struct msb_router *r, const msb_key *key, const char *kind,
				  const char *instance_id, bool all,
				  const msb_ev_disposal_result *res, size_t n, const char *origin,
				  const char *call)
{
	if (!msb_observer__wants(&r->observer, sandbox_disposed))
		return;
	msb_ev_sandbox_disposed ev = {
		.key = key,
		.kind = kind,
		.instance_id = instance_id,
		.disposed = all,
		.results = res,
		.n_results = n,
		.origin = origin,
		.call = call,
	};
	msb_observer__sandbox_disposed(&r->observer, &r->lg, &ev);
}

/* ---- dispose_kind (7.6-7.9) ---------------------------------------------------------------------
 */

int msb_router_dispose_kind(msb_router *r, const msb_key *key, const char *kind, double timeout,
			    const msb_dispose_kind_options *opts, bool *all_landed, msb_error **err)
{
	if (!r || !kind)
		return msb_error_set(err, MSB_E_VALUE, "dispose_kind: missing argument");
	if (opts && opts->version != MSB_DISPOSE_KIND_OPTIONS_VERSION)
		return msb_error_set(err, MSB_E_VALUE,
				     "dispose_kind options: unsupported version %u", opts->version);
	int rc = msb__check_timeout(timeout, "dispose_kind timeout", err);
	if (rc == 0)
		rc = msb_key_validate(key, err);
	if (rc < 0)
		return rc;
	const char *instance_id = opts ? opts->instance_id : NULL;
	msb_cancel *cancel = opts ? opts->cancel : NULL;
	const char *call = opts ? opts->call : NULL;

	int64_t deadline = msb_lifecycle__deadline_after(timeout);
	msb_error *le = NULL;
	rc = msb_lifecycle__key_lock(r->lc, key, deadline, cancel, &le);
	if (rc == MSB_E_CANCELLED)
		return msb__error_propagate(err, le);
	if (rc < 0) {
		/* The bound covers the lock wait: not landed, not an error. */
		msb__log(&r->lg, MSB_LOG_WARNING, "router",
			 "dispose_kind `%s` (scope `%s`, thread `%s`, agent `%s`): %s", kind,
			 key->scope, key->thread_id, key->agent_dir, msb_error_message(le));
		msb_error_free(le);
		msb_lifecycle__emit_disposed(r, key, kind, instance_id, false, NULL, 0, "host",
					     call);
		if (all_landed)
			*all_landed = false;
		return 0;
	}

	/* With an instance, only its serving backend (FIXED); under PER_SPEC
	 * every backend is asked and treats an id it does not hold as absent. */
	size_t first = 0, end = r->n;
	if (instance_id && r->resolved != SIZE_MAX) {
		first = r->resolved;
		end = first + 1;
	}
	bool record = instance_id && r->lc->policy != MSB_FAILED_RECLAIM_KEEP;
	enum msb_clear_mode mode = instance_id ? MSB_CLEAR_INSTANCE : MSB_CLEAR_KIND;

	msb_ev_disposal_result *res = NULL;
	if (end > first && !(res = calloc(end - first, sizeof(*res)))) {
		msb_lifecycle__key_unlock(r->lc, key);
		return msb__error_nomem(err);
	}
	bool all = true, cancelled = false;
	for (size_t i = first; i < end; i++) {
		struct msb_dispose_outcome o;
		msb_lifecycle__dispose_one(r, i, key, kind, instance_id, deadline, cancel, record,
					   mode, &o);
		res[i - first] = (msb_ev_disposal_result){
			.backend = r->entries[i].name, .failed = !o.landed, .code = o.code};
		all = all && o.landed;
		cancelled = cancelled || o.cancelled;
		msb_dispose_outcome__clear(&o);
		if (cancelled)
			break;
	}
	msb_lifecycle__key_unlock(r->lc, key);
	msb_lifecycle__emit_disposed(r, key, kind, instance_id, all, res, end - first, "host",
				     call);
	free(res);
	if (cancelled)
		return msb_error_set(err, MSB_E_CANCELLED, "dispose_kind `%s` cancelled", kind);
	if (all_landed)
		*all_landed = all;
	return 0;
}

/* ---- the scope helper (7.5) and the purger (7.14)
 * ------------------------------------------------ */

struct msb_router_scope {
	msb_router *r;
	char *scope;
	char *thread_id;
	msb_scope_purge *record;
};

int msb_router_scope_begin(msb_router *r, const char *scope, const char *thread_id,
			   msb_scope_purge *record, msb_router_scope **out, msb_error **err)
{
	if (!r || !scope || !thread_id || !record || !out)
		return msb_error_set(err, MSB_E_VALUE, "scope: missing argument");
	msb_router_scope *g = calloc(1, sizeof(*g));
	if (!g || !(g->scope = strdup(scope)) || !(g->thread_id = strdup(thread_id))) {
		if (g)
			free(g->scope);
		free(g);
		return msb__error_nomem(err);
	}
	g->r = r;
	g->record = record;
	/* Inside the block the record reads zero. */
	*record = (msb_scope_purge){0, 0};
	*out = g;
	return 0;
}

int msb_router_scope_end(msb_router_scope *g, int block_rc, msb_error **err)
{
	if (!g)
		return block_rc;
	msb_scope_purge p = {0, 0};
	msb_error *de = NULL;
	int rc = msb_router_dispose_scope(g->r, g->scope, g->thread_id, &p, &de);
	*g->record = p;
	free(g->scope);
	free(g->thread_id);
	free(g);
	if (block_rc != 0) {
		/* The block's own error is never masked. */
		msb_error_free(de);
		return block_rc;
	}
	return rc < 0 ? msb__error_propagate(err, de) : 0;
}

int msb_router_with_scope(msb_router *r, const char *scope, const char *thread_id,
			  msb_scope_block_fn fn, void *userdata, msb_scope_purge *record,
			  msb_error **err)
{
	if (!fn)
		return msb_error_set(err, MSB_E_VALUE, "scope: no block given");
	msb_router_scope *g = NULL;
	int rc = msb_router_scope_begin(r, scope, thread_id, record, &g, err);
	if (rc < 0)
		return rc;
	rc = fn(userdata, err);
	return msb_router_scope_end(g, rc, rc < 0 ? NULL : err);
}

int msb_purge_scoped_thread(msb_router *r, const char *scope, const char *thread_id,
			    msb_scope_purge *out, msb_error **err)
{
	if (!r || !scope || !thread_id)
		return msb_error_set(err, MSB_E_VALUE, "purge_scoped_thread: missing argument");
	msb_scope_purge p = {0, 0};
	msb_error *e = NULL;
	if (msb_router_dispose_scope(r, scope, thread_id, &p, &e) < 0) {
		/* A conversation delete never fails for a purge. */
		msb__log(&r->lg, MSB_LOG_WARNING, "purger",
			 "purge of scope `%s` thread `%s` did not finish: %s", scope, thread_id,
			 msb_error_message(e));
		msb_error_free(e);
	}
	msb__log(&r->lg, MSB_LOG_INFO, "purger",
		 "purged scope `%s` thread `%s`: %llu sandboxes disposed, %llu not", scope,
		 thread_id, (unsigned long long)p.disposed, (unsigned long long)p.undisposed);
	if (out)
		*out = p;
	return 0;
}

/* ---- the cleanup rung (8.1-8.6, 23.14, 23.15, 23.38)
 * ---------------------------------------------- */

msb_cleanup msb_lifecycle__rung(const struct msb_router *r, size_t backend, const msb_spec *spec,
				msb_isolation_scope scope)
{
	/* A call-scoped sandbox never outlives its call. */
	if (scope == MSB_SCOPE_CALL)
		return MSB_CLEANUP_DISPOSE;
	msb_cleanup rung = r->opts.min_cleanup, floor;
	if (spec && msb_spec_min_cleanup(spec, &floor))
		rung = msb_cleanup_strongest(rung, floor);
	/* The weakest rung the backend can establish at or above it;
	 * confinement metadata is advisory and never consulted (8.6). */
	msb_capset caps = r->entries[backend].decl->capabilities;
	if (rung == MSB_CLEANUP_RECLAIM && !(caps & MSB_CAP_RECLAIM))
		rung = MSB_CLEANUP_RESET;
	if (rung == MSB_CLEANUP_RESET && !(caps & MSB_CAP_SNAPSHOT))
		rung = MSB_CLEANUP_DISPOSE;
	return rung;
}

int msb_router_effective_cleanup(const msb_router *r, const msb_spec *spec, msb_cleanup *out,
				 msb_error **err)
{
	if (!r || !spec || !out)
		return msb_error_set(err, MSB_E_VALUE, "effective_cleanup: missing argument");
	if (r->n == 0)
		return msb_error_set(err, MSB_E_NO_BACKEND, "no sandbox backend is configured");
	size_t i = SIZE_MAX;
	msb_isolation_scope scope = MSB_SCOPE_CONVERSATION;
	int rc = msb_router__route(r, spec, &i, &scope, err);
	if (rc < 0)
		return rc;
	*out = msb_lifecycle__rung(r, i, spec, scope);
	return 0;
}
