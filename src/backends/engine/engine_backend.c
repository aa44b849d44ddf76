/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The engine backends' lifecycle (checklist 21.13-21.20, 21.30-21.32):
 * get-or-create by a name derived from the key, adoption of a container
 * another process made under that name, and disposal selected by the labels
 * the engine reports, removing with force and never stopping.
 */
#include <stdio.h>

#include "backends/types.h"
#include "engine.h"
#include "platform/platform.h"
#include "util/sha256.h"

/* A name this instance created, and the key it was created for. */
struct engine_made {
	char *name;
	char *scope, *thread_id, *agent_dir, *kind;
};

static void made_clear(struct engine_made *m)
{
	free(m->name);
	free(m->scope);
	free(m->thread_id);
	free(m->agent_dir);
	free(m->kind);
}

/* ---- per-name serialisation (21.18) -------------------------------------------- */

static void name_lock(engine_backend *b, const char *name)
{
	pthread_mutex_lock(&b->lock);
	while (msb__strv_contains(b->busy, name))
		pthread_cond_wait(&b->cond, &b->lock);
	/* Out of memory here only costs the serialisation; the engine's name
	 * conflict still gives one container (the adopt path). */
	(void)msb__strv_push(&b->busy, name);
	pthread_mutex_unlock(&b->lock);
}

static void name_unlock(engine_backend *b, const char *name)
{
	pthread_mutex_lock(&b->lock);
	size_t n = msb_strv_len(b->busy);
	for (size_t i = 0; i < n; i++)
		if (strcmp(b->busy[i], name) == 0) {
			free(b->busy[i]);
			b->busy[i] = b->busy[n - 1];
			b->busy[n - 1] = NULL;
			break;
		}
	pthread_cond_broadcast(&b->cond);
	pthread_mutex_unlock(&b->lock);
}

static void remember(engine_backend *b, const char *name, const msb_key *key, const char *kind)
{
	pthread_mutex_lock(&b->lock);
	for (size_t i = 0; i < b->n_made; i++)
		if (strcmp(b->made[i].name, name) == 0) {
			pthread_mutex_unlock(&b->lock);
			return;
		}
	struct engine_made *v = msb__reallocarray(b->made, b->n_made + 1, sizeof(*v));
	if (v) {
		b->made = v;
		struct engine_made *m = &v[b->n_made];
		*m = (struct engine_made){
			.name = msb__strdup(name),
			.scope = msb__strdup(key->scope),
			.thread_id = msb__strdup(key->thread_id),
			.agent_dir = msb__strdup(key->agent_dir),
			.kind = msb__strdup(kind),
		};
		if (m->name)
			b->n_made++;
		else
			made_clear(m);
	}
	pthread_mutex_unlock(&b->lock);
}

static void forget(engine_backend *b, const char *name)
{
	pthread_mutex_lock(&b->lock);
	for (size_t i = 0; i < b->n_made; i++)
		if (strcmp(b->made[i].name, name) == 0) {
			made_clear(&b->made[i]);
			b->made[i] = b->made[--b->n_made];
			break;
		}
	pthread_mutex_unlock(&b->lock);
}

/* ---- acquire ----------------------------------------------------------------------- */

static int check_spec(engine_backend *b, const msb_spec *spec, const char **image,
		      const char **work_dir, msb_error **err)
{
	*image = msb_spec_image(spec) ? msb_spec_image(spec) : b->image;
	if (!*image)
		return msb_error_set(err, MSB_E_VALUE,
				     "%s: the spec names no image and the backend has no default: "
				     "set `image`",
				     b->name);
	*work_dir = msb_spec_work_dir(spec) ? msb_spec_work_dir(spec) : MSB_DEFAULT_WORK_DIR;
	if ((*work_dir)[0] != '/' || strcmp(*work_dir, "/") == 0)
		return msb_error_set(err, MSB_E_VALUE,
				     "%s: work_dir `%s` must be an absolute guest path below `/`",
				     b->name, *work_dir);
	/* Defence in depth: the router refuses these first (21.35, 21.23). */
	msb_egress e = msb_spec_egress(spec);
	if (e == MSB_EGRESS_UNRESTRICTED ||
	    (e == MSB_EGRESS_ALLOWLIST && msb_spec_egress_allow_count(spec) > 0 &&
	     !(b->decl.egress_modes & MSB_EGRESS_ALLOWLIST)))
		return msb_error_set(err, MSB_E_EGRESS_NOT_ENFORCED,
				     "%s: egress `%s` is not enforced here: %s", b->name,
				     msb_egress_name(e),
				     b->allowlist ? "the proxy enforces an allowlist, never "
						    "unrestricted egress"
				     : e == MSB_EGRESS_ALLOWLIST && b->allowlist_refused
					     ? b->allowlist_refused
					     : "every container runs with no network");
	if (msb_spec_isolation_scope(spec) == MSB_SCOPE_CALL)
		return msb_error_set(err, MSB_E_SCOPE_NOT_ENFORCED,
				     "%s: isolation scope `call` is not enforced", b->name);
	return 0;
}

