/* SPDX-License-Identifier: Apache-2.0 */
/*
 * msb/msb.h - the umbrella header: the core API and the shipped backends.
 *
 * Not included here, by design (reach them by name): msb/paths.h (guest path
 * helpers), msb/testing.h (the in-process fake) and msb/conformance.h (the
 * conformance suites).
 */
#ifndef MSB_MSB_H
#define MSB_MSB_H

#include <msb/backend.h>
#include <msb/common.h>
#include <msb/error.h>
#include <msb/hosttools.h>
#include <msb/hosttools_exec.h>
#include <msb/hosttools_native.h>
#include <msb/key.h>
#include <msb/observer.h>
#include <msb/ns.h>
#include <msb/outputs.h>
#include <msb/router.h>
#include <msb/sandbox.h>
#include <msb/session.h>
#include <msb/spec.h>
#include <msb/vocab.h>

MSB_BEGIN_DECLS

/*
 * Make a backend from its JSON description (docs/policy.md, "Backend JSON"):
 *   {"type": NAME, ...the type's own keys}
 * NAME is looked up in the table of built-in types (msb_backend_types() in
 * msb/backend.h); a missing or unknown type is refused (MSB_E_VALUE) listing
 * the table's names, and so is a key the type does not take. For a type that
 * carries declarations (`declared`, `fake`), a top-level legacy declaration
 * key (capabilities, limits, egress_modes, os_families) is refused naming the
 * key (4.10). Thread-safe.
 */
MSB_EXTERN int msb_backend_from_json(const char *json, size_t len, msb_backend **out,
				     msb_error **err);

/*
 * A whole router from JSON: the options of msb_router_options_from_json plus
 * "backends": [ <backend JSON>, ... ]. opts_extra (may be NULL) supplies what
 * JSON cannot carry: observer and log callback. What a backend declares - a
 * legacy key, unusable declarations - is judged when the router resolves that
 * backend (5.16): FIXED refuses only the backend it resolves, PER_SPEC every
 * registered one. Messages name the backend as `router.backends[I]`.
 */
MSB_EXTERN int msb_router_from_json(const char *json, size_t len,
				    const msb_router_options *opts_extra, msb_router **out,
				    msb_error **err);

MSB_END_DECLS

#endif
