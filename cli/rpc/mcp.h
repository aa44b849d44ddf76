/* SPDX-License-Identifier: Apache-2.0 */
/* `msb mcp`: the state behind its methods (mcp.c). */
#ifndef MSB_CLI_RPC_MCP_H
#define MSB_CLI_RPC_MCP_H

#include <pthread.h>

#include "rpc.h"

typedef struct mcp_state {
	msb_router *router;
	msb_spec *spec;	       /* every tool call's spec */
	uint64_t max_output;   /* execute's output budget (stdout+stderr) */
	msb_output_sink *sink; /* collect_outputs' filesystem sink (--sink); NULL = none */
	char thread_id[40];    /* this MCP session's id: the conversation */
	pthread_mutex_t lock;  /* the fields below */
	bool initialized;      /* notifications/initialized arrived */
	bool acquired;	       /* a sandbox was acquired: dispose it at EOF */
	char protocol[32];     /* the negotiated protocol version */
} mcp_state;

extern const rpc_method mcp_methods[];
void mcp_at_eof(rpc_server *srv);

#endif
