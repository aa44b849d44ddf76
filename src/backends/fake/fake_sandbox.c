/* SPDX-License-Identifier: Apache-2.0 */
/*
 * InProcessSandbox (checklist 19.5-19.12): a store of entries keyed by
 * normalised absolute guest paths, with the section 9 confinement rules
 * applied through the path helpers over an lstat of that store. Nothing is
 * ever run: exec and run_code record and answer from scripted outputs.
 *
 * The storage base is MSB_DEFAULT_WORK_DIR. A NULL or "." working directory
 * is the base, a relative one resolves beneath it (and may not climb out),
 * an absolute one is used as given: the fake has no spec to bind a base from,
 * and tests address seeded trees such as "/w" directly.
 *
 * Store invariant: every ancestor of a stored entry (the root excepted) is a
 * stored directory unless some ancestor is a seeded non-directory. The base
 * and its ancestors are created with the fake, so the base always exists
 * (10.1) and is not reported as a change by fingerprint().
 */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <inttypes.h>

#include <msb/paths.h>
#include <msb/testing.h>

#include "fake.h"
#include "platform/platform.h"
#include "util/util.h"

#define FAKE_NAME "in-process"

/* ---- the fake sandbox ------------------------------------------------------ */

struct scripted {
	char *marker;
	char *stdout_text;
};

struct msb_fake_sandbox {
	atomic_uint refs;
	pthread_mutex_t lock;

	struct store cur;
	struct store seed; /* the store at creation, for fingerprint() */

	struct scripted *outputs;
	size_t n_outputs;
	int raises;
	bool posix_guest;
	char *default_stdout;
	char *instance_id;

	/* records */
	char **commands;
	char **command_dirs;
	double *command_timeouts;
	char **programs;
	double *program_timeouts;
	char **reclaims;
};

struct fake_handle {
	msb_fake_sandbox *fs;
	char *name;
};

static void lock(msb_fake_sandbox *fs)
{
	pthread_mutex_lock(&fs->lock);
}

static void unlock(msb_fake_sandbox *fs)
{
	pthread_mutex_unlock(&fs->lock);
}

static void unlockp(msb_fake_sandbox **fs)
{
	if (*fs)
		unlock(*fs);
}
/* A guard, never read: `unused` keeps clang quiet about it. */
#define _cleanup_unlock_ _cleanup_(unlockp) __attribute__((unused))

static msb_fake_sandbox *locked(msb_fake_sandbox *fs)
{
	lock(fs);
	return fs;
}

static void fake_free(msb_fake_sandbox *fs)
{
	msb_fake__store_free(&fs->cur);
	msb_fake__store_free(&fs->seed);
	for (size_t i = 0; i < fs->n_outputs; i++) {
		free(fs->outputs[i].marker);
		free(fs->outputs[i].stdout_text);
	}
	free(fs->outputs);
	free(fs->default_stdout);
	free(fs->instance_id);
	msb_strv_free(fs->commands);
	msb_strv_free(fs->command_dirs);
	free(fs->command_timeouts);
	msb_strv_free(fs->programs);
	free(fs->program_timeouts);
	msb_strv_free(fs->reclaims);
	pthread_mutex_destroy(&fs->lock);
	free(fs);
}

msb_fake_sandbox *msb_fake_sandbox_ref(msb_fake_sandbox *fs)
{
	if (fs)
		atomic_fetch_add(&fs->refs, 1);
	return fs;
}

void msb_fake_sandbox_unref(msb_fake_sandbox *fs)
{
	if (fs && atomic_fetch_sub(&fs->refs, 1) == 1)
		fake_free(fs);
}

static char *new_instance_id(void)
{
	static atomic_uint_fast64_t counter;
	uint64_t r;
	if (msb__plat_random(&r, sizeof(r)) < 0)
		r = (uint64_t)msb__now_ns() ^ ((uint64_t)getpid() << 32);
	r ^= atomic_fetch_add(&counter, 1);
	return msb__asprintf(FAKE_NAME "-%016" PRIx64, r);
}

