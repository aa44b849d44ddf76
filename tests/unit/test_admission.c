/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Call admission (checklist 8.11-8.21): overlapping calls, whole-instance
 * cleanup closing admission, the last call cleaning once, exclusive
 * admission, the two bounds (with an injected clock), cancelled waiters, one
 * router's gate, and many threads with failing cleanups that would show a
 * missing wait or a double cleanup.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "scripted_backend.h"

static const msb_key K = {"s", "t", "a", NULL};
static const msb_key K2 = {"s", "t2", "a", NULL};

/* ---- an injected clock (8.17, 8.18) ------------------------------------------------------------
 */

static _Atomic int64_t fake_ns;

static int64_t fake_clock(void *ud)
{
	return atomic_load(&fake_ns);
}

static void advance_to(double seconds)
{
	atomic_store(&fake_ns, (int64_t)(seconds * 1e9));
}

/* ---- entering on a thread ------------------------------------------------------------------ */

struct enter_arg {
	msb_router *r;
	const msb_key *key;
	msb_spec *spec;
	msb_enter_call_options o;
	int rc;
	msb_call_hold *h;
	atomic_bool done;
	char message[256];
};

static void *enter_thread(void *p)
{
	struct enter_arg *a = p;
	msb_error *e = NULL;
	a->rc = msb_router_enter_call(a->r, a->key, a->spec, &a->o, &a->h, &e);
	snprintf(a->message, sizeof(a->message), "%s", e ? msb_error_message(e) : "");
	msb_error_free(e);
	e = NULL;
	atomic_store(&a->done, true);
	return NULL;
}

static void enter_async(struct enter_arg *a, pthread_t *t, msb_router *r, const msb_key *key,
			msb_spec *spec)
{
	memset(a, 0, sizeof(*a));
	a->r = r;
	a->key = key;
	a->spec = spec;
	msb_enter_call_options o = MSB_ENTER_CALL_OPTIONS_INIT;
	a->o = o;
	atomic_init(&a->done, false);
}

static void start(struct enter_arg *a, pthread_t *t)
{
	pthread_create(t, NULL, enter_thread, a);
}

static bool done_within(struct enter_arg *a, int ms)
{
	for (int i = 0; i < ms / 5; i++) {
		if (atomic_load(&a->done))
			return true;
		sleep_ms(5);
	}
	return atomic_load(&a->done);
}

static msb_call_hold *enter(msb_router *r, const msb_key *key, msb_spec *spec)
{
	msb_call_hold *h = NULL;
	msb_error *e = NULL;
	int rc = msb_router_enter_call(r, key, spec, NULL, &h, &e);
	cr_assert_eq(rc, 0, "enter: %s", e ? msb_error_message(e) : "");
	return h;
}

static const char *acquire_id(msb_call_hold *h)
{
	msb_sandbox *sb = NULL;
	msb_error *e = NULL;
	int rc = msb_call_hold_acquire(h, &sb, &e);
	cr_assert_eq(rc, 0, "acquire: %s", e ? msb_error_message(e) : "");
	return msb_sandbox_instance_id(sb);
}

static msb_release_report release(msb_call_hold *h, msb_cleanup rung)
{
	msb_release_options o = MSB_RELEASE_OPTIONS_INIT;
	o.cleanup = rung;
	msb_release_report rep;
	cr_assert_eq(msb_router_release_call(h, &o, &rep, NULL), 0);
	return rep;
}

/* ---- 8.11, 8.13 -------------------------------------------------------------------------------
 */

struct body_arg {
	msb_router *r;
	msb_spec *spec;
	atomic_int *inside;
	atomic_int *max_inside;
	int ms;
	bool executed;
};

static void *body_thread(void *p)
{
	struct body_arg *a = p;
	msb_call_hold *h = enter(a->r, &K, a->spec);
	acquire_id(h);
	int now = atomic_fetch_add(a->inside, 1) + 1;
	int m = atomic_load(a->max_inside);
	while (now > m && !atomic_compare_exchange_weak(a->max_inside, &m, now))
		;
	sleep_ms(a->ms);
	atomic_fetch_sub(a->inside, 1);
	msb_release_report rep = release(h, MSB_RELEASE_CLEANUP_EFFECTIVE);
	a->executed = rep.executed;
	return NULL;
}

