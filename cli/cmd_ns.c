/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The sandbox verbs: run, acquire, exec, ls, dispose, purge. The backend is
 * the `ns` backend, the type --backend names, or the backend JSON --config
 * describes: made from backend JSON (cli/backend_json.c). Every verb that creates
 * or uses a sandbox goes through the router, whose default floor is microvm:
 * the `ns` backend (container) is refused unless the caller opts down with
 * --min-isolation container.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <msb/outputs.h>

#include "cli.h"
#include "os.h"
#include "exec_io.h"

struct ns_args {
	const char *config;  /* --config FILE: backend JSON */
	const char *backend; /* --backend TYPE: the backend JSON's `type` */
	const char *state_dir;
	const char *image;
	const char *runtime;
	const char *min_isolation;
	const char *scope;
	const char *thread;
	const char *agent;
	const char *kind;
	const char *call;
	const char *workdir;
	double timeout;
	bool timeout_set;
	uint64_t max_output;
	uint64_t memory, pids, cpu; /* the spec's resource limits; 0 = backend default */
	bool json;
	bool kind_set;
	/* run: declared outputs and their sink (docs/outputs.md) */
	msb_declared_output outputs[64];
	char *output_paths[64];
	size_t n_outputs;
	const char *sink;
	bool replace;
	/* egress (docs/egress.md): --allow rules make the spec ALLOWLIST */
	const char *allow[64];
	size_t n_allow;
	const char *egress_config; /* --egress-config FILE: the backend JSON's `egress` */
	const char *events;	   /* --events FILE: observer events as JSON lines */
	int events_fd;
	msb_jsonl_recorder *recorder;
	/* run and exec: stdin, output, env, terminal (cli/exec_io.c) */
	cli_exec_io io;
	bool call_scope;       /* make_router: the backend serves the call scope */
	unsigned pool_default; /* cli_backend_flags.pool_default */
};

static int cmd_run(int argc, char **argv);
static int cmd_acquire(int argc, char **argv);
static int cmd_exec(int argc, char **argv);
static int cmd_ls(int argc, char **argv);
static int cmd_dispose(int argc, char **argv);
static int cmd_purge(int argc, char **argv);

enum {
	OPT_STATE = 1000,
	OPT_IMAGE,
	OPT_FLOOR,
	OPT_SCOPE,
	OPT_THREAD,
	OPT_AGENT,
	OPT_KIND,
	OPT_TIMEOUT,
	OPT_WORKDIR,
	OPT_JSON,
	OPT_MAX_OUTPUT,
	OPT_MEMORY,
	OPT_PIDS,
	OPT_CPU,
	OPT_OUTPUT,
	OPT_SINK,
	OPT_REPLACE,
	OPT_ALLOW,
	OPT_EGRESS_CONFIG,
	OPT_EVENTS,
	OPT_CONFIG,
	OPT_BACKEND,
	OPT_RUNTIME,
	OPT_ENV,
	OPT_ENV_FILE,
	OPT_NO_STDIN,
};

/* The rows, grouped the way the verbs share them. */
#define BACKEND_ROWS                                                                               \
	CLI_OPTION_BACKEND(OPT_BACKEND), CLI_OPTION_CONFIG(OPT_CONFIG),                            \
		CLI_OPTION_STATE_DIR(OPT_STATE), CLI_OPTION_IMAGE(OPT_IMAGE),                      \
		CLI_OPTION_RUNTIME(OPT_RUNTIME)
#define KEY_ROWS                                                                                   \
	CLI_OPTION_SCOPE(OPT_SCOPE), CLI_OPTION_THREAD(OPT_THREAD), CLI_OPTION_AGENT(OPT_AGENT),   \
		CLI_OPTION_KIND(OPT_KIND)
#define LIMITS_ROWS                                                                                \
	CLI_OPTION_MEMORY(OPT_MEMORY), CLI_OPTION_PIDS(OPT_PIDS), CLI_OPTION_CPU(OPT_CPU)
#define EXEC_ROWS                                                                                  \
	{"workdir",                                                                                \
	 "DIR",                                                                                    \
	 "working directory: absolute, or relative to the storage base",                           \
	 OPT_WORKDIR,                                                                              \
	 CLI_VALUE_TEXT,                                                                           \
	 NULL},                                                                                    \
		{"timeout",	 "S", "the command's bound in seconds (default 300)", OPT_TIMEOUT, \
		 CLI_VALUE_TEXT, NULL},                                                            \
	{                                                                                          \
		"max-output", "BYTES", "stop the output at this many bytes (stdout+stderr)",       \
			OPT_MAX_OUTPUT, CLI_VALUE_TEXT, NULL                                       \
	}