static void log_outcome(engine_backend *b, const char *what, const char *name, const char *kind,
			const msb_key *key)
{
	msb__log(&b->log, MSB_LOG_INFO, b->transport_tag,
		 "%s container `%s` (kind `%s`, thread `%s`, agent `%s`)", what, name, kind,
		 key->thread_id ? key->thread_id : "", key->agent_dir ? key->agent_dir : "");
}

/* Under the name's lock: reuse, start, adopt or create (21.18). */
static int get_or_create(engine_backend *b, const msb_key *key, const msb_spec *spec,
			 const char *name, const char *image, const char *work_dir,
			 const char *network, char *const *env, char **id, msb_error **err)
{
	const char *kind = msb_spec_kind(spec);
	engine_state st;
	for (int attempt = 0; attempt < 4; attempt++) {
		*id = NULL;
		int r = b->ops->inspect(b->t, name, &st, id, err);
		if (r < 0)
			return r;
		if (st == ENGINE_RUNNING) {
			log_outcome(b, attempt ? "adopted" : "reused", name, kind, key);
			return 0;
		}
		if (st == ENGINE_STOPPED) {
			msb_error *serr = NULL;
			r = b->ops->start(b->t, *id, &serr);
			if (r == 0) {
				msb_error_free(serr);
				log_outcome(b, "restarted", name, kind, key);
				return 0;
			}
			/* A container that will not start is replaced. */
			msb__log(&b->log, MSB_LOG_INFO, b->transport_tag,
				 "container `%s` did not start (%s): replacing it", name,
				 msb_error_message(serr));
			msb_error_free(serr);
			free(TAKE_PTR(*id));
			r = b->ops->remove(b->t, name, err);
			if (r < 0)
				return r;
		}
		_cleanup_strv_ char **labels = NULL;
		r = msb_engine__labels(key, kind, spec, &labels, err);
		if (r < 0)
			return r;
		engine_create c = {
			.name = name,
			.image = image,
			.labels = labels,
			.work_dir = work_dir,
			.memory_bytes = msb_spec_memory_bytes(spec),
			.pids_max = msb_spec_pids_max(spec),
			.cpu_millis = msb_spec_cpu_millis(spec),
			.writable_bytes = msb_spec_writable_bytes(spec),
			.network = network,
			.env = env,
		};
		free(TAKE_PTR(*id));
		r = b->ops->run(b->t, &c, id, err);
		if (r == ENGINE_EXISTS)
			continue; /* made by someone else meanwhile: adopt it */
		if (r < 0)
			return r;
		remember(b, name, key, kind);
		log_outcome(b, "created", name, kind, key);
		return 0;
	}
	return msb_error_set(err, MSB_E_RUNTIME,
			     "%s: container `%s` kept changing under acquire (created, then gone)",
			     b->name, name);
}

static int engine_acquire(void *impl, const msb_key *key, const msb_spec *spec, msb_sandbox **out,
			  msb_error **err)
{
	engine_backend *b = impl;
	const char *image = NULL, *work_dir = NULL;
	int r = check_spec(b, spec, &image, &work_dir, err);
	if (r < 0)
		return r;
	_cleanup_free_ char *egress_id =
		msb_engine__egress_id(spec, (b->decl.egress_modes & MSB_EGRESS_ALLOWLIST) != 0);
	_cleanup_free_ char *name =
		egress_id
			? msb_engine__container_name(b->prefix, key, msb_spec_kind(spec), egress_id)
			: NULL;
	if (!name)
		return msb__error_nomem(err);
	name_lock(b, name);
	_cleanup_free_ char *id = NULL;
	_cleanup_free_ char *network = NULL;
	_cleanup_free_ char *proxy = NULL;
	_cleanup_strv_ char **env = NULL;
	/* The egress scaffolding first, on every acquire (21.21, 21.22). */
	r = msb_engine__egress_prepare(b, key, spec, name, &network, &proxy, &env, err);
	if (r == 0)
		r = get_or_create(b, key, spec, name, image, work_dir, network, env, &id, err);
	name_unlock(b, name);
	if (r < 0)
		return msb_error_wrap(err, "%s: cannot acquire `%s`", b->name, name);
	return msb_engine__sandbox_new(b, key, name, id, work_dir, proxy, out, err);
}

