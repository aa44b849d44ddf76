/* SPDX-License-Identifier: Apache-2.0 */
/*
 * msb/hosttools.h - host tools: the registry, the one door (checklist 13).
 *
 * HOST_TOOLS is the one capability where trust crosses outward: a host tool's
 * body runs in the host process, with the host's authority, driven by
 * model-written code. The registry is the one door: nothing is callable from a
 * guest until a host registers it, every call resolves through
 * msb_host_tool_run_call(), and every gate (the declaration gate, allowed
 * identities, the per-run call cap, the argument schema, the response caps)
 * sits there, host-side. Transports (over-exec, the native channel) only carry
 * requests to this door and answers back.
 *
 * Least privilege comes from what a host registers, never from what it
 * declares: MSB_IDENTITY_APP is not the safe option, only the declared one -
 * it is the application's full authority (13.31).
 *
 * Everything a guest sees is a refusal sentence ("Error: ..."): a refusal ends
 * the call, not the program. Tool failure detail goes to the log only.
 *
 * Thread-safety: a registry may be used from several threads once sealed
 * (msb_host_tool_registry_aggregate); registration itself is serialised by an
 * internal lock. One msb_host_tool_run is used by one transport at a time but
 * its counters are locked, so concurrent calls on one run are also safe.
 */
#ifndef MSB_HOSTTOOLS_H
#define MSB_HOSTTOOLS_H

#include <msb/common.h>
#include <msb/error.h>
#include <msb/key.h>
#include <msb/observer.h>
#include <msb/vocab.h>

MSB_BEGIN_DECLS

/* How many host-tool calls one run may make unless the registry says otherwise. */
#define MSB_DEFAULT_MAX_HOST_TOOL_CALLS_PER_RUN 16

/* Guest-supplied names and binding messages quoted in refusals are bounded to
 * this many characters, then " (truncated)". */
#define MSB_HOST_TOOL_BOUND 120

/*
 * The information-flow declaration (13.3-13.5). Every leg has three states:
 * UNANSWERED (the developer never said), NONE ("not that role" - an answer),
 * VALUE. A declaration with any leg unanswered is no declaration at all: the
 * tool reads as unstamped (13.5).
 */
typedef enum msb_leg {
	MSB_LEG_UNANSWERED = 0,
	MSB_LEG_NONE = 1,
	MSB_LEG_VALUE = 2,
} msb_leg;

typedef struct msb_host_tool_decl {
	unsigned version;
	msb_leg source_leg;
	msb_integrity source; /* UNTRUSTED or TRUSTED when source_leg is VALUE */
	msb_leg sink_leg;
	const char *sink; /* opaque host vocabulary, when sink_leg is VALUE */
	msb_leg identity_leg;
	msb_identity identity; /* APP or USER when identity_leg is VALUE */
} msb_host_tool_decl;
#define MSB_HOST_TOOL_DECL_VERSION 1
#define MSB_HOST_TOOL_DECL_INIT                                                                    \
	{                                                                                          \
		MSB_HOST_TOOL_DECL_VERSION, MSB_LEG_UNANSWERED, MSB_INTEGRITY_UNTRUSTED,           \
			MSB_LEG_UNANSWERED, NULL, MSB_LEG_UNANSWERED, MSB_IDENTITY_APP             \
	}

/* true iff every leg is answered (a complete stamp). */
MSB_EXTERN bool msb_host_tool_decl_complete(const msb_host_tool_decl *d);

/*
 * Parse a declaration from JSON: {"source": "trusted"|"untrusted"|null,
 * "sink": "<string>"|null, "identity": "app"|"user"|null}. A key left out is
 * unanswered; null is NONE. source "semi" -> MSB_E_VALUE; sink 3 -> MSB_E_TYPE
 * ("sink must be a string ..."); unknown keys refused. Strings inside *out
 * point into *storage, which the caller frees with free().
 */
MSB_EXTERN int msb_host_tool_decl_from_json(const char *json, msb_host_tool_decl *out,
					    char **storage, msb_error **err);

/*
 * A tool body. `arguments_json` is the guest's arguments, already validated
 * against the tool's parameter schema (a JSON object, never NULL).
 * `user_identity` is the minted authority for a USER tool, NULL otherwise.
 * On success set *result_json to malloc()ed JSON text (any JSON value) and
 * return 0. Return a negative code (and set *err) on failure: the guest gets
 * "host tool 'x' failed - the reason is in the host's log", the log gets the
 * message. MSB_E_CANCELLED propagates to the caller of the door (13.27).
 */
