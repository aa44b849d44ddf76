/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Host tools: the registry, declarations, identities, caps and the one door
 * (checklist 13.1-13.30, 17.2, 17.10, DESIGN 9.41). Test names carry the item.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>
#include <msb/msb.h>
#include <msb/testing.h>

#include "core/hosttools/hosttools_int.h"
#include "helpers.h"

/* ---- fixtures ------------------------------------------------------------------ */

struct body {
	int calls;
	char last_args[256];
	char last_user[64];
	const char *reply; /* JSON text to return; NULL = echo "ok" */
	int fail;	   /* non-zero: fail with this code */
};

static int body_fn(void *ud, const char *args, const char *user, char **result, msb_error **err)
{
	struct body *b = ud;
	b->calls++;
	snprintf(b->last_args, sizeof(b->last_args), "%s", args);
	snprintf(b->last_user, sizeof(b->last_user), "%s", user ? user : "");
	if (b->fail)
		return msb_error_set(err, b->fail, "db password hunter2 leaked");
	*result = strdup(b->reply ? b->reply : "\"ok\"");
	return 0;
}

static int add_fn(void *ud, const char *args, const char *user, char **result, msb_error **err)
{
	(void)ud;
	(void)user;
	(void)err;
	json_t *a = json_loads(args, 0, NULL);
	long long s = json_integer_value(json_object_get(a, "left")) +
		      json_integer_value(json_object_get(a, "right"));
	json_decref(a);
	char buf[32];
	snprintf(buf, sizeof(buf), "%lld", s);
	*result = strdup(buf);
	return 0;
}

#define ADD_SCHEMA                                                                                 \
	"{\"type\": \"object\", \"properties\": {\"left\": {\"type\": \"integer\"}, \"right\": "   \
	"{\"type\": \"integer\"}}, \"required\": [\"left\", \"right\"], "                          \
	"\"additionalProperties\": "                                                               \
	"false}"

static const msb_host_tool_decl pure = {MSB_HOST_TOOL_DECL_VERSION,
					MSB_LEG_NONE,
					MSB_INTEGRITY_UNTRUSTED,
					MSB_LEG_NONE,
					NULL,
					MSB_LEG_NONE,
					MSB_IDENTITY_APP};

static msb_host_tool_registry *registry(const msb_host_tool_registry_options *o)
{
	msb_host_tool_registry *r = NULL;
	msb_error *err = NULL;
	cr_assert_eq(msb_host_tool_registry_new(o, &r, &err), 0, "%s",
		     err ? msb_error_message(err) : "");
	return r;
}

static void reg_tool(msb_host_tool_registry *r, const char *name, const char *schema,
		     const msb_host_tool_decl *d, msb_host_tool_fn fn, void *ud)
{
	msb_host_tool t = MSB_HOST_TOOL_INIT;
	t.name = name;
	t.parameters = schema;
	t.decl = d;
	t.fn = fn;
	t.userdata = ud;
	msb_error *err = NULL;
	cr_assert_eq(msb_host_tool_registry_register(r, &t, &err), 0, "%s",
		     err ? msb_error_message(err) : "");
}

static msb_host_tool_run *new_run(msb_host_tool_registry *r)
{
	msb_host_tool_run *run = NULL;
	cr_assert_eq(msb_host_tool_run_new(r, NULL, "call-1", &run, NULL), 0);
	return run;
}

/* Call and return the result (asserting the door itself did not fail). */
static msb_host_tool_result call(msb_host_tool_run *run, const char *name, const char *args,
				 int64_t framing)
{
	msb_host_tool_result res = {NULL, NULL};
	msb_error *err = NULL;
	cr_assert_eq(msb_host_tool_run_call(run, name, args, framing, &res, &err), 0, "%s",
		     err ? msb_error_message(err) : "");
	cr_assert((res.value_json == NULL) != (res.refusal == NULL));
	return res;
}

static void assert_refusal(msb_host_tool_result res, const char *phrase)
{
	cr_assert_not_null(res.refusal, "expected a refusal, got value %s", res.value_json);
	cr_assert(strstr(res.refusal, phrase), "refusal `%s` lacks `%s`", res.refusal, phrase);
	msb_host_tool_result_clear(&res);
}

static void assert_value(msb_host_tool_result res, const char *json)
{
	cr_assert_not_null(res.value_json, "refused: %s", res.refusal);
	cr_assert_str_eq(res.value_json, json);
	msb_host_tool_result_clear(&res);
}

/* ---- 13.1-13.10 registry and registration ------------------------------------- */

Test(hosttools, empty_registry_13_1)
{
	msb_host_tool_registry *r = registry(NULL);
	char **names = msb_host_tool_registry_names(r);
	cr_assert_not_null(names);
	cr_assert_null(names[0]);
	msb_strv_free(names);
	msb_host_tool_run *run = new_run(r);
	assert_refusal(call(run, "anything", NULL, 0),
		       "Error: 'anything' is not a registered host tool");
	msb_host_tool_run_free(run);
	msb_host_tool_registry_unref(r);
}

static int notices;
static void count_notice(void *ud, msb_log_level lv, const char *comp, const char *msg)
{
	(void)ud;
	if (lv == MSB_LOG_WARNING && strcmp(comp, "hosttools") == 0 &&
	    strstr(msg, "MafSandboxHostToolsWarning"))
		notices++;
}

Test(hosttools, one_time_notice_13_2)
{
	msb_hosttools__notice_reset();
	notices = 0;
	msb_host_tool_registry_options o = MSB_HOST_TOOL_REGISTRY_OPTIONS_INIT;
	o.log = count_notice;
	msb_host_tool_registry *r = registry(&o);
	struct body b = {0};
	reg_tool(r, "a", NULL, &pure, body_fn, &b);
	reg_tool(r, "b", NULL, &pure, body_fn, &b);
	msb_host_tool_registry *r2 = registry(&o);
	reg_tool(r2, "a", NULL, &pure, body_fn, &b);
	cr_assert_eq(notices, 1, "one notice per process, got %d", notices);
	/* Suppressed: none at all, and registration still succeeds. */
	msb_hosttools__notice_reset();
	msb_host_tools_suppress_notice();
	notices = 0;
	reg_tool(r2, "c", NULL, &pure, body_fn, &b);
	cr_assert_eq(notices, 0);
	msb_host_tool_registry_unref(r);
	msb_host_tool_registry_unref(r2);
}

