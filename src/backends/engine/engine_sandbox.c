/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A handle onto one engine container (checklist 9, 21.26-21.28, 22.7). The
 * handle addresses the container by its engine id, never its name, so that
 * after a dispose it fails rather than reach a successor of the same name.
 *
 * The file plane confines each path lexically, then lets the confined agent
 * do the operation (engine_agent.c: one exec, one openat2 resolution, no
 * link followed). Where it cannot, the tar-header walk: the path walked from
 * the guest's root with the engine's no-follow stat (a link anywhere on the
 * way refuses), then the act: a read takes the engine's archive of the file
 * and judges its first tar header (a link or a non-file is refused there,
 * from what was actually read), a write sends a one-entry archive, a removal
 * is `rm` run as root. The walk and the transfer are separate engine calls: a
 * link the guest swaps in between them is followed inside the container
 * (docs/security.md, "Container engines").
 */
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>

#include <msb/paths.h>

#include "engine.h"

/* The file plane's ceilings (22.5): one file in either direction. */
#define ENGINE_MAX_FILE_BYTES ((uint64_t)64 << 20)
/* An unbounded exec keeps at most this much output, like ns's client. */
#define ENGINE_MAX_OUTPUT ((uint64_t)1 << 30)
/* rm and stat-like helpers: a few lines of diagnostics. */
#define ENGINE_SMALL_OUTPUT 4096u
#define ENGINE_HELPER_TIMEOUT 60.0

typedef struct engine_sandbox {
	msb_backend *owner; /* a reference: the transport lives in it */
	engine_backend *b;
	char *name;
	char *id;
	char *base; /* the storage base (work_dir) */
	/* Its egress proxy (the allowlist topology), whose records become
	 * events for this key after each exec (21.33), or NULL. */
	char *proxy;
	char *scope, *thread_id, *agent_dir, *call_id;
	/* The confined file plane: 0 not asked yet, 1 the agent serves this
	 * container, -1 the tar-header walk does. */
	int agent;
} engine_sandbox;

static const engine_transport_ops *ops(engine_sandbox *s)
{
	return s->b->ops;
}

/* ---- exec ------------------------------------------------------------------------ */

/* The file plane's working directory: confined to the storage base. */
static int resolve_wd(engine_sandbox *s, const char *wd, char **out, msb_error **err)
{
	int r = msb_confine_guest_path(wd && *wd ? wd : ".", s->base, out, err);
	if (r < 0)
		return msb_error_wrap(err, "working directory `%s`", wd);
	return 0;
}

/*
 * The exec's working directory (issue 16): any existing directory of the
 * guest, absolute as it is, relative joined onto the storage base, never
 * confined (the seed confines the file plane, not commands). *out NULL: it
 * cannot be entered, and *why (malloc()ed) says so - the exec does not run
 * and answers 126 with that on stderr, as ns's agent does. The engine's
 * lstat judges it (not the storage base, made at create); a link is left
 * to the engine, which follows it as `cd` would.
 */
static int exec_wd(engine_sandbox *s, const char *wd, char **out, char **why, msb_error **err)
{
	*out = *why = NULL;
	if (!wd || !*wd || strcmp(wd, ".") == 0 || strcmp(wd, s->base) == 0) {
		*out = strdup(s->base);
		return *out ? 0 : msb__error_nomem(err);
	}
	if (strlen(wd) > PATH_MAX)
		return msb_error_set(err, MSB_E_VALUE, "working directory: longer than %u bytes",
				     PATH_MAX);
	_cleanup_free_ char *abs = wd[0] == '/' ? strdup(wd) : msb__asprintf("%s/%s", s->base, wd);
	if (!abs)
		return msb__error_nomem(err);
	engine_stat st = {0};
	int r = ops(s)->stat(s->b->t, s->id, abs, &st, err);
	if (r < 0)
		return msb_error_wrap(err, "working directory `%s`", wd);
	const char *reason = !st.present ? "No such file or directory"
			     : st.kind == MSB_ENTRY_DIRECTORY || st.kind == MSB_ENTRY_SYMLINK
				     ? NULL
				     : "Not a directory";
	if (reason) {
		*why = msb__asprintf("msb: working directory `%s`: %s\n", wd, reason);
		return *why ? 0 : msb__error_nomem(err);
	}
	*out = TAKE_PTR(abs);
	return 0;
}

