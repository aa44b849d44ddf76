/* SPDX-License-Identifier: Apache-2.0 */
/*
 * msb/key.h - SandboxKey and CallerContext (checklist section 2).
 *
 * A key addresses a conversation's sandbox: (scope, thread_id, agent_dir) and,
 * at IsolationScope.CALL, the host-minted call_id. Keys come from the host's
 * request context, never from the model: build them with
 * msb_caller_context_key(), which reads the context's callables at call time.
 */
#ifndef MSB_KEY_H
#define MSB_KEY_H

#include <msb/common.h>
#include <msb/error.h>

MSB_BEGIN_DECLS

/*
 * A key is a plain value. The strings are borrowed: whoever builds a key on
 * the stack owns them. scope, thread_id and agent_dir must be non-NULL;
 * call_id is NULL when absent.
 */
typedef struct msb_key {
	const char *scope;
	const char *thread_id;
	const char *agent_dir;
	const char *call_id;
} msb_key;

/* Equality over every field (NULL call_id equals only NULL). */
MSB_EXTERN bool msb_key_equal(const msb_key *a, const msb_key *b);
/* A hash over every field, consistent with msb_key_equal. */
MSB_EXTERN uint64_t msb_key_hash(const msb_key *key);
/* MSB_E_VALUE when a required field is NULL. */
MSB_EXTERN int msb_key_validate(const msb_key *key, msb_error **err);

/* An owned copy: all strings duplicated. Free with msb_key_free(). */
MSB_EXTERN int msb_key_dup(const msb_key *key, msb_key **out, msb_error **err);
MSB_EXTERN void msb_key_free(msb_key *key);

/*
 * CallerContext: three callables read each time a key is needed (2.3, 2.4).
 *
 * current_scope:     writes a newly allocated scope string to *out.
 * current_thread_id: writes a newly allocated thread id, or NULL for "no
 *                    active thread" (then no key is made, 2.5).
 * list_files:        enumerates `store` into a newly allocated msb_strv.
 * Each returns 0 or a negative code with *err set.
 */
typedef struct msb_caller_context {
	unsigned version;
	int (*list_files)(void *userdata, const char *store, char ***out, msb_error **err);
	int (*current_scope)(void *userdata, char **out, msb_error **err);
	int (*current_thread_id)(void *userdata, char **out, msb_error **err);
	void *userdata;
} msb_caller_context;
#define MSB_CALLER_CONTEXT_VERSION 1
#define MSB_CALLER_CONTEXT_INIT                                                                    \
	{                                                                                          \
		MSB_CALLER_CONTEXT_VERSION, NULL, NULL, NULL, NULL                                 \
	}

/* make_caller_context(list_files, scope, thread): argument order as the seed. */
MSB_EXTERN msb_caller_context
msb_make_caller_context(int (*list_files)(void *, const char *, char ***, msb_error **),
			int (*current_scope)(void *, char **, msb_error **),
			int (*current_thread_id)(void *, char **, msb_error **), void *userdata);

/*
 * Build a key from the context at this moment. agent_dir is fixed by the
 * caller (the tool factory argument, 2.6); call_id may be NULL. When the
 * context reports no thread, fails with MSB_E_LOOKUP and the message
 * "no active thread context" (2.5). The result is owned: msb_key_free().
 */
MSB_EXTERN int msb_caller_context_key(const msb_caller_context *ctx, const char *agent_dir,
				      const char *call_id, msb_key **out, msb_error **err);

MSB_END_DECLS

#endif
