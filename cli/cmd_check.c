/* SPDX-License-Identifier: Apache-2.0 */
/* msb check: the seed's wiring test - would this router serve this spec? */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli.h"

enum { OPT_SPEC = CLI_OPT_VERB, OPT_ROUTER, OPT_JSON };

static const cli_option check_options[] = {
	{"spec", "FILE", "the SandboxSpec as JSON (docs/spec.md); - for stdin", OPT_SPEC,
	 CLI_VALUE_FILE, NULL},
	{"router", "FILE",
	 "the router as JSON (docs/policy.md); default: the\n"
	 "configuration's router and backend (msb config show)",
	 OPT_ROUTER, CLI_VALUE_FILE, NULL},
	{"json", NULL, "print one JSON object instead of text", OPT_JSON, CLI_VALUE_NONE, NULL},
	CLI_OPTION_END,
};

const cli_verb verb_check = {
	.name = "check",
	.summary = "the wiring test: which backend would serve a spec, or the refusal",
	.synopsis = "msb check --spec SPEC.json [--router ROUTER.json] [--json]",
	.description =
		"Build the router and run every check acquire would run, without acquiring.\n"
		"Prints the backend that would serve the spec, or the refusal's name and\n"
		"message; then why: which backend selection picked and why every other one\n"
		"was passed over. The exit status follows the refusal's class (3 for a policy\n"
		"refusal).\n",
	.options = check_options,
	.run = cmd_check,
};

/* Why that backend (msb_router_explain): the pick and every backend passed
 * over, one line each. */
static void print_why(const msb_route_explanation *why)
{
	printf("why: %s\n", why->summary);
	for (size_t i = 0; i < why->n_steps; i++) {
		const msb_route_step *s = &why->steps[i];
		printf("  %-16s %s: %s\n", s->backend,
		       s->serves  ? "serves"
		       : s->tried ? "refused"
				  : "passed over",
		       s->reason);
	}
}

static int print_result(bool as_json, const msb_spec *spec, msb_backend *backend,
			msb_isolation_scope scope, const msb_route_explanation *why,
			msb_error *refusal)
{
	if (as_json) {
		json_t *o;
		if (refusal)
			o = json_pack("{s:b, s:s, s:s, s:s}", "served", 0, "kind",
				      msb_spec_kind(spec), "error", msb_error_name(refusal),
				      "message", msb_error_message(refusal));
		else
			o = json_pack("{s:b, s:s, s:s, s:s, s:s}", "served", 1, "kind",
				      msb_spec_kind(spec), "backend", msb_backend_name(backend),
				      "isolation", msb_backend_isolation(backend),
				      "isolation_scope", msb_isolation_scope_name(scope));
		char *route = NULL;
		if (o && why && msb_route_explanation_to_json(why, &route, NULL) == 0)
			json_object_set_new(o, "route", json_loads(route, 0, NULL));
		free(route);
		char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
		json_decref(o);
		if (text)
			printf("%s\n", text);
		free(text);
	} else if (refusal) {
		printf("refused: %s: %s\n", msb_error_name(refusal), msb_error_message(refusal));
	} else {
		printf("served: kind `%s` by backend `%s` (isolation %s, scope %s)\n",
		       msb_spec_kind(spec), msb_backend_name(backend),
		       msb_backend_isolation(backend), msb_isolation_scope_name(scope));
	}
	if (!as_json && why)
		print_why(why);
	int status = refusal ? msb_code_exit_status(msb_error_code(refusal)) : 0;
	msb_error_free(refusal);
	return status;
}

int cmd_check(int argc, char **argv)
{
	struct option opts[8];
	if (!cli_getopt_table(&verb_check, opts, 8))
		return 1;
	const char *spec_path = NULL, *router_path = NULL;
	bool as_json = false;
	int c;
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case OPT_SPEC:
			spec_path = optarg;
			break;
		case OPT_ROUTER:
			router_path = optarg;
			break;
		case OPT_JSON:
			as_json = true;
			break;
		default:
			return cli_usage(&verb_check, "unknown option `%s`", argv[optind - 1]);
		}
	}
	if (optind < argc)
		return cli_usage(&verb_check, "unexpected argument `%s`", argv[optind]);
	if (!spec_path)
		return cli_usage(&verb_check, "--spec is required");

	msb_error *err = NULL;
	char *text = NULL;
	size_t len = 0;
	msb_spec *spec = NULL;
	if (cli_read_file(spec_path, &text, &len, &err) < 0)
		return cli_fail(err);
	int r = msb_spec_from_json(text, len, &spec, &err);
	free(text);
	if (r < 0) {
		msb_error_wrap(&err, "spec `%s`", spec_path);
		return cli_fail(err);
	}

	/* --router, else what `msb run` would use: the configuration's router
	 * and backend (cli/backend_json.c). */
	char *router_text = NULL;
	size_t router_len = 0;
	cli_backend_flags bf = {0};
	r = router_path ? cli_read_file(router_path, &router_text, &router_len, &err)
			: cli_router_json(&bf, NULL, &router_text, &err);
	if (r < 0) {
		msb_spec_unref(spec);
		return cli_fail(err);
	}
	if (!router_path)
		router_len = strlen(router_text);
	msb_router_options extra = MSB_ROUTER_OPTIONS_INIT;
	extra.log = cli_log;
	msb_router *router = NULL;
	r = msb_router_from_json(router_text, router_len, &extra, &router, &err);
	free(router_text);
	if (r < 0) {
		/* A router that cannot be built is itself the answer to the wiring
		 * test (e.g. the floor refuses the backend at construction). */
		int status = print_result(as_json, spec, NULL, MSB_SCOPE_CONVERSATION, NULL, err);
		msb_spec_unref(spec);
		return status;
	}
	msb_backend *backend = NULL;
	msb_isolation_scope scope = MSB_SCOPE_CONVERSATION;
	r = msb_router_resolve(router, spec, &backend, &scope, &err);
	msb_route_explanation why = {0};
	msb_error *werr = NULL;
	if (msb_router_explain(router, spec, &why, &werr) < 0)
		msb_error_free(werr); /* memory only: the verdict stands without its why */
	int status = print_result(as_json, spec, backend, scope, why.summary ? &why : NULL,
				  r < 0 ? err : NULL);
	msb_route_explanation_clear(&why);
	msb_router_free(router);
	msb_spec_unref(spec);
	return status;
}
