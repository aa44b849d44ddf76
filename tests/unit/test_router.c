/* SPDX-License-Identifier: Apache-2.0 */
/*
 * SandboxRouter: construction and selection (checklist 5.1-5.17, 1.4, 4.13),
 * acquire (7.1, 7.2, 6.13), the host's disposals (7.3, 7.4, 7.13, 7.16), the
 * egress reporter (4.22) and use from many threads. The checks themselves
 * are in test_checks.c.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <msb/msb.h>

#include "inert_sandbox.h"

/* ---- a recording backend: a real msb_backend_ops counting every call ------ */

struct rec {
	char name[32];
	int acquires;
	int disposes;
	int scopes;
	int dispose_rc;	 /* non-zero: dispose "raises" */
	int report_code; /* >= 0: dispose reports this DisposalFailure */
	int scope_rc;	 /* non-zero: dispose_scope "raises" */
	uint64_t scope_count;
	int acquire_rc;		      /* non-zero: acquire fails with "secret-endpoint" */
	msb_egress_reporter reporter; /* the last one handed over */
	int reporters;
	pthread_mutex_t lock;
};

static int rec_acquire(void *impl, const msb_key *key, const msb_spec *spec, msb_sandbox **out,
		       msb_error **err)
{
	struct rec *r = impl;
	pthread_mutex_lock(&r->lock);
	r->acquires++;
	pthread_mutex_unlock(&r->lock);
	if (r->acquire_rc)
		return msb_error_set(err, r->acquire_rc, "secret-endpoint unreachable");
	char id[96];
	snprintf(id, sizeof(id), "%s/%s", r->name, msb_spec_kind(spec));
	return test_inert_sandbox_new(id, r->name, out, err);
}

static int rec_dispose(void *impl, const msb_key *key, const char *kind, const char *instance_id,
		       msb_disposal_failure **failure, msb_error **err)
{
	struct rec *r = impl;
	r->disposes++;
	if (r->dispose_rc)
		return msb_error_set(err, r->dispose_rc, "%s dispose raised", r->name);
	if (r->report_code >= 0)
		return msb_disposal_failure_new((msb_disposal_code)r->report_code, "still there",
						failure, err);
	return 0;
}

static int rec_dispose_scope(void *impl, const char *scope, const char *thread_id,
			     msb_scope_purge *out, msb_error **err)
{
	struct rec *r = impl;
	r->scopes++;
	if (r->scope_rc)
		return msb_error_set(err, r->scope_rc, "%s purge raised", r->name);
	out->disposed = r->scope_count;
	out->undisposed = 0;
	return 0;
}

static void rec_set_reporter(void *impl, const msb_egress_reporter *reporter)
{
	struct rec *r = impl;
	r->reporter = *reporter;
	r->reporters++;
}

static void rec_free(void *impl)
{
	struct rec *r = impl;
	pthread_mutex_destroy(&r->lock);
	free(r);
}

static const msb_backend_ops rec_ops = {
	.version = MSB_BACKEND_OPS_VERSION,
	.acquire = rec_acquire,
	.dispose = rec_dispose,
	.dispose_scope = rec_dispose_scope,
	.set_egress_reporter = rec_set_reporter,
	.free = rec_free,
};

/* Declarations that serve a default spec (egress closed). */
static msb_declarations serving(msb_capset caps)
{
	msb_declarations d = MSB_DECLARATIONS_INIT;
	d.capabilities = caps;
	d.egress_modes = MSB_EGRESS_CLOSED | MSB_EGRESS_ALLOWLIST;
	return d;
}

static msb_backend *rec_new(const char *name, const char *isolation, msb_capset caps,
			    struct rec **out)
{
	struct rec *r = calloc(1, sizeof(*r));
	snprintf(r->name, sizeof(r->name), "%s", name);
	r->report_code = -1;
	pthread_mutex_init(&r->lock, NULL);
	msb_declarations d = serving(caps);
	msb_backend_info info = {MSB_BACKEND_INFO_VERSION, name, isolation, &d};
	msb_backend *b = NULL;
	msb_error *err = NULL;
	cr_assert_eq(msb_backend_new(&rec_ops, &info, r, &b, &err), 0, "%s",
		     msb_error_message(err));
	if (out)
		*out = r;
	return b;
}

#define BASIC ((msb_capset)(MSB_CAP_EXEC | MSB_CAP_FILES_IN))
#define WITH_OUT ((msb_capset)(BASIC | MSB_CAP_FILES_OUT))

static msb_spec *spec_json(const char *json)
{
	msb_spec *s = NULL;
	msb_error *err = NULL;
	cr_assert_eq(msb_spec_from_json(json, strlen(json), &s, &err), 0, "%s: %s", json,
		     msb_error_message(err));
	return s;
}

static msb_spec *spec_default(void)
{
	return spec_json("{\"kind\": \"k\"}");
}

static msb_spec *spec_files_out(void)
{
	return spec_json("{\"kind\": \"render\", \"requires\": [\"exec\", \"files_in\", "
			 "\"files_out\"]}");
}

static const msb_key key = {"scope", "thread", "agent", NULL};

/* ---- log and observer capture ----------------------------------------------- */

static struct {
	int n;
	int level[16];
	char msg[16][2048];
} logs;

static void capture_log(void *ud, msb_log_level level, const char *component, const char *m)
{
	if (logs.n < 16) {
		logs.level[logs.n] = level;
		snprintf(logs.msg[logs.n], sizeof(logs.msg[0]), "%s", m);
	}
	logs.n++;
}

static int warnings(void)
{
	int w = 0;
	for (int i = 0; i < logs.n && i < 16; i++)
		w += logs.level[i] >= MSB_LOG_WARNING;
	return w;
}

static struct {
	int acquired;
	char refusal[64];
	bool refusal_null;
	char call[64];
	char backend[64];
	char instance[96];
	char all_text[1024];
	int disposed;
	bool disposed_all;
	char origin[16];
	size_t n_results;
	msb_ev_disposal_result results[4];
	char result_backend[4][32];
	int scoped;
	uint64_t scope_count;
	char scope[32];
	int egress;
	char egress_host[64];
} ev;

static void cp(char *dst, size_t n, const char *s)
{
	snprintf(dst, n, "%s", s ? s : "");
}

