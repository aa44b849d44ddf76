/* SPDX-License-Identifier: Apache-2.0 */
/*
 * SandboxSpec as JSON (spec.h, docs/spec.md): strict loading (1.5, 1.29,
 * 24.6), every field of section 3 expressible, and the round trip
 * to_json -> from_json -> equal.
 */
#include <criterion/criterion.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <msb/spec.h>

#include "helpers.h"

static msb_spec *load(const char *json)
{
	msb_spec *s = NULL;
	msb_error *e = NULL;
	int r = msb_spec_from_json(json, strlen(json), &s, &e);
	cr_assert_eq(r, 0, "from_json failed: %s", e ? msb_error_message(e) : "?");
	return s;
}

static void assert_json_refused(const char *json, int code, const char *phrase)
{
	msb_spec *s = NULL;
	assert_refused(msb_spec_from_json(json, strlen(json), &s, &e_), code, phrase);
	cr_assert_null(s);
}

/* to_json, from_json, equal: the round trip every field must survive. */
static void assert_round_trip(const msb_spec *s)
{
	char *json = NULL;
	msb_error *e = NULL;
	cr_assert_eq(msb_spec_to_json(s, &json, &e), 0, "to_json: %s",
		     e ? msb_error_message(e) : "?");
	msb_spec *back = load(json);
	cr_assert(msb_spec_equal(s, back), "round trip changed the spec: %s", json);
	/* And the text is stable. */
	char *again = NULL;
	cr_assert_eq(msb_spec_to_json(back, &again, NULL), 0);
	cr_assert_str_eq(json, again);
	free(again);
	free(json);
	msb_spec_unref(back);
}

Test(spec_json, minimal_gets_defaults_3_3_3_4_3_15_3_17)
{
	msb_spec *s = load("{\"kind\":\"k\"}");
	cr_assert_str_eq(msb_spec_kind(s), "k");
	cr_assert_eq(msb_spec_egress(s), MSB_EGRESS_CLOSED);
	cr_assert_eq(msb_spec_egress_allow_count(s), 0);
	cr_assert_eq(msb_spec_requires(s), MSB_DEFAULT_CAPABILITIES);
	cr_assert_str_eq(msb_spec_work_dir(s), MSB_DEFAULT_WORK_DIR);
	cr_assert_not(msb_spec_min_isolation(s, NULL));
	cr_assert_eq(msb_spec_isolation_scope(s), MSB_SCOPE_CONVERSATION);

	msb_spec_builder *b = msb_spec_builder_new("k");
	msb_spec *d = NULL;
	cr_assert_eq(msb_spec_build(b, &d, NULL), 0);
	cr_assert(msb_spec_equal(s, d), "JSON defaults are the builder's defaults");
	msb_spec_unref(d);
	msb_spec_builder_free(b);
	assert_round_trip(s);
	msb_spec_unref(s);
}

/* 3.1: kind is required in JSON too. */
Test(spec_json, kind_required_3_1)
{
	assert_json_refused("{}", MSB_E_VALUE, "spec: a spec needs a kind");
	assert_json_refused("{\"kind\":null}", MSB_E_VALUE, "a spec needs a kind");
	assert_json_refused("{\"kind\":7}", MSB_E_TYPE, "spec.kind: must be a string");
}

/* Strict: unknown keys refused by name, at every level. */
Test(spec_json, unknown_keys_refused_24_6)
{
	assert_json_refused("{\"kind\":\"k\",\"egres\":\"closed\"}", MSB_E_VALUE,
			    "spec: unknown key `egres`");
	assert_json_refused("{\"kind\":\"k\",\"required_capabilities\":[]}", MSB_E_VALUE,
			    "unknown key `required_capabilities`");
	assert_json_refused("{\"kind\":\"k\",\"egress\":\"allowlist\","
			    "\"egress_allow\":[{\"host\":\"h\",\"method\":[\"GET\"]}]}",
			    MSB_E_VALUE, "spec.egress_allow[0]: unknown key `method`");
	assert_json_refused("{\"kind\":\"k\",\"files_in\":{\"max_file\":1}}", MSB_E_VALUE,
			    "spec.files_in: unknown key `max_file`");
	assert_json_refused("{\"kind\":\"k\",\"declared_outputs\":[{\"path\":\"a\",\"size\":1}]}",
			    MSB_E_VALUE, "spec.declared_outputs[0]: unknown key `size`");
}

