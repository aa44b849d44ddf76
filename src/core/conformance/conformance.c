/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The conformance runner (checklist 18.1-18.3, 18.17): the subject, the
 * hostile layout's paths, one runner every suite shares, the report and the
 * ConformanceFailure verdict.
 */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <strings.h>

#include <jansson.h>
#include <msb/paths.h>

#include "conformance_int.h"

static const char *const suite_names[MSB_SUITE_COUNT] = {
	"FILES_IN", "FILES_OUT",  "EXEC",    "FILES_DELETE",
	"EGRESS",   "CALL_SCOPE", "RECLAIM", "NOTHING_LEFT_BEHIND",
};

const char *msb_conformance_suite_name(msb_conformance_suite s)
{
	return (unsigned)s < MSB_SUITE_COUNT ? suite_names[s] : NULL;
}

int msb_conformance_suite_parse(const char *s, msb_conformance_suite *out, msb_error **err)
{
	for (unsigned i = 0; s && i < MSB_SUITE_COUNT; i++) {
		if (strcasecmp(s, suite_names[i]) == 0) {
			*out = (msb_conformance_suite)i;
			return 0;
		}
	}
	return msb_error_set(err, MSB_E_VALUE,
			     "`%s` is not a conformance suite: expected one of files_in, "
			     "files_out, exec, files_delete, egress, call_scope, reclaim, "
			     "nothing_left_behind",
			     s ? s : "(null)");
}

static const struct cf_suite *suite_of(msb_conformance_suite s)
{
	switch (s) {
	case MSB_SUITE_FILES_IN:
		return &msb_conformance__files_in;
	case MSB_SUITE_FILES_OUT:
		return &msb_conformance__files_out;
	case MSB_SUITE_EXEC:
		return &msb_conformance__exec_suite;
	case MSB_SUITE_FILES_DELETE:
		return &msb_conformance__files_delete;
	case MSB_SUITE_EGRESS:
		return &msb_conformance__egress;
	case MSB_SUITE_RECLAIM:
		return &msb_conformance__reclaim;
	case MSB_SUITE_CALL_SCOPE:
	case MSB_SUITE_NOTHING_LEFT_BEHIND:
	default:
		return NULL;
	}
}

size_t msb_conformance_probe_count(msb_conformance_suite s)
{
	const struct cf_suite *suite = suite_of(s);
	if (suite)
		return suite->n_probes;
	if (s == MSB_SUITE_CALL_SCOPE)
		return msb_conformance__n_call_scope_probes;
	if (s == MSB_SUITE_NOTHING_LEFT_BEHIND)
		return msb_conformance__n_nlb_probes;
	return 0;
}

void msb_conformance_probe_info(msb_conformance_suite s, size_t i, const char **name,
				const char **why)
{
	const struct cf_suite *suite = suite_of(s);
	const struct cf_probe *p = NULL;
	if (suite && i < suite->n_probes)
		p = &suite->probes[i];
	else if (s == MSB_SUITE_CALL_SCOPE && i < msb_conformance__n_call_scope_probes)
		p = &msb_conformance__call_scope_probes[i];
	else if (s == MSB_SUITE_NOTHING_LEFT_BEHIND && i < msb_conformance__n_nlb_probes)
		p = &msb_conformance__nlb_probes[i];
	if (name)
		*name = p ? p->name : NULL;
	if (why)
		*why = p ? p->why : NULL;
}

const char *msb_probe_outcome_name(msb_probe_outcome o)
{
	switch (o) {
	case MSB_PROBE_PASSED:
		return "passed";
	case MSB_PROBE_FAILED:
		return "failed";
	case MSB_PROBE_SKIPPED:
		return "skipped";
	}
	return NULL;
}

/* ---- reports ----------------------------------------------------------------- */

void msb_conformance_report_free(msb_conformance_report *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->n_results; i++)
		free(r->results[i].detail);
	free(r->results);
	free(r->suite);
	free(r);
}

int msb_conformance__report_new(msb_conformance_suite id, size_t n, msb_conformance_report **out,
				msb_error **err)
{
	msb_conformance_report *r = calloc(1, sizeof(*r));
	if (!r)
		return msb__error_nomem(err);
	r->suite = strdup(msb_conformance_suite_name(id));
	r->results = calloc(n ? n : 1, sizeof(*r->results));
	if (!r->suite || !r->results) {
		msb_conformance_report_free(r);
		return msb__error_nomem(err);
	}
	r->n_results = n;
	*out = r;
	return 0;
}

