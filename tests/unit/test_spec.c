/* SPDX-License-Identifier: Apache-2.0 */
/*
 * SandboxSpec and EgressRule (checklist section 3; section 24 row 7: an
 * immutable value built by a builder, copy-and-revalidate, derived
 * required capabilities).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <msb/spec.h>

#include "helpers.h"

/* Build or fail the test. */
static msb_spec *build(msb_spec_builder *b)
{
	msb_spec *s = NULL;
	msb_error *e = NULL;
	int r = msb_spec_build(b, &s, &e);
	cr_assert_eq(r, 0, "build failed: %s", e ? msb_error_message(e) : "?");
	cr_assert_not_null(s);
	return s;
}

static msb_spec *default_spec(void)
{
	msb_spec_builder *b = msb_spec_builder_new("k");
	msb_spec *s = build(b);
	msb_spec_builder_free(b);
	return s;
}

static msb_spec_builder *allowlist_builder(void)
{
	msb_spec_builder *b = msb_spec_builder_new("k");
	msb_spec_builder_set_egress(b, MSB_EGRESS_ALLOWLIST);
	return b;
}

static void assert_entry(const msb_spec *s, size_t i, const char *host, const char *methods)
{
	const char *h;
	const char *const *m;
	size_t n;
	msb_spec_egress_entry(s, i, &h, &m, &n);
	cr_assert_str_eq(h, host);
	if (!methods) {
		cr_assert_null(m, "entry %zu should be a bare host", i);
		cr_assert_eq(n, 0);
		return;
	}
	cr_assert_not_null(m, "entry %zu should be method-scoped", i);
	char joined[256] = "";
	size_t used = 0;
	for (size_t j = 0; j < n && used < sizeof(joined); j++)
		used += (size_t)snprintf(joined + used, sizeof(joined) - used, "%s%s", j ? "," : "",
					 m[j]);
	cr_assert_str_eq(joined, methods);
}

/* 3.1: kind is required. */
Test(spec, kind_required_3_1)
{
	msb_spec_builder *b = msb_spec_builder_new(NULL);
	cr_assert_not_null(b);
	msb_spec *s = NULL;
	assert_refused(msb_spec_build(b, &s, &e_), MSB_E_VALUE, "a spec needs a kind");
	cr_assert_null(s);
	msb_spec_builder_set_kind(b, "");
	assert_refused(msb_spec_build(b, &s, &e_), MSB_E_VALUE, "kind must not be empty");
	msb_spec_builder_set_kind(b, "codeact");
	s = build(b);
	cr_assert_str_eq(msb_spec_kind(s), "codeact");
	msb_spec_unref(s);
	msb_spec_builder_free(b);
}

/* 3.1: two specs differing only in kind are not equal (kind is identity). */
Test(spec, kind_is_identity_3_1)
{
	msb_spec_builder *b = msb_spec_builder_new("a");
	msb_spec *a = build(b);
	msb_spec_builder_set_kind(b, "b");
	msb_spec *c = build(b);
	cr_assert_not(msb_spec_equal(a, c));
	msb_spec_unref(a);
	msb_spec_unref(c);
	msb_spec_builder_free(b);
}

/* 3.2: image and image_id pass through unchanged, absent by default. */
Test(spec, image_passthrough_3_2)
{
	msb_spec *d = default_spec();
	cr_assert_null(msb_spec_image(d));
	cr_assert_null(msb_spec_image_id(d));
	msb_spec_unref(d);

	msb_spec_builder *b = msb_spec_builder_new("k");
	msb_spec_builder_set_image(b, "x:1");
	msb_spec_builder_set_image_id(b, "sha256:abc");
	msb_spec *s = build(b);
	cr_assert_str_eq(msb_spec_image(s), "x:1");
	cr_assert_str_eq(msb_spec_image_id(s), "sha256:abc");
	msb_spec_unref(s);
	msb_spec_builder_set_image(b, NULL);
	s = build(b);
	cr_assert_null(msb_spec_image(s));
	msb_spec_unref(s);
	msb_spec_builder_free(b);
}

/* 3.3: egress defaults to CLOSED. */
Test(spec, egress_default_closed_3_3)
{
	msb_spec *s = default_spec();
	cr_assert_eq(msb_spec_egress(s), MSB_EGRESS_CLOSED);
	msb_spec_unref(s);
}

/* 3.4: egress_allow defaults to empty. */
Test(spec, egress_allow_default_empty_3_4)
{
	msb_spec *s = default_spec();
	cr_assert_eq(msb_spec_egress_allow_count(s), 0);
	const char *h = "x";
	msb_spec_egress_entry(s, 0, &h, NULL, NULL);
	cr_assert_null(h, "out of range gives nothing");
	msb_spec_unref(s);
}

/* 3.5: hosts require ALLOWLIST; the message names them, method-scoped
 * entries rendered as `host (GET, POST)`. */
