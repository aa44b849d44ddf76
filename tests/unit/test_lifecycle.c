/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Router lifecycle (checklist section 7: acquire, disposal, scopes, unclean
 * keys; 8.1-8.7 and 23.38: the cleanup rung). Admission is in
 * test_admission.c, the tool-call session in test_session.c.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "scripted_backend.h"

static const msb_key K = {"s", "t", "a", NULL};
static const msb_key K2 = {"s", "t2", "a", NULL};

static msb_spec *spec_kind(const char *kind)
{
	char j[128];
	snprintf(j, sizeof(j), "{\"kind\": \"%s\"}", kind);
	return spec_from(j);
}

/* A target for (K, kind, instance) recorded the way 7.9 records one. */
static void make_unclean(msb_router *r, scripted *sc, const msb_key *key, const char *kind,
			 const char *instance, const char *detail)
{
	scripted_push_dispose(sc, ACT_FAIL, MSB_DISPOSAL_REFUSED, detail);
	msb_dispose_kind_options o = MSB_DISPOSE_KIND_OPTIONS_INIT;
	o.instance_id = instance;
	bool all = true;
	cr_assert_eq(msb_router_dispose_kind(r, key, kind, 5, &o, &all, NULL), 0);
	cr_assert_not(all);
}

static int acquire_rc(msb_router *r, const msb_key *key, const char *kind, msb_error **e)
{
	msb_spec *spec = spec_kind(kind);
	msb_sandbox *sb = NULL;
	int rc = msb_router_acquire(r, key, spec, NULL, &sb, e);
	msb_sandbox_free(sb);
	msb_spec_unref(spec);
	return rc;
}

/* ---- 7.1, 7.2 -------------------------------------------------------------------------------- */

Test(lifecycle, acquire_checks_then_unclean_then_backend_7_1)
{
	msb_backend *b;
	scripted *sc;
	scripted_new("sc", MSB_DEFAULT_CAPABILITIES, &b, &sc);
	recorder rec;
	msb_observer obs;
	recorder_init(&rec, &obs);
	msb_router *r =
		router_over(&b, 1, MSB_CLEANUP_DISPOSE, MSB_FAILED_RECLAIM_DISPOSE, &obs, NULL);

	/* Happy path: the backend's get-or-create, one event, no refusal. */
	msb_error *e = NULL;
	cr_assert_eq(acquire_rc(r, &K, "A", &e), 0);
	cr_assert_eq(scripted_acquires(sc), 1);
	cr_assert_eq(rec.n_acquired, 1);
	cr_assert_str_empty(rec.acquired[0].refusal);
	cr_assert_str_empty(rec.acquired[0].call, "outside a call, call is none (17.5)");

	/* A check refusal never reaches the backend. */
	msb_spec *needs = spec_from("{\"kind\": \"A\", \"requires\": [\"files_out\"]}");
	msb_sandbox *sb = NULL;
	cr_assert_eq(msb_router_acquire(r, &K, needs, NULL, &sb, NULL),
		     MSB_E_CAPABILITY_NOT_SUPPORTED);
	msb_spec_unref(needs);
	cr_assert_eq(scripted_acquires(sc), 1);

	/* The unclean refusal comes after the checks and before the backend. */
	make_unclean(r, sc, &K, "A", "A#1", "secret-detail kept");
	cr_assert_eq(acquire_rc(r, &K, "A", &e), MSB_E_UNCLEAN);
	cr_assert_str_eq(msb_error_name(e), "SandboxUnclean");
	msb_error_free(e);
	e = NULL;
	cr_assert_eq(scripted_acquires(sc), 1);
	cr_assert_str_eq(rec.acquired[rec.n_acquired - 1].refusal, "SandboxUnclean");
	cr_assert_null(strstr(rec.seen, "secret-detail"), "events carry names, never messages");

	msb_router_free(r);
	msb_backend_unref(b);
}

Test(lifecycle, acquire_failure_recorded_by_name_7_2)
{
	msb_backend *b;
	msb_fake_backend_options fo = MSB_FAKE_BACKEND_OPTIONS_INIT;
	fo.acquire_error = MSB_E_RUNTIME;
	fo.acquire_error_message = "https://secret-endpoint/sub-123";
	cr_assert_eq(msb_fake_backend_new(&fo, &b, NULL, NULL), 0);
	recorder rec;
	msb_observer obs;
	recorder_init(&rec, &obs);
	msb_router *r =
		router_over(&b, 1, MSB_CLEANUP_DISPOSE, MSB_FAILED_RECLAIM_DISPOSE, &obs, NULL);
	msb_error *e = NULL;
	cr_assert_eq(acquire_rc(r, &K, "A", &e), MSB_E_RUNTIME);
	cr_assert(strstr(msb_error_message(e), "secret-endpoint"), "the error itself propagates");
	msb_error_free(e);
	e = NULL;
	cr_assert_eq(rec.n_acquired, 1);
	cr_assert_str_eq(rec.acquired[0].refusal, "RuntimeError");
	cr_assert_null(strstr(rec.seen, "secret-endpoint"));
	msb_router_free(r);
	msb_backend_unref(b);
}

/* ---- 7.3, 7.4, 7.16, 23.16 ------------------------------------------------------------------- */

