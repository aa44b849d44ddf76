/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The backend object (checklist 4.1, 4.9, 4.13, 24.8, 24.41): mandatory
 * slots, required name and isolation, deep-copied declarations, refcounting,
 * direct calls, and the declared-only backend.
 */
#include <criterion/criterion.h>
#include <string.h>

#include <msb/backend.h>

#include "inert_sandbox.h"

/* ---- a small recording backend ------------------------------------------- */

struct rec {
	int acquires;
	int disposes;
	int scopes;
	int *freed;
	int acquire_rc; /* non-zero: acquire fails with this, setting no error */
	int dispose_rc; /* non-zero: dispose "raises" with a message */
	bool report_failure;
};

static int rec_acquire(void *impl, const msb_key *key, const msb_spec *spec, msb_sandbox **out,
		       msb_error **err)
{
	struct rec *r = impl;
	r->acquires++;
	if (r->acquire_rc)
		return r->acquire_rc;
	return test_inert_sandbox_new("inst-1", "rec", out, err);
}

static int rec_dispose(void *impl, const msb_key *key, const char *kind, const char *instance_id,
		       msb_disposal_failure **failure, msb_error **err)
{
	struct rec *r = impl;
	r->disposes++;
	if (r->dispose_rc)
		return msb_error_set(err, r->dispose_rc, "rec dispose raised");
	if (r->report_failure)
		return msb_disposal_failure_new(MSB_DISPOSAL_REFUSED, "kept", failure, err);
	return 0;
}

static int rec_dispose_scope(void *impl, const char *scope, const char *thread_id,
			     msb_scope_purge *out, msb_error **err)
{
	struct rec *r = impl;
	r->scopes++;
	out->disposed = 3;
	out->undisposed = 1;
	return 0;
}

static void rec_set_reporter(void *impl, const msb_egress_reporter *reporter)
{
}

static void rec_free(void *impl)
{
	struct rec *r = impl;
	if (r->freed)
		(*r->freed)++;
}

static const msb_backend_ops rec_ops = {
	.version = MSB_BACKEND_OPS_VERSION,
	.acquire = rec_acquire,
	.dispose = rec_dispose,
	.dispose_scope = rec_dispose_scope,
	.set_egress_reporter = rec_set_reporter,
	.free = rec_free,
};

static msb_backend_info info_of(const char *name, const char *isolation, const msb_declarations *d)
{
	msb_backend_info info = {MSB_BACKEND_INFO_VERSION, name, isolation, d};
	return info;
}

static const msb_key key = {"scope", "thread", "agent", NULL};

static msb_spec *spec_k(void)
{
	msb_spec_builder *b = msb_spec_builder_new("k");
	msb_spec *s = NULL;
	cr_assert_eq(msb_spec_build(b, &s, NULL), 0);
	msb_spec_builder_free(b);
	return s;
}

static bool decl_eq(const msb_declarations *a, const msb_declarations *b)
{
	return a->version == b->version && a->capabilities == b->capabilities &&
	       memcmp(&a->limits, &b->limits, sizeof(a->limits)) == 0 &&
	       a->egress_modes == b->egress_modes && a->os_families == b->os_families &&
	       a->isolation_scopes == b->isolation_scopes &&
	       a->n_egress_method_tokens == b->n_egress_method_tokens &&
	       a->egress_method_tokens_all == b->egress_method_tokens_all &&
	       a->observes_egress == b->observes_egress;
}

/* ---- 4.1, 24.8: every slot mandatory; name and isolation required ---------- */

