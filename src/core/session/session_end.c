/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The end of a tool call (checklist 15.16-15.21, 8.8-8.12, 8.20, 8.22, 17.14,
 * 17.15): close the record, check and stamp the result (infoflow.c), remove
 * the call path from every instance held, release each hold with its cleanup
 * (admission.c), deliver ReclaimFailure after the framework has cleaned, and
 * record ToolCallEnded.
 */
#include "core/session/session_int.h"

/* A cancelled body's removal gets a short grace (15.19). */
#define CANCELLED_REMOVAL_GRACE 2.0

/* ---- ReclaimFailure delivery (15.20, 15.21)
 * ------------------------------------------------------ */

struct failure_note {
	struct msb_tool_session *s; /* referenced */
	msb_key *key;
	char *path;
	char *reason;
	char *call;
};

static void note_free(void *ud)
{
	struct failure_note *n = ud;
	if (!n)
		return;
	msb_tool_session_unref(n->s);
	msb_key_free(n->key);
	free(n->path);
	free(n->reason);
	free(n->call);
	free(n);
}

/* The host's callback as a bounded step: it may outlive its bound. */
struct callback_step {
	struct msb_step base;
	struct failure_note *note; /* owned */
	msb_reclaim_disposal disposal;
	int rc;
};

static void callback_run(struct msb_step *st)
{
	struct callback_step *cs = (struct callback_step *)st;
	struct failure_note *n = cs->note;
	msb_reclaim_failure f = {
		.tool = n->s->name,
		.key = n->key,
		.path = n->path,
		.reason = n->reason,
		.disposal = cs->disposal,
		.call = n->call,
	};
	cs->rc = n->s->on_reclaim_failure(n->s->on_reclaim_failure_ud, &f);
}

static void callback_destroy(struct msb_step *st)
{
	struct callback_step *cs = (struct callback_step *)st;
	note_free(cs->note);
	free(cs);
}

static void deliver(void *ud, msb_reclaim_disposal disposal)
{
	struct failure_note *n = ud;
	struct msb_tool_session *s = n->s;
	if (!s->on_reclaim_failure)
		return; /* logged already, at the failure (15.21) */
	struct callback_step *cs = calloc(1, sizeof(*cs));
	struct failure_note *copy = calloc(1, sizeof(*copy));
	if (!cs || !copy || msb_key_dup(n->key, &copy->key, NULL) < 0 ||
	    msb_session__dup_opt(n->path, &copy->path) < 0 ||
	    msb_session__dup_opt(n->reason, &copy->reason) < 0 ||
	    msb_session__dup_opt(n->call, &copy->call) < 0) {
		free(cs);
		if (copy)
			copy->s = NULL;
		note_free(copy);
		msb__log(&s->r->lg, MSB_LOG_ERROR, "session",
			 "out of memory delivering a ReclaimFailure for call `%s`", n->call);
		return;
	}
	copy->s = msb_tool_session_ref(s);
	cs->note = copy;
	cs->disposal = disposal;
	msb_lifecycle__step_init(&cs->base, callback_run, NULL, callback_destroy);
	int rc;
	if (!msb_lifecycle__step_run_bounded(
		    &cs->base, msb_lifecycle__deadline_after(s->reclaim_timeout), NULL, &rc)) {
		msb__log(&s->r->lg, MSB_LOG_WARNING, "session",
			 "tool `%s` call `%s`: on_reclaim_failure did not return within %g s",
			 s->name, n->call, s->reclaim_timeout);
		return;
	}
	if (cs->rc != 0)
		msb__log(&s->r->lg, MSB_LOG_WARNING, "session",
			 "tool `%s` call `%s`: on_reclaim_failure failed (returned %d)", s->name,
			 n->call, cs->rc);
	msb_lifecycle__step_destroy(&cs->base);
}

