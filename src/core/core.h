/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Library-internal declarations shared across src/core files. Functions are
 * named msb_<module>__<fn>.
 */
#ifndef MSB_CORE_CORE_H
#define MSB_CORE_CORE_H

#include <msb/backend.h>
#include <msb/observer.h>
#include <msb/router.h>

#include "util/util.h"

/* ---- observer emission (observer.c) ---------------------------------------
 * `o` may be NULL (no observer). Each emit calls the slot if set, contains a
 * non-zero return by logging one line through `lg`, and never fails. Callers
 * test msb_observer__wants() before building an event (17.18). */
#define msb_observer__wants(o, slot) ((o) != NULL && (o)->slot != NULL)

void msb_observer__sandbox_acquired(const msb_observer *o, const msb_logger *lg,
				    const msb_ev_sandbox_acquired *ev);
void msb_observer__sandbox_disposed(const msb_observer *o, const msb_logger *lg,
				    const msb_ev_sandbox_disposed *ev);
void msb_observer__scope_disposed(const msb_observer *o, const msb_logger *lg,
				  const msb_ev_scope_disposed *ev);
void msb_observer__egress_observed(const msb_observer *o, const msb_logger *lg,
				   const msb_ev_egress_observed *ev);
void msb_observer__host_tool_called(const msb_observer *o, const msb_logger *lg,
				    const msb_ev_host_tool_called *ev);
void msb_observer__processes_observed(const msb_observer *o, const msb_logger *lg,
				      const msb_ev_processes_observed *ev);
void msb_observer__process_cleanup(const msb_observer *o, const msb_logger *lg,
				   const msb_ev_process_cleanup *ev);
void msb_observer__store_file_read(const msb_observer *o, const msb_logger *lg,
				   const msb_ev_store_file_read *ev);
void msb_observer__outputs_collected(const msb_observer *o, const msb_logger *lg,
				     const msb_ev_outputs_collected *ev);
void msb_observer__tool_call_ended(const msb_observer *o, const msb_logger *lg,
				   const msb_ev_tool_call_ended *ev);

/* ---- declarations (declarations.c) ----------------------------------------
 * Deep copy into one allocation (token strings included); free with free(). */
msb_declarations *msb_declarations__dup(const msb_declarations *d);

/* ---- TransferLimits as JSON (limits_json.c) -------------------------------------
 * Strict: unknown keys refused naming `where`; a field left out keeps its
 * default. to_json returns NULL for a value JSON integers cannot carry
 * (above INT64_MAX) or on allocation failure. */
typedef struct json_t json_t;
const char *const *msb_vocab__transfer_limits_keys(void);
int msb_vocab__transfer_limits_from_json(json_t *obj, const char *where, msb_transfer_limits *out,
					 msb_error **err);
json_t *msb_vocab__transfer_limits_to_json(const msb_transfer_limits *t);

/* ---- the JSON loaders behind router_json.c --------------------------------- */

/*
 * A refusal judged when the router resolves the backend rather than when it
 * is loaded (checklist 5.16, 23.10): a router loaded from JSON registers a
 * backend whose description carries a legacy top-level declaration key or
 * unusable declarations, and refuses it only if it is resolved (FIXED) or
 * registered for routing (PER_SPEC). Sets a copy of `message`. (backend.c)
 */
int msb_backend__set_deferred_refusal(msb_backend *b, int code, const char *message,
				      msb_error **err);
/* Declarations from a JSON object already parsed (strict); `where` names it
 * in messages. The result is one allocation (free()). (declarations.c) */
int msb_declarations__from_object(json_t *obj, const char *where, msb_declarations **out,
				  msb_error **err);
/* Router options from an already-parsed object. `extra_key` (may be NULL)
 * is one more key the caller reads itself ("backends"). (router_json.c) */
int msb_router__options_from_object(json_t *obj, const char *where, const char *extra_key,
				    msb_router_options *out, char **selected_out, msb_error **err);

/* ---- vocab (vocab.c) ------------------------------------------------------- */
/* Parse a JSON/CLI list of names into a set; `what` names the field. */
int msb_vocab__capset_parse(const char *const *names, size_t n, const char *what, msb_capset *out,
			    msb_error **err);

#endif