Test(backend, null_slot_refused_naming_it_4_1)
{
	static const char *const slots[] = {"acquire", "dispose", "dispose_scope",
					    "set_egress_reporter"};
	for (size_t i = 0; i < 4; i++) {
		msb_backend_ops ops = rec_ops;
		switch (i) {
		case 0:
			ops.acquire = NULL;
			break;
		case 1:
			ops.dispose = NULL;
			break;
		case 2:
			ops.dispose_scope = NULL;
			break;
		case 3:
			ops.set_egress_reporter = NULL;
			break;
		}
		int freed = 0;
		struct rec r = {.freed = &freed};
		msb_backend_info info = info_of("mine", "container", NULL);
		msb_backend *b = NULL;
		msb_error *err = NULL;
		cr_assert_eq(msb_backend_new(&ops, &info, &r, &b, &err), MSB_E_VALUE);
		cr_assert_null(b);
		cr_assert(strstr(msb_error_message(err), slots[i]), "%s", msb_error_message(err));
		cr_assert(strstr(msb_error_message(err), "`mine`"));
		cr_assert_eq(freed, 1, "impl released on failure");
		msb_error_free(err);
	}

	msb_backend_ops ops = rec_ops;
	ops.free = NULL;
	struct rec r = {0};
	msb_backend_info info = info_of("mine", "container", NULL);
	msb_backend *b = NULL;
	msb_error *err = NULL;
	cr_assert_eq(msb_backend_new(&ops, &info, &r, &b, &err), MSB_E_VALUE);
	cr_assert(strstr(msb_error_message(err), "`free`"));
	msb_error_free(err);

	err = NULL;
	cr_assert_eq(msb_backend_new(NULL, &info, NULL, &b, &err), MSB_E_VALUE);
	msb_error_free(err);

	ops = rec_ops;
	ops.version = 2;
	int freed = 0;
	r = (struct rec){.freed = &freed};
	err = NULL;
	cr_assert_eq(msb_backend_new(&ops, &info, &r, &b, &err), MSB_E_VALUE);
	cr_assert(strstr(msb_error_message(err), "version"));
	cr_assert_eq(freed, 1);
	msb_error_free(err);
}

Test(backend, name_required_4_1)
{
	int freed = 0;
	struct rec r = {.freed = &freed};
	msb_backend_info info = info_of(NULL, "container", NULL);
	msb_backend *b = NULL;
	msb_error *err = NULL;
	cr_assert_eq(msb_backend_new(&rec_ops, &info, &r, &b, &err), MSB_E_VALUE);
	cr_assert(strstr(msb_error_message(err), "name"));
	cr_assert_eq(freed, 1);
	msb_error_free(err);

	info = info_of("", "container", NULL);
	err = NULL;
	cr_assert_eq(msb_backend_new(&rec_ops, &info, &r, &b, &err), MSB_E_VALUE);
	msb_error_free(err);
}

/* 4.1: a backend missing `isolation` cannot be registered. */
Test(backend, isolation_required_4_1)
{
	int freed = 0;
	struct rec r = {.freed = &freed};
	msb_backend_info info = info_of("mine", NULL, NULL);
	msb_backend *b = NULL;
	msb_error *err = NULL;
	cr_assert_eq(msb_backend_new(&rec_ops, &info, &r, &b, &err), MSB_E_BACKEND_NOT_PERMITTED);
	cr_assert_str_eq(msb_error_name(err), "SandboxBackendNotPermitted");
	cr_assert(strstr(msb_error_message(err), "declares no isolation"));
	cr_assert(strstr(msb_error_message(err), "none < runtime < os_process"));
	cr_assert_eq(freed, 1);
	msb_error_free(err);
}

/* 4.13, 1.4: the spelling is kept unparsed; the router judges it. */
Test(backend, isolation_kept_as_declared_4_13)
{
	struct rec r = {0};
	msb_backend_info info = info_of("odd", "process", NULL);
	msb_backend *b = NULL;
	cr_assert_eq(msb_backend_new(&rec_ops, &info, &r, &b, NULL), 0);
	cr_assert_str_eq(msb_backend_name(b), "odd");
	cr_assert_str_eq(msb_backend_isolation(b), "process");
	msb_backend_unref(b);
}

/* 4.9: no declarations object reads as DEFAULT_BACKEND_DECLARATIONS. */
Test(backend, no_declarations_reads_default_4_9)
{
	struct rec r = {0};
	msb_backend_info info = info_of("bare", "container", NULL);
	msb_backend *b = NULL;
	cr_assert_eq(msb_backend_new(&rec_ops, &info, &r, &b, NULL), 0);
	const msb_declarations *d = msb_backend_declarations(b);
	cr_assert_not_null(d);
	cr_assert_neq((void *)d, (void *)&MSB_DEFAULT_BACKEND_DECLARATIONS);
	cr_assert(decl_eq(d, &MSB_DEFAULT_BACKEND_DECLARATIONS));
	msb_backend_unref(b);
}