void msb_conformance__report_set(msb_conformance_report *r, size_t i, const struct cf_probe *p,
				 msb_probe_outcome o, char *detail)
{
	msb_probe_result *res = &r->results[i];
	res->name = p->name;
	res->why = p->why;
	res->outcome = o;
	res->detail = detail;
	if (o == MSB_PROBE_FAILED)
		r->n_failed++;
	else if (o == MSB_PROBE_SKIPPED)
		r->n_skipped++;
}

char *msb_conformance_report_json(const msb_conformance_report *r)
{
	if (!r)
		return NULL;
	json_t *results = json_array();
	for (size_t i = 0; results && i < r->n_results; i++) {
		const msb_probe_result *p = &r->results[i];
		json_t *o = json_pack("{s:s, s:s, s:s, s:s?}", "probe", p->name, "outcome",
				      msb_probe_outcome_name(p->outcome), "why", p->why, "detail",
				      p->detail);
		if (!o || json_array_append_new(results, o) < 0) {
			json_decref(results);
			return NULL;
		}
	}
	if (!results)
		return NULL;
	json_t *top = json_pack("{s:s, s:o, s:I, s:I, s:I}", "suite", r->suite, "results", results,
				"failed", (json_int_t)r->n_failed, "skipped",
				(json_int_t)r->n_skipped, "total", (json_int_t)r->n_results);
	if (!top)
		return NULL;
	char *text = json_dumps(top, JSON_COMPACT);
	json_decref(top);
	return text;
}

int msb_conformance__verdict(msb_conformance_report *r, msb_error **err)
{
	if (r->n_failed == 0)
		return 0;
	msb_buf b = MSB_BUF_INIT;
	msb__buf_printf(&b, "%zu of %zu %s conformance probes failed:", r->n_failed, r->n_results,
			r->suite);
	bool first = true;
	for (size_t i = 0; i < r->n_results; i++) {
		const msb_probe_result *p = &r->results[i];
		if (p->outcome != MSB_PROBE_FAILED)
			continue;
		msb__buf_printf(&b, "%s %s (%s; why it is in the suite: %s)", first ? "" : ";",
				p->name, p->detail ? p->detail : "failed", p->why);
		first = false;
	}
	_cleanup_free_ char *msg = msb__buf_steal_str(&b);
	if (!msg)
		return msb__error_nomem(err);
	return msb_error_set(err, MSB_E_CONFORMANCE_FAILURE, "%s", msg);
}

/* ---- findings and checks ----------------------------------------------------- */

int msb_conformance__fail(struct cf_ctx *c, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *m = msb__vasprintf(fmt, ap);
	va_end(ap);
	free(c->failure);
	c->failure = m;
	return -1;
}

int msb_conformance__refused(struct cf_ctx *c, const char *what, int rc, msb_error *e, int code,
			     unsigned cats, const char *want)
{
	_cleanup_error_ __attribute__((unused)) msb_error *owned = e; /* frees e on every return */
	if (rc == 0)
		return cf_fail(c, "%s returned instead of raising %s", what, want);
	int got = e ? msb_error_code(e) : rc;
	bool match = code ? got == code : msb_code_is(got, cats);
	if (match)
		return 0;
	return cf_fail(c, "%s raised %s (%s), not %s", what, msb_code_name(got),
		       e ? msb_error_message(e) : "no message", want);
}

int msb_conformance__ok(struct cf_ctx *c, const char *what, int rc, msb_error *e)
{
	_cleanup_error_ __attribute__((unused)) msb_error *owned = e; /* frees e on every return */
	if (rc == 0)
		return 0;
	return cf_fail(c, "%s raised %s (%s)", what, msb_code_name(e ? msb_error_code(e) : rc),
		       e ? msb_error_message(e) : "no message");
}

static char *argv_text(const char *const *argv)
{
	_cleanup_free_ char *joined = msb__strv_join((char *const *)argv, " ");
	return joined ? TAKE_PTR(joined) : strdup("?");
}

int msb_conformance__exec(struct cf_ctx *c, const char *wd, const char *const *argv,
			  const uint8_t *in, size_t in_len, msb_exec_result *res)
{
	msb_exec_request req = MSB_EXEC_REQUEST_INIT;
	req.argv = argv;
	req.working_directory = wd ? wd : c->work;
	req.timeout = c->timeout;
	req.stdin_data = in;
	req.stdin_len = in_len;
	msb_error *e = NULL;
	memset(res, 0, sizeof(*res));
	int r = msb_sandbox_exec(c->s->sandbox, &req, res, &e);
	if (r == 0)
		return 0;
	_cleanup_free_ char *cmd = argv_text(argv);
	return msb_conformance__ok(c, cmd, r, e);
}

