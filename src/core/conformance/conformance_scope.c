/* SPDX-License-Identifier: Apache-2.0 */
/* The CALL_SCOPE suite (18.10) and assert_nothing_left_behind (18.12-18.16). */
#include <stdio.h>

#include "conformance_int.h"
#include "platform/platform.h"

/* ---- CALL_SCOPE ------------------------------------------------------------------ */

struct scope_ctx {
	msb_backend *backend;
	const msb_spec *spec;
	msb_key k1, k2;
	msb_sandbox *s1, *s2;
	msb_capset caps;
	double timeout;
	char marker[64];
};

static struct scope_ctx *sc_of(struct cf_ctx *c)
{
	return c->extra;
}

static int sc_acquire(struct cf_ctx *c, const msb_key *k, msb_sandbox **out, const char *what)
{
	struct scope_ctx *sc = sc_of(c);
	msb_error *err = NULL;
	int r = msb_backend_acquire(sc->backend, k, sc->spec, out, &err);
	return msb_conformance__ok(c, what, r, err);
}

/* Is the marker in sb's storage base? Through exec when declared, else stat. */
static int sc_has_marker(struct cf_ctx *c, msb_sandbox *sb, bool *yes)
{
	struct scope_ctx *sc = sc_of(c);
	msb_error *err = NULL;
	if (sc->caps & MSB_CAP_EXEC) {
		const char *argv[] = {"test", "-e", sc->marker, NULL};
		msb_exec_request req = MSB_EXEC_REQUEST_INIT;
		req.argv = argv;
		req.timeout = sc->timeout;
		msb_exec_result res = {0};
		int r = msb_sandbox_exec(sb, &req, &res, &err);
		if (msb_conformance__ok(c, "looking for the marker through exec", r, err) < 0)
			return -1;
		*yes = res.exit_code == 0;
		msb_exec_result_clear(&res);
		return 0;
	}
	msb_entry e = {0};
	int r = msb_sandbox_stat_file(sb, sc->marker, NULL, yes, &e, &err);
	msb_entry_clear(&e);
	return msb_conformance__ok(c, "looking for the marker through stat", r, err);
}

static int cs_two_instances(struct cf_ctx *c)
{
	struct scope_ctx *sc = sc_of(c);
	if (!sc->s1 && sc_acquire(c, &sc->k1, &sc->s1, "acquiring call 1") < 0)
		return -1;
	if (!sc->s2 && sc_acquire(c, &sc->k2, &sc->s2, "acquiring call 2") < 0)
		return -1;
	const char *a = msb_sandbox_instance_id(sc->s1), *b = msb_sandbox_instance_id(sc->s2);
	if (strcmp(a, b) == 0)
		return cf_fail(c, "two call ids under one conversation key got one instance `%s`",
			       a);
	return 0;
}

static int cs_file_absent(struct cf_ctx *c)
{
	struct scope_ctx *sc = sc_of(c);
	if (!sc->s1 && sc_acquire(c, &sc->k1, &sc->s1, "acquiring call 1") < 0)
		return -1;
	if (!sc->s2 && sc_acquire(c, &sc->k2, &sc->s2, "acquiring call 2") < 0)
		return -1;
	msb_error *err = NULL;
	int r = msb_sandbox_write_file(sc->s1, sc->marker, (const uint8_t *)"call 1\n", 7, NULL,
				       &err);
	if (msb_conformance__ok(c, "writing the marker in call 1's sandbox", r, err) < 0)
		return -1;
	bool yes = false;
	if (sc_has_marker(c, sc->s1, &yes) < 0)
		return -1;
	if (!yes)
		return cf_fail(c, "the marker written in call 1 is not visible in call 1: the "
				  "probe cannot tell");
	if (sc_has_marker(c, sc->s2, &yes) < 0)
		return -1;
	return yes ? cf_fail(c, "a file written in call 1 is visible in call 2: the two calls "
				"share a filesystem")
		   : 0;
}

static int cs_same_call(struct cf_ctx *c)
{
	struct scope_ctx *sc = sc_of(c);
	if (!sc->s1 && sc_acquire(c, &sc->k1, &sc->s1, "acquiring call 1") < 0)
		return -1;
	msb_sandbox *again = NULL;
	if (sc_acquire(c, &sc->k1, &again, "acquiring call 1 again") < 0)
		return -1;
	bool same = strcmp(msb_sandbox_instance_id(again), msb_sandbox_instance_id(sc->s1)) == 0;
	msb_sandbox_free(again);
	return same ? 0
		    : cf_fail(c, "acquiring the same call id twice gave two instances: the call's "
				 "own get-or-create is broken");
}

