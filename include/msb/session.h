/* SPDX-License-Identifier: Apache-2.0 */
/*
 * msb/session.h - the tool-call session: the C form of the seed's
 * `sandboxed_tool` wrapper and `SandboxToolSession` (checklist sections 15,
 * 16.1-16.16, 17.12-17.20; C forms of 24.10, 24.13-24.16, 24.33).
 *
 * A session is one attached tool: host configuration only (router, caller
 * context, agent_dir, spec, name, callbacks), nothing derived from a caller.
 * Each invocation of the tool is a call:
 *
 *     msb_tool_call *call;
 *     msb_tool_session_begin_call(session, NULL, &call, &err);   // mints the call id
 *     ... msb_tool_call_key / _acquire / _guest_call_path / _read_file ...
 *     msb_call_outcome oc = MSB_CALL_OUTCOME_INIT;  oc.text = "done";
 *     msb_tool_call_end(call, &oc, &result, &err);               // cleanup + events
 *
 * The call handle is what a Python ContextVar was (24.10): pass it to
 * whatever the body spawns. It is reference-counted; msb_tool_call_end()
 * closes the call and drops the caller's reference, and a thread still
 * holding its own reference then gets MSB_E_RUNTIME from the calls that need
 * an open call (10.11, 15.16).
 *
 * Model-visible failures (no thread context, an unavailable sandbox, an
 * unclean key, a refused file read) are returned as sentences - newly
 * allocated strings the body returns to the model - never as errors.
 * Errors (negative codes) are wiring mistakes of the host or the kind.
 *
 * Thread-safety: sessions and calls may be used from many threads at once.
 * The router passed at attach must outlive the session.
 */
#ifndef MSB_SESSION_H
#define MSB_SESSION_H

#include <msb/common.h>
#include <msb/error.h>
#include <msb/key.h>
#include <msb/router.h>
#include <msb/sandbox.h>
#include <msb/spec.h>
#include <msb/vocab.h>

MSB_BEGIN_DECLS

struct msb_output_sink; /* msb/outputs.h */

/* ---- Result items (16.1, 24.14) ----------------------------------------------------------------
 *
 * What a body returns: a string, or a list of unlabelled text items. A body
 * never labels an item (labelled_result_item does not exist, 16.6): an item
 * with has_label set is refused. The wrapper's result carries the labels:
 * derived items stamped by the file fold when stamping is enabled (16.10),
 * and committed guidance rebuilt as trusted/public (16.2).
 */
typedef struct msb_result_item {
	const char *text;
	bool has_label;
	msb_integrity integrity;     /* when has_label */
	const char *confidentiality; /* when has_label; copied verbatim */
	bool guidance;		     /* output only: a committed standing-guidance item */
} msb_result_item;

/* The wrapper's result: items owned by the result. */
typedef struct msb_tool_result {
	msb_result_item *items;
	size_t n_items;
} msb_tool_result;
MSB_EXTERN void msb_tool_result_free(msb_tool_result *result);

/* The public label of guidance items. */
#define MSB_GUIDANCE_CONFIDENTIALITY "public"

/* ---- The host's file store and its provenance (16.7-16.9, 24.15) -------------------------------
 */

/*
 * A text file store the model's files live in. read: *present = false when
 * the path is absent; otherwise *text (malloc()ed, NUL-terminated) and *len.
 */
typedef struct msb_file_store {
	unsigned version;
	void *userdata;
	int (*read)(void *userdata, const char *path, char **text, size_t *len, bool *present,
		    msb_error **err);
} msb_file_store;
#define MSB_FILE_STORE_VERSION 1

/*
 * FileStoreProvenance: the integrity recorded for each path landed in the
 * store, and the floor assumed for a path nothing recorded (16.8). A path's
 * folded integrity is the weakest recorded for it, or the floor. The floor
 * MSB_INTEGRITY_UNESTABLISHED ranks below every level (23.23).
 * Thread-safe; reference-counted.
 */
typedef struct msb_file_store_provenance msb_file_store_provenance;
MSB_EXTERN int msb_file_store_provenance_new(msb_integrity floor, msb_file_store_provenance **out,
					     msb_error **err);