Test(admission, calls_overlap_and_dispose_once_8_11_8_13, .timeout = 30)
{
	msb_backend *b;
	scripted *sc;
	scripted_new("sc", MSB_DEFAULT_CAPABILITIES, &b, &sc);
	msb_router *r =
		router_over(&b, 1, MSB_CLEANUP_DISPOSE, MSB_FAILED_RECLAIM_DISPOSE, NULL, NULL);
	msb_spec *spec = spec_from("{\"kind\": \"A\"}");
	atomic_int inside = 0, max_inside = 0;
	struct body_arg a[2];
	pthread_t t[2];
	for (int i = 0; i < 2; i++) {
		a[i] = (struct body_arg){r, spec, &inside, &max_inside, 300, false};
		pthread_create(&t[i], NULL, body_thread, &a[i]);
	}
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	cr_assert_eq(atomic_load(&max_inside), 2,
		     "bodies overlap even though cleanup resolves to DISPOSE");
	cr_assert_eq(scripted_disposes(sc), 1, "the last call cleans the instance once");
	cr_assert(a[0].executed != a[1].executed, "exactly one of them ran it");
	msb_spec_unref(spec);
	msb_router_free(r);
	msb_backend_unref(b);
}

Test(admission, whole_instance_cleanup_closes_admission_8_13, .timeout = 30)
{
	msb_backend *b;
	scripted *sc;
	scripted_new("sc", MSB_DEFAULT_CAPABILITIES, &b, &sc);
	recorder rec;
	msb_observer obs;
	recorder_init(&rec, &obs);
	msb_router *r =
		router_over(&b, 1, MSB_CLEANUP_DISPOSE, MSB_FAILED_RECLAIM_DISPOSE, &obs, NULL);
	msb_spec *spec = spec_from("{\"kind\": \"A\"}");
	msb_call_hold *A = enter(r, &K, spec), *B = enter(r, &K, spec);
	cr_assert_str_eq(acquire_id(A), "t/A#1");
	cr_assert_str_eq(acquire_id(B), "t/A#1");

	/* A ends needing DISPOSE: admission closes, nothing is disposed yet. */
	msb_release_report rep = release(A, MSB_CLEANUP_DISPOSE);
	cr_assert_not(rep.executed);
	cr_assert_eq(scripted_disposes(sc), 0, "a sibling is still active");

	struct enter_arg c;
	pthread_t t;
	enter_async(&c, &t, r, &K, spec);
	start(&c, &t);
	cr_assert_not(done_within(&c, 200), "the entrant waits");

	/* B ends: exactly one dispose, then C is admitted to a fresh instance. */
	rep = release(B, MSB_CLEANUP_RECLAIM);
	cr_assert(rep.executed);
	cr_assert_eq(rep.instances_cleaned, 1);
	pthread_join(t, NULL);
	cr_assert_eq(c.rc, 0, "%s", c.message);
	cr_assert_eq(scripted_disposes(sc), 1);
	cr_assert_str_eq(acquire_id(c.h), "t/A#2");
	cr_assert_lt(scripted_find(sc, "dispose t/A/t/A#1", 0), scripted_find(sc, "acquire", 2));
	cr_assert_eq(rec.n_disposed, 1);
	cr_assert_str_eq(rec.disposed[0].origin, "framework");
	cr_assert_str_eq(rec.disposed[0].instance, "t/A#1");
	release(c.h, MSB_CLEANUP_RECLAIM);
	msb_spec_unref(spec);
	msb_router_free(r);
	msb_backend_unref(b);
}

Test(admission, strongest_rung_among_records_8_13)
{
	msb_backend *b;
	scripted *sc;
	scripted_new("sc", MSB_DEFAULT_CAPABILITIES | MSB_CAP_SNAPSHOT, &b, &sc);
	msb_router *r =
		router_over(&b, 1, MSB_CLEANUP_RESET, MSB_FAILED_RECLAIM_DISPOSE, NULL, NULL);
	msb_spec *spec = spec_from("{\"kind\": \"A\"}");
	msb_call_hold *A = enter(r, &K, spec), *B = enter(r, &K, spec);
	acquire_id(A);
	acquire_id(B);
	release(A, MSB_CLEANUP_DISPOSE);
	release(B, MSB_CLEANUP_RESET);
	cr_assert_eq(scripted_disposes(sc), 1, "DISPOSE is the strongest queued");
	cr_assert_eq(scripted_resets(sc), 0, "once, with the strongest rung only");
	msb_spec_unref(spec);
	msb_router_free(r);
	msb_backend_unref(b);
}

