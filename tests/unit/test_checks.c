/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The checks (checklist 6.1-6.14, the silence rules 4.3-4.8 as behaviour,
 * DESIGN 9.4, 9.6) and the PER_SPEC equivalence property (5.14).
 *
 * Every refusal test asserts the code and the seed's phrase. 6.1 runs each
 * refusal through acquire with a recording backend and asserts it is never
 * called; 6.2 walks one spec that fails every check, fixing one check at a
 * time, and pins the order.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include <msb/msb.h>

/* ---- a recording backend: counts acquires, never serves --------------------- */

struct rec {
	int acquires;
};

static int rec_acquire(void *impl, const msb_key *key, const msb_spec *spec, msb_sandbox **out,
		       msb_error **err)
{
	((struct rec *)impl)->acquires++;
	return msb_error_set(err, MSB_E_RUNTIME, "recording backend reached");
}
static int rec_dispose(void *impl, const msb_key *key, const char *kind, const char *instance_id,
		       msb_disposal_failure **failure, msb_error **err)
{
	return 0;
}
static int rec_dispose_scope(void *impl, const char *scope, const char *thread_id,
			     msb_scope_purge *out, msb_error **err)
{
	return 0;
}
static void rec_set_reporter(void *impl, const msb_egress_reporter *reporter)
{
}
static void rec_free(void *impl)
{
	free(impl);
}
static const msb_backend_ops rec_ops = {
	.version = MSB_BACKEND_OPS_VERSION,
	.acquire = rec_acquire,
	.dispose = rec_dispose,
	.dispose_scope = rec_dispose_scope,
	.set_egress_reporter = rec_set_reporter,
	.free = rec_free,
};

/* A recording backend whose declarations are given as JSON (NULL = none). */
static msb_backend *backend(const char *name, const char *isolation, const char *decl_json,
			    struct rec **out)
{
	msb_declarations *d = NULL;
	msb_error *err = NULL;
	if (decl_json)
		cr_assert_eq(msb_declarations_from_json(decl_json, strlen(decl_json), &d, &err), 0,
			     "%s", msb_error_message(err));
	struct rec *r = calloc(1, sizeof(*r));
	msb_backend_info info = {MSB_BACKEND_INFO_VERSION, name, isolation, d};
	msb_backend *b = NULL;
	cr_assert_eq(msb_backend_new(&rec_ops, &info, r, &b, &err), 0, "%s",
		     msb_error_message(err));
	msb_declarations_free(d);
	if (out)
		*out = r;
	return b;
}

static msb_spec *spec_json(const char *json)
{
	msb_spec *s = NULL;
	msb_error *err = NULL;
	cr_assert_eq(msb_spec_from_json(json, strlen(json), &s, &err), 0, "%s: %s", json,
		     msb_error_message(err));
	return s;
}

static msb_router *router(msb_backend *b, const msb_router_options *o)
{
	msb_router *r = NULL;
	msb_error *err = NULL;
	cr_assert_eq(msb_router_new(&b, 1, o, &r, &err), 0, "%s", msb_error_message(err));
	return r;
}

static msb_router_options floor_at(msb_isolation floor)
{
	msb_router_options o = MSB_ROUTER_OPTIONS_INIT;
	o.min_isolation = floor;
	return o;
}

static const msb_key key = {"scope", "thread", "agent", "call-1"};

/* The refusal on both paths (6.1): same code, same message; never the backend. */
static void both_refuse(msb_router *r, struct rec *rec, const char *spec, int code,
			const char *phrase)
{
	msb_spec *s = spec_json(spec);
	msb_error *e1 = NULL, *e2 = NULL;
	int before = rec ? rec->acquires : 0;
	cr_assert_eq(msb_router_ensure_can_serve(r, s, &e1), code, "%s: got %s: %s", spec,
		     msb_code_name(msb_error_code(e1)), msb_error_message(e1));
	cr_assert(strstr(msb_error_message(e1), phrase), "`%s` lacks `%s`", msb_error_message(e1),
		  phrase);
	msb_sandbox *sb = NULL;
	cr_assert_eq(msb_router_acquire(r, &key, s, NULL, &sb, &e2), code);
	cr_assert_null(sb);
	cr_assert_str_eq(msb_error_message(e1), msb_error_message(e2));
	if (rec)
		cr_assert_eq(rec->acquires, before, "6.1: the backend was called on a refusal");
	msb_error_free(e1);
	msb_error_free(e2);
	msb_spec_unref(s);
}

