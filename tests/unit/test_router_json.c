/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Router and backend configuration as JSON (checklist 1.4, 1.5, 1.29, 4.10,
 * 4.11, 5.2, 5.3, 5.9, 5.16; DESIGN 4: strict parsing, unknown keys refused).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include <msb/msb.h>
#include <msb/testing.h>

static void options_refused(const char *json, int code, const char *phrase)
{
	msb_router_options o;
	char *sel = NULL;
	msb_error *err = NULL;
	cr_assert_eq(msb_router_options_from_json(json, strlen(json), &o, &sel, &err), code,
		     "%s: got %s: %s", json, msb_code_name(msb_error_code(err)),
		     msb_error_message(err));
	cr_assert_null(sel);
	cr_assert(strstr(msb_error_message(err), phrase), "`%s` lacks `%s`", msb_error_message(err),
		  phrase);
	msb_error_free(err);
}

static msb_backend *backend_ok(const char *json)
{
	msb_backend *b = NULL;
	msb_error *err = NULL;
	cr_assert_eq(msb_backend_from_json(json, strlen(json), &b, &err), 0, "%s: %s", json,
		     msb_error_message(err));
	return b;
}

static void backend_refused(const char *json, int code, const char *phrase)
{
	msb_backend *b = NULL;
	msb_error *err = NULL;
	cr_assert_eq(msb_backend_from_json(json, strlen(json), &b, &err), code, "%s: got %s: %s",
		     json, msb_code_name(msb_error_code(err)), msb_error_message(err));
	cr_assert_null(b);
	cr_assert(strstr(msb_error_message(err), phrase), "`%s` lacks `%s`", msb_error_message(err),
		  phrase);
	msb_error_free(err);
}

static msb_router *router_ok(const char *json, const msb_router_options *extra)
{
	msb_router *r = NULL;
	msb_error *err = NULL;
	cr_assert_eq(msb_router_from_json(json, strlen(json), extra, &r, &err), 0, "%s: %s", json,
		     msb_error_message(err));
	return r;
}

static void router_refused(const char *json, int code, const char *phrase)
{
	msb_router *r = NULL;
	msb_error *err = NULL;
	cr_assert_eq(msb_router_from_json(json, strlen(json), NULL, &r, &err), code,
		     "%s: got %s: %s", json, msb_code_name(msb_error_code(err)),
		     msb_error_message(err));
	cr_assert_null(r);
	cr_assert(strstr(msb_error_message(err), phrase), "`%s` lacks `%s`", msb_error_message(err),
		  phrase);
	msb_error_free(err);
}

/* ---- router options ----------------------------------------------------------- */

Test(router_json, options_read_every_key)
{
	const char *json = "{\"min_isolation\": \"container\", \"selected\": \"ns\","
			   " \"selection\": \"fixed\", \"denied_capabilities\": [\"host_tools\"],"
			   " \"denied_identities\": [\"user\"], \"min_isolation_scope\": \"call\","
			   " \"min_cleanup\": \"reclaim\", \"reclaim\": {\"timeout\": 5,"
			   " \"failed_reclaim_policy\": \"keep\"}}";
	msb_router_options o;
	char *sel = NULL;
	msb_error *err = NULL;
	cr_assert_eq(msb_router_options_from_json(json, strlen(json), &o, &sel, &err), 0, "%s",
		     msb_error_message(err));
	cr_assert_eq(o.version, MSB_ROUTER_OPTIONS_VERSION);
	cr_assert_eq(o.min_isolation, MSB_ISOLATION_CONTAINER);
	cr_assert_str_eq(sel, "ns");
	cr_assert_eq(o.selected, sel);
	cr_assert_eq(o.selection, MSB_SELECTION_FIXED);
	cr_assert_eq(o.denied_capabilities, MSB_CAP_HOST_TOOLS);
	cr_assert_eq(o.denied_identities, MSB_IDENTITY_USER);
	cr_assert_eq(o.min_isolation_scope, MSB_SCOPE_CALL);
	cr_assert_eq(o.min_cleanup, MSB_CLEANUP_RECLAIM);
	cr_assert_eq(o.reclaim.timeout, 5.0);
	cr_assert_eq(o.reclaim.failed_reclaim_policy, MSB_FAILED_RECLAIM_KEEP);
	cr_assert_null(o.observer);
	cr_assert_null(o.log);
	free(sel);

	/* {} is the defaults (5.1: floor microvm). */
	sel = (char *)1;
	cr_assert_eq(msb_router_options_from_json("{}", 2, &o, &sel, NULL), 0);
	cr_assert_null(sel);
	cr_assert_eq(o.min_isolation, MSB_ISOLATION_MICROVM);
	cr_assert_eq(o.selection, MSB_SELECTION_FIXED);
	cr_assert_null(o.selected);
	cr_assert_eq(o.denied_capabilities, 0);
	cr_assert_eq(o.denied_identities, 0);
	cr_assert_eq(o.min_isolation_scope, MSB_SCOPE_CONVERSATION);
	cr_assert_eq(o.min_cleanup, MSB_CLEANUP_DISPOSE);
	cr_assert_eq(o.reclaim.timeout, 30.0);
	cr_assert_eq(o.reclaim.failed_reclaim_policy, MSB_FAILED_RECLAIM_DISPOSE);
}

