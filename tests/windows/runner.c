/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The runner of the Windows unit tests (criterion/criterion.h beside this
 * file). As under Criterion, each test runs in a process of its own (this
 * program again, `--one INDEX`), so that the globals a test leaves behind,
 * a crash or a hang stay in that test: a failed assertion longjmps back, the
 * suite's .fini runs and the process exits 1; a test still running after
 * TEST_TIMEOUT_MS is terminated and fails. Arguments are substrings: only
 * tests whose "suite/name" contains one of them run. Prints a line per test
 * and "N passed, N failed" last; the exit status is non-zero when any test
 * failed or none ran.
 */
#include <windows.h>

#include <process.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#define MAX_TESTS 1024
#define MAX_SUITES 64
#define TEST_TIMEOUT_MS 120000

static struct {
	const char *suite, *name;
	void (*fn)(void);
} tests[MAX_TESTS];
static int n_tests;
static struct {
	const char *suite;
	struct win_test_opts opts;
} suites[MAX_SUITES];
static int n_suites;
static jmp_buf failed_at;

void win_register(const char *suite, const char *name, void (*fn)(void), struct win_test_opts opts)
{
	(void)opts;
	if (n_tests == MAX_TESTS) {
		fprintf(stderr, "runner: more than %d tests\n", MAX_TESTS);
		exit(2);
	}
	tests[n_tests].suite = suite;
	tests[n_tests].name = name;
	tests[n_tests].fn = fn;
	n_tests++;
}

void win_register_suite(const char *suite, struct win_test_opts opts)
{
	if (n_suites == MAX_SUITES) {
		fprintf(stderr, "runner: more than %d suites\n", MAX_SUITES);
		exit(2);
	}
	suites[n_suites].suite = suite;
	suites[n_suites].opts = opts;
	n_suites++;
}

void win_fail(const char *file, int line, const char *expr, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "  %s:%d: assertion failed: %s%s%s\n", file, line, expr, *msg ? ": " : "",
		msg);
	fflush(stderr);
	longjmp(failed_at, 1);
}

static const struct win_test_opts *suite_opts(const char *suite)
{
	for (int i = 0; i < n_suites; i++)
		if (strcmp(suites[i].suite, suite) == 0)
			return &suites[i].opts;
	return NULL;
}

static int selected(int i, int argc, char **argv)
{
	if (argc < 2)
		return 1;
	char full[256];
	snprintf(full, sizeof(full), "%s/%s", tests[i].suite, tests[i].name);
	for (int a = 1; a < argc; a++)
		if (strstr(full, argv[a]))
			return 1;
	return 0;
}

/* One test, its suite's .init before and .fini after; 1 when it passed. */
static int run_one(int i)
{
	const struct win_test_opts *volatile o = suite_opts(tests[i].suite);
	volatile int ok = 1;
	if (setjmp(failed_at) == 0) {
		if (o && o->init)
			o->init();
		tests[i].fn();
	} else {
		ok = 0;
	}
	if (o && o->fini && setjmp(failed_at) == 0)
		o->fini();
	return ok;
}

/* Test i in a child process; 1 when it passed. */
static int run_child(int i, const char *name)
{
	char self[MAX_PATH], idx[16];
	DWORD n = GetModuleFileNameA(NULL, self, sizeof(self));
	if (n == 0 || n >= sizeof(self)) {
		fprintf(stderr, "runner: cannot find its own program\n");
		exit(2);
	}
	snprintf(idx, sizeof(idx), "%d", i);
	fflush(stdout);
	fflush(stderr);
	/* Wine now and then fails a start under load: a start is tried thrice. */
	intptr_t h = -1;
	for (int tries = 0; tries < 3 && h == -1; tries++) {
		if (tries)
			Sleep(200);
		h = _spawnl(_P_NOWAIT, self, "unit-tests-win", "--one", idx, NULL);
	}
	if (h == -1) {
		fprintf(stderr, "runner: cannot start a test process\n");
		return 0;
	}
	DWORD code = 1;
	if (WaitForSingleObject((HANDLE)h, TEST_TIMEOUT_MS) != WAIT_OBJECT_0) {
		TerminateProcess((HANDLE)h, 124);
		WaitForSingleObject((HANDLE)h, INFINITE);
		fprintf(stderr, "  %s: timed out\n", name);
	}
	if (!GetExitCodeProcess((HANDLE)h, &code))
		code = 1;
	CloseHandle((HANDLE)h);
	return code == 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "--one") == 0) {
		char *end = NULL;
		long i = strtol(argv[2], &end, 10);
		return end && *end == '\0' && i >= 0 && i < n_tests && run_one((int)i) ? 0 : 1;
	}
	int passed = 0, failed = 0;
	for (int i = 0; i < n_tests; i++) {
		if (!selected(i, argc, argv))
			continue;
		int ok = run_child(i, tests[i].name);
		printf("[%s] %s::%s\n", ok ? "PASS" : "FAIL", tests[i].suite, tests[i].name);
		fflush(stdout);
		ok ? passed++ : failed++;
	}
	printf("%d passed, %d failed\n", passed, failed);
	return failed || passed == 0 ? 1 : 0;
}
