/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Sessions and the router lifecycle against the real `ns` backend (issue 5,
 * end-to-end): a conversation's calls reuse one warm sandbox (under RECLAIM),
 * each call's own path is removed when it ends (8.12); an unclean call
 * disposes the instance (8.10) and a disposal that does not land refuses the
 * key until one does (7.10, 7.11); a call-scoped sandbox never outlives its
 * call (23.38).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <msb/msb.h>

static char root[64];

static int scope_fn(void *ud, char **out, msb_error **err)
{
	(void)ud;
	(void)err;
	*out = strdup("tenant");
	return 0;
}

static int thread_fn(void *ud, char **out, msb_error **err)
{
	(void)err;
	*out = strdup((const char *)ud);
	return 0;
}

static int list_fn(void *ud, const char *store, char ***out, msb_error **err)
{
	(void)ud;
	(void)store;
	(void)err;
	*out = calloc(1, sizeof(char *));
	return 0;
}

static void setup(void)
{
	snprintf(root, sizeof(root), "/tmp/msb-sess-%d", (int)getpid());
	mkdir(root, 0700);
}

static size_t live_sandboxes(void)
{
	msb_ns_options o = MSB_NS_OPTIONS_INIT;
	o.state_root = root;
	msb_ns_entry *e = NULL;
	size_t n = 0;
	cr_assert_eq(msb_ns_list(&o, &e, &n, NULL), 0);
	msb_ns_entries_free(e, n);
	return n;
}

static void teardown(void)
{
	msb_ns_options o = MSB_NS_OPTIONS_INIT;
	o.state_root = root;
	msb_backend *b = NULL;
	if (msb_ns_backend_new(&o, &b, NULL) == 0) {
		msb_scope_purge p = {0};
		msb_backend_dispose_scope(b, "tenant", "conv", &p, NULL);
		msb_backend_dispose_scope(b, "tenant", "calls", &p, NULL);
		msb_backend_dispose_scope(b, "tenant", "unclean", &p, NULL);
		msb_backend_unref(b);
	}
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "%s/ns", root);
	rmdir(cmd);
	rmdir(root);
}

static msb_router *make_router(msb_cleanup rung)
{
	msb_ns_options o = MSB_NS_OPTIONS_INIT;
	o.state_root = root;
	msb_backend *b = NULL;
	msb_error *err = NULL;
	cr_assert_eq(msb_ns_backend_new(&o, &b, &err), 0, "%s", msb_error_message(err));
	msb_router_options ro = MSB_ROUTER_OPTIONS_INIT;
	ro.min_isolation = MSB_ISOLATION_CONTAINER;
	ro.min_cleanup = rung;
	msb_router *r = NULL;
	cr_assert_eq(msb_router_new(&b, 1, &ro, &r, &err), 0, "%s", msb_error_message(err));
	msb_backend_unref(b);
	return r;
}

static msb_tool_session *attach(msb_router *r, const char *thread, msb_isolation_scope scope,
				msb_caller_context *ctx, msb_spec **spec_out,
				msb_reclaim_failure_fn on_fail, void *on_fail_ud)
{
	*ctx = msb_make_caller_context(list_fn, scope_fn, thread_fn, (void *)thread);
	msb_spec_builder *sb = msb_spec_builder_new("codeact");
	msb_spec_builder_set_isolation_scope(sb, scope);
	msb_spec *spec = NULL;
	msb_error *err = NULL;
	cr_assert_eq(msb_spec_build(sb, &spec, &err), 0, "%s", msb_error_message(err));
	msb_spec_builder_free(sb);
	msb_tool_session_options so = MSB_TOOL_SESSION_OPTIONS_INIT;
	so.router = r;
	so.context = ctx;
	so.agent_dir = "devops";
	so.spec = spec;
	so.name = "run_python";
	so.description = "run python";
	so.parameters_schema = "{\"type\":\"object\"}";
	so.on_reclaim_failure = on_fail;
	so.on_reclaim_failure_userdata = on_fail_ud;
	msb_tool_session *s = NULL;
	cr_assert_eq(msb_tool_session_attach(&so, &s, &err), 0, "%s", msb_error_message(err));
	cr_assert_not_null(s);
	*spec_out = spec;
	return s;
}