Test(backend, declarations_deep_copied)
{
	char tok[] = "GET";
	const char *tokens[] = {tok};
	char name[] = "deep";
	char iso[] = "microvm";
	msb_declarations d = MSB_DECLARATIONS_INIT;
	d.egress_modes = MSB_EGRESS_CLOSED;
	d.egress_method_tokens = tokens;
	d.n_egress_method_tokens = 1;
	struct rec r = {0};
	msb_backend_info info = info_of(name, iso, &d);
	msb_backend *b = NULL;
	cr_assert_eq(msb_backend_new(&rec_ops, &info, &r, &b, NULL), 0);
	tok[0] = 'X';
	name[0] = 'X';
	iso[0] = 'X';
	d.egress_modes = 0;
	const msb_declarations *c = msb_backend_declarations(b);
	cr_assert_eq(c->egress_modes, MSB_EGRESS_CLOSED);
	cr_assert_str_eq(c->egress_method_tokens[0], "GET");
	cr_assert_str_eq(msb_backend_name(b), "deep");
	cr_assert_str_eq(msb_backend_isolation(b), "microvm");
	msb_backend_unref(b);
}

/* 24.6 (the non-set refusal's C counterpart): bits outside a set and bad
 * tokens are refused when the backend is made. */
Test(backend, declarations_validated_4_11)
{
	msb_declarations d = MSB_DECLARATIONS_INIT;
	d.egress_modes = 1u << 9;
	int freed = 0;
	struct rec r = {.freed = &freed};
	msb_backend_info info = info_of("bad", "container", &d);
	msb_backend *b = NULL;
	msb_error *err = NULL;
	cr_assert_eq(msb_backend_new(&rec_ops, &info, &r, &b, &err), MSB_E_VALUE);
	cr_assert(strstr(msb_error_message(err), "egress_modes"));
	cr_assert_eq(freed, 1);
	msb_error_free(err);

	const char *tokens[] = {"get"};
	d = (msb_declarations)MSB_DECLARATIONS_INIT;
	d.egress_method_tokens = tokens;
	d.n_egress_method_tokens = 1;
	err = NULL;
	cr_assert_eq(msb_backend_new(&rec_ops, &info, &r, &b, &err), MSB_E_VALUE);
	cr_assert(strstr(msb_error_message(err), "`get`"));
	msb_error_free(err);
}

Test(backend, refcount_frees_once)
{
	int freed = 0;
	struct rec r = {.freed = &freed};
	msb_backend_info info = info_of("rc", "vm", NULL);
	msb_backend *b = NULL;
	cr_assert_eq(msb_backend_new(&rec_ops, &info, &r, &b, NULL), 0);
	cr_assert_eq(msb_backend_ref(b), b);
	msb_backend_unref(b);
	cr_assert_eq(freed, 0);
	msb_backend_unref(b);
	cr_assert_eq(freed, 1);
	msb_backend_unref(NULL);
	cr_assert_null(msb_backend_ref(NULL));
}

/* ---- direct calls ------------------------------------------------------------ */

