/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unclean keys (checklist 7.8-7.13, DESIGN 9.16): a framework-initiated
 * disposal that did not land records its target - backend, kind, instance -
 * and acquire refuses the key with SandboxUnclean, quoting the backend, until
 * a disposal lands. Every record carries a generation, so that an attempt
 * that started before a failure was recorded cannot erase it (7.12).
 */
#include "core/lifecycle/lifecycle_int.h"

static void target_free(struct msb_lc_target *t)
{
	msb_key_free(t->key);
	free(t->backend_name);
	free(t->kind);
	free(t->instance_id);
	free(t->detail);
}

void msb_unclean__free_all(struct msb_lifecycle *lc)
{
	for (size_t i = 0; i < lc->n_targets; i++)
		target_free(&lc->targets[i]);
	free(lc->targets);
	lc->targets = NULL;
	lc->n_targets = 0;
}

uint64_t msb_unclean__snapshot(struct msb_lifecycle *lc)
{
	pthread_mutex_lock(&lc->lock);
	uint64_t g = lc->gen;
	pthread_mutex_unlock(&lc->lock);
	return g;
}

static bool same_target(const struct msb_lc_target *t, const msb_key *key, size_t backend,
			const char *kind, const char *instance_id)
{
	return t->backend == backend && msb_key_equal(t->key, key) &&
	       msb__streq_null(t->kind, kind) && msb__streq_null(t->instance_id, instance_id);
}

uint64_t msb_unclean__record(struct msb_lifecycle *lc, const msb_key *key, size_t backend,
			     const char *backend_name, const char *kind, const char *instance_id,
			     msb_disposal_code code, const char *detail)
{
	_cleanup_free_ char *d = msb__strdup(detail ? detail : "");
	if (!d)
		goto nomem;
	pthread_mutex_lock(&lc->lock);
	struct msb_lc_target *t = NULL;
	for (size_t i = 0; i < lc->n_targets; i++)
		if (same_target(&lc->targets[i], key, backend, kind, instance_id))
			t = &lc->targets[i];
	if (!t) {
		struct msb_lc_target n = {.backend = backend};
		struct msb_lc_target *v = NULL;
		if (msb_key_dup(key, &n.key, NULL) < 0 ||
		    !(n.backend_name = msb__strdup(backend_name)) ||
		    (kind && !(n.kind = strdup(kind))) ||
		    (instance_id && !(n.instance_id = strdup(instance_id))) ||
		    !(v = msb__reallocarray(lc->targets, lc->n_targets + 1, sizeof(*v)))) {
			target_free(&n);
			pthread_mutex_unlock(&lc->lock);
			goto nomem;
		}
		lc->targets = v;
		t = &lc->targets[lc->n_targets++];
		*t = n;
	}
	free(t->detail);
	t->detail = TAKE_PTR(d);
	t->code = code;
	t->gen = ++lc->gen;
	uint64_t g = t->gen;
	pthread_cond_broadcast(&lc->cond);
	pthread_mutex_unlock(&lc->lock);
	return g;

nomem:
	msb__log(&lc->lg, MSB_LOG_ERROR, "router",
		 "out of memory recording an unclean sandbox (scope `%s`, thread `%s`, agent "
		 "`%s`, kind `%s`): the key is not refused",
		 key->scope, key->thread_id, key->agent_dir, kind ? kind : "*");
	return 0;
}

static bool covered(const struct msb_lc_target *t, const msb_key *key, size_t backend,
		    const char *kind, const char *instance_id, enum msb_clear_mode mode)
{
	if (t->backend != backend || !msb_key_equal(t->key, key))
		return false;
	switch (mode) {
	case MSB_CLEAR_KEY:
		return true;
	case MSB_CLEAR_KIND:
		/* Another kind's target, or a whole-key one, stays (7.8). */
		return t->kind && kind && strcmp(t->kind, kind) == 0;
	case MSB_CLEAR_INSTANCE:
		return msb__streq_null(t->kind, kind) &&
		       msb__streq_null(t->instance_id, instance_id);
	}
	return false;
}

void msb_unclean__clear(struct msb_lifecycle *lc, const msb_key *key, size_t backend,
			const char *kind, const char *instance_id, enum msb_clear_mode mode,
			uint64_t since, uint64_t own)
{
	pthread_mutex_lock(&lc->lock);
	size_t j = 0;
	for (size_t i = 0; i < lc->n_targets; i++) {
		struct msb_lc_target *t = &lc->targets[i];
		bool older = t->gen <= since || (own != 0 && t->gen == own);
		if (older && covered(t, key, backend, kind, instance_id, mode)) {
			target_free(t);
			continue;
		}
		lc->targets[j++] = *t;
	}
	lc->n_targets = j;
	pthread_cond_broadcast(&lc->cond);
	pthread_mutex_unlock(&lc->lock);
}

int msb_unclean__refuse(struct msb_lifecycle *lc, const msb_key *key, msb_error **err)
{
	pthread_mutex_lock(&lc->lock);
	const struct msb_lc_target *newest = NULL;
	size_t n = 0;
	for (size_t i = 0; i < lc->n_targets; i++) {
		const struct msb_lc_target *t = &lc->targets[i];
		if (!msb_key_equal(t->key, key))
			continue;
		n++;
		if (!newest || t->gen > newest->gen)
			newest = t;
	}
	int rc = 0;
	if (newest)
		/* Quote the backend: it said the delete did not land. */
		rc = msb_error_set(err, MSB_E_UNCLEAN,
				   "sandbox key (scope `%s`, thread `%s`, agent `%s`) is unclean: "
				   "a cleanup of kind `%s` instance `%s` on sandbox backend '%s' "
				   "did not land (%s: %s)%s; acquire is refused until a disposal "
				   "lands",
				   key->scope, key->thread_id, key->agent_dir,
				   newest->kind ? newest->kind : "*",
				   newest->instance_id ? newest->instance_id : "*",
				   newest->backend_name, msb_disposal_code_name(newest->code),
				   newest->detail, n > 1 ? " and other cleanups are pending" : "");
	pthread_mutex_unlock(&lc->lock);
	return rc;
}

