/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The testing fake (checklist section 19) and, through it, the section 9
 * file plane as a caller sees it via the msb_sandbox_* API.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <criterion/criterion.h>

/* 19.14: the main header must not bring in the fake or the path helpers;
 * they are reached by name. Checked at compile time, before including them. */
#include <msb/msb.h>
#if defined(MSB_TESTING_H) || defined(MSB_PATHS_H)
#error "msb/msb.h includes msb/testing.h or msb/paths.h (19.14)"
#endif
#ifdef MSB_FAKE_SANDBOX_OPTIONS_VERSION
#error "msb/msb.h declares the testing fake (19.14)"
#endif

#include <msb/testing.h>

#define BASE MSB_DEFAULT_WORK_DIR

/* ---- helpers ---------------------------------------------------------------- */

static void assert_refused(int r, msb_error *err, int code, const char *phrase)
{
	cr_assert_eq(r, code, "expected %s, got %s (%s)", msb_code_name(code), msb_code_name(r),
		     err ? msb_error_message(err) : "no error");
	cr_assert_not_null(err);
	cr_assert_eq(msb_error_code(err), code);
	cr_assert(strstr(msb_error_message(err), phrase) != NULL, "message `%s` lacks `%s`",
		  msb_error_message(err), phrase);
}

#define REFUSED(call, code, phrase)                                                                \
	do {                                                                                       \
		msb_error *err_ = NULL;                                                            \
		msb_error **errp = &err_;                                                          \
		(void)errp;                                                                        \
		int r_ = (call);                                                                   \
		assert_refused(r_, err_, code, phrase);                                            \
		msb_error_free(err_);                                                              \
	} while (0)

struct fx {
	msb_fake_sandbox *fs;
	msb_sandbox *sb;
};

static struct fx fake_with(const msb_fake_seed *seeds, size_t n)
{
	msb_fake_sandbox_options o = MSB_FAKE_SANDBOX_OPTIONS_INIT;
	o.seed_files = seeds;
	o.n_seed_files = n;
	struct fx f = {0};
	msb_error *err = NULL;
	cr_assert_eq(msb_fake_sandbox_new(&o, &f.fs, &err), 0, "%s",
		     err ? msb_error_message(err) : "");
	cr_assert_eq(msb_fake_sandbox_handle(f.fs, &f.sb, NULL), 0);
	return f;
}

static void fx_free(struct fx *f)
{
	msb_sandbox_free(f->sb);
	msb_fake_sandbox_unref(f->fs);
}

#define FILE_SEED(p, s)                                                                            \
	{                                                                                          \
		(p), MSB_FAKE_SEED_BYTES, (const uint8_t *)(s), sizeof(s) - 1                      \
	}
#define LINK_SEED(p)                                                                               \
	{                                                                                          \
		(p), MSB_FAKE_SEED_SYMLINK, NULL, 0                                                \
	}
#define DIR_SEED(p)                                                                                \
	{                                                                                          \
		(p), MSB_FAKE_SEED_DIRECTORY, NULL, 0                                              \
	}
#define OTHER_SEED(p)                                                                              \
	{                                                                                          \
		(p), MSB_FAKE_SEED_OTHER, NULL, 0                                                  \
	}
#define N(a) (sizeof(a) / sizeof((a)[0]))

static int put(msb_sandbox *sb, const char *path, const char *text, const char *wd, msb_error **err)
{
	return msb_sandbox_write_file(sb, path, (const uint8_t *)text, strlen(text), wd, err);
}

static bool stored(msb_fake_sandbox *fs, const char *abs)
{
	char **paths = msb_fake_sandbox_paths(fs);
	bool found = false;
	for (size_t i = 0; paths && paths[i]; i++)
		found = found || strcmp(paths[i], abs) == 0;
	msb_strv_free(paths);
	return found;
}

static msb_entry_kind kind_of(msb_sandbox *sb, const char *path, const char *wd)
{
	bool present = false;
	msb_entry e = {0};
	msb_error *err = NULL;
	cr_assert_eq(msb_sandbox_stat_file(sb, path, wd, &present, &e, &err), 0, "stat `%s`: %s",
		     path, err ? msb_error_message(err) : "");
	cr_assert(present, "`%s` absent", path);
	msb_entry_kind k = e.kind;
	msb_entry_clear(&e);
	return k;
}

static char *contents(msb_fake_sandbox *fs, const char *abs, size_t *len)
{
	uint8_t *d = NULL;
	cr_assert_eq(msb_fake_sandbox_contents(fs, abs, &d, len, NULL), 0, "no file `%s`", abs);
	return (char *)d;
}

static msb_exec_result run_argv(msb_sandbox *sb, const char *const *argv, const char *wd)
{
	msb_exec_request req = MSB_EXEC_REQUEST_INIT;
	req.argv = argv;
	req.working_directory = wd;
	req.timeout = 7.5;
	msb_exec_result out = {0};
	msb_error *err = NULL;
	cr_assert_eq(msb_sandbox_exec(sb, &req, &out, &err), 0, "%s",
		     err ? msb_error_message(err) : "");
	return out;
}

/* ---- 19.1, 19.2: the backend and its declarations ------------------------------ */

Test(fake, backend_defaults_19_1)
{
	msb_backend *b = NULL;
	msb_fake_backend *fb = NULL;
	msb_error *err = NULL;
	cr_assert_eq(msb_fake_backend_new(NULL, &b, &fb, &err), 0, "%s",
		     err ? msb_error_message(err) : "");
	cr_assert_str_eq(msb_backend_name(b), "in-process");
	cr_assert_str_eq(msb_backend_isolation(b), "none");
	cr_assert_not_null(msb_fake_backend_sandbox(fb));
	const msb_declarations *d = msb_backend_declarations(b);
	cr_assert_eq(d->capabilities, MSB_FAKE_BACKEND_DECLARATIONS.capabilities);
	cr_assert_eq(d->egress_modes, MSB_EGRESS_ALLOWLIST | MSB_EGRESS_CLOSED);
	msb_backend_unref(b);
}

Test(fake, declarations_19_2)
{
	const msb_declarations *d = &MSB_FAKE_BACKEND_DECLARATIONS;
	/* 23.37: DEFAULT_CAPABILITIES | {RECLAIM}. */
	cr_assert_eq(d->capabilities, MSB_CAP_EXEC | MSB_CAP_FILES_IN | MSB_CAP_RECLAIM);
	cr_assert_eq(d->egress_modes, MSB_EGRESS_ALLOWLIST | MSB_EGRESS_CLOSED);
	cr_assert_eq(d->os_families, 0);
	cr_assert_eq(d->limits.files_in.max_bytes_per_file,
		     MSB_DEFAULT_SANDBOX_LIMITS.files_in.max_bytes_per_file);
	cr_assert_eq(d->limits.files_out.max_files, MSB_DEFAULT_SANDBOX_LIMITS.files_out.max_files);

	/* Copy-with-replacement keeps the egress modes. */
	msb_declarations repl = MSB_FAKE_BACKEND_DECLARATIONS;
	repl.capabilities |= MSB_CAP_FILES_OUT;
	msb_fake_backend_options o = MSB_FAKE_BACKEND_OPTIONS_INIT;
	o.declarations = &repl;
	o.name = "fake-out";
	o.isolation = "container";
	msb_backend *b = NULL;
	cr_assert_eq(msb_fake_backend_new(&o, &b, NULL, NULL), 0);
	cr_assert_str_eq(msb_backend_name(b), "fake-out");
	cr_assert_str_eq(msb_backend_isolation(b), "container");
	cr_assert(msb_backend_declarations(b)->capabilities & MSB_CAP_FILES_OUT);
	cr_assert_eq(msb_backend_declarations(b)->egress_modes,
		     MSB_EGRESS_ALLOWLIST | MSB_EGRESS_CLOSED);
	msb_backend_unref(b);
}

