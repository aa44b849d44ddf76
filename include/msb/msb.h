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
 * Make a backend from its JSON description:
 *   {"type": "declared"|"fake", "name": ..., "isolation": ..., "declarations": {...}, ...}
 * A top-level legacy declaration key (capabilities, limits, egress_modes,
 * os_families) is refused naming the key (4.10). Unknown keys are refused.
 */
MSB_EXTERN int msb_backend_from_json(const char *json, size_t len, msb_backend **out,
				     msb_error **err);

/*
 * A whole router from JSON: the options of msb_router_options_from_json plus
 * "backends": [ <backend JSON>, ... ]. opts_extra (may be NULL) supplies what
 * JSON cannot carry: observer and log callback.
 */
MSB_EXTERN int msb_router_from_json(const char *json, size_t len,
				    const msb_router_options *opts_extra, msb_router **out,
				    msb_error **err);

MSB_END_DECLS

#endif
