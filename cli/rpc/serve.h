/* SPDX-License-Identifier: Apache-2.0 */
/* `msb serve`: its state and its methods (methods.c). */
#ifndef MSB_CLI_RPC_SERVE_H
#define MSB_CLI_RPC_SERVE_H

#include "handles.h"
#include "rpc.h"

typedef struct serve_state {
	rpc_handles handles;
} serve_state;

/* serve_methods' options for rpc_serve (the caller sets the rest): the
 * methods, the handle table and the shutdown rule. */
void serve_options(serve_state *st, rpc_server_options *o);

extern const rpc_method serve_methods[];

/* The shutdown rule (docs/serve.md): release every handle the client left
 * open, disposing nothing. */
void serve_release_all(rpc_server *srv);

#endif