/* 1.4, 5.2: "process" is never a rung, refused at load with no backends. */
Test(router_json, process_floor_refused_1_4_5_2)
{
	options_refused("{\"min_isolation\": \"process\"}", MSB_E_VALUE, "`process` is not a rung");
	options_refused("{\"min_isolation\": \"VM\"}", MSB_E_VALUE, "min_isolation");
	router_refused("{\"min_isolation\": \"process\", \"backends\": []}", MSB_E_VALUE,
		       "not a rung");
}

/* 1.5: ranks are not a storage format. */
Test(router_json, ranks_are_not_rungs_1_5)
{
	options_refused("{\"min_isolation\": 3}", MSB_E_TYPE, "min_isolation");

	msb_router_options o = MSB_ROUTER_OPTIONS_INIT;
	o.min_isolation = MSB_ISOLATION_CONTAINER;
	o.denied_capabilities = MSB_CAP_FILES_DELETE | MSB_CAP_EXEC;
	o.selected = "ns";
	char *s = NULL;
	cr_assert_eq(msb_router_options_to_json(&o, &s, NULL), 0);
	cr_assert(strstr(s, "\"min_isolation\":\"container\""), "%s", s);
	cr_assert(strstr(s, "\"denied_capabilities\":[\"exec\",\"files_delete\"]"), "%s", s);
	cr_assert(strstr(s, "\"selection\":\"fixed\""), "%s", s);
	cr_assert(strstr(s, "\"selected\":\"ns\""), "%s", s);
	cr_assert_null(strstr(s, "\"min_isolation\":3"), "%s", s);

	/* Round trip. */
	msb_router_options back;
	char *sel = NULL;
	cr_assert_eq(msb_router_options_from_json(s, strlen(s), &back, &sel, NULL), 0);
	cr_assert_eq(back.min_isolation, MSB_ISOLATION_CONTAINER);
	cr_assert_eq(back.denied_capabilities, o.denied_capabilities);
	cr_assert_eq(back.reclaim.timeout, 30.0);
	cr_assert_str_eq(sel, "ns");
	free(sel);
	free(s);

	o.min_isolation = (msb_isolation)9;
	msb_error *err = NULL;
	cr_assert_eq(msb_router_options_to_json(&o, &s, &err), MSB_E_VALUE);
	msb_error_free(err);
}

/* 1.29, 5.3: deny lists parse strictly. */
Test(router_json, deny_lists_strict_5_3_1_29)
{
	options_refused("{\"denied_capabilities\": [\"netwrk\"]}", MSB_E_VALUE,
			"`netwrk` is not a capability");
	options_refused("{\"denied_identities\": [\"admin\"]}", MSB_E_VALUE,
			"`admin` is not an identity");
	options_refused("{\"denied_capabilities\": \"exec\"}", MSB_E_TYPE,
			"denied_capabilities must be a set");
}

