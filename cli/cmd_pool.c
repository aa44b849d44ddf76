/* SPDX-License-Identifier: Apache-2.0 */
/*
 * msb pool fill|ls|drain: the `ns` warm pool (docs/pool.md), and the pooled
 * sandboxes `msb ls` lists. A pool is per template, the backend's options and
 * what of the spec does not depend on a key, so `fill` takes the flags that
 * make one (those of `msb run`: --image, --memory, --pids, --cpu, --allow);
 * a fill without them makes what `msb run` with the same backend claims.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"

static int cmd_pool(int argc, char **argv);

const cli_verb verb_pool = {
	"pool",
	"fill, list or drain the warm pool of ready `ns` sandboxes",
	"usage: msb pool fill [--size N] [--kind K] [--image IMAGE] [--memory BYTES] [--pids N]\n"
	"                     [--cpu MILLIS] [--allow HOST[=METHOD,...]]... [COMMON]\n"
	"       msb pool ls [--json] [COMMON]\n"
	"       msb pool drain [--template ID] [COMMON]\n"
	"\n"
	"fill   start pooled sandboxes of the template these flags make until N (default:\n"
	"       the backend JSON's `pool_size`) are ready, and wait for them\n"
	"ls     list the pooled sandboxes: name, template, state (ready, starting, stale)\n"
	"drain  take down and remove every pooled sandbox (of one template with\n"
	"       --template), waiting for those still starting; nothing is left behind\n"
	"\n"
	"COMMON: --config FILE (backend JSON), --state-dir DIR, --egress-config FILE\n",
	cmd_pool,
};

enum {
	OPT_CONFIG = 1000,
	OPT_STATE,
	OPT_IMAGE,
	OPT_EGRESS_CONFIG,
	OPT_SIZE,
	OPT_KIND,
	OPT_MEMORY,
	OPT_PIDS,
	OPT_CPU,
	OPT_ALLOW,
	OPT_JSON,
	OPT_TEMPLATE,
};

static const struct option pool_opts[] = {
	{"config", required_argument, NULL, OPT_CONFIG},
	{"state-dir", required_argument, NULL, OPT_STATE},
	{"image", required_argument, NULL, OPT_IMAGE},
	{"egress-config", required_argument, NULL, OPT_EGRESS_CONFIG},
	{"size", required_argument, NULL, OPT_SIZE},
	{"kind", required_argument, NULL, OPT_KIND},
	{"memory", required_argument, NULL, OPT_MEMORY},
	{"pids", required_argument, NULL, OPT_PIDS},
	{"cpu", required_argument, NULL, OPT_CPU},
	{"allow", required_argument, NULL, OPT_ALLOW},
	{"json", no_argument, NULL, OPT_JSON},
	{"template", required_argument, NULL, OPT_TEMPLATE},
	{NULL, 0, NULL, 0},
};

#define MAX_ALLOW 64

struct pool_args {
	cli_backend_flags bf;
	uint64_t size, memory, pids, cpu;
	const char *kind;
	const char *allow[MAX_ALLOW];
	size_t n_allow;
	bool json;
	const char *template_id;
};

/* A positive count; with `suffixes`, K, M or G (powers of 1024). */
static bool parse_count(const char *s, bool suffixes, uint64_t *out)
{
	char *end = NULL;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || !end || end == s || s[0] == '-' || v == 0)
		return false;
	unsigned shift = 0;
	if (suffixes && *end && !end[1]) {
		const char *units = "kKmMgG";
		const char *u = strchr(units, *end);
		if (!u)
			return false;
		shift = 10 * (unsigned)(1 + (u - units) / 2);
		end++;
	}
	if (*end || v > (UINT64_MAX >> shift))
		return false;
	*out = (uint64_t)v << shift;
	return true;
}

/* "--name" of option value c, for messages (argv[optind - 1] is the
 * option's argument when it takes one). */
static const char *opt_name(int c)
{
	static char buf[40];
	for (size_t i = 0; pool_opts[i].name; i++)
		if (pool_opts[i].val == c) {
			snprintf(buf, sizeof(buf), "--%s", pool_opts[i].name);
			return buf;
		}
	return "?";
}

static int parse_opts(const char *sub, int argc, char **argv, struct pool_args *a)
{
	memset(a, 0, sizeof(*a));
	a->kind = "shell";
	optind = 1;
	opterr = 0;
	bool fill = strcmp(sub, "fill") == 0;
	int c;
	while ((c = getopt_long(argc, argv, "+", pool_opts, NULL)) != -1) {
		switch (c) {
		case OPT_CONFIG:
			a->bf.config = optarg;
			break;
		case OPT_STATE:
			a->bf.state_dir = optarg;
			break;
		case OPT_EGRESS_CONFIG:
			a->bf.egress_config = optarg;
			break;
		case OPT_IMAGE:
		case OPT_SIZE:
		case OPT_KIND:
		case OPT_MEMORY:
		case OPT_PIDS:
		case OPT_CPU:
		case OPT_ALLOW:
			if (!fill)
				return cli_usage(&verb_pool, "%s is an option of `msb pool fill`",
						 opt_name(c));
			if (c == OPT_IMAGE)
				a->bf.image = optarg;
			else if (c == OPT_KIND)
				a->kind = optarg;
			else if (c == OPT_ALLOW && a->n_allow < MAX_ALLOW)
				a->allow[a->n_allow++] = optarg;
			else if (c == OPT_ALLOW)
				return cli_usage(&verb_pool, "at most %d --allow entries",
						 MAX_ALLOW);
			else if (!parse_count(optarg, c == OPT_MEMORY,
					      c == OPT_SIZE	? &a->size
					      : c == OPT_MEMORY ? &a->memory
					      : c == OPT_PIDS	? &a->pids
								: &a->cpu))
				return cli_usage(&verb_pool, "%s wants a positive count",
						 opt_name(c));
			break;
		case OPT_JSON:
			if (strcmp(sub, "ls") != 0)
				return cli_usage(&verb_pool,
						 "--json is an option of `msb pool ls`");
			a->json = true;
			break;
		case OPT_TEMPLATE:
			if (strcmp(sub, "drain") != 0)
				return cli_usage(&verb_pool,
						 "--template is an option of `msb pool drain`");
			a->template_id = optarg;
			break;
		default:
			return cli_usage(&verb_pool, "unknown option `%s`", argv[optind - 1]);
		}
	}
	if (optind < argc)
		return cli_usage(&verb_pool, "unexpected argument `%s`", argv[optind]);
	if (!a->bf.config)
		a->bf.type = "ns";
	if (a->size > 64)
		return cli_usage(&verb_pool, "--size is at most 64");
	cli_locate_helpers();
	return 0;
}

