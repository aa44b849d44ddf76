/* SPDX-License-Identifier: Apache-2.0 */
/* msb serve: the whole API as JSON-RPC 2.0 over stdio (docs/serve.md). */
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "rpc/serve.h"

enum { OPT_MAX_MESSAGE = CLI_OPT_VERB, OPT_WORKERS, OPT_NO_EVENTS };

static const cli_option serve_cli_options[] = {
	{"max-message", "BYTES",
	 "the largest message accepted (default 64 MiB); a longer\n"
	 "line is answered with -32600 and skipped",
	 OPT_MAX_MESSAGE, CLI_VALUE_TEXT, NULL},
	{"workers", "N", "requests served at once (default 8)", OPT_WORKERS, CLI_VALUE_TEXT, NULL},
	{"no-events", NULL, "do not send observer events as `event` notifications", OPT_NO_EVENTS,
	 CLI_VALUE_NONE, NULL},
	CLI_OPTION_END,
};

const cli_verb verb_serve = {
	.name = "serve",
	.summary = "serve the API as JSON-RPC 2.0 over stdin/stdout",
	.synopsis = "msb serve [--max-message BYTES] [--workers N] [--no-events]",
	.description =
		"Read newline-delimited JSON-RPC 2.0 requests on stdin and answer on stdout\n"
		"(docs/serve.md). Requests run concurrently; responses may come out of "
		"order.\n",
	.options = serve_cli_options,
	.run = cmd_serve,
};

bool cli_parse_size(const char *s, uint64_t *out)
{
	char *end = NULL;
	unsigned long long v = strtoull(s, &end, 10);
	if (!end || end == s || *end || s[0] == '-' || v == 0)
		return false;
	*out = v;
	return true;
}

int cmd_serve(int argc, char **argv)
{
	struct option opts[8];
	if (!cli_getopt_table(&verb_serve, opts, 8))
		return 1;
	rpc_server_options o = {0};
	o.events = true;
	o.events_fd = -1;
	o.pool_default = CLI_FRONT_POOL_SIZE;
	uint64_t v;
	int c;
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case OPT_MAX_MESSAGE:
			if (!cli_parse_size(optarg, &v) || v > (1ull << 31))
				return cli_usage(&verb_serve, "--max-message wants 1..2^31 bytes");
			o.max_message = (size_t)v;
			break;
		case OPT_WORKERS:
			if (!cli_parse_size(optarg, &v) || v > 256)
				return cli_usage(&verb_serve, "--workers wants 1..256");
			o.workers = (unsigned)v;
			break;
		case OPT_NO_EVENTS:
			o.events = false;
			break;
		default:
			return cli_usage(&verb_serve, "unknown option `%s`", argv[optind - 1]);
		}
	}
	if (optind < argc)
		return cli_usage(&verb_serve, "unexpected argument `%s`", argv[optind]);
	cli_locate_helpers();
	serve_state st;
	serve_options(&st, &o);
	return rpc_serve(&o);
}