static int add_seed(msb_fake_sandbox *fs, const msb_fake_seed *sd, msb_error **err)
{
	if (!sd->path)
		return msb_error_set(err, MSB_E_VALUE, "seed path is NULL");
	if (sd->path[0] != '/' || strchr(sd->path, '\\'))
		return msb_error_set(err, MSB_E_VALUE,
				     "seed path `%s` is not an absolute POSIX guest path",
				     sd->path);
	msb_entry_kind kind;
	switch (sd->kind) {
	case MSB_FAKE_SEED_BYTES:
		kind = MSB_ENTRY_FILE;
		break;
	case MSB_FAKE_SEED_SYMLINK:
		kind = MSB_ENTRY_SYMLINK;
		break;
	case MSB_FAKE_SEED_DIRECTORY:
		kind = MSB_ENTRY_DIRECTORY;
		break;
	case MSB_FAKE_SEED_OTHER:
		kind = MSB_ENTRY_OTHER;
		break;
	default:
		return msb_error_set(err, MSB_E_VALUE, "seed `%s` has an unknown kind %d", sd->path,
				     (int)sd->kind);
	}
	if (kind == MSB_ENTRY_FILE && !sd->data && sd->len > 0)
		return msb_error_set(err, MSB_E_VALUE, "seed `%s` has no data but a length of %zu",
				     sd->path, sd->len);
	_cleanup_free_ char *p = msb_guest_normpath(sd->path);
	if (!p)
		return msb__error_nomem(err);
	if (strcmp(p, "/") == 0)
		return msb_error_set(err, MSB_E_VALUE, "seed path `%s` is the root", sd->path);
	if (msb_fake__store_get(&fs->cur, p))
		return msb_error_set(err, MSB_E_VALUE, "seed path `%s` is given twice", p);
	if (msb_fake__store_put(&fs->cur, p, kind, sd->data, sd->len) < 0)
		return msb__error_nomem(err);
	return 0;
}

int msb_fake_sandbox_new(const msb_fake_sandbox_options *opts, msb_fake_sandbox **out,
			 msb_error **err)
{
	static const msb_fake_sandbox_options defaults = MSB_FAKE_SANDBOX_OPTIONS_INIT;
	if (!out)
		return msb_error_set(err, MSB_E_VALUE, "output pointer is NULL");
	if (!opts)
		opts = &defaults;
	if (opts->version != MSB_FAKE_SANDBOX_OPTIONS_VERSION)
		return msb_error_set(err, MSB_E_VALUE,
				     "fake sandbox options version %u is not supported",
				     opts->version);
	if (opts->n_outputs > 0 && !opts->outputs)
		return msb_error_set(err, MSB_E_VALUE, "outputs is NULL but n_outputs is %zu",
				     opts->n_outputs);
	if (opts->n_seed_files > 0 && !opts->seed_files)
		return msb_error_set(err, MSB_E_VALUE, "seed_files is NULL but n_seed_files is %zu",
				     opts->n_seed_files);

	msb_fake_sandbox *fs = calloc(1, sizeof(*fs));
	if (!fs)
		return msb__error_nomem(err);
	atomic_init(&fs->refs, 1);
	pthread_mutex_init(&fs->lock, NULL);
	int r = 0;

	if (opts->n_outputs > 0) {
		fs->outputs = calloc(opts->n_outputs, sizeof(*fs->outputs));
		if (!fs->outputs)
			goto nomem;
		for (size_t i = 0; i < opts->n_outputs; i++, fs->n_outputs++) {
			const msb_fake_output *o = &opts->outputs[i];
			if (!o->marker) {
				r = msb_error_set(err, MSB_E_VALUE,
						  "scripted output %zu has no marker", i);
				goto fail;
			}
			fs->outputs[i].marker = strdup(o->marker);
			fs->outputs[i].stdout_text = strdup(o->stdout_text ? o->stdout_text : "");
			if (!fs->outputs[i].marker || !fs->outputs[i].stdout_text) {
				fs->n_outputs++;
				goto nomem;
			}
		}
	}
	fs->raises = opts->raises > 0 ? -opts->raises : opts->raises;
	fs->posix_guest = opts->posix_guest;
	fs->default_stdout = strdup(opts->default_stdout ? opts->default_stdout : "");
	fs->instance_id = opts->instance_id ? strdup(opts->instance_id) : new_instance_id();
	fs->commands = calloc(1, sizeof(char *));
	fs->command_dirs = calloc(1, sizeof(char *));
	fs->programs = calloc(1, sizeof(char *));
	fs->reclaims = calloc(1, sizeof(char *));
	if (!fs->default_stdout || !fs->instance_id || !fs->commands || !fs->command_dirs ||
	    !fs->programs || !fs->reclaims)
		goto nomem;

	for (size_t i = 0; i < opts->n_seed_files; i++) {
		r = add_seed(fs, &opts->seed_files[i], err);
		if (r < 0)
			goto fail;
	}
	/* Materialise the base and every seed's ancestors as directories. */
	if (msb_fake__store_make_dirs(&fs->cur, MSB_DEFAULT_WORK_DIR, true) < 0)
		goto nomem;
	for (size_t i = 0; i < opts->n_seed_files; i++) {
		_cleanup_free_ char *p = msb_guest_normpath(opts->seed_files[i].path);
		if (!p || msb_fake__store_make_dirs(&fs->cur, p, false) < 0)
			goto nomem;
	}
	if (msb_fake__store_copy(&fs->cur, &fs->seed) < 0)
		goto nomem;
	*out = fs;
	return 0;

nomem:
	r = msb__error_nomem(err);
fail:
	fake_free(fs);
	return r;
}

