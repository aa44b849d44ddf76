/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The guest handle (checklist section 9): argument validation in front of a
 * backend's msb_sandbox_ops, the result helpers, UTF-8 text views (9.6) and
 * the cancellation token (24.2).
 */
#include <math.h>
#include <stdio.h>
#include <stdatomic.h>

#include <msb/backend.h>
#include <msb/sandbox.h>

#include "core/policy/exec_opts.h"
#include "core/policy/spec_int.h"
#include "platform/platform.h"
#include "util/util.h"

struct msb_sandbox {
	msb_sandbox_ops ops;
	const msb_sandbox_ops *ops_id; /* the address given to msb_sandbox_new */
	void *impl;
	char *backend_name;
	char **env; /* the spec's NAME=VALUE entries, or NULL (msb__sandbox_set_spec_env) */
};

void *msb_sandbox_impl(const msb_sandbox *sb, const msb_sandbox_ops *ops)
{
	return sb && ops && sb->ops_id == ops ? sb->impl : NULL;
}

/* ---- cancellation token --------------------------------------------------- */

struct msb_cancel {
	int fd, wfd; /* the wake-up channel (platform.h): readable once triggered */
	atomic_bool triggered;
};

int msb_cancel_new(msb_cancel **out, msb_error **err)
{
	if (!out)
		return msb_error_set(err, MSB_E_VALUE, "output pointer is NULL");
	msb_cancel *c = calloc(1, sizeof(*c));
	if (!c)
		return msb__error_nomem(err);
	int rc = msb__plat_wake_new(&c->fd, &c->wfd, true);
	if (rc < 0) {
		free(c);
		return msb__error_errno(err, rc, "cannot make the cancellation eventfd");
	}
	atomic_init(&c->triggered, false);
	*out = c;
	return 0;
}

/* Async-signal-safe: one lock-free exchange and at most one write(2). */
void msb_cancel_trigger(msb_cancel *c)
{
	if (!c)
		return;
	if (atomic_exchange(&c->triggered, true))
		return;
	int saved = errno;
	uint64_t one = 1;
	ssize_t MSB_UNUSED n = write(c->wfd, &one, sizeof(one));
	errno = saved;
}

bool msb_cancel_requested(const msb_cancel *c)
{
	return c && atomic_load(&((msb_cancel *)c)->triggered);
}

int msb_cancel_fd(const msb_cancel *c)
{
	return c ? c->fd : -1;
}

void msb_cancel_free(msb_cancel *c)
{
	if (!c)
		return;
	msb__plat_wake_close(c->fd, c->wfd);
	free(c);
}

/* ---- results --------------------------------------------------------------- */

void msb_exec_result_clear(msb_exec_result *r)
{
	if (!r)
		return;
	free(r->stdout_bytes);
	free(r->stderr_bytes);
	memset(r, 0, sizeof(*r));
}

void msb_entry_clear(msb_entry *e)
{
	if (!e)
		return;
	free(e->path);
	memset(e, 0, sizeof(*e));
}

void msb_entries_free(msb_entry *entries, size_t n)
{
	if (!entries)
		return;
	for (size_t i = 0; i < n; i++)
		msb_entry_clear(&entries[i]);
	free(entries);
}

void msb_fingerprint_clear(msb_fingerprint *fp)
{
	if (!fp)
		return;
	msb_strv_free(fp->changed_paths);
	msb_strv_free(fp->running_programs);
	memset(fp, 0, sizeof(*fp));
}

/* ---- UTF-8 decode with replacement (9.6) ------------------------------------
 *
 * Each maximal subpart of an ill-formed sequence becomes one U+FFFD (the
 * Unicode "substitution of maximal subparts" practice, which is also what
 * Python's errors="replace" does): a lead byte followed by continuation
 * bytes that could still begin a valid sequence is one subpart; a byte that
 * can never start or continue one is a subpart on its own.
 */

/* Valid range of the second byte for a lead byte; false if `b0` never leads. */
static bool utf8_lead(uint8_t b0, size_t *need, uint8_t *lo, uint8_t *hi)
{
	*lo = 0x80;
	*hi = 0xbf;
	if (b0 >= 0xc2 && b0 <= 0xdf) {
		*need = 1;
	} else if (b0 >= 0xe0 && b0 <= 0xef) {
		*need = 2;
		if (b0 == 0xe0)
			*lo = 0xa0; /* no overlongs */
		else if (b0 == 0xed)
			*hi = 0x9f; /* no surrogates */
	} else if (b0 >= 0xf0 && b0 <= 0xf4) {
		*need = 3;
		if (b0 == 0xf0)
			*lo = 0x90;
		else if (b0 == 0xf4)
			*hi = 0x8f; /* nothing above U+10FFFF */
	} else {
		return false;
	}
	return true;
}