static void serves(msb_router *r, const char *spec)
{
	msb_spec *s = spec_json(spec);
	msb_error *err = NULL;
	cr_assert_eq(msb_router_ensure_can_serve(r, s, &err), 0, "%s: %s", spec,
		     msb_error_message(err));
	msb_spec_unref(s);
}

#define ALL_EGRESS "\"egress_modes\": [\"unrestricted\", \"allowlist\", \"closed\"]"

/* ---- host denials ------------------------------------------------------------ */

/* 6.3: a posture stop no backend property softens. */
Test(router_checks, denied_capability_6_3)
{
	struct rec *rec;
	msb_backend *b = backend("b", "vm",
				 "{\"capabilities\": [\"exec\", \"files_in\", \"host_tools\"], "
				 "\"egress_modes\": [\"closed\"]}",
				 &rec);
	msb_router_options o = floor_at(MSB_ISOLATION_MICROVM);
	o.denied_capabilities = MSB_CAP_HOST_TOOLS | MSB_CAP_SNAPSHOT;
	msb_router *r = router(b, &o);
	both_refuse(r, rec,
		    "{\"kind\": \"k\", \"requires\": [\"exec\", \"files_in\", \"host_tools\"]}",
		    MSB_E_CAPABILITY_DENIED,
		    "the host denies the sandbox capabilities host_tools that the 'k' workload "
		    "requires");
	serves(r, "{\"kind\": \"k\"}");
	msb_router_free(r);
	msb_backend_unref(b);
}

/* 6.4 */
Test(router_checks, denied_identity_6_4)
{
	struct rec *rec;
	msb_backend *b = backend("b", "vm", "{\"egress_modes\": [\"closed\"]}", &rec);
	msb_router_options o = floor_at(MSB_ISOLATION_MICROVM);
	o.denied_identities = MSB_IDENTITY_USER;
	msb_router *r = router(b, &o);
	both_refuse(r, rec, "{\"kind\": \"k\", \"identities\": [\"user\"]}", MSB_E_IDENTITY_DENIED,
		    "the host denies the identities user that the 'k' workload acts with");
	both_refuse(r, rec, "{\"kind\": \"k\", \"identities\": [\"app\", \"user\"]}",
		    MSB_E_IDENTITY_DENIED, "identities user ");
	serves(r, "{\"kind\": \"k\", \"identities\": [\"app\"]}");
	msb_router_free(r);
	msb_backend_unref(b);
}

/* ---- check 1: the effective floor -------------------------------------------------- */

/* 6.5, 3.16: the stricter of the host's floor and the spec's. */
Test(router_checks, effective_floor_6_5)
{
	struct rec *rec;
	msb_backend *b = backend("docker", "container", "{\"egress_modes\": [\"closed\"]}", &rec);
	msb_router_options o = floor_at(MSB_ISOLATION_CONTAINER);
	msb_router *r = router(b, &o);
	/* The spec's own rung is the floor: it "requires at least" it, in the
	 * seed's words (issue 16). */
	both_refuse(r, rec, "{\"kind\": \"bicep\", \"min_isolation\": \"microvm\"}",
		    MSB_E_BACKEND_NOT_PERMITTED,
		    "sandbox backend 'docker' declares isolation 'container', below the "
		    "minimum-isolation floor 'microvm' the 'bicep' workload runs under: the "
		    "workload requires at least 'microvm' (the ladder is none < runtime < "
		    "os_process < container < hardened_container < microvm < vm)");
	/* A spec may raise the floor, never lower it. */
	serves(r, "{\"kind\": \"bicep\", \"min_isolation\": \"none\"}");
	serves(r, "{\"kind\": \"bicep\", \"min_isolation\": \"container\"}");
	serves(r, "{\"kind\": \"bicep\"}");
	msb_router_free(r);
	msb_backend_unref(b);
}

/* ---- check 2: capabilities and method tokens ------------------------------------------- */

/* 6.6 */
Test(router_checks, capability_match_6_6)
{
	struct rec *rec;
	msb_backend *b = backend("b", "vm", "{\"egress_modes\": [\"closed\"]}", &rec);
	msb_router *r = router(b, NULL);
	both_refuse(r, rec,
		    "{\"kind\": \"render\", \"requires\": [\"exec\", \"files_in\", \"files_out\"]}",
		    MSB_E_CAPABILITY_NOT_SUPPORTED,
		    "sandbox backend 'b' does not support files_out, which the 'render' workload "
		    "requires (it declares exec, files_in)");
	msb_router_free(r);
	msb_backend_unref(b);
}

