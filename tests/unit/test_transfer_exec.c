/* SPDX-License-Identifier: Apache-2.0 */
/*
 * File transfer over exec (checklist section 11) against a scripted guest
 * shell: the spy sandbox answers the road's sh commands from the fake's
 * file plane, records them, and misbehaves on request.
 */
#include <pthread.h>
#include <stdio.h>

#include <criterion/criterion.h>

#include <msb/msb.h>
#include <msb/testing.h>

#include "helpers.h"
#include "scripted_backend.h"
#include "spy_sandbox.h"

#define BASE MSB_DEFAULT_WORK_DIR

static msb_fake_sandbox *fake;
static struct spy spy;
static msb_sandbox *sb;

/* How the scripted guest misbehaves. */
static struct guest {
	pthread_mutex_t lock;
	char log[64][96]; /* "<op> <arg1>" */
	size_t n_log;
	const char *timeout_on; /* op name */
	const char *cancel_on;
	const char *denied_path; /* behind an unsearchable directory */
	const char *grow_path;	 /* grows between probe and read */
	bool no_bounded;
	int chunks;
} g = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void logop(const char *op, const char *arg)
{
	pthread_mutex_lock(&g.lock);
	if (g.n_log < 64)
		snprintf(g.log[g.n_log++], sizeof(g.log[0]), "%s %s", op, arg ? arg : "");
	pthread_mutex_unlock(&g.lock);
}

static int b64v(char c)
{
	const char *t = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	const char *p = strchr(t, c);
	return c && p ? (int)(p - t) : -1;
}

static size_t b64dec(const char *s, uint8_t *out)
{
	uint32_t acc = 0;
	int bits = 0;
	size_t o = 0;
	for (; *s; s++) {
		int v = b64v(*s);
		if (v < 0)
			continue;
		acc = (acc << 6) | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[o++] = (uint8_t)(acc >> bits);
		}
	}
	return o;
}

static char *b64enc_wrapped(const uint8_t *p, size_t n)
{
	const char *t = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	char *s = malloc((n + 2) / 3 * 4 * 2 + 4);
	size_t o = 0, col = 0;
	for (size_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) |
			     (i + 2 < n ? p[i + 2] : 0);
		char q[4] = {t[v >> 18 & 63], t[v >> 12 & 63], i + 1 < n ? t[v >> 6 & 63] : '=',
			     i + 2 < n ? t[v & 63] : '='};
		for (int k = 0; k < 4; k++) {
			s[o++] = q[k];
			if (++col == 76) {
				s[o++] = '\n';
				col = 0;
			}
		}
	}
	if (col)
		s[o++] = '\n';
	s[o] = '\0';
	return s;
}

static void answer(msb_exec_result *out, int code, const char *so, const char *se)
{
	memset(out, 0, sizeof(*out));
	out->exit_code = code;
	out->stdout_bytes = (uint8_t *)strdup(so ? so : "");
	out->stdout_len = strlen((char *)out->stdout_bytes);
	out->stderr_bytes = (uint8_t *)strdup(se ? se : "");
	out->stderr_len = strlen((char *)out->stderr_bytes);
}

