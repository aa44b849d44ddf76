/* SPDX-License-Identifier: Apache-2.0 */
/*
 * BackendDeclarations: the default value and its silence rules as values
 * (checklist 4.2-4.9, DESIGN 9.2, 9.3), the deep copy, method-token
 * membership, and strict JSON (4.11, 4.12, 1.29). The silence rules as
 * behaviour are in test_checks.c.
 */
#include <criterion/criterion.h>
#include <string.h>

#include <msb/backend.h>

#include "core/core.h"

static msb_declarations *parse_ok(const char *json)
{
	msb_declarations *d = NULL;
	msb_error *err = NULL;
	cr_assert_eq(msb_declarations_from_json(json, strlen(json), &d, &err), 0, "%s: %s", json,
		     msb_error_message(err));
	return d;
}

static void refused(const char *json, int code, const char *phrase)
{
	msb_declarations *d = NULL;
	msb_error *err = NULL;
	cr_assert_eq(msb_declarations_from_json(json, strlen(json), &d, &err), code, "%s: got %s",
		     json, msb_error_message(err));
	cr_assert_null(d);
	cr_assert(strstr(msb_error_message(err), phrase), "%s: `%s` lacks `%s`", json,
		  msb_error_message(err), phrase);
	msb_error_free(err);
}

