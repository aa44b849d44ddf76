/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The conformance suites (checklist section 18) against the fake's emulated
 * POSIX guest, and against deliberately broken doubles: each checklist
 * "check:" line is one test, and each double breaks exactly one rule so the
 * probe that exists for that rule - and only the expected ones - fails.
 */
#include <stdio.h>
#include <string.h>

#include <criterion/criterion.h>

/* Reached by name (checklist section 0, layering): the umbrella header does
 * not bring the suites in. Checked before including them. */
#include <msb/msb.h>
#ifdef MSB_CONFORMANCE_H
#error "msb/msb.h includes msb/conformance.h"
#endif

#include <msb/conformance.h>
#include <msb/testing.h>

#define W MSB_DEFAULT_WORK_DIR

#define ALL_FILES                                                                                  \
	(MSB_CAP_EXEC | MSB_CAP_FILES_IN | MSB_CAP_FILES_OUT | MSB_CAP_FILES_LIST |                \
	 MSB_CAP_FILES_DELETE | MSB_CAP_RECLAIM)

/* ---- the double: a sandbox wrapping the fake, with one rule broken ------------ */

enum breakage {
	OK = 0,
	STAT_FOLLOWS_LINKS,	  /* stat and read through link-dir answer the outside */
	ARGV_UNQUOTED,		  /* exec joins argv with spaces, runs it as a shell line */
	ACCEPTS_BACKSLASH,	  /* write of "a\b" returns success */
	IMPLICIT_RMDIR,		  /* remove of an empty directory succeeds without recursive */
	RAISES_ON_CONTROL,	  /* stat of real/inside.txt raises RuntimeError */
	RECLAIM_FOLLOWS_LINKS,	  /* reclaim of a link removes its target's tree outside */
	NO_NETWORK,		  /* curl never connects */
	UNRESTRICTED,		  /* curl reaches everything */
	ALLOWLIST,		  /* curl reaches allowed.test only */
	TIMEOUT_IS_RUNTIME_ERROR, /* sleep past the bound raises RuntimeError */
};

struct dbl {
	msb_sandbox *inner;
	enum breakage b;
};

static struct dbl *D(void *impl)
{
	return impl;
}

static bool has(const char *s, const char *sub)
{
	return s && strstr(s, sub);
}

static int curl_answer(enum breakage b, const msb_exec_request *req, msb_exec_result *out)
{
	const char *url = NULL;
	for (size_t i = 0; req->argv[i]; i++)
		url = req->argv[i];
	const char *code = "000";
	int exit_code = 7;
	if (b == UNRESTRICTED || (b == ALLOWLIST && has(url, "allowed.test"))) {
		code = "200";
		exit_code = 0;
	} else if (b == ALLOWLIST) {
		code = "403";
		exit_code = 0;
	}
	*out = (msb_exec_result){0};
	out->stdout_bytes = (uint8_t *)strdup(code);
	out->stdout_len = 3;
	out->stderr_bytes = (uint8_t *)strdup("");
	out->exit_code = exit_code;
	return 0;
}

static int d_exec(void *impl, const msb_exec_request *req, msb_exec_result *out, msb_error **err)
{
	struct dbl *d = D(impl);
	if (req->argv && strcmp(req->argv[0], "curl") == 0 &&
	    (d->b == NO_NETWORK || d->b == UNRESTRICTED || d->b == ALLOWLIST))
		return curl_answer(d->b, req, out);
	if (d->b == TIMEOUT_IS_RUNTIME_ERROR && req->argv && strcmp(req->argv[0], "sleep") == 0)
		return msb_error_set(err, MSB_E_RUNTIME, "the backend's own ceiling");
	if (d->b == ARGV_UNQUOTED && req->argv) {
		char line[4096] = "";
		for (size_t i = 0; req->argv[i]; i++) {
			strncat(line, i ? " " : "", sizeof(line) - strlen(line) - 1);
			strncat(line, req->argv[i], sizeof(line) - strlen(line) - 1);
		}
		msb_exec_request r2 = *req;
		r2.argv = NULL;
		r2.shell = line;
		return msb_sandbox_exec(d->inner, &r2, out, err);
	}
	return msb_sandbox_exec(d->inner, req, out, err);
}

static int d_exec_bounded(void *impl, const msb_exec_request *req, msb_exec_result *out,
			  msb_error **err)
{
	return msb_sandbox_exec_bounded(D(impl)->inner, req, out, err);
}

static int d_run_code(void *impl, const char *code, double t, msb_cancel *c, msb_exec_result *out,
		      msb_error **err)
{
	return msb_sandbox_run_code(D(impl)->inner, code, t, c, out, err);
}

