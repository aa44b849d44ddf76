/* SPDX-License-Identifier: Apache-2.0 */
/* msb mcp: a Model Context Protocol server over stdio (docs/mcp.md). */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "os.h"
#include "rpc/mcp.h"

static const cli_option mcp_options[] = {
	{"config", "FILE",
	 "{\"router\": <router JSON>, \"spec\": <spec JSON>}\n"
	 "(docs/policy.md, docs/spec.md); without it the router is the\n"
	 "configuration's router and backend (msb config show)",
	 'c', CLI_VALUE_FILE, NULL},
	CLI_OPTION_FLOOR('f'),
	{"state-dir", "DIR", "without --config: the backend's `state_dir`", 's', CLI_VALUE_DIR,
	 NULL},
	{"image", "IMAGE",
	 "without --config: the backend's `image` (`host`, `dir:PATH`,\n`oci:PATH[:TAG]`)", 'i',
	 CLI_VALUE_TEXT, NULL},
	{"memory", "BYTES",
	 "without --config: the sandbox's memory limit (K, M, G: powers\nof 1024)", 'M',
	 CLI_VALUE_TEXT, NULL},
	{"pids", "N", "without --config: at most N processes and threads", 'P', CLI_VALUE_TEXT,
	 NULL},
	{"cpu", "MILLIS", "without --config: CPU time in thousandths of a core", 'C',
	 CLI_VALUE_TEXT, NULL},
	{"max-output", "BYTES", "execute's output budget, stdout+stderr (default 1 MiB)", 'o',
	 CLI_VALUE_TEXT, NULL},
	{"events", "FILE", "append observer events to FILE as JSON lines", 'e', CLI_VALUE_FILE,
	 NULL},
	{"sink", "DIR",
	 "collect_outputs lands artifacts in DIR (an existing directory;\n"
	 "an existing file is never replaced); also the config's `sink`",
	 'k', CLI_VALUE_DIR, NULL},
	CLI_OPTION_END,
};

const cli_verb verb_mcp = {
	.name = "mcp",
	.summary = "serve sandbox tools to an agent over the Model Context Protocol (stdio)",
	.synopsis = "msb mcp [--config FILE | --min-isolation RUNG [--state-dir DIR] [--image "
		    "IMAGE]\n"
		    "               [--memory BYTES] [--pids N] [--cpu MILLIS]]\n"
		    "               [--max-output BYTES] [--events FILE]",
	.description = "Speak MCP on stdin/stdout, offering the tools execute, write_file, "
		       "read_file,\n"
		       "list_files and dispose over one sandbox per MCP session, acquired through "
		       "the\n"
		       "router so its policy applies to every call (docs/mcp.md).\n",
	.options = mcp_options,
	.run = cmd_mcp,
};

static const char default_spec[] = "{\"kind\": \"mcp\", \"requires\": [\"exec\", \"files_in\", "
				   "\"files_out\"]}";

static int load_config(const char *path, char **router, char **spec, char **sink, msb_error **err)
{
	char *text = NULL;
	size_t len = 0;
	int r = cli_read_file(path, &text, &len, err);
	if (r < 0)
		return r;
	json_error_t jerr;
	json_t *o = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	free(text);
	if (!json_is_object(o)) {
		json_decref(o);
		return msb_error_set(err, MSB_E_VALUE, "config `%s`: not a JSON object: %s", path,
				     jerr.text);
	}
	const char *key;
	json_t *v;
	json_object_foreach (o, key, v) {
		if (strcmp(key, "router") && strcmp(key, "spec") && strcmp(key, "sink")) {
			r = msb_error_set(err, MSB_E_VALUE, "config `%s`: unknown key `%s`", path,
					  key);
			json_decref(o); /* after: `key` lives in it */
			return r;
		}
	}
	json_t *ro = json_object_get(o, "router"), *so = json_object_get(o, "spec");
	json_t *sk = json_object_get(o, "sink");
	if (sk && !json_is_string(sk)) {
		json_decref(o);
		return msb_error_set(err, MSB_E_VALUE,
				     "config `%s`: `sink` is a directory (a string)", path);
	}
	if (sk && !*sink && !(*sink = strdup(json_string_value(sk)))) {
		json_decref(o);
		return msb_error_set(err, MSB_E_NOMEM, "out of memory");
	}
	if (!json_is_object(ro) || (so && !json_is_object(so))) {
		json_decref(o);
		return msb_error_set(err, MSB_E_VALUE,
				     "config `%s`: `router` (an object) is required; `spec` is an "
				     "object",
				     path);
	}
	/* The front end's warm pool, as `msb run` keeps one (docs/pool.md). */
	*router = rpc_router_pool_default(ro, CLI_FRONT_POOL_SIZE) == 0
			  ? json_dumps(ro, JSON_COMPACT)
			  : NULL;
	*spec = so ? json_dumps(so, JSON_COMPACT) : strdup(default_spec);
	json_decref(o);
	return *router && *spec ? 0 : msb_error_set(err, MSB_E_NOMEM, "out of memory");
}

