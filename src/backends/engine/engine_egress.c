/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The allowlist topology (checklist 21.21-21.23, 21.31, 21.33;
 * docs/internals/engine.md): for a spec allowlisting hosts, an internal
 * network per sandbox ("<name>-net") and on it msb's own egress proxy
 * ("<name>-proxy", msb-egress-proxy in a one-file image), dual-homed: it
 * listens on the internal network and dials from an outbound one. The
 * workload joins only the internal network, with HTTP(S)_PROXY naming the
 * proxy: its only route out. The proxy's decision records become
 * EgressObserved events.
 */
#include <stdio.h>

#include <msb/observer.h>

#include "backends/types.h"
#include "egress/egress.h"
#include "engine.h"
#include "util/json.h"
#include "util/sha256.h"

/* The proxy's configuration: the backend's egress settings and the spec's
 * rules ("allow"), refused here if the proxy would refuse it. */
static int proxy_config(engine_backend *b, const msb_spec *spec, char **out, msb_error **err)
{
	return msb_backends__egress_rules(b->egress_config, "egress", b->name, spec, out, err);
}

static int push(char ***v, char *s)
{
	if (!s || msb__strv_push_take(v, s) < 0) {
		free(s);
		return -ENOMEM;
	}
	return 0;
}

int msb_engine__egress_prepare(engine_backend *b, const msb_key *key, const msb_spec *spec,
			       const char *name, char **network, char **proxy, char ***env,
			       msb_error **err)
{
	*network = *proxy = NULL;
	*env = NULL;
	/* Closed, or an allowlist of nobody: no network at all (21.20, 21.23). */
	if (!b->allowlist || msb_spec_egress(spec) != MSB_EGRESS_ALLOWLIST ||
	    msb_spec_egress_allow_count(spec) == 0)
		return 0;
	_cleanup_free_ char *config = NULL;
	int r = proxy_config(b, spec, &config, err);
	if (r < 0)
		return r;
	char hex[65];
	msb__sha256_hex(config, strlen(config), hex);
	_cleanup_free_ char *netname = msb__asprintf("%s-net", name);
	_cleanup_free_ char *pname = msb__asprintf("%s-proxy", name);
	_cleanup_free_ char *config_label =
		msb__asprintf("%s=sha256-%.48s", ENGINE_LABEL_EGRESS_CONFIG, hex);
	_cleanup_strv_ char **labels = NULL;
	_cleanup_strv_ char **plabels = NULL;
	if (!netname || !pname || !config_label)
		return msb__error_nomem(err);
	r = msb_engine__labels(key, msb_spec_kind(spec), spec, &labels, err);
	if (r < 0)
		return r;
	plabels = msb__strv_copy(labels);
	if ((labels && !plabels) || push(&plabels, msb__strdup(ENGINE_LABEL_ROLE "=proxy")) < 0 ||
	    push(&plabels, msb__strdup(config_label)) < 0)
		return msb__error_nomem(err);

	/* The network: made, or adopted from an earlier acquire. */
	r = b->ops->net_create(b->t, netname, labels, err);
	if (r < 0)
		return msb_error_wrap(err, "%s: the internal network `%s`", b->name, netname);
	bool made = r == 0;
	engine_proxy p = {
		.name = pname,
		.network = netname,
		.labels = plabels,
		.config_json = config,
		.config_label = config_label,
	};
	bool kept = false;
	msb_buf records = MSB_BUF_INIT;
	r = b->ops->proxy_ensure(b->t, &p, &kept, &records, err);
	msb_engine__egress_report(b, key, &records);
	msb__buf_free(&records);
	if (r < 0) {
		/* A fresh network is not left behind by a proxy that failed (21.22). */
		if (made)
			b->ops->net_remove(b->t, netname, NULL);
		return msb_error_wrap(err, "%s: the egress proxy `%s`", b->name, pname);
	}
	msb__log(&b->log, MSB_LOG_INFO, b->transport_tag, "%s egress proxy `%s` on `%s`",
		 kept ? "kept" : "started", pname, netname);
	_cleanup_strv_ char **e = NULL;
	static const char *const vars[] = {"HTTP_PROXY", "HTTPS_PROXY", "http_proxy",
					   "https_proxy"};
	for (size_t i = 0; i < MSB_ARRAY_SIZE(vars); i++)
		if (push(&e, msb__asprintf("%s=http://%s:%d", vars[i], pname, ENGINE_PROXY_PORT)) <
		    0)
			return msb__error_nomem(err);
	if (push(&e, msb__strdup("NO_PROXY=localhost,127.0.0.1")) < 0 ||
	    push(&e, msb__strdup("no_proxy=localhost,127.0.0.1")) < 0)
		return msb__error_nomem(err);
	*network = TAKE_PTR(netname);
	*proxy = TAKE_PTR(pname);
	*env = TAKE_PTR(e);
	return 0;
}

void msb_engine__egress_report(engine_backend *b, const msb_key *key, const msb_buf *records)
{
	const msb_egress_reporter *rep = &b->reporter;
	if (!rep->report || !records->len)
		return;
	const char *buf = (const char *)records->data;
	size_t len = records->len;
	for (size_t pos = 0; pos < len;) {
		const char *nl = memchr(buf + pos, '\n', len - pos);
		if (!nl)
			break;
		msb_egress_entry e;
		char reason[64];
		if (msb_egress__record_parse(buf + pos, (size_t)(nl - (buf + pos)), &e, reason,
					     sizeof(reason)) == 0) {
			msb_egress_record r = {
				.time_ns = e.time_ns,
				.decision = e.allow ? MSB_EGRESS_ALLOW : MSB_EGRESS_DENY,
				.host = e.host,
				.port = e.port,
				.method = e.method[0] ? e.method : NULL,
				.reason = reason,
				.bytes_up = e.bytes_up,
				.bytes_down = e.bytes_down,
			};
			rep->report(rep->userdata, key, &r);
		}
		pos = (size_t)(nl - buf) + 1;
	}
}

static bool label_is(const engine_container *c, const char *k, const char *value)
{
	const char *have = msb_engine__container_label(c, k);
	if (!value)
		return have == NULL;
	char d[ENGINE_LABEL_VALUE_SIZE];
	msb_engine__label_value(value, d);
	return have && strcmp(have, d) == 0;
}

int msb_engine__egress_sweep_networks(engine_backend *b, char *const *filters, const char *scope,
				      const char *thread_id, bool by_agent, const char *agent_dir,
				      size_t *failed, msb_error **err)
{
	if (!b->ops->net_list)
		return 0;
	engine_container *v = NULL;
	size_t n = 0;
	int r = b->ops->net_list(b->t, filters, &v, &n, err);
	if (r < 0)
		return r;
	for (size_t i = 0; i < n; i++) {
		const engine_container *c = &v[i];
		if (!label_is(c, ENGINE_LABEL_SCOPE, scope) ||
		    !label_is(c, ENGINE_LABEL_THREAD, thread_id) ||
		    (by_agent && !label_is(c, ENGINE_LABEL_AGENT, agent_dir)) ||
		    strncmp(c->name, b->prefix, strlen(b->prefix)) != 0)
			continue;
		msb_error *e = NULL;
		if (b->ops->net_remove(b->t, c->name, &e) < 0) {
			msb__log(&b->log, MSB_LOG_WARNING, b->transport_tag,
				 "cannot remove network `%s`: %s", c->name, msb_error_message(e));
			(*failed)++;
		}
		msb_error_free(e);
	}
	msb_engine__containers_free(v, n);
	return 0;
}
