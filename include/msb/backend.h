/* SPDX-License-Identifier: Apache-2.0 */
/*
 * msb/backend.h - the backend-author tier (checklist section 4).
 *
 * A backend is a provider that declares itself once - a name, an isolation
 * rung, one msb_declarations value - and hands out sandboxes get-or-create per
 * (key, kind). It enforces what it is told and decides no policy: the router
 * does that before a backend is ever called.
 *
 * Every vtable slot is mandatory (a NULL slot is refused by msb_backend_new
 * and msb_sandbox_new). An operation a backend cannot serve returns
 * MSB_E_NOT_IMPLEMENTED with a message naming the backend and the reason.
 */
#ifndef MSB_BACKEND_H
#define MSB_BACKEND_H

#include <msb/common.h>
#include <msb/error.h>
#include <msb/key.h>
#include <msb/sandbox.h>
#include <msb/spec.h>
#include <msb/vocab.h>

MSB_BEGIN_DECLS

/* ---- BackendDeclarations (4.2-4.9, DESIGN 9.2). ---------------------------
 *
 * One value. Each field's default is its own silence rule:
 *   capabilities       DEFAULT_CAPABILITIES (a functionality claim)
 *   limits             DEFAULT_SANDBOX_LIMITS (a safety claim)
 *   egress_modes       empty: enforces nothing, every spec refused
 *   os_families        empty: refuses a spec that names a family
 *   isolation_scopes   {conversation}
 *   egress_method_tokens  empty: serves no method-scoped rule (23.3);
 *                      egress_method_tokens_all = true serves every token
 *   observes_egress    false
 */
typedef struct msb_declarations {
	unsigned version;
	msb_capset capabilities;
	msb_sandbox_limits limits;
	msb_egress_set egress_modes;
	msb_os_family_set os_families;
	msb_scope_set isolation_scopes;
	const char *const *egress_method_tokens; /* may be NULL when n == 0 */
	size_t n_egress_method_tokens;
	bool egress_method_tokens_all;
	bool observes_egress;
} msb_declarations;
#define MSB_DECLARATIONS_VERSION 1
#define MSB_DECLARATIONS_INIT                                                                      \
	{                                                                                          \
		MSB_DECLARATIONS_VERSION, MSB_DEFAULT_CAPABILITIES,                                \
			MSB_DEFAULT_SANDBOX_LIMITS_INIT, 0, 0, MSB_SCOPE_CONVERSATION, NULL, 0,    \
			false, false                                                               \
	}
MSB_EXTERN extern const msb_declarations MSB_DEFAULT_BACKEND_DECLARATIONS;

/* true iff `token` is enforceable under these declarations. */
MSB_EXTERN bool msb_declarations_has_method_token(const msb_declarations *d, const char *token);

/*
 * Declarations from JSON (strict). Keys: capabilities, limits {files_in,
 * files_out}, egress_modes, os_families, isolation_scopes,
 * egress_method_tokens (array, or the string "*" for every token),
 * observes_egress. A set given as a string is refused naming the field
 * (4.11); limits given as one TransferLimits is refused with
 * MSB_E_TRANSFER_LIMITS_NOT_PERMITTED (4.12). The result is owned by an
 * internal arena freed with msb_declarations_free().
 */
MSB_EXTERN int msb_declarations_from_json(const char *json, size_t len, msb_declarations **out,
					  msb_error **err);
MSB_EXTERN int msb_declarations_to_json(const msb_declarations *d, char **out, msb_error **err);
MSB_EXTERN void msb_declarations_free(msb_declarations *d);

/* ---- Disposal results (4.16-4.19). ------------------------------------ */

typedef struct msb_disposal_failure {
	msb_disposal_code code;
	char *detail; /* log only; never parsed */
} msb_disposal_failure;

MSB_EXTERN int msb_disposal_failure_new(msb_disposal_code code, const char *detail,
					msb_disposal_failure **out, msb_error **err);
MSB_EXTERN void msb_disposal_failure_free(msb_disposal_failure *f);
/* One failure with the most actionable code and every detail kept ("; "-joined). */
MSB_EXTERN int msb_fold_disposal_failures(const msb_disposal_failure *const *failures, size_t n,
					  msb_disposal_failure **out, msb_error **err);

