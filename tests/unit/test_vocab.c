/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The vocabulary (checklist section 1; section 24 row 5: strict string
 * tables, row 6: sets are bitmasks). Items whose check lives in another
 * module (router defaults, sinks, backends) are tested here at the level of
 * the vocabulary they rely on; the module's own suite tests the rest.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include <msb/spec.h>
#include <msb/vocab.h>

#include "core/core.h"

/* Assert a refusal: code and a phrase of the message. */
#include "helpers.h"

static const char *const rungs[] = {
	"none", "runtime", "os_process", "container", "hardened_container", "microvm", "vm"};

/* 1.1: seven rungs, parse and format round-trip exactly. */
Test(vocab, isolation_rungs_1_1)
{
	cr_assert_eq(MSB_ISOLATION_COUNT, 7);
	for (int i = 0; i < 7; i++) {
		msb_isolation v = (msb_isolation)99;
		cr_assert_eq(msb_isolation_parse(rungs[i], &v, NULL), 0, "%s", rungs[i]);
		cr_assert_eq((int)v, i);
		cr_assert_str_eq(msb_isolation_name(v), rungs[i]);
	}
	cr_assert_null(msb_isolation_name((msb_isolation)7));
	cr_assert_null(msb_isolation_name((msb_isolation)-1));
}

/* 1.2: one rank table; meets_floor = rank(declared) >= rank(floor). */
Test(vocab, isolation_rank_table_1_2)
{
	cr_assert(msb_meets_floor(MSB_ISOLATION_CONTAINER, MSB_ISOLATION_CONTAINER));
	cr_assert_not(msb_meets_floor(MSB_ISOLATION_CONTAINER, MSB_ISOLATION_MICROVM));
	cr_assert(msb_meets_floor(MSB_ISOLATION_VM, MSB_ISOLATION_NONE));
	cr_assert_not(msb_meets_floor(MSB_ISOLATION_NONE, MSB_ISOLATION_RUNTIME));
	/* Every rung has a rank, ranks are 0..6 in ladder order. */
	for (int i = 0; i < MSB_ISOLATION_COUNT; i++)
		cr_assert_eq(msb_isolation_rank((msb_isolation)i), i, "%s", rungs[i]);
	cr_assert_eq(msb_isolation_rank((msb_isolation)7), -1);
	/* Not a rung: never meets a floor, never clears one. */
	cr_assert_not(msb_meets_floor((msb_isolation)42, MSB_ISOLATION_NONE));
	cr_assert_not(msb_meets_floor(MSB_ISOLATION_VM, (msb_isolation)42));
	cr_assert_eq(msb_isolation_stricter(MSB_ISOLATION_CONTAINER, MSB_ISOLATION_MICROVM),
		     MSB_ISOLATION_MICROVM);
	cr_assert_eq(msb_isolation_stricter(MSB_ISOLATION_VM, MSB_ISOLATION_NONE),
		     MSB_ISOLATION_VM);
	cr_assert_eq(msb_isolation_stricter((msb_isolation)42, MSB_ISOLATION_RUNTIME),
		     MSB_ISOLATION_RUNTIME);
	cr_assert_str_eq(msb_isolation_ladder(), "none < runtime < os_process < container < "
						 "hardened_container < microvm < vm");
}

