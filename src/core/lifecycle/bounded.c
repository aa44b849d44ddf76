/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Bounded cleanup steps (checklist 7.7, 8.22, 15.19, 15.20): a backend's
 * dispose and a host's callback take no timeout, so each runs on a helper
 * thread while the caller waits under its bound. A step the caller gives up
 * on is abandoned, never killed: its thread finishes it, calls late() and
 * frees it. Also the shared sandbox handle a call and its abandoned steps
 * hold, and reclaim/reset as steps.
 */
#include <math.h>
#include <time.h>

#include "core/lifecycle/lifecycle_int.h"

#define SLICE_NS 10000000 /* how often a wait looks at its cancel token */

int64_t msb_lifecycle__deadline_after(double seconds)
{
	int64_t now = msb__now_ns();
	if (!isfinite(seconds) || seconds > 1e9)
		return INT64_MAX;
	if (seconds <= 0)
		return now;
	int64_t d = (int64_t)(seconds * 1e9);
	return now > INT64_MAX - d ? INT64_MAX : now + d;
}

static void to_timespec(int64_t ns, struct timespec *ts)
{
	ts->tv_sec = (time_t)(ns / 1000000000);
	ts->tv_nsec = (long)(ns % 1000000000);
}

static void cond_init_monotonic(pthread_cond_t *c)
{
	pthread_condattr_t a;
	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_cond_init(c, &a);
	pthread_condattr_destroy(&a);
}

void msb_lifecycle__step_init(struct msb_step *s, void (*run)(struct msb_step *),
			      void (*late)(struct msb_step *), void (*destroy)(struct msb_step *))
{
	s->run = run;
	s->late = late;
	s->destroy = destroy;
	pthread_mutex_init(&s->m, NULL);
	cond_init_monotonic(&s->c);
	s->done = false;
	s->abandoned = false;
}

void msb_lifecycle__step_destroy(struct msb_step *s)
{
	if (!s)
		return;
	pthread_mutex_destroy(&s->m);
	pthread_cond_destroy(&s->c);
	s->destroy(s);
}

/* After run(): whoever owns the step now frees it. */
static void finish(struct msb_step *s)
{
	pthread_mutex_lock(&s->m);
	s->done = true;
	bool abandoned = s->abandoned;
	pthread_cond_broadcast(&s->c);
	pthread_mutex_unlock(&s->m);
	if (!abandoned)
		return;
	if (s->late)
		s->late(s);
	msb_lifecycle__step_destroy(s);
}

static void *worker(void *arg)
{
	struct msb_step *s = arg;
	s->run(s);
	finish(s);
	return NULL;
}

void msb_lifecycle__step_start(struct msb_step *s)
{
	pthread_attr_t a;
	pthread_t t;
	bool started = false;
	if (pthread_attr_init(&a) == 0) {
		pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
		started = pthread_create(&t, &a, worker, s) == 0;
		pthread_attr_destroy(&a);
	}
	if (!started) {
		/* No thread to be had: the step runs here, unbounded, rather
		 * than not at all. */
		s->run(s);
		pthread_mutex_lock(&s->m);
		s->done = true;
		pthread_mutex_unlock(&s->m);
	}
}

int msb_lifecycle__step_wait(struct msb_step *s, int64_t deadline_ns, msb_cancel *cancel)
{
	int rc = 0;
	pthread_mutex_lock(&s->m);
	while (!s->done) {
		if (cancel && msb_cancel_requested(cancel)) {
			rc = MSB_E_CANCELLED;
			break;
		}
		int64_t now = msb__now_ns();
		if (now >= deadline_ns) {
			rc = MSB_E_TIMEOUT;
			break;
		}
		int64_t until = deadline_ns;
		if (cancel && until - now > SLICE_NS)
			until = now + SLICE_NS;
		struct timespec ts;
		to_timespec(until, &ts);
		pthread_cond_timedwait(&s->c, &s->m, &ts);
	}
	pthread_mutex_unlock(&s->m);
	return rc;
}