Test(lifecycle, dispose_asks_every_backend_and_never_raises_7_3_7_16)
{
	msb_backend *bs[2];
	scripted *a, *b;
	scripted_new("a", MSB_DEFAULT_CAPABILITIES, &bs[0], &a);
	scripted_new("b", MSB_DEFAULT_CAPABILITIES, &bs[1], &b);
	scripted_set_dispose_default(a, ACT_RAISE, 0, NULL);
	logcap log;
	logcap_init(&log);
	msb_router *r =
		router_over(bs, 2, MSB_CLEANUP_DISPOSE, MSB_FAILED_RECLAIM_DISPOSE, NULL, &log);
	bool all = true;
	cr_assert_eq(msb_router_dispose(r, &K, &all, NULL), 0, "a raising backend is swallowed");
	cr_assert_not(all);
	cr_assert_eq(scripted_disposes(a), 1);
	cr_assert_eq(scripted_disposes(b), 1, "b is asked even though a raised");
	cr_assert_geq(log.warnings, 1);
	/* A host disposal that fails creates no refusal (23.16). */
	cr_assert_not(msb_router_key_unclean(r, &K, NULL));
	msb_router_free(r);
	msb_backend_unref(bs[0]);
	msb_backend_unref(bs[1]);
}

Test(lifecycle, host_dispose_landing_clears_unclean_23_16)
{
	msb_backend *b;
	scripted *sc;
	scripted_new("sc", MSB_DEFAULT_CAPABILITIES, &b, &sc);
	msb_router *r =
		router_over(&b, 1, MSB_CLEANUP_DISPOSE, MSB_FAILED_RECLAIM_DISPOSE, NULL, NULL);
	make_unclean(r, sc, &K, "A", "A#1", "kept");
	make_unclean(r, sc, &K, "B", "B#1", "kept");
	size_t n = 0;
	cr_assert(msb_router_key_unclean(r, &K, &n));
	cr_assert_eq(n, 2);
	bool all = false;
	cr_assert_eq(msb_router_dispose(r, &K, &all, NULL), 0);
	cr_assert(all);
	cr_assert_not(msb_router_key_unclean(r, &K, NULL), "every kind disposed: key reopens");
	cr_assert_eq(acquire_rc(r, &K, "A", NULL), 0);
	msb_router_free(r);
	msb_backend_unref(b);
}

Test(lifecycle, dispose_scope_sums_and_records_7_4)
{
	msb_backend *bs[2];
	msb_fake_backend *fake;
	scripted *sc;
	cr_assert_eq(msb_fake_backend_new(NULL, &bs[0], &fake, NULL), 0);
	msb_fake_backend_set_purge_count(fake, 2);
	scripted_new("sc", MSB_DEFAULT_CAPABILITIES, &bs[1], &sc);
	scripted_set_scope(sc, MSB_E_RUNTIME, 5);
	recorder rec;
	msb_observer obs;
	recorder_init(&rec, &obs);
	logcap log;
	logcap_init(&log);
	msb_router *r =
		router_over(bs, 2, MSB_CLEANUP_DISPOSE, MSB_FAILED_RECLAIM_DISPOSE, &obs, &log);
	msb_scope_purge p = {9, 9};
	cr_assert_eq(msb_router_dispose_scope(r, "s", "t", &p, NULL), 0);
	cr_assert_eq(p.disposed, 2, "the raising backend adds nothing");
	cr_assert_eq(log.warnings, 1);
	cr_assert_eq(rec.n_scope, 1);
	cr_assert_eq(rec.scope_count, 2);
	msb_router_free(r);
	msb_backend_unref(bs[0]);
	msb_backend_unref(bs[1]);
}

/* ---- 7.5 the scope helper ----------------------------------------------------------------------
 */

struct block {
	msb_scope_purge *record;
	uint64_t seen_inside;
	int rc;
	msb_fake_backend *fake;
	size_t purged_inside;
};

static int block_fn(void *ud, msb_error **err)
{
	struct block *b = ud;
	b->seen_inside = b->record->disposed + b->record->undisposed;
	b->purged_inside = msb_fake_backend_purged_count(b->fake);
	if (b->rc)
		return msb_error_set(err, b->rc, "the block's own failure");
	return 0;
}

Test(lifecycle, scope_always_disposes_never_masks_7_5)
{
	msb_backend *b;
	msb_fake_backend *fake;
	cr_assert_eq(msb_fake_backend_new(NULL, &b, &fake, NULL), 0);
	msb_fake_backend_set_purge_count(fake, 3);
	msb_router *r =
		router_over(&b, 1, MSB_CLEANUP_DISPOSE, MSB_FAILED_RECLAIM_DISPOSE, NULL, NULL);
	msb_scope_purge record = {7, 7};

	/* The block fails: its error propagates unchanged, dispose_scope ran once. */
	struct block blk = {.record = &record, .rc = MSB_E_RUNTIME, .fake = fake};
	msb_error *e = NULL;
	cr_assert_eq(msb_router_with_scope(r, "s", "t", block_fn, &blk, &record, &e),
		     MSB_E_RUNTIME);
	cr_assert_str_eq(msb_error_message(e), "the block's own failure");
	msb_error_free(e);
	e = NULL;
	cr_assert_eq(blk.seen_inside, 0, "inside the block the record reads zero");
	cr_assert_eq(blk.purged_inside, 0, "nothing disposed before the block ends");
	cr_assert_eq(msb_fake_backend_purged_count(fake), 1);
	cr_assert_eq(record.disposed, 3, "filled only after");

	/* Success, and cancellation: disposed either way. */
	blk.rc = 0;
	cr_assert_eq(msb_router_with_scope(r, "s", "t", block_fn, &blk, &record, NULL), 0);
	blk.rc = MSB_E_CANCELLED;
	cr_assert_eq(msb_router_with_scope(r, "s", "t", block_fn, &blk, &record, NULL),
		     MSB_E_CANCELLED);
	cr_assert_eq(msb_fake_backend_purged_count(fake), 3);

	/* The begin/end pair: end reports the block's code. */
	msb_router_scope *g = NULL;
	cr_assert_eq(msb_router_scope_begin(r, "s", "t2", &record, &g, NULL), 0);
	cr_assert_eq(record.disposed, 0);
	cr_assert_eq(msb_router_scope_end(g, MSB_E_TIMEOUT, NULL), MSB_E_TIMEOUT);
	cr_assert_eq(record.disposed, 3);
	const char *scope = NULL, *thread = NULL;
	msb_fake_backend_purged(fake, 3, &scope, &thread);
	cr_assert_str_eq(thread, "t2");
	msb_router_free(r);
	msb_backend_unref(b);
}