/* ---- 19.3, 19.4, 7.15: recording, one shared sandbox, purge refusal ------------- */

static msb_spec *spec_of(const char *kind)
{
	msb_spec_builder *b = msb_spec_builder_new(kind);
	msb_spec *s = NULL;
	msb_error *err = NULL;
	cr_assert_eq(msb_spec_build(b, &s, &err), 0, "%s", err ? msb_error_message(err) : "");
	msb_spec_builder_free(b);
	return s;
}

Test(fake, records_acquire_19_3)
{
	msb_backend *b = NULL;
	msb_fake_backend *fb = NULL;
	cr_assert_eq(msb_fake_backend_new(NULL, &b, &fb, NULL), 0);
	msb_spec *spec = spec_of("analysis");
	msb_key k = {"user", "t1", "agents/a", NULL};
	msb_sandbox *sb = NULL;
	cr_assert_eq(msb_backend_acquire(b, &k, spec, &sb, NULL), 0);
	cr_assert_eq(msb_fake_backend_key_count(fb), 1);
	cr_assert(msb_key_equal(msb_fake_backend_key(fb, 0), &k));
	cr_assert_str_eq(msb_spec_kind(msb_fake_backend_spec(fb, 0)), "analysis");
	cr_assert_null(msb_fake_backend_key(fb, 1));
	msb_sandbox_free(sb);
	msb_spec_unref(spec);
	msb_backend_unref(b);
}

Test(fake, acquire_error_is_not_recorded_19_3)
{
	msb_fake_backend_options o = MSB_FAKE_BACKEND_OPTIONS_INIT;
	o.acquire_error = MSB_E_RUNTIME;
	o.acquire_error_message = "engine down";
	msb_backend *b = NULL;
	msb_fake_backend *fb = NULL;
	cr_assert_eq(msb_fake_backend_new(&o, &b, &fb, NULL), 0);
	msb_spec *spec = spec_of("k");
	msb_key k = {"user", "t1", "a", NULL};
	msb_sandbox *sb = NULL;
	REFUSED(msb_backend_acquire(b, &k, spec, &sb, errp), MSB_E_RUNTIME, "engine down");
	cr_assert_null(sb);
	cr_assert_eq(msb_fake_backend_key_count(fb), 0);
	msb_spec_unref(spec);
	msb_backend_unref(b);
}

Test(fake, dispose_and_purge_records_19_3)
{
	msb_backend *b = NULL;
	msb_fake_backend *fb = NULL;
	cr_assert_eq(msb_fake_backend_new(NULL, &b, &fb, NULL), 0);
	msb_key k = {"user", "t1", "a", "c1"};
	msb_disposal_failure *f = NULL;
	cr_assert_eq(msb_backend_dispose(b, &k, "analysis", "inst-9", &f, NULL), 0);
	cr_assert_null(f, "the default dispose reports nothing");
	cr_assert_eq(msb_fake_backend_disposed_count(fb), 1);
	const char *kind = NULL, *inst = NULL;
	cr_assert(msb_key_equal(msb_fake_backend_disposed(fb, 0, &kind, &inst), &k));
	cr_assert_str_eq(kind, "analysis");
	cr_assert_str_eq(inst, "inst-9");

	/* Scripted failure, then a scripted raise. */
	msb_fake_backend_set_dispose_result(fb, MSB_DISPOSAL_REFUSED, "denied by engine", 0);
	cr_assert_eq(msb_backend_dispose(b, &k, NULL, NULL, &f, NULL), 0);
	cr_assert_not_null(f);
	cr_assert_eq(f->code, MSB_DISPOSAL_REFUSED);
	cr_assert_str_eq(f->detail, "denied by engine");
	msb_disposal_failure_free(f);
	f = NULL;
	msb_fake_backend_set_dispose_result(fb, -1, NULL, MSB_E_OS);
	REFUSED(msb_backend_dispose(b, &k, NULL, NULL, &f, errp), MSB_E_OS,
		"scripted dispose failure");
	cr_assert_eq(msb_fake_backend_disposed_count(fb), 3);

	/* dispose_scope returns purge_count: 1 by default, then 3. */
	msb_scope_purge p = {0};
	cr_assert_eq(msb_backend_dispose_scope(b, "user", "t1", &p, NULL), 0);
	cr_assert_eq(p.disposed, 1);
	msb_fake_backend_set_purge_count(fb, 3);
	cr_assert_eq(msb_backend_dispose_scope(b, "tenant", "t2", &p, NULL), 0);
	cr_assert_eq(p.disposed, 3);
	cr_assert_eq(p.undisposed, 0);
	cr_assert_eq(msb_fake_backend_purged_count(fb), 2);
	const char *scope = NULL, *thread = NULL;
	msb_fake_backend_purged(fb, 1, &scope, &thread);
	cr_assert_str_eq(scope, "tenant");
	cr_assert_str_eq(thread, "t2");
	msb_backend_unref(b);
}

/* 7.15, 4.21: no acquire while a purge of the scope is active. */
Test(fake, purging_refuses_acquire_7_15)
{
	msb_backend *b = NULL;
	msb_fake_backend *fb = NULL;
	cr_assert_eq(msb_fake_backend_new(NULL, &b, &fb, NULL), 0);
	msb_spec *spec = spec_of("k");
	msb_key k = {"user", "t1", "a", NULL};
	msb_sandbox *sb = NULL;
	msb_fake_backend_set_purging(fb, true);
	REFUSED(msb_backend_acquire(b, &k, spec, &sb, errp), MSB_E_RUNTIME,
		"a scope purge is active");
	cr_assert_eq(msb_fake_backend_key_count(fb), 0);
	msb_fake_backend_set_purging(fb, false);
	cr_assert_eq(msb_backend_acquire(b, &k, spec, &sb, NULL), 0);
	msb_sandbox_free(sb);
	msb_spec_unref(spec);
	msb_backend_unref(b);
}

Test(fake, one_shared_sandbox_19_4)
{
	msb_fake_backend_options o = MSB_FAKE_BACKEND_OPTIONS_INIT;
	o.name = "fake-a";
	msb_backend *b = NULL;
	msb_fake_backend *fb = NULL;
	cr_assert_eq(msb_fake_backend_new(&o, &b, &fb, NULL), 0);
	msb_spec *s1 = spec_of("k1");
	msb_spec *s2 = spec_of("k2");
	msb_key k1 = {"user", "t1", "a", NULL};
	msb_key k2 = {"tenant", "t9", "b", "c7"};
	msb_sandbox *a = NULL, *c = NULL;
	cr_assert_eq(msb_backend_acquire(b, &k1, s1, &a, NULL), 0);
	cr_assert_eq(msb_backend_acquire(b, &k2, s2, &c, NULL), 0);
	cr_assert_str_eq(msb_sandbox_instance_id(a), msb_sandbox_instance_id(c));
	cr_assert_str_eq(msb_sandbox_backend_name(a), "fake-a");
	cr_assert_eq(put(a, "shared.txt", "hi", NULL, NULL), 0);
	bool present = false;
	msb_entry e = {0};
	cr_assert_eq(msb_sandbox_stat_file(c, "shared.txt", NULL, &present, &e, NULL), 0);
	cr_assert(present, "a write through one handle is invisible through another");
	msb_entry_clear(&e);
	cr_assert(stored(msb_fake_backend_sandbox(fb), BASE "/shared.txt"));
	/* Refusals name the serving backend. */
	REFUSED(msb_sandbox_reset(a, 1.0, errp), MSB_E_NOT_IMPLEMENTED, "fake-a");
	msb_sandbox_free(a);
	msb_sandbox_free(c);
	msb_spec_unref(s1);
	msb_spec_unref(s2);
	msb_backend_unref(b);
}

