/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The JSON-RPC 2.0 dispatcher behind `msb serve` and `msb mcp` (docs/serve.md,
 * docs/mcp.md). A programs-layer component: it uses the public API only.
 *
 * One message per line on stdin, one per line on stdout. A small pool of
 * worker threads serves requests, so responses may come out of order; every
 * line written to stdout is written whole under one lock. A method is one
 * entry of a table: a name, the parameter names it accepts, and a handler.
 */
#ifndef MSB_CLI_RPC_H
#define MSB_CLI_RPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "util/base64.h"
#include <msb/msb.h>

/* The standard JSON-RPC 2.0 error codes. */
#define RPC_PARSE_ERROR (-32700)
#define RPC_INVALID_REQUEST (-32600)
#define RPC_METHOD_NOT_FOUND (-32601)
#define RPC_INVALID_PARAMS (-32602)
#define RPC_INTERNAL_ERROR (-32603)
/* A library error (a typed msb_error): data carries its seed name and payload. */
#define RPC_LIBRARY_ERROR (-32000)

/* The default limit on one message (a line), in bytes. */
#define RPC_MAX_MESSAGE_DEFAULT (64u << 20)
#define RPC_WORKERS_DEFAULT 8

typedef struct rpc_server rpc_server;
typedef struct rpc_call rpc_call;     /* the request being served (invoke.h) */
typedef struct rpc_param rpc_param;   /* (invoke.h) */
typedef struct rpc_result rpc_result; /* (invoke.h) */

/*
 * A handler: the library call, with the method's frame (invoke.h) holding
 * its parameters, read and checked, and taking its results. 0, or a
 * negative code with *err set - RPC_INVALID_PARAMS for a parameter the
 * method cannot take (rpc_bad_params), RPC_INVALID_REQUEST for a request
 * the method will not serve in the session's state, any MSB_E_* code for a
 * library refusal. Runs on a worker thread; several handlers run at once.
 */
typedef int (*rpc_method_fn)(rpc_call *c, void *frame, msb_error **err);

/* Method flags. */
#define RPC_M_OPEN 1u	     /* parameters beyond the declared ones are accepted (MCP's _meta) */
#define RPC_M_NULL_RESULT 2u /* the result is null, not an object */

typedef struct rpc_method {
	const char *name;
	size_t frame_size;	   /* sizeof the handler's frame */
	rpc_method_fn fn;	   /* NULL: the parameters' effects only (RPC_CLOSE) */
	const rpc_param *params;   /* terminated by a name NULL */
	const rpc_result *results; /* the result's members; NULL: {} */
	unsigned flags;
} rpc_method;

/* Where response lines go instead of stdout (in-process use): one whole
 * JSON text per call, without its newline. */
typedef void (*rpc_output_fn)(void *ud, const char *line, size_t len);

typedef struct rpc_server_options {
	const rpc_method *methods;   /* terminated by an entry with name NULL */
	size_t max_message;	     /* 0 = RPC_MAX_MESSAGE_DEFAULT */
	unsigned workers;	     /* 0 = RPC_WORKERS_DEFAULT */
	bool events;		     /* observer events as "event" notifications */
	int events_fd;		     /* >= 0: observer events as JSON lines to this fd instead */
	void *userdata;		     /* the front end's state (rpc_server_userdata) */
	struct rpc_handles *handles; /* the handle table of methods that take handles */
	rpc_output_fn output;	     /* NULL: stdout */
	void *output_ud;
	/* Called once after stdin closed and every request finished: release
	 * what the front end holds. */
	void (*at_eof)(rpc_server *srv);
	/* pool_size for each `ns` backend of a router the front end makes
	 * whose JSON names none (docs/pool.md); 0 = no pool. */
	unsigned pool_default;
} rpc_server_options;

/* Serve stdin/stdout until EOF. Returns the process exit status. */
int rpc_serve(const rpc_server_options *opts);

/*
 * The same dispatcher in-process, without threads or stdin (tests and fuzz
 * targets): rpc_server_serve_line() serves one line as a worker would and
 * writes its responses through opts->output before returning. A request to
 * the client (rpc_client_request) fails at once: there is no reader.
 * rpc_server_free() calls at_eof first. Events are not supported here.
 */
