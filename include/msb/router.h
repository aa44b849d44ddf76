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

/*
 * Why this backend (issue 16): the route msb_router_resolve takes, told per
 * registered backend - which one selection picked and why, and why each
 * other one was passed over. Under FIXED only the resolved backend (the
 * `selected` one, else the first registered) is tried; every other one is
 * "not tried". Under PER_SPEC each is tried in registration order until one
 * passes; the ones after it are "not tried". The host's denials stop the
 * route before any backend.
 */
typedef struct msb_route_step {
	char *backend; /* the registered backend's name */
	bool serves;   /* the spec goes to this backend */
	bool tried;    /* the checks ran against it */
	int code;      /* tried and refused: the refusal's code; else 0 */
	char *reason;  /* one line: "passes every check", the refusal's message, or why it
			* was not tried */
} msb_route_step;

typedef struct msb_route_explanation {
	msb_selection selection;
	int code;	       /* 0 when a backend serves; else the refusal's code, the one
				* msb_router_resolve returns (MSB_E_NO_BACKEND when disabled) */
	char *summary;	       /* one line: what selection picked and why */
	msb_route_step *steps; /* one per registered backend, in registration order */
	size_t n_steps;
} msb_route_explanation;

/*
 * Fill *out (clear it with msb_route_explanation_clear). A refusal is not an
 * error here: it is out->code with the reasons. Fails only for a missing
 * argument (MSB_E_VALUE) or memory. Pure: calls no backend; thread-safe.
 */
MSB_EXTERN int msb_router_explain(const msb_router *r, const msb_spec *spec,
				  msb_route_explanation *out, msb_error **err);
MSB_EXTERN void msb_route_explanation_clear(msb_route_explanation *e);
/*
 * As one JSON object (malloc()ed text): {"selection", "backend" (the serving
 * one, or null), "error" (the refusal's name, or null), "summary", "steps":
 * [{"backend", "serves", "tried", "error", "reason"}]}.
 */
MSB_EXTERN int msb_route_explanation_to_json(const msb_route_explanation *e, char **out,
					     msb_error **err);

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

/* ==== Lifecycle (checklist sections 7 and 8) ==================================================
 *
 * The declarations below were added with the lifecycle; docs/lifecycle.md is
 * their manual. Every function here is thread-safe.
 */

/* The two 120 s bounds (8.17, 8.18; DESIGN 9.29): an entrant's wait for the
 * calls ahead of it (plus twice the cleanup bound, per call ahead), and a
 * wait for a pending cleanup to complete. */
#define MSB_ADMISSION_TIMEOUT_DEFAULT 120.0
#define MSB_CLEANUP_WAIT_TIMEOUT 120.0

/*
 * The clock the admission and cleanup-completion waits read (monotonic
 * nanoseconds). NULL restores CLOCK_MONOTONIC. Waits re-read the clock at
 * least every 10 ms of real time, so a test can advance an injected clock
 * past a 120 s bound without waiting for it. Set it before the router is
 * shared between threads.
 */
typedef int64_t (*msb_clock_fn)(void *userdata);
MSB_EXTERN void msb_router_set_clock(msb_router *r, msb_clock_fn fn, void *userdata);

/*
 * The cleanup rung a call's instance gets when the call ends (8.1-8.6,
 * 23.38): the strongest of the router's min_cleanup and the spec's
 * min_cleanup, then the weakest rung the serving backend can establish at
 * or above it - RECLAIM only where the backend declares RECLAIM, RESET only
 * where it declares SNAPSHOT, DISPOSE otherwise. A call-scoped workload is
 * always DISPOSE. Runs the checks to find the serving backend; their
 * refusals are returned as from acquire.
 */
MSB_EXTERN int msb_router_effective_cleanup(const msb_router *r, const msb_spec *spec,
					    msb_cleanup *out, msb_error **err);

typedef struct msb_dispose_kind_options {
	unsigned version;
	const char *instance_id; /* NULL = every instance of the kind */
	msb_cancel *cancel;	 /* may be NULL */
	const char *call;	 /* recorded on SandboxDisposed; NULL outside a call */
} msb_dispose_kind_options;
#define MSB_DISPOSE_KIND_OPTIONS_VERSION 1
#define MSB_DISPOSE_KIND_OPTIONS_INIT                                                              \
	{                                                                                          \
		MSB_DISPOSE_KIND_OPTIONS_VERSION, NULL, NULL, NULL                                 \
	}