Test(spec, hosts_require_allowlist_3_5)
{
	msb_spec_builder *b = msb_spec_builder_new("k");
	msb_spec_builder_add_egress_host(b, "example.invalid");
	msb_spec *s = NULL;
	assert_refused(msb_spec_build(b, &s, &e_), MSB_E_VALUE,
		       "egress_allow without egress `allowlist` is refused");
	assert_refused(msb_spec_build(b, &s, &e_), MSB_E_VALUE, "`example.invalid`");
	assert_refused(msb_spec_build(b, &s, &e_), MSB_E_VALUE, "egress is `closed`");
	cr_assert_null(s);

	msb_spec_builder_set_egress(b, MSB_EGRESS_ALLOWLIST);
	s = build(b);
	cr_assert_eq(msb_spec_egress_allow_count(s), 1);
	msb_spec_unref(s);

	/* A method-scoped rule with CLOSED: the rule is rendered, not a type error. */
	msb_spec_builder_clear_egress_allow(b);
	msb_spec_builder_set_egress(b, MSB_EGRESS_CLOSED);
	const char *m[] = {"GET", "POST"};
	msb_spec_builder_add_egress_rule(b, "h", m, 2);
	msb_spec_builder_add_egress_host(b, "pypi.org");
	assert_refused(msb_spec_build(b, &s, &e_), MSB_E_VALUE,
		       "names `h (GET, POST)`, `pypi.org`");

	/* UNRESTRICTED with hosts is refused too: the list only means allowlist. */
	msb_spec_builder_set_egress(b, MSB_EGRESS_UNRESTRICTED);
	assert_refused(msb_spec_build(b, &s, &e_), MSB_E_VALUE, "egress is `unrestricted`");
	msb_spec_builder_free(b);
}

/* 3.6: EgressRule(host, methods): NULL = every method, empty refused. */
Test(spec, rule_shape_3_6)
{
	msb_spec_builder *b = allowlist_builder();
	const char *get[] = {"GET"};
	msb_spec_builder_add_egress_rule(b, "api.example.com", get, 1);
	msb_spec *s = build(b);
	assert_entry(s, 0, "api.example.com", "GET");
	msb_spec_unref(s);

	msb_spec_builder_clear_egress_allow(b);
	const char *none[] = {NULL};
	msb_spec_builder_add_egress_rule(b, "h", none, 0);
	assert_refused(msb_spec_build(b, &s, &e_), MSB_E_VALUE,
		       "the rule for `h` names no methods");
	msb_spec_builder_clear_egress_allow(b);
	msb_spec_builder_add_egress_rule(b, "h", none, 1);
	assert_refused(msb_spec_build(b, &s, &e_), MSB_E_VALUE, "has a missing method");
	msb_spec_builder_clear_egress_allow(b);
	msb_spec_builder_add_egress_host(b, NULL);
	assert_refused(msb_spec_build(b, &s, &e_), MSB_E_VALUE,
		       "egress_allow[0]: an entry needs a host");
	msb_spec_builder_free(b);
}

/* 3.7: methods are uppercase RFC 9110 tokens. */
Test(spec, rule_methods_uppercase_3_7)
{
	msb_spec_builder *b = allowlist_builder();
	msb_spec *s = NULL;
	const char *lower[] = {"get"};
	msb_spec_builder_add_egress_rule(b, "h", lower, 1);
	assert_refused(msb_spec_build(b, &s, &e_), MSB_E_VALUE,
		       "method `get` in the rule for `h` is not uppercase");

	msb_spec_builder_clear_egress_allow(b);
	const char *mixed[] = {"Get"};
	msb_spec_builder_add_egress_rule(b, "h", mixed, 1);
	assert_refused(msb_spec_build(b, &s, &e_), MSB_E_VALUE, "`Get`");
	assert_refused(msb_spec_build(b, &s, &e_), MSB_E_VALUE, "a rule names a verb");

	const char *bad[] = {"GET/foo", "GET:", "GET,POST", "GE T", ""};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		msb_spec_builder_clear_egress_allow(b);
		msb_spec_builder_add_egress_rule(b, "h", &bad[i], 1);
		assert_refused(msb_spec_build(b, &s, &e_), MSB_E_VALUE, "is not an HTTP token");
	}

	msb_spec_builder_clear_egress_allow(b);
	const char *ok[] = {"GET", "PROPFIND"};
	msb_spec_builder_add_egress_rule(b, "h", ok, 2);
	s = build(b);
	assert_entry(s, 0, "h", "GET,PROPFIND");
	msb_spec_unref(s);
	msb_spec_builder_free(b);
}

/* 3.8: a method repeated within one rule is refused. */
Test(spec, rule_duplicate_method_3_8)
{
	msb_spec_builder *b = allowlist_builder();
	const char *m[] = {"GET", "POST", "GET"};
	msb_spec_builder_add_egress_rule(b, "h", m, 3);
	msb_spec *s = NULL;
	assert_refused(msb_spec_build(b, &s, &e_), MSB_E_VALUE,
		       "the rule for `h` repeats the method `GET`");
	msb_spec_builder_free(b);
}

/* 3.9: hosts not validated; stored spelling unchanged. */
Test(spec, hosts_not_validated_3_9)
{
	msb_spec_builder *b = allowlist_builder();
	msb_spec_builder_add_egress_host(b, "Example.COM");
	msb_spec_builder_add_egress_host(b, "not a hostname!:99/x");
	msb_spec *s = build(b);
	cr_assert_eq(msb_spec_egress_allow_count(s), 2);
	assert_entry(s, 0, "Example.COM", NULL);
	assert_entry(s, 1, "not a hostname!:99/x", NULL);
	msb_spec_unref(s);
	msb_spec_builder_free(b);
}

