/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The tool-call session (checklist section 15; 2.4-2.8, 8.2, 8.8-8.10, 8.12,
 * 8.20, 8.22, 10.9-10.11, 17.4, 17.5, 17.14, 23.38): attach, calls, the call
 * path, the acquire ladder, cleanup after every outcome and ReclaimFailure.
 * The result's information flow is in test_infoflow.c.
 */
#include <criterion/criterion.h>
#include <ctype.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include <msb/outputs.h>

#include "scripted_backend.h"

static const msb_key K1 = {"s", "t", "a", NULL};
static const msb_key K2 = {"s", "t2", "a", NULL};

/* ---- fixtures ----------------------------------------------------------------------------------
 */

struct fx {
	msb_backend *b;
	msb_fake_backend *fake; /* when on the fake */
	scripted *sc;		/* when scripted */
	msb_router *r;
	msb_spec *spec;
	struct test_ctx tc;
	msb_caller_context ctx;
	recorder rec;
	msb_observer obs;
	logcap log;
	msb_tool_session_options so;
	msb_tool_session *s;
};

static void fx_router(struct fx *f, msb_cleanup rung, msb_failed_reclaim_policy policy)
{
	recorder_init(&f->rec, &f->obs);
	logcap_init(&f->log);
	f->r = router_over(&f->b, 1, rung, policy, &f->obs, &f->log);
	test_ctx_init(&f->tc, "s", "t");
	f->ctx = test_ctx_context(&f->tc);
	msb_tool_session_options so = MSB_TOOL_SESSION_OPTIONS_INIT;
	so.router = f->r;
	so.context = &f->ctx;
	so.agent_dir = "a";
	so.spec = f->spec;
	so.name = "tool";
	f->so = so;
}

static void fx_fake(struct fx *f, const char *spec_json, msb_cleanup rung,
		    msb_failed_reclaim_policy policy, const msb_declarations *decl)
{
	memset(f, 0, sizeof(*f));
	msb_fake_backend_options fo = MSB_FAKE_BACKEND_OPTIONS_INIT;
	fo.declarations = decl;
	cr_assert_eq(msb_fake_backend_new(&fo, &f->b, &f->fake, NULL), 0);
	f->spec = spec_from(spec_json);
	fx_router(f, rung, policy);
}

static void fx_scripted(struct fx *f, const char *spec_json, msb_capset caps, msb_cleanup rung,
			msb_failed_reclaim_policy policy)
{
	memset(f, 0, sizeof(*f));
	scripted_new("sc", caps, &f->b, &f->sc);
	f->spec = spec_from(spec_json);
	fx_router(f, rung, policy);
}

static void fx_attach(struct fx *f)
{
	msb_error *e = NULL;
	int rc = msb_tool_session_attach(&f->so, &f->s, &e);
	cr_assert_eq(rc, 0, "attach: %s", e ? msb_error_message(e) : "");
	cr_assert_not_null(f->s);
}

static void fx_free(struct fx *f)
{
	msb_tool_session_unref(f->s);
	msb_spec_unref(f->spec);
	msb_router_free(f->r);
	msb_backend_unref(f->b);
}

static msb_tool_call *begin(struct fx *f)
{
	msb_tool_call *c = NULL;
	cr_assert_eq(msb_tool_session_begin_call(f->s, NULL, &c, NULL), 0);
	return c;
}

static msb_sandbox *acquire(msb_tool_call *c, const msb_key *key)
{
	msb_sandbox *sb = NULL;
	char *sentence = NULL;
	msb_error *e = NULL;
	int rc = msb_tool_call_acquire(c, key, &sb, &sentence, &e);
	cr_assert_eq(rc, 0, "%s", e ? msb_error_message(e) : "");
	cr_assert_null(sentence, "%s", sentence);
	return sb;
}

static int end_with(msb_tool_call *c, msb_call_outcome_kind kind, const char *text)
{
	msb_call_outcome oc = MSB_CALL_OUTCOME_INIT;
	oc.kind = kind;
	oc.text = text;
	oc.error_code = MSB_E_RUNTIME;
	msb_tool_result *res = NULL;
	int rc = msb_tool_call_end(c, &oc, &res, NULL);
	msb_tool_result_free(res);
	return rc;
}

static const char *path_of(msb_tool_call *c)
{
	const char *p = NULL;
	cr_assert_eq(msb_tool_call_guest_call_path(c, &p, NULL), 0);
	return p;
}

#define RECLAIMS (MSB_DEFAULT_CAPABILITIES | MSB_CAP_RECLAIM)

static bool strv_has(char **v, const char *s)
{
	for (; v && *v; v++)
		if (strcmp(*v, s) == 0)
			return true;
	return false;
}

/* ---- attach (15.1 - 15.11) ------------------------------------------------------------------- */

static int build_count;

static int count_build(void *ud, msb_tool_session *s, msb_error **err)
{
	build_count++;
	cr_assert_not_null(s, "build receives the session");
	return 0;
}

Test(session, nothing_configured_no_tool_15_1_15_8)
{
	struct fx f;
	fx_fake(&f, "{\"kind\": \"A\"}", MSB_CLEANUP_DISPOSE, MSB_FAILED_RECLAIM_DISPOSE, NULL);
	build_count = 0;
	f.so.build = count_build;
	msb_tool_session_options none = f.so;
	none.router = NULL;
	msb_tool_session *s = (msb_tool_session *)1;
	cr_assert_eq(msb_tool_session_attach(&none, &s, NULL), 0);
	cr_assert_null(s, "no router: no tool, not a failing tool");
	msb_router *empty = NULL;
	msb_router_options o = MSB_ROUTER_OPTIONS_INIT;
	cr_assert_eq(msb_router_new(NULL, 0, &o, &empty, NULL), 0);
	none.router = empty;
	cr_assert_eq(msb_tool_session_attach(&none, &s, NULL), 0);
	cr_assert_null(s, "a disabled router: no tool");
	cr_assert_eq(build_count, 0, "build never runs on an unconfigured host");
	msb_router_free(empty);

	fx_attach(&f);
	cr_assert_eq(build_count, 1);
	for (int i = 0; i < 5; i++)
		cr_assert_eq(end_with(begin(&f), MSB_CALL_RESULT, "x"), 0);
	cr_assert_eq(build_count, 1, "once, at attach");
	fx_free(&f);
}

