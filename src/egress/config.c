/* SPDX-License-Identifier: Apache-2.0 */
/* The egress configuration (egress.h): strict JSON, every value checked. */
#include <errno.h>
#include <string.h>

#include "egress/egress.h"
#include "util/json.h"

void msb_egress__config_init(msb_egress_config *c)
{
	memset(c, 0, sizeof(*c));
	c->resolver.use_system = true;
	c->header_timeout_ms = MSB_EGRESS_DEFAULT_HEADER_TIMEOUT_MS;
	c->connect_timeout_ms = MSB_EGRESS_DEFAULT_CONNECT_TIMEOUT_MS;
	c->max_tunnels = MSB_EGRESS_DEFAULT_MAX_TUNNELS;
}

void msb_egress__config_clear(msb_egress_config *c)
{
	msb_egress__policy_clear(&c->policy);
	msb_egress__resolver_clear(&c->resolver);
}

static const char *const keys[] = {"allow",
				   "allow_cidrs",
				   "hosts",
				   "system_resolver",
				   "header_timeout_ms",
				   "connect_timeout_ms",
				   "max_tunnels",
				   NULL};

static int get_ms(json_t *o, const char *key, unsigned min, unsigned max, unsigned *out,
		  msb_error **err)
{
	uint64_t v = 0;
	bool present = false;
	int r = msb__json_get_u64(o, key, "egress config", &v, &present, err);
	if (r < 0 || !present)
		return r;
	if (v < min || v > max)
		return msb_error_set(err, MSB_E_VALUE, "egress config.%s: must be %u..%u", key, min,
				     max);
	*out = (unsigned)v;
	return 0;
}

static int method_token_ok(const char *m)
{
	size_t n = strlen(m);
	if (n == 0 || n > MSB_EGRESS_METHOD_MAX)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!((m[i] >= 'A' && m[i] <= 'Z') || m[i] == '-' || m[i] == '_'))
			return 0;
	return 1;
}

static int parse_rules(msb_egress_config *c, json_t *arr, msb_error **err)
{
	if (!json_is_array(arr))
		return msb_error_set(err, MSB_E_TYPE, "egress config.allow: must be a list");
	size_t n = json_array_size(arr);
	if (n > 4096)
		return msb_error_set(err, MSB_E_VALUE, "egress config.allow: at most 4096 rules");
	c->policy.rules = calloc(n ? n : 1, sizeof(*c->policy.rules));
	if (!c->policy.rules)
		return msb__error_nomem(err);
	static const char *const rule_keys[] = {"host", "methods", NULL};
	for (size_t i = 0; i < n; i++) {
		json_t *o = json_array_get(arr, i);
		if (!json_is_object(o))
			return msb_error_set(err, MSB_E_TYPE,
					     "egress config.allow[%zu]: must be an object", i);
		int r = msb__json_check_keys(o, rule_keys, "egress config.allow[]", err);
		const char *host = NULL;
		if (r == 0)
			r = msb__json_get_string(o, "host", "egress config.allow[]", &host, NULL,
						 err);
		if (r < 0)
			return r;
		if (!host || !*host || strlen(host) > MSB_EGRESS_HOST_MAX)
			return msb_error_set(err, MSB_E_VALUE,
					     "egress config.allow[%zu].host: a host name", i);
		msb_egress_rule *rule = &c->policy.rules[c->policy.n_rules++];
		rule->host = strdup(host);
		if (!rule->host)
			return msb__error_nomem(err);
		const char **m = NULL;
		size_t nm = 0;
		bool present = false;
		r = msb__json_get_string_array(o, "methods", "egress config.allow[]", &m, &nm,
					       &present, err);
		if (r < 0)
			return r;
		if (!present)
			continue;
		if (nm == 0) {
			free(m);
			return msb_error_set(err, MSB_E_VALUE,
					     "egress config.allow[%zu].methods: empty", i);
		}
		for (size_t k = 0; k < nm; k++) {
			if (!method_token_ok(m[k]) || msb__strv_push(&rule->methods, m[k]) < 0) {
				free(m);
				return msb_error_set(err, MSB_E_VALUE,
						     "egress config.allow[%zu].methods: `%s` is "
						     "not an upper-case method token",
						     i, m[k]);
			}
		}
		free(m);
	}
	return 0;
}

static int parse_hosts(msb_egress_config *c, json_t *obj, msb_error **err)
{
	const char *name;
	json_t *v;
	json_object_foreach (obj, name, v) {
		if (!json_is_array(v) || json_array_size(v) == 0 ||
		    json_array_size(v) > MSB_EGRESS_ADDRS_MAX)
			return msb_error_set(err, MSB_E_VALUE,
					     "egress config.hosts.%s: a list of 1..%d addresses",
					     name, MSB_EGRESS_ADDRS_MAX);
		size_t i;
		json_t *a;
		json_array_foreach (v, i, a) {
			if (!json_is_string(a) ||
			    msb_egress__resolver_add(&c->resolver, name, json_string_value(a)) < 0)
				return msb_error_set(err, MSB_E_VALUE,
						     "egress config.hosts: `%s` -> a bad name or "
						     "address",
						     name);
		}
	}
	return 0;
}

int msb_egress__config_from_json(msb_egress_config *c, const char *json, size_t len,
				 bool allow_rules, msb_error **err)
{
	json_t *root = NULL;
	int r = msb__json_load_object(json, len, "egress config", &root, err);
	if (r < 0)
		return r;
	r = msb__json_check_keys(root, allow_rules ? keys : keys + 1, "egress config", err);
	json_t *allow = json_object_get(root, "allow");
	if (r == 0 && allow)
		r = parse_rules(c, allow, err);
	const char **cidrs = NULL;
	size_t n = 0;
	bool present = false;
	if (r == 0)
		r = msb__json_get_string_array(root, "allow_cidrs", "egress config", &cidrs, &n,
					       &present, err);
	if (r == 0 && present && n > 0) {
		c->policy.cidrs = calloc(n, sizeof(*c->policy.cidrs));
		if (!c->policy.cidrs)
			r = msb__error_nomem(err);
		for (size_t i = 0; r == 0 && i < n; i++) {
			if (msb_egress__cidr_parse(cidrs[i], &c->policy.cidrs[i]) < 0)
				r = msb_error_set(err, MSB_E_VALUE,
						  "egress config.allow_cidrs: `%s` is not a CIDR",
						  cidrs[i]);
			else
				c->policy.n_cidrs++;
		}
	}
	free(cidrs);
	json_t *hosts = NULL;
	if (r == 0)
		r = msb__json_get_object(root, "hosts", "egress config", &hosts, &present, err);
	if (r == 0 && present)
		r = parse_hosts(c, hosts, err);
	if (r == 0)
		r = msb__json_get_bool(root, "system_resolver", "egress config",
				       &c->resolver.use_system, NULL, err);
	if (r == 0)
		r = get_ms(root, "header_timeout_ms", 100, 600000, &c->header_timeout_ms, err);
	if (r == 0)
		r = get_ms(root, "connect_timeout_ms", 100, 600000, &c->connect_timeout_ms, err);
	if (r == 0)
		r = get_ms(root, "max_tunnels", 1, MSB_EGRESS_DEFAULT_MAX_TUNNELS, &c->max_tunnels,
			   err);
	json_decref(root);
	if (r < 0)
		msb_egress__config_clear(c);
	return r;
}
