/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Outputs (checklist section 12) and the file-store sink (16.17-16.22) on
 * the testing fake: artifact names, collect_outputs' four phases and caps,
 * the filesystem sink, the file-store sink and its read tools, and
 * OutputsCollected.
 */
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <dirent.h>

#include <msb/msb.h>
#include <msb/testing.h>

#include "helpers.h"
#include "spy_sandbox.h"
#include "util/fs.h"
#include "util/sha256.h"

/* {"path"} and {"path", .optional = true}: brief declarations. */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

#define BASE MSB_DEFAULT_WORK_DIR
#define MiB (1024u * 1024u)

/* ---- fixture: a fake behind a spy, a sink root ----------------------------------------------- */

static msb_fake_sandbox *fake;
static struct spy spy;
static msb_sandbox *sb;
static char sink_root[64];

static void seed(const msb_fake_seed *seeds, size_t n)
{
	msb_fake_sandbox_options o = MSB_FAKE_SANDBOX_OPTIONS_INIT;
	o.seed_files = seeds;
	o.n_seed_files = n;
	msb_error *err = NULL;
	cr_assert_eq(msb_fake_sandbox_new(&o, &fake, &err), 0);
	memset(&spy, 0, sizeof(spy));
	cr_assert_eq(msb_fake_sandbox_handle(fake, &spy.inner, &err), 0);
	cr_assert_eq(spy_handle(&spy, &sb), 0);
}

static void setup(void)
{
	snprintf(sink_root, sizeof(sink_root), "/tmp/msb-sink-XXXXXX");
	cr_assert(mkdtemp(sink_root));
}

static void teardown(void)
{
	msb_sandbox_free(sb);
	sb = NULL;
	msb_sandbox_free(spy.inner);
	msb_fake_sandbox_unref(fake);
	fake = NULL;
	msb__rm_rf(sink_root);
}

TestSuite(outputs, .init = setup, .fini = teardown);

/* A seed of a regular file under the base. */
#define FILE_SEED(rel, text)                                                                       \
	{                                                                                          \
		BASE "/" rel, MSB_FAKE_SEED_BYTES, (const uint8_t *)(text), sizeof(text) - 1       \
	}

struct out_decl {
	const char *path;
	const char *name;
	bool optional;
	bool consume;
	const char *media_type;
};

static msb_declared_output decl(struct out_decl d)
{
	msb_declared_output o = MSB_DECLARED_OUTPUT_INIT;
	o.path = d.path;
	o.name = d.name;
	o.required = !d.optional;
	o.disposition = d.consume ? MSB_DISPOSITION_CONSUME : MSB_DISPOSITION_LAND;
	o.media_type = d.media_type;
	return o;
}

static msb_spec *spec_with(const struct out_decl *outs, size_t n, msb_transfer_limits caps,
			   bool call_time)
{
	msb_spec_builder *b = msb_spec_builder_new("outputs-kind");
	msb_spec_builder_set_requires(b, MSB_CAP_EXEC | MSB_CAP_FILES_OUT);
	for (size_t i = 0; i < n; i++) {
		msb_declared_output o = decl(outs[i]);
		msb_spec_builder_add_declared_output(b, &o);
	}
	msb_spec_builder_set_files_out(b, caps);
	msb_spec_builder_set_outputs_named_at_call_time(b, call_time);
	msb_spec *s = NULL;
	msb_error *err = NULL;
	cr_assert_eq(msb_spec_build(b, &s, &err), 0, "%s", err ? msb_error_message(err) : "");
	msb_spec_builder_free(b);
	return s;
}

static const msb_transfer_limits dflt = MSB_DEFAULT_TRANSFER_LIMITS_INIT;

/* A sink that records what it was given and can fail on the n-th delivery. */
struct rec_sink {
	int delivered;
	int fail_at; /* 1-based; 0 = never */
	char names[8][64];
	char media[8][32];
	char kinds[8][32];
	size_t lens[8];
	const char *seen_call;
};

static int rec_deliver(void *ud, const msb_artifact *a, const char *call_id,
		       msb_landed_artifact *out, msb_error **err)
{
	struct rec_sink *r = ud;
	if (r->fail_at && r->delivered + 1 == r->fail_at)
		return msb_error_set(err, MSB_E_LANDING_EXISTS, "scripted delivery failure");
	int i = r->delivered++;
	snprintf(r->names[i], sizeof(r->names[i]), "%s", a->name);
	snprintf(r->media[i], sizeof(r->media[i]), "%s", a->media_type ? a->media_type : "-");
	snprintf(r->kinds[i], sizeof(r->kinds[i]), "%s", a->kind);
	r->lens[i] = a->len;
	r->seen_call = call_id;
	out->display = strdup(a->name);
	return 0;
}

static msb_output_sink rec_sink_of(struct rec_sink *r)
{
	msb_output_sink s = MSB_OUTPUT_SINK_INIT;
	s.userdata = r;
	s.deliver = rec_deliver;
	return s;
}

static int collect(const msb_spec *spec, const msb_output_sink *sink,
		   const msb_declared_output *outs, size_t n_outs, const char *call_id,
		   msb_landed_artifact **landed, size_t *n, msb_error **err)
{
	msb_collect_options o = MSB_COLLECT_OPTIONS_INIT;
	o.sink = sink;
	o.outputs = outs;
	o.n_outputs = n_outs;
	o.call_id = call_id;
	return msb_collect_outputs(sb, spec, &o, landed, n, err);
}

/* collect and expect a refusal with `code` and `phrase`; returns nothing. */
#define COLLECT_REFUSED(spec, sink, outs, n_outs, call, code, phrase)                              \
	do {                                                                                       \
		msb_landed_artifact *l_ = NULL;                                                    \
		size_t n_ = 0;                                                                     \
		assert_refused(collect(spec, sink, outs, n_outs, call, &l_, &n_, &e_), code,       \
			       phrase);                                                            \
		cr_assert_null(l_);                                                                \
	} while (0)

/* ---- artifact names (12.24, 12.25, 12.31) --------------------------------------------------- */

Test(outputs, validate_artifact_name_refusals_12_24)
{
	char long_name[300];
	memset(long_name, 'a', 256);
	long_name[256] = '\0';
	const char *bad[] = {"",	"a\\b",		"/a",	 "a/../b",   "a//b",
			     "a/./b",	"a/",		"a\x01", "..",	     ".",
			     long_name, "\xed\xa0\x80", "\xff",	 "\xc0\xaf", "x/\x1f/y"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		msb_error *e = NULL;
		cr_assert_eq(msb_validate_artifact_name(bad[i], &e), MSB_E_ARTIFACT_NAME_INVALID,
			     "name %zu accepted", i);
		cr_assert(msb_code_is(msb_error_code(e), MSB_CAT_OUTPUT));
		msb_error_free(e);
	}
	memset(long_name, 'a', 255);
	long_name[255] = '\0';
	const char *good[] = {"dir/\xc3\xa9.png", long_name, "CON", "a:b", "a/b/c.txt", ".hidden"};
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		cr_assert_eq(msb_validate_artifact_name(good[i], NULL), 0, "`%s` refused", good[i]);
}

Test(outputs, max_artifact_name_bytes_12_31)
{
	cr_assert_eq(MSB_MAX_ARTIFACT_NAME_BYTES, 255);
}