/*
 * dispose_kind (7.6-7.9): delete only `kind`'s sandboxes for the key, on
 * every registered backend - or, with instance_id, only that physical
 * instance on its serving backend (FIXED: the resolved backend; PER_SPEC:
 * every registered backend, each treating an id it does not hold as absent).
 *
 * `timeout` (seconds) must be finite and > 0 (MSB_E_VALUE otherwise); it
 * covers waiting for the key's disposal lock and the whole sweep. A backend
 * call still running at the bound is abandoned: it keeps running on a helper
 * thread and counts as a `timeout` failure (its late result can still clear
 * what it disposed, never a newer failure, 7.12).
 *
 * *all_landed (may be NULL) is true iff every backend reported success.
 * Failures are logged and carried on one SandboxDisposed event; they are not
 * errors. A kind-level disposal records no refusal; its success clears the
 * pending unclean targets of that kind only (7.8, 23.16). An instance
 * disposal that does not land refuses the key (SandboxUnclean) unless the
 * router's failed_reclaim_policy is KEEP (7.9).
 *
 * Returns 0, MSB_E_VALUE for bad arguments, or MSB_E_CANCELLED when the token
 * fires (cancellation is never swallowed, 7.7, 7.16).
 */
MSB_EXTERN int msb_router_dispose_kind(msb_router *r, const msb_key *key, const char *kind,
				       double timeout, const msb_dispose_kind_options *opts,
				       bool *all_landed, msb_error **err);

typedef struct msb_dispose_unclean_options {
	unsigned version;
	const char *kind;	 /* NULL = targets of every kind */
	const char *instance_id; /* NULL = targets of every instance */
	msb_cancel *cancel;	 /* may be NULL */
} msb_dispose_unclean_options;
#define MSB_DISPOSE_UNCLEAN_OPTIONS_VERSION 1
#define MSB_DISPOSE_UNCLEAN_OPTIONS_INIT                                                           \
	{                                                                                          \
		MSB_DISPOSE_UNCLEAN_OPTIONS_VERSION, NULL, NULL, NULL                              \
	}

/*
 * dispose_unclean (7.11): retry the key's recorded unclean targets (each on
 * its own backend with its own kind/instance selectors), optionally narrowed
 * by kind and instance. A landed retry clears its target unless a newer
 * failure was recorded for it meanwhile (7.12); a failed one updates it. The
 * key reopens once no target remains. `timeout` as for dispose_kind.
 * *all_landed (may be NULL): every retried target landed (true when there
 * was nothing to retry). MSB_E_CANCELLED on cancellation.
 */
MSB_EXTERN int msb_router_dispose_unclean(msb_router *r, const msb_key *key, double timeout,
					  const msb_dispose_unclean_options *opts, bool *all_landed,
					  msb_error **err);

/* true when acquire(key) would be refused with SandboxUnclean (7.10);
 * *n_targets (may be NULL) receives the number of pending targets. */
MSB_EXTERN bool msb_router_key_unclean(msb_router *r, const msb_key *key, size_t *n_targets);

/*
 * The scope helper (7.5; C form of `async with router.scope(...)`, 24.32).
 *
 * begin zeroes *record (which must outlive the scope) and returns a guard;
 * end runs dispose_scope(scope, thread_id) - always, whatever block_rc says -
 * fills *record (disposed, undisposed) and frees the guard. end returns
 * block_rc unchanged when it is non-zero (the block's own error is never
 * masked); otherwise 0, or MSB_E_CANCELLED if the disposal was cancelled.
 */
typedef struct msb_router_scope msb_router_scope;
MSB_EXTERN int msb_router_scope_begin(msb_router *r, const char *scope, const char *thread_id,
				      msb_scope_purge *record, msb_router_scope **out,
				      msb_error **err);
MSB_EXTERN int msb_router_scope_end(msb_router_scope *guard, int block_rc, msb_error **err);

/* The block of msb_router_with_scope: its return code and *err are the
 * scope's. */
typedef int (*msb_scope_block_fn)(void *userdata, msb_error **err);

/*
 * Run `fn` inside a scope: begin, fn, end. Returns fn's code with fn's error
 * when fn fails; otherwise what end returns. *record reads zero while fn
 * runs and is filled only after.
 */
MSB_EXTERN int msb_router_with_scope(msb_router *r, const char *scope, const char *thread_id,
				     msb_scope_block_fn fn, void *userdata, msb_scope_purge *record,
				     msb_error **err);

/*
 * SandboxPurger.purge_scoped_thread (7.14): dispose_scope, log the count,
 * never fail a conversation delete - a backend's failure leaves the count it
 * did not add and a log line. *out (may be NULL) receives the ScopePurge.
 * Only a missing argument is an error. Stop new work for the conversation
 * across replicas first (7.15): a backend may refuse acquire while a purge
 * runs, and an incomplete purge must be retried.
 */
MSB_EXTERN int msb_purge_scoped_thread(msb_router *r, const char *scope, const char *thread_id,
				       msb_scope_purge *out, msb_error **err);

