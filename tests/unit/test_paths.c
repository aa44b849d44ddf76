/* SPDX-License-Identifier: Apache-2.0 */
/* Guest path helpers (checklist 10.12-10.18, 9.31). */
#include <string.h>

#include <criterion/criterion.h>

#include <msb/paths.h>

/* ---- helpers ---------------------------------------------------------------- */

static void assert_refused(int r, msb_error *err, int code, const char *phrase)
{
	cr_assert_eq(r, code, "expected %s, got %s", msb_code_name(code), msb_code_name(r));
	cr_assert_not_null(err);
	cr_assert_eq(msb_error_code(err), code);
	cr_assert(strstr(msb_error_message(err), phrase) != NULL, "message `%s` lacks `%s`",
		  msb_error_message(err), phrase);
}

/* A scripted unconfined lstat: a table of (path, kind); the rest is absent. */
struct entry {
	const char *path;
	msb_entry_kind kind;
};

struct table {
	const struct entry *e;
	size_t n;
	int calls;
	const char *last;
	int fail_code; /* non-zero: every stat fails */
};

static int table_lstat(void *userdata, const char *abs_path, bool *present, msb_entry_kind *kind,
		       msb_error **err)
{
	struct table *t = userdata;
	t->calls++;
	t->last = NULL;
	if (t->fail_code)
		return msb_error_set(err, t->fail_code, "stat of `%s` failed", abs_path);
	*present = false;
	for (size_t i = 0; i < t->n; i++) {
		if (strcmp(t->e[i].path, abs_path) == 0) {
			*present = true;
			*kind = t->e[i].kind;
			t->last = t->e[i].path;
		}
	}
	return 0;
}

#define TABLE(arr)                                                                                 \
	{                                                                                          \
		(arr), sizeof(arr) / sizeof((arr)[0]), 0, NULL, 0                                  \
	}

/* ---- normpath (24.21) -------------------------------------------------------- */