char *msb_text_from_bytes_len(const uint8_t *bytes, size_t len, size_t *text_len)
{
	if (!bytes && len > 0)
		return NULL;
	size_t cap;
	if (msb__mul_overflow(len, 3, &cap) || msb__add_overflow(cap, 1, &cap))
		return NULL;
	uint8_t *out = malloc(cap);
	if (!out)
		return NULL;
	size_t o = 0;
	size_t i = 0;
	while (i < len) {
		uint8_t b0 = bytes[i];
		if (b0 < 0x80) {
			out[o++] = b0;
			i++;
			continue;
		}
		size_t need;
		uint8_t lo, hi;
		size_t good = 0; /* continuation bytes accepted after the lead */
		if (utf8_lead(b0, &need, &lo, &hi)) {
			while (good < need && i + 1 + good < len) {
				uint8_t b = bytes[i + 1 + good];
				if (b < lo || b > hi)
					break;
				good++;
				lo = 0x80;
				hi = 0xbf;
			}
			if (good == need) {
				memcpy(out + o, bytes + i, need + 1);
				o += need + 1;
				i += need + 1;
				continue;
			}
		}
		out[o++] = 0xef;
		out[o++] = 0xbf;
		out[o++] = 0xbd;
		i += 1 + good;
	}
	out[o] = '\0';
	if (text_len)
		*text_len = o;
	return (char *)out;
}

char *msb_text_from_bytes(const uint8_t *bytes, size_t len)
{
	return msb_text_from_bytes_len(bytes, len, NULL);
}

/* ---- construction ---------------------------------------------------------- */

int msb_sandbox_new(const msb_sandbox_ops *ops, void *impl, const char *backend_name,
		    msb_sandbox **out, msb_error **err)
{
	if (!ops)
		return msb_error_set(err, MSB_E_VALUE, "sandbox ops are NULL");

	static const struct {
		size_t offset;
		const char *name;
	} slots[] = {
#define SLOT(s) {offsetof(msb_sandbox_ops, s), #s}
		SLOT(exec),	 SLOT(exec_bounded), SLOT(run_code),	SLOT(write_file),
		SLOT(stat_file), SLOT(read_file),    SLOT(list_dir),	SLOT(remove),
		SLOT(reclaim),	 SLOT(reset),	     SLOT(fingerprint), SLOT(instance_id),
		SLOT(release),
#undef SLOT
	};

	int r = 0;
	/* release first: without it nothing can be handed back on failure. */
	if (!ops->release) {
		return msb_error_set(err, MSB_E_VALUE,
				     "sandbox ops slot `release` is NULL: every slot is mandatory");
	}
	for (size_t i = 0; i < MSB_ARRAY_SIZE(slots); i++) {
		void *fn;
		memcpy(&fn, (const char *)ops + slots[i].offset, sizeof(fn));
		if (!fn) {
			r = msb_error_set(err, MSB_E_VALUE,
					  "sandbox ops slot `%s` is NULL: every slot is mandatory",
					  slots[i].name);
			goto release_impl;
		}
	}
	if (ops->version != 1 && ops->version != MSB_SANDBOX_OPS_VERSION) {
		r = msb_error_set(err, MSB_E_VALUE,
				  "sandbox ops version %u is not supported (want 1 to %u)",
				  ops->version, (unsigned)MSB_SANDBOX_OPS_VERSION);
		goto release_impl;
	}
	if (!backend_name) {
		r = msb_error_set(err, MSB_E_VALUE, "backend name is NULL");
		goto release_impl;
	}
	if (!out) {
		r = msb_error_set(err, MSB_E_VALUE, "output pointer is NULL");
		goto release_impl;
	}

	msb_sandbox *sb = calloc(1, sizeof(*sb));
	if (!sb) {
		r = msb__error_nomem(err);
		goto release_impl;
	}
	sb->backend_name = strdup(backend_name);
	if (!sb->backend_name) {
		free(sb);
		r = msb__error_nomem(err);
		goto release_impl;
	}
	if (ops->version == 1) {
		/* a vtable built against version 1 ends before exec_io */
		memcpy(&sb->ops, ops, offsetof(msb_sandbox_ops, exec_io));
		sb->ops.exec_io = 0;
	} else {
		sb->ops = *ops;
	}
	sb->ops_id = ops;
	sb->impl = impl;
	*out = sb;
	return 0;

release_impl:
	ops->release(impl);
	return r;
}