Test(router_json, options_strict_keys_and_values)
{
	options_refused("{\"backends\": []}", MSB_E_VALUE, "unknown key `backends`");
	options_refused("{\"floor\": \"vm\"}", MSB_E_VALUE, "unknown key `floor`");
	options_refused("{\"selection\": \"round_robin\"}", MSB_E_VALUE, "selection");
	options_refused("{\"min_isolation_scope\": \"thread\"}", MSB_E_VALUE,
			"min_isolation_scope");
	options_refused("{\"min_cleanup\": \"nuke\"}", MSB_E_VALUE, "min_cleanup");
	options_refused("{\"reclaim\": {\"timeout\": 0}}", MSB_E_VALUE, "finite and positive");
	options_refused("{\"reclaim\": {\"timeout\": -1}}", MSB_E_VALUE, "finite and positive");
	options_refused("{\"reclaim\": {\"retries\": 1}}", MSB_E_VALUE, "unknown key `retries`");
	options_refused("{\"reclaim\": {\"failed_reclaim_policy\": \"ignore\"}}", MSB_E_VALUE,
			"failed_reclaim_policy");
	options_refused("{\"reclaim\": 30}", MSB_E_TYPE, "reclaim");
	options_refused("[1]", MSB_E_TYPE, "object");
}

/* 5.9: a pin and per-spec routing are refused together. */
Test(router_json, selected_with_per_spec_refused_5_9)
{
	options_refused("{\"selected\": \"b\", \"selection\": \"per_spec\"}", MSB_E_VALUE,
			"refused together");
}

/* ---- backends --------------------------------------------------------------------- */

Test(router_json, declared_backend_from_json)
{
	msb_backend *b =
		backend_ok("{\"type\": \"declared\", \"name\": \"third\", \"isolation\": "
			   "\"microvm\", \"declarations\": {\"egress_modes\": [\"closed\"],"
			   " \"os_families\": [\"posix\"]}}");
	cr_assert_str_eq(msb_backend_name(b), "third");
	cr_assert_str_eq(msb_backend_isolation(b), "microvm");
	cr_assert_eq(msb_backend_declarations(b)->egress_modes, MSB_EGRESS_CLOSED);
	cr_assert_eq(msb_backend_declarations(b)->os_families, MSB_OS_POSIX);
	msb_backend_unref(b);

	/* No declarations: DEFAULT_BACKEND_DECLARATIONS (4.9). */
	b = backend_ok("{\"type\": \"declared\", \"name\": \"bare\", \"isolation\": \"vm\"}");
	cr_assert_eq(msb_backend_declarations(b)->egress_modes, 0);
	msb_backend_unref(b);

	backend_refused("{\"type\": \"declared\", \"isolation\": \"vm\"}", MSB_E_VALUE, "name");
	backend_refused("{\"type\": \"declared\", \"name\": \"x\"}", MSB_E_BACKEND_NOT_PERMITTED,
			"declares no isolation");
}

Test(router_json, fake_backend_from_json)
{
	msb_backend *b = backend_ok("{\"type\": \"fake\"}");
	cr_assert_str_eq(msb_backend_name(b), "in-process");
	cr_assert_str_eq(msb_backend_isolation(b), "none");
	cr_assert_eq(msb_backend_declarations(b)->egress_modes,
		     MSB_FAKE_BACKEND_DECLARATIONS.egress_modes);
	msb_backend_unref(b);

	b = backend_ok("{\"type\": \"fake\", \"name\": \"f\", \"isolation\": \"container\", "
		       "\"declarations\": {\"capabilities\": [\"exec\", \"files_in\", "
		       "\"files_out\"], \"egress_modes\": [\"closed\"]}}");
	cr_assert_str_eq(msb_backend_name(b), "f");
	cr_assert_str_eq(msb_backend_isolation(b), "container");
	cr_assert_eq(msb_backend_declarations(b)->capabilities,
		     MSB_CAP_EXEC | MSB_CAP_FILES_IN | MSB_CAP_FILES_OUT);
	msb_backend_unref(b);
}