Test(outputs, portable_name_12_25)
{
	struct {
		const char *in, *out;
	} cases[] = {
		{"CON.txt", "CON_.txt"},
		{"a:b", "a_b"},
		{"x. ", "x"},
		{"COM\xc2\xb9", "COM\xc2\xb9_"},
		{"lpt3", "lpt3_"},
		{"d/nul.tar.gz", "d/nul_.tar.gz"},
		{"q?*|\"<>", "q______"},
		{"...", "_"},
		{"CONSOLE", "CONSOLE"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *out = NULL;
		cr_assert_eq(msb_portable_name(cases[i].in, &out, NULL), 0);
		cr_assert_str_eq(out, cases[i].out, "portable_name(%s)", cases[i].in);
		free(out);
	}
	/* Never applied automatically: "CON" lands as "CON" (12.24). */
}

static bool collide(const char *a, const char *b)
{
	char *ka = NULL, *kb = NULL;
	cr_assert_eq(msb_artifact_name_collision_key(a, &ka, NULL), 0);
	cr_assert_eq(msb_artifact_name_collision_key(b, &kb, NULL), 0);
	bool same = strcmp(ka, kb) == 0;
	free(ka);
	free(kb);
	return same;
}

Test(outputs, collision_key_lower_not_casefold_12_9_12_10)
{
	cr_assert(collide("A.png", "a.png"));
	cr_assert(collide("\xc3\xa9.txt", "e\xcc\x81.txt")); /* NFC vs NFD */
	cr_assert(collide("\xc3\x89.TXT", "e\xcc\x81.txt")); /* case and form */
	cr_assert(!collide("stra\xc3\x9f"
			   "e.txt",
			   "strasse.txt"));		   /* ß vs ss */
	cr_assert(!collide("\xef\xac\x81.txt", "fi.txt")); /* ﬁ vs fi */
	cr_assert(!collide("a.png", "b.png"));
}

/* ---- declarations and the phase-1 checks ---------------------------------------------------- */

Test(outputs, declared_output_defaults_12_1)
{
	msb_declared_output d = MSB_DECLARED_OUTPUT_INIT;
	cr_assert_eq(d.disposition, MSB_DISPOSITION_LAND);
	cr_assert(d.required);
	cr_assert_null(d.name);
	cr_assert_null(d.media_type);
	msb_fake_seed s[] = {FILE_SEED("d.png", "PNG")};
	seed(s, 1);
	msb_spec *spec = spec_with((struct out_decl[]){{"d.png"}}, 1, dflt, false);
	struct rec_sink r = {0};
	msb_output_sink sink = rec_sink_of(&r);
	msb_landed_artifact *l = NULL;
	size_t n = 0;
	cr_assert_eq(collect(spec, &sink, NULL, 0, NULL, &l, &n, NULL), 0);
	cr_assert_eq(n, 1);
	cr_assert_str_eq(l[0].name, "d.png");
	msb_landed_artifacts_free(l, n);
	msb_spec_unref(spec);
}

Test(outputs, results_in_declaration_order_12_2)
{
	msb_fake_seed s[] = {FILE_SEED("a", "aaa"), FILE_SEED("b", "bb")};
	seed(s, 2);
	msb_spec *spec = spec_with((struct out_decl[]){{"b", .media_type = "text/csv"}, {"a"}}, 2,
				   dflt, false);
	struct rec_sink r = {0};
	msb_output_sink sink = rec_sink_of(&r);
	msb_landed_artifact *l = NULL;
	size_t n = 0;
	cr_assert_eq(collect(spec, &sink, NULL, 0, NULL, &l, &n, NULL), 0);
	cr_assert_eq(n, 2);
	cr_assert_str_eq(l[0].name, "b");
	cr_assert_str_eq(l[1].name, "a");
	/* media type declared, never sniffed; kind = the spec's (12.22) */
	cr_assert_str_eq(r.media[0], "text/csv");
	cr_assert_str_eq(r.media[1], "-");
	cr_assert_str_eq(r.kinds[0], "outputs-kind");
	cr_assert_str_eq(l[0].media_type, "text/csv");
	cr_assert_eq(l[0].size_bytes, 2);
	msb_landed_artifacts_free(l, n);
	msb_spec_unref(spec);
}

Test(outputs, call_time_outputs_need_the_flag_12_3)
{
	seed(NULL, 0);
	msb_spec *spec = spec_with(NULL, 0, dflt, false);
	struct rec_sink r = {0};
	msb_output_sink sink = rec_sink_of(&r);
	msb_declared_output x = decl((struct out_decl){"x"});
	COLLECT_REFUSED(spec, &sink, &x, 1, NULL, MSB_E_VALUE, "outputs_named_at_call_time");
	cr_assert_eq(spy.stats, 0);
	msb_spec_unref(spec);
}

Test(outputs, call_time_outputs_count_against_the_caps_12_4)
{
	msb_fake_seed s[] = {FILE_SEED("d", "1"), FILE_SEED("c", "2")};
	seed(s, 2);
	msb_transfer_limits caps = dflt;
	caps.max_files = 1;
	msb_spec *spec = spec_with((struct out_decl[]){{"d"}}, 1, caps, true);
	struct rec_sink r = {0};
	msb_output_sink sink = rec_sink_of(&r);
	msb_declared_output c = decl((struct out_decl){"c"});
	COLLECT_REFUSED(spec, &sink, &c, 1, NULL, MSB_E_TRANSFER_CAP_EXCEEDED, "max_files");
	cr_assert_eq(r.delivered, 0);
	/* And with room, both land: declared first, call-time after. */
	msb_spec_unref(spec);
	spec = spec_with((struct out_decl[]){{"d"}}, 1, dflt, true);
	msb_landed_artifact *l = NULL;
	size_t n = 0;
	cr_assert_eq(collect(spec, &sink, &c, 1, NULL, &l, &n, NULL), 0);
	cr_assert_eq(n, 2);
	cr_assert_str_eq(l[0].name, "d");
	cr_assert_str_eq(l[1].name, "c");
	msb_landed_artifacts_free(l, n);
	msb_spec_unref(spec);
}

Test(outputs, sink_required_for_landing_12_5)
{
	seed(NULL, 0);
	msb_spec *spec = spec_with((struct out_decl[]){{"out.png"}}, 1, dflt, false);
	COLLECT_REFUSED(spec, NULL, NULL, 0, NULL, MSB_E_OUTPUT_SINK_REQUIRED, "no output sink");
	cr_assert_eq(spy.stats, 0);
	msb_spec_unref(spec);
	/* The call-time flag alone lands artifacts too. */
	spec = spec_with(NULL, 0, dflt, true);
	COLLECT_REFUSED(spec, NULL, NULL, 0, NULL, MSB_E_OUTPUT_SINK_REQUIRED, "no output sink");
	msb_spec_unref(spec);
	/* CONSUME only, no flag: no sink needed. */
	spec = spec_with((struct out_decl[]){{"c", .optional = true, .consume = true}}, 1, dflt,
			 false);
	msb_landed_artifact *l = NULL;
	size_t n = 7;
	cr_assert_eq(collect(spec, NULL, NULL, 0, NULL, &l, &n, NULL), 0);
	cr_assert_eq(n, 0);
	msb_spec_unref(spec);
}

Test(outputs, helper_predicates_12_30)
{
	msb_spec *consume = spec_with((struct out_decl[]){{"c", .consume = true}}, 1, dflt, false);
	cr_assert(!msb_spec_lands_artifacts(consume));
	cr_assert_eq(msb_spec_landing_output_count(consume), 0);
	msb_spec *flagged = spec_with((struct out_decl[]){{"c", .consume = true}}, 1, dflt, true);
	cr_assert(msb_spec_lands_artifacts(flagged));
	msb_spec *land =
		spec_with((struct out_decl[]){{"a"}, {"c", .consume = true}}, 2, dflt, false);
	cr_assert_eq(msb_spec_landing_output_count(land), 1);
	/* Builds, never raises: the error comes back in *err. */
	msb_error *e = NULL;
	cr_assert_eq(msb_missing_sink_refusal(land, "attach", &e), MSB_E_OUTPUT_SINK_REQUIRED);
	cr_assert(strstr(msb_error_message(e), "attach") && strstr(msb_error_message(e), "`a`"));
	msb_error_free(e);
	msb_spec_unref(consume);
	msb_spec_unref(flagged);
	msb_spec_unref(land);
}

/* A minimal in-memory text store (16.17-16.21). */
struct mem_store {
	char *paths[16];
	char *texts[16];
	size_t n;
	bool fail_create;
	msb_file_store_provenance *prov; /* checked at create time */
	bool recorded_before_write;
};

static int ms_create(void *ud, const char *path, const char *text, size_t len, msb_error **err)
{
	struct mem_store *m = ud;
	if (m->prov) {
		bool rec = false;
		msb_file_store_provenance_fold(m->prov, path, &rec);
		m->recorded_before_write = rec;
	}
	if (m->fail_create)
		return msb_error_set(err, MSB_E_OS, "scripted store failure");
	for (size_t i = 0; i < m->n; i++)
		if (strcmp(m->paths[i], path) == 0)
			return msb_error_set(err, MSB_E_LANDING_EXISTS, "exists");
	m->paths[m->n] = strdup(path);
	m->texts[m->n] = strndup(text, len);
	m->n++;
	return 0;
}

static int ms_read(void *ud, const char *path, char **text, size_t *len, bool *present,
		   msb_error **err)
{
	struct mem_store *m = ud;
	*present = false;
	for (size_t i = 0; i < m->n; i++)
		if (strcmp(m->paths[i], path) == 0) {
			*present = true;
			*text = strdup(m->texts[i]);
			*len = strlen(m->texts[i]);
		}
	return 0;
}

static int ms_list(void *ud, const char *dir, char ***names, msb_error **err)
{
	struct mem_store *m = ud;
	char **v = calloc(m->n + 1, sizeof(char *));
	size_t k = 0, dl = strlen(dir);
	for (size_t i = 0; i < m->n; i++) {
		const char *p = m->paths[i];
		if (dl && (strncmp(p, dir, dl) != 0 || p[dl] != '/'))
			continue;
		const char *rest = dl ? p + dl + 1 : p;
		const char *slash = strchr(rest, '/');
		char *name = slash ? strndup(rest, (size_t)(slash - rest) + 1) : strdup(rest);
		bool dup = false;
		for (size_t j = 0; j < k; j++)
			dup = dup || strcmp(v[j], name) == 0;
		if (dup)
			free(name);
		else
			v[k++] = name;
	}
	*names = v;
	return 0;
}

static void mem_store_clear(struct mem_store *m)
{
	for (size_t i = 0; i < m->n; i++) {
		free(m->paths[i]);
		free(m->texts[i]);
	}
}

static msb_text_store text_store_of(struct mem_store *m)
{
	msb_text_store s = {MSB_TEXT_STORE_VERSION, m, ms_create, ms_read, ms_list};
	return s;
}

Test(outputs, per_call_sink_requires_call_id_12_6)
{
	seed(NULL, 0);
	struct mem_store m = {0};
	msb_text_store ts = text_store_of(&m);
	msb_output_sink *sink = NULL;
	cr_assert_eq(msb_store_sink_new(&ts, NULL, &sink, NULL), 0);
	cr_assert(sink->per_call);
	msb_spec *spec = spec_with((struct out_decl[]){{"r.txt"}}, 1, dflt, false);
	COLLECT_REFUSED(spec, sink, NULL, 0, NULL, MSB_E_VALUE, "call_id");
	cr_assert_eq(spy.stats, 0);
	msb_output_sink_free(sink);
	msb_spec_unref(spec);
}

Test(outputs, every_path_name_validated_before_any_stat_12_8)
{
	seed(NULL, 0);
	struct rec_sink r = {0};
	msb_output_sink sink = rec_sink_of(&r);
	msb_spec *spec =
		spec_with((struct out_decl[]){{"ok"}, {"../x", .consume = true}}, 2, dflt, false);
	COLLECT_REFUSED(spec, &sink, NULL, 0, NULL, MSB_E_ARTIFACT_NAME_INVALID, "`..`");
	cr_assert_eq(spy.stats, 0);
	msb_spec_unref(spec);
	/* A landing name that differs from its path is validated too. */
	spec = spec_with((struct out_decl[]){{"ok", .name = "a//b"}}, 1, dflt, false);
	COLLECT_REFUSED(spec, &sink, NULL, 0, NULL, MSB_E_ARTIFACT_NAME_INVALID, "empty segment");
	cr_assert_eq(spy.stats, 0);
	msb_spec_unref(spec);
}

Test(outputs, landing_collisions_refused_up_front_12_9)
{
	seed(NULL, 0);
	struct rec_sink r = {0};
	msb_output_sink sink = rec_sink_of(&r);
	msb_spec *spec =
		spec_with((struct out_decl[]){{"x1", .name = "A.png"}, {"x2", .name = "a.png"}}, 2,
			  dflt, false);
	COLLECT_REFUSED(spec, &sink, NULL, 0, NULL, MSB_E_ARTIFACT_NAME_COLLISION,
			"differ only in case or Unicode form");
	msb_spec_unref(spec);
	spec = spec_with(
		(struct out_decl[]){{"x1", .name = "\xc3\xa9"}, {"x2", .name = "e\xcc\x81"}}, 2,
		dflt, false);
	COLLECT_REFUSED(spec, &sink, NULL, 0, NULL, MSB_E_ARTIFACT_NAME_COLLISION,
			"differ only in case or Unicode form");
	msb_spec_unref(spec);
	spec = spec_with((struct out_decl[]){{"x1", .name = "same"}, {"x2", .name = "same"}}, 2,
			 dflt, false);
	COLLECT_REFUSED(spec, &sink, NULL, 0, NULL, MSB_E_ARTIFACT_NAME_COLLISION, "identical");
	msb_spec_unref(spec);
	/* The pair reported is the first the declaration order meets. */
	spec = spec_with((struct out_decl[]){{"p1", .name = "a"},
					     {"p2", .name = "B"},
					     {"p3", .name = "b"},
					     {"p4", .name = "A"}},
			 4, dflt, false);
	COLLECT_REFUSED(spec, &sink, NULL, 0, NULL, MSB_E_ARTIFACT_NAME_COLLISION, "`B` and `b`");
	msb_spec_unref(spec);
	cr_assert_eq(spy.stats, 0);
	/* One LAND and one CONSUME with the same name: fine. */
	msb_fake_seed s[] = {FILE_SEED("same", "x")};
	teardown();
	setup();
	seed(s, 1);
	spec = spec_with((struct out_decl[]){{"same"}, {"same", .consume = true}}, 2, dflt, false);
	msb_landed_artifact *l = NULL;
	size_t n = 0;
	cr_assert_eq(collect(spec, &sink, NULL, 0, NULL, &l, &n, NULL), 0);
	cr_assert_eq(n, 1);
	msb_landed_artifacts_free(l, n);
	msb_spec_unref(spec);
}

Test(outputs, straße_and_strasse_do_not_collide_12_10)
{
	msb_fake_seed s[] = {FILE_SEED("a", "1"), FILE_SEED("b", "2")};
	seed(s, 2);
	struct rec_sink r = {0};
	msb_output_sink sink = rec_sink_of(&r);
	msb_spec *spec = spec_with((struct out_decl[]){{"a", .name = "stra\xc3\x9f"
								     "e.txt"},
						       {"b", .name = "strasse.txt"}},
				   2, dflt, false);
	msb_landed_artifact *l = NULL;
	size_t n = 0;
	cr_assert_eq(collect(spec, &sink, NULL, 0, NULL, &l, &n, NULL), 0);
	cr_assert_eq(n, 2);
	msb_landed_artifacts_free(l, n);
	msb_spec_unref(spec);
}

Test(outputs, delivered_spelling_nfc_unless_none_12_11)
{
	msb_fake_seed s[] = {FILE_SEED("f", "1")};
	seed(s, 1);
	struct rec_sink r = {0};
	msb_output_sink sink = rec_sink_of(&r);
	msb_spec *spec =
		spec_with((struct out_decl[]){{"f", .name = "e\xcc\x81.txt"}}, 1, dflt, false);
	msb_landed_artifact *l = NULL;
	size_t n = 0;
	cr_assert_eq(collect(spec, &sink, NULL, 0, NULL, &l, &n, NULL), 0);
	cr_assert_str_eq(r.names[0], "\xc3\xa9.txt");
	msb_landed_artifacts_free(l, n);
	sink.normalization = MSB_NORMALIZATION_NONE;
	cr_assert_eq(collect(spec, &sink, NULL, 0, NULL, &l, &n, NULL), 0);
	cr_assert_str_eq(r.names[1], "e\xcc\x81.txt");
	msb_landed_artifacts_free(l, n);
	msb_spec_unref(spec);
}

/* ---- phases 2 and 3 ------------------------------------------------------------------------ */

Test(outputs, consume_counts_toward_caps_and_is_never_read_12_12)
{
	static uint8_t six[6 * MiB], three[3 * MiB];
	msb_fake_seed s[] = {{BASE "/c.bin", MSB_FAKE_SEED_BYTES, six, sizeof(six)},
			     {BASE "/l.bin", MSB_FAKE_SEED_BYTES, three, sizeof(three)}};
	seed(s, 2);
	msb_transfer_limits caps = {8 * MiB, 8 * MiB, 64};
	msb_spec *spec = spec_with((struct out_decl[]){{"c.bin", .consume = true}, {"l.bin"}}, 2,
				   caps, false);
	struct rec_sink r = {0};
	msb_output_sink sink = rec_sink_of(&r);
	COLLECT_REFUSED(spec, &sink, NULL, 0, NULL, MSB_E_TRANSFER_CAP_EXCEEDED, "max_total_bytes");
	cr_assert_eq(spy.stats, 2);
	cr_assert_eq(spy.reads, 0);
	cr_assert_eq(r.delivered, 0);
	msb_spec_unref(spec);
	/* Within the caps: CONSUME stat-ed, never read nor delivered. */
	caps.max_total_bytes = 16 * MiB;
	spec = spec_with((struct out_decl[]){{"c.bin", .consume = true}, {"l.bin"}}, 2, caps,
			 false);
	msb_landed_artifact *l = NULL;
	size_t n = 0;
	cr_assert_eq(collect(spec, &sink, NULL, 0, NULL, &l, &n, NULL), 0);
	cr_assert_eq(n, 1);
	cr_assert_eq(spy.reads, 1);
	cr_assert_str_eq(l[0].name, "l.bin");
	msb_landed_artifacts_free(l, n);
	msb_spec_unref(spec);
}

Test(outputs, missing_outputs_12_13)
{
	msb_fake_seed s[] = {FILE_SEED("here", "x")};
	seed(s, 1);
	struct rec_sink r = {0};
	msb_output_sink sink = rec_sink_of(&r);
	msb_spec *spec = spec_with((struct out_decl[]){{"here"}, {"gone"}}, 2, dflt, false);
	msb_error *e_ = NULL;
	msb_landed_artifact *l = NULL;
	size_t n = 0;
	cr_assert_eq(collect(spec, &sink, NULL, 0, NULL, &l, &n, &e_), MSB_E_OUTPUT_MISSING);
	const char *p = NULL;
	cr_assert(msb_error_path(e_, &p));
	cr_assert_str_eq(p, "gone");
	cr_assert(strstr(msb_error_message(e_), "`gone`"));
	msb_error_free(e_);
	cr_assert_eq(r.delivered, 0);
	msb_spec_unref(spec);
	spec = spec_with((struct out_decl[]){{"here"}, {"gone", .optional = true}}, 2, dflt, false);
	cr_assert_eq(collect(spec, &sink, NULL, 0, NULL, &l, &n, NULL), 0);
	cr_assert_eq(n, 1);
	cr_assert_str_eq(l[0].name, "here");
	msb_landed_artifacts_free(l, n);
	msb_spec_unref(spec);
}

Test(outputs, non_regular_outputs_12_14)
{
	msb_fake_seed s[] = {{BASE "/link", MSB_FAKE_SEED_SYMLINK, NULL, 0},
			     {BASE "/dir", MSB_FAKE_SEED_DIRECTORY, NULL, 0},
			     {BASE "/fifo", MSB_FAKE_SEED_OTHER, NULL, 0}};
	seed(s, 3);
	struct rec_sink r = {0};
	msb_output_sink sink = rec_sink_of(&r);
	const char *paths[] = {"link", "dir", "fifo"};
	/* Each named for what it is, article and all (issue 15 finding 9). */
	const char *said[] = {"output `link`: the output is a link, not a regular file",
			      "output `dir`: the output is a directory, not a regular file",
			      "output `fifo`: the output is a device, socket or fifo, not a "
			      "regular file"};
	for (size_t i = 0; i < 3; i++) {
		msb_spec *spec = spec_with((struct out_decl[]){{paths[i]}}, 1, dflt, false);
		COLLECT_REFUSED(spec, &sink, NULL, 0, NULL, MSB_E_OUTPUT_NOT_REGULAR, said[i]);
		msb_spec_unref(spec);
	}
	cr_assert_eq(spy.reads, 0);
}

Test(outputs, unknown_size_fails_closed_12_15)
{
	msb_fake_seed s[] = {FILE_SEED("u", "xyz")};
	seed(s, 1);
	spy.unknown_size_path = "u";
	struct rec_sink r = {0};
	msb_output_sink sink = rec_sink_of(&r);
	msb_spec *spec = spec_with((struct out_decl[]){{"u"}}, 1, dflt, false);
	COLLECT_REFUSED(spec, &sink, NULL, 0, NULL, MSB_E_OUTPUT_SIZE_UNKNOWN, "no size");
	cr_assert_eq(spy.reads, 0);
	msb_spec_unref(spec);
}

static void expect_cap(const msb_spec *spec, const msb_output_sink *sink, const char *cap,
		       const char *file)
{
	msb_error *e = NULL;
	msb_landed_artifact *l = NULL;
	size_t n = 0;
	cr_assert_eq(collect(spec, sink, NULL, 0, NULL, &l, &n, &e), MSB_E_TRANSFER_CAP_EXCEEDED);
	const char *c = NULL, *f = NULL;
	cr_assert(msb_error_cap(e, &c, &f));
	cr_assert_str_eq(c, cap);
	cr_assert_str_eq(f, file);
	cr_assert(strstr(msb_error_message(e), cap) && strstr(msb_error_message(e), file));
	msb_error_free(e);
}

Test(outputs, caps_and_their_order_12_16)
{
	msb_fake_seed s[] = {FILE_SEED("one", "1"), FILE_SEED("two", "2"),
			     FILE_SEED("big", "0123456789")};
	seed(s, 3);
	struct rec_sink r = {0};
	msb_output_sink sink = rec_sink_of(&r);
	/* max_files 1, two 1-byte outputs: the second breaches. */
	msb_spec *spec = spec_with((struct out_decl[]){{"one"}, {"two"}}, 2,
				   (msb_transfer_limits){100, 100, 1}, false);
	expect_cap(spec, &sink, "max_files", "two");
	msb_spec_unref(spec);
	/* Per file is checked before the count. */
	spec = spec_with((struct out_decl[]){{"one"}, {"big"}}, 2, (msb_transfer_limits){5, 100, 1},
			 false);
	expect_cap(spec, &sink, "max_bytes_per_file", "big");
	msb_spec_unref(spec);
	/* The running total. */
	spec = spec_with((struct out_decl[]){{"big"}, {"one"}, {"two"}}, 3,
			 (msb_transfer_limits){100, 11, 10}, false);
	expect_cap(spec, &sink, "max_total_bytes", "two");
	msb_spec_unref(spec);
	cr_assert_eq(r.delivered, 0);
	cr_assert_eq(spy.reads, 0);
}

Test(outputs, refusal_in_phase_2_delivers_nothing_12_7)
{
	msb_fake_seed s[] = {FILE_SEED("a", "aa"), FILE_SEED("b", "0123456789")};
	seed(s, 2);
	struct rec_sink r = {0};
	msb_output_sink sink = rec_sink_of(&r);
	msb_spec *spec = spec_with((struct out_decl[]){{"a"}, {"b"}}, 2,
				   (msb_transfer_limits){4, 100, 10}, false);
	expect_cap(spec, &sink, "max_bytes_per_file", "b");
	cr_assert_eq(r.delivered, 0);
	cr_assert_eq(spy.reads, 0, "phase 3 ran before phase 2 finished");
	msb_spec_unref(spec);
	/* Output #2 missing at read time: no delivery either. */
	spec = spec_with((struct out_decl[]){{"a"}, {"b"}}, 2, dflt, false);
	spy.read_fail_path = "b";
	spy.read_fail_code = MSB_E_NOT_FOUND;
	COLLECT_REFUSED(spec, &sink, NULL, 0, NULL, MSB_E_OUTPUT_UNREACHABLE, "scripted");
	cr_assert_eq(r.delivered, 0);
	msb_spec_unref(spec);
}

Test(outputs, file_grown_between_stat_and_read_is_refused_12_17)
{
	msb_fake_seed s[] = {FILE_SEED("first", "ok"), FILE_SEED("g.txt", "0123456789")};
	seed(s, 2);
	spy.grow_rel = "g.txt";
	spy.grow_path = "g.txt";
	struct rec_sink r = {0};
	msb_output_sink sink = rec_sink_of(&r);
	msb_spec *spec = spec_with((struct out_decl[]){{"first"}, {"g.txt"}}, 2, dflt, false);
	msb_error *e = NULL;
	msb_landed_artifact *l = NULL;
	size_t n = 0;
	cr_assert_eq(collect(spec, &sink, NULL, 0, NULL, &l, &n, &e), MSB_E_TRANSFER_CAP_EXCEEDED);
	cr_assert(strstr(msb_error_message(e), "grew"), "%s", msb_error_message(e));
	const char *c = NULL, *f = NULL;
	cr_assert(msb_error_cap(e, &c, &f));
	cr_assert_str_eq(f, "g.txt");
	msb_error_free(e);
	cr_assert_eq(r.delivered, 0);
	msb_spec_unref(spec);
}

Test(outputs, backend_vocabulary_translated_12_18)
{
	msb_fake_seed s[] = {FILE_SEED("a", "aa")};
	seed(s, 1);
	struct rec_sink r = {0};
	msb_output_sink sink = rec_sink_of(&r);
	msb_spec *spec = spec_with((struct out_decl[]){{"a"}}, 1, dflt, false);
	spy.stat_fail_path = "a";
	spy.stat_fail_code = MSB_E_VALUE;
	COLLECT_REFUSED(spec, &sink, NULL, 0, NULL, MSB_E_OUTPUT_NOT_CONFINED, "stat");
	spy.stat_fail_code = MSB_E_PERMISSION;
	COLLECT_REFUSED(spec, &sink, NULL, 0, NULL, MSB_E_OUTPUT_UNREACHABLE, "stat");
	spy.stat_fail_path = NULL;
	spy.read_fail_path = "a";
	spy.read_fail_code = MSB_E_NOT_FOUND;
	COLLECT_REFUSED(spec, &sink, NULL, 0, NULL, MSB_E_OUTPUT_UNREACHABLE, "read");
	spy.read_fail_code = MSB_E_VALUE;
	COLLECT_REFUSED(spec, &sink, NULL, 0, NULL, MSB_E_OUTPUT_NOT_CONFINED, "read");
	/* Both are SandboxOutputError; a NotImplementedError passes through. */
	cr_assert(msb_code_is(MSB_E_OUTPUT_NOT_CONFINED, MSB_CAT_OUTPUT));
	cr_assert(msb_code_is(MSB_E_OUTPUT_UNREACHABLE, MSB_CAT_OUTPUT));
	spy.read_fail_code = MSB_E_NOT_IMPLEMENTED;
	COLLECT_REFUSED(spec, &sink, NULL, 0, NULL, MSB_E_NOT_IMPLEMENTED, "scripted");
	cr_assert_eq(r.delivered, 0);
	msb_spec_unref(spec);
}

Test(outputs, delivery_residue_stays_12_19)
{
	msb_fake_seed s[] = {FILE_SEED("a", "aa"), FILE_SEED("b", "bb")};
	seed(s, 2);
	struct rec_sink r = {.fail_at = 2};
	msb_output_sink sink = rec_sink_of(&r);
	msb_spec *spec = spec_with((struct out_decl[]){{"a"}, {"b"}}, 2, dflt, false);
	COLLECT_REFUSED(spec, &sink, NULL, 0, NULL, MSB_E_LANDING_EXISTS, "scripted delivery");
	cr_assert_eq(r.delivered, 1);
	cr_assert_str_eq(r.names[0], "a");
	msb_spec_unref(spec);
}

Test(outputs, nothing_to_read_gives_empty_result_12_20)
{
	seed(NULL, 0);
	struct rec_sink r = {0};
	msb_output_sink sink = rec_sink_of(&r);
	msb_spec *spec =
		spec_with((struct out_decl[]){{"a", .optional = true}, {"b", .optional = true}}, 2,
			  dflt, false);
	msb_landed_artifact *l = NULL;
	size_t n = 9;
	cr_assert_eq(collect(spec, &sink, NULL, 0, NULL, &l, &n, NULL), 0);
	cr_assert_eq(n, 0);
	cr_assert_eq(r.delivered, 0);
	cr_assert_eq(spy.reads, 0);
	msb_landed_artifacts_free(l, n);
	msb_spec_unref(spec);
}

/* ---- OutputsCollected (12.21, 17.13) ------------------------------------------------------- */

struct seen {
	int events;
	char refusal[64];
	char call[32];
	size_t n_landed;
	char first[32];
	uint64_t bytes;
	bool keyed;
};

static int on_collected(void *ud, const msb_ev_outputs_collected *ev)
{
	struct seen *s = ud;
	s->events++;
	snprintf(s->refusal, sizeof(s->refusal), "%s", ev->refusal ? ev->refusal : "");
	snprintf(s->call, sizeof(s->call), "%s", ev->call ? ev->call : "");
	s->n_landed = ev->n_landed;
	snprintf(s->first, sizeof(s->first), "%s", ev->n_landed ? ev->landed[0] : "");
	s->bytes = ev->bytes;
	s->keyed = ev->key != NULL;
	return 0;
}

Test(outputs, outputs_collected_event_12_21)
{
	msb_fake_seed s[] = {FILE_SEED("a", "aaa"), FILE_SEED("b", "0123456789")};
	seed(s, 2);
	struct seen seen = {0};
	msb_observer ob = MSB_OBSERVER_INIT;
	ob.userdata = &seen;
	ob.outputs_collected = on_collected;
	struct rec_sink r = {0};
	msb_output_sink sink = rec_sink_of(&r);
	msb_key key = {.scope = "s", .thread_id = "t", .agent_dir = "/a"};
	msb_collect_options o = MSB_COLLECT_OPTIONS_INIT;
	o.sink = &sink;
	o.observer = &ob;
	o.key = &key;
	o.call_id = "c0ffee000001";
	msb_landed_artifact *l = NULL;
	size_t n = 0;
	/* A cap breach: the refusal by class name. */
	msb_spec *spec = spec_with((struct out_decl[]){{"a"}, {"b"}}, 2,
				   (msb_transfer_limits){5, 100, 10}, false);
	cr_assert_eq(msb_collect_outputs(sb, spec, &o, &l, &n, NULL), MSB_E_TRANSFER_CAP_EXCEEDED);
	cr_assert_eq(seen.events, 1);
	cr_assert_str_eq(seen.refusal, "SandboxTransferCapExceeded");
	cr_assert_str_eq(seen.call, "c0ffee000001");
	cr_assert(seen.keyed);
	cr_assert_eq(seen.n_landed, 0);
	msb_spec_unref(spec);
	/* A success: names and bytes, no refusal. */
	spec = spec_with((struct out_decl[]){{"a"}}, 1, dflt, false);
	cr_assert_eq(msb_collect_outputs(sb, spec, &o, &l, &n, NULL), 0);
	cr_assert_eq(seen.events, 2);
	cr_assert_str_eq(seen.refusal, "");
	cr_assert_eq(seen.n_landed, 1);
	cr_assert_str_eq(seen.first, "a");
	cr_assert_eq(seen.bytes, 3);
	msb_landed_artifacts_free(l, n);
	/* Outside a call: the call column is empty. */
	o.call_id = NULL;
	cr_assert_eq(msb_collect_outputs(sb, spec, &o, &l, &n, NULL), 0);
	cr_assert_str_eq(seen.call, "");
	msb_landed_artifacts_free(l, n);
	/* A phase-1 refusal is reported too; the message never is (17.16). */
	o.sink = NULL;
	cr_assert_eq(msb_collect_outputs(sb, spec, &o, &l, &n, NULL), MSB_E_OUTPUT_SINK_REQUIRED);
	cr_assert_str_eq(seen.refusal, "SandboxOutputSinkRequired");
	msb_spec_unref(spec);
}

Test(outputs, outputs_collected_jsonl_line_17_13)
{
	msb_fake_seed s[] = {FILE_SEED("a", "aaa")};
	seed(s, 1);
	char path[] = "/tmp/msb-jsonl-XXXXXX";
	int fd = mkstemp(path);
	cr_assert(fd >= 0);
	unlink(path);
	msb_jsonl_recorder *rec = NULL;
	msb_observer ob;
	cr_assert_eq(msb_jsonl_recorder_new(fd, &rec, &ob, NULL), 0);
	struct rec_sink r = {0};
	msb_output_sink sink = rec_sink_of(&r);
	msb_collect_options o = MSB_COLLECT_OPTIONS_INIT;
	o.sink = &sink;
	o.observer = &ob;
	msb_spec *spec = spec_with((struct out_decl[]){{"a"}}, 1, dflt, false);
	msb_landed_artifact *l = NULL;
	size_t n = 0;
	cr_assert_eq(msb_collect_outputs(sb, spec, &o, &l, &n, NULL), 0);
	msb_landed_artifacts_free(l, n);
	msb_jsonl_recorder_free(rec);
	char buf[512] = {0};
	cr_assert(pread(fd, buf, sizeof(buf) - 1, 0) > 0);
	close(fd);
	cr_assert(strstr(buf, "\"OutputsCollected\""), "%s", buf);
	cr_assert(strstr(buf, "\"landed\": [\"a\"]") || strstr(buf, "\"landed\":[\"a\"]"), "%s",
		  buf);
	msb_spec_unref(spec);
}

/* ---- sinks (12.22, 12.23, 12.26-12.29) ------------------------------------------------------ */

Test(outputs, output_sink_defaults_12_23)
{
	msb_output_sink s = MSB_OUTPUT_SINK_INIT;
	cr_assert_eq(s.normalization, MSB_NORMALIZATION_NFC);
	cr_assert(!s.per_call);
}

static msb_output_sink *fs_sink(msb_landing_existing existing)
{
	msb_fs_sink_options o = MSB_FS_SINK_OPTIONS_INIT;
	o.existing = existing;
	msb_output_sink *s = NULL;
	msb_error *e = NULL;
	cr_assert_eq(msb_fs_sink_new(sink_root, &o, &s, &e), 0, "%s",
		     e ? msb_error_message(e) : "");
	return s;
}

static void host_bytes(const char *rel, char *buf, size_t cap, ssize_t *len)
{
	char p[256];
	snprintf(p, sizeof(p), "%s/%s", sink_root, rel);
	int fd = open(p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	cr_assert(fd >= 0, "%s absent", p);
	*len = read(fd, buf, cap);
	close(fd);
}

Test(outputs, fs_sink_lands_nested_with_display_handle_and_sha256_12_22_12_28)
{
	static const uint8_t bin[] = {0x89, 'P', 'N', 'G', 0, 0xff, 7};
	msb_fake_seed s[] = {{BASE "/img.bin", MSB_FAKE_SEED_BYTES, bin, sizeof(bin)}};
	seed(s, 1);
	msb_output_sink *sink = fs_sink(MSB_LANDING_REFUSE);
	msb_spec *spec =
		spec_with((struct out_decl[]){{"img.bin", .name = "d/e/f.bin"}}, 1, dflt, false);
	msb_landed_artifact *l = NULL;
	size_t n = 0;
	msb_error *e = NULL;
	cr_assert_eq(collect(spec, sink, NULL, 0, NULL, &l, &n, &e), 0, "%s",
		     e ? msb_error_message(e) : "");
	cr_assert_eq(n, 1);
	cr_assert_str_eq(l[0].display, "d/e/f.bin (7 bytes)");
	char want[256];
	char *real = realpath(sink_root, NULL);
	snprintf(want, sizeof(want), "%s/d/e/f.bin", real);
	free(real);
	cr_assert_str_eq(l[0].handle, want);
	char hex[65];
	msb__sha256_hex(bin, sizeof(bin), hex);
	cr_assert_str_eq(l[0].sha256, hex);
	char buf[64];
	ssize_t len = 0;
	host_bytes("d/e/f.bin", buf, sizeof(buf), &len);
	cr_assert_eq(len, (ssize_t)sizeof(bin));
	cr_assert_eq(memcmp(buf, bin, sizeof(bin)), 0);
	/* The display is the only model-visible line: it names no host path. */
	cr_assert_null(strstr(l[0].display, sink_root));
	msb_landed_artifacts_free(l, n);
	msb_output_sink_free(sink);
	msb_spec_unref(spec);
}

Test(outputs, fs_sink_refuses_linked_parent_leaving_root_12_26)
{
	msb_fake_seed s[] = {FILE_SEED("x", "secret?")};
	seed(s, 1);
	/* A private directory outside the root stands for any host directory
	 * (not a shared one such as /tmp, where another process's file would
	 * decide the test). */
	char outside[] = "/tmp/msb-outside-XXXXXX";
	cr_assert_not_null(mkdtemp(outside));
	char link[128], landed[128];
	snprintf(link, sizeof(link), "%s/out", sink_root);
	snprintf(landed, sizeof(landed), "%s/x", outside);
	cr_assert_eq(symlink(outside, link), 0);
	msb_output_sink *sink = fs_sink(MSB_LANDING_REFUSE);
	msb_spec *spec = spec_with((struct out_decl[]){{"x", .name = "out/x"}}, 1, dflt, false);
	msb_error *e = NULL;
	msb_landed_artifact *l = NULL;
	size_t n = 0;
	cr_assert_eq(collect(spec, sink, NULL, 0, NULL, &l, &n, &e), MSB_E_LANDING_NOT_CONFINED);
	cr_assert_null(strstr(msb_error_message(e), sink_root));
	cr_assert_null(strstr(msb_error_message(e), outside));
	msb_error_free(e);
	cr_assert_eq(access(landed, F_OK), -1);
	cr_assert_eq(rmdir(outside), 0); /* empty: nothing landed there */
	msb_output_sink_free(sink);
	msb_spec_unref(spec);
}

Test(outputs, fs_sink_refuses_a_symlink_planted_in_the_root)
{
	msb_fake_seed s[] = {FILE_SEED("x", "payload")};
	seed(s, 1);
	/* A link at the leaf pointing inside the root, and a linked directory
	 * that stays inside it: neither is followed. */
	char p[128], q[128];
	snprintf(p, sizeof(p), "%s/target", sink_root);
	cr_assert_eq(mkdir(p, 0755), 0);
	snprintf(q, sizeof(q), "%s/inner", sink_root);
	cr_assert_eq(symlink("target", q), 0);
	snprintf(q, sizeof(q), "%s/leaf", sink_root);
	cr_assert_eq(symlink("target/leaf", q), 0);
	for (int replace = 0; replace < 2; replace++) {
		msb_output_sink *sink = fs_sink(replace ? MSB_LANDING_REPLACE : MSB_LANDING_REFUSE);
		msb_spec *spec =
			spec_with((struct out_decl[]){{"x", .name = "inner/x"}}, 1, dflt, false);
		COLLECT_REFUSED(spec, sink, NULL, 0, NULL, MSB_E_LANDING_NOT_CONFINED, "outside");
		msb_spec_unref(spec);
		spec = spec_with((struct out_decl[]){{"x", .name = "leaf"}}, 1, dflt, false);
		COLLECT_REFUSED(spec, sink, NULL, 0, NULL, MSB_E_LANDING_NOT_CONFINED, "outside");
		msb_spec_unref(spec);
		msb_output_sink_free(sink);
	}
	snprintf(p, sizeof(p), "%s/target/x", sink_root);
	cr_assert_eq(access(p, F_OK), -1);
	snprintf(p, sizeof(p), "%s/target/leaf", sink_root);
	cr_assert_eq(access(p, F_OK), -1);
}

Test(outputs, fs_sink_refuses_existing_unless_replace_12_27)
{
	msb_fake_seed s[] = {FILE_SEED("a.png", "NEW")};
	seed(s, 1);
	char p[128];
	snprintf(p, sizeof(p), "%s/a.png", sink_root);
	FILE *f = fopen(p, "we");
	fputs("OLD", f);
	fclose(f);
	msb_spec *spec = spec_with((struct out_decl[]){{"a.png"}}, 1, dflt, false);
	msb_output_sink *sink = fs_sink(MSB_LANDING_REFUSE);
	COLLECT_REFUSED(spec, sink, NULL, 0, NULL, MSB_E_LANDING_EXISTS, "exists");
	char buf[16] = {0};
	ssize_t len = 0;
	host_bytes("a.png", buf, sizeof(buf), &len);
	cr_assert_str_eq(buf, "OLD");
	msb_output_sink_free(sink);
	sink = fs_sink(MSB_LANDING_REPLACE);
	msb_landed_artifact *l = NULL;
	size_t n = 0;
	cr_assert_eq(collect(spec, sink, NULL, 0, NULL, &l, &n, NULL), 0);
	memset(buf, 0, sizeof(buf));
	host_bytes("a.png", buf, sizeof(buf), &len);
	cr_assert_str_eq(buf, "NEW");
	msb_landed_artifacts_free(l, n);
	msb_output_sink_free(sink);
	msb_spec_unref(spec);
	/* No temporary sibling is left behind by either. */
	DIR *d = opendir(sink_root);
	cr_assert_not_null(d);
	for (struct dirent *de; (de = readdir(d));)
		cr_assert(strncmp(de->d_name, ".msb-landing", 12) != 0, "left behind: %s",
			  de->d_name);
	closedir(d);
}

Test(outputs, third_occupied_name_leaves_first_two_landed_12_29)
{
	msb_fake_seed s[] = {FILE_SEED("1", "one"), FILE_SEED("2", "two"), FILE_SEED("3", "three")};
	seed(s, 3);
	char p[128];
	snprintf(p, sizeof(p), "%s/3", sink_root);
	FILE *f = fopen(p, "we");
	fputs("occupied", f);
	fclose(f);
	msb_output_sink *sink = fs_sink(MSB_LANDING_REFUSE);
	msb_spec *spec = spec_with((struct out_decl[]){{"1"}, {"2"}, {"3"}}, 3, dflt, false);
	COLLECT_REFUSED(spec, sink, NULL, 0, NULL, MSB_E_LANDING_EXISTS, "`3`");
	char buf[16] = {0};
	ssize_t len = 0;
	host_bytes("1", buf, sizeof(buf), &len);
	cr_assert_str_eq(buf, "one");
	memset(buf, 0, sizeof(buf));
	host_bytes("2", buf, sizeof(buf), &len);
	cr_assert_str_eq(buf, "two");
	memset(buf, 0, sizeof(buf));
	host_bytes("3", buf, sizeof(buf), &len);
	cr_assert_str_eq(buf, "occupied");
	msb_output_sink_free(sink);
	msb_spec_unref(spec);
}

static int shout_display(void *ud, const msb_artifact *a, const char *handle, char **out,
			 msb_error **err)
{
	*out = msb__asprintf("saved %s as %s", a->name, (const char *)ud);
	return 0;
}

Test(outputs, fs_sink_custom_display_12_26)
{
	msb_fake_seed s[] = {FILE_SEED("r.csv", "a,b\n")};
	seed(s, 1);
	msb_fs_sink_options o = MSB_FS_SINK_OPTIONS_INIT;
	o.display = shout_display;
	o.display_userdata = (void *)"an attachment";
	msb_output_sink *sink = NULL;
	cr_assert_eq(msb_fs_sink_new(sink_root, &o, &sink, NULL), 0);
	msb_spec *spec = spec_with((struct out_decl[]){{"r.csv"}}, 1, dflt, false);
	msb_landed_artifact *l = NULL;
	size_t n = 0;
	cr_assert_eq(collect(spec, sink, NULL, 0, NULL, &l, &n, NULL), 0);
	cr_assert_str_eq(l[0].display, "saved r.csv as an attachment");
	msb_landed_artifacts_free(l, n);
	msb_output_sink_free(sink);
	msb_spec_unref(spec);
}

/* ---- the file-store sink (16.17-16.21) ------------------------------------------------------ */

Test(outputs, store_sink_lands_at_call_id_slash_name_16_17)
{
	msb_fake_seed s[] = {FILE_SEED("r.txt", "report")};
	seed(s, 1);
	struct mem_store m = {0};
	msb_text_store ts = text_store_of(&m);
	msb_output_sink *sink = NULL;
	cr_assert_eq(msb_store_sink_new(&ts, NULL, &sink, NULL), 0);
	msb_spec *spec = spec_with((struct out_decl[]){{"r.txt"}}, 1, dflt, false);
	msb_landed_artifact *l = NULL;
	size_t n = 0;
	cr_assert_eq(collect(spec, sink, NULL, 0, "C", &l, &n, NULL), 0);
	cr_assert_eq(m.n, 1);
	cr_assert_str_eq(m.paths[0], "C/r.txt");
	cr_assert_str_eq(m.texts[0], "report");
	cr_assert_str_eq(l[0].handle, "C/r.txt");
	cr_assert_str_eq(l[0].display, "C/r.txt (6 bytes)");
	msb_landed_artifacts_free(l, n);
	/* 16.18: the same call again finds it there. */
	COLLECT_REFUSED(spec, sink, NULL, 0, "C", MSB_E_LANDING_EXISTS, "exists");
	cr_assert_str_eq(m.texts[0], "report");
	/* A call id that is not one segment is refused. */
	COLLECT_REFUSED(spec, sink, NULL, 0, "a/b", MSB_E_VALUE, "one path segment");
	msb_output_sink_free(sink);
	msb_spec_unref(spec);
	mem_store_clear(&m);
}

Test(outputs, store_sink_records_provenance_before_writing_16_19)
{
	msb_fake_seed s[] = {FILE_SEED("r.txt", "report")};
	seed(s, 1);
	msb_file_store_provenance *prov = NULL;
	cr_assert_eq(msb_file_store_provenance_new(MSB_INTEGRITY_TRUSTED, &prov, NULL), 0);
	struct mem_store m = {.prov = prov};
	msb_text_store ts = text_store_of(&m);
	msb_store_sink_options so = MSB_STORE_SINK_OPTIONS_INIT;
	so.provenance = prov;
	msb_output_sink *sink = NULL;
	cr_assert_eq(msb_store_sink_new(&ts, &so, &sink, NULL), 0);
	msb_spec *spec = spec_with((struct out_decl[]){{"r.txt"}}, 1, dflt, false);
	m.fail_create = true;
	COLLECT_REFUSED(spec, sink, NULL, 0, "C", MSB_E_OS, "scripted store failure");
	cr_assert(m.recorded_before_write);
	bool rec = false;
	cr_assert_eq(msb_file_store_provenance_fold(prov, "C/r.txt", &rec),
		     MSB_INTEGRITY_UNTRUSTED);
	cr_assert(rec);
	msb_output_sink_free(sink);
	msb_file_store_provenance_unref(prov);
	msb_spec_unref(spec);
	mem_store_clear(&m);
}

Test(outputs, store_sink_refuses_non_utf8_16_20)
{
	static const uint8_t ff[] = {0xff};
	static const uint8_t sur[] = {'a', 0xed, 0xa0, 0x80};
	msb_fake_seed s[] = {{BASE "/b", MSB_FAKE_SEED_BYTES, ff, 1},
			     {BASE "/s", MSB_FAKE_SEED_BYTES, sur, 4}};
	seed(s, 2);
	struct mem_store m = {0};
	msb_text_store ts = text_store_of(&m);
	msb_output_sink *sink = NULL;
	cr_assert_eq(msb_store_sink_new(&ts, NULL, &sink, NULL), 0);
	msb_spec *spec = spec_with((struct out_decl[]){{"b"}}, 1, dflt, false);
	COLLECT_REFUSED(spec, sink, NULL, 0, "C", MSB_E_LANDING_NOT_TEXT, "not UTF-8");
	msb_spec_unref(spec);
	spec = spec_with((struct out_decl[]){{"s"}}, 1, dflt, false);
	COLLECT_REFUSED(spec, sink, NULL, 0, "C", MSB_E_LANDING_NOT_TEXT, "not UTF-8");
	cr_assert_eq(m.n, 0);
	msb_output_sink_free(sink);
	msb_spec_unref(spec);
}

Test(outputs, read_tools_over_the_store_16_21)
{
	char **names = NULL;
	cr_assert_eq(msb_outputs_read_tool_names(NULL, &names, NULL), 0);
	cr_assert_str_eq(names[0], "sandbox_outputs_ls");
	cr_assert_str_eq(names[1], "sandbox_outputs_read");
	cr_assert_null(names[2], "a third tool exists");
	msb_strv_free(names);
	cr_assert_eq(msb_outputs_read_tool_names("art", &names, NULL), 0);
	cr_assert_str_eq(names[0], "art_ls");
	cr_assert_str_eq(names[1], "art_read");
	msb_strv_free(names);

	struct mem_store m = {0};
	msb_text_store ts = text_store_of(&m);
	ms_create(&m, "C/r.txt", "report", 6, NULL);
	ms_create(&m, "C/sub/x.txt", "x", 1, NULL);
	ms_create(&m, "D/y.txt", "y", 1, NULL);
	char *text = NULL;
	cr_assert_eq(msb_outputs_tool_ls(&ts, "", &text, NULL), 0);
	cr_assert_str_eq(text, "C/\nD/");
	free(text);
	cr_assert_eq(msb_outputs_tool_ls(&ts, "C", &text, NULL), 0);
	cr_assert_str_eq(text, "r.txt\nsub/");
	free(text);
	cr_assert_eq(msb_outputs_tool_read(&ts, "C/r.txt", &text, NULL), 0);
	cr_assert_str_eq(text, "report");
	free(text);
	cr_assert_eq(msb_outputs_tool_read(&ts, "C/none", &text, NULL), 0);
	cr_assert_str_eq(text, "Error: `C/none` is not in the outputs store");
	free(text);
	cr_assert_eq(msb_outputs_tool_read(&ts, "../etc/passwd", &text, NULL), 0);
	cr_assert(strncmp(text, "Error: ", 7) == 0);
	free(text);
	mem_store_clear(&m);
}

/* ---- names under generated input ------------------------------------------------------------ */

/* An independent reading of the 12.24 rules, for the property test below. */
static bool rules_allow(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > 255 || s[0] == '/' || s[n - 1] == '/' || strstr(s, "//") ||
	    strchr(s, '\\'))
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20)
			return false;
	bool ok = true;
	for (const char *seg = s; seg;) {
		const char *slash = strchr(seg, '/');
		size_t len = slash ? (size_t)(slash - seg) : strlen(seg);
		ok = ok && !(len == 1 && seg[0] == '.') && !(len == 2 && !strncmp(seg, "..", 2));
		seg = slash ? slash + 1 : NULL;
	}
	/* UTF-8: the text decode is byte-identical exactly for valid input. */
	size_t tl = 0;
	char *t = msb_text_from_bytes_len((const uint8_t *)s, n, &tl);
	ok = ok && tl == n && memcmp(t, s, n) == 0;
	free(t);
	return ok;
}

