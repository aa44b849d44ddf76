/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The wake-up channels on Windows (src/platform/win32/platform.c; issue 21):
 * a cancellation token's descriptor (24.2) and a terminal's resize
 * descriptor are pipes of the C runtime there, readable once triggered, and
 * a writer never blocks on a full one.
 */
#include <windows.h>

#include <io.h>

#include <criterion/criterion.h>
#include <msb/sandbox.h>

/* Bytes waiting on the C runtime descriptor fd (a pipe). */
static DWORD waiting(int fd)
{
	DWORD avail = 0;
	HANDLE h = (HANDLE)_get_osfhandle(fd);
	cr_assert(h != INVALID_HANDLE_VALUE);
	cr_assert(PeekNamedPipe(h, NULL, 0, NULL, &avail, NULL));
	return avail;
}

Test(wake, cancel_fd_readable_once_triggered_24_2)
{
	msb_cancel *c = NULL;
	cr_assert_eq(msb_cancel_new(&c, NULL), 0);
	int fd = msb_cancel_fd(c);
	cr_assert_geq(fd, 0);
	cr_assert_eq(waiting(fd), 0);
	cr_assert_not(msb_cancel_requested(c));
	msb_cancel_trigger(c);
	msb_cancel_trigger(c); /* idempotent: one wake-up */
	cr_assert(msb_cancel_requested(c));
	cr_assert_eq(waiting(fd), 8);
	msb_cancel_free(c);
}

Test(wake, tty_resize_wakes_and_never_blocks)
{
	msb_tty *t = NULL;
	cr_assert_eq(msb_tty_new(24, 80, &t, NULL), 0);
	int fd = msb_tty_fd(t);
	cr_assert_eq(waiting(fd), 0);
	/* far more resizes than the pipe holds: the writer must not block */
	for (unsigned i = 0; i < 20000; i++)
		msb_tty_resize(t, 10 + i % 100, 40);
	cr_assert_gt(waiting(fd), 0);
	unsigned rows = 0, cols = 0;
	cr_assert(msb_tty_take_resize(t, &rows, &cols));
	cr_assert_eq(rows, 10 + 19999 % 100);
	cr_assert_eq(cols, 40);
	cr_assert_eq(waiting(fd), 0, "take_resize drains the channel");
	cr_assert_not(msb_tty_take_resize(t, &rows, &cols));
	msb_tty_free(t);
}
