/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Information flow on a call's result (checklist 16.1-16.16, 17.12, 17.15,
 * 17.19, 17.20, 15.23): standing guidance, file integrity at read time, the
 * file fold stamping derived items, ToolCallEnded.fed, EffectiveState and the
 * tool's declarations.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "scripted_backend.h"

static const msb_key K1 = {"s", "t", "a", NULL};

/* ---- an in-memory text file store ---------------------------------------------------------------
 */

static const char *store_paths[] = {"trusted.txt", "untrusted.txt", "unrecorded.txt", NULL};
static const char *store_texts[] = {"good", "weak", "who knows", NULL};

static int store_read(void *ud, const char *path, char **text, size_t *len, bool *present,
		      msb_error **err)
{
	for (int i = 0; store_paths[i]; i++)
		if (strcmp(store_paths[i], path) == 0) {
			*text = strdup(store_texts[i]);
			*len = strlen(store_texts[i]);
			*present = true;
			return 0;
		}
	*present = false;
	return 0;
}

static const msb_file_store store = {MSB_FILE_STORE_VERSION, NULL, store_read};

/* ---- fixture ------------------------------------------------------------------------------------
 */

struct fx {
	msb_backend *b;
	msb_fake_backend *fake;
	msb_router *r;
	msb_spec *spec;
	struct test_ctx tc;
	msb_caller_context ctx;
	recorder rec;
	msb_observer obs;
	msb_file_store_provenance *prov;
	msb_tool_session_options so;
	msb_tool_session *s;
};

static void fx_init(struct fx *f, msb_integrity floor)
{
	memset(f, 0, sizeof(*f));
	cr_assert_eq(msb_fake_backend_new(NULL, &f->b, &f->fake, NULL), 0);
	recorder_init(&f->rec, &f->obs);
	f->r = router_over(&f->b, 1, MSB_CLEANUP_DISPOSE, MSB_FAILED_RECLAIM_DISPOSE, &f->obs,
			   NULL);
	f->spec = spec_from("{\"kind\": \"A\"}");
	test_ctx_init(&f->tc, "s", "t");
	f->ctx = test_ctx_context(&f->tc);
	cr_assert_eq(msb_file_store_provenance_new(floor, &f->prov, NULL), 0);
	cr_assert_eq(msb_file_store_provenance_record(f->prov, "trusted.txt", MSB_INTEGRITY_TRUSTED,
						      NULL),
		     0);
	cr_assert_eq(msb_file_store_provenance_record(f->prov, "untrusted.txt",
						      MSB_INTEGRITY_UNTRUSTED, NULL),
		     0);
	msb_tool_session_options so = MSB_TOOL_SESSION_OPTIONS_INIT;
	so.router = f->r;
	so.context = &f->ctx;
	so.agent_dir = "a";
	so.spec = f->spec;
	so.name = "tool";
	so.file_store = &store;
	so.provenance = f->prov;
	f->so = so;
}

static void fx_attach(struct fx *f)
{
	msb_error *e = NULL;
	cr_assert_eq(msb_tool_session_attach(&f->so, &f->s, &e), 0, "%s",
		     e ? msb_error_message(e) : "");
}