bool msb_router_key_unclean(msb_router *r, const msb_key *key, size_t *n_targets)
{
	size_t n = 0;
	if (r && r->lc && key) {
		pthread_mutex_lock(&r->lc->lock);
		for (size_t i = 0; i < r->lc->n_targets; i++)
			if (msb_key_equal(r->lc->targets[i].key, key))
				n++;
		pthread_mutex_unlock(&r->lc->lock);
	}
	if (n_targets)
		*n_targets = n;
	return n > 0;
}

/* ---- dispose_unclean (7.11) ---------------------------------------------------------------------
 */

struct retry {
	size_t backend;
	char *kind;
	char *instance_id;
};

static void retries_free(struct retry *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(v[i].kind);
		free(v[i].instance_id);
	}
	free(v);
}

/* The key's targets, narrowed by the selectors, copied out of the lock. */
static int collect(struct msb_lifecycle *lc, const msb_key *key, const char *kind,
		   const char *instance_id, struct retry **out, size_t *n_out)
{
	pthread_mutex_lock(&lc->lock);
	struct retry *v = NULL;
	size_t n = 0;
	int rc = 0;
	for (size_t i = 0; i < lc->n_targets; i++) {
		const struct msb_lc_target *t = &lc->targets[i];
		if (!msb_key_equal(t->key, key))
			continue;
		if (kind && !msb__streq_null(t->kind, kind))
			continue;
		if (instance_id && !msb__streq_null(t->instance_id, instance_id))
			continue;
		struct retry *nv = msb__reallocarray(v, n + 1, sizeof(*v));
		if (!nv) {
			rc = -ENOMEM;
			break;
		}
		v = nv;
		v[n] = (struct retry){.backend = t->backend};
		v[n].kind = msb__strdup(t->kind);
		v[n].instance_id = msb__strdup(t->instance_id);
		n++;
		if ((t->kind && !v[n - 1].kind) || (t->instance_id && !v[n - 1].instance_id)) {
			rc = -ENOMEM;
			break;
		}
	}
	pthread_mutex_unlock(&lc->lock);
	if (rc < 0) {
		retries_free(v, n);
		return rc;
	}
	*out = v;
	*n_out = n;
	return 0;
}

int msb_router_dispose_unclean(msb_router *r, const msb_key *key, double timeout,
			       const msb_dispose_unclean_options *opts, bool *all_landed,
			       msb_error **err)
{
	if (!r)
		return msb_error_set(err, MSB_E_VALUE, "dispose_unclean: missing router");
	if (opts && opts->version != MSB_DISPOSE_UNCLEAN_OPTIONS_VERSION)
		return msb_error_set(err, MSB_E_VALUE,
				     "dispose_unclean options: unsupported version %u",
				     opts->version);
	int rc = msb__check_timeout(timeout, "dispose_unclean timeout", err);
	if (rc == 0)
		rc = msb_key_validate(key, err);
	if (rc < 0)
		return rc;
	const char *kind = opts ? opts->kind : NULL;
	const char *instance_id = opts ? opts->instance_id : NULL;
	msb_cancel *cancel = opts ? opts->cancel : NULL;

	int64_t deadline = msb_lifecycle__deadline_after(timeout);
	msb_error *le = NULL;
	rc = msb_lifecycle__key_lock(r->lc, key, deadline, cancel, &le);
	if (rc == MSB_E_CANCELLED)
		return msb__error_propagate(err, le);
	if (rc < 0) {
		msb__log(&r->lg, MSB_LOG_WARNING, "router",
			 "dispose_unclean (scope `%s`, thread `%s`, agent `%s`): %s", key->scope,
			 key->thread_id, key->agent_dir, msb_error_message(le));
		msb_error_free(le);
		if (all_landed)
			*all_landed = false;
		return 0;
	}

	struct retry *v = NULL;
	size_t n = 0;
	if (collect(r->lc, key, kind, instance_id, &v, &n) < 0) {
		msb_lifecycle__key_unlock(r->lc, key);
		return msb__error_nomem(err);
	}
	/* Each target on its own backend with its own selectors; a failure
	 * refreshes the target, a landing clears it unless something newer
	 * was recorded meanwhile. */
	bool all = true, cancelled = false;
	for (size_t i = 0; i < n && !cancelled; i++) {
		struct msb_dispose_outcome o;
		msb_lifecycle__dispose_one(r, v[i].backend, key, v[i].kind, v[i].instance_id,
					   deadline, cancel, true, MSB_CLEAR_INSTANCE, &o);
		msb_ev_disposal_result res = {.backend = r->entries[v[i].backend].name,
					      .failed = !o.landed,
					      .code = o.code};
		msb_lifecycle__emit_disposed(r, key, v[i].kind, v[i].instance_id, o.landed, &res, 1,
					     "host", NULL);
		all = all && o.landed;
		cancelled = o.cancelled;
		msb_dispose_outcome__clear(&o);
	}
	retries_free(v, n);
	msb_lifecycle__key_unlock(r->lc, key);
	if (cancelled)
		return msb_error_set(err, MSB_E_CANCELLED, "dispose_unclean cancelled");
	if (all_landed)
		*all_landed = all;
	return 0;
}