struct release_arg {
	msb_call_hold *h;
	msb_cleanup rung;
	msb_release_report rep;
};

static void *release_thread(void *p)
{
	struct release_arg *a = p;
	a->rep = release(a->h, a->rung);
	return NULL;
}

Test(admission, entrants_wait_for_cleanup_outcome_8_14, .timeout = 30)
{
	for (int fails = 0; fails < 2; fails++) {
		msb_backend *b;
		scripted *sc;
		scripted_new("sc", MSB_DEFAULT_CAPABILITIES, &b, &sc);
		msb_router *r = router_over(&b, 1, MSB_CLEANUP_DISPOSE, MSB_FAILED_RECLAIM_DISPOSE,
					    NULL, NULL);
		msb_spec *spec = spec_from("{\"kind\": \"A\"}");
		msb_call_hold *A = enter(r, &K, spec);
		acquire_id(A);
		scripted_push_dispose(sc, fails ? ACT_BLOCK_FAIL : ACT_BLOCK_LAND,
				      MSB_DISPOSAL_REFUSED, "the service kept it");
		struct release_arg ra = {.h = A, .rung = MSB_CLEANUP_DISPOSE};
		pthread_t tr;
		pthread_create(&tr, NULL, release_thread, &ra);
		cr_assert(scripted_wait_blocked(sc, 1), "the disposal is in progress");

		struct enter_arg c;
		pthread_t tc;
		enter_async(&c, &tc, r, &K, spec);
		start(&c, &tc);
		cr_assert_not(done_within(&c, 200), "blocked while the disposal runs");
		scripted_open_gate(sc);
		pthread_join(tr, NULL);
		pthread_join(tc, NULL);
		if (fails) {
			cr_assert_eq(c.rc, MSB_E_UNCLEAN, "a failed disposal refuses the entrant");
			cr_assert(strstr(c.message, "the service kept it"), "%s", c.message);
			cr_assert_not(ra.rep.landed);
		} else {
			cr_assert_eq(c.rc, 0, "%s", c.message);
			release(c.h, MSB_CLEANUP_RECLAIM);
		}
		msb_spec_unref(spec);
		msb_router_free(r);
		msb_backend_unref(b);
	}
}

struct acq_arg {
	msb_router *r;
	msb_spec *spec;
	int rc;
	atomic_bool done;
};

static void *acquire_thread(void *p)
{
	struct acq_arg *a = p;
	msb_sandbox *sb = NULL;
	a->rc = msb_router_acquire(a->r, &K, a->spec, NULL, &sb, NULL);
	msb_sandbox_free(sb);
	atomic_store(&a->done, true);
	return NULL;
}

Test(admission, direct_acquire_waits_for_pending_cleanup_7_1_8_14, .timeout = 30)
{
	for (int fails = 0; fails < 2; fails++) {
		msb_backend *b;
		scripted *sc;
		scripted_new("sc", MSB_DEFAULT_CAPABILITIES, &b, &sc);
		msb_router *r = router_over(&b, 1, MSB_CLEANUP_DISPOSE, MSB_FAILED_RECLAIM_DISPOSE,
					    NULL, NULL);
		msb_spec *spec = spec_from("{\"kind\": \"A\"}");
		msb_call_hold *A = enter(r, &K, spec);
		acquire_id(A);
		scripted_push_dispose(sc, fails ? ACT_BLOCK_FAIL : ACT_BLOCK_LAND,
				      MSB_DISPOSAL_REFUSED, "kept");
		struct release_arg ra = {.h = A, .rung = MSB_CLEANUP_DISPOSE};
		pthread_t tr, ta;
		pthread_create(&tr, NULL, release_thread, &ra);
		cr_assert(scripted_wait_blocked(sc, 1));
		struct acq_arg aa = {.r = r, .spec = spec};
		atomic_init(&aa.done, false);
		pthread_create(&ta, NULL, acquire_thread, &aa);
		sleep_ms(200);
		cr_assert_not(atomic_load(&aa.done), "a direct acquire waits for the cleanup");
		cr_assert_eq(scripted_acquires(sc), 1);
		scripted_open_gate(sc);
		pthread_join(tr, NULL);
		pthread_join(ta, NULL);
		if (fails) {
			cr_assert_eq(aa.rc, MSB_E_UNCLEAN,
				     "the cleanup it waited for did not land");
			cr_assert_eq(scripted_acquires(sc), 1);
		} else {
			cr_assert_eq(aa.rc, 0);
			cr_assert_eq(scripted_find(sc, "acquire", 1), 2, "after the dispose");
		}
		msb_spec_unref(spec);
		msb_router_free(r);
		msb_backend_unref(b);
	}
}