typedef int (*msb_host_tool_fn)(void *userdata, const char *arguments_json,
				const char *user_identity, char **result_json, msb_error **err);

/*
 * One tool. `parameters` is its JSON parameter schema (a strict subset of
 * JSON Schema: type, properties, required, additionalProperties, enum, items,
 * minLength, maxLength, minItems, maxItems, minimum, maximum, plus the
 * annotations title and description); any other keyword is refused at
 * registration. NULL = the tool takes no arguments. `decl` NULL = unstamped.
 * The registry copies everything at registration (13.7).
 */
typedef struct msb_host_tool {
	unsigned version;
	const char *name;
	const char *description; /* may be NULL */
	const char *parameters;	 /* JSON schema text, may be NULL */
	const msb_host_tool_decl *decl;
	msb_host_tool_fn fn;
	void *userdata;
} msb_host_tool;
#define MSB_HOST_TOOL_VERSION 1
#define MSB_HOST_TOOL_INIT                                                                         \
	{                                                                                          \
		MSB_HOST_TOOL_VERSION, NULL, NULL, NULL, NULL, NULL, NULL                          \
	}

/*
 * Mint the user's authority for one run (13.16). Return 0 and a malloc()ed
 * token in *identity, or a negative code (the call is refused, the reason
 * logged). Called at most once per run, the first time a USER tool is about
 * to run, after every deterministic gate has passed.
 */
typedef int (*msb_mint_user_identity_fn)(void *userdata, const msb_key *key, char **identity,
					 msb_error **err);

typedef struct msb_host_tool_registry_options {
	unsigned version;
	bool require_declared;
	msb_identity_set allowed_identities;	      /* default APP only */
	uint64_t max_host_tool_calls_per_run;	      /* >= 1, default 16 */
	msb_transfer_limits response_limits;	      /* every leg >= 1, default TransferLimits() */
	const msb_observer *observer;		      /* HostToolCalled; copied; may be NULL */
	msb_mint_user_identity_fn mint_user_identity; /* NULL: USER tools are refused */
	void *mint_userdata;
	msb_log_fn log; /* NULL = silent */
	void *log_userdata;
} msb_host_tool_registry_options;
#define MSB_HOST_TOOL_REGISTRY_OPTIONS_VERSION 1
#define MSB_HOST_TOOL_REGISTRY_OPTIONS_INIT                                                        \
	{                                                                                          \
		MSB_HOST_TOOL_REGISTRY_OPTIONS_VERSION, false, MSB_IDENTITY_APP,                   \
			MSB_DEFAULT_MAX_HOST_TOOL_CALLS_PER_RUN, MSB_DEFAULT_TRANSFER_LIMITS_INIT, \
			NULL, NULL, NULL, NULL, NULL                                               \
	}

typedef struct msb_host_tool_registry msb_host_tool_registry;

/* A new, empty registry (13.1). Validates the options (13.9): a cap of 0 or
 * a response-limits leg of 0 -> MSB_E_VALUE; unknown identity bits -> MSB_E_VALUE.
 * opts NULL = defaults. */
MSB_EXTERN int msb_host_tool_registry_new(const msb_host_tool_registry_options *opts,
					  msb_host_tool_registry **out, msb_error **err);
MSB_EXTERN msb_host_tool_registry *msb_host_tool_registry_ref(msb_host_tool_registry *r);
MSB_EXTERN void msb_host_tool_registry_unref(msb_host_tool_registry *r);

/*
 * Register one tool (13.6-13.10). Refusals (the registry unchanged):
 * sealed -> MSB_E_VALUE "sealed"; fn NULL -> MSB_E_TYPE; name NULL ->
 * MSB_E_TYPE; empty -> MSB_E_VALUE; duplicate -> MSB_E_VALUE (never replaced);
 * unstamped under require_declared -> MSB_E_HOST_TOOL_NOT_DECLARED; an
 * invalid declaration -> MSB_E_VALUE; an effective identity (declared, or APP
 * when unstamped) outside allowed_identities -> MSB_E_HOST_TOOL_IDENTITY_NOT_ALLOWED;
 * a parameter schema that is not valid JSON or uses a keyword the validator
 * does not implement -> MSB_E_VALUE naming it.
 * The first successful registration in the process logs a one-time notice
 * (MafSandboxHostToolsWarning) through the log callback (13.2); the notice
 * never fails a registration.
 */
MSB_EXTERN int msb_host_tool_registry_register(msb_host_tool_registry *r, const msb_host_tool *tool,
					       msb_error **err);