static int on_acquired(void *ud, const msb_ev_sandbox_acquired *e)
{
	ev.acquired++;
	ev.refusal_null = e->refusal == NULL;
	cp(ev.refusal, sizeof(ev.refusal), e->refusal);
	cp(ev.call, sizeof(ev.call), e->call);
	cp(ev.backend, sizeof(ev.backend), e->backend);
	cp(ev.instance, sizeof(ev.instance), e->instance_id);
	snprintf(ev.all_text, sizeof(ev.all_text), "%s|%s|%s|%s|%s", e->refusal ? e->refusal : "",
		 e->call ? e->call : "", e->backend ? e->backend : "",
		 e->instance_id ? e->instance_id : "", e->key ? e->key->scope : "");
	return 0;
}

static int on_disposed(void *ud, const msb_ev_sandbox_disposed *e)
{
	ev.disposed++;
	ev.disposed_all = e->disposed;
	cp(ev.origin, sizeof(ev.origin), e->origin);
	ev.n_results = e->n_results;
	for (size_t i = 0; i < e->n_results && i < 4; i++) {
		ev.results[i] = e->results[i];
		cp(ev.result_backend[i], sizeof(ev.result_backend[i]), e->results[i].backend);
	}
	return 0;
}

static int on_scope(void *ud, const msb_ev_scope_disposed *e)
{
	ev.scoped++;
	ev.scope_count = e->disposed;
	cp(ev.scope, sizeof(ev.scope), e->scope);
	return 0;
}

static int on_egress(void *ud, const msb_ev_egress_observed *e)
{
	ev.egress++;
	cp(ev.egress_host, sizeof(ev.egress_host), e->record->host);
	return 0;
}

static msb_router_options opts_at(msb_isolation floor)
{
	static msb_observer obs = MSB_OBSERVER_INIT;
	obs.sandbox_acquired = on_acquired;
	obs.sandbox_disposed = on_disposed;
	obs.scope_disposed = on_scope;
	obs.egress_observed = on_egress;
	msb_router_options o = MSB_ROUTER_OPTIONS_INIT;
	o.min_isolation = floor;
	o.observer = &obs;
	o.log = capture_log;
	return o;
}

static msb_router *router_ok(msb_backend **bs, size_t n, const msb_router_options *o)
{
	msb_router *r = NULL;
	msb_error *err = NULL;
	cr_assert_eq(msb_router_new(bs, n, o, &r, &err), 0, "%s", msb_error_message(err));
	return r;
}

static void refused_new(msb_backend **bs, size_t n, const msb_router_options *o, int code,
			const char *phrase)
{
	msb_router *r = NULL;
	msb_error *err = NULL;
	cr_assert_eq(msb_router_new(bs, n, o, &r, &err), code, "got %s: %s",
		     msb_code_name(msb_error_code(err)), msb_error_message(err));
	cr_assert_null(r);
	cr_assert(strstr(msb_error_message(err), phrase), "`%s` lacks `%s`", msb_error_message(err),
		  phrase);
	msb_error_free(err);
}

static void unref_all(msb_backend **bs, size_t n)
{
	for (size_t i = 0; i < n; i++)
		msb_backend_unref(bs[i]);
}

/* ---- 5.1-5.3: floor default and strict options --------------------------------- */

Test(router, default_floor_is_microvm_5_1)
{
	msb_backend *bs[] = {rec_new("docker", "container", BASIC, NULL)};
	refused_new(bs, 1, NULL, MSB_E_BACKEND_NOT_PERMITTED, "minimum-isolation floor 'microvm'");

	msb_router_options o = MSB_ROUTER_OPTIONS_INIT;
	cr_assert_eq(o.min_isolation, MSB_ISOLATION_MICROVM);
	o.min_isolation = MSB_ISOLATION_CONTAINER;
	msb_router *r = router_ok(bs, 1, &o);
	cr_assert(msb_router_enabled(r));
	msb_router_free(r);
	unref_all(bs, 1);
}

/* 5.2, 5.3, 1.29: options outside their enums are refused at construction,
 * even with no backends. (The string "process" is refused by the JSON loader,
 * test_router_json.c.) */
Test(router, options_outside_their_enums_refused_5_2_5_3)
{
	const msb_router_options base = MSB_ROUTER_OPTIONS_INIT;
	msb_router_options o;
	static const char *const cases[] = {
		"min_isolation",
		"selection",
		"denied_capabilities",
		"denied_identities",
		"min_isolation_scope",
		"min_cleanup",
		"reclaim timeout",
		"failed_reclaim_policy",
		"version",
		"min_isolation_scope",
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		o = base;
		switch (i) {
		case 0:
			o.min_isolation = (msb_isolation)7;
			break;
		case 1:
			o.selection = (msb_selection)2;
			break;
		case 2:
			o.denied_capabilities = 1u << 11; /* "netwrk" */
			break;
		case 3:
			o.denied_identities = 1u << 2; /* "admin" */
			break;
		case 4:
			o.min_isolation_scope = (msb_isolation_scope)3;
			break;
		case 5:
			o.min_cleanup = (msb_cleanup)3;
			break;
		case 6:
			o.reclaim.timeout = 0;
			break;
		case 7:
			o.reclaim.failed_reclaim_policy = (msb_failed_reclaim_policy)2;
			break;
		case 8:
			o.version = 0;
			break;
		case 9:
			o.min_isolation_scope = (msb_isolation_scope)0;
			break;
		}
		refused_new(NULL, 0, &o, MSB_E_VALUE, cases[i]);
	}
	o = base;
	o.reclaim.timeout = 1.0 / 0.0;
	refused_new(NULL, 0, &o, MSB_E_VALUE, "finite");
}

/* ---- 5.4, 6.14: no backends, a disabled router ----------------------------------- */