void msb_sandbox_free(msb_sandbox *sb)
{
	if (!sb)
		return;
	sb->ops.release(sb->impl);
	free(sb->backend_name);
	msb__env_free(sb->env);
	free(sb);
}

const char *msb_sandbox_instance_id(const msb_sandbox *sb)
{
	if (!sb)
		return "";
	const char *id = sb->ops.instance_id(sb->impl);
	return id ? id : "";
}

const char *msb_sandbox_backend_name(const msb_sandbox *sb)
{
	return sb ? sb->backend_name : "";
}

unsigned msb_sandbox_exec_io(const msb_sandbox *sb)
{
	return sb ? sb->ops.exec_io : 0;
}

/* ---- argument checks ------------------------------------------------------- */

static int check_handle(const msb_sandbox *sb, const char *op, msb_error **err)
{
	if (!sb)
		return msb_error_set(err, MSB_E_VALUE, "%s: sandbox is NULL", op);
	return 0;
}

static int check_nonnull(const void *p, const char *op, const char *what, msb_error **err)
{
	if (!p)
		return msb_error_set(err, MSB_E_VALUE, "%s: %s is NULL", op, what);
	return 0;
}

/*
 * A file's path must not end in "/" nor in a "." component after a slash:
 * "a.txt/" and "a.txt/." name a directory, and normalising them (10.12)
 * would drop the slash and reach the file a.txt. Refused before any
 * backend sees it. A ".." leaf normalises to a directory, which the
 * backend refuses itself (the working directory, or a directory).
 */
static int check_file_name(const char *path, const char *op, msb_error **err)
{
	int r = check_nonnull(path, op, "path", err);
	if (r < 0)
		return r;
	const char *slash = strrchr(path, '/');
	if (!slash)
		return 0;
	const char *leaf = slash + 1;
	if (*leaf == '\0' || strcmp(leaf, ".") == 0)
		return msb_error_set(err, MSB_E_VALUE,
				     "%s: `%s` names a directory (it ends in `/%s`), not a file",
				     op, path, leaf);
	return 0;
}

/* The request as the backend will see it (*local: version 2, checked). */
static int check_exec_request(const msb_sandbox *sb, const msb_exec_request *req,
			      const msb_exec_result *out, const char *op, bool bounded,
			      msb_exec_request *local, msb_error **err)
{
	int r = check_handle(sb, op, err);
	if (r < 0)
		return r;
	if ((r = check_nonnull(req, op, "request", err)) < 0 ||
	    (r = check_nonnull(out, op, "result pointer", err)) < 0)
		return r;
	if ((r = msb__exec_prepare(sb->ops.exec_io, sb->backend_name, req, local, op, err)) < 0)
		return r;
	req = local;
	if ((req->argv != NULL) == (req->shell != NULL))
		return msb_error_set(err, MSB_E_VALUE,
				     "%s: give exactly one of argv and shell, not %s", op,
				     req->argv ? "both" : "neither");
	if (req->argv && !req->argv[0])
		return msb_error_set(err, MSB_E_VALUE, "%s: argv is empty", op);
	if (req->stdin_len > 0 && !req->stdin_data)
		return msb_error_set(err, MSB_E_VALUE,
				     "%s: stdin_data is NULL but stdin_len is %zu", op,
				     req->stdin_len);
	if (bounded && req->max_output_bytes == 0)
		return msb_error_set(err, MSB_E_VALUE,
				     "%s: max_output_bytes must be positive for a bounded exec",
				     op);
	char what[64];
	snprintf(what, sizeof(what), "%s timeout", op);
	return msb__check_timeout(req->timeout, what, err);
}

static int check_timeout(double timeout, const char *op, msb_error **err)
{
	char what[64];
	snprintf(what, sizeof(what), "%s timeout", op);
	return msb__check_timeout(timeout, what, err);
}

/* ---- exec -------------------------------------------------------------------
 * Results go through a local so that *out is written only on success. */