static int shell(struct spy *s, const msb_exec_request *q, bool bounded, msb_exec_result *out,
		 msb_error **err)
{
	if (g.no_bounded && bounded)
		return msb_error_set(err, MSB_E_NOT_IMPLEMENTED, "spy: no exec_bounded");
	cr_assert(bounded, "the road ran an unbounded exec");
	cr_assert_str_eq(q->argv[0], "sh");
	const char *script = q->argv[2], *a1 = q->argv[4], *a2 = a1 ? q->argv[5] : NULL;
	const char *wd = q->working_directory;
	const char *op = strstr(script, "mkdir -p")    ? "begin"
			 : strstr(script, "base64 -d") ? "chunk"
			 : strstr(script, "mv -f")     ? "mv"
			 : strstr(script, "rm -f")     ? "rm"
			 : strstr(script, "wc -c")     ? "probe"
			 : strstr(script, "base64 <")  ? "read"
						       : "unknown";
	logop(op, a1);
	if (g.timeout_on && strcmp(g.timeout_on, op) == 0)
		return msb_error_set(err, MSB_E_TIMEOUT, "spy: the bound expired");
	if (g.cancel_on && strcmp(g.cancel_on, op) == 0)
		return msb_error_set(err, MSB_E_CANCELLED, "spy: cancelled");
	if (strcmp(op, "begin") == 0) {
		bool present = false;
		msb_entry e = {0};
		msb_sandbox_stat_file(s->inner, a2, wd, &present, &e, NULL);
		msb_entry_clear(&e);
		if (present) {
			answer(out, 2, NULL, "sh: 1: cannot create x: File exists\n");
			return 0;
		}
		cr_assert_eq(msb_sandbox_write_file(s->inner, a2, NULL, 0, wd, NULL), 0);
	} else if (strcmp(op, "chunk") == 0) {
		uint8_t *old = NULL;
		size_t len = 0;
		cr_assert_eq(msb_sandbox_read_file(s->inner, a1, wd, 1 << 26, &old, &len, NULL), 0);
		uint8_t *buf = malloc(len + strlen(a2) + 1);
		memcpy(buf, old, len);
		len += b64dec(a2, buf + len);
		cr_assert_eq(msb_sandbox_write_file(s->inner, a1, buf, len, wd, NULL), 0);
		free(old);
		free(buf);
		__atomic_add_fetch(&g.chunks, 1, __ATOMIC_SEQ_CST);
	} else if (strcmp(op, "mv") == 0) {
		uint8_t *d = NULL;
		size_t len = 0;
		cr_assert_eq(msb_sandbox_read_file(s->inner, a1, wd, 1 << 26, &d, &len, NULL), 0);
		cr_assert_eq(msb_sandbox_write_file(s->inner, a2, d, len, wd, NULL), 0);
		cr_assert_eq(msb_sandbox_remove(s->inner, a1, wd, false, NULL), 0);
		free(d);
	} else if (strcmp(op, "rm") == 0) {
		msb_sandbox_remove(s->inner, a1, wd, false, NULL);
	} else if (strcmp(op, "probe") == 0) {
		if (g.denied_path && strcmp(a1, g.denied_path) == 0) {
			answer(out, 0, "absent sh: 1: cannot open x: Permission denied\n", NULL);
			return 0;
		}
		bool present = false;
		msb_entry e = {0};
		msb_sandbox_stat_file(s->inner, a1, wd, &present, &e, NULL);
		char line[64];
		if (!present)
			snprintf(line, sizeof(line), "absent sh: 1: cannot open x: No such file\n");
		else if (e.kind == MSB_ENTRY_DIRECTORY)
			snprintf(line, sizeof(line), "directory\n");
		else if (e.kind == MSB_ENTRY_SYMLINK)
			snprintf(line, sizeof(line), "link\n");
		else if (e.kind == MSB_ENTRY_OTHER)
			snprintf(line, sizeof(line), "other\n");
		else
			snprintf(line, sizeof(line), "file %llu\n",
				 (unsigned long long)e.size_bytes);
		msb_entry_clear(&e);
		answer(out, 0, line, NULL);
		return 0;
	} else if (strcmp(op, "read") == 0) {
		if (g.grow_path && strcmp(a1, g.grow_path) == 0) {
			static const uint8_t twenty[] = "01234567890123456789";
			msb_sandbox_write_file(s->inner, a1, twenty, 20, wd, NULL);
		}
		uint8_t *d = NULL;
		size_t len = 0;
		cr_assert_eq(msb_sandbox_read_file(s->inner, a1, wd, 1 << 26, &d, &len, NULL), 0);
		char *enc = b64enc_wrapped(d, len);
		free(d);
		answer(out, 0, enc, NULL);
		free(enc);
		if (out->stdout_len > q->max_output_bytes) {
			out->stdout_len = q->max_output_bytes;
			out->truncated = true;
		}
		return 0;
	} else {
		cr_assert_fail("unknown script `%s`", script);
	}
	answer(out, 0, NULL, NULL);
	return 0;
}

