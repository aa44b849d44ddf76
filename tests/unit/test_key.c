/* SPDX-License-Identifier: Apache-2.0 */
/* SandboxKey and CallerContext (checklist 2.1-2.6). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <msb/key.h>

#include "helpers.h"

/* 2.1: equality and hash over every field; call_id absent by default. */
Test(key, equality_and_hash_2_1)
{
	msb_key a = {"t", "c", "a", NULL};
	char s[] = "t", t[] = "c", d[] = "a";
	msb_key a2 = {s, t, d, NULL}; /* same text, other storage */
	msb_key b = {"t", "c", "b", NULL};
	msb_key c = {"t", "c", "a", "call-1"};
	msb_key c2 = {"t", "c", "a", "call-1"};
	msb_key swapped = {"c", "t", "a", NULL};

	cr_assert(msb_key_equal(&a, &a2));
	cr_assert_eq(msb_key_hash(&a), msb_key_hash(&a2));
	cr_assert_not(msb_key_equal(&a, &b));
	cr_assert_neq(msb_key_hash(&a), msb_key_hash(&b));
	cr_assert_not(msb_key_equal(&a, &c), "a NULL call_id equals only NULL");
	cr_assert_neq(msb_key_hash(&a), msb_key_hash(&c));
	cr_assert(msb_key_equal(&c, &c2));
	cr_assert_eq(msb_key_hash(&c), msb_key_hash(&c2));
	cr_assert_not(msb_key_equal(&a, &swapped));
	cr_assert_neq(msb_key_hash(&a), msb_key_hash(&swapped));
	/* Field boundaries count: ("ab","c") is not ("a","bc"). */
	msb_key x = {"ab", "c", "d", NULL}, y = {"a", "bc", "d", NULL};
	cr_assert_neq(msb_key_hash(&x), msb_key_hash(&y));
	/* Empty call id is present, not absent. */
	msb_key empty = {"t", "c", "a", ""};
	cr_assert_not(msb_key_equal(&a, &empty));
	cr_assert_neq(msb_key_hash(&a), msb_key_hash(&empty));
}

/* 2.1: usable as a hash-map key: distinct keys spread over buckets. */
Test(key, usable_as_hash_map_key_2_1)
{
	enum { N = 256, BUCKETS = 64 };
	int used[BUCKETS] = {0};
	char buf[N][16];
	for (int i = 0; i < N; i++) {
		snprintf(buf[i], sizeof(buf[i]), "thread-%d", i);
		msb_key k = {"scope", buf[i], "devops", NULL};
		used[msb_key_hash(&k) % BUCKETS]++;
	}
	int empty = 0;
	for (int i = 0; i < BUCKETS; i++)
		empty += used[i] == 0;
	cr_assert_lt(empty, BUCKETS / 4, "%d of %d buckets empty", empty, BUCKETS);
}

Test(key, validate_and_dup_2_1)
{
	msb_key ok = {"t", "c", "a", "id"};
	cr_assert_eq(msb_key_validate(&ok, NULL), 0);
	msb_key no_scope = {NULL, "c", "a", NULL};
	assert_refused(msb_key_validate(&no_scope, &e_), MSB_E_VALUE, "needs a scope");
	msb_key no_thread = {"t", NULL, "a", NULL};
	assert_refused(msb_key_validate(&no_thread, &e_), MSB_E_VALUE, "needs a thread_id");
	msb_key no_agent = {"t", "c", NULL, NULL};
	assert_refused(msb_key_validate(&no_agent, &e_), MSB_E_VALUE, "needs an agent_dir");
	msb_key *out = NULL;
	assert_refused(msb_key_dup(&no_agent, &out, &e_), MSB_E_VALUE, "needs an agent_dir");
	cr_assert_null(out);

	cr_assert_eq(msb_key_dup(&ok, &out, NULL), 0);
	cr_assert(msb_key_equal(out, &ok));
	cr_assert_neq(out->scope, ok.scope, "strings are copied");
	cr_assert_str_eq(out->call_id, "id");
	msb_key_free(out);

	msb_key no_call = {"t", "c", "a", NULL};
	cr_assert_eq(msb_key_dup(&no_call, &out, NULL), 0);
	cr_assert_null(out->call_id);
	msb_key_free(out);
	msb_key_free(NULL);
}

/* A host's request context: what the callables read at this moment. */
struct host {
	const char *scope;
	const char *thread; /* NULL: no active thread */
	int scope_reads;
	int thread_reads;
	bool fail_scope;
};

static int get_scope(void *ud, char **out, msb_error **err)
{
	struct host *h = ud;
	h->scope_reads++;
	if (h->fail_scope)
		return msb_error_set(err, MSB_E_RUNTIME, "tenant store offline");
	*out = strdup(h->scope);
	return 0;
}

static int get_thread(void *ud, char **out, msb_error **err)
{
	struct host *h = ud;
	h->thread_reads++;
	*out = h->thread ? strdup(h->thread) : NULL;
	return 0;
}

static int list_files(void *ud, const char *store, char ***out, msb_error **err)
{
	*out = calloc(1, sizeof(char *));
	return 0;
}

/* 2.3: the context's fields are the callables, argument order
 * (list_files, scope, thread). */