/* 1.3: parsing is exact; anything else is refused with "not a rung". */
Test(vocab, unknown_rung_refused_1_3)
{
	msb_isolation v = MSB_ISOLATION_VM;
	assert_refused(msb_isolation_parse("VM", &v, &e_), MSB_E_VALUE, "`VM` is not a rung");
	assert_refused(msb_isolation_parse("hypervisor", &v, &e_), MSB_E_VALUE, "not a rung");
	assert_refused(msb_isolation_parse("", &v, &e_), MSB_E_VALUE, "not a rung");
	assert_refused(msb_isolation_parse(" vm", &v, &e_), MSB_E_VALUE, "not a rung");
	assert_refused(msb_isolation_parse(NULL, &v, &e_), MSB_E_VALUE, "not a rung");
	cr_assert_eq(v, MSB_ISOLATION_VM, "a refused parse leaves the output alone");
	/* The seed's phrase too, so a reader who knows it recognises the refusal
	 * (issue 16). */
	assert_refused(msb_isolation_parse("hypervisor", &v, &e_), MSB_E_VALUE,
		       "`hypervisor` is not a rung, not a valid Isolation: the ladder is");
	assert_refused(msb_isolation_parse(NULL, &v, &e_), MSB_E_VALUE, "not a valid Isolation");
	cr_assert_eq(msb_isolation_parse("os_process", &v, NULL), 0);
	cr_assert_eq(v, MSB_ISOLATION_OS_PROCESS);
}

/* 1.4: "process" maps to no rung, not even os_process; the message names the
 * ladder so the reader sees where os_process sits. */
Test(vocab, process_is_never_a_rung_1_4)
{
	msb_isolation v = MSB_ISOLATION_NONE;
	assert_refused(msb_isolation_parse("process", &v, &e_), MSB_E_VALUE,
		       "`process` is not a rung, not a valid Isolation: the ladder is none < "
		       "runtime < os_process");
	cr_assert_eq(v, MSB_ISOLATION_NONE);
	assert_refused(msb_isolation_parse("PROCESS", &v, &e_), MSB_E_VALUE, "not a rung");
	cr_assert_str_eq(msb_isolation_name(MSB_ISOLATION_OS_PROCESS), "os_process");
	/* The error class is ValueError, as the seed's Isolation("process"). */
	msb_error *e = NULL;
	msb_isolation_parse("process", &v, &e);
	cr_assert_str_eq(msb_error_name(e), "ValueError");
	msb_error_free(e);
}

/* 1.5: persisted form is the rung string: a spec's JSON carries "container",
 * never 3, and a rank integer is refused on the way in. */
Test(vocab, ranks_not_a_storage_format_1_5)
{
	msb_spec_builder *b = msb_spec_builder_new("k");
	msb_spec_builder_set_min_isolation(b, MSB_ISOLATION_CONTAINER);
	msb_spec *s = NULL;
	cr_assert_eq(msb_spec_build(b, &s, NULL), 0);
	char *json = NULL;
	cr_assert_eq(msb_spec_to_json(s, &json, NULL), 0);
	cr_assert(strstr(json, "\"min_isolation\":\"container\"") != NULL, "%s", json);
	free(json);
	msb_spec_unref(s);
	msb_spec_builder_free(b);

	const char *ranked = "{\"kind\":\"k\",\"min_isolation\":3}";
	assert_refused(msb_spec_from_json(ranked, strlen(ranked), &s, &e_), MSB_E_TYPE,
		       "min_isolation");
}

/* 1.6: three modes; membership only (they are set bits, no ranking API). */
Test(vocab, egress_modes_1_6)
{
	const char *names[] = {"unrestricted", "allowlist", "closed"};
	msb_egress want[] = {MSB_EGRESS_UNRESTRICTED, MSB_EGRESS_ALLOWLIST, MSB_EGRESS_CLOSED};
	for (int i = 0; i < 3; i++) {
		msb_egress v;
		cr_assert_eq(msb_egress_parse(names[i], &v, NULL), 0);
		cr_assert_eq(v, want[i]);
		cr_assert_str_eq(msb_egress_name(v), names[i]);
	}
	msb_egress v;
	assert_refused(msb_egress_parse("undefined", &v, &e_), MSB_E_VALUE,
		       "`undefined` is not an egress mode");
	assert_refused(msb_egress_parse("Closed", &v, &e_), MSB_E_VALUE, "not an egress mode");
	/* Distinct bits: a set of modes answers membership and nothing else. */
	msb_egress_set set = MSB_EGRESS_CLOSED | MSB_EGRESS_ALLOWLIST;
	cr_assert(set & MSB_EGRESS_CLOSED);
	cr_assert_not(set & MSB_EGRESS_UNRESTRICTED);
	char *f = msb_egress_set_format(set);
	cr_assert_str_eq(f, "allowlist, closed");
	free(f);
	f = msb_egress_set_format(0);
	cr_assert_str_eq(f, "nothing");
	free(f);
}