/* 10.1, 10.2: acquire guarantees the storage base, on create and warm reuse,
 * and leaves an existing base's contents alone. */
Test(fake, acquire_ensures_base_10_1)
{
	msb_backend *b = NULL;
	msb_fake_backend *fb = NULL;
	cr_assert_eq(msb_fake_backend_new(NULL, &b, &fb, NULL), 0);
	msb_fake_sandbox *fs = msb_fake_backend_sandbox(fb);
	msb_spec *spec = spec_of("k");
	msb_key k = {"user", "t1", "a", NULL};
	msb_sandbox *sb = NULL;
	cr_assert_eq(msb_backend_acquire(b, &k, spec, &sb, NULL), 0);
	cr_assert(stored(fs, BASE));
	cr_assert_eq(put(sb, "keep", "k", NULL, NULL), 0);
	msb_sandbox *again = NULL;
	cr_assert_eq(msb_backend_acquire(b, &k, spec, &again, NULL), 0);
	cr_assert(stored(fs, BASE "/keep"), "10.2: the base's contents were touched");
	msb_sandbox_free(again);
	/* The guest deletes the base; a warm acquire brings it back. */
	cr_assert_eq(msb_sandbox_remove(sb, "work", "/maf-sandbox", true, NULL), 0);
	cr_assert_not(stored(fs, BASE));
	cr_assert_eq(msb_backend_acquire(b, &k, spec, &again, NULL), 0);
	cr_assert(stored(fs, BASE));
	msb_sandbox_free(again);
	msb_sandbox_free(sb);
	msb_spec_unref(spec);
	msb_backend_unref(b);
}

/* 10.3: a link or a non-directory at the base fails acquire. */
Test(fake, bad_base_fails_acquire_10_3)
{
	static const msb_fake_seed link[] = {LINK_SEED(BASE)};
	static const msb_fake_seed file[] = {FILE_SEED(BASE, "not a dir")};
	const msb_fake_seed *cases[] = {link, file};
	int codes[] = {MSB_E_VALUE, MSB_E_NOT_DIRECTORY};
	for (int i = 0; i < 2; i++) {
		msb_fake_sandbox_options so = MSB_FAKE_SANDBOX_OPTIONS_INIT;
		so.seed_files = cases[i];
		so.n_seed_files = 1;
		msb_fake_sandbox *fs = NULL;
		cr_assert_eq(msb_fake_sandbox_new(&so, &fs, NULL), 0);
		msb_fake_backend_options o = MSB_FAKE_BACKEND_OPTIONS_INIT;
		o.sandbox = fs;
		msb_backend *b = NULL;
		msb_fake_backend *fb = NULL;
		cr_assert_eq(msb_fake_backend_new(&o, &b, &fb, NULL), 0);
		msb_fake_sandbox_unref(fs); /* the backend holds its own reference */
		msb_spec *spec = spec_of("k");
		msb_key k = {"user", "t1", "a", NULL};
		msb_sandbox *sb = NULL;
		REFUSED(msb_backend_acquire(b, &k, spec, &sb, errp), codes[i], "storage base");
		cr_assert_null(sb);
		msb_spec_unref(spec);
		msb_backend_unref(b);
	}
}

/* 10.5: a runtime-only workload causes no directory work. */
Test(fake, runtime_only_needs_no_base_10_5)
{
	msb_backend *b = NULL;
	msb_fake_backend *fb = NULL;
	cr_assert_eq(msb_fake_backend_new(NULL, &b, &fb, NULL), 0);
	msb_fake_sandbox *fs = msb_fake_backend_sandbox(fb);
	msb_sandbox *h = NULL;
	cr_assert_eq(msb_fake_sandbox_handle(fs, &h, NULL), 0);
	cr_assert_eq(msb_sandbox_remove(h, "work", "/maf-sandbox", true, NULL), 0);
	msb_spec_builder *sbld = msb_spec_builder_new("runtime");
	msb_spec_builder_set_requires(sbld, MSB_CAP_RUN_CODE);
	msb_spec *spec = NULL;
	cr_assert_eq(msb_spec_build(sbld, &spec, NULL), 0);
	msb_spec_builder_free(sbld);
	msb_key k = {"user", "t1", "a", NULL};
	msb_sandbox *sb = NULL;
	cr_assert_eq(msb_backend_acquire(b, &k, spec, &sb, NULL), 0);
	cr_assert_not(stored(fs, BASE), "a RUN_CODE-only acquire made the base");
	msb_sandbox_free(sb);
	msb_sandbox_free(h);
	msb_spec_unref(spec);
	msb_backend_unref(b);
}

/* ---- 19.5: seeds ------------------------------------------------------------------ */

Test(fake, seeds_19_5)
{
	static const msb_fake_seed seeds[] = {
		FILE_SEED("/w/a", "x"),
		LINK_SEED("/w/l"),
		DIR_SEED("/w/d"),
		OTHER_SEED("/w/fifo"),
	};
	struct fx f = fake_with(seeds, N(seeds));
	bool present = false;
	msb_entry e = {0};
	cr_assert_eq(msb_sandbox_stat_file(f.sb, "a", "/w", &present, &e, NULL), 0);
	cr_assert(present);
	cr_assert_eq(e.kind, MSB_ENTRY_FILE);
	cr_assert(e.size_known);
	cr_assert_eq(e.size_bytes, 1);
	cr_assert_str_eq(e.path, "a");
	msb_entry_clear(&e);
	cr_assert_eq(msb_sandbox_stat_file(f.sb, "l", "/w", &present, &e, NULL), 0);
	cr_assert_eq(e.kind, MSB_ENTRY_SYMLINK);
	cr_assert_not(e.size_known, "9.20: a link has no size");
	msb_entry_clear(&e);
	cr_assert_eq(kind_of(f.sb, "d", "/w"), MSB_ENTRY_DIRECTORY);
	cr_assert_eq(kind_of(f.sb, "fifo", "/w"), MSB_ENTRY_OTHER);
	/* Ancestors of seeds exist as directories; so does the storage base. */
	cr_assert_eq(kind_of(f.sb, "/w", "/"), MSB_ENTRY_DIRECTORY);
	cr_assert_eq(kind_of(f.sb, ".", NULL), MSB_ENTRY_DIRECTORY);
	fx_free(&f);
}