Test(router, no_backends_disabled_5_4)
{
	msb_router_options o = opts_at(MSB_ISOLATION_MICROVM);
	o.denied_capabilities = MSB_CAP_EXEC;
	msb_router *r = router_ok(NULL, 0, &o);
	cr_assert_not(msb_router_enabled(r));
	cr_assert_null(msb_router_backend(r));
	cr_assert_eq(msb_router_backend_count(r), 0);

	/* 6.14: preflight passes whatever the spec, even a denied one. */
	msb_spec *s = spec_default();
	cr_assert_eq(msb_router_ensure_can_serve(r, s, NULL), 0);

	msb_sandbox *sb = NULL;
	msb_error *err = NULL;
	cr_assert_eq(msb_router_acquire(r, &key, s, NULL, &sb, &err), MSB_E_NO_BACKEND);
	cr_assert_str_eq(msb_error_name(err), "NoSandboxBackend");
	cr_assert_str_eq(msb_error_message(err), "no sandbox backend is configured");
	msb_error_free(err);
	cr_assert_eq(ev.acquired, 1);
	cr_assert_str_eq(ev.refusal, "NoSandboxBackend");

	err = NULL;
	msb_backend *b = NULL;
	cr_assert_eq(msb_router_resolve(r, s, &b, NULL, &err), MSB_E_NO_BACKEND);
	cr_assert(strstr(msb_error_message(err), "no sandbox backend is configured"));
	msb_error_free(err);

	bool all = false;
	cr_assert_eq(msb_router_dispose(r, &key, &all, NULL), 0);
	cr_assert(all);
	msb_scope_purge p = {9, 9};
	cr_assert_eq(msb_router_dispose_scope(r, "s", "t", &p, NULL), 0);
	cr_assert_eq(p.disposed, 0);
	msb_spec_unref(s);
	msb_router_free(r);
	msb_router_free(NULL);
}

/* ---- 5.5, 5.6, 5.17: FIXED resolution and the accessors --------------------------- */

Test(router, fixed_resolves_selected_or_first_5_5_5_17)
{
	msb_backend *bs[] = {rec_new("a", "vm", BASIC, NULL), rec_new("b", "vm", BASIC, NULL)};
	msb_router_options o = opts_at(MSB_ISOLATION_MICROVM);
	msb_router *r = router_ok(bs, 2, &o);
	cr_assert_eq(msb_router_backend(r), bs[0]);
	cr_assert(msb_router_enabled(r));
	cr_assert_eq(msb_router_backend_count(r), 2);
	cr_assert_eq(msb_router_backend_at(r, 1), bs[1]);
	cr_assert_null(msb_router_backend_at(r, 2));
	cr_assert_eq(msb_router_options_get(r)->selection, MSB_SELECTION_FIXED);
	cr_assert_null(msb_router_options_get(r)->selected);
	msb_router_free(r);

	char pin[] = "b";
	o.selected = pin;
	r = router_ok(bs, 2, &o);
	pin[0] = 'z'; /* the router keeps its own copy */
	cr_assert_eq(msb_router_backend(r), bs[1]);
	cr_assert_str_eq(msb_router_options_get(r)->selected, "b");
	msb_spec *s = spec_default();
	msb_backend *chosen = NULL;
	cr_assert_eq(msb_router_resolve(r, s, &chosen, NULL, NULL), 0);
	cr_assert_eq(chosen, bs[1]);
	msb_spec_unref(s);
	msb_router_free(r);
	unref_all(bs, 2);
}

Test(router, unknown_selected_lists_names_sorted_5_6)
{
	msb_backend *bs[] = {rec_new("b", "vm", BASIC, NULL), rec_new("a", "vm", BASIC, NULL)};
	msb_router_options o = MSB_ROUTER_OPTIONS_INIT;
	o.selected = "zzz";
	refused_new(bs, 2, &o, MSB_E_NO_BACKEND, "registered: a, b");
	refused_new(bs, 2, &o, MSB_E_NO_BACKEND, "'zzz'");
	unref_all(bs, 2);
}

/* ---- 5.7, 1.4, 4.13: FIXED floor at construction; refuse, never promote ----------- */

Test(router, fixed_below_floor_refused_never_promoted_5_7)
{
	msb_backend *bs[] = {rec_new("a", "container", BASIC, NULL),
			     rec_new("b", "microvm", BASIC, NULL)};
	msb_router_options o = MSB_ROUTER_OPTIONS_INIT;
	refused_new(bs, 2, &o, MSB_E_BACKEND_NOT_PERMITTED,
		    "sandbox backend 'a' declares isolation 'container', below the "
		    "minimum-isolation floor 'microvm'");
	refused_new(bs, 2, &o, MSB_E_BACKEND_NOT_PERMITTED,
		    "none < runtime < os_process < container < hardened_container < microvm < vm");
	unref_all(bs, 2);
}

/* 1.4: "process" is never a rung, not even the os_process one, whatever the floor. */
Test(router, process_is_not_a_rung_1_4)
{
	msb_backend *bs[] = {rec_new("legacy", "process", BASIC, NULL)};
	msb_router_options o = MSB_ROUTER_OPTIONS_INIT;
	o.min_isolation = MSB_ISOLATION_NONE;
	refused_new(bs, 1, &o, MSB_E_BACKEND_NOT_PERMITTED, "'process', which is not a rung");
	refused_new(bs, 1, &o, MSB_E_BACKEND_NOT_PERMITTED, "minimum-isolation floor 'none'");
	unref_all(bs, 1);
}

/* 4.13: a value outside the ladder is refused at resolution naming the ladder. */
Test(router, off_ladder_isolation_refused_4_13)
{
	const char *odd[] = {"hypervisor", "VM", ""};
	for (size_t i = 0; i < 3; i++) {
		msb_backend *bs[] = {rec_new("x", odd[i], BASIC, NULL)};
		msb_router_options o = MSB_ROUTER_OPTIONS_INIT;
		o.min_isolation = MSB_ISOLATION_NONE;
		refused_new(bs, 1, &o, MSB_E_BACKEND_NOT_PERMITTED, "not a rung");
		refused_new(bs, 1, &o, MSB_E_BACKEND_NOT_PERMITTED, "the ladder is none <");
		unref_all(bs, 1);
	}
}