/* 3.10: EgressRule(h, NULL) normalises to the bare host. */
Test(spec, all_methods_rule_is_bare_host_3_10)
{
	msb_spec_builder *b = allowlist_builder();
	msb_spec_builder_add_egress_rule(b, "h", NULL, 0);
	msb_spec_builder_add_egress_rule(b, "g", NULL, 5); /* n ignored without methods */
	msb_spec *s = build(b);
	cr_assert_eq(msb_spec_egress_allow_count(s), 2);
	assert_entry(s, 0, "h", NULL);
	assert_entry(s, 1, "g", NULL);
	cr_assert_eq(msb_spec_required_capabilities(s) & MSB_CAP_EGRESS_METHODS, 0);

	/* Same value as a spec built from bare hosts. */
	msb_spec_builder *b2 = allowlist_builder();
	msb_spec_builder_add_egress_host(b2, "h");
	msb_spec_builder_add_egress_host(b2, "g");
	msb_spec *s2 = build(b2);
	cr_assert(msb_spec_equal(s, s2));
	msb_spec_unref(s);
	msb_spec_unref(s2);
	msb_spec_builder_free(b);
	msb_spec_builder_free(b2);
}

/* 3.11: equivalent entries collapse onto the first spelling; method sets
 * compare order-insensitively. */
Test(spec, equivalent_entries_collapse_3_11)
{
	msb_spec_builder *b = allowlist_builder();
	msb_spec_builder_add_egress_host(b, "a.com");
	msb_spec_builder_add_egress_host(b, "A.com");
	msb_spec_builder_add_egress_rule(b, "A.COM", NULL, 0); /* all-methods = bare */
	msb_spec *s = build(b);
	cr_assert_eq(msb_spec_egress_allow_count(s), 1);
	assert_entry(s, 0, "a.com", NULL);
	msb_spec_unref(s);

	/* Upper case first: the first spelling still wins, either side folds. */
	msb_spec_builder_clear_egress_allow(b);
	msb_spec_builder_add_egress_host(b, "B.Com");
	msb_spec_builder_add_egress_host(b, "b.cOM");
	s = build(b);
	cr_assert_eq(msb_spec_egress_allow_count(s), 1);
	assert_entry(s, 0, "B.Com", NULL);
	msb_spec_unref(s);

	msb_spec_builder_clear_egress_allow(b);
	const char *gp[] = {"GET", "POST"}, *pg[] = {"POST", "GET"};
	msb_spec_builder_add_egress_rule(b, "h", gp, 2);
	msb_spec_builder_add_egress_host(b, "other");
	msb_spec_builder_add_egress_rule(b, "H", pg, 2);
	s = build(b);
	cr_assert_eq(msb_spec_egress_allow_count(s), 2);
	assert_entry(s, 0, "h", "GET,POST");
	assert_entry(s, 1, "other", NULL);
	msb_spec_unref(s);
	msb_spec_builder_free(b);
}

/* 3.12: conflicting policies for one host are refused. */
Test(spec, conflicting_policies_refused_3_12)
{
	msb_spec *s = NULL;
	const char *get[] = {"GET"}, *post[] = {"POST"}, *gp[] = {"GET", "POST"};

	msb_spec_builder *b = allowlist_builder();
	msb_spec_builder_add_egress_host(b, "h");
	msb_spec_builder_add_egress_rule(b, "h", get, 1);
	assert_refused(msb_spec_build(b, &s, &e_), MSB_E_VALUE,
		       "conflicting policies for one host: `h` and `h (GET)`");
	msb_spec_builder_free(b);

	b = allowlist_builder();
	msb_spec_builder_add_egress_rule(b, "h", get, 1);
	msb_spec_builder_add_egress_rule(b, "H", post, 1);
	assert_refused(msb_spec_build(b, &s, &e_), MSB_E_VALUE, "`h (GET)` and `H (POST)`");
	msb_spec_builder_free(b);

	/* A superset is a different policy, not a collapse. */
	b = allowlist_builder();
	msb_spec_builder_add_egress_rule(b, "h", get, 1);
	msb_spec_builder_add_egress_rule(b, "h", gp, 2);
	assert_refused(msb_spec_build(b, &s, &e_), MSB_E_VALUE, "conflicting policies");
	msb_spec_builder_free(b);

	/* Narrowing rule first, bare host second. */
	b = allowlist_builder();
	msb_spec_builder_add_egress_rule(b, "h", get, 1);
	msb_spec_builder_add_egress_host(b, "H");
	assert_refused(msb_spec_build(b, &s, &e_), MSB_E_VALUE, "`h (GET)` and `H`");
	msb_spec_builder_free(b);
	cr_assert_null(s);
}

/* 3.13: a surviving method-scoped rule derives EGRESS_METHODS. */
Test(spec, derived_egress_methods_3_13)
{
	msb_spec_builder *b = allowlist_builder();
	const char *get[] = {"GET"};
	msb_spec_builder_add_egress_rule(b, "h", get, 1);
	msb_spec *s = build(b);
	cr_assert(msb_spec_required_capabilities(s) & MSB_CAP_EGRESS_METHODS);
	cr_assert_eq(msb_spec_requires(s), MSB_DEFAULT_CAPABILITIES, "requires is not rewritten");
	cr_assert_eq(msb_spec_required_capabilities(s),
		     MSB_DEFAULT_CAPABILITIES | MSB_CAP_EGRESS_METHODS);
	msb_spec_unref(s);

	msb_spec_builder_clear_egress_allow(b);
	msb_spec_builder_add_egress_host(b, "h");
	s = build(b);
	cr_assert_eq(msb_spec_required_capabilities(s) & MSB_CAP_EGRESS_METHODS, 0);
	cr_assert_eq(msb_spec_required_capabilities(s), MSB_DEFAULT_CAPABILITIES);
	msb_spec_unref(s);
	msb_spec_builder_free(b);
}

/* 3.14: required_capabilities is recomputed on a copy with changes;
 * explicit requires are preserved. */