static int d_write(void *impl, const char *path, const uint8_t *data, size_t len, const char *wd,
		   msb_error **err)
{
	struct dbl *d = D(impl);
	if (d->b == ACCEPTS_BACKSLASH && strchr(path, '\\'))
		return 0;
	return msb_sandbox_write_file(d->inner, path, data, len, wd, err);
}

static int d_stat(void *impl, const char *path, const char *wd, bool *present, msb_entry *out,
		  msb_error **err)
{
	struct dbl *d = D(impl);
	if (d->b == RAISES_ON_CONTROL && strcmp(path, "real/inside.txt") == 0)
		return msb_error_set(err, MSB_E_RUNTIME, "the backend fell over");
	if (d->b == STAT_FOLLOWS_LINKS && strncmp(path, "link-dir/", 9) == 0) {
		*present = true;
		*out = (msb_entry){strdup(path), MSB_ENTRY_FILE, true, 30};
		return 0;
	}
	return msb_sandbox_stat_file(d->inner, path, wd, present, out, err);
}

static int d_read(void *impl, const char *path, const char *wd, uint64_t max, uint8_t **data,
		  size_t *len, msb_error **err)
{
	struct dbl *d = D(impl);
	if (d->b == STAT_FOLLOWS_LINKS && strncmp(path, "link-dir/", 9) == 0) {
		*data = (uint8_t *)strdup("the guest must not reach this\n");
		*len = 30;
		return 0;
	}
	return msb_sandbox_read_file(d->inner, path, wd, max, data, len, err);
}

static int d_list(void *impl, const char *path, const char *wd, msb_entry **e, size_t *n,
		  msb_error **err)
{
	return msb_sandbox_list_dir(D(impl)->inner, path, wd, e, n, err);
}

static int d_remove(void *impl, const char *path, const char *wd, bool recursive, msb_error **err)
{
	struct dbl *d = D(impl);
	if (d->b == IMPLICIT_RMDIR && !recursive) {
		msb_entry *v = NULL;
		size_t n = 0;
		if (msb_sandbox_list_dir(d->inner, path, wd, &v, &n, NULL) == 0) {
			msb_entries_free(v, n);
			if (n == 0)
				return msb_sandbox_remove(d->inner, path, wd, true, err);
		}
	}
	return msb_sandbox_remove(d->inner, path, wd, recursive, err);
}

static int d_reclaim(void *impl, const char *dir, const char *wd, double t, msb_error **err)
{
	struct dbl *d = D(impl);
	if (d->b == RECLAIM_FOLLOWS_LINKS) {
		bool present = false;
		msb_entry e = {0};
		if (msb_sandbox_stat_file(d->inner, dir, wd, &present, &e, NULL) == 0 && present &&
		    e.kind == MSB_ENTRY_SYMLINK) {
			/* "Follow" the link: what the fake links point at in this suite. */
			char outside[512];
			snprintf(outside, sizeof(outside), "%s-outside/%s", W, dir);
			msb_sandbox_remove(d->inner, outside, "/", true, NULL);
		}
		msb_entry_clear(&e);
	}
	return msb_sandbox_reclaim(d->inner, dir, wd, t, err);
}

static int d_reset(void *impl, double t, msb_error **err)
{
	return msb_sandbox_reset(D(impl)->inner, t, err);
}

static int d_fp(void *impl, bool *supported, msb_fingerprint *out, msb_error **err)
{
	return msb_sandbox_fingerprint(D(impl)->inner, supported, out, err);
}

static const char *d_id(void *impl)
{
	return msb_sandbox_instance_id(D(impl)->inner);
}

static void d_release(void *impl)
{
	struct dbl *d = impl;
	msb_sandbox_free(d->inner);
	free(d);
}

static const msb_sandbox_ops dbl_ops = {
	MSB_SANDBOX_OPS_VERSION,
	d_exec,
	d_exec_bounded,
	d_run_code,
	d_write,
	d_stat,
	d_read,
	d_list,
	d_remove,
	d_reclaim,
	d_reset,
	d_fp,
	d_id,
	d_release,
	0, /* exec_io: serves no streaming */
};

struct fx {
	msb_fake_sandbox *fs;
	msb_sandbox *sb;
	msb_conformance_subject subject;
};

static struct fx fx_new(enum breakage b, msb_capset caps)
{
	struct fx f = {0};
	msb_fake_sandbox_options o = MSB_FAKE_SANDBOX_OPTIONS_INIT;
	o.posix_guest = true;
	cr_assert_eq(msb_fake_sandbox_new(&o, &f.fs, NULL), 0);
	msb_sandbox *inner = NULL;
	cr_assert_eq(msb_fake_sandbox_handle(f.fs, &inner, NULL), 0);
	struct dbl *d = calloc(1, sizeof(*d));
	d->inner = inner;
	d->b = b;
	cr_assert_eq(msb_sandbox_new(&dbl_ops, d, "double", &f.sb, NULL), 0);
	msb_posix_guest_subject(f.sb, W, caps, &f.subject);
	return f;
}

