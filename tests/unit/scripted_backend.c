/* SPDX-License-Identifier: Apache-2.0 */
/* Test helpers for the lifecycle tests: see scripted_backend.h. */
#include "scripted_backend.h"

#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- time ------------------------------------------------------------------------------------ */

double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) != 0)
		;
}

/* ---- scripted backend ---------------------------------------------------------------------- */

struct step {
	enum scripted_action a;
	msb_disposal_code code;
	char detail[128];
};

struct entry {
	char key[160];
	char kind[64];
	char thread[64];
	int gen;
	bool alive;
	int inflight;
};

struct scripted {
	atomic_int refs;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	char name[32];
	struct step queue[32];
	int q_head, q_len;
	struct step dflt;
	int sleep_ms;
	int reclaim_rc, reset_rc;
	bool reclaim_blocks;
	int acquire_code;
	char acquire_msg[128];
	int scope_rc;
	uint64_t scope_count;
	int reclaim_block_from;
	int fail_every;
	void (*hook)(void *ud);
	void *hook_ud;
	bool gate_open;
	int entered;
	int acquires, disposes, reclaims, resets, returned, max_conc;
	struct entry entries[64];
	int n_entries;
	char **log;
};

static void sc_unref(scripted *s)
{
	if (atomic_fetch_sub(&s->refs, 1) != 1)
		return;
	msb_strv_free(s->log);
	pthread_mutex_destroy(&s->lock);
	pthread_cond_destroy(&s->cond);
	free(s);
}

static void keystr(const msb_key *k, char *out, size_t n)
{
	snprintf(out, n, "%s/%s/%s/%s", k->scope, k->thread_id, k->agent_dir,
		 k->call_id ? k->call_id : "-");
}