/* stdin, environment and terminal of run and exec (cli/exec_io.c, docs/cli-exec.md) */
#define EXEC_IO_ROWS                                                                               \
	{"env",	  "NAME=VALUE",	  "set a variable for CMD (repeatable; wins over --env-file)",     \
	 OPT_ENV, CLI_VALUE_TEXT, NULL},                                                           \
		{"env-file",                                                                       \
		 "FILE",                                                                           \
		 "NAME=VALUE lines ('#' comments and blank lines skipped)",                        \
		 OPT_ENV_FILE,                                                                     \
		 CLI_VALUE_FILE,                                                                   \
		 NULL},                                                                            \
		{"interactive",                                                                    \
		 NULL,                                                                             \
		 "(-i) attach stdin even when it is a terminal (it is attached\n"                  \
		 "whenever it is not one: a pipe, a file)",                                        \
		 'i',                                                                              \
		 CLI_VALUE_NONE,                                                                   \
		 NULL},                                                                            \
		{"no-stdin",   NULL,	       "never attach stdin (CMD reads end of file)",       \
		 OPT_NO_STDIN, CLI_VALUE_NONE, NULL},                                              \
	{                                                                                          \
		"tty", NULL,                                                                       \
			"(-t) run CMD on a terminal inside the sandbox; stdin attached,\n"         \
			"this terminal in raw mode; no time bound unless --timeout",               \
			't', CLI_VALUE_NONE, NULL                                                  \
	}
#define EGRESS_ROWS                                                                                \
	{"allow",                                                                                  \
	 "HOST[=M,...]",                                                                           \
	 "egress allowlist entry (repeatable; `=GET,HEAD` limits the\n"                            \
	 "methods); makes the spec's egress `allowlist`",                                          \
	 OPT_ALLOW,                                                                                \
	 CLI_VALUE_TEXT,                                                                           \
	 NULL},                                                                                    \
		CLI_OPTION_EGRESS_CONFIG(OPT_EGRESS_CONFIG),                                       \
	{                                                                                          \
		"events", "FILE", "append observer events (EgressObserved, ...) as JSON lines",    \
			OPT_EVENTS, CLI_VALUE_FILE, NULL                                           \
	}

static const cli_option run_options[] = {
	CLI_OPTION_FLOOR(OPT_FLOOR),
	BACKEND_ROWS,
	EXEC_ROWS,
	EXEC_IO_ROWS,
	{"output", "PATH[:TYPE]",
	 "collect PATH (relative to the storage base) after CMD; TYPE is\n"
	 "its media type, e.g. image/png (repeatable, up to 64)",
	 OPT_OUTPUT, CLI_VALUE_TEXT, NULL},
	{"sink", "DIR", "land collected outputs under DIR (an existing directory)", OPT_SINK,
	 CLI_VALUE_DIR, NULL},
	{"replace", NULL, "replace existing files in the sink (default: refuse)", OPT_REPLACE,
	 CLI_VALUE_NONE, NULL},
	LIMITS_ROWS,
	EGRESS_ROWS,
	CLI_OPTION_END,
};

const cli_verb verb_run = {
	.name = "run",
	.summary = "run a command in a fresh call-scoped sandbox, then dispose it",
	.synopsis = "msb run [--min-isolation container] [--image IMAGE] [--timeout S] [-i|-t]\n"
		    "[--env NAME=VALUE] -- CMD [ARG...]",
	.description = "Acquire a call-scoped sandbox through the router, run CMD in it (argv, "
		       "never\n"
		       "shell-split), print its output, dispose the sandbox, and exit with CMD's "
		       "status.\n",
	.options = run_options,
	.run = cmd_run,
};

static const cli_option acquire_options[] = {
	KEY_ROWS,     CLI_OPTION_FLOOR(OPT_FLOOR),
	BACKEND_ROWS, {"json", NULL, "print JSON", OPT_JSON, CLI_VALUE_NONE, NULL},
	LIMITS_ROWS,  CLI_OPTION_END,
};

