/* SPDX-License-Identifier: Apache-2.0 */
/*
 * SandboxKey and CallerContext (checklist section 2). An owned key is one
 * allocation: the struct followed by its strings, so msb_key_free() is a
 * single free().
 */
#include <msb/key.h>

#include "util/util.h"

static bool key_str_eq(const char *a, const char *b)
{
	return msb__streq_null(a, b);
}

bool msb_key_equal(const msb_key *a, const msb_key *b)
{
	if (a == b)
		return true;
	if (!a || !b)
		return false;
	return key_str_eq(a->scope, b->scope) && key_str_eq(a->thread_id, b->thread_id) &&
	       key_str_eq(a->agent_dir, b->agent_dir) && key_str_eq(a->call_id, b->call_id);
}

/* FNV-1a, 64 bit. Each field is preceded by a presence byte and followed by
 * its terminating NUL, so ("ab","c") and ("a","bc") hash apart and a NULL
 * field differs from an empty one. */
static uint64_t fnv_field(uint64_t h, const char *s)
{
	const uint64_t prime = 0x100000001b3ull;
	h = (h ^ (s ? 1u : 0u)) * prime;
	if (!s)
		return h;
	for (const unsigned char *p = (const unsigned char *)s;; p++) {
		h = (h ^ *p) * prime;
		if (!*p)
			break;
	}
	return h;
}

uint64_t msb_key_hash(const msb_key *key)
{
	uint64_t h = 0xcbf29ce484222325ull;
	if (!key)
		return h;
	h = fnv_field(h, key->scope);
	h = fnv_field(h, key->thread_id);
	h = fnv_field(h, key->agent_dir);
	h = fnv_field(h, key->call_id);
	return h;
}

int msb_key_validate(const msb_key *key, msb_error **err)
{
	if (!key)
		return msb_error_set(err, MSB_E_VALUE, "no sandbox key given");
	if (!key->scope)
		return msb_error_set(err, MSB_E_VALUE, "a sandbox key needs a scope");
	if (!key->thread_id)
		return msb_error_set(err, MSB_E_VALUE, "a sandbox key needs a thread_id");
	if (!key->agent_dir)
		return msb_error_set(err, MSB_E_VALUE, "a sandbox key needs an agent_dir");
	return 0;
}

/* One block: struct, then each string with its NUL. */
static int key_alloc(const char *scope, const char *thread_id, const char *agent_dir,
		     const char *call_id, msb_key **out, msb_error **err)
{
	const char *fields[4] = {scope, thread_id, agent_dir, call_id};
	size_t lens[4] = {0};
	size_t total = sizeof(msb_key);
	for (size_t i = 0; i < 4; i++) {
		if (!fields[i])
			continue;
		lens[i] = strlen(fields[i]) + 1;
		if (msb__add_overflow(total, lens[i], &total))
			return msb__error_nomem(err);
	}
	msb_key *k = malloc(total);
	if (!k)
		return msb__error_nomem(err);
	char *p = (char *)(k + 1);
	const char *copies[4] = {NULL, NULL, NULL, NULL};
	for (size_t i = 0; i < 4; i++) {
		if (!fields[i])
			continue;
		memcpy(p, fields[i], lens[i]);
		copies[i] = p;
		p += lens[i];
	}
	k->scope = copies[0];
	k->thread_id = copies[1];
	k->agent_dir = copies[2];
	k->call_id = copies[3];
	*out = k;
	return 0;
}

int msb_key_dup(const msb_key *key, msb_key **out, msb_error **err)
{
	int r = msb_key_validate(key, err);
	if (r < 0)
		return r;
	return key_alloc(key->scope, key->thread_id, key->agent_dir, key->call_id, out, err);
}

void msb_key_free(msb_key *key)
{
	free(key);
}

msb_caller_context
msb_make_caller_context(int (*list_files)(void *, const char *, char ***, msb_error **),
			int (*current_scope)(void *, char **, msb_error **),
			int (*current_thread_id)(void *, char **, msb_error **), void *userdata)
{
	msb_caller_context ctx = MSB_CALLER_CONTEXT_INIT;
	ctx.list_files = list_files;
	ctx.current_scope = current_scope;
	ctx.current_thread_id = current_thread_id;
	ctx.userdata = userdata;
	return ctx;
}

/* Call one of the context's getters; a failure that set no error still
 * becomes one, wrapped with what was being read. */
static int read_getter(int (*fn)(void *, char **, msb_error **), void *ud, const char *what,
		       char **out, msb_error **err)
{
	_cleanup_error_ msb_error *e = NULL;
	char *v = NULL;
	int r = fn(ud, &v, &e);
	if (r < 0) {
		free(v);
		if (!e)
			msb_error_set(&e, r, "the caller context failed without saying why");
		msb_error_wrap(&e, "could not read the current %s", what);
		return msb__error_propagate(err, TAKE_PTR(e));
	}
	*out = v;
	return 0;
}

int msb_caller_context_key(const msb_caller_context *ctx, const char *agent_dir,
			   const char *call_id, msb_key **out, msb_error **err)
{
	if (!ctx)
		return msb_error_set(err, MSB_E_VALUE, "no caller context given");
	if (ctx->version != MSB_CALLER_CONTEXT_VERSION)
		return msb_error_set(err, MSB_E_VALUE, "caller context version %u is not supported",
				     ctx->version);
	if (!ctx->current_scope || !ctx->current_thread_id)
		return msb_error_set(err, MSB_E_VALUE,
				     "a caller context needs current_scope and current_thread_id");
	if (!agent_dir)
		return msb_error_set(err, MSB_E_VALUE, "a sandbox key needs an agent_dir");

	/* Read now, every time a key is needed: never captured earlier (2.4). */
	_cleanup_free_ char *thread = NULL;
	int r = read_getter(ctx->current_thread_id, ctx->userdata, "thread", &thread, err);
	if (r < 0)
		return r;
	if (!thread)
		return msb_error_set(err, MSB_E_LOOKUP,
				     "no active thread context: a sandbox key needs the "
				     "conversation's thread");

	_cleanup_free_ char *scope = NULL;
	r = read_getter(ctx->current_scope, ctx->userdata, "scope", &scope, err);
	if (r < 0)
		return r;
	if (!scope)
		return msb_error_set(err, MSB_E_VALUE, "the caller context reported no scope");

	return key_alloc(scope, thread, agent_dir, call_id, out, err);
}
