/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The sandbox verbs: run, acquire, exec, ls, dispose, purge. The backend is
 * the `ns` backend, or whatever backend JSON --config describes; either way
 * it is made from backend JSON (cli/backend_json.c). Every verb that creates
 * or uses a sandbox goes through the router, whose default floor is microvm:
 * the `ns` backend (container) is refused unless the caller opts down with
 * --min-isolation container.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include <jansson.h>
#include <msb/ns.h>
#include <msb/outputs.h>

#include "cli.h"

struct ns_args {
	const char *config; /* --config FILE: backend JSON */
	const char *state_dir;
	const char *image;
	const char *min_isolation;
	const char *scope;
	const char *thread;
	const char *agent;
	const char *kind;
	const char *call;
	const char *workdir;
	double timeout;
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
};

#define COMMON_HELP                                                                                \
	"  --config FILE         the backend as backend JSON (docs/policy.md); default\n"          \
	"                        {\"type\": \"ns\"}; the flags below write over its keys\n"        \
	"  --state-dir DIR       state root (default: $MSB_STATE_DIR, /run/msb)\n"                 \
	"  --image IMAGE         `host` (default), `dir:PATH` or `oci:PATH[:TAG]`\n"

#define KEY_HELP                                                                                   \
	"  --scope S             the key's scope (default: cli)\n"                                 \
	"  --thread T            the key's thread id (conversation)\n"                             \
	"  --agent A             the key's agent directory (default: cli)\n"                       \
	"  --kind K              the workload kind (default: shell)\n"

#define LIMITS_HELP                                                                                \
	"  --memory BYTES        memory limit, swap included (suffix K, M, G: powers of 1024)\n"   \
	"  --pids N              at most N processes and threads, the agent included\n"            \
	"  --cpu MILLIS          CPU time in thousandths of a core (500 = half a core)\n"

#define EGRESS_HELP                                                                                \
	"  --allow HOST[=M,...]  egress allowlist entry (repeatable; `=GET,HEAD` limits the\n"     \
	"                        methods); makes the spec's egress `allowlist`\n"                  \
	"  --egress-config FILE  the backend's egress settings (JSON, docs/egress.md)\n"           \
	"  --events FILE         append observer events (EgressObserved, ...) as JSON lines\n"

#define FLOOR_HELP                                                                                 \
	"  --min-isolation RUNG  the router's floor (default: microvm; `ns` is a container:\n"     \
	"                        pass --min-isolation container to opt down)\n"

static int cmd_run(int argc, char **argv);
static int cmd_acquire(int argc, char **argv);
static int cmd_exec(int argc, char **argv);
static int cmd_ls(int argc, char **argv);
static int cmd_dispose(int argc, char **argv);
static int cmd_purge(int argc, char **argv);

const cli_verb verb_run = {
	"run",
	"run a command in a fresh call-scoped sandbox, then dispose it",
	"usage: msb run [--min-isolation container] [--image IMAGE] [--timeout S] -- CMD [ARG...]\n"
	"\n"
	"Acquire a call-scoped sandbox through the router, run CMD in it (argv, never\n"
	"shell-split), print its output, dispose the sandbox, and exit with CMD's status.\n"
	"\n" FLOOR_HELP COMMON_HELP "  --workdir DIR         working directory relative to the "
	"storage base\n"
	"  --timeout S           the command's bound in seconds (default 300)\n"
	"  --max-output BYTES    stop the output at this many bytes (stdout+stderr)\n"
	"  --output PATH[:TYPE]  collect PATH (relative to the storage base) after CMD; TYPE is\n"
	"                        its media type, e.g. image/png (repeatable, up to 64)\n"
	"  --sink DIR            land collected outputs under DIR (an existing directory)\n"
	"  --replace             replace existing files in the sink (default: "
	"refuse)\n" LIMITS_HELP EGRESS_HELP,
	cmd_run,
};

const cli_verb verb_acquire = {
	"acquire",
	"get or create the sandbox for a key and kind",
	"usage: msb acquire --thread T [--scope S] [--agent A] [--kind K] [--min-isolation RUNG]\n"
	"\n"
	"Get-or-create through the router; prints the sandbox's instance id.\n"
	"\n" KEY_HELP FLOOR_HELP COMMON_HELP "  --json                print JSON\n" LIMITS_HELP,
	cmd_acquire,
};