Test(spec, required_capabilities_derived_on_copy_3_14)
{
	msb_spec_builder *b = allowlist_builder();
	msb_spec_builder_set_requires(b, MSB_CAP_EXEC | MSB_CAP_FILES_IN | MSB_CAP_FILES_OUT);
	const char *get[] = {"GET"};
	msb_spec_builder_add_egress_rule(b, "h", get, 1);
	msb_spec *scoped = build(b);
	msb_spec_builder_free(b);
	cr_assert(msb_spec_required_capabilities(scoped) & MSB_CAP_EGRESS_METHODS);

	msb_spec_builder *copy = msb_spec_builder_from(scoped);
	msb_spec_builder_clear_egress_allow(copy);
	msb_spec_builder_add_egress_host(copy, "h");
	msb_spec *bare = build(copy);
	cr_assert_eq(msb_spec_required_capabilities(bare) & MSB_CAP_EGRESS_METHODS, 0,
		     "EGRESS_METHODS no longer required");
	cr_assert_eq(msb_spec_requires(bare), MSB_CAP_EXEC | MSB_CAP_FILES_IN | MSB_CAP_FILES_OUT);
	cr_assert_eq(msb_spec_required_capabilities(bare),
		     MSB_CAP_EXEC | MSB_CAP_FILES_IN | MSB_CAP_FILES_OUT);
	msb_spec_unref(scoped);
	msb_spec_unref(bare);
	msb_spec_builder_free(copy);
}

/* 3.15: requires defaults to DEFAULT_CAPABILITIES; unknown bits refused. */
Test(spec, requires_default_3_15)
{
	msb_spec *s = default_spec();
	cr_assert_eq(msb_spec_requires(s), MSB_CAP_EXEC | MSB_CAP_FILES_IN);
	msb_spec_unref(s);

	msb_spec_builder *b = msb_spec_builder_new("k");
	msb_spec_builder_set_requires(b, 0);
	s = build(b);
	cr_assert_eq(msb_spec_requires(s), 0, "an explicit empty set is kept");
	msb_spec_unref(s);
	msb_spec_builder_set_requires(b, MSB_CAP_EXEC | (1u << 20));
	s = NULL;
	assert_refused(msb_spec_build(b, &s, &e_), MSB_E_VALUE, "name no capability");
	msb_spec_builder_free(b);
}

/* 3.16: min_isolation absent is not NONE. */
Test(spec, min_isolation_absent_not_none_3_16)
{
	msb_spec *s = default_spec();
	msb_isolation v = MSB_ISOLATION_VM;
	cr_assert_not(msb_spec_min_isolation(s, &v), "absent by default");
	cr_assert_eq(v, MSB_ISOLATION_VM, "absent leaves the output alone");
	msb_spec_unref(s);

	msb_spec_builder *b = msb_spec_builder_new("k");
	msb_spec_builder_set_min_isolation(b, MSB_ISOLATION_NONE);
	s = build(b);
	cr_assert(msb_spec_min_isolation(s, &v), "none is an opinion");
	cr_assert_eq(v, MSB_ISOLATION_NONE);
	/* The effective floor is the stricter of host and spec. */
	cr_assert_eq(msb_isolation_stricter(MSB_ISOLATION_CONTAINER, v), MSB_ISOLATION_CONTAINER);
	msb_spec_unref(s);

	msb_spec_builder_set_min_isolation(b, MSB_ISOLATION_MICROVM);
	s = build(b);
	cr_assert(msb_spec_min_isolation(s, &v));
	cr_assert_eq(msb_isolation_stricter(MSB_ISOLATION_CONTAINER, v), MSB_ISOLATION_MICROVM);
	msb_spec_unref(s);

	msb_spec_builder_clear_min_isolation(b);
	s = build(b);
	cr_assert_not(msb_spec_min_isolation(s, NULL));
	msb_spec_unref(s);
	msb_spec_builder_free(b);
}

/* 3.17: work_dir default /maf-sandbox/work; NULL = backend allocates. */
Test(spec, work_dir_default_and_null_3_17)
{
	msb_spec *s = default_spec();
	cr_assert_str_eq(msb_spec_work_dir(s), "/maf-sandbox/work");
	cr_assert_str_eq(MSB_DEFAULT_WORK_DIR, "/maf-sandbox/work");
	msb_spec_unref(s);

	msb_spec_builder *b = msb_spec_builder_new("k");
	msb_spec_builder_set_work_dir(b, NULL);
	s = build(b);
	cr_assert_null(msb_spec_work_dir(s));
	msb_spec *d = default_spec();
	cr_assert_not(msb_spec_equal(s, d), "NULL work_dir differs from the default");
	msb_spec_unref(d);
	msb_spec_unref(s);

	msb_spec_builder_set_work_dir(b, "/workspace");
	s = build(b);
	cr_assert_str_eq(msb_spec_work_dir(s), "/workspace");
	msb_spec_unref(s);
	msb_spec_builder_free(b);
}

/* 3.18: work_dir is guest-native, never validated against an OS family. */
Test(spec, work_dir_not_validated_3_18)
{
	msb_spec_builder *b = msb_spec_builder_new("k");
	msb_spec_builder_set_work_dir(b, "C:/agent/work");
	msb_spec *s = build(b);
	cr_assert_str_eq(msb_spec_work_dir(s), "C:/agent/work");
	cr_assert_not(msb_spec_requires_os_family(s, NULL));
	msb_spec_unref(s);
	msb_spec_builder_set_requires_os_family(b, MSB_OS_POSIX);
	msb_spec_builder_set_work_dir(b, "C:\\agent\\work");
	s = build(b);
	cr_assert_str_eq(msb_spec_work_dir(s), "C:\\agent\\work");
	msb_spec_unref(s);
	msb_spec_builder_free(b);
}