Test(session, attach_preflight_is_loud_15_2_to_15_7)
{
	struct fx f;
	fx_fake(&f, "{\"kind\": \"A\", \"requires\": [\"exec\", \"files_out\"]}",
		MSB_CLEANUP_DISPOSE, MSB_FAILED_RECLAIM_DISPOSE, NULL);
	msb_tool_session *s = NULL;
	msb_error *e = NULL;
	/* 15.2: the fake lacks FILES_OUT. */
	cr_assert_eq(msb_tool_session_attach(&f.so, &s, &e), MSB_E_CAPABILITY_NOT_SUPPORTED);
	msb_error_free(e);
	e = NULL;
	fx_free(&f);

	msb_declarations d = MSB_FAKE_BACKEND_DECLARATIONS;
	d.capabilities |= MSB_CAP_FILES_OUT;
	fx_fake(&f,
		"{\"kind\": \"A\", \"requires\": [\"exec\", \"files_out\"], \"declared_outputs\": "
		"[{\"path\": \"r.txt\"}]}",
		MSB_CLEANUP_DISPOSE, MSB_FAILED_RECLAIM_DISPOSE, &d);
	static const msb_output_sink sink = MSB_OUTPUT_SINK_INIT;
	/* 15.3 */
	msb_tool_session_options o = f.so;
	o.output_sink = &sink;
	o.declarations = "{}";
	cr_assert_eq(msb_tool_session_attach(&o, &s, NULL), MSB_E_VALUE);
	/* 15.4 */
	o = f.so;
	cr_assert_eq(msb_tool_session_attach(&o, &s, &e), MSB_E_OUTPUT_SINK_REQUIRED);
	cr_assert_str_eq(msb_error_name(e), "SandboxOutputSinkRequired");
	msb_error_free(e);
	e = NULL;
	o.output_sink = &sink;
	cr_assert_eq(msb_tool_session_attach(&o, &s, NULL), 0);
	cr_assert_eq(msb_tool_session_output_sink(s), &sink);
	msb_tool_session_unref(s);
	/* 15.6: finite and > 0 (0 = the router's reclaim.timeout) */
	const double bad[] = {-1, INFINITY, NAN};
	for (int i = 0; i < 3; i++) {
		o.reclaim_timeout = bad[i];
		cr_assert_eq(msb_tool_session_attach(&o, &s, NULL), MSB_E_VALUE);
	}
	fx_free(&f);

	/* 15.5: outputs need files_out in requires. */
	fx_fake(&f, "{\"kind\": \"A\", \"declared_outputs\": [{\"path\": \"r.txt\"}]}",
		MSB_CLEANUP_DISPOSE, MSB_FAILED_RECLAIM_DISPOSE, NULL);
	cr_assert_eq(msb_tool_session_attach(&f.so, &s, &e), MSB_E_VALUE);
	cr_assert(strstr(msb_error_message(e), "files_out"), "%s", msb_error_message(e));
	msb_error_free(e);
	e = NULL;
	fx_free(&f);

	/* 15.7: a work_dir at or one component below the root. */
	const char *roots[] = {"{\"kind\": \"A\", \"work_dir\": \"/\"}",
			       "{\"kind\": \"A\", \"work_dir\": \"/work\"}"};
	for (int i = 0; i < 2; i++) {
		fx_fake(&f, roots[i], MSB_CLEANUP_DISPOSE, MSB_FAILED_RECLAIM_DISPOSE, NULL);
		cr_assert_eq(msb_tool_session_attach(&f.so, &s, NULL), MSB_E_VALUE, "%s", roots[i]);
		fx_free(&f);
	}
	fx_fake(&f, "{\"kind\": \"A\", \"work_dir\": null}", MSB_CLEANUP_DISPOSE,
		MSB_FAILED_RECLAIM_DISPOSE, NULL);
	fx_attach(&f);
	fx_free(&f);
}

Test(session, body_metadata_and_approval_passthrough_15_9_15_24)
{
	struct fx f;
	fx_fake(&f, "{\"kind\": \"A\"}", MSB_CLEANUP_DISPOSE, MSB_FAILED_RECLAIM_DISPOSE, NULL);
	const char *schema = "{\"type\": \"object\", \"properties\": {\"code\": {\"type\": "
			     "\"string\"}}}";
	f.so.description = "Run the code.\n\nReturns its output.";
	f.so.parameters_schema = schema;
	f.so.approval_mode = MSB_APPROVAL_ALWAYS_REQUIRE;
	fx_attach(&f);
	cr_assert_str_eq(msb_tool_session_name(f.s), "tool");
	cr_assert_str_eq(msb_tool_session_description(f.s), "Run the code.\n\nReturns its output.");
	cr_assert_str_eq(msb_tool_session_parameters_schema(f.s), schema, "verbatim");
	cr_assert_eq(msb_tool_session_approval_mode(f.s), MSB_APPROVAL_ALWAYS_REQUIRE);
	fx_free(&f);
}

Test(session, outside_a_call_is_a_wiring_error_10_11_15_10)
{
	/* A body with no call (the C form of a synchronous body) owns nothing:
	 * asking for a call path there is a wiring error, not a sentence. */
	const char *p = NULL;
	msb_error *e = NULL;
	cr_assert_eq(msb_tool_call_guest_call_path(NULL, &p, &e), MSB_E_RUNTIME);
	cr_assert_str_eq(msb_error_name(e), "RuntimeError");
	msb_error_free(e);
	e = NULL;
	msb_sandbox *sb;
	char *sentence;
	cr_assert_eq(msb_tool_call_acquire(NULL, &K1, &sb, &sentence, NULL), MSB_E_RUNTIME);
}