/* 4.3: silence reads as DEFAULT_CAPABILITIES, a functionality claim. */
Test(router_checks, silent_capabilities_are_default_4_3)
{
	msb_backend *b = backend("b", "vm", "{\"egress_modes\": [\"closed\"]}", NULL);
	msb_router *r = router(b, NULL);
	serves(r, "{\"kind\": \"k\"}");
	both_refuse(r, NULL, "{\"kind\": \"k\", \"requires\": [\"exec\", \"files_out\"]}",
		    MSB_E_CAPABILITY_NOT_SUPPORTED, "does not support files_out");
	msb_router_free(r);
	msb_backend_unref(b);
}

/* 6.7, DESIGN 9.4: every token of a method-scoped rule must be enforceable;
 * the refusal is SandboxCapabilityNotSupported naming the unsupported tokens. */
Test(router_checks, method_tokens_6_7)
{
	struct rec *rec;
	msb_backend *b = backend("proxy", "vm",
				 "{\"capabilities\": [\"exec\", \"files_in\", \"egress_methods\"], "
				 "\"egress_modes\": [\"allowlist\"], \"egress_method_tokens\": "
				 "[\"GET\"]}",
				 &rec);
	msb_router *r = router(b, NULL);
	both_refuse(
		r, rec,
		"{\"kind\": \"fetch\", \"egress\": \"allowlist\", \"egress_allow\": "
		"[{\"host\": \"api.example\", \"methods\": [\"GET\", \"POST\"]}, {\"host\": "
		"\"b.example\", \"methods\": [\"POST\", \"PUT\"]}]}",
		MSB_E_CAPABILITY_NOT_SUPPORTED,
		"sandbox backend 'proxy' cannot enforce the egress method tokens POST, PUT that "
		"the 'fetch' workload's allowlist names (it enforces GET)");
	serves(r, "{\"kind\": \"fetch\", \"egress\": \"allowlist\", \"egress_allow\": "
		  "[{\"host\": \"api.example\", \"methods\": [\"GET\"]}, \"plain.example\"]}");
	msb_router_free(r);
	msb_backend_unref(b);

	/* "*" enforces every token. */
	b = backend("all", "vm",
		    "{\"capabilities\": [\"exec\", \"files_in\", \"egress_methods\"], "
		    "\"egress_modes\": [\"allowlist\"], \"egress_method_tokens\": \"*\"}",
		    NULL);
	r = router(b, NULL);
	serves(r, "{\"kind\": \"dav\", \"egress\": \"allowlist\", \"egress_allow\": "
		  "[{\"host\": \"h\", \"methods\": [\"PROPFIND\"]}]}");
	msb_router_free(r);
	msb_backend_unref(b);
}

/* 4.8, 23.3: declaring EGRESS_METHODS without tokens serves no method-scoped
 * rule; not declaring EGRESS_METHODS fails the capability match first. */
Test(router_checks, method_tokens_silence_4_8)
{
	struct rec *rec;
	msb_backend *b = backend("p", "vm",
				 "{\"capabilities\": [\"exec\", \"files_in\", \"egress_methods\"], "
				 "\"egress_modes\": [\"allowlist\"]}",
				 &rec);
	msb_router *r = router(b, NULL);
	const char *spec = "{\"kind\": \"k\", \"egress\": \"allowlist\", \"egress_allow\": "
			   "[{\"host\": \"h\", \"methods\": [\"GET\"]}]}";
	both_refuse(r, rec, spec, MSB_E_CAPABILITY_NOT_SUPPORTED,
		    "cannot enforce the egress method tokens GET that the 'k' workload's "
		    "allowlist names (it enforces no method token)");
	serves(r, "{\"kind\": \"k\", \"egress\": \"allowlist\", \"egress_allow\": [\"h\"]}");
	msb_router_free(r);
	msb_backend_unref(b);

	b = backend("q", "vm",
		    "{\"egress_modes\": [\"allowlist\"], \"egress_method_tokens\": \"*\"}", &rec);
	r = router(b, NULL);
	both_refuse(r, rec, spec, MSB_E_CAPABILITY_NOT_SUPPORTED,
		    "does not support egress_methods, which the 'k' workload requires");
	msb_router_free(r);
	msb_backend_unref(b);
}

/* ---- check 4: guest shape ---------------------------------------------------------------- */