/* 3.19: labels are a string map, default empty, last write wins. */
Test(spec, labels_3_19)
{
	msb_spec *s = default_spec();
	cr_assert_eq(msb_spec_label_count(s), 0);
	cr_assert_null(msb_spec_label_get(s, "team"));
	msb_spec_unref(s);

	msb_spec_builder *b = msb_spec_builder_new("k");
	msb_spec_builder_set_label(b, "team", "y");
	msb_spec_builder_set_label(b, "cost", "c1");
	msb_spec_builder_set_label(b, "team", "x");
	s = build(b);
	cr_assert_eq(msb_spec_label_count(s), 2);
	cr_assert_str_eq(msb_spec_label_get(s, "team"), "x");
	cr_assert_str_eq(msb_spec_label_get(s, "cost"), "c1");
	cr_assert_null(msb_spec_label_get(s, "absent"));
	const char *k, *v;
	msb_spec_label(s, 0, &k, &v);
	cr_assert_str_eq(k, "cost", "sorted by key");
	msb_spec_unref(s);

	msb_spec_builder_clear_labels(b);
	s = build(b);
	cr_assert_eq(msb_spec_label_count(s), 0);
	msb_spec_unref(s);

	msb_spec_builder_set_label(b, "team", NULL);
	s = NULL;
	assert_refused(msb_spec_build(b, &s, &e_), MSB_E_VALUE, "label `team` has no value");
	msb_spec_builder_free(b);
}

/* 3.20 / 12.1: declared outputs copied; defaults per MSB_DECLARED_OUTPUT_INIT. */
Test(spec, declared_outputs_3_20)
{
	msb_spec *s = default_spec();
	cr_assert_eq(msb_spec_declared_output_count(s), 0);
	cr_assert_null(msb_spec_declared_output(s, 0));
	msb_spec_unref(s);

	msb_spec_builder *b = msb_spec_builder_new("k");
	char path[] = "d.png";
	msb_declared_output o = MSB_DECLARED_OUTPUT_INIT;
	o.path = path;
	msb_spec_builder_add_declared_output(b, &o);
	msb_declared_output c = MSB_DECLARED_OUTPUT_INIT;
	c.path = "result.json";
	c.media_type = "application/json";
	c.required = false;
	c.name = "r.json";
	c.disposition = MSB_DISPOSITION_CONSUME;
	msb_spec_builder_add_declared_output(b, &c);
	path[0] = 'X'; /* the builder copied the string */
	s = build(b);
	cr_assert_eq(msb_spec_declared_output_count(s), 2);
	const msb_declared_output *d0 = msb_spec_declared_output(s, 0);
	cr_assert_str_eq(d0->path, "d.png");
	cr_assert_null(d0->media_type);
	cr_assert(d0->required);
	cr_assert_null(d0->name);
	cr_assert_eq(d0->disposition, MSB_DISPOSITION_LAND);
	const msb_declared_output *d1 = msb_spec_declared_output(s, 1);
	cr_assert_str_eq(d1->path, "result.json");
	cr_assert_str_eq(d1->media_type, "application/json");
	cr_assert_not(d1->required);
	cr_assert_str_eq(d1->name, "r.json");
	cr_assert_eq(d1->disposition, MSB_DISPOSITION_CONSUME);
	msb_spec_unref(s);

	msb_spec_builder_clear_declared_outputs(b);
	msb_declared_output bad = MSB_DECLARED_OUTPUT_INIT;
	msb_spec_builder_add_declared_output(b, &bad);
	s = NULL;
	assert_refused(msb_spec_build(b, &s, &e_), MSB_E_VALUE,
		       "declared_outputs[0]: a declared output needs a path");
	msb_spec_builder_clear_declared_outputs(b);
	bad.path = "x";
	bad.disposition = (msb_output_disposition)7;
	msb_spec_builder_add_declared_output(b, &bad);
	assert_refused(msb_spec_build(b, &s, &e_), MSB_E_VALUE, "7 is not an output disposition");
	msb_spec_builder_clear_declared_outputs(b);
	msb_declared_output zeroed = {0};
	zeroed.path = "x";
	msb_spec_builder_add_declared_output(b, &zeroed);
	assert_refused(msb_spec_build(b, &s, &e_), MSB_E_VALUE, "version 0 is not supported");
	msb_spec_builder_free(b);
}

/* 3.21: files_in / files_out default to DEFAULT_TRANSFER_LIMITS. */
Test(spec, transfer_limits_3_21)
{
	msb_spec *s = default_spec();
	msb_transfer_limits in = msb_spec_files_in(s), out = msb_spec_files_out(s);
	cr_assert_eq(memcmp(&in, &MSB_DEFAULT_TRANSFER_LIMITS, sizeof(in)), 0);
	cr_assert_eq(memcmp(&out, &MSB_DEFAULT_TRANSFER_LIMITS, sizeof(out)), 0);
	msb_spec_unref(s);

	msb_spec_builder *b = msb_spec_builder_new("k");
	msb_transfer_limits l = {1, 2, 3};
	msb_spec_builder_set_files_out(b, l);
	s = build(b);
	out = msb_spec_files_out(s);
	cr_assert_eq(out.max_bytes_per_file, 1);
	cr_assert_eq(out.max_total_bytes, 2);
	cr_assert_eq(out.max_files, 3);
	in = msb_spec_files_in(s);
	cr_assert_eq(in.max_files, 64);
	msb_spec_unref(s);
	msb_spec_builder_free(b);
}