/* 1.7 and DESIGN 9.39: eleven capabilities, no "network". */
Test(vocab, capabilities_eleven_1_7)
{
	const char *names[] = {"exec",	    "run_code",		 "host_tools",	  "files_in",
			       "files_out", "files_list",	 "files_delete",  "snapshot",
			       "reclaim",   "attached_identity", "egress_methods"};
	cr_assert_eq(MSB_CAPABILITY_COUNT, 11);
	msb_capset seen = 0;
	for (int i = 0; i < 11; i++) {
		msb_capability c;
		cr_assert_eq(msb_capability_parse(names[i], &c, NULL), 0, "%s", names[i]);
		cr_assert_str_eq(msb_capability_name(c), names[i]);
		cr_assert_eq(seen & c, 0, "%s shares a bit", names[i]);
		seen |= c;
	}
	cr_assert_eq(seen, MSB_CAP_ALL);
	msb_capability c;
	assert_refused(msb_capability_parse("network", &c, &e_), MSB_E_VALUE,
		       "`network` is not a capability");
	cr_assert_null(msb_capability_name((msb_capability)(MSB_CAP_EXEC | MSB_CAP_FILES_IN)));
}

/* 1.8: DEFAULT_CAPABILITIES == {exec, files_in}, and a default spec requires it. */
Test(vocab, default_capabilities_1_8)
{
	cr_assert_eq(MSB_DEFAULT_CAPABILITIES, MSB_CAP_EXEC | MSB_CAP_FILES_IN);
	char *f = msb_capset_format(MSB_DEFAULT_CAPABILITIES);
	cr_assert_str_eq(f, "exec, files_in");
	free(f);
	f = msb_capset_format(MSB_CAP_EGRESS_METHODS | MSB_CAP_EXEC);
	cr_assert_str_eq(f, "exec, egress_methods", "declaration order, not argument order");
	free(f);
	f = msb_capset_format(0);
	cr_assert_str_eq(f, "nothing");
	free(f);

	msb_spec_builder *b = msb_spec_builder_new("k");
	msb_spec *s = NULL;
	cr_assert_eq(msb_spec_build(b, &s, NULL), 0);
	cr_assert_eq(msb_spec_requires(s), MSB_DEFAULT_CAPABILITIES);
	msb_spec_unref(s);
	msb_spec_builder_free(b);
}

/* 1.9: posix and windows; "linux" is not a family. */
Test(vocab, os_family_1_9)
{
	msb_os_family v;
	cr_assert_eq(msb_os_family_parse("posix", &v, NULL), 0);
	cr_assert_eq(v, MSB_OS_POSIX);
	cr_assert_eq(msb_os_family_parse("windows", &v, NULL), 0);
	cr_assert_eq(v, MSB_OS_WINDOWS);
	assert_refused(msb_os_family_parse("linux", &v, &e_), MSB_E_VALUE,
		       "`linux` is not an os family");
	char *f = msb_os_family_set_format(MSB_OS_POSIX | MSB_OS_WINDOWS);
	cr_assert_str_eq(f, "posix, windows");
	free(f);
}