/* 13.3, 13.5: a stamp with a leg left unanswered is no stamp at all. */
Test(hosttools, partial_stamp_is_unstamped_13_3_13_5)
{
	msb_host_tool_decl two = pure;
	two.identity_leg = MSB_LEG_UNANSWERED;
	cr_assert_not(msb_host_tool_decl_complete(&two));
	cr_assert(msb_host_tool_decl_complete(&pure));
	msb_host_tool_registry *r = registry(NULL);
	struct body b = {0};
	reg_tool(r, "f", NULL, &two, body_fn, &b);
	msb_host_tool_aggregate a;
	cr_assert_eq(msb_host_tool_registry_aggregate(r, &a, NULL), 0);
	cr_assert(a.has_undeclared);
	cr_assert_eq(a.identities, MSB_IDENTITY_APP);
	msb_host_tool_aggregate_clear(&a);
	/* The body registered is the body called, unchanged. */
	msb_host_tool_run *run = new_run(r);
	assert_value(call(run, "f", "{}", 0), "\"ok\"");
	cr_assert_eq(b.calls, 1);
	msb_host_tool_run_free(run);
	msb_host_tool_registry_unref(r);

	msb_host_tool_registry_options o = MSB_HOST_TOOL_REGISTRY_OPTIONS_INIT;
	o.require_declared = true;
	r = registry(&o);
	msb_host_tool t = MSB_HOST_TOOL_INIT;
	t.name = "f";
	t.fn = body_fn;
	t.decl = &two;
	assert_refused(msb_host_tool_registry_register(r, &t, &e_), MSB_E_HOST_TOOL_NOT_DECLARED,
		       "no complete information-flow declaration");
	msb_host_tool_registry_unref(r);
}

Test(hosttools, declaration_json_13_4)
{
	msb_host_tool_decl d;
	char *st = NULL;
	assert_refused(msb_host_tool_decl_from_json(
			       "{\"source\": null, \"sink\": 3, \"identity\": null}", &d, &st, &e_),
		       MSB_E_TYPE, "sink must be a string");
	assert_refused(
		msb_host_tool_decl_from_json(
			"{\"source\": \"semi\", \"sink\": null, \"identity\": null}", &d, &st, &e_),
		MSB_E_VALUE, "semi");
	assert_refused(
		msb_host_tool_decl_from_json("{\"source\": null, \"color\": 1}", &d, &st, &e_),
		MSB_E_VALUE, "color");
	cr_assert_eq(
		msb_host_tool_decl_from_json(
			"{\"source\": \"trusted\", \"sink\": \"internal\", \"identity\": \"app\"}",
			&d, &st, NULL),
		0);
	cr_assert_eq(d.identity_leg, MSB_LEG_VALUE);
	cr_assert_eq(d.identity, MSB_IDENTITY_APP);
	cr_assert_eq(d.source, MSB_INTEGRITY_TRUSTED);
	cr_assert_str_eq(d.sink, "internal");
	cr_assert(msb_host_tool_decl_complete(&d));
	free(st);
	st = NULL;
	/* A key left out is unanswered, null is an answer. */
	cr_assert_eq(
		msb_host_tool_decl_from_json("{\"source\": null, \"sink\": null}", &d, &st, NULL),
		0);
	cr_assert_eq(d.source_leg, MSB_LEG_NONE);
	cr_assert_eq(d.identity_leg, MSB_LEG_UNANSWERED);
	cr_assert_not(msb_host_tool_decl_complete(&d));
	free(st);
	/* A struct-built declaration with an out-of-range value. */
	msb_host_tool_decl bad = pure;
	bad.source_leg = MSB_LEG_VALUE;
	bad.source = MSB_INTEGRITY_UNESTABLISHED;
	msb_host_tool_registry *r = registry(NULL);
	msb_host_tool t = MSB_HOST_TOOL_INIT;
	t.name = "f";
	t.fn = body_fn;
	t.decl = &bad;
	assert_refused(msb_host_tool_registry_register(r, &t, &e_), MSB_E_VALUE,
		       "source must be a SourceIntegrity");
	msb_host_tool_registry_unref(r);
}

Test(hosttools, require_declared_13_6)
{
	msb_host_tool_registry_options o = MSB_HOST_TOOL_REGISTRY_OPTIONS_INIT;
	o.require_declared = true;
	msb_host_tool_registry *r = registry(&o);
	msb_host_tool t = MSB_HOST_TOOL_INIT;
	t.name = "f";
	t.fn = body_fn;
	assert_refused(msb_host_tool_registry_register(r, &t, &e_), MSB_E_HOST_TOOL_NOT_DECLARED,
		       "`f` carries no complete information-flow declaration");
	cr_assert_str_eq(msb_code_name(MSB_E_HOST_TOOL_NOT_DECLARED), "HostToolNotDeclared");
	cr_assert(msb_code_is(MSB_E_HOST_TOOL_NOT_DECLARED, MSB_CAT_VALUE));
	struct body b = {0};
	reg_tool(r, "f", NULL, &pure, body_fn, &b);
	msb_host_tool_registry_unref(r);
}

Test(hosttools, declaration_captured_once_13_7)
{
	msb_host_tool_registry *r = registry(NULL);
	msb_host_tool_decl d = pure;
	d.identity_leg = MSB_LEG_VALUE;
	d.identity = MSB_IDENTITY_APP;
	struct body b = {0};
	reg_tool(r, "f", NULL, &d, body_fn, &b);
	/* Swap the stamp afterwards: USER, unanswered sink. Nothing changes. */
	d.identity = MSB_IDENTITY_USER;
	d.sink_leg = MSB_LEG_UNANSWERED;
	msb_host_tool_run *run = new_run(r);
	assert_value(call(run, "f", NULL, 0), "\"ok\"");
	cr_assert_str_eq(b.last_user, "", "no user identity was minted or passed");
	msb_host_tool_aggregate a;
	cr_assert_eq(msb_host_tool_registry_aggregate(r, &a, NULL), 0);
	cr_assert_eq(a.identities, MSB_IDENTITY_APP);
	cr_assert_not(a.has_undeclared);
	msb_host_tool_aggregate_clear(&a);
	msb_host_tool_run_free(run);
	msb_host_tool_registry_unref(r);
}