Test(spec_json, malformed_documents_refused)
{
	assert_json_refused("{\"kind\":\"k\"", MSB_E_VALUE, "invalid JSON");
	assert_json_refused("[\"kind\"]", MSB_E_TYPE, "must be a JSON object");
	assert_json_refused("{\"kind\":\"a\",\"kind\":\"b\"}", MSB_E_VALUE, "invalid JSON");
	msb_spec *s = NULL;
	assert_refused(msb_spec_from_json(NULL, 0, &s, &e_), MSB_E_VALUE, "no JSON");
}

/* 1.3, 1.4, 1.5: rungs as exact strings; "process" and integers refused. */
Test(spec_json, rungs_are_strings_1_4_1_5)
{
	assert_json_refused("{\"kind\":\"k\",\"min_isolation\":\"process\"}", MSB_E_VALUE,
			    "spec.min_isolation: `process` is not a rung");
	assert_json_refused("{\"kind\":\"k\",\"min_isolation\":\"VM\"}", MSB_E_VALUE, "not a rung");
	assert_json_refused("{\"kind\":\"k\",\"min_isolation\":5}", MSB_E_TYPE,
			    "spec.min_isolation: must be a string");
	msb_spec *s = load("{\"kind\":\"k\",\"min_isolation\":\"os_process\"}");
	msb_isolation v;
	cr_assert(msb_spec_min_isolation(s, &v));
	cr_assert_eq(v, MSB_ISOLATION_OS_PROCESS);
	msb_spec_unref(s);
	/* null = absent ("no opinion"), not none (3.16). */
	s = load("{\"kind\":\"k\",\"min_isolation\":null}");
	cr_assert_not(msb_spec_min_isolation(s, NULL));
	msb_spec_unref(s);
	s = load("{\"kind\":\"k\",\"min_isolation\":\"none\"}");
	cr_assert(msb_spec_min_isolation(s, &v));
	cr_assert_eq(v, MSB_ISOLATION_NONE);
	msb_spec_unref(s);
}

/* 1.29 / 24.6: sets are lists of known names; a bare string is not a set. */
Test(spec_json, sets_parse_strictly_1_29)
{
	assert_json_refused("{\"kind\":\"k\",\"requires\":[\"exec\",\"network\"]}", MSB_E_VALUE,
			    "spec.requires: `network` is not a capability");
	assert_json_refused("{\"kind\":\"k\",\"requires\":\"exec\"}", MSB_E_TYPE,
			    "must be a list of strings");
	assert_json_refused("{\"kind\":\"k\",\"identities\":[\"system\"]}", MSB_E_VALUE,
			    "spec.identities: `system` is not an identity");
	assert_json_refused("{\"kind\":\"k\",\"egress\":\"open\"}", MSB_E_VALUE,
			    "spec.egress: `open` is not an egress mode");
	assert_json_refused("{\"kind\":\"k\",\"requires_os_family\":\"linux\"}", MSB_E_VALUE,
			    "`linux` is not an os family");
	assert_json_refused("{\"kind\":\"k\",\"isolation_scope\":\"thread\"}", MSB_E_VALUE,
			    "not an isolation scope");
	assert_json_refused("{\"kind\":\"k\",\"min_cleanup\":\"wipe\"}", MSB_E_VALUE,
			    "not a cleanup rung");
	msb_spec *s = load("{\"kind\":\"k\",\"requires\":[\"files_out\",\"exec\"],"
			   "\"identities\":[\"user\",\"app\"]}");
	cr_assert_eq(msb_spec_requires(s), MSB_CAP_EXEC | MSB_CAP_FILES_OUT);
	cr_assert_eq(msb_spec_identities(s), MSB_IDENTITY_APP | MSB_IDENTITY_USER);
	msb_spec_unref(s);
	s = load("{\"kind\":\"k\",\"requires\":[]}");
	cr_assert_eq(msb_spec_requires(s), 0);
	msb_spec_unref(s);
}