/* ScopePurge: read .disposed; there is no truthiness in C (4.19, 23.19). */
typedef struct msb_scope_purge {
	uint64_t disposed;
	uint64_t undisposed;
} msb_scope_purge;

/* ---- The egress reporter (4.22). ----------------------------------------- */

typedef struct msb_egress_record msb_egress_record; /* see msb/observer.h */
typedef struct msb_egress_reporter {
	void (*report)(void *userdata, const msb_key *key, const msb_egress_record *record);
	void *userdata;
} msb_egress_reporter;

/* ---- Sandboxes made by a backend. ----------------------------------------- */

typedef struct msb_sandbox_ops {
	unsigned version;
	int (*exec)(void *impl, const msb_exec_request *req, msb_exec_result *out, msb_error **err);
	int (*exec_bounded)(void *impl, const msb_exec_request *req, msb_exec_result *out,
			    msb_error **err);
	int (*run_code)(void *impl, const char *code, double timeout, msb_cancel *cancel,
			msb_exec_result *out, msb_error **err);
	int (*write_file)(void *impl, const char *path, const uint8_t *data, size_t len,
			  const char *working_directory, msb_error **err);
	int (*stat_file)(void *impl, const char *path, const char *working_directory, bool *present,
			 msb_entry *out, msb_error **err);
	int (*read_file)(void *impl, const char *path, const char *working_directory,
			 uint64_t max_bytes, uint8_t **data, size_t *len, msb_error **err);
	int (*list_dir)(void *impl, const char *path, const char *working_directory,
			msb_entry **entries, size_t *n, msb_error **err);
	int (*remove)(void *impl, const char *path, const char *working_directory, bool recursive,
		      msb_error **err);
	int (*reclaim)(void *impl, const char *directory, const char *working_directory,
		       double timeout, msb_error **err);
	int (*reset)(void *impl, double timeout, msb_error **err);
	int (*fingerprint)(void *impl, bool *supported, msb_fingerprint *out, msb_error **err);
	/* Stable for the life of the instance. */
	const char *(*instance_id)(void *impl);
	/* Drop the handle's reference to impl. */
	void (*release)(void *impl);
	/* version 2: what exec and exec_bounded serve of msb_exec_io
	 * (MSB_EXEC_CAN_*, msb/sandbox.h). The library refuses an exec asking for more, with
	 * MSB_E_NOT_IMPLEMENTED naming the backend, before the backend sees it;
	 * a version 1 vtable serves none of it. */
	unsigned exec_io;
} msb_sandbox_ops;
#define MSB_SANDBOX_OPS_VERSION 2

/* Wrap a backend's sandbox. Takes ownership of impl (released via ops->release
 * on failure too, except when ops or ops->release is NULL). Refuses with
 * MSB_E_VALUE a NULL slot (the message names it), a version other than 1 or
 * MSB_SANDBOX_OPS_VERSION, or a NULL backend_name. `backend_name` is copied;
 * *ops is copied too, and the address `ops` is kept as the handle's identity
 * for msb_sandbox_impl(): pass the address of a static vtable. */
MSB_EXTERN int msb_sandbox_new(const msb_sandbox_ops *ops, void *impl, const char *backend_name,
			       msb_sandbox **out, msb_error **err);

/*
 * A backend's way back to its own object behind a handle: `impl` as given to
 * msb_sandbox_new when the handle was made with this very `ops` address, else
 * NULL (another backend's handle, a wrapper's, or sb NULL). Only the backend
 * that owns the vtable can name it, so no one else can reach its object.
 * Borrowed: valid while the handle lives. Thread-safe.
 */
MSB_EXTERN void *msb_sandbox_impl(const msb_sandbox *sb, const msb_sandbox_ops *ops);

/* ---- Backends. ------------------------------------------------------------ */

typedef struct msb_backend msb_backend;