/* 3.22: outputs_named_at_call_time defaults false. */
Test(spec, outputs_named_at_call_time_3_22)
{
	msb_spec *s = default_spec();
	cr_assert_not(msb_spec_outputs_named_at_call_time(s));
	msb_spec_unref(s);
	msb_spec_builder *b = msb_spec_builder_new("k");
	msb_spec_builder_set_outputs_named_at_call_time(b, true);
	s = build(b);
	cr_assert(msb_spec_outputs_named_at_call_time(s));
	msb_spec_unref(s);
	msb_spec_builder_free(b);
}

/* 3.23: identities default empty; only app and user bits. */
Test(spec, identities_3_23)
{
	msb_spec *s = default_spec();
	cr_assert_eq(msb_spec_identities(s), 0);
	msb_spec_unref(s);
	msb_spec_builder *b = msb_spec_builder_new("k");
	msb_spec_builder_set_identities(b, MSB_IDENTITY_APP);
	s = build(b);
	cr_assert_eq(msb_spec_identities(s), MSB_IDENTITY_APP);
	msb_spec_unref(s);
	msb_spec_builder_set_identities(b, MSB_IDENTITY_APP | 8u);
	s = NULL;
	assert_refused(msb_spec_build(b, &s, &e_), MSB_E_VALUE, "identities: bits 0x8");
	msb_spec_builder_free(b);
}

/* 3.24: requires_os_family absent by default. */
Test(spec, requires_os_family_3_24)
{
	msb_spec *s = default_spec();
	msb_os_family f = MSB_OS_WINDOWS;
	cr_assert_not(msb_spec_requires_os_family(s, &f));
	msb_spec_unref(s);
	msb_spec_builder *b = msb_spec_builder_new("k");
	msb_spec_builder_set_requires_os_family(b, MSB_OS_POSIX);
	s = build(b);
	cr_assert(msb_spec_requires_os_family(s, &f));
	cr_assert_eq(f, MSB_OS_POSIX);
	msb_spec_unref(s);
	msb_spec_builder_clear_requires_os_family(b);
	s = build(b);
	cr_assert_not(msb_spec_requires_os_family(s, NULL));
	msb_spec_unref(s);
	msb_spec_builder_free(b);
}

/* 3.25: isolation_scope default CONVERSATION. */
Test(spec, isolation_scope_3_25)
{
	msb_spec *s = default_spec();
	cr_assert_eq(msb_spec_isolation_scope(s), MSB_SCOPE_CONVERSATION);
	msb_spec_unref(s);
	msb_spec_builder *b = msb_spec_builder_new("k");
	msb_spec_builder_set_isolation_scope(b, MSB_SCOPE_CALL);
	s = build(b);
	cr_assert_eq(msb_spec_isolation_scope(s), MSB_SCOPE_CALL);
	msb_spec_unref(s);
	msb_spec_builder_free(b);
}

/* 3.26 / 3.27 / DESIGN 9.14: the advisory flags and min_cleanup. */
Test(spec, flags_and_min_cleanup_3_26_3_27)
{
	msb_spec *s = default_spec();
	cr_assert_not(msb_spec_confined_to_guest_call_path(s));
	cr_assert_not(msb_spec_exclusive_admission(s));
	cr_assert_not(msb_spec_min_cleanup(s, NULL), "min_cleanup: no opinion by default");
	msb_spec_unref(s);

	msb_spec_builder *b = msb_spec_builder_new("k");
	msb_spec_builder_set_confined_to_guest_call_path(b, true);
	msb_spec_builder_set_exclusive_admission(b, true);
	msb_spec_builder_set_min_cleanup(b, MSB_CLEANUP_RESET);
	s = build(b);
	cr_assert(msb_spec_confined_to_guest_call_path(s));
	cr_assert(msb_spec_exclusive_admission(s));
	msb_cleanup c;
	cr_assert(msb_spec_min_cleanup(s, &c));
	cr_assert_eq(c, MSB_CLEANUP_RESET);
	msb_spec_unref(s);
	msb_spec_builder_clear_min_cleanup(b);
	s = build(b);
	cr_assert_not(msb_spec_min_cleanup(s, NULL));
	msb_spec_unref(s);
	msb_spec_builder_free(b);
}

/* Out-of-range enum values given to setters are refused at build. */
Test(spec, bad_enum_values_refused_at_build_3_28)
{
	msb_spec *s = NULL;
	msb_spec_builder *b = msb_spec_builder_new("k");
	msb_spec_builder_set_egress(b, (msb_egress)0);
	assert_refused(msb_spec_build(b, &s, &e_), MSB_E_VALUE, "egress: 0 is not an egress mode");
	msb_spec_builder_set_egress(b, (msb_egress)(MSB_EGRESS_CLOSED | MSB_EGRESS_ALLOWLIST));
	assert_refused(msb_spec_build(b, &s, &e_), MSB_E_VALUE, "is not an egress mode");
	msb_spec_builder_set_egress(b, MSB_EGRESS_CLOSED);

	msb_spec_builder_set_min_isolation(b, (msb_isolation)7);
	assert_refused(msb_spec_build(b, &s, &e_), MSB_E_VALUE, "min_isolation: 7 is not a rung");
	msb_spec_builder_set_min_isolation(b, MSB_ISOLATION_VM);

	msb_spec_builder_set_isolation_scope(b, (msb_isolation_scope)4);
	assert_refused(msb_spec_build(b, &s, &e_), MSB_E_VALUE, "not an isolation scope");
	msb_spec_builder_set_isolation_scope(b, MSB_SCOPE_CALL);

	msb_spec_builder_set_requires_os_family(b, (msb_os_family)3);
	assert_refused(msb_spec_build(b, &s, &e_), MSB_E_VALUE, "not an os family");
	msb_spec_builder_set_requires_os_family(b, MSB_OS_WINDOWS);

	msb_spec_builder_set_min_cleanup(b, (msb_cleanup)3);
	assert_refused(msb_spec_build(b, &s, &e_), MSB_E_VALUE, "not a cleanup rung");
	msb_spec_builder_set_min_cleanup(b, MSB_CLEANUP_DISPOSE);

	cr_assert_null(s);
	s = build(b); /* every bad value replaced: builds */
	msb_spec_unref(s);
	msb_spec_builder_free(b);
}