MSB_EXTERN msb_file_store_provenance *msb_file_store_provenance_ref(msb_file_store_provenance *p);
MSB_EXTERN void msb_file_store_provenance_unref(msb_file_store_provenance *p);
/* Record one landing (a sink records before it writes, 16.19). */
MSB_EXTERN int msb_file_store_provenance_record(msb_file_store_provenance *p, const char *path,
						msb_integrity integrity, msb_error **err);
/* The folded integrity of `path`; *recorded (may be NULL) says whether
 * anything was recorded for it. */
MSB_EXTERN msb_integrity msb_file_store_provenance_fold(msb_file_store_provenance *p,
							const char *path, bool *recorded);

/* ---- ReclaimFailure (15.20) -------------------------------------------------------------------
 */

typedef struct msb_reclaim_failure {
	const char *tool;
	const msb_key *key;
	const char *path; /* the call path (relative); NULL when the call allocated none */
	const char *reason;
	msb_reclaim_disposal disposal; /* disposed, failed, or kept */
	const char *call;
} msb_reclaim_failure;
/* Called after the framework has cleaned (disposed, by default), bounded by
 * the reclaim timeout; a non-zero return or an overrun is logged and
 * swallowed. It may run on the thread of a sibling call that executed the
 * cleanup, after this call has ended. */
typedef int (*msb_reclaim_failure_fn)(void *userdata, const msb_reclaim_failure *failure);

/* ---- EffectiveState (17.19, 17.20, 24.16) ------------------------------------------------------
 *
 * One served acquire as a JSON object - posture, never payload:
 *   {"backend", "isolation", "isolation_scope", "egress", "egress_allow":
 *    [host | {"host", "methods"}], "required_capabilities",
 *    "declared_capabilities", "host_tools", "call"}
 * No key, no spec labels, no model-chosen text. `backend` names the serving
 * backend (msb_sandbox_backend_name); host_tools lists the sealed host-tool
 * registry's tool names (n may be 0); call may be NULL (JSON null).
 * *out is malloc()ed.
 */
MSB_EXTERN int msb_effective_state_json(const msb_router *r, const msb_spec *spec,
					const char *backend, const char *const *host_tools,
					size_t n_host_tools, const char *call, char **out,
					msb_error **err);

/* Where the wrapper writes EffectiveState after a served acquire: one entry
 * per tool, overwritten each call (effective_state_middleware, 17.20). A
 * refused call writes nothing. Failures are logged and swallowed. */
typedef int (*msb_session_state_set_fn)(void *userdata, const char *tool, const char *json);

/* ---- Tool declarations (15.23) -------------------------------------------------------------- */

typedef struct msb_tool_declarations_options {
	unsigned version;
	const char *source_integrity;		  /* default "trusted"; NULL omits it */
	const char *outbound_max_confidentiality; /* NULL = no cap */
	bool has_output_sink;
	bool also_carries_out;
} msb_tool_declarations_options;
#define MSB_TOOL_DECLARATIONS_OPTIONS_VERSION 1
#define MSB_TOOL_DECLARATIONS_OPTIONS_INIT                                                         \
	{                                                                                          \
		MSB_TOOL_DECLARATIONS_OPTIONS_VERSION, "trusted", NULL, false, false               \
	}

/*
 * sandbox_tool_declarations: the tool's information-flow properties as a
 * JSON object. `source_integrity` unless NULL; `max_allowed_confidentiality`
 * only when a cap is given AND the tool can carry something out (a non-empty
 * egress allowlist, or artifacts that land with a sink given, or
 * also_carries_out). *out is malloc()ed.
 */
MSB_EXTERN int msb_sandbox_tool_declarations(const msb_spec *spec,
					     const msb_tool_declarations_options *opts, char **out,
					     msb_error **err);

/* ---- Attach (15.1-15.11, 15.22-15.24)
 * ------------------------------------------------------------ */

typedef struct msb_tool_session msb_tool_session;
typedef struct msb_tool_call msb_tool_call;

typedef enum msb_approval_mode {
	MSB_APPROVAL_NEVER_REQUIRE = 0,
	MSB_APPROVAL_ALWAYS_REQUIRE,
} msb_approval_mode;

