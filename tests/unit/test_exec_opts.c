/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What an exec asks for besides its command (issue 16): the environment's
 * bounds and reserved names (msb_exec_env_check), the streaming members of
 * msb_exec_io refused before dispatch where a backend does not serve them,
 * and version-1 requests and vtables still accepted.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include <msb/backend.h>
#include <msb/sandbox.h>

/* ---- a backend sandbox that records what reached it -------------------------- */

struct seen {
	int calls;
	unsigned version;
	const msb_exec_io *io;
};

static int s_exec(void *impl, const msb_exec_request *req, msb_exec_result *out, msb_error **err)
{
	struct seen *s = impl;
	s->calls++;
	s->version = req->version;
	s->io = req->io;
	out->stdout_bytes = (uint8_t *)strdup("");
	out->stderr_bytes = (uint8_t *)strdup("");
	return 0;
}

static int s_run_code(void *impl, const char *code, double timeout, msb_cancel *cancel,
		      msb_exec_result *out, msb_error **err)
{
	return msb_error_set(err, MSB_E_NOT_IMPLEMENTED, "no");
}

static int s_write(void *impl, const char *path, const uint8_t *data, size_t len, const char *wd,
		   msb_error **err)
{
	return 0;
}

static int s_stat(void *impl, const char *path, const char *wd, bool *present, msb_entry *out,
		  msb_error **err)
{
	*present = false;
	return 0;
}

static int s_read(void *impl, const char *path, const char *wd, uint64_t max, uint8_t **data,
		  size_t *len, msb_error **err)
{
	return msb_error_set(err, MSB_E_NOT_FOUND, "no");
}

static int s_list(void *impl, const char *path, const char *wd, msb_entry **e, size_t *n,
		  msb_error **err)
{
	*e = NULL;
	*n = 0;
	return 0;
}

static int s_remove(void *impl, const char *path, const char *wd, bool recursive, msb_error **err)
{
	return 0;
}

static int s_reclaim(void *impl, const char *dir, const char *wd, double timeout, msb_error **err)
{
	return 0;
}

static int s_reset(void *impl, double timeout, msb_error **err)
{
	return 0;
}

static int s_fp(void *impl, bool *supported, msb_fingerprint *out, msb_error **err)
{
	*supported = false;
	return 0;
}

static const char *s_id(void *impl)
{
	return "seen-1";
}

static void s_release(void *impl)
{
}

static const msb_sandbox_ops plain_ops = {
	.version = MSB_SANDBOX_OPS_VERSION,
	.exec = s_exec,
	.exec_bounded = s_exec,
	.run_code = s_run_code,
	.write_file = s_write,
	.stat_file = s_stat,
	.read_file = s_read,
	.list_dir = s_list,
	.remove = s_remove,
	.reclaim = s_reclaim,
	.reset = s_reset,
	.fingerprint = s_fp,
	.instance_id = s_id,
	.release = s_release,
	.exec_io = 0,
};

static msb_sandbox *make(const msb_sandbox_ops *ops, struct seen *s)
{
	msb_sandbox *sb = NULL;
	msb_error *err = NULL;
	cr_assert_eq(msb_sandbox_new(ops, s, "seen", &sb, &err), 0, "%s",
		     err ? msb_error_message(err) : "");
	return sb;
}

/* Call first, then look at err: the order of a call's arguments is unspecified. */
#define REFUSED(call, err, code, phrase)                                                           \
	do {                                                                                       \
		int rc_ = (call);                                                                  \
		refused(rc_, (err), (code), (phrase));                                             \
	} while (0)

static void refused(int r, msb_error *err, int code, const char *phrase)
{
	cr_assert_eq(r, code, "expected %s, got %s (%s)", msb_code_name(code), msb_code_name(r),
		     err ? msb_error_message(err) : "");
	cr_assert(strstr(msb_error_message(err), phrase), "message `%s` lacks `%s`",
		  msb_error_message(err), phrase);
}

