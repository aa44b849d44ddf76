/* SPDX-License-Identifier: Apache-2.0 */
/*
 * msb conformance BACKEND: run every conformance suite the backend declares
 * (checklist section 18) against a fresh sandbox per suite, straight through
 * the backend (no router: conformance attacks the backend itself), and print
 * a table or JSON. --escape runs the in-sandbox escape suite instead
 * (cmd_escape.c).
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>
#include <msb/conformance.h>

#include "cli.h"
#include "conformance_cli.h"

static int cmd_conformance(int argc, char **argv);

enum {
	OPT_CONFIG = CLI_OPT_VERB,
	OPT_SUITE,
	OPT_JSON,
	OPT_ALLOWED,
	OPT_DENIED,
	OPT_STATE,
	OPT_IMAGE,
	OPT_ESCAPE,
};

static const cli_option conformance_options[] = {
	{"config", "FILE",
	 "the backend as backend JSON, the same object a router's\n"
	 "`backends` list takes (docs/policy.md); `type` defaults\n"
	 "to BACKEND. E.g. {\"type\": \"ns\", \"state_dir\": ...,\n"
	 "\"egress\": {...}} or {\"type\": \"fake\", \"declarations\": {...}}",
	 OPT_CONFIG, CLI_VALUE_FILE, NULL},
	{"suite", "NAME", "run only this suite (repeatable; case-insensitive)", OPT_SUITE,
	 CLI_VALUE_WORDS,
	 "files_in files_out exec files_delete egress call_scope reclaim nothing_left_behind"},
	{"allowed-url", "URL", "EGRESS: a URL on the allowlist that answers 2xx", OPT_ALLOWED,
	 CLI_VALUE_TEXT, NULL},
	{"denied-url", "URL", "EGRESS: a URL off the allowlist that would answer 2xx", OPT_DENIED,
	 CLI_VALUE_TEXT, NULL},
	{"state-dir", "DIR", "the backend JSON's `state_dir` (ns: its state root)", OPT_STATE,
	 CLI_VALUE_DIR, NULL},
	{"image", "IMAGE", "the backend JSON's `image` (ns: `host`, `dir:PATH`, `oci:PATH`)",
	 OPT_IMAGE, CLI_VALUE_TEXT, NULL},
	{"escape", NULL, "run the in-sandbox escape suite instead (docs/security.md)", OPT_ESCAPE,
	 CLI_VALUE_NONE, NULL},
	{"json", NULL, "print one JSON object instead of the table", OPT_JSON, CLI_VALUE_NONE,
	 NULL},
	CLI_OPTION_END,
};

const cli_verb verb_conformance = {
	.name = "conformance",
	.summary = "run the conformance suites (or --escape, the escape suite) against a backend",
	.synopsis = "msb conformance BACKEND [--config FILE] [--suite NAME]... [--json]\n"
		    "                       [--state-dir DIR] [--image IMAGE]\n"
		    "                       [--allowed-url URL --denied-url URL]\n"
		    "       msb conformance --escape BACKEND [--config FILE] [--json] [--state-dir "
		    "DIR]",
	.description =
		"BACKEND is a backend type (`msb doctor` lists them): `fake` (the in-process "
		"fake,\n"
		"with its emulated POSIX guest) or `ns`; it may be left out when --config names "
		"it.\n"
		"Runs every suite the backend declares - FILES_IN, FILES_OUT, EXEC, "
		"FILES_DELETE,\n"
		"EGRESS, CALL_SCOPE, RECLAIM, NOTHING_LEFT_BEHIND - each against a fresh "
		"sandbox,\n"
		"and prints one row per probe: suite, probe, outcome, and the reason the probe\n"
		"exists (docs/conformance.md). A suite the backend does not declare is listed as\n"
		"such and runs nothing. Exit status 0 when no probe failed, 9 when one did.\n",
	.options = conformance_options,
	.run = cmd_conformance,
};

/* ---- backends ----------------------------------------------------------------- */