/* ---- working directories and paths ----------------------------------------- */

/* NULL or "." = the base; relative = beneath the base; absolute = as given. */
static int resolve_wd(const char *wd, char **out, msb_error **err)
{
	char *r;
	if (!wd || strcmp(wd, ".") == 0) {
		r = strdup(MSB_DEFAULT_WORK_DIR);
	} else if (strchr(wd, '\\')) {
		return msb_error_set(err, MSB_E_VALUE,
				     "working directory `%s` contains a backslash", wd);
	} else if (wd[0] == '/') {
		r = msb_guest_normpath(wd);
	} else {
		int e = msb_confine_guest_path(wd, MSB_DEFAULT_WORK_DIR, out, err);
		if (e < 0)
			return msb_error_wrap(err, "working directory");
		return 0;
	}
	if (!r)
		return msb__error_nomem(err);
	*out = r;
	return 0;
}

/* `resolved` relative to the (normalised) working directory; "." for wd. */
static char *relative_name(const char *resolved, const char *wd)
{
	char *rel = NULL;
	if (msb_guest_path_relative_to(resolved, wd, &rel, NULL) < 0)
		return NULL;
	if (!rel)
		return strdup(resolved);
	if (!rel[0]) {
		free(rel);
		return strdup(".");
	}
	return rel;
}

/* Confine `path` to the working directory and walk its parents (9.14, 9.20). */
static int confine_and_walk(msb_fake_sandbox *fs, const char *path, const char *wd_in,
			    bool include_self, char **wd_out, char **resolved_out, msb_error **err)
{
	_cleanup_free_ char *wd = NULL;
	_cleanup_free_ char *resolved = NULL;
	int r = resolve_wd(wd_in, &wd, err);
	if (r < 0)
		return r;
	r = msb_confine_guest_path(path, wd, &resolved, err);
	if (r < 0)
		return r;
	r = msb_refuse_symlinked_parents(msb_fake__store_lstat, &fs->cur, resolved, wd,
					 include_self, err);
	if (r < 0)
		return r;
	*wd_out = TAKE_PTR(wd);
	*resolved_out = TAKE_PTR(resolved);
	return 0;
}

/* ---- exec and run_code ----------------------------------------------------- */

/* shlex.quote: safe words stay bare, everything else is single-quoted. */
static bool shell_safe(const char *s)
{
	if (!*s)
		return false;
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		unsigned char c = *p;
		bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			  (c >= '0' && c <= '9') || strchr("_@%+=:,./-", c) != NULL;
		if (!ok)
			return false;
	}
	return true;
}

static void shell_quote(msb_buf *b, const char *s)
{
	if (shell_safe(s)) {
		msb__buf_puts(b, s);
		return;
	}
	msb__buf_puts(b, "'");
	for (const char *p = s; *p; p++) {
		if (*p == '\'')
			msb__buf_puts(b, "'\"'\"'");
		else
			msb__buf_append(b, p, 1);
	}
	msb__buf_puts(b, "'");
}

/* shlex.join (19.6). NULL on allocation failure. */
static char *shell_join(const char *const *argv)
{
	msb_buf b = MSB_BUF_INIT;
	for (size_t i = 0; argv[i]; i++) {
		if (i > 0)
			msb__buf_puts(&b, " ");
		shell_quote(&b, argv[i]);
	}
	return msb__buf_steal_str(&b);
}

/* The first scripted answer whose marker occurs in `text`, else the default.
 * Borrowed; call with the lock held. */
static const char *answer_for(const msb_fake_sandbox *fs, const char *text)
{
	for (size_t i = 0; i < fs->n_outputs; i++)
		if (strstr(text, fs->outputs[i].marker))
			return fs->outputs[i].stdout_text;
	return fs->default_stdout;
}

static int record(char ***strv, double **timeouts, const char *s, double timeout)
{
	size_t n = msb_strv_len(*strv);
	double *t = msb__reallocarray(*timeouts, n + 1, sizeof(double));
	if (!t)
		return -ENOMEM;
	*timeouts = t;
	if (msb__strv_push(strv, s) < 0)
		return -ENOMEM;
	t[n] = timeout;
	return 0;
}

static int fill_result(const char *answer, uint64_t budget, msb_exec_result *out, msb_error **err)
{
	size_t len = strlen(answer);
	bool truncated = false;
	if (budget > 0 && len > budget) {
		len = (size_t)budget;
		truncated = true;
	}
	_cleanup_free_ uint8_t *so = malloc(len + 1);
	_cleanup_free_ uint8_t *se = calloc(1, 1);
	if (!so || !se)
		return msb__error_nomem(err);
	memcpy(so, answer, len);
	so[len] = '\0';
	*out = (msb_exec_result){
		.stdout_bytes = TAKE_PTR(so),
		.stdout_len = len,
		.stderr_bytes = TAKE_PTR(se),
		.stderr_len = 0,
		.exit_code = 0,
		.truncated = truncated,
	};
	return 0;
}

