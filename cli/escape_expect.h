/* SPDX-License-Identifier: Apache-2.0 */
/* The escape suite's expectations (cli/escape_expect.c): what each probe must
 * come back as, and the answers a runtime's own kernel gives instead. */
#ifndef MSB_CLI_ESCAPE_EXPECT_H
#define MSB_CLI_ESCAPE_EXPECT_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

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

/* What `probe` (a cli_escape_expectations row or a host check's name) must
 * come back as on `backend` (a backend type) where a container engine's
 * boundary answers otherwise than ns's (docs/security.md, "Container
 * engines"), or NULL. "engine": the engine's own configuration decides,
 * blocked or escaped. */
const char *cli_escape_expected_for_probe(const char *backend, const char *probe);
/* The same, falling back to e->expected. */
const char *cli_escape_expected_for(const char *backend, const struct cli_expectation *e);
/* Whether `outcome` answers `want` ("engine": blocked or escaped). */
bool cli_escape_outcome_ok(const char *want, const char *outcome);
/* The word the probe finds in its own PID 1's command line on `backend`. */
const char *cli_escape_init_for(const char *backend);

/* On `vm`: the host uid of the VMM of the sandbox whose storage base would be
 * `work` (<state>/vm/<name>/work; its init.pid names the VMM). false when no
 * live VMM is named; `detail` says what was found either way. */
bool cli_escape_vmm_uid(const char *work, uid_t *uid, char *detail, size_t size);

#endif