/* A context whose thread is per OS thread: concurrent conversations. */
static __thread const char *tls_thread;

static int tls_scope(void *ud, char **out, msb_error **err)
{
	*out = strdup("s");
	return 0;
}

static int tls_thread_fn(void *ud, char **out, msb_error **err)
{
	*out = tls_thread ? strdup(tls_thread) : NULL;
	return 0;
}

struct conv {
	msb_tool_session *s;
	const char *thread;
	char key_thread[32];
	char path[16];
	int rc;
};

static void *conversation(void *p)
{
	struct conv *c = p;
	tls_thread = c->thread;
	msb_tool_call *call = NULL;
	c->rc = msb_tool_session_begin_call(c->s, NULL, &call, NULL);
	msb_key *k = NULL;
	char *sentence = NULL;
	c->rc |= msb_tool_call_key(call, &k, &sentence, NULL);
	snprintf(c->key_thread, sizeof(c->key_thread), "%s", k ? k->thread_id : "");
	msb_sandbox *sb = NULL;
	c->rc |= msb_tool_call_acquire(call, k, &sb, &sentence, NULL);
	const char *path = NULL;
	c->rc |= msb_tool_call_guest_call_path(call, &path, NULL);
	snprintf(c->path, sizeof(c->path), "%s", path);
	sleep_ms(20);
	msb_call_outcome oc = MSB_CALL_OUTCOME_INIT;
	oc.text = "ok";
	c->rc |= msb_tool_call_end(call, &oc, NULL, NULL);
	msb_key_free(k);
	return NULL;
}

Test(session, session_holds_host_configuration_only_15_11_2_4, .timeout = 30)
{
	struct fx f;
	fx_fake(&f, "{\"kind\": \"A\"}", MSB_CLEANUP_DISPOSE, MSB_FAILED_RECLAIM_DISPOSE, NULL);
	msb_caller_context ctx = msb_make_caller_context(NULL, tls_scope, tls_thread_fn, NULL);
	f.so.context = &ctx;
	fx_attach(&f);
	struct conv c[2] = {{.s = f.s, .thread = "t1"}, {.s = f.s, .thread = "t2"}};
	pthread_t t[2];
	for (int i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, conversation, &c[i]);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	cr_assert_eq(c[0].rc, 0);
	cr_assert_eq(c[1].rc, 0);
	cr_assert_str_eq(c[0].key_thread, "t1");
	cr_assert_str_eq(c[1].key_thread, "t2");
	cr_assert_str_neq(c[0].path, c[1].path, "own call paths");
	fx_free(&f);
}

/* ---- keys (2.4 - 2.8, 15.12) -------------------------------------------------------------------
 */

Test(session, key_read_at_call_time_refusal_without_thread_2_4_2_5_2_6_15_12)
{
	struct fx f;
	fx_fake(&f, "{\"kind\": \"A\"}", MSB_CLEANUP_DISPOSE, MSB_FAILED_RECLAIM_DISPOSE, NULL);
	f.so.agent_dir = "devops";
	fx_attach(&f);
	const char *threads[] = {"t1", "t2"};
	for (int i = 0; i < 2; i++) {
		test_ctx_set_thread(&f.tc, threads[i]);
		msb_tool_call *c = begin(&f);
		msb_key *k = NULL;
		char *sentence = NULL;
		cr_assert_eq(msb_tool_call_key(c, &k, &sentence, NULL), 0);
		cr_assert_str_eq(k->thread_id, threads[i], "read each time, never captured");
		cr_assert_str_eq(k->agent_dir, "devops", "fixed at construction");
		cr_assert_null(k->call_id, "conversation scope: no call id");
		acquire(c, k);
		msb_key_free(k);
		end_with(c, MSB_CALL_RESULT, "x");
	}
	size_t before = msb_fake_backend_key_count(f.fake);
	test_ctx_set_thread(&f.tc, NULL);
	msb_tool_call *c = begin(&f);
	msb_key *k = NULL;
	char *sentence = NULL;
	cr_assert_eq(msb_tool_call_key(c, &k, &sentence, NULL), 0);
	cr_assert_null(k);
	cr_assert(strncmp(sentence, "Error:", 6) == 0);
	cr_assert(strstr(sentence, "no active thread context"));
	free(sentence);
	end_with(c, MSB_CALL_REFUSAL, "Error: no active thread context");
	cr_assert_eq(msb_fake_backend_key_count(f.fake), before, "nothing acquired");
	fx_free(&f);
}

Test(session, call_scope_key_path_and_event_share_the_call_id_2_7_23_38)
{
	struct fx f;
	msb_declarations d = MSB_FAKE_BACKEND_DECLARATIONS;
	d.isolation_scopes = MSB_SCOPE_CONVERSATION | MSB_SCOPE_CALL;
	fx_fake(&f, "{\"kind\": \"A\", \"isolation_scope\": \"call\"}", MSB_CLEANUP_RECLAIM,
		MSB_FAILED_RECLAIM_DISPOSE, &d);
	fx_attach(&f);
	cr_assert_eq(msb_tool_session_cleanup(f.s), MSB_CLEANUP_DISPOSE,
		     "a call-scoped sandbox is always disposed, even under RECLAIM");
	msb_tool_call *c = begin(&f);
	char id[16];
	snprintf(id, sizeof(id), "%s", msb_tool_call_id(c));
	msb_key *k = NULL;
	char *sentence = NULL;
	cr_assert_eq(msb_tool_call_key(c, &k, &sentence, NULL), 0);
	cr_assert_str_eq(k->call_id, id);
	cr_assert_str_eq(path_of(c), id);
	acquire(c, k);
	msb_key_free(k);
	/* A key without the call id gets this call's folded in. */
	acquire(c, &K1);
	cr_assert_str_eq(msb_fake_backend_key(f.fake, 1)->call_id, id);
	cr_assert_eq(end_with(c, MSB_CALL_RESULT, "x"), 0);
	cr_assert_str_eq(msb_fake_backend_key(f.fake, 0)->call_id, id);
	cr_assert_str_eq(f.rec.ended[0].call, id);
	cr_assert_eq(msb_fake_backend_disposed_count(f.fake), 1, "never outlives its call");
	cr_assert_str_eq(msb_fake_backend_disposed(f.fake, 0, NULL, NULL)->call_id, id);
	fx_free(&f);
}