/* 3.5-3.13 through JSON: the same rules as the builder. */
Test(spec_json, egress_allow_rules_3_5_to_3_13)
{
	assert_json_refused("{\"kind\":\"k\",\"egress_allow\":[\"example.invalid\"]}", MSB_E_VALUE,
			    "egress_allow without egress `allowlist`");
	assert_json_refused("{\"kind\":\"k\",\"egress_allow\":[{\"host\":\"h\","
			    "\"methods\":[\"GET\"]}]}",
			    MSB_E_VALUE, "`h (GET)`");
	assert_json_refused("{\"kind\":\"k\",\"egress\":\"allowlist\",\"egress_allow\":"
			    "[{\"host\":\"h\",\"methods\":[]}]}",
			    MSB_E_VALUE, "names no methods");
	assert_json_refused("{\"kind\":\"k\",\"egress\":\"allowlist\",\"egress_allow\":"
			    "[{\"host\":\"h\",\"methods\":[\"get\"]}]}",
			    MSB_E_VALUE, "not uppercase");
	assert_json_refused("{\"kind\":\"k\",\"egress\":\"allowlist\",\"egress_allow\":"
			    "[{\"host\":\"h\",\"methods\":[\"GET\",\"GET\"]}]}",
			    MSB_E_VALUE, "repeats the method `GET`");
	assert_json_refused("{\"kind\":\"k\",\"egress\":\"allowlist\",\"egress_allow\":"
			    "[\"h\",{\"host\":\"H\",\"methods\":[\"GET\"]}]}",
			    MSB_E_VALUE, "conflicting policies");
	assert_json_refused("{\"kind\":\"k\",\"egress\":\"allowlist\",\"egress_allow\":[7]}",
			    MSB_E_TYPE, "spec.egress_allow[0]: must be a host string or a");
	assert_json_refused("{\"kind\":\"k\",\"egress\":\"allowlist\",\"egress_allow\":"
			    "[{\"methods\":[\"GET\"]}]}",
			    MSB_E_VALUE, "a rule needs a `host`");
	assert_json_refused("{\"kind\":\"k\",\"egress\":\"allowlist\",\"egress_allow\":\"h\"}",
			    MSB_E_TYPE, "spec.egress_allow: must be a list");

	msb_spec *s = load("{\"kind\":\"k\",\"egress\":\"allowlist\",\"egress_allow\":["
			   "\"Pypi.org\",\"pypi.ORG\",{\"host\":\"all\",\"methods\":null},"
			   "{\"host\":\"all\"},{\"host\":\"api\",\"methods\":[\"POST\",\"GET\"]},"
			   "{\"host\":\"API\",\"methods\":[\"GET\",\"POST\"]}]}");
	cr_assert_eq(msb_spec_egress_allow_count(s), 3);
	const char *h;
	const char *const *m;
	size_t n;
	msb_spec_egress_entry(s, 0, &h, &m, &n);
	cr_assert_str_eq(h, "Pypi.org");
	cr_assert_null(m);
	msb_spec_egress_entry(s, 1, &h, &m, &n);
	cr_assert_str_eq(h, "all", "methods null/absent = bare host (3.10)");
	cr_assert_null(m);
	msb_spec_egress_entry(s, 2, &h, &m, &n);
	cr_assert_str_eq(h, "api");
	cr_assert_eq(n, 2);
	cr_assert_str_eq(m[0], "POST", "first spelling kept (3.11)");
	cr_assert_str_eq(m[1], "GET");
	cr_assert(msb_spec_required_capabilities(s) & MSB_CAP_EGRESS_METHODS);
	assert_round_trip(s);
	msb_spec_unref(s);
}

