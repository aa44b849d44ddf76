/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz entry for `msb mcp`'s dispatcher (cli/rpc/mcp.c): one in-process
 * MCP session per input over a fake backend (in memory), initialized or
 * not as the first byte says, then the requests fuzz_jsonrpc.c's grammar
 * builds from the rest - tools/call with every tool and argument name,
 * NULs, paths with a trailing slash, wrong types. The properties of
 * fuzz_rpc_entry.c, and: a tools/call answered with a result carries
 * `content` and a boolean `isError` (a refusal is a tool error, never a
 * protocol error).
 * MSB_FUZZ_TRACE=1 prints every line served (>) and written (<) to stderr.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_jsonrpc.h"
#include "fuzz_rpc.h"
#include "invoke.h"
#include "mcp.h"

static const char *const methods[] = {"initialize",	"notifications/initialized",
				      "ping",		"tools/list",
				      "tools/call",	"tools/call",
				      "tools/call",	"tools/call",
				      "resources/list", NULL};

/* Parallel to methods: each one's own parameters. */
static const char *const p_init[] = {"protocolVersion", "capabilities", "clientInfo", NULL};
static const char *const p_none[] = {NULL};
static const char *const p_call[] = {"name", "arguments", NULL};
static const char *const *const method_params[] = {p_init, p_none, p_none, p_none, p_call,
						   p_call, p_call, p_call, p_none, NULL};

static const char *const params[] = {
	"name",	   "arguments",	 "protocolVersion",   "capabilities", "clientInfo", "_meta",
	"command", "timeout",	 "working_directory", "path",	      "content",    "encoding",
	"outputs", "media_type", "required",	      "env",	      "tty",	    "rows",
	"cols",	   NULL,
};

static const char *const strings[] = {
	"execute",    "write_file",   "read_file",  "list_files", "collect_outputs",
	"dispose",    "no_such_tool", "a.txt",	    "a.txt/",	  "d/a.txt/.",
	"d/",	      "../x",	      "/",	    ".",	  "",
	"hi",	      "aGk=",	      "!!",	    "utf-8",	  "base64",
	"latin-1",    "2025-06-18",   "2024-11-05", "1999-01-01", "echo hi",
	"printf x",   "cat a.txt",    "exit 3",	    "true",	  "mkdir -p d",
	"HTTP_PROXY", "PYTHONPATH",   "stty size",  NULL,
};

static const char init[] = "{\"jsonrpc\":\"2.0\",\"id\":-1,\"method\":\"initialize\",\"params\":"
			   "{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{}}}";

static void collect(void *ud, const char *line, size_t len)
{
	fz_out *out = ud;
	if (getenv("MSB_FUZZ_TRACE"))
		fprintf(stderr, "< %.*s\n", (int)len, line);
	fz_check_line(line, len, out);
	json_t *v = json_loadb(line, len, JSON_ALLOW_NUL, NULL);
	json_t *r = json_object_get(v, "result");
	/* A tool's answer: content, and isError a boolean. */
	if (json_object_get(r, "content") && (!json_is_array(json_object_get(r, "content")) ||
					      !json_is_boolean(json_object_get(r, "isError"))))
		abort();
	json_decref(v);
}

static msb_router *router;
static msb_spec *spec;

static void setup(void)
{
	static const char rj[] = "{\"min_isolation\":\"none\",\"backends\":[{\"type\":\"fake\"}]}";
	static const char sj[] = "{\"kind\":\"mcp\",\"requires\":[\"exec\",\"files_in\","
				 "\"files_out\"],\"declared_outputs\":[{\"path\":\"a.txt\"}],"
				 "\"outputs_named_at_call_time\":true}";
	if (msb_router_from_json(rj, strlen(rj), NULL, &router, NULL) < 0 ||
	    msb_spec_from_json(sj, strlen(sj), &spec, NULL) < 0)
		abort();
}

void msb_fuzz_mcp_one(const uint8_t *data, size_t size)
{
	if (!router)
		setup();
	static const char *const tools[] = {
		"execute",	   "write_file", "read_file", "list_files",
		"collect_outputs", "dispose",	 "nope",      NULL};
	static const fz_vocab v = {methods, params, strings, method_params, tools};
	fz_out out = {.n_expect = 0};
	mcp_state st;
	memset(&st, 0, sizeof(st));
	pthread_mutex_init(&st.lock, NULL);
	st.router = router;
	st.spec = spec;
	st.max_output = 4096;
	snprintf(st.thread_id, sizeof(st.thread_id), "fuzz");
	rpc_server_options o = {0};
	o.methods = mcp_methods;
	o.events_fd = -1;
	o.userdata = &st;
	o.at_eof = mcp_at_eof;
	o.output = collect;
	o.output_ud = &out;
	rpc_server *srv = rpc_server_new(&o);
	if (!srv)
		abort();
	fz_src s = {data, size};
	if (fz_byte(&s) & 1)
		rpc_server_serve_line(srv, init, strlen(init));
	char *line;
	size_t len;
	for (int i = 0; i < 8; i++) {
		size_t mark = out.n_expect;
		if (!(line = fz_line(&s, &v, &out, &len)))
			break;
		if (getenv("MSB_FUZZ_TRACE"))
			fprintf(stderr, "> %.*s\n", (int)len, line);
		if (fz_safe(line, len))
			rpc_server_serve_line(srv, line, len);
		else
			out.n_expect = mark;
		free(line);
	}
	rpc_server_free(srv); /* disposes the conversation's sandbox */
	pthread_mutex_destroy(&st.lock);
	fz_check_done(&out);
}