/* 3.28: changes go through a copy that re-runs validation. */
Test(spec, copy_revalidates_3_28)
{
	msb_spec *closed = default_spec();
	msb_spec_builder *copy = msb_spec_builder_from(closed);
	msb_spec_builder_add_egress_host(copy, "h");
	msb_spec *s = NULL;
	assert_refused(msb_spec_build(copy, &s, &e_), MSB_E_VALUE,
		       "egress_allow without egress `allowlist`");
	cr_assert_null(s);
	/* The original is untouched. */
	cr_assert_eq(msb_spec_egress_allow_count(closed), 0);
	msb_spec_builder_set_egress(copy, MSB_EGRESS_ALLOWLIST);
	s = build(copy);
	cr_assert_eq(msb_spec_egress_allow_count(s), 1);
	cr_assert_not(msb_spec_equal(s, closed));
	msb_spec_unref(s);
	msb_spec_builder_free(copy);
	msb_spec_unref(closed);
}

/* 3.28: a copy with no changes is an equal spec; every field carries over. */
Test(spec, copy_without_changes_is_equal_3_28)
{
	msb_spec_builder *b = allowlist_builder();
	msb_spec_builder_set_image(b, "img");
	msb_spec_builder_set_image_id(b, "id");
	const char *gp[] = {"GET", "POST"};
	msb_spec_builder_add_egress_rule(b, "api", gp, 2);
	msb_spec_builder_add_egress_host(b, "pypi.org");
	msb_spec_builder_set_work_dir(b, NULL);
	msb_spec_builder_set_label(b, "a", "1");
	msb_spec_builder_set_requires(b, MSB_CAP_EXEC | MSB_CAP_RUN_CODE);
	msb_spec_builder_set_min_isolation(b, MSB_ISOLATION_CONTAINER);
	msb_declared_output o = MSB_DECLARED_OUTPUT_INIT;
	o.path = "out.txt";
	msb_spec_builder_add_declared_output(b, &o);
	msb_transfer_limits l = {10, 20, 30};
	msb_spec_builder_set_files_in(b, l);
	msb_spec_builder_set_outputs_named_at_call_time(b, true);
	msb_spec_builder_set_identities(b, MSB_IDENTITY_USER);
	msb_spec_builder_set_requires_os_family(b, MSB_OS_POSIX);
	msb_spec_builder_set_isolation_scope(b, MSB_SCOPE_CALL);
	msb_spec_builder_set_confined_to_guest_call_path(b, true);
	msb_spec_builder_set_exclusive_admission(b, true);
	msb_spec_builder_set_min_cleanup(b, MSB_CLEANUP_RECLAIM);
	msb_spec *a = build(b);
	msb_spec_builder_free(b);

	msb_spec_builder *copy = msb_spec_builder_from(a);
	msb_spec *c = build(copy);
	cr_assert(msb_spec_equal(a, c));
	cr_assert_neq(a, c);
	/* And each single change is seen by equal(). */
	msb_spec_builder_set_exclusive_admission(copy, false);
	msb_spec *d = build(copy);
	cr_assert_not(msb_spec_equal(a, d));
	msb_spec_unref(d);
	msb_spec_builder_set_exclusive_admission(copy, true);
	msb_spec_builder_clear_min_cleanup(copy);
	d = build(copy);
	cr_assert_not(msb_spec_equal(a, d));
	msb_spec_unref(d);
	msb_spec_builder_free(copy);
	msb_spec_unref(a);
	msb_spec_unref(c);
}

/* A builder builds many times; each build is an independent value. */
Test(spec, builder_builds_many_times_24_7)
{
	msb_spec_builder *b = allowlist_builder();
	msb_spec_builder_add_egress_host(b, "h");
	msb_spec *a = build(b);
	msb_spec *c = build(b);
	cr_assert(msb_spec_equal(a, c));
	msb_spec_builder_set_kind(b, "other");
	msb_spec *d = build(b);
	cr_assert_str_eq(msb_spec_kind(a), "k", "earlier builds unaffected");
	cr_assert_str_eq(msb_spec_kind(d), "other");
	msb_spec_unref(a);
	msb_spec_unref(c);
	msb_spec_unref(d);
	msb_spec_builder_free(b);
}

/* Reference counting: the spec lives while any holder does. */
Test(spec, ref_unref_24_7)
{
	msb_spec *s = default_spec();
	cr_assert_eq(msb_spec_ref(s), s);
	msb_spec_unref(s);
	cr_assert_str_eq(msb_spec_kind(s), "k", "still alive after one unref");
	msb_spec_unref(s);
	msb_spec_unref(NULL);
	cr_assert_null(msb_spec_ref(NULL));
	cr_assert_null(msb_spec_builder_from(NULL));
	msb_spec_builder_free(NULL);
	msb_spec *out = NULL;
	assert_refused(msb_spec_build(NULL, &out, &e_), MSB_E_VALUE, "no spec builder");
}