static void fx_free(struct fx *f)
{
	msb_sandbox_free(f->sb);
	msb_fake_sandbox_unref(f->fs);
}

static const msb_probe_result *find(const msb_conformance_report *r, const char *name)
{
	for (size_t i = 0; i < r->n_results; i++)
		if (strcmp(r->results[i].name, name) == 0)
			return &r->results[i];
	cr_assert_fail("no probe `%s` in %s", name, r->suite);
	return NULL;
}

/* Exactly the probes named in `failing` failed; every other one passed. */
static void expect_only(const msb_conformance_report *r, const char *const *failing)
{
	size_t n_expected = 0;
	for (; failing && failing[n_expected]; n_expected++) {
		const msb_probe_result *p = find(r, failing[n_expected]);
		cr_assert_eq(p->outcome, MSB_PROBE_FAILED, "%s: `%s` did not fail", r->suite,
			     p->name);
		cr_assert_not_null(p->detail);
	}
	for (size_t i = 0; i < r->n_results; i++) {
		const msb_probe_result *p = &r->results[i];
		bool expected = false;
		for (size_t j = 0; j < n_expected; j++)
			expected |= strcmp(failing[j], p->name) == 0;
		if (!expected)
			cr_assert_eq(p->outcome, MSB_PROBE_PASSED, "%s: `%s` %s: %s", r->suite,
				     p->name, msb_probe_outcome_name(p->outcome),
				     p->detail ? p->detail : "");
		cr_assert_not_null(p->why);
		cr_assert(strlen(p->why) > 20, "`%s` has no reason", p->name);
	}
	cr_assert_eq(r->n_failed, n_expected);
}

typedef int (*assert_fn)(const msb_conformance_subject *, msb_conformance_report **, msb_error **);

/* Run an assert_* suite on a double; check the verdict and the failures. */
static void run_expect(assert_fn fn, enum breakage b, msb_capset caps, size_t total,
		       const char *const *failing)
{
	struct fx f = fx_new(b, caps);
	msb_conformance_report *r = NULL;
	msb_error *err = NULL;
	int rc = fn(&f.subject, &r, &err);
	cr_assert_not_null(r, "no report: %s", err ? msb_error_message(err) : "");
	cr_assert_eq(r->n_results, total, "%s has %zu probes", r->suite, r->n_results);
	if (failing && failing[0]) {
		cr_assert_eq(rc, MSB_E_CONFORMANCE_FAILURE);
		cr_assert(msb_code_is(msb_error_code(err), MSB_CAT_ASSERTION));
		for (size_t i = 0; failing[i]; i++)
			cr_assert(strstr(msb_error_message(err), failing[i]),
				  "message `%s` lacks %s", msb_error_message(err), failing[i]);
	} else {
		cr_assert_eq(rc, 0, "%s", err ? msb_error_message(err) : "");
	}
	expect_only(r, failing);
	msb_conformance_report_free(r);
	msb_error_free(err);
	fx_free(&f);
}

/* ---- the fake passes every suite it can serve --------------------------------- */

Test(conformance, fake_passes_files_out_18_4)
{
	run_expect(msb_assert_files_out_conformance, OK, ALL_FILES, 12, NULL);
}

Test(conformance, fake_passes_files_in_18_5)
{
	run_expect(msb_assert_files_in_conformance, OK, ALL_FILES, 12, NULL);
}

Test(conformance, fake_passes_exec_18_6)
{
	run_expect(msb_assert_exec_conformance, OK, ALL_FILES, 5, NULL);
}

Test(conformance, fake_passes_files_delete_18_7)
{
	run_expect(msb_assert_files_delete_conformance, OK, ALL_FILES, 10, NULL);
}

Test(conformance, fake_passes_reclaim_18_11)
{
	run_expect(msb_assert_reclaim_conformance, OK, ALL_FILES, 7, NULL);
}

/* ---- each broken rule fails the probe that exists for it ------------------------ */

Test(conformance, stat_following_links_fails_18_4)
{
	const char *f[] = {"stat-through-a-linked-parent", "read-through-a-linked-parent", NULL};
	run_expect(msb_assert_files_out_conformance, STAT_FOLLOWS_LINKS, ALL_FILES, 12, f);
}

Test(conformance, accepting_a_backslash_fails_18_5)
{
	const char *f[] = {"a-backslash-is-refused", NULL};
	run_expect(msb_assert_files_in_conformance, ACCEPTS_BACKSLASH, ALL_FILES, 12, f);
}

Test(conformance, argv_joined_unquoted_fails_18_6)
{
	/* The unquoted join also breaks the delete probes' own fixtures in a real
	 * shell; here only the EXEC suite is asked. */
	const char *f[] = {"argv-is-quoted", NULL};
	run_expect(msb_assert_exec_conformance, ARGV_UNQUOTED, ALL_FILES, 5, f);
}

