/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The frames of `msb serve`'s methods (invoke.h): one struct per method,
 * a field per parameter and per result, named as on the wire. The table
 * that binds each method's name, parameters, results and handler is
 * serve_methods[] in methods.c; the handlers are in serve_router.c,
 * serve_sandbox.c, serve_session.c and hosttools.c.
 */
#ifndef MSB_CLI_RPC_METHODS_H
#define MSB_CLI_RPC_METHODS_H

#include "invoke.h"
#include "serve.h"

/* ---- msb.*, router.* ------------------------------------------------------------------------ */

typedef struct {
	const char *version, *protocol;
} f_version;

typedef struct {
	rpc_doc config;
	msb_spec *spec; /* the workload `route` explains; NULL: the default spec */
	rpc_new router;
	bool enabled;
	json_t *backends;
	char *route; /* msb_route_explanation_to_json */
} f_router_new;

typedef struct {
	rpc_handle *router;
	msb_spec *spec;
	const char *backend, *isolation, *isolation_scope; /* resolve */
	const char *cleanup;				   /* effective_cleanup */
} f_router_spec;

typedef struct {
	rpc_handle *router;
	msb_spec *spec;
	rpc_key key;
	const char *call;
	rpc_new sandbox;
} f_acquire;

typedef struct {
	rpc_handle *router;
	rpc_key key;
	bool all_disposed;
	bool unclean;
	size_t targets;
} f_router_key;

typedef struct {
	rpc_handle *router;
	const char *scope, *thread_id;
	msb_scope_purge purge;
} f_scope;

typedef struct {
	rpc_handle *router;
	rpc_key key;
	const char *kind, *instance_id, *call;
	double timeout;
	bool all_landed;
} f_dispose_kind;

typedef struct {
	rpc_handle *router;
	char *options;
} f_router_options;

int serve_version(rpc_call *c, void *frame, msb_error **err);
int serve_router_new(rpc_call *c, void *frame, msb_error **err);
int serve_router_ensure_can_serve(rpc_call *c, void *frame, msb_error **err);
int serve_router_resolve(rpc_call *c, void *frame, msb_error **err);
int serve_router_effective_cleanup(rpc_call *c, void *frame, msb_error **err);
int serve_router_acquire(rpc_call *c, void *frame, msb_error **err);
int serve_router_dispose(rpc_call *c, void *frame, msb_error **err);
int serve_router_dispose_scope(rpc_call *c, void *frame, msb_error **err);
int serve_router_dispose_kind(rpc_call *c, void *frame, msb_error **err);
int serve_router_dispose_unclean(rpc_call *c, void *frame, msb_error **err);
int serve_router_key_unclean(rpc_call *c, void *frame, msb_error **err);
int serve_router_purge_scoped_thread(rpc_call *c, void *frame, msb_error **err);
int serve_router_options(rpc_call *c, void *frame, msb_error **err);

/* ---- sandbox.* ------------------------------------------------------------------------------ */

typedef struct {
	rpc_handle *sandbox;
} f_sandbox;

typedef struct {
	rpc_handle *sandbox;
	const char **argv;
	char **env; /* NAME=VALUE, from an array of them or an object */
	const char *shell, *working_directory;
	rpc_bytes in;
	double timeout;
	uint64_t max_output_bytes;
	bool tty; /* run on a terminal of rows x cols */
	uint64_t rows, cols;
	msb_exec_result res;
} f_exec;

typedef struct {
	rpc_handle *sandbox;
	const char *code;
	double timeout;
	msb_exec_result res;
} f_run_code;

/* The file plane: write_file, read_file, stat, list, remove. */
typedef struct {
	rpc_handle *sandbox;
	const char *path, *working_directory;
	rpc_bytes data; /* written, or read */
	uint64_t max_bytes;
	bool recursive;
	bool present;
	msb_entry entry;
	rpc_entries entries;
} f_file;

typedef struct {
	rpc_handle *sandbox;
	const char *directory, *working_directory;
	double timeout;
} f_reclaim;

typedef struct {
	rpc_handle *sandbox;
	bool supported;
	json_t *changed_paths, *running_programs;
} f_fingerprint;

typedef struct {
	rpc_handle *sandbox;
	msb_spec *spec;
	rpc_outputs outputs;
	const char *call_id, *working_directory;
	rpc_key key;
	msb_output_sink *sink;
	rpc_landed artifacts;
} f_collect;