/* One call: acquire, write into the call's own path, run a command there. */
static void one_call(msb_tool_session *s, char *instance, size_t isz, char *path, size_t psz,
		     size_t *live_during)
{
	msb_tool_call *c = NULL;
	msb_error *err = NULL;
	cr_assert_eq(msb_tool_session_begin_call(s, NULL, &c, &err), 0);
	msb_key *key = NULL;
	char *sentence = NULL;
	cr_assert_eq(msb_tool_call_key(c, &key, &sentence, &err), 0);
	cr_assert_not_null(key, "%s", sentence ? sentence : "");
	msb_sandbox *sb = NULL;
	cr_assert_eq(msb_tool_call_acquire(c, key, &sb, &sentence, &err), 0);
	cr_assert_not_null(sb, "%s", sentence ? sentence : "");
	snprintf(instance, isz, "%s", msb_sandbox_instance_id(sb));
	const char *cp = NULL;
	cr_assert_eq(msb_tool_call_guest_call_path(c, &cp, &err), 0);
	snprintf(path, psz, "%s", cp);
	const uint8_t data[] = "print(6 * 7)\n";
	cr_assert_eq(msb_sandbox_write_file(sb, "main.py", data, sizeof(data) - 1, cp, &err), 0,
		     "%s", msb_error_message(err));
	msb_exec_request req = MSB_EXEC_REQUEST_INIT;
	const char *argv[] = {"python3", "main.py", NULL};
	req.argv = argv;
	req.working_directory = cp;
	msb_exec_result res = {0};
	cr_assert_eq(msb_sandbox_exec(sb, &req, &res, &err), 0, "%s", msb_error_message(err));
	cr_assert_eq(res.exit_code, 0);
	cr_assert_str_eq((char *)res.stdout_bytes, "42\n");
	msb_exec_result_clear(&res);
	if (live_during)
		*live_during = live_sandboxes();
	msb_key_free(key);
	msb_call_outcome out = MSB_CALL_OUTCOME_INIT;
	out.text = "42";
	msb_tool_result *result = NULL;
	cr_assert_eq(msb_tool_call_end(c, &out, &result, &err), 0, "%s", msb_error_message(err));
	msb_tool_result_free(result);
}

static bool path_exists_inside(msb_router *r, const char *thread, const char *path)
{
	msb_key key = {"tenant", thread, "devops", NULL};
	msb_spec_builder *b = msb_spec_builder_new("codeact");
	msb_spec *spec = NULL;
	cr_assert_eq(msb_spec_build(b, &spec, NULL), 0);
	msb_spec_builder_free(b);
	msb_sandbox *sb = NULL;
	cr_assert_eq(msb_router_acquire(r, &key, spec, NULL, &sb, NULL), 0);
	msb_exec_request req = MSB_EXEC_REQUEST_INIT;
	const char *argv[] = {"test", "-e", path, NULL};
	req.argv = argv;
	msb_exec_result res = {0};
	cr_assert_eq(msb_sandbox_exec(sb, &req, &res, NULL), 0);
	bool exists = res.exit_code == 0;
	msb_exec_result_clear(&res);
	msb_sandbox_free(sb);
	msb_spec_unref(spec);
	return exists;
}

TestSuite(ns_session, .init = setup, .fini = teardown, .timeout = 120);