Test(conformance, timeout_as_another_error_fails_18_6)
{
	const char *f[] = {"a-timeout-raises-timeout-error", NULL};
	run_expect(msb_assert_exec_conformance, TIMEOUT_IS_RUNTIME_ERROR, ALL_FILES, 5, f);
}

Test(conformance, implicit_rmdir_fails_18_7)
{
	const char *f[] = {"an-empty-directory-needs-recursive", NULL};
	run_expect(msb_assert_files_delete_conformance, IMPLICIT_RMDIR, ALL_FILES, 10, f);
}

Test(conformance, reclaim_following_a_link_fails_18_11)
{
	const char *f[] = {"a-directory-replaced-by-a-link-loses-only-the-link", NULL};
	run_expect(msb_assert_reclaim_conformance, RECLAIM_FOLLOWS_LINKS, ALL_FILES, 7, f);
}

/* ---- the shared shape -------------------------------------------------------------- */

Test(conformance, gate_refuses_before_planting_18_1)
{
	assert_fn suites[] = {msb_assert_files_out_conformance, msb_assert_files_delete_conformance,
			      msb_assert_reclaim_conformance};
	for (size_t i = 0; i < 3; i++) {
		struct fx f = fx_new(OK, MSB_CAP_EXEC);
		msb_conformance_report *r = NULL;
		msb_error *err = NULL;
		cr_assert_eq(suites[i](&f.subject, &r, &err), MSB_E_VALUE);
		cr_assert_null(r);
		cr_assert(strstr(msb_error_message(err), "attacked nothing"));
		msb_error_free(err);
		char **cmds = msb_fake_sandbox_commands(f.fs);
		cr_assert_eq(msb_strv_len(cmds), 0, "planted before refusing: %s", cmds[0]);
		msb_strv_free(cmds);
		fx_free(&f);
	}
	/* FILES_IN and EXEC gate on their own capability. */
	struct fx f = fx_new(OK, MSB_CAP_FILES_OUT);
	msb_conformance_report *r = NULL;
	msb_error *err = NULL;
	cr_assert_eq(msb_run_exec_probes(&f.subject, &r, &err), MSB_E_VALUE);
	msb_error_free(err);
	err = NULL;
	cr_assert_eq(msb_run_files_in_probes(&f.subject, &r, &err), MSB_E_VALUE);
	cr_assert(strstr(msb_error_message(err), "files_in"));
	msb_error_free(err);
	fx_free(&f);
}

Test(conformance, undeclared_listing_is_skipped_18_2)
{
	struct fx f = fx_new(OK, MSB_CAP_FILES_OUT | MSB_CAP_EXEC);
	msb_conformance_report *r = NULL;
	cr_assert_eq(msb_assert_files_out_conformance(&f.subject, &r, NULL), 0);
	cr_assert_eq(r->n_results, 12);
	cr_assert_eq(r->n_skipped, 4);
	const char *listing[] = {"listing-a-linked-directory", "listing-through-a-linked-parent",
				 "listing-under-a-linked-ancestor", "a-listing-names-its-links"};
	for (size_t i = 0; i < 4; i++) {
		const msb_probe_result *p = find(r, listing[i]);
		cr_assert_eq(p->outcome, MSB_PROBE_SKIPPED);
		cr_assert(strstr(p->detail, "files_list"), "%s", p->detail);
	}
	cr_assert_eq(find(r, "a-link-is-never-read")->outcome, MSB_PROBE_PASSED);
	msb_conformance_report_free(r);
	fx_free(&f);
}

Test(conformance, an_error_fails_only_its_probe_18_3)
{
	struct fx f = fx_new(RAISES_ON_CONTROL, ALL_FILES);
	msb_conformance_report *r = NULL;
	msb_error *err = NULL;
	cr_assert_eq(msb_assert_files_out_conformance(&f.subject, &r, &err),
		     MSB_E_CONFORMANCE_FAILURE);
	const char *only[] = {"a-legitimate-read-still-works", NULL};
	expect_only(r, only);
	cr_assert(strstr(find(r, only[0])->detail, "RuntimeError"));
	msb_conformance_report_free(r);
	msb_error_free(err);
	fx_free(&f);
}

