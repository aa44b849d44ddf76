/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The runner for the ThreadSanitizer build of the lifecycle tests (see
 * tsan/criterion/criterion.h). Each test runs in a child forked from this
 * single-threaded process, so that threads a test leaves behind and a failed
 * assertion stay in that test. Arguments are substrings: only tests whose
 * "suite/name" contains one of them run. The exit status is non-zero when
 * any test failed, crashed, timed out, or ThreadSanitizer reported a race
 * (TSAN_OPTIONS exitcode, 66 by default, fails the child).
 */
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>

#define MAX_TESTS 512
#define TEST_TIMEOUT 300

static struct {
	const char *suite, *name;
	void (*fn)(void);
} tests[MAX_TESTS];
static int n_tests;

void tsan_register(const char *suite, const char *name, void (*fn)(void))
{
	if (n_tests < MAX_TESTS)
		tests[n_tests++] = (typeof(tests[0])){suite, name, fn};
}

void tsan_fail(const char *file, int line, const char *expr, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "  %s:%d: assertion failed: %s%s%s\n", file, line, expr, *msg ? ": " : "",
		msg);
	fflush(stderr);
	_exit(1);
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

int main(int argc, char **argv)
{
	int passed = 0, failed = 0;
	for (int i = 0; i < n_tests; i++) {
		if (!selected(i, argc, argv))
			continue;
		fflush(stdout);
		pid_t pid = fork();
		if (pid == 0) {
			alarm(TEST_TIMEOUT);
			tests[i].fn();
			/* exit, not _exit: ThreadSanitizer turns a reported race
			 * into its exitcode on the way out. */
			exit(0);
		}
		int status = 0;
		waitpid(pid, &status, 0);
		int ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
		printf("[%s] %s::%s", ok ? "PASS" : "FAIL", tests[i].suite, tests[i].name);
		if (!ok && WIFEXITED(status))
			printf(" (exit %d)", WEXITSTATUS(status));
		if (!ok && WIFSIGNALED(status))
			printf(" (signal %d)", WTERMSIG(status));
		printf("\n");
		ok ? passed++ : failed++;
	}
	printf("[====] Synthesis: Tested: %d | Passing: %d | Failing: %d | Crashing: 0\n",
	       passed + failed, passed, failed);
	return failed ? 1 : 0;
}