/* ---- disposal (21.30-21.32) -------------------------------------------------------------- */

static int push_filter(char ***v, const char *k, const char *value)
{
	char d[ENGINE_LABEL_VALUE_SIZE];
	msb_engine__label_value(value, d);
	char *kv = msb__asprintf("%s=%s", k, d);
	if (!kv || msb__strv_push_take(v, kv) < 0) {
		free(kv);
		return -ENOMEM;
	}
	return 0;
}

/* Does the container's label `k` hold `value` (digested), or is it absent
 * when value is NULL? */
static bool label_is(const engine_container *c, const char *k, const char *value)
{
	const char *have = msb_engine__container_label(c, k);
	if (!value)
		return have == NULL;
	char d[ENGINE_LABEL_VALUE_SIZE];
	msb_engine__label_value(value, d);
	return have && strcmp(have, d) == 0;
}

typedef struct sweep_result {
	uint64_t removed;
	msb_disposal_failure **failures;
	size_t n_failures;
} sweep_result;

static void sweep_clear(sweep_result *s)
{
	for (size_t i = 0; i < s->n_failures; i++)
		msb_disposal_failure_free(s->failures[i]);
	free(s->failures);
}

static void remove_one(engine_backend *b, const char *name, sweep_result *s)
{
	msb_error *e = NULL;
	int r = b->ops->remove(b->t, name, &e);
	if (r < 0) {
		_cleanup_free_ char *d = msb__asprintf("%s: %s", name, msb_error_message(e));
		msb_backends__add_failure(&s->failures, &s->n_failures,
					  r == MSB_E_TIMEOUT ? MSB_DISPOSAL_TIMEOUT
					  : r == MSB_E_OS    ? MSB_DISPOSAL_UNREACHABLE
							     : MSB_DISPOSAL_UNKNOWN,
					  d ? d : name);
	} else {
		s->removed++;
		forget(b, name);
	}
	msb_error_free(e);
}

/*
 * Select by the engine's labels (scope, thread, and agent when `key` has one),
 * then check every label exactly - an absent thread matches only an absent
 * label, and the engine's filter is a set of equalities, not this - and
 * remove workloads first, then whatever else carries the labels (21.31).
 */
static int sweep(engine_backend *b, const char *scope, const char *thread_id, bool by_agent,
		 const char *agent_dir, const char *kind, const char *instance_id, sweep_result *s,
		 msb_error **err)
{
	/* Records of the proxies removed here are reported for this key. */
	msb_key key = {scope, thread_id, by_agent ? agent_dir : NULL, NULL};
	_cleanup_strv_ char **filters = NULL;
	if ((scope && push_filter(&filters, ENGINE_LABEL_SCOPE, scope) < 0) ||
	    (thread_id && push_filter(&filters, ENGINE_LABEL_THREAD, thread_id) < 0) ||
	    (by_agent && agent_dir && push_filter(&filters, ENGINE_LABEL_AGENT, agent_dir) < 0) ||
	    (kind && push_filter(&filters, ENGINE_LABEL_KIND, kind) < 0))
		return msb__error_nomem(err);
	if (!filters && msb__strv_push(&filters, ENGINE_LABEL_KIND) < 0)
		return msb__error_nomem(err);
	engine_container *v = NULL;
	size_t n = 0;
	int r = b->ops->list(b->t, filters, &v, &n, err);
	if (r < 0)
		return r;
	/* With an instance: that workload, and its own proxy and network. */
	_cleanup_free_ char *own_proxy = NULL;
	_cleanup_free_ char *own_net = NULL;
	for (int pass = 0; pass < 2; pass++)
		for (size_t i = 0; i < n; i++) {
			const engine_container *c = &v[i];
			if (!label_is(c, ENGINE_LABEL_SCOPE, scope) ||
			    !label_is(c, ENGINE_LABEL_THREAD, thread_id) ||
			    (by_agent && !label_is(c, ENGINE_LABEL_AGENT, agent_dir)) ||
			    strncmp(c->name, b->prefix, strlen(b->prefix)) != 0)
				continue;
			bool proxy = msb_engine__container_label(c, ENGINE_LABEL_ROLE) != NULL;
			if (proxy != (pass == 1))
				continue;
			if (instance_id && !proxy && strcmp(c->id, instance_id) != 0)
				continue;
			if (instance_id && proxy && !msb__streq_null(c->name, own_proxy))
				continue;
			if (instance_id && !proxy && !own_proxy) {
				own_proxy = msb__asprintf("%s-proxy", c->name);
				own_net = msb__asprintf("%s-net", c->name);
				if (!own_proxy || !own_net) {
					msb_engine__containers_free(v, n);
					return msb__error_nomem(err);
				}
			}
			/* Its last records, the proxy stopped first: the only use of
			 * stop in a teardown, and only when someone observes (21.32). */
			if (proxy && b->reporter.report && b->ops->proxy_records) {
				msb_buf records = MSB_BUF_INIT;
				msb_error *e = NULL;
				if (b->ops->proxy_records(b->t, c->id, true, &records, &e) < 0)
					msb__log(&b->log, MSB_LOG_WARNING, b->transport_tag,
						 "the egress records of `%s` were lost: %s",
						 c->name, msb_error_message(e));
				msb_engine__egress_report(b, &key, &records);
				msb__buf_free(&records);
				msb_error_free(e);
			}
			uint64_t before = s->removed;
			remove_one(b, c->name, s);
			if (proxy)
				s->removed = before; /* only workloads are counted */
		}
	msb_engine__containers_free(v, n);
	/* Then the networks (21.31), after the proxies whose endpoints held
	 * them: the instance's own, or every one the labels select. */
	size_t failed = 0;
	msb_error *e = NULL;
	if (own_net && b->ops->net_remove)
		failed += b->ops->net_remove(b->t, own_net, &e) < 0;
	else if (!instance_id &&
		 msb_engine__egress_sweep_networks(b, filters, scope, thread_id, by_agent,
						   agent_dir, &failed, &e) < 0)
		failed++;
	for (size_t i = 0; i < failed; i++)
		msb_backends__add_failure(&s->failures, &s->n_failures, MSB_DISPOSAL_UNKNOWN,
					  e ? msb_error_message(e) : "a network was not removed");
	msb_error_free(e);
	return 0;
}