Test(hosttools, allowed_identities_13_8)
{
	msb_host_tool_decl user = pure;
	user.identity_leg = MSB_LEG_VALUE;
	user.identity = MSB_IDENTITY_USER;
	msb_host_tool_registry *r = registry(NULL);
	msb_host_tool t = MSB_HOST_TOOL_INIT;
	t.name = "u";
	t.fn = body_fn;
	t.decl = &user;
	assert_refused(msb_host_tool_registry_register(r, &t, &e_),
		       MSB_E_HOST_TOOL_IDENTITY_NOT_ALLOWED, "exercises the user identity");
	cr_assert_str_eq(msb_code_name(MSB_E_HOST_TOOL_IDENTITY_NOT_ALLOWED),
			 "HostToolIdentityNotAllowed");
	msb_host_tool_registry_unref(r);

	msb_host_tool_registry_options o = MSB_HOST_TOOL_REGISTRY_OPTIONS_INIT;
	o.allowed_identities = MSB_IDENTITY_APP | MSB_IDENTITY_USER;
	r = registry(&o);
	cr_assert_eq(msb_host_tool_registry_register(r, &t, NULL), 0);
	msb_host_tool_registry_unref(r);

	/* Allowed nothing: identity none still registers; unstamped (APP) does not. */
	o.allowed_identities = 0;
	r = registry(&o);
	t.decl = &pure;
	cr_assert_eq(msb_host_tool_registry_register(r, &t, NULL), 0);
	t.name = "unstamped";
	t.decl = NULL;
	assert_refused(msb_host_tool_registry_register(r, &t, &e_),
		       MSB_E_HOST_TOOL_IDENTITY_NOT_ALLOWED, "unstamped, read as app");
	msb_host_tool_registry_unref(r);
}

Test(hosttools, constructor_validation_13_9)
{
	msb_host_tool_registry *r = NULL;
	msb_host_tool_registry_options o = MSB_HOST_TOOL_REGISTRY_OPTIONS_INIT;
	o.max_host_tool_calls_per_run = 0;
	assert_refused(msb_host_tool_registry_new(&o, &r, &e_), MSB_E_VALUE,
		       "max_host_tool_calls_per_run must be at least 1");
	o = (msb_host_tool_registry_options)MSB_HOST_TOOL_REGISTRY_OPTIONS_INIT;
	o.response_limits.max_files = 0;
	assert_refused(msb_host_tool_registry_new(&o, &r, &e_), MSB_E_VALUE, "response_limits");
	o = (msb_host_tool_registry_options)MSB_HOST_TOOL_REGISTRY_OPTIONS_INIT;
	o.allowed_identities = 1u << 7;
	assert_refused(msb_host_tool_registry_new(&o, &r, &e_), MSB_E_VALUE, "allowed_identities");
	cr_assert_null(r);
	/* Defaults: cap 16, TransferLimits() for responses, APP only. */
	o = (msb_host_tool_registry_options)MSB_HOST_TOOL_REGISTRY_OPTIONS_INIT;
	cr_assert_eq(o.max_host_tool_calls_per_run, 16);
	cr_assert_eq(o.allowed_identities, MSB_IDENTITY_APP);
	cr_assert(msb_transfer_limits_within(&o.response_limits, &MSB_DEFAULT_TRANSFER_LIMITS) &&
		  msb_transfer_limits_within(&MSB_DEFAULT_TRANSFER_LIMITS, &o.response_limits));
}

Test(hosttools, register_refusals_13_10)
{
	msb_host_tool_registry *r = registry(NULL);
	struct body b = {0};
	reg_tool(r, "f", NULL, &pure, body_fn, &b);
	msb_host_tool t = MSB_HOST_TOOL_INIT;
	t.name = "g";
	assert_refused(msb_host_tool_registry_register(r, &t, &e_), MSB_E_TYPE, "callable");
	t.fn = body_fn;
	t.name = NULL;
	assert_refused(msb_host_tool_registry_register(r, &t, &e_), MSB_E_TYPE, "string");
	t.name = "";
	assert_refused(msb_host_tool_registry_register(r, &t, &e_), MSB_E_VALUE, "empty");
	t.name = "f";
	struct body other = {0};
	t.userdata = &other;
	assert_refused(msb_host_tool_registry_register(r, &t, &e_), MSB_E_VALUE,
		       "already registered");
	/* Never replaced: "f" still reaches the first body. */
	msb_host_tool_run *run = new_run(r);
	assert_value(call(run, "f", NULL, 0), "\"ok\"");
	cr_assert_eq(b.calls, 1);
	cr_assert_eq(other.calls, 0);
	char **names = msb_host_tool_registry_names(r);
	cr_assert_str_eq(names[0], "f");
	cr_assert_null(names[1]);
	msb_strv_free(names);
	msb_host_tool_run_free(run);
	msb_host_tool_registry_unref(r);
}

Test(hosttools, aggregate_seals_13_11)
{
	msb_host_tool_registry *r = registry(NULL);
	struct body b = {0};
	reg_tool(r, "f", NULL, &pure, body_fn, &b);
	cr_assert_not(msb_host_tool_registry_sealed(r));
	msb_host_tool_aggregate a;
	cr_assert_eq(msb_host_tool_registry_aggregate(r, &a, NULL), 0);
	msb_host_tool_aggregate_clear(&a);
	cr_assert(msb_host_tool_registry_sealed(r));
	msb_host_tool t = MSB_HOST_TOOL_INIT;
	t.name = "g";
	t.fn = body_fn;
	t.decl = &pure;
	assert_refused(msb_host_tool_registry_register(r, &t, &e_), MSB_E_VALUE, "sealed");
	char **names = msb_host_tool_registry_names(r);
	cr_assert_null(names[1], "registry unchanged");
	msb_strv_free(names);
	msb_host_tool_registry_unref(r);
}

static msb_host_tool_decl decl3(msb_leg sl, msb_integrity s, const char *sink, msb_leg il,
				msb_identity id)
{
	msb_host_tool_decl d = {MSB_HOST_TOOL_DECL_VERSION,
				sl,
				s,
				sink ? MSB_LEG_VALUE : MSB_LEG_NONE,
				sink,
				il,
				id};
	return d;
}