/* lock held */
static void logf_locked(scripted *s, const char *fmt, ...) MSB_PRINTF(2, 3);
static void logf_locked(scripted *s, const char *fmt, ...)
{
	char buf[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	size_t n = msb_strv_len(s->log);
	char **v = realloc(s->log, (n + 2) * sizeof(char *));
	cr_assert(v);
	v[n] = strdup(buf);
	v[n + 1] = NULL;
	s->log = v;
}

static struct entry *entry_get(scripted *s, const msb_key *key, const char *kind, bool create)
{
	char k[160];
	keystr(key, k, sizeof(k));
	for (int i = 0; i < s->n_entries; i++)
		if (strcmp(s->entries[i].key, k) == 0 && strcmp(s->entries[i].kind, kind) == 0)
			return &s->entries[i];
	if (!create)
		return NULL;
	cr_assert(s->n_entries < 64);
	struct entry *e = &s->entries[s->n_entries++];
	memset(e, 0, sizeof(*e));
	snprintf(e->key, sizeof(e->key), "%s", k);
	snprintf(e->kind, sizeof(e->kind), "%s", kind);
	if (key->call_id)
		snprintf(e->thread, sizeof(e->thread), "%s.%s", key->thread_id, key->call_id);
	else
		snprintf(e->thread, sizeof(e->thread), "%s", key->thread_id);
	return e;
}

static void entry_id(const struct entry *e, char *out, size_t n)
{
	snprintf(out, n, "%s/%s#%d", e->thread, e->kind, e->gen);
}

/* lock held; wait for the gate */
static void gate_wait(scripted *s)
{
	s->entered++;
	pthread_cond_broadcast(&s->cond);
	while (!s->gate_open)
		pthread_cond_wait(&s->cond, &s->lock);
}

/* -- the sandbox -- */

struct sbimpl {
	scripted *s;
	char id[160];
};

static int na(void)
{
	return MSB_E_NOT_IMPLEMENTED;
}
static int x_exec(void *i, const msb_exec_request *q, msb_exec_result *o, msb_error **e)
{
	return na();
}
static int x_run(void *i, const char *c, double t, msb_cancel *k, msb_exec_result *o, msb_error **e)
{
	return na();
}
static int x_write(void *i, const char *p, const uint8_t *d, size_t l, const char *w, msb_error **e)
{
	return na();
}
static int x_stat(void *i, const char *p, const char *w, bool *pr, msb_entry *o, msb_error **e)
{
	return na();
}
static int x_read(void *i, const char *p, const char *w, uint64_t m, uint8_t **d, size_t *l,
		  msb_error **e)
{
	return na();
}
static int x_list(void *i, const char *p, const char *w, msb_entry **o, size_t *n, msb_error **e)
{
	return na();
}
static int x_remove(void *i, const char *p, const char *w, bool r, msb_error **e)
{
	return na();
}
static int x_reclaim(void *impl, const char *d, const char *w, double t, msb_error **e)
{
	struct sbimpl *x = impl;
	scripted *s = x->s;
	pthread_mutex_lock(&s->lock);
	s->reclaims++;
	logf_locked(s, "reclaim %s %s", x->id, d);
	if (s->reclaim_blocks || (s->reclaim_block_from && s->reclaims >= s->reclaim_block_from))
		gate_wait(s);
	int rc = s->reclaim_rc;
	pthread_mutex_unlock(&s->lock);
	if (rc)
		return msb_error_set(e, rc, "rm -rf `%s` failed: directory busy", d);
	return 0;
}
static int x_reset(void *impl, double t, msb_error **e)
{
	struct sbimpl *x = impl;
	scripted *s = x->s;
	pthread_mutex_lock(&s->lock);
	s->resets++;
	logf_locked(s, "reset %s", x->id);
	if (s->reclaim_blocks)
		gate_wait(s);
	int rc = s->reset_rc;
	pthread_mutex_unlock(&s->lock);
	if (rc)
		return msb_error_set(e, rc, "snapshot restore failed");
	return 0;
}
static int x_fingerprint(void *i, bool *sup, msb_fingerprint *o, msb_error **e)
{
	*sup = false;
	return 0;
}
static const char *x_id(void *impl)
{
	return ((struct sbimpl *)impl)->id;
}
static void x_release(void *impl)
{
	struct sbimpl *x = impl;
	sc_unref(x->s);
	free(x);
}

static const msb_sandbox_ops x_ops = {
	.version = MSB_SANDBOX_OPS_VERSION,
	.exec = x_exec,
	.exec_bounded = x_exec,
	.run_code = x_run,
	.write_file = x_write,
	.stat_file = x_stat,
	.read_file = x_read,
	.list_dir = x_list,
	.remove = x_remove,
	.reclaim = x_reclaim,
	.reset = x_reset,
	.fingerprint = x_fingerprint,
	.instance_id = x_id,
	.release = x_release,
};

/* -- the backend -- */

static int b_acquire(void *impl, const msb_key *key, const msb_spec *spec, msb_sandbox **out,
		     msb_error **err)
{
	scripted *s = impl;
	pthread_mutex_lock(&s->lock);
	s->acquires++;
	if (s->acquire_code) {
		int c = s->acquire_code;
		pthread_mutex_unlock(&s->lock);
		return msb_error_set(err, c, "%s", s->acquire_msg);
	}
	struct entry *e = entry_get(s, key, msb_spec_kind(spec), true);
	if (!e->alive) {
		e->gen++;
		e->alive = true;
	}
	struct sbimpl *x = calloc(1, sizeof(*x));
	cr_assert(x);
	x->s = s;
	entry_id(e, x->id, sizeof(x->id));
	logf_locked(s, "acquire %s/%s", e->thread, e->kind);
	atomic_fetch_add(&s->refs, 1);
	pthread_mutex_unlock(&s->lock);
	return msb_sandbox_new(&x_ops, x, s->name, out, err);
}

static void land(scripted *s, const msb_key *key, const char *kind, const char *instance_id)
{
	char k[160];
	keystr(key, k, sizeof(k));
	for (int i = 0; i < s->n_entries; i++) {
		struct entry *e = &s->entries[i];
		if (strcmp(e->key, k) != 0 || (kind && strcmp(e->kind, kind) != 0))
			continue;
		char id[160];
		entry_id(e, id, sizeof(id));
		if (!instance_id || strcmp(id, instance_id) == 0)
			e->alive = false;
	}
}

static int b_dispose(void *impl, const msb_key *key, const char *kind, const char *instance_id,
		     msb_disposal_failure **failure, msb_error **err)
{
	scripted *s = impl;
	pthread_mutex_lock(&s->lock);
	void (*hook)(void *) = s->hook;
	void *hook_ud = s->hook_ud;
	pthread_mutex_unlock(&s->lock);
	if (hook)
		hook(hook_ud);
	pthread_mutex_lock(&s->lock);
	s->disposes++;
	logf_locked(s, "dispose %s/%s/%s", key->thread_id, kind ? kind : "*",
		    instance_id ? instance_id : "*");
	struct step st = s->dflt;
	if (s->fail_every && s->disposes % s->fail_every == 0) {
		st.a = ACT_FAIL;
		st.code = MSB_DISPOSAL_REFUSED;
		snprintf(st.detail, sizeof(st.detail), "scripted failure");
	}
	if (s->q_len > 0) {
		st = s->queue[s->q_head];
		s->q_head = (s->q_head + 1) % 32;
		s->q_len--;
	}
	struct entry *e = kind ? entry_get(s, key, kind, false) : NULL;
	if (e) {
		e->inflight++;
		if (e->inflight > s->max_conc)
			s->max_conc = e->inflight;
	}
	if (st.a == ACT_BLOCK_LAND || st.a == ACT_BLOCK_FAIL)
		gate_wait(s);
	int ms = s->sleep_ms;
	pthread_mutex_unlock(&s->lock);
	if (st.a == ACT_SLEEP_LAND)
		sleep_ms(ms);
	pthread_mutex_lock(&s->lock);
	if (e)
		e->inflight--;
	s->returned++;
	int rc = 0;
	if (failure)
		*failure = NULL;
	switch (st.a) {
	case ACT_LAND:
	case ACT_BLOCK_LAND:
	case ACT_SLEEP_LAND:
		land(s, key, kind, instance_id);
		break;
	case ACT_FAIL:
	case ACT_BLOCK_FAIL:
		rc = msb_disposal_failure_new(st.code, st.detail, failure, err);
		break;
	case ACT_RAISE:
		rc = msb_error_set(err, MSB_E_RUNTIME, "scripted dispose raised");
		break;
	}
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	return rc;
}

static int b_scope(void *impl, const char *scope, const char *thread, msb_scope_purge *out,
		   msb_error **err)
{
	scripted *s = impl;
	pthread_mutex_lock(&s->lock);
	int rc = s->scope_rc;
	out->disposed = s->scope_count;
	out->undisposed = 0;
	pthread_mutex_unlock(&s->lock);
	if (rc)
		return msb_error_set(err, rc, "scripted dispose_scope raised");
	return 0;
}

static void b_reporter(void *impl, const msb_egress_reporter *r)
{
}

static void b_free(void *impl)
{
	sc_unref(impl);
}

static const msb_backend_ops b_ops = {
	.version = MSB_BACKEND_OPS_VERSION,
	.acquire = b_acquire,
	.dispose = b_dispose,
	.dispose_scope = b_scope,
	.set_egress_reporter = b_reporter,
	.free = b_free,
};

void scripted_new(const char *name, msb_capset caps, msb_backend **out, scripted **sc)
{
	scripted *s = calloc(1, sizeof(*s));
	cr_assert(s);
	atomic_init(&s->refs, 1);
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->cond, NULL);
	snprintf(s->name, sizeof(s->name), "%s", name);
	s->dflt.a = ACT_LAND;
	s->log = calloc(1, sizeof(char *));
	msb_declarations d = MSB_DECLARATIONS_INIT;
	d.capabilities = caps;
	d.egress_modes = MSB_EGRESS_CLOSED | MSB_EGRESS_ALLOWLIST;
	d.isolation_scopes = MSB_SCOPE_CONVERSATION | MSB_SCOPE_CALL;
	msb_backend_info info = {MSB_BACKEND_INFO_VERSION, s->name, "none", &d};
	msb_error *e = NULL;
	int rc = msb_backend_new(&b_ops, &info, s, out, &e);
	cr_assert_eq(rc, 0, "%s", e ? msb_error_message(e) : "");
	*sc = s;
}