/* 3.17: absent work_dir = default; null = backend allocates; a string is kept. */
Test(spec_json, work_dir_absent_null_string_3_17_3_18)
{
	msb_spec *s = load("{\"kind\":\"k\",\"work_dir\":null}");
	cr_assert_null(msb_spec_work_dir(s));
	assert_round_trip(s);
	msb_spec_unref(s);
	s = load("{\"kind\":\"k\",\"work_dir\":\"C:/agent/work\"}");
	cr_assert_str_eq(msb_spec_work_dir(s), "C:/agent/work");
	msb_spec_unref(s);
	assert_json_refused("{\"kind\":\"k\",\"work_dir\":[]}", MSB_E_TYPE,
			    "spec.work_dir: must be a string");
}

/* 1.26 / 3.21: limits objects; a field left out keeps its default; integers only. */
Test(spec_json, limits_objects_3_21)
{
	msb_spec *s = load("{\"kind\":\"k\",\"files_out\":{\"max_files\":4,"
			   "\"max_total_bytes\":16777216}}");
	msb_transfer_limits out = msb_spec_files_out(s);
	cr_assert_eq(out.max_files, 4);
	cr_assert_eq(out.max_total_bytes, 16777216);
	cr_assert_eq(out.max_bytes_per_file, 8ull * 1048576);
	msb_transfer_limits in = msb_spec_files_in(s);
	cr_assert_eq(in.max_files, 64);
	msb_spec_unref(s);
	assert_json_refused("{\"kind\":\"k\",\"files_in\":{\"max_files\":-1}}", MSB_E_VALUE,
			    "spec.files_in.max_files: must not be negative");
	assert_json_refused("{\"kind\":\"k\",\"files_in\":{\"max_files\":1.5}}", MSB_E_TYPE,
			    "spec.files_in.max_files: must be an integer");
	assert_json_refused("{\"kind\":\"k\",\"files_in\":[1,2,3]}", MSB_E_TYPE,
			    "spec.files_in: must be an object");
}

/* 3.20 / 12.1: declared outputs as objects with the DeclaredOutput defaults. */
Test(spec_json, declared_outputs_3_20)
{
	msb_spec *s = load("{\"kind\":\"k\",\"declared_outputs\":[{\"path\":\"d.png\"},"
			   "{\"path\":\"r.json\",\"media_type\":\"application/json\","
			   "\"required\":false,\"name\":\"result.json\","
			   "\"disposition\":\"consume\"}]}");
	cr_assert_eq(msb_spec_declared_output_count(s), 2);
	const msb_declared_output *d = msb_spec_declared_output(s, 0);
	cr_assert_str_eq(d->path, "d.png");
	cr_assert(d->required);
	cr_assert_null(d->name);
	cr_assert_null(d->media_type);
	cr_assert_eq(d->disposition, MSB_DISPOSITION_LAND);
	d = msb_spec_declared_output(s, 1);
	cr_assert_str_eq(d->media_type, "application/json");
	cr_assert_not(d->required);
	cr_assert_str_eq(d->name, "result.json");
	cr_assert_eq(d->disposition, MSB_DISPOSITION_CONSUME);
	assert_round_trip(s);
	msb_spec_unref(s);
	assert_json_refused("{\"kind\":\"k\",\"declared_outputs\":[{\"name\":\"x\"}]}", MSB_E_VALUE,
			    "a declared output needs a `path`");
	assert_json_refused("{\"kind\":\"k\",\"declared_outputs\":[{\"path\":\"x\","
			    "\"disposition\":\"drop\"}]}",
			    MSB_E_VALUE, "spec.declared_outputs[0].disposition: `drop`");
	assert_json_refused("{\"kind\":\"k\",\"declared_outputs\":[\"x\"]}", MSB_E_TYPE,
			    "spec.declared_outputs[0]: must be an object");
}