Test(conformance, failure_names_every_probe_and_why_18_17)
{
	struct fx f = fx_new(STAT_FOLLOWS_LINKS, ALL_FILES);
	msb_conformance_report *r = NULL;
	msb_error *err = NULL;
	cr_assert_eq(msb_assert_files_out_conformance(&f.subject, &r, &err),
		     MSB_E_CONFORMANCE_FAILURE);
	const char *m = msb_error_message(err);
	cr_assert_str_eq(msb_error_name(err), "ConformanceFailure");
	cr_assert(strstr(m, "2 of 12 FILES_OUT conformance probes failed"), "%s", m);
	cr_assert(strstr(m, "stat-through-a-linked-parent"));
	cr_assert(strstr(m, find(r, "stat-through-a-linked-parent")->why));
	cr_assert(strstr(m, "read-through-a-linked-parent"));
	cr_assert(strstr(m, find(r, "read-through-a-linked-parent")->why));
	/* The report carries every result, and the JSON says the same. */
	char *json = msb_conformance_report_json(r);
	cr_assert(strstr(json, "\"suite\":\"FILES_OUT\""));
	cr_assert(strstr(json, "\"failed\":2"));
	cr_assert(strstr(json, "\"outcome\":\"failed\""));
	free(json);
	msb_conformance_report_free(r);
	msb_error_free(err);
	fx_free(&f);
}

Test(conformance, measure_delete_without_the_capability_18_8)
{
	struct fx f = fx_new(OK, MSB_CAP_EXEC | MSB_CAP_FILES_IN);
	msb_conformance_report *r = NULL;
	msb_error *err = NULL;
	cr_assert_eq(msb_measure_files_delete_probes(&f.subject, &r, &err), 0, "%s",
		     err ? msb_error_message(err) : "");
	cr_assert_eq(r->n_results, 10);
	cr_assert_eq(r->n_skipped, 0);
	msb_conformance_report_free(r);
	/* A broken mechanism is measured, never asserted. */
	fx_free(&f);
	f = fx_new(IMPLICIT_RMDIR, MSB_CAP_EXEC);
	cr_assert_eq(msb_measure_files_delete_probes(&f.subject, &r, NULL), 0);
	cr_assert_eq(r->n_failed, 1);
	msb_conformance_report_free(r);
	fx_free(&f);
}

Test(conformance, suite_names_parse)
{
	msb_conformance_suite s;
	cr_assert_eq(msb_conformance_suite_parse("files_delete", &s, NULL), 0);
	cr_assert_eq(s, MSB_SUITE_FILES_DELETE);
	cr_assert_str_eq(msb_conformance_suite_name(MSB_SUITE_CALL_SCOPE), "CALL_SCOPE");
	msb_error *err = NULL;
	cr_assert_eq(msb_conformance_suite_parse("network", &s, &err), MSB_E_VALUE);
	msb_error_free(err);
	const char *name, *why;
	msb_conformance_probe_info(MSB_SUITE_FILES_DELETE, 5, &name, &why);
	cr_assert_str_eq(name, "an-empty-directory-needs-recursive");
	cr_assert_eq(msb_conformance_probe_count(MSB_SUITE_NOTHING_LEFT_BEHIND), 2);
}

/* ---- EGRESS (18.9) ------------------------------------------------------------------- */

static void egress_expect(enum breakage b, const char *failing)
{
	struct fx f = fx_new(b, MSB_CAP_EXEC | MSB_CAP_FILES_IN);
	msb_egress_conformance_options o = MSB_EGRESS_CONFORMANCE_OPTIONS_INIT;
	o.allowed_url = "http://allowed.test/ok";
	o.denied_url = "http://denied.test/ok";
	o.egress_modes = MSB_EGRESS_ALLOWLIST | MSB_EGRESS_CLOSED;
	msb_conformance_report *r = NULL;
	msb_error *err = NULL;
	int rc = msb_assert_egress_conformance(&f.subject, &o, &r, &err);
	const char *only[] = {failing, NULL};
	cr_assert_eq(rc, failing ? MSB_E_CONFORMANCE_FAILURE : 0);
	cr_assert_eq(r->n_results, 2);
	expect_only(r, failing ? only : NULL);
	msb_conformance_report_free(r);
	msb_error_free(err);
	fx_free(&f);
}

Test(conformance, egress_no_network_fails_allowed_18_9)
{
	egress_expect(NO_NETWORK, "an-allowed-host-is-reachable");
}

Test(conformance, egress_unrestricted_fails_denied_18_9)
{
	egress_expect(UNRESTRICTED, "a-denied-host-is-refused");
}

Test(conformance, egress_allowlist_passes_18_9)
{
	egress_expect(ALLOWLIST, NULL);
}