/* exec and exec_bounded: record (command, working directory as given,
 * timeout) first, then fail if scripted to `raise`, else answer. */
static int exec_common(struct fake_handle *h, const msb_exec_request *req, uint64_t budget,
		       msb_exec_result *out, msb_error **err)
{
	msb_fake_sandbox *fs = h->fs;
	if (msb_cancel_requested(req->cancel))
		return msb_error_set(err, MSB_E_CANCELLED, "%s: exec cancelled before it started",
				     h->name);
	_cleanup_free_ char *cmd = req->argv ? shell_join(req->argv) : strdup(req->shell);
	if (!cmd)
		return msb__error_nomem(err);

	_cleanup_free_ char *answer = NULL;
	{
		_cleanup_unlock_ msb_fake_sandbox *l = locked(fs);
		const char *dir = req->working_directory ? req->working_directory : ".";
		if (record(&fs->commands, &fs->command_timeouts, cmd, req->timeout) < 0)
			return msb__error_nomem(err);
		if (msb__strv_push(&fs->command_dirs, dir) < 0)
			return msb__error_nomem(err);
		if (fs->raises)
			return msb_error_set(err, fs->raises, "%s: scripted exec failure", h->name);
		if (!fs->posix_guest) {
			answer = strdup(answer_for(fs, cmd));
			if (!answer)
				return msb__error_nomem(err);
		}
	}
	if (fs->posix_guest) {
		_cleanup_free_ char *wd = NULL;
		int r = resolve_wd(req->working_directory, &wd, err);
		if (r < 0)
			return r;
		return msb_fake__guest_exec(fs, req, wd, budget, out, err);
	}
	return fill_result(answer, budget, out, err);
}

static int fake_exec(void *impl, const msb_exec_request *req, msb_exec_result *out, msb_error **err)
{
	return exec_common(impl, req, 0, out, err);
}

static int fake_exec_bounded(void *impl, const msb_exec_request *req, msb_exec_result *out,
			     msb_error **err)
{
	return exec_common(impl, req, req->max_output_bytes, out, err);
}

static int fake_run_code(void *impl, const char *code, double timeout, msb_cancel *cancel,
			 msb_exec_result *out, msb_error **err)
{
	struct fake_handle *h = impl;
	msb_fake_sandbox *fs = h->fs;
	if (msb_cancel_requested(cancel))
		return msb_error_set(err, MSB_E_CANCELLED,
				     "%s: run_code cancelled before it started", h->name);
	_cleanup_free_ char *answer = NULL;
	{
		_cleanup_unlock_ msb_fake_sandbox *l = locked(fs);
		if (record(&fs->programs, &fs->program_timeouts, code, timeout) < 0)
			return msb__error_nomem(err);
		answer = strdup(answer_for(fs, code));
		if (!answer)
			return msb__error_nomem(err);
	}
	return fill_result(answer, 0, out, err);
}

/* ---- the file plane -------------------------------------------------------- */

static int fake_write_file(void *impl, const char *path, const uint8_t *data, size_t len,
			   const char *working_directory, msb_error **err)
{
	msb_fake_sandbox *fs = ((struct fake_handle *)impl)->fs;
	_cleanup_unlock_ msb_fake_sandbox *l = locked(fs);
	_cleanup_free_ char *wd = NULL;
	_cleanup_free_ char *target = NULL;
	int r = resolve_wd(working_directory, &wd, err);
	if (r < 0)
		return r;
	r = msb_confine_guest_write_path(msb_fake__store_lstat, &fs->cur, path, wd, &target, err);
	if (r < 0)
		return r;
	const struct node *n = msb_fake__store_get(&fs->cur, target);
	if (n && n->kind == MSB_ENTRY_DIRECTORY)
		return msb_error_set(err, MSB_E_IS_DIRECTORY, "`%s` is a directory", path);
	if (n && n->kind == MSB_ENTRY_OTHER)
		return msb_error_set(err, MSB_E_OS, "`%s` is not a regular file", path);
	/* The walk stopped at the first missing parent; everything from there
	 * down is created as a real directory (9.11, 9.18). */
	if (msb_fake__store_make_dirs(&fs->cur, target, false) < 0 ||
	    msb_fake__store_put(&fs->cur, target, MSB_ENTRY_FILE, data, len) < 0)
		return msb__error_nomem(err);
	return 0;
}