typedef struct msb_backend_ops {
	unsigned version;
	/* Get-or-create the sandbox for (key, kind of spec). Serialised per
	 * (key, kind) by the backend so that racing acquires give one (4.15). */
	int (*acquire)(void *impl, const msb_key *key, const msb_spec *spec, msb_sandbox **out,
		       msb_error **err);
	/* Best effort. 0 with *failure NULL: nothing reported (not proof);
	 * 0 with *failure set: the delete is known not to have landed;
	 * < 0: the backend "raised" - the router treats it as an unknown failure. */
	int (*dispose)(void *impl, const msb_key *key, const char *kind, const char *instance_id,
		       msb_disposal_failure **failure, msb_error **err);
	/* Select from the provider's durable record, never from memory (4.18). */
	int (*dispose_scope)(void *impl, const char *scope, const char *thread_id,
			     msb_scope_purge *out, msb_error **err);
	/* The router hands each backend its reporter once, at registration. */
	void (*set_egress_reporter)(void *impl, const msb_egress_reporter *reporter);
	void (*free)(void *impl);
} msb_backend_ops;
#define MSB_BACKEND_OPS_VERSION 1

typedef struct msb_backend_info {
	unsigned version;
	const char *name;      /* short id, e.g. "ns" */
	const char *isolation; /* a rung's spelling; judged by the router (1.4, 4.13) */
	const msb_declarations *declarations; /* NULL = DEFAULT_BACKEND_DECLARATIONS (4.9) */
} msb_backend_info;
#define MSB_BACKEND_INFO_VERSION 1

/*
 * Make a backend. Copies info (name, isolation string, a deep copy of the
 * declarations). Takes ownership of impl: ops->free(impl) runs when the last
 * reference goes, and on failure here. Refuses a NULL slot or NULL name with
 * MSB_E_VALUE, a NULL isolation with MSB_E_BACKEND_NOT_PERMITTED (4.1).
 */
MSB_EXTERN int msb_backend_new(const msb_backend_ops *ops, const msb_backend_info *info, void *impl,
			       msb_backend **out, msb_error **err);
/* As msb_sandbox_impl, for a backend: `impl` when `b` was made with this very
 * `ops` address, else NULL. Borrowed while b lives. Thread-safe. */
MSB_EXTERN void *msb_backend_impl(const msb_backend *b, const msb_backend_ops *ops);
MSB_EXTERN msb_backend *msb_backend_ref(msb_backend *b);
MSB_EXTERN void msb_backend_unref(msb_backend *b);
MSB_EXTERN const char *msb_backend_name(const msb_backend *b);
/* The declared spelling, unparsed. */
MSB_EXTERN const char *msb_backend_isolation(const msb_backend *b);
MSB_EXTERN const msb_declarations *msb_backend_declarations(const msb_backend *b);
/* Direct calls, bypassing the router (tests, conformance). */
MSB_EXTERN int msb_backend_acquire(msb_backend *b, const msb_key *key, const msb_spec *spec,
				   msb_sandbox **out, msb_error **err);
MSB_EXTERN int msb_backend_dispose(msb_backend *b, const msb_key *key, const char *kind,
				   const char *instance_id, msb_disposal_failure **failure,
				   msb_error **err);
MSB_EXTERN int msb_backend_dispose_scope(msb_backend *b, const char *scope, const char *thread_id,
					 msb_scope_purge *out, msb_error **err);

/*
 * A backend that only declares (type "declared" in router JSON): it answers
 * every policy question from its declarations and refuses acquire with
 * MSB_E_NOT_IMPLEMENTED. For wiring tests of a third-party backend whose
 * declarations are known (msb check).
 */
MSB_EXTERN int msb_declared_backend_new(const msb_backend_info *info, msb_backend **out,
					msb_error **err);

/* ==== Backend types (issue 14; docs/internals/backends.md) =====================================
 *
 * A backend type is how a backend is made from its JSON description (docs/policy.md, "Backend
 * JSON"): {"type": NAME, ...the type's own keys}. The library holds one table of the built-in
 * types; msb_backend_from_json and msb_router_from_json (msb/msb.h) look "type" up in it, so
 * every front end (msb check, conformance, the sandbox verbs, serve, mcp) builds every backend
 * the same way. Adding a backend is one folder under src/backends/ and one row of the table.
 */