/* 6.8, 4.6, 3.24 */
Test(router_checks, os_family_6_8_4_6)
{
	struct rec *rec;
	msb_backend *b =
		backend("linux", "vm",
			"{\"egress_modes\": [\"closed\"], \"os_families\": [\"posix\"]}", &rec);
	msb_router *r = router(b, NULL);
	both_refuse(r, rec, "{\"kind\": \"ps\", \"requires_os_family\": \"windows\"}",
		    MSB_E_OS_FAMILY_NOT_SUPPORTED,
		    "sandbox backend 'linux' cannot hand out the 'windows' guest shape the 'ps' "
		    "workload is written for (it declares posix)");
	serves(r, "{\"kind\": \"sh\", \"requires_os_family\": \"posix\"}");
	serves(r, "{\"kind\": \"any\"}");
	msb_router_free(r);
	msb_backend_unref(b);

	/* Silence is the absence of an answer: refuses a spec that asks only. */
	b = backend("silent", "vm", "{\"egress_modes\": [\"closed\"]}", &rec);
	r = router(b, NULL);
	both_refuse(r, rec, "{\"kind\": \"sh\", \"requires_os_family\": \"posix\"}",
		    MSB_E_OS_FAMILY_NOT_SUPPORTED,
		    "sandbox backend 'silent' cannot hand out the 'posix' guest shape the 'sh' "
		    "workload is written for: it offers no guest whose shape it states (it "
		    "declares nothing)");
	serves(r, "{\"kind\": \"any\"}");
	/* 3.18: work_dir is never judged against the family. */
	serves(r, "{\"kind\": \"any\", \"work_dir\": \"C:/agent/work\"}");
	msb_router_free(r);
	msb_backend_unref(b);
}

/* ---- check 5: transfer ceilings ------------------------------------------------------------ */

/* 6.9: names direction, ask and ceiling; refused, never clamped. */
Test(router_checks, transfer_ceilings_6_9)
{
	struct rec *rec;
	msb_backend *b = backend("b", "vm",
				 "{\"egress_modes\": [\"closed\"], \"limits\": {\"files_out\": "
				 "{\"max_total_bytes\": 16777216}}}",
				 &rec);
	msb_router *r = router(b, NULL);
	const char *ask =
		"{\"kind\": \"diagram\", \"files_out\": {\"max_bytes_per_file\": 8388608, "
		"\"max_total_bytes\": 33554432, \"max_files\": 4}}";
	both_refuse(r, rec, ask, MSB_E_TRANSFER_LIMITS_NOT_PERMITTED,
		    "sandbox backend 'b' cannot permit the files_out transfer limits the 'diagram' "
		    "workload asks: ask {max_bytes_per_file 8388608, max_total_bytes 33554432, "
		    "max_files 4} is above the ceiling {max_bytes_per_file 8388608, "
		    "max_total_bytes 16777216, max_files 64} on max_total_bytes (refused, never "
		    "clamped)");
	/* Not clamped: the spec is unchanged. */
	msb_spec *s = spec_json(ask);
	cr_assert_eq(msb_spec_files_out(s).max_total_bytes, 33554432);
	msb_spec_unref(s);
	serves(r, "{\"kind\": \"diagram\", \"files_out\": {\"max_total_bytes\": 16777216}}");

	/* files_in is judged too, and first. */
	both_refuse(r, rec,
		    "{\"kind\": \"k\", \"files_in\": {\"max_files\": 65}, \"files_out\": "
		    "{\"max_total_bytes\": 33554432}}",
		    MSB_E_TRANSFER_LIMITS_NOT_PERMITTED, "the files_in transfer limits");
	msb_router_free(r);
	msb_backend_unref(b);
}

/* 4.4: an undeclared ceiling is the default ceiling, and a bigger ask refused. */
Test(router_checks, silent_limits_are_default_4_4)
{
	msb_backend *b = backend("b", "vm", "{\"egress_modes\": [\"closed\"]}", NULL);
	msb_router *r = router(b, NULL);
	both_refuse(r, NULL, "{\"kind\": \"k\", \"files_out\": {\"max_files\": 65}}",
		    MSB_E_TRANSFER_LIMITS_NOT_PERMITTED, "on max_files (refused, never clamped)");
	serves(r, "{\"kind\": \"k\", \"files_out\": {\"max_files\": 64}}");
	msb_router_free(r);
	msb_backend_unref(b);
}

/* ---- check 3: egress ----------------------------------------------------------------------- */

/* 6.10, the 0.19 note: exact membership, refused in either direction, in the
 * seed's own words. */