int cli_conformance_prepare(cli_conformance_args *a, msb_error **err)
{
	cli_backend_flags f = {
		.config = a->config,
		.type = a->backend,
		.state_dir = a->state_dir,
		.image = a->image,
	};
	int r = cli_backend_object(&f, &a->json_config, err);
	if (r < 0)
		return r;
	json_t *o = a->json_config;
	a->backend = json_string_value(json_object_get(o, "type")); /* lives in o */
	/* `msb conformance fake` is the fake with its emulated POSIX guest: the
	 * suites verify through a shell's handful of commands. */
	if (a->backend && strcmp(a->backend, "fake") == 0 &&
	    ((!json_object_get(o, "name") &&
	      json_object_set_new(o, "name", json_string("fake")) < 0) ||
	     (!json_object_get(o, "posix_guest") &&
	      json_object_set_new(o, "posix_guest", json_true()) < 0)))
		return msb_error_set(err, MSB_E_NOMEM, "out of memory");
	if (!(a->backend_json = json_dumps(o, JSON_COMPACT)))
		return msb_error_set(err, MSB_E_NOMEM, "out of memory");
	/* ns: msb-shim and msb-agent beside this binary in a build tree. */
	cli_locate_helpers();
	/* Made once here so a bad description fails before any output, and so
	 * the escape suite knows where the backend keeps its state. */
	msb_backend *b = NULL;
	if ((r = cli_conformance_backend(a, &b, err)) < 0)
		return r;
	msb_backend_unref(b);
	return 0;
}

void cli_conformance_clear(cli_conformance_args *a)
{
	free(a->backend_json);
	a->backend_json = NULL;
	json_decref(a->json_config);
	a->json_config = NULL;
}

int cli_conformance_backend(cli_conformance_args *a, msb_backend **out, msb_error **err)
{
	*out = NULL;
	int r = msb_backend_from_json(a->backend_json, strlen(a->backend_json), out, err);
	if (r < 0)
		return a->config ? msb_error_wrap(err, "--config `%s`", a->config) : r;
	/* One state-root rule: the one the ns (or oci) backend resolved. */
	const char *sub = "";
	const char *root = cli_backend_state_root(*out, &sub);
	snprintf(a->state_root, sizeof(a->state_root), "%s", root ? root : "");
	snprintf(a->state_sub, sizeof(a->state_sub), "%s", root ? sub : "");
	return 0;
}

/* ---- one suite ------------------------------------------------------------------- */

struct run {
	cli_conformance_args *a;
	char thread[40];
	json_t *suites; /* JSON output */
	size_t passed, failed, skipped;
};

static void row(const char *suite, const char *probe, const char *outcome, const char *why,
		const char *detail)
{
	printf("%-20s %-56s %-8s %s\n", suite, probe, outcome, why);
	if (detail)
		printf("%-20s %-56s %-8s   -> %s\n", "", "", "", detail);
}

static void not_run(struct run *rn, const char *suite, const char *reason)
{
	if (rn->a->json)
		json_array_append_new(rn->suites, json_pack("{s:s, s:b, s:s}", "suite", suite,
							    "ran", 0, "reason", reason));
	else
		row(suite, "(suite not run)", "-", reason, NULL);
}

static void record(struct run *rn, const msb_conformance_report *rep)
{
	for (size_t i = 0; i < rep->n_results; i++) {
		const msb_probe_result *p = &rep->results[i];
		if (p->outcome == MSB_PROBE_PASSED)
			rn->passed++;
		else if (p->outcome == MSB_PROBE_FAILED)
			rn->failed++;
		else
			rn->skipped++;
		if (!rn->a->json)
			row(rep->suite, p->name, msb_probe_outcome_name(p->outcome), p->why,
			    p->detail);
	}
	if (rn->a->json) {
		char *text = msb_conformance_report_json(rep);
		json_t *o = text ? json_loads(text, 0, NULL) : NULL;
		free(text);
		if (o) {
			json_object_set_new(o, "ran", json_true());
			json_array_append_new(rn->suites, o);
		}
	}
}

/* A suite that could not run at all is one failure, with the reason. */
static void broke(struct run *rn, const char *suite, msb_error *err)
{
	char *why = NULL;
	if (asprintf(&why, "%s: %s", msb_error_name(err), msb_error_message(err)) < 0)
		why = NULL;
	rn->failed++;
	if (rn->a->json)
		json_array_append_new(rn->suites, json_pack("{s:s, s:b, s:s?}", "suite", suite,
							    "ran", 0, "error", why));
	else
		row(suite, "(suite could not run)", "failed", why ? why : "?", NULL);
	free(why);
	msb_error_free(err);
}

struct nlb_call {
	msb_sandbox *sb;
	char dir[48];
};