/* ---- 7.6, 7.7 dispose_kind ------------------------------------------------------------------- */

Test(lifecycle, dispose_kind_reports_landing_7_6_17_7)
{
	msb_backend *bs[2];
	scripted *a, *b;
	scripted_new("a", MSB_DEFAULT_CAPABILITIES, &bs[0], &a);
	scripted_new("b", MSB_DEFAULT_CAPABILITIES, &bs[1], &b);
	recorder rec;
	msb_observer obs;
	recorder_init(&rec, &obs);
	msb_router *r =
		router_over(bs, 2, MSB_CLEANUP_DISPOSE, MSB_FAILED_RECLAIM_DISPOSE, &obs, NULL);
	scripted_push_dispose(a, ACT_FAIL, MSB_DISPOSAL_UNREACHABLE, "no route");
	bool all = true;
	cr_assert_eq(msb_router_dispose_kind(r, &K, "A", 5, NULL, &all, NULL), 0);
	cr_assert_not(all);
	cr_assert_eq(scripted_disposes(b), 1, "every registered backend is asked");
	cr_assert_eq(rec.n_disposed, 1);
	cr_assert_str_eq(rec.disposed[0].kind, "A");
	cr_assert_str_eq(rec.disposed[0].origin, "host");
	cr_assert_eq(rec.disposed[0].n_results, 2);
	cr_assert(rec.disposed[0].failed0);
	cr_assert_eq(rec.disposed[0].code0, MSB_DISPOSAL_UNREACHABLE, "the backend's code");
	cr_assert_eq(msb_router_dispose_kind(r, &K, "A", 5, NULL, &all, NULL), 0);
	cr_assert(all);
	/* Only that kind: the selector reaches the backend. */
	char **log = scripted_log(b);
	cr_assert_str_eq(log[0], "dispose t/A/*");
	msb_strv_free(log);
	msb_router_free(r);
	msb_backend_unref(bs[0]);
	msb_backend_unref(bs[1]);
}

Test(lifecycle, dispose_kind_on_fake_touches_only_that_kind_7_6)
{
	msb_backend *b;
	msb_fake_backend *fake;
	cr_assert_eq(msb_fake_backend_new(NULL, &b, &fake, NULL), 0);
	msb_router *r =
		router_over(&b, 1, MSB_CLEANUP_DISPOSE, MSB_FAILED_RECLAIM_DISPOSE, NULL, NULL);
	bool all = false;
	cr_assert_eq(msb_router_dispose_kind(r, &K, "A", 5, NULL, &all, NULL), 0);
	cr_assert(all);
	cr_assert_eq(msb_fake_backend_disposed_count(fake), 1);
	const char *kind = NULL, *inst = NULL;
	msb_fake_backend_disposed(fake, 0, &kind, &inst);
	cr_assert_str_eq(kind, "A");
	cr_assert_null(inst);
	msb_router_free(r);
	msb_backend_unref(b);
}

Test(lifecycle, dispose_kind_timeout_must_be_finite_positive_7_7)
{
	msb_backend *b;
	scripted *sc;
	scripted_new("sc", MSB_DEFAULT_CAPABILITIES, &b, &sc);
	msb_router *r =
		router_over(&b, 1, MSB_CLEANUP_DISPOSE, MSB_FAILED_RECLAIM_DISPOSE, NULL, NULL);
	const double bad[] = {0, -1, INFINITY, NAN};
	for (size_t i = 0; i < 4; i++) {
		msb_error *e = NULL;
		cr_assert_eq(msb_router_dispose_kind(r, &K, "A", bad[i], NULL, NULL, &e),
			     MSB_E_VALUE);
		cr_assert_str_eq(msb_error_name(e), "ValueError");
		msb_error_free(e);
		e = NULL;
		cr_assert_eq(msb_router_dispose_unclean(r, &K, bad[i], NULL, NULL, NULL),
			     MSB_E_VALUE);
	}
	cr_assert_eq(scripted_disposes(sc), 0);
	msb_router_free(r);
	msb_backend_unref(b);
}

struct dk_arg {
	msb_router *r;
	double timeout;
	msb_cancel *cancel;
	int rc;
	bool all;
};

static void *dk_thread(void *p)
{
	struct dk_arg *a = p;
	msb_dispose_kind_options o = MSB_DISPOSE_KIND_OPTIONS_INIT;
	o.cancel = a->cancel;
	a->rc = msb_router_dispose_kind(a->r, &K, "A", a->timeout, &o, &a->all, NULL);
	return NULL;
}