rpc_server *rpc_server_new(const rpc_server_options *opts);
void rpc_server_serve_line(rpc_server *srv, const char *line, size_t len);
void rpc_server_free(rpc_server *srv);

void *rpc_server_userdata(rpc_server *srv);
/* The observer every router made by the front end should carry (may be NULL). */
const msb_observer *rpc_server_observer(rpc_server *srv);
/* The front end's warm pool default (rpc_server_options.pool_default). */
unsigned rpc_server_pool_default(rpc_server *srv);
/* `pool_size` n written into each `ns` backend object of the router object
 * that names none (n 0: nothing written). 0, or MSB_E_NOMEM; anything
 * that is not a backend object is left for the library to refuse. */
int rpc_router_pool_default(json_t *router, unsigned n);
/* The log callback for routers: warnings and errors to stderr. */
void rpc_log(void *ud, msb_log_level level, const char *component, const char *message);

/*
 * Send the client a JSON-RPC request (server to client; `params` is taken)
 * and wait at most `timeout` seconds for its response. 0 with *result (a new
 * reference) for a result; for an error response MSB_E_RUNTIME quoting the
 * client's message; MSB_E_TIMEOUT when no answer came in time (a late answer
 * is dropped); MSB_E_RUNTIME when stdin closed first. The reader routes the
 * response, so this may be called from a worker.
 */
int rpc_client_request(rpc_server *srv, const char *method, json_t *params, double timeout,
		       json_t **result, msb_error **err);

/* ---- parameters ---------------------------------------------------------------------------- */

/* Set *err and return RPC_INVALID_PARAMS. */
int rpc_bad_params(msb_error **err, const char *fmt, ...) MSB_PRINTF(2, 3);

/* Getters: absent (or null) leaves *out alone; required ones refuse absence. */
int rpc_str(json_t *params, const char *key, bool required, const char **out, msb_error **err);
int rpc_bool(json_t *params, const char *key, bool *out, msb_error **err);
int rpc_u64(json_t *params, const char *key, bool required, uint64_t *out, msb_error **err);
int rpc_double(json_t *params, const char *key, bool required, double *out, msb_error **err);
/* An object or array value kept as JSON text (malloc()ed), for the library's JSON readers. */
int rpc_json_text(json_t *params, const char *key, bool required, char **out, size_t *len,
		  msb_error **err);
/* A NULL-terminated array of strings (the array itself malloc()ed; strings borrowed). */
int rpc_strv(json_t *params, const char *key, bool required, const char ***out, msb_error **err);
/* base64 bytes (malloc()ed, *len). */
int rpc_base64(json_t *params, const char *key, bool required, uint8_t **out, size_t *len,
	       msb_error **err);

/* base64 comes from util/base64.h (strict decoding, no whitespace on the wire). */

/* A JSON string for text the library or a guest produced: invalid UTF-8 is
 * replaced (U+FFFD), never dropped; NULL becomes JSON null. Never NULL
 * unless out of memory. */
json_t *rpc_text(const char *s);

/* ---- errors as JSON ------------------------------------------------------------------------- */

/* {"name", "message", "code", "categories", "payload"?} for a library error. */
json_t *rpc_error_data(const msb_error *err);

/* {stdout, stderr (base64), exit_code, term_signal, truncated, oom_killed,
 * pids_exhausted, no_space} (invoke.c) */
json_t *rpc_exec_result_json(const msb_exec_result *r);
/* An array of strings (text; NULL v is []). */
json_t *rpc_strv_json(char *const *v);

/* ---- collect_outputs (outputs.c) ------------------------------------------------------------ */

/* v (the parameter `name`), a list of declared outputs in the spec's JSON,
 * read by the spec's reader: *outs (free()) points into *holder
 * (msb_spec_unref) and both stay NULL when v is absent or null.
 * RPC_INVALID_PARAMS for a list the reader refuses. */
int rpc_call_time_outputs_of(json_t *v, const char *name, msb_spec **holder,
			     const msb_declared_output **outs, size_t *n, msb_error **err);
/* [{name, display, handle, media_type, size_bytes, sha256}] */
json_t *rpc_landed_json(const msb_landed_artifact *v, size_t n);

#endif