Test(session, list_files_failure_is_a_refusal_2_8)
{
	struct fx f;
	fx_fake(&f, "{\"kind\": \"A\"}", MSB_CLEANUP_DISPOSE, MSB_FAILED_RECLAIM_DISPOSE, NULL);
	f.so.file_store_name = "agent-store";
	fx_attach(&f);
	f.tc.files[0] = "dir/a";
	f.tc.files[1] = "b";
	msb_tool_call *c = begin(&f);
	char **files = NULL;
	char *sentence = NULL;
	cr_assert_eq(msb_tool_call_list_files(c, &files, &sentence, NULL), 0);
	cr_assert_eq(msb_strv_len(files), 2);
	msb_strv_free(files);
	f.tc.list_rc = MSB_E_OS;
	cr_assert_eq(msb_tool_call_list_files(c, &files, &sentence, NULL), 0);
	cr_assert_null(files, "never an empty listing");
	cr_assert(strncmp(sentence, "Error: could not list the file store: ", 38) == 0, "%s",
		  sentence);
	cr_assert(strstr(sentence, "agent-store"));
	free(sentence);
	end_with(c, MSB_CALL_RESULT, "x");
	fx_free(&f);
}

/* ---- the call path (10.9 - 10.11) ------------------------------------------------------------ */

Test(session, call_path_relative_once_per_call_distinct_10_9_10_10)
{
	struct fx f;
	fx_fake(&f, "{\"kind\": \"A\", \"work_dir\": \"/maf-sandbox/work\"}", MSB_CLEANUP_DISPOSE,
		MSB_FAILED_RECLAIM_DISPOSE, NULL);
	fx_attach(&f);
	msb_tool_call *a = begin(&f), *b = begin(&f);
	const char *pa = path_of(a), *pb = path_of(b);
	cr_assert_eq(strlen(pa), 12);
	for (const char *p = pa; *p; p++)
		cr_assert(isxdigit((unsigned char)*p) && !isupper((unsigned char)*p));
	cr_assert_neq(pa[0], '/', "relative to the base");
	cr_assert(strncmp(pa, "/maf-sandbox/work", 17) != 0);
	cr_assert_str_neq(pa, pb, "distinct across concurrent calls");
	cr_assert_eq(path_of(a), pa, "stable within the call");
	cr_assert_str_eq(pa, msb_tool_call_id(a));
	end_with(a, MSB_CALL_RESULT, "x");
	end_with(b, MSB_CALL_RESULT, "x");
	fx_free(&f);
}

struct child {
	msb_tool_call *c;
	char path[16];
	int rc;
};

static void *child_task(void *p)
{
	struct child *ch = p;
	const char *path = NULL;
	ch->rc = msb_tool_call_guest_call_path(ch->c, &path, NULL);
	snprintf(ch->path, sizeof(ch->path), "%s", path ? path : "");
	return NULL;
}

Test(session, record_belongs_to_its_call_15_15, .timeout = 30)
{
	struct fx f;
	fx_fake(&f, "{\"kind\": \"A\"}", MSB_CLEANUP_DISPOSE, MSB_FAILED_RECLAIM_DISPOSE, NULL);
	fx_attach(&f);
	msb_tool_session *s2 = NULL;
	cr_assert_eq(msb_tool_session_attach(&f.so, &s2, NULL), 0);
	msb_tool_call *outer = begin(&f);
	/* A child task reads its parent call's record. */
	struct child ch = {.c = outer};
	pthread_t t;
	pthread_create(&t, NULL, child_task, &ch);
	pthread_join(t, NULL);
	cr_assert_eq(ch.rc, 0);
	cr_assert_str_eq(ch.path, path_of(outer));
	/* A nested call of another session gets its own. */
	msb_tool_call *inner = NULL;
	cr_assert_eq(msb_tool_session_begin_call(s2, NULL, &inner, NULL), 0);
	cr_assert_str_neq(path_of(inner), path_of(outer));
	cr_assert_eq(msb_tool_call_session(inner), s2);
	end_with(inner, MSB_CALL_RESULT, "x");
	end_with(outer, MSB_CALL_RESULT, "x");
	msb_tool_session_unref(s2);
	fx_free(&f);
}

struct lingering {
	msb_tool_call *c;
	scripted *sc;
	int rc_path;
	int rc_acquire;
};

static void *linger_during_cleanup(void *p)
{
	struct lingering *l = p;
	cr_assert(scripted_wait_blocked(l->sc, 1), "removal has begun");
	const char *path = NULL;
	l->rc_path = msb_tool_call_guest_call_path(l->c, &path, NULL);
	msb_sandbox *sb = NULL;
	char *sentence = NULL;
	l->rc_acquire = msb_tool_call_acquire(l->c, &K2, &sb, &sentence, NULL);
	scripted_open_gate(l->sc);
	return NULL;
}

Test(session, record_closed_before_cleanup_15_16_10_11, .timeout = 30)
{
	struct fx f;
	fx_scripted(&f, "{\"kind\": \"A\"}", RECLAIMS, MSB_CLEANUP_RECLAIM,
		    MSB_FAILED_RECLAIM_DISPOSE);
	fx_attach(&f);
	msb_tool_call *c = begin(&f);
	acquire(c, &K1);
	path_of(c);
	/* A task left running holds its own reference. */
	struct lingering l = {.c = msb_tool_call_ref(c), .sc = f.sc};
	scripted_set_reclaim_blocks(f.sc, true);
	pthread_t t;
	pthread_create(&t, NULL, linger_during_cleanup, &l);
	cr_assert_eq(end_with(c, MSB_CALL_RESULT, "x"), 0);
	pthread_join(t, NULL);
	cr_assert_eq(l.rc_path, MSB_E_RUNTIME, "no path from a call being cleaned");
	cr_assert_eq(l.rc_acquire, MSB_E_RUNTIME, "no acquire into a closed record");
	const char *p;
	msb_error *e = NULL;
	cr_assert_eq(msb_tool_call_guest_call_path(l.c, &p, &e), MSB_E_RUNTIME);
	cr_assert(strstr(msb_error_message(e), "has ended"));
	msb_error_free(e);
	e = NULL;
	cr_assert_eq(msb_tool_call_report_unclean(l.c, NULL, "x", NULL), MSB_E_RUNTIME);
	msb_tool_call_unref(l.c);
	cr_assert_eq(scripted_acquires(f.sc), 1);
	fx_free(&f);
}