Test(lifecycle, dispose_kind_bound_covers_lock_and_sweep_7_7, .timeout = 30)
{
	msb_backend *b;
	scripted *sc;
	scripted_new("sc", MSB_DEFAULT_CAPABILITIES, &b, &sc);
	msb_router *r =
		router_over(&b, 1, MSB_CLEANUP_DISPOSE, MSB_FAILED_RECLAIM_DISPOSE, NULL, NULL);
	/* A holds the key's disposal lock inside a blocked backend call. */
	scripted_push_dispose(sc, ACT_BLOCK_LAND, 0, NULL);
	struct dk_arg first = {.r = r, .timeout = 20};
	pthread_t t;
	pthread_create(&t, NULL, dk_thread, &first);
	cr_assert(scripted_wait_blocked(sc, 1));

	/* B waits for the lock at most its bound, then reports not landed. */
	double t0 = now_s();
	bool all = true;
	cr_assert_eq(msb_router_dispose_kind(r, &K, "A", 0.3, NULL, &all, NULL), 0);
	double took = now_s() - t0;
	cr_assert_not(all);
	cr_assert_geq(took, 0.25);
	cr_assert_lt(took, 3.0);
	cr_assert_eq(scripted_disposes(sc), 1, "B never reached the backend");

	scripted_open_gate(sc);
	pthread_join(t, NULL);
	cr_assert_eq(first.rc, 0);
	cr_assert(first.all);

	/* The sweep is bounded too: a backend that never answers in time. */
	scripted *sc2;
	msb_backend *b2;
	scripted_new("sc2", MSB_DEFAULT_CAPABILITIES, &b2, &sc2);
	msb_router *r2 =
		router_over(&b2, 1, MSB_CLEANUP_DISPOSE, MSB_FAILED_RECLAIM_DISPOSE, NULL, NULL);
	scripted_push_dispose(sc2, ACT_BLOCK_LAND, 0, NULL);
	t0 = now_s();
	cr_assert_eq(msb_router_dispose_kind(r2, &K, "A", 0.3, NULL, &all, NULL), 0);
	took = now_s() - t0;
	cr_assert_not(all);
	cr_assert_geq(took, 0.25);
	cr_assert_lt(took, 3.0);
	scripted_open_gate(sc2);
	msb_router_free(r2);
	msb_router_free(r);
	msb_backend_unref(b2);
	msb_backend_unref(b);
}

static void *trigger_later(void *p)
{
	sleep_ms(100);
	msb_cancel_trigger(p);
	return NULL;
}

Test(lifecycle, dispose_kind_cancellation_surfaces_7_7, .timeout = 30)
{
	msb_backend *b;
	scripted *sc;
	scripted_new("sc", MSB_DEFAULT_CAPABILITIES, &b, &sc);
	msb_router *r =
		router_over(&b, 1, MSB_CLEANUP_DISPOSE, MSB_FAILED_RECLAIM_DISPOSE, NULL, NULL);
	/* Cancelled inside the sweep. */
	scripted_push_dispose(sc, ACT_BLOCK_LAND, 0, NULL);
	msb_cancel *c = NULL;
	cr_assert_eq(msb_cancel_new(&c, NULL), 0);
	pthread_t t;
	pthread_create(&t, NULL, trigger_later, c);
	msb_dispose_kind_options o = MSB_DISPOSE_KIND_OPTIONS_INIT;
	o.cancel = c;
	msb_error *e = NULL;
	double t0 = now_s();
	cr_assert_eq(msb_router_dispose_kind(r, &K, "A", 20, &o, NULL, &e), MSB_E_CANCELLED);
	cr_assert_lt(now_s() - t0, 5.0);
	cr_assert_str_eq(msb_error_name(e), "CancelledError");
	msb_error_free(e);
	e = NULL;
	pthread_join(t, NULL);
	msb_cancel_free(c);

	/* Cancelled while waiting for the key's lock, held by a blocked
	 * disposal on another router's backend. */
	struct dk_arg holder = {.timeout = 20};
	scripted *sc2;
	msb_backend *b2;
	scripted_new("sc2", MSB_DEFAULT_CAPABILITIES, &b2, &sc2);
	msb_router *r2 =
		router_over(&b2, 1, MSB_CLEANUP_DISPOSE, MSB_FAILED_RECLAIM_DISPOSE, NULL, NULL);
	scripted_push_dispose(sc2, ACT_BLOCK_LAND, 0, NULL);
	holder.r = r2;
	pthread_t th;
	pthread_create(&th, NULL, dk_thread, &holder);
	cr_assert(scripted_wait_blocked(sc2, 1));
	cr_assert_eq(msb_cancel_new(&c, NULL), 0);
	pthread_create(&t, NULL, trigger_later, c);
	o.cancel = c;
	cr_assert_eq(msb_router_dispose_kind(r2, &K, "A", 20, &o, NULL, NULL), MSB_E_CANCELLED);
	pthread_join(t, NULL);
	scripted_open_gate(sc2);
	scripted_open_gate(sc);
	pthread_join(th, NULL);
	cr_assert(holder.all);
	msb_cancel_free(c);
	msb_router_free(r2);
	msb_router_free(r);
	msb_backend_unref(b2);
	msb_backend_unref(b);
}

/* ---- 7.8 - 7.13 unclean keys ------------------------------------------------------------------
 */