struct mcp_args {
	const char *config, *floor, *state_dir, *image, *events;
	char *sink; /* owned; --sink, else the config's */
	uint64_t max_output, memory, pids, cpu;
};

/* --memory: a positive byte count, K, M or G allowed (powers of 1024). */
static bool parse_memory(const char *arg, uint64_t *memory)
{
	size_t n = strlen(arg);
	unsigned shift = 0;
	char digits[32];
	if (n && n < sizeof(digits) && strchr("KkMmGg", arg[n - 1])) {
		shift = strchr("Kk", arg[n - 1]) ? 10 : strchr("Mm", arg[n - 1]) ? 20 : 30;
		n--;
	}
	snprintf(digits, sizeof(digits), "%.*s", (int)n, arg);
	if (n >= sizeof(digits) || !cli_parse_size(digits, memory) ||
	    *memory > (UINT64_MAX >> shift))
		return false;
	*memory <<= shift;
	return true;
}

/* The options: 0, or a usage error's exit status. */
static int parse_args(int argc, char **argv, struct mcp_args *a)
{
	struct option opts[16];
	if (!cli_getopt_table(&verb_mcp, opts, 16))
		return 1;
	int c;
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'c':
			a->config = optarg;
			break;
		case 'f':
			a->floor = optarg;
			break;
		case 's':
			a->state_dir = optarg;
			break;
		case 'i':
			a->image = optarg;
			break;
		case 'e':
			a->events = optarg;
			break;
		case 'k':
			free(a->sink);
			a->sink = strdup(optarg);
			break;
		case 'M':
			if (!parse_memory(optarg, &a->memory))
				return cli_usage(
					&verb_mcp,
					"--memory wants a positive byte count (K, M, G allowed)");
			break;
		case 'P':
			if (!cli_parse_size(optarg, &a->pids))
				return cli_usage(&verb_mcp, "--pids wants a positive count");
			break;
		case 'C':
			if (!cli_parse_size(optarg, &a->cpu))
				return cli_usage(&verb_mcp, "--cpu wants a positive number of "
							    "thousandths of a core");
			break;
		case 'o':
			if (!cli_parse_size(optarg, &a->max_output))
				return cli_usage(&verb_mcp, "--max-output wants a positive count");
			break;
		default:
			return cli_usage(&verb_mcp, "unknown option `%s`", argv[optind - 1]);
		}
	}
	if (optind < argc)
		return cli_usage(&verb_mcp, "unexpected argument `%s`", argv[optind]);
	if (a->config && (a->floor || a->state_dir || a->image || a->memory || a->pids || a->cpu))
		return cli_usage(&verb_mcp,
				 "--config replaces --min-isolation, --state-dir, --image, "
				 "--memory, --pids and --cpu");
	return 0;
}

/* Without --config: the configuration's router and backend with the flags
 * over them (cli/backend_json.c), and the default spec with the
 * configuration's resources under the flags'. */