const cli_verb verb_acquire = {
	.name = "acquire",
	.summary = "get or create the sandbox for a key and kind",
	.synopsis = "msb acquire --thread T [--scope S] [--agent A] [--kind K] [--min-isolation "
		    "RUNG]",
	.description = "Get-or-create through the router; prints the sandbox's instance id.\n",
	.options = acquire_options,
	.run = cmd_acquire,
};

static const cli_option exec_options[] = {
	KEY_ROWS,     CLI_OPTION_FLOOR(OPT_FLOOR),
	BACKEND_ROWS, EXEC_ROWS,
	EXEC_IO_ROWS, LIMITS_ROWS,
	EGRESS_ROWS,  CLI_OPTION_END,
};

const cli_verb verb_exec = {
	.name = "exec",
	.summary = "run a command in the (warm) sandbox of a key and kind",
	.synopsis =
		"msb exec --thread T [--scope S] [--agent A] [--kind K] [--min-isolation RUNG]\n"
		"                [--timeout S] [--workdir DIR] -- CMD [ARG...]",
	.description = "Acquire (reusing a warm sandbox) and run CMD; exits with CMD's status.\n",
	.options = exec_options,
	.run = cmd_exec,
};

static const cli_option ls_options[] = {
	BACKEND_ROWS,
	{"json", NULL,
	 "print a JSON array: name, key, backend, image, created, age_s,\n"
	 "state, ...",
	 OPT_JSON, CLI_VALUE_NONE, NULL},
	CLI_OPTION_END,
};

const cli_verb verb_ls = {
	.name = "ls",
	.summary = "list the sandboxes a backend holds (an ns state root, an engine)",
	.synopsis = "msb ls [--backend TYPE] [--config FILE] [--state-dir DIR] [--json]",
	.description =
		"One line per sandbox, made by any process: name, state, backend, image, age\n"
		"and key. An `ns` backend's are those it keeps on disk; sandboxes of its warm\n"
		"pool (msb pool) are listed as `pooled`. A `docker` or `wslc` backend's are\n"
		"the containers its engine holds with msb's labels (the ones dispose and\n"
		"purge select), `running` or `stopped`.\n",
	.options = ls_options,
	.run = cmd_ls,
};

static const cli_option dispose_options[] = {
	KEY_ROWS,
	BACKEND_ROWS,
	CLI_OPTION_END,
};

const cli_verb verb_dispose = {
	.name = "dispose",
	.summary = "dispose every sandbox of a key (optionally one kind)",
	.synopsis = "msb dispose --thread T [--scope S] [--agent A] [--kind K] [--config FILE]\n"
		    "                   [--state-dir DIR]",
	.description = "Exit status 0 when every sandbox is gone, 1 otherwise.\n",
	.options = dispose_options,
	.run = cmd_dispose,
};

static const cli_option purge_options[] = {
	CLI_OPTION_SCOPE(OPT_SCOPE),
	CLI_OPTION_THREAD(OPT_THREAD),
	BACKEND_ROWS,
	CLI_OPTION_END,
};

const cli_verb verb_purge = {
	.name = "purge",
	.summary = "dispose every sandbox of a conversation (scope and thread)",
	.synopsis = "msb purge --scope S --thread T [--config FILE] [--state-dir DIR]",
	.description = "Selects by the labels on disk, so it reaches sandboxes any process made.\n"
		       "With the `ns` backend it drains the warm pool too (msb pool drain).\n",
	.options = purge_options,
	.run = cmd_purge,
};

/* The backend JSON of these flags (cli/backend_json.c). */
static cli_backend_flags backend_flags(const struct ns_args *a)
{
	cli_backend_flags f = {
		.config = a->config,
		.type = a->backend,
		.state_dir = a->state_dir,
		.image = a->image,
		.egress_config = a->egress_config,
		.runtime = a->runtime,
		.pool_default = a->pool_default,
	};
	return f;
}

/* --output PATH[:MEDIA/TYPE]: the media type is what follows the last ':'
 * when it contains a '/', so "a:b.txt" is a path. */
static bool parse_output(struct ns_args *a, const char *arg)
{
	if (a->n_outputs >= sizeof(a->outputs) / sizeof(a->outputs[0]) || !*arg)
		return false;
	char *path = strdup(arg);
	if (!path)
		return false;
	char *colon = strrchr(path, ':');
	const char *type = NULL;
	if (colon && strchr(colon + 1, '/')) {
		*colon = '\0';
		type = colon + 1;
	}
	msb_declared_output o = MSB_DECLARED_OUTPUT_INIT;
	o.path = path;
	o.media_type = type;
	a->output_paths[a->n_outputs] = path;
	a->outputs[a->n_outputs++] = o;
	return true;
}