static int fill_entry(const struct node *n, const char *resolved, const char *wd, msb_entry *out,
		      msb_error **err)
{
	char *rel = relative_name(resolved, wd);
	if (!rel)
		return msb__error_nomem(err);
	*out = (msb_entry){
		.path = rel,
		.kind = n ? n->kind : MSB_ENTRY_DIRECTORY,
		.size_known = n && n->kind == MSB_ENTRY_FILE,
		.size_bytes = n && n->kind == MSB_ENTRY_FILE ? n->len : 0,
	};
	return 0;
}

static int fake_stat_file(void *impl, const char *path, const char *working_directory,
			  bool *present, msb_entry *out, msb_error **err)
{
	msb_fake_sandbox *fs = ((struct fake_handle *)impl)->fs;
	_cleanup_unlock_ msb_fake_sandbox *l = locked(fs);
	_cleanup_free_ char *wd = NULL;
	_cleanup_free_ char *resolved = NULL;
	int r = confine_and_walk(fs, path, working_directory, false, &wd, &resolved, err);
	if (r < 0)
		return r;
	const struct node *n = msb_fake__store_get(&fs->cur, resolved);
	if (!n && strcmp(resolved, "/") != 0) {
		*present = false;
		return 0;
	}
	r = fill_entry(n, resolved, wd, out, err);
	if (r < 0)
		return r;
	*present = true;
	return 0;
}

static int fake_read_file(void *impl, const char *path, const char *working_directory,
			  uint64_t max_bytes, uint8_t **data, size_t *len, msb_error **err)
{
	msb_fake_sandbox *fs = ((struct fake_handle *)impl)->fs;
	_cleanup_unlock_ msb_fake_sandbox *l = locked(fs);
	_cleanup_free_ char *wd = NULL;
	_cleanup_free_ char *resolved = NULL;
	int r = confine_and_walk(fs, path, working_directory, false, &wd, &resolved, err);
	if (r < 0)
		return r;
	const struct node *n = msb_fake__store_get(&fs->cur, resolved);
	if (!n && strcmp(resolved, "/") == 0)
		return msb_error_set(err, MSB_E_IS_DIRECTORY, "`%s` is a directory", path);
	if (!n)
		return msb_error_set(err, MSB_E_NOT_FOUND, "no such file `%s`", path);
	switch (n->kind) {
	case MSB_ENTRY_SYMLINK:
		return msb_error_set(err, MSB_E_OS, "`%s` is a link: refusing to read through it",
				     path);
	case MSB_ENTRY_DIRECTORY:
		return msb_error_set(err, MSB_E_IS_DIRECTORY, "`%s` is a directory", path);
	case MSB_ENTRY_OTHER:
		return msb_error_set(err, MSB_E_OS, "`%s` is not a regular file", path);
	case MSB_ENTRY_FILE:
		break;
	}
	if ((uint64_t)n->len > max_bytes) {
		_cleanup_free_ char *rel = relative_name(resolved, wd);
		r = msb_error_set(err, MSB_E_TRANSFER_CAP_EXCEEDED,
				  "`%s` is %zu bytes, over the max_bytes_per_file cap of %" PRIu64,
				  path, n->len, max_bytes);
		msb__error_set_cap(err, "max_bytes_per_file", rel ? rel : path);
		return r;
	}
	uint8_t *copy = malloc(n->len ? n->len : 1);
	if (!copy)
		return msb__error_nomem(err);
	if (n->len)
		memcpy(copy, n->data, n->len);
	*data = copy;
	*len = n->len;
	return 0;
}

static int fake_list_dir(void *impl, const char *path, const char *working_directory,
			 msb_entry **entries, size_t *count, msb_error **err)
{
	msb_fake_sandbox *fs = ((struct fake_handle *)impl)->fs;
	_cleanup_unlock_ msb_fake_sandbox *l = locked(fs);
	_cleanup_free_ char *wd = NULL;
	_cleanup_free_ char *resolved = NULL;
	/* The walk includes the listed directory itself (9.24). */
	int r = confine_and_walk(fs, path, working_directory, true, &wd, &resolved, err);
	if (r < 0)
		return r;
	if (!msb_fake__store_get(&fs->cur, resolved) && strcmp(resolved, "/") != 0)
		return msb_error_set(err, MSB_E_NOT_FOUND, "no such directory `%s`", path);

	msb_entry *v = NULL;
	size_t n = 0;
	for (size_t i = 0; i < fs->cur.n; i++) {
		const struct node *c = &fs->cur.v[i];
		if (!msb_fake__path_child(c->path, resolved))
			continue;
		msb_entry *nv = msb__reallocarray(v, n + 1, sizeof(*v));
		if (!nv)
			goto nomem;
		v = nv;
		if (fill_entry(c, c->path, wd, &v[n], err) < 0)
			goto nomem;
		n++;
	}
	*entries = v;
	*count = n;
	return 0;

nomem:
	msb_entries_free(v, n);
	return msb__error_nomem(err);
}