/* 1.10: untrusted < trusted in INTEGRITY_RANK; unestablished below both. */
Test(vocab, integrity_rank_1_10)
{
	cr_assert_eq(msb_integrity_weakest(MSB_INTEGRITY_UNTRUSTED, MSB_INTEGRITY_TRUSTED),
		     MSB_INTEGRITY_UNTRUSTED);
	cr_assert_eq(msb_integrity_weakest(MSB_INTEGRITY_TRUSTED, MSB_INTEGRITY_UNTRUSTED),
		     MSB_INTEGRITY_UNTRUSTED);
	/* Fold over {trusted, unestablished} = unestablished. */
	msb_integrity fold = MSB_INTEGRITY_TRUSTED;
	fold = msb_integrity_weakest(fold, MSB_INTEGRITY_UNESTABLISHED);
	cr_assert_eq(fold, MSB_INTEGRITY_UNESTABLISHED);
	cr_assert_lt(msb_integrity_rank(MSB_INTEGRITY_UNESTABLISHED),
		     msb_integrity_rank(MSB_INTEGRITY_UNTRUSTED));
	cr_assert_lt(msb_integrity_rank(MSB_INTEGRITY_UNTRUSTED),
		     msb_integrity_rank(MSB_INTEGRITY_TRUSTED));
	cr_assert_geq(msb_integrity_rank(MSB_INTEGRITY_UNESTABLISHED), 0);
	cr_assert_eq(msb_integrity_rank((msb_integrity)5), -1);
	msb_integrity v;
	cr_assert_eq(msb_integrity_parse("trusted", &v, NULL), 0);
	cr_assert_eq(v, MSB_INTEGRITY_TRUSTED);
	cr_assert_eq(msb_integrity_parse("untrusted", &v, NULL), 0);
	cr_assert_eq(v, MSB_INTEGRITY_UNTRUSTED);
	/* unestablished is the fold's value, not a label anyone can claim. */
	assert_refused(msb_integrity_parse("unestablished", &v, &e_), MSB_E_VALUE,
		       "not an integrity level");
}

/* 1.11: app and user; "system" is not an identity. */
Test(vocab, identity_1_11)
{
	msb_identity v;
	cr_assert_eq(msb_identity_parse("app", &v, NULL), 0);
	cr_assert_eq(v, MSB_IDENTITY_APP);
	cr_assert_eq(msb_identity_parse("user", &v, NULL), 0);
	cr_assert_eq(v, MSB_IDENTITY_USER);
	assert_refused(msb_identity_parse("system", &v, &e_), MSB_E_VALUE,
		       "`system` is not an identity");
	char *f = msb_identity_set_format(MSB_IDENTITY_USER | MSB_IDENTITY_APP);
	cr_assert_str_eq(f, "app, user");
	free(f);
}

/* 1.12: four entry kinds (the junction -> symlink mapping is a backend test). */
Test(vocab, entry_kind_1_12)
{
	const char *names[] = {"file", "directory", "symlink", "other"};
	for (int i = 0; i < 4; i++) {
		msb_entry_kind v;
		cr_assert_eq(msb_entry_kind_parse(names[i], &v, NULL), 0);
		cr_assert_eq((int)v, i);
		cr_assert_str_eq(msb_entry_kind_name(v), names[i]);
	}
	msb_entry_kind v;
	assert_refused(msb_entry_kind_parse("junction", &v, &e_), MSB_E_VALUE, "not an entry kind");
}

/* 1.13: DeclaredOutput("a.png").disposition == LAND. */
Test(vocab, output_disposition_1_13)
{
	msb_declared_output o = MSB_DECLARED_OUTPUT_INIT;
	cr_assert_eq(o.disposition, MSB_DISPOSITION_LAND);
	msb_output_disposition v;
	cr_assert_eq(msb_output_disposition_parse("land", &v, NULL), 0);
	cr_assert_eq(v, MSB_DISPOSITION_LAND);
	cr_assert_eq(msb_output_disposition_parse("consume", &v, NULL), 0);
	cr_assert_eq(v, MSB_DISPOSITION_CONSUME);
	assert_refused(msb_output_disposition_parse("drop", &v, &e_), MSB_E_VALUE,
		       "not an output disposition");
}