static int cs_dispose_one(struct cf_ctx *c)
{
	struct scope_ctx *sc = sc_of(c);
	if (!sc->s1 && sc_acquire(c, &sc->k1, &sc->s1, "acquiring call 1") < 0)
		return -1;
	if (!sc->s2 && sc_acquire(c, &sc->k2, &sc->s2, "acquiring call 2") < 0)
		return -1;
	msb_disposal_failure *f = NULL;
	msb_error *err = NULL;
	int r = msb_backend_dispose(sc->backend, &sc->k1, msb_spec_kind(sc->spec), NULL, &f, &err);
	if (msb_conformance__ok(c, "disposing call 1", r, err) < 0)
		return -1;
	if (f) {
		int x = cf_fail(c, "disposing call 1 reported `%s`: %s",
				msb_disposal_code_name(f->code), f->detail ? f->detail : "");
		msb_disposal_failure_free(f);
		return x;
	}
	msb_sandbox_free(sc->s1);
	sc->s1 = NULL;
	msb_sandbox *fresh = NULL;
	if (sc_acquire(c, &sc->k2, &fresh, "acquiring call 2 after call 1 was disposed") < 0)
		return -1;
	bool same = strcmp(msb_sandbox_instance_id(fresh), msb_sandbox_instance_id(sc->s2)) == 0;
	msb_sandbox_free(fresh);
	return same ? 0
		    : cf_fail(c, "disposing call 1 replaced call 2's sandbox: disposal is not "
				 "keyed by the call id");
}

const struct cf_probe msb_conformance__call_scope_probes[] = {
	{"two-calls-get-two-instances",
	 "a backend declaring call scope must fold the call id into whatever names a sandbox; "
	 "sharing one answers every call with the separation absent",
	 0, cs_two_instances},
	{"a-file-from-one-call-is-absent-from-another",
	 "what call scope buys: a call's leftovers (a failed reclaim, an unnamed file) stay where "
	 "no later call can address them",
	 0, cs_file_absent},
	{"the-same-call-gets-the-same-sandbox",
	 "get-or-create still holds within a call: its own acquires must meet one sandbox", 0,
	 cs_same_call},
	{"disposing-one-call-leaves-the-other",
	 "disposal at call scope is keyed by the call too: ending one call must not end another", 0,
	 cs_dispose_one},
};
const size_t msb_conformance__n_call_scope_probes =
	MSB_ARRAY_SIZE(msb_conformance__call_scope_probes);

static void random_hex(char *out, size_t nbytes)
{
	static const char hex[] = "0123456789abcdef";
	uint8_t b[16] = {0};
	if (nbytes > sizeof(b))
		nbytes = sizeof(b);
	if (msb__plat_random(b, nbytes) < 0) {
		uint64_t t = (uint64_t)msb__now_ns();
		memcpy(b, &t, sizeof(t) < nbytes ? sizeof(t) : nbytes);
	}
	for (size_t i = 0; i < nbytes; i++) {
		out[2 * i] = hex[b[i] >> 4];
		out[2 * i + 1] = hex[b[i] & 15];
	}
	out[2 * nbytes] = '\0';
}