Test(router_checks, egress_exact_membership_6_10)
{
	struct rec *rec;
	msb_backend *b = backend("docker", "container", "{\"egress_modes\": [\"closed\"]}", &rec);
	msb_router_options o = floor_at(MSB_ISOLATION_CONTAINER);
	msb_router *r = router(b, &o);
	both_refuse(r, rec, "{\"kind\": \"bicep\", \"egress\": \"allowlist\"}",
		    MSB_E_EGRESS_NOT_ENFORCED,
		    "sandbox backend 'docker' cannot enforce the 'allowlist' egress the 'bicep' "
		    "workload runs in (it enforces closed)");
	both_refuse(r, rec, "{\"kind\": \"bicep\", \"egress\": \"unrestricted\"}",
		    MSB_E_EGRESS_NOT_ENFORCED, "cannot enforce the 'unrestricted' egress");
	serves(r, "{\"kind\": \"bicep\"}");
	msb_router_free(r);
	msb_backend_unref(b);

	/* Confining more is refused too. */
	b = backend("proxy", "vm", "{\"egress_modes\": [\"allowlist\"]}", &rec);
	r = router(b, NULL);
	both_refuse(r, rec, "{\"kind\": \"k\", \"egress\": \"closed\"}", MSB_E_EGRESS_NOT_ENFORCED,
		    "cannot enforce the 'closed' egress the 'k' workload runs in (it enforces "
		    "allowlist)");
	msb_router_free(r);
	msb_backend_unref(b);

	b = backend("both", "vm", "{\"egress_modes\": [\"allowlist\", \"closed\"]}", NULL);
	r = router(b, NULL);
	serves(r, "{\"kind\": \"k\", \"egress\": \"closed\"}");
	serves(r, "{\"kind\": \"k\", \"egress\": \"allowlist\", \"egress_allow\": [\"h\"]}");
	msb_router_free(r);
	msb_backend_unref(b);
}

/* 4.5: a backend declaring no mode enforces nothing; even CLOSED is refused. */
Test(router_checks, silent_egress_enforces_nothing_4_5)
{
	struct rec *rec;
	msb_backend *b = backend("bare", "vm", NULL, &rec);
	msb_router *r = router(b, NULL);
	both_refuse(r, rec, "{\"kind\": \"k\"}", MSB_E_EGRESS_NOT_ENFORCED,
		    "sandbox backend 'bare' cannot enforce the 'closed' egress the 'k' workload "
		    "runs in (it enforces nothing)");
	msb_router_free(r);
	msb_backend_unref(b);
}

/* 1.25 (as DESIGN 4 amends it): plain strings spelling a member match it. */
Test(router_checks, string_declarations_match_members_1_25)
{
	msb_backend *b = backend("s", "vm", "{\"egress_modes\": [\"closed\"]}", NULL);
	msb_router *r = router(b, NULL);
	serves(r, "{\"kind\": \"k\", \"egress\": \"closed\"}");
	msb_router_free(r);
	msb_backend_unref(b);
}

/* ---- check 6: isolation scope -----------------------------------------------------------------
 */

/* 6.11: effective scope = stricter of spec and host; a backend must not answer
 * a per-call workload by sharing. */
Test(router_checks, isolation_scope_6_11)
{
	struct rec *rec;
	msb_backend *b = backend("shared", "vm", "{\"egress_modes\": [\"closed\"]}", &rec);
	msb_router_options o = floor_at(MSB_ISOLATION_MICROVM);
	o.min_isolation_scope = MSB_SCOPE_CALL;
	msb_router *r = router(b, &o);
	both_refuse(r, rec, "{\"kind\": \"k\", \"isolation_scope\": \"conversation\"}",
		    MSB_E_SCOPE_NOT_ENFORCED,
		    "sandbox backend 'shared' cannot enforce the 'call' isolation scope the 'k' "
		    "workload runs in, raised by the host's min_isolation_scope (it serves "
		    "conversation)");
	msb_router_free(r);
	msb_backend_unref(b);

	b = backend("percall", "vm",
		    "{\"egress_modes\": [\"closed\"], \"isolation_scopes\": [\"conversation\", "
		    "\"call\"]}",
		    NULL);
	r = router(b, &o);
	msb_spec *s = spec_json("{\"kind\": \"k\"}");
	msb_backend *chosen = NULL;
	msb_isolation_scope eff = MSB_SCOPE_CONVERSATION;
	cr_assert_eq(msb_router_resolve(r, s, &chosen, &eff, NULL), 0);
	cr_assert_eq(chosen, b);
	cr_assert_eq(eff, MSB_SCOPE_CALL);
	msb_spec_unref(s);
	msb_router_free(r);

	/* Without a host floor the spec's own scope stands. */
	r = router(b, NULL);
	s = spec_json("{\"kind\": \"k\"}");
	cr_assert_eq(msb_router_resolve(r, s, NULL, &eff, NULL), 0);
	cr_assert_eq(eff, MSB_SCOPE_CONVERSATION);
	msb_spec_unref(s);
	msb_router_free(r);
	msb_backend_unref(b);
}