static int engine_dispose(void *impl, const msb_key *key, const char *kind, const char *instance_id,
			  msb_disposal_failure **failure, msb_error **err)
{
	engine_backend *b = impl;
	sweep_result s = {0};
	msb_error *lerr = NULL;
	int r = sweep(b, key->scope, key->thread_id, true, key->agent_dir, kind, instance_id, &s,
		      &lerr);
	if (r == MSB_E_NOMEM) {
		sweep_clear(&s);
		return msb__error_propagate(err, lerr);
	}
	if (r < 0) {
		/* The listing failed: the names this instance made for the key are
		 * the fallback (21.30). */
		size_t fallback = 0;
		pthread_mutex_lock(&b->lock);
		_cleanup_strv_ char **names = NULL;
		for (size_t i = 0; i < b->n_made; i++) {
			struct engine_made *m = &b->made[i];
			if (msb__streq_null(m->scope, key->scope) &&
			    msb__streq_null(m->thread_id, key->thread_id) &&
			    msb__streq_null(m->agent_dir, key->agent_dir) &&
			    (!kind || msb__streq_null(m->kind, kind)))
				(void)msb__strv_push(&names, m->name);
		}
		pthread_mutex_unlock(&b->lock);
		for (char **p = names; p && *p; p++, fallback++)
			remove_one(b, *p, &s);
		_cleanup_free_ char *d = msb__asprintf(
			"%s: the engine's listing failed (%s); %zu remembered container(s) tried",
			b->name, msb_error_message(lerr), fallback);
		if (fallback == 0 || s.n_failures > 0)
			msb_backends__add_failure(&s.failures, &s.n_failures,
						  MSB_DISPOSAL_UNREACHABLE,
						  d ? d : "listing failed");
	}
	msb_error_free(lerr);
	*failure = NULL;
	if (s.n_failures > 0)
		r = msb_fold_disposal_failures((const msb_disposal_failure *const *)s.failures,
					       s.n_failures, failure, err);
	else
		r = 0;
	sweep_clear(&s);
	return r;
}

static int engine_dispose_scope(void *impl, const char *scope, const char *thread_id,
				msb_scope_purge *out, msb_error **err)
{
	engine_backend *b = impl;
	sweep_result s = {0};
	int r = sweep(b, scope, thread_id, false, NULL, NULL, NULL, &s, err);
	if (r < 0) {
		sweep_clear(&s);
		return msb_error_wrap(err, "%s: dispose_scope", b->name);
	}
	out->disposed = s.removed;
	out->undisposed = s.n_failures;
	sweep_clear(&s);
	return 0;
}

static void engine_set_egress_reporter(void *impl, const msb_egress_reporter *reporter)
{
	engine_backend *b = impl;
	if (reporter)
		b->reporter = *reporter;
	else
		memset(&b->reporter, 0, sizeof(b->reporter));
}