typedef struct msb_tool_session_options {
	unsigned version;
	msb_router *router;		   /* NULL or disabled: no tool is made (15.1) */
	const msb_caller_context *context; /* copied; read at call time */
	const char *agent_dir;
	const msb_spec *spec;
	const char *name;
	/* The tool as the framework sees it, copied verbatim (15.9, 15.24). */
	const char *description;
	const char *parameters_schema; /* JSON text, never rewritten */
	msb_approval_mode approval_mode;
	/* The tool's properties (additional_properties). Either the
	 * declarations JSON as given, or an output sink from which the wrapper
	 * derives them - never both (15.3). */
	const char *declarations;		   /* JSON object text, or NULL */
	const struct msb_output_sink *output_sink; /* msb/outputs.h; borrowed; NULL = none */
	const char *source_integrity;		   /* default "trusted"; NULL = none declared */
	const char *outbound_max_confidentiality;
	bool also_carries_out;
	const char *confidentiality; /* additional_properties["confidentiality"]; NULL = none */
	/* Cleanup. */
	msb_reclaim_failure_fn on_reclaim_failure;
	void *on_reclaim_failure_userdata;
	double reclaim_timeout;	  /* 0 = router reclaim.timeout; else finite > 0 (15.6) */
	double admission_timeout; /* 0 = MSB_ADMISSION_TIMEOUT_DEFAULT */
	/* Information flow. */
	const char *const *standing_guidance; /* fixed sentences, {call_id} interpolates */
	size_t n_standing_guidance;
	bool requires_file_integrity_set;
	msb_integrity requires_file_integrity;
	const msb_file_store *file_store;      /* copied; NULL = read_file unavailable */
	msb_file_store_provenance *provenance; /* referenced; NULL = nothing recorded */
	const char *file_store_name;	       /* handed to the context's list_files */
	/* EffectiveState. */
	msb_session_state_set_fn state_set;
	void *state_set_userdata;
	const char *const *host_tools; /* the sealed registry's tool names */
	size_t n_host_tools;
	/* build (15.8): called once, only when a tool is made. */
	int (*build)(void *userdata, msb_tool_session *session, msb_error **err);
	void *build_userdata;
} msb_tool_session_options;
#define MSB_TOOL_SESSION_OPTIONS_VERSION 1
#define MSB_TOOL_SESSION_OPTIONS_INIT                                                              \
	{                                                                                          \
		.version = MSB_TOOL_SESSION_OPTIONS_VERSION, .source_integrity = "trusted",        \
		.requires_file_integrity = MSB_INTEGRITY_TRUSTED,                                  \
	}

/*
 * Attach a tool. With no router or a disabled one, *out = NULL and 0: no
 * tool, and build is not called (15.1, 15.8). Otherwise the attach preflight
 * is loud (15.2-15.7): ensure_can_serve's refusals; MSB_E_VALUE for an
 * output sink given with declarations, outputs without FILES_OUT in the
 * spec's requires, a bad reclaim or admission timeout, a work_dir at or one
 * component below the guest root, a guidance sentence that is empty;
 * MSB_E_OUTPUT_SINK_REQUIRED for a spec that lands artifacts with no sink.
 */
MSB_EXTERN int msb_tool_session_attach(const msb_tool_session_options *opts, msb_tool_session **out,
				       msb_error **err);
MSB_EXTERN msb_tool_session *msb_tool_session_ref(msb_tool_session *s);
MSB_EXTERN void msb_tool_session_unref(msb_tool_session *s);

/* What the framework sees (copied at attach). */
MSB_EXTERN const char *msb_tool_session_name(const msb_tool_session *s);
MSB_EXTERN const char *msb_tool_session_description(const msb_tool_session *s);
MSB_EXTERN const char *msb_tool_session_parameters_schema(const msb_tool_session *s);
MSB_EXTERN msb_approval_mode msb_tool_session_approval_mode(const msb_tool_session *s);
/* The tool's properties as a JSON object: the declarations given, or those
 * derived (msb_sandbox_tool_declarations), plus "confidentiality" when set.
 * *out is malloc()ed. */