Test(hosttools, aggregate_policy_13_12_13_13_13_14)
{
	struct body b = {0};
	msb_host_tool_decl trusted =
		decl3(MSB_LEG_VALUE, MSB_INTEGRITY_TRUSTED, NULL, MSB_LEG_NONE, MSB_IDENTITY_APP);
	msb_host_tool_decl sink_internal = decl3(MSB_LEG_NONE, MSB_INTEGRITY_UNTRUSTED, "internal",
						 MSB_LEG_NONE, MSB_IDENTITY_APP);
	msb_host_tool_decl sink_secret = decl3(MSB_LEG_NONE, MSB_INTEGRITY_UNTRUSTED, "secret",
					       MSB_LEG_VALUE, MSB_IDENTITY_APP);
	msb_host_tool_aggregate a;

	/* {sink-only} -> no result integrity. */
	msb_host_tool_registry *r = registry(NULL);
	reg_tool(r, "s", NULL, &sink_internal, body_fn, &b);
	cr_assert_eq(msb_host_tool_registry_aggregate(r, &a, NULL), 0);
	cr_assert_not(a.has_result_integrity);
	cr_assert_eq(a.identities, 0u, "identity none contributes nothing");
	cr_assert_not(a.requires_approval);
	msb_host_tool_aggregate_clear(&a);
	msb_host_tool_registry_unref(r);

	/* {trusted-source, sink-only} -> TRUSTED; sinks unfolded. */
	r = registry(NULL);
	reg_tool(r, "t", NULL, &trusted, body_fn, &b);
	reg_tool(r, "s", NULL, &sink_internal, body_fn, &b);
	reg_tool(r, "x", NULL, &sink_secret, body_fn, &b);
	cr_assert_eq(msb_host_tool_registry_aggregate(r, &a, NULL), 0);
	cr_assert(a.has_result_integrity);
	cr_assert_eq(a.result_integrity, MSB_INTEGRITY_TRUSTED);
	cr_assert_str_eq(a.outbound_caps[0], "internal");
	cr_assert_str_eq(a.outbound_caps[1], "secret");
	cr_assert_null(a.outbound_caps[2]);
	cr_assert_eq(a.identities, MSB_IDENTITY_APP);
	cr_assert_not(a.has_undeclared);
	msb_host_tool_aggregate_clear(&a);
	msb_host_tool_registry_unref(r);

	/* + unstamped -> UNTRUSTED, APP, has_undeclared. */
	r = registry(NULL);
	reg_tool(r, "t", NULL, &trusted, body_fn, &b);
	reg_tool(r, "u", NULL, NULL, body_fn, &b);
	cr_assert_eq(msb_host_tool_registry_aggregate(r, &a, NULL), 0);
	cr_assert_eq(a.result_integrity, MSB_INTEGRITY_UNTRUSTED);
	cr_assert_eq(a.identities, MSB_IDENTITY_APP);
	cr_assert(a.has_undeclared);
	msb_host_tool_aggregate_clear(&a);
	msb_host_tool_registry_unref(r);

	/* {USER tool} -> requires approval. */
	msb_host_tool_registry_options o = MSB_HOST_TOOL_REGISTRY_OPTIONS_INIT;
	o.allowed_identities = MSB_IDENTITY_APP | MSB_IDENTITY_USER;
	r = registry(&o);
	msb_host_tool_decl user = decl3(MSB_LEG_NONE, MSB_INTEGRITY_UNTRUSTED, NULL, MSB_LEG_VALUE,
					MSB_IDENTITY_USER);
	reg_tool(r, "u", NULL, &user, body_fn, &b);
	cr_assert_eq(msb_host_tool_registry_aggregate(r, &a, NULL), 0);
	cr_assert(a.requires_approval);
	cr_assert_eq(a.identities, MSB_IDENTITY_USER);
	msb_host_tool_aggregate_clear(&a);
	msb_host_tool_registry_unref(r);
}

static msb_router *fake_router(msb_identity_set denied_ids, msb_capset denied_caps)
{
	msb_backend *b = NULL;
	cr_assert_eq(msb_fake_backend_new(NULL, &b, NULL, NULL), 0);
	msb_router_options o = MSB_ROUTER_OPTIONS_INIT;
	o.min_isolation = MSB_ISOLATION_NONE;
	o.denied_identities = denied_ids;
	o.denied_capabilities = denied_caps;
	msb_router *r = NULL;
	msb_error *err = NULL;
	cr_assert_eq(msb_router_new(&b, 1, &o, &r, &err), 0, "%s",
		     err ? msb_error_message(err) : "");
	msb_backend_unref(b);
	return r;
}

/* 13.15: the spec's identities come from the sealed registry's aggregate. */
Test(hosttools, spec_identities_from_aggregate_13_15)
{
	msb_host_tool_registry_options o = MSB_HOST_TOOL_REGISTRY_OPTIONS_INIT;
	o.allowed_identities = MSB_IDENTITY_APP | MSB_IDENTITY_USER;
	msb_host_tool_registry *reg = registry(&o);
	msb_host_tool_decl user = decl3(MSB_LEG_NONE, MSB_INTEGRITY_UNTRUSTED, NULL, MSB_LEG_VALUE,
					MSB_IDENTITY_USER);
	struct body b = {0};
	reg_tool(reg, "u", NULL, &user, body_fn, &b);
	msb_host_tool_aggregate a;
	cr_assert_eq(msb_host_tool_registry_aggregate(reg, &a, NULL), 0);
	msb_spec_builder *sb = msb_spec_builder_new("k");
	msb_spec_builder_set_identities(sb, a.identities);
	msb_spec *spec = NULL;
	cr_assert_eq(msb_spec_build(sb, &spec, NULL), 0);
	msb_router *r = fake_router(MSB_IDENTITY_USER, 0);
	assert_refused(msb_router_ensure_can_serve(r, spec, &e_), MSB_E_IDENTITY_DENIED, "user");
	msb_router_free(r);
	r = fake_router(0, 0);
	cr_assert_eq(msb_router_ensure_can_serve(r, spec, NULL), 0);
	msb_router_free(r);
	msb_spec_unref(spec);
	msb_spec_builder_free(sb);
	msb_host_tool_aggregate_clear(&a);
	msb_host_tool_registry_unref(reg);
}

/* 13.30: the hard stop is the router's denied capabilities. */
Test(hosttools, router_hard_stop_13_30)
{
	msb_spec_builder *sb = msb_spec_builder_new("k");
	msb_spec_builder_set_requires(sb, MSB_CAP_EXEC | MSB_CAP_HOST_TOOLS);
	msb_spec *spec = NULL;
	cr_assert_eq(msb_spec_build(sb, &spec, NULL), 0);
	msb_router *r = fake_router(0, MSB_CAP_HOST_TOOLS);
	assert_refused(msb_router_ensure_can_serve(r, spec, &e_), MSB_E_CAPABILITY_DENIED,
		       "host_tools");
	msb_router_free(r);
	msb_spec_unref(spec);
	msb_spec_builder_free(sb);
}