/* The kind's call: make a call directory, write in it, reclaim it. */
static int nlb_call(void *ud, msb_error **err)
{
	struct nlb_call *c = ud;
	const char *mk[] = {"mkdir", "-p", c->dir, NULL};
	char file[80];
	snprintf(file, sizeof(file), "%s/out.txt", c->dir);
	const char *tee[] = {"tee", file, NULL};
	const char *const *steps[] = {mk, tee};
	for (size_t i = 0; i < 2; i++) {
		msb_exec_request req = MSB_EXEC_REQUEST_INIT;
		req.argv = steps[i];
		req.stdin_data = (const uint8_t *)"call output\n";
		req.stdin_len = 12;
		msb_exec_result res = {0};
		int r = msb_sandbox_exec(c->sb, &req, &res, err);
		int code = res.exit_code;
		msb_exec_result_clear(&res);
		if (r < 0)
			return r;
		if (code != 0)
			return msb_error_set(err, MSB_E_RUNTIME, "`%s` exited %d", steps[i][0],
					     code);
	}
	return msb_sandbox_reclaim(c->sb, c->dir, NULL, 30, err);
}

static bool declared(const msb_declarations *d, msb_conformance_suite s, const char **why)
{
	msb_capset caps = d->capabilities;
	switch (s) {
	case MSB_SUITE_FILES_IN:
		*why = "the backend does not declare files_in";
		return caps & MSB_CAP_FILES_IN;
	case MSB_SUITE_FILES_OUT:
		*why = "the backend does not declare files_out";
		return caps & MSB_CAP_FILES_OUT;
	case MSB_SUITE_EXEC:
		*why = "the backend does not declare exec";
		return caps & MSB_CAP_EXEC;
	case MSB_SUITE_FILES_DELETE:
		*why = "the backend does not declare files_delete";
		return caps & MSB_CAP_FILES_DELETE;
	case MSB_SUITE_RECLAIM:
		*why = "the backend does not declare reclaim";
		return caps & MSB_CAP_RECLAIM;
	case MSB_SUITE_EGRESS:
		*why = "the backend does not declare the allowlist egress mode";
		return d->egress_modes & MSB_EGRESS_ALLOWLIST;
	case MSB_SUITE_CALL_SCOPE:
		*why = "the backend does not declare the call isolation scope";
		return d->isolation_scopes & MSB_SCOPE_CALL;
	case MSB_SUITE_NOTHING_LEFT_BEHIND:
		*why = "the backend does not declare exec and reclaim, which the sample call "
		       "needs";
		return (caps & (MSB_CAP_EXEC | MSB_CAP_RECLAIM)) ==
		       (MSB_CAP_EXEC | MSB_CAP_RECLAIM);
	}
	return false;
}

/* One suite's probes against an acquired sandbox. */
static int run_probes(struct run *rn, msb_conformance_suite s, msb_sandbox *box,
		      const msb_declarations *d, msb_conformance_report **rep, msb_error **err)
{
	msb_conformance_subject subj;
	msb_posix_guest_subject(box, MSB_DEFAULT_WORK_DIR, d->capabilities, &subj);
	int r;
	switch (s) {
	case MSB_SUITE_FILES_IN:
		r = msb_run_files_in_probes(&subj, rep, err);
		break;
	case MSB_SUITE_FILES_OUT:
		r = msb_run_files_out_probes(&subj, rep, err);
		break;
	case MSB_SUITE_EXEC:
		r = msb_run_exec_probes(&subj, rep, err);
		break;
	case MSB_SUITE_FILES_DELETE:
		r = msb_run_files_delete_probes(&subj, rep, err);
		break;
	case MSB_SUITE_RECLAIM:
		r = msb_run_reclaim_probes(&subj, rep, err);
		break;
	case MSB_SUITE_EGRESS: {
		msb_egress_conformance_options eo = MSB_EGRESS_CONFORMANCE_OPTIONS_INIT;
		eo.allowed_url = rn->a->allowed_url;
		eo.denied_url = rn->a->denied_url;
		eo.egress_modes = d->egress_modes;
		r = msb_run_egress_probes(&subj, &eo, rep, err);
		break;
	}
	case MSB_SUITE_NOTHING_LEFT_BEHIND: {
		struct nlb_call c = {box, ""};
		char tag[17];
		cli_random_hex(tag, 8);
		snprintf(c.dir, sizeof(c.dir), "call-%s", tag);
		msb_fingerprint_subject fp;
		msb_sandbox_fingerprint_subject(box, &fp);
		r = msb_assert_nothing_left_behind(&fp, nlb_call, &c, rep, err);
		if (r == MSB_E_CONFORMANCE_FAILURE) {
			msb_error_free(*err);
			*err = NULL;
			r = 0;
		}
		break;
	}
	case MSB_SUITE_CALL_SCOPE: /* run_suite() runs it without a sandbox */
	default:
		r = msb_error_set(err, MSB_E_VALUE, "unknown suite");
	}
	return r;
}

