/* SPDX-License-Identifier: Apache-2.0 */
/*
 * InProcessSandboxBackend (checklist 19.1-19.4): a real implementation of the
 * backend protocol that hands out the one shared fake sandbox and records
 * every acquire, dispose and purge so that tests can assert on them.
 */
#include <pthread.h>

#include <msb/backend.h>
#include <msb/testing.h>

#include "fake.h"
#include "util/util.h"

/* 19.2, 23.37: DEFAULT_CAPABILITIES | {RECLAIM}; egress {allowlist, closed}
 * so that workloads under test attach; default limits; no OS family. */
const msb_declarations MSB_FAKE_BACKEND_DECLARATIONS = {
	.version = MSB_DECLARATIONS_VERSION,
	.capabilities = MSB_DEFAULT_CAPABILITIES | MSB_CAP_RECLAIM,
	.limits = MSB_DEFAULT_SANDBOX_LIMITS_INIT,
	.egress_modes = MSB_EGRESS_ALLOWLIST | MSB_EGRESS_CLOSED,
	.os_families = 0,
	.isolation_scopes = MSB_SCOPE_CONVERSATION,
	.egress_method_tokens = NULL,
	.n_egress_method_tokens = 0,
	.egress_method_tokens_all = false,
	.observes_egress = false,
};

struct disposal {
	msb_key *key;
	char *kind;
	char *instance_id;
};

struct purge {
	char *scope;
	char *thread_id;
};

struct msb_fake_backend {
	pthread_mutex_t lock;
	msb_fake_sandbox *fs;
	char *name;
	int acquire_error;
	char *acquire_error_message;
	bool purging;

	msb_key **keys;
	msb_spec **specs;
	size_t n_acquired;

	struct disposal *disposed;
	size_t n_disposed;

	struct purge *purged;
	size_t n_purged;
	uint64_t purge_count;

	int dispose_failure_code; /* -1 = report nothing */
	char *dispose_detail;
	int dispose_raise_code;

	msb_egress_reporter reporter;
};

static void fb_unlockp(msb_fake_backend **fb)
{
	if (*fb)
		pthread_mutex_unlock(&(*fb)->lock);
}
/* A guard, never read: `unused` keeps clang quiet about it. */
#define _cleanup_fb_unlock_ _cleanup_(fb_unlockp) __attribute__((unused))

static msb_fake_backend *fb_locked(msb_fake_backend *fb)
{
	pthread_mutex_lock(&fb->lock);
	return fb;
}

static int as_code(int code)
{
	return code > 0 ? -code : code;
}

/* ---- msb_backend_ops ------------------------------------------------------ */

static int fb_acquire(void *impl, const msb_key *key, const msb_spec *spec, msb_sandbox **out,
		      msb_error **err)
{
	msb_fake_backend *fb = impl;
	_cleanup_fb_unlock_ msb_fake_backend *l = fb_locked(fb);
	/* 7.15: no acquire may land in a scope while its purge runs. */
	if (fb->purging)
		return msb_error_set(err, MSB_E_RUNTIME,
				     "%s: a scope purge is active: acquire refused until it ends",
				     fb->name);
	if (fb->acquire_error)
		return msb_error_set(err, as_code(fb->acquire_error), "%s",
				     fb->acquire_error_message ? fb->acquire_error_message
							       : "scripted acquire failure");
	if (!key)
		return msb_error_set(err, MSB_E_VALUE, "%s: acquire without a key", fb->name);

	/* 10.1, 10.5: workloads that touch files or run commands get the
	 * storage base; a runtime-only workload causes no directory work. */
	const msb_capset needs_base = MSB_CAP_EXEC | MSB_CAP_FILES_IN | MSB_CAP_FILES_OUT |
				      MSB_CAP_FILES_LIST | MSB_CAP_FILES_DELETE;
	if (spec && (msb_spec_required_capabilities(spec) & needs_base)) {
		int r = msb_fake__ensure_base(fb->fs, err);
		if (r < 0)
			return r;
	}

	msb_key *k = NULL;
	int r = msb_key_dup(key, &k, err);
	if (r < 0)
		return r;
	msb_key **keys = msb__reallocarray(fb->keys, fb->n_acquired + 1, sizeof(*keys));
	if (keys)
		fb->keys = keys;
	msb_spec **specs = msb__reallocarray(fb->specs, fb->n_acquired + 1, sizeof(*specs));
	if (specs)
		fb->specs = specs;
	if (!keys || !specs) {
		msb_key_free(k);
		return msb__error_nomem(err);
	}

	msb_sandbox *sb = NULL;
	r = msb_fake__sandbox_handle(fb->fs, fb->name, &sb, err);
	if (r < 0) {
		msb_key_free(k);
		return r;
	}
	fb->keys[fb->n_acquired] = k;
	fb->specs[fb->n_acquired] = spec ? msb_spec_ref((msb_spec *)spec) : NULL;
	fb->n_acquired++;
	*out = sb;
	return 0;
}