/* 4.10: a legacy top-level declaration key is refused with the key named. */
Test(router_json, legacy_top_level_keys_refused_4_10)
{
	static const char *const legacy[] = {"capabilities", "limits", "egress_modes",
					     "os_families"};
	for (size_t i = 0; i < 4; i++) {
		char json[256], phrase[96];
		snprintf(json, sizeof(json),
			 "{\"type\": \"declared\", \"name\": \"old\", \"isolation\": \"vm\", "
			 "\"%s\": []}",
			 legacy[i]);
		snprintf(phrase, sizeof(phrase),
			 "sandbox backend 'old' declares `%s` outside its "
			 "declarations",
			 legacy[i]);
		backend_refused(json, MSB_E_VALUE, phrase);
	}
	/* Even beside a declarations object: never silently replaced by a default. */
	backend_refused(
		"{\"type\": \"fake\", \"egress_modes\": [\"closed\"], \"declarations\": {}}",
		MSB_E_VALUE, "`egress_modes`");
}

Test(router_json, backend_strict_keys_and_types)
{
	backend_refused("{\"type\": \"nosuch\", \"name\": \"d\", \"isolation\": \"container\"}",
			MSB_E_VALUE, "`nosuch` is not a backend type");
	backend_refused("{\"name\": \"d\", \"isolation\": \"container\"}", MSB_E_VALUE,
			"type is required");
	backend_refused("{\"type\": \"declared\", \"name\": \"d\", \"isolation\": \"vm\", "
			"\"egress\": \"closed\"}",
			MSB_E_VALUE, "unknown key `egress`");
	backend_refused("{\"type\": \"declared\", \"name\": 5, \"isolation\": \"vm\"}", MSB_E_TYPE,
			"name");
	/* 4.11 through the backend loader: the set given as a string names the field. */
	backend_refused("{\"type\": \"declared\", \"name\": \"d\", \"isolation\": \"vm\", "
			"\"declarations\": {\"egress_modes\": \"closed\"}}",
			MSB_E_TYPE, "backend.declarations.egress_modes must be a set");
	/* 4.12 likewise. */
	backend_refused("{\"type\": \"declared\", \"name\": \"d\", \"isolation\": \"vm\", "
			"\"declarations\": {\"limits\": {\"max_files\": 1}}}",
			MSB_E_TRANSFER_LIMITS_NOT_PERMITTED, "{files_in, files_out}");
}

/* 4.12 (issue 16): `"declarations": null` is no BackendDeclarations value;
 * left out, the type's default applies. Inside a router it is judged when the
 * backend is resolved, like other unusable declarations (5.16). */
Test(router_json, null_declarations_refused_absent_default)
{
	backend_refused("{\"type\": \"declared\", \"name\": \"d\", \"isolation\": \"vm\", "
			"\"declarations\": null}",
			MSB_E_TYPE,
			"backend.declarations must be a BackendDeclarations object, not null");
	backend_refused("{\"type\": \"fake\", \"declarations\": {\"limits\": null}}",
			MSB_E_TRANSFER_LIMITS_NOT_PERMITTED, "backend.declarations.limits must be");
	router_refused("{\"backends\": [{\"type\": \"declared\", \"name\": \"d\", "
		       "\"isolation\": \"vm\", \"declarations\": {\"limits\": null}}]}",
		       MSB_E_TRANSFER_LIMITS_NOT_PERMITTED, "declarations.limits must be");
	msb_backend *b = backend_ok("{\"type\": \"declared\", \"name\": \"d\", "
				    "\"isolation\": \"vm\"}");
	const msb_declarations *d = msb_backend_declarations(b);
	cr_assert_eq(d->limits.files_in.max_files, MSB_DEFAULT_TRANSFER_LIMITS.max_files);
	msb_backend_unref(b);
}

/* ---- routers ------------------------------------------------------------------------- */

static struct {
	int n;
	char msg[2048];
} logs;

static void capture_log(void *ud, msb_log_level level, const char *component, const char *m)
{
	logs.n++;
	snprintf(logs.msg, sizeof(logs.msg), "%s", m);
}