static void fx_free(struct fx *f)
{
	msb_tool_session_unref(f->s);
	msb_file_store_provenance_unref(f->prov);
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

/* read_file: the text, or NULL with the sentence in *sentence. */
static char *readf(msb_tool_call *c, const char *path, char **sentence)
{
	char *text = NULL;
	size_t len = 0;
	*sentence = NULL;
	cr_assert_eq(msb_tool_call_read_file(c, path, &text, &len, sentence, NULL), 0);
	cr_assert((text == NULL) != (*sentence == NULL), "exactly one answer");
	return text;
}

static void read_ok(msb_tool_call *c, const char *path)
{
	char *sentence = NULL;
	char *t = readf(c, path, &sentence);
	cr_assert_not_null(t, "%s: %s", path, sentence);
	free(t);
}

static char *read_refused(msb_tool_call *c, const char *path)
{
	char *sentence = NULL;
	char *t = readf(c, path, &sentence);
	cr_assert_null(t, "%s was served", path);
	return sentence;
}

static int end_items(msb_tool_call *c, const char *const *texts, size_t n, msb_tool_result **res,
		     msb_error **e)
{
	msb_result_item items[8];
	memset(items, 0, sizeof(items));
	for (size_t i = 0; i < n; i++)
		items[i].text = texts[i];
	msb_call_outcome oc = MSB_CALL_OUTCOME_INIT;
	oc.items = items;
	oc.n_items = n;
	*res = NULL;
	return msb_tool_call_end(c, &oc, res, e);
}

static int end_text(msb_tool_call *c, msb_call_outcome_kind kind, const char *text,
		    msb_tool_result **res)
{
	msb_call_outcome oc = MSB_CALL_OUTCOME_INIT;
	oc.kind = kind;
	oc.text = text;
	*res = NULL;
	return msb_tool_call_end(c, &oc, res, NULL);
}

/* ---- 16.1 - 16.6 standing guidance
 * --------------------------------------------------------------- */

Test(infoflow, string_is_one_derived_item_16_1)
{
	struct fx f;
	fx_init(&f, MSB_INTEGRITY_UNESTABLISHED);
	fx_attach(&f);
	msb_tool_result *res;
	cr_assert_eq(end_text(begin(&f), MSB_CALL_RESULT, "x", &res), 0);
	cr_assert_eq(res->n_items, 1);
	cr_assert_str_eq(res->items[0].text, "x");
	cr_assert_not(res->items[0].has_label, "no stamping configured: unlabelled");
	cr_assert_not(res->items[0].guidance);
	msb_tool_result_free(res);
	const char *two[] = {"a", "b"};
	cr_assert_eq(end_items(begin(&f), two, 2, &res, NULL), 0);
	cr_assert_eq(res->n_items, 2);
	cr_assert_str_eq(res->items[1].text, "b");
	msb_tool_result_free(res);
	fx_free(&f);
}

#define R "If the build failed, ask the user before retrying."

Test(infoflow, guidance_committed_and_rebuilt_trusted_public_16_2)
{
	struct fx f;
	fx_init(&f, MSB_INTEGRITY_UNESTABLISHED);
	const char *g[] = {R};
	f.so.standing_guidance = g;
	f.so.n_standing_guidance = 1;
	fx_attach(&f);
	const char *body[] = {"diagnostics: 3 errors", R};
	msb_tool_result *res;
	cr_assert_eq(end_items(begin(&f), body, 2, &res, NULL), 0);
	cr_assert_eq(res->n_items, 2);
	cr_assert_not(res->items[0].guidance);
	cr_assert_not(res->items[0].has_label);
	cr_assert(res->items[1].guidance);
	cr_assert(res->items[1].has_label);
	cr_assert_eq(res->items[1].integrity, MSB_INTEGRITY_TRUSTED);
	cr_assert_str_eq(res->items[1].confidentiality, MSB_GUIDANCE_CONFIDENTIALITY);
	cr_assert_str_eq(res->items[1].text, R);
	msb_tool_result_free(res);
	fx_free(&f);
}

Test(infoflow, guidance_fixed_but_call_id_16_3_16_5)
{
	struct fx f;
	fx_init(&f, MSB_INTEGRITY_UNESTABLISHED);
	const char *g[] = {"see run {call_id} for details", "then ask"};
	f.so.standing_guidance = g;
	f.so.n_standing_guidance = 2;
	fx_attach(&f);

	msb_tool_call *c = begin(&f);
	char filled[64];
	snprintf(filled, sizeof(filled), "see run %s for details", msb_tool_call_id(c));
	const char *ok[] = {"d", filled, "then ask"};
	msb_tool_result *res;
	cr_assert_eq(end_items(c, ok, 3, &res, NULL), 0);
	cr_assert_str_eq(res->items[1].text, filled, "{call_id} interpolated");
	msb_tool_result_free(res);

	const char *literal[] = {"d", "see run {call_id} for details", "then ask"};
	const char *other[] = {"d", "see run 000000000000 for details", "then ask"};
	const char *order[] = {"d", "then ask", filled};
	const char *count[] = {"d", filled};
	const char *place[] = {"d", filled, "then ask", "trailing"};
	const char *changed[] = {"d", filled, "then ask!"}; /* 16.5: nothing may vary */
	const char *const *bad[] = {literal, other, order, count, place, changed};
	const size_t n[] = {3, 3, 3, 2, 4, 3};
	for (int i = 0; i < 6; i++) {
		c = begin(&f);
		if (bad[i] == order || bad[i] == count || bad[i] == place || bad[i] == changed) {
			snprintf(filled, sizeof(filled), "see run %s for details",
				 msb_tool_call_id(c));
		}
		msb_error *e = NULL;
		cr_assert_eq(end_items(c, bad[i], n[i], &res, &e), MSB_E_VALUE, "case %d", i);
		cr_assert_null(res, "the body's items are not returned");
		cr_assert(strstr(msb_error_message(e), "standing guidance"), "%s",
			  msb_error_message(e));
		msb_error_free(e);
	}
	fx_free(&f);
}

Test(infoflow, guidance_refusals_still_clean_up_16_4_16_6)
{
	struct fx f;
	fx_init(&f, MSB_INTEGRITY_UNESTABLISHED);
	const char *g[] = {R};
	f.so.standing_guidance = g;
	f.so.n_standing_guidance = 1;
	fx_attach(&f);
	msb_tool_result *res;
	msb_error *e = NULL;

	/* Guidance alone: no derived item before it. */
	msb_tool_call *c = begin(&f);
	msb_sandbox *sb;
	char *sentence = NULL;
	cr_assert_eq(msb_tool_call_acquire(c, &K1, &sb, &sentence, NULL), 0);
	const char *only_r[] = {R};
	cr_assert_eq(end_items(c, only_r, 1, &res, &e), MSB_E_VALUE);
	cr_assert(strstr(msb_error_message(e), "at least one derived item"));
	msb_error_free(e);
	e = NULL;
	cr_assert_eq(msb_fake_backend_disposed_count(f.fake), 1, "cleanup ran anyway");
	cr_assert_str_eq(f.rec.ended[0].outcome, "ValueError");

	/* Guidance missing, from a string and from items. */
	cr_assert_eq(end_text(begin(&f), MSB_CALL_RESULT, "diag", &res), MSB_E_VALUE);
	const char *diag[] = {"diag"};
	cr_assert_eq(end_items(begin(&f), diag, 1, &res, NULL), MSB_E_VALUE);
	/* A refusal sentence must carry the guidance too: every path. */
	cr_assert_eq(end_text(begin(&f), MSB_CALL_REFUSAL, "Error: x", &res), MSB_E_VALUE);

	/* A label supplied by the body (there is no API to label, 16.6). */
	msb_result_item items[2] = {{.text = "diag",
				     .has_label = true,
				     .integrity = MSB_INTEGRITY_TRUSTED,
				     .confidentiality = "public"},
				    {.text = R}};
	msb_call_outcome oc = MSB_CALL_OUTCOME_INIT;
	oc.items = items;
	oc.n_items = 2;
	cr_assert_eq(msb_tool_call_end(begin(&f), &oc, &res, &e), MSB_E_VALUE);
	cr_assert(strstr(msb_error_message(e), "labelled"));
	msb_error_free(e);
	fx_free(&f);

	/* Without any commitment a body label is refused as well. */
	fx_init(&f, MSB_INTEGRITY_UNESTABLISHED);
	fx_attach(&f);
	oc.n_items = 1;
	cr_assert_eq(msb_tool_call_end(begin(&f), &oc, &res, NULL), MSB_E_VALUE);
	fx_free(&f);
}

Test(infoflow, empty_commitment_refused_at_attach_16_2)
{
	struct fx f;
	fx_init(&f, MSB_INTEGRITY_UNESTABLISHED);
	const char *g[] = {""};
	f.so.standing_guidance = g;
	f.so.n_standing_guidance = 1;
	msb_tool_session *s = NULL;
	cr_assert_eq(msb_tool_session_attach(&f.so, &s, NULL), MSB_E_VALUE);
	fx_free(&f);
}

/* ---- 16.7 - 16.9 file integrity at read time
 * ----------------------------------------------------- */

Test(infoflow, requires_file_integrity_16_7)
{
	struct fx f;
	fx_init(&f, MSB_INTEGRITY_UNESTABLISHED);
	f.so.requires_file_integrity_set = true;
	f.so.requires_file_integrity = MSB_INTEGRITY_TRUSTED;
	fx_attach(&f);
	msb_tool_call *c = begin(&f);
	read_ok(c, "trusted.txt");
	char *s = read_refused(c, "untrusted.txt");
	cr_assert(strncmp(s, "Error:", 6) == 0);
	cr_assert(strstr(s, "untrusted"), "%s", s);
	free(s);
	s = read_refused(c, "unrecorded.txt");
	cr_assert(strstr(s, "unestablished"), "below every level: %s", s);
	free(s);
	msb_tool_result *res;
	end_text(c, MSB_CALL_RESULT, "x", &res);
	msb_tool_result_free(res);
	fx_free(&f);

	/* None required: unrestricted. */
	fx_init(&f, MSB_INTEGRITY_UNESTABLISHED);
	fx_attach(&f);
	c = begin(&f);
	read_ok(c, "untrusted.txt");
	read_ok(c, "unrecorded.txt");
	end_text(c, MSB_CALL_RESULT, "x", &res);
	msb_tool_result_free(res);
	fx_free(&f);

	/* With no provenance at all, every file is unestablished. */
	fx_init(&f, MSB_INTEGRITY_UNESTABLISHED);
	f.so.provenance = NULL;
	f.so.requires_file_integrity_set = true;
	f.so.requires_file_integrity = MSB_INTEGRITY_UNTRUSTED;
	fx_attach(&f);
	c = begin(&f);
	free(read_refused(c, "trusted.txt"));
	end_text(c, MSB_CALL_RESULT, "x", &res);
	msb_tool_result_free(res);
	fx_free(&f);
}

Test(infoflow, provenance_floor_for_unrecorded_paths_16_8)
{
	struct fx f;
	fx_init(&f, MSB_INTEGRITY_TRUSTED);
	f.so.requires_file_integrity_set = true;
	f.so.requires_file_integrity = MSB_INTEGRITY_TRUSTED;
	fx_attach(&f);
	msb_tool_call *c = begin(&f);
	read_ok(c, "unrecorded.txt");
	free(read_refused(c, "untrusted.txt"));
	msb_tool_result *res;
	end_text(c, MSB_CALL_RESULT, "x", &res);
	msb_tool_result_free(res);
	/* The fold of a path is the weakest recorded for it. */
	bool recorded = false;
	cr_assert_eq(msb_file_store_provenance_record(f.prov, "trusted.txt",
						      MSB_INTEGRITY_UNTRUSTED, NULL),
		     0);
	cr_assert_eq(msb_file_store_provenance_fold(f.prov, "trusted.txt", &recorded),
		     MSB_INTEGRITY_UNTRUSTED);
	cr_assert(recorded);
	cr_assert_eq(msb_file_store_provenance_fold(f.prov, "nowhere", &recorded),
		     MSB_INTEGRITY_TRUSTED);
	cr_assert_not(recorded);
	fx_free(&f);
}

Test(infoflow, refusal_is_a_string_recorded_as_store_file_read_16_9_17_12)
{
	struct fx f;
	fx_init(&f, MSB_INTEGRITY_UNESTABLISHED);
	f.so.requires_file_integrity_set = true;
	f.so.requires_file_integrity = MSB_INTEGRITY_TRUSTED;
	fx_attach(&f);
	msb_tool_call *c = begin(&f);
	free(read_refused(c, "untrusted.txt"));
	/* Recorded, so it passes the integrity check, but not in the store. */
	cr_assert_eq(msb_file_store_provenance_record(f.prov, "missing.txt", MSB_INTEGRITY_TRUSTED,
						      NULL),
		     0);
	char *s = read_refused(c, "missing.txt");
	cr_assert(strstr(s, "does not exist"), "%s", s);
	free(s);
	read_ok(c, "trusted.txt");
	char id[16];
	snprintf(id, sizeof(id), "%s", msb_tool_call_id(c));
	msb_tool_result *res;
	end_text(c, MSB_CALL_RESULT, "x", &res);
	msb_tool_result_free(res);
	cr_assert_eq(f.rec.n_reads, 3);
	cr_assert_str_eq(f.rec.reads[0].outcome, "refused");
	cr_assert_eq(f.rec.reads[0].integrity, MSB_INTEGRITY_UNTRUSTED);
	cr_assert_str_eq(f.rec.reads[0].path, "untrusted.txt");
	cr_assert_str_eq(f.rec.reads[1].outcome, "absent");
	cr_assert_str_eq(f.rec.reads[2].outcome, "read");
	cr_assert_eq(f.rec.reads[2].integrity, MSB_INTEGRITY_TRUSTED);
	cr_assert_str_eq(f.rec.reads[2].call, id, "the call column");
	cr_assert(f.rec.reads[2].has_key);
	cr_assert_eq(f.rec.ended[0].n_keys, 1, "the key the store was read under (17.4)");

	/* Wiring errors: no store, an ended call. */
	cr_assert_eq(msb_tool_call_read_file(NULL, "x", &s, NULL, &s, NULL), MSB_E_RUNTIME);
	fx_free(&f);
	fx_init(&f, MSB_INTEGRITY_UNESTABLISHED);
	f.so.file_store = NULL;
	fx_attach(&f);
	c = begin(&f);
	char *t = NULL;
	cr_assert_eq(msb_tool_call_read_file(c, "x", &t, NULL, &s, NULL), MSB_E_VALUE);
	end_text(c, MSB_CALL_RESULT, "x", &res);
	msb_tool_result_free(res);
	fx_free(&f);
}

/* ---- 16.10 - 16.16 the file fold ------------------------------------------------------------- */

static msb_tool_result *stamped(const char *source_integrity, const char *confidentiality,
				const char *cap, const char *const *reads, size_t n_reads)
{
	struct fx f;
	fx_init(&f, MSB_INTEGRITY_UNESTABLISHED);
	f.so.source_integrity = source_integrity;
	f.so.confidentiality = confidentiality;
	f.so.outbound_max_confidentiality = cap;
	fx_attach(&f);
	msb_tool_call *c = begin(&f);
	for (size_t i = 0; i < n_reads; i++) {
		char *sentence = NULL;
		free(readf(c, reads[i], &sentence));
		free(sentence);
	}
	msb_tool_result *res;
	cr_assert_eq(end_text(c, MSB_CALL_RESULT, "derived", &res), 0);
	fx_free(&f);
	return res;
}

Test(infoflow, stamping_needs_both_declarations_16_10_16_15)
{
	msb_tool_result *r = stamped(NULL, "internal", NULL, NULL, 0);
	cr_assert_not(r->items[0].has_label, "no source_integrity: unlabelled");
	msb_tool_result_free(r);
	r = stamped("bogus", "internal", NULL, NULL, 0);
	cr_assert_not(r->items[0].has_label, "an invalid declaration does not enable it");
	msb_tool_result_free(r);
	r = stamped("trusted", NULL, "internal", NULL, 0);
	cr_assert_not(r->items[0].has_label, "the outbound cap is not stamping (16.15)");
	msb_tool_result_free(r);
	r = stamped("trusted", "Internal/Finance", NULL, NULL, 0);
	cr_assert(r->items[0].has_label);
	cr_assert_eq(r->items[0].integrity, MSB_INTEGRITY_TRUSTED, "a call that read nothing");
	cr_assert_str_eq(r->items[0].confidentiality, "Internal/Finance", "copied verbatim");
	msb_tool_result_free(r);
}

Test(infoflow, stamp_is_the_weaker_of_declaration_and_reads_16_11_16_16)
{
	const char *untrusted[] = {"untrusted.txt"};
	const char *trusted[] = {"trusted.txt"};
	const char *unrecorded[] = {"unrecorded.txt"};
	/* Declared trusted (as a kind with nothing_survives_from would), read
	 * weak content: demoted all the same (16.16). */
	msb_tool_result *r = stamped("trusted", "internal", NULL, untrusted, 1);
	cr_assert_eq(r->items[0].integrity, MSB_INTEGRITY_UNTRUSTED);
	msb_tool_result_free(r);
	r = stamped("untrusted", "internal", NULL, trusted, 1);
	cr_assert_eq(r->items[0].integrity, MSB_INTEGRITY_UNTRUSTED, "never promoted");
	msb_tool_result_free(r);
	r = stamped("trusted", "internal", NULL, trusted, 1);
	cr_assert_eq(r->items[0].integrity, MSB_INTEGRITY_TRUSTED);
	msb_tool_result_free(r);
	r = stamped("trusted", "internal", NULL, unrecorded, 1);
	cr_assert_eq(r->items[0].integrity, MSB_INTEGRITY_UNTRUSTED,
		     "an unestablished read demotes a trusted declaration");
	msb_tool_result_free(r);
}

Test(infoflow, reads_that_fed_nothing_do_not_count_16_12_17_15)
{
	struct fx f;
	fx_init(&f, MSB_INTEGRITY_UNESTABLISHED);
	f.so.source_integrity = "trusted";
	f.so.confidentiality = "internal";
	f.so.requires_file_integrity_set = true;
	f.so.requires_file_integrity = MSB_INTEGRITY_TRUSTED;
	fx_attach(&f);
	msb_tool_call *c = begin(&f);
	free(read_refused(c, "untrusted.txt"));
	free(read_refused(c, "missing.txt"));
	msb_tool_result *res;
	cr_assert_eq(end_text(c, MSB_CALL_RESULT, "x", &res), 0);
	cr_assert_eq(res->items[0].integrity, MSB_INTEGRITY_TRUSTED, "stamp == declaration");
	msb_tool_result_free(res);
	cr_assert_not(f.rec.ended[0].fed, "a refused or absent read fed nothing");
	cr_assert_eq(f.rec.ended[0].fed_count, 0);
	fx_free(&f);
}

Test(infoflow, error_sentences_are_stamped_too_16_13)
{
	struct fx f;
	fx_init(&f, MSB_INTEGRITY_UNESTABLISHED);
	f.so.source_integrity = "trusted";
	f.so.confidentiality = "internal";
	fx_attach(&f);
	msb_tool_call *c = begin(&f);
	read_ok(c, "untrusted.txt");
	msb_tool_result *res;
	cr_assert_eq(end_text(c, MSB_CALL_REFUSAL, "Error: the build failed", &res), 0);
	cr_assert_eq(res->n_items, 1);
	cr_assert(res->items[0].has_label);
	cr_assert_eq(res->items[0].integrity, MSB_INTEGRITY_UNTRUSTED);
	msb_tool_result_free(res);
	cr_assert_str_eq(f.rec.ended[0].outcome, "refusal");
	fx_free(&f);
}

struct conc {
	msb_tool_session *s;
	bool read_weak;
	pthread_barrier_t *bar;
	msb_tool_result *res;
};

static void *conc_call(void *p)
{
	struct conc *a = p;
	msb_tool_call *c = NULL;
	msb_tool_session_begin_call(a->s, NULL, &c, NULL);
	if (a->read_weak)
		read_ok(c, "untrusted.txt");
	pthread_barrier_wait(a->bar); /* both calls are open at once */
	char g[64];
	snprintf(g, sizeof(g), "call %s ends", msb_tool_call_id(c));
	const char *texts[] = {"derived", g};
	end_items(c, texts, 2, &a->res, NULL);
	return NULL;
}

Test(infoflow, declaration_never_mutated_calls_keep_separate_answers_16_14, .timeout = 30)
{
	struct fx f;
	fx_init(&f, MSB_INTEGRITY_UNESTABLISHED);
	f.so.source_integrity = "trusted";
	f.so.confidentiality = "internal";
	const char *g[] = {"call {call_id} ends"};
	f.so.standing_guidance = g;
	f.so.n_standing_guidance = 1;
	fx_attach(&f);
	pthread_barrier_t bar;
	pthread_barrier_init(&bar, NULL, 2);
	struct conc a = {f.s, true, &bar, NULL}, b = {f.s, false, &bar, NULL};
	pthread_t ta, tb;
	pthread_create(&ta, NULL, conc_call, &a);
	pthread_create(&tb, NULL, conc_call, &b);
	pthread_join(ta, NULL);
	pthread_join(tb, NULL);
	cr_assert_not_null(a.res);
	cr_assert_not_null(b.res);
	cr_assert_eq(a.res->items[0].integrity, MSB_INTEGRITY_UNTRUSTED, "only that call demoted");
	cr_assert_eq(b.res->items[0].integrity, MSB_INTEGRITY_TRUSTED);
	cr_assert_eq(a.res->items[1].integrity, MSB_INTEGRITY_TRUSTED,
		     "guidance keeps its committed label");
	cr_assert_str_eq(a.res->items[1].confidentiality, "public");
	msb_tool_result_free(a.res);
	msb_tool_result_free(b.res);
	/* And a later call starts from the declaration again. */
	msb_tool_call *c = begin(&f);
	char gt[64];
	snprintf(gt, sizeof(gt), "call %s ends", msb_tool_call_id(c));
	const char *texts[] = {"derived", gt};
	msb_tool_result *res;
	cr_assert_eq(end_items(c, texts, 2, &res, NULL), 0);
	cr_assert_eq(res->items[0].integrity, MSB_INTEGRITY_TRUSTED);
	msb_tool_result_free(res);
	pthread_barrier_destroy(&bar);
	fx_free(&f);
}

Test(infoflow, fed_folds_reads_that_carried_text_17_15)
{
	struct fx f;
	fx_init(&f, MSB_INTEGRITY_UNESTABLISHED);
	fx_attach(&f);
	msb_tool_call *c = begin(&f);
	read_ok(c, "trusted.txt");
	read_ok(c, "untrusted.txt");
	msb_tool_result *res;
	end_text(c, MSB_CALL_RESULT, "x", &res);
	msb_tool_result_free(res);
	cr_assert(f.rec.ended[0].fed);
	cr_assert_eq(f.rec.ended[0].fed_count, 2);
	cr_assert_eq(f.rec.ended[0].fed_weakest, MSB_INTEGRITY_UNTRUSTED);
	/* No reads: no fold at all (never "trusted" for nothing). */
	end_text(begin(&f), MSB_CALL_RESULT, "x", &res);
	msb_tool_result_free(res);
	cr_assert_not(f.rec.ended[1].fed);
	cr_assert_eq(f.rec.ended[1].fed_count, 0);
	/* Only an absent read: no fold either. */
	c = begin(&f);
	free(read_refused(c, "missing.txt"));
	end_text(c, MSB_CALL_RESULT, "x", &res);
	msb_tool_result_free(res);
	cr_assert_not(f.rec.ended[2].fed);
	/* Independent of any observer: the stamp sees the same fold. */
	fx_free(&f);
}

/* ---- 17.19, 17.20 EffectiveState ------------------------------------------------------------- */

Test(infoflow, effective_state_is_posture_never_payload_17_19)
{
	struct fx f;
	fx_init(&f, MSB_INTEGRITY_UNESTABLISHED);
	msb_spec *spec = spec_from("{\"kind\": \"A\", \"egress\": \"allowlist\", \"egress_allow\": "
				   "[\"pypi.org\"], \"labels\": {\"secret-label\": \"v\"}}");
	const char *tools[] = {"lookup", "send"};
	char *json = NULL;
	cr_assert_eq(
		msb_effective_state_json(f.r, spec, "in-process", tools, 2, "abc123", &json, NULL),
		0);
	json_t *o = json_loads(json, 0, NULL);
	cr_assert_not_null(o, "%s", json);
	cr_assert_str_eq(json_string_value(json_object_get(o, "backend")), "in-process");
	cr_assert_str_eq(json_string_value(json_object_get(o, "isolation")), "none");
	cr_assert_str_eq(json_string_value(json_object_get(o, "isolation_scope")), "conversation");
	cr_assert_str_eq(json_string_value(json_object_get(o, "egress")), "allowlist");
	cr_assert_str_eq(json_string_value(json_array_get(json_object_get(o, "egress_allow"), 0)),
			 "pypi.org");
	cr_assert_eq(json_array_size(json_object_get(o, "required_capabilities")), 2);
	cr_assert_eq(json_array_size(json_object_get(o, "declared_capabilities")), 3,
		     "the fake: exec, files_in, reclaim");
	cr_assert_eq(json_array_size(json_object_get(o, "host_tools")), 2);
	cr_assert_str_eq(json_string_value(json_object_get(o, "call")), "abc123");
	cr_assert_eq(json_object_size(o), 9, "nothing else: no key, no labels");
	cr_assert_null(strstr(json, "secret-label"));
	json_decref(o);
	free(json);
	cr_assert_eq(msb_effective_state_json(f.r, spec, "nope", NULL, 0, NULL, &json, NULL),
		     MSB_E_VALUE);
	msb_spec_unref(spec);
	fx_free(&f);
}

struct state_store {
	int writes;
	char tool[16];
	char json[1024];
};

static int set_state(void *ud, const char *tool, const char *json)
{
	struct state_store *s = ud;
	s->writes++;
	snprintf(s->tool, sizeof(s->tool), "%s", tool);
	snprintf(s->json, sizeof(s->json), "%s", json);
	return 0;
}

Test(infoflow, effective_state_one_entry_per_tool_refused_writes_nothing_17_20)
{
	struct fx f;
	fx_init(&f, MSB_INTEGRITY_UNESTABLISHED);
	struct state_store st = {0};
	f.so.state_set = set_state;
	f.so.state_set_userdata = &st;
	fx_attach(&f);
	char ids[2][16];
	for (int i = 0; i < 2; i++) {
		msb_tool_call *c = begin(&f);
		snprintf(ids[i], sizeof(ids[i]), "%s", msb_tool_call_id(c));
		msb_sandbox *sb;
		char *sentence = NULL;
		cr_assert_eq(msb_tool_call_acquire(c, &K1, &sb, &sentence, NULL), 0);
		msb_tool_result *res;
		end_text(c, MSB_CALL_RESULT, "x", &res);
		msb_tool_result_free(res);
	}
	cr_assert_eq(st.writes, 2);
	cr_assert_str_eq(st.tool, "tool");
	cr_assert(strstr(st.json, ids[1]), "overwritten by the second call");
	cr_assert_null(strstr(st.json, "\"t\""), "no key in it");

	/* A refused call writes nothing. */
	msb_fake_backend_set_purging(f.fake, true);
	msb_tool_call *c = begin(&f);
	msb_sandbox *sb;
	char *sentence = NULL;
	cr_assert_eq(msb_tool_call_acquire(c, &K1, &sb, &sentence, NULL), 0);
	cr_assert_not_null(sentence);
	free(sentence);
	msb_tool_result *res;
	end_text(c, MSB_CALL_REFUSAL, "x", &res);
	msb_tool_result_free(res);
	cr_assert_eq(st.writes, 2);
	fx_free(&f);
}

/* ---- 15.23 the tool's declarations ------------------------------------------------------------
 */

static json_t *decls(const char *spec_json, const msb_tool_declarations_options *o)
{
	msb_spec *spec = spec_from(spec_json);
	char *s = NULL;
	cr_assert_eq(msb_sandbox_tool_declarations(spec, o, &s, NULL), 0);
	json_t *j = json_loads(s, 0, NULL);
	free(s);
	msb_spec_unref(spec);
	return j;
}

Test(infoflow, tool_declarations_15_23)
{
	msb_tool_declarations_options o = MSB_TOOL_DECLARATIONS_OPTIONS_INIT;
	o.outbound_max_confidentiality = "internal";
	json_t *j = decls("{\"kind\": \"A\"}", &o);
	cr_assert_str_eq(json_string_value(json_object_get(j, "source_integrity")), "trusted");
	cr_assert_null(json_object_get(j, "max_allowed_confidentiality"),
		       "closed, nothing lands: nothing goes out");
	json_decref(j);
	const char *lands = "{\"kind\": \"A\", \"requires\": [\"exec\", \"files_out\"], "
			    "\"declared_outputs\": [{\"path\": \"r.txt\"}]}";
	j = decls(lands, &o);
	cr_assert_null(json_object_get(j, "max_allowed_confidentiality"), "no sink given");
	json_decref(j);
	o.has_output_sink = true;
	j = decls(lands, &o);
	cr_assert_str_eq(json_string_value(json_object_get(j, "max_allowed_confidentiality")),
			 "internal");
	json_decref(j);
	o.has_output_sink = false;
	j = decls("{\"kind\": \"A\", \"egress\": \"allowlist\", \"egress_allow\": [\"x.org\"]}",
		  &o);
	cr_assert_not_null(json_object_get(j, "max_allowed_confidentiality"));
	json_decref(j);
	o.also_carries_out = true;
	o.source_integrity = NULL;
	j = decls("{\"kind\": \"A\"}", &o);
	cr_assert_not_null(json_object_get(j, "max_allowed_confidentiality"));
	cr_assert_null(json_object_get(j, "source_integrity"), "none omits it");
	json_decref(j);
	o.source_integrity = "bogus";
	msb_spec *spec = spec_from("{\"kind\": \"A\"}");
	char *s = NULL;
	cr_assert_eq(msb_sandbox_tool_declarations(spec, &o, &s, NULL), MSB_E_VALUE);
	msb_spec_unref(spec);

	/* The session's properties: derived, plus confidentiality. */
	struct fx f;
	fx_init(&f, MSB_INTEGRITY_UNESTABLISHED);
	f.so.confidentiality = "internal";
	fx_attach(&f);
	cr_assert_eq(msb_tool_session_properties(f.s, &s, NULL), 0);
	cr_assert_str_eq(s, "{\"confidentiality\":\"internal\",\"source_integrity\":\"trusted\"}");
	free(s);
	fx_free(&f);
}