int msb_conformance__test(struct cf_ctx *c, const char *flag, const char *path, bool *yes)
{
	const char *argv[] = {"test", flag, path, NULL};
	msb_exec_result res;
	if (msb_conformance__exec(c, NULL, argv, NULL, 0, &res) < 0)
		return -1;
	*yes = res.exit_code == 0;
	msb_exec_result_clear(&res);
	return 0;
}

int msb_conformance__present(struct cf_ctx *c, const char *path, const char *what)
{
	bool yes = false;
	if (msb_conformance__test(c, "-e", path, &yes) < 0)
		return -1;
	return yes ? 0 : cf_fail(c, "%s did not survive: `%s` is gone", what, path);
}

int msb_conformance__absent(struct cf_ctx *c, const char *path, const char *what)
{
	bool yes = false;
	if (msb_conformance__test(c, "-e", path, &yes) < 0)
		return -1;
	return yes ? cf_fail(c, "%s: `%s` exists", what, path) : 0;
}

int msb_conformance__cat_is(struct cf_ctx *c, const char *path, const uint8_t *want,
			    size_t want_len, const char *what)
{
	const char *argv[] = {"cat", path, NULL};
	msb_exec_result res;
	if (msb_conformance__exec(c, NULL, argv, NULL, 0, &res) < 0)
		return -1;
	bool same = res.exit_code == 0 && res.stdout_len == want_len &&
		    (want_len == 0 || memcmp(res.stdout_bytes, want, want_len) == 0);
	int code = res.exit_code;
	size_t len = res.stdout_len;
	msb_exec_result_clear(&res);
	if (same)
		return 0;
	if (code != 0)
		return cf_fail(c, "%s: `cat %s` exited %d", what, path, code);
	return cf_fail(c, "%s: `%s` reads back as %zu other bytes, not the %zu written", what, path,
		       len, want_len);
}

int msb_conformance__plant_file(struct cf_ctx *c, const char *abs, const char *text)
{
	msb_error *e = NULL;
	int r = c->s->plant_file(c->s->userdata, abs, (const uint8_t *)text, strlen(text), &e);
	_cleanup_free_ char *what = msb__asprintf("planting `%s`", abs);
	return msb_conformance__ok(c, what ? what : "planting a file", r, e);
}

int msb_conformance__plant_link(struct cf_ctx *c, const char *abs, const char *target)
{
	msb_error *e = NULL;
	int r = c->s->plant_symlink(c->s->userdata, abs, target, &e);
	_cleanup_free_ char *what = msb__asprintf("planting the link `%s` -> `%s`", abs, target);
	return msb_conformance__ok(c, what ? what : "planting a link", r, e);
}

char *msb_conformance__in_work(struct cf_ctx *c, const char *rel)
{
	return msb__asprintf("%s/%s", strcmp(c->work, "/") == 0 ? "" : c->work, rel);
}

char *msb_conformance__in_outside(struct cf_ctx *c, const char *rel)
{
	return msb__asprintf("%s/%s", c->outside, rel);
}

char *msb_conformance__outside_rel(struct cf_ctx *c, const char *rel)
{
	const char *base = strrchr(c->work, '/');
	return msb__asprintf("../%s-outside/%s", base ? base + 1 : c->work, rel);
}

/* ---- the runner ------------------------------------------------------------- */

static int check_subject(const msb_conformance_subject *s, msb_error **err)
{
	if (!s)
		return msb_error_set(err, MSB_E_VALUE, "conformance: subject is NULL");
	if (s->version != MSB_CONFORMANCE_SUBJECT_VERSION)
		return msb_error_set(err, MSB_E_VALUE,
				     "conformance: subject version %u is not supported",
				     s->version);
	if (!s->sandbox || !s->plant_file || !s->plant_symlink)
		return msb_error_set(err, MSB_E_VALUE,
				     "conformance: the subject needs a sandbox, plant_file and "
				     "plant_symlink");
	if (!s->working_directory || s->working_directory[0] != '/' ||
	    strchr(s->working_directory, '\\'))
		return msb_error_set(err, MSB_E_VALUE,
				     "conformance: the working directory must be an absolute "
				     "POSIX guest path");
	if (!(s->exec_timeout >= 0) || s->exec_timeout > 86400)
		return msb_error_set(err, MSB_E_VALUE,
				     "conformance: exec_timeout must be between 0 and 86400 s");
	return 0;
}