static int fake_remove(void *impl, const char *path, const char *working_directory, bool recursive,
		       msb_error **err)
{
	msb_fake_sandbox *fs = ((struct fake_handle *)impl)->fs;
	_cleanup_unlock_ msb_fake_sandbox *l = locked(fs);
	_cleanup_free_ char *wd = NULL;
	_cleanup_free_ char *resolved = NULL;
	int r = confine_and_walk(fs, path, working_directory, false, &wd, &resolved, err);
	if (r < 0)
		return r;
	if (strcmp(resolved, wd) == 0)
		return msb_error_set(err, MSB_E_VALUE,
				     "refusing to remove the working directory `%s` itself", wd);
	const struct node *n = msb_fake__store_get(&fs->cur, resolved);
	if (!n)
		return 0; /* missing is success (9.25) */
	if (n->kind == MSB_ENTRY_DIRECTORY && !recursive)
		return msb_error_set(err, MSB_E_OS,
				     "`%s` is a directory: removing it needs recursive", path);
	/* A link is one entry: it is unlinked, never followed. */
	msb_fake__store_del_tree(&fs->cur, resolved);
	return 0;
}

/* ---- cleanup primitives ---------------------------------------------------- */

static int fake_reclaim(void *impl, const char *directory, const char *working_directory,
			double timeout, msb_error **err)
{
	msb_fake_sandbox *fs = ((struct fake_handle *)impl)->fs;
	_cleanup_unlock_ msb_fake_sandbox *l = locked(fs);
	_cleanup_free_ char *wd = NULL;
	_cleanup_free_ char *resolved = NULL;
	/* The reach rule (9.27): a child of the working directory, nothing
	 * the guest could not have removed itself. */
	int r = resolve_wd(working_directory, &wd, err);
	if (r < 0)
		return r;
	r = msb_confine_guest_path(directory, wd, &resolved, err);
	if (r < 0)
		return msb_error_wrap(err, "reclaim");
	if (strcmp(resolved, wd) == 0)
		return msb_error_set(
			err, MSB_E_VALUE,
			"reclaim: refusing to remove the working directory `%s` itself", wd);
	r = msb_refuse_symlinked_parents(msb_fake__store_lstat, &fs->cur, resolved, wd, false, err);
	if (r < 0)
		return msb_error_wrap(err, "reclaim");
	if (msb__strv_push(&fs->reclaims, resolved) < 0)
		return msb__error_nomem(err);
	/* Absent is success; a link in its place is removed, not followed. */
	msb_fake__store_del_tree(&fs->cur, resolved);
	return 0;
}

static int fake_reset(void *impl, double timeout, msb_error **err)
{
	struct fake_handle *h = impl;
	return msb_error_set(err, MSB_E_NOT_IMPLEMENTED,
			     "%s: reset is not supported: the in-process fake does not declare "
			     "SNAPSHOT",
			     h->name);
}

/* 19.12, 18.16: differences between the store now and at creation. Bytes
 * changed and then restored are invisible; no program ever runs. */
static int fake_fingerprint(void *impl, bool *supported, msb_fingerprint *out, msb_error **err)
{
	msb_fake_sandbox *fs = ((struct fake_handle *)impl)->fs;
	_cleanup_unlock_ msb_fake_sandbox *l = locked(fs);
	_cleanup_strv_ char **changed = calloc(1, sizeof(char *));
	_cleanup_strv_ char **programs = calloc(1, sizeof(char *));
	if (!changed || !programs)
		return msb__error_nomem(err);
	const struct store *a = &fs->seed, *b = &fs->cur;
	size_t i = 0, j = 0;
	while (i < a->n || j < b->n) {
		const char *p;
		int c = i >= a->n ? 1 : j >= b->n ? -1 : strcmp(a->v[i].path, b->v[j].path);
		bool diff;
		if (c < 0) {
			p = a->v[i++].path; /* removed */
			diff = true;
		} else if (c > 0) {
			p = b->v[j++].path; /* added */
			diff = true;
		} else {
			const struct node *x = &a->v[i++], *y = &b->v[j++];
			p = x->path;
			diff = x->kind != y->kind ||
			       (x->kind == MSB_ENTRY_FILE &&
				(x->len != y->len || (x->len && memcmp(x->data, y->data, x->len))));
		}
		if (diff && msb__strv_push(&changed, p) < 0)
			return msb__error_nomem(err);
	}
	out->changed_paths = TAKE_PTR(changed);
	out->running_programs = TAKE_PTR(programs);
	*supported = true;
	return 0;
}

static const char *fake_instance_id(void *impl)
{
	return ((struct fake_handle *)impl)->fs->instance_id;
}