/* FIXED judges only the resolved backend (23.10). */
Test(router, fixed_judges_only_the_resolved_backend_5_7)
{
	msb_backend *bs[] = {rec_new("good", "vm", BASIC, NULL),
			     rec_new("weak", "process", BASIC, NULL)};
	msb_router *r = router_ok(bs, 2, NULL);
	cr_assert_eq(msb_router_backend(r), bs[0]);
	msb_router_free(r);

	msb_router_options o = MSB_ROUTER_OPTIONS_INIT;
	o.selected = "weak";
	refused_new(bs, 2, &o, MSB_E_BACKEND_NOT_PERMITTED, "'weak'");
	unref_all(bs, 2);
}

/* 5.8: a spec the resolved backend cannot serve is refused; others never tried. */
Test(router, fixed_refusal_leaves_others_untouched_5_8)
{
	struct rec *ra, *rb;
	msb_backend *bs[] = {rec_new("a", "vm", BASIC, &ra), rec_new("b", "vm", WITH_OUT, &rb)};
	msb_router_options o = opts_at(MSB_ISOLATION_MICROVM);
	msb_router *r = router_ok(bs, 2, &o);
	msb_spec *s = spec_files_out();
	msb_sandbox *sb = NULL;
	msb_error *err = NULL;
	cr_assert_eq(msb_router_acquire(r, &key, s, NULL, &sb, &err),
		     MSB_E_CAPABILITY_NOT_SUPPORTED);
	cr_assert(strstr(msb_error_message(err), "sandbox backend 'a' does not support files_out"));
	cr_assert_null(strstr(msb_error_message(err), "'b'"));
	msb_error_free(err);
	cr_assert_eq(ra->acquires, 0);
	cr_assert_eq(rb->acquires, 0);
	msb_spec_unref(s);
	msb_router_free(r);
	unref_all(bs, 2);
}

/* 5.9, 23.8: selected and PER_SPEC together are a ValueError-kind refusal. */
Test(router, selected_with_per_spec_refused_5_9)
{
	msb_backend *bs[] = {rec_new("a", "vm", BASIC, NULL), rec_new("b", "vm", BASIC, NULL)};
	msb_router_options o = MSB_ROUTER_OPTIONS_INIT;
	o.selected = "b";
	o.selection = MSB_SELECTION_PER_SPEC;
	refused_new(bs, 2, &o, MSB_E_VALUE, "refused together");
	unref_all(bs, 2);
}

/* ---- 5.10, 5.11: PER_SPEC floor across registration, one warning ------------------- */

Test(router, per_spec_floor_judged_across_registration_5_10)
{
	struct rec *rc, *rm;
	msb_backend *bs[] = {rec_new("c", "container", BASIC, &rc),
			     rec_new("m", "microvm", BASIC, &rm)};
	msb_router_options o = opts_at(MSB_ISOLATION_MICROVM);
	o.selection = MSB_SELECTION_PER_SPEC;
	msb_router *r = router_ok(bs, 2, &o);
	cr_assert_null(msb_router_backend(r), "no one resolved backend under PER_SPEC");
	cr_assert(msb_router_enabled(r));

	/* The below-floor backend stays registered and is never routed to. */
	msb_spec *s = spec_default();
	msb_sandbox *sb = NULL;
	cr_assert_eq(msb_router_acquire(r, &key, s, NULL, &sb, NULL), 0);
	cr_assert_str_eq(msb_sandbox_backend_name(sb), "m");
	cr_assert_eq(rc->acquires, 0);
	msb_sandbox_free(sb);
	cr_assert_eq(msb_router_backend_count(r), 2);
	msb_spec_unref(s);
	msb_router_free(r);

	refused_new(bs, 1, &o, MSB_E_BACKEND_NOT_PERMITTED,
		    "no registered sandbox backend clears the minimum-isolation floor 'microvm'");
	refused_new(bs, 1, &o, MSB_E_BACKEND_NOT_PERMITTED, "sandbox backend 'c'");
	unref_all(bs, 2);
}

Test(router, per_spec_one_warning_naming_each_below_floor_5_11)
{
	msb_backend *bs[] = {rec_new("c", "container", BASIC, NULL),
			     rec_new("m", "microvm", BASIC, NULL),
			     rec_new("p", "process", BASIC, NULL)};
	msb_router_options o = opts_at(MSB_ISOLATION_MICROVM);
	o.selection = MSB_SELECTION_PER_SPEC;
	logs.n = 0;
	msb_router *r = router_ok(bs, 3, &o);
	cr_assert_eq(logs.n, 1, "exactly one record, got %d", logs.n);
	cr_assert_eq(logs.level[0], MSB_LOG_WARNING);
	cr_assert(strstr(logs.msg[0], "minimum-isolation floor 'microvm'"), "%s", logs.msg[0]);
	cr_assert(strstr(logs.msg[0], "'c' (container)"), "%s", logs.msg[0]);
	cr_assert(strstr(logs.msg[0], "'p' ('process' is not a rung)"), "%s", logs.msg[0]);
	cr_assert_null(strstr(logs.msg[0], "'m'"), "%s", logs.msg[0]);
	cr_assert_null(strstr(logs.msg[0], "unregister"));
	msb_router_free(r);

	/* Nothing below the floor: no warning. FIXED: never this warning. */
	logs.n = 0;
	r = router_ok(bs + 1, 1, &o);
	cr_assert_eq(logs.n, 0);
	msb_router_free(r);
	o.selection = MSB_SELECTION_FIXED;
	o.min_isolation = MSB_ISOLATION_CONTAINER;
	r = router_ok(bs, 3, &o);
	cr_assert_eq(logs.n, 0);
	msb_router_free(r);
	unref_all(bs, 3);
}

/* ---- 5.12, 5.13, 5.15: PER_SPEC routing ------------------------------------------------- */