Test(spec_json, labels_3_19)
{
	msb_spec *s = load("{\"kind\":\"k\",\"labels\":{\"team\":\"x\",\"cost\":\"y\"}}");
	cr_assert_str_eq(msb_spec_label_get(s, "team"), "x");
	cr_assert_str_eq(msb_spec_label_get(s, "cost"), "y");
	assert_round_trip(s);
	msb_spec_unref(s);
	assert_json_refused("{\"kind\":\"k\",\"labels\":{\"team\":1}}", MSB_E_TYPE,
			    "spec.labels.team: must be a string");
	assert_json_refused("{\"kind\":\"k\",\"labels\":[\"team\"]}", MSB_E_TYPE,
			    "spec.labels: must be an object");
}

/* env: the environment every exec starts from, refused at build as an
 * exec's env is (issue 16), a value's type naming the key. */
Test(spec_json, env_is_refused_like_an_exec_env)
{
	msb_spec *s = load("{\"kind\":\"k\",\"env\":{\"B\":\"2\",\"A\":\"x=y\"}}");
	cr_assert_eq(msb_spec_env_count(s), 2);
	const char *n, *v;
	msb_spec_env(s, 0, &n, &v); /* sorted by name */
	cr_assert_str_eq(n, "A");
	cr_assert_str_eq(v, "x=y");
	assert_round_trip(s);
	msb_spec *plain = load("{\"kind\":\"k\"}");
	cr_assert_not(msb_spec_equal(s, plain));
	char *json = NULL;
	cr_assert_eq(msb_spec_to_json(plain, &json, NULL), 0);
	cr_assert_null(strstr(json, "\"env\"")); /* absent when empty */
	free(json);
	msb_spec_unref(plain);
	msb_spec_unref(s);
	assert_json_refused("{\"kind\":\"k\",\"env\":{\"N\":1}}", MSB_E_TYPE,
			    "spec.env.N: must be a string");
	assert_json_refused("{\"kind\":\"k\",\"env\":[\"N=1\"]}", MSB_E_TYPE,
			    "spec.env: must be an object");
	assert_json_refused("{\"kind\":\"k\",\"env\":{\"HTTPS_PROXY\":\"x\"}}", MSB_E_VALUE,
			    "env: `HTTPS_PROXY` is reserved");
	assert_json_refused("{\"kind\":\"k\",\"env\":{\"PYTHONNOUSERSITE\":\"0\"}}", MSB_E_VALUE,
			    "env: `PYTHONNOUSERSITE` is reserved");
	assert_json_refused("{\"kind\":\"k\",\"env\":{\"A=B\":\"x\"}}", MSB_E_VALUE,
			    "env: the name `A=B` holds `=`");
	assert_json_refused("{\"kind\":\"k\",\"env\":{\"\":\"x\"}}", MSB_E_VALUE,
			    "has an empty name");
}