Test(fake, seeds_are_validated_19_5)
{
	msb_fake_sandbox *fs = NULL;
	msb_fake_sandbox_options o = MSB_FAKE_SANDBOX_OPTIONS_INIT;
	static const msb_fake_seed rel[] = {FILE_SEED("w/a", "x")};
	o.seed_files = rel;
	o.n_seed_files = 1;
	REFUSED(msb_fake_sandbox_new(&o, &fs, errp), MSB_E_VALUE,
		"not an absolute POSIX guest path");
	static const msb_fake_seed twice[] = {FILE_SEED("/w/a", "x"), LINK_SEED("/w/./a")};
	o.seed_files = twice;
	o.n_seed_files = 2;
	REFUSED(msb_fake_sandbox_new(&o, &fs, errp), MSB_E_VALUE, "given twice");
	o.n_seed_files = 0;
	o.version = 99;
	REFUSED(msb_fake_sandbox_new(&o, &fs, errp), MSB_E_VALUE, "version 99");
	cr_assert_null(fs);
}

/* ---- 19.6, 19.7: exec and run_code scripting -------------------------------------- */

static msb_fake_sandbox *scripted(int raises)
{
	static const msb_fake_output outs[] = {
		{"bicep build", "ok"},
		{"bicep", "second"},
		{"print(", "1\n"},
	};
	msb_fake_sandbox_options o = MSB_FAKE_SANDBOX_OPTIONS_INIT;
	o.outputs = outs;
	o.n_outputs = N(outs);
	o.default_stdout = "default";
	o.raises = raises;
	msb_fake_sandbox *fs = NULL;
	cr_assert_eq(msb_fake_sandbox_new(&o, &fs, NULL), 0);
	return fs;
}

Test(fake, exec_scripting_19_6)
{
	msb_fake_sandbox *fs = scripted(0);
	msb_sandbox *sb = NULL;
	cr_assert_eq(msb_fake_sandbox_handle(fs, &sb, NULL), 0);

	const char *bicep[] = {"bicep", "build", "a b", NULL};
	msb_exec_result out = run_argv(sb, bicep, "sub");
	cr_assert_eq(out.stdout_len, 2);
	cr_assert_str_eq((char *)out.stdout_bytes, "ok");
	cr_assert_eq(out.exit_code, 0);
	cr_assert_eq(out.stderr_len, 0);
	msb_exec_result_clear(&out);

	const char *quoted[] = {"echo", "it's", "", "$HOME", "a=b,c:d@e%f+g/h.i-j_k", NULL};
	out = run_argv(sb, quoted, NULL);
	cr_assert_str_eq((char *)out.stdout_bytes, "default");
	msb_exec_result_clear(&out);

	msb_exec_request req = MSB_EXEC_REQUEST_INIT;
	req.shell = "cd x && bicep lint";
	cr_assert_eq(msb_sandbox_exec(sb, &req, &out, NULL), 0);
	cr_assert_str_eq((char *)out.stdout_bytes, "second", "first matching marker must win");
	msb_exec_result_clear(&out);

	char **cmds = msb_fake_sandbox_commands(fs);
	cr_assert_eq(msb_strv_len(cmds), 3);
	cr_assert_str_eq(cmds[0], "bicep build 'a b'");
	cr_assert_str_eq(cmds[1], "echo 'it'\"'\"'s' '' '$HOME' a=b,c:d@e%f+g/h.i-j_k");
	cr_assert_str_eq(cmds[2], "cd x && bicep lint");
	msb_strv_free(cmds);
	char **dirs = msb_fake_sandbox_command_dirs(fs);
	cr_assert_eq(msb_strv_len(dirs), 3);
	cr_assert_str_eq(dirs[0], "sub");
	cr_assert_str_eq(dirs[1], ".");
	msb_strv_free(dirs);
	cr_assert_float_eq(msb_fake_sandbox_command_timeout(fs, 0), 7.5, 1e-9);
	cr_assert_float_eq(msb_fake_sandbox_command_timeout(fs, 2), 30.0, 1e-9);
	cr_assert(isnan(msb_fake_sandbox_command_timeout(fs, 3)));
	msb_sandbox_free(sb);
	msb_fake_sandbox_unref(fs);
}

Test(fake, exec_raises_19_6)
{
	msb_fake_sandbox *fs = scripted(MSB_E_TIMEOUT);
	msb_sandbox *sb = NULL;
	cr_assert_eq(msb_fake_sandbox_handle(fs, &sb, NULL), 0);
	const char *argv[] = {"bicep", "build", NULL};
	msb_exec_request req = MSB_EXEC_REQUEST_INIT;
	req.argv = argv;
	msb_exec_result out = {0};
	for (int i = 0; i < 2; i++)
		REFUSED(msb_sandbox_exec(sb, &req, &out, errp), MSB_E_TIMEOUT,
			"scripted exec failure");
	cr_assert_null(out.stdout_bytes);
	req.max_output_bytes = 10;
	REFUSED(msb_sandbox_exec_bounded(sb, &req, &out, errp), MSB_E_TIMEOUT,
		"scripted exec failure");
	msb_sandbox_free(sb);
	msb_fake_sandbox_unref(fs);
}

Test(fake, run_code_is_recorded_apart_19_7)
{
	msb_fake_sandbox *fs = scripted(0);
	msb_sandbox *sb = NULL;
	cr_assert_eq(msb_fake_sandbox_handle(fs, &sb, NULL), 0);
	msb_exec_result out = {0};
	cr_assert_eq(msb_sandbox_run_code(sb, "print(1)", 4.0, NULL, &out, NULL), 0);
	cr_assert_str_eq((char *)out.stdout_bytes, "1\n");
	msb_exec_result_clear(&out);
	char **progs = msb_fake_sandbox_programs(fs);
	cr_assert_eq(msb_strv_len(progs), 1);
	cr_assert_str_eq(progs[0], "print(1)");
	msb_strv_free(progs);
	cr_assert_float_eq(msb_fake_sandbox_program_timeout(fs, 0), 4.0, 1e-9);
	char **cmds = msb_fake_sandbox_commands(fs);
	cr_assert_eq(msb_strv_len(cmds), 0, "run_code leaked into commands");
	msb_strv_free(cmds);
	msb_sandbox_free(sb);
	msb_fake_sandbox_unref(fs);
}

/* 9.8, 23.24 (DESIGN 9.24): overflow is truncation, flagged. */
Test(fake, exec_bounded_truncates_9_8)
{
	static char big[10 * 1024 + 1];
	memset(big, 'x', sizeof(big) - 1);
	msb_fake_sandbox_options o = MSB_FAKE_SANDBOX_OPTIONS_INIT;
	o.default_stdout = big;
	msb_fake_sandbox *fs = NULL;
	cr_assert_eq(msb_fake_sandbox_new(&o, &fs, NULL), 0);
	msb_sandbox *sb = NULL;
	cr_assert_eq(msb_fake_sandbox_handle(fs, &sb, NULL), 0);
	const char *argv[] = {"cat", "big", NULL};
	msb_exec_request req = MSB_EXEC_REQUEST_INIT;
	req.argv = argv;
	req.max_output_bytes = 1024;
	msb_exec_result out = {0};
	cr_assert_eq(msb_sandbox_exec_bounded(sb, &req, &out, NULL), 0);
	cr_assert_eq(out.stdout_len + out.stderr_len, 1024);
	cr_assert(out.truncated);
	msb_exec_result_clear(&out);
	req.max_output_bytes = sizeof(big);
	cr_assert_eq(msb_sandbox_exec_bounded(sb, &req, &out, NULL), 0);
	cr_assert_eq(out.stdout_len, sizeof(big) - 1);
	cr_assert_not(out.truncated);
	msb_exec_result_clear(&out);
	msb_sandbox_free(sb);
	msb_fake_sandbox_unref(fs);
}