/* ---- the acquire ladder (15.13, 15.14, 15.22) -------------------------------------------------
 */

static void ladder_case(int code, const char *message, const char *expect)
{
	struct fx f;
	fx_scripted(&f, "{\"kind\": \"A\"}", MSB_DEFAULT_CAPABILITIES, MSB_CLEANUP_DISPOSE,
		    MSB_FAILED_RECLAIM_DISPOSE);
	scripted_set_acquire_error(f.sc, code, message);
	fx_attach(&f);
	msb_tool_call *c = begin(&f);
	msb_sandbox *sb = (msb_sandbox *)1;
	char *sentence = NULL;
	cr_assert_eq(msb_tool_call_acquire(c, &K1, &sb, &sentence, NULL), 0);
	cr_assert_null(sb);
	cr_assert_str_eq(sentence, expect);
	cr_assert_null(strstr(sentence, "endpoint"));
	cr_assert(logcap_contains(&f.log, message), "the detail goes to the log");
	free(sentence);
	end_with(c, MSB_CALL_REFUSAL, expect);
	cr_assert_eq(f.rec.n_ended, 1);
	cr_assert_eq(f.rec.ended[0].n_keys, 1, "a refused key is still a touched key (17.4)");
	fx_free(&f);
}

Test(session, acquire_failure_ladder_15_13)
{
	ladder_case(MSB_E_RUNTIME, "https://endpoint/sub-123 is down", MSB_SENTENCE_UNAVAILABLE);
	ladder_case(MSB_E_NOT_IMPLEMENTED, "no client library", MSB_SENTENCE_NOT_INSTALLED);
	ladder_case(MSB_E_NO_BACKEND, "nothing configured", MSB_SENTENCE_NO_BACKEND);
	ladder_case(MSB_E_VALUE, "image tag is malformed", "Error: image tag is malformed");
}

Test(session, every_key_recorded_and_cleaned_15_14_17_4)
{
	struct fx f;
	fx_scripted(&f, "{\"kind\": \"A\"}", MSB_DEFAULT_CAPABILITIES, MSB_CLEANUP_DISPOSE,
		    MSB_FAILED_RECLAIM_DISPOSE);
	fx_attach(&f);
	msb_tool_call *c = begin(&f);
	acquire(c, &K1);
	acquire(c, &K2);
	acquire(c, &K1);
	cr_assert_eq(end_with(c, MSB_CALL_RESULT, "x"), 0);
	cr_assert_eq(scripted_disposes(f.sc), 2, "cleanup touches both");
	cr_assert_neq(scripted_find(f.sc, "dispose t/A/t/A#1", 0), -1);
	cr_assert_neq(scripted_find(f.sc, "dispose t2/A/t2/A#1", 0), -1);
	cr_assert_eq(f.rec.ended[0].n_keys, 2);
	cr_assert_str_eq(f.rec.ended[0].keys[0], "s/t/a/-");
	cr_assert_str_eq(f.rec.ended[0].keys[1], "s/t2/a/-");
	/* The call column: inside a call SandboxAcquired carries it (17.5). */
	cr_assert_str_eq(f.rec.acquired[0].call, f.rec.ended[0].call);
	cr_assert_str_eq(f.rec.disposed[0].call, f.rec.ended[0].call);
	fx_free(&f);
}

struct excl_arg {
	msb_tool_session *s;
	atomic_int *inside, *max;
};

static void *excl_call(void *p)
{
	struct excl_arg *a = p;
	msb_tool_call *c = NULL;
	msb_tool_session_begin_call(a->s, NULL, &c, NULL);
	msb_sandbox *sb;
	char *sentence = NULL;
	msb_tool_call_acquire(c, &K1, &sb, &sentence, NULL);
	int now = atomic_fetch_add(a->inside, 1) + 1;
	int m = atomic_load(a->max);
	while (now > m && !atomic_compare_exchange_weak(a->max, &m, now))
		;
	sleep_ms(50);
	atomic_fetch_sub(a->inside, 1);
	end_with(c, MSB_CALL_RESULT, "x");
	return NULL;
}

Test(session, wrapper_enters_admission_15_22, .timeout = 30)
{
	struct fx f;
	fx_scripted(&f, "{\"kind\": \"A\", \"exclusive_admission\": true}",
		    MSB_DEFAULT_CAPABILITIES, MSB_CLEANUP_DISPOSE, MSB_FAILED_RECLAIM_DISPOSE);
	fx_attach(&f);
	atomic_int inside = 0, max = 0;
	struct excl_arg a = {f.s, &inside, &max};
	pthread_t t[3];
	for (int i = 0; i < 3; i++)
		pthread_create(&t[i], NULL, excl_call, &a);
	for (int i = 0; i < 3; i++)
		pthread_join(t[i], NULL);
	cr_assert_eq(atomic_load(&max), 1, "serialised without kind code");
	cr_assert_eq(scripted_disposes(f.sc), 3);
	fx_free(&f);
}

/* ---- cleanup (15.17 - 15.21, 8.2, 8.8 - 8.12, 8.20, 8.22) --------------------------------- */

