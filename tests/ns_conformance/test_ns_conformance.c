/* SPDX-License-Identifier: Apache-2.0 */
/*
 * assert_nothing_left_behind (checklist 18.12-18.15) on the real `ns`
 * backend: its fingerprint is answered by the host (docs/ns.md), so the
 * probe sees what a call really left - and a call that cleans up passes.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <msb/conformance.h>
#include <msb/msb.h>

static char root[64];
static msb_backend *backend;
static const msb_key key = {"tenant", "nlb", "agent", NULL};

static void setup(void)
{
	snprintf(root, sizeof(root), "/tmp/msb-nsconf-%d", (int)getpid());
	mkdir(root, 0700);
	msb_ns_options o = MSB_NS_OPTIONS_INIT;
	o.state_root = root;
	cr_assert_eq(msb_ns_backend_new(&o, &backend, NULL), 0);
}

static void teardown(void)
{
	msb_scope_purge p = {0};
	msb_backend_dispose_scope(backend, "tenant", "nlb", &p, NULL);
	msb_backend_unref(backend);
	char ns[96];
	snprintf(ns, sizeof(ns), "%s/ns", root);
	rmdir(ns);
	rmdir(root);
}

TestSuite(ns_conformance, .init = setup, .fini = teardown);

static msb_sandbox *fresh(const char *kind)
{
	msb_spec_builder *b = msb_spec_builder_new(kind);
	msb_spec *spec = NULL;
	cr_assert_eq(msb_spec_build(b, &spec, NULL), 0);
	msb_spec_builder_free(b);
	msb_sandbox *sb = NULL;
	msb_error *err = NULL;
	cr_assert_eq(msb_backend_acquire(backend, &key, spec, &sb, &err), 0, "%s",
		     err ? msb_error_message(err) : "");
	msb_spec_unref(spec);
	return sb;
}

struct call {
	msb_sandbox *sb;
	const char *shell;
};

static int run_call(void *ud, msb_error **err)
{
	struct call *c = ud;
	msb_exec_request req = MSB_EXEC_REQUEST_INIT;
	req.shell = c->shell;
	req.timeout = 30;
	msb_exec_result res = {0};
	int r = msb_sandbox_exec(c->sb, &req, &res, err);
	int code = res.exit_code;
	msb_exec_result_clear(&res);
	if (r == 0 && code != 0)
		r = msb_error_set(err, MSB_E_RUNTIME, "the call exited %d", code);
	return r;
}

/* Run the probe for one call on a fresh sandbox of `kind`. */
static int probe(const char *kind, const char *shell, msb_conformance_report **rep, msb_error **err)
{
	msb_sandbox *sb = fresh(kind);
	msb_fingerprint_subject subj;
	msb_sandbox_fingerprint_subject(sb, &subj);
	struct call c = {sb, shell};
	int r = msb_assert_nothing_left_behind(&subj, run_call, &c, rep, err);
	msb_sandbox_free(sb);
	return r;
}

Test(ns_conformance, a_call_that_cleans_up_passes_18_12)
{
	msb_conformance_report *rep = NULL;
	msb_error *err = NULL;
	int r = probe("clean", "mkdir -p c1 && echo x > c1/out && rm -rf c1", &rep, &err);
	cr_assert_eq(r, 0, "%s", err ? msb_error_message(err) : "");
	cr_assert_eq(rep->n_failed, 0);
	cr_assert_eq(rep->n_skipped, 0);
	msb_conformance_report_free(rep);
}

Test(ns_conformance, a_file_left_in_the_storage_base_is_named_18_12)
{
	msb_conformance_report *rep = NULL;
	msb_error *err = NULL;
	cr_assert_eq(probe("base", "echo x > left.txt", &rep, &err), MSB_E_CONFORMANCE_FAILURE);
	cr_assert(strstr(msb_error_message(err), "/maf-sandbox/work/left.txt"), "%s",
		  msb_error_message(err));
	msb_conformance_report_free(rep);
	msb_error_free(err);
}

Test(ns_conformance, a_file_left_in_the_writable_layer_is_named_18_12)
{
	msb_conformance_report *rep = NULL;
	msb_error *err = NULL;
	cr_assert_eq(probe("layer", "echo x > /tmp/left-in-layer", &rep, &err),
		     MSB_E_CONFORMANCE_FAILURE);
	cr_assert(strstr(msb_error_message(err), "/tmp/left-in-layer"), "%s",
		  msb_error_message(err));
	msb_conformance_report_free(rep);
	msb_error_free(err);
}

Test(ns_conformance, a_file_left_in_dev_shm_is_named_18_15)
{
	msb_conformance_report *rep = NULL;
	msb_error *err = NULL;
	cr_assert_eq(probe("shm", "echo x > /dev/shm/left", &rep, &err), MSB_E_CONFORMANCE_FAILURE);
	cr_assert(strstr(msb_error_message(err), "/dev/shm/left"), "%s", msb_error_message(err));
	msb_conformance_report_free(rep);
	msb_error_free(err);
}

Test(ns_conformance, a_program_left_running_is_named_18_13)
{
	msb_conformance_report *rep = NULL;
	msb_error *err = NULL;
	/* Out of the exec's process group and session: a survivor. The call
	 * returns only once the survivor runs `sleep 300` (its cmdline is empty
	 * while exec is under way), so the fingerprint sees it by name. */
	int r = probe("prog",
		      "setsid sleep 300 </dev/null >/dev/null 2>&1 & "
		      "i=0; until tr '\\0' ' ' </proc/$!/cmdline | grep -q 'sleep 300'; do "
		      "i=$((i+1)); [ $i -lt 5000 ] || break; done",
		      &rep, &err);
	cr_assert_eq(r, MSB_E_CONFORMANCE_FAILURE, "%s", err ? msb_error_message(err) : "passed");
	const msb_probe_result *p = &rep->results[1];
	cr_assert_str_eq(p->name, "no-program-left-behind");
	cr_assert_eq(p->outcome, MSB_PROBE_FAILED);
	cr_assert(strstr(p->detail, "sleep 300"), "%s", p->detail);
	msb_conformance_report_free(rep);
	msb_error_free(err);
}
