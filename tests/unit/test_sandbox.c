/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The guest handle: msb_sandbox_new's vtable check (24.8, 24.41), argument
 * validation before dispatch (24.36), outputs only on success, the UTF-8 text
 * view (9.6) and the cancellation token (24.2).
 */
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include <msb/backend.h>
#include <msb/sandbox.h>

/* ---- a recording backend sandbox ------------------------------------------- */

struct rec {
	int calls;    /* dispatches that reached the backend */
	int released; /* release() calls */
	int fail;     /* non-zero: every op fills its outputs then fails with this */
	const char *id;
};

static int set_result(struct rec *r, msb_exec_result *out, msb_error **err)
{
	r->calls++;
	out->stdout_bytes = (uint8_t *)strdup("partial");
	out->stdout_len = 7;
	out->stderr_bytes = (uint8_t *)strdup("");
	if (r->fail)
		return msb_error_set(err, r->fail, "scripted failure");
	return 0;
}

static int r_exec(void *impl, const msb_exec_request *req, msb_exec_result *out, msb_error **err)
{
	return set_result(impl, out, err);
}

static int r_run_code(void *impl, const char *code, double timeout, msb_cancel *cancel,
		      msb_exec_result *out, msb_error **err)
{
	return set_result(impl, out, err);
}

static int r_write(void *impl, const char *path, const uint8_t *data, size_t len, const char *wd,
		   msb_error **err)
{
	struct rec *r = impl;
	r->calls++;
	return r->fail ? msb_error_set(err, r->fail, "scripted failure") : 0;
}

static int r_stat(void *impl, const char *path, const char *wd, bool *present, msb_entry *out,
		  msb_error **err)
{
	struct rec *r = impl;
	r->calls++;
	*present = true;
	out->path = strdup("partial");
	return r->fail ? msb_error_set(err, r->fail, "scripted failure") : 0;
}

static int r_read(void *impl, const char *path, const char *wd, uint64_t max, uint8_t **data,
		  size_t *len, msb_error **err)
{
	struct rec *r = impl;
	r->calls++;
	*data = (uint8_t *)strdup("partial");
	*len = 7;
	return r->fail ? msb_error_set(err, r->fail, "scripted failure") : 0;
}

static int r_list(void *impl, const char *path, const char *wd, msb_entry **entries, size_t *n,
		  msb_error **err)
{
	struct rec *r = impl;
	r->calls++;
	*entries = calloc(1, sizeof(msb_entry));
	(*entries)[0].path = strdup("partial");
	*n = 1;
	return r->fail ? msb_error_set(err, r->fail, "scripted failure") : 0;
}

static int r_remove(void *impl, const char *path, const char *wd, bool recursive, msb_error **err)
{
	struct rec *r = impl;
	r->calls++;
	return r->fail ? msb_error_set(err, r->fail, "scripted failure") : 0;
}

static int r_reclaim(void *impl, const char *dir, const char *wd, double timeout, msb_error **err)
{
	struct rec *r = impl;
	r->calls++;
	return r->fail ? msb_error_set(err, r->fail, "scripted failure") : 0;
}

static int r_reset(void *impl, double timeout, msb_error **err)
{
	struct rec *r = impl;
	r->calls++;
	return r->fail ? msb_error_set(err, r->fail, "scripted failure") : 0;
}

static int r_fingerprint(void *impl, bool *supported, msb_fingerprint *out, msb_error **err)
{
	struct rec *r = impl;
	r->calls++;
	*supported = true;
	out->changed_paths = calloc(2, sizeof(char *));
	out->changed_paths[0] = strdup("/partial");
	out->running_programs = calloc(1, sizeof(char *));
	return r->fail ? msb_error_set(err, r->fail, "scripted failure") : 0;
}

static const char *r_instance_id(void *impl)
{
	return ((struct rec *)impl)->id;
}

static void r_release(void *impl)
{
	((struct rec *)impl)->released++;
}