Test(key, make_caller_context_2_3)
{
	struct host h = {0};
	msb_caller_context ctx = msb_make_caller_context(list_files, get_scope, get_thread, &h);
	cr_assert_eq(ctx.version, MSB_CALLER_CONTEXT_VERSION);
	cr_assert_eq(ctx.list_files, list_files);
	cr_assert_eq(ctx.current_scope, get_scope);
	cr_assert_eq(ctx.current_thread_id, get_thread);
	cr_assert_eq(ctx.userdata, &h);
}

/* 2.4: scope and thread are read each time a key is made, never captured. */
Test(key, read_at_call_time_2_4)
{
	struct host h = {.scope = "tenant-1", .thread = "t1"};
	msb_caller_context ctx = msb_make_caller_context(list_files, get_scope, get_thread, &h);
	msb_key *k = NULL;
	cr_assert_eq(msb_caller_context_key(&ctx, "devops", NULL, &k, NULL), 0);
	cr_assert_str_eq(k->thread_id, "t1");
	cr_assert_str_eq(k->scope, "tenant-1");
	cr_assert_null(k->call_id);
	msb_key_free(k);

	h.thread = "t2";
	h.scope = "tenant-2";
	cr_assert_eq(msb_caller_context_key(&ctx, "devops", "call-9", &k, NULL), 0);
	cr_assert_str_eq(k->thread_id, "t2");
	cr_assert_str_eq(k->scope, "tenant-2");
	cr_assert_str_eq(k->call_id, "call-9");
	msb_key_free(k);
	cr_assert_eq(h.thread_reads, 2);
	cr_assert_eq(h.scope_reads, 2);
}

/* 2.5: no thread -> LookupError "no active thread context", no key. */
Test(key, no_thread_is_a_refusal_2_5)
{
	struct host h = {.scope = "tenant-1", .thread = NULL};
	msb_caller_context ctx = msb_make_caller_context(list_files, get_scope, get_thread, &h);
	msb_key *k = NULL;
	assert_refused(msb_caller_context_key(&ctx, "devops", NULL, &k, &e_), MSB_E_LOOKUP,
		       "no active thread context");
	cr_assert_null(k);
	msb_error *e = NULL;
	msb_caller_context_key(&ctx, "devops", NULL, &k, &e);
	cr_assert_str_eq(msb_error_name(e), "LookupError");
	cr_assert_eq(strncmp(msb_error_message(e), "no active thread context", 24), 0);
	msb_error_free(e);
}

/* A getter's own failure propagates with its code, wrapped with what was read. */
Test(key, getter_failure_propagates_2_5)
{
	struct host h = {.scope = "s", .thread = "t", .fail_scope = true};
	msb_caller_context ctx = msb_make_caller_context(list_files, get_scope, get_thread, &h);
	msb_key *k = NULL;
	assert_refused(msb_caller_context_key(&ctx, "devops", NULL, &k, &e_), MSB_E_RUNTIME,
		       "could not read the current scope: tenant store offline");
	cr_assert_null(k);
}

Test(key, context_misuse_refused_2_3)
{
	msb_key *k = NULL;
	assert_refused(msb_caller_context_key(NULL, "a", NULL, &k, &e_), MSB_E_VALUE,
		       "no caller context");
	msb_caller_context ctx = MSB_CALLER_CONTEXT_INIT;
	assert_refused(msb_caller_context_key(&ctx, "a", NULL, &k, &e_), MSB_E_VALUE,
		       "needs current_scope and current_thread_id");
	struct host h = {.scope = "s", .thread = "t"};
	ctx = msb_make_caller_context(list_files, get_scope, get_thread, &h);
	ctx.version = 99;
	assert_refused(msb_caller_context_key(&ctx, "a", NULL, &k, &e_), MSB_E_VALUE, "version 99");
	ctx.version = MSB_CALLER_CONTEXT_VERSION;
	assert_refused(msb_caller_context_key(&ctx, NULL, NULL, &k, &e_), MSB_E_VALUE,
		       "needs an agent_dir");
	cr_assert_null(k);
}

/* 2.6: agent_dir comes from the caller (the tool factory), never the context. */
Test(key, agent_dir_fixed_by_factory_2_6)
{
	struct host h = {.scope = "s", .thread = "t"};
	msb_caller_context ctx = msb_make_caller_context(list_files, get_scope, get_thread, &h);
	for (int i = 0; i < 3; i++) {
		msb_key *k = NULL;
		h.thread = i % 2 ? "t-odd" : "t-even";
		cr_assert_eq(msb_caller_context_key(&ctx, "devops", NULL, &k, NULL), 0);
		cr_assert_str_eq(k->agent_dir, "devops");
		msb_key_free(k);
	}
}

/* 2.2: the key carries only what the host context and factory supplied: the
 * struct has exactly scope, thread_id, agent_dir and call_id (no field a
 * tool argument could fill). */
Test(key, key_from_host_only_2_2)
{
	cr_assert_eq(sizeof(msb_key), 4 * sizeof(const char *));
	struct host h = {.scope = "from-host", .thread = "thread-from-host"};
	msb_caller_context ctx = msb_make_caller_context(list_files, get_scope, get_thread, &h);
	msb_key *k = NULL;
	cr_assert_eq(msb_caller_context_key(&ctx, "agent", NULL, &k, NULL), 0);
	msb_key want = {"from-host", "thread-from-host", "agent", NULL};
	cr_assert(msb_key_equal(k, &want));
	msb_key_free(k);
}