static void setup(void)
{
	static const msb_fake_seed seeds[] = {
		{BASE "/ten.txt", MSB_FAKE_SEED_BYTES, (const uint8_t *)"0123456789", 10},
		{BASE "/dir", MSB_FAKE_SEED_DIRECTORY, NULL, 0},
		{BASE "/link", MSB_FAKE_SEED_SYMLINK, NULL, 0},
	};
	msb_fake_sandbox_options o = MSB_FAKE_SANDBOX_OPTIONS_INIT;
	o.seed_files = seeds;
	o.n_seed_files = 3;
	cr_assert_eq(msb_fake_sandbox_new(&o, &fake, NULL), 0);
	memset(&spy, 0, sizeof(spy));
	cr_assert_eq(msb_fake_sandbox_handle(fake, &spy.inner, NULL), 0);
	spy.exec = shell;
	cr_assert_eq(spy_handle(&spy, &sb), 0);
	pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
	memset(&g, 0, sizeof(g));
	g.lock = m;
}

static void teardown(void)
{
	msb_sandbox_free(sb);
	msb_sandbox_free(spy.inner);
	msb_fake_sandbox_unref(fake);
}

TestSuite(transfer_exec, .init = setup, .fini = teardown);

static uint8_t *contents(const char *abs, size_t *len)
{
	uint8_t *d = NULL;
	if (msb_fake_sandbox_contents(fake, abs, &d, len, NULL) < 0)
		return NULL;
	return d;
}

Test(transfer_exec, write_goes_through_a_call_named_sibling_then_one_mv_11_1)
{
	uint8_t data[100000];
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i * 7);
	msb_exec_transfer_options o = MSB_EXEC_TRANSFER_OPTIONS_INIT;
	o.call_id = "abc123def456";
	o.chunk_bytes = 30000;
	msb_error *e = NULL;
	cr_assert_eq(msb_write_file_over_exec(sb, "out/deep/f.bin", data, sizeof(data), &o, &e), 0,
		     "%s", e ? msb_error_message(e) : "");
	cr_assert_str_eq(g.log[0], "begin out/deep");
	for (int i = 1; i <= 4; i++)
		cr_assert_str_eq(g.log[i], "chunk out/deep/.f.bin.abc123def456");
	cr_assert_str_eq(g.log[5], "mv out/deep/.f.bin.abc123def456");
	cr_assert_eq(g.n_log, 6);
	size_t len = 0;
	uint8_t *d = contents(BASE "/out/deep/f.bin", &len);
	cr_assert_eq(len, sizeof(data));
	cr_assert_eq(memcmp(d, data, len), 0);
	free(d);
	cr_assert_null(contents(BASE "/out/deep/.f.bin.abc123def456", &len), "sibling left");
}

struct writer {
	const uint8_t *data;
	size_t len;
	const char *call;
	int r;
};

static void *write_thread(void *p)
{
	struct writer *w = p;
	msb_exec_transfer_options o = MSB_EXEC_TRANSFER_OPTIONS_INIT;
	o.call_id = w->call;
	w->r = msb_write_file_over_exec(sb, "shared.bin", w->data, w->len, &o, NULL);
	return NULL;
}

Test(transfer_exec, concurrent_writers_leave_one_whole_file_11_2)
{
	size_t n = 1u << 20;
	uint8_t *a = malloc(n), *b = malloc(n);
	memset(a, 'A', n);
	memset(b, 'B', n);
	struct writer wa = {a, n, "aaaaaaaaaaaa", -1}, wb = {b, n, "bbbbbbbbbbbb", -1};
	pthread_t ta, tb;
	pthread_create(&ta, NULL, write_thread, &wa);
	pthread_create(&tb, NULL, write_thread, &wb);
	pthread_join(ta, NULL);
	pthread_join(tb, NULL);
	cr_assert_eq(wa.r, 0);
	cr_assert_eq(wb.r, 0);
	size_t len = 0;
	uint8_t *d = contents(BASE "/shared.bin", &len);
	cr_assert_eq(len, n);
	cr_assert(memcmp(d, a, n) == 0 || memcmp(d, b, n) == 0, "an interleaving landed");
	free(d);
	free(a);
	free(b);
}