static int call_scope_run(msb_backend *backend, const msb_key *key, const msb_spec *spec_in,
			  msb_conformance_report **out, msb_error **err)
{
	if (!backend || !key || !out)
		return msb_error_set(
			err, MSB_E_VALUE,
			"CALL_SCOPE conformance: backend, key and report are required");
	int r = msb_key_validate(key, err);
	if (r < 0)
		return r;
	const msb_declarations *d = msb_backend_declarations(backend);
	if (!(d->isolation_scopes & MSB_SCOPE_CALL))
		return msb_error_set(err, MSB_E_VALUE,
				     "backend `%s` does not declare the `call` isolation scope, so "
				     "there is no CALL_SCOPE claim to hold it to",
				     msb_backend_name(backend));

	msb_spec *spec = NULL;
	msb_spec_builder *b =
		spec_in ? msb_spec_builder_from(spec_in) : msb_spec_builder_new("conformance");
	if (!b)
		return msb__error_nomem(err);
	msb_spec_builder_set_isolation_scope(b, MSB_SCOPE_CALL);
	r = msb_spec_build(b, &spec, err);
	msb_spec_builder_free(b);
	if (r < 0)
		return r;

	char c1[33], c2[33], tag[17];
	random_hex(tag, 8);
	snprintf(c1, sizeof(c1), "conformance-%s-1", tag);
	snprintf(c2, sizeof(c2), "conformance-%s-2", tag);
	struct scope_ctx sc = {
		.backend = backend,
		.spec = spec,
		.k1 = {key->scope, key->thread_id, key->agent_dir, c1},
		.k2 = {key->scope, key->thread_id, key->agent_dir, c2},
		.caps = d->capabilities,
		.timeout = 60,
	};
	snprintf(sc.marker, sizeof(sc.marker), "call-scope-marker-%s.txt", tag);
	struct cf_ctx c = {.extra = &sc};
	msb_conformance_report *rep = NULL;
	r = msb_conformance__report_new(MSB_SUITE_CALL_SCOPE, msb_conformance__n_call_scope_probes,
					&rep, err);
	for (size_t i = 0; r == 0 && i < msb_conformance__n_call_scope_probes; i++) {
		const struct cf_probe *p = &msb_conformance__call_scope_probes[i];
		free(c.failure);
		c.failure = NULL;
		if (i == 1 && !(sc.caps & (MSB_CAP_EXEC | MSB_CAP_FILES_OUT))) {
			msb_conformance__report_set(
				rep, i, p, MSB_PROBE_SKIPPED,
				strdup("the backend declares neither exec nor files_out "
				       "to look for the marker with"));
			continue;
		}
		if (p->run(&c) == 0) {
			msb_conformance__report_set(rep, i, p, MSB_PROBE_PASSED, NULL);
		} else {
			char *f = TAKE_PTR(c.failure);
			msb_conformance__report_set(rep, i, p, MSB_PROBE_FAILED,
						    f ? f : strdup("failed (out of memory)"));
		}
	}
	free(c.failure);
	/* Leave nothing: dispose both calls' sandboxes (best effort). */
	msb_sandbox_free(sc.s1);
	msb_sandbox_free(sc.s2);
	const msb_key *keys[] = {&sc.k1, &sc.k2};
	for (size_t i = 0; i < 2; i++) {
		msb_disposal_failure *f = NULL;
		msb_backend_dispose(backend, keys[i], msb_spec_kind(spec), NULL, &f, NULL);
		msb_disposal_failure_free(f);
	}
	msb_spec_unref(spec);
	if (r < 0)
		return r;
	*out = rep;
	return 0;
}

int msb_run_call_scope_probes(msb_backend *backend, const msb_key *key, const msb_spec *spec,
			      msb_conformance_report **out, msb_error **err)
{
	return call_scope_run(backend, key, spec, out, err);
}

int msb_assert_call_scope_conformance(msb_backend *backend, const msb_key *key,
				      const msb_spec *spec, msb_conformance_report **out,
				      msb_error **err)
{
	int r = call_scope_run(backend, key, spec, out, err);
	return r < 0 ? r : msb_conformance__verdict(*out, err);
}

/* ---- assert_nothing_left_behind ---------------------------------------------------- */

static int sandbox_fp(void *ud, bool *supported, msb_fingerprint *out, msb_error **err)
{
	return msb_sandbox_fingerprint(ud, supported, out, err);
}

void msb_sandbox_fingerprint_subject(msb_sandbox *sandbox, msb_fingerprint_subject *out)
{
	out->version = MSB_FINGERPRINT_SUBJECT_VERSION;
	out->fingerprint = sandbox_fp;
	out->userdata = sandbox;
}

static int nlb_unused(struct cf_ctx *c)
{
	(void)c;
	return 0;
}

const struct cf_probe msb_conformance__nlb_probes[] = {
	{"no-path-left-behind",
	 "a kind claiming confinement to its call path must leave no changed path once its call "
	 "and cleanup end, or the next call inherits it",
	 0, nlb_unused},
	{"no-program-left-behind",
	 "a program that outlives its call can rewrite the next call's files; identities include "
	 "start times, so a replacement with the same pid still shows",
	 0, nlb_unused},
};
const size_t msb_conformance__n_nlb_probes = MSB_ARRAY_SIZE(msb_conformance__nlb_probes);

/* Entries of `a` missing from `b`, as "x, y" (sorted inputs not assumed). */
static void set_minus(char *const *a, char *const *b, msb_buf *out, const char *prefix)
{
	for (size_t i = 0; a && a[i]; i++) {
		if (b && msb__strv_contains(b, a[i]))
			continue;
		msb__buf_printf(out, "%s%s`%s`", out->len ? ", " : "", prefix, a[i]);
	}
}