void scripted_push_dispose(scripted *s, enum scripted_action a, msb_disposal_code code,
			   const char *detail)
{
	pthread_mutex_lock(&s->lock);
	cr_assert(s->q_len < 32);
	struct step *st = &s->queue[(s->q_head + s->q_len++) % 32];
	st->a = a;
	st->code = code;
	snprintf(st->detail, sizeof(st->detail), "%s", detail ? detail : "");
	pthread_mutex_unlock(&s->lock);
}

void scripted_set_dispose_default(scripted *s, enum scripted_action a, msb_disposal_code code,
				  const char *detail)
{
	pthread_mutex_lock(&s->lock);
	s->dflt.a = a;
	s->dflt.code = code;
	snprintf(s->dflt.detail, sizeof(s->dflt.detail), "%s", detail ? detail : "");
	pthread_mutex_unlock(&s->lock);
}

#define SETTER(fn, field, type)                                                                    \
	void fn(scripted *s, type v)                                                               \
	{                                                                                          \
		pthread_mutex_lock(&s->lock);                                                      \
		s->field = v;                                                                      \
		pthread_mutex_unlock(&s->lock);                                                    \
	}
SETTER(scripted_set_sleep_ms, sleep_ms, int)
SETTER(scripted_set_reclaim_rc, reclaim_rc, int)
SETTER(scripted_set_reset_rc, reset_rc, int)
SETTER(scripted_set_reclaim_blocks, reclaim_blocks, bool)