Test(session, cleanup_after_every_outcome_nothing_when_untouched_15_17_17_14)
{
	const msb_call_outcome_kind kinds[] = {MSB_CALL_RESULT, MSB_CALL_REFUSAL, MSB_CALL_ERROR,
					       MSB_CALL_CANCELLED};
	const char *names[] = {"result", "refusal", "RuntimeError", "cancelled"};
	struct fx f;
	fx_scripted(&f, "{\"kind\": \"A\"}", RECLAIMS, MSB_CLEANUP_DISPOSE,
		    MSB_FAILED_RECLAIM_DISPOSE);
	fx_attach(&f);
	for (int i = 0; i < 4; i++) {
		msb_tool_call *c = begin(&f);
		acquire(c, &K1);
		path_of(c);
		cr_assert_eq(end_with(c, kinds[i], "Error: x"), 0);
		cr_assert_eq(scripted_reclaims(f.sc), i + 1);
		cr_assert_eq(scripted_disposes(f.sc), i + 1);
		cr_assert_str_eq(f.rec.ended[i].outcome, names[i]);
	}
	/* A call that never asked for a path and never acquired: no guest work. */
	msb_tool_call *c = begin(&f);
	cr_assert_eq(end_with(c, MSB_CALL_ERROR, NULL), 0);
	cr_assert_eq(scripted_reclaims(f.sc), 4);
	cr_assert_eq(scripted_disposes(f.sc), 4);
	cr_assert_eq(scripted_acquires(f.sc), 4);
	fx_free(&f);
}

static void *cancel_later(void *p)
{
	sleep_ms(100);
	msb_cancel_trigger(p);
	return NULL;
}

Test(session, cleanup_never_replaces_the_outcome_15_18, .timeout = 30)
{
	struct fx f;
	fx_scripted(&f, "{\"kind\": \"A\"}", RECLAIMS, MSB_CLEANUP_RECLAIM,
		    MSB_FAILED_RECLAIM_DISPOSE);
	fx_attach(&f);
	scripted_set_reclaim_rc(f.sc, MSB_E_RUNTIME);
	msb_tool_call *c = begin(&f);
	acquire(c, &K1);
	path_of(c);
	msb_call_outcome oc = MSB_CALL_OUTCOME_INIT;
	oc.text = "the body's result";
	msb_tool_result *res = NULL;
	cr_assert_eq(msb_tool_call_end(c, &oc, &res, NULL), 0);
	cr_assert_eq(res->n_items, 1);
	cr_assert_str_eq(res->items[0].text, "the body's result");
	msb_tool_result_free(res);

	/* Cancellation during removal is not swallowed. */
	scripted_set_reclaim_rc(f.sc, 0);
	scripted_set_reclaim_blocks(f.sc, true);
	c = begin(&f);
	acquire(c, &K2);
	path_of(c);
	msb_cancel *cancel = NULL;
	cr_assert_eq(msb_cancel_new(&cancel, NULL), 0);
	oc.cancel = cancel;
	pthread_t t;
	pthread_create(&t, NULL, cancel_later, cancel);
	res = NULL;
	msb_error *e = NULL;
	cr_assert_eq(msb_tool_call_end(c, &oc, &res, &e), MSB_E_CANCELLED);
	cr_assert_null(res);
	msb_error_free(e);
	e = NULL;
	pthread_join(t, NULL);
	scripted_open_gate(f.sc);
	msb_cancel_free(cancel);
	fx_free(&f);
}

Test(session, cancelled_body_gets_a_short_grace_15_19, .timeout = 30)
{
	struct fx f;
	fx_scripted(&f, "{\"kind\": \"A\"}", RECLAIMS, MSB_CLEANUP_RECLAIM,
		    MSB_FAILED_RECLAIM_KEEP);
	f.so.reclaim_timeout = 20;
	fx_attach(&f);
	scripted_set_reclaim_blocks(f.sc, true);
	msb_tool_call *c = begin(&f);
	acquire(c, &K1);
	path_of(c);
	double t0 = now_s();
	cr_assert_eq(end_with(c, MSB_CALL_CANCELLED, NULL), 0);
	double took = now_s() - t0;
	cr_assert_geq(took, 1.8);
	cr_assert_lt(took, 6.0, "min(reclaim_timeout, 2 s), not 20 s");
	cr_assert_str_eq(f.rec.ended[0].outcome, "cancelled");
	scripted_open_gate(f.sc);
	fx_free(&f);
}

struct cb_state {
	atomic_int calls;
	scripted *sc;
	int disposes_at_call;
	char path[16];
	char reason[160];
	msb_reclaim_disposal disposal;
	char tool[16];
	char call[16];
	int rc;
	bool block;
	pthread_mutex_t m;
	pthread_cond_t cv;
	bool released;
};

static int on_failure(void *ud, const msb_reclaim_failure *f)
{
	struct cb_state *st = ud;
	st->disposes_at_call = st->sc ? scripted_disposes(st->sc) : -1;
	snprintf(st->path, sizeof(st->path), "%s", f->path ? f->path : "");
	snprintf(st->reason, sizeof(st->reason), "%s", f->reason);
	snprintf(st->tool, sizeof(st->tool), "%s", f->tool);
	snprintf(st->call, sizeof(st->call), "%s", f->call);
	st->disposal = f->disposal;
	atomic_fetch_add(&st->calls, 1);
	if (st->block) {
		pthread_mutex_lock(&st->m);
		while (!st->released)
			pthread_cond_wait(&st->cv, &st->m);
		pthread_mutex_unlock(&st->m);
	}
	return st->rc;
}

static void cb_init(struct cb_state *st, scripted *sc)
{
	memset(st, 0, sizeof(*st));
	st->sc = sc;
	pthread_mutex_init(&st->m, NULL);
	pthread_cond_init(&st->cv, NULL);
}

static void cb_release(struct cb_state *st)
{
	pthread_mutex_lock(&st->m);
	st->released = true;
	pthread_cond_broadcast(&st->cv);
	pthread_mutex_unlock(&st->m);
}