/* ---- 8.15, 8.16 ---------------------------------------------------------------------------------
 */

Test(admission, exclusive_calls_run_one_at_a_time_each_disposes_8_15, .timeout = 30)
{
	for (int via_option = 0; via_option < 2; via_option++) {
		msb_backend *b;
		scripted *sc;
		scripted_new("sc", MSB_DEFAULT_CAPABILITIES, &b, &sc);
		msb_router *r = router_over(&b, 1, MSB_CLEANUP_DISPOSE, MSB_FAILED_RECLAIM_DISPOSE,
					    NULL, NULL);
		msb_spec *spec =
			spec_from(via_option ? "{\"kind\": \"A\"}"
					     : "{\"kind\": \"A\", \"exclusive_admission\": "
					       "true}");
		atomic_int inside = 0, max_inside = 0;
		enum { N = 3 };
		pthread_t t[N];
		struct body_arg a[N];
		for (int i = 0; i < N; i++)
			a[i] = (struct body_arg){r, spec, &inside, &max_inside, 60, false};
		if (!via_option) {
			for (int i = 0; i < N; i++)
				pthread_create(&t[i], NULL, body_thread, &a[i]);
			for (int i = 0; i < N; i++)
				pthread_join(t[i], NULL);
			cr_assert_eq(atomic_load(&max_inside), 1);
			cr_assert_eq(scripted_disposes(sc), N, "each pays a disposal");
		} else {
			/* The option form: one exclusive hold keeps a plain entrant out. */
			msb_call_hold *h = NULL;
			msb_enter_call_options o = MSB_ENTER_CALL_OPTIONS_INIT;
			o.exclusive = true;
			cr_assert_eq(msb_router_enter_call(r, &K, spec, &o, &h, NULL), 0);
			acquire_id(h);
			struct enter_arg c;
			pthread_t tc;
			enter_async(&c, &tc, r, &K, spec);
			start(&c, &tc);
			cr_assert_not(done_within(&c, 150), "an exclusive hold admits nobody");
			release(h, MSB_RELEASE_CLEANUP_EFFECTIVE);
			pthread_join(tc, NULL);
			cr_assert_eq(c.rc, 0);
			cr_assert_eq(scripted_disposes(sc), 1);
			/* And an exclusive entrant waits for plain holders. */
			struct enter_arg x;
			pthread_t tx;
			enter_async(&x, &tx, r, &K, spec);
			x.o.exclusive = true;
			start(&x, &tx);
			cr_assert_not(done_within(&x, 150));
			release(c.h, MSB_CLEANUP_RECLAIM);
			pthread_join(tx, NULL);
			cr_assert_eq(x.rc, 0);
			release(x.h, MSB_CLEANUP_RECLAIM);
		}
		msb_spec_unref(spec);
		msb_router_free(r);
		msb_backend_unref(b);
	}
}

static atomic_int hook_seen_inside;
static atomic_int *hook_flag;

static void note_dispose(void *ud)
{
	if (hook_flag)
		atomic_store(&hook_seen_inside, atomic_load(hook_flag));
}

Test(admission, release_runs_cleanup_queued_by_another_8_16)
{
	msb_backend *b;
	scripted *sc;
	scripted_new("sc", MSB_DEFAULT_CAPABILITIES, &b, &sc);
	msb_router *r =
		router_over(&b, 1, MSB_CLEANUP_DISPOSE, MSB_FAILED_RECLAIM_DISPOSE, NULL, NULL);
	msb_spec *spec = spec_from("{\"kind\": \"A\"}");
	msb_call_hold *A = enter(r, &K, spec), *B = enter(r, &K, spec);
	acquire_id(A);
	acquire_id(B);
	msb_release_report rep = release(A, MSB_CLEANUP_DISPOSE);
	cr_assert_not(rep.executed);
	/* Observed inside B's release. */
	static atomic_int in_b_release;
	atomic_store(&in_b_release, 1);
	hook_flag = &in_b_release;
	scripted_set_dispose_hook(sc, note_dispose, NULL);
	rep = release(B, MSB_CLEANUP_RECLAIM);
	atomic_store(&in_b_release, 0);
	cr_assert(rep.executed);
	cr_assert_eq(scripted_disposes(sc), 1);
	cr_assert_eq(atomic_load(&hook_seen_inside), 1, "the dispose ran inside B's release");
	hook_flag = NULL;
	msb_spec_unref(spec);
	msb_router_free(r);
	msb_backend_unref(b);
}