/* 1.14: nfc (the zero value, so a zeroed sink option defaults to it) and none. */
Test(vocab, name_normalization_1_14)
{
	cr_assert_eq(MSB_NORMALIZATION_NFC, 0);
	msb_name_normalization v;
	cr_assert_eq(msb_name_normalization_parse("nfc", &v, NULL), 0);
	cr_assert_eq(v, MSB_NORMALIZATION_NFC);
	cr_assert_eq(msb_name_normalization_parse("none", &v, NULL), 0);
	cr_assert_eq(v, MSB_NORMALIZATION_NONE);
	assert_refused(msb_name_normalization_parse("nfkc", &v, &e_), MSB_E_VALUE,
		       "not a name normalization");
}

/* 1.15: FIXED (default, the zero value) and PER_SPEC. */
Test(vocab, selection_1_15)
{
	cr_assert_eq(MSB_SELECTION_FIXED, 0);
	msb_selection v;
	cr_assert_eq(msb_selection_parse("fixed", &v, NULL), 0);
	cr_assert_eq(v, MSB_SELECTION_FIXED);
	cr_assert_eq(msb_selection_parse("per_spec", &v, NULL), 0);
	cr_assert_eq(v, MSB_SELECTION_PER_SPEC);
	assert_refused(msb_selection_parse("PER_SPEC", &v, &e_), MSB_E_VALUE, "not a selection");
}

/* 1.16: call is stricter than conversation; default spec scope conversation. */
Test(vocab, isolation_scope_1_16)
{
	cr_assert_eq(msb_isolation_scope_stricter(MSB_SCOPE_CONVERSATION, MSB_SCOPE_CALL),
		     MSB_SCOPE_CALL);
	cr_assert_eq(msb_isolation_scope_stricter(MSB_SCOPE_CALL, MSB_SCOPE_CONVERSATION),
		     MSB_SCOPE_CALL);
	cr_assert_eq(msb_isolation_scope_stricter(MSB_SCOPE_CONVERSATION, MSB_SCOPE_CONVERSATION),
		     MSB_SCOPE_CONVERSATION);
	msb_isolation_scope v;
	cr_assert_eq(msb_isolation_scope_parse("conversation", &v, NULL), 0);
	cr_assert_eq(v, MSB_SCOPE_CONVERSATION);
	cr_assert_eq(msb_isolation_scope_parse("call", &v, NULL), 0);
	cr_assert_eq(v, MSB_SCOPE_CALL);
	assert_refused(msb_isolation_scope_parse("thread", &v, &e_), MSB_E_VALUE,
		       "not an isolation scope");
	char *f = msb_scope_set_format(MSB_SCOPE_CALL);
	cr_assert_str_eq(f, "call");
	free(f);

	msb_spec_builder *b = msb_spec_builder_new("k");
	msb_spec *s = NULL;
	cr_assert_eq(msb_spec_build(b, &s, NULL), 0);
	cr_assert_eq(msb_spec_isolation_scope(s), MSB_SCOPE_CONVERSATION);
	msb_spec_unref(s);
	msb_spec_builder_free(b);
}

/* 1.17: reclaim < reset < dispose, strength is data. */
Test(vocab, cleanup_strength_1_17)
{
	cr_assert_eq(msb_cleanup_strongest(MSB_CLEANUP_RECLAIM, MSB_CLEANUP_RESET),
		     MSB_CLEANUP_RESET);
	cr_assert_eq(msb_cleanup_strongest(MSB_CLEANUP_RESET, MSB_CLEANUP_DISPOSE),
		     MSB_CLEANUP_DISPOSE);
	cr_assert_eq(msb_cleanup_strongest(MSB_CLEANUP_DISPOSE, MSB_CLEANUP_RECLAIM),
		     MSB_CLEANUP_DISPOSE);
	cr_assert_eq(msb_cleanup_strongest(MSB_CLEANUP_RECLAIM, MSB_CLEANUP_RECLAIM),
		     MSB_CLEANUP_RECLAIM);
	/* Outside the enum: the strongest rung, never a weaker one. */
	cr_assert_eq(msb_cleanup_strongest((msb_cleanup)9, MSB_CLEANUP_RECLAIM),
		     MSB_CLEANUP_DISPOSE);
	const char *names[] = {"reclaim", "reset", "dispose"};
	for (int i = 0; i < 3; i++) {
		msb_cleanup v;
		cr_assert_eq(msb_cleanup_parse(names[i], &v, NULL), 0);
		cr_assert_str_eq(msb_cleanup_name(v), names[i]);
	}
	msb_cleanup v;
	assert_refused(msb_cleanup_parse("delete", &v, &e_), MSB_E_VALUE, "not a cleanup rung");
}

