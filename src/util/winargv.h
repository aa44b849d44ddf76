/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A Windows command line from an argv (util-core, portable C: tested on
 * Linux too). Windows passes a child one string; the child's C runtime
 * (and CommandLineToArgvW) splits it back by these rules: whitespace
 * separates arguments; "..." groups; inside an argument 2n backslashes
 * before a quote are n backslashes and the quote delimits, 2n+1 are n and a
 * literal quote; backslashes not before a quote are literal. argv[0] is
 * split by simpler rules (quotes only, no escapes).
 */
#ifndef MSB_UTIL_WINARGV_H
#define MSB_UTIL_WINARGV_H

/* The command line that splits back into argv (NULL-terminated): each
 * argument quoted only when it must be (empty, or has space, tab, newline,
 * vertical tab or a quote). NULL with errno EINVAL when argv[0] is empty or
 * holds a quote (the program name cannot carry one), ENOMEM without memory.
 * Newly allocated. */
char *msb__win_cmdline(const char *const *argv);

#endif
