/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Test helpers for the lifecycle tests (test_lifecycle.c, test_admission.c,
 * test_session.c, test_infoflow.c):
 *
 *   - a scripted backend: a real msb_backend whose disposals, reclaims and
 *     resets answer from a script (land, report a failure, raise, block
 *     until a gate opens), which names each instance by key, kind and a
 *     generation that moves on when the instance is disposed, and which logs
 *     every call in order;
 *   - an observer that records every event it is handed;
 *   - a log callback that counts warnings.
 */
#ifndef MSB_TESTS_SCRIPTED_BACKEND_H
#define MSB_TESTS_SCRIPTED_BACKEND_H

#include <pthread.h>

#include <msb/msb.h>
#include <msb/session.h>
#include <msb/testing.h>

/* ---- scripted backend ---------------------------------------------------------------------- */

enum scripted_action {
	ACT_LAND = 0,	/* report nothing: landed */
	ACT_FAIL,	/* report a DisposalFailure (code, detail) */
	ACT_RAISE,	/* return an error */
	ACT_BLOCK_LAND, /* wait for the gate, then land */
	ACT_BLOCK_FAIL, /* wait for the gate, then fail */
	ACT_SLEEP_LAND, /* sleep `sleep_ms`, then land */
};

typedef struct scripted scripted;

/* A backend named `name` declaring isolation none, egress {closed,
 * allowlist}, the given capabilities and scopes {conversation, call}.
 * *sc is a borrowed view valid while *out lives. */
void scripted_new(const char *name, msb_capset caps, msb_backend **out, scripted **sc);

/* Dispose: a queue of actions taken in order; when empty, the default. */
void scripted_push_dispose(scripted *s, enum scripted_action a, msb_disposal_code code,
			   const char *detail);
void scripted_set_dispose_default(scripted *s, enum scripted_action a, msb_disposal_code code,
				  const char *detail);
void scripted_set_sleep_ms(scripted *s, int ms);
/* Reclaim and reset: 0 = succeed; otherwise fail with this code. */
void scripted_set_reclaim_rc(scripted *s, int rc);
void scripted_set_reset_rc(scripted *s, int rc);
/* Reclaim and reset block on the gate (ignoring their timeout) when set. */
void scripted_set_reclaim_blocks(scripted *s, bool on);
void scripted_set_acquire_error(scripted *s, int code, const char *message);
/* Reclaims numbered `n` and later (1-based) block on the gate; 0 = none. */
void scripted_set_reclaim_block_from(scripted *s, int n);
/* Every n-th disposal reports a `refused` failure (0 = never). */
void scripted_set_fail_every(scripted *s, int n);
/* Called (without the backend's lock) as each disposal starts. */
void scripted_set_dispose_hook(scripted *s, void (*fn)(void *ud), void *ud);
/* dispose_scope: fail with `rc` (non-zero), else answer `count`. */
void scripted_set_scope(scripted *s, int rc, uint64_t count);

/* The gate blocked actions wait on. */
void scripted_open_gate(scripted *s);
/* Wait until `n` calls have entered the gate in total (max 5 s). */
bool scripted_wait_blocked(scripted *s, int n);

/* Counters. */
int scripted_acquires(scripted *s);
int scripted_disposes(scripted *s);
int scripted_reclaims(scripted *s);
int scripted_resets(scripted *s);
/* Disposals that returned (landed or not), blocked ones included once they return. */
int scripted_disposes_returned(scripted *s);
/* Most disposals of one instance running at once (a double cleanup shows). */
int scripted_max_concurrent_disposes(scripted *s);

/* The ordered log: "acquire T/K", "reclaim ID DIR", "reset ID", "dispose T/K/ID".
 * A copy (msb_strv_free). */
char **scripted_log(scripted *s);
/* Index of the first entry starting with `prefix` at or after `from`; -1 if none. */
int scripted_find(scripted *s, const char *prefix, int from);

/* ---- recording observer -------------------------------------------------------------------- */

#define REC_MAX 64

struct rec_disposed {
	char kind[64];
	char instance[64];
	char origin[16];
	char call[32];
	bool disposed;
	size_t n_results;
	bool failed0;
	msb_disposal_code code0;
};

struct rec_ended {
	char call[32];
	size_t n_keys;
	char keys[8][96]; /* "scope/thread/agent/call" */
	char outcome[48];
	bool fed;
	msb_integrity fed_weakest;
	size_t fed_count;
};

struct rec_read {
	char path[64];
	char outcome[16];
	msb_integrity integrity;
	char call[32];
	bool has_key;
};

struct rec_acquired {
	char refusal[64];
	char call[32];
	char thread[32];
	char key_call[32];
};

typedef struct recorder {
	pthread_mutex_t lock;
	int n_acquired, n_disposed, n_scope, n_ended, n_reads;
	struct rec_acquired acquired[REC_MAX];
	struct rec_disposed disposed[REC_MAX];
	struct rec_ended ended[REC_MAX];
	struct rec_read reads[REC_MAX];
	uint64_t scope_count;
	char seen[4096]; /* every string field of every event, for "never appears" checks */
} recorder;

void recorder_init(recorder *r, msb_observer *out);

/* ---- log capture --------------------------------------------------------------------------- */

typedef struct logcap {
	pthread_mutex_t lock;
	int warnings;
	int infos;
	char text[8192];
} logcap;
void logcap_init(logcap *l);
void logcap_fn(void *ud, msb_log_level level, const char *component, const char *message);
bool logcap_contains(logcap *l, const char *needle);

/* ---- a caller context ---------------------------------------------------------------------- */

struct test_ctx {
	pthread_mutex_t lock;
	char scope[32];
	char thread[32]; /* "" = no active thread */
	int list_rc;	 /* non-zero: list_files fails with it */
	const char *files[8];
	int reads; /* how often the thread was read */
};
void test_ctx_init(struct test_ctx *t, const char *scope, const char *thread);
void test_ctx_set_thread(struct test_ctx *t, const char *thread);
msb_caller_context test_ctx_context(struct test_ctx *t);

/* ---- small helpers ------------------------------------------------------------------------- */

double now_s(void);
void sleep_ms(int ms);
/* A spec from JSON (asserts it builds). */
msb_spec *spec_from(const char *json);
/* A router over the backends with the fake's floor and the given options. */
msb_router *router_over(msb_backend **bs, size_t n, msb_cleanup min_cleanup,
			msb_failed_reclaim_policy policy, const msb_observer *obs, logcap *log);

#endif
