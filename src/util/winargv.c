/* SPDX-License-Identifier: Apache-2.0 */
/* A Windows command line from an argv (winargv.h). */
#include <errno.h>
#include <string.h>

#include "util.h"
#include "winargv.h"

static bool needs_quotes(const char *a)
{
	return *a == '\0' || strpbrk(a, " \t\n\v\"") != NULL;
}

/* One argument after argv[0], by the runtime's backslash rules (a failed
 * append latches in b). */
static void append_arg(msb_buf *b, const char *a)
{
	if (!needs_quotes(a)) {
		msb__buf_puts(b, a);
		return;
	}
	msb__buf_puts(b, "\"");
	for (const char *p = a;; p++) {
		size_t slashes = 0;
		while (*p == '\\') {
			slashes++;
			p++;
		}
		/* Before a quote or the closing quote each backslash doubles;
		 * elsewhere they stand as they are. */
		size_t emit = *p == '"' || *p == '\0' ? 2 * slashes : slashes;
		for (size_t i = 0; i < emit; i++)
			msb__buf_puts(b, "\\");
		if (*p == '\0')
			break;
		if (*p == '"')
			msb__buf_puts(b, "\\");
		msb__buf_append(b, p, 1);
	}
	msb__buf_puts(b, "\"");
}

char *msb__win_cmdline(const char *const *argv)
{
	if (!argv || !argv[0] || !*argv[0] || strchr(argv[0], '"')) {
		errno = EINVAL;
		return NULL;
	}
	msb_buf b = MSB_BUF_INIT;
	/* argv[0]: quotes group, backslashes are literal. */
	bool q = needs_quotes(argv[0]);
	msb__buf_puts(&b, q ? "\"" : "");
	msb__buf_puts(&b, argv[0]);
	msb__buf_puts(&b, q ? "\"" : "");
	for (size_t i = 1; argv[i]; i++) {
		msb__buf_puts(&b, " ");
		append_arg(&b, argv[i]);
	}
	char *s = msb__buf_steal_str(&b);
	if (!s)
		errno = ENOMEM;
	return s;
}
