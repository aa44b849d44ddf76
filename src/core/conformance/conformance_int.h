/* SPDX-License-Identifier: Apache-2.0 */
/* The machinery the conformance suites share (src/core/conformance/). */
#ifndef MSB_CORE_CONFORMANCE_INT_H
#define MSB_CORE_CONFORMANCE_INT_H

#include <msb/conformance.h>

#include "util/util.h"

struct cf_ctx;

/* One attack. run returns 0 (passed) or -1 after cf_fail() set the finding. */
struct cf_probe {
	const char *name;
	const char *why;
	msb_capset requires;
	int (*run)(struct cf_ctx *c);
};

struct cf_suite {
	msb_conformance_suite id;
	msb_capset gate;
	const struct cf_probe *probes;
	size_t n_probes;
	/* Plant the shared layout, or NULL. A failure aborts the suite. */
	int (*plant)(struct cf_ctx *c, msb_error **err);
};

struct cf_ctx {
	const msb_conformance_subject *s;
	const msb_egress_conformance_options *egress;
	char *work;    /* W, normalised */
	char *outside; /* W-outside */
	char *failure; /* the current probe's finding */
	double timeout;
	void *extra; /* a suite's own state (CALL_SCOPE) */
};

extern const struct cf_suite msb_conformance__files_in, msb_conformance__files_out,
	msb_conformance__exec_suite, msb_conformance__files_delete, msb_conformance__reclaim,
	msb_conformance__egress;
extern const struct cf_probe msb_conformance__call_scope_probes[];
extern const size_t msb_conformance__n_call_scope_probes;
extern const struct cf_probe msb_conformance__nlb_probes[];
extern const size_t msb_conformance__n_nlb_probes;

/* Record the finding; always returns -1. */
int msb_conformance__fail(struct cf_ctx *c, const char *fmt, ...) MSB_PRINTF(2, 3);
#define cf_fail msb_conformance__fail

/* `what` must have failed with an error in every category of `cats` (or,
 * when `code` is non-zero, with exactly `code`). Frees e. 0 or -1. */
int msb_conformance__refused(struct cf_ctx *c, const char *what, int rc, msb_error *e, int code,
			     unsigned cats, const char *want);
/* `what` must have succeeded. Frees e. 0 or -1. */
int msb_conformance__ok(struct cf_ctx *c, const char *what, int rc, msb_error *e);

/* exec argv in W (or `wd` when non-NULL); a raise is a finding. */
int msb_conformance__exec(struct cf_ctx *c, const char *wd, const char *const *argv,
			  const uint8_t *in, size_t in_len, msb_exec_result *res);
/* `test FLAG PATH` in W: *yes = exit status 0. */
int msb_conformance__test(struct cf_ctx *c, const char *flag, const char *path, bool *yes);
/* PATH (relative to W) must exist / must not. */
int msb_conformance__present(struct cf_ctx *c, const char *path, const char *what);
int msb_conformance__absent(struct cf_ctx *c, const char *path, const char *what);
/* `cat PATH` in W must print exactly want. */
int msb_conformance__cat_is(struct cf_ctx *c, const char *path, const uint8_t *want,
			    size_t want_len, const char *what);
/* Plant through the subject; a failure is a finding. */
int msb_conformance__plant_file(struct cf_ctx *c, const char *abs, const char *text);
int msb_conformance__plant_link(struct cf_ctx *c, const char *abs, const char *target);
/* "W/rel" and "W-outside/rel", newly allocated (NULL on allocation failure). */
char *msb_conformance__in_work(struct cf_ctx *c, const char *rel);
char *msb_conformance__in_outside(struct cf_ctx *c, const char *rel);
/* The outside sibling seen from W: "../<basename(W)>-outside/rel". */
char *msb_conformance__outside_rel(struct cf_ctx *c, const char *rel);

/* Run a suite against a subject; `gated` false for a measurement. */
int msb_conformance__run(const struct cf_suite *suite, const msb_conformance_subject *s,
			 const msb_egress_conformance_options *egress, bool gated,
			 msb_conformance_report **out, msb_error **err);
/* The ConformanceFailure for a report with failures (0 when none). */
int msb_conformance__verdict(msb_conformance_report *r, msb_error **err);

/* Report building. */
int msb_conformance__report_new(msb_conformance_suite id, size_t n, msb_conformance_report **out,
				msb_error **err);
void msb_conformance__report_set(msb_conformance_report *r, size_t i, const struct cf_probe *p,
				 msb_probe_outcome o, char *detail);

#endif