/* The spec `msb run` makes from the same flags: the template is the
 * backend's options and this spec's image, limits, work_dir and egress. */
static int make_spec(const struct pool_args *a, msb_spec **out, msb_error **err)
{
	msb_spec_builder *sb = msb_spec_builder_new(a->kind);
	if (!sb)
		return msb_error_set(err, MSB_E_NOMEM, "out of memory");
	msb_spec_builder_set_requires(sb, MSB_CAP_EXEC);
	msb_spec_builder_set_memory_bytes(sb, a->memory);
	msb_spec_builder_set_pids_max(sb, a->pids);
	msb_spec_builder_set_cpu_millis(sb, a->cpu);
	if (a->n_allow)
		msb_spec_builder_set_egress(sb, MSB_EGRESS_ALLOWLIST);
	for (size_t i = 0; i < a->n_allow; i++) {
		/* HOST or HOST=M1,M2: the rules are given at claim, not pooled,
		 * but they make the spec an allowlist one. */
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

static int pool_fill(const struct pool_args *a, msb_backend *b, msb_error **err)
{
	msb_spec *spec = NULL;
	int r = make_spec(a, &spec, err);
	if (r < 0)
		return r;
	unsigned made = 0;
	r = msb_ns_pool_fill(b, spec, (unsigned)a->size, &made, err);
	msb_spec_unref(spec);
	if (r < 0)
		return r;
	printf("%u pooled sandbox%s started\n", made, made == 1 ? "" : "es");
	return 0;
}

int cli_pool_print(const msb_backend *b, bool json, bool after_another, msb_error **err)
{
	msb_ns_pool_entry *e = NULL;
	size_t n = 0;
	int r = msb_ns_pool_list(b, &e, &n, err);
	if (r < 0)
		return r;
	int64_t now = 0;
	struct timespec ts;
	if (clock_gettime(CLOCK_REALTIME, &ts) == 0)
		now = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
	for (size_t i = 0; i < n; i++) {
		double age = e[i].created_ns && now > e[i].created_ns
				     ? (double)(now - e[i].created_ns) / 1e9
				     : 0;
		bool ready = strcmp(e[i].state, "ready") == 0;
		if (json)
			printf("%s{\"name\":\"%s\",\"scope\":null,\"thread_id\":null,"
			       "\"agent_dir\":null,\"kind\":null,\"instance_id\":null,"
			       "\"alive\":%s,\"state\":\"pooled\",\"reason\":null,"
			       "\"pool\":{\"template\":\"%s\",\"state\":\"%s\",\"shim_pid\":"
			       "%" PRId64 ",\"age_s\":%.1f}}",
			       after_another || i ? "," : "", e[i].name, ready ? "true" : "false",
			       e[i].template_id, e[i].state, e[i].shim_pid, age);
		else
			printf("%s  pooled   template=%s %s, %.0f s old\n", e[i].name,
			       e[i].template_id, e[i].state, age);
	}
	msb_ns_pool_entries_free(e, n);
	return 0;
}

static int cmd_pool(int argc, char **argv)
{
	if (argc < 2)
		return cli_usage(&verb_pool, "fill, ls or drain?");
	const char *sub = argv[1];
	if (strcmp(sub, "fill") && strcmp(sub, "ls") && strcmp(sub, "drain"))
		return cli_usage(&verb_pool, "unknown subcommand `%s`", sub);
	struct pool_args a;
	int r = parse_opts(sub, argc - 1, argv + 1, &a);
	if (r != 0)
		return r;
	msb_backend *b = NULL;
	msb_error *err = NULL;
	if (cli_backend_new(&a.bf, &b, &err) < 0)
		return cli_fail(err);
	if (!msb_ns_backend_state_root(b)) {
		msb_error_set(&err, MSB_E_VALUE,
			      "the warm pool is the `ns` backend's; backend `%s` is not one",
			      msb_backend_name(b));
		msb_backend_unref(b);
		return cli_fail(err);
	}
	if (strcmp(sub, "fill") == 0) {
		r = pool_fill(&a, b, &err);
	} else if (strcmp(sub, "ls") == 0) {
		if (a.json)
			printf("[");
		r = cli_pool_print(b, a.json, false, &err);
		if (a.json)
			printf("]\n");
	} else {
		size_t removed = 0;
		r = msb_ns_pool_drain(b, a.template_id, &removed, &err);
		if (r == 0)
			printf("%zu pooled sandbox%s removed\n", removed, removed == 1 ? "" : "es");
	}
	msb_backend_unref(b);
	return r < 0 ? cli_fail(err) : 0;
}