/* Suppress the one-time registration notice for the whole process. */
MSB_EXTERN void msb_host_tools_suppress_notice(void);

/* The registered names, sorted; NULL-terminated, free with msb_strv_free.
 * Never NULL on success (an empty registry yields an empty vector); NULL on
 * allocation failure. */
MSB_EXTERN char **msb_host_tool_registry_names(const msb_host_tool_registry *r);
MSB_EXTERN bool msb_host_tool_registry_sealed(const msb_host_tool_registry *r);

/*
 * The aggregate (13.11-13.14): the policy a host derives from the registry.
 * Taking it seals the registry. result_integrity is the weakest declared
 * source (unstamped counts as UNTRUSTED), has_result_integrity false when no
 * tool declares a source; outbound_caps the declared sinks, unfolded;
 * identities the declared identities (unstamped -> APP, none -> nothing);
 * requires_approval = USER in identities; has_undeclared flags unstamped
 * tools. Put `identities` into the spec (msb_spec_builder_set_identities) so
 * the router's denied_identities sees exactly what is callable (13.15).
 */
typedef struct msb_host_tool_aggregate {
	bool has_result_integrity;
	msb_integrity result_integrity;
	char **outbound_caps; /* sorted, NULL-terminated */
	msb_identity_set identities;
	bool requires_approval;
	bool has_undeclared;
	char **names; /* sorted, NULL-terminated */
} msb_host_tool_aggregate;
MSB_EXTERN int msb_host_tool_registry_aggregate(msb_host_tool_registry *r,
						msb_host_tool_aggregate *out, msb_error **err);
MSB_EXTERN void msb_host_tool_aggregate_clear(msb_host_tool_aggregate *a);

/*
 * A call's result: exactly one of value_json (the serialised response, what
 * crosses) and refusal (the sanitised sentence the guest may see) (13.26).
 */
typedef struct msb_host_tool_result {
	char *value_json;
	char *refusal;
} msb_host_tool_result;
/* Build one from copies; both or neither -> MSB_E_VALUE. */
MSB_EXTERN int msb_host_tool_result_make(const char *value_json, const char *refusal,
					 msb_host_tool_result *out, msb_error **err);
MSB_EXTERN void msb_host_tool_result_clear(msb_host_tool_result *res);

/*
 * One run of a guest program (13.17): fresh counters for calls, delivered
 * responses and delivered bytes. `key` and `call` (both may be NULL) are
 * copied and stamped on every HostToolCalled event.
 */
typedef struct msb_host_tool_run msb_host_tool_run;
MSB_EXTERN int msb_host_tool_run_new(msb_host_tool_registry *r, const msb_key *key,
				     const char *call, msb_host_tool_run **out, msb_error **err);
MSB_EXTERN void msb_host_tool_run_free(msb_host_tool_run *run);
MSB_EXTERN uint64_t msb_host_tool_run_calls(const msb_host_tool_run *run);
MSB_EXTERN uint64_t msb_host_tool_run_delivered(const msb_host_tool_run *run);
MSB_EXTERN uint64_t msb_host_tool_run_delivered_bytes(const msb_host_tool_run *run);

/*
 * The one door (13.18-13.29). `name` is the guest's tool name; `arguments_json`
 * its arguments as JSON text (NULL = no arguments). `framing_bytes` is what the
 * transport wraps around value_json before it crosses; it is charged to the
 * response caps (14.15). A negative framing_bytes is a transport's programming
 * error -> MSB_E_VALUE, not observed as a call (13.19).
 * Returns 0 with *out holding a value or a refusal - a refusal is not an
 * error. Returns a negative code only for a programming error, allocation
 * failure, or MSB_E_CANCELLED from the tool body (the delivered slot is
 * returned, the call stays counted).
 */
MSB_EXTERN int msb_host_tool_run_call(msb_host_tool_run *run, const char *name,
				      const char *arguments_json, int64_t framing_bytes,
				      msb_host_tool_result *out, msb_error **err);

/*
 * The same door for a transport holding a raw request: `request_json` is
 * {"name": <any JSON>, "arguments": <any JSON>} as the guest sent it; a name
 * that is not a string, or arguments that are not an object, are refused
 * with a sentence, and text that is not valid JSON gets "this host-tool
 * request is not valid JSON" (14.16). Extra keys ("id") are ignored.
 */
MSB_EXTERN int msb_host_tool_run_call_request(msb_host_tool_run *run, const char *request_json,
					      size_t len, int64_t framing_bytes,
					      msb_host_tool_result *out, msb_error **err);

MSB_END_DECLS

#endif