Test(fake, exec_cancelled_before_start)
{
	struct fx f = fake_with(NULL, 0);
	msb_cancel *c = NULL;
	cr_assert_eq(msb_cancel_new(&c, NULL), 0);
	msb_cancel_trigger(c);
	const char *argv[] = {"true", NULL};
	msb_exec_request req = MSB_EXEC_REQUEST_INIT;
	req.argv = argv;
	req.cancel = c;
	msb_exec_result out = {0};
	REFUSED(msb_sandbox_exec(f.sb, &req, &out, errp), MSB_E_CANCELLED, "cancelled");
	char **cmds = msb_fake_sandbox_commands(f.fs);
	cr_assert_eq(msb_strv_len(cmds), 0);
	msb_strv_free(cmds);
	msb_cancel_free(c);
	fx_free(&f);
}

/* ---- 9.11-9.18, 19.8: write_file --------------------------------------------------- */

Test(fake, write_basics_9_11)
{
	struct fx f = fake_with(NULL, 0);
	size_t len;
	/* Text is UTF-8 bytes, written verbatim. */
	cr_assert_eq(put(f.sb, "u.txt", "\xc3\xbcn\xc3\xaf", NULL, NULL), 0);
	char *c = contents(f.fs, BASE "/u.txt", &len);
	cr_assert_eq(len, 5);
	cr_assert_eq(memcmp(c, "\xc3\xbcn\xc3\xaf", 5), 0);
	free(c);
	/* Bytes round-trip, NUL included. */
	cr_assert_eq(
		msb_sandbox_write_file(f.sb, "b.bin", (const uint8_t *)"\x00\xff", 2, ".", NULL),
		0);
	uint8_t *data = NULL;
	cr_assert_eq(msb_sandbox_read_file(f.sb, "b.bin", NULL, 10, &data, &len, NULL), 0);
	cr_assert_eq(len, 2);
	cr_assert_eq(memcmp(data, "\x00\xff", 2), 0);
	free(data);
	/* A second write replaces the whole file. */
	cr_assert_eq(put(f.sb, "r.txt", "aaaa", NULL, NULL), 0);
	cr_assert_eq(put(f.sb, "r.txt", "b", NULL, NULL), 0);
	c = contents(f.fs, BASE "/r.txt", &len);
	cr_assert_eq(len, 1);
	cr_assert_eq(c[0], 'b');
	free(c);
	/* Parents are created. */
	cr_assert_eq(put(f.sb, "x/y/z.txt", "z", NULL, NULL), 0);
	cr_assert_eq(kind_of(f.sb, "x", NULL), MSB_ENTRY_DIRECTORY);
	cr_assert_eq(kind_of(f.sb, "x/y", NULL), MSB_ENTRY_DIRECTORY);
	cr_assert_eq(kind_of(f.sb, "x/y/z.txt", NULL), MSB_ENTRY_FILE);
	/* An empty file. */
	cr_assert_eq(msb_sandbox_write_file(f.sb, "empty", NULL, 0, NULL, NULL), 0);
	c = contents(f.fs, BASE "/empty", &len);
	cr_assert_eq(len, 0);
	free(c);
	fx_free(&f);
}

Test(fake, write_relative_working_directory_10_8)
{
	struct fx f = fake_with(NULL, 0);
	cr_assert_eq(put(f.sb, "x", "1", "sub", NULL), 0);
	cr_assert(stored(f.fs, BASE "/sub/x"));
	/* A relative working directory may not climb out of the base. */
	REFUSED(put(f.sb, "x", "1", "../elsewhere", errp), MSB_E_VALUE, "working directory");
	REFUSED(put(f.sb, "x", "1", "a\\b", errp), MSB_E_VALUE, "backslash");
	cr_assert_not(stored(f.fs, "/maf-sandbox/elsewhere/x"));
	fx_free(&f);
}

Test(fake, write_refuses_escape_9_12)
{
	static const msb_fake_seed seeds[] = {DIR_SEED("/w"), DIR_SEED("/w-outside")};
	struct fx f = fake_with(seeds, N(seeds));
	char **before = msb_fake_sandbox_paths(f.fs);
	REFUSED(put(f.sb, "../outside.txt", "x", "/w", errp), MSB_E_VALUE, "resolves outside");
	REFUSED(put(f.sb, "/w-outside/f", "x", "/w", errp), MSB_E_VALUE, "resolves outside");
	char **after = msb_fake_sandbox_paths(f.fs);
	cr_assert_eq(msb_strv_len(before), msb_strv_len(after), "a refused write created entries");
	msb_strv_free(before);
	msb_strv_free(after);
	/* Absolute inside the working directory is accepted. */
	cr_assert_eq(put(f.sb, "/w/in.txt", "x", "/w", NULL), 0);
	cr_assert(stored(f.fs, "/w/in.txt"));
	fx_free(&f);
}

Test(fake, write_refuses_backslash_9_13)
{
	struct fx f = fake_with(NULL, 0);
	REFUSED(put(f.sb, "a\\b.txt", "x", NULL, errp), MSB_E_VALUE, "backslash");
	cr_assert_not(stored(f.fs, BASE "/a\\b.txt"));
	fx_free(&f);
}

/* 9.14 and 19.8: seeded links are shapes; the walk refuses them. */
Test(fake, write_refuses_linked_parent_9_14)
{
	static const msb_fake_seed seeds[] = {
		DIR_SEED("/w"),
		LINK_SEED("/w/out"),
		DIR_SEED("/outside-dir"),
		LINK_SEED("/m"),
	};
	struct fx f = fake_with(seeds, N(seeds));
	REFUSED(put(f.sb, "out/f", "x", "/w", errp), MSB_E_VALUE, "`/w/out` is a link");
	cr_assert_not(stored(f.fs, "/w/out/f"));
	cr_assert_not(stored(f.fs, "/outside-dir/f"));
	/* A linked ancestor of the working directory. */
	REFUSED(put(f.sb, "f", "x", "/m/w", errp), MSB_E_VALUE, "`/m` is a link");
	/* A linked working directory. */
	REFUSED(put(f.sb, "f", "x", "/w/out", errp), MSB_E_VALUE, "`/w/out` is a link");
	fx_free(&f);
}

Test(fake, write_refuses_leaf_link_9_15)
{
	static const msb_fake_seed seeds[] = {LINK_SEED("/w/l"), FILE_SEED("/outside/secret", "s")};
	struct fx f = fake_with(seeds, N(seeds));
	REFUSED(put(f.sb, "l", "x", "/w", errp), MSB_E_VALUE, "is a link");
	cr_assert_eq(kind_of(f.sb, "l", "/w"), MSB_ENTRY_SYMLINK, "the link was replaced");
	size_t len;
	char *c = contents(f.fs, "/outside/secret", &len);
	cr_assert_eq(len, 1);
	cr_assert_eq(c[0], 's');
	free(c);
	fx_free(&f);
}

Test(fake, write_refuses_working_directory_9_16)
{
	struct fx f = fake_with(NULL, 0);
	REFUSED(put(f.sb, ".", "x", NULL, errp), MSB_E_VALUE, "is the working directory");
	REFUSED(put(f.sb, "", "x", NULL, errp), MSB_E_VALUE, "is the working directory");
	cr_assert_eq(kind_of(f.sb, ".", NULL), MSB_ENTRY_DIRECTORY);
	fx_free(&f);
}