int msb_conformance__run(const struct cf_suite *suite, const msb_conformance_subject *s,
			 const msb_egress_conformance_options *egress, bool gated,
			 msb_conformance_report **out, msb_error **err)
{
	if (!out)
		return msb_error_set(err, MSB_E_VALUE, "conformance: no place for the report");
	int r = check_subject(s, err);
	if (r < 0)
		return r;
	const char *name = msb_conformance_suite_name(suite->id);
	/* 18.1: refuse before planting; skipping everything would be a green
	 * run that attacked nothing. */
	if (gated && (s->capabilities & suite->gate) != suite->gate) {
		_cleanup_free_ char *missing = msb_capset_format(suite->gate & ~s->capabilities);
		return msb_error_set(err, MSB_E_VALUE,
				     "this subject declares no %s, so every %s probe would be "
				     "skipped and the run would report success having attacked "
				     "nothing: pass the backend's own capabilities, not a "
				     "narrower set",
				     missing ? missing : "gating capability", name);
	}

	struct cf_ctx c = {.s = s, .egress = egress};
	c.timeout = s->exec_timeout > 0 ? s->exec_timeout : 60.0;
	c.work = msb_guest_normpath(s->working_directory);
	c.outside = c.work ? msb__asprintf("%s-outside", c.work) : NULL;
	msb_conformance_report *rep = NULL;
	if (!c.work || !c.outside) {
		r = msb__error_nomem(err);
		goto out;
	}
	if (suite->plant && (r = suite->plant(&c, err)) < 0) {
		msb_error_wrap(err, "%s conformance: the layout could not be planted", name);
		goto out;
	}
	if ((r = msb_conformance__report_new(suite->id, suite->n_probes, &rep, err)) < 0)
		goto out;
	for (size_t i = 0; i < suite->n_probes; i++) {
		const struct cf_probe *p = &suite->probes[i];
		msb_capset missing = p->requires & ~s->capabilities;
		if (gated && missing) {
			_cleanup_free_ char *names = msb_capset_format(missing);
			msb_conformance__report_set(rep, i, p, MSB_PROBE_SKIPPED,
						    msb__asprintf("the backend does not declare %s",
								  names ? names : "a capability"));
			continue;
		}
		free(c.failure);
		c.failure = NULL;
		/* 18.3: anything a probe meets is that probe's finding, and
		 * the others still run. */
		if (p->run(&c) == 0) {
			msb_conformance__report_set(rep, i, p, MSB_PROBE_PASSED, NULL);
		} else {
			char *d = TAKE_PTR(c.failure);
			msb_conformance__report_set(rep, i, p, MSB_PROBE_FAILED,
						    d ? d : strdup("failed (out of memory)"));
		}
	}
	*out = TAKE_PTR(rep);
	r = 0;
out:
	free(c.work);
	free(c.outside);
	free(c.failure);
	return r;
}

/* ---- PosixGuestSubject --------------------------------------------------------- */

static int posix_exec(msb_sandbox *sb, const char *const *argv, const uint8_t *in, size_t len,
		      msb_error **err)
{
	msb_exec_request req = MSB_EXEC_REQUEST_INIT;
	req.argv = argv;
	req.timeout = 60;
	req.stdin_data = in;
	req.stdin_len = len;
	msb_exec_result res = {0};
	int r = msb_sandbox_exec(sb, &req, &res, err);
	if (r < 0)
		return r;
	int code = res.exit_code;
	_cleanup_free_ char *text = msb_text_from_bytes(res.stderr_bytes, res.stderr_len);
	msb_exec_result_clear(&res);
	if (code == 0)
		return 0;
	_cleanup_free_ char *cmd = argv_text(argv);
	return msb_error_set(err, MSB_E_RUNTIME, "could not plant in the guest: `%s` exited %d: %s",
			     cmd, code, text ? text : "");
}

static int posix_plant_file(void *ud, const char *abs, const uint8_t *data, size_t len,
			    msb_error **err)
{
	_cleanup_free_ char *dir = msb__strdup(abs);
	if (!dir)
		return msb__error_nomem(err);
	char *slash = strrchr(dir, '/');
	if (slash && slash != dir) {
		*slash = '\0';
		const char *mk[] = {"mkdir", "-p", dir, NULL};
		int r = posix_exec(ud, mk, NULL, 0, err);
		if (r < 0)
			return r;
	}
	const char *tee[] = {"tee", abs, NULL};
	return posix_exec(ud, tee, data, len, err);
}

