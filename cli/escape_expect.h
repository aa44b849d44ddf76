/* SPDX-License-Identifier: Apache-2.0 */
/* The escape suite's expectations (cli/escape_expect.c): what each probe must
 * come back as, and the answers a runtime's own kernel gives instead. */
#ifndef MSB_CLI_ESCAPE_EXPECT_H
#define MSB_CLI_ESCAPE_EXPECT_H

#include <stddef.h>

struct cli_expectation {
	const char *probe;
	const char *expected; /* "blocked" or "contained" */
};

/* Where a backend's own kernel answers for the host's (runsc): the answer
 * accepted instead, exactly. */
struct cli_difference {
	const char *runtime; /* msb_oci_backend_runtime() */
	const char *probe;
	const char *outcome;
	const char *detail; /* the probe's detail, exactly */
	const char *why;
};

extern const struct cli_expectation cli_escape_expectations[];
extern const size_t cli_escape_n_expectations;

/* The difference for `probe` under `runtime` (NULL: none), or NULL. */
const struct cli_difference *cli_escape_difference_of(const char *runtime, const char *probe);

#endif