void scripted_set_acquire_error(scripted *s, int code, const char *message)
{
	pthread_mutex_lock(&s->lock);
	s->acquire_code = code;
	snprintf(s->acquire_msg, sizeof(s->acquire_msg), "%s", message ? message : "");
	pthread_mutex_unlock(&s->lock);
}

SETTER(scripted_set_reclaim_block_from, reclaim_block_from, int)
SETTER(scripted_set_fail_every, fail_every, int)

void scripted_set_dispose_hook(scripted *s, void (*fn)(void *ud), void *ud)
{
	pthread_mutex_lock(&s->lock);
	s->hook = fn;
	s->hook_ud = ud;
	pthread_mutex_unlock(&s->lock);
}

void scripted_set_scope(scripted *s, int rc, uint64_t count)
{
	pthread_mutex_lock(&s->lock);
	s->scope_rc = rc;
	s->scope_count = count;
	pthread_mutex_unlock(&s->lock);
}

void scripted_open_gate(scripted *s)
{
	pthread_mutex_lock(&s->lock);
	s->gate_open = true;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
}

bool scripted_wait_blocked(scripted *s, int n)
{
	double until = now_s() + 5;
	pthread_mutex_lock(&s->lock);
	while (s->entered < n && now_s() < until) {
		pthread_mutex_unlock(&s->lock);
		sleep_ms(2);
		pthread_mutex_lock(&s->lock);
	}
	bool ok = s->entered >= n;
	pthread_mutex_unlock(&s->lock);
	return ok;
}

#define COUNTER(fn, field)                                                                         \
	int fn(scripted *s)                                                                        \
	{                                                                                          \
		pthread_mutex_lock(&s->lock);                                                      \
		int v = s->field;                                                                  \
		pthread_mutex_unlock(&s->lock);                                                    \
		return v;                                                                          \
	}
COUNTER(scripted_acquires, acquires)
COUNTER(scripted_disposes, disposes)
COUNTER(scripted_reclaims, reclaims)
COUNTER(scripted_resets, resets)
COUNTER(scripted_disposes_returned, returned)
COUNTER(scripted_max_concurrent_disposes, max_conc)

char **scripted_log(scripted *s)
{
	pthread_mutex_lock(&s->lock);
	size_t n = msb_strv_len(s->log);
	char **v = calloc(n + 1, sizeof(char *));
	for (size_t i = 0; i < n; i++)
		v[i] = strdup(s->log[i]);
	pthread_mutex_unlock(&s->lock);
	return v;
}

int scripted_find(scripted *s, const char *prefix, int from)
{
	char **v = scripted_log(s);
	int at = -1;
	for (int i = from < 0 ? 0 : from; v[i]; i++)
		if (strncmp(v[i], prefix, strlen(prefix)) == 0) {
			at = i;
			break;
		}
	msb_strv_free(v);
	return at;
}

/* ---- recording observer -------------------------------------------------------------------- */

static void cp(char *dst, size_t n, const char *s)
{
	snprintf(dst, n, "%s", s ? s : "");
}

static void seen(recorder *r, const char *s)
{
	if (!s)
		return;
	size_t used = strlen(r->seen);
	snprintf(r->seen + used, sizeof(r->seen) - used, "%s|", s);
}