static struct failure_note *note_new(struct msb_tool_call *c, const msb_key *key,
				     const char *reason)
{
	struct failure_note *n = calloc(1, sizeof(*n));
	if (!n || msb_key_dup(key, &n->key, NULL) < 0 ||
	    msb_session__dup_opt(c->path_allocated ? c->id : NULL, &n->path) < 0 ||
	    msb_session__dup_opt(reason, &n->reason) < 0 ||
	    msb_session__dup_opt(c->id, &n->call) < 0) {
		note_free(n);
		return NULL;
	}
	n->s = msb_tool_session_ref(c->s);
	return n;
}

/* ---- end (15.14-15.22, 17.14)
 * -------------------------------------------------------------------- */

static const char *outcome_name(const msb_call_outcome *oc, int result_rc)
{
	if (result_rc < 0)
		return msb_code_name(result_rc);
	switch (oc->kind) {
	case MSB_CALL_RESULT:
		return "result";
	case MSB_CALL_REFUSAL:
		return "refusal";
	case MSB_CALL_CANCELLED:
		return "cancelled";
	case MSB_CALL_ERROR:
		break;
	}
	return msb_code_name(oc->error_code);
}

/* Step 3: the call path off every instance, in order (8.12, 8.20). */
static bool remove_call_path(struct msb_tool_call *c, double timeout, msb_cancel *cancel)
{
	struct msb_tool_session *s = c->s;
	bool cancelled = false;
	if (!c->path_allocated || !s->backend_reclaims)
		return false;
	for (size_t i = 0; i < c->n_insts; i++) {
		struct msb_call_instance *ci = &c->insts[i];
		msb_error *e = NULL;
		int rc = cancelled ? msb_error_set(&e, MSB_E_CANCELLED, "removal cancelled")
				   : msb_lifecycle__sandbox_step(ci->inst, MSB_STEP_RECLAIM, c->id,
								 timeout, cancel, &e);
		if (rc == MSB_E_CANCELLED)
			cancelled = true;
		if (rc < 0) {
			/* Always said, callback or not (15.21). */
			msb__log(&s->r->lg, MSB_LOG_WARNING, "session",
				 "tool `%s` call `%s`: the call path `%s` was not removed from "
				 "instance `%s`: %s: %s",
				 s->name, c->id, c->id, ci->inst->instance_id, msb_error_name(e),
				 msb_error_message(e));
			if (!ci->reason)
				ci->reason = msb__asprintf("the call path `%s` was not removed: %s",
							   c->id, msb_error_message(e));
		}
		msb_error_free(e);
		/* A step of this call completed: whoever waits behind any of
		 * its holds restarts its bound (8.17). */
		for (size_t h = 0; h < c->n_holds; h++)
			msb_admission__step_done(c->holds[h]);
	}
	return cancelled;
}

/* Step 4: each hold released with its instances' cleanup, in order. */
static void release_holds(struct msb_tool_call *c)
{
	struct msb_tool_session *s = c->s;
	msb_failed_reclaim_policy policy = s->r->opts.reclaim.failed_reclaim_policy;
	for (size_t h = 0; h < c->n_holds; h++) {
		struct msb_call_hold *hold = c->holds[h];
		for (size_t i = 0; i < c->n_insts; i++) {
			struct msb_call_instance *ci = &c->insts[i];
			if (ci->hold != hold)
				continue;
			bool unclean = ci->reason != NULL;
			msb_cleanup rung = s->cleanup;
			if (unclean && policy == MSB_FAILED_RECLAIM_DISPOSE)
				rung = MSB_CLEANUP_DISPOSE; /* escalation (8.10) */
			struct failure_note *n =
				unclean ? note_new(c, hold->key, ci->reason) : NULL;
			if (rung == MSB_CLEANUP_RECLAIM) {
				/* Kept: nothing whole-instance to wait for. */
				if (n)
					deliver(n, MSB_RECLAIM_KEPT);
				note_free(n);
				continue;
			}
			struct msb_cleanup_notice notice = {deliver, note_free, n};
			msb_admission__queue(hold, ci->inst, rung, s->reclaim_timeout,
					     n ? &notice : NULL, NULL);
		}
		msb_admission__release(hold, NULL);
	}
	/* The holds owned the instances: nothing of them is left to name. */
	pthread_mutex_lock(&c->lock);
	for (size_t i = 0; i < c->n_insts; i++)
		free(c->insts[i].reason);
	c->n_insts = 0;
	c->n_holds = 0;
	pthread_mutex_unlock(&c->lock);
}