Test(fake, write_plain_parent_is_not_a_directory_9_17)
{
	static const msb_fake_seed seeds[] = {FILE_SEED("/w/plain", "p"), OTHER_SEED("/w/dev")};
	struct fx f = fake_with(seeds, N(seeds));
	REFUSED(put(f.sb, "plain/x", "x", "/w", errp), MSB_E_NOT_DIRECTORY,
		"`/w/plain` is not a directory");
	REFUSED(put(f.sb, "dev/x", "x", "/w", errp), MSB_E_NOT_DIRECTORY, "not a directory");
	/* Onto a directory or a non-regular entry. */
	REFUSED(put(f.sb, "/w", "x", "/", errp), MSB_E_IS_DIRECTORY, "is a directory");
	REFUSED(put(f.sb, "dev", "x", "/w", errp), MSB_E_OS, "not a regular file");
	fx_free(&f);
}

Test(fake, write_creates_real_directories_9_18)
{
	struct fx f = fake_with(NULL, 0);
	cr_assert_eq(put(f.sb, "new/deep/f", "x", NULL, NULL), 0);
	cr_assert_eq(kind_of(f.sb, "new", NULL), MSB_ENTRY_DIRECTORY);
	cr_assert_eq(kind_of(f.sb, "new/deep", NULL), MSB_ENTRY_DIRECTORY);
	/* Outside the default base, with an absolute working directory. */
	cr_assert_eq(put(f.sb, "a/b", "x", "/srv/w", NULL), 0);
	cr_assert_eq(kind_of(f.sb, "/srv", "/"), MSB_ENTRY_DIRECTORY);
	cr_assert_eq(kind_of(f.sb, "/srv/w/a", "/"), MSB_ENTRY_DIRECTORY);
	fx_free(&f);
}

/* ---- 9.20 stat_file ------------------------------------------------------------------ */

Test(fake, stat_9_20)
{
	static const msb_fake_seed seeds[] = {
		LINK_SEED("/w/link-file"),
		LINK_SEED("/w/out"),
		FILE_SEED("/etc/hostname", "h"),
		FILE_SEED("/w/sub/f.txt", "hello"),
	};
	struct fx f = fake_with(seeds, N(seeds));
	bool present = true;
	msb_entry e = {.path = (char *)"untouched"};
	cr_assert_eq(msb_sandbox_stat_file(f.sb, "missing", "/w", &present, &e, NULL), 0);
	cr_assert_not(present);
	cr_assert_str_eq(e.path, "untouched");

	e = (msb_entry){0};
	cr_assert_eq(msb_sandbox_stat_file(f.sb, "link-file", "/w", &present, &e, NULL), 0);
	cr_assert(present);
	cr_assert_eq(e.kind, MSB_ENTRY_SYMLINK);
	cr_assert_not(e.size_known);
	msb_entry_clear(&e);

	cr_assert_eq(msb_sandbox_stat_file(f.sb, "sub/f.txt", "/w", &present, &e, NULL), 0);
	cr_assert_str_eq(e.path, "sub/f.txt", "path is relative to the working directory");
	cr_assert_eq(e.size_bytes, 5);
	msb_entry_clear(&e);

	REFUSED(msb_sandbox_stat_file(f.sb, "out/hostname", "/w", &present, &e, errp), MSB_E_VALUE,
		"`/w/out` is a link");
	REFUSED(msb_sandbox_stat_file(f.sb, "../etc/hostname", "/w", &present, &e, errp),
		MSB_E_VALUE, "resolves outside");
	fx_free(&f);
}

/* ---- 9.21-9.23, 19.9 read_file ----------------------------------------------------- */

static const msb_fake_seed read_seeds[] = {
	FILE_SEED("/w/five", "12345"),	FILE_SEED("/w/eleven", "01234567890"),
	LINK_SEED("/w/link"),		DIR_SEED("/w/dir"),
	OTHER_SEED("/w/fifo"),		LINK_SEED("/w/out"),
	FILE_SEED("/secret", "s3cret"),
};

Test(fake, read_9_21)
{
	struct fx f = fake_with(read_seeds, N(read_seeds));
	uint8_t *data = NULL;
	size_t len = 0;
	cr_assert_eq(msb_sandbox_read_file(f.sb, "five", "/w", 10, &data, &len, NULL), 0);
	cr_assert_eq(len, 5);
	cr_assert_eq(memcmp(data, "12345", 5), 0);
	free(data);
	/* Exactly at the cap is fine. */
	cr_assert_eq(msb_sandbox_read_file(f.sb, "five", "/w", 5, &data, &len, NULL), 0);
	free(data);
	fx_free(&f);
}

Test(fake, read_refusals_9_22)
{
	struct fx f = fake_with(read_seeds, N(read_seeds));
	uint8_t *data = NULL;
	size_t len = 0;
	REFUSED(msb_sandbox_read_file(f.sb, "link", "/w", 100, &data, &len, errp), MSB_E_OS,
		"is a link");
	REFUSED(msb_sandbox_read_file(f.sb, "dir", "/w", 100, &data, &len, errp),
		MSB_E_IS_DIRECTORY, "is a directory");
	REFUSED(msb_sandbox_read_file(f.sb, "missing", "/w", 100, &data, &len, errp),
		MSB_E_NOT_FOUND, "no such file `missing`");
	REFUSED(msb_sandbox_read_file(f.sb, "fifo", "/w", 100, &data, &len, errp), MSB_E_OS,
		"not a regular file");
	REFUSED(msb_sandbox_read_file(f.sb, "out/secret", "/w", 100, &data, &len, errp),
		MSB_E_VALUE, "is a link");
	REFUSED(msb_sandbox_read_file(f.sb, "../secret", "/w", 100, &data, &len, errp), MSB_E_VALUE,
		"resolves outside");
	REFUSED(msb_sandbox_read_file(f.sb, ".", "/w", 100, &data, &len, errp), MSB_E_IS_DIRECTORY,
		"is a directory");
	cr_assert_null(data, "bytes returned with a refusal");
	fx_free(&f);
}

Test(fake, read_cap_is_a_refusal_9_23)
{
	struct fx f = fake_with(read_seeds, N(read_seeds));
	uint8_t *data = NULL;
	size_t len = 0;
	msb_error *err = NULL;
	int r = msb_sandbox_read_file(f.sb, "eleven", "/w", 10, &data, &len, &err);
	assert_refused(r, err, MSB_E_TRANSFER_CAP_EXCEEDED, "over the max_bytes_per_file cap");
	cr_assert_null(data, "a capped read was truncated instead of refused");
	const char *cap = NULL, *file = NULL;
	cr_assert(msb_error_cap(err, &cap, &file));
	cr_assert_str_eq(cap, "max_bytes_per_file");
	cr_assert_str_eq(file, "eleven");
	msb_error_free(err);
	fx_free(&f);
}

/* ---- 9.24 list_dir ---------------------------------------------------------------- */

static const msb_entry *find_entry(const msb_entry *v, size_t n, const char *path)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(v[i].path, path) == 0)
			return &v[i];
	return NULL;
}