static void env_refused(const char *const *env, const char *phrase)
{
	msb_error *err = NULL;
	REFUSED(msb_exec_env_check(env, &err), err, MSB_E_VALUE, phrase);
	msb_error_free(err);
}

static void env_ok(const char *const *env)
{
	msb_error *err = NULL;
	cr_assert_eq(msb_exec_env_check(env, &err), 0, "%s", err ? msb_error_message(err) : "");
}

/* ---- the environment ----------------------------------------------------------- */

Test(exec_opts, env_names_are_validated)
{
	env_ok(NULL);
	env_ok((const char *const[]){"A=1", "EMPTY=", "WITH_EQ=a=b", "lower=x", NULL});
	env_refused((const char *const[]){"NOEQUALS", NULL}, "not NAME=VALUE");
	env_refused((const char *const[]){"=value", NULL}, "empty name");
	char name[400];
	memset(name, 'N', 300);
	memcpy(name + 300, "=v", 3);
	env_refused((const char *const[]){name, NULL}, "longer than 256 bytes");
}

Test(exec_opts, env_is_bounded)
{
	static const char *many[MSB_EXEC_ENV_MAX + 2];
	for (size_t i = 0; i <= MSB_EXEC_ENV_MAX; i++)
		many[i] = "A=1";
	env_refused(many, "more than 1024 entries");
	many[MSB_EXEC_ENV_MAX] = NULL;
	env_ok(many);
	static char big[MSB_EXEC_ENV_MAX_BYTES];
	memset(big, 'v', sizeof(big) - 1);
	memcpy(big, "BIG=", 4);
	env_ok((const char *const[]){big, NULL});
	env_refused((const char *const[]){big, "B=1", NULL}, "exceed 49152 bytes");
}

Test(exec_opts, proxy_variables_are_reserved)
{
	static const char *const names[] = {"HTTP_PROXY",  "HTTPS_PROXY", "http_proxy",
					    "https_proxy", "NO_PROXY",	  "no_proxy"};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		char kv[64];
		snprintf(kv, sizeof(kv), "%s=http://elsewhere:8080", names[i]);
		char phrase[96];
		snprintf(phrase, sizeof(phrase), "`%s` is reserved", names[i]);
		env_refused((const char *const[]){"OK=1", kv, NULL}, phrase);
		env_refused((const char *const[]){kv, NULL}, "egress proxy");
	}
	/* only the exact names */
	env_ok((const char *const[]){"HTTP_PROXY_X=1", "Http_Proxy=1", NULL});
}

Test(exec_opts, host_tool_launcher_rules)
{
	env_refused((const char *const[]){"PYTHONNOUSERSITE=0", NULL},
		    "`PYTHONNOUSERSITE` is reserved");
	env_ok((const char *const[]){"PYTHONPATH=/maf-sandbox/work/lib:/opt/py", NULL});
	env_ok((const char *const[]){"PYTHONPATH=", NULL});
	env_refused((const char *const[]){"PYTHONPATH=lib", NULL}, "entry 1 `lib` is not absolute");
	env_refused((const char *const[]){"PYTHONPATH=/a::/b", NULL}, "entry 2 `` is empty");
	env_refused((const char *const[]){"PYTHONPATH=/a:", NULL}, "is empty");
	static const char *const odd[] = {"/a//b", "/a/./b", "/a/../b", "/a/.", "/a/.."};
	for (size_t i = 0; i < sizeof(odd) / sizeof(odd[0]); i++) {
		char kv[64];
		snprintf(kv, sizeof(kv), "PYTHONPATH=/ok:%s", odd[i]);
		env_refused((const char *const[]){kv, NULL}, "is not canonical");
	}
	env_ok((const char *const[]){"PYTHONPATH=/a/..b/.c/b..", NULL});
}

