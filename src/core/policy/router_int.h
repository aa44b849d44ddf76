/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internal to the router, the backend object and the JSON loaders
 * (src/core/policy/backend.c, declarations.c, router*.c) and to the router's
 * lifecycle (src/core/lifecycle).
 */
#ifndef MSB_CORE_ROUTER_INT_H
#define MSB_CORE_ROUTER_INT_H

#include <jansson.h>

#include "core/core.h"

/* ---- backend.c ------------------------------------------------------------
 * (msb_backend__set_deferred_refusal: core/core.h) */
/* 0, or the deferred refusal's code with *err set from it. */
int msb_backend__deferred_refusal(const msb_backend *b, msb_error **err);
/* Hand the backend its egress reporter (4.22). */
void msb_backend__set_egress_reporter(msb_backend *b, const msb_egress_reporter *reporter);

/* ---- declarations.c -------------------------------------------------------- */

/* Reject what a typed declarations value can still get wrong: an unknown
 * version, bits outside a set, a NULL or invalid or repeated method token. */
int msb_declarations__validate(const msb_declarations *d, const char *where, msb_error **err);

/* The kinds of string set a JSON document may carry. */
enum msb_set_kind {
	MSB_SET_CAPABILITY,
	MSB_SET_EGRESS,
	MSB_SET_OS_FAMILY,
	MSB_SET_SCOPE,
	MSB_SET_IDENTITY,
};

/*
 * Read obj[key] as a set: a JSON array of distinct member names. A string (or
 * any other non-array) is refused with MSB_E_TYPE naming the field (4.11); an
 * unknown member with MSB_E_VALUE naming it (DESIGN 4: unknown strings are
 * refused); a repeated member with MSB_E_VALUE. Absent or null leaves *out.
 */
int msb_json__get_set(json_t *obj, const char *key, const char *where, enum msb_set_kind kind,
		      uint32_t *out, bool *present, msb_error **err);
/* The set as a JSON array of names in vocabulary order; NULL on failure. */
json_t *msb_json__set_array(enum msb_set_kind kind, uint32_t set);

/* ---- router ---------------------------------------------------------------- */

/* One registered backend as the router sees it, parsed once at construction. */
struct msb_router_entry {
	msb_backend *backend;
	const char *name;	      /* borrowed from backend */
	const char *isolation;	      /* the declared spelling, borrowed */
	const msb_declarations *decl; /* borrowed */
	bool is_rung;		      /* isolation parsed as a rung */
	msb_isolation rung;	      /* valid when is_rung */
};

struct msb_router {
	struct msb_router_entry *entries;
	size_t n;
	msb_router_options opts; /* selected and observer point into this struct */
	char *selected;
	msb_observer observer;
	msb_logger lg;
	size_t resolved;	  /* FIXED: index of the resolved backend; SIZE_MAX otherwise */
	bool reporting;		  /* the backends hold this router's egress reporter */
	struct msb_lifecycle *lc; /* unclean keys, disposal locks, admission (lifecycle_int.h) */
};

/* router.c: the option rules of 5.2, 5.3 and 5.9 (MSB_E_VALUE). */
int msb_router__validate_options(const msb_router_options *o, msb_error **err);

/* router_checks.c. Every check returns 0 or the refusal's code with *err set. */

/* The host denials (6.3, 6.4): no backend property softens them. */
int msb_router__check_denials(const struct msb_router *r, const msb_spec *spec, msb_error **err);
/* Checks 1-6 against one backend, in the order of DESIGN 9.6 (6.5-6.11). */
int msb_router__check_backend(const struct msb_router *r, const struct msb_router_entry *e,
			      const msb_spec *spec, msb_error **err);
/*
 * Pick the backend that serves `spec` (FIXED: the resolved one; PER_SPEC:
 * the first registered passing every check; refusal: one aggregate naming
 * each, whose code is the first backend's). The router must be enabled.
 */
int msb_router__route(const struct msb_router *r, const msb_spec *spec, size_t *index,
		      msb_isolation_scope *effective_scope, msb_error **err);
/* The message a backend below the floor (or off the ladder) is refused with. */
char *msb_router__floor_message(const struct msb_router_entry *e, msb_isolation floor,
				const char *kind, bool spec_asked);

#endif