/* ---- 8.17, 8.18 the bounds ------------------------------------------------------------------ */

Test(admission, wait_bound_restarts_as_calls_ahead_leave_8_17, .timeout = 30)
{
	msb_backend *b;
	scripted *sc;
	scripted_new("sc", MSB_DEFAULT_CAPABILITIES, &b, &sc);
	msb_router *r =
		router_over(&b, 1, MSB_CLEANUP_DISPOSE, MSB_FAILED_RECLAIM_DISPOSE, NULL, NULL);
	advance_to(0);
	msb_router_set_clock(r, fake_clock, NULL);
	msb_spec *spec = spec_from("{\"kind\": \"A\"}");
	msb_call_hold *a1 = enter(r, &K, spec), *a2 = enter(r, &K, spec), *a3 = enter(r, &K, spec);
	acquire_id(a1);
	release(a1, MSB_CLEANUP_DISPOSE); /* admission closes; two calls remain ahead */

	/* admission_timeout 1 + 2 x cleanup 1: 3 s per call ahead. */
	struct enter_arg c;
	pthread_t t;
	enter_async(&c, &t, r, &K, spec);
	c.o.admission_timeout = 1;
	c.o.cleanup_timeout = 1;
	start(&c, &t);
	sleep_ms(50);
	advance_to(2.5);
	cr_assert_not(done_within(&c, 100), "within the first bound");
	release(a2, MSB_CLEANUP_RECLAIM); /* a call ahead leaves: the bound restarts at 2.5 */
	sleep_ms(50);
	advance_to(5.0);
	cr_assert_not(done_within(&c, 100), "the bound restarted when a call ahead left");
	advance_to(6.0);
	cr_assert(done_within(&c, 2000), "a3 never leaves: the entrant gives up");
	pthread_join(t, NULL);
	cr_assert_eq(c.rc, MSB_E_TIMEOUT, "%s", c.message);
	cr_assert(strstr(c.message, "1 call ahead"), "%s", c.message);
	cr_assert_eq(scripted_disposes(sc), 0, "the waiter left the pending cleanup alone");
	release(a3, MSB_CLEANUP_RECLAIM);
	cr_assert_eq(scripted_disposes(sc), 1);
	msb_spec_unref(spec);
	msb_router_free(r);
	msb_backend_unref(b);
}

static void *end_thread(void *p)
{
	msb_call_outcome oc = MSB_CALL_OUTCOME_INIT;
	oc.text = "done";
	msb_tool_call_end(p, &oc, NULL, NULL);
	return NULL;
}

Test(admission, wait_bound_restarts_as_cleanup_steps_complete_8_17, .timeout = 30)
{
	/* Call A holds K (exclusive) and K2; its removal of the call path from
	 * K's instance completes, then the one from K2's instance hangs. */
	msb_backend *b;
	scripted *sc;
	scripted_new("sc", MSB_DEFAULT_CAPABILITIES | MSB_CAP_RECLAIM, &b, &sc);
	msb_router *r =
		router_over(&b, 1, MSB_CLEANUP_DISPOSE, MSB_FAILED_RECLAIM_DISPOSE, NULL, NULL);
	advance_to(0);
	msb_router_set_clock(r, fake_clock, NULL);
	msb_spec *spec = spec_from("{\"kind\": \"A\", \"exclusive_admission\": true}");
	struct test_ctx tc;
	test_ctx_init(&tc, "s", "t");
	msb_caller_context ctx = test_ctx_context(&tc);
	msb_tool_session_options so = MSB_TOOL_SESSION_OPTIONS_INIT;
	so.router = r;
	so.context = &ctx;
	so.agent_dir = "a";
	so.spec = spec;
	so.name = "tool";
	so.reclaim_timeout = 5;
	msb_tool_session *s = NULL;
	cr_assert_eq(msb_tool_session_attach(&so, &s, NULL), 0);
	msb_tool_call *call = NULL;
	cr_assert_eq(msb_tool_session_begin_call(s, NULL, &call, NULL), 0);
	msb_sandbox *sb;
	char *sentence = NULL;
	cr_assert_eq(msb_tool_call_acquire(call, &K, &sb, &sentence, NULL), 0);
	cr_assert_eq(msb_tool_call_acquire(call, &K2, &sb, &sentence, NULL), 0);
	const char *path;
	cr_assert_eq(msb_tool_call_guest_call_path(call, &path, NULL), 0);

	/* C waits behind A: admission 1 + 2 x cleanup 5 = 11 s. */
	struct enter_arg c;
	pthread_t t;
	enter_async(&c, &t, r, &K, spec);
	c.o.admission_timeout = 1;
	c.o.cleanup_timeout = 5;
	start(&c, &t);
	sleep_ms(50);
	advance_to(10);
	cr_assert_not(done_within(&c, 50));

	scripted_set_reclaim_block_from(sc, 2);
	pthread_t te;
	pthread_create(&te, NULL, end_thread, call);
	cr_assert(scripted_wait_blocked(sc, 1), "K's removal done, K2's hanging");
	sleep_ms(50);
	advance_to(15); /* past 11, but the step at 10 restarted the bound to 21 */
	cr_assert_not(done_within(&c, 100), "the bound restarted when a cleanup step completed");
	advance_to(22);
	cr_assert(done_within(&c, 2000));
	pthread_join(t, NULL);
	cr_assert_eq(c.rc, MSB_E_TIMEOUT, "%s", c.message);
	scripted_open_gate(sc);
	pthread_join(te, NULL);
	msb_tool_session_unref(s);
	msb_spec_unref(spec);
	msb_router_free(r);
	msb_backend_unref(b);
}