/* ---- 13.16-13.29 the door ---------------------------------------------------- */

static int mints;
static int mint_ok(void *ud, const msb_key *key, char **identity, msb_error **err)
{
	(void)ud;
	(void)key;
	(void)err;
	mints++;
	*identity = strdup("token-T");
	return 0;
}
static int mint_fails(void *ud, const msb_key *key, char **identity, msb_error **err)
{
	(void)ud;
	(void)key;
	(void)identity;
	return msb_error_set(err, MSB_E_RUNTIME, "token service down");
}

Test(hosttools, user_identity_minted_13_16_13_28)
{
	msb_host_tool_decl user = decl3(MSB_LEG_NONE, MSB_INTEGRITY_UNTRUSTED, NULL, MSB_LEG_VALUE,
					MSB_IDENTITY_USER);
	msb_host_tool_registry_options o = MSB_HOST_TOOL_REGISTRY_OPTIONS_INIT;
	o.allowed_identities = MSB_IDENTITY_APP | MSB_IDENTITY_USER;
	struct body b = {0};

	/* No minter: registers, every call refused naming the prerequisite. */
	msb_host_tool_registry *r = registry(&o);
	reg_tool(r, "u", NULL, &user, body_fn, &b);
	msb_host_tool_run *run = new_run(r);
	assert_refusal(call(run, "u", NULL, 0),
		       "'u' exercises the user's identity, which this host cannot serve — a host "
		       "serves one by giving its registry a mint_user_identity callback");
	cr_assert_eq(b.calls, 0);
	msb_host_tool_run_free(run);
	msb_host_tool_registry_unref(r);

	/* A minter: the body receives its token, minted once per run. */
	o.mint_user_identity = mint_ok;
	mints = 0;
	r = registry(&o);
	reg_tool(r, "u", "{\"type\": \"object\", \"additionalProperties\": true}", &user, body_fn,
		 &b);
	run = new_run(r);
	assert_value(call(run, "u", NULL, 0), "\"ok\"");
	cr_assert_str_eq(b.last_user, "token-T");
	assert_value(call(run, "u", NULL, 0), "\"ok\"");
	cr_assert_eq(mints, 1);
	/* The guest may not choose the authority it runs under. */
	assert_refusal(call(run, "u", "{\"user_identity\": \"forged\"}", 0),
		       "'user_identity' is not an argument a caller may send to 'u'");
	cr_assert_eq(b.calls, 2);
	msb_host_tool_run_free(run);
	msb_host_tool_registry_unref(r);

	/* A failed mint refuses, reason in the log only. */
	o.mint_user_identity = mint_fails;
	r = registry(&o);
	reg_tool(r, "u", NULL, &user, body_fn, &b);
	run = new_run(r);
	msb_host_tool_result res = call(run, "u", NULL, 0);
	cr_assert_null(strstr(res.refusal, "token service"));
	assert_refusal(res, "the user's identity could not be minted for this run");
	msb_host_tool_run_free(run);
	msb_host_tool_registry_unref(r);
}

Test(hosttools, runs_have_fresh_counters_13_17)
{
	msb_host_tool_registry_options o = MSB_HOST_TOOL_REGISTRY_OPTIONS_INIT;
	o.max_host_tool_calls_per_run = 2;
	msb_host_tool_registry *r = registry(&o);
	struct body b = {0};
	reg_tool(r, "f", NULL, &pure, body_fn, &b);
	for (int i = 0; i < 2; i++) {
		msb_host_tool_run *run = new_run(r);
		assert_value(call(run, "f", NULL, 0), "\"ok\"");
		assert_value(call(run, "f", NULL, 0), "\"ok\"");
		cr_assert_eq(msb_host_tool_run_calls(run), 2);
		cr_assert_eq(msb_host_tool_run_delivered(run), 2);
		cr_assert_eq(msb_host_tool_run_delivered_bytes(run), 8);
		msb_host_tool_run_free(run);
	}
	msb_host_tool_registry_unref(r);
}

Test(hosttools, cap_counts_refusals_13_18)
{
	msb_host_tool_registry_options o = MSB_HOST_TOOL_REGISTRY_OPTIONS_INIT;
	o.max_host_tool_calls_per_run = 2;
	msb_host_tool_registry *r = registry(&o);
	struct body b = {0};
	reg_tool(r, "f", NULL, &pure, body_fn, &b);
	msb_host_tool_run *run = new_run(r);
	assert_refusal(call(run, "unknown", NULL, 0), "is not a registered host tool");
	assert_refusal(call(run, "unknown", NULL, 0), "is not a registered host tool");
	assert_refusal(call(run, "f", NULL, 0),
		       "Error: this run's host-tool-call cap (2) is exhausted — finish with the "
		       "results already delivered and report what remains undone");
	cr_assert_eq(b.calls, 0);
	cr_assert_eq(msb_host_tool_run_calls(run), 3);
	msb_host_tool_run_free(run);
	msb_host_tool_registry_unref(r);
}

static int events;
static char ev_outcome[32], ev_refusal[512], ev_tool[256], ev_sink[32], ev_call[32];
static bool ev_guest;
static uint64_t ev_bytes;
static int on_called(void *ud, const msb_ev_host_tool_called *ev)
{
	(void)ud;
	events++;
	snprintf(ev_outcome, sizeof(ev_outcome), "%s", ev->outcome);
	snprintf(ev_refusal, sizeof(ev_refusal), "%s", ev->refusal ? ev->refusal : "");
	snprintf(ev_tool, sizeof(ev_tool), "%s", ev->tool ? ev->tool : "(null)");
	snprintf(ev_sink, sizeof(ev_sink), "%s", ev->sink ? ev->sink : "(null)");
	snprintf(ev_call, sizeof(ev_call), "%s", ev->call ? ev->call : "(null)");
	ev_guest = ev->tool_guest_influenced;
	ev_bytes = ev->response_bytes;
	return 0;
}

static msb_host_tool_registry *observed_registry(uint64_t cap)
{
	static msb_observer obs = MSB_OBSERVER_INIT;
	obs.host_tool_called = on_called;
	msb_host_tool_registry_options o = MSB_HOST_TOOL_REGISTRY_OPTIONS_INIT;
	o.max_host_tool_calls_per_run = cap;
	o.observer = &obs;
	events = 0;
	return registry(&o);
}