static void emit_ended(struct msb_tool_call *c, const char *outcome)
{
	msb_router *r = c->s->r;
	if (!msb_observer__wants(&r->observer, tool_call_ended))
		return;
	/* `fed` is absent when nothing carried text: an empty fold must not
	 * read as trusted (17.15). */
	msb_ev_tool_call_ended ev = {
		.call = c->id,
		.keys = (const msb_key *const *)c->keys,
		.n_keys = c->n_keys,
		.outcome = outcome,
		.fed = c->fed_count > 0,
		.fed_weakest = c->fed_count > 0 ? c->fed_weakest : MSB_INTEGRITY_UNESTABLISHED,
		.fed_count = c->fed_count,
	};
	msb_observer__tool_call_ended(&r->observer, &r->lg, &ev);
}

int msb_tool_call_end(msb_tool_call *c, const msb_call_outcome *oc, msb_tool_result **result,
		      msb_error **err)
{
	static const msb_call_outcome unknown = {
		MSB_CALL_OUTCOME_VERSION, MSB_CALL_ERROR, NULL, NULL, 0, MSB_E_VALUE, NULL};
	if (!c)
		return msb_error_set(err, MSB_E_RUNTIME, "end: outside a tool call");
	if (result)
		*result = NULL;
	int rc = 0;
	if (!oc || oc->version != MSB_CALL_OUTCOME_VERSION) {
		/* The call is still cleaned up, as a failure. */
		rc = msb_error_set(err, MSB_E_VALUE, "end: missing or unsupported outcome");
		oc = &unknown;
	}

	/* 1. Closed before anything is removed (15.16); an acquire in flight
	 * finishes first, so its instance is cleaned too. */
	pthread_mutex_lock(&c->acquire_lock);
	pthread_mutex_lock(&c->lock);
	bool already = c->closed;
	c->closed = true;
	pthread_mutex_unlock(&c->lock);
	pthread_mutex_unlock(&c->acquire_lock);
	if (already) {
		msb_tool_call_unref(c);
		return rc < 0 ? rc : msb_error_set(err, MSB_E_RUNTIME, "end: the call has ended");
	}
	struct msb_tool_session *s = c->s;

	/* 2. The result's information flow. */
	msb_tool_result *res = NULL;
	msb_error *re = NULL;
	int result_rc = 0;
	if (oc->kind == MSB_CALL_RESULT || oc->kind == MSB_CALL_REFUSAL) {
		pthread_mutex_lock(&c->lock);
		size_t fed = c->fed_count;
		msb_integrity weakest = c->fed_weakest;
		pthread_mutex_unlock(&c->lock);
		result_rc = msb_infoflow__result(s, c->id, oc, fed, weakest, &res, &re);
	}

	/* 3 and 4. Cleanup, after every outcome; a body cancelled gets a short
	 * grace for its removal (15.19). Failures never replace the outcome. */
	double removal = s->reclaim_timeout;
	if (oc->kind == MSB_CALL_CANCELLED && removal > CANCELLED_REMOVAL_GRACE)
		removal = CANCELLED_REMOVAL_GRACE;
	bool cancelled = remove_call_path(c, removal, oc->cancel);
	release_holds(c);

	/* 5. The record of the call. */
	emit_ended(c, outcome_name(oc, result_rc));
	msb_tool_call_unref(c);

	if (rc < 0) {
		msb_error_free(re);
		msb_tool_result_free(res);
		return rc;
	}
	if (result_rc < 0)
		return msb__error_propagate(err, re);
	if (cancelled) {
		msb_tool_result_free(res);
		return msb_error_set(err, MSB_E_CANCELLED, "the call's cleanup was cancelled");
	}
	if (result)
		*result = res;
	else
		msb_tool_result_free(res);
	return 0;
}