Test(lifecycle, kind_disposal_creates_no_refusal_clears_only_its_kind_7_8)
{
	msb_backend *b;
	scripted *sc;
	scripted_new("sc", MSB_DEFAULT_CAPABILITIES, &b, &sc);
	msb_router *r =
		router_over(&b, 1, MSB_CLEANUP_DISPOSE, MSB_FAILED_RECLAIM_DISPOSE, NULL, NULL);
	/* A failed kind-level disposal refuses nothing. */
	scripted_push_dispose(sc, ACT_FAIL, MSB_DISPOSAL_REFUSED, "kept");
	bool all = true;
	cr_assert_eq(msb_router_dispose_kind(r, &K2, "A", 5, NULL, &all, NULL), 0);
	cr_assert_not(all);
	cr_assert_eq(acquire_rc(r, &K2, "A", NULL), 0);

	/* Pending targets for kinds A and B. */
	make_unclean(r, sc, &K, "A", "A#1", "kept A");
	make_unclean(r, sc, &K, "B", "B#1", "kept B");
	cr_assert_eq(msb_router_dispose_kind(r, &K, "A", 5, NULL, &all, NULL), 0);
	cr_assert(all);
	msb_error *e = NULL;
	cr_assert_eq(acquire_rc(r, &K, "A", &e), MSB_E_UNCLEAN, "B is still pending");
	cr_assert(strstr(msb_error_message(e), "kept B"));
	msb_error_free(e);
	e = NULL;
	cr_assert_eq(msb_router_dispose_kind(r, &K, "B", 5, NULL, &all, NULL), 0);
	cr_assert_eq(acquire_rc(r, &K, "A", NULL), 0);
	msb_router_free(r);
	msb_backend_unref(b);
}

Test(lifecycle, instance_disposal_failure_refuses_unless_keep_7_9)
{
	for (int keep = 0; keep < 2; keep++) {
		msb_backend *b;
		scripted *sc;
		scripted_new("sc", MSB_DEFAULT_CAPABILITIES, &b, &sc);
		msb_router *r = router_over(
			&b, 1, MSB_CLEANUP_DISPOSE,
			keep ? MSB_FAILED_RECLAIM_KEEP : MSB_FAILED_RECLAIM_DISPOSE, NULL, NULL);
		make_unclean(r, sc, &K, "A", "X", "the service kept it");
		char **log = scripted_log(sc);
		cr_assert_str_eq(log[0], "dispose t/A/X", "only that instance");
		msb_strv_free(log);
		cr_assert_eq(acquire_rc(r, &K, "A", NULL), keep ? 0 : MSB_E_UNCLEAN);
		/* An instance disposal that lands clears its target. */
		if (!keep) {
			msb_dispose_kind_options o = MSB_DISPOSE_KIND_OPTIONS_INIT;
			o.instance_id = "X";
			bool all = false;
			cr_assert_eq(msb_router_dispose_kind(r, &K, "A", 5, &o, &all, NULL), 0);
			cr_assert(all);
			cr_assert_eq(acquire_rc(r, &K, "A", NULL), 0);
		}
		msb_router_free(r);
		msb_backend_unref(b);
	}
}

Test(lifecycle, unclean_refusal_quotes_backend_7_10_15_25)
{
	/* An unclean call: the framework's disposal on the fake does not land. */
	msb_backend *b;
	msb_fake_backend *fake;
	cr_assert_eq(msb_fake_backend_new(NULL, &b, &fake, NULL), 0);
	msb_fake_backend_set_dispose_result(fake, MSB_DISPOSAL_REFUSED, "kept", 0);
	msb_router *r =
		router_over(&b, 1, MSB_CLEANUP_DISPOSE, MSB_FAILED_RECLAIM_DISPOSE, NULL, NULL);
	msb_spec *spec = spec_kind("A");
	struct test_ctx tc;
	test_ctx_init(&tc, "s", "t");
	msb_caller_context ctx = test_ctx_context(&tc);
	msb_tool_session_options so = MSB_TOOL_SESSION_OPTIONS_INIT;
	so.router = r;
	so.context = &ctx;
	so.agent_dir = "a";
	so.spec = spec;
	so.name = "tool";
	msb_tool_session *s = NULL;
	cr_assert_eq(msb_tool_session_attach(&so, &s, NULL), 0);
	msb_tool_call *c = NULL;
	cr_assert_eq(msb_tool_session_begin_call(s, NULL, &c, NULL), 0);
	msb_sandbox *sb = NULL;
	char *sentence = NULL;
	cr_assert_eq(msb_tool_call_acquire(c, &K, &sb, &sentence, NULL), 0);
	cr_assert_not_null(sb);
	msb_call_outcome oc = MSB_CALL_OUTCOME_INIT;
	oc.text = "done";
	cr_assert_eq(msb_tool_call_end(c, &oc, NULL, NULL), 0);

	msb_error *e = NULL;
	cr_assert_eq(acquire_rc(r, &K, "A", &e), MSB_E_UNCLEAN);
	cr_assert(strstr(msb_error_message(e), "kept"), "quotes the backend: %s",
		  msb_error_message(e));
	cr_assert(msb_code_is(MSB_E_UNCLEAN, MSB_CAT_PERMISSION), "permission-class (23.26)");
	msb_error_free(e);
	e = NULL;
	cr_assert_eq(acquire_rc(r, &K2, "A", NULL), 0, "other keys unaffected");

	/* The session words it as a fixed sentence (15.25). */
	cr_assert_eq(msb_tool_session_begin_call(s, NULL, &c, NULL), 0);
	cr_assert_eq(msb_tool_call_acquire(c, &K, &sb, &sentence, NULL), 0);
	cr_assert_null(sb);
	cr_assert_str_eq(sentence, MSB_SENTENCE_UNCLEAN);
	cr_assert(strncmp(sentence, "Error:", 6) == 0);
	free(sentence);
	oc.kind = MSB_CALL_REFUSAL;
	oc.text = MSB_SENTENCE_UNCLEAN;
	cr_assert_eq(msb_tool_call_end(c, &oc, NULL, NULL), 0);

	msb_tool_session_unref(s);
	msb_spec_unref(spec);
	msb_router_free(r);
	msb_backend_unref(b);
}

