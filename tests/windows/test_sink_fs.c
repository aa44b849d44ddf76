/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The filesystem sink on Windows (src/core/files/sink_fs_win32.c; checklist
 * 12.26-12.29; issue 21): the same refusals, with the same typed errors, as
 * on Linux (tests/unit/test_outputs.c). The links: Wine 8 creates no
 * Windows symlink or junction (CreateSymbolicLinkW is a stub there), but it
 * reports a unix symlink to a directory as a reparse point, so
 * scripts/test-windows makes a fixture with unix symlinks and names it in
 * MSB_SINK_LINK_FIXTURE (a Windows path): its root holds `via` and `leaf`,
 * both links to its `outside` directory.
 */
#include <windows.h>

#include <stdio.h>
#include <string.h>

#include <criterion/criterion.h>

#include <msb/msb.h>
#include <msb/outputs.h>

static char root[MAX_PATH];

static void setup(void)
{
	char tmp[MAX_PATH];
	cr_assert(GetTempPathA(sizeof(tmp), tmp) > 0);
	snprintf(root, sizeof(root), "%smsb-sink-%lu", tmp, (unsigned long)GetCurrentProcessId());
	cr_assert(CreateDirectoryA(root, NULL));
}

TestSuite(sink_fs_win, .init = setup);

static msb_output_sink *sink_at(const char *dir, msb_landing_existing existing)
{
	msb_fs_sink_options o = MSB_FS_SINK_OPTIONS_INIT;
	o.existing = existing;
	msb_output_sink *s = NULL;
	msb_error *err = NULL;
	cr_assert_eq(msb_fs_sink_new(dir, &o, &s, &err), 0, "%s", msb_error_message(err));
	return s;
}

static int deliver(msb_output_sink *s, const char *name, const char *text, msb_error **err,
		   msb_landed_artifact *out)
{
	msb_artifact a = {.name = name, .content = (const uint8_t *)text, .len = strlen(text)};
	memset(out, 0, sizeof(*out));
	return s->deliver(s->userdata, &a, NULL, out, err);
}

static char *slurp(const char *path)
{
	static char buf[256];
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	return buf;
}

Test(sink_fs_win, lands_whole_with_parents_made_12_26)
{
	msb_output_sink *s = sink_at(root, MSB_LANDING_REFUSE);
	msb_landed_artifact l;
	msb_error *err = NULL;
	cr_assert_eq(deliver(s, "a/b/c.txt", "hello", &err, &l), 0, "%s", msb_error_message(err));
	char path[MAX_PATH * 2];
	snprintf(path, sizeof(path), "%s\\a\\b\\c.txt", root);
	cr_assert_str_eq(slurp(path), "hello");
	cr_assert_str_eq(l.name, "a/b/c.txt");
	/* the handle is the file's Windows path */
	cr_assert_str_eq(slurp(l.handle), "hello");
	cr_assert_not_null(strstr(l.handle, "a\\b\\c.txt"));
	msb_landed_artifact_clear(&l);
	/* nothing else beside it: no landing sibling left behind */
	WIN32_FIND_DATAA fd;
	snprintf(path, sizeof(path), "%s\\a\\b\\*", root);
	HANDLE h = FindFirstFileA(path, &fd);
	cr_assert(h != INVALID_HANDLE_VALUE);
	int n = 0;
	do {
		if (strcmp(fd.cFileName, ".") && strcmp(fd.cFileName, ".."))
			n++;
	} while (FindNextFileA(h, &fd));
	FindClose(h);
	cr_assert_eq(n, 1);
	msb_output_sink_free(s);
}