Test(exec_opts, exec_checks_the_env_before_the_backend)
{
	struct seen s = {0};
	msb_sandbox *sb = make(&plain_ops, &s);
	msb_exec_request req = MSB_EXEC_REQUEST_INIT;
	req.argv = (const char *const[]){"true", NULL};
	req.env = (const char *const[]){"https_proxy=http://x", NULL};
	msb_exec_result res = {0};
	msb_error *err = NULL;
	REFUSED(msb_sandbox_exec(sb, &req, &res, &err), err, MSB_E_VALUE,
		"exec: env: `https_proxy` is reserved");
	cr_assert_eq(s.calls, 0);
	msb_error_free(err);
	msb_sandbox_free(sb);
}

/* ---- streaming and terminals ------------------------------------------------------ */

Test(exec_opts, io_a_backend_does_not_serve_is_refused_by_name)
{
	struct seen s = {0};
	msb_sandbox *sb = make(&plain_ops, &s);
	cr_assert_eq(msb_sandbox_exec_io(sb), 0);
	cr_assert_eq(msb_sandbox_exec_io(NULL), 0);
	int p[2];
	cr_assert_eq(pipe(p), 0);
	msb_tty *t = NULL;
	cr_assert_eq(msb_tty_new(24, 80, &t, NULL), 0);
	static const struct {
		int what;
		const char *phrase;
	} cases[] = {
		{0, "the `seen` backend cannot stream stdin from a descriptor"},
		{1, "the `seen` backend cannot stream output as it comes"},
		{2, "the `seen` backend cannot run a command on a terminal"},
	};
	for (size_t i = 0; i < 3; i++) {
		msb_exec_io io = MSB_EXEC_IO_INIT;
		if (cases[i].what == 0)
			io.stdin_fd = p[0];
		if (cases[i].what == 1)
			io.output = (msb_exec_output_fn)1;
		if (cases[i].what == 2)
			io.tty = t;
		msb_exec_request req = MSB_EXEC_REQUEST_INIT;
		req.argv = (const char *const[]){"true", NULL};
		req.io = &io;
		msb_exec_result res = {0};
		msb_error *err = NULL;
		REFUSED(msb_sandbox_exec(sb, &req, &res, &err), err, MSB_E_NOT_IMPLEMENTED,
			cases[i].phrase);
		msb_error_free(err);
		err = NULL;
		req.max_output_bytes = 10;
		REFUSED(msb_sandbox_exec_bounded(sb, &req, &res, &err), err, MSB_E_NOT_IMPLEMENTED,
			"exec_bounded: the `seen` backend cannot");
		msb_error_free(err);
	}
	cr_assert_eq(s.calls, 0, "refused before the backend saw it");
	/* the same request without io reaches it */
	msb_exec_request req = MSB_EXEC_REQUEST_INIT;
	req.argv = (const char *const[]){"true", NULL};
	msb_exec_result res = {0};
	cr_assert_eq(msb_sandbox_exec(sb, &req, &res, NULL), 0);
	cr_assert_eq(s.calls, 1);
	msb_exec_result_clear(&res);
	msb_tty_free(t);
	close(p[0]);
	close(p[1]);
	msb_sandbox_free(sb);
}