/* The answer of an exec whose working directory cannot be entered (its
 * reason within a bounded exec's budget). */
static int not_entered(char *why, uint64_t budget, msb_exec_result *out, msb_error **err)
{
	*out = (msb_exec_result){0};
	out->stdout_bytes = calloc(1, 1);
	if (!out->stdout_bytes) {
		free(why);
		return msb__error_nomem(err);
	}
	out->stderr_bytes = (uint8_t *)why;
	out->stderr_len = strlen(why);
	if (out->stderr_len > budget) {
		out->stderr_len = (size_t)budget;
		why[budget] = '\0';
		out->truncated = true;
	}
	out->exit_code = 126;
	return 0;
}

/* The proxy's records so far, as events (a failure loses nothing: they
 * stay in its log for the next reading, or the disposal's). */
static void drain_egress(engine_sandbox *s)
{
	if (!s->proxy || !s->b->reporter.report || !ops(s)->proxy_records)
		return;
	msb_buf records = MSB_BUF_INIT;
	msb_error *e = NULL;
	if (ops(s)->proxy_records(s->b->t, s->proxy, false, &records, &e) == 0) {
		msb_key key = {s->scope, s->thread_id, s->agent_dir, s->call_id};
		msb_engine__egress_report(s->b, &key, &records);
	}
	msb_error_free(e);
	msb__buf_free(&records);
}

static int run(engine_sandbox *s, const msb_exec_request *req, bool bounded, msb_exec_result *out,
	       msb_error **err)
{
	_cleanup_free_ char *wd = NULL;
	char *why = NULL;
	int r = exec_wd(s, req->working_directory, &wd, &why, err);
	if (r < 0)
		return r;
	if (why)
		return not_entered(why, bounded ? req->max_output_bytes : UINT64_MAX, out, err);
	const char *shell_argv[] = {"sh", "-c", req->shell, NULL};
	engine_exec x = {
		.argv = req->argv ? req->argv : shell_argv,
		.env = req->env,
		.work_dir = wd,
		.stdin_data = req->stdin_data,
		.stdin_len = req->stdin_len,
		.timeout = req->timeout,
		.cancel = req->cancel,
		.max_output = bounded ? req->max_output_bytes : ENGINE_MAX_OUTPUT,
		.bounded = bounded,
	};
	r = ops(s)->exec(s->b->t, s->id, &x, out, err);
	drain_egress(s);
	return r;
}

static int engine_exec_fn(void *impl, const msb_exec_request *req, msb_exec_result *out,
			  msb_error **err)
{
	return run(impl, req, false, out, err);
}

static int engine_exec_bounded(void *impl, const msb_exec_request *req, msb_exec_result *out,
			       msb_error **err)
{
	return run(impl, req, true, out, err);
}

static int engine_run_code(void *impl, const char *code, double timeout, msb_cancel *cancel,
			   msb_exec_result *out, msb_error **err)
{
	engine_sandbox *s = impl;
	return msb_error_set(err, MSB_E_NOT_IMPLEMENTED,
			     "the %s backend does not declare RUN_CODE: run a program with exec",
			     s->b->name);
}

/* Run a helper as the container's root; non-zero exit is MSB_E_OS with its
 * stderr (bounded). */