int msb__sandbox_set_spec_env(msb_sandbox *sb, const msb_spec *spec, msb_error **err)
{
	char **env = NULL;
	int r = msb__spec_env_entries(spec, &env, err);
	if (r < 0)
		return r;
	msb__env_free(sb->env);
	sb->env = env;
	return 0;
}

/* The spec's env under the request's (*merged, to free; NULL when the spec
 * sets none): a spec entry whose name the request sets is left out, so the
 * exec's own wins; the whole is checked again for the bounds. */
static int merge_env(const msb_sandbox *sb, msb_exec_request *local, const char *op,
		     const char ***merged, msb_error **err)
{
	*merged = NULL;
	if (!sb->env)
		return 0;
	size_t ns = 0, nr = 0;
	while (sb->env[ns])
		ns++;
	while (local->env && local->env[nr])
		nr++;
	const char **m = calloc(ns + nr + 1, sizeof(*m));
	if (!m)
		return msb__error_nomem(err);
	size_t k = 0;
	for (size_t i = 0; i < ns; i++) {
		size_t len = strcspn(sb->env[i], "=") + 1; /* the name and its '=' */
		bool overridden = false;
		for (size_t j = 0; j < nr && !overridden; j++)
			overridden = strncmp(local->env[j], sb->env[i], len) == 0;
		if (!overridden)
			m[k++] = sb->env[i];
	}
	for (size_t j = 0; j < nr; j++)
		m[k++] = local->env[j];
	int r = msb_exec_env_check(m, err);
	if (r < 0) {
		free(m);
		return msb_error_wrap(err, "%s: the spec's env and the request's together", op);
	}
	local->env = m;
	*merged = m;
	return 0;
}

static int finish_exec(int r, msb_exec_result *tmp, msb_exec_result *out)
{
	if (r < 0) {
		msb_exec_result_clear(tmp);
		return r;
	}
	*out = *tmp;
	return 0;
}

int msb_sandbox_exec(msb_sandbox *sb, const msb_exec_request *req, msb_exec_result *out,
		     msb_error **err)
{
	msb_exec_request local;
	_cleanup_free_ const char **env = NULL;
	int r = check_exec_request(sb, req, out, "exec", false, &local, err);
	if (r < 0 || (r = merge_env(sb, &local, "exec", &env, err)) < 0)
		return r;
	msb_exec_result tmp = {0};
	return finish_exec(sb->ops.exec(sb->impl, &local, &tmp, err), &tmp, out);
}

int msb_sandbox_exec_bounded(msb_sandbox *sb, const msb_exec_request *req, msb_exec_result *out,
			     msb_error **err)
{
	msb_exec_request local;
	_cleanup_free_ const char **env = NULL;
	int r = check_exec_request(sb, req, out, "exec_bounded", true, &local, err);
	if (r < 0 || (r = merge_env(sb, &local, "exec_bounded", &env, err)) < 0)
		return r;
	msb_exec_result tmp = {0};
	return finish_exec(sb->ops.exec_bounded(sb->impl, &local, &tmp, err), &tmp, out);
}

int msb_sandbox_run_code(msb_sandbox *sb, const char *code, double timeout, msb_cancel *cancel,
			 msb_exec_result *out, msb_error **err)
{
	int r;
	if ((r = check_handle(sb, "run_code", err)) < 0 ||
	    (r = check_nonnull(code, "run_code", "code", err)) < 0 ||
	    (r = check_nonnull(out, "run_code", "result pointer", err)) < 0 ||
	    (r = check_timeout(timeout, "run_code", err)) < 0)
		return r;
	msb_exec_result tmp = {0};
	return finish_exec(sb->ops.run_code(sb->impl, code, timeout, cancel, &tmp, err), &tmp, out);
}

/* ---- the file plane -------------------------------------------------------- */

int msb_sandbox_write_file(msb_sandbox *sb, const char *path, const uint8_t *data, size_t len,
			   const char *working_directory, msb_error **err)
{
	int r;
	if ((r = check_handle(sb, "write_file", err)) < 0 ||
	    (r = check_file_name(path, "write_file", err)) < 0)
		return r;
	if (!data && len > 0)
		return msb_error_set(err, MSB_E_VALUE, "write_file: data is NULL but len is %zu",
				     len);
	return sb->ops.write_file(sb->impl, path, data ? data : (const uint8_t *)"", len,
				  working_directory, err);
}