/* 4.7: silence reads as {conversation}. */
Test(router_checks, silent_scopes_are_conversation_4_7)
{
	struct rec *rec;
	msb_backend *b = backend("b", "vm", "{\"egress_modes\": [\"closed\"]}", &rec);
	msb_router *r = router(b, NULL);
	both_refuse(r, rec, "{\"kind\": \"k\", \"isolation_scope\": \"call\"}",
		    MSB_E_SCOPE_NOT_ENFORCED,
		    "cannot enforce the 'call' isolation scope the 'k' workload runs in (it serves "
		    "conversation)");
	serves(r, "{\"kind\": \"k\", \"isolation_scope\": \"conversation\"}");
	msb_router_free(r);
	msb_backend_unref(b);
}

/* ---- 6.1, 6.2: the same refusals on both paths, in a fixed order -------------------------------
 */

/*
 * One spec failing every check. Stage i fixes the first i failures; each stage
 * must report exactly the next check in DESIGN 9.6's order, on ensure_can_serve
 * and acquire alike, FIXED and PER_SPEC alike, with the backend never called.
 */
static char *staged_spec(int stage)
{
	char *s = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&s, &n);
	fprintf(f, "{\"kind\": \"k\", \"requires\": [\"exec\", \"files_in\"%s%s]",
		stage < 1 ? ", \"host_tools\"" : "", stage < 4 ? ", \"run_code\"" : "");
	if (stage < 2)
		fprintf(f, ", \"identities\": [\"user\"]");
	if (stage < 3)
		fprintf(f, ", \"min_isolation\": \"microvm\"");
	if (stage < 8)
		fprintf(f,
			", \"egress\": \"allowlist\", \"egress_allow\": [{\"host\": \"h\", "
			"\"methods\": [\"%s\"]}]",
			stage < 5 ? "POST" : "GET");
	if (stage < 6)
		fprintf(f, ", \"requires_os_family\": \"posix\"");
	fprintf(f, ", \"files_out\": {\"max_files\": %d}", stage < 7 ? 64 : 4);
	if (stage < 9)
		fprintf(f, ", \"isolation_scope\": \"call\"");
	fprintf(f, "}");
	fclose(f);
	return s;
}

Test(router_checks, order_is_fixed_and_both_paths_agree_6_1_6_2)
{
	static const struct {
		int code;
		const char *phrase;
	} expected[] = {
		{MSB_E_CAPABILITY_DENIED, "denies the sandbox capabilities host_tools"},
		{MSB_E_IDENTITY_DENIED, "denies the identities user"},
		{MSB_E_BACKEND_NOT_PERMITTED, "minimum-isolation floor 'microvm'"},
		{MSB_E_CAPABILITY_NOT_SUPPORTED, "does not support run_code"},
		{MSB_E_CAPABILITY_NOT_SUPPORTED, "cannot enforce the egress method tokens POST"},
		{MSB_E_OS_FAMILY_NOT_SUPPORTED, "the 'posix' guest shape"},
		{MSB_E_TRANSFER_LIMITS_NOT_PERMITTED, "the files_out transfer limits"},
		{MSB_E_EGRESS_NOT_ENFORCED, "cannot enforce the 'allowlist' egress"},
		{MSB_E_SCOPE_NOT_ENFORCED, "cannot enforce the 'call' isolation scope"},
	};
	const char *decl = "{\"capabilities\": [\"exec\", \"files_in\", \"host_tools\", "
			   "\"egress_methods\"], \"egress_method_tokens\": [\"GET\"], "
			   "\"egress_modes\": [\"closed\"], \"limits\": {\"files_out\": "
			   "{\"max_files\": 4}}}";
	for (int sel = 0; sel < 2; sel++) {
		struct rec *rec;
		msb_backend *b = backend("b", "container", decl, &rec);
		msb_router_options o = floor_at(MSB_ISOLATION_CONTAINER);
		o.denied_capabilities = MSB_CAP_HOST_TOOLS;
		o.denied_identities = MSB_IDENTITY_USER;
		o.selection = sel ? MSB_SELECTION_PER_SPEC : MSB_SELECTION_FIXED;
		msb_router *r = router(b, &o);
		for (int stage = 0; stage < 9; stage++) {
			char *spec = staged_spec(stage);
			both_refuse(r, rec, spec, expected[stage].code, expected[stage].phrase);
			free(spec);
		}
		char *spec = staged_spec(9);
		serves(r, spec);
		free(spec);
		cr_assert_eq(rec->acquires, 0);
		msb_router_free(r);
		msb_backend_unref(b);
	}
}