int msb_assert_nothing_left_behind(const msb_fingerprint_subject *subject,
				   msb_conformance_call_fn call, void *userdata,
				   msb_conformance_report **out, msb_error **err)
{
	if (!subject || subject->version != MSB_FINGERPRINT_SUBJECT_VERSION ||
	    !subject->fingerprint || !call || !out)
		return msb_error_set(err, MSB_E_VALUE,
				     "nothing_left_behind: a fingerprint subject, a call and a "
				     "place for the report are required");
	const struct cf_probe *paths_p = &msb_conformance__nlb_probes[0],
			      *progs_p = &msb_conformance__nlb_probes[1];
	msb_conformance_report *rep = NULL;
	int r = msb_conformance__report_new(MSB_SUITE_NOTHING_LEFT_BEHIND, 2, &rep, err);
	if (r < 0)
		return r;

	msb_fingerprint before = {0}, after = {0};
	bool supported = false;
	r = subject->fingerprint(subject->userdata, &supported, &before, err);
	if (r < 0) {
		msb_error_wrap(err, "nothing_left_behind: the initial fingerprint failed");
		goto fail;
	}
	if (!supported) {
		/* 18.14: unsupported is a skip, and the workload never runs. */
		static const char why[] =
			"the subject cannot fingerprint this sandbox, so the call "
			"was not run";
		msb_conformance__report_set(rep, 0, paths_p, MSB_PROBE_SKIPPED, strdup(why));
		msb_conformance__report_set(rep, 1, progs_p, MSB_PROBE_SKIPPED, strdup(why));
		*out = rep;
		return 0;
	}
	if (before.changed_paths && before.changed_paths[0]) {
		_cleanup_free_ char *list = msb__strv_join(before.changed_paths, ", ");
		r = msb_error_set(err, MSB_E_VALUE,
				  "nothing_left_behind needs a pristine sandbox, and this one has "
				  "changed since creation: %s",
				  list ? list : "(paths)");
		goto fail;
	}

	msb_error *call_err = NULL;
	int call_rc = call(userdata, &call_err);
	msb_error *fp_err = NULL;
	supported = false;
	int fp_rc = subject->fingerprint(subject->userdata, &supported, &after, &fp_err);

	char *path_finding = NULL, *prog_finding = NULL;
	if (call_rc < 0) {
		char *m =
			msb__asprintf("the call itself failed: %s: %s",
				      msb_code_name(call_err ? msb_error_code(call_err) : call_rc),
				      call_err ? msb_error_message(call_err) : "no message");
		path_finding = m;
		prog_finding = m ? strdup(m) : NULL;
	} else if (fp_rc < 0 || !supported) {
		/* 18.14: losing the fingerprint, or failing to take it, fails. */
		char *m = fp_rc < 0 ? msb__asprintf("the final fingerprint failed: %s: %s",
						    msb_code_name(msb_error_code(fp_err)),
						    msb_error_message(fp_err))
				    : strdup("the fingerprint was lost after the call: the "
					     "subject no longer answers");
		path_finding = m;
		prog_finding = m ? strdup(m) : NULL;
	} else {
		msb_buf b = MSB_BUF_INIT;
		set_minus(after.changed_paths, before.changed_paths, &b, "");
		_cleanup_free_ char *left = msb__buf_steal_str(&b);
		if (left && left[0])
			path_finding = msb__asprintf("left behind: %s", left);
		msb_buf p = MSB_BUF_INIT;
		set_minus(after.running_programs, before.running_programs, &p, "started ");
		set_minus(before.running_programs, after.running_programs, &p, "gone ");
		_cleanup_free_ char *diff = msb__buf_steal_str(&p);
		if (diff && diff[0])
			prog_finding = msb__asprintf("programs differ: %s", diff);
	}
	msb_error_free(call_err);
	msb_error_free(fp_err);
	msb_conformance__report_set(
		rep, 0, paths_p, path_finding ? MSB_PROBE_FAILED : MSB_PROBE_PASSED, path_finding);
	msb_conformance__report_set(
		rep, 1, progs_p, prog_finding ? MSB_PROBE_FAILED : MSB_PROBE_PASSED, prog_finding);
	msb_fingerprint_clear(&before);
	msb_fingerprint_clear(&after);
	*out = rep;
	return msb_conformance__verdict(rep, err);

fail:
	msb_fingerprint_clear(&before);
	msb_conformance_report_free(rep);
	return r;
}