Test(paths, normpath_is_posix_normpath)
{
	static const char *const cases[][2] = {
		{"", "."},
		{"/", "/"},
		{"a/./b/../c", "a/c"},
		{"../a/..", ".."},
		{"/../x", "/x"},
		{"a/../..", ".."},
		{"./", "."},
		{"///", "/"},
		{"a/b/../../..", ".."},
		{"/a/b/../../..", "/"},
		{"..", ".."},
		{"/w/./a//b/", "/w/a/b"},
		/* Decision: a leading "//" collapses too (Linux guests read it as "/"). */
		{"//a//b/", "/a/b"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *n = msb_guest_normpath(cases[i][0]);
		cr_assert_not_null(n);
		cr_assert_str_eq(n, cases[i][1], "normpath(`%s`)", cases[i][0]);
		free(n);
	}
	cr_assert_null(msb_guest_normpath(NULL));
}

/* ---- 10.12 confine_guest_path ------------------------------------------------ */

Test(paths, confine_10_12_joins_and_normalises)
{
	char *out = NULL;
	cr_assert_eq(msb_confine_guest_path("a/../b", "/w", &out, NULL), 0);
	cr_assert_str_eq(out, "/w/b");
	free(out);
	cr_assert_eq(msb_confine_guest_path(".", "/w/", &out, NULL), 0);
	cr_assert_str_eq(out, "/w");
	free(out);
	cr_assert_eq(msb_confine_guest_path("", "/w", &out, NULL), 0);
	cr_assert_str_eq(out, "/w");
	free(out);
	/* 9.12: an absolute path inside the working directory is accepted. */
	cr_assert_eq(msb_confine_guest_path("/w/in.txt", "/w", &out, NULL), 0);
	cr_assert_str_eq(out, "/w/in.txt");
	free(out);
	cr_assert_eq(msb_confine_guest_path("etc/x", "/", &out, NULL), 0);
	cr_assert_str_eq(out, "/etc/x");
	free(out);
}

Test(paths, confine_10_12_refuses_escape)
{
	const char *escapes[] = {"../x", "a/../../x", "/etc/passwd", "/w-outside/x", "/"};
	for (size_t i = 0; i < sizeof(escapes) / sizeof(escapes[0]); i++) {
		msb_error *err = NULL;
		char *out = (char *)"untouched";
		int r = msb_confine_guest_path(escapes[i], "/w", &out, &err);
		assert_refused(r, err, MSB_E_VALUE, "resolves outside the working directory");
		cr_assert_str_eq(out, "untouched", "output written on refusal");
		msb_error_free(err);
	}
}

Test(paths, confine_10_12_refuses_backslash)
{
	msb_error *err = NULL;
	char *out = NULL;
	int r = msb_confine_guest_path("a\\b", "/w", &out, &err);
	assert_refused(r, err, MSB_E_VALUE, "backslash");
	cr_assert_null(out);
	msb_error_free(err);
	err = NULL;
	r = msb_confine_guest_path("a", "/w\\x", &out, &err);
	assert_refused(r, err, MSB_E_VALUE, "backslash");
	msb_error_free(err);
}

Test(paths, confine_10_12_needs_absolute_wd)
{
	msb_error *err = NULL;
	char *out = NULL;
	int r = msb_confine_guest_path("a", "w", &out, &err);
	assert_refused(r, err, MSB_E_VALUE, "not an absolute guest path");
	msb_error_free(err);
	err = NULL;
	r = msb_confine_guest_path(NULL, "/w", &out, &err);
	assert_refused(r, err, MSB_E_VALUE, "NULL");
	msb_error_free(err);
}

/* 10.18: guest grammar is POSIX whatever the host. */
Test(paths, posix_grammar_10_18)
{
	char *out = NULL;
	cr_assert_eq(msb_confine_guest_path("a/b", "/w", &out, NULL), 0);
	cr_assert_str_eq(out, "/w/a/b");
	free(out);
}

/* ---- 10.13 guest_path_relative_to --------------------------------------------- */

static char *rel(const char *path, const char *base)
{
	char *out = (char *)"unset";
	cr_assert_eq(msb_guest_path_relative_to(path, base, &out, NULL), 0);
	return out;
}

Test(paths, relative_to_10_13)
{
	cr_assert_null(rel("/w/sub2", "/w/sub"), "sibling sharing a prefix is a descendant");
	cr_assert_null(rel("/w/../etc", "/w"));
	cr_assert_null(rel("/etc", "/w"));
	char *r = rel("/w/a/b", "/w");
	cr_assert_str_eq(r, "a/b");
	free(r);
	r = rel("/w/", "/w");
	cr_assert_str_eq(r, "");
	free(r);
	r = rel("/w/./a/../b", "/w/");
	cr_assert_str_eq(r, "b");
	free(r);
	r = rel("/x/y", "/");
	cr_assert_str_eq(r, "x/y");
	free(r);

	msb_error *err = NULL;
	char *out = NULL;
	int e = msb_guest_path_relative_to("/w/a\\b", "/w", &out, &err);
	assert_refused(e, err, MSB_E_VALUE, "backslash");
	msb_error_free(err);
}

/* ---- 10.14 guest_directory_chain ---------------------------------------------- */

Test(paths, directory_chain_10_14)
{
	char **chain = NULL;
	cr_assert_eq(msb_guest_directory_chain("/m/w/a/b", "/m/w", &chain, NULL), 0);
	const char *want[] = {"/m", "/m/w", "/m/w/a", "/m/w/a/b"};
	cr_assert_eq(msb_strv_len(chain), 4);
	for (size_t i = 0; i < 4; i++)
		cr_assert_str_eq(chain[i], want[i]);
	msb_strv_free(chain);

	/* A relative path joins onto wd: the chain still starts above wd. */
	cr_assert_eq(msb_guest_directory_chain("a/./b", "/m/w", &chain, NULL), 0);
	cr_assert_eq(msb_strv_len(chain), 4);
	for (size_t i = 0; i < 4; i++)
		cr_assert_str_eq(chain[i], want[i]);
	msb_strv_free(chain);

	cr_assert_eq(msb_guest_directory_chain("/", "/", &chain, NULL), 0);
	cr_assert_eq(msb_strv_len(chain), 0);
	msb_strv_free(chain);
}

/* ---- 10.15 refuse_symlinked_parents ------------------------------------------- */

Test(paths, walk_10_15_link_ancestor_refused)
{
	static const struct entry e[] = {{"/m", MSB_ENTRY_SYMLINK}};
	struct table t = TABLE(e);
	msb_error *err = NULL;
	int r = msb_refuse_symlinked_parents(table_lstat, &t, "/m/w/a/f", "/m/w", false, &err);
	assert_refused(r, err, MSB_E_VALUE, "`/m` is a link");
	msb_error_free(err);
}

Test(paths, walk_10_15_fifo_is_not_a_directory)
{
	static const struct entry e[] = {{"/m", MSB_ENTRY_DIRECTORY},
					 {"/m/w", MSB_ENTRY_DIRECTORY},
					 {"/m/w/a", MSB_ENTRY_OTHER}};
	struct table t = TABLE(e);
	msb_error *err = NULL;
	int r = msb_refuse_symlinked_parents(table_lstat, &t, "/m/w/a/f", "/m/w", false, &err);
	assert_refused(r, err, MSB_E_NOT_DIRECTORY, "`/m/w/a` is not a directory");
	msb_error_free(err);

	static const struct entry e2[] = {{"/m", MSB_ENTRY_DIRECTORY},
					  {"/m/w", MSB_ENTRY_DIRECTORY},
					  {"/m/w/a", MSB_ENTRY_FILE}};
	struct table t2 = TABLE(e2);
	err = NULL;
	r = msb_refuse_symlinked_parents(table_lstat, &t2, "a/f", "/m/w", false, &err);
	assert_refused(r, err, MSB_E_NOT_DIRECTORY, "not a directory");
	msb_error_free(err);
}

Test(paths, walk_10_15_missing_component_ends_walk)
{
	/* /m/w/a is missing; a (nonsensical) link below it is never asked about. */
	static const struct entry e[] = {{"/m", MSB_ENTRY_DIRECTORY},
					 {"/m/w", MSB_ENTRY_DIRECTORY},
					 {"/m/w/a/b", MSB_ENTRY_SYMLINK}};
	struct table t = TABLE(e);
	cr_assert_eq(
		msb_refuse_symlinked_parents(table_lstat, &t, "/m/w/a/b/c/f", "/m/w", false, NULL),
		0);
	cr_assert_eq(t.calls, 3, "the walk went on past a missing component");
}

Test(paths, walk_10_15_include_self)
{
	static const struct entry e[] = {{"/m", MSB_ENTRY_DIRECTORY},
					 {"/m/w", MSB_ENTRY_DIRECTORY},
					 {"/m/w/l", MSB_ENTRY_SYMLINK}};
	struct table t = TABLE(e);
	/* Without include_self the leaf is not walked. */
	cr_assert_eq(msb_refuse_symlinked_parents(table_lstat, &t, "l", "/m/w", false, NULL), 0);
	msb_error *err = NULL;
	int r = msb_refuse_symlinked_parents(table_lstat, &t, "l", "/m/w", true, &err);
	assert_refused(r, err, MSB_E_VALUE, "`/m/w/l` is a link");
	msb_error_free(err);
}

Test(paths, walk_10_15_stat_errors_propagate)
{
	static const struct entry e[] = {{"/m", MSB_ENTRY_DIRECTORY}};
	struct table t = TABLE(e);
	t.fail_code = MSB_E_PERMISSION;
	msb_error *err = NULL;
	int r = msb_refuse_symlinked_parents(table_lstat, &t, "/m/w/f", "/m/w", false, &err);
	assert_refused(r, err, MSB_E_PERMISSION, "stat of `/m` failed");
	msb_error_free(err);
}

/* 9.31: the walk is only as good as its stat. A stat that follows links reports
 * the linked ancestor as a directory and the escape goes through. */
Test(paths, walk_9_31_needs_a_no_follow_stat)
{
	static const struct entry following[] = {{"/m", MSB_ENTRY_DIRECTORY},
						 {"/m/w", MSB_ENTRY_DIRECTORY},
						 {"/m/w/out", MSB_ENTRY_DIRECTORY}};
	static const struct entry no_follow[] = {{"/m", MSB_ENTRY_DIRECTORY},
						 {"/m/w", MSB_ENTRY_DIRECTORY},
						 {"/m/w/out", MSB_ENTRY_SYMLINK}};
	struct table tf = TABLE(following);
	struct table tn = TABLE(no_follow);
	cr_assert_eq(
		msb_refuse_symlinked_parents(table_lstat, &tf, "out/hostname", "/m/w", false, NULL),
		0);
	cr_assert_eq(
		msb_refuse_symlinked_parents(table_lstat, &tn, "out/hostname", "/m/w", false, NULL),
		MSB_E_VALUE);
}

/* ---- 10.16 confine_guest_write_path (the 9.12-9.17 cases) ---------------------- */

static const struct entry hostile[] = {
	{"/m", MSB_ENTRY_DIRECTORY},	 {"/m/w", MSB_ENTRY_DIRECTORY},
	{"/m/w/out", MSB_ENTRY_SYMLINK}, {"/m/w/l", MSB_ENTRY_SYMLINK},
	{"/m/w/plain", MSB_ENTRY_FILE},	 {"/m/w/sub", MSB_ENTRY_DIRECTORY},
	{"/m/w/sub/f", MSB_ENTRY_FILE},	 {"/m/w-outside", MSB_ENTRY_DIRECTORY},
	{"/lnk", MSB_ENTRY_SYMLINK},	 {"/lnk/w", MSB_ENTRY_DIRECTORY},
};

static void write_refused(const char *path, const char *wd, int code, const char *phrase)
{
	struct table t = TABLE(hostile);
	msb_error *err = NULL;
	char *out = NULL;
	int r = msb_confine_guest_write_path(table_lstat, &t, path, wd, &out, &err);
	cr_assert_null(out, "`%s` accepted", path);
	assert_refused(r, err, code, phrase);
	msb_error_free(err);
}

static void write_accepted(const char *path, const char *wd, const char *want)
{
	struct table t = TABLE(hostile);
	char *out = NULL;
	msb_error *err = NULL;
	int r = msb_confine_guest_write_path(table_lstat, &t, path, wd, &out, &err);
	cr_assert_eq(r, 0, "`%s` refused: %s", path, err ? msb_error_message(err) : "");
	cr_assert_str_eq(out, want);
	free(out);
}

Test(paths, write_path_10_16_escape_9_12)
{
	write_refused("../outside.txt", "/m/w", MSB_E_VALUE, "resolves outside");
	write_refused("/m/w-outside/x", "/m/w", MSB_E_VALUE, "resolves outside");
	write_accepted("/m/w/in.txt", "/m/w", "/m/w/in.txt");
}

Test(paths, write_path_10_16_backslash_9_13)
{
	write_refused("a\\b.txt", "/m/w", MSB_E_VALUE, "backslash");
}

Test(paths, write_path_10_16_linked_parent_9_14)
{
	write_refused("out/f", "/m/w", MSB_E_VALUE, "`/m/w/out` is a link");
	/* A linked ancestor of the working directory. */
	write_refused("f", "/lnk/w", MSB_E_VALUE, "`/lnk` is a link");
	/* A linked working directory. */
	write_refused("f", "/m/w/out", MSB_E_VALUE, "`/m/w/out` is a link");
}

Test(paths, write_path_10_16_leaf_link_9_15)
{
	write_refused("l", "/m/w", MSB_E_VALUE, "destination `/m/w/l` is a link");
}

Test(paths, write_path_10_16_wd_itself_9_16)
{
	write_refused(".", "/m/w", MSB_E_VALUE, "is the working directory");
	write_refused("", "/m/w", MSB_E_VALUE, "is the working directory");
	write_refused("sub/..", "/m/w", MSB_E_VALUE, "is the working directory");
}

Test(paths, write_path_10_16_plain_parent_9_17)
{
	write_refused("plain/x", "/m/w", MSB_E_NOT_DIRECTORY, "`/m/w/plain` is not a directory");
}

Test(paths, write_path_10_16_missing_parents_9_18)
{
	write_accepted("new/deep/f", "/m/w", "/m/w/new/deep/f");
	write_accepted("sub/f", "/m/w", "/m/w/sub/f");
}