Test(router, per_spec_first_registered_that_passes_5_12)
{
	struct rec *ra, *rb;
	msb_backend *bs[] = {rec_new("a", "vm", BASIC, &ra), rec_new("b", "vm", WITH_OUT, &rb)};
	msb_router_options o = opts_at(MSB_ISOLATION_MICROVM);
	o.selection = MSB_SELECTION_PER_SPEC;
	msb_router *r = router_ok(bs, 2, &o);
	msb_spec *plain = spec_default(), *out = spec_files_out();
	for (int i = 0; i < 100; i++) {
		msb_backend *chosen = NULL;
		cr_assert_eq(msb_router_resolve(r, plain, &chosen, NULL, NULL), 0);
		cr_assert_eq(chosen, bs[0]);
		cr_assert_eq(msb_router_resolve(r, out, &chosen, NULL, NULL), 0);
		cr_assert_eq(chosen, bs[1]);
	}
	msb_sandbox *sb = NULL;
	cr_assert_eq(msb_router_acquire(r, &key, out, NULL, &sb, NULL), 0);
	cr_assert_eq(ra->acquires, 0, "a refused, never called");
	cr_assert_eq(rb->acquires, 1);
	cr_assert_str_eq(ev.backend, "b");
	msb_sandbox_free(sb);
	msb_spec_unref(plain);
	msb_spec_unref(out);
	msb_router_free(r);
	unref_all(bs, 2);
}

/* 5.13, DESIGN 9.7: one refusal naming every backend with its reason; its code
 * is the first registered backend's refusal. */
Test(router, per_spec_refusal_names_every_backend_5_13)
{
	msb_backend *bs[] = {rec_new("a", "vm", BASIC, NULL), rec_new("b", "vm", BASIC, NULL)};
	msb_router_options o = opts_at(MSB_ISOLATION_MICROVM);
	o.selection = MSB_SELECTION_PER_SPEC;
	msb_router *r = router_ok(bs, 2, &o);
	msb_spec *s = spec_files_out();
	msb_error *err = NULL;
	cr_assert_eq(msb_router_ensure_can_serve(r, s, &err), MSB_E_CAPABILITY_NOT_SUPPORTED);
	const char *m = msb_error_message(err);
	cr_assert(strstr(m, "no registered sandbox backend serves the 'render' workload"), "%s", m);
	cr_assert(strstr(m, "sandbox backend 'a' does not support files_out"), "%s", m);
	cr_assert(strstr(m, "sandbox backend 'b' does not support files_out"), "%s", m);
	msb_error_free(err);
	msb_spec_unref(s);
	msb_router_free(r);
	unref_all(bs, 2);

	/* Mixed reasons: the code is the first backend's (egress), both named. */
	msb_declarations closed_only = MSB_DECLARATIONS_INIT;
	closed_only.egress_modes = MSB_EGRESS_CLOSED;
	msb_declarations no_egress = MSB_DECLARATIONS_INIT;
	msb_backend_info ia = {MSB_BACKEND_INFO_VERSION, "first", "vm", &no_egress};
	msb_backend_info ib = {MSB_BACKEND_INFO_VERSION, "second", "vm", &closed_only};
	msb_backend *mixed[2];
	cr_assert_eq(msb_declared_backend_new(&ia, &mixed[0], NULL), 0);
	cr_assert_eq(msb_declared_backend_new(&ib, &mixed[1], NULL), 0);
	r = router_ok(mixed, 2, &o);
	s = spec_files_out();
	err = NULL;
	cr_assert_eq(msb_router_ensure_can_serve(r, s, &err), MSB_E_CAPABILITY_NOT_SUPPORTED);
	msb_error_free(err);
	msb_spec_unref(s);
	s = spec_default();
	err = NULL;
	cr_assert_eq(msb_router_ensure_can_serve(r, s, &err), 0, "%s", msb_error_message(err));
	msb_spec_unref(s);
	/* Both lack an OS family: checked before egress, so that is each reason. */
	s = spec_json("{\"kind\": \"k\", \"requires_os_family\": \"posix\"}");
	err = NULL;
	cr_assert_eq(msb_router_ensure_can_serve(r, s, &err), MSB_E_OS_FAMILY_NOT_SUPPORTED);
	cr_assert(strstr(msb_error_message(err), "'first'"));
	cr_assert(strstr(msb_error_message(err), "'second'"));
	msb_error_free(err);
	msb_spec_unref(s);
	s = spec_json("{\"kind\": \"k\", \"egress\": \"allowlist\"}");
	err = NULL;
	cr_assert_eq(msb_router_ensure_can_serve(r, s, &err), MSB_E_EGRESS_NOT_ENFORCED);
	cr_assert(strstr(msb_error_message(err),
			 "'first' cannot enforce the 'allowlist' egress the "
			 "'k' workload runs in (it enforces nothing)"));
	cr_assert(strstr(msb_error_message(err),
			 "'second' cannot enforce the 'allowlist' egress the "
			 "'k' workload runs in (it enforces closed)"));
	msb_error_free(err);
	msb_spec_unref(s);
	msb_router_free(r);
	unref_all(mixed, 2);
}

/* DESIGN 9.7: with different refusal kinds, the code is the first backend's. */
Test(router, per_spec_aggregate_code_is_first_backends_9_7)
{
	msb_declarations d_scope = MSB_DECLARATIONS_INIT; /* refuses CALL on scope */
	d_scope.egress_modes = MSB_EGRESS_CLOSED;
	d_scope.os_families = MSB_OS_POSIX;
	msb_declarations d_os = MSB_DECLARATIONS_INIT; /* refuses posix on os family */
	d_os.egress_modes = MSB_EGRESS_CLOSED;
	d_os.isolation_scopes = MSB_SCOPE_CONVERSATION | MSB_SCOPE_CALL;
	msb_backend_info i1 = {MSB_BACKEND_INFO_VERSION, "one", "vm", &d_scope};
	msb_backend_info i2 = {MSB_BACKEND_INFO_VERSION, "two", "vm", &d_os};
	msb_backend *bs[2];
	cr_assert_eq(msb_declared_backend_new(&i1, &bs[0], NULL), 0);
	cr_assert_eq(msb_declared_backend_new(&i2, &bs[1], NULL), 0);
	msb_spec *s = spec_json("{\"kind\": \"k\", \"requires_os_family\": \"posix\", "
				"\"isolation_scope\": \"call\"}");
	msb_router_options o = MSB_ROUTER_OPTIONS_INIT;
	o.selection = MSB_SELECTION_PER_SPEC;

	msb_router *r = router_ok(bs, 2, &o);
	msb_error *err = NULL;
	cr_assert_eq(msb_router_ensure_can_serve(r, s, &err), MSB_E_SCOPE_NOT_ENFORCED);
	cr_assert(
		strstr(msb_error_message(err), "'one' cannot enforce the 'call' isolation scope"));
	cr_assert(strstr(msb_error_message(err), "'two' cannot hand out the 'posix' guest shape"));
	msb_error_free(err);
	msb_router_free(r);

	msb_backend *swapped[] = {bs[1], bs[0]};
	r = router_ok(swapped, 2, &o);
	err = NULL;
	cr_assert_eq(msb_router_ensure_can_serve(r, s, &err), MSB_E_OS_FAMILY_NOT_SUPPORTED);
	msb_error_free(err);
	msb_router_free(r);
	msb_spec_unref(s);
	unref_all(bs, 2);
}

