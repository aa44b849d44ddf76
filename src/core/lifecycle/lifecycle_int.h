/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internal to the router's lifecycle (checklist sections 7, 8, 15, 16):
 * bounded cleanup steps (bounded.c), the lifecycle state and disposals
 * (lifecycle.c), unclean keys (unclean.c), call admission (admission.c), and
 * the users of all three (router.c, session.c, infoflow.c,
 * effective_state.c).
 *
 * Locking: one mutex per router lifecycle guards the unclean targets, the
 * key disposal locks and the admission slots; one condition variable is
 * broadcast on every change. Nothing calls a backend, a sandbox or a host
 * callback with that mutex held.
 */
#ifndef MSB_CORE_LIFECYCLE_INT_H
#define MSB_CORE_LIFECYCLE_INT_H

#include <pthread.h>
#include <stdatomic.h>

#include "core/policy/router_int.h"

/* ---- bounded.c: a step run on a helper thread under a bound -----------------------------------
 *
 * A backend's dispose and a host's callback take no timeout, and a
 * sandbox's reclaim or reset may not honour the one it is given; each runs
 * as a step so that the caller's bound holds (7.7, 8.22, 15.20). A step the
 * caller gives up on keeps running: it is abandoned to its helper thread,
 * which calls late() (if set) and then destroy() when run() returns.
 */
struct msb_step {
	void (*run)(struct msb_step *s);     /* the work; keeps its results in the step */
	void (*late)(struct msb_step *s);    /* after run(), only when abandoned; may be NULL */
	void (*destroy)(struct msb_step *s); /* frees the whole step */
	/* private to bounded.c */
	pthread_mutex_t m;
	pthread_cond_t c;
	bool done;
	bool abandoned;
};

void msb_lifecycle__step_init(struct msb_step *s, void (*run)(struct msb_step *),
			      void (*late)(struct msb_step *), void (*destroy)(struct msb_step *));
/* Start run() on a detached helper thread (inline when no thread can be made). */
void msb_lifecycle__step_start(struct msb_step *s);
/* Wait until run() returns or `deadline_ns` (CLOCK_MONOTONIC) passes or
 * `cancel` fires: 0, MSB_E_TIMEOUT or MSB_E_CANCELLED. */
int msb_lifecycle__step_wait(struct msb_step *s, int64_t deadline_ns, msb_cancel *cancel);
/* Give the step up after a failed wait. false when run() finished after all
 * (the caller still owns the step and its results); true when the helper
 * thread now owns it. Fields the caller writes before this call are seen by
 * late(). */
bool msb_lifecycle__step_abandon(struct msb_step *s);
/* Free a step the caller owns (finished, or never abandoned). */
void msb_lifecycle__step_destroy(struct msb_step *s);
/* start + wait + abandon; true when run() finished (the caller owns s). */
bool msb_lifecycle__step_run_bounded(struct msb_step *s, int64_t deadline_ns, msb_cancel *cancel,
				     int *rc);

/* Seconds from now as a CLOCK_MONOTONIC deadline, saturating. */
int64_t msb_lifecycle__deadline_after(double seconds);

/* ---- a shared sandbox handle -------------------------------------------------------------------
 * The call and a step abandoned on it may both still use a handle. */
struct msb_sbref {
	atomic_uint refs;
	msb_sandbox *sb;
	char *instance_id;
	size_t backend;
};
struct msb_sbref *msb_lifecycle__sbref_new(msb_sandbox *sb, size_t backend); /* takes sb */
struct msb_sbref *msb_lifecycle__sbref_ref(struct msb_sbref *h);
void msb_lifecycle__sbref_unref(struct msb_sbref *h);

/* A sandbox operation (reclaim or reset) as a bounded step. Returns the
 * operation's code, MSB_E_TIMEOUT or MSB_E_CANCELLED; *err gets the
 * operation's error when it finished. */
