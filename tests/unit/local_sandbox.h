/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MSB_TESTS_UNIT_LOCAL_SANDBOX_H
#define MSB_TESTS_UNIT_LOCAL_SANDBOX_H

#include <msb/sandbox.h>

/* What the transport asked of the double. */
struct local_counts {
	int execs, bounded, writes, stats, reads, lists;
	bool no_bounded; /* exec_bounded refuses (a backend without it) */
	/* When set, the exec that starts the launcher answers this stdout with
	 * exit 0 instead of running it (receipt tests). */
	const char *launcher_stdout;
	/* When > 0, the n-th stat and every later one fail with MSB_E_TIMEOUT
	 * (a backend bounding its own call). */
	int stat_timeout_from;
	/* When set, the transport's process scan (a bounded exec starting with
	 * `echo "self $$"`) answers this stdout with exit 0 (budget tests). */
	const char *snapshot_stdout;
};

/* A sandbox whose guest is this host, rooted at `base` (see local_sandbox.c). */
msb_sandbox *local_sandbox_new(const char *base, struct local_counts *counts);

#endif