static void fake_release(void *impl)
{
	struct fake_handle *h = impl;
	if (!h)
		return;
	msb_fake_sandbox_unref(h->fs);
	free(h->name);
	free(h);
}

static const msb_sandbox_ops fake_ops = {
	.version = MSB_SANDBOX_OPS_VERSION,
	.exec = fake_exec,
	.exec_bounded = fake_exec_bounded,
	.run_code = fake_run_code,
	.write_file = fake_write_file,
	.stat_file = fake_stat_file,
	.read_file = fake_read_file,
	.list_dir = fake_list_dir,
	.remove = fake_remove,
	.reclaim = fake_reclaim,
	.reset = fake_reset,
	.fingerprint = fake_fingerprint,
	.instance_id = fake_instance_id,
	.release = fake_release,
};

int msb_fake__sandbox_handle(msb_fake_sandbox *fs, const char *backend_name, msb_sandbox **out,
			     msb_error **err)
{
	if (!fs)
		return msb_error_set(err, MSB_E_VALUE, "fake sandbox is NULL");
	if (!out)
		return msb_error_set(err, MSB_E_VALUE, "output pointer is NULL");
	struct fake_handle *h = calloc(1, sizeof(*h));
	if (!h)
		return msb__error_nomem(err);
	h->name = strdup(backend_name ? backend_name : FAKE_NAME);
	if (!h->name) {
		free(h);
		return msb__error_nomem(err);
	}
	h->fs = msb_fake_sandbox_ref(fs);
	return msb_sandbox_new(&fake_ops, h, h->name, out, err);
}

int msb_fake__ensure_base(msb_fake_sandbox *fs, msb_error **err)
{
	_cleanup_unlock_ msb_fake_sandbox *l = locked(fs);
	/* 10.3: a link or a non-directory at the base (or above it) fails. */
	int r = msb_refuse_symlinked_parents(msb_fake__store_lstat, &fs->cur, MSB_DEFAULT_WORK_DIR,
					     "/", true, err);
	if (r < 0)
		return msb_error_wrap(err, "storage base `%s`", MSB_DEFAULT_WORK_DIR);
	/* 10.1, 10.2: create what is missing, leave what exists as it is. */
	if (msb_fake__store_make_dirs(&fs->cur, MSB_DEFAULT_WORK_DIR, true) < 0)
		return msb__error_nomem(err);
	return 0;
}

int msb_fake_sandbox_handle(msb_fake_sandbox *fs, msb_sandbox **out, msb_error **err)
{
	return msb_fake__sandbox_handle(fs, FAKE_NAME, out, err);
}

/* ---- records ---------------------------------------------------------------- */

static char **copy_locked(msb_fake_sandbox *fs, char **const *which)
{
	if (!fs)
		return NULL;
	_cleanup_unlock_ msb_fake_sandbox *l = locked(fs);
	return msb__strv_copy(*which);
}

char **msb_fake_sandbox_commands(msb_fake_sandbox *fs)
{
	return fs ? copy_locked(fs, &fs->commands) : NULL;
}

char **msb_fake_sandbox_command_dirs(msb_fake_sandbox *fs)
{
	return fs ? copy_locked(fs, &fs->command_dirs) : NULL;
}

char **msb_fake_sandbox_programs(msb_fake_sandbox *fs)
{
	return fs ? copy_locked(fs, &fs->programs) : NULL;
}

char **msb_fake_sandbox_reclaims(msb_fake_sandbox *fs)
{
	return fs ? copy_locked(fs, &fs->reclaims) : NULL;
}

double msb_fake_sandbox_command_timeout(msb_fake_sandbox *fs, size_t i)
{
	if (!fs)
		return NAN;
	_cleanup_unlock_ msb_fake_sandbox *l = locked(fs);
	return i < msb_strv_len(fs->commands) ? fs->command_timeouts[i] : NAN;
}

double msb_fake_sandbox_program_timeout(msb_fake_sandbox *fs, size_t i)
{
	if (!fs)
		return NAN;
	_cleanup_unlock_ msb_fake_sandbox *l = locked(fs);
	return i < msb_strv_len(fs->programs) ? fs->program_timeouts[i] : NAN;
}

char **msb_fake_sandbox_paths(msb_fake_sandbox *fs)
{
	if (!fs)
		return NULL;
	_cleanup_unlock_ msb_fake_sandbox *l = locked(fs);
	char **v = calloc(fs->cur.n + 1, sizeof(char *));
	if (!v)
		return NULL;
	for (size_t i = 0; i < fs->cur.n; i++) {
		v[i] = strdup(fs->cur.v[i].path);
		if (!v[i]) {
			msb_strv_free(v);
			return NULL;
		}
	}
	return v; /* the store is kept sorted */
}