static const msb_sandbox_ops rec_ops = {
	.version = MSB_SANDBOX_OPS_VERSION,
	.exec = r_exec,
	.exec_bounded = r_exec,
	.run_code = r_run_code,
	.write_file = r_write,
	.stat_file = r_stat,
	.read_file = r_read,
	.list_dir = r_list,
	.remove = r_remove,
	.reclaim = r_reclaim,
	.reset = r_reset,
	.fingerprint = r_fingerprint,
	.instance_id = r_instance_id,
	.release = r_release,
};

static void assert_refused(int r, msb_error *err, int code, const char *phrase)
{
	cr_assert_eq(r, code, "expected %s, got %s", msb_code_name(code), msb_code_name(r));
	cr_assert_not_null(err);
	cr_assert_eq(msb_error_code(err), code);
	cr_assert(strstr(msb_error_message(err), phrase) != NULL, "message `%s` lacks `%s`",
		  msb_error_message(err), phrase);
}

/* Evaluate the call first, then check its error (argument order is unspecified). */
#define REFUSED(call, code, phrase)                                                                \
	do {                                                                                       \
		msb_error *err_ = NULL;                                                            \
		msb_error **errp = &err_;                                                          \
		int r_ = (call);                                                                   \
		assert_refused(r_, err_, code, phrase);                                            \
		msb_error_free(err_);                                                              \
	} while (0)

static msb_sandbox *make(struct rec *r)
{
	msb_sandbox *sb = NULL;
	cr_assert_eq(msb_sandbox_new(&rec_ops, r, "recorder", &sb, NULL), 0);
	return sb;
}

/* ---- msb_sandbox_new: every slot mandatory (24.8, 24.41) ---------------------- */

Test(sandbox, new_refuses_each_null_slot)
{
	static const struct {
		size_t offset;
		const char *name;
	} slots[] = {
		{offsetof(msb_sandbox_ops, exec), "exec"},
		{offsetof(msb_sandbox_ops, exec_bounded), "exec_bounded"},
		{offsetof(msb_sandbox_ops, run_code), "run_code"},
		{offsetof(msb_sandbox_ops, write_file), "write_file"},
		{offsetof(msb_sandbox_ops, stat_file), "stat_file"},
		{offsetof(msb_sandbox_ops, read_file), "read_file"},
		{offsetof(msb_sandbox_ops, list_dir), "list_dir"},
		{offsetof(msb_sandbox_ops, remove), "remove"},
		{offsetof(msb_sandbox_ops, reclaim), "reclaim"},
		{offsetof(msb_sandbox_ops, reset), "reset"},
		{offsetof(msb_sandbox_ops, fingerprint), "fingerprint"},
		{offsetof(msb_sandbox_ops, instance_id), "instance_id"},
	};
	for (size_t i = 0; i < sizeof(slots) / sizeof(slots[0]); i++) {
		msb_sandbox_ops ops = rec_ops;
		void *null_fn = NULL;
		memcpy((char *)&ops + slots[i].offset, &null_fn, sizeof(null_fn));
		struct rec r = {0};
		msb_sandbox *sb = NULL;
		msb_error *err = NULL;
		int rc = msb_sandbox_new(&ops, &r, "recorder", &sb, &err);
		char phrase[64];
		snprintf(phrase, sizeof(phrase), "slot `%s` is NULL", slots[i].name);
		assert_refused(rc, err, MSB_E_VALUE, phrase);
		cr_assert_null(sb);
		cr_assert_eq(r.released, 1, "impl not released when `%s` is NULL", slots[i].name);
		msb_error_free(err);
	}
}

Test(sandbox, new_refuses_null_release_and_bad_version)
{
	msb_sandbox_ops ops = rec_ops;
	ops.release = NULL;
	struct rec r = {0};
	msb_sandbox *sb = NULL;
	REFUSED(msb_sandbox_new(&ops, &r, "x", &sb, errp), MSB_E_VALUE, "slot `release` is NULL");

	ops = rec_ops;
	ops.version = 0;
	REFUSED(msb_sandbox_new(&ops, &r, "x", &sb, errp), MSB_E_VALUE, "version 0");
	cr_assert_eq(r.released, 1);

	REFUSED(msb_sandbox_new(&rec_ops, &r, NULL, &sb, errp), MSB_E_VALUE, "backend name");
	cr_assert_eq(r.released, 2);

	REFUSED(msb_sandbox_new(NULL, &r, "x", &sb, errp), MSB_E_VALUE, "ops");
}