static void free_outputs(struct ns_args *a)
{
	for (size_t i = 0; i < a->n_outputs; i++)
		free(a->output_paths[i]);
	a->n_outputs = 0;
}

/* The options whose values are checked: 0, or -1 after a usage error. */
static int parse_checked_opt(const cli_verb *verb, int c, struct ns_args *a)
{
	switch (c) {
	case OPT_MAX_OUTPUT: {
		char *end = NULL;
		unsigned long long v = strtoull(optarg, &end, 10);
		if (!end || *end || v == 0) {
			cli_usage(verb, "--max-output wants a positive byte count");
			return -1;
		}
		a->max_output = v;
		break;
	}
	case OPT_MEMORY:
		if (!cli_parse_count(optarg, true, &a->memory)) {
			cli_usage(verb, "--memory wants a positive byte count (K, M, G allowed)");
			return -1;
		}
		break;
	case OPT_PIDS:
		if (!cli_parse_count(optarg, false, &a->pids)) {
			cli_usage(verb, "--pids wants a positive count");
			return -1;
		}
		break;
	case OPT_CPU:
		if (!cli_parse_count(optarg, false, &a->cpu)) {
			cli_usage(verb, "--cpu wants a positive number of thousandths of a core");
			return -1;
		}
		break;
	case OPT_OUTPUT:
	case OPT_SINK:
	case OPT_REPLACE:
		if (c == OPT_SINK) {
			a->sink = optarg;
			break;
		}
		if (c == OPT_REPLACE) {
			a->replace = true;
			break;
		}
		if (!parse_output(a, optarg)) {
			cli_usage(verb, "--output wants PATH or PATH:MEDIA/TYPE (at most 64)");
			return -1;
		}
		break;
	case OPT_ALLOW:
		if (a->n_allow == sizeof(a->allow) / sizeof(a->allow[0])) {
			cli_usage(verb, "at most 64 --allow entries");
			return -1;
		}
		a->allow[a->n_allow++] = optarg;
		break;
	case OPT_TIMEOUT: {
		char *end = NULL;
		a->timeout = strtod(optarg, &end);
		if (!end || *end || !(a->timeout > 0)) {
			cli_usage(verb, "--timeout wants a positive number of seconds");
			return -1;
		}
		break;
	}
	}
	return 0;
}

/* An option of run's own that another verb was given. */
static bool is_run_only(const char *arg)
{
	static const char *const own[] = {"--output", "--sink", "--replace"};
	for (size_t i = 0; i < 3; i++) {
		size_t n = strlen(own[i]);
		if (strncmp(arg, own[i], n) == 0 && (arg[n] == '\0' || arg[n] == '='))
			return true;
	}
	return false;
}

/* Parse options up to "--" (or the first non-option). Returns the index of
 * the first remaining argument, or -1 after printing a usage error. */