int msb_sandbox_stat_file(msb_sandbox *sb, const char *path, const char *working_directory,
			  bool *present, msb_entry *out, msb_error **err)
{
	int r;
	if ((r = check_handle(sb, "stat_file", err)) < 0 ||
	    (r = check_nonnull(path, "stat_file", "path", err)) < 0 ||
	    (r = check_nonnull(present, "stat_file", "present pointer", err)) < 0 ||
	    (r = check_nonnull(out, "stat_file", "entry pointer", err)) < 0)
		return r;
	bool here = false;
	msb_entry tmp = {0};
	r = sb->ops.stat_file(sb->impl, path, working_directory, &here, &tmp, err);
	if (r < 0) {
		msb_entry_clear(&tmp);
		return r;
	}
	*present = here;
	if (here)
		*out = tmp;
	else
		msb_entry_clear(&tmp);
	return 0;
}

int msb_sandbox_read_file(msb_sandbox *sb, const char *path, const char *working_directory,
			  uint64_t max_bytes, uint8_t **data, size_t *len, msb_error **err)
{
	int r;
	if ((r = check_handle(sb, "read_file", err)) < 0 ||
	    (r = check_file_name(path, "read_file", err)) < 0 ||
	    (r = check_nonnull(data, "read_file", "data pointer", err)) < 0 ||
	    (r = check_nonnull(len, "read_file", "length pointer", err)) < 0)
		return r;
	uint8_t *d = NULL;
	size_t l = 0;
	r = sb->ops.read_file(sb->impl, path, working_directory, max_bytes, &d, &l, err);
	if (r < 0) {
		free(d);
		return r;
	}
	*data = d;
	*len = l;
	return 0;
}

int msb_sandbox_list_dir(msb_sandbox *sb, const char *path, const char *working_directory,
			 msb_entry **entries, size_t *n, msb_error **err)
{
	int r;
	if ((r = check_handle(sb, "list_dir", err)) < 0 ||
	    (r = check_nonnull(path, "list_dir", "path", err)) < 0 ||
	    (r = check_nonnull(entries, "list_dir", "entries pointer", err)) < 0 ||
	    (r = check_nonnull(n, "list_dir", "count pointer", err)) < 0)
		return r;
	msb_entry *e = NULL;
	size_t count = 0;
	r = sb->ops.list_dir(sb->impl, path, working_directory, &e, &count, err);
	if (r < 0) {
		msb_entries_free(e, count);
		return r;
	}
	*entries = e;
	*n = count;
	return 0;
}

int msb_sandbox_remove(msb_sandbox *sb, const char *path, const char *working_directory,
		       bool recursive, msb_error **err)
{
	int r;
	if ((r = check_handle(sb, "remove", err)) < 0 ||
	    (r = check_nonnull(path, "remove", "path", err)) < 0)
		return r;
	return sb->ops.remove(sb->impl, path, working_directory, recursive, err);
}

/* ---- cleanup primitives ---------------------------------------------------- */

int msb_sandbox_reclaim(msb_sandbox *sb, const char *directory, const char *working_directory,
			double timeout, msb_error **err)
{
	int r;
	if ((r = check_handle(sb, "reclaim", err)) < 0 ||
	    (r = check_nonnull(directory, "reclaim", "directory", err)) < 0 ||
	    (r = check_timeout(timeout, "reclaim", err)) < 0)
		return r;
	return sb->ops.reclaim(sb->impl, directory, working_directory, timeout, err);
}

int msb_sandbox_reset(msb_sandbox *sb, double timeout, msb_error **err)
{
	int r;
	if ((r = check_handle(sb, "reset", err)) < 0 ||
	    (r = check_timeout(timeout, "reset", err)) < 0)
		return r;
	return sb->ops.reset(sb->impl, timeout, err);
}

int msb_sandbox_fingerprint(msb_sandbox *sb, bool *supported, msb_fingerprint *out, msb_error **err)
{
	int r;
	if ((r = check_handle(sb, "fingerprint", err)) < 0 ||
	    (r = check_nonnull(supported, "fingerprint", "supported pointer", err)) < 0 ||
	    (r = check_nonnull(out, "fingerprint", "fingerprint pointer", err)) < 0)
		return r;
	bool ok = false;
	msb_fingerprint tmp = {0};
	r = sb->ops.fingerprint(sb->impl, &ok, &tmp, err);
	if (r < 0 || !ok) {
		msb_fingerprint_clear(&tmp);
		if (r < 0)
			return r;
		*supported = false;
		return 0;
	}
	*supported = true;
	*out = tmp;
	return 0;
}
