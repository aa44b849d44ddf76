/* SPDX-License-Identifier: Apache-2.0 */
/* `msb serve`: the state behind its methods (methods.c). */
#ifndef MSB_CLI_RPC_SERVE_H
#define MSB_CLI_RPC_SERVE_H

#include "handles.h"
#include "rpc.h"

typedef struct serve_state {
	rpc_handles handles;
} serve_state;

extern const rpc_method serve_methods[];

/* Shared by the method files. */
rpc_handles *serve_table(rpc_server *srv);
json_t *serve_exec_result_json(const msb_exec_result *r);
int serve_get_key(json_t *params, const char *name, bool required, msb_key *out, bool *present,
		  msb_error **err);

/* Host tools answered by the client (hosttools.c). */
int serve_host_tools_new(rpc_server *srv, json_t *params, json_t **result, msb_error **err);
int serve_host_tools_register(rpc_server *srv, json_t *params, json_t **result, msb_error **err);
int serve_host_tools_aggregate(rpc_server *srv, json_t *params, json_t **result, msb_error **err);
int serve_host_tools_free(rpc_server *srv, json_t *params, json_t **result, msb_error **err);
int serve_run_with_host_tools(rpc_server *srv, json_t *params, json_t **result, msb_error **err);

/* The shutdown rule (docs/serve.md): release every handle the client left
 * open, disposing nothing. */
void serve_release_all(rpc_server *srv);

#endif