Test(conformance, egress_needs_curl_and_allowlist_18_9)
{
	/* The fake's guest has no curl: a finding, not a pass. */
	struct fx f = fx_new(OK, MSB_CAP_EXEC);
	msb_egress_conformance_options o = MSB_EGRESS_CONFORMANCE_OPTIONS_INIT;
	o.allowed_url = "http://allowed.test/";
	o.denied_url = "http://denied.test/";
	o.egress_modes = MSB_EGRESS_ALLOWLIST;
	msb_conformance_report *r = NULL;
	msb_error *err = NULL;
	cr_assert_eq(msb_assert_egress_conformance(&f.subject, &o, &r, &err),
		     MSB_E_CONFORMANCE_FAILURE);
	cr_assert(strstr(find(r, "an-allowed-host-is-reachable")->detail, "curl"));
	msb_conformance_report_free(r);
	msb_error_free(err);
	err = NULL;
	r = NULL;
	/* No allowlist declared: refused before anything runs. */
	o.egress_modes = MSB_EGRESS_CLOSED;
	cr_assert_eq(msb_run_egress_probes(&f.subject, &o, &r, &err), MSB_E_VALUE);
	cr_assert_null(r);
	msb_error_free(err);
	fx_free(&f);
}

/* ---- CALL_SCOPE (18.10) ------------------------------------------------------------- */

/* A backend that makes one fake sandbox per call id (a correct call scope). */
struct per_call {
	char ids[8][64];
	msb_fake_sandbox *fs[8];
	size_t n;
	bool dispose_all; /* broken: disposal ignores the call id */
};

static int pc_acquire(void *impl, const msb_key *key, const msb_spec *spec, msb_sandbox **out,
		      msb_error **err)
{
	struct per_call *pc = impl;
	const char *id = key->call_id ? key->call_id : "";
	for (size_t i = 0; i < pc->n; i++)
		if (strcmp(pc->ids[i], id) == 0 && pc->fs[i])
			return msb_fake_sandbox_handle(pc->fs[i], out, err);
	cr_assert(pc->n < 8);
	msb_fake_sandbox_options o = MSB_FAKE_SANDBOX_OPTIONS_INIT;
	o.posix_guest = true;
	snprintf(pc->ids[pc->n], 64, "%s", id);
	cr_assert_eq(msb_fake_sandbox_new(&o, &pc->fs[pc->n], NULL), 0);
	return msb_fake_sandbox_handle(pc->fs[pc->n++], out, err);
}

static int pc_dispose(void *impl, const msb_key *key, const char *kind, const char *iid,
		      msb_disposal_failure **f, msb_error **err)
{
	struct per_call *pc = impl;
	for (size_t i = 0; i < pc->n; i++) {
		if (pc->fs[i] && (pc->dispose_all ||
				  strcmp(pc->ids[i], key->call_id ? key->call_id : "") == 0)) {
			msb_fake_sandbox_unref(pc->fs[i]);
			pc->fs[i] = NULL;
		}
	}
	return 0;
}

static int pc_scope(void *impl, const char *s, const char *t, msb_scope_purge *out, msb_error **err)
{
	*out = (msb_scope_purge){0, 0};
	return 0;
}

static void pc_reporter(void *impl, const msb_egress_reporter *r)
{
}

static void pc_free(void *impl)
{
	struct per_call *pc = impl;
	for (size_t i = 0; i < pc->n; i++)
		msb_fake_sandbox_unref(pc->fs[i]);
	free(pc);
}

static const msb_backend_ops pc_ops = {
	MSB_BACKEND_OPS_VERSION, pc_acquire, pc_dispose, pc_scope, pc_reporter, pc_free};

static const msb_key conv = {"tenant", "thread-1", "agent", NULL};

Test(conformance, call_scope_per_call_backend_passes_18_10)
{
	msb_declarations d = MSB_FAKE_BACKEND_DECLARATIONS;
	d.isolation_scopes = MSB_SCOPE_CONVERSATION | MSB_SCOPE_CALL;
	msb_backend_info info = {MSB_BACKEND_INFO_VERSION, "per-call", "none", &d};
	msb_backend *b = NULL;
	cr_assert_eq(msb_backend_new(&pc_ops, &info, calloc(1, sizeof(struct per_call)), &b, NULL),
		     0);
	msb_conformance_report *r = NULL;
	msb_error *err = NULL;
	cr_assert_eq(msb_assert_call_scope_conformance(b, &conv, NULL, &r, &err), 0, "%s",
		     err ? msb_error_message(err) : "");
	expect_only(r, NULL);
	cr_assert_eq(r->n_results, 4);
	msb_conformance_report_free(r);
	msb_backend_unref(b);
}

Test(conformance, call_scope_disposal_ignoring_the_call_fails_18_10)
{
	msb_declarations d = MSB_FAKE_BACKEND_DECLARATIONS;
	d.isolation_scopes = MSB_SCOPE_CONVERSATION | MSB_SCOPE_CALL;
	msb_backend_info info = {MSB_BACKEND_INFO_VERSION, "per-call", "none", &d};
	struct per_call *pc = calloc(1, sizeof(*pc));
	pc->dispose_all = true;
	msb_backend *b = NULL;
	cr_assert_eq(msb_backend_new(&pc_ops, &info, pc, &b, NULL), 0);
	msb_conformance_report *r = NULL;
	msb_error *err = NULL;
	cr_assert_eq(msb_assert_call_scope_conformance(b, &conv, NULL, &r, &err),
		     MSB_E_CONFORMANCE_FAILURE);
	const char *f[] = {"disposing-one-call-leaves-the-other", NULL};
	expect_only(r, f);
	msb_conformance_report_free(r);
	msb_error_free(err);
	msb_backend_unref(b);
}