Test(hosttools, framing_validation_13_19)
{
	msb_host_tool_registry *r = observed_registry(16);
	struct body b = {0};
	reg_tool(r, "f", NULL, &pure, body_fn, &b);
	msb_host_tool_run *run = new_run(r);
	msb_host_tool_result res = {NULL, NULL};
	assert_refused(msb_host_tool_run_call(run, "f", NULL, -1, &res, &e_), MSB_E_VALUE,
		       "framing_bytes must not be negative");
	/* A programming error is not a call: not counted, not observed. (A float
	 * framing_bytes, the check's TypeError, cannot be written in C.) */
	cr_assert_eq(msb_host_tool_run_calls(run), 0);
	cr_assert_eq(events, 0);
	cr_assert_eq(b.calls, 0);
	msb_host_tool_run_free(run);
	msb_host_tool_registry_unref(r);
}

Test(hosttools, guest_input_refusals_13_20)
{
	msb_host_tool_registry *r = observed_registry(16);
	struct body b = {0};
	reg_tool(r, "f", NULL, &pure, body_fn, &b);
	msb_host_tool_run *run = new_run(r);
	char name[301];
	memset(name, 'x', 300);
	name[300] = 0;
	char want[140];
	memset(want, 'x', 120);
	snprintf(want + 120, sizeof(want) - 120, " (truncated)");
	msb_host_tool_result res = call(run, name, NULL, 0);
	cr_assert(strstr(res.refusal, want), "%s", res.refusal);
	cr_assert_null(strstr(res.refusal, name + 179), "bounded to 120 characters");
	msb_host_tool_result_clear(&res);
	/* DESIGN 9.41: the event records the bounded name, flagged. */
	cr_assert_str_eq(ev_tool, want);
	cr_assert(ev_guest);

	static const char req[] = "{\"id\": 1, \"name\": [\"f\"], \"arguments\": {}}";
	cr_assert_eq(msb_host_tool_run_call_request(run, req, strlen(req), 0, &res, NULL), 0);
	assert_refusal(res, "Error: a host tool name must be a string, not list");
	assert_refusal(call(run, "f", "[1, 2]", 0),
		       "Error: arguments for 'f' must be a JSON object of keyword arguments");
	assert_refusal(call(run, "f", "{not json", 0), "this host-tool request is not valid JSON");
	cr_assert_eq(b.calls, 0);
	cr_assert_eq(msb_host_tool_run_calls(run), 4);
	msb_host_tool_run_free(run);
	msb_host_tool_registry_unref(r);
}

Test(hosttools, pre_call_budgets_13_21)
{
	msb_host_tool_registry_options o = MSB_HOST_TOOL_REGISTRY_OPTIONS_INIT;
	o.response_limits.max_files = 1;
	msb_host_tool_registry *r = registry(&o);
	struct body b = {0};
	reg_tool(r, "f", NULL, &pure, body_fn, &b);
	msb_host_tool_run *run = new_run(r);
	assert_value(call(run, "f", NULL, 0), "\"ok\"");
	assert_refusal(call(run, "f", NULL, 0), "delivered-response cap (1) is exhausted");
	cr_assert_eq(b.calls, 1, "refused before the body runs");
	msb_host_tool_run_free(run);
	msb_host_tool_registry_unref(r);

	o = (msb_host_tool_registry_options)MSB_HOST_TOOL_REGISTRY_OPTIONS_INIT;
	o.response_limits.max_total_bytes = 15;
	r = registry(&o);
	reg_tool(r, "f", NULL, &pure, body_fn, &b);
	run = new_run(r);
	assert_value(call(run, "f", NULL, 10), "\"ok\""); /* 4 + 10 = 14 */
	assert_refusal(call(run, "f", NULL, 10), "response byte budget (15) is exhausted");
	cr_assert_eq(b.calls, 2);
	msb_host_tool_run_free(run);
	msb_host_tool_registry_unref(r);

	o = (msb_host_tool_registry_options)MSB_HOST_TOOL_REGISTRY_OPTIONS_INIT;
	o.response_limits.max_bytes_per_file = 11;
	r = registry(&o);
	reg_tool(r, "f", NULL, &pure, body_fn, &b);
	run = new_run(r);
	assert_refusal(call(run, "f", NULL, 11),
		       "no host-tool response can fit this run's per-response cap");
	cr_assert_eq(b.calls, 2);
	msb_host_tool_run_free(run);
	msb_host_tool_registry_unref(r);
}

Test(hosttools, schema_validation_13_22)
{
	msb_host_tool_registry *r = registry(NULL);
	reg_tool(r, "add", ADD_SCHEMA, &pure, add_fn, NULL);
	struct body b = {0};
	reg_tool(
		r, "f",
		"{\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"string\", "
		"\"minLength\": 2, \"maxLength\": 3}, \"mode\": {\"enum\": [\"x\", \"y\"]}, "
		"\"list\": {\"type\": \"array\", \"items\": {\"type\": \"number\", \"minimum\": 0, "
		"\"maximum\": 9}, \"minItems\": 1, \"maxItems\": 2}}}",
		&pure, body_fn, &b);
	msb_host_tool_run *run = new_run(r);
	assert_value(call(run, "add", "{\"left\": 2, \"right\": 3}", 0), "5");
	assert_refusal(call(run, "f", "{\"b\": 1}", 0),
		       "Error: arguments do not bind to host tool 'f': unexpected keyword argument "
		       "'b'");
	assert_refusal(call(run, "add", "{\"left\": 2}", 0), "missing required argument 'right'");
	assert_refusal(call(run, "add", "{\"left\": \"2\", \"right\": 1}", 0),
		       "left: expected integer, got string");
	assert_refusal(call(run, "f", "{\"a\": \"é\"}", 0), "a: shorter than 2 characters");
	assert_refusal(call(run, "f", "{\"a\": \"abcd\"}", 0), "a: longer than 3 characters");
	assert_refusal(call(run, "f", "{\"mode\": \"z\"}", 0), "mode: value is not one of");
	assert_refusal(call(run, "f", "{\"list\": []}", 0), "list: fewer than 1 items");
	assert_refusal(call(run, "f", "{\"list\": [1, 2, 3]}", 0), "list: more than 2 items");
	assert_refusal(call(run, "f", "{\"list\": [10]}", 0), "list[0]: above the maximum 9");
	assert_refusal(call(run, "f", "{\"list\": [-1]}", 0), "list[0]: below the minimum 0");
	cr_assert_eq(b.calls, 0, "no body ran for a refused binding");
	assert_value(call(run, "f", "{\"a\": \"éé\", \"mode\": \"y\", \"list\": [0.5]}", 0),
		     "\"ok\"");
	cr_assert_eq(b.calls, 1);
	msb_host_tool_run_free(run);

	/* The validator refuses, at registration, keywords it does not implement. */
	msb_host_tool t = MSB_HOST_TOOL_INIT;
	t.name = "p";
	t.fn = body_fn;
	t.parameters = "{\"type\": \"object\", \"properties\": {\"a\": {\"pattern\": \"^x\"}}}";
	assert_refused(msb_host_tool_registry_register(r, &t, &e_), MSB_E_VALUE,
		       "schema keyword `pattern` is not implemented");
	t.parameters = "{\"type\": \"string\"}";
	assert_refused(msb_host_tool_registry_register(r, &t, &e_), MSB_E_VALUE,
		       "must have \"type\": \"object\"");
	t.parameters = "{\"type\": ";
	assert_refused(msb_host_tool_registry_register(r, &t, &e_), MSB_E_VALUE, "not valid JSON");
	msb_host_tool_registry_unref(r);
}