/* Resource limits: 0 by default (the backend's default), set, copied,
 * compared. */
Test(spec, resource_limits_default_set_copy_equal)
{
	msb_spec *d = default_spec();
	cr_assert_eq(msb_spec_memory_bytes(d), 0);
	cr_assert_eq(msb_spec_pids_max(d), 0);
	cr_assert_eq(msb_spec_cpu_millis(d), 0);
	cr_assert_eq(msb_spec_writable_bytes(d), 0);
	cr_assert_eq(msb_spec_memory_bytes(NULL), 0);

	msb_spec_builder *b = msb_spec_builder_new("k");
	msb_spec_builder_set_memory_bytes(b, 256ull << 20);
	msb_spec_builder_set_pids_max(b, 64);
	msb_spec_builder_set_cpu_millis(b, 500);
	msb_spec_builder_set_writable_bytes(b, 32ull << 20);
	msb_spec *s = build(b);
	msb_spec_builder_free(b);
	cr_assert_eq(msb_spec_memory_bytes(s), 256ull << 20);
	cr_assert_eq(msb_spec_pids_max(s), 64);
	cr_assert_eq(msb_spec_cpu_millis(s), 500);
	cr_assert_eq(msb_spec_writable_bytes(s), 32ull << 20);
	cr_assert_not(msb_spec_equal(s, d));

	/* Copy-with-changes keeps them; each one alone makes a difference. */
	b = msb_spec_builder_from(s);
	msb_spec *c = build(b);
	cr_assert(msb_spec_equal(s, c));
	void (*const set[4])(msb_spec_builder *, uint64_t) = {
		msb_spec_builder_set_memory_bytes, msb_spec_builder_set_pids_max,
		msb_spec_builder_set_cpu_millis, msb_spec_builder_set_writable_bytes};
	for (int i = 0; i < 4; i++) {
		msb_spec_builder *o = msb_spec_builder_from(s);
		set[i](o, 0);
		msb_spec *x = build(o);
		cr_assert_not(msb_spec_equal(s, x), "limit %d compared", i);
		msb_spec_unref(x);
		msb_spec_builder_free(o);
	}
	msb_spec_unref(c);
	msb_spec_builder_free(b);
	msb_spec_unref(s);
	msb_spec_unref(d);
}

/* Absurd values are refused at build, naming the limit and the bound; the
 * bounds themselves are accepted. */
Test(spec, resource_limits_absurd_values_refused)
{
	static const struct {
		void (*set)(msb_spec_builder *, uint64_t);
		uint64_t bad, lo, hi;
		const char *phrase;
	} cases[] = {
		{msb_spec_builder_set_memory_bytes, 4096, MSB_SPEC_MEMORY_BYTES_MIN,
		 MSB_SPEC_MEMORY_BYTES_MAX, "resources.memory_bytes: 4096 is below the minimum"},
		{msb_spec_builder_set_memory_bytes, MSB_SPEC_MEMORY_BYTES_MAX + 1,
		 MSB_SPEC_MEMORY_BYTES_MIN, MSB_SPEC_MEMORY_BYTES_MAX,
		 "resources.memory_bytes: 1125899906842625 is above the maximum"},
		{msb_spec_builder_set_pids_max, 1, MSB_SPEC_PIDS_MAX_MIN, MSB_SPEC_PIDS_MAX_MAX,
		 "resources.pids_max: 1 is below the minimum of 2"},
		{msb_spec_builder_set_pids_max, UINT64_MAX, MSB_SPEC_PIDS_MAX_MIN,
		 MSB_SPEC_PIDS_MAX_MAX, "resources.pids_max: 18446744073709551615 is above"},
		{msb_spec_builder_set_cpu_millis, 9, MSB_SPEC_CPU_MILLIS_MIN,
		 MSB_SPEC_CPU_MILLIS_MAX, "resources.cpu_millis: 9 is below the minimum of 10"},
		{msb_spec_builder_set_cpu_millis, 1024001, MSB_SPEC_CPU_MILLIS_MIN,
		 MSB_SPEC_CPU_MILLIS_MAX, "resources.cpu_millis: 1024001 is above"},
		{msb_spec_builder_set_writable_bytes, 1, MSB_SPEC_WRITABLE_BYTES_MIN,
		 MSB_SPEC_WRITABLE_BYTES_MAX, "resources.writable_bytes: 1 is below"},
		{msb_spec_builder_set_writable_bytes, 1ull << 45, MSB_SPEC_WRITABLE_BYTES_MIN,
		 MSB_SPEC_WRITABLE_BYTES_MAX, "resources.writable_bytes: 35184372088832 is above"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		msb_spec_builder *b = msb_spec_builder_new("k");
		cases[i].set(b, cases[i].bad);
		msb_spec *s = NULL;
		assert_refused(msb_spec_build(b, &s, &e_), MSB_E_VALUE, cases[i].phrase);
		cr_assert_null(s);
		cases[i].set(b, cases[i].lo);
		msb_spec_unref(build(b));
		cases[i].set(b, cases[i].hi);
		msb_spec_unref(build(b));
		cases[i].set(b, 0);
		msb_spec_unref(build(b));
		msb_spec_builder_free(b);
	}
}