Test(router_json, router_from_json_resolves)
{
	msb_router *r =
		router_ok("{\"min_isolation\": \"container\", \"selected\": \"b\", "
			  "\"backends\": [{\"type\": \"declared\", \"name\": \"a\", "
			  "\"isolation\": \"vm\"}, {\"type\": \"declared\", \"name\": \"b\", "
			  "\"isolation\": \"container\", \"declarations\": "
			  "{\"egress_modes\": [\"closed\"]}}]}",
			  NULL);
	cr_assert_eq(msb_router_backend_count(r), 2);
	cr_assert_str_eq(msb_backend_name(msb_router_backend(r)), "b");
	cr_assert_str_eq(msb_router_options_get(r)->selected, "b");
	msb_spec *s = NULL;
	cr_assert_eq(msb_spec_from_json("{\"kind\": \"k\"}", 13, &s, NULL), 0);
	cr_assert_eq(msb_router_ensure_can_serve(r, s, NULL), 0);

	/* A declared backend answers policy and refuses to acquire. */
	msb_key key = {"s", "t", "a", NULL};
	msb_sandbox *sb = NULL;
	msb_error *err = NULL;
	cr_assert_eq(msb_router_acquire(r, &key, s, NULL, &sb, &err), MSB_E_NOT_IMPLEMENTED);
	cr_assert(strstr(msb_error_message(err), "cannot acquire"));
	msb_error_free(err);
	msb_spec_unref(s);
	msb_router_free(r);

	/* No backends: disabled. */
	r = router_ok("{\"backends\": []}", NULL);
	cr_assert_not(msb_router_enabled(r));
	msb_router_free(r);
	r = router_ok("{}", NULL);
	cr_assert_not(msb_router_enabled(r));
	msb_router_free(r);

	router_refused("{\"backends\": {}}", MSB_E_TYPE, "router.backends must be a list");
	router_refused("{\"backends\": [\"fake\"]}", MSB_E_TYPE, "router.backends[0]");
	router_refused("{\"backends\": [{\"type\": \"fake\", \"colour\": 1}]}", MSB_E_VALUE,
		       "router.backends[0]: unknown key `colour`");
}

/* 1.4: a backend declaring "process" is refused at construction. */
Test(router_json, process_backend_refused_1_4)
{
	router_refused("{\"min_isolation\": \"none\", \"backends\": [{\"type\": \"declared\", "
		       "\"name\": \"legacy\", \"isolation\": \"process\"}]}",
		       MSB_E_BACKEND_NOT_PERMITTED, "'process', which is not a rung");
}

/*
 * 5.16, 23.10: what a backend declares is judged when the router resolves it.
 * FIXED [good, legacy] constructs (legacy is not resolved); PER_SPEC refuses,
 * naming the legacy attribute; FIXED pinned to legacy refuses.
 */
Test(router_json, declarations_judged_at_resolution_5_16)
{
	const char *backends = "\"backends\": [{\"type\": \"declared\", \"name\": \"good\", "
			       "\"isolation\": \"vm\", \"declarations\": {\"egress_modes\": "
			       "[\"closed\"]}}, {\"type\": \"declared\", \"name\": \"legacy\", "
			       "\"isolation\": \"vm\", \"egress_modes\": [\"closed\"]}]";
	char json[1024];
	snprintf(json, sizeof(json), "{%s}", backends);
	msb_router *r = router_ok(json, NULL);
	cr_assert_str_eq(msb_backend_name(msb_router_backend(r)), "good");
	msb_router_free(r);

	snprintf(json, sizeof(json), "{\"selection\": \"per_spec\", %s}", backends);
	router_refused(json, MSB_E_VALUE,
		       "sandbox backend 'legacy' declares `egress_modes` outside its declarations");

	snprintf(json, sizeof(json), "{\"selected\": \"legacy\", %s}", backends);
	router_refused(json, MSB_E_VALUE, "`egress_modes`");

	/* 4.11 likewise: a non-set declaration on an unresolved backend waits. */
	const char *nonset = "\"backends\": [{\"type\": \"declared\", \"name\": \"good\", "
			     "\"isolation\": \"vm\"}, {\"type\": \"declared\", \"name\": \"bad\", "
			     "\"isolation\": \"vm\", \"declarations\": {\"egress_modes\": "
			     "\"closed\"}}]";
	snprintf(json, sizeof(json), "{%s}", nonset);
	r = router_ok(json, NULL);
	msb_router_free(r);
	snprintf(json, sizeof(json), "{\"selection\": \"per_spec\", %s}", nonset);
	router_refused(json, MSB_E_TYPE,
		       "router.backends[1].declarations.egress_modes must be a set");
}