Test(admission, cleanup_completion_wait_bounded_120s_8_18, .timeout = 30)
{
	msb_backend *b;
	scripted *sc;
	scripted_new("sc", MSB_DEFAULT_CAPABILITIES, &b, &sc);
	msb_router_options o = MSB_ROUTER_OPTIONS_INIT;
	o.min_isolation = MSB_ISOLATION_NONE;
	o.reclaim.timeout = 1000; /* the cleanup itself may take long */
	msb_router *r = NULL;
	cr_assert_eq(msb_router_new(&b, 1, &o, &r, NULL), 0);
	advance_to(0);
	msb_router_set_clock(r, fake_clock, NULL);
	cr_assert_float_eq(MSB_CLEANUP_WAIT_TIMEOUT, 120.0, 1e-9);
	cr_assert_float_eq(MSB_ADMISSION_TIMEOUT_DEFAULT, 120.0, 1e-9);
	msb_spec *spec = spec_from("{\"kind\": \"A\"}");
	msb_call_hold *A = enter(r, &K, spec);
	acquire_id(A);
	scripted_push_dispose(sc, ACT_BLOCK_LAND, 0, NULL);
	struct release_arg ra = {.h = A, .rung = MSB_CLEANUP_DISPOSE};
	pthread_t tr;
	pthread_create(&tr, NULL, release_thread, &ra);
	cr_assert(scripted_wait_blocked(sc, 1));

	struct enter_arg c;
	pthread_t t;
	enter_async(&c, &t, r, &K, spec);
	start(&c, &t);
	struct acq_arg direct = {.r = r, .spec = spec};
	atomic_init(&direct.done, false);
	pthread_t ta;
	pthread_create(&ta, NULL, acquire_thread, &direct);
	sleep_ms(50);
	advance_to(119);
	cr_assert_not(done_within(&c, 100));
	advance_to(121);
	cr_assert(done_within(&c, 2000), "the cleanup-completion wait is bounded at 120 s");
	pthread_join(t, NULL);
	pthread_join(ta, NULL);
	cr_assert_eq(c.rc, MSB_E_TIMEOUT);
	cr_assert(strstr(c.message, "120"), "%s", c.message);
	cr_assert_eq(direct.rc, MSB_E_TIMEOUT, "a direct acquire has the same bound");
	scripted_open_gate(sc);
	pthread_join(tr, NULL);
	cr_assert_eq(scripted_disposes(sc), 1);
	msb_spec_unref(spec);
	msb_router_free(r);
	msb_backend_unref(b);
}

/* ---- 8.19, 8.21 -------------------------------------------------------------------------------
 */