/* 5.15: two kinds of one key on different backends; dispose asks both. */
Test(router, kinds_route_apart_dispose_asks_all_5_15)
{
	struct rec *ra, *rb;
	msb_backend *bs[] = {rec_new("a", "vm", BASIC, &ra), rec_new("b", "vm", WITH_OUT, &rb)};
	msb_router_options o = opts_at(MSB_ISOLATION_MICROVM);
	o.selection = MSB_SELECTION_PER_SPEC;
	msb_router *r = router_ok(bs, 2, &o);
	msb_spec *ka = spec_default(), *kb = spec_files_out();
	msb_sandbox *sa = NULL, *sb = NULL;
	cr_assert_eq(msb_router_acquire(r, &key, ka, NULL, &sa, NULL), 0);
	cr_assert_eq(msb_router_acquire(r, &key, kb, NULL, &sb, NULL), 0);
	cr_assert_str_eq(msb_sandbox_backend_name(sa), "a");
	cr_assert_str_eq(msb_sandbox_backend_name(sb), "b");
	bool all = false;
	cr_assert_eq(msb_router_dispose(r, &key, &all, NULL), 0);
	cr_assert(all);
	cr_assert_eq(ra->disposes, 1);
	cr_assert_eq(rb->disposes, 1);
	msb_sandbox_free(sa);
	msb_sandbox_free(sb);
	msb_spec_unref(ka);
	msb_spec_unref(kb);
	msb_router_free(r);
	unref_all(bs, 2);
}

Test(router, registration_refuses_null_and_duplicate_names)
{
	msb_backend *a = rec_new("a", "vm", BASIC, NULL);
	msb_backend *a2 = rec_new("a", "vm", BASIC, NULL);
	msb_backend *dup[] = {a, a2};
	refused_new(dup, 2, NULL, MSB_E_VALUE, "`a` is registered twice");
	msb_backend *with_null[] = {a, NULL};
	refused_new(with_null, 2, NULL, MSB_E_VALUE, "NULL");
	refused_new(NULL, 2, NULL, MSB_E_VALUE, "none given");
	msb_backend_unref(a);
	msb_backend_unref(a2);
}

/* ---- 7.1, 7.2, 6.13: acquire ----------------------------------------------------------- */

Test(router, acquire_served_records_event_7_1)
{
	struct rec *ra;
	msb_backend *bs[] = {rec_new("a", "vm", BASIC, &ra)};
	msb_router_options o = opts_at(MSB_ISOLATION_MICROVM);
	msb_router *r = router_ok(bs, 1, &o);
	msb_spec *s = spec_default();
	msb_acquire_options ao = MSB_ACQUIRE_OPTIONS_INIT;
	ao.call = "call-7";
	msb_sandbox *sb = NULL;
	logs.n = 0;
	cr_assert_eq(msb_router_acquire(r, &key, s, &ao, &sb, NULL), 0);
	cr_assert_not_null(sb);
	cr_assert_eq(ra->acquires, 1);
	cr_assert_eq(ev.acquired, 1);
	cr_assert(ev.refusal_null);
	cr_assert_str_eq(ev.call, "call-7");
	cr_assert_str_eq(ev.backend, "a");
	cr_assert_str_eq(ev.instance, "a/k");
	/* 6.13: no policy warning on the serve path. */
	cr_assert_eq(warnings(), 0);

	/* opts may be NULL: no call column. */
	msb_sandbox_free(sb);
	cr_assert_eq(msb_router_acquire(r, &key, s, NULL, &sb, NULL), 0);
	cr_assert_str_eq(ev.call, "");
	msb_sandbox_free(sb);
	msb_spec_unref(s);
	msb_router_free(r);
	unref_all(bs, 1);
}

/* 7.2: a failed acquire is recorded by the error's name, never its message. */
Test(router, acquire_failure_recorded_by_name_7_2)
{
	struct rec *ra;
	msb_backend *bs[] = {rec_new("a", "vm", BASIC, &ra)};
	ra->acquire_rc = MSB_E_RUNTIME;
	msb_router_options o = opts_at(MSB_ISOLATION_MICROVM);
	msb_router *r = router_ok(bs, 1, &o);
	msb_spec *s = spec_default();
	msb_sandbox *sb = NULL;
	msb_error *err = NULL;
	cr_assert_eq(msb_router_acquire(r, &key, s, NULL, &sb, &err), MSB_E_RUNTIME);
	cr_assert_null(sb);
	cr_assert_str_eq(msb_error_message(err), "secret-endpoint unreachable");
	msb_error_free(err);
	cr_assert_eq(ev.acquired, 1);
	cr_assert_str_eq(ev.refusal, "RuntimeError");
	cr_assert_null(strstr(ev.all_text, "secret-endpoint"), "%s", ev.all_text);
	cr_assert_str_eq(ev.backend, "", "no serving backend on a refusal");
	cr_assert_str_eq(ev.instance, "");
	msb_spec_unref(s);

	/* A policy refusal is recorded the same way, before the backend. */
	s = spec_json("{\"kind\": \"k\", \"egress\": \"unrestricted\"}");
	err = NULL;
	cr_assert_eq(msb_router_acquire(r, &key, s, NULL, &sb, &err), MSB_E_EGRESS_NOT_ENFORCED);
	msb_error_free(err);
	cr_assert_eq(ev.acquired, 2);
	cr_assert_str_eq(ev.refusal, "SandboxEgressNotEnforced");
	cr_assert_eq(ra->acquires, 1);
	msb_spec_unref(s);
	msb_router_free(r);
	unref_all(bs, 1);
}