/* opts_extra carries what JSON cannot: here the log callback, which receives
 * the PER_SPEC construction warning (5.11). */
Test(router_json, opts_extra_supplies_the_log_5_11)
{
	msb_router_options extra = MSB_ROUTER_OPTIONS_INIT;
	extra.log = capture_log;
	extra.min_isolation = MSB_ISOLATION_NONE; /* ignored: JSON owns the options */
	logs.n = 0;
	msb_router *r = router_ok("{\"selection\": \"per_spec\", \"backends\": [{\"type\": "
				  "\"fake\", \"name\": \"c\", \"isolation\": \"container\"}, "
				  "{\"type\": \"fake\", \"name\": \"m\", \"isolation\": "
				  "\"microvm\"}]}",
				  &extra);
	cr_assert_eq(logs.n, 1);
	cr_assert(strstr(logs.msg, "'c' (container)"), "%s", logs.msg);
	cr_assert_null(strstr(logs.msg, "'m'"));
	cr_assert_eq(msb_router_options_get(r)->min_isolation, MSB_ISOLATION_MICROVM);
	msb_router_free(r);
}

/* ---- why this backend (issue 16) ----------------------------------------------------- */

static msb_spec *spec_of(const char *json)
{
	msb_spec *s = NULL;
	msb_error *err = NULL;
	cr_assert_eq(msb_spec_from_json(json, strlen(json), &s, &err), 0, "%s",
		     msb_error_message(err));
	return s;
}

static const char two_backends[] =
	"\"backends\": [{\"type\": \"declared\", \"name\": \"docker\", \"isolation\": "
	"\"container\", \"declarations\": {\"egress_modes\": [\"closed\"]}}, "
	"{\"type\": \"declared\", \"name\": \"firecracker\", \"isolation\": \"microvm\", "
	"\"declarations\": {\"egress_modes\": [\"allowlist\", \"closed\"]}}]}";

/* FIXED: the resolved backend and why; the others are never tried, and say so. */
Test(router_json, explain_fixed_names_the_pick_and_the_passed_over)
{
	char json[1024];
	snprintf(json, sizeof(json), "{\"min_isolation\": \"container\", %s", two_backends);
	msb_router *r = router_ok(json, NULL);
	msb_spec *s = spec_of("{\"kind\": \"k\"}");
	msb_route_explanation e;
	cr_assert_eq(msb_router_explain(r, s, &e, NULL), 0);
	cr_assert_eq(e.selection, MSB_SELECTION_FIXED);
	cr_assert_eq(e.code, 0);
	cr_assert_eq(e.n_steps, 2);
	cr_assert_str_eq(e.summary, "fixed selection picked 'docker' (the first registered "
				    "backend); it passes every check");
	cr_assert(e.steps[0].serves && e.steps[0].tried);
	cr_assert_str_eq(e.steps[0].reason, "passes every check");
	cr_assert(!e.steps[1].serves && !e.steps[1].tried);
	cr_assert_str_eq(e.steps[1].reason, "not tried: fixed selection asks only 'docker' (the "
					    "first registered backend)");
	msb_route_explanation_clear(&e);
	msb_spec_unref(s);

	/* Refused by the resolved backend: its refusal, and still nobody else. */
	s = spec_of("{\"kind\": \"k\", \"egress\": \"allowlist\", \"egress_allow\": [\"h\"]}");
	cr_assert_eq(msb_router_explain(r, s, &e, NULL), 0);
	cr_assert_eq(e.code, MSB_E_EGRESS_NOT_ENFORCED);
	cr_assert(strstr(e.summary, "which refuses the 'k' workload; no other backend is tried"),
		  "%s", e.summary);
	cr_assert(e.steps[0].tried && !e.steps[0].serves);
	cr_assert_eq(e.steps[0].code, MSB_E_EGRESS_NOT_ENFORCED);
	cr_assert(strstr(e.steps[0].reason, "cannot enforce the 'allowlist' egress"));
	cr_assert(!e.steps[1].tried);
	/* The same code resolve returns. */
	msb_error *err = NULL;
	cr_assert_eq(msb_router_resolve(r, s, NULL, NULL, &err), e.code);
	msb_error_free(err);
	char *text = NULL;
	cr_assert_eq(msb_route_explanation_to_json(&e, &text, NULL), 0);
	cr_assert(strstr(text, "\"error\":\"SandboxEgressNotEnforced\""), "%s", text);
	cr_assert(strstr(text, "\"selection\":\"fixed\""), "%s", text);
	cr_assert(strstr(text, "\"backend\":null"), "%s", text);
	free(text);
	msb_route_explanation_clear(&e);
	msb_spec_unref(s);
	msb_router_free(r);

	/* `selected` is the reason when it names the backend. */
	snprintf(json, sizeof(json), "{\"selected\": \"firecracker\", %s", two_backends);
	r = router_ok(json, NULL);
	s = spec_of("{\"kind\": \"k\"}");
	cr_assert_eq(msb_router_explain(r, s, &e, NULL), 0);
	cr_assert_str_eq(e.summary, "fixed selection picked 'firecracker' (named by `selected`); "
				    "it passes every check");
	cr_assert(strstr(e.steps[0].reason, "asks only 'firecracker' (named by `selected`)"));
	msb_route_explanation_clear(&e);
	msb_spec_unref(s);
	msb_router_free(r);
}