/* 6.2: the checklist's two examples, verbatim. */
Test(router_checks, order_examples_6_2)
{
	msb_backend *b = backend("b", "container",
				 "{\"capabilities\": [\"exec\", \"files_in\", \"host_tools\"], "
				 "\"egress_modes\": [\"closed\"]}",
				 NULL);
	msb_router_options o = floor_at(MSB_ISOLATION_CONTAINER);
	o.denied_capabilities = MSB_CAP_HOST_TOOLS;
	msb_router *r = router(b, &o);
	/* Denied capability AND a floor above the backend's rung: the denial. */
	both_refuse(r, NULL,
		    "{\"kind\": \"k\", \"requires\": [\"exec\", \"files_in\", \"host_tools\"], "
		    "\"min_isolation\": \"microvm\"}",
		    MSB_E_CAPABILITY_DENIED, "host_tools");
	/* Capability AND egress: the capability. */
	both_refuse(r, NULL,
		    "{\"kind\": \"k\", \"requires\": [\"exec\", \"files_out\"], \"egress\": "
		    "\"unrestricted\"}",
		    MSB_E_CAPABILITY_NOT_SUPPORTED, "files_out");
	msb_router_free(r);
	msb_backend_unref(b);
}

/* 6.14: with nothing configured, preflight is silent. */
Test(router_checks, disabled_router_preflight_silent_6_14)
{
	msb_router *r = NULL;
	cr_assert_eq(msb_router_new(NULL, 0, NULL, &r, NULL), 0);
	msb_spec *s = spec_json("{\"kind\": \"k\", \"egress\": \"unrestricted\", "
				"\"isolation_scope\": \"call\", \"min_isolation\": \"vm\"}");
	cr_assert_eq(msb_router_ensure_can_serve(r, s, NULL), 0);
	msb_spec_unref(s);
	msb_error *err = NULL;
	cr_assert_eq(msb_router_ensure_can_serve(r, NULL, &err), MSB_E_VALUE);
	msb_error_free(err);
	msb_router_free(r);
}