/* 2.7, 6.11: at an effective call scope the key must carry the call id. */
Test(router, call_scope_needs_call_id_2_7)
{
	msb_declarations d = serving(BASIC);
	d.isolation_scopes = MSB_SCOPE_CONVERSATION | MSB_SCOPE_CALL;
	struct rec *r0 = calloc(1, sizeof(*r0));
	snprintf(r0->name, sizeof(r0->name), "c");
	r0->report_code = -1;
	pthread_mutex_init(&r0->lock, NULL);
	msb_backend_info info = {MSB_BACKEND_INFO_VERSION, "c", "vm", &d};
	msb_backend *b = NULL;
	cr_assert_eq(msb_backend_new(&rec_ops, &info, r0, &b, NULL), 0);
	msb_router_options o = opts_at(MSB_ISOLATION_MICROVM);
	o.min_isolation_scope = MSB_SCOPE_CALL;
	msb_router *r = router_ok(&b, 1, &o);
	msb_spec *s = spec_default();
	msb_sandbox *sb = NULL;
	msb_error *err = NULL;
	cr_assert_eq(msb_router_acquire(r, &key, s, NULL, &sb, &err), MSB_E_VALUE);
	cr_assert(strstr(msb_error_message(err), "call id"));
	msb_error_free(err);
	cr_assert_eq(r0->acquires, 0);
	msb_key ck = key;
	ck.call_id = "call-1";
	cr_assert_eq(msb_router_acquire(r, &ck, s, NULL, &sb, NULL), 0);
	cr_assert_eq(r0->acquires, 1);
	msb_sandbox_free(sb);
	msb_spec_unref(s);
	msb_router_free(r);
	msb_backend_unref(b);
}

Test(router, acquire_argument_errors)
{
	msb_backend *bs[] = {rec_new("a", "vm", BASIC, NULL)};
	msb_router *r = router_ok(bs, 1, NULL);
	msb_spec *s = spec_default();
	msb_sandbox *sb = NULL;
	msb_error *err = NULL;
	msb_key bad = {"s", "t", NULL, NULL};
	cr_assert_eq(msb_router_acquire(r, &bad, s, NULL, &sb, &err), MSB_E_VALUE);
	msb_error_free(err);
	err = NULL;
	cr_assert_eq(msb_router_acquire(r, &key, NULL, NULL, &sb, &err), MSB_E_VALUE);
	msb_error_free(err);
	msb_acquire_options ao = MSB_ACQUIRE_OPTIONS_INIT;
	ao.version = 9;
	err = NULL;
	cr_assert_eq(msb_router_acquire(r, &key, s, &ao, &sb, &err), MSB_E_VALUE);
	msb_error_free(err);

	/* A cancelled token stops the acquire before the backend is called. */
	msb_cancel *c = NULL;
	cr_assert_eq(msb_cancel_new(&c, NULL), 0);
	msb_cancel_trigger(c);
	ao = (msb_acquire_options)MSB_ACQUIRE_OPTIONS_INIT;
	ao.cancel = c;
	err = NULL;
	cr_assert_eq(msb_router_acquire(r, &key, s, &ao, &sb, &err), MSB_E_CANCELLED);
	msb_error_free(err);
	msb_cancel_free(c);
	msb_spec_unref(s);
	msb_router_free(r);
	unref_all(bs, 1);
}

/* ---- 7.3, 7.13, 7.16: dispose ------------------------------------------------------------- */

Test(router, dispose_asks_every_backend_even_if_one_raises_7_3)
{
	struct rec *ra, *rb;
	msb_backend *bs[] = {rec_new("a", "vm", BASIC, &ra), rec_new("b", "vm", BASIC, &rb)};
	ra->dispose_rc = MSB_E_RUNTIME;
	msb_router_options o = opts_at(MSB_ISOLATION_MICROVM);
	msb_router *r = router_ok(bs, 2, &o);
	logs.n = 0;
	bool all = true;
	msb_error *err = NULL;
	cr_assert_eq(msb_router_dispose(r, &key, &all, &err), 0, "7.16: never raised");
	cr_assert_null(err);
	cr_assert_not(all);
	cr_assert_eq(ra->disposes, 1);
	cr_assert_eq(rb->disposes, 1);
	cr_assert_eq(logs.n, 1);
	cr_assert_eq(logs.level[0], MSB_LOG_WARNING);
	cr_assert(strstr(logs.msg[0], "sandbox backend 'a' failed to dispose"), "%s", logs.msg[0]);
	cr_assert(strstr(logs.msg[0], "a dispose raised"), "%s", logs.msg[0]);

	cr_assert_eq(ev.disposed, 1);
	cr_assert_not(ev.disposed_all);
	cr_assert_str_eq(ev.origin, "host");
	cr_assert_eq(ev.n_results, 2);
	cr_assert_str_eq(ev.result_backend[0], "a");
	cr_assert(ev.results[0].failed);
	cr_assert_eq(ev.results[0].code, MSB_DISPOSAL_UNKNOWN);
	cr_assert_str_eq(ev.result_backend[1], "b");
	cr_assert_not(ev.results[1].failed);

	/* A reported DisposalFailure is carried with its code; the detail is logged. */
	ra->dispose_rc = 0;
	rb->report_code = MSB_DISPOSAL_REFUSED;
	logs.n = 0;
	cr_assert_eq(msb_router_dispose(r, &key, &all, NULL), 0);
	cr_assert_not(all);
	cr_assert_eq(ev.results[1].code, MSB_DISPOSAL_REFUSED);
	cr_assert(ev.results[1].failed);
	cr_assert_not(ev.results[0].failed);
	cr_assert_eq(logs.n, 1);
	cr_assert(strstr(logs.msg[0], "'b'"));
	cr_assert(strstr(logs.msg[0], "refused: still there"), "%s", logs.msg[0]);

	/* 7.13: a backend that reports nothing counts as success. */
	rb->report_code = -1;
	cr_assert_eq(msb_router_dispose(r, &key, &all, NULL), 0);
	cr_assert(all);
	cr_assert(ev.disposed_all);

	/* 7.16: argument errors do propagate. */
	err = NULL;
	cr_assert_eq(msb_router_dispose(r, NULL, &all, &err), MSB_E_VALUE);
	msb_error_free(err);

	/* ... and cancellation does. */
	ra->dispose_rc = MSB_E_CANCELLED;
	err = NULL;
	cr_assert_eq(msb_router_dispose(r, &key, &all, &err), MSB_E_CANCELLED);
	msb_error_free(err);
	msb_router_free(r);
	unref_all(bs, 2);
}