Test(sandbox, new_copies_name_and_releases_once)
{
	struct rec r = {.id = "inst-1"};
	char name[] = "recorder";
	msb_sandbox *sb = NULL;
	cr_assert_eq(msb_sandbox_new(&rec_ops, &r, name, &sb, NULL), 0);
	name[0] = 'X';
	cr_assert_str_eq(msb_sandbox_backend_name(sb), "recorder");
	cr_assert_str_eq(msb_sandbox_instance_id(sb), "inst-1");
	cr_assert_eq(r.released, 0);
	msb_sandbox_free(sb);
	cr_assert_eq(r.released, 1);
	msb_sandbox_free(NULL);

	/* instance_id is never NULL even if the backend answers NULL. */
	struct rec r2 = {0};
	sb = make(&r2);
	cr_assert_str_eq(msb_sandbox_instance_id(sb), "");
	msb_sandbox_free(sb);
}

/* ---- validation before dispatch (24.36) --------------------------------------- */

Test(sandbox, exec_refuses_bad_timeouts)
{
	struct rec r = {0};
	msb_sandbox *sb = make(&r);
	const char *argv[] = {"true", NULL};
	double bad[] = {0.0, -1.0, NAN, INFINITY, -INFINITY};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		msb_exec_request req = MSB_EXEC_REQUEST_INIT;
		req.argv = argv;
		req.timeout = bad[i];
		msb_exec_result out = {0};
		REFUSED(msb_sandbox_exec(sb, &req, &out, errp), MSB_E_VALUE,
			"must be finite and positive");
		REFUSED(msb_sandbox_run_code(sb, "1", bad[i], NULL, &out, errp), MSB_E_VALUE,
			"must be finite and positive");
		REFUSED(msb_sandbox_reclaim(sb, "d", NULL, bad[i], errp), MSB_E_VALUE,
			"must be finite and positive");
		REFUSED(msb_sandbox_reset(sb, bad[i], errp), MSB_E_VALUE,
			"must be finite and positive");
	}
	cr_assert_eq(r.calls, 0, "a refused call reached the backend");
	msb_sandbox_free(sb);
}

Test(sandbox, exec_needs_exactly_one_command_shape)
{
	struct rec r = {0};
	msb_sandbox *sb = make(&r);
	const char *argv[] = {"true", NULL};
	const char *empty[] = {NULL};
	msb_exec_result out = {0};

	msb_exec_request req = MSB_EXEC_REQUEST_INIT;
	REFUSED(msb_sandbox_exec(sb, &req, &out, errp), MSB_E_VALUE,
		"exactly one of argv and shell");

	req.argv = argv;
	req.shell = "true";
	REFUSED(msb_sandbox_exec(sb, &req, &out, errp), MSB_E_VALUE,
		"exactly one of argv and shell");

	req.shell = NULL;
	req.argv = empty;
	REFUSED(msb_sandbox_exec(sb, &req, &out, errp), MSB_E_VALUE, "argv is empty");

	req.argv = argv;
	req.stdin_len = 3;
	REFUSED(msb_sandbox_exec(sb, &req, &out, errp), MSB_E_VALUE, "stdin_data");
	REFUSED(msb_sandbox_exec(sb, NULL, &out, errp), MSB_E_VALUE, "request is NULL");

	req.stdin_len = 0;
	REFUSED(msb_sandbox_exec(NULL, &req, &out, errp), MSB_E_VALUE, "sandbox is NULL");
	cr_assert_eq(r.calls, 0);

	/* A valid request is dispatched. */
	cr_assert_eq(msb_sandbox_exec(sb, &req, &out, NULL), 0);
	cr_assert_eq(r.calls, 1);
	msb_exec_result_clear(&out);
	msb_sandbox_free(sb);
}

