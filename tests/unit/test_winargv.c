/* SPDX-License-Identifier: Apache-2.0 */
/* A Windows command line from an argv (util/winargv.h; issue 21): the
 * quoting the wslc backend gives CreateProcessW, pinned byte for byte. The
 * Windows build runs the same cases through a real child (test_wslc_spawn.c). */
#include <errno.h>

#include "helpers.h"
#include "util/winargv.h"

static void pinned(const char *const *argv, const char *want)
{
	char *got = msb__win_cmdline(argv);
	cr_assert_not_null(got);
	cr_assert_str_eq(got, want);
	free(got);
}

Test(winargv, plain_arguments_are_not_quoted)
{
	const char *argv[] = {"wslc.exe", "container", "run", "--rm", NULL};
	pinned(argv, "wslc.exe container run --rm");
}

Test(winargv, spaces_tabs_and_empty_are_quoted)
{
	const char *argv[] = {"C:\\Program Files\\wslc.exe", "a b", "tab\there", "", NULL};
	pinned(argv, "\"C:\\Program Files\\wslc.exe\" \"a b\" \"tab\there\" \"\"");
}

Test(winargv, quotes_are_escaped)
{
	const char *argv[] = {"w", "he said \"hi\"", "\"", NULL};
	pinned(argv, "w \"he said \\\"hi\\\"\" \"\\\"\"");
}

Test(winargv, backslashes_double_only_before_a_quote)
{
	/* a\b stays; a\"b: the backslash doubles and the quote is escaped;
	 * a trailing backslash doubles before the closing quote. */
	const char *argv[] = {"w", "a\\b", "a\\\"b", "C:\\dir with space\\", "x\\\\", NULL};
	pinned(argv, "w a\\b \"a\\\\\\\"b\" \"C:\\dir with space\\\\\" x\\\\");
}

Test(winargv, program_name_with_a_quote_is_refused)
{
	const char *argv[] = {"w\"x", NULL};
	errno = 0;
	cr_assert_null(msb__win_cmdline(argv));
	cr_assert_eq(errno, EINVAL);
	const char *empty[] = {"", NULL};
	cr_assert_null(msb__win_cmdline(empty));
}