Test(lifecycle, dispose_unclean_reopens_when_every_target_lands_7_11)
{
	msb_backend *b;
	scripted *sc;
	scripted_new("sc", MSB_DEFAULT_CAPABILITIES, &b, &sc);
	msb_router *r =
		router_over(&b, 1, MSB_CLEANUP_DISPOSE, MSB_FAILED_RECLAIM_DISPOSE, NULL, NULL);
	make_unclean(r, sc, &K, "A", "A#1", "kept");
	make_unclean(r, sc, &K, "B", "B#1", "kept");

	/* A failed retry keeps (and refreshes) the target. */
	scripted_push_dispose(sc, ACT_FAIL, MSB_DISPOSAL_TIMEOUT, "slow");
	msb_dispose_unclean_options o = MSB_DISPOSE_UNCLEAN_OPTIONS_INIT;
	o.kind = "A";
	bool all = true;
	cr_assert_eq(msb_router_dispose_unclean(r, &K, 5, &o, &all, NULL), 0);
	cr_assert_not(all);
	size_t n = 0;
	cr_assert(msb_router_key_unclean(r, &K, &n));
	cr_assert_eq(n, 2);

	/* One target lands: still refused. */
	cr_assert_eq(msb_router_dispose_unclean(r, &K, 5, &o, &all, NULL), 0);
	cr_assert(all);
	cr_assert(msb_router_key_unclean(r, &K, &n));
	cr_assert_eq(n, 1);
	cr_assert_eq(acquire_rc(r, &K, "A", NULL), MSB_E_UNCLEAN);
	char **log = scripted_log(sc);
	cr_assert_str_eq(log[msb_strv_len(log) - 1], "dispose t/A/A#1",
			 "a retry keeps its target's selectors");
	msb_strv_free(log);

	/* Every target lands: the key reopens. */
	cr_assert_eq(msb_router_dispose_unclean(r, &K, 5, NULL, &all, NULL), 0);
	cr_assert(all);
	cr_assert_eq(acquire_rc(r, &K, "A", NULL), 0);
	/* Nothing to retry is success. */
	cr_assert_eq(msb_router_dispose_unclean(r, &K, 5, NULL, &all, NULL), 0);
	cr_assert(all);
	msb_router_free(r);
	msb_backend_unref(b);
}

static void *unclean_thread(void *p)
{
	struct dk_arg *a = p;
	a->rc = msb_router_dispose_unclean(a->r, &K, a->timeout, NULL, &a->all, NULL);
	return NULL;
}

static bool wait_until_clean(msb_router *r, double seconds)
{
	double until = now_s() + seconds;
	while (now_s() < until) {
		if (!msb_router_key_unclean(r, &K, NULL))
			return true;
		sleep_ms(5);
	}
	return false;
}

Test(lifecycle, older_attempt_cannot_erase_newer_failure_7_12, .timeout = 30)
{
	for (int newer = 0; newer < 2; newer++) {
		msb_backend *b;
		scripted *sc;
		scripted_new("sc", MSB_DEFAULT_CAPABILITIES, &b, &sc);
		msb_router *r = router_over(&b, 1, MSB_CLEANUP_DISPOSE, MSB_FAILED_RECLAIM_DISPOSE,
					    NULL, NULL);
		make_unclean(r, sc, &K, "A", "X", "first");

		/* R1: a retry whose backend call outlives its bound. */
		scripted_push_dispose(sc, ACT_BLOCK_LAND, 0, NULL);
		struct dk_arg r1 = {.r = r, .timeout = 0.2};
		pthread_t t;
		pthread_create(&t, NULL, unclean_thread, &r1);
		pthread_join(t, NULL);
		cr_assert_eq(r1.rc, 0);
		cr_assert_not(r1.all, "R1 was given up at its bound");
		cr_assert(scripted_wait_blocked(sc, 1), "R1 is still in flight");

		/* F2: a newer failure on the same target while R1 is in flight. */
		if (newer)
			make_unclean(r, sc, &K, "A", "X", "second");

		/* R1 lands late. */
		scripted_open_gate(sc);
		double until = now_s() + 5;
		while (scripted_disposes_returned(sc) < 2 + newer && now_s() < until)
			sleep_ms(2);
		sleep_ms(50); /* R1's late report takes the lifecycle lock after returning */
		if (newer) {
			cr_assert_not(wait_until_clean(r, 0.3),
				      "F2 must survive R1's late success");
			msb_error *e = NULL;
			cr_assert_eq(acquire_rc(r, &K, "A", &e), MSB_E_UNCLEAN);
			cr_assert(strstr(msb_error_message(e), "second"));
			msb_error_free(e);
			e = NULL;
		} else {
			/* Control: with nothing newer, R1's late success reopens the key. */
			cr_assert(wait_until_clean(r, 3), "a late landing clears its own record");
		}
		msb_router_free(r);
		msb_backend_unref(b);
	}
}