/* Every field set to a non-default value survives the round trip. */
Test(spec_json, round_trip_every_field_3_28)
{
	msb_spec_builder *b = msb_spec_builder_new("codeact");
	msb_spec_builder_set_image(b, "python:3.12");
	msb_spec_builder_set_image_id(b, "sha256:0123");
	msb_spec_builder_set_egress(b, MSB_EGRESS_ALLOWLIST);
	msb_spec_builder_add_egress_host(b, "pypi.org");
	const char *m[] = {"GET", "PROPFIND"};
	msb_spec_builder_add_egress_rule(b, "dav.example", m, 2);
	msb_spec_builder_set_work_dir(b, "/workspace");
	msb_spec_builder_set_label(b, "team", "x");
	msb_spec_builder_set_label(b, "é", "ü");
	msb_spec_builder_set_env(b, "LANG", "C.UTF-8");
	msb_spec_builder_set_requires(b, MSB_CAP_EXEC | MSB_CAP_FILES_IN | MSB_CAP_FILES_OUT |
						 MSB_CAP_HOST_TOOLS);
	msb_spec_builder_set_min_isolation(b, MSB_ISOLATION_HARDENED_CONTAINER);
	msb_declared_output o = MSB_DECLARED_OUTPUT_INIT;
	o.path = "a.png";
	o.media_type = "image/png";
	msb_spec_builder_add_declared_output(b, &o);
	msb_transfer_limits in = {1, 2, 3}, out = {4, 5, 6};
	msb_spec_builder_set_files_in(b, in);
	msb_spec_builder_set_files_out(b, out);
	msb_spec_builder_set_outputs_named_at_call_time(b, true);
	msb_spec_builder_set_identities(b, MSB_IDENTITY_APP);
	msb_spec_builder_set_requires_os_family(b, MSB_OS_WINDOWS);
	msb_spec_builder_set_isolation_scope(b, MSB_SCOPE_CALL);
	msb_spec_builder_set_confined_to_guest_call_path(b, true);
	msb_spec_builder_set_exclusive_admission(b, true);
	msb_spec_builder_set_min_cleanup(b, MSB_CLEANUP_RESET);
	msb_spec *s = NULL;
	cr_assert_eq(msb_spec_build(b, &s, NULL), 0);
	msb_spec_builder_free(b);
	assert_round_trip(s);

	char *json = NULL;
	cr_assert_eq(msb_spec_to_json(s, &json, NULL), 0);
	cr_assert(strstr(json, "\"min_isolation\":\"hardened_container\"") != NULL, "%s", json);
	cr_assert(strstr(json, "{\"host\":\"dav.example\",\"methods\":[\"GET\",\"PROPFIND\"]}") !=
			  NULL,
		  "%s", json);
	cr_assert(
		strstr(json, "\"requires\":[\"exec\",\"host_tools\",\"files_in\",\"files_out\"]") !=
			NULL,
		"%s", json);
	cr_assert(strstr(json, "required_capabilities") == NULL, "derived, not stored");
	free(json);
	msb_spec_unref(s);
}

/* Strings that JSON cannot carry are refused by to_json, naming the field. */
Test(spec_json, to_json_refuses_non_utf8)
{
	msb_spec_builder *b = msb_spec_builder_new("k\xff");
	msb_spec *s = NULL;
	cr_assert_eq(msb_spec_build(b, &s, NULL), 0);
	char *json = NULL;
	assert_refused(msb_spec_to_json(s, &json, &e_), MSB_E_VALUE, "spec.kind");
	cr_assert_null(json);
	msb_spec_unref(s);
	msb_spec_builder_free(b);
}

/* The example specs the CLI's `msb check` is demonstrated with. */
static char *read_example(const char *name)
{
	/* __FILE__ is relative to the build root (meson) or absolute; the test
	 * binary lives in <build root>/tests/unit. */
	char path[PATH_MAX];
	char src[] = __FILE__;
	if (src[0] == '/') {
		snprintf(path, sizeof(path), "%s/../../examples/%s", dirname(src), name);
	} else {
		char exe[PATH_MAX];
		ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
		cr_assert_gt(n, 0);
		exe[n] = '\0';
		snprintf(path, sizeof(path), "%s/../../%s/../../examples/%s", dirname(exe),
			 dirname(src), name);
	}
	FILE *f = fopen(path, "r");
	cr_assert_not_null(f, "cannot open %s", path);
	char *buf = calloc(1, 65536);
	size_t len = fread(buf, 1, 65535, f);
	fclose(f);
	cr_assert_gt(len, 0);
	return buf;
}

Test(spec_json, example_spec_basic)
{
	char *text = read_example("spec-basic.json");
	msb_spec *s = load(text);
	cr_assert_eq(msb_spec_egress(s), MSB_EGRESS_CLOSED);
	cr_assert_eq(msb_spec_egress_allow_count(s), 0);
	cr_assert_eq(msb_spec_requires(s), MSB_CAP_EXEC | MSB_CAP_FILES_IN);
	assert_round_trip(s);
	msb_spec_unref(s);
	free(text);
}