static int parse_opts(const cli_verb *verb, int argc, char **argv, struct ns_args *a)
{
	memset(a, 0, sizeof(*a));
	a->scope = "cli";
	a->agent = "cli";
	a->kind = "shell";
	a->timeout = 300;
	a->events_fd = -1;
	struct option opts[48];
	if (!cli_getopt_table(verb, opts, 48))
		return -1;
	optind = 1;
	opterr = 0;
	int c;
	while ((c = getopt_long(argc, argv, verb == &verb_run || verb == &verb_exec ? "+it" : "+",
				opts, NULL)) != -1) {
		const char *why = NULL;
		switch (c) {
		case OPT_ENV:
			if (!cli_exec_io_env(&a->io, optarg, &why)) {
				cli_usage(verb, "%s", why);
				return -1;
			}
			break;
		case OPT_ENV_FILE:
			if (!cli_exec_io_env_file(&a->io, optarg, &why)) {
				cli_usage(verb, "%s", why);
				return -1;
			}
			break;
		case 'i':
			a->io.interactive = true;
			break;
		case 't':
			a->io.tty = true;
			break;
		case OPT_NO_STDIN:
			a->io.no_stdin = true;
			break;
		case OPT_CONFIG:
			a->config = optarg;
			break;
		case OPT_BACKEND:
			a->backend = optarg;
			break;
		case OPT_RUNTIME:
			a->runtime = optarg;
			break;
		case OPT_STATE:
			a->state_dir = optarg;
			break;
		case OPT_IMAGE:
			a->image = optarg;
			break;
		case OPT_FLOOR:
			a->min_isolation = optarg;
			break;
		case OPT_SCOPE:
			a->scope = optarg;
			break;
		case OPT_THREAD:
			a->thread = optarg;
			break;
		case OPT_AGENT:
			a->agent = optarg;
			break;
		case OPT_KIND:
			a->kind = optarg;
			a->kind_set = true;
			break;
		case OPT_WORKDIR:
			a->workdir = optarg;
			break;
		case OPT_JSON:
			a->json = true;
			break;
		case OPT_EGRESS_CONFIG:
			a->egress_config = optarg;
			break;
		case OPT_EVENTS:
			a->events = optarg;
			break;
		case OPT_MAX_OUTPUT:
		case OPT_MEMORY:
		case OPT_PIDS:
		case OPT_CPU:
		case OPT_OUTPUT:
		case OPT_SINK:
		case OPT_REPLACE:
		case OPT_ALLOW:
		case OPT_TIMEOUT:
			if (parse_checked_opt(verb, c, a) < 0)
				return -1;
			break;
		default:
			if (is_run_only(argv[optind - 1]))
				cli_usage(verb, "--output, --sink and --replace are options of "
						"`msb run` only");
			else
				cli_usage(verb, "unknown option `%s`", argv[optind - 1]);
			return -1;
		}
	}
	if (a->io.tty && a->io.no_stdin) {
		cli_usage(verb,
			  "-t attaches stdin to the terminal: it does not go with --no-stdin");
		return -1;
	}
	/* a terminal session is not bounded unless asked */
	if (a->io.tty && !a->timeout_set)
		a->timeout = CLI_TERMINAL_TIMEOUT;
	cli_locate_helpers();
	return optind;
}

/* What make_router() and parse() allocated for egress and the env. */
static void args_clear(struct ns_args *a)
{
	cli_exec_io_clear(&a->io);
	msb_jsonl_recorder_free(a->recorder);
	a->recorder = NULL;
	if (a->events_fd >= 0)
		close(a->events_fd);
	a->events_fd = -1;
}

static int parse(const cli_verb *verb, int argc, char **argv, struct ns_args *a)
{
	int r = parse_opts(verb, argc, argv, a);
	if (r >= 0 && (verb == &verb_run || verb == &verb_exec)) {
		/* --env-file read and every entry checked before anything runs */
		msb_error *err = NULL;
		if (cli_exec_io_finish(&a->io, &err) < 0) {
			cli_fail(err);
			r = -1;
		}
	}
	if (r < 0) {
		free_outputs(a);
		args_clear(a);
	}
	return r;
}

/* The sandbox these flags name (cli/target.c). */
static cli_target target_of(const struct ns_args *a)
{
	cli_target t;
	cli_target_init(&t);
	t.backend = backend_flags(a);
	t.min_isolation = a->min_isolation;
	t.scope = a->scope;
	t.thread = a->thread;
	t.agent = a->agent;
	t.kind = a->kind;
	t.resources[0] = a->memory;
	t.resources[1] = a->pids;
	t.resources[2] = a->cpu;
	for (size_t i = 0; i < a->n_allow; i++)
		t.allow[i] = a->allow[i];
	t.n_allow = a->n_allow;
	return t;
}

/* The router over the one backend, at the floor the caller asked for. */
static int make_router(struct ns_args *a, msb_router **out, msb_error **err)
{
	msb_observer obs;
	if (a->events) {
		a->events_fd = cli_os_open_append(a->events);
		if (a->events_fd < 0)
			return msb_error_set(err, MSB_E_VALUE, "--events `%s`: %s", a->events,
					     strerror(errno));
		int q = msb_jsonl_recorder_new(a->events_fd, &a->recorder, &obs, err);
		if (q < 0)
			return q;
	}
	cli_target t = target_of(a);
	int r = cli_target_router(&t, a->events ? &obs : NULL, out, err);
	if (r < 0)
		return r;
	/* An engine without the call scope: `msb run` asks a thread of its own. */
	const msb_backend *b = msb_router_backend(*out);
	a->call_scope = (msb_backend_declarations(b)->isolation_scopes & MSB_SCOPE_CALL) ||
			strcmp(msb_backend_isolation(b), "container") != 0;
	return 0;
}

