/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internal to the tool-call session (session.c) and its information flow
 * (infoflow.c): the session and call objects.
 */
#ifndef MSB_CORE_SESSION_INT_H
#define MSB_CORE_SESSION_INT_H

#include <msb/session.h>

#include "core/lifecycle/lifecycle_int.h"

struct msb_tool_session {
	atomic_uint refs;
	msb_router *r; /* borrowed: outlives the session */
	msb_caller_context ctx;
	char *agent_dir;
	char *name;
	char *description;
	char *parameters_schema;
	msb_approval_mode approval_mode;
	char *declarations;
	const struct msb_output_sink *output_sink;
	char *source_integrity;
	char *outbound_max_confidentiality;
	bool also_carries_out;
	char *confidentiality;
	bool stamping;		/* confidentiality + a valid source_integrity (16.10) */
	msb_integrity declared; /* the source_integrity declaration, when stamping */
	msb_spec *spec;
	size_t backend; /* the serving backend (the checks are a pure function) */
	msb_isolation_scope scope;
	msb_cleanup cleanup;
	bool backend_reclaims; /* declares RECLAIM: the call path can be removed */
	msb_reclaim_failure_fn on_reclaim_failure;
	void *on_reclaim_failure_ud;
	double reclaim_timeout;
	double admission_timeout;
	char **guidance; /* msb_strv */
	size_t n_guidance;
	bool requires_set;
	msb_integrity requires;
	bool has_store;
	msb_file_store store;
	msb_file_store_provenance *provenance;
	char *store_name;
	msb_session_state_set_fn state_set;
	void *state_set_ud;
	char **host_tools; /* msb_strv */
	size_t n_host_tools;
};

/* One instance the call holds. */
struct msb_call_instance {
	struct msb_call_hold *hold; /* owned by the call's holds */
	struct msb_sbref *inst;	    /* owned by the hold */
	char *reason;		    /* set: the instance is unclean (8.8) */
};

struct msb_tool_call {
	atomic_uint refs;
	struct msb_tool_session *s;
	char id[13];
	msb_cancel *cancel;
	pthread_mutex_t lock;	      /* the fields below */
	pthread_mutex_t acquire_lock; /* one acquire at a time: one hold per slot */
	bool closed;
	bool path_allocated;
	msb_key **keys; /* every key touched (17.4) */
	size_t n_keys;
	struct msb_call_hold **holds;
	size_t n_holds;
	struct msb_call_instance *insts;
	size_t n_insts;
	size_t fed_count; /* reads that carried text (17.15) */
	msb_integrity fed_weakest;
};

/* session.c: copy an optional string (NULL stays NULL); -ENOMEM. */
int msb_session__dup_opt(const char *in, char **out);
/* session.c: remember a key the call touched (lock not held). */
void msb_session__touch_key(struct msb_tool_call *c, const msb_key *key);
/* session.c: the key for events, built from the context (NULL when none). */
msb_key *msb_session__event_key(struct msb_tool_call *c);

/* infoflow.c: check the body's result against the commitment and stamp it
 * (16.1-16.16). MSB_E_VALUE on a broken commitment or a body label. */
int msb_infoflow__result(const struct msb_tool_session *s, const char *call_id,
			 const msb_call_outcome *oc, size_t fed_count, msb_integrity fed_weakest,
			 msb_tool_result **out, msb_error **err);
/* infoflow.c: the spec declares an output that lands (15.4, 15.23). */
bool msb_infoflow__spec_lands(const msb_spec *spec);
/* infoflow.c: validate the commitment at attach. */
int msb_infoflow__check_guidance(const char *const *g, size_t n, msb_error **err);

#endif