/* 9.8: exec_bounded requires a positive budget. */
Test(sandbox, exec_bounded_needs_a_budget)
{
	struct rec r = {0};
	msb_sandbox *sb = make(&r);
	const char *argv[] = {"true", NULL};
	msb_exec_request req = MSB_EXEC_REQUEST_INIT;
	req.argv = argv;
	msb_exec_result out = {0};
	REFUSED(msb_sandbox_exec_bounded(sb, &req, &out, errp), MSB_E_VALUE,
		"max_output_bytes must be positive");
	cr_assert_eq(r.calls, 0);
	req.max_output_bytes = 1;
	cr_assert_eq(msb_sandbox_exec_bounded(sb, &req, &out, NULL), 0);
	cr_assert_eq(r.calls, 1);
	msb_exec_result_clear(&out);
	msb_sandbox_free(sb);
}

Test(sandbox, file_plane_refuses_null_arguments)
{
	struct rec r = {0};
	msb_sandbox *sb = make(&r);
	bool present;
	msb_entry e;
	uint8_t *data;
	size_t len;
	msb_entry *entries;
	size_t n;
	msb_fingerprint fp;

	REFUSED(msb_sandbox_write_file(sb, NULL, (const uint8_t *)"x", 1, NULL, errp), MSB_E_VALUE,
		"path is NULL");
	REFUSED(msb_sandbox_write_file(sb, "f", NULL, 1, NULL, errp), MSB_E_VALUE, "data is NULL");
	REFUSED(msb_sandbox_stat_file(sb, NULL, NULL, &present, &e, errp), MSB_E_VALUE,
		"path is NULL");
	REFUSED(msb_sandbox_stat_file(sb, "f", NULL, NULL, &e, errp), MSB_E_VALUE,
		"present pointer is NULL");
	REFUSED(msb_sandbox_read_file(sb, "f", NULL, 10, NULL, &len, errp), MSB_E_VALUE,
		"data pointer is NULL");
	REFUSED(msb_sandbox_read_file(sb, NULL, NULL, 10, &data, &len, errp), MSB_E_VALUE,
		"path is NULL");
	REFUSED(msb_sandbox_list_dir(sb, ".", NULL, &entries, NULL, errp), MSB_E_VALUE,
		"count pointer is NULL");
	REFUSED(msb_sandbox_list_dir(sb, NULL, NULL, &entries, &n, errp), MSB_E_VALUE,
		"path is NULL");
	REFUSED(msb_sandbox_remove(sb, NULL, NULL, false, errp), MSB_E_VALUE, "path is NULL");
	REFUSED(msb_sandbox_reclaim(sb, NULL, NULL, 1.0, errp), MSB_E_VALUE, "directory is NULL");
	REFUSED(msb_sandbox_fingerprint(sb, NULL, &fp, errp), MSB_E_VALUE,
		"supported pointer is NULL");
	REFUSED(msb_sandbox_run_code(sb, NULL, 1.0, NULL, NULL, errp), MSB_E_VALUE, "code is NULL");
	cr_assert_eq(r.calls, 0);
	msb_sandbox_free(sb);
}

/* (issue 15 finding 9) A trailing slash names a directory: a file is never
 * read or written through "a.txt/" (which normalises to "a.txt", 10.12). */