const cli_verb verb_exec = {
	"exec",
	"run a command in the (warm) sandbox of a key and kind",
	"usage: msb exec --thread T [--scope S] [--agent A] [--kind K] [--min-isolation RUNG]\n"
	"                [--timeout S] [--workdir DIR] -- CMD [ARG...]\n"
	"\n"
	"Acquire (reusing a warm sandbox) and run CMD; exits with CMD's status.\n"
	"\n" KEY_HELP FLOOR_HELP COMMON_HELP
	"  --workdir DIR         working directory relative to the "
	"storage base\n"
	"  --timeout S           the command's bound in seconds (default 300)\n"
	"  --max-output BYTES    stop the output at this many bytes (stdout+stderr)\n" LIMITS_HELP
		EGRESS_HELP,
	cmd_exec,
};

const cli_verb verb_ls = {
	"ls",
	"list the sandboxes recorded under the state root",
	"usage: msb ls [--config FILE] [--state-dir DIR] [--json]\n"
	"\nSandboxes of the warm pool (msb pool) are listed as `pooled`.\n",
	cmd_ls,
};

const cli_verb verb_dispose = {
	"dispose",
	"dispose every sandbox of a key (optionally one kind)",
	"usage: msb dispose --thread T [--scope S] [--agent A] [--kind K] [--config FILE]\n"
	"                   [--state-dir DIR]\n"
	"\nExit status 0 when every sandbox is gone, 1 otherwise.\n",
	cmd_dispose,
};

const cli_verb verb_purge = {
	"purge",
	"dispose every sandbox of a conversation (scope and thread)",
	"usage: msb purge --scope S --thread T [--config FILE] [--state-dir DIR]\n"
	"\nSelects by the labels on disk, so it reaches sandboxes any process made.\n",
	cmd_purge,
};

/* The backend JSON of these flags (cli/backend_json.c). */
static cli_backend_flags backend_flags(const struct ns_args *a)
{
	cli_backend_flags f = {
		.config = a->config,
		.type = a->config ? NULL : "ns",
		.state_dir = a->state_dir,
		.image = a->image,
		.egress_config = a->egress_config,
	};
	return f;
}

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
};

static const struct option ns_opts[] = {
	{"state-dir", required_argument, NULL, OPT_STATE},
	{"image", required_argument, NULL, OPT_IMAGE},
	{"min-isolation", required_argument, NULL, OPT_FLOOR},
	{"scope", required_argument, NULL, OPT_SCOPE},
	{"thread", required_argument, NULL, OPT_THREAD},
	{"agent", required_argument, NULL, OPT_AGENT},
	{"kind", required_argument, NULL, OPT_KIND},
	{"timeout", required_argument, NULL, OPT_TIMEOUT},
	{"workdir", required_argument, NULL, OPT_WORKDIR},
	{"json", no_argument, NULL, OPT_JSON},
	{"max-output", required_argument, NULL, OPT_MAX_OUTPUT},
	{"memory", required_argument, NULL, OPT_MEMORY},
	{"pids", required_argument, NULL, OPT_PIDS},
	{"cpu", required_argument, NULL, OPT_CPU},
	{"output", required_argument, NULL, OPT_OUTPUT},
	{"sink", required_argument, NULL, OPT_SINK},
	{"replace", no_argument, NULL, OPT_REPLACE},
	{"allow", required_argument, NULL, OPT_ALLOW},
	{"egress-config", required_argument, NULL, OPT_EGRESS_CONFIG},
	{"events", required_argument, NULL, OPT_EVENTS},
	{"config", required_argument, NULL, OPT_CONFIG},
	{NULL, 0, NULL, 0},
};

/* A positive count, with a K/M/G suffix (powers of 1024) when `suffixes`. */
static bool parse_count(const char *s, bool suffixes, uint64_t *out)
{
	char *end = NULL;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || !end || end == s || s[0] == '-' || v == 0)
		return false;
	unsigned shift = 0;
	if (suffixes && *end && !end[1]) {
		switch (*end) {
		case 'K':
		case 'k':
			shift = 10;
			break;
		case 'M':
		case 'm':
			shift = 20;
			break;
		case 'G':
		case 'g':
			shift = 30;
			break;
		default:
			return false;
		}
		end++;
	}
	if (*end || v > (UINT64_MAX >> shift))
		return false;
	*out = (uint64_t)v << shift;
	return true;
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
	optind = 1;
	opterr = 0;
	int c;
	while ((c = getopt_long(argc, argv, "+", ns_opts, NULL)) != -1) {
		switch (c) {
		case OPT_CONFIG:
			a->config = optarg;
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
			if (!parse_count(optarg, true, &a->memory)) {
				cli_usage(verb,
					  "--memory wants a positive byte count (K, M, G allowed)");
				return -1;
			}
			break;
		case OPT_PIDS:
			if (!parse_count(optarg, false, &a->pids)) {
				cli_usage(verb, "--pids wants a positive count");
				return -1;
			}
			break;
		case OPT_CPU:
			if (!parse_count(optarg, false, &a->cpu)) {
				cli_usage(verb,
					  "--cpu wants a positive number of thousandths of a core");
				return -1;
			}
			break;
		case OPT_OUTPUT:
		case OPT_SINK:
		case OPT_REPLACE:
			if (verb != &verb_run) {
				cli_usage(verb, "--output, --sink and --replace are options of "
						"`msb run` only");
				return -1;
			}
			if (c == OPT_SINK) {
				a->sink = optarg;
				break;
			}
			if (c == OPT_REPLACE) {
				a->replace = true;
				break;
			}
			if (!parse_output(a, optarg)) {
				cli_usage(verb,
					  "--output wants PATH or PATH:MEDIA/TYPE (at most 64)");
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
		case OPT_EGRESS_CONFIG:
			a->egress_config = optarg;
			break;
		case OPT_EVENTS:
			a->events = optarg;
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
		default:
			cli_usage(verb, "unknown option `%s`", argv[optind - 1]);
			return -1;
		}
	}
	cli_locate_helpers();
	return optind;
}