static int run_root(engine_sandbox *s, const char *const *argv, double timeout, const char *what,
		    msb_error **err)
{
	engine_exec x = {
		.argv = argv,
		.as_root = true,
		.timeout = timeout,
		.max_output = ENGINE_SMALL_OUTPUT,
		.bounded = true,
	};
	msb_exec_result res = {0};
	int r = ops(s)->exec(s->b->t, s->id, &x, &res, err);
	if (r < 0)
		return msb_error_wrap(err, "%s", what);
	if (res.exit_code != 0) {
		_cleanup_free_ char *text = msb_text_from_bytes(res.stderr_bytes, res.stderr_len);
		r = msb_error_set(err, MSB_E_OS, "%s: exit status %d: %s", what, res.exit_code,
				  text ? text : "");
	}
	msb_exec_result_clear(&res);
	return r;
}

/* ---- the walk -------------------------------------------------------------------- */

static int walk_lstat(void *ud, const char *abs_path, bool *present, msb_entry_kind *kind,
		      msb_error **err)
{
	engine_sandbox *s = ud;
	engine_stat st;
	int r = ops(s)->stat(s->b->t, s->id, abs_path, &st, err);
	if (r < 0)
		return r;
	*present = st.present;
	*kind = st.kind;
	return 0;
}

/* One call's target: the working directory and the path, both absolute. */
typedef struct engine_target {
	char *wd;
	char *abs;
} engine_target;

static void target_clear(engine_target *t)
{
	free(t->wd);
	free(t->abs);
}

/* The confined agent serves this handle's file plane (placed on first use). */
static bool use_agent(engine_sandbox *s)
{
	int a = __atomic_load_n(&s->agent, __ATOMIC_ACQUIRE);
	if (a == 0) {
		a = msb_engine__agent_place(s->b, s->id) ? 1 : -1;
		__atomic_store_n(&s->agent, a, __ATOMIC_RELEASE);
	}
	return a > 0 && !s->b->agent_off;
}

/* Confine `path` to the working directory (itself confined to the base),
 * lexically; the agent resolves it in the container, no link anywhere. */
static int confine(engine_sandbox *s, const char *path, const char *wd, bool not_wd,
		   engine_target *t, msb_error **err)
{
	*t = (engine_target){0};
	int r = resolve_wd(s, wd, &t->wd, err);
	if (r < 0)
		return r;
	r = msb_confine_guest_path(path, t->wd, &t->abs, err);
	if (r < 0)
		return r;
	if (not_wd && strcmp(t->abs, t->wd) == 0)
		return msb_error_set(err, MSB_E_VALUE,
				     "guest path `%s` is the working directory `%s` itself", path,
				     t->wd);
	return 0;
}

/* The tar-header walk: every directory above the confined path from `/`
 * (10.14, 10.15) with the engine's no-follow stat: a link refuses, a
 * non-directory is ENOTDIR, a missing one ends the walk. */
static int walk(engine_sandbox *s, const engine_target *t, msb_error **err)
{
	return msb_refuse_symlinked_parents(walk_lstat, s, t->abs, t->wd, false, err);
}

/* `abs` relative to the working directory, "." for the directory itself. */
static char *wd_relative(const engine_target *t)
{
	size_t n = strlen(t->wd);
	if (strcmp(t->abs, t->wd) == 0)
		return msb__strdup(".");
	return msb__strdup(t->abs + n + 1);
}

/* ---- the file plane ----------------------------------------------------------------- */

static int cap_refusal(const char *path, uint64_t size, uint64_t cap, msb_error **err)
{
	int r = msb_error_set(err, MSB_E_TRANSFER_CAP_EXCEEDED,
			      "`%s` is %" PRIu64
			      " bytes, over the max_bytes_per_file cap of %" PRIu64 " bytes",
			      path, size, cap);
	msb__error_set_cap(err, "max_bytes_per_file", path);
	return r;
}