static int fb_dispose(void *impl, const msb_key *key, const char *kind, const char *instance_id,
		      msb_disposal_failure **failure, msb_error **err)
{
	msb_fake_backend *fb = impl;
	_cleanup_fb_unlock_ msb_fake_backend *l = fb_locked(fb);
	struct disposal d = {0};
	if (key) {
		int r = msb_key_dup(key, &d.key, err);
		if (r < 0)
			return r;
	}
	d.kind = msb__strdup(kind);
	d.instance_id = msb__strdup(instance_id);
	struct disposal *v = msb__reallocarray(fb->disposed, fb->n_disposed + 1, sizeof(*v));
	if (!v || (kind && !d.kind) || (instance_id && !d.instance_id)) {
		if (v)
			fb->disposed = v;
		msb_key_free(d.key);
		free(d.kind);
		free(d.instance_id);
		return msb__error_nomem(err);
	}
	fb->disposed = v;
	fb->disposed[fb->n_disposed++] = d;

	if (fb->dispose_raise_code)
		return msb_error_set(err, as_code(fb->dispose_raise_code),
				     "%s: scripted dispose failure", fb->name);
	if (failure)
		*failure = NULL;
	if (fb->dispose_failure_code < 0)
		return 0;
	msb_disposal_failure *f = NULL;
	int r = msb_disposal_failure_new((msb_disposal_code)fb->dispose_failure_code,
					 fb->dispose_detail, &f, err);
	if (r < 0)
		return r;
	if (failure)
		*failure = f;
	else
		msb_disposal_failure_free(f);
	return 0;
}

static int fb_dispose_scope(void *impl, const char *scope, const char *thread_id,
			    msb_scope_purge *out, msb_error **err)
{
	msb_fake_backend *fb = impl;
	_cleanup_fb_unlock_ msb_fake_backend *l = fb_locked(fb);
	struct purge p = {msb__strdup(scope), msb__strdup(thread_id)};
	struct purge *v = msb__reallocarray(fb->purged, fb->n_purged + 1, sizeof(*v));
	if (!v || (scope && !p.scope) || (thread_id && !p.thread_id)) {
		if (v)
			fb->purged = v;
		free(p.scope);
		free(p.thread_id);
		return msb__error_nomem(err);
	}
	fb->purged = v;
	fb->purged[fb->n_purged++] = p;
	*out = (msb_scope_purge){.disposed = fb->purge_count, .undisposed = 0};
	return 0;
}

static void fb_set_egress_reporter(void *impl, const msb_egress_reporter *reporter)
{
	msb_fake_backend *fb = impl;
	_cleanup_fb_unlock_ msb_fake_backend *l = fb_locked(fb);
	static const msb_egress_reporter none = {NULL, NULL};
	fb->reporter = reporter ? *reporter : none;
}

static void fb_free(void *impl)
{
	msb_fake_backend *fb = impl;
	if (!fb)
		return;
	for (size_t i = 0; i < fb->n_acquired; i++) {
		msb_key_free(fb->keys[i]);
		msb_spec_unref(fb->specs[i]);
	}
	free(fb->keys);
	free(fb->specs);
	for (size_t i = 0; i < fb->n_disposed; i++) {
		msb_key_free(fb->disposed[i].key);
		free(fb->disposed[i].kind);
		free(fb->disposed[i].instance_id);
	}
	free(fb->disposed);
	for (size_t i = 0; i < fb->n_purged; i++) {
		free(fb->purged[i].scope);
		free(fb->purged[i].thread_id);
	}
	free(fb->purged);
	free(fb->dispose_detail);
	free(fb->acquire_error_message);
	free(fb->name);
	msb_fake_sandbox_unref(fb->fs);
	pthread_mutex_destroy(&fb->lock);
	free(fb);
}

static const msb_backend_ops fake_backend_ops = {
	.version = MSB_BACKEND_OPS_VERSION,
	.acquire = fb_acquire,
	.dispose = fb_dispose,
	.dispose_scope = fb_dispose_scope,
	.set_egress_reporter = fb_set_egress_reporter,
	.free = fb_free,
};

/* ---- construction ---------------------------------------------------------- */

