/* SPDX-License-Identifier: Apache-2.0 */
/*
 * msb pool fill|ls|drain: the warm pool of an `ns` backend, or of an `oci`
 * one (--runtime, or --config naming one; docs/pool.md). A pool is per
 * template, the backend's options and what of the spec does not depend on a
 * key, so `fill` takes the flags that make one (those of `msb run`: --image,
 * --memory, --pids, --cpu, --allow, and the configuration file's defaults);
 * a fill without them makes what `msb run` with the same backend claims.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <msb/ns.h>

#include "cli.h"

enum { OPT_SIZE = CLI_OPT_VERB, OPT_JSON, OPT_TEMPLATE };

static const cli_option pool_options[] = {
	{"size", "N",
	 "fill: how many pooled sandboxes to have (default: the backend's\n"
	 "`pool_size`, which the configuration's defaults.pool_size sets; at most 64)",
	 OPT_SIZE, CLI_VALUE_TEXT, NULL},
	CLI_OPTION_KIND(CLI_OPT_KIND),
	CLI_OPTION_IMAGE(CLI_OPT_IMAGE),
	CLI_OPTION_RUNTIME(CLI_OPT_RUNTIME),
	CLI_OPTION_MEMORY(CLI_OPT_MEMORY),
	CLI_OPTION_PIDS(CLI_OPT_PIDS),
	CLI_OPTION_CPU(CLI_OPT_CPU),
	CLI_OPTION_ALLOW(CLI_OPT_ALLOW),
	{"json", NULL, "ls: print a JSON array", OPT_JSON, CLI_VALUE_NONE, NULL},
	{"template", "ID", "drain: only the pool of this template (16 hex digits, as `ls` shows)",
	 OPT_TEMPLATE, CLI_VALUE_TEXT, NULL},
	CLI_OPTION_CONFIG(CLI_OPT_CONFIG),
	CLI_OPTION_STATE_DIR(CLI_OPT_STATE),
	CLI_OPTION_EGRESS_CONFIG(CLI_OPT_EGRESS_CONFIG),
	CLI_OPTION_END,
};

static int cmd_pool(int argc, char **argv);
const cli_verb verb_pool = {
	.name = "pool",
	.summary = "fill, list or drain the warm pool of ready `ns` sandboxes",
	.synopsis =
		"msb pool fill [--size N] [--kind K] [--image IMAGE] [--memory BYTES] [--pids N]\n"
		"                [--cpu MILLIS] [--allow HOST[=M,...]]...\n"
		"       msb pool ls [--json]\n"
		"       msb pool drain [--template ID]",
	.description =
		"fill   start pooled sandboxes of the template these flags make until N are\n"
		"       ready or starting, and wait for them\n"
		"ls     list the pooled sandboxes: name, template, state (ready, starting, stale)\n"
		"drain  take down and remove every pooled sandbox (of one template with\n"
		"       --template), waiting for those still starting; nothing is left behind\n"
		"\n"
		"`msb ls` lists pooled sandboxes too, as `pooled`. docs/pool.md.\n",
	.options = pool_options,
	.operands = "fill ls drain",
	.run = cmd_pool,
};

struct pool_args {
	cli_target t;
	uint64_t size;
	bool json;
	const char *template_id;
	bool fill_flags; /* a flag only `fill` takes was given */
};

