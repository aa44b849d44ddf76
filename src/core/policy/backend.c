/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The backend object (checklist 4.1, 4.9, 4.13): a vtable, its impl, and what
 * the backend declared once - a name, an isolation spelling (judged by the
 * router, never here) and one deep-copied declarations value. Refcounted with
 * atomics; everything else is immutable after msb_backend_new, so a backend
 * may be shared between threads and routers.
 */
#include <stdatomic.h>

#include "core/policy/router_int.h"

struct msb_backend {
	atomic_uint refs;
	msb_backend_ops ops;
	const msb_backend_ops *ops_id; /* the address given to msb_backend_new */
	void *impl;
	char *name;
	char *isolation;
	msb_declarations *decl;
	/* A refusal the router raises when it resolves this backend (5.16). */
	int deferred_code;
	char *deferred_message;
};

static int slot_missing(const char *name, const char *slot, msb_error **err)
{
	if (name)
		return msb_error_set(err, MSB_E_VALUE,
				     "backend `%s`: the `%s` slot of its ops is NULL; every slot "
				     "is mandatory",
				     name, slot);
	return msb_error_set(err, MSB_E_VALUE,
			     "backend: the `%s` slot of its ops is NULL; every slot is mandatory",
			     slot);
}

static int check_new(const msb_backend_ops *ops, const msb_backend_info *info, msb_error **err)
{
	const char *name = info ? info->name : NULL;
	if (!ops)
		return msb_error_set(err, MSB_E_VALUE, "backend: no ops given");
	if (ops->version != MSB_BACKEND_OPS_VERSION)
		return msb_error_set(err, MSB_E_VALUE, "backend: unsupported ops version %u",
				     ops->version);
	if (!ops->acquire)
		return slot_missing(name, "acquire", err);
	if (!ops->dispose)
		return slot_missing(name, "dispose", err);
	if (!ops->dispose_scope)
		return slot_missing(name, "dispose_scope", err);
	if (!ops->set_egress_reporter)
		return slot_missing(name, "set_egress_reporter", err);
	if (!ops->free)
		return slot_missing(name, "free", err);
	if (!info)
		return msb_error_set(err, MSB_E_VALUE, "backend: no info given");
	if (info->version != MSB_BACKEND_INFO_VERSION)
		return msb_error_set(err, MSB_E_VALUE, "backend: unsupported info version %u",
				     info->version);
	if (!name || !*name)
		return msb_error_set(err, MSB_E_VALUE, "backend: a name is required");
	/* 4.1: isolation is a protocol member; a backend with no rung cannot
	 * be placed against a floor. Whether the spelling is a rung is the
	 * router's judgement (1.4, 4.13). */
	if (!info->isolation)
		return msb_error_set(err, MSB_E_BACKEND_NOT_PERMITTED,
				     "sandbox backend '%s' declares no isolation: every backend "
				     "declares a rung of the ladder %s",
				     name, msb_isolation_ladder());
	if (info->declarations) {
		_cleanup_free_ char *where = msb__asprintf("backend `%s` declarations", name);
		if (!where)
			return msb__error_nomem(err);
		int r = msb_declarations__validate(info->declarations, where, err);
		if (r < 0)
			return r;
	}
	return 0;
}

int msb_backend_new(const msb_backend_ops *ops, const msb_backend_info *info, void *impl,
		    msb_backend **out, msb_error **err)
{
	int r = check_new(ops, info, err);
	if (r == 0 && !out)
		r = msb_error_set(err, MSB_E_VALUE, "backend: no place for the result");
	if (r < 0)
		goto free_impl;

	msb_backend *b = calloc(1, sizeof(*b));
	if (!b)
		goto nomem;
	atomic_init(&b->refs, 1);
	b->ops = *ops;
	b->ops_id = ops;
	b->name = strdup(info->name);
	b->isolation = strdup(info->isolation);
	b->decl = msb_declarations__dup(info->declarations ? info->declarations
							   : &MSB_DEFAULT_BACKEND_DECLARATIONS);
	if (!b->name || !b->isolation || !b->decl) {
		free(b->name);
		free(b->isolation);
		free(b->decl);
		free(b);
		goto nomem;
	}
	b->impl = impl;
	*out = b;
	return 0;

nomem:
	r = msb__error_nomem(err);
free_impl:
	if (ops && ops->free)
		ops->free(impl);
	return r;
}

void *msb_backend_impl(const msb_backend *b, const msb_backend_ops *ops)
{
	return b && ops && b->ops_id == ops ? b->impl : NULL;
}