/* What make_router() and parse() allocated for egress. */
static void args_clear(struct ns_args *a)
{
	msb_jsonl_recorder_free(a->recorder);
	a->recorder = NULL;
	if (a->events_fd >= 0)
		close(a->events_fd);
	a->events_fd = -1;
}

static int parse(const cli_verb *verb, int argc, char **argv, struct ns_args *a)
{
	int r = parse_opts(verb, argc, argv, a);
	if (r < 0) {
		free_outputs(a);
		args_clear(a);
	}
	return r;
}

/* The router over the one backend, at the floor the caller asked for. */
static int make_router(struct ns_args *a, msb_router **out, msb_error **err)
{
	msb_router_options ro = MSB_ROUTER_OPTIONS_INIT;
	ro.log = cli_log;
	if (a->min_isolation && msb_isolation_parse(a->min_isolation, &ro.min_isolation, err) < 0)
		return msb_error_wrap(err, "--min-isolation");
	msb_observer obs;
	if (a->events) {
		a->events_fd = open(a->events, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
		if (a->events_fd < 0)
			return msb_error_set(err, MSB_E_VALUE, "--events `%s`: %s", a->events,
					     strerror(errno));
		int q = msb_jsonl_recorder_new(a->events_fd, &a->recorder, &obs, err);
		if (q < 0)
			return q;
		ro.observer = &obs;
	}
	cli_backend_flags bf = backend_flags(a);
	msb_backend *b = NULL;
	int r = cli_backend_new(&bf, &b, err);
	if (r < 0)
		return r;
	const bool ns = msb_ns_backend_state_root(b) != NULL;
	r = msb_router_new(&b, 1, &ro, out, err);
	msb_backend_unref(b);
	if (r == MSB_E_BACKEND_NOT_PERMITTED && !a->min_isolation && ns)
		msb_error_wrap(err, "the default floor is microvm and `ns` is a container sandbox; "
				    "pass --min-isolation container to opt down");
	return r;
}

static int make_spec(struct ns_args *a, bool call_scoped, msb_spec **out, msb_error **err)
{
	msb_spec_builder *sb = msb_spec_builder_new(a->kind);
	if (!sb)
		return msb_error_set(err, MSB_E_NOMEM, "out of memory");
	msb_spec_builder_set_requires(sb, a->n_outputs ? MSB_CAP_EXEC | MSB_CAP_FILES_OUT
						       : MSB_CAP_EXEC);
	for (size_t i = 0; i < a->n_outputs; i++)
		msb_spec_builder_add_declared_output(sb, &a->outputs[i]);
	if (call_scoped)
		msb_spec_builder_set_isolation_scope(sb, MSB_SCOPE_CALL);
	msb_spec_builder_set_memory_bytes(sb, a->memory);
	msb_spec_builder_set_pids_max(sb, a->pids);
	msb_spec_builder_set_cpu_millis(sb, a->cpu);
	if (a->n_allow)
		msb_spec_builder_set_egress(sb, MSB_EGRESS_ALLOWLIST);
	for (size_t i = 0; i < a->n_allow; i++) {
		/* HOST or HOST=M1,M2 */
		char buf[512];
		snprintf(buf, sizeof(buf), "%s", a->allow[i]);
		char *eq = strchr(buf, '=');
		if (!eq) {
			msb_spec_builder_add_egress_host(sb, buf);
			continue;
		}
		*eq = '\0';
		const char *methods[32];
		size_t nm = 0;
		char *save = NULL;
		for (char *m = strtok_r(eq + 1, ",", &save); m && nm < 32;
		     m = strtok_r(NULL, ",", &save))
			methods[nm++] = m;
		msb_spec_builder_add_egress_rule(sb, buf, methods, nm);
	}
	int r = msb_spec_build(sb, out, err);
	msb_spec_builder_free(sb);
	return r;
}

static int write_all(int fd, const uint8_t *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static int run_in(msb_sandbox *sb, struct ns_args *a, char **cmd, msb_error **err)
{
	msb_exec_request req = MSB_EXEC_REQUEST_INIT;
	req.argv = (const char *const *)cmd;
	req.timeout = a->timeout;
	req.working_directory = a->workdir;
	req.max_output_bytes = a->max_output;
	msb_exec_result res = {0};
	int r = a->max_output ? msb_sandbox_exec_bounded(sb, &req, &res, err)
			      : msb_sandbox_exec(sb, &req, &res, err);
	if (r < 0)
		return r;
	write_all(STDOUT_FILENO, res.stdout_bytes, res.stdout_len);
	write_all(STDERR_FILENO, res.stderr_bytes, res.stderr_len);
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
	int status = res.exit_code;
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
	if (make_spec(&a, true, &spec, &err) < 0) {
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
	int status;
	if (msb_router_acquire(router, &key, spec, &ao, &sb, &err) < 0) {
		status = cli_fail(err);
	} else {
		int r = run_in(sb, &a, argv + first, &err);
		status = r < 0 ? cli_fail(err) : r;
		if (r >= 0 && a.n_outputs)
			status = collect(sb, spec, sink, call, &a, status);
		msb_sandbox_release(sb);
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
	msb_sandbox_release(sb);
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
		int r = run_in(sb, &a, argv + first, &err);
		status = r < 0 ? cli_fail(err) : r;
	}
	msb_sandbox_release(sb);
	msb_router_free(router);
	args_clear(&a);
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
	msb_ns_options o = MSB_NS_OPTIONS_INIT;
	o.state_root = msb_ns_backend_state_root(b);
	msb_ns_entry *e = NULL;
	size_t n = 0;
	int r = o.state_root ? msb_ns_list(&o, &e, &n, &err)
			     : msb_error_set(&err, MSB_E_VALUE,
					     "msb ls lists what an `ns` backend keeps on disk; "
					     "backend `%s` is not one",
					     msb_backend_name(b));
	if (r < 0) {
		msb_backend_unref(b);
		return cli_fail(err);
	}
	if (a.json)
		printf("[");
	for (size_t i = 0; i < n; i++) {
		/* dead: its agent or shim died unasked, kept until disposed of
		 * (issue 15); stale: never started or taken down on purpose */
		const char *state = e[i].alive ? "running" : e[i].dead ? "dead" : "stale";
		if (a.json) {
			json_t *why = e[i].reason ? json_string(e[i].reason) : json_null();
			char *why_text = why ? json_dumps(why, JSON_ENCODE_ANY) : NULL;
			json_decref(why);
			printf("%s{\"name\":\"%s\",\"scope\":\"%s\",\"thread_id\":\"%s\","
			       "\"agent_dir\":\"%s\",\"kind\":\"%s\",\"instance_id\":\"%s\","
			       "\"alive\":%s,\"state\":\"%s\",\"reason\":%s}",
			       i ? "," : "", e[i].name, e[i].scope, e[i].thread_id, e[i].agent_dir,
			       e[i].kind, e[i].instance_id, e[i].alive ? "true" : "false", state,
			       why_text ? why_text : "null");
			free(why_text);
		} else {
			printf("%s  %-8s scope=%s thread=%s agent=%s kind=%s%s%s%s%s\n", e[i].name,
			       state, e[i].scope, e[i].thread_id, e[i].agent_dir, e[i].kind,
			       e[i].call_id ? " call=" : "", e[i].call_id ? e[i].call_id : "",
			       e[i].reason ? ": " : "", e[i].reason ? e[i].reason : "");
		}
	}
	/* The warm pool's sandboxes, as `pooled` (docs/pool.md). */
	r = cli_pool_print(b, a.json, n > 0, &err);
	msb_backend_unref(b);
	if (a.json)
		printf("]\n");
	msb_ns_entries_free(e, n);
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
	msb_backend_unref(b);
	if (r < 0)
		return cli_fail(err);
	printf("disposed %llu sandbox(es)\n", (unsigned long long)p.disposed);
	if (p.undisposed) {
		fprintf(stderr, "msb: %llu sandbox(es) could not be disposed\n",
			(unsigned long long)p.undisposed);
		return 1;
	}
	return 0;
}