MSB_EXTERN int msb_tool_session_properties(const msb_tool_session *s, char **out, msb_error **err);
MSB_EXTERN const msb_spec *msb_tool_session_spec(const msb_tool_session *s);
/* The tool's output sink (msb/outputs.h), the default of its calls' collections. */
MSB_EXTERN const struct msb_output_sink *msb_tool_session_output_sink(const msb_tool_session *s);
/* The cleanup rung this tool's calls get (msb_router_effective_cleanup). */
MSB_EXTERN msb_cleanup msb_tool_session_cleanup(const msb_tool_session *s);

/* ---- Calls ----------------------------------------------------------------------------------- */

typedef struct msb_call_begin_options {
	unsigned version;
	msb_cancel *cancel; /* watched by admission waits and cleanup; may be NULL */
} msb_call_begin_options;
#define MSB_CALL_BEGIN_OPTIONS_VERSION 1
#define MSB_CALL_BEGIN_OPTIONS_INIT                                                                \
	{                                                                                          \
		MSB_CALL_BEGIN_OPTIONS_VERSION, NULL                                               \
	}

/* Begin a call: mint its id (12 lowercase hex characters). opts may be NULL. */
MSB_EXTERN int msb_tool_session_begin_call(msb_tool_session *s, const msb_call_begin_options *opts,
					   msb_tool_call **out, msb_error **err);
MSB_EXTERN msb_tool_call *msb_tool_call_ref(msb_tool_call *c);
MSB_EXTERN void msb_tool_call_unref(msb_tool_call *c);
/* The call id: the observer's `call` column, the guest call path's name, and
 * the key's call_id at IsolationScope.CALL (2.7). Lives as long as the handle. */
MSB_EXTERN const char *msb_tool_call_id(const msb_tool_call *c);
MSB_EXTERN msb_tool_session *msb_tool_call_session(const msb_tool_call *c);

/*
 * session.key() (2.4-2.7, 15.12): the key built from the caller context now.
 * Exactly one of *key (msb_key_free) and *sentence (free) is set: the
 * sentence when the context has no thread ("Error: no active thread context
 * ...") or cannot be read. At an effective CALL scope the key carries the
 * call id. MSB_E_RUNTIME on a NULL or ended call.
 */
MSB_EXTERN int msb_tool_call_key(msb_tool_call *c, msb_key **key, char **sentence, msb_error **err);

/*
 * session.acquire(key) (15.13, 15.14, 15.22, 15.25): admission, then acquire,
 * recording the key (served or refused) and the instance on the call. Exactly
 * one of *sandbox and *sentence is set. The sandbox is owned by the call and
 * valid until msb_tool_call_end(). Failures become sentences (detail to the
 * log): MSB_SENTENCE_NOT_INSTALLED, MSB_SENTENCE_NO_BACKEND, "Error:
 * <message>" for a ValueError, MSB_SENTENCE_UNCLEAN for SandboxUnclean,
 * MSB_SENTENCE_UNAVAILABLE for anything else. At an effective CALL scope a
 * key without a call_id gets this call's. MSB_E_RUNTIME on an ended call;
 * MSB_E_CANCELLED when the call's token fires during the admission wait.
 */
MSB_EXTERN int msb_tool_call_acquire(msb_tool_call *c, const msb_key *key, msb_sandbox **sandbox,
				     char **sentence, msb_error **err);

#define MSB_SENTENCE_NOT_INSTALLED "the sandbox backend is not installed — degrading to T0"
#define MSB_SENTENCE_NO_BACKEND "no sandbox backend is configured — degrading to T0"
#define MSB_SENTENCE_UNAVAILABLE "sandbox unavailable — degrading to T0 (LLM self-check only)"
#define MSB_SENTENCE_UNCLEAN                                                                       \
	"Error: this conversation's sandbox could not be cleaned up and stays closed until its "   \
	"disposal lands — try again later"

/*
 * guest_call_path() (10.9-10.11): the call's own directory, a child name
 * relative to the storage base (the call id), allocated on first request and
 * removed from every instance the call held when it ends. Pass it as a
 * working_directory; never prefix spec.work_dir. *path lives as long as the
 * handle. MSB_E_RUNTIME outside a call (NULL) or after it ended.
 */
MSB_EXTERN int msb_tool_call_guest_call_path(msb_tool_call *c, const char **path, msb_error **err);