Test(session, failed_reclaim_disposes_then_reports_8_10_15_20)
{
	for (int keep = 0; keep < 2; keep++) {
		struct fx f;
		fx_scripted(&f, "{\"kind\": \"A\"}", RECLAIMS, MSB_CLEANUP_RECLAIM,
			    keep ? MSB_FAILED_RECLAIM_KEEP : MSB_FAILED_RECLAIM_DISPOSE);
		struct cb_state st;
		cb_init(&st, f.sc);
		st.rc = -1; /* the callback failing changes nothing */
		f.so.on_reclaim_failure = on_failure;
		f.so.on_reclaim_failure_userdata = &st;
		fx_attach(&f);
		scripted_set_reclaim_rc(f.sc, MSB_E_PERMISSION);
		msb_tool_call *c = begin(&f);
		char id[16];
		snprintf(id, sizeof(id), "%s", msb_tool_call_id(c));
		acquire(c, &K1);
		path_of(c);
		msb_call_outcome oc = MSB_CALL_OUTCOME_INIT;
		oc.text = "r";
		msb_tool_result *res = NULL;
		cr_assert_eq(msb_tool_call_end(c, &oc, &res, NULL), 0);
		cr_assert_str_eq(res->items[0].text, "r", "the result is unaffected");
		msb_tool_result_free(res);
		cr_assert_eq(atomic_load(&st.calls), 1);
		cr_assert_str_eq(st.path, id, "the call path");
		cr_assert_str_eq(st.tool, "tool");
		cr_assert_str_eq(st.call, id);
		cr_assert(strstr(st.reason, "not removed"), "%s", st.reason);
		if (!keep) {
			cr_assert_eq(st.disposal, MSB_RECLAIM_DISPOSED);
			cr_assert_eq(st.disposes_at_call, 1, "disposed before the callback runs");
		} else {
			cr_assert_eq(st.disposal, MSB_RECLAIM_KEPT);
			cr_assert_eq(scripted_disposes(f.sc), 0, "KEEP retains the instance");
			cr_assert_not(msb_router_key_unclean(f.r, &K1, NULL),
				      "and refuses nothing");
		}
		cr_assert(logcap_contains(&f.log, "on_reclaim_failure failed"));
		fx_free(&f);
	}

	/* A disposal that does not land: "failed", and the key is refused. */
	struct fx f;
	fx_scripted(&f, "{\"kind\": \"A\"}", RECLAIMS, MSB_CLEANUP_RECLAIM,
		    MSB_FAILED_RECLAIM_DISPOSE);
	struct cb_state st;
	cb_init(&st, f.sc);
	f.so.on_reclaim_failure = on_failure;
	f.so.on_reclaim_failure_userdata = &st;
	fx_attach(&f);
	scripted_set_reclaim_rc(f.sc, MSB_E_PERMISSION);
	scripted_set_dispose_default(f.sc, ACT_FAIL, MSB_DISPOSAL_UNREACHABLE, "no route");
	msb_tool_call *c = begin(&f);
	acquire(c, &K1);
	path_of(c);
	cr_assert_eq(end_with(c, MSB_CALL_RESULT, "r"), 0);
	cr_assert_eq(st.disposal, MSB_RECLAIM_FAILED);
	cr_assert(msb_router_key_unclean(f.r, &K1, NULL));
	fx_free(&f);
}

Test(session, unreclaimed_path_always_logged_15_21)
{
	struct fx f;
	fx_scripted(&f, "{\"kind\": \"A\"}", RECLAIMS, MSB_CLEANUP_RECLAIM,
		    MSB_FAILED_RECLAIM_KEEP);
	fx_attach(&f);
	scripted_set_reclaim_rc(f.sc, MSB_E_PERMISSION);
	msb_tool_call *c = begin(&f);
	char id[16];
	snprintf(id, sizeof(id), "%s", msb_tool_call_id(c));
	acquire(c, &K1);
	path_of(c);
	cr_assert_eq(end_with(c, MSB_CALL_RESULT, "r"), 0);
	cr_assert_eq(f.log.warnings, 1, "one warning: %s", f.log.text);
	char needle[48];
	snprintf(needle, sizeof(needle), "call path `%s`", id);
	cr_assert(logcap_contains(&f.log, needle), "%s", f.log.text);
	fx_free(&f);
}

Test(session, default_call_cleanup_disposes_8_1)
{
	struct fx f;
	fx_fake(&f, "{\"kind\": \"A\"}", MSB_CLEANUP_DISPOSE, MSB_FAILED_RECLAIM_DISPOSE, NULL);
	fx_attach(&f);
	msb_tool_call *c = begin(&f);
	acquire(c, &K1);
	cr_assert_eq(end_with(c, MSB_CALL_RESULT, "x"), 0);
	cr_assert_eq(msb_fake_backend_disposed_count(f.fake), 1);
	const char *kind = NULL, *inst = NULL;
	const msb_key *k = msb_fake_backend_disposed(f.fake, 0, &kind, &inst);
	cr_assert(msb_key_equal(k, &K1));
	cr_assert_str_eq(kind, "A");
	cr_assert_not_null(inst, "the physical instance");
	fx_free(&f);
}

Test(session, reclaim_removes_the_call_path_and_keeps_the_instance_8_2_8_9)
{
	struct fx f;
	fx_fake(&f, "{\"kind\": \"A\"}", MSB_CLEANUP_RECLAIM, MSB_FAILED_RECLAIM_DISPOSE, NULL);
	fx_attach(&f);
	msb_tool_call *c = begin(&f);
	char id[16];
	snprintf(id, sizeof(id), "%s", msb_tool_call_id(c));
	msb_sandbox *sb = acquire(c, &K1);
	const char *p = path_of(c);
	cr_assert_eq(msb_sandbox_write_file(sb, "out.txt", (const uint8_t *)"x", 1, p, NULL), 0);
	cr_assert_eq(end_with(c, MSB_CALL_RESULT, "x"), 0);
	char **reclaims = msb_fake_sandbox_reclaims(msb_fake_backend_sandbox(f.fake));
	char want[64];
	snprintf(want, sizeof(want), "%s/%s", MSB_DEFAULT_WORK_DIR, id);
	cr_assert_eq(msb_strv_len(reclaims), 1);
	cr_assert_str_eq(reclaims[0], want);
	msb_strv_free(reclaims);
	cr_assert_eq(msb_fake_backend_disposed_count(f.fake), 0, "kept: nothing unclean");
	fx_free(&f);
}