int msb_fake_sandbox_contents(msb_fake_sandbox *fs, const char *abs_path, uint8_t **data,
			      size_t *len, msb_error **err)
{
	if (!fs || !abs_path || !data || !len)
		return msb_error_set(err, MSB_E_VALUE, "contents: an argument is NULL");
	_cleanup_free_ char *p = msb_guest_normpath(abs_path);
	if (!p)
		return msb__error_nomem(err);
	_cleanup_unlock_ msb_fake_sandbox *l = locked(fs);
	const struct node *n = msb_fake__store_get(&fs->cur, p);
	if (!n || n->kind != MSB_ENTRY_FILE)
		return msb_error_set(err, MSB_E_NOT_FOUND, "no regular file `%s` in the fake", p);
	uint8_t *copy = malloc(n->len + 1);
	if (!copy)
		return msb__error_nomem(err);
	if (n->len)
		memcpy(copy, n->data, n->len);
	copy[n->len] = '\0';
	*data = copy;
	*len = n->len;
	return 0;
}

int msb_fake_sandbox_file_text(msb_fake_sandbox *fs, const char *abs_path, char **text,
			       msb_error **err)
{
	if (!text)
		return msb_error_set(err, MSB_E_VALUE, "file_text: text pointer is NULL");
	_cleanup_free_ uint8_t *data = NULL;
	size_t len = 0;
	int r = msb_fake_sandbox_contents(fs, abs_path, &data, &len, err);
	if (r < 0)
		return r;
	/* Valid UTF-8 is exactly what decodes to itself. */
	size_t tlen = 0;
	_cleanup_free_ char *decoded = msb_text_from_bytes_len(data, len, &tlen);
	if (!decoded)
		return msb__error_nomem(err);
	if (tlen != len || memcmp(decoded, data, len) != 0)
		return msb_error_set(err, MSB_E_VALUE, "decode error: `%s` is not valid UTF-8",
				     abs_path);
	*text = (char *)TAKE_PTR(data);
	return 0;
}

/* ---- the emulated guest's view of the store ------------------------------------ */

int msb_fake__guest_get(msb_fake_sandbox *fs, const char *abs, msb_entry_kind *kind, uint8_t **data,
			size_t *len)
{
	_cleanup_unlock_ msb_fake_sandbox *l = locked(fs);
	*data = NULL;
	*len = 0;
	if (strcmp(abs, "/") == 0) {
		*kind = MSB_ENTRY_DIRECTORY;
		return 1;
	}
	const struct node *n = msb_fake__store_get(&fs->cur, abs);
	if (!n)
		return 0;
	*kind = n->kind;
	if (n->kind == MSB_ENTRY_FILE) {
		*data = malloc(n->len ? n->len : 1);
		if (!*data)
			return -ENOMEM;
		if (n->len)
			memcpy(*data, n->data, n->len);
		*len = n->len;
	}
	return 1;
}

/* The parent of abs must be a stored directory (or the root). */
static int parent_ok(const struct store *s, const char *abs)
{
	const char *slash = strrchr(abs, '/');
	if (!slash || slash == abs)
		return 0;
	_cleanup_free_ char *parent = msb__strndup(abs, (size_t)(slash - abs));
	if (!parent)
		return -ENOMEM;
	const struct node *p = msb_fake__store_get(s, parent);
	if (!p)
		return -ENOENT;
	return p->kind == MSB_ENTRY_DIRECTORY ? 0 : -ENOTDIR;
}

int msb_fake__guest_put(msb_fake_sandbox *fs, const char *abs, msb_entry_kind kind,
			const uint8_t *data, size_t len)
{
	_cleanup_unlock_ msb_fake_sandbox *l = locked(fs);
	int r = parent_ok(&fs->cur, abs);
	if (r < 0)
		return r;
	const struct node *n = msb_fake__store_get(&fs->cur, abs);
	if (n && n->kind == MSB_ENTRY_DIRECTORY)
		return -EISDIR;
	return msb_fake__store_put(&fs->cur, abs, kind, data, len);
}

int msb_fake__guest_mkdirs(msb_fake_sandbox *fs, const char *abs)
{
	_cleanup_unlock_ msb_fake_sandbox *l = locked(fs);
	size_t n = strlen(abs);
	for (size_t i = 1; i <= n; i++) {
		if (i < n && abs[i] != '/')
			continue;
		_cleanup_free_ char *p = msb__strndup(abs, i);
		if (!p)
			return -ENOMEM;
		const struct node *at = msb_fake__store_get(&fs->cur, p);
		if (at && at->kind != MSB_ENTRY_DIRECTORY)
			return -ENOTDIR;
		if (!at && msb_fake__store_put(&fs->cur, p, MSB_ENTRY_DIRECTORY, NULL, 0) < 0)
			return -ENOMEM;
	}
	return 0;
}