/* PER_SPEC: each refusal on the way, the pick, and the ones after it untried;
 * the host's denials stop the route before any backend. */
Test(router_json, explain_per_spec_and_denials)
{
	char json[1024];
	snprintf(json, sizeof(json),
		 "{\"min_isolation\": \"container\", \"selection\": \"per_spec\", "
		 "\"denied_identities\": [\"user\"], %s",
		 two_backends);
	msb_router *r = router_ok(json, NULL);
	msb_spec *s = spec_of("{\"kind\": \"k\", \"egress\": \"allowlist\", \"egress_allow\": "
			      "[\"h\"]}");
	msb_route_explanation e;
	cr_assert_eq(msb_router_explain(r, s, &e, NULL), 0);
	cr_assert_eq(e.code, 0);
	cr_assert_str_eq(e.summary, "per_spec selection picked 'firecracker', the first "
				    "registered backend that passes every check");
	cr_assert(e.steps[0].tried && !e.steps[0].serves);
	cr_assert(strstr(e.steps[0].reason, "sandbox backend 'docker' cannot enforce"));
	cr_assert(e.steps[1].serves);
	msb_route_explanation_clear(&e);
	msb_spec_unref(s);

	s = spec_of("{\"kind\": \"k\"}");
	cr_assert_eq(msb_router_explain(r, s, &e, NULL), 0);
	cr_assert(e.steps[0].serves);
	cr_assert_str_eq(e.steps[1].reason, "not tried: 'docker', registered earlier, serves");
	msb_route_explanation_clear(&e);
	msb_spec_unref(s);

	s = spec_of("{\"kind\": \"k\", \"isolation_scope\": \"call\"}");
	cr_assert_eq(msb_router_explain(r, s, &e, NULL), 0);
	cr_assert_eq(e.code, MSB_E_SCOPE_NOT_ENFORCED);
	cr_assert(strstr(e.summary, "found no registered backend that serves the 'k' workload"));
	cr_assert(e.steps[0].tried && e.steps[1].tried);
	msb_route_explanation_clear(&e);
	msb_spec_unref(s);

	s = spec_of("{\"kind\": \"k\", \"identities\": [\"user\"]}");
	cr_assert_eq(msb_router_explain(r, s, &e, NULL), 0);
	cr_assert_eq(e.code, MSB_E_IDENTITY_DENIED);
	cr_assert(strstr(e.summary, "the host's denials refuse it before any backend is asked"));
	cr_assert(!e.steps[0].tried && !e.steps[1].tried);
	msb_route_explanation_clear(&e);
	msb_spec_unref(s);
	msb_router_free(r);

	/* Disabled: no backend is configured. */
	r = router_ok("{}", NULL);
	s = spec_of("{\"kind\": \"k\"}");
	cr_assert_eq(msb_router_explain(r, s, &e, NULL), 0);
	cr_assert_eq(e.code, MSB_E_NO_BACKEND);
	cr_assert_eq(e.n_steps, 0);
	msb_route_explanation_clear(&e);
	msb_spec_unref(s);
	msb_router_free(r);
}
