/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Names and labels of engine containers (checklist 21.13-21.17): derived from
 * the key, so that acquire and dispose agree on them with no registry, and
 * digested the same way on write and on query, so that a purge selects what
 * was written.
 */
#include <stdio.h>

#include "engine.h"
#include "util/sha256.h"

static bool label_char(char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
	       c == '.' || c == '_' || c == '-';
}

static bool is_hex(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

/* "sha256-" + 48 lower-case hex: what a digested value looks like. */
static bool digest_shaped(const char *v, size_t n)
{
	if (n != ENGINE_DIGEST_LEN || strncmp(v, "sha256-", 7) != 0)
		return false;
	for (size_t i = 7; i < n; i++)
		if (!is_hex(v[i]))
			return false;
	return true;
}

void msb_engine__label_value(const char *value, char out[ENGINE_LABEL_VALUE_SIZE])
{
	size_t n = strlen(value);
	bool plain = n > 0 && n <= ENGINE_LABEL_MAX && !digest_shaped(value, n);
	for (size_t i = 0; plain && i < n; i++)
		plain = label_char(value[i]);
	if (plain) {
		memcpy(out, value, n + 1);
		return;
	}
	char hex[65];
	msb__sha256_hex(value, n, hex);
	memcpy(out, "sha256-", 7);
	memcpy(out + 7, hex, 48);
	out[ENGINE_DIGEST_LEN] = '\0';
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

char *msb_engine__egress_id(const msb_spec *spec, bool proxy_configured)
{
	size_t n = msb_spec_egress_allow_count(spec);
	if (!proxy_configured || n == 0 || msb_spec_egress(spec) != MSB_EGRESS_ALLOWLIST)
		return msb__strdup("");
	_cleanup_free_ const char **hosts = calloc(n, sizeof(*hosts));
	if (!hosts)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		const char *const *methods;
		size_t nm;
		msb_spec_egress_entry(spec, i, &hosts[i], &methods, &nm);
	}
	qsort(hosts, n, sizeof(*hosts), cmp_str);
	msb_buf b = MSB_BUF_INIT;
	msb__buf_puts(&b, "allow:");
	for (size_t i = 0; i < n; i++) {
		if (i > 0)
			msb__buf_puts(&b, ",");
		msb__buf_puts(&b, hosts[i]);
	}
	return msb__buf_steal_str(&b);
}

char *msb_engine__container_name(const char *prefix, const msb_key *key, const char *kind,
				 const char *egress_id)
{
	msb_buf b = MSB_BUF_INIT;
	msb__buf_printf(&b, "%s|%s|%s|%s", key->scope ? key->scope : "",
			key->thread_id ? key->thread_id : "", key->agent_dir ? key->agent_dir : "",
			kind ? kind : "");
	if (egress_id && *egress_id)
		msb__buf_printf(&b, "|%s", egress_id);
	if (b.oom) {
		msb__buf_free(&b);
		return NULL;
	}
	char hex[65];
	msb__sha256_hex(b.data, b.len, hex);
	msb__buf_free(&b);
	return msb__asprintf("%s%.12s", prefix, hex);
}

static int push_label(char ***v, const char *k, const char *value)
{
	char d[ENGINE_LABEL_VALUE_SIZE];
	msb_engine__label_value(value, d);
	char *kv = msb__asprintf("%s=%s", k, d);
	if (!kv)
		return -ENOMEM;
	int r = msb__strv_push_take(v, kv);
	if (r < 0)
		free(kv);
	return r;
}

int msb_engine__labels(const msb_key *key, const char *kind, const msb_spec *spec, char ***out,
		       msb_error **err)
{
	_cleanup_strv_ char **v = NULL;
	int r = 0;
	if (key->scope)
		r = push_label(&v, ENGINE_LABEL_SCOPE, key->scope);
	if (r == 0 && key->thread_id)
		r = push_label(&v, ENGINE_LABEL_THREAD, key->thread_id);
	if (r == 0 && key->agent_dir)
		r = push_label(&v, ENGINE_LABEL_AGENT, key->agent_dir);
	if (r == 0)
		r = push_label(&v, ENGINE_LABEL_KIND, kind ? kind : "");
	size_t n = spec ? msb_spec_label_count(spec) : 0;
	for (size_t i = 0; r == 0 && i < n; i++) {
		const char *k, *val;
		msb_spec_label(spec, i, &k, &val);
		/* The key is a label name too: digest it into the name. */
		char dk[ENGINE_LABEL_VALUE_SIZE];
		msb_engine__label_value(k, dk);
		_cleanup_free_ char *lk = msb__asprintf("%s%s", ENGINE_LABEL_USER, dk);
		r = lk ? push_label(&v, lk, val) : -ENOMEM;
	}
	if (r < 0)
		return msb__error_nomem(err);
	*out = TAKE_PTR(v);
	return 0;
}

void msb_engine__containers_free(engine_container *v, size_t n)
{
	for (size_t i = 0; v && i < n; i++) {
		free(v[i].name);
		free(v[i].id);
		free(v[i].image);
		msb_strv_free(v[i].labels);
	}
	free(v);
}

const char *msb_engine__container_label(const engine_container *c, const char *key)
{
	size_t kl = strlen(key);
	for (char **p = c->labels; p && *p; p++)
		if (strncmp(*p, key, kl) == 0 && (*p)[kl] == '=')
			return *p + kl + 1;
	return NULL;
}