/* A conversation's calls reuse one warm sandbox under RECLAIM (8.2, 8.12). */
Test(ns_session, conversation_calls_reuse_one_warm_sandbox_8_2)
{
	msb_router *r = make_router(MSB_CLEANUP_RECLAIM);
	msb_caller_context ctx;
	msb_spec *spec = NULL;
	msb_tool_session *s = attach(r, "conv", MSB_SCOPE_CONVERSATION, &ctx, &spec, NULL, NULL);
	char i1[64], i2[64], p1[64], p2[64];
	one_call(s, i1, sizeof(i1), p1, sizeof(p1), NULL);
	one_call(s, i2, sizeof(i2), p2, sizeof(p2), NULL);
	cr_assert_str_eq(i1, i2, "the second call got a new sandbox");
	cr_assert_str_neq(p1, p2);
	cr_assert_eq(live_sandboxes(), 1);
	/* Each call's own path was removed when it ended. */
	cr_assert_not(path_exists_inside(r, "conv", p1));
	cr_assert_not(path_exists_inside(r, "conv", p2));
	msb_tool_session_unref(s);
	msb_spec_unref(spec);
	msb_router_free(r);
}

/* Under the default DISPOSE every call ends with a disposal (8.1). */
Test(ns_session, default_cleanup_disposes_after_each_call_8_1)
{
	msb_router *r = make_router(MSB_CLEANUP_DISPOSE);
	msb_caller_context ctx;
	msb_spec *spec = NULL;
	msb_tool_session *s = attach(r, "conv", MSB_SCOPE_CONVERSATION, &ctx, &spec, NULL, NULL);
	char i1[64], i2[64], p[64];
	one_call(s, i1, sizeof(i1), p, sizeof(p), NULL);
	cr_assert_eq(live_sandboxes(), 0);
	one_call(s, i2, sizeof(i2), p, sizeof(p), NULL);
	cr_assert_str_neq(i1, i2);
	cr_assert_eq(live_sandboxes(), 0);
	msb_tool_session_unref(s);
	msb_spec_unref(spec);
	msb_router_free(r);
}

/* A call-scoped sandbox never outlives its call, whatever min_cleanup says
 * (23.38); the key carries the call id (2.7). */
Test(ns_session, call_scoped_sandbox_never_outlives_its_call_23_38)
{
	msb_router *r = make_router(MSB_CLEANUP_RECLAIM);
	msb_caller_context ctx;
	msb_spec *spec = NULL;
	msb_tool_session *s = attach(r, "calls", MSB_SCOPE_CALL, &ctx, &spec, NULL, NULL);
	char i1[64], i2[64], p[64];
	size_t during = 0;
	one_call(s, i1, sizeof(i1), p, sizeof(p), &during);
	cr_assert_eq(during, 1);
	cr_assert_eq(live_sandboxes(), 0);
	one_call(s, i2, sizeof(i2), p, sizeof(p), &during);
	cr_assert_eq(during, 1);
	cr_assert_str_neq(i1, i2);
	cr_assert_eq(live_sandboxes(), 0);
	msb_tool_session_unref(s);
	msb_spec_unref(spec);
	msb_router_free(r);
}

struct failure_seen {
	int calls;
	msb_reclaim_disposal disposal;
};

static int on_failure(void *ud, const msb_reclaim_failure *f)
{
	struct failure_seen *seen = ud;
	seen->calls++;
	seen->disposal = f->disposal;
	return 0;
}

/*
 * An unclean call is disposed by default (8.10); when that disposal does not
 * land the key is refused with SandboxUnclean until dispose_unclean lands
 * (7.10, 7.11). The disposal is made to fail for real: a mount inside the
 * sandbox's state directory, which the backend refuses to cross.
 */