static int engine_write_file(void *impl, const char *path, const uint8_t *data, size_t len,
			     const char *working_directory, msb_error **err)
{
	engine_sandbox *s = impl;
	if (len > ENGINE_MAX_FILE_BYTES)
		return cap_refusal(path, len, ENGINE_MAX_FILE_BYTES, err);
	int r = msb_engine__hostfs_write(s->b, s->id, s->base, path, data, len, working_directory,
					 err);
	if (r != ENGINE_HOSTFS_NONE)
		return r;
	_cleanup_(target_clear) engine_target t = {0};
	r = confine(s, path, working_directory, true, &t, err);
	if (r < 0)
		return r;
	if (use_agent(s) && (r = msb_engine__agent_write(s->b, s->id, t.abs, path, data, len,
							 err)) != ENGINE_AGENT_FALLBACK)
		return r;
	if ((r = walk(s, &t, err)) < 0)
		return r;
	engine_stat st;
	r = ops(s)->stat(s->b->t, s->id, t.abs, &st, err);
	if (r < 0)
		return r;
	if (st.present && st.kind == MSB_ENTRY_SYMLINK)
		return msb_error_set(err, MSB_E_VALUE,
				     "destination `%s` is a link: refusing to follow it", t.abs);
	if (st.present && st.kind == MSB_ENTRY_DIRECTORY)
		return msb_error_set(err, MSB_E_IS_DIRECTORY, "`%s` is a directory", path);
	if (st.present && st.kind != MSB_ENTRY_FILE)
		return msb_error_set(err, MSB_E_OS, "`%s` is not a regular file", path);
	return ops(s)->write(s->b->t, s->id, t.abs, data, len, err);
}

static int engine_stat_file(void *impl, const char *path, const char *working_directory,
			    bool *present, msb_entry *out, msb_error **err)
{
	engine_sandbox *s = impl;
	int r = msb_engine__hostfs_stat(s->b, s->id, s->base, path, working_directory, present, out,
					err);
	if (r != ENGINE_HOSTFS_NONE)
		return r;
	_cleanup_(target_clear) engine_target t = {0};
	r = confine(s, path, working_directory, false, &t, err);
	if (r < 0)
		return r;
	engine_stat st;
	if (!use_agent(s) ||
	    (r = msb_engine__agent_stat(s->b, s->id, t.abs, &st, err)) == ENGINE_AGENT_FALLBACK) {
		if ((r = walk(s, &t, err)) < 0)
			return r;
		r = ops(s)->stat(s->b->t, s->id, t.abs, &st, err);
	}
	if (r < 0)
		return r;
	if (!st.present) {
		*present = false;
		return 0;
	}
	char *name = wd_relative(&t);
	if (!name)
		return msb__error_nomem(err);
	*out = (msb_entry){
		.path = name,
		.kind = st.kind,
		.size_known = st.kind == MSB_ENTRY_FILE,
		.size_bytes = st.kind == MSB_ENTRY_FILE ? st.size : 0,
	};
	*present = true;
	return 0;
}

static int engine_read_file(void *impl, const char *path, const char *working_directory,
			    uint64_t max_bytes, uint8_t **data, size_t *len, msb_error **err)
{
	engine_sandbox *s = impl;
	_cleanup_(target_clear) engine_target t = {0};
	int r = confine(s, path, working_directory, false, &t, err);
	if (r < 0)
		return r;
	if (strcmp(t.abs, t.wd) == 0)
		return msb_error_set(err, MSB_E_IS_DIRECTORY, "`%s` is a directory", path);
	if (max_bytes > ENGINE_MAX_FILE_BYTES)
		max_bytes = ENGINE_MAX_FILE_BYTES;
	r = msb_engine__hostfs_read(s->b, s->id, s->base, path, working_directory, max_bytes, data,
				    len, err);
	if (r != ENGINE_HOSTFS_NONE)
		return r;
	if (use_agent(s) && (r = msb_engine__agent_read(s->b, s->id, t.abs, path, max_bytes, data,
							len, err)) != ENGINE_AGENT_FALLBACK)
		return r;
	if ((r = walk(s, &t, err)) < 0)
		return r;
	/* The leaf too, no-follow, before the transfer: docker's archive of a
	 * link is the link (the header below refuses it), but podman's follows
	 * it and sends the target under the link's name. */
	engine_stat st;
	r = ops(s)->stat(s->b->t, s->id, t.abs, &st, err);
	if (r < 0)
		return r;
	if (st.present && st.kind == MSB_ENTRY_SYMLINK)
		return msb_error_set(err, MSB_E_OS, "`%s` is a link: refusing to read through it",
				     t.abs);
	return ops(s)->read(s->b->t, s->id, t.abs, max_bytes, data, len, err);
}

