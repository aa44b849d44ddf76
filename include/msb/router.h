/* SPDX-License-Identifier: Apache-2.0 */
/*
 * msb/router.h - SandboxRouter: construction, selection and the checks
 * (checklist sections 5, 6 and 7).
 *
 * The router is pure protocol and policy: it never forks, mounts or opens a
 * socket. It resolves which backend serves a spec, refuses unsafe or
 * unsuitable pairings loudly, and asks backends to acquire and dispose.
 *
 * Check order (DESIGN 9.6): host denials (capabilities, identities) ->
 * isolation floor -> capability match (+ method tokens) -> OS family ->
 * transfer ceilings -> egress mode -> isolation scope.
 *
 * Thread-safety: a router may be used from many threads at once.
 */
#ifndef MSB_ROUTER_H
#define MSB_ROUTER_H

#include <msb/backend.h>
#include <msb/common.h>
#include <msb/error.h>
#include <msb/key.h>
#include <msb/observer.h>
#include <msb/sandbox.h>
#include <msb/spec.h>
#include <msb/vocab.h>

MSB_BEGIN_DECLS

/* ReclaimConfig (8.7): the router-level cleanup bound and failure policy. */
typedef struct msb_reclaim_config {
	double timeout; /* seconds, finite and > 0; default 30 (23.28) */
	msb_failed_reclaim_policy failed_reclaim_policy;
} msb_reclaim_config;
#define MSB_RECLAIM_CONFIG_INIT                                                                    \
	{                                                                                          \
		30.0, MSB_FAILED_RECLAIM_DISPOSE                                                   \
	}

typedef struct msb_router_options {
	unsigned version;
	msb_isolation min_isolation;		 /* default MICROVM (5.1) */
	const char *selected;			 /* NULL = first registered (5.5) */
	msb_selection selection;		 /* default FIXED */
	msb_capset denied_capabilities;		 /* unknown bits refused (5.3) */
	msb_identity_set denied_identities;	 /* unknown bits refused (5.3) */
	msb_isolation_scope min_isolation_scope; /* default CONVERSATION */
	msb_cleanup min_cleanup;		 /* default DISPOSE (8.1) */
	msb_reclaim_config reclaim;
	const msb_observer *observer; /* copied; NULL = none */
	msb_log_fn log;		      /* NULL = silent */
	void *log_userdata;
} msb_router_options;
#define MSB_ROUTER_OPTIONS_VERSION 1
#define MSB_ROUTER_OPTIONS_INIT                                                                    \
	{                                                                                          \
		MSB_ROUTER_OPTIONS_VERSION, MSB_ISOLATION_MICROVM, NULL, MSB_SELECTION_FIXED, 0,   \
			0, MSB_SCOPE_CONVERSATION, MSB_CLEANUP_DISPOSE, MSB_RECLAIM_CONFIG_INIT,   \
			NULL, NULL, NULL                                                           \
	}

typedef struct msb_router msb_router;

/*
 * Construct. Takes a reference on each backend. Refusals at construction:
 * MSB_E_VALUE for an option outside its enum, for selected together with
 * PER_SPEC (5.9); MSB_E_NO_BACKEND for an unknown selected name, listing the
 * registered names sorted (5.6); MSB_E_BACKEND_NOT_PERMITTED when the FIXED
 * backend sits below the floor or declares something that is not a rung
 * (5.7, 1.4, 4.13), or when under PER_SPEC no backend clears it (5.10).
 * Under PER_SPEC one warning names every backend below the floor (5.11).
 * With no backends the router is disabled (5.4).
 */
MSB_EXTERN int msb_router_new(msb_backend *const *backends, size_t n_backends,
			      const msb_router_options *opts, msb_router **out, msb_error **err);
MSB_EXTERN void msb_router_free(msb_router *r);

/* true when any backend is available (5.4, 5.17). */
MSB_EXTERN bool msb_router_enabled(const msb_router *r);
/* The FIXED resolved backend, or NULL (PER_SPEC, disabled). Borrowed. */
MSB_EXTERN msb_backend *msb_router_backend(const msb_router *r);
MSB_EXTERN size_t msb_router_backend_count(const msb_router *r);
MSB_EXTERN msb_backend *msb_router_backend_at(const msb_router *r, size_t i);
MSB_EXTERN const msb_router_options *msb_router_options_get(const msb_router *r);

/*
 * The wiring test (6.x): every refusal acquire would raise, and nothing else.
 * Pure: calls no backend. Silent on a disabled router (6.14).
 */
MSB_EXTERN int msb_router_ensure_can_serve(const msb_router *r, const msb_spec *spec,
					   msb_error **err);

/*
 * The same checks, answering which backend would serve the spec (borrowed)
 * and the effective isolation scope. MSB_E_NO_BACKEND on a disabled router.
 */
MSB_EXTERN int msb_router_resolve(const msb_router *r, const msb_spec *spec, msb_backend **out,
				  msb_isolation_scope *effective_scope, msb_error **err);

typedef struct msb_acquire_options {
	unsigned version;
	const char *call;   /* the tool call this acquire belongs to; NULL outside one */
	msb_cancel *cancel; /* may be NULL */
} msb_acquire_options;
#define MSB_ACQUIRE_OPTIONS_VERSION 1
#define MSB_ACQUIRE_OPTIONS_INIT                                                                   \
	{                                                                                          \
		MSB_ACQUIRE_OPTIONS_VERSION, NULL, NULL                                            \
	}

/*
 * acquire (7.1): the checks, then the serving backend's get-or-create.
 * MSB_E_NO_BACKEND on a disabled router. Records SandboxAcquired for served
 * and refused acquires alike (7.2). opts may be NULL.
 */
MSB_EXTERN int msb_router_acquire(msb_router *r, const msb_key *key, const msb_spec *spec,
				  const msb_acquire_options *opts, msb_sandbox **out,
				  msb_error **err);

/*
 * dispose (7.3): every kind's sandbox for the key on every registered
 * backend. Never fails for a backend's failure (logged, and carried on the
 * SandboxDisposed event); *all_disposed (may be NULL) is true iff every
 * backend reported success (23.17). Only argument errors are returned.
 */
MSB_EXTERN int msb_router_dispose(msb_router *r, const msb_key *key, bool *all_disposed,
				  msb_error **err);

/* dispose_scope (7.4): the sum over every backend; failures logged. */
MSB_EXTERN int msb_router_dispose_scope(msb_router *r, const char *scope, const char *thread_id,
					msb_scope_purge *out, msb_error **err);

/*
 * Router options from JSON (strict; the "backends" key is read by
 * msb_router_from_json in msb/msb.h, which knows the shipped backends).
 * Keys: min_isolation, selected, selection, denied_capabilities,
 * denied_identities, min_isolation_scope, min_cleanup, reclaim {timeout,
 * failed_reclaim_policy}. The string "process" is never a rung (1.4).
 * *selected_out receives an owned copy of "selected" (or NULL).
 */
MSB_EXTERN int msb_router_options_from_json(const char *json, size_t len, msb_router_options *out,
					    char **selected_out, msb_error **err);
/* Rung strings, never ranks (1.5). */
MSB_EXTERN int msb_router_options_to_json(const msb_router_options *opts, char **out,
					  msb_error **err);

MSB_END_DECLS

#endif