Test(outputs, names_hold_their_properties_under_generated_input_12_24_12_9)
{
	static const char *const pieces[] = {"a",
					     "B",
					     "/",
					     ".",
					     "..",
					     "\\",
					     "\xc3\xa9",
					     "e\xcc\x81",
					     "\xff",
					     "\xed\xa0\x80",
					     "\x01",
					     "\xc3\x9f",
					     "\xef\xac\x81",
					     "\xe0\xa5\x98",
					     "\xc0\xaf",
					     ":",
					     "CON",
					     " ",
					     "\xe1\xba\x9e",
					     "\xc4\xb0"};
	unsigned seed = 12345;
	for (int iter = 0; iter < 20000; iter++) {
		char name[400] = "";
		int parts = 1 + (int)(rand_r(&seed) % 12);
		for (int p = 0; p < parts; p++) {
			const char *piece =
				pieces[rand_r(&seed) % (sizeof(pieces) / sizeof(*pieces))];
			size_t have = strlen(name), add = strlen(piece);
			if (have + add < sizeof(name) - 1)
				memcpy(name + have, piece, add + 1);
		}
		bool valid = msb_validate_artifact_name(name, NULL) == 0;
		cr_assert_eq(valid, rules_allow(name), "`%s`: validate says %d", name, valid);
		if (!valid)
			continue;
		char *key = NULL, *again = NULL, *nfc = NULL;
		cr_assert_eq(msb_artifact_name_collision_key(name, &key, NULL), 0);
		cr_assert_eq(msb_artifact_name_collision_key(key, &again, NULL), 0);
		cr_assert_str_eq(key, again, "the key of a key is itself");
		cr_assert_eq(msb_artifact_name_normalize(name, MSB_NORMALIZATION_NFC, &nfc, NULL),
			     0);
		free(again);
		cr_assert_eq(msb_artifact_name_collision_key(nfc, &again, NULL), 0);
		cr_assert_str_eq(key, again, "a name and its NFC spelling collide");
		char *portable = NULL;
		cr_assert_eq(msb_portable_name(name, &portable, NULL), 0);
		cr_assert_null(strpbrk(portable, "<>:\"|?*\\"));
		free(portable);
		free(key);
		free(again);
		free(nfc);
	}
}