Test(admission, cancelled_waiter_leaves_cleanup_intact_8_19, .timeout = 30)
{
	msb_backend *b;
	scripted *sc;
	scripted_new("sc", MSB_DEFAULT_CAPABILITIES, &b, &sc);
	msb_router *r =
		router_over(&b, 1, MSB_CLEANUP_DISPOSE, MSB_FAILED_RECLAIM_DISPOSE, NULL, NULL);
	msb_spec *spec = spec_from("{\"kind\": \"A\"}");
	msb_call_hold *A = enter(r, &K, spec), *B = enter(r, &K, spec);
	acquire_id(A);
	acquire_id(B);
	release(A, MSB_CLEANUP_DISPOSE);

	msb_cancel *cancel = NULL;
	cr_assert_eq(msb_cancel_new(&cancel, NULL), 0);
	struct enter_arg c;
	pthread_t t;
	enter_async(&c, &t, r, &K, spec);
	c.o.cancel = cancel;
	start(&c, &t);
	cr_assert_not(done_within(&c, 100));
	msb_cancel_trigger(cancel);
	pthread_join(t, NULL);
	cr_assert_eq(c.rc, MSB_E_CANCELLED);
	cr_assert_eq(scripted_disposes(sc), 0, "the pending cleanup is untouched");

	msb_release_report rep = release(B, MSB_CLEANUP_RECLAIM);
	cr_assert(rep.executed, "the holder still disposes at release");
	cr_assert_eq(scripted_disposes(sc), 1, "no double dispose");
	msb_cancel_free(cancel);
	msb_spec_unref(spec);
	msb_router_free(r);
	msb_backend_unref(b);
}

Test(admission, gate_is_per_router_8_21)
{
	msb_backend *b;
	scripted *sc;
	scripted_new("sc", MSB_DEFAULT_CAPABILITIES, &b, &sc);
	msb_router *r1 =
		router_over(&b, 1, MSB_CLEANUP_DISPOSE, MSB_FAILED_RECLAIM_DISPOSE, NULL, NULL);
	msb_router *r2 =
		router_over(&b, 1, MSB_CLEANUP_DISPOSE, MSB_FAILED_RECLAIM_DISPOSE, NULL, NULL);
	msb_spec *spec = spec_from("{\"kind\": \"A\", \"exclusive_admission\": true}");
	msb_call_hold *h1 = enter(r1, &K, spec);
	struct enter_arg c;
	pthread_t t;
	enter_async(&c, &t, r2, &K, spec);
	start(&c, &t);
	cr_assert(done_within(&c, 1000), "another router's caller is not coordinated");
	pthread_join(t, NULL);
	cr_assert_eq(c.rc, 0);
	release(c.h, MSB_CLEANUP_RECLAIM);
	release(h1, MSB_CLEANUP_RECLAIM);
	msb_spec_unref(spec);
	msb_router_free(r1);
	msb_router_free(r2);
	msb_backend_unref(b);
}

Test(admission, enter_call_refusals)
{
	msb_backend *b;
	scripted *sc;
	scripted_new("sc", MSB_DEFAULT_CAPABILITIES, &b, &sc);
	msb_router *r =
		router_over(&b, 1, MSB_CLEANUP_DISPOSE, MSB_FAILED_RECLAIM_DISPOSE, NULL, NULL);
	msb_spec *needs = spec_from("{\"kind\": \"A\", \"requires\": [\"files_out\"]}");
	msb_call_hold *h = NULL;
	cr_assert_eq(msb_router_enter_call(r, &K, needs, NULL, &h, NULL),
		     MSB_E_CAPABILITY_NOT_SUPPORTED);
	msb_spec *call = spec_from("{\"kind\": \"A\", \"isolation_scope\": \"call\"}");
	cr_assert_eq(msb_router_enter_call(r, &K, call, NULL, &h, NULL), MSB_E_VALUE,
		     "a call-scoped key needs its call id");
	msb_enter_call_options o = MSB_ENTER_CALL_OPTIONS_INIT;
	o.admission_timeout = -1;
	cr_assert_eq(msb_router_enter_call(r, &K, needs, &o, &h, NULL), MSB_E_VALUE);
	cr_assert_eq(msb_router_release_call(NULL, NULL, NULL, NULL), 0);
	msb_spec_unref(needs);
	msb_spec_unref(call);
	msb_router_free(r);
	msb_backend_unref(b);
}

/* ---- many callers -----------------------------------------------------------------------------
 */

struct stress {
	msb_router *r;
	msb_spec *spec;
	atomic_int in_body;
	atomic_int max_in_body;
	atomic_int violations; /* a disposal while a call was inside its body */
	atomic_int executed;   /* releases that ran cleanup */
	atomic_int cleaned;    /* instances they cleaned */
	atomic_int refused;    /* entrants refused as unclean */
	atomic_int calls;
};