/* 7.4: the sum over every backend; each failure swallowed and logged once. */
Test(router, dispose_scope_sums_and_logs_7_4)
{
	struct rec *ra, *rb;
	msb_backend *bs[] = {rec_new("a", "vm", BASIC, &ra), rec_new("b", "vm", BASIC, &rb)};
	ra->scope_count = 2;
	rb->scope_rc = MSB_E_OS;
	msb_router_options o = opts_at(MSB_ISOLATION_MICROVM);
	msb_router *r = router_ok(bs, 2, &o);
	logs.n = 0;
	msb_scope_purge p = {0, 0};
	msb_error *err = NULL;
	cr_assert_eq(msb_router_dispose_scope(r, "tenant", "thread-1", &p, &err), 0);
	cr_assert_null(err);
	cr_assert_eq(p.disposed, 2);
	cr_assert_eq(ra->scopes, 1);
	cr_assert_eq(rb->scopes, 1);
	cr_assert_eq(warnings(), 1);
	cr_assert(strstr(logs.msg[0], "sandbox backend 'b' failed to dispose scope `tenant`"), "%s",
		  logs.msg[0]);
	cr_assert_eq(ev.scoped, 1);
	cr_assert_eq(ev.scope_count, 2);
	cr_assert_str_eq(ev.scope, "tenant");

	rb->scope_rc = 0;
	rb->scope_count = 5;
	cr_assert_eq(msb_router_dispose_scope(r, "tenant", "thread-1", &p, NULL), 0);
	cr_assert_eq(p.disposed, 7);

	err = NULL;
	cr_assert_eq(msb_router_dispose_scope(r, NULL, "t", &p, &err), MSB_E_VALUE);
	msb_error_free(err);
	rb->scope_rc = MSB_E_CANCELLED;
	err = NULL;
	cr_assert_eq(msb_router_dispose_scope(r, "tenant", "thread-1", &p, &err), MSB_E_CANCELLED);
	msb_error_free(err);
	msb_router_free(r);
	unref_all(bs, 2);
}

/* ---- 4.22: the egress reporter -----------------------------------------------------------------
 */

Test(router, egress_reporter_reaches_observer_4_22)
{
	struct rec *ra;
	msb_backend *bs[] = {rec_new("a", "vm", BASIC, &ra)};
	msb_router_options o = opts_at(MSB_ISOLATION_MICROVM);
	msb_router *r = router_ok(bs, 1, &o);
	cr_assert_eq(ra->reporters, 1, "handed once, at registration");
	msb_egress_record rec = {.decision = MSB_EGRESS_DENY, .host = "evil.example", .port = 443};
	ra->reporter.report(ra->reporter.userdata, &key, &rec);
	cr_assert_eq(ev.egress, 1);
	cr_assert_str_eq(ev.egress_host, "evil.example");
	msb_router_free(r);

	/* After the router goes, the backend holds a reporter that does nothing. */
	cr_assert_eq(ra->reporters, 2);
	ra->reporter.report(ra->reporter.userdata, &key, &rec);
	cr_assert_eq(ev.egress, 1);

	/* A router that fails to construct hands nothing over, so it cannot
	 * clobber the reporter another router gave the same backend. */
	r = router_ok(bs, 1, &o);
	cr_assert_eq(ra->reporters, 3);
	msb_router *bad = NULL;
	msb_error *err = NULL;
	msb_router_options below = o;
	below.min_isolation = MSB_ISOLATION_VM;
	struct rec *rw;
	msb_backend *weak[] = {rec_new("w", "container", BASIC, &rw), bs[0]};
	cr_assert_eq(msb_router_new(weak, 2, &below, &bad, &err), MSB_E_BACKEND_NOT_PERMITTED);
	msb_error_free(err);
	cr_assert_eq(ra->reporters, 3);
	cr_assert_eq(rw->reporters, 0);
	ra->reporter.report(ra->reporter.userdata, &key, &rec);
	cr_assert_eq(ev.egress, 2);
	msb_router_free(r);
	msb_backend_unref(weak[0]);
	unref_all(bs, 1);
}

/* ---- thread-safety ------------------------------------------------------------------------------
 */

struct worker {
	msb_router *r;
	msb_spec *plain, *out;
	int served;
};

static void *work(void *arg)
{
	struct worker *w = arg;
	for (int i = 0; i < 200; i++) {
		msb_backend *chosen = NULL;
		if (msb_router_resolve(w->r, (i & 1) ? w->out : w->plain, &chosen, NULL, NULL) != 0)
			return NULL;
		msb_sandbox *sb = NULL;
		if (msb_router_acquire(w->r, &key, w->plain, NULL, &sb, NULL) != 0)
			return NULL;
		msb_sandbox_free(sb);
		w->served++;
	}
	return NULL;
}

Test(router, many_threads_share_one_router)
{
	struct rec *ra, *rb;
	msb_backend *bs[] = {rec_new("a", "vm", BASIC, &ra), rec_new("b", "vm", WITH_OUT, &rb)};
	msb_router_options o = MSB_ROUTER_OPTIONS_INIT;
	o.selection = MSB_SELECTION_PER_SPEC;
	msb_router *r = router_ok(bs, 2, &o);
	msb_spec *plain = spec_default(), *out = spec_files_out();
	pthread_t t[8];
	struct worker w[8];
	for (int i = 0; i < 8; i++) {
		w[i] = (struct worker){r, plain, out, 0};
		pthread_create(&t[i], NULL, work, &w[i]);
	}
	int served = 0;
	for (int i = 0; i < 8; i++) {
		pthread_join(t[i], NULL);
		served += w[i].served;
	}
	cr_assert_eq(served, 1600);
	cr_assert_eq(ra->acquires, 1600);
	cr_assert_eq(rb->acquires, 0);
	msb_spec_unref(plain);
	msb_spec_unref(out);
	msb_router_free(r);
	unref_all(bs, 2);
}