static int parse_opts(int argc, char **argv, struct pool_args *a)
{
	struct option opts[24];
	if (!cli_getopt_table(&verb_pool, opts, 24))
		return 1;
	memset(a, 0, sizeof(*a));
	cli_target_init(&a->t);
	optind = 1;
	opterr = 0;
	int c;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		bool own = c == CLI_OPT_KIND || c == CLI_OPT_IMAGE || c == CLI_OPT_MEMORY ||
			   c == CLI_OPT_PIDS || c == CLI_OPT_CPU || c == CLI_OPT_ALLOW;
		int taken = cli_target_option(&a->t, &verb_pool, c, optarg);
		if (taken < 0)
			return 2;
		if (taken) {
			a->fill_flags |= own;
			continue;
		}
		if (c == OPT_SIZE) {
			if (!cli_parse_count(optarg, false, &a->size) || a->size > MSB_NS_POOL_MAX)
				return cli_usage(&verb_pool, "--size wants a count from 1 to %u",
						 MSB_NS_POOL_MAX);
			a->fill_flags = true;
		} else if (c == OPT_JSON) {
			a->json = true;
		} else if (c == OPT_TEMPLATE) {
			a->template_id = optarg;
		} else {
			return cli_usage(&verb_pool, "unknown option `%s`", argv[optind - 1]);
		}
	}
	if (optind >= argc)
		return cli_usage(&verb_pool, "name a sub-verb: fill, ls or drain");
	const char *sub = argv[optind++];
	if (strcmp(sub, "fill") && strcmp(sub, "ls") && strcmp(sub, "drain"))
		return cli_usage(&verb_pool, "unknown sub-verb `%s`: fill, ls or drain", sub);
	if (optind < argc)
		return cli_usage(&verb_pool, "unexpected argument `%s`", argv[optind]);
	if (a->fill_flags && strcmp(sub, "fill") != 0)
		return cli_usage(&verb_pool,
				 "--size, --kind, --image and the limits are options of "
				 "`msb pool fill`");
	if (a->json && strcmp(sub, "ls") != 0)
		return cli_usage(&verb_pool, "--json is an option of `msb pool ls`");
	if (a->template_id && strcmp(sub, "drain") != 0)
		return cli_usage(&verb_pool, "--template is an option of `msb pool drain`");
	if (!a->t.backend.config)
		a->t.backend.type = a->t.backend.runtime ? "oci" : "ns";
	cli_locate_helpers();
	return 0;
}

static int pool_fill(const struct pool_args *a, msb_backend *b, msb_error **err)
{
	/* The spec `msb run` makes from the same flags: the template is the
	 * backend's options and this spec's image, limits, work_dir and egress. */
	msb_spec_builder *sb = cli_target_spec(&a->t, MSB_CAP_EXEC);
	msb_spec *spec = NULL;
	int r = sb ? msb_spec_build(sb, &spec, err)
		   : msb_error_set(err, MSB_E_NOMEM, "out of memory");
	msb_spec_builder_free(sb);
	if (r < 0)
		return r;
	unsigned n = (unsigned)a->size; /* 0: the backend's pool_size */
	unsigned made = 0;
	r = msb_ns_pool_fill(b, spec, n, &made, err);
	msb_spec_unref(spec);
	if (r < 0)
		return r;
	printf("%u pooled sandbox%s started\n", made, made == 1 ? "" : "es");
	return 0;
}

static int pool_ls(const struct pool_args *a, msb_backend *b, msb_error **err)
{
	msb_ns_pool_entry *e = NULL;
	size_t n = 0;
	int r = msb_ns_pool_list(b, &e, &n, err);
	if (r < 0)
		return r;
	cli_ls_print(NULL, 0, e, n, msb_backend_name(b), a->json);
	msb_ns_pool_entries_free(e, n);
	return 0;
}

static int cmd_pool(int argc, char **argv)
{
	struct pool_args a;
	int r = parse_opts(argc, argv, &a);
	if (r != 0)
		return r;
	const char *sub = argv[optind - 1];
	msb_backend *b = NULL;
	msb_error *err = NULL;
	if (cli_backend_new(&a.t.backend, &b, &err) < 0)
		return cli_fail(err);
	if (!cli_pool_backend(b)) {
		msb_error_set(&err, MSB_E_VALUE,
			      "the warm pool is the `ns` and `oci` backends'; backend `%s` is "
			      "neither",
			      msb_backend_name(b));
		msb_backend_unref(b);
		return cli_fail(err);
	}
	if (strcmp(sub, "fill") == 0) {
		r = pool_fill(&a, b, &err);
	} else if (strcmp(sub, "ls") == 0) {
		r = pool_ls(&a, b, &err);
	} else {
		size_t removed = 0;
		r = msb_ns_pool_drain(b, a.template_id, &removed, &err);
		if (r == 0)
			printf("%zu pooled sandbox%s removed\n", removed, removed == 1 ? "" : "es");
	}
	msb_backend_unref(b);
	return r < 0 ? cli_fail(err) : 0;
}