static int run_suite(struct run *rn, msb_conformance_suite s)
{
	const char *name = msb_conformance_suite_name(s);
	msb_error *err = NULL;
	msb_backend *b = NULL;
	if (cli_conformance_backend(rn->a, &b, &err) < 0)
		return cli_fail(err);
	const msb_declarations *d = msb_backend_declarations(b);
	const char *why = NULL;
	if (!declared(d, s, &why)) {
		not_run(rn, name, why);
		msb_backend_unref(b);
		return 0;
	}
	if (s == MSB_SUITE_EGRESS && (!rn->a->allowed_url || !rn->a->denied_url)) {
		not_run(rn, name,
			"declared, but no --allowed-url and --denied-url were given to test it "
			"with");
		msb_backend_unref(b);
		return 0;
	}

	msb_key key = {"conformance", rn->thread, "conformance", NULL};
	char kind[64];
	snprintf(kind, sizeof(kind), "conformance-%s", name);
	for (char *p = kind; *p; p++)
		*p = *p == '_' ? '-' : (char)(*p | 0x20);
	msb_conformance_report *rep = NULL;
	int r;
	if (s == MSB_SUITE_CALL_SCOPE) {
		msb_spec_builder *sb = msb_spec_builder_new(kind);
		msb_spec *spec = NULL;
		r = msb_spec_build(sb, &spec, &err);
		msb_spec_builder_free(sb);
		if (r == 0)
			r = msb_run_call_scope_probes(b, &key, spec, &rep, &err);
		msb_spec_unref(spec);
		if (r < 0)
			broke(rn, name, err);
		else
			record(rn, rep);
		msb_conformance_report_free(rep);
		msb_backend_unref(b);
		return 0;
	}

	msb_spec_builder *sb = msb_spec_builder_new(kind);
	if (s == MSB_SUITE_EGRESS) {
		msb_spec_builder_set_egress(sb, MSB_EGRESS_ALLOWLIST);
		msb_spec_builder_add_egress_host(sb, rn->a->allowed_host);
	}
	msb_spec *spec = NULL;
	msb_sandbox *box = NULL;
	r = msb_spec_build(sb, &spec, &err);
	msb_spec_builder_free(sb);
	if (r == 0)
		r = msb_backend_acquire(b, &key, spec, &box, &err);
	if (r < 0) {
		msb_error_wrap(&err, "acquiring the sandbox");
		broke(rn, name, err);
		msb_spec_unref(spec);
		msb_backend_unref(b);
		return 0;
	}
	r = run_probes(rn, s, box, d, &rep, &err);
	if (r < 0)
		broke(rn, name, err);
	else
		record(rn, rep);
	msb_conformance_report_free(rep);
	msb_sandbox_free(box);
	msb_disposal_failure *f = NULL;
	msb_error *derr = NULL;
	if (msb_backend_dispose(b, &key, kind, NULL, &f, &derr) < 0 || f) {
		fprintf(stderr, "msb: warning: the %s sandbox was not disposed: %s\n", name,
			f && f->detail ? f->detail
			: derr	       ? msb_error_message(derr)
				       : "");
	}
	msb_disposal_failure_free(f);
	msb_error_free(derr);
	msb_spec_unref(spec);
	msb_backend_unref(b);
	return 0;
}

/* ---- the verb ----------------------------------------------------------------------- */

/* The host of an http(s) URL, for the allowlist. */
static bool url_host(const char *url, char *out, size_t size)
{
	const char *p = strstr(url, "://");
	if (!p)
		return false;
	p += 3;
	size_t n = strcspn(p, ":/?#");
	if (n == 0 || n >= size || memchr(p, '@', n))
		return false;
	memcpy(out, p, n);
	out[n] = '\0';
	return true;
}

