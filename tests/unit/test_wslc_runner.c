/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The wslc transport's POSIX runner (checklist 21.12, wslc_run.c): bounded
 * output, the child killed and reaped at the timeout or when the sink has
 * what it wants. Its Windows form is tested under Wine
 * (tests/windows/test_wslc_spawn.c).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include <criterion/criterion.h>

#include "backends/engine/wslc.h"

/* ---- the real runner (21.12) ----------------------------------------------------- */

static bool no_children(void)
{
	return waitpid(-1, NULL, WNOHANG) < 0 && errno == ECHILD;
}

Test(engine, runner_timeout_kills_and_reaps_21_12)
{
	const char *argv[] = {"sh", "-c", "sleep 30 & sleep 30", NULL};
	wslc_io io = {.max_out = 100, .max_err = 100, .timeout = 0.3};
	wslc_outcome o;
	int64_t t0 = msb__now_ns();
	cr_assert_eq(msb_wslc__spawn(NULL, (char *const *)argv, &io, &o, NULL), 0);
	cr_assert(o.timed_out);
	cr_assert_lt(msb__now_ns() - t0, 3000000000LL);
	cr_assert(no_children(), "the child was reaped before the call returned");
	msb_wslc__outcome_clear(&o);
}

static int stop_after_512(void *ud, const uint8_t *p, size_t n, msb_error **err)
{
	size_t *seen = ud;
	*seen += n;
	return *seen >= 512 ? WSLC_SINK_DONE : 0;
}

Test(engine, runner_bounded_read_kills_after_the_header_21_12)
{
	const char *argv[] = {"yes", NULL};
	size_t seen = 0;
	wslc_io io = {.sink = stop_after_512, .sink_ud = &seen, .max_err = 100, .timeout = 10};
	wslc_outcome o;
	int64_t t0 = msb__now_ns();
	cr_assert_eq(msb_wslc__spawn(NULL, (char *const *)argv, &io, &o, NULL), 0);
	cr_assert(o.stopped);
	cr_assert_eq(o.exit_code, 128 + SIGKILL);
	cr_assert_lt(msb__now_ns() - t0, 3000000000LL);
	cr_assert(no_children());
	msb_wslc__outcome_clear(&o);
}

Test(engine, runner_stdin_and_exit_code)
{
	const char *argv[] = {"sh", "-c", "cat; exit 7", NULL};
	static const uint8_t head[] = "he", data[] = "llo";
	wslc_io io = {.has_stdin = true,
		      .in_head = head,
		      .in_head_len = 2,
		      .in_data = data,
		      .in_data_len = 3,
		      .in_tail_len = 2,
		      .max_out = 100,
		      .max_err = 100,
		      .timeout = 10};
	wslc_outcome o;
	cr_assert_eq(msb_wslc__spawn(NULL, (char *const *)argv, &io, &o, NULL), 0);
	cr_assert_eq(o.exit_code, 7);
	cr_assert_eq(o.out.len, 7);
	cr_assert_eq(memcmp(o.out.data, "hello\0\0", 7), 0);
	msb_wslc__outcome_clear(&o);
}

Test(engine, runner_missing_program_is_named)
{
	const char *argv[] = {"/nonexistent/wslc", "--version", NULL};
	wslc_io io = {.max_out = 100, .max_err = 100, .timeout = 10};
	wslc_outcome o;
	msb_error *e = NULL;
	int r = msb_wslc__spawn(NULL, (char *const *)argv, &io, &o, &e);
	cr_assert_lt(r, 0);
	cr_assert(strstr(msb_error_message(e), "/nonexistent/wslc"));
	msb_error_free(e);
}