Test(backend, direct_calls_reach_the_ops)
{
	struct rec r = {0};
	msb_backend_info info = info_of("direct", "container", NULL);
	msb_backend *b = NULL;
	cr_assert_eq(msb_backend_new(&rec_ops, &info, &r, &b, NULL), 0);
	msb_spec *spec = spec_k();

	msb_sandbox *sb = NULL;
	cr_assert_eq(msb_backend_acquire(b, &key, spec, &sb, NULL), 0);
	cr_assert_eq(r.acquires, 1);
	cr_assert_str_eq(msb_sandbox_instance_id(sb), "inst-1");
	msb_sandbox_free(sb);

	msb_disposal_failure *f = (msb_disposal_failure *)1;
	cr_assert_eq(msb_backend_dispose(b, &key, NULL, NULL, &f, NULL), 0);
	cr_assert_null(f, "nothing reported");
	r.report_failure = true;
	cr_assert_eq(msb_backend_dispose(b, &key, "k", NULL, &f, NULL), 0);
	cr_assert_eq(f->code, MSB_DISPOSAL_REFUSED);
	cr_assert_str_eq(f->detail, "kept");
	msb_disposal_failure_free(f);
	r.report_failure = false;
	r.dispose_rc = MSB_E_RUNTIME;
	msb_error *err = NULL;
	cr_assert_eq(msb_backend_dispose(b, &key, NULL, NULL, &f, &err), MSB_E_RUNTIME);
	cr_assert_str_eq(msb_error_message(err), "rec dispose raised");
	msb_error_free(err);
	cr_assert_eq(r.disposes, 3);

	msb_scope_purge p = {0, 0};
	cr_assert_eq(msb_backend_dispose_scope(b, "scope", "thread", &p, NULL), 0);
	cr_assert_eq(p.disposed, 3);
	cr_assert_eq(p.undisposed, 1);

	/* A backend failing without an error still yields a message naming it. */
	r.acquire_rc = MSB_E_OS;
	err = NULL;
	sb = NULL;
	cr_assert_eq(msb_backend_acquire(b, &key, spec, &sb, &err), MSB_E_OS);
	cr_assert_null(sb);
	cr_assert(strstr(msb_error_message(err), "`direct`"), "%s", msb_error_message(err));
	msb_error_free(err);

	/* Argument errors. */
	msb_key bad = {"s", NULL, "a", NULL};
	err = NULL;
	cr_assert_eq(msb_backend_acquire(b, &bad, spec, &sb, &err), MSB_E_VALUE);
	msb_error_free(err);
	cr_assert_eq(r.acquires, 2, "an invalid key never reaches the backend");

	msb_spec_unref(spec);
	msb_backend_unref(b);
}

/* ---- the declared-only backend ------------------------------------------------ */

Test(backend, declared_backend_answers_policy_refuses_acquire)
{
	msb_declarations d = MSB_DECLARATIONS_INIT;
	d.egress_modes = MSB_EGRESS_CLOSED;
	msb_backend_info info = info_of("third-party", "hardened_container", &d);
	msb_backend *b = NULL;
	cr_assert_eq(msb_declared_backend_new(&info, &b, NULL), 0);
	cr_assert_str_eq(msb_backend_name(b), "third-party");
	cr_assert_str_eq(msb_backend_isolation(b), "hardened_container");
	cr_assert_eq(msb_backend_declarations(b)->egress_modes, MSB_EGRESS_CLOSED);

	msb_spec *spec = spec_k();
	msb_sandbox *sb = NULL;
	msb_error *err = NULL;
	cr_assert_eq(msb_backend_acquire(b, &key, spec, &sb, &err), MSB_E_NOT_IMPLEMENTED);
	cr_assert_null(sb);
	cr_assert_str_eq(msb_error_message(err),
			 "backend `third-party` only declares its policy (type `declared`); it "
			 "cannot acquire a sandbox");
	msb_error_free(err);

	msb_disposal_failure *f = (msb_disposal_failure *)1;
	cr_assert_eq(msb_backend_dispose(b, &key, NULL, NULL, &f, NULL), 0);
	cr_assert_null(f);
	msb_scope_purge p = {7, 7};
	cr_assert_eq(msb_backend_dispose_scope(b, "s", "t", &p, NULL), 0);
	cr_assert_eq(p.disposed, 0);
	cr_assert_eq(p.undisposed, 0);
	msb_spec_unref(spec);
	msb_backend_unref(b);

	info = info_of(NULL, "vm", NULL);
	err = NULL;
	cr_assert_eq(msb_declared_backend_new(&info, &b, &err), MSB_E_VALUE);
	msb_error_free(err);
	info = info_of("x", NULL, NULL);
	err = NULL;
	cr_assert_eq(msb_declared_backend_new(&info, &b, &err), MSB_E_BACKEND_NOT_PERMITTED);
	msb_error_free(err);
}