Test(transfer_exec, read_probes_then_reads_then_counts_11_3)
{
	msb_exec_transfer_options o = MSB_EXEC_TRANSFER_OPTIONS_INIT;
	o.max_bytes = 15;
	uint8_t *d = NULL;
	size_t len = 0;
	cr_assert_eq(msb_read_file_over_exec(sb, "ten.txt", &o, &d, &len, NULL), 0);
	cr_assert_eq(len, 10);
	cr_assert_eq(memcmp(d, "0123456789", 10), 0);
	free(d);
	cr_assert_str_eq(g.log[0], "probe ten.txt");
	cr_assert_str_eq(g.log[1], "read ten.txt");
	/* Grows from 10 to 20 bytes between probe and read, max 15. */
	g.grow_path = "ten.txt";
	assert_refused(msb_read_file_over_exec(sb, "ten.txt", &o, &d, &len, &e_),
		       MSB_E_TRANSFER_CAP_EXCEEDED, "grew");
	/* Above the cap at the probe: refused before the read. */
	g.grow_path = NULL;
	o.max_bytes = 5;
	g.n_log = 0;
	assert_refused(msb_read_file_over_exec(sb, "ten.txt", &o, &d, &len, &e_),
		       MSB_E_TRANSFER_CAP_EXCEEDED, "max_bytes");
	cr_assert_eq(g.n_log, 1, "read after a probe over the cap");
}

Test(transfer_exec, probe_tells_not_found_from_permission_denied_11_4)
{
	msb_exec_transfer_options o = MSB_EXEC_TRANSFER_OPTIONS_INIT;
	uint8_t *d = NULL;
	size_t len = 0;
	int refusal = -1;
	msb_error *e = NULL;
	g.denied_path = "locked/f";
	cr_assert_eq(msb_read_file_over_exec(sb, "locked/f", &o, &d, &len, &e), MSB_E_FILE_REFUSED);
	cr_assert(msb_error_file_refusal(e, &refusal));
	cr_assert_eq(refusal, MSB_FILE_REFUSAL_PERMISSION_DENIED);
	msb_error_free(e);
	e = NULL;
	cr_assert_eq(msb_read_file_over_exec(sb, "absent", &o, &d, &len, &e), MSB_E_FILE_REFUSED);
	cr_assert(msb_error_file_refusal(e, &refusal));
	cr_assert_eq(refusal, MSB_FILE_REFUSAL_NOT_FOUND);
	msb_error_free(e);
}

Test(transfer_exec, both_helpers_need_exec_bounded_11_5)
{
	g.no_bounded = true;
	msb_exec_transfer_options o = MSB_EXEC_TRANSFER_OPTIONS_INIT;
	uint8_t *d = NULL;
	size_t len = 0;
	assert_refused(msb_read_file_over_exec(sb, "ten.txt", &o, &d, &len, &e_),
		       MSB_E_NOT_IMPLEMENTED, "needs exec_bounded");
	assert_refused(msb_write_file_over_exec(sb, "x", (const uint8_t *)"x", 1, &o, &e_),
		       MSB_E_NOT_IMPLEMENTED, "needs exec_bounded");
	size_t n = 0;
	cr_assert_null(contents(BASE "/x", &n));
}

Test(transfer_exec, shell_utilities_11_6)
{
	const char *want[] = {"sh", "mkdir", "mv", "rm", "base64", "wc"};
	for (size_t i = 0; i < 6; i++)
		cr_assert_str_eq(MSB_SHELL_UTILITIES[i], want[i]);
	cr_assert_null(MSB_SHELL_UTILITIES[6]);
}

Test(transfer_exec, refusals_carry_a_file_refusal_11_7)
{
	msb_exec_transfer_options o = MSB_EXEC_TRANSFER_OPTIONS_INIT;
	uint8_t *d = NULL;
	size_t len = 0;
	struct {
		const char *path;
		msb_file_refusal want;
	} cases[] = {{"dir", MSB_FILE_REFUSAL_IS_DIRECTORY},
		     {"link", MSB_FILE_REFUSAL_INVALID_PATH}};
	for (size_t i = 0; i < 2; i++) {
		msb_error *e = NULL;
		cr_assert_eq(msb_read_file_over_exec(sb, cases[i].path, &o, &d, &len, &e),
			     MSB_E_FILE_REFUSED);
		int r = -1;
		cr_assert(msb_error_file_refusal(e, &r));
		cr_assert_eq(r, (int)cases[i].want);
		cr_assert(strstr(msb_error_message(e), msb_file_refusal_name(cases[i].want)));
		msb_error_free(e);
	}
}