/* ---- Call admission (checklist 8.11-8.21) ----------------------------------------------------
 *
 * A gate per sandbox slot (serving backend, key, kind) of one router. Calls
 * overlap freely (8.11) unless one is exclusive (8.15). A call that needs
 * whole-instance cleanup (RESET or DISPOSE) queues it at release: admission
 * closes for that slot, active siblings finish, and the last call leaving
 * cleans each physical instance once with the strongest rung queued (8.13).
 * Entrants wait for that cleanup's outcome (8.14): a disposal that did not
 * land refuses them with SandboxUnclean. The gate coordinates one router's
 * callers only (8.21): use IsolationScope.CALL across routers or processes.
 */
typedef struct msb_call_hold msb_call_hold;

typedef struct msb_enter_call_options {
	unsigned version;
	bool exclusive;		  /* hold the slot alone; forced by exclusive_admission */
	double admission_timeout; /* seconds; 0 = MSB_ADMISSION_TIMEOUT_DEFAULT */
	double cleanup_timeout;	  /* this tool's cleanup bound; 0 = router reclaim.timeout */
	const char *call;	  /* the call id, for events; NULL outside a call */
	msb_cancel *cancel;	  /* may be NULL */
} msb_enter_call_options;
#define MSB_ENTER_CALL_OPTIONS_VERSION 1
#define MSB_ENTER_CALL_OPTIONS_INIT                                                                \
	{                                                                                          \
		MSB_ENTER_CALL_OPTIONS_VERSION, false, 0, 0, NULL, NULL                            \
	}

/*
 * enter_call: run the checks (refusals as from acquire), refuse an unclean
 * key, then wait to be admitted. The wait is bounded (8.17) by
 * admission_timeout + 2 x cleanup_timeout while calls ahead are active,
 * restarting whenever one of them leaves or completes a cleanup step, and by
 * MSB_CLEANUP_WAIT_TIMEOUT while a queued cleanup runs (8.18); expiry is
 * MSB_E_TIMEOUT. Cancellation is MSB_E_CANCELLED. A waiter that gives up
 * leaves the pending cleanup to its holder (8.19). After the wait the key is
 * checked again: a cleanup that did not land refuses with SandboxUnclean.
 */
MSB_EXTERN int msb_router_enter_call(msb_router *r, const msb_key *key, const msb_spec *spec,
				     const msb_enter_call_options *opts, msb_call_hold **out,
				     msb_error **err);

/*
 * acquire inside a hold: acquire (7.1) for the hold's key and spec, without
 * the admission wait the hold already passed. The sandbox is owned by the
 * hold (borrowed here) and valid until release. Acquiring again returns the
 * same handle while the instance is the same.
 */
MSB_EXTERN int msb_call_hold_acquire(msb_call_hold *hold, msb_sandbox **out, msb_error **err);

/* release_call's cleanup: the rung this call needs for its instance.
 * RECLAIM queues nothing (the call removed its own directory). */
#define MSB_RELEASE_CLEANUP_EFFECTIVE ((msb_cleanup)-1) /* msb_router_effective_cleanup */

typedef struct msb_release_options {
	unsigned version;
	msb_cleanup cleanup;	/* default MSB_RELEASE_CLEANUP_EFFECTIVE */
	double cleanup_timeout; /* bound of each cleanup step; 0 = router reclaim.timeout */
} msb_release_options;
#define MSB_RELEASE_OPTIONS_VERSION 1
#define MSB_RELEASE_OPTIONS_INIT                                                                   \
	{                                                                                          \
		MSB_RELEASE_OPTIONS_VERSION, MSB_RELEASE_CLEANUP_EFFECTIVE, 0                      \
	}

typedef struct msb_release_report {
	bool executed;		  /* this release ran queued cleanup (its own or a sibling's) */
	size_t instances_cleaned; /* physical instances cleaned by this release */
	bool landed;		  /* every cleanup this release ran landed */
} msb_release_report;

/*
 * release_call (8.16): queue whole-instance cleanup for each instance acquired
 * through the hold (if its rung is RESET or DISPOSE; a hold that acquired
 * nothing queues nothing), leave, and - when this was the last hold on the slot -
 * run every queued cleanup once per instance before returning. Steps are
 * bounded by cleanup_timeout each (8.22). A failed RESET escalates to
 * DISPOSE, and a DISPOSE that does not land refuses the key, unless the
 * router's policy is KEEP (8.10). Always frees the hold (NULL is accepted).
 * *report may be NULL. Only argument errors are returned.
 */
MSB_EXTERN int msb_router_release_call(msb_call_hold *hold, const msb_release_options *opts,
				       msb_release_report *report, msb_error **err);

MSB_END_DECLS

#endif