msb_backend *msb_backend_ref(msb_backend *b)
{
	if (b)
		atomic_fetch_add_explicit(&b->refs, 1, memory_order_relaxed);
	return b;
}

void msb_backend_unref(msb_backend *b)
{
	if (!b || atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) != 1)
		return;
	b->ops.free(b->impl);
	free(b->name);
	free(b->isolation);
	free(b->decl);
	free(b->deferred_message);
	free(b);
}

const char *msb_backend_name(const msb_backend *b)
{
	return b ? b->name : NULL;
}

const char *msb_backend_isolation(const msb_backend *b)
{
	return b ? b->isolation : NULL;
}

const msb_declarations *msb_backend_declarations(const msb_backend *b)
{
	return b ? b->decl : NULL;
}

/* ---- deferred refusals (5.16) --------------------------------------------------- */

int msb_backend__set_deferred_refusal(msb_backend *b, int code, const char *message,
				      msb_error **err)
{
	char *m = strdup(message ? message : "refused");
	if (!m)
		return msb__error_nomem(err);
	free(b->deferred_message);
	b->deferred_message = m;
	b->deferred_code = code;
	return 0;
}

int msb_backend__deferred_refusal(const msb_backend *b, msb_error **err)
{
	if (!b->deferred_message)
		return 0;
	return msb_error_set(err, b->deferred_code, "%s", b->deferred_message);
}

/* ---- direct calls ---------------------------------------------------------------- */

/* A backend that failed without saying why still yields a message. */
static int failed_without_error(const msb_backend *b, const char *op, int r, msb_error **err)
{
	if (r > 0)
		return msb_error_set(err, MSB_E_RUNTIME,
				     "backend `%s` %s returned a positive status %d", b->name, op,
				     r);
	return msb_error_set(err, r, "backend `%s` %s failed (%s)", b->name, op, msb_code_name(r));
}

int msb_backend_acquire(msb_backend *b, const msb_key *key, const msb_spec *spec, msb_sandbox **out,
			msb_error **err)
{
	if (!b || !spec || !out)
		return msb_error_set(err, MSB_E_VALUE, "backend acquire: missing argument");
	int r = msb_key_validate(key, err);
	if (r < 0)
		return r;

	msb_error *e = NULL;
	msb_sandbox *sb = NULL;
	r = b->ops.acquire(b->impl, key, spec, &sb, &e);
	if (r != 0) {
		msb_sandbox_free(sb);
		if (r < 0 && e)
			return msb__error_propagate(err, e);
		msb_error_free(e);
		return failed_without_error(b, "acquire", r, err);
	}
	msb_error_free(e);
	if (!sb)
		return msb_error_set(err, MSB_E_RUNTIME, "backend `%s` acquire returned no sandbox",
				     b->name);
	*out = sb;
	return 0;
}

int msb_backend_dispose(msb_backend *b, const msb_key *key, const char *kind,
			const char *instance_id, msb_disposal_failure **failure, msb_error **err)
{
	if (!b || !failure)
		return msb_error_set(err, MSB_E_VALUE, "backend dispose: missing argument");
	*failure = NULL;
	int r = msb_key_validate(key, err);
	if (r < 0)
		return r;

	msb_error *e = NULL;
	msb_disposal_failure *f = NULL;
	r = b->ops.dispose(b->impl, key, kind, instance_id, &f, &e);
	if (r != 0) {
		msb_disposal_failure_free(f);
		if (r < 0 && e)
			return msb__error_propagate(err, e);
		msb_error_free(e);
		return failed_without_error(b, "dispose", r, err);
	}
	msb_error_free(e);
	*failure = f;
	return 0;
}

int msb_backend_dispose_scope(msb_backend *b, const char *scope, const char *thread_id,
			      msb_scope_purge *out, msb_error **err)
{
	if (!b || !scope || !thread_id || !out)
		return msb_error_set(err, MSB_E_VALUE, "backend dispose_scope: missing argument");

	msb_error *e = NULL;
	msb_scope_purge p = {0, 0};
	int r = b->ops.dispose_scope(b->impl, scope, thread_id, &p, &e);
	if (r != 0) {
		if (r < 0 && e)
			return msb__error_propagate(err, e);
		msb_error_free(e);
		return failed_without_error(b, "dispose_scope", r, err);
	}
	msb_error_free(e);
	*out = p;
	return 0;
}

void msb_backend__set_egress_reporter(msb_backend *b, const msb_egress_reporter *reporter)
{
	b->ops.set_egress_reporter(b->impl, reporter);
}