Test(transfer_exec, file_refusal_of_errors_11_8)
{
	msb_file_refusal r;
	cr_assert(msb_file_refusal_of(MSB_E_PERMISSION, NULL, &r));
	cr_assert_eq(r, MSB_FILE_REFUSAL_PERMISSION_DENIED);
	cr_assert(msb_file_refusal_of(MSB_E_NOT_FOUND, NULL, &r));
	cr_assert_eq(r, MSB_FILE_REFUSAL_NOT_FOUND);
	cr_assert(msb_file_refusal_of(MSB_E_IS_DIRECTORY, NULL, &r));
	cr_assert_eq(r, MSB_FILE_REFUSAL_IS_DIRECTORY);
	cr_assert(msb_file_refusal_of(MSB_E_VALUE, NULL, &r));
	cr_assert_eq(r, MSB_FILE_REFUSAL_INVALID_PATH);
	cr_assert(!msb_file_refusal_of(MSB_E_TIMEOUT, NULL, &r));
	cr_assert(!msb_file_refusal_of(MSB_E_PROGRAM_TIMEOUT, NULL, &r));
	cr_assert(!msb_file_refusal_of(MSB_E_TRANSFER_CAP_EXCEEDED, NULL, &r));
	cr_assert(!msb_file_refusal_of(MSB_E_OS, NULL, &r));
	/* The shell road's refusal maps to its payload: one vocabulary. */
	msb_exec_transfer_options o = MSB_EXEC_TRANSFER_OPTIONS_INIT;
	uint8_t *d = NULL;
	size_t len = 0;
	msb_error *e = NULL;
	cr_assert_eq(msb_read_file_over_exec(sb, "dir", &o, &d, &len, &e), MSB_E_FILE_REFUSED);
	cr_assert(msb_file_refusal_of(msb_error_code(e), e, &r));
	cr_assert_eq(r, MSB_FILE_REFUSAL_IS_DIRECTORY);
	msb_error_free(e);
	/* And the file plane's errors land in the same vocabulary. */
	e = NULL;
	cr_assert_eq(msb_sandbox_read_file(sb, "dir", NULL, 10, &d, &len, &e), MSB_E_IS_DIRECTORY);
	cr_assert(msb_file_refusal_of(msb_error_code(e), e, &r));
	cr_assert_eq(r, MSB_FILE_REFUSAL_IS_DIRECTORY);
	msb_error_free(e);
}

Test(transfer_exec, entry_refusal_11_9)
{
	msb_file_refusal r;
	cr_assert(msb_entry_refusal(NULL, &r));
	cr_assert_eq(r, MSB_FILE_REFUSAL_NOT_FOUND);
	msb_entry f = {.kind = MSB_ENTRY_FILE}, d = {.kind = MSB_ENTRY_DIRECTORY},
		  l = {.kind = MSB_ENTRY_SYMLINK}, o = {.kind = MSB_ENTRY_OTHER};
	cr_assert(!msb_entry_refusal(&f, &r));
	cr_assert(msb_entry_refusal(&d, &r));
	cr_assert_eq(r, MSB_FILE_REFUSAL_IS_DIRECTORY);
	cr_assert(msb_entry_refusal(&l, &r));
	cr_assert_eq(r, MSB_FILE_REFUSAL_INVALID_PATH);
	cr_assert(msb_entry_refusal(&o, &r));
	cr_assert_eq(r, MSB_FILE_REFUSAL_INVALID_PATH);
}

Test(transfer_exec, timeout_during_final_mv_is_unfinished_11_10)
{
	g.timeout_on = "mv";
	msb_exec_transfer_options o = MSB_EXEC_TRANSFER_OPTIONS_INIT;
	assert_refused(msb_write_file_over_exec(sb, "f", (const uint8_t *)"abc", 3, &o, &e_),
		       MSB_E_SHELL_TRANSFER_UNFINISHED, "unclean");
	cr_assert(!msb_code_is(MSB_E_SHELL_TRANSFER_UNFINISHED, MSB_CAT_TIMEOUT),
		  "an unfinished transfer is not a TimeoutError");
	/* The sibling is left alone: the mv may still be running. */
	cr_assert(strncmp(g.log[g.n_log - 1], "mv .f.", 6) == 0, "%s", g.log[g.n_log - 1]);
}