Test(lifecycle, none_is_not_proof_7_13)
{
	msb_backend *b;
	msb_fake_backend *fake;
	cr_assert_eq(msb_fake_backend_new(NULL, &b, &fake, NULL), 0);
	msb_router *r =
		router_over(&b, 1, MSB_CLEANUP_DISPOSE, MSB_FAILED_RECLAIM_DISPOSE, NULL, NULL);
	msb_spec *spec = spec_kind("A");
	for (int i = 0; i < 3; i++) {
		msb_call_hold *h = NULL;
		cr_assert_eq(msb_router_enter_call(r, &K, spec, NULL, &h, NULL), 0);
		msb_sandbox *sb = NULL;
		cr_assert_eq(msb_call_hold_acquire(h, &sb, NULL), 0);
		msb_release_report rep;
		cr_assert_eq(msb_router_release_call(h, NULL, &rep, NULL), 0);
		cr_assert(rep.executed);
		cr_assert(rep.landed, "a backend reporting nothing is read as landed");
	}
	cr_assert_eq(msb_fake_backend_disposed_count(fake), 3);
	cr_assert_not(msb_router_key_unclean(r, &K, NULL));
	msb_spec_unref(spec);
	msb_router_free(r);
	msb_backend_unref(b);
}

Test(lifecycle, purger_never_fails_a_conversation_delete_7_14)
{
	msb_backend *b;
	scripted *sc;
	scripted_new("sc", MSB_DEFAULT_CAPABILITIES, &b, &sc);
	scripted_set_scope(sc, MSB_E_RUNTIME, 4);
	logcap log;
	logcap_init(&log);
	msb_router *r =
		router_over(&b, 1, MSB_CLEANUP_DISPOSE, MSB_FAILED_RECLAIM_DISPOSE, NULL, &log);
	msb_scope_purge p = {9, 9};
	cr_assert_eq(msb_purge_scoped_thread(r, "s", "t", &p, NULL), 0);
	cr_assert_eq(p.disposed, 0);
	cr_assert_eq(p.undisposed, 0);
	cr_assert(logcap_contains(&log, "purged scope `s` thread `t`: 0 sandboxes"),
		  "the count is logged");
	scripted_set_scope(sc, 0, 4);
	cr_assert_eq(msb_purge_scoped_thread(r, "s", "t", &p, NULL), 0);
	cr_assert_eq(p.disposed, 4);
	cr_assert_eq(msb_purge_scoped_thread(r, NULL, "t", &p, NULL), MSB_E_VALUE);
	msb_router_free(r);
	msb_backend_unref(b);
}

Test(lifecycle, acquire_refused_while_purge_active_7_15)
{
	msb_backend *b;
	msb_fake_backend *fake;
	cr_assert_eq(msb_fake_backend_new(NULL, &b, &fake, NULL), 0);
	msb_router *r =
		router_over(&b, 1, MSB_CLEANUP_DISPOSE, MSB_FAILED_RECLAIM_DISPOSE, NULL, NULL);
	msb_fake_backend_set_purging(fake, true);
	msb_error *e = NULL;
	cr_assert_eq(acquire_rc(r, &K, "A", &e), MSB_E_RUNTIME);
	cr_assert(strstr(msb_error_message(e), "purge"));
	msb_error_free(e);
	e = NULL;
	msb_fake_backend_set_purging(fake, false);
	cr_assert_eq(acquire_rc(r, &K, "A", NULL), 0);
	msb_router_free(r);
	msb_backend_unref(b);
}

static int ok_block(void *ud, msb_error **err)
{
	return 0;
}

Test(lifecycle, cleanup_calls_swallow_backend_errors_7_16)
{
	msb_backend *b;
	scripted *sc;
	scripted_new("sc", MSB_DEFAULT_CAPABILITIES, &b, &sc);
	scripted_set_dispose_default(sc, ACT_RAISE, 0, NULL);
	scripted_set_scope(sc, MSB_E_RUNTIME, 0);
	msb_router *r =
		router_over(&b, 1, MSB_CLEANUP_DISPOSE, MSB_FAILED_RECLAIM_DISPOSE, NULL, NULL);
	bool all = true;
	cr_assert_eq(msb_router_dispose(r, &K, &all, NULL), 0);
	cr_assert_not(all);
	cr_assert_eq(msb_router_dispose_kind(r, &K, "A", 5, NULL, &all, NULL), 0);
	cr_assert_not(all);
	msb_scope_purge p;
	cr_assert_eq(msb_router_dispose_scope(r, "s", "t", &p, NULL), 0);
	cr_assert_eq(msb_router_with_scope(r, "s", "t", ok_block, NULL, &p, NULL), 0);
	/* Argument errors still propagate. */
	cr_assert_eq(msb_router_dispose_kind(r, &K, NULL, 5, NULL, &all, NULL), MSB_E_VALUE);
	msb_router_free(r);
	msb_backend_unref(b);
}

/* ---- 8.1 - 8.7, 23.38: the rung ------------------------------------------------------------- */

static msb_cleanup rung_for(msb_capset caps, msb_cleanup floor, const char *spec_json)
{
	msb_backend *b;
	scripted *sc;
	scripted_new("sc", caps, &b, &sc);
	msb_router *r = router_over(&b, 1, floor, MSB_FAILED_RECLAIM_DISPOSE, NULL, NULL);
	msb_spec *spec = spec_from(spec_json);
	msb_cleanup out = (msb_cleanup)99;
	cr_assert_eq(msb_router_effective_cleanup(r, spec, &out, NULL), 0);
	msb_spec_unref(spec);
	msb_router_free(r);
	msb_backend_unref(b);
	return out;
}

#define RECLAIMS (MSB_DEFAULT_CAPABILITIES | MSB_CAP_RECLAIM)
#define SNAPSHOTS (MSB_DEFAULT_CAPABILITIES | MSB_CAP_SNAPSHOT)