/*
 * session.read_file (16.7-16.9, 17.12, 17.15): read `path` from the host's
 * file store. With requires_file_integrity, a path whose folded integrity
 * (provenance, or its floor; UNESTABLISHED with no provenance) is below the
 * requirement is refused with a sentence and StoreFileRead(outcome
 * "refused"); an absent path is a sentence and StoreFileRead("absent"); a
 * read is StoreFileRead("read") and joins the call's fold (ToolCallEnded.fed
 * and the stamp). Exactly one of *text (with *len) and *sentence is set.
 * MSB_E_RUNTIME on an ended call; MSB_E_VALUE when no file store is set.
 */
MSB_EXTERN int msb_tool_call_read_file(msb_tool_call *c, const char *path, char **text, size_t *len,
				       char **sentence, msb_error **err);

/* The context's list_files over file_store_name (2.8): *files (msb_strv) or
 * *sentence ("Error: could not list the file store: ..."). */
MSB_EXTERN int msb_tool_call_list_files(msb_tool_call *c, char ***files, char **sentence,
					msb_error **err);

/*
 * What makes a call unclean (8.8): a transport that could not establish that
 * the call's programs stopped (unusable launcher receipt, unconfirmed signal,
 * incomplete snapshot, failed descendant cleanup, running survivors) reports
 * it on the instance it ran in. At the end the instance reaches the unclean
 * policy: disposed by default, kept under KEEP, and the host's callback hears
 * of it. `sandbox` is one the call acquired. MSB_E_VALUE otherwise.
 */
MSB_EXTERN int msb_tool_call_report_unclean(msb_tool_call *c, msb_sandbox *sandbox,
					    const char *reason, msb_error **err);

/* How the body ended (24.33). */
typedef enum msb_call_outcome_kind {
	MSB_CALL_RESULT = 0, /* text, or items */
	MSB_CALL_REFUSAL,    /* text: an error sentence for the model */
	MSB_CALL_ERROR,	     /* error_code: the body failed */
	MSB_CALL_CANCELLED,  /* the body was cancelled */
} msb_call_outcome_kind;

typedef struct msb_call_outcome {
	unsigned version;
	msb_call_outcome_kind kind;
	const char *text; /* RESULT (when items is NULL) and REFUSAL: one derived item */
	const msb_result_item *items;
	size_t n_items;
	int error_code;	    /* ERROR: a negative MSB_E_* code, recorded by name */
	msb_cancel *cancel; /* a cancellation during cleanup (may be NULL) */
} msb_call_outcome;
#define MSB_CALL_OUTCOME_VERSION 1
#define MSB_CALL_OUTCOME_INIT                                                                      \
	{                                                                                          \
		MSB_CALL_OUTCOME_VERSION, MSB_CALL_RESULT, NULL, NULL, 0, 0, NULL                  \
	}

/*
 * End the call (15.14-15.22, 16.2-16.16, 17.14, 17.15), in this order:
 *   1. close it: guest_call_path and acquire now fail (15.16);
 *   2. check the result against the committed guidance and stamp it;
 *   3. remove the call path from every instance held, one after another,
 *      each bounded by the reclaim timeout (min(it, 2 s) for a cancelled
 *      body); a failure is logged, and the instance becomes unclean;
 *   4. release each hold in turn with its cleanup: the effective rung, or
 *      for an unclean instance DISPOSE (KEEP: kept); the last call on an
 *      instance cleans it once (8.13); ReclaimFailure goes to the callback
 *      after the cleanup (15.20);
 *   5. emit ToolCallEnded with every key touched, the outcome and `fed`.
 * A call that never asked for a path and never acquired does no guest work.
 * Cleanup never replaces the call's outcome (15.18): for RESULT and REFUSAL
 * *result receives the items; ERROR and CANCELLED leave it NULL, and the
 * caller raises its own failure. Returns MSB_E_VALUE when the result breaks
 * the standing-guidance commitment or carries a label (16.4; no result, but
 * cleanup ran), MSB_E_CANCELLED when outcome->cancel fired during cleanup.
 * Drops the caller's reference to `c` in every case.
 */
MSB_EXTERN int msb_tool_call_end(msb_tool_call *c, const msb_call_outcome *outcome,
				 msb_tool_result **result, msb_error **err);

MSB_END_DECLS

#endif