static void seen_key(recorder *r, const msb_key *k)
{
	if (!k)
		return;
	seen(r, k->scope);
	seen(r, k->thread_id);
	seen(r, k->agent_dir);
	seen(r, k->call_id);
}

static int on_acquired(void *ud, const msb_ev_sandbox_acquired *ev)
{
	recorder *r = ud;
	pthread_mutex_lock(&r->lock);
	if (r->n_acquired < REC_MAX) {
		struct rec_acquired *a = &r->acquired[r->n_acquired];
		cp(a->refusal, sizeof(a->refusal), ev->refusal);
		cp(a->call, sizeof(a->call), ev->call);
		cp(a->thread, sizeof(a->thread), ev->key->thread_id);
		cp(a->key_call, sizeof(a->key_call), ev->key->call_id);
	}
	r->n_acquired++;
	seen(r, ev->refusal);
	seen(r, ev->call);
	seen(r, ev->backend);
	seen(r, ev->instance_id);
	seen_key(r, ev->key);
	pthread_mutex_unlock(&r->lock);
	return 0;
}

static int on_disposed(void *ud, const msb_ev_sandbox_disposed *ev)
{
	recorder *r = ud;
	pthread_mutex_lock(&r->lock);
	if (r->n_disposed < REC_MAX) {
		struct rec_disposed *d = &r->disposed[r->n_disposed];
		cp(d->kind, sizeof(d->kind), ev->kind);
		cp(d->instance, sizeof(d->instance), ev->instance_id);
		cp(d->origin, sizeof(d->origin), ev->origin);
		cp(d->call, sizeof(d->call), ev->call);
		d->disposed = ev->disposed;
		d->n_results = ev->n_results;
		if (ev->n_results > 0) {
			d->failed0 = ev->results[0].failed;
			d->code0 = ev->results[0].code;
		}
	}
	r->n_disposed++;
	seen(r, ev->kind);
	seen(r, ev->origin);
	seen(r, ev->call);
	seen_key(r, ev->key);
	pthread_mutex_unlock(&r->lock);
	return 0;
}

static int on_scope(void *ud, const msb_ev_scope_disposed *ev)
{
	recorder *r = ud;
	pthread_mutex_lock(&r->lock);
	r->n_scope++;
	r->scope_count = ev->disposed;
	pthread_mutex_unlock(&r->lock);
	return 0;
}

static int on_read(void *ud, const msb_ev_store_file_read *ev)
{
	recorder *r = ud;
	pthread_mutex_lock(&r->lock);
	if (r->n_reads < REC_MAX) {
		struct rec_read *x = &r->reads[r->n_reads];
		cp(x->path, sizeof(x->path), ev->path);
		cp(x->outcome, sizeof(x->outcome), ev->outcome);
		cp(x->call, sizeof(x->call), ev->call);
		x->integrity = ev->integrity;
		x->has_key = ev->key != NULL;
	}
	r->n_reads++;
	seen(r, ev->path);
	seen(r, ev->outcome);
	pthread_mutex_unlock(&r->lock);
	return 0;
}

static int on_ended(void *ud, const msb_ev_tool_call_ended *ev)
{
	recorder *r = ud;
	pthread_mutex_lock(&r->lock);
	if (r->n_ended < REC_MAX) {
		struct rec_ended *x = &r->ended[r->n_ended];
		cp(x->call, sizeof(x->call), ev->call);
		cp(x->outcome, sizeof(x->outcome), ev->outcome);
		x->n_keys = ev->n_keys;
		for (size_t i = 0; i < ev->n_keys && i < 8; i++)
			snprintf(x->keys[i], sizeof(x->keys[i]), "%s/%s/%s/%s", ev->keys[i]->scope,
				 ev->keys[i]->thread_id, ev->keys[i]->agent_dir,
				 ev->keys[i]->call_id ? ev->keys[i]->call_id : "-");
		x->fed = ev->fed;
		x->fed_weakest = ev->fed_weakest;
		x->fed_count = ev->fed_count;
	}
	r->n_ended++;
	seen(r, ev->call);
	seen(r, ev->outcome);
	pthread_mutex_unlock(&r->lock);
	return 0;
}