Test(lifecycle, default_cleanup_is_dispose_8_1)
{
	const msb_router_options o = MSB_ROUTER_OPTIONS_INIT;
	cr_assert_eq(o.min_cleanup, MSB_CLEANUP_DISPOSE);
	/* Even where the backend could reclaim. */
	cr_assert_eq(rung_for(RECLAIMS, MSB_CLEANUP_DISPOSE, "{\"kind\": \"A\"}"),
		     MSB_CLEANUP_DISPOSE);
}

Test(lifecycle, opting_down_to_reclaim_8_2)
{
	cr_assert_eq(rung_for(RECLAIMS, MSB_CLEANUP_RECLAIM, "{\"kind\": \"A\"}"),
		     MSB_CLEANUP_RECLAIM);
}

Test(lifecycle, reclaim_needs_the_capability_8_3)
{
	/* A wslc-like backend: neither RECLAIM nor SNAPSHOT. */
	cr_assert_eq(rung_for(MSB_DEFAULT_CAPABILITIES, MSB_CLEANUP_RECLAIM, "{\"kind\": \"A\"}"),
		     MSB_CLEANUP_DISPOSE);
	/* The next stronger established rung. */
	cr_assert_eq(rung_for(SNAPSHOTS, MSB_CLEANUP_RECLAIM, "{\"kind\": \"A\"}"),
		     MSB_CLEANUP_RESET);
}

Test(lifecycle, reset_needs_snapshot_8_4)
{
	cr_assert_eq(rung_for(SNAPSHOTS, MSB_CLEANUP_RESET, "{\"kind\": \"A\"}"),
		     MSB_CLEANUP_RESET);
	cr_assert_eq(rung_for(RECLAIMS, MSB_CLEANUP_RESET, "{\"kind\": \"A\"}"),
		     MSB_CLEANUP_DISPOSE);

	/* RESET runs reset(), not dispose. */
	msb_backend *b;
	scripted *sc;
	scripted_new("sc", SNAPSHOTS, &b, &sc);
	msb_router *r =
		router_over(&b, 1, MSB_CLEANUP_RESET, MSB_FAILED_RECLAIM_DISPOSE, NULL, NULL);
	msb_spec *spec = spec_kind("A");
	msb_call_hold *h = NULL;
	cr_assert_eq(msb_router_enter_call(r, &K, spec, NULL, &h, NULL), 0);
	msb_sandbox *sb;
	cr_assert_eq(msb_call_hold_acquire(h, &sb, NULL), 0);
	msb_release_report rep;
	cr_assert_eq(msb_router_release_call(h, NULL, &rep, NULL), 0);
	cr_assert_eq(scripted_resets(sc), 1);
	cr_assert_eq(scripted_disposes(sc), 0);
	cr_assert(rep.landed);
	msb_spec_unref(spec);
	msb_router_free(r);
	msb_backend_unref(b);
}

Test(lifecycle, strongest_requirement_wins_8_5_23_14)
{
	cr_assert_eq(rung_for(RECLAIMS, MSB_CLEANUP_RECLAIM,
			      "{\"kind\": \"A\", \"min_cleanup\": \"dispose\"}"),
		     MSB_CLEANUP_DISPOSE, "a workload may ask stricter");
	cr_assert_eq(rung_for(RECLAIMS, MSB_CLEANUP_DISPOSE,
			      "{\"kind\": \"A\", \"min_cleanup\": \"reclaim\"}"),
		     MSB_CLEANUP_DISPOSE, "never weaker");
	cr_assert_eq(rung_for(SNAPSHOTS | MSB_CAP_RECLAIM, MSB_CLEANUP_RECLAIM,
			      "{\"kind\": \"A\", \"min_cleanup\": \"reset\"}"),
		     MSB_CLEANUP_RESET);
}

Test(lifecycle, unconfined_kinds_reclaim_under_explicit_reclaim_8_6_23_15)
{
	cr_assert_eq(rung_for(RECLAIMS, MSB_CLEANUP_RECLAIM,
			      "{\"kind\": \"A\", \"confined_to_guest_call_path\": false}"),
		     MSB_CLEANUP_RECLAIM);
	cr_assert_eq(rung_for(RECLAIMS, MSB_CLEANUP_RECLAIM,
			      "{\"kind\": \"A\", \"confined_to_guest_call_path\": true}"),
		     MSB_CLEANUP_RECLAIM);
	/* Under the default, confined kinds do not reclaim either (23.15). */
	cr_assert_eq(rung_for(RECLAIMS, MSB_CLEANUP_DISPOSE,
			      "{\"kind\": \"A\", \"confined_to_guest_call_path\": true}"),
		     MSB_CLEANUP_DISPOSE);
}

Test(lifecycle, reclaim_config_defaults_8_7_23_28)
{
	const msb_reclaim_config c = MSB_RECLAIM_CONFIG_INIT;
	cr_assert_eq(c.failed_reclaim_policy, MSB_FAILED_RECLAIM_DISPOSE);
	cr_assert(isfinite(c.timeout) && c.timeout > 0);
	cr_assert_float_eq(c.timeout, 30.0, 1e-9);
}

Test(lifecycle, call_scope_always_disposes_23_38)
{
	cr_assert_eq(rung_for(RECLAIMS, MSB_CLEANUP_RECLAIM,
			      "{\"kind\": \"A\", \"isolation_scope\": \"call\"}"),
		     MSB_CLEANUP_DISPOSE);
}