static int make_spec(struct ns_args *a, bool call_scoped, msb_spec **out, msb_error **err)
{
	cli_target t = target_of(a);
	msb_spec_builder *sb =
		cli_target_spec(&t, a->n_outputs ? MSB_CAP_EXEC | MSB_CAP_FILES_OUT : MSB_CAP_EXEC);
	if (!sb)
		return msb_error_set(err, MSB_E_NOMEM, "out of memory");
	for (size_t i = 0; i < a->n_outputs; i++)
		msb_spec_builder_add_declared_output(sb, &a->outputs[i]);
	if (call_scoped)
		msb_spec_builder_set_isolation_scope(sb, MSB_SCOPE_CALL);
	int r = msb_spec_build(sb, out, err);
	msb_spec_builder_free(sb);
	return r;
}

/* Run CMD with the verb's stdin, env and terminal (cli/exec_io.c); the
 * output is written as it comes. Returns the exit status, or < 0 with err. */
static int run_in(msb_sandbox *sb, struct ns_args *a, char **cmd, msb_cancel *cancel,
		  msb_error **err)
{
	msb_exec_request req = MSB_EXEC_REQUEST_INIT;
	req.cancel = cancel;
	req.argv = (const char *const *)cmd;
	req.timeout = a->timeout;
	req.working_directory = a->workdir;
	req.max_output_bytes = a->max_output;
	msb_exec_result res = {0};
	int status = 0;
	int r = cli_exec_io_run(sb, &req, a->max_output > 0, &a->io, &res, &status, err);
	if (r < 0)
		return r;
	if (r > 0)
		return status; /* a signal or a closed stdout ended it */
	if (res.truncated)
		fprintf(stderr, "msb: output truncated at the %llu-byte budget\n",
			(unsigned long long)a->max_output);
	/* What the sandbox's limits did (docs/ns.md "Limits"). */
	if (res.oom_killed)
		fprintf(stderr,
			"msb: oom_killed: the memory limit's OOM killer killed a process\n");
	if (res.pids_exhausted)
		fprintf(stderr, "msb: pids_exhausted: the pids limit refused a fork\n");
	if (res.no_space)
		fprintf(stderr, "msb: no_space: the writable layer or the storage base is full\n");
	msb_exec_result_clear(&res);
	return status;
}

/* Collect the declared outputs after the command; one line per artifact on
 * stderr. A refusal's exit status replaces the command's. */
static int collect(msb_sandbox *sb, const msb_spec *spec, const msb_output_sink *sink,
		   const char *call, const struct ns_args *a, int status)
{
	msb_collect_options o = MSB_COLLECT_OPTIONS_INIT;
	o.sink = sink;
	o.call_id = call;
	o.log = cli_log;
	msb_landed_artifact *l = NULL;
	size_t n = 0;
	msb_error *err = NULL;
	if (msb_collect_outputs(sb, spec, &o, &l, &n, &err) < 0)
		return cli_fail(err);
	for (size_t i = 0; i < n; i++)
		fprintf(stderr, "msb: landed %s sha256:%s %s\n", l[i].display, l[i].sha256,
			l[i].handle ? l[i].handle : "");
	msb_landed_artifacts_free(l, n);
	return status;
}

/*
 * `msb run` on SIGTERM, SIGINT or SIGHUP: the call ends as a cancelled one -
 * its acquire or exec is cancelled, its call-scoped sandbox disposed of -
 * and then msb dies of the signal, as its parent expects. Before, the
 * signal's default action left the sandbox running with nobody to dispose
 * of it (the fault suite's outputs.read-client-TERM; issue 15).
 */
static msb_cancel *run_cancel;
static volatile sig_atomic_t run_signal;

static void on_run_signal(int sig)
{
	run_signal = sig;
	msb_cancel_trigger(run_cancel);
}

static void run_signals(bool catch)
{
	cli_os_catch_stop_signals(catch ? on_run_signal : NULL);
}