Test(session, unclean_call_disposed_even_under_reclaim_8_8)
{
	struct fx f;
	fx_scripted(&f, "{\"kind\": \"A\"}", RECLAIMS, MSB_CLEANUP_RECLAIM,
		    MSB_FAILED_RECLAIM_DISPOSE);
	struct cb_state st;
	cb_init(&st, f.sc);
	f.so.on_reclaim_failure = on_failure;
	f.so.on_reclaim_failure_userdata = &st;
	fx_attach(&f);
	msb_tool_call *c = begin(&f);
	msb_sandbox *sb = acquire(c, &K1);
	/* The transport saw one running survivor. */
	cr_assert_eq(msb_tool_call_report_unclean(c, sb, "1 running survivor", NULL), 0);
	cr_assert_eq(msb_tool_call_report_unclean(c, (msb_sandbox *)&st, "x", NULL), MSB_E_VALUE);
	cr_assert_eq(end_with(c, MSB_CALL_RESULT, "x"), 0);
	cr_assert_eq(scripted_disposes(f.sc), 1);
	cr_assert_eq(atomic_load(&st.calls), 1);
	cr_assert_str_eq(st.reason, "1 running survivor");
	cr_assert_str_empty(st.path, "no call path was allocated");
	cr_assert_eq(st.disposal, MSB_RECLAIM_DISPOSED);
	fx_free(&f);
}

Test(session, reclaim_is_per_call_and_immediate_8_12)
{
	struct fx f;
	fx_fake(&f, "{\"kind\": \"A\"}", MSB_CLEANUP_RECLAIM, MSB_FAILED_RECLAIM_DISPOSE, NULL);
	fx_attach(&f);
	msb_tool_call *a = begin(&f), *b = begin(&f);
	msb_sandbox *sa = acquire(a, &K1), *sb = acquire(b, &K1);
	char pa[64], pb[64];
	snprintf(pa, sizeof(pa), "%s/%s/f", MSB_DEFAULT_WORK_DIR, path_of(a));
	snprintf(pb, sizeof(pb), "%s/%s/f", MSB_DEFAULT_WORK_DIR, path_of(b));
	cr_assert_eq(msb_sandbox_write_file(sa, "f", (const uint8_t *)"a", 1, path_of(a), NULL), 0);
	cr_assert_eq(msb_sandbox_write_file(sb, "f", (const uint8_t *)"b", 1, path_of(b), NULL), 0);
	cr_assert_eq(end_with(a, MSB_CALL_RESULT, "x"), 0);
	/* A's path is gone while B still runs; B's is intact. */
	char **paths = msb_fake_sandbox_paths(msb_fake_backend_sandbox(f.fake));
	cr_assert_not(strv_has(paths, pa));
	cr_assert(strv_has(paths, pb));
	msb_strv_free(paths);
	cr_assert_eq(end_with(b, MSB_CALL_RESULT, "x"), 0);
	paths = msb_fake_sandbox_paths(msb_fake_backend_sandbox(f.fake));
	cr_assert_not(strv_has(paths, pb));
	msb_strv_free(paths);
	fx_free(&f);
}

Test(session, one_call_reclaims_everything_then_cleans_in_sequence_8_20)
{
	struct fx f;
	fx_scripted(&f, "{\"kind\": \"A\"}", RECLAIMS, MSB_CLEANUP_DISPOSE,
		    MSB_FAILED_RECLAIM_DISPOSE);
	fx_attach(&f);
	msb_tool_call *c = begin(&f);
	acquire(c, &K1);
	acquire(c, &K2);
	path_of(c);
	cr_assert_eq(end_with(c, MSB_CALL_RESULT, "x"), 0);
	char **log = scripted_log(f.sc);
	cr_assert_eq(msb_strv_len(log), 6, "2 acquires, 2 reclaims, 2 disposals");
	cr_assert(strncmp(log[2], "reclaim t/A#1 ", 14) == 0, "%s", log[2]);
	cr_assert(strncmp(log[3], "reclaim t2/A#1 ", 15) == 0, "%s", log[3]);
	cr_assert_str_eq(log[4], "dispose t/A/t/A#1");
	cr_assert_str_eq(log[5], "dispose t2/A/t2/A#1");
	msb_strv_free(log);
	fx_free(&f);
}

Test(session, each_cleanup_step_bounded_separately_8_22, .timeout = 30)
{
	struct fx f;
	fx_scripted(&f, "{\"kind\": \"A\"}", RECLAIMS, MSB_CLEANUP_RECLAIM,
		    MSB_FAILED_RECLAIM_DISPOSE);
	struct cb_state st;
	cb_init(&st, f.sc);
	st.block = true;
	f.so.on_reclaim_failure = on_failure;
	f.so.on_reclaim_failure_userdata = &st;
	f.so.reclaim_timeout = 1;
	fx_attach(&f);
	/* Removal, disposal and reporting each hang. */
	scripted_set_reclaim_blocks(f.sc, true);
	scripted_set_dispose_default(f.sc, ACT_BLOCK_LAND, 0, NULL);
	msb_tool_call *c = begin(&f);
	acquire(c, &K1);
	path_of(c);
	double t0 = now_s();
	cr_assert_eq(end_with(c, MSB_CALL_RESULT, "x"), 0);
	double took = now_s() - t0;
	cr_assert_geq(took, 2.0, "each step got its own bound: %g", took);
	cr_assert_lt(took, 4.5, "about three times reclaim_timeout: %g", took);
	cr_assert_eq(atomic_load(&st.calls), 1);
	cr_assert_eq(st.disposal, MSB_RECLAIM_FAILED, "the disposal did not land in time");
	scripted_open_gate(f.sc);
	cb_release(&st);
	sleep_ms(50);
	fx_free(&f);
}