Test(conformance, call_scope_shared_sandbox_fails_18_10)
{
	/* The fake hands every key the one sandbox (19.4): declaring call scope
	 * over it is exactly the lie the suite exists to catch. */
	msb_declarations d = MSB_FAKE_BACKEND_DECLARATIONS;
	d.isolation_scopes = MSB_SCOPE_CONVERSATION | MSB_SCOPE_CALL;
	msb_fake_sandbox_options so = MSB_FAKE_SANDBOX_OPTIONS_INIT;
	so.posix_guest = true;
	msb_fake_sandbox *fs = NULL;
	cr_assert_eq(msb_fake_sandbox_new(&so, &fs, NULL), 0);
	msb_fake_backend_options o = MSB_FAKE_BACKEND_OPTIONS_INIT;
	o.declarations = &d;
	o.sandbox = fs;
	msb_backend *b = NULL;
	cr_assert_eq(msb_fake_backend_new(&o, &b, NULL, NULL), 0);
	msb_conformance_report *r = NULL;
	msb_error *err = NULL;
	cr_assert_eq(msb_assert_call_scope_conformance(b, &conv, NULL, &r, &err),
		     MSB_E_CONFORMANCE_FAILURE);
	const char *f[] = {"two-calls-get-two-instances",
			   "a-file-from-one-call-is-absent-from-another", NULL};
	expect_only(r, f);
	msb_conformance_report_free(r);
	msb_error_free(err);
	msb_backend_unref(b);
	msb_fake_sandbox_unref(fs);
}

Test(conformance, call_scope_undeclared_is_refused_18_10)
{
	msb_backend *b = NULL;
	cr_assert_eq(msb_fake_backend_new(NULL, &b, NULL, NULL), 0);
	msb_conformance_report *r = NULL;
	msb_error *err = NULL;
	cr_assert_eq(msb_run_call_scope_probes(b, &conv, NULL, &r, &err), MSB_E_VALUE);
	cr_assert(strstr(msb_error_message(err), "call"));
	msb_error_free(err);
	msb_backend_unref(b);
}

/* ---- assert_nothing_left_behind (18.12-18.16) --------------------------------------- */

struct call_ud {
	msb_sandbox *sb;
	int runs;
	bool delete_after;
};

static int write_call(void *ud, msb_error **err)
{
	struct call_ud *c = ud;
	c->runs++;
	int r = msb_sandbox_write_file(c->sb, "left.txt", (const uint8_t *)"x", 1, NULL, err);
	if (r == 0 && c->delete_after)
		r = msb_sandbox_remove(c->sb, "left.txt", NULL, false, err);
	return r;
}

static int quiet_call(void *ud, msb_error **err)
{
	((struct call_ud *)ud)->runs++;
	return 0;
}

Test(conformance, a_file_left_behind_fails_naming_it_18_12)
{
	msb_fake_sandbox *fs = NULL;
	msb_sandbox *sb = NULL;
	cr_assert_eq(msb_fake_sandbox_new(NULL, &fs, NULL), 0);
	cr_assert_eq(msb_fake_sandbox_handle(fs, &sb, NULL), 0);
	msb_fingerprint_subject subj;
	msb_sandbox_fingerprint_subject(sb, &subj);
	struct call_ud c = {sb, 0, false};
	msb_conformance_report *r = NULL;
	msb_error *err = NULL;
	cr_assert_eq(msb_assert_nothing_left_behind(&subj, write_call, &c, &r, &err),
		     MSB_E_CONFORMANCE_FAILURE);
	cr_assert(strstr(msb_error_message(err), W "/left.txt"), "%s", msb_error_message(err));
	cr_assert(strstr(msb_error_message(err), "1 of 2 NOTHING_LEFT_BEHIND"));
	cr_assert_eq(find(r, "no-program-left-behind")->outcome, MSB_PROBE_PASSED);
	msb_conformance_report_free(r);
	msb_error_free(err);
	err = NULL;
	/* 18.14: now the sandbox is not pristine - refused before the call. */
	c.runs = 0;
	r = NULL;
	cr_assert_eq(msb_assert_nothing_left_behind(&subj, quiet_call, &c, &r, &err), MSB_E_VALUE);
	cr_assert(strstr(msb_error_message(err), "pristine"));
	cr_assert_eq(c.runs, 0);
	cr_assert_null(r);
	msb_error_free(err);
	msb_sandbox_free(sb);
	msb_fake_sandbox_unref(fs);
}