static struct stress *stress_now;

static void stress_hook(void *ud)
{
	if (atomic_load(&stress_now->in_body) > 0)
		atomic_fetch_add(&stress_now->violations, 1);
}

static void *stress_thread(void *p)
{
	struct stress *st = p;
	for (int i = 0; i < 25; i++) {
		msb_call_hold *h = NULL;
		msb_error *e = NULL;
		int rc = msb_router_enter_call(st->r, &K, st->spec, NULL, &h, &e);
		msb_error_free(e);
		e = NULL;
		if (rc == MSB_E_UNCLEAN) {
			/* A failed cleanup closed the key: the host retries it. */
			atomic_fetch_add(&st->refused, 1);
			msb_router_dispose_unclean(st->r, &K, 5, NULL, NULL, NULL);
			continue;
		}
		cr_assert_eq(rc, 0);
		msb_sandbox *sb = NULL;
		rc = msb_call_hold_acquire(h, &sb, NULL);
		if (rc == 0) {
			int now = atomic_fetch_add(&st->in_body, 1) + 1;
			int m = atomic_load(&st->max_in_body);
			while (now > m && !atomic_compare_exchange_weak(&st->max_in_body, &m, now))
				;
			sleep_ms(1);
			atomic_fetch_sub(&st->in_body, 1);
			atomic_fetch_add(&st->calls, 1);
		}
		msb_release_report rep;
		msb_router_release_call(h, NULL, &rep, NULL);
		if (rep.executed) {
			atomic_fetch_add(&st->executed, 1);
			atomic_fetch_add(&st->cleaned, (int)rep.instances_cleaned);
		}
	}
	return NULL;
}

static void run_stress(const char *spec_json, int fail_every, int *max_in_body)
{
	msb_backend *b;
	scripted *sc;
	scripted_new("sc", MSB_DEFAULT_CAPABILITIES, &b, &sc);
	scripted_set_dispose_default(sc, ACT_SLEEP_LAND, 0, NULL);
	scripted_set_sleep_ms(sc, 1);
	scripted_set_fail_every(sc, fail_every);
	msb_router *r =
		router_over(&b, 1, MSB_CLEANUP_DISPOSE, MSB_FAILED_RECLAIM_DISPOSE, NULL, NULL);
	struct stress st = {.r = r, .spec = spec_from(spec_json)};
	stress_now = &st;
	scripted_set_dispose_hook(sc, stress_hook, NULL);
	enum { N = 8 };
	pthread_t t[N];
	for (int i = 0; i < N; i++)
		pthread_create(&t[i], NULL, stress_thread, &st);
	for (int i = 0; i < N; i++)
		pthread_join(t[i], NULL);
	cr_assert_eq(atomic_load(&st.violations), 0, "no disposal while a call is in its body");
	cr_assert_eq(scripted_max_concurrent_disposes(sc), 1, "never two cleanups of one instance");
	if (!fail_every)
		cr_assert_eq(scripted_disposes(sc), atomic_load(&st.executed),
			     "one disposal per executing release, never two");
	else
		cr_assert_geq(scripted_disposes(sc), atomic_load(&st.executed));
	cr_assert_eq(atomic_load(&st.cleaned), atomic_load(&st.executed),
		     "each executing release cleaned its one instance once");
	cr_assert_gt(atomic_load(&st.calls), 0);
	if (fail_every)
		cr_assert_gt(atomic_load(&st.refused), 0, "failed cleanups refused entrants");
	*max_in_body = atomic_load(&st.max_in_body);
	scripted_set_dispose_hook(sc, NULL, NULL);
	stress_now = NULL;
	msb_spec_unref(st.spec);
	msb_router_free(r);
	msb_backend_unref(b);
}

Test(admission, many_callers_no_missing_wait_no_double_cleanup_8_13_8_14, .timeout = 120)
{
	int max = 0;
	run_stress("{\"kind\": \"A\"}", 0, &max);
	run_stress("{\"kind\": \"A\"}", 7, &max);
}

Test(admission, many_exclusive_callers_with_failing_cleanup_8_15, .timeout = 120)
{
	int max = 0;
	run_stress("{\"kind\": \"A\", \"exclusive_admission\": true}", 5, &max);
	cr_assert_eq(max, 1, "exclusive calls never overlap");
}