Test(transfer_exec, cancellation_passes_through_11_11)
{
	g.cancel_on = "chunk";
	msb_exec_transfer_options o = MSB_EXEC_TRANSFER_OPTIONS_INIT;
	assert_refused(msb_write_file_over_exec(sb, "f", (const uint8_t *)"abc", 3, &o, &e_),
		       MSB_E_CANCELLED, "cancelled");
	size_t n = 0;
	cr_assert_null(contents(BASE "/f", &n));
}

/* 11.10 in a tool call: the unfinished transfer reports the instance unclean
 * on the call, so at the call's end it is disposed even under RECLAIM. */
static int unclean_run(bool transfer)
{
	msb_fake_sandbox_options so = MSB_FAKE_SANDBOX_OPTIONS_INIT;
	so.raises = MSB_E_TIMEOUT; /* every exec's bound expires */
	msb_fake_sandbox *fs = NULL;
	cr_assert_eq(msb_fake_sandbox_new(&so, &fs, NULL), 0);
	msb_fake_backend_options fo = MSB_FAKE_BACKEND_OPTIONS_INIT;
	fo.sandbox = fs;
	msb_backend *b = NULL;
	msb_fake_backend *fb = NULL;
	cr_assert_eq(msb_fake_backend_new(&fo, &b, &fb, NULL), 0);
	msb_spec *spec = spec_from("{\"kind\": \"A\"}");
	logcap log;
	logcap_init(&log);
	msb_router *r =
		router_over(&b, 1, MSB_CLEANUP_RECLAIM, MSB_FAILED_RECLAIM_DISPOSE, NULL, &log);
	struct test_ctx tc;
	test_ctx_init(&tc, "s", "t");
	msb_caller_context ctx = test_ctx_context(&tc);
	msb_tool_session_options o = MSB_TOOL_SESSION_OPTIONS_INIT;
	o.router = r;
	o.context = &ctx;
	o.agent_dir = "a";
	o.spec = spec;
	o.name = "tool";
	msb_tool_session *s = NULL;
	cr_assert_eq(msb_tool_session_attach(&o, &s, NULL), 0);
	msb_tool_call *c = NULL;
	cr_assert_eq(msb_tool_session_begin_call(s, NULL, &c, NULL), 0);
	static const msb_key key = {"s", "t", "a", NULL};
	msb_sandbox *guest = NULL;
	char *sentence = NULL;
	cr_assert_eq(msb_tool_call_acquire(c, &key, &guest, &sentence, NULL), 0);
	cr_assert_not_null(guest, "%s", sentence ? sentence : "");
	if (transfer) {
		msb_exec_transfer_options to = MSB_EXEC_TRANSFER_OPTIONS_INIT;
		to.call = c;
		assert_refused(
			msb_write_file_over_exec(guest, "f", (const uint8_t *)"x", 1, &to, &e_),
			MSB_E_SHELL_TRANSFER_UNFINISHED, "treat the sandbox as unclean");
	}
	msb_call_outcome oc = MSB_CALL_OUTCOME_INIT;
	oc.text = "done";
	msb_tool_result *res = NULL;
	cr_assert_eq(msb_tool_call_end(c, &oc, &res, NULL), 0);
	msb_tool_result_free(res);
	int disposed = (int)msb_fake_backend_disposed_count(fb);
	msb_tool_session_unref(s);
	msb_router_free(r);
	msb_spec_unref(spec);
	msb_backend_unref(b);
	msb_fake_sandbox_unref(fs);
	return disposed;
}

Test(transfer_exec, unfinished_transfer_marks_the_instance_unclean_11_10)
{
	cr_assert_eq(unclean_run(false), 0, "a clean call under RECLAIM is not disposed");
	cr_assert_eq(unclean_run(true), 1, "the unfinished transfer's instance was not disposed");
}