void recorder_init(recorder *r, msb_observer *out)
{
	memset(r, 0, sizeof(*r));
	pthread_mutex_init(&r->lock, NULL);
	msb_observer o = MSB_OBSERVER_INIT;
	o.userdata = r;
	o.sandbox_acquired = on_acquired;
	o.sandbox_disposed = on_disposed;
	o.scope_disposed = on_scope;
	o.store_file_read = on_read;
	o.tool_call_ended = on_ended;
	*out = o;
}

/* ---- log capture --------------------------------------------------------------------------- */

void logcap_init(logcap *l)
{
	memset(l, 0, sizeof(*l));
	pthread_mutex_init(&l->lock, NULL);
}

void logcap_fn(void *ud, msb_log_level level, const char *component, const char *message)
{
	logcap *l = ud;
	pthread_mutex_lock(&l->lock);
	if (level == MSB_LOG_WARNING)
		l->warnings++;
	if (level == MSB_LOG_INFO)
		l->infos++;
	size_t used = strlen(l->text);
	snprintf(l->text + used, sizeof(l->text) - used, "%s\n", message);
	pthread_mutex_unlock(&l->lock);
}

bool logcap_contains(logcap *l, const char *needle)
{
	pthread_mutex_lock(&l->lock);
	bool found = strstr(l->text, needle) != NULL;
	pthread_mutex_unlock(&l->lock);
	return found;
}

/* ---- a caller context ---------------------------------------------------------------------- */

static int tc_scope(void *ud, char **out, msb_error **err)
{
	struct test_ctx *t = ud;
	pthread_mutex_lock(&t->lock);
	*out = strdup(t->scope);
	pthread_mutex_unlock(&t->lock);
	return 0;
}

static int tc_thread(void *ud, char **out, msb_error **err)
{
	struct test_ctx *t = ud;
	pthread_mutex_lock(&t->lock);
	t->reads++;
	*out = t->thread[0] ? strdup(t->thread) : NULL;
	pthread_mutex_unlock(&t->lock);
	return 0;
}

static int tc_list(void *ud, const char *store, char ***out, msb_error **err)
{
	struct test_ctx *t = ud;
	pthread_mutex_lock(&t->lock);
	int rc = t->list_rc;
	pthread_mutex_unlock(&t->lock);
	if (rc)
		return msb_error_set(err, rc, "the store `%s` is offline", store);
	char **v = calloc(9, sizeof(char *));
	for (int i = 0; i < 8 && t->files[i]; i++)
		v[i] = strdup(t->files[i]);
	*out = v;
	return 0;
}

void test_ctx_init(struct test_ctx *t, const char *scope, const char *thread)
{
	memset(t, 0, sizeof(*t));
	pthread_mutex_init(&t->lock, NULL);
	snprintf(t->scope, sizeof(t->scope), "%s", scope);
	snprintf(t->thread, sizeof(t->thread), "%s", thread ? thread : "");
}

void test_ctx_set_thread(struct test_ctx *t, const char *thread)
{
	pthread_mutex_lock(&t->lock);
	snprintf(t->thread, sizeof(t->thread), "%s", thread ? thread : "");
	pthread_mutex_unlock(&t->lock);
}

msb_caller_context test_ctx_context(struct test_ctx *t)
{
	return msb_make_caller_context(tc_list, tc_scope, tc_thread, t);
}

/* ---- helpers ------------------------------------------------------------------------------- */

msb_spec *spec_from(const char *json)
{
	msb_spec *s = NULL;
	msb_error *e = NULL;
	int rc = msb_spec_from_json(json, strlen(json), &s, &e);
	cr_assert_eq(rc, 0, "spec %s: %s", json, e ? msb_error_message(e) : "");
	return s;
}

msb_router *router_over(msb_backend **bs, size_t n, msb_cleanup min_cleanup,
			msb_failed_reclaim_policy policy, const msb_observer *obs, logcap *log)
{
	msb_router_options o = MSB_ROUTER_OPTIONS_INIT;
	o.min_isolation = MSB_ISOLATION_NONE;
	o.min_cleanup = min_cleanup;
	o.reclaim.failed_reclaim_policy = policy;
	o.observer = obs;
	if (log) {
		o.log = logcap_fn;
		o.log_userdata = log;
	}
	msb_router *r = NULL;
	msb_error *e = NULL;
	int rc = msb_router_new(bs, n, &o, &r, &e);
	cr_assert_eq(rc, 0, "router: %s", e ? msb_error_message(e) : "");
	return r;
}