static int cmd_run(int argc, char **argv)
{
	struct ns_args a;
	int first = parse(&verb_run, argc, argv, &a);
	if (first < 0)
		return 2;
	if (first >= argc) {
		free_outputs(&a);
		return cli_usage(&verb_run, "no command given (put it after --)");
	}
	a.pool_default = CLI_FRONT_POOL_SIZE;
	msb_error *err = NULL;
	msb_output_sink *sink = NULL;
	if (a.sink) {
		msb_fs_sink_options so = MSB_FS_SINK_OPTIONS_INIT;
		so.existing = a.replace ? MSB_LANDING_REPLACE : MSB_LANDING_REFUSE;
		if (msb_fs_sink_new(a.sink, &so, &sink, &err) < 0) {
			free_outputs(&a);
			return cli_fail(err);
		}
	}
	msb_router *router = NULL;
	if (make_router(&a, &router, &err) < 0) {
		msb_output_sink_free(sink);
		free_outputs(&a);
		return cli_fail(err);
	}
	char thread[17], call[17];
	cli_random_hex(thread, 8);
	cli_random_hex(call, 8);
	msb_key key = {"cli", thread, "cli", call};
	msb_spec *spec = NULL;
	/* A backend without the call scope (the container engines) serves the
	 * same lifetime as a conversation on a thread of its own, disposed
	 * below either way. */
	if (make_spec(&a, a.call_scope, &spec, &err) < 0) {
		msb_router_free(router);
		msb_output_sink_free(sink);
		free_outputs(&a);
		return cli_fail(err);
	}
	/* Outputs without a sink: refused before anything runs. */
	if (msb_spec_lands_artifacts(spec) && !sink) {
		msb_missing_sink_refusal(spec, "msb run (pass --sink DIR)", &err);
		msb_spec_unref(spec);
		msb_router_free(router);
		free_outputs(&a);
		return cli_fail(err);
	}
	msb_sandbox *sb = NULL;
	msb_acquire_options ao = MSB_ACQUIRE_OPTIONS_INIT;
	ao.call = call;
	if (msb_cancel_new(&run_cancel, NULL) == 0) {
		ao.cancel = run_cancel;
		run_signals(true);
	}
	int status;
	if (msb_router_acquire(router, &key, spec, &ao, &sb, &err) < 0) {
		status = cli_fail(err);
	} else {
		int r = run_in(sb, &a, argv + first, run_cancel, &err);
		status = r < 0 ? cli_fail(err) : r;
		if (r >= 0 && a.n_outputs)
			status = collect(sb, spec, sink, call, &a, status);
		msb_sandbox_free(sb);
	}
	/* A call-scoped sandbox is always disposed when the call ends (23.38). */
	bool gone = false;
	msb_router_dispose(router, &key, &gone, NULL);
	if (!gone)
		fprintf(stderr,
			"msb: warning: the sandbox was not disposed; run `msb purge "
			"--scope cli --thread %s`\n",
			thread);
	msb_spec_unref(spec);
	msb_router_free(router);
	msb_output_sink_free(sink);
	free_outputs(&a);
	args_clear(&a);
	run_signals(false);
	/* a signal that arrived while the command ran was exec_io's to take */
	int sig = run_signal ? run_signal : cli_exec_io_signal();
	if (sig)
		raise(sig);
	msb_cancel_free(run_cancel);
	run_cancel = NULL;
	return status;
}

static int acquire_common(const cli_verb *verb, int argc, char **argv, struct ns_args *a,
			  int *first, msb_router **router, msb_sandbox **sb)
{
	*first = parse(verb, argc, argv, a);
	if (*first < 0)
		return 2;
	if (!a->thread)
		return cli_usage(verb, "--thread is required");
	msb_error *err = NULL;
	if (make_router(a, router, &err) < 0)
		return cli_fail(err);
	msb_spec *spec = NULL;
	if (make_spec(a, false, &spec, &err) < 0)
		return cli_fail(err);
	msb_key key = {a->scope, a->thread, a->agent, NULL};
	int r = msb_router_acquire(*router, &key, spec, NULL, sb, &err);
	msb_spec_unref(spec);
	if (r < 0)
		return cli_fail(err);
	return 0;
}

static int cmd_acquire(int argc, char **argv)
{
	struct ns_args a;
	int first;
	msb_router *router = NULL;
	msb_sandbox *sb = NULL;
	int status = acquire_common(&verb_acquire, argc, argv, &a, &first, &router, &sb);
	if (status == 0 && first < argc)
		status = cli_usage(&verb_acquire, "unexpected argument `%s`", argv[first]);
	if (status == 0) {
		if (a.json)
			printf("{\"instance_id\":\"%s\",\"backend\":\"%s\"}\n",
			       msb_sandbox_instance_id(sb), msb_sandbox_backend_name(sb));
		else
			printf("%s\n", msb_sandbox_instance_id(sb));
	}
	msb_sandbox_free(sb);
	msb_router_free(router);
	return status;
}