static int posix_plant_symlink(void *ud, const char *abs, const char *target, msb_error **err)
{
	const char *ln[] = {"ln", "-sfn", target, abs, NULL};
	return posix_exec(ud, ln, NULL, 0, err);
}

void msb_posix_guest_subject(msb_sandbox *sandbox, const char *working_directory,
			     msb_capset capabilities, msb_conformance_subject *out)
{
	*out = (msb_conformance_subject)MSB_CONFORMANCE_SUBJECT_INIT;
	out->sandbox = sandbox;
	out->working_directory = working_directory;
	out->capabilities = capabilities;
	out->plant_file = posix_plant_file;
	out->plant_symlink = posix_plant_symlink;
	out->userdata = sandbox;
}

/* ---- the public entry points ------------------------------------------------ */

static int assert_suite(const struct cf_suite *suite, const msb_conformance_subject *s,
			const msb_egress_conformance_options *egress, msb_conformance_report **out,
			msb_error **err)
{
	msb_conformance_report *rep = NULL;
	int r = msb_conformance__run(suite, s, egress, true, &rep, err);
	if (r < 0)
		return r;
	*out = rep;
	return msb_conformance__verdict(rep, err);
}

#define SUITE_ENTRY(name, suite)                                                                   \
	int msb_run_##name##_probes(const msb_conformance_subject *s,                              \
				    msb_conformance_report **out, msb_error **err)                 \
	{                                                                                          \
		return msb_conformance__run(&(suite), s, NULL, true, out, err);                    \
	}                                                                                          \
	int msb_assert_##name##_conformance(const msb_conformance_subject *s,                      \
					    msb_conformance_report **out, msb_error **err)         \
	{                                                                                          \
		if (!out)                                                                          \
			return msb_error_set(err, MSB_E_VALUE,                                     \
					     "conformance: no place for the report");              \
		return assert_suite(&(suite), s, NULL, out, err);                                  \
	}

SUITE_ENTRY(files_in, msb_conformance__files_in)
SUITE_ENTRY(files_out, msb_conformance__files_out)
SUITE_ENTRY(exec, msb_conformance__exec_suite)
SUITE_ENTRY(files_delete, msb_conformance__files_delete)
SUITE_ENTRY(reclaim, msb_conformance__reclaim)

int msb_measure_files_delete_probes(const msb_conformance_subject *s, msb_conformance_report **out,
				    msb_error **err)
{
	return msb_conformance__run(&msb_conformance__files_delete, s, NULL, false, out, err);
}

static int check_egress(const msb_conformance_subject *s, const msb_egress_conformance_options *o,
			msb_error **err)
{
	if (!o || o->version != MSB_EGRESS_CONFORMANCE_OPTIONS_VERSION)
		return msb_error_set(err, MSB_E_VALUE,
				     "EGRESS conformance: options missing or "
				     "of an unsupported version");
	if (!o->allowed_url || !o->denied_url || !o->allowed_url[0] || !o->denied_url[0])
		return msb_error_set(err, MSB_E_VALUE,
				     "EGRESS conformance needs an allowed URL and a denied URL, "
				     "both endpoints that answer 2xx when reachable");
	if (!(o->egress_modes & MSB_EGRESS_ALLOWLIST))
		return msb_error_set(err, MSB_E_VALUE,
				     "this backend declares no `allowlist` egress mode, so there "
				     "is no claim for the EGRESS suite to hold it to");
	if (!(o->exec_timeout >= 0) || o->exec_timeout > 86400)
		return msb_error_set(err, MSB_E_VALUE,
				     "EGRESS conformance: exec_timeout must be between 0 and "
				     "86400 s");
	(void)s;
	return 0;
}

int msb_run_egress_probes(const msb_conformance_subject *s,
			  const msb_egress_conformance_options *opts, msb_conformance_report **out,
			  msb_error **err)
{
	int r = check_egress(s, opts, err);
	return r < 0 ? r : msb_conformance__run(&msb_conformance__egress, s, opts, true, out, err);
}

int msb_assert_egress_conformance(const msb_conformance_subject *s,
				  const msb_egress_conformance_options *opts,
				  msb_conformance_report **out, msb_error **err)
{
	if (!out)
		return msb_error_set(err, MSB_E_VALUE, "conformance: no place for the report");
	int r = check_egress(s, opts, err);
	return r < 0 ? r : assert_suite(&msb_conformance__egress, s, opts, out, err);
}