Test(fake, list_dir_9_24)
{
	static const msb_fake_seed seeds[] = {
		FILE_SEED("/w/a.txt", "abc"),	   LINK_SEED("/w/link-file"),
		LINK_SEED("/w/linked-dir"),	   FILE_SEED("/w/sub/inner", "i"),
		FILE_SEED("/w/sub/deeper/x", "x"), FILE_SEED("/w-outside/o", "o"),
	};
	struct fx f = fake_with(seeds, N(seeds));
	msb_entry *v = NULL;
	size_t n = 0;
	cr_assert_eq(msb_sandbox_list_dir(f.sb, ".", "/w", &v, &n, NULL), 0);
	cr_assert_eq(n, 4, "immediate children only, got %zu", n);
	const msb_entry *e = find_entry(v, n, "link-file");
	cr_assert_not_null(e, "a link was hidden from the listing");
	cr_assert_eq(e->kind, MSB_ENTRY_SYMLINK);
	e = find_entry(v, n, "a.txt");
	cr_assert_not_null(e);
	cr_assert_eq(e->kind, MSB_ENTRY_FILE);
	cr_assert(e->size_known);
	cr_assert_eq(e->size_bytes, 3);
	cr_assert_not_null(find_entry(v, n, "sub"));
	cr_assert_null(find_entry(v, n, "sub/inner"));
	msb_entries_free(v, n);

	cr_assert_eq(msb_sandbox_list_dir(f.sb, "sub", "/w", &v, &n, NULL), 0);
	cr_assert_eq(n, 2);
	cr_assert_not_null(find_entry(v, n, "sub/inner"), "paths are relative to the wd");
	cr_assert_eq(find_entry(v, n, "sub/deeper")->kind, MSB_ENTRY_DIRECTORY);
	msb_entries_free(v, n);

	REFUSED(msb_sandbox_list_dir(f.sb, "linked-dir", "/w", &v, &n, errp), MSB_E_VALUE,
		"`/w/linked-dir` is a link");
	REFUSED(msb_sandbox_list_dir(f.sb, "linked-dir/x", "/w", &v, &n, errp), MSB_E_VALUE,
		"is a link");
	REFUSED(msb_sandbox_list_dir(f.sb, "a.txt", "/w", &v, &n, errp), MSB_E_NOT_DIRECTORY,
		"not a directory");
	REFUSED(msb_sandbox_list_dir(f.sb, "nope", "/w", &v, &n, errp), MSB_E_NOT_FOUND,
		"no such directory");
	REFUSED(msb_sandbox_list_dir(f.sb, "../w-outside", "/w", &v, &n, errp), MSB_E_VALUE,
		"resolves outside");
	fx_free(&f);
}

/* ---- 9.25, 19.9 remove --------------------------------------------------------------- */

Test(fake, remove_9_25)
{
	static const msb_fake_seed seeds[] = {
		LINK_SEED("/w/link"),
		FILE_SEED("/target/keep", "k"),
		DIR_SEED("/w/emptydir"),
		FILE_SEED("/w/tree/a", "a"),
		LINK_SEED("/w/tree/inner-link"),
		FILE_SEED("/w/tree/sub/b", "b"),
		FILE_SEED("/w/treeish", "not in the tree"),
		LINK_SEED("/w/out"),
		FILE_SEED("/w/file", "f"),
	};
	struct fx f = fake_with(seeds, N(seeds));
	cr_assert_eq(msb_sandbox_remove(f.sb, "missing", "/w", false, NULL), 0);

	cr_assert_eq(msb_sandbox_remove(f.sb, "link", "/w", false, NULL), 0);
	cr_assert_not(stored(f.fs, "/w/link"));
	cr_assert(stored(f.fs, "/target/keep"), "the link's target was touched");

	cr_assert_eq(msb_sandbox_remove(f.sb, "file", "/w", false, NULL), 0);
	cr_assert_not(stored(f.fs, "/w/file"));

	REFUSED(msb_sandbox_remove(f.sb, "emptydir", "/w", false, errp), MSB_E_OS,
		"needs recursive");
	cr_assert(stored(f.fs, "/w/emptydir"));
	cr_assert_eq(msb_sandbox_remove(f.sb, "emptydir", "/w", true, NULL), 0);
	cr_assert_not(stored(f.fs, "/w/emptydir"));

	REFUSED(msb_sandbox_remove(f.sb, "tree", "/w", false, errp), MSB_E_OS, "needs recursive");
	cr_assert_eq(msb_sandbox_remove(f.sb, "tree", "/w", true, NULL), 0);
	cr_assert_not(stored(f.fs, "/w/tree"));
	cr_assert_not(stored(f.fs, "/w/tree/sub/b"));
	cr_assert_not(stored(f.fs, "/w/tree/inner-link"));
	cr_assert(stored(f.fs, "/w/treeish"), "a sibling sharing a prefix was removed");

	REFUSED(msb_sandbox_remove(f.sb, ".", "/w", true, errp), MSB_E_VALUE,
		"working directory `/w` itself");
	REFUSED(msb_sandbox_remove(f.sb, "../x", "/w", true, errp), MSB_E_VALUE,
		"resolves outside");
	REFUSED(msb_sandbox_remove(f.sb, "out/x", "/w", true, errp), MSB_E_VALUE, "is a link");
	cr_assert(stored(f.fs, "/w"));
	fx_free(&f);
}

/* ---- 9.26, 9.27, 19.11 reclaim -------------------------------------------------------- */

Test(fake, reclaim_19_11)
{
	static const msb_fake_seed seeds[] = {
		FILE_SEED("/w/c1/a", "a"),
		FILE_SEED("/w/c1/sub/b", "b"),
		FILE_SEED("/w/c10/keep", "k"),
		FILE_SEED("/w/other", "o"),
	};
	struct fx f = fake_with(seeds, N(seeds));
	cr_assert_eq(msb_sandbox_reclaim(f.sb, "c1", "/w", 5.0, NULL), 0);
	cr_assert_not(stored(f.fs, "/w/c1"));
	cr_assert_not(stored(f.fs, "/w/c1/a"));
	cr_assert_not(stored(f.fs, "/w/c1/sub/b"));
	cr_assert(stored(f.fs, "/w/c10/keep"));
	cr_assert(stored(f.fs, "/w/other"));
	char **log = msb_fake_sandbox_reclaims(f.fs);
	cr_assert_eq(msb_strv_len(log), 1);
	cr_assert_str_eq(log[0], "/w/c1");
	msb_strv_free(log);

	/* 9.26: absent is success. */
	cr_assert_eq(msb_sandbox_reclaim(f.sb, "c1", "/w", 5.0, NULL), 0);
	/* Relative to the base by default. */
	cr_assert_eq(put(f.sb, "call-1/f", "x", NULL, NULL), 0);
	cr_assert_eq(msb_sandbox_reclaim(f.sb, "call-1", NULL, 5.0, NULL), 0);
	cr_assert_not(stored(f.fs, BASE "/call-1/f"));
	fx_free(&f);
}

Test(fake, reclaim_reach_rule_9_27)
{
	static const msb_fake_seed seeds[] = {
		LINK_SEED("/w/c2"),
		FILE_SEED("/etc/passwd", "root"),
		FILE_SEED("/w/keep", "k"),
		LINK_SEED("/w/lnk"),
	};
	struct fx f = fake_with(seeds, N(seeds));
	REFUSED(msb_sandbox_reclaim(f.sb, "..", "/w", 5.0, errp), MSB_E_VALUE, "resolves outside");
	REFUSED(msb_sandbox_reclaim(f.sb, ".", "/w", 5.0, errp), MSB_E_VALUE,
		"working directory `/w` itself");
	REFUSED(msb_sandbox_reclaim(f.sb, "/w", "/w", 5.0, errp), MSB_E_VALUE,
		"working directory `/w` itself");
	REFUSED(msb_sandbox_reclaim(f.sb, "lnk/c3", "/w", 5.0, errp), MSB_E_VALUE, "is a link");
	cr_assert(stored(f.fs, "/w/keep"));
	char **log = msb_fake_sandbox_reclaims(f.fs);
	cr_assert_eq(msb_strv_len(log), 0, "a refused reclaim was recorded");
	msb_strv_free(log);
	/* A target replaced by a link: the link goes, its "target" stays. */
	cr_assert_eq(msb_sandbox_reclaim(f.sb, "c2", "/w", 5.0, NULL), 0);
	cr_assert_not(stored(f.fs, "/w/c2"));
	cr_assert(stored(f.fs, "/etc/passwd"));
	fx_free(&f);
}