static int engine_list_dir(void *impl, const char *path, const char *working_directory,
			   msb_entry **entries, size_t *n, msb_error **err)
{
	engine_sandbox *s = impl;
	return msb_error_set(err, MSB_E_NOT_IMPLEMENTED,
			     "the %s backend does not declare FILES_LIST (22.2)", s->b->name);
}

/* Remove the target as root after the walk: absent is success, a directory
 * only when recursive. rm does not follow a link it removes. */
static int remove_checked(engine_sandbox *s, const char *path, const char *working_directory,
			  bool recursive, double timeout, const char *op, msb_error **err)
{
	/* The host's walker: nothing the guest could not remove itself (22.3's
	 * reach rule, 9.27), no engine exec, so no timeout to apply. */
	int r = msb_engine__hostfs_remove(s->b, s->id, s->base, path, working_directory, recursive,
					  strcmp(op, "reclaim") == 0, err);
	if (r != ENGINE_HOSTFS_NONE)
		return r;
	_cleanup_(target_clear) engine_target t = {0};
	r = confine(s, path, working_directory, false, &t, err);
	if (r < 0)
		return msb_error_wrap(err, "%s", op);
	if (strcmp(t.abs, t.wd) == 0)
		return msb_error_set(err, MSB_E_VALUE,
				     "%s: refusing to remove the working directory `%s` itself", op,
				     path);
	if (use_agent(s) &&
	    (r = msb_engine__agent_remove(s->b, s->id, t.abs, path, recursive, timeout, op, err)) !=
		    ENGINE_AGENT_FALLBACK)
		return r;
	if ((r = walk(s, &t, err)) < 0)
		return msb_error_wrap(err, "%s", op);
	engine_stat st;
	r = ops(s)->stat(s->b->t, s->id, t.abs, &st, err);
	if (r < 0)
		return msb_error_wrap(err, "%s", op);
	if (!st.present)
		return 0;
	if (st.kind == MSB_ENTRY_DIRECTORY && !recursive)
		return msb_error_set(err, MSB_E_OS,
				     "%s: `%s` is a directory: removing it needs recursive", op,
				     path);
	const char *argv[] = {"rm", st.kind == MSB_ENTRY_DIRECTORY ? "-rf" : "-f", "--", t.abs,
			      NULL};
	_cleanup_free_ char *what = msb__asprintf("%s: cannot remove `%s`", op, path);
	if (!what)
		return msb__error_nomem(err);
	return run_root(s, argv, timeout, what, err);
}

static int engine_remove(void *impl, const char *path, const char *working_directory,
			 bool recursive, msb_error **err)
{
	return remove_checked(impl, path, working_directory, recursive, ENGINE_HELPER_TIMEOUT,
			      "remove", err);
}

/* RECLAIM (22.3): the host's walker, else rm -rf as the container's root
 * after the walk. */
static int engine_reclaim(void *impl, const char *directory, const char *working_directory,
			  double timeout, msb_error **err)
{
	return remove_checked(impl, directory, working_directory, true, timeout, "reclaim", err);
}

static int engine_reset(void *impl, double timeout, msb_error **err)
{
	engine_sandbox *s = impl;
	return msb_error_set(err, MSB_E_NOT_IMPLEMENTED,
			     "the %s backend does not declare SNAPSHOT: reset is not served",
			     s->b->name);
}

/* The base and its ancestors are made with the container (the engine's diff
 * is against the image): they are not a call's leftovers. Everything else
 * the engine reports changed since the image is. */