Test(spec_json, example_spec_allowlist)
{
	char *text = read_example("spec-allowlist.json");
	msb_spec *s = load(text);
	cr_assert_eq(msb_spec_egress(s), MSB_EGRESS_ALLOWLIST);
	cr_assert_geq(msb_spec_egress_allow_count(s), 2);
	assert_round_trip(s);
	msb_spec_unref(s);
	free(text);
}

/* resources: strict keys, non-negative integers, 0 or absent = the
 * backend's default, ranges as in C, and the round trip. */
Test(spec_json, resources_3_x)
{
	msb_spec *s = load("{\"kind\":\"k\",\"resources\":{\"memory_bytes\":268435456,"
			   "\"pids_max\":64,\"cpu_millis\":250,\"writable_bytes\":33554432}}");
	cr_assert_eq(msb_spec_memory_bytes(s), 268435456);
	cr_assert_eq(msb_spec_pids_max(s), 64);
	cr_assert_eq(msb_spec_cpu_millis(s), 250);
	cr_assert_eq(msb_spec_writable_bytes(s), 33554432);
	assert_round_trip(s);
	char *json = NULL;
	cr_assert_eq(msb_spec_to_json(s, &json, NULL), 0);
	cr_assert(strstr(json, "\"resources\":{\"cpu_millis\":250,\"memory_bytes\":268435456,"
			       "\"pids_max\":64,\"writable_bytes\":33554432}") != NULL,
		  "%s", json);
	free(json);
	msb_spec_unref(s);

	/* A key left out is 0; null and {} are the defaults. */
	s = load("{\"kind\":\"k\",\"resources\":{\"pids_max\":8}}");
	cr_assert_eq(msb_spec_pids_max(s), 8);
	cr_assert_eq(msb_spec_memory_bytes(s), 0);
	msb_spec_unref(s);
	msb_spec *a = load("{\"kind\":\"k\",\"resources\":null}");
	msb_spec *b = load("{\"kind\":\"k\",\"resources\":{}}");
	msb_spec *c = load("{\"kind\":\"k\"}");
	cr_assert(msb_spec_equal(a, c) && msb_spec_equal(b, c));
	char *dflt = NULL;
	cr_assert_eq(msb_spec_to_json(c, &dflt, NULL), 0);
	cr_assert(strstr(dflt, "\"resources\":{\"cpu_millis\":0,\"memory_bytes\":0,"
			       "\"pids_max\":0,\"writable_bytes\":0}") != NULL,
		  "%s", dflt);
	free(dflt);
	msb_spec_unref(a);
	msb_spec_unref(b);
	msb_spec_unref(c);

	assert_json_refused("{\"kind\":\"k\",\"resources\":{\"memory\":1}}", MSB_E_VALUE,
			    "spec.resources: unknown key `memory`");
	assert_json_refused("{\"kind\":\"k\",\"resources\":{\"pids_max\":-1}}", MSB_E_VALUE,
			    "spec.resources.pids_max: must not be negative");
	assert_json_refused("{\"kind\":\"k\",\"resources\":{\"cpu_millis\":\"1000\"}}", MSB_E_TYPE,
			    "spec.resources.cpu_millis: must be an integer");
	assert_json_refused("{\"kind\":\"k\",\"resources\":{\"memory_bytes\":1.5}}", MSB_E_TYPE,
			    "spec.resources.memory_bytes: must be an integer");
	assert_json_refused("{\"kind\":\"k\",\"resources\":[1]}", MSB_E_TYPE,
			    "spec.resources: must be an object");
	assert_json_refused("{\"kind\":\"k\",\"resources\":{\"memory_bytes\":1024}}", MSB_E_VALUE,
			    "spec: resources.memory_bytes: 1024 is below the minimum");
	assert_json_refused("{\"kind\":\"k\",\"resources\":{\"cpu_millis\":2000000}}", MSB_E_VALUE,
			    "resources.cpu_millis: 2000000 is above the maximum");
}