Test(ns_session, unclean_call_disposes_and_refuses_the_key_until_disposal_lands_7_10)
{
	msb_router *r = make_router(MSB_CLEANUP_RECLAIM);
	msb_caller_context ctx;
	msb_spec *spec = NULL;
	struct failure_seen seen = {0};
	msb_tool_session *s =
		attach(r, "unclean", MSB_SCOPE_CONVERSATION, &ctx, &spec, on_failure, &seen);
	msb_error *err = NULL;

	/* First: a clean disposal of an unclean instance lands; the key stays open. */
	msb_tool_call *c = NULL;
	cr_assert_eq(msb_tool_session_begin_call(s, NULL, &c, &err), 0);
	msb_key key = {"tenant", "unclean", "devops", NULL};
	msb_sandbox *sb = NULL;
	char *sentence = NULL;
	cr_assert_eq(msb_tool_call_acquire(c, &key, &sb, &sentence, &err), 0);
	cr_assert_not_null(sb, "%s", sentence ? sentence : "");
	char first[64];
	snprintf(first, sizeof(first), "%s", msb_sandbox_instance_id(sb));
	cr_assert_eq(msb_tool_call_report_unclean(c, sb, "a survivor was observed", &err), 0);
	msb_call_outcome out = MSB_CALL_OUTCOME_INIT;
	out.text = "done";
	msb_tool_result *result = NULL;
	cr_assert_eq(msb_tool_call_end(c, &out, &result, &err), 0, "%s", msb_error_message(err));
	msb_tool_result_free(result);
	cr_assert_eq(seen.calls, 1);
	cr_assert_eq(seen.disposal, MSB_RECLAIM_DISPOSED);
	cr_assert_eq(live_sandboxes(), 0);

	/* Second: the disposal cannot land (a mount in the state directory). */
	cr_assert_eq(msb_tool_session_begin_call(s, NULL, &c, &err), 0);
	cr_assert_eq(msb_tool_call_acquire(c, &key, &sb, &sentence, &err), 0);
	cr_assert_not_null(sb);
	cr_assert_str_neq(msb_sandbox_instance_id(sb), first);
	msb_ns_options o = MSB_NS_OPTIONS_INIT;
	o.state_root = root;
	msb_ns_entry *e = NULL;
	size_t n = 0;
	cr_assert_eq(msb_ns_list(&o, &e, &n, NULL), 0);
	cr_assert_eq(n, 1);
	char pin[256];
	snprintf(pin, sizeof(pin), "%s/ns/%s/pin", root, e[0].name);
	msb_ns_entries_free(e, n);
	cr_assert_eq(mkdir(pin, 0700), 0);
	cr_assert_eq(mount("none", pin, "tmpfs", 0, "size=64k"), 0);
	cr_assert_eq(msb_tool_call_report_unclean(c, sb, "a survivor was observed", &err), 0);
	cr_assert_eq(msb_tool_call_end(c, &out, &result, &err), 0, "%s", msb_error_message(err));
	msb_tool_result_free(result);
	cr_assert_eq(seen.calls, 2);
	cr_assert_eq(seen.disposal, MSB_RECLAIM_FAILED);

	/* The key is refused: SandboxUnclean through the router, a fixed
	 * sentence through the session. */
	msb_sandbox *again = NULL;
	cr_assert_eq(msb_router_acquire(r, &key, spec, NULL, &again, &err), MSB_E_UNCLEAN);
	cr_assert_str_eq(msb_error_name(err), "SandboxUnclean");
	msb_error_free(err);
	err = NULL;
	cr_assert_eq(msb_tool_session_begin_call(s, NULL, &c, &err), 0);
	cr_assert_eq(msb_tool_call_acquire(c, &key, &sb, &sentence, &err), 0);
	cr_assert_null(sb);
	cr_assert_str_eq(sentence, MSB_SENTENCE_UNCLEAN);
	free(sentence);
	msb_call_outcome refusal = MSB_CALL_OUTCOME_INIT;
	refusal.kind = MSB_CALL_REFUSAL;
	refusal.text = MSB_SENTENCE_UNCLEAN;
	cr_assert_eq(msb_tool_call_end(c, &refusal, &result, &err), 0);
	msb_tool_result_free(result);

	/* Unpin; a retry lands and the key reopens. */
	cr_assert_eq(umount(pin), 0);
	bool landed = false;
	cr_assert_eq(msb_router_dispose_unclean(r, &key, 30.0, NULL, &landed, &err), 0, "%s",
		     msb_error_message(err));
	cr_assert(landed);
	cr_assert_eq(live_sandboxes(), 0);
	cr_assert_eq(msb_router_acquire(r, &key, spec, NULL, &again, &err), 0, "%s",
		     msb_error_message(err));
	msb_sandbox_free(again);
	msb_tool_session_unref(s);
	msb_spec_unref(spec);
	msb_router_free(r);
}