Test(sandbox, file_plane_refuses_a_directory_name_for_a_file)
{
	struct rec r = {0};
	msb_sandbox *sb = make(&r);
	uint8_t *data = NULL;
	size_t len = 0;
	static const char *const dir_names[] = {"a.txt/", "a.txt//", "d/a.txt/.", "/", "./"};
	for (size_t i = 0; i < sizeof(dir_names) / sizeof(dir_names[0]); i++) {
		REFUSED(msb_sandbox_read_file(sb, dir_names[i], NULL, 10, &data, &len, errp),
			MSB_E_VALUE, "names a directory");
		REFUSED(msb_sandbox_write_file(sb, dir_names[i], (const uint8_t *)"x", 1, NULL,
					       errp),
			MSB_E_VALUE, "names a directory");
	}
	cr_assert_eq(r.calls, 0);
	cr_assert_null(data);
	/* Names of files, and a bare "." or a ".." leaf (directories the backend
	 * refuses itself), go through. */
	static const char *const file_names[] = {"a.txt", "d/a.txt", "/a.txt", ".a",
						 "d/..a", ".",	     "d/.."};
	for (size_t i = 0; i < sizeof(file_names) / sizeof(file_names[0]); i++) {
		cr_assert_eq(msb_sandbox_read_file(sb, file_names[i], NULL, 10, &data, &len, NULL),
			     0, "%s", file_names[i]);
		free(data);
		data = NULL;
	}
	cr_assert_eq(r.calls, 7);
	msb_sandbox_free(sb);
}

/* Outputs first, written only on success (STYLE: errors and ownership). */
Test(sandbox, outputs_untouched_on_failure)
{
	struct rec r = {.fail = MSB_E_OS};
	msb_sandbox *sb = make(&r);
	const char *argv[] = {"true", NULL};
	msb_exec_request req = MSB_EXEC_REQUEST_INIT;
	req.argv = argv;
	msb_exec_result out = {.exit_code = 42};
	REFUSED(msb_sandbox_exec(sb, &req, &out, errp), MSB_E_OS, "scripted failure");
	cr_assert_null(out.stdout_bytes);
	cr_assert_eq(out.exit_code, 42);

	bool present = false;
	msb_entry e = {0};
	cr_assert_eq(msb_sandbox_stat_file(sb, "f", NULL, &present, &e, NULL), MSB_E_OS);
	cr_assert_not(present);
	cr_assert_null(e.path);

	uint8_t *data = NULL;
	size_t len = 99;
	cr_assert_eq(msb_sandbox_read_file(sb, "f", NULL, 10, &data, &len, NULL), MSB_E_OS);
	cr_assert_null(data);
	cr_assert_eq(len, 99);

	msb_entry *entries = NULL;
	size_t n = 99;
	cr_assert_eq(msb_sandbox_list_dir(sb, ".", NULL, &entries, &n, NULL), MSB_E_OS);
	cr_assert_null(entries);
	cr_assert_eq(n, 99);

	bool supported = false;
	msb_fingerprint fp = {0};
	cr_assert_eq(msb_sandbox_fingerprint(sb, &supported, &fp, NULL), MSB_E_OS);
	cr_assert_null(fp.changed_paths);
	cr_assert_eq(r.calls, 5);
	msb_sandbox_free(sb);

	/* And on success they are written. */
	struct rec ok = {0};
	sb = make(&ok);
	cr_assert_eq(msb_sandbox_exec(sb, &req, &out, NULL), 0);
	cr_assert_eq(out.stdout_len, 7);
	cr_assert_str_eq((char *)out.stdout_bytes, "partial");
	msb_exec_result_clear(&out);
	cr_assert_null(out.stdout_bytes);
	cr_assert_eq(out.stdout_len, 0);
	cr_assert_eq(msb_sandbox_fingerprint(sb, &supported, &fp, NULL), 0);
	cr_assert(supported);
	cr_assert_str_eq(fp.changed_paths[0], "/partial");
	msb_fingerprint_clear(&fp);
	cr_assert_null(fp.changed_paths);
	msb_sandbox_free(sb);
}

Test(sandbox, clear_helpers_accept_null)
{
	msb_exec_result_clear(NULL);
	msb_entry_clear(NULL);
	msb_entries_free(NULL, 3);
	msb_fingerprint_clear(NULL);
	msb_entry *v = calloc(2, sizeof(*v));
	v[0].path = strdup("a");
	v[1].path = strdup("b");
	msb_entries_free(v, 2);
}

/* ---- 9.6: text views ------------------------------------------------------------ */