/* One host facility a type's doctor tried, and what it found (msb doctor). */
typedef struct msb_probe {
	char *name; /* "userns.root", "overlayfs.userns", ...; for a verdict, the type's name */
	bool ok;
	char *reason; /* one line */
} msb_probe;

/*
 * What a type's doctor reports about this host: the verdict (can this host
 * serve the type, and in one line what it offers or why not) and the
 * facilities it tried on the way, in the order tried. Every string and the
 * details array are malloc()ed; msb_backend_probe_clear() frees them (with
 * free()) and zeroes the struct.
 */
typedef struct msb_backend_probe {
	bool ok;
	char *reason;
	msb_probe *details; /* may be NULL when n_details == 0 */
	size_t n_details;
} msb_backend_probe;
MSB_EXTERN void msb_backend_probe_clear(msb_backend_probe *p);

/*
 * What the loader hands a type's from_json. The library has already parsed
 * the document, found "type", and refused every key the type does not list.
 * When the type lists "declarations", the library has also refused a legacy
 * top-level declaration key (4.10) and parsed "declarations" strictly (4.11,
 * 4.12); `declarations` is that value, or NULL when the key is absent - or
 * when it is unusable and the refusal waits for the router to resolve this
 * backend (5.16: only inside msb_router_from_json, which then attaches the
 * refusal to the backend from_json returns). Everything here is borrowed for
 * the call; from_json copies what it keeps.
 */
typedef struct msb_backend_json {
	unsigned version;
	const char *json; /* the backend's whole object, NUL-terminated */
	size_t len;
	const char *where; /* how messages name the object: "backend", "router.backends[2]" */
	const msb_declarations *declarations;
} msb_backend_json;
#define MSB_BACKEND_JSON_VERSION 1

typedef struct msb_backend_type {
	unsigned version;
	const char *name;    /* the "type" of backend JSON: a short id ("ns") */
	const char *summary; /* one line: what the type is */
	/* Every key the type's JSON may carry besides "type", NULL-terminated.
	 * Unknown keys are refused as "WHERE: unknown key `K`" before from_json. */
	const char *const *keys;
	/* Make the backend. Refusals name in->where; a value of the wrong JSON
	 * type is MSB_E_TYPE, a wrong value MSB_E_VALUE. *out only on success. */
	int (*from_json)(const msb_backend_json *in, msb_backend **out, msb_error **err);
	/* Probe this host for the type, by trying rather than by version
	 * numbers. Fills a zeroed *out; the caller clears it (on failure too).
	 * Fails only when it cannot report (MSB_E_NOMEM); a host that cannot
	 * serve the type is out->ok == false. Nothing it starts outlives it. */
	int (*doctor)(msb_backend_probe *out, msb_error **err);
} msb_backend_type;
#define MSB_BACKEND_TYPE_VERSION 1
#define MSB_BACKEND_TYPE_INIT                                                                      \
	{                                                                                          \
		MSB_BACKEND_TYPE_VERSION, NULL, NULL, NULL, NULL, NULL                             \
	}

/* The built-in types, in table order (*n set; n may be NULL); the array is
 * NULL-terminated and static. Thread-safe. */
MSB_EXTERN const msb_backend_type *const *msb_backend_types(size_t *n);
/* The built-in type named `name`, or NULL. Thread-safe. */
MSB_EXTERN const msb_backend_type *msb_backend_type_find(const char *name);

/*
 * msb doctor: every built-in type's doctor, in table order. `backends` holds
 * one verdict per type (name = the type's name) and nothing else; `probes`
 * the facilities they tried, in the same order. Forks short-lived children
 * (the ns probes); nothing outlives the call.
 */
typedef struct msb_doctor_report {
	msb_probe *probes;
	size_t n_probes;
	msb_probe *backends;
	size_t n_backends;
} msb_doctor_report;

MSB_EXTERN int msb_doctor(msb_doctor_report **out, msb_error **err);
MSB_EXTERN void msb_doctor_report_free(msb_doctor_report *r);

MSB_END_DECLS

#endif