int msb_fake_backend_new(const msb_fake_backend_options *opts, msb_backend **backend,
			 msb_fake_backend **fake, msb_error **err)
{
	static const msb_fake_backend_options defaults = MSB_FAKE_BACKEND_OPTIONS_INIT;
	if (!backend)
		return msb_error_set(err, MSB_E_VALUE, "output pointer is NULL");
	if (!opts)
		opts = &defaults;
	if (opts->version != MSB_FAKE_BACKEND_OPTIONS_VERSION)
		return msb_error_set(err, MSB_E_VALUE,
				     "fake backend options version %u is not supported",
				     opts->version);

	msb_fake_backend *fb = calloc(1, sizeof(*fb));
	if (!fb)
		return msb__error_nomem(err);
	pthread_mutex_init(&fb->lock, NULL);
	fb->purge_count = 1;
	fb->dispose_failure_code = -1;
	fb->acquire_error = opts->acquire_error;
	fb->name = strdup(opts->name ? opts->name : "in-process");
	fb->acquire_error_message = msb__strdup(opts->acquire_error_message);
	if (!fb->name || (opts->acquire_error_message && !fb->acquire_error_message)) {
		fb_free(fb);
		return msb__error_nomem(err);
	}
	if (opts->sandbox) {
		fb->fs = msb_fake_sandbox_ref(opts->sandbox);
	} else {
		int r = msb_fake_sandbox_new(NULL, &fb->fs, err);
		if (r < 0) {
			fb_free(fb);
			return r;
		}
	}

	const msb_backend_info info = {
		.version = MSB_BACKEND_INFO_VERSION,
		.name = fb->name,
		.isolation = opts->isolation ? opts->isolation : "none",
		.declarations =
			opts->declarations ? opts->declarations : &MSB_FAKE_BACKEND_DECLARATIONS,
	};
	msb_backend *b = NULL;
	int r = msb_backend_new(&fake_backend_ops, &info, fb, &b, err); /* owns fb now */
	if (r < 0)
		return r;
	*backend = b;
	if (fake)
		*fake = fb;
	return 0;
}

/* ---- records --------------------------------------------------------------- */

msb_fake_sandbox *msb_fake_backend_sandbox(msb_fake_backend *fb)
{
	return fb ? fb->fs : NULL;
}

size_t msb_fake_backend_key_count(msb_fake_backend *fb)
{
	if (!fb)
		return 0;
	_cleanup_fb_unlock_ msb_fake_backend *l = fb_locked(fb);
	return fb->n_acquired;
}

const msb_key *msb_fake_backend_key(msb_fake_backend *fb, size_t i)
{
	if (!fb)
		return NULL;
	_cleanup_fb_unlock_ msb_fake_backend *l = fb_locked(fb);
	return i < fb->n_acquired ? fb->keys[i] : NULL;
}

const msb_spec *msb_fake_backend_spec(msb_fake_backend *fb, size_t i)
{
	if (!fb)
		return NULL;
	_cleanup_fb_unlock_ msb_fake_backend *l = fb_locked(fb);
	return i < fb->n_acquired ? fb->specs[i] : NULL;
}

size_t msb_fake_backend_disposed_count(msb_fake_backend *fb)
{
	if (!fb)
		return 0;
	_cleanup_fb_unlock_ msb_fake_backend *l = fb_locked(fb);
	return fb->n_disposed;
}

const msb_key *msb_fake_backend_disposed(msb_fake_backend *fb, size_t i, const char **kind,
					 const char **instance_id)
{
	if (!fb)
		return NULL;
	_cleanup_fb_unlock_ msb_fake_backend *l = fb_locked(fb);
	if (i >= fb->n_disposed)
		return NULL;
	if (kind)
		*kind = fb->disposed[i].kind;
	if (instance_id)
		*instance_id = fb->disposed[i].instance_id;
	return fb->disposed[i].key;
}

size_t msb_fake_backend_purged_count(msb_fake_backend *fb)
{
	if (!fb)
		return 0;
	_cleanup_fb_unlock_ msb_fake_backend *l = fb_locked(fb);
	return fb->n_purged;
}

void msb_fake_backend_purged(msb_fake_backend *fb, size_t i, const char **scope,
			     const char **thread_id)
{
	if (!fb)
		return;
	_cleanup_fb_unlock_ msb_fake_backend *l = fb_locked(fb);
	if (i >= fb->n_purged)
		return;
	if (scope)
		*scope = fb->purged[i].scope;
	if (thread_id)
		*thread_id = fb->purged[i].thread_id;
}

void msb_fake_backend_set_purge_count(msb_fake_backend *fb, uint64_t count)
{
	if (!fb)
		return;
	_cleanup_fb_unlock_ msb_fake_backend *l = fb_locked(fb);
	fb->purge_count = count;
}

void msb_fake_backend_set_dispose_result(msb_fake_backend *fb, int failure_code, const char *detail,
					 int raise_code)
{
	if (!fb)
		return;
	_cleanup_fb_unlock_ msb_fake_backend *l = fb_locked(fb);
	char *d = msb__strdup(detail);
	free(fb->dispose_detail);
	fb->dispose_detail = d; /* an allocation failure only loses the detail */
	fb->dispose_failure_code = failure_code < 0 ? -1 : failure_code;
	fb->dispose_raise_code = raise_code;
}

void msb_fake_backend_set_purging(msb_fake_backend *fb, bool purging)
{
	if (!fb)
		return;
	_cleanup_fb_unlock_ msb_fake_backend *l = fb_locked(fb);
	fb->purging = purging;
}