static void engine_free(void *impl)
{
	engine_backend *b = impl;
	if (!b)
		return;
	if (b->ops && b->ops->free)
		b->ops->free(b->t);
	for (size_t i = 0; i < b->n_made; i++)
		made_clear(&b->made[i]);
	free(b->made);
	msb_strv_free(b->busy);
	pthread_mutex_destroy(&b->lock);
	pthread_cond_destroy(&b->cond);
	free(b->name);
	free(b->prefix);
	free(b->image);
	free(b->transport_tag);
	free(b->endpoint);
	free(b->egress_config);
	free(b->allowlist_refused);
	msb__buf_free(&b->agent_bin);
	free(b->agent_guest);
	free(b);
}

static const msb_backend_ops engine_ops = {
	.version = MSB_BACKEND_OPS_VERSION,
	.acquire = engine_acquire,
	.dispose = engine_dispose,
	.dispose_scope = engine_dispose_scope,
	.set_egress_reporter = engine_set_egress_reporter,
	.free = engine_free,
};

int msb_engine__backend_new(const engine_backend_config *cfg, msb_backend **out, msb_error **err)
{
	engine_backend *b = calloc(1, sizeof(*b));
	if (!b) {
		cfg->ops->free(cfg->t);
		return msb__error_nomem(err);
	}
	pthread_mutex_init(&b->lock, NULL);
	pthread_cond_init(&b->cond, NULL);
	b->ops = cfg->ops;
	b->t = cfg->t;
	b->decl = *cfg->decl;
	b->log = (msb_logger){cfg->log, cfg->log_userdata};
	b->name = msb__strdup(cfg->name);
	b->prefix = msb__strdup(cfg->prefix);
	b->transport_tag = msb__strdup(cfg->transport_tag);
	b->image = msb__strdup(cfg->image);
	b->endpoint = msb__strdup(cfg->endpoint);
	b->allowlist = cfg->allowlist && cfg->ops->net_create && cfg->ops->proxy_ensure;
	b->egress_config = msb__strdup(cfg->egress_config);
	b->allowlist_refused = msb__strdup(cfg->allowlist_refused);
	const char *hf = getenv("MSB_ENGINE_HOSTFS");
	b->hostfs_off = hf && strcmp(hf, "0") == 0;
	const char *kept = getenv("MSB_ENGINE_KEPT");
	b->kept_off = kept && strcmp(kept, "0") == 0;
	if ((cfg->allowlist_refused && !b->allowlist_refused) || !b->name || !b->prefix ||
	    !b->transport_tag || (cfg->image && !b->image) || (cfg->endpoint && !b->endpoint) ||
	    (cfg->egress_config && !b->egress_config)) {
		engine_free(b);
		return msb__error_nomem(err);
	}
	/* The confined file plane's agent, when it is there to place. */
	if (cfg->agent_path && cfg->ops->install) {
		_cleanup_free_ char *bytes = NULL;
		size_t n = 0;
		if (msb__plat_read_path(cfg->agent_path, 64u << 20, &bytes, &n) == 0 && n > 0 &&
		    msb__buf_append(&b->agent_bin, bytes, n) == 0) {
			char hex[65];
			msb__sha256_hex(bytes, n, hex);
			b->agent_guest = msb__asprintf("/.msb/msb-agent-%.12s", hex);
			if (!b->agent_guest)
				msb__buf_free(&b->agent_bin);
		}
	}
	msb_backend_info info = {
		.version = MSB_BACKEND_INFO_VERSION,
		.name = b->name,
		.isolation = cfg->isolation,
		.declarations = &b->decl,
	};
	int r = msb_backend_new(&engine_ops, &info, b, out, err);
	if (r == 0)
		b->self = *out;
	return r;
}

#ifndef MSB_LIBEXECDIR
#define MSB_LIBEXECDIR "/usr/local/libexec/msb"
#endif

char *msb_engine__agent_path(const char *configured)
{
	if (configured && *configured)
		return msb__strdup(configured);
	const char *e = getenv("MSB_AGENT");
	if (e && *e)
		return msb__strdup(e);
	return msb__strdup(MSB_LIBEXECDIR "/msb-agent");
}

engine_backend *msb_engine__of(const msb_backend *b)
{
	return msb_backend_impl(b, &engine_ops);
}

const char *msb_engine_backend_socket(const msb_backend *b)
{
	const engine_backend *e = msb_backend_impl(b, &engine_ops);
	return e ? e->endpoint : NULL;
}