Test(exec_opts, io_is_checked_where_it_is_served)
{
	msb_sandbox_ops ops = plain_ops;
	ops.exec_io = MSB_EXEC_CAN_STDIN_FD | MSB_EXEC_CAN_OUTPUT | MSB_EXEC_CAN_TTY;
	struct seen s = {0};
	msb_sandbox *sb = make(&ops, &s);
	cr_assert_eq(msb_sandbox_exec_io(sb), ops.exec_io);
	int p[2];
	cr_assert_eq(pipe(p), 0);
	msb_exec_io io = MSB_EXEC_IO_INIT;
	msb_exec_request req = MSB_EXEC_REQUEST_INIT;
	req.argv = (const char *const[]){"cat", NULL};
	req.io = &io;
	msb_exec_result res = {0};
	msb_error *err = NULL;

	io.stdin_fd = p[0];
	req.stdin_data = (const uint8_t *)"x";
	req.stdin_len = 1;
	REFUSED(msb_sandbox_exec(sb, &req, &res, &err), err, MSB_E_VALUE, "not both");
	msb_error_free(err), err = NULL;
	req.stdin_data = NULL;
	req.stdin_len = 0;
	io.stdin_fd = p[1]; /* the write end */
	REFUSED(msb_sandbox_exec(sb, &req, &res, &err), err, MSB_E_VALUE,
		"is not a descriptor open for reading");
	msb_error_free(err), err = NULL;
	io.stdin_fd = 1000; /* not open */
	REFUSED(msb_sandbox_exec(sb, &req, &res, &err), err, MSB_E_VALUE, "io.stdin_fd 1000");
	msb_error_free(err), err = NULL;
	io.version = 9;
	io.stdin_fd = p[0];
	REFUSED(msb_sandbox_exec(sb, &req, &res, &err), err, MSB_E_VALUE, "io version 9");
	msb_error_free(err), err = NULL;
	cr_assert_eq(s.calls, 0);

	io.version = MSB_EXEC_IO_VERSION;
	cr_assert_eq(msb_sandbox_exec(sb, &req, &res, NULL), 0);
	cr_assert_eq(s.calls, 1);
	cr_assert_eq(s.io, &io, "the backend sees the caller's io");
	msb_exec_result_clear(&res);
	close(p[0]);
	close(p[1]);
	msb_sandbox_free(sb);
}

/* A caller built against version 1 of the request, and a backend built
 * against version 1 of the vtable, still work: the request reaches the
 * backend as version 2 without io, and a version-1 vtable serves no io. */
Test(exec_opts, version_1_requests_and_vtables)
{
	struct seen s = {0};
	msb_sandbox *sb = make(&plain_ops, &s);
	/* the version-1 layout is the version-2 one without its last member */
	msb_exec_request full = MSB_EXEC_REQUEST_INIT;
	full.version = 1;
	full.argv = (const char *const[]){"true", NULL};
	full.timeout = 5;
	void *v1 = malloc(offsetof(msb_exec_request, io));
	cr_assert(v1);
	memcpy(v1, &full, offsetof(msb_exec_request, io));
	msb_exec_result res = {0};
	msb_error *err = NULL;
	cr_assert_eq(msb_sandbox_exec(sb, v1, &res, &err), 0, "%s",
		     err ? msb_error_message(err) : "");
	cr_assert_eq(s.version, MSB_EXEC_REQUEST_VERSION);
	cr_assert_null(s.io);
	msb_exec_result_clear(&res);
	free(v1);
	msb_sandbox_free(sb);

	/* a version-1 vtable: exec_io is not read (it is not there) */
	msb_sandbox_ops full_ops = plain_ops;
	full_ops.version = 1;
	void *ops1 = malloc(offsetof(msb_sandbox_ops, exec_io));
	cr_assert(ops1);
	memcpy(ops1, &full_ops, offsetof(msb_sandbox_ops, exec_io));
	sb = make(ops1, &s);
	cr_assert_eq(msb_sandbox_exec_io(sb), 0, "a version-1 vtable serves no io");
	msb_tty *t = NULL;
	cr_assert_eq(msb_tty_new(24, 80, &t, NULL), 0);
	msb_exec_io io = MSB_EXEC_IO_INIT;
	io.tty = t;
	msb_exec_request req = MSB_EXEC_REQUEST_INIT;
	req.argv = (const char *const[]){"true", NULL};
	req.io = &io;
	REFUSED(msb_sandbox_exec(sb, &req, &res, &err), err, MSB_E_NOT_IMPLEMENTED,
		"cannot run a command on a terminal");
	msb_error_free(err);
	msb_tty_free(t);
	msb_sandbox_free(sb);
	free(ops1);

	err = NULL;
	msb_exec_request bad = MSB_EXEC_REQUEST_INIT;
	bad.version = 3;
	bad.argv = (const char *const[]){"true", NULL};
	sb = make(&plain_ops, &s);
	REFUSED(msb_sandbox_exec(sb, &bad, &res, &err), err, MSB_E_VALUE, "version 3");
	msb_error_free(err);
	msb_sandbox_free(sb);
}