static int flags_config(const struct mcp_args *a, char **router_json, char **spec_json,
			msb_error **err)
{
	cli_backend_flags bf = {
		.state_dir = a->state_dir, .image = a->image, .pool_default = CLI_FRONT_POOL_SIZE};
	if (cli_router_json(&bf, a->floor, router_json, err) < 0)
		return -1;
	json_error_t jerr;
	json_t *so = json_loads(default_spec, 0, &jerr);
	uint64_t res[CLI_RESOURCES] = {a->memory, a->pids, a->cpu, 0};
	cli_spec_resources(res);
	if (so && (res[0] || res[1] || res[2] || res[3]))
		json_object_set_new(so, "resources",
				    json_pack("{s:I, s:I, s:I, s:I}", "memory_bytes",
					      (json_int_t)res[0], "pids_max", (json_int_t)res[1],
					      "cpu_millis", (json_int_t)res[2], "writable_bytes",
					      (json_int_t)res[3]));
	const cli_config *c = NULL;
	if (so && cli_config_get(&c, NULL) == 0 && c->env)
		json_object_set(so, "env", c->env);
	*spec_json = so ? json_dumps(so, JSON_COMPACT) : NULL;
	json_decref(so);
	if (!*router_json || !*spec_json) {
		free(*router_json);
		free(*spec_json);
		*router_json = *spec_json = NULL;
		msb_error_set(err, MSB_E_NOMEM, "out of memory");
		return -1;
	}
	return 0;
}

/* The server, once the options are in. */
static int serve_mcp(struct mcp_args *a)
{
	cli_locate_helpers();
	msb_error *err = NULL;
	char *router_json = NULL, *spec_json = NULL;
	if (a->config) {
		if (load_config(a->config, &router_json, &spec_json, &a->sink, &err) < 0)
			return cli_fail(err);
	} else if (flags_config(a, &router_json, &spec_json, &err) < 0) {
		return cli_fail(err);
	}

	int events_fd = -1;
	if (a->events) {
		events_fd = cli_os_open_append(a->events);
		if (events_fd < 0) {
			free(router_json);
			free(spec_json);
			msb_error_set(&err, MSB_E_OS, "cannot open `%s`", a->events);
			return cli_fail(err);
		}
	}

	/* The MCP session's id: the conversation every tool call is keyed to. */
	mcp_state st;
	memset(&st, 0, sizeof(st));
	pthread_mutex_init(&st.lock, NULL);
	st.max_output = a->max_output;
	uint8_t rnd[16];
	if (cli_os_random(rnd, sizeof(rnd)) < 0) {
		free(router_json);
		free(spec_json);
		msb_error_set(&err, MSB_E_OS, "no random bytes");
		return cli_fail(err);
	}
	for (size_t i = 0; i < sizeof(rnd); i++)
		snprintf(st.thread_id + 2 * i, 3, "%02x", rnd[i]);

	msb_jsonl_recorder *rec = NULL;
	msb_observer obs = MSB_OBSERVER_INIT;
	msb_router_options extra = MSB_ROUTER_OPTIONS_INIT;
	extra.log = rpc_log;
	if (events_fd >= 0) {
		if (msb_jsonl_recorder_new(events_fd, &rec, &obs, &err) < 0)
			return cli_fail(err);
		extra.observer = &obs;
	}
	int r = msb_router_from_json(router_json, strlen(router_json), &extra, &st.router, &err);
	if (r == 0)
		r = msb_spec_from_json(spec_json, strlen(spec_json), &st.spec, &err);
	if (r == 0 && a->sink)
		r = msb_fs_sink_new(a->sink, NULL, &st.sink, &err);
	free(router_json);
	free(spec_json);
	if (r < 0) {
		msb_spec_unref(st.spec);
		msb_router_free(st.router);
		msb_jsonl_recorder_free(rec);
		return cli_fail(err);
	}

	rpc_server_options o = {0};
	o.methods = mcp_methods;
	o.events = false;
	o.events_fd = -1;
	o.userdata = &st;
	o.at_eof = mcp_at_eof;
	int status = rpc_serve(&o);
	msb_output_sink_free(st.sink);
	msb_spec_unref(st.spec);
	msb_router_free(st.router);
	msb_jsonl_recorder_free(rec);
	if (events_fd >= 0)
		close(events_fd);
	return status;
}

int cmd_mcp(int argc, char **argv)
{
	struct mcp_args a = {.max_output = 1u << 20};
	int status = parse_args(argc, argv, &a);
	if (status == 0)
		status = serve_mcp(&a);
	free(a.sink);
	return status;
}