static char logged[512];
static void keep_log(void *ud, msb_log_level lv, const char *comp, const char *msg)
{
	(void)ud;
	(void)lv;
	(void)comp;
	if (strstr(msg, "failed"))
		snprintf(logged, sizeof(logged), "%s", msg);
}

Test(hosttools, failure_sanitised_13_23)
{
	msb_host_tool_registry_options o = MSB_HOST_TOOL_REGISTRY_OPTIONS_INIT;
	o.log = keep_log;
	msb_host_tool_registry *r = registry(&o);
	struct body b = {.fail = MSB_E_VALUE};
	reg_tool(r, "f", NULL, &pure, body_fn, &b);
	msb_host_tool_run *run = new_run(r);
	logged[0] = 0;
	msb_host_tool_result res = call(run, "f", NULL, 0);
	cr_assert_null(strstr(res.refusal, "hunter2"));
	assert_refusal(res, "Error: host tool 'f' failed — the reason is in the host's log");
	cr_assert(strstr(logged, "hunter2"), "log: %s", logged);
	cr_assert_eq(msb_host_tool_run_delivered(run), 0);
	msb_host_tool_run_free(run);
	msb_host_tool_registry_unref(r);
}

Test(hosttools, json_result_13_24)
{
	msb_host_tool_registry *r = registry(NULL);
	struct body nan = {.reply = "NaN"}, inf = {.reply = "[Infinity]"},
		    utf = {.reply = "{\"k\":\"é\"}"}, dup = {.reply = "{\"a\":1,\"a\":2}"};
	reg_tool(r, "nan", NULL, &pure, body_fn, &nan);
	reg_tool(r, "inf", NULL, &pure, body_fn, &inf);
	reg_tool(r, "utf", NULL, &pure, body_fn, &utf);
	reg_tool(r, "dup", NULL, &pure, body_fn, &dup);
	msb_host_tool_run *run = new_run(r);
	assert_refusal(call(run, "nan", NULL, 0),
		       "host tool 'nan' returned a value that cannot be carried as JSON");
	assert_refusal(call(run, "inf", NULL, 0), "cannot be carried as JSON");
	assert_refusal(call(run, "dup", NULL, 0), "cannot be carried as JSON");
	assert_value(call(run, "utf", NULL, 0), "{\"k\": \"é\"}");
	msb_host_tool_run_free(run);
	msb_host_tool_registry_unref(r);
}

Test(hosttools, response_caps_13_25)
{
	msb_host_tool_registry_options o = MSB_HOST_TOOL_REGISTRY_OPTIONS_INIT;
	o.response_limits.max_bytes_per_file = 10;
	msb_host_tool_registry *r = registry(&o);
	struct body big = {.reply = "\"xxxxxxxxxxxxxxxxxxxx\""};
	reg_tool(r, "big", NULL, &pure, body_fn, &big);
	msb_host_tool_run *run = new_run(r);
	assert_refusal(call(run, "big", NULL, 0),
		       "host tool 'big''s response is 22 bytes and the per-response cap allows 10");
	cr_assert_eq(msb_host_tool_run_delivered(run), 0);
	msb_host_tool_run_free(run);
	msb_host_tool_registry_unref(r);

	o = (msb_host_tool_registry_options)MSB_HOST_TOOL_REGISTRY_OPTIONS_INIT;
	o.response_limits.max_total_bytes = 30;
	r = registry(&o);
	reg_tool(r, "big", NULL, &pure, body_fn, &big);
	run = new_run(r);
	assert_value(call(run, "big", NULL, 0), "\"xxxxxxxxxxxxxxxxxxxx\"");
	assert_refusal(call(run, "big", NULL, 0),
		       "delivering host tool 'big''s 22-byte response would exceed this run's "
		       "total response cap (30 bytes)");
	cr_assert_eq(msb_host_tool_run_delivered_bytes(run), 22);
	msb_host_tool_run_free(run);
	msb_host_tool_registry_unref(r);
}

/* 14.15 at the door: framing is charged, len+10 refused, len+11 delivered. */
Test(hosttools, framing_charged_14_15)
{
	for (uint64_t cap = 14; cap <= 15; cap++) {
		msb_host_tool_registry_options o = MSB_HOST_TOOL_REGISTRY_OPTIONS_INIT;
		o.response_limits.max_bytes_per_file = cap; /* "ok" is 4 bytes + 11 */
		msb_host_tool_registry *r = registry(&o);
		struct body b = {0};
		reg_tool(r, "f", NULL, &pure, body_fn, &b);
		msb_host_tool_run *run = new_run(r);
		msb_host_tool_result res = call(run, "f", NULL, 11);
		if (cap == 14)
			assert_refusal(res, "response is 15 bytes");
		else
			assert_value(res, "\"ok\"");
		msb_host_tool_run_free(run);
		msb_host_tool_registry_unref(r);
	}
}

Test(hosttools, result_exactly_one_13_26)
{
	msb_host_tool_result res;
	assert_refused(msb_host_tool_result_make(NULL, NULL, &res, &e_), MSB_E_VALUE,
		       "exactly one of value_json or refusal");
	assert_refused(msb_host_tool_result_make("1", "Error: x", &res, &e_), MSB_E_VALUE,
		       "exactly one");
	cr_assert_eq(msb_host_tool_result_make("1", NULL, &res, NULL), 0);
	cr_assert_str_eq(res.value_json, "1");
	cr_assert_null(res.refusal);
	msb_host_tool_result_clear(&res);
}