/* The suites' summary, as JSON or a line; takes rn->suites. */
static void run_summary(struct run *rn)
{
	const cli_conformance_args *a = rn->a;
	if (a->json) {
		json_t *top =
			json_pack("{s:s, s:o, s:I, s:I, s:I}", "backend", a->backend, "suites",
				  rn->suites, "passed", (json_int_t)rn->passed, "failed",
				  (json_int_t)rn->failed, "skipped", (json_int_t)rn->skipped);
		char *text = top ? json_dumps(top, JSON_COMPACT) : NULL;
		if (text)
			printf("%s\n", text);
		free(text);
		json_decref(top);
	} else {
		json_decref(rn->suites);
		printf("\n%s: %zu passed, %zu failed, %zu skipped\n", a->backend, rn->passed,
		       rn->failed, rn->skipped);
	}
	rn->suites = NULL;
}

static int cmd_conformance(int argc, char **argv)
{
	struct option opts[16];
	if (!cli_getopt_table(&verb_conformance, opts, 16))
		return 1;
	cli_conformance_args a = {0};
	bool want[MSB_SUITE_COUNT] = {0};
	bool any_suite = false, escape = false;
	optind = 1;
	opterr = 0;
	int c;
	msb_error *err = NULL;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case OPT_CONFIG:
			a.config = optarg;
			break;
		case OPT_SUITE: {
			msb_conformance_suite s;
			if (msb_conformance_suite_parse(optarg, &s, &err) < 0) {
				cli_usage(&verb_conformance, "--suite: %s", msb_error_message(err));
				msb_error_free(err);
				return 2;
			}
			want[s] = any_suite = true;
			break;
		}
		case OPT_JSON:
			a.json = true;
			break;
		case OPT_ALLOWED:
			a.allowed_url = optarg;
			break;
		case OPT_DENIED:
			a.denied_url = optarg;
			break;
		case OPT_STATE:
			a.state_dir = optarg;
			break;
		case OPT_IMAGE:
			a.image = optarg;
			break;
		case OPT_ESCAPE:
			escape = true;
			break;
		default:
			return cli_usage(&verb_conformance, "unknown option `%s`",
					 argv[optind - 1]);
		}
	}
	if (optind < argc - 1)
		return cli_usage(&verb_conformance, "unexpected argument `%s`", argv[optind + 1]);
	if (optind >= argc && !a.config)
		return cli_usage(&verb_conformance, "BACKEND is required");
	a.backend = optind < argc ? argv[optind] : NULL;
	if (!!a.allowed_url != !!a.denied_url)
		return cli_usage(&verb_conformance,
				 "--allowed-url and --denied-url go together (EGRESS needs both)");
	if (a.allowed_url && !url_host(a.allowed_url, a.allowed_host, sizeof(a.allowed_host)))
		return cli_usage(&verb_conformance, "--allowed-url `%s` has no host I can read",
				 a.allowed_url);
	if (cli_conformance_prepare(&a, &err) < 0) {
		cli_conformance_clear(&a);
		return cli_fail(err);
	}
	if (escape) {
		int st = cli_escape(&a);
		cli_conformance_clear(&a);
		return st;
	}

	struct run rn = {.a = &a, .suites = json_array()};
	char tag[17];
	cli_random_hex(tag, 8);
	snprintf(rn.thread, sizeof(rn.thread), "conformance-%s", tag);
	if (!a.json)
		printf("%-20s %-56s %-8s %s\n", "SUITE", "PROBE", "OUTCOME", "REASON");
	for (unsigned s = 0; s < MSB_SUITE_COUNT; s++) {
		/* EXEC last: its timeout probe may take the sandbox down. */
		static const msb_conformance_suite order[MSB_SUITE_COUNT] = {
			MSB_SUITE_FILES_IN,
			MSB_SUITE_FILES_OUT,
			MSB_SUITE_FILES_DELETE,
			MSB_SUITE_RECLAIM,
			MSB_SUITE_NOTHING_LEFT_BEHIND,
			MSB_SUITE_CALL_SCOPE,
			MSB_SUITE_EGRESS,
			MSB_SUITE_EXEC,
		};
		if (any_suite && !want[order[s]])
			continue;
		int st = run_suite(&rn, order[s]);
		if (st != 0) {
			json_decref(rn.suites);
			cli_conformance_clear(&a);
			return st;
		}
	}
	run_summary(&rn);
	cli_conformance_clear(&a);
	return rn.failed ? msb_code_exit_status(MSB_E_CONFORMANCE_FAILURE) : 0;
}