enum msb_sandbox_step_op {
	MSB_STEP_RECLAIM,
	MSB_STEP_RESET,
};
int msb_lifecycle__sandbox_step(struct msb_sbref *h, enum msb_sandbox_step_op op,
				const char *directory, double timeout, msb_cancel *cancel,
				msb_error **err);

/* ---- lifecycle.c: state ---------------------------------------------------------------------- */

/* One pending unclean target (7.10): a framework cleanup that did not land. */
struct msb_lc_target {
	msb_key *key;
	size_t backend;
	char *backend_name;
	char *kind;	   /* NULL = every kind */
	char *instance_id; /* NULL = every instance */
	msb_disposal_code code;
	char *detail; /* the backend's own words, quoted by SandboxUnclean */
	uint64_t gen;
};

/* A per-key disposal lock (7.7). */
struct msb_lc_keylock {
	struct msb_lc_keylock *next;
	msb_key *key;
	bool held;
	size_t refs;
};

struct msb_slot; /* admission.c */

struct msb_lifecycle {
	atomic_uint refs; /* the router, and every abandoned disposal step */
	pthread_mutex_t lock;
	pthread_cond_t cond; /* CLOCK_MONOTONIC; broadcast on every change */
	msb_logger lg;
	msb_failed_reclaim_policy policy;
	msb_clock_fn clock;
	void *clock_ud;
	uint64_t gen; /* generation of the newest unclean record */
	struct msb_lc_target *targets;
	size_t n_targets;
	struct msb_lc_keylock *locks;
	struct msb_slot *slots;
};

int msb_lifecycle__new(struct msb_router *r, msb_error **err);
struct msb_lifecycle *msb_lifecycle__ref(struct msb_lifecycle *lc);
void msb_lifecycle__unref(struct msb_lifecycle *lc);
/* The admission clock (injectable, msb_router_set_clock). */
int64_t msb_lifecycle__now(struct msb_lifecycle *lc);
/* Wait on lc->cond (lock held) until `deadline_ns` (CLOCK_MONOTONIC) at most;
 * with `short_slices`, at most 10 ms (cancel tokens, injected clocks). */
void msb_lifecycle__wait(struct msb_lifecycle *lc, int64_t deadline_ns, bool short_slices);

/* The key's disposal lock, waited for until deadline_ns (real). 0,
 * MSB_E_TIMEOUT or MSB_E_CANCELLED (with *err set). */
int msb_lifecycle__key_lock(struct msb_lifecycle *lc, const msb_key *key, int64_t deadline_ns,
			    msb_cancel *cancel, msb_error **err);
void msb_lifecycle__key_unlock(struct msb_lifecycle *lc, const msb_key *key);

/* Which pending targets a landed disposal clears. */
enum msb_clear_mode {
	MSB_CLEAR_KEY,	    /* every target of the key on that backend (host dispose) */
	MSB_CLEAR_KIND,	    /* targets of exactly that kind, any instance */
	MSB_CLEAR_INSTANCE, /* targets of exactly that kind and instance */
};

/* The outcome of one backend's disposal. */
struct msb_dispose_outcome {
	bool landed;
	bool cancelled;
	msb_disposal_code code; /* when !landed */
	char *detail;		/* owned; when !landed */
};
void msb_dispose_outcome__clear(struct msb_dispose_outcome *o);

/*
 * One backend's dispose(key, kind, instance) as a bounded step, until
 * deadline_ns. A landed disposal clears the matching targets recorded before
 * it started; a failed one records a target when `record` is set. An
 * abandoned step records a `timeout` target (when `record`), and its late
 * success still clears what is older than itself (7.12). Logs failures.
 */
void msb_lifecycle__dispose_one(struct msb_router *r, size_t backend, const msb_key *key,
				const char *kind, const char *instance_id, int64_t deadline_ns,
				msb_cancel *cancel, bool record, enum msb_clear_mode mode,
				struct msb_dispose_outcome *out);