/* 1.18: DISPOSE (default, the zero value) and KEEP. */
Test(vocab, failed_reclaim_policy_1_18)
{
	cr_assert_eq(MSB_FAILED_RECLAIM_DISPOSE, 0);
	msb_failed_reclaim_policy v;
	cr_assert_eq(msb_failed_reclaim_policy_parse("dispose", &v, NULL), 0);
	cr_assert_eq(v, MSB_FAILED_RECLAIM_DISPOSE);
	cr_assert_eq(msb_failed_reclaim_policy_parse("keep", &v, NULL), 0);
	cr_assert_eq(v, MSB_FAILED_RECLAIM_KEEP);
	assert_refused(msb_failed_reclaim_policy_parse("retain", &v, &e_), MSB_E_VALUE,
		       "not a failed-reclaim policy");
}

/* 1.19 / 3.7: any uppercase RFC 9110 token is a method; named verbs are
 * constants. */
Test(vocab, http_method_tokens_1_19)
{
	cr_assert_str_eq(MSB_HTTP_GET, "GET");
	const char *ok[] = {MSB_HTTP_GET,   MSB_HTTP_HEAD,   MSB_HTTP_POST,    MSB_HTTP_PUT,
			    MSB_HTTP_PATCH, MSB_HTTP_DELETE, MSB_HTTP_OPTIONS, MSB_HTTP_CONNECT,
			    MSB_HTTP_TRACE, "PROPFIND",	     "M-SEARCH",       "X_1!#$%&'*+.^`|~"};
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
		cr_assert(msb_http_method_valid(ok[i]), "%s", ok[i]);
	const char *bad[] = {"",     "get",   "Get",   "GET/foo", "GET:",  "GE T",
			     "GET,", "\tGET", "GET\"", "(GET)",	  "G\x80", "GET;"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_assert_not(msb_http_method_valid(bad[i]), "`%s`", bad[i]);
	cr_assert_not(msb_http_method_valid(NULL));
}

/* 1.20 and DESIGN 9.18: five codes, closed set; precedence
 * refused > unreachable > timeout > unlisted > unknown. */
Test(vocab, disposal_codes_1_20)
{
	const char *names[] = {"unreachable", "timeout", "refused", "unlisted", "unknown"};
	for (int i = 0; i < 5; i++) {
		msb_disposal_code v;
		cr_assert_eq(msb_disposal_code_parse(names[i], &v, NULL), 0);
		cr_assert_str_eq(msb_disposal_code_name(v), names[i]);
	}
	msb_disposal_code v;
	assert_refused(msb_disposal_code_parse("gone", &v, &e_), MSB_E_VALUE,
		       "`gone` is not a disposal code");
	int p[] = {msb_disposal_code_precedence(MSB_DISPOSAL_REFUSED),
		   msb_disposal_code_precedence(MSB_DISPOSAL_UNREACHABLE),
		   msb_disposal_code_precedence(MSB_DISPOSAL_TIMEOUT),
		   msb_disposal_code_precedence(MSB_DISPOSAL_UNLISTED),
		   msb_disposal_code_precedence(MSB_DISPOSAL_UNKNOWN)};
	for (int i = 0; i < 4; i++)
		cr_assert_gt(p[i], p[i + 1], "order broken at %d", i);
	cr_assert_geq(p[4], 0);
	cr_assert_eq(msb_disposal_code_precedence((msb_disposal_code)17), -1);
}

/* 1.21: four file refusals; "eacces" is not one. */
Test(vocab, file_refusal_1_21)
{
	msb_file_refusal v;
	cr_assert_eq(msb_file_refusal_parse("not_found", &v, NULL), 0);
	cr_assert_eq(v, MSB_FILE_REFUSAL_NOT_FOUND);
	cr_assert_str_eq(msb_file_refusal_name(MSB_FILE_REFUSAL_NOT_FOUND), "not_found");
	const char *names[] = {"not_found", "is_directory", "permission_denied", "invalid_path"};
	for (int i = 0; i < 4; i++) {
		cr_assert_eq(msb_file_refusal_parse(names[i], &v, NULL), 0);
		cr_assert_str_eq(msb_file_refusal_name(v), names[i]);
	}
	assert_refused(msb_file_refusal_parse("eacces", &v, &e_), MSB_E_VALUE,
		       "not a file refusal");
}

/* 1.22: five signal outcomes (the timeout error's default is its module's test). */
Test(vocab, signal_outcome_1_22)
{
	const char *names[] = {"sent", "refused", "absent", "unrecorded", "unknown"};
	for (int i = 0; i < 5; i++) {
		msb_signal_outcome v;
		cr_assert_eq(msb_signal_outcome_parse(names[i], &v, NULL), 0);
		cr_assert_eq((int)v, i);
		cr_assert_str_eq(msb_signal_outcome_name(v), names[i]);
	}
	msb_signal_outcome v;
	assert_refused(msb_signal_outcome_parse("killed", &v, &e_), MSB_E_VALUE,
		       "not a signal outcome");
}

/* 1.23: ReclaimFailure.disposal values. */
Test(vocab, reclaim_disposal_1_23)
{
	const char *names[] = {"disposed", "failed", "kept"};
	for (int i = 0; i < 3; i++) {
		msb_reclaim_disposal v;
		cr_assert_eq(msb_reclaim_disposal_parse(names[i], &v, NULL), 0);
		cr_assert_str_eq(msb_reclaim_disposal_name(v), names[i]);
	}
	msb_reclaim_disposal v;
	assert_refused(msb_reclaim_disposal_parse("Disposed", &v, &e_), MSB_E_VALUE,
		       "not a reclaim disposal");
}

/* 1.24: FILE_STORE. */
Test(vocab, source_channel_1_24)
{
	msb_source_channel v = (msb_source_channel)7;
	cr_assert_eq(msb_source_channel_parse("file_store", &v, NULL), 0);
	cr_assert_eq(v, MSB_SOURCE_FILE_STORE);
	cr_assert_str_eq(msb_source_channel_name(MSB_SOURCE_FILE_STORE), "file_store");
	assert_refused(msb_source_channel_parse("FILE_STORE", &v, &e_), MSB_E_VALUE,
		       "not a source channel");
}

/* 1.25: every enum is string-valued: name() and parse() agree for every
 * member, so a plain string declaration matches the member of that
 * spelling and an unknown one matches nothing. */
Test(vocab, string_compatible_enums_1_25)
{
	for (unsigned bit = 0; bit < MSB_CAPABILITY_COUNT; bit++) {
		msb_capability c = (msb_capability)(1u << bit), back;
		const char *n = msb_capability_name(c);
		cr_assert_not_null(n);
		cr_assert_eq(msb_capability_parse(n, &back, NULL), 0);
		cr_assert_eq(back, c);
	}
	msb_egress e;
	cr_assert_eq(msb_egress_parse("closed", &e, NULL), 0);
	cr_assert_eq(e, MSB_EGRESS_CLOSED);
	msb_capability c;
	cr_assert_lt(msb_capability_parse("bogus", &c, NULL), 0);
}

/* 1.26: within() is true iff each field <= the ceiling's. */
Test(vocab, transfer_limits_within_1_26)
{
	msb_transfer_limits ceil = {8, 32, 64};
	msb_transfer_limits same = {8, 32, 64}, a = {9, 32, 64}, b = {8, 32, 65}, c = {8, 33, 64},
			    d = {0, 0, 0};
	cr_assert(msb_transfer_limits_within(&same, &ceil));
	cr_assert_not(msb_transfer_limits_within(&a, &ceil));
	cr_assert_not(msb_transfer_limits_within(&b, &ceil));
	cr_assert_not(msb_transfer_limits_within(&c, &ceil));
	cr_assert(msb_transfer_limits_within(&d, &ceil));
	cr_assert_not(msb_transfer_limits_within(NULL, &ceil));
}

/* 1.27: 8 MiB per file, 32 MiB total, 64 files. */
Test(vocab, default_transfer_limits_1_27)
{
	cr_assert_eq(MSB_DEFAULT_TRANSFER_LIMITS.max_bytes_per_file, 8ull * 1048576);
	cr_assert_eq(MSB_DEFAULT_TRANSFER_LIMITS.max_total_bytes, 32ull * 1048576);
	cr_assert_eq(MSB_DEFAULT_TRANSFER_LIMITS.max_files, 64);
	msb_transfer_limits init = MSB_DEFAULT_TRANSFER_LIMITS_INIT;
	cr_assert_eq(memcmp(&init, &MSB_DEFAULT_TRANSFER_LIMITS, sizeof(init)), 0);
}

/* 1.28: files_in == files_out == DEFAULT_TRANSFER_LIMITS. */
Test(vocab, default_sandbox_limits_1_28)
{
	cr_assert_eq(memcmp(&MSB_DEFAULT_SANDBOX_LIMITS.files_in, &MSB_DEFAULT_TRANSFER_LIMITS,
			    sizeof(msb_transfer_limits)),
		     0);
	cr_assert_eq(memcmp(&MSB_DEFAULT_SANDBOX_LIMITS.files_out, &MSB_DEFAULT_TRANSFER_LIMITS,
			    sizeof(msb_transfer_limits)),
		     0);
}

/* 1.29: a list crossing into the vocabulary parses strictly and names the
 * field: denied_capabilities=["netwrk"] is refused, nothing defaulted. */
Test(vocab, refuse_unknown_at_boundary_1_29)
{
	const char *names[] = {"exec", "netwrk"};
	msb_capset out = 0x123;
	assert_refused(msb_vocab__capset_parse(names, 2, "denied_capabilities", &out, &e_),
		       MSB_E_VALUE, "denied_capabilities: `netwrk` is not a capability");
	cr_assert_eq(out, 0x123, "refusal leaves the output alone");

	const char *good[] = {"files_in", "exec", "exec"};
	cr_assert_eq(msb_vocab__capset_parse(good, 3, "requires", &out, NULL), 0);
	cr_assert_eq(out, MSB_CAP_EXEC | MSB_CAP_FILES_IN);
	cr_assert_eq(msb_vocab__capset_parse(NULL, 0, "requires", &out, NULL), 0);
	cr_assert_eq(out, 0);
	const char *null_name[] = {NULL};
	assert_refused(msb_vocab__capset_parse(null_name, 1, "requires", &out, &e_), MSB_E_VALUE,
		       "requires: a missing value is not a capability");
}

/* 24.5: unknown strings refused everywhere, message lists the members. */
Test(vocab, refusal_lists_the_members_24_5)
{
	msb_egress v;
	assert_refused(msb_egress_parse("open", &v, &e_), MSB_E_VALUE,
		       "expected one of unrestricted, allowlist, closed");
	msb_capability c;
	assert_refused(msb_capability_parse("net", &c, &e_), MSB_E_VALUE,
		       "exec, run_code, host_tools, files_in, files_out, files_list, "
		       "files_delete, snapshot, reclaim, attached_identity, egress_methods");
}