/* 9.28: reset refuses without SNAPSHOT, naming the backend. */
Test(fake, reset_not_implemented_9_28)
{
	struct fx f = fake_with(NULL, 0);
	REFUSED(msb_sandbox_reset(f.sb, 10.0, errp), MSB_E_NOT_IMPLEMENTED,
		"in-process: reset is not supported: the in-process fake does not declare "
		"SNAPSHOT");
	fx_free(&f);
}

/* ---- 19.10 files text view ------------------------------------------------------------ */

Test(fake, files_text_view_19_10)
{
	static const msb_fake_seed seeds[] = {
		FILE_SEED("/w/b", "\xff"),
		FILE_SEED("/w/t", "\xc3\xbc"),
		LINK_SEED("/w/l"),
	};
	struct fx f = fake_with(seeds, N(seeds));
	char *text = NULL;
	REFUSED(msb_fake_sandbox_file_text(f.fs, "/w/b", &text, errp), MSB_E_VALUE, "decode error");
	cr_assert_null(text);
	cr_assert_eq(msb_fake_sandbox_file_text(f.fs, "/w/./t", &text, NULL), 0);
	cr_assert_str_eq(text, "\xc3\xbc");
	free(text);
	REFUSED(msb_fake_sandbox_file_text(f.fs, "/w/l", &text, errp), MSB_E_NOT_FOUND,
		"no regular file");
	uint8_t *d = NULL;
	size_t len;
	REFUSED(msb_fake_sandbox_contents(f.fs, "/w/missing", &d, &len, errp), MSB_E_NOT_FOUND,
		"no regular file");
	fx_free(&f);
}

/* ---- 19.12, 18.16 fingerprint --------------------------------------------------------- */

static msb_fingerprint fingerprint(msb_sandbox *sb)
{
	bool supported = false;
	msb_fingerprint fp = {0};
	cr_assert_eq(msb_sandbox_fingerprint(sb, &supported, &fp, NULL), 0);
	cr_assert(supported);
	cr_assert_not_null(fp.changed_paths);
	cr_assert_not_null(fp.running_programs);
	cr_assert_eq(msb_strv_len(fp.running_programs), 0);
	return fp;
}

Test(fake, fingerprint_19_12)
{
	static const msb_fake_seed seeds[] = {
		FILE_SEED("/w/seeded", "v1"),
		FILE_SEED("/w/gone", "g"),
		LINK_SEED("/w/l"),
	};
	struct fx f = fake_with(seeds, N(seeds));
	msb_fingerprint fp = fingerprint(f.sb);
	cr_assert_eq(msb_strv_len(fp.changed_paths), 0, "a fresh fake reports changes");
	msb_fingerprint_clear(&fp);

	cr_assert_eq(put(f.sb, "new/file", "n", "/w", NULL), 0);
	cr_assert_eq(put(f.sb, "seeded", "v2", "/w", NULL), 0);
	cr_assert_eq(msb_sandbox_remove(f.sb, "gone", "/w", false, NULL), 0);
	cr_assert_eq(msb_sandbox_remove(f.sb, "l", "/w", false, NULL), 0);
	fp = fingerprint(f.sb);
	const char *want[] = {"/w/gone", "/w/l", "/w/new", "/w/new/file", "/w/seeded"};
	cr_assert_eq(msb_strv_len(fp.changed_paths), N(want));
	for (size_t i = 0; i < N(want); i++)
		cr_assert_str_eq(fp.changed_paths[i], want[i]);
	msb_fingerprint_clear(&fp);
	fx_free(&f);
}

/* 18.16: bytes changed then restored, or a file written then deleted, leave no trace. */
Test(fake, fingerprint_limits_18_16)
{
	static const msb_fake_seed seeds[] = {FILE_SEED("/w/s", "same")};
	struct fx f = fake_with(seeds, N(seeds));
	cr_assert_eq(put(f.sb, "tmp", "x", "/w", NULL), 0);
	cr_assert_eq(msb_sandbox_remove(f.sb, "tmp", "/w", false, NULL), 0);
	cr_assert_eq(put(f.sb, "s", "different", "/w", NULL), 0);
	cr_assert_eq(put(f.sb, "s", "same", "/w", NULL), 0);
	msb_fingerprint fp = fingerprint(f.sb);
	cr_assert_eq(msb_strv_len(fp.changed_paths), 0);
	msb_fingerprint_clear(&fp);
	fx_free(&f);
}

/* ---- 9.29 instance_id ------------------------------------------------------------------ */

Test(fake, instance_id_9_29)
{
	struct fx a = fake_with(NULL, 0);
	struct fx b = fake_with(NULL, 0);
	cr_assert_str_neq(msb_sandbox_instance_id(a.sb), msb_sandbox_instance_id(b.sb));
	msb_sandbox *again = NULL;
	cr_assert_eq(msb_fake_sandbox_handle(a.fs, &again, NULL), 0);
	cr_assert_str_eq(msb_sandbox_instance_id(a.sb), msb_sandbox_instance_id(again));
	msb_sandbox_free(again);
	fx_free(&a);
	fx_free(&b);

	msb_fake_sandbox_options o = MSB_FAKE_SANDBOX_OPTIONS_INIT;
	o.instance_id = "fixed-id";
	msb_fake_sandbox *fs = NULL;
	cr_assert_eq(msb_fake_sandbox_new(&o, &fs, NULL), 0);
	msb_sandbox *sb = NULL;
	cr_assert_eq(msb_fake_sandbox_handle(fs, &sb, NULL), 0);
	cr_assert_str_eq(msb_sandbox_instance_id(sb), "fixed-id");
	msb_sandbox_free(sb);
	msb_fake_sandbox_unref(fs);
}

/* ---- thread safety ----------------------------------------------------------------------- */

struct writer_arg {
	msb_sandbox *sb;
	int idx;
};

static void *writer(void *arg)
{
	struct writer_arg *a = arg;
	for (int i = 0; i < 200; i++) {
		char name[64];
		snprintf(name, sizeof(name), "t%d/f%d", a->idx, i);
		if (put(a->sb, name, "x", NULL, NULL) != 0)
			return (void *)1;
	}
	return NULL;
}

Test(fake, concurrent_writes_all_land)
{
	struct fx f = fake_with(NULL, 0);
	pthread_t t[4];
	struct writer_arg args[4];
	for (int i = 0; i < 4; i++) {
		args[i] = (struct writer_arg){f.sb, i};
		cr_assert_eq(pthread_create(&t[i], NULL, writer, &args[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		void *ret = NULL;
		pthread_join(t[i], &ret);
		cr_assert_null(ret);
	}
	msb_fingerprint fp = fingerprint(f.sb);
	/* 4 x 200 files plus one directory per thread. */
	cr_assert_eq(msb_strv_len(fp.changed_paths), 4 * 200 + 4);
	msb_fingerprint_clear(&fp);
	fx_free(&f);
}