static bool limits_eq(const msb_transfer_limits *a, const msb_transfer_limits *b)
{
	return a->max_bytes_per_file == b->max_bytes_per_file &&
	       a->max_total_bytes == b->max_total_bytes && a->max_files == b->max_files;
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

/* 4.2, 4.3-4.9, 23.3: every field has a default, and each default is its own
 * silence rule. */
Test(declarations, default_value_is_every_silence_rule_4_2)
{
	const msb_declarations *d = &MSB_DEFAULT_BACKEND_DECLARATIONS;
	cr_assert_eq(d->version, MSB_DECLARATIONS_VERSION);
	cr_assert_eq(d->capabilities, MSB_DEFAULT_CAPABILITIES);		 /* 4.3 */
	cr_assert(limits_eq(&d->limits.files_in, &MSB_DEFAULT_TRANSFER_LIMITS)); /* 4.4 */
	cr_assert(limits_eq(&d->limits.files_out, &MSB_DEFAULT_TRANSFER_LIMITS));
	cr_assert_eq(d->egress_modes, 0);			   /* 4.5: enforces nothing */
	cr_assert_eq(d->os_families, 0);			   /* 4.6 */
	cr_assert_eq(d->isolation_scopes, MSB_SCOPE_CONVERSATION); /* 4.7 */
	cr_assert_eq(d->n_egress_method_tokens, 0);		   /* 4.8, 23.3 */
	cr_assert_not(d->egress_method_tokens_all);
	cr_assert_not(d->observes_egress); /* 23.2 */

	const msb_declarations init = MSB_DECLARATIONS_INIT;
	cr_assert(decl_eq(&init, d));

	/* An empty JSON object reads as the same value. */
	msb_declarations *j = parse_ok("{}");
	cr_assert_eq(j->capabilities, d->capabilities);
	cr_assert_eq(j->egress_modes, 0);
	cr_assert_eq(j->isolation_scopes, MSB_SCOPE_CONVERSATION);
	cr_assert(limits_eq(&j->limits.files_out, &MSB_DEFAULT_TRANSFER_LIMITS));
	msb_declarations_free(j);
}

Test(declarations, dup_is_deep_and_one_allocation)
{
	char get[] = "GET", propfind[] = "PROPFIND";
	const char *tokens[] = {get, propfind};
	msb_declarations d = MSB_DECLARATIONS_INIT;
	d.egress_modes = MSB_EGRESS_CLOSED;
	d.egress_method_tokens = tokens;
	d.n_egress_method_tokens = 2;

	msb_declarations *c = msb_declarations__dup(&d);
	cr_assert_not_null(c);
	get[0] = 'X';
	propfind[0] = 'X';
	cr_assert_eq(c->n_egress_method_tokens, 2);
	cr_assert_str_eq(c->egress_method_tokens[0], "GET");
	cr_assert_str_eq(c->egress_method_tokens[1], "PROPFIND");
	cr_assert_neq((void *)c->egress_method_tokens, (void *)tokens);
	cr_assert_eq(c->egress_modes, MSB_EGRESS_CLOSED);
	free(c); /* one allocation */

	cr_assert_null(msb_declarations__dup(NULL));
}

/* 6.7, 23.3, 23.5: exact uppercase membership; "*" means every valid token. */
Test(declarations, has_method_token_23_3)
{
	const char *tokens[] = {"GET"};
	msb_declarations d = MSB_DECLARATIONS_INIT;
	d.egress_method_tokens = tokens;
	d.n_egress_method_tokens = 1;
	cr_assert(msb_declarations_has_method_token(&d, "GET"));
	cr_assert_not(msb_declarations_has_method_token(&d, "POST"));
	cr_assert_not(msb_declarations_has_method_token(&d, "get"));
	cr_assert_not(msb_declarations_has_method_token(&d, NULL));
	cr_assert_not(msb_declarations_has_method_token(NULL, "GET"));

	/* 4.8: the default serves no method-scoped rule. */
	cr_assert_not(msb_declarations_has_method_token(&MSB_DEFAULT_BACKEND_DECLARATIONS, "GET"));

	d.egress_method_tokens_all = true;
	cr_assert(msb_declarations_has_method_token(&d, "PROPFIND"));
	cr_assert_not(msb_declarations_has_method_token(&d, "propfind"));
	cr_assert_not(msb_declarations_has_method_token(&d, "GET/x"));
}

Test(declarations, json_reads_every_field)
{
	msb_declarations *d = parse_ok(
		"{\"capabilities\": [\"exec\", \"files_in\", \"files_out\", \"egress_methods\"],"
		" \"limits\": {\"files_in\": {\"max_bytes_per_file\": 1, \"max_total_bytes\": 2,"
		" \"max_files\": 3}, \"files_out\": {\"max_total_bytes\": 16777216}},"
		" \"egress_modes\": [\"allowlist\", \"closed\"], \"os_families\": [\"posix\"],"
		" \"isolation_scopes\": [\"conversation\", \"call\"],"
		" \"egress_method_tokens\": [\"GET\", \"PROPFIND\"], \"observes_egress\": true}");
	cr_assert_eq(d->capabilities,
		     MSB_CAP_EXEC | MSB_CAP_FILES_IN | MSB_CAP_FILES_OUT | MSB_CAP_EGRESS_METHODS);
	cr_assert_eq(d->limits.files_in.max_bytes_per_file, 1);
	cr_assert_eq(d->limits.files_in.max_total_bytes, 2);
	cr_assert_eq(d->limits.files_in.max_files, 3);
	/* A field left out of one direction keeps its default. */
	cr_assert_eq(d->limits.files_out.max_total_bytes, 16777216);
	cr_assert_eq(d->limits.files_out.max_files, 64);
	cr_assert_eq(d->egress_modes, MSB_EGRESS_ALLOWLIST | MSB_EGRESS_CLOSED);
	cr_assert_eq(d->os_families, MSB_OS_POSIX);
	cr_assert_eq(d->isolation_scopes, MSB_SCOPE_CONVERSATION | MSB_SCOPE_CALL);
	cr_assert_eq(d->n_egress_method_tokens, 2);
	cr_assert_str_eq(d->egress_method_tokens[1], "PROPFIND");
	cr_assert(d->observes_egress);

	/* Round trip through to_json. */
	char *s = NULL;
	cr_assert_eq(msb_declarations_to_json(d, &s, NULL), 0);
	msb_declarations *back = parse_ok(s);
	cr_assert_eq(back->capabilities, d->capabilities);
	cr_assert(limits_eq(&back->limits.files_in, &d->limits.files_in));
	cr_assert(limits_eq(&back->limits.files_out, &d->limits.files_out));
	cr_assert_eq(back->egress_modes, d->egress_modes);
	cr_assert_eq(back->os_families, d->os_families);
	cr_assert_eq(back->isolation_scopes, d->isolation_scopes);
	cr_assert_eq(back->n_egress_method_tokens, 2);
	cr_assert_str_eq(back->egress_method_tokens[0], "GET");
	cr_assert(back->observes_egress);
	free(s);
	msb_declarations_free(back);
	msb_declarations_free(d);
}

Test(declarations, json_every_token_sentinel_23_3)
{
	msb_declarations *d = parse_ok("{\"egress_method_tokens\": \"*\"}");
	cr_assert(d->egress_method_tokens_all);
	cr_assert(msb_declarations_has_method_token(d, "PURGE"));
	char *s = NULL;
	cr_assert_eq(msb_declarations_to_json(d, &s, NULL), 0);
	cr_assert(strstr(s, "\"egress_method_tokens\":\"*\""), "%s", s);
	free(s);
	msb_declarations_free(d);

	refused("{\"egress_method_tokens\": \"GET\"}", MSB_E_TYPE, "egress_method_tokens");
	refused("{\"egress_method_tokens\": [\"get\"]}", MSB_E_VALUE, "uppercase"); /* 23.5 */
	refused("{\"egress_method_tokens\": [\"GET/x\"]}", MSB_E_VALUE, "`GET/x`"); /* 3.7 */
	refused("{\"egress_method_tokens\": [\"GET\", \"GET\"]}", MSB_E_VALUE, "twice");
	refused("{\"egress_method_tokens\": [7]}", MSB_E_TYPE, "egress_method_tokens[0]");
}

/* 4.11: a set given as a string is refused naming the field, never read as
 * characters or crashed on. */
Test(declarations, set_given_as_string_refused_4_11)
{
	refused("{\"egress_modes\": \"closed\"}", MSB_E_TYPE, "egress_modes must be a set");
	refused("{\"capabilities\": \"exec\"}", MSB_E_TYPE, "capabilities must be a set");
	refused("{\"os_families\": \"posix\"}", MSB_E_TYPE, "os_families must be a set");
	refused("{\"isolation_scopes\": \"call\"}", MSB_E_TYPE, "isolation_scopes must be a set");
	refused("{\"egress_modes\": {\"closed\": true}}", MSB_E_TYPE, "egress_modes must be a set");
	refused("{\"egress_modes\": [\"closed\", \"closed\"]}", MSB_E_VALUE, "listed twice");
}

/* 4.12: limits must be the pair; a single TransferLimits (or anything else)
 * is refused with SandboxTransferLimitsNotPermitted explaining the shape. */
Test(declarations, limits_single_transfer_limits_refused_4_12)
{
	refused("{\"limits\": {\"max_bytes_per_file\": 1, \"max_total_bytes\": 2,"
		" \"max_files\": 3}}",
		MSB_E_TRANSFER_LIMITS_NOT_PERMITTED, "{files_in, files_out}");
	refused("{\"limits\": {\"max_files\": 3}}", MSB_E_TRANSFER_LIMITS_NOT_PERMITTED,
		"not a single TransferLimits");
	refused("{\"limits\": 5}", MSB_E_TRANSFER_LIMITS_NOT_PERMITTED, "pair");
	refused("{\"limits\": [1, 2]}", MSB_E_TRANSFER_LIMITS_NOT_PERMITTED, "pair");
	refused("{\"limits\": {\"files_in\": 5}}", MSB_E_TRANSFER_LIMITS_NOT_PERMITTED, "pair");
	refused("{\"limits\": {\"inbound\": {}}}", MSB_E_TRANSFER_LIMITS_NOT_PERMITTED,
		"`inbound`");
	/* Inside a direction: strict keys and non-negative integers. */
	refused("{\"limits\": {\"files_out\": {\"max_files\": -1}}}", MSB_E_VALUE, "negative");
	refused("{\"limits\": {\"files_out\": {\"max_files\": 1.5}}}", MSB_E_TYPE, "integer");
	refused("{\"limits\": {\"files_out\": {\"max_file\": 1}}}", MSB_E_VALUE, "`max_file`");
}

/*
 * 4.12 (issue 16): an explicit null is not a SandboxLimits value and is
 * refused like any other malformed limits; an absent key keeps the default.
 * The same for every declaration and for null inside the pair: null is never
 * read as "unstated".
 */
Test(declarations, explicit_null_refused_absent_keeps_default_4_12)
{
	refused("{\"limits\": null}", MSB_E_TRANSFER_LIMITS_NOT_PERMITTED,
		"declarations.limits must be a SandboxLimits pair {files_in, files_out}");
	refused("{\"limits\": null}", MSB_E_TRANSFER_LIMITS_NOT_PERMITTED, "not null");
	refused("{\"limits\": {\"files_in\": null}}", MSB_E_TRANSFER_LIMITS_NOT_PERMITTED,
		"a pair whose files_in is null");
	refused("{\"limits\": {\"files_out\": {\"max_files\": null}}}", MSB_E_TYPE,
		"declarations.limits.files_out.max_files must be a non-negative integer, not null");
	refused("{\"capabilities\": null}", MSB_E_TYPE, "declarations.capabilities must be a set");
	refused("{\"egress_modes\": null}", MSB_E_TYPE, "egress_modes must be a set");
	refused("{\"os_families\": null}", MSB_E_TYPE, "os_families must be a set");
	refused("{\"isolation_scopes\": null}", MSB_E_TYPE, "not null");
	refused("{\"egress_method_tokens\": null}", MSB_E_TYPE, "egress_method_tokens must be");
	refused("{\"observes_egress\": null}", MSB_E_TYPE, "must be true or false, not null");

	/* Absent: the default, each direction on its own. */
	msb_declarations *d = parse_ok("{\"limits\": {\"files_out\": {\"max_files\": 3}}}");
	cr_assert(limits_eq(&d->limits.files_in, &MSB_DEFAULT_TRANSFER_LIMITS));
	cr_assert_eq(d->limits.files_out.max_files, 3);
	cr_assert_eq(d->limits.files_out.max_total_bytes,
		     MSB_DEFAULT_TRANSFER_LIMITS.max_total_bytes);
	msb_declarations_free(d);
	d = parse_ok("{}");
	cr_assert(limits_eq(&d->limits.files_in, &MSB_DEFAULT_TRANSFER_LIMITS));
	cr_assert(limits_eq(&d->limits.files_out, &MSB_DEFAULT_TRANSFER_LIMITS));
	msb_declarations_free(d);
}

/*
 * DESIGN 4 ("unknown strings are refused") replaces checklist 1.25's "accepted,
 * never matches": a declared member that is not in the vocabulary is refused
 * naming it, because a never-matching declaration would look like a claim.
 * Plain strings with a member's spelling still match that member.
 */
Test(declarations, unknown_members_refused_replaces_1_25)
{
	refused("{\"capabilities\": [\"exec\", \"files_in\", \"bogus\"]}", MSB_E_VALUE,
		"`bogus` is not a capability");
	refused("{\"capabilities\": [\"network\"]}", MSB_E_VALUE, "capabilities");  /* 1.7 */
	refused("{\"egress_modes\": [\"undefined\"]}", MSB_E_VALUE, "`undefined`"); /* 1.6 */
	refused("{\"os_families\": [\"linux\"]}", MSB_E_VALUE, "`linux`");	    /* 1.9 */
	refused("{\"isolation_scopes\": [\"thread\"]}", MSB_E_VALUE, "`thread`");

	msb_declarations *d = parse_ok("{\"egress_modes\": [\"closed\"]}");
	cr_assert_eq(d->egress_modes, MSB_EGRESS_CLOSED);
	msb_declarations_free(d);
}

Test(declarations, json_strict_keys_and_types_1_29)
{
	refused("{\"egress\": \"closed\"}", MSB_E_VALUE, "unknown key `egress`");
	refused("{\"observes_egress\": 1}", MSB_E_TYPE, "observes_egress");
	refused("[]", MSB_E_TYPE, "object");
	refused("{", MSB_E_VALUE, "invalid JSON");
}

Test(declarations, to_json_refuses_bits_outside_the_sets)
{
	msb_declarations d = MSB_DECLARATIONS_INIT;
	d.capabilities |= 1u << 20;
	char *s = NULL;
	msb_error *err = NULL;
	cr_assert_eq(msb_declarations_to_json(&d, &s, &err), MSB_E_VALUE);
	cr_assert_null(s);
	cr_assert(strstr(msb_error_message(err), "capabilities"));
	msb_error_free(err);

	d = (msb_declarations)MSB_DECLARATIONS_INIT;
	d.n_egress_method_tokens = 1; /* counted but not given */
	err = NULL;
	cr_assert_eq(msb_declarations_to_json(&d, &s, &err), MSB_E_VALUE);
	msb_error_free(err);

	/* The default round-trips. */
	cr_assert_eq(msb_declarations_to_json(&MSB_DEFAULT_BACKEND_DECLARATIONS, &s, NULL), 0);
	cr_assert(strstr(s, "\"egress_modes\":[]"), "%s", s);
	cr_assert(strstr(s, "\"capabilities\":[\"exec\",\"files_in\"]"), "%s", s);
	free(s);
}