static bool made_with_container(const char *base, const char *path)
{
	size_t n = strlen(path);
	return strncmp(base, path, n) == 0 && (base[n] == '\0' || base[n] == '/');
}

static int engine_fingerprint(void *impl, bool *supported, msb_fingerprint *out, msb_error **err)
{
	engine_sandbox *s = impl;
	msb_fingerprint fp = {0};
	int r = ops(s)->fingerprint(s->b->t, s->id, supported, &fp, err);
	if (r < 0 || !*supported)
		return r;
	size_t k = 0;
	for (size_t i = 0; fp.changed_paths && fp.changed_paths[i]; i++) {
		/* The base, and the agent msb placed (not a call's leftover). */
		const char *p = fp.changed_paths[i];
		if (made_with_container(s->base, p) ||
		    (s->b->agent_guest && made_with_container(s->b->agent_guest, p)))
			free(fp.changed_paths[i]);
		else
			fp.changed_paths[k++] = fp.changed_paths[i];
	}
	if (fp.changed_paths)
		fp.changed_paths[k] = NULL;
	*out = fp;
	return 0;
}

static const char *engine_instance_id(void *impl)
{
	return ((engine_sandbox *)impl)->id;
}

static void engine_release(void *impl)
{
	engine_sandbox *s = impl;
	if (!s)
		return;
	free(s->name);
	free(s->id);
	free(s->base);
	free(s->proxy);
	free(s->scope);
	free(s->thread_id);
	free(s->agent_dir);
	free(s->call_id);
	msb_backend_unref(s->owner);
	free(s);
}

static const msb_sandbox_ops engine_sandbox_ops = {
	.version = MSB_SANDBOX_OPS_VERSION,
	.exec = engine_exec_fn,
	.exec_bounded = engine_exec_bounded,
	.run_code = engine_run_code,
	.write_file = engine_write_file,
	.stat_file = engine_stat_file,
	.read_file = engine_read_file,
	.list_dir = engine_list_dir,
	.remove = engine_remove,
	.reclaim = engine_reclaim,
	.reset = engine_reset,
	.fingerprint = engine_fingerprint,
	.instance_id = engine_instance_id,
	.release = engine_release,
};

static bool dup_or_null(char **out, const char *s)
{
	*out = msb__strdup(s);
	return !s || *out;
}

int msb_engine__sandbox_new(engine_backend *b, const msb_key *key, const char *name, const char *id,
			    const char *work_dir, const char *proxy, msb_sandbox **out,
			    msb_error **err)
{
	engine_sandbox *s = calloc(1, sizeof(*s));
	if (!s)
		return msb__error_nomem(err);
	s->b = b;
	s->owner = msb_backend_ref(b->self);
	s->name = msb__strdup(name);
	s->id = msb__strdup(id);
	s->base = msb_guest_normpath(work_dir);
	bool ok = dup_or_null(&s->proxy, proxy) && dup_or_null(&s->scope, key->scope) &&
		  dup_or_null(&s->thread_id, key->thread_id) &&
		  dup_or_null(&s->agent_dir, key->agent_dir) &&
		  dup_or_null(&s->call_id, key->call_id);
	if (!s->name || !s->id || !s->base || !ok) {
		engine_release(s);
		return msb__error_nomem(err);
	}
	return msb_sandbox_new(&engine_sandbox_ops, s, b->name, out, err);
}

int msb_engine_sandbox_host_root(msb_sandbox *sb, char **out, msb_error **err)
{
	*out = NULL;
	engine_sandbox *s = msb_sandbox_impl(sb, &engine_sandbox_ops);
	if (!s)
		return msb_error_set(err, MSB_E_VALUE, "not a container engine's sandbox");
	if (!ops(s)->host_root)
		return msb_error_set(err, MSB_E_NOT_IMPLEMENTED,
				     "the %s backend cannot say where a container's files are on "
				     "the host",
				     s->b->name);
	return ops(s)->host_root(s->b->t, s->id, out, err);
}