int serve_sandbox_exec(rpc_call *c, void *frame, msb_error **err);
int serve_sandbox_exec_bounded(rpc_call *c, void *frame, msb_error **err);
int serve_sandbox_run_code(rpc_call *c, void *frame, msb_error **err);
int serve_sandbox_write_file(rpc_call *c, void *frame, msb_error **err);
int serve_sandbox_read_file(rpc_call *c, void *frame, msb_error **err);
int serve_sandbox_stat(rpc_call *c, void *frame, msb_error **err);
int serve_sandbox_list(rpc_call *c, void *frame, msb_error **err);
int serve_sandbox_remove(rpc_call *c, void *frame, msb_error **err);
int serve_sandbox_reclaim(rpc_call *c, void *frame, msb_error **err);
int serve_sandbox_reset(rpc_call *c, void *frame, msb_error **err);
int serve_sandbox_fingerprint(rpc_call *c, void *frame, msb_error **err);
int serve_sandbox_collect_outputs(rpc_call *c, void *frame, msb_error **err);

/* ---- session.*, call.* ---------------------------------------------------------------------- */

typedef struct {
	rpc_handle *router;
	msb_spec *spec;
	msb_output_sink *sink;
	const char *name, *agent_dir, *description;
	double reclaim_timeout, admission_timeout;
	rpc_new session;
	const char *session_name, *cleanup;
} f_attach;

typedef struct {
	rpc_handle *session;
	char *properties;
} f_session;

typedef struct {
	rpc_handle *session;
	const char *scope, *thread_id;
	rpc_new call;
	const char *call_id;
} f_begin_call;

typedef struct {
	rpc_handle *call;
	rpc_key key;
	msb_key *made_key;
	char *sentence;
	rpc_new sandbox;
	const char *path;
} f_call;

typedef struct {
	rpc_handle *call;
	const char *reason;
	rpc_handle *sandbox;
} f_report_unclean;

typedef struct {
	rpc_handle *call;
	msb_call_outcome outcome;
	json_t *items;
} f_call_end;

int serve_session_attach(rpc_call *c, void *frame, msb_error **err);
int serve_session_properties(rpc_call *c, void *frame, msb_error **err);
int serve_session_begin_call(rpc_call *c, void *frame, msb_error **err);
int serve_call_key(rpc_call *c, void *frame, msb_error **err);
int serve_call_acquire(rpc_call *c, void *frame, msb_error **err);
int serve_call_guest_call_path(rpc_call *c, void *frame, msb_error **err);
int serve_call_report_unclean(rpc_call *c, void *frame, msb_error **err);
int serve_call_end(rpc_call *c, void *frame, msb_error **err);

/* ---- host_tools.* (hosttools.c) ------------------------------------------------------------- */

typedef struct {
	bool require_declared;
	const char **allowed_identities;
	uint64_t max_calls_per_run;
	double call_timeout;
	msb_transfer_limits response_limits;
	rpc_new registry;
} f_tools_new;

typedef struct {
	rpc_handle *registry;
	const char *name, *description;
	rpc_doc parameters, declaration;
	char **names;
	msb_host_tool_aggregate agg;
	const char *result_integrity;
	json_t *identities;
} f_tools;

enum { TRANSPORT_EXEC, TRANSPORT_NATIVE }; /* transports[] in methods.c */

typedef struct {
	rpc_handle *sandbox, *registry;
	const char *program, *program_name, *run_directory, *interpreter, *call;
	int transport; /* TRANSPORT_EXEC, TRANSPORT_NATIVE */
	double timeout, poll_interval;
	rpc_key key;
	msb_exec_result res;
	json_t *where;
	uint64_t calls, delivered;
} f_run_tools;

int serve_host_tools_new(rpc_call *c, void *frame, msb_error **err);
int serve_host_tools_register(rpc_call *c, void *frame, msb_error **err);
int serve_host_tools_aggregate(rpc_call *c, void *frame, msb_error **err);
int serve_run_with_host_tools(rpc_call *c, void *frame, msb_error **err);
/* hosttools.c's helpers: one text file into the sandbox; the native
 * transport's run (native_posix.c, or native_win32.c's refusal). */
int rpc_write_text(msb_sandbox *sb, const char *path, const char *text, msb_error **err);
int rpc_run_native(msb_sandbox *sb, msb_host_tool_run *run, const char *dir,
		   const char *program_name, const char *program, const char *interpreter,
		   double timeout, msb_exec_result *res, json_t **where, msb_error **err);

#endif