Test(sink_fs_win, never_replaces_unless_asked_12_27)
{
	msb_output_sink *s = sink_at(root, MSB_LANDING_REFUSE);
	msb_landed_artifact l;
	msb_error *err = NULL;
	cr_assert_eq(deliver(s, "x.txt", "one", &err, &l), 0);
	msb_landed_artifact_clear(&l);
	cr_assert_eq(deliver(s, "x.txt", "two", &err, &l), MSB_E_LANDING_EXISTS);
	cr_assert_eq(msb_error_code(err), MSB_E_LANDING_EXISTS);
	msb_error_free(err);
	err = NULL;
	char path[MAX_PATH * 2];
	snprintf(path, sizeof(path), "%s\\x.txt", root);
	cr_assert_str_eq(slurp(path), "one");
	msb_output_sink_free(s);

	/* asked: replaced whole */
	s = sink_at(root, MSB_LANDING_REPLACE);
	cr_assert_eq(deliver(s, "x.txt", "two", &err, &l), 0, "%s", msb_error_message(err));
	msb_landed_artifact_clear(&l);
	cr_assert_str_eq(slurp(path), "two");
	/* a directory is never replaced, a parent that is a file not entered */
	snprintf(path, sizeof(path), "%s\\d", root);
	cr_assert(CreateDirectoryA(path, NULL));
	cr_assert_eq(deliver(s, "d", "x", &err, &l), MSB_E_LANDING_EXISTS);
	cr_assert_not_null(strstr(msb_error_message(err), "is a directory"));
	msb_error_free(err);
	err = NULL;
	cr_assert_eq(deliver(s, "x.txt/y", "x", &err, &l), MSB_E_LANDING_EXISTS);
	cr_assert_not_null(strstr(msb_error_message(err), "not a directory"));
	msb_error_free(err);
	msb_output_sink_free(s);
}

Test(sink_fs_win, names_windows_cannot_hold_are_refused)
{
	msb_output_sink *s = sink_at(root, MSB_LANDING_REPLACE);
	const char *bad[] = {"a:stream", "x.txt:zone", "CON", "nul.txt", "d/COM1", "lpt9.log",
			     "dot.",	 "space ",     "q?",  "a|b",	 NULL};
	for (size_t i = 0; bad[i]; i++) {
		msb_landed_artifact l;
		msb_error *err = NULL;
		cr_assert_eq(deliver(s, bad[i], "x", &err, &l), MSB_E_ARTIFACT_NAME_INVALID, "%s",
			     bad[i]);
		msb_error_free(err);
	}
	/* names near those are fine */
	msb_landed_artifact l;
	cr_assert_eq(deliver(s, "console.txt", "x", NULL, &l), 0);
	msb_landed_artifact_clear(&l);
	cr_assert_eq(deliver(s, "com10", "x", NULL, &l), 0);
	msb_landed_artifact_clear(&l);
	msb_output_sink_free(s);
}

/* The fixture's paths, from MSB_SINK_LINK_FIXTURE. */
static void fixture(char *froot, char *outside)
{
	const char *f = getenv("MSB_SINK_LINK_FIXTURE");
	cr_assert_not_null(f, "scripts/test-windows names the link fixture");
	snprintf(froot, MAX_PATH, "%s\\root", f);
	snprintf(outside, MAX_PATH, "%s\\outside", f);
}

Test(sink_fs_win, a_link_on_the_way_is_refused_12_26)
{
	char froot[MAX_PATH], outside[MAX_PATH], path[MAX_PATH * 2];
	fixture(froot, outside);
	msb_output_sink *s = sink_at(froot, MSB_LANDING_REPLACE);
	msb_landed_artifact l;
	msb_error *err = NULL;
	cr_assert_eq(deliver(s, "via/escaped.txt", "x", &err, &l), MSB_E_LANDING_NOT_CONFINED);
	cr_assert_eq(msb_error_code(err), MSB_E_LANDING_NOT_CONFINED);
	msb_error_free(err);
	err = NULL;
	cr_assert_eq(deliver(s, "via/deeper/escaped.txt", "x", &err, &l),
		     MSB_E_LANDING_NOT_CONFINED);
	msb_error_free(err);
	err = NULL;
	snprintf(path, sizeof(path), "%s\\escaped.txt", outside);
	cr_assert_eq(GetFileAttributesA(path), INVALID_FILE_ATTRIBUTES, "nothing landed outside");
	snprintf(path, sizeof(path), "%s\\deeper", outside);
	cr_assert_eq(GetFileAttributesA(path), INVALID_FILE_ATTRIBUTES);
	/* the leaf a link: not replaced, even when replacing is asked for */
	cr_assert_eq(deliver(s, "leaf", "x", &err, &l), MSB_E_LANDING_NOT_CONFINED);
	msb_error_free(err);
	snprintf(path, sizeof(path), "%s\\leaf", froot);
	DWORD a = GetFileAttributesA(path);
	cr_assert(a != INVALID_FILE_ATTRIBUTES && (a & FILE_ATTRIBUTE_REPARSE_POINT),
		  "the link is still there");
	msb_output_sink_free(s);
}