bool msb_lifecycle__step_abandon(struct msb_step *s)
{
	pthread_mutex_lock(&s->m);
	bool give_up = !s->done;
	if (give_up)
		s->abandoned = true;
	pthread_mutex_unlock(&s->m);
	return give_up;
}

bool msb_lifecycle__step_run_bounded(struct msb_step *s, int64_t deadline_ns, msb_cancel *cancel,
				     int *rc)
{
	msb_lifecycle__step_start(s);
	int r = msb_lifecycle__step_wait(s, deadline_ns, cancel);
	if (r < 0 && msb_lifecycle__step_abandon(s)) {
		*rc = r;
		return false;
	}
	*rc = 0;
	return true;
}

/* ---- shared sandbox handles --------------------------------------------------------------------
 */

struct msb_sbref *msb_lifecycle__sbref_new(msb_sandbox *sb, size_t backend)
{
	struct msb_sbref *h = calloc(1, sizeof(*h));
	char *id = sb ? msb__strdup(msb_sandbox_instance_id(sb)) : NULL;
	if (!h || (sb && !id)) {
		free(h);
		free(id);
		msb_sandbox_free(sb);
		return NULL;
	}
	atomic_init(&h->refs, 1);
	h->sb = sb;
	h->instance_id = id;
	h->backend = backend;
	return h;
}

struct msb_sbref *msb_lifecycle__sbref_ref(struct msb_sbref *h)
{
	if (h)
		atomic_fetch_add(&h->refs, 1);
	return h;
}

void msb_lifecycle__sbref_unref(struct msb_sbref *h)
{
	if (!h || atomic_fetch_sub(&h->refs, 1) != 1)
		return;
	msb_sandbox_free(h->sb);
	free(h->instance_id);
	free(h);
}

/* ---- reclaim and reset as steps
 * ------------------------------------------------------------------ */

struct sandbox_step {
	struct msb_step base;
	struct msb_sbref *h;
	enum msb_sandbox_step_op op;
	char *directory;
	double timeout;
	int rc;
	msb_error *e;
};

static void sandbox_step_run(struct msb_step *s)
{
	struct sandbox_step *st = (struct sandbox_step *)s;
	if (st->op == MSB_STEP_RECLAIM)
		st->rc = msb_sandbox_reclaim(st->h->sb, st->directory, ".", st->timeout, &st->e);
	else
		st->rc = msb_sandbox_reset(st->h->sb, st->timeout, &st->e);
}

static void sandbox_step_destroy(struct msb_step *s)
{
	struct sandbox_step *st = (struct sandbox_step *)s;
	msb_lifecycle__sbref_unref(st->h);
	free(st->directory);
	msb_error_free(st->e);
	free(st);
}

int msb_lifecycle__sandbox_step(struct msb_sbref *h, enum msb_sandbox_step_op op,
				const char *directory, double timeout, msb_cancel *cancel,
				msb_error **err)
{
	struct sandbox_step *st = calloc(1, sizeof(*st));
	if (!st || (directory && !(st->directory = strdup(directory)))) {
		free(st);
		return msb__error_nomem(err);
	}
	msb_lifecycle__step_init(&st->base, sandbox_step_run, NULL, sandbox_step_destroy);
	st->h = msb_lifecycle__sbref_ref(h);
	st->op = op;
	st->timeout = timeout;
	/* The sandbox gets the bound too; the step holds it even when the
	 * sandbox does not honour it. */
	int rc;
	if (!msb_lifecycle__step_run_bounded(&st->base, msb_lifecycle__deadline_after(timeout),
					     cancel, &rc)) {
		const char *what = op == MSB_STEP_RECLAIM ? "reclaim" : "reset";
		if (rc == MSB_E_CANCELLED)
			return msb_error_set(err, rc, "%s cancelled", what);
		return msb_error_set(err, rc, "%s did not finish within %g s", what, timeout);
	}
	rc = st->rc;
	if (rc < 0) {
		msb__error_propagate(err, st->e);
		st->e = NULL;
	}
	msb_lifecycle__step_destroy(&st->base);
	return rc;
}