/* ---- 5.14: PER_SPEC never moves what FIXED serves
 * ------------------------------------------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint32_t rnd(uint32_t n)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (uint32_t)(rng_state % n);
}

static msb_backend *random_backend(int i)
{
	static const msb_capset caps[] = {
		MSB_CAP_EXEC | MSB_CAP_FILES_IN,
		MSB_CAP_EXEC | MSB_CAP_FILES_IN | MSB_CAP_FILES_OUT,
		MSB_CAP_EXEC | MSB_CAP_FILES_IN | MSB_CAP_EGRESS_METHODS,
		MSB_CAP_EXEC | MSB_CAP_FILES_IN | MSB_CAP_FILES_OUT | MSB_CAP_RUN_CODE |
			MSB_CAP_EGRESS_METHODS,
	};
	static const char *const rungs[] = {"container", "hardened_container", "microvm", "vm",
					    "process"};
	static const char *const get[] = {"GET"};
	msb_declarations d = MSB_DECLARATIONS_INIT;
	d.capabilities = caps[rnd(4)];
	d.egress_modes = rnd(8);
	d.os_families = rnd(4);
	d.isolation_scopes = 1 + rnd(3);
	d.limits.files_out.max_files = (uint64_t[]){4, 64, 100}[rnd(3)];
	switch (rnd(3)) {
	case 0:
		break;
	case 1:
		d.egress_method_tokens = get;
		d.n_egress_method_tokens = 1;
		break;
	case 2:
		d.egress_method_tokens_all = true;
		break;
	}
	char name[16];
	snprintf(name, sizeof(name), "b%d", i);
	msb_backend_info info = {MSB_BACKEND_INFO_VERSION, name, rungs[rnd(5)], &d};
	msb_backend *b = NULL;
	cr_assert_eq(msb_declared_backend_new(&info, &b, NULL), 0);
	return b;
}

static msb_spec *random_spec(void)
{
	static const msb_capset reqs[] = {
		MSB_CAP_EXEC | MSB_CAP_FILES_IN,
		MSB_CAP_EXEC | MSB_CAP_FILES_IN | MSB_CAP_FILES_OUT,
		MSB_CAP_EXEC | MSB_CAP_RUN_CODE,
		MSB_CAP_EXEC,
	};
	static const msb_egress modes[] = {MSB_EGRESS_CLOSED, MSB_EGRESS_ALLOWLIST,
					   MSB_EGRESS_UNRESTRICTED};
	msb_spec_builder *b = msb_spec_builder_new(rnd(2) ? "alpha" : "beta");
	msb_spec_builder_set_requires(b, reqs[rnd(4)]);
	msb_egress mode = modes[rnd(3)];
	msb_spec_builder_set_egress(b, mode);
	if (mode == MSB_EGRESS_ALLOWLIST && rnd(2)) {
		static const char *const m[] = {"GET", "POST"};
		msb_spec_builder_add_egress_rule(b, "api.example", m, 1 + rnd(2));
	}
	if (rnd(3) == 0)
		msb_spec_builder_set_requires_os_family(b, rnd(2) ? MSB_OS_POSIX : MSB_OS_WINDOWS);
	if (rnd(3) == 0)
		msb_spec_builder_set_isolation_scope(b, MSB_SCOPE_CALL);
	if (rnd(3) == 0) {
		msb_transfer_limits l = MSB_DEFAULT_TRANSFER_LIMITS;
		l.max_files = rnd(2) ? 4 : 65;
		msb_spec_builder_set_files_out(b, l);
	}
	if (rnd(4) == 0)
		msb_spec_builder_set_min_isolation(b, (msb_isolation)(3 + rnd(4)));
	msb_spec *s = NULL;
	msb_error *err = NULL;
	cr_assert_eq(msb_spec_build(b, &s, &err), 0, "%s", msb_error_message(err));
	msb_spec_builder_free(b);
	return s;
}

Test(router_checks, per_spec_never_moves_what_fixed_serves_5_14)
{
	int served_fixed = 0, promoted = 0, refused_both = 0;
	for (int round = 0; round < 300; round++) {
		size_t n = 1 + rnd(4);
		msb_backend *bs[4];
		for (size_t i = 0; i < n; i++)
			bs[i] = random_backend((int)i);
		msb_router_options o = floor_at(rnd(2) ? MSB_ISOLATION_CONTAINER
						       : MSB_ISOLATION_HARDENED_CONTAINER);
		o.denied_capabilities = rnd(4) == 0 ? MSB_CAP_RUN_CODE : 0;
		msb_router *fixed = NULL, *per_spec = NULL;
		if (msb_router_new(bs, n, &o, &fixed, NULL) != 0) {
			/* backend[0] below the floor: FIXED serves nothing to compare. */
			for (size_t i = 0; i < n; i++)
				msb_backend_unref(bs[i]);
			continue;
		}
		o.selection = MSB_SELECTION_PER_SPEC;
		cr_assert_eq(msb_router_new(bs, n, &o, &per_spec, NULL), 0,
			     "PER_SPEC constructs whenever FIXED does");

		for (int k = 0; k < 20; k++) {
			msb_spec *s = random_spec();
			msb_error *ef = NULL, *ep = NULL;
			msb_backend *via_fixed = NULL, *via_per_spec = NULL;
			int rf = msb_router_resolve(fixed, s, &via_fixed, NULL, &ef);
			int rp = msb_router_resolve(per_spec, s, &via_per_spec, NULL, &ep);
			if (rf == 0) {
				/* Served under FIXED by backend[0]: PER_SPEC routes there too. */
				cr_assert_eq(via_fixed, bs[0]);
				cr_assert_eq(rp, 0, "%s", msb_error_message(ep));
				cr_assert_eq(via_per_spec, bs[0]);
				served_fixed++;
			} else if (rp == 0) {
				/* Only a refusal can become a served sandbox, elsewhere. */
				cr_assert_neq(via_per_spec, bs[0]);
				promoted++;
			} else {
				/* Both refuse: the aggregate carries backend[0]'s code. */
				cr_assert_eq(rp, rf, "%s vs %s", msb_error_message(ef),
					     msb_error_message(ep));
				refused_both++;
			}
			msb_error_free(ef);
			msb_error_free(ep);
			msb_spec_unref(s);
		}
		msb_router_free(fixed);
		msb_router_free(per_spec);
		for (size_t i = 0; i < n; i++)
			msb_backend_unref(bs[i]);
	}
	/* The property was exercised on every branch. */
	cr_assert_gt(served_fixed, 20, "served %d", served_fixed);
	cr_assert_gt(promoted, 20, "promoted %d", promoted);
	cr_assert_gt(refused_both, 20, "refused %d", refused_both);
}
