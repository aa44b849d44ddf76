/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz entry for `msb serve`'s dispatcher (cli/rpc): one in-process server
 * per input over a fake backend (in memory: no sandbox, no file on the
 * host), with a router, a sandbox, a session, a call and a host-tool
 * registry already open so that generated requests reach the handlers.
 * The input steers fuzz_jsonrpc.c's grammar. Properties (abort on
 * failure): every line written is one JSON object or array of JSON-RPC
 * responses, each with exactly one of result and error and a known error
 * code; a request is answered exactly once; a request with a NUL inside
 * `method` or `jsonrpc`, an unknown member or bad params is -32600, an
 * unknown method -32601.
 * MSB_FUZZ_TRACE=1 prints every line served (>) and written (<) to stderr.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_jsonrpc.h"
#include "fuzz_rpc.h"
#include "invoke.h"
#include "serve.h"

static const char *const prelude[] = {
	"{\"jsonrpc\":\"2.0\",\"id\":-1,\"method\":\"router.new\",\"params\":{\"config\":"
	"{\"min_isolation\":\"none\",\"backends\":[{\"type\":\"fake\"}]}}}",
	"{\"jsonrpc\":\"2.0\",\"id\":-2,\"method\":\"router.acquire\",\"params\":{\"router\":"
	"\"router-1\",\"spec\":{\"kind\":\"k\"},\"key\":{\"scope\":\"s\",\"thread_id\":\"t\","
	"\"agent_dir\":\"a\"}}}",
	"{\"jsonrpc\":\"2.0\",\"id\":-3,\"method\":\"session.attach\",\"params\":{\"router\":"
	"\"router-1\",\"spec\":{\"kind\":\"k\"}}}",
	"{\"jsonrpc\":\"2.0\",\"id\":-4,\"method\":\"session.begin_call\",\"params\":{\"session\":"
	"\"session-3\",\"thread_id\":\"t\"}}",
	"{\"jsonrpc\":\"2.0\",\"id\":-5,\"method\":\"host_tools.new\"}",
	NULL,
};

static const char *const strings[] = {
	"router-1",   "sandbox-2",  "session-3",
	"call-4",     "registry-5", "router-99",
	"sandbox-1",  "a.txt",	    "a.txt/",
	"d/a.txt/.",  "../x",	    "/",
	".",	      "",	    "k",
	"s",	      "t",	    "a",
	"2.0",	      "aGk=",	    "!!",
	"exec",	      "native",	    "result",
	"refusal",    "error",	    "cancelled",
	"ValueError", "app",	    "user",
	"true",	      "program.py", "replace",
	"refuse",     "fake",	    "declared",
	"none",	      "container",  "conversation",
	"echo hi",    "printf x",   "cat a.txt",
	"exit 3",     "{}",	    "null",
	NULL,
};

static const char **names;

/* The methods' names, and every parameter name and member the readers know. */
static void vocab(fz_vocab *v)
{
	static const char *methods[64];
	static const char **own[64];
	static const char *extra[] = {"scope",	  "thread_id", "agent_dir", "call_id",
				      "kind",	  "text",      "error",	    "declared_outputs",
				      "path",	  "requires",  "result",    "min_isolation",
				      "backends", NULL};
	if (!names) {
		size_t n = 0, m = 0;
		for (const rpc_method *r = serve_methods; r->name; r++)
			for (const rpc_param *p = r->params; p->name; p++)
				n++;
		names = calloc(n + sizeof(extra) / sizeof(extra[0]), sizeof(*names));
		if (!names)
			abort();
		n = 0;
		for (const rpc_method *r = serve_methods; r->name && m < 62; r++) {
			size_t k = 0;
			own[m] = calloc(16, sizeof(*own[m]));
			if (!own[m])
				abort();
			for (const rpc_param *p = r->params; p->name; p++) {
				names[n++] = p->name;
				if (k < 15)
					own[m][k++] = p->name;
			}
			methods[m++] = r->name;
		}
		methods[m++] = "no.such.method";
		for (size_t i = 0; extra[i]; i++)
			names[n++] = extra[i];
	}
	v->methods = methods;
	v->params = names;
	v->strings = strings;
	v->method_params = (const char *const *const *)own;
}

static void collect(void *ud, const char *line, size_t len)
{
	if (getenv("MSB_FUZZ_TRACE"))
		fprintf(stderr, "< %.*s\n", (int)len, line);
	fz_check_line(line, len, ud);
}

void msb_fuzz_rpc_one(const uint8_t *data, size_t size)
{
	static bool quiet;
	if (!quiet) {
		msb_host_tools_suppress_notice();
		quiet = true;
	}
	fz_vocab v = {NULL, NULL, NULL, NULL, NULL};
	vocab(&v);
	fz_out out = {.n_expect = 0};
	serve_state st;
	rpc_server_options o = {0};
	serve_options(&st, &o);
	o.events_fd = -1;
	o.output = collect;
	o.output_ud = &out;
	rpc_server *srv = rpc_server_new(&o);
	if (!srv)
		abort();
	for (size_t i = 0; prelude[i]; i++)
		rpc_server_serve_line(srv, prelude[i], strlen(prelude[i]));
	fz_src s = {data, size};
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
	rpc_server_free(srv);
	fz_check_done(&out);
}
