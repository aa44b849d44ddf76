/* SPDX-License-Identifier: Apache-2.0 */
/*
 * msb.dll as a Windows user's program links it (issue 21): the public
 * headers and the import library only. A router from JSON over the fake
 * backend acquires a sandbox, runs `printf` in it and disposes it; prints
 * "dll-smoke: ok" and exits 0, or says which step failed and exits 1.
 */
#include <stdio.h>
#include <string.h>

#include <msb/msb.h>

static int fail(const char *step, msb_error *err)
{
	fprintf(stderr, "dll-smoke: %s: %s\n", step, err ? msb_error_message(err) : "failed");
	msb_error_free(err);
	return 1;
}

int main(void)
{
	static const char router_json[] = "{\"min_isolation\": \"none\", \"backends\": [{\"type\": "
					  "\"fake\", \"name\": \"f\", \"posix_guest\": true}]}";
	static const char spec_json[] = "{\"kind\": \"codeact\", \"requires\": [\"exec\"]}";
	msb_error *err = NULL;
	msb_router *r = NULL;
	msb_spec *spec = NULL;
	if (msb_router_from_json(router_json, strlen(router_json), NULL, &r, &err) < 0)
		return fail("router", err);
	if (msb_spec_from_json(spec_json, strlen(spec_json), &spec, &err) < 0)
		return fail("spec", err);
	msb_key key = {.scope = "user", .thread_id = "t1", .agent_dir = "a", .call_id = NULL};
	msb_acquire_options ao = MSB_ACQUIRE_OPTIONS_INIT;
	msb_sandbox *sb = NULL;
	if (msb_router_acquire(r, &key, spec, &ao, &sb, &err) < 0)
		return fail("acquire", err);
	const char *argv[] = {"printf", "hello from msb.dll", NULL};
	msb_exec_request req = MSB_EXEC_REQUEST_INIT;
	req.argv = argv;
	req.timeout = 30;
	msb_exec_result out = {0};
	if (msb_sandbox_exec(sb, &req, &out, &err) < 0)
		return fail("exec", err);
	int ok = out.exit_code == 0 && out.stdout_len == strlen(argv[1]) &&
		 memcmp(out.stdout_bytes, argv[1], out.stdout_len) == 0;
	if (!ok)
		fprintf(stderr, "dll-smoke: exit %d, stdout %.*s\n", out.exit_code,
			(int)out.stdout_len,
			out.stdout_bytes ? (const char *)out.stdout_bytes : "");
	msb_exec_result_clear(&out);
	msb_sandbox_free(sb);
	bool all = false;
	if (msb_router_dispose(r, &key, &all, &err) < 0)
		return fail("dispose", err);
	msb_spec_unref(spec);
	msb_router_free(r);
	if (!ok || !all)
		return fail(ok ? "dispose left a sandbox" : "exec output", NULL);
	printf("dll-smoke: ok\n");
	return 0;
}