static void assert_decodes(const char *in, size_t in_len, const char *want, size_t want_len)
{
	size_t len = 12345;
	char *t = msb_text_from_bytes_len((const uint8_t *)in, in_len, &len);
	cr_assert_not_null(t);
	cr_assert_eq(len, want_len, "decoded length %zu, want %zu", len, want_len);
	cr_assert_eq(memcmp(t, want, want_len), 0);
	cr_assert_eq(t[len], '\0', "not NUL-terminated");
	free(t);
}

#define DECODES(in, want) assert_decodes(in, sizeof(in) - 1, want, sizeof(want) - 1)
#define R "\xef\xbf\xbd"

Test(sandbox, text_9_6_replacement_keeps_nul)
{
	DECODES("\xff\x00ok", R "\x00ok");
	/* The plain call agrees up to the first NUL. */
	char *t = msb_text_from_bytes((const uint8_t *)"\xff\x00ok", 4);
	cr_assert_str_eq(t, R);
	cr_assert_eq(memcmp(t, R "\x00ok", 7), 0);
	free(t);
}

/* Vectors checked against Python's bytes.decode("utf-8", "replace"). */
Test(sandbox, text_9_6_maximal_subparts_like_python)
{
	DECODES("\xe2\x82", R);
	DECODES("\xe2\x82"
		"A",
		R "A");
	DECODES("\xf0\x80\x80\x80", R R R R);
	DECODES("\xed\xa0\x80", R R R);
	DECODES("\xf4\x90\x80\x80", R R R R);
	DECODES("\xc0\xaf", R R);
	DECODES("\xf1\x80\x80", R);
	DECODES("\xf1\x80\x80\xe1\x80\xc2", R R R);
	DECODES("\xe0\x9f\x80", R R R);
	DECODES("\x80\xbf", R R);
	DECODES("a\xf0\x9f\x98\x80"
		"b",
		"a\xf0\x9f\x98\x80"
		"b");
	DECODES("\xc3\xbcn\xc3\xaf", "\xc3\xbcn\xc3\xaf");
	DECODES(R, R);
	DECODES("", "");
	cr_assert_null(msb_text_from_bytes(NULL, 3));
	char *t = msb_text_from_bytes(NULL, 0);
	cr_assert_str_eq(t, "");
	free(t);
}

/* ---- 24.2: the cancellation token ------------------------------------------------ */

static bool fd_readable(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

Test(sandbox, cancel_token_trigger_wakes_fd)
{
	msb_cancel *c = NULL;
	cr_assert_eq(msb_cancel_new(&c, NULL), 0);
	int fd = msb_cancel_fd(c);
	cr_assert_geq(fd, 0);
	cr_assert(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	cr_assert(fcntl(fd, F_GETFL) & O_NONBLOCK);
	cr_assert_not(msb_cancel_requested(c));
	cr_assert_not(fd_readable(fd));
	msb_cancel_trigger(c);
	msb_cancel_trigger(c); /* idempotent */
	cr_assert(msb_cancel_requested(c));
	cr_assert(fd_readable(fd));
	uint64_t v = 0;
	cr_assert_eq(read(fd, &v, sizeof(v)), (ssize_t)sizeof(v));
	cr_assert_eq(v, 1, "a second trigger wrote again");
	msb_cancel_free(c);

	msb_cancel_trigger(NULL);
	cr_assert_not(msb_cancel_requested(NULL));
	cr_assert_eq(msb_cancel_fd(NULL), -1);
	msb_cancel_free(NULL);
}

static msb_cancel *signal_token;
static void on_signal(int sig)
{
	msb_cancel_trigger(signal_token);
}

Test(sandbox, cancel_token_trigger_from_signal_handler)
{
	cr_assert_eq(msb_cancel_new(&signal_token, NULL), 0);
	struct sigaction sa = {.sa_handler = on_signal};
	sigemptyset(&sa.sa_mask);
	cr_assert_eq(sigaction(SIGUSR1, &sa, NULL), 0);
	raise(SIGUSR1);
	cr_assert(msb_cancel_requested(signal_token));
	cr_assert(fd_readable(msb_cancel_fd(signal_token)));
	signal(SIGUSR1, SIG_DFL);
	msb_cancel_free(signal_token);
}