static int cmd_exec(int argc, char **argv)
{
	struct ns_args a;
	int first;
	msb_router *router = NULL;
	msb_sandbox *sb = NULL;
	int status = acquire_common(&verb_exec, argc, argv, &a, &first, &router, &sb);
	if (status == 0 && first >= argc)
		status = cli_usage(&verb_exec, "no command given (put it after --)");
	if (status == 0) {
		msb_error *err = NULL;
		int r = run_in(sb, &a, argv + first, NULL, &err);
		status = r < 0 ? cli_fail(err) : r;
	}
	msb_sandbox_free(sb);
	msb_router_free(router);
	args_clear(&a);
	/* stopped by a signal while the command ran: die of it, as a shell
	 * expects of a command (the sandbox stays: it is the conversation's) */
	if (cli_exec_io_signal())
		raise(cli_exec_io_signal());
	return status;
}

static int cmd_ls(int argc, char **argv)
{
	struct ns_args a;
	int first = parse(&verb_ls, argc, argv, &a);
	if (first < 0)
		return 2;
	if (first < argc)
		return cli_usage(&verb_ls, "unexpected argument `%s`", argv[first]);
	/* The state root the backend resolves, by the one rule (ns_state.c). */
	cli_backend_flags bf = backend_flags(&a);
	msb_backend *b = NULL;
	msb_error *err = NULL;
	if (cli_backend_new(&bf, &b, &err) < 0)
		return cli_fail(err);
	int r = cli_ls_list(b, a.json, &err);
	msb_backend_unref(b);
	return r < 0 ? cli_fail(err) : 0;
}

static int cmd_dispose(int argc, char **argv)
{
	struct ns_args a;
	int first = parse(&verb_dispose, argc, argv, &a);
	if (first < 0)
		return 2;
	if (!a.thread)
		return cli_usage(&verb_dispose, "--thread is required");
	cli_backend_flags bf = backend_flags(&a);
	msb_backend *b = NULL;
	msb_error *err = NULL;
	if (cli_backend_new(&bf, &b, &err) < 0)
		return cli_fail(err);
	msb_key key = {a.scope, a.thread, a.agent, NULL};
	msb_disposal_failure *f = NULL;
	int r = msb_backend_dispose(b, &key, a.kind_set ? a.kind : NULL, NULL, &f, &err);
	msb_backend_unref(b);
	if (r < 0)
		return cli_fail(err);
	if (f) {
		fprintf(stderr, "msb: dispose failed (%s): %s\n", msb_disposal_code_name(f->code),
			f->detail ? f->detail : "");
		msb_disposal_failure_free(f);
		return 1;
	}
	return 0;
}

static int cmd_purge(int argc, char **argv)
{
	struct ns_args a;
	int first = parse(&verb_purge, argc, argv, &a);
	if (first < 0)
		return 2;
	if (!a.thread)
		return cli_usage(&verb_purge, "--thread is required");
	cli_backend_flags bf = backend_flags(&a);
	msb_backend *b = NULL;
	msb_error *err = NULL;
	if (cli_backend_new(&bf, &b, &err) < 0)
		return cli_fail(err);
	msb_scope_purge p = {0};
	int r = msb_backend_dispose_scope(b, a.scope, a.thread, &p, &err);
	/* And the warm pool of the state root: the sandboxes `msb run` left
	 * ready belong to no conversation, and a purge leaves none running
	 * (docs/pool.md). */
	size_t pooled = 0;
	if (r == 0)
		r = cli_pool_drain(b, &pooled, &err);
	msb_backend_unref(b);
	if (r < 0)
		return cli_fail(err);
	printf("disposed %llu sandbox(es)\n", (unsigned long long)p.disposed);
	if (pooled)
		printf("removed %zu pooled sandbox%s\n", pooled, pooled == 1 ? "" : "es");
	if (p.undisposed) {
		fprintf(stderr, "msb: %llu sandbox(es) could not be disposed\n",
			(unsigned long long)p.undisposed);
		return 1;
	}
	return 0;
}