/* Emit SandboxDisposed for a sweep (results may be NULL when n is 0). */
void msb_lifecycle__emit_disposed(struct msb_router *r, const msb_key *key, const char *kind,
				  const char *instance_id, bool all,
				  const msb_ev_disposal_result *res, size_t n, const char *origin,
				  const char *call);

/* The effective cleanup rung for a spec on the backend at `backend`. */
msb_cleanup msb_lifecycle__rung(const struct msb_router *r, size_t backend, const msb_spec *spec,
				msb_isolation_scope scope);

/* ---- unclean.c ----------------------------------------------------------------------------- */

/* The generation a disposal attempt starts from. */
uint64_t msb_unclean__snapshot(struct msb_lifecycle *lc);
/* Record (or refresh) a target; returns its new generation (0 on allocation
 * failure, logged: the refusal errs on the side of a key left open). */
uint64_t msb_unclean__record(struct msb_lifecycle *lc, const msb_key *key, size_t backend,
			     const char *backend_name, const char *kind, const char *instance_id,
			     msb_disposal_code code, const char *detail);
/* Clear the targets a landed disposal covers: those recorded at or before
 * `since`, or whose generation is `own` (the attempt's own timeout record). */
void msb_unclean__clear(struct msb_lifecycle *lc, const msb_key *key, size_t backend,
			const char *kind, const char *instance_id, enum msb_clear_mode mode,
			uint64_t since, uint64_t own);
/* 0, or MSB_E_UNCLEAN quoting the newest failure. */
int msb_unclean__refuse(struct msb_lifecycle *lc, const msb_key *key, msb_error **err);
void msb_unclean__free_all(struct msb_lifecycle *lc);

/* ---- admission.c --------------------------------------------------------------------------- */

/* Run after a queued cleanup executes, by whichever call executes it. */
struct msb_cleanup_notice {
	void (*fn)(void *ud, msb_reclaim_disposal outcome);
	void (*free)(void *ud);
	void *ud;
};

struct msb_call_hold {
	struct msb_router *r;
	struct msb_slot *slot;
	size_t backend;
	msb_key *key;
	msb_spec *spec;
	char *call;
	msb_cancel *cancel;
	double cleanup_timeout;
	msb_isolation_scope scope;
	bool exclusive;
	struct msb_sbref **instances; /* distinct instances acquired through the hold */
	size_t n_instances;
};

/* Direct acquire (no hold): wait while the slot's admission is closed for a
 * queued or running cleanup (7.1, 8.14). 0, MSB_E_TIMEOUT, MSB_E_CANCELLED. */
int msb_admission__wait_open(struct msb_router *r, size_t backend, const msb_key *key,
			     const char *kind, msb_cancel *cancel, msb_error **err);
/* Record an instance acquired through the hold; returns the handle to hand
 * out (the hold's). Takes sb. */
int msb_admission__add_instance(struct msb_call_hold *h, msb_sandbox *sb, msb_sandbox **out,
				msb_error **err);
/* A cleanup step of a holder completed: waiters restart their bound (8.17). */
void msb_admission__step_done(struct msb_call_hold *h);
/* Queue whole-instance cleanup for one of the hold's instances (NULL: the
 * slot's kind as a whole) with an optional notice (taken). */
int msb_admission__queue(struct msb_call_hold *h, struct msb_sbref *inst, msb_cleanup rung,
			 double timeout, const struct msb_cleanup_notice *notice, msb_error **err);
/* Leave; run the slot's queued cleanup when last. Frees the hold. */
void msb_admission__release(struct msb_call_hold *h, msb_release_report *report);

/* ---- router.c ------------------------------------------------------------------------------ */

/* acquire (7.1) with the call column, a cancel token and an optional hold. */
int msb_router__acquire(struct msb_router *r, const msb_key *key, const msb_spec *spec,
			const char *call, msb_cancel *cancel, struct msb_call_hold *hold,
			msb_sandbox **out, msb_error **err);
/* Index of the backend named `name`, or SIZE_MAX. */
size_t msb_router__backend_index(const struct msb_router *r, const char *name);

#endif