Test(hosttools, cancel_returns_slot_13_27)
{
	msb_host_tool_registry *r = observed_registry(16);
	struct body b = {.fail = MSB_E_CANCELLED};
	reg_tool(r, "f", NULL, &pure, body_fn, &b);
	msb_host_tool_run *run = new_run(r);
	msb_host_tool_result res = {NULL, NULL};
	assert_refused(msb_host_tool_run_call(run, "f", NULL, 0, &res, &e_), MSB_E_CANCELLED, "");
	cr_assert_null(res.value_json);
	cr_assert_null(res.refusal);
	cr_assert_eq(msb_host_tool_run_calls(run), 1, "the call stays spent");
	cr_assert_eq(msb_host_tool_run_delivered(run), 0, "the slot is returned");
	cr_assert_eq(events, 1);
	cr_assert_str_eq(ev_outcome, "cancelled");
	msb_host_tool_run_free(run);
	msb_host_tool_registry_unref(r);
}

Test(hosttools, host_tool_called_event_13_29_17_10)
{
	msb_host_tool_registry *r = observed_registry(1);
	struct body b = {0};
	msb_host_tool_decl sinky = decl3(MSB_LEG_NONE, MSB_INTEGRITY_UNTRUSTED, "internal",
					 MSB_LEG_NONE, MSB_IDENTITY_APP);
	reg_tool(r, "f", NULL, &sinky, body_fn, &b);
	msb_host_tool_run *run = new_run(r);
	assert_value(call(run, "f", NULL, 0), "\"ok\"");
	cr_assert_eq(events, 1);
	cr_assert_str_eq(ev_outcome, "result");
	cr_assert_str_eq(ev_tool, "f");
	cr_assert_not(ev_guest);
	cr_assert_str_eq(ev_sink, "internal");
	cr_assert_str_eq(ev_call, "call-1");
	cr_assert_eq(ev_bytes, 4);
	msb_host_tool_result res = call(run, "f", NULL, 0);
	cr_assert_eq(events, 2);
	cr_assert_str_eq(ev_outcome, "refused");
	cr_assert_str_eq(ev_refusal, res.refusal, "the event carries the guest's sentence");
	cr_assert_eq(ev_bytes, 0);
	msb_host_tool_result_clear(&res);
	msb_host_tool_run_free(run);
	msb_host_tool_registry_unref(r);
}

/* 17.2: the registry's observer gets HostToolCalled; a router observer does not. */
Test(hosttools, registry_observer_only_17_2)
{
	msb_host_tool_registry *r = registry(NULL); /* no observer: no event built */
	struct body b = {0};
	reg_tool(r, "f", NULL, &pure, body_fn, &b);
	msb_host_tool_run *run = new_run(r);
	events = 0;
	assert_value(call(run, "f", NULL, 0), "\"ok\"");
	cr_assert_eq(events, 0);
	msb_host_tool_run_free(run);
	msb_host_tool_registry_unref(r);
}

/* The JSON-lines recorder writes HostToolCalled with the guest-influence flag. */
Test(hosttools, jsonl_recorder_13_29)
{
	int fds[2];
	cr_assert_eq(pipe(fds), 0);
	msb_jsonl_recorder *rec = NULL;
	msb_observer obs;
	cr_assert_eq(msb_jsonl_recorder_new(fds[1], &rec, &obs, NULL), 0);
	msb_host_tool_registry_options o = MSB_HOST_TOOL_REGISTRY_OPTIONS_INIT;
	o.observer = &obs;
	msb_host_tool_registry *r = registry(&o);
	msb_host_tool_run *run = new_run(r);
	assert_refusal(call(run, "nope", NULL, 0), "not a registered host tool");
	char buf[1024] = {0};
	ssize_t n = read(fds[0], buf, sizeof(buf) - 1);
	cr_assert_gt(n, 0);
	json_t *line = json_loads(buf, JSON_DISABLE_EOF_CHECK, NULL);
	cr_assert_not_null(line, "%s", buf);
	cr_assert_str_eq(json_string_value(json_object_get(line, "event")), "HostToolCalled");
	cr_assert_str_eq(json_string_value(json_object_get(line, "tool")), "nope");
	cr_assert(json_is_true(json_object_get(line, "tool_guest_influenced")));
	cr_assert_str_eq(json_string_value(json_object_get(line, "outcome")), "refused");
	json_decref(line);
	msb_host_tool_run_free(run);
	msb_host_tool_registry_unref(r);
	msb_jsonl_recorder_free(rec);
	close(fds[0]);
	close(fds[1]);
}

/* 17.19: EffectiveState lists every tool of the sealed registry, from the
 * aggregate's names (what a session's options.host_tools carries). */
Test(hosttools, effective_state_tool_names_17_19)
{
	msb_host_tool_registry *reg = registry(NULL);
	struct body b = {0};
	reg_tool(reg, "zeta", NULL, &pure, body_fn, &b);
	reg_tool(reg, "alpha", NULL, &pure, body_fn, &b);
	msb_host_tool_aggregate a;
	cr_assert_eq(msb_host_tool_registry_aggregate(reg, &a, NULL), 0);
	size_t n = 0;
	while (a.names[n])
		n++;
	cr_assert_eq(n, 2);
	msb_router *r = fake_router(0, 0);
	msb_spec_builder *sb = msb_spec_builder_new("k");
	msb_spec *spec = NULL;
	cr_assert_eq(msb_spec_build(sb, &spec, NULL), 0);
	char *json = NULL;
	msb_error *err = NULL;
	cr_assert_eq(msb_effective_state_json(r, spec, "in-process", (const char *const *)a.names,
					      n, "call-1", &json, &err),
		     0, "%s", err ? msb_error_message(err) : "");
	json_t *j = json_loads(json, 0, NULL);
	json_t *tools = json_object_get(j, "host_tools");
	cr_assert_eq(json_array_size(tools), 2);
	cr_assert_str_eq(json_string_value(json_array_get(tools, 0)), "alpha");
	cr_assert_str_eq(json_string_value(json_array_get(tools, 1)), "zeta");
	json_decref(j);
	free(json);
	msb_spec_unref(spec);
	msb_spec_builder_free(sb);
	msb_router_free(r);
	msb_host_tool_aggregate_clear(&a);
	msb_host_tool_registry_unref(reg);
}