Test(conformance, fake_cannot_see_bytes_restored_18_16)
{
	/* A documented limitation: written then deleted inside the call leaves
	 * no trace in the fake's fingerprint. */
	msb_fake_sandbox *fs = NULL;
	msb_sandbox *sb = NULL;
	cr_assert_eq(msb_fake_sandbox_new(NULL, &fs, NULL), 0);
	cr_assert_eq(msb_fake_sandbox_handle(fs, &sb, NULL), 0);
	msb_fingerprint_subject subj;
	msb_sandbox_fingerprint_subject(sb, &subj);
	struct call_ud c = {sb, 0, true};
	msb_conformance_report *r = NULL;
	cr_assert_eq(msb_assert_nothing_left_behind(&subj, write_call, &c, &r, NULL), 0);
	cr_assert_eq(c.runs, 1);
	cr_assert_eq(r->n_failed, 0);
	msb_conformance_report_free(r);
	msb_sandbox_free(sb);
	msb_fake_sandbox_unref(fs);
}

/* A scripted fingerprint subject: answer i of the list per call. */
struct fp_script {
	int calls;
	int unsupported_at; /* call index answering "unsupported", -1 none */
	int error_at;	    /* call index failing, -1 none */
	const char *programs[2];
};

static int scripted_fp(void *ud, bool *supported, msb_fingerprint *out, msb_error **err)
{
	struct fp_script *s = ud;
	int i = s->calls++;
	if (i == s->error_at)
		return msb_error_set(err, MSB_E_RUNTIME, "cannot attest: a tmpfs mount");
	if (i == s->unsupported_at) {
		*supported = false;
		return 0;
	}
	*supported = true;
	out->changed_paths = calloc(1, sizeof(char *));
	out->running_programs = calloc(2, sizeof(char *));
	out->running_programs[0] = strdup(s->programs[i > 1 ? 1 : i]);
	return 0;
}

static int nlb(struct fp_script *s, struct call_ud *c, msb_conformance_report **r, msb_error **err)
{
	msb_fingerprint_subject subj = {MSB_FINGERPRINT_SUBJECT_VERSION, scripted_fp, s};
	return msb_assert_nothing_left_behind(&subj, quiet_call, c, r, err);
}

Test(conformance, unsupported_first_is_skipped_without_running_18_14)
{
	struct fp_script s = {0, 0, -1, {"7:100:sleep 9", "7:100:sleep 9"}};
	struct call_ud c = {0};
	msb_conformance_report *r = NULL;
	cr_assert_eq(nlb(&s, &c, &r, NULL), 0);
	cr_assert_eq(c.runs, 0);
	cr_assert_eq(r->n_skipped, 2);
	msb_conformance_report_free(r);
}

Test(conformance, fingerprint_lost_after_fails_18_14)
{
	struct fp_script s = {0, 1, -1, {"7:100:sleep 9", "7:100:sleep 9"}};
	struct call_ud c = {0};
	msb_conformance_report *r = NULL;
	msb_error *err = NULL;
	cr_assert_eq(nlb(&s, &c, &r, &err), MSB_E_CONFORMANCE_FAILURE);
	cr_assert_eq(c.runs, 1);
	cr_assert(strstr(msb_error_message(err), "lost"));
	msb_conformance_report_free(r);
	msb_error_free(err);
}

Test(conformance, measurement_error_after_fails_18_15)
{
	struct fp_script s = {0, -1, 1, {"7:100:sleep 9", "7:100:sleep 9"}};
	struct call_ud c = {0};
	msb_conformance_report *r = NULL;
	msb_error *err = NULL;
	cr_assert_eq(nlb(&s, &c, &r, &err), MSB_E_CONFORMANCE_FAILURE);
	cr_assert(strstr(msb_error_message(err), "cannot attest"), "%s", msb_error_message(err));
	msb_conformance_report_free(r);
	msb_error_free(err);
}

Test(conformance, replaced_process_with_same_pid_fails_18_13)
{
	struct fp_script s = {0, -1, -1, {"7:100:sleep 9", "7:250:sleep 9"}};
	struct call_ud c = {0};
	msb_conformance_report *r = NULL;
	msb_error *err = NULL;
	cr_assert_eq(nlb(&s, &c, &r, &err), MSB_E_CONFORMANCE_FAILURE);
	cr_assert_eq(find(r, "no-program-left-behind")->outcome, MSB_PROBE_FAILED);
	cr_assert_eq(find(r, "no-path-left-behind")->outcome, MSB_PROBE_PASSED);
	cr_assert(strstr(msb_error_message(err), "7:250:sleep 9"));
	msb_conformance_report_free(r);
	msb_error_free(err);
}
