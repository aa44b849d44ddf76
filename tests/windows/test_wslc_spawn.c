/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The wslc runner on Windows (src/backends/engine/wslc_run_win32.c;
 * checklist 21.11, 21.12; issue 21) against wslc.exe, our recording
 * stand-in (wslc_standin.c): argv quoted by the Windows rules arrives as
 * given, output is bounded, a child past its bound is killed and reaped.
 */
#include <windows.h>

#include <stdio.h>

#include <criterion/criterion.h>

#include "backends/engine/wslc.h"

static char standin[MAX_PATH], dir[MAX_PATH], rec[MAX_PATH], script[MAX_PATH];

static void setup(void)
{
	DWORD n = GetModuleFileNameA(NULL, standin, sizeof(standin));
	cr_assert(n > 0 && n < sizeof(standin));
	char *slash = strrchr(standin, '\\');
	cr_assert_not_null(slash);
	snprintf(slash + 1, sizeof(standin) - (size_t)(slash + 1 - standin), "wslc.exe");
	char tmp[MAX_PATH];
	cr_assert(GetTempPathA(sizeof(tmp), tmp) > 0);
	snprintf(dir, sizeof(dir), "%smsb-wslc-%lu", tmp, (unsigned long)GetCurrentProcessId());
	CreateDirectoryA(dir, NULL);
	snprintf(rec, sizeof(rec), "%s\\record", dir);
	snprintf(script, sizeof(script), "%s\\script", dir);
	SetEnvironmentVariableA("MSB_STANDIN_RECORD", rec);
	SetEnvironmentVariableA("MSB_STANDIN_SCRIPT", script);
}

static void teardown(void)
{
	DeleteFileA(rec);
	DeleteFileA(script);
	RemoveDirectoryA(dir);
}

TestSuite(wslc_spawn, .init = setup, .fini = teardown);

static void write_script(const char *text)
{
	FILE *f = fopen(script, "wb");
	cr_assert_not_null(f);
	fputs(text, f);
	fclose(f);
}

static wslc_io io_default(void)
{
	return (wslc_io){.max_out = 1 << 20, .max_err = 4096, .timeout = 60};
}

static void run_ok(char *const *argv, const wslc_io *io, wslc_outcome *out)
{
	msb_error *err = NULL;
	int r = msb_wslc__spawn(NULL, argv, io, out, &err);
	cr_assert_eq(r, 0, "%s", msb_error_message(err));
	msb_error_free(err);
}

Test(wslc_spawn, tricky_argv_arrives_as_given_21_11)
{
	write_script("");
	char *argv[] = {standin,     "container", "a b",	"he said \"hi\"",
			"C:\\dir\\", "a\\\"b",	  "x\\\\",	"tab\there",
			"",	     "\"",	  "ü and 日本", NULL};
	wslc_io io = io_default();
	wslc_outcome out;
	run_ok(argv, &io, &out);
	cr_assert_eq(out.exit_code, 0);
	msb_wslc__outcome_clear(&out);
	FILE *f = fopen(rec, "rb");
	cr_assert_not_null(f);
	char buf[4096];
	size_t n = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	size_t off = 0;
	for (int i = 1; argv[i]; i++) {
		cr_assert(off < n, "argument %d is missing", i);
		cr_assert_str_eq(buf + off, argv[i], "argument %d", i);
		off += strlen(argv[i]) + 1;
	}
	cr_assert_eq(off, n, "more arguments arrived than were given");
}

Test(wslc_spawn, a_program_path_with_spaces_runs_21_11)
{
	char sub[MAX_PATH], copy[MAX_PATH + 16];
	snprintf(sub, sizeof(sub), "%s\\Program Files", dir);
	snprintf(copy, sizeof(copy), "%s\\wslc.exe", sub);
	cr_assert(CreateDirectoryA(sub, NULL) || GetLastError() == ERROR_ALREADY_EXISTS);
	cr_assert(CopyFileA(standin, copy, FALSE));
	write_script("out ran\n");
	char *argv[] = {copy, "version", NULL};
	wslc_io io = io_default();
	wslc_outcome out;
	run_ok(argv, &io, &out);
	bool ran = out.exit_code == 0 && out.out.len == 3 && memcmp(out.out.data, "ran", 3) == 0;
	msb_wslc__outcome_clear(&out);
	DeleteFileA(copy);
	RemoveDirectoryA(sub);
	cr_assert(ran, "the stand-in under a path with a space did not run");
}

Test(wslc_spawn, exit_code_stdout_stderr_and_stdin)
{
	write_script("out hello\nerr WSLC_E_IMAGE_NOT_FOUND\ncat\nexit 3\n");
	char *argv[] = {standin, "image", "inspect", NULL};
	wslc_io io = io_default();
	static const uint8_t head[] = "head:", data[] = "body";
	io.has_stdin = true;
	io.in_head = head;
	io.in_head_len = 5;
	io.in_data = data;
	io.in_data_len = 4;
	io.in_tail_len = 3;
	wslc_outcome out;
	run_ok(argv, &io, &out);
	cr_assert_eq(out.exit_code, 3);
	cr_assert_eq(out.out.len, 5 + 5 + 4 + 3);
	cr_assert(memcmp(out.out.data, "hellohead:body\0\0\0", 17) == 0);
	cr_assert_eq(out.err.len, strlen("WSLC_E_IMAGE_NOT_FOUND"));
	cr_assert_not(out.timed_out);
	msb_wslc__outcome_clear(&out);
}

Test(wslc_spawn, output_is_bounded_21_12)
{
	write_script("flood 300000\n");
	char *argv[] = {standin, "logs", NULL};
	wslc_io io = io_default();
	io.max_out = 1000;
	io.bounded = true;
	wslc_outcome out;
	run_ok(argv, &io, &out);
	cr_assert(out.truncated);
	cr_assert_eq(out.out.len, 1000);
	msb_wslc__outcome_clear(&out);
	/* unbounded: more than max_out is a refusal */
	io.bounded = false;
	msb_error *err = NULL;
	cr_assert_lt(msb_wslc__spawn(NULL, argv, &io, &out, &err), 0);
	cr_assert_not_null(strstr(msb_error_message(err), "wrote more than 1000 bytes"));
	msb_error_free(err);
}

Test(wslc_spawn, killed_and_reaped_at_the_bound_21_12)
{
	write_script("out started\nhang\n");
	char *argv[] = {standin, "exec", NULL};
	wslc_io io = io_default();
	io.timeout = 1;
	wslc_outcome out;
	run_ok(argv, &io, &out);
	cr_assert(out.timed_out);
	cr_assert_eq(out.exit_code, 137);
	msb_wslc__outcome_clear(&out);
}

Test(wslc_spawn, a_missing_program_is_named_21_11)
{
	char missing[MAX_PATH + 32];
	snprintf(missing, sizeof(missing), "%s\\no-such-wslc.exe", dir);
	char *argv[] = {missing, "version", NULL};
	wslc_io io = io_default();
	wslc_outcome out;
	msb_error *err = NULL;
	cr_assert_lt(msb_wslc__spawn(NULL, argv, &io, &out, &err), 0);
	cr_assert_eq(msb_error_code(err), MSB_E_NOT_FOUND); /* as on Linux: ENOENT */
	cr_assert_not_null(strstr(msb_error_message(err), "is WSL 2.9.3 or later installed"));
	msb_error_free(err);
}
