/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The one place the CLI decides what it runs on (docs/cli.md): the backend
 * JSON a verb builds its backend from (docs/policy.md, "Backend JSON"), the
 * router options around it and the spec defaults - the flags over the
 * configuration file (cli/config.c) over the built-in defaults. Every verb
 * that makes a backend or a router comes here and then to
 * msb_backend_from_json / msb_router_new / msb_router_from_json, so a
 * backend means the same thing in every front end.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "cli.h"

#define SRC_FLAG "flag"
#define SRC_FILE "file"
#define SRC_DEFAULT "built-in default"

static int load_file_object(const char *flag, const char *path, json_t **out, msb_error **err)
{
	char *text = NULL;
	size_t len = 0;
	int r = cli_read_file(path, &text, &len, err);
	if (r < 0)
		return msb_error_wrap(err, "%s", flag);
	json_error_t je;
	json_t *o = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
	free(text);
	if (!json_is_object(o)) {
		json_decref(o);
		return msb_error_set(err, MSB_E_VALUE, "%s `%s`: not a JSON object: %s", flag, path,
				     o ? "" : je.text);
	}
	*out = o;
	return 0;
}

static int set_new(json_t *o, const char *key, json_t *v, msb_error **err)
{
	if (!v || json_object_set_new(o, key, v) < 0)
		return msb_error_set(err, MSB_E_NOMEM, "out of memory");
	return 0;
}

/* Every key of o recorded as coming from `source`. */
static int mark_all(json_t *sources, json_t *o, const char *source, msb_error **err)
{
	const char *key;
	json_t *v;
	json_object_foreach (o, key, v) {
		int r = set_new(sources, key, json_string(source), err);
		if (r < 0)
			return r;
	}
	return 0;
}

/*
 * The base object: --config's file (a flag); else the configuration file's
 * `backend` when it is of the type asked for (or none is asked for); else
 * {"type": TYPE}, TYPE being the one asked for or `ns`.
 */
static int base_object(const cli_backend_flags *f, json_t *sources, json_t **out, msb_error **err)
{
	json_t *o = NULL;
	if (f->config) {
		int r = load_file_object("--config", f->config, &o, err);
		if (r == 0)
			r = mark_all(sources, o, SRC_FLAG, err);
		if (r < 0) {
			json_decref(o);
			return r;
		}
		*out = o;
		return 0;
	}
	const cli_config *c = NULL;
	int r = cli_config_get(&c, err);
	if (r < 0)
		return r;
	const char *ctype =
		c->backend ? json_string_value(json_object_get(c->backend, "type")) : NULL;
	if (c->backend && (!f->type || (ctype && strcmp(ctype, f->type) == 0))) {
		if (!(o = json_deep_copy(c->backend)))
			return msb_error_set(err, MSB_E_NOMEM, "out of memory");
		if ((r = mark_all(sources, o, SRC_FILE, err)) < 0) {
			json_decref(o);
			return r;
		}
		*out = o;
		return 0;
	}
	if (!(o = json_object()) ||
	    (r = set_new(o, "type", json_string(f->type ? f->type : CLI_DEFAULT_BACKEND), err)) <
		    0 ||
	    (r = set_new(sources, "type", json_string(f->type ? SRC_FLAG : SRC_DEFAULT), err)) <
		    0) {
		json_decref(o);
		return r < 0 ? r : msb_error_set(err, MSB_E_NOMEM, "out of memory");
	}
	*out = o;
	return 0;
}

/* An ns or oci backend that states no `pool_size` keeps the configuration
 * file's defaults.pool_size warm sandboxes per template, else the verb's
 * built-in default (docs/pool.md). */
static int default_pool_size(const cli_backend_flags *f, json_t *o, json_t *sources,
			     msb_error **err)
{
	const char *type = json_string_value(json_object_get(o, "type"));
	if (!type || (strcmp(type, "ns") != 0 && strcmp(type, "oci") != 0) ||
	    json_object_get(o, "pool_size"))
		return 0;
	const cli_config *c = NULL;
	int r = cli_config_get(&c, err);
	if (r < 0 || (!c->has_pool_size && !f->pool_default))
		return r;
	const json_int_t n = c->has_pool_size ? (json_int_t)c->pool_size : f->pool_default;
	if ((r = set_new(o, "pool_size", json_integer(n), err)) < 0)
		return r;
	return set_new(sources, "pool_size", json_string(c->has_pool_size ? SRC_FILE : SRC_DEFAULT),
		       err);
}

int cli_backend_object_sourced(const cli_backend_flags *f, json_t **out, json_t **sources_out,
			       msb_error **err)
{
	json_t *sources = json_object();
	if (!sources)
		return msb_error_set(err, MSB_E_NOMEM, "out of memory");
	json_t *o = NULL;
	int r = base_object(f, sources, &o, err);
	if (r < 0) {
		json_decref(sources);
		return r;
	}

	json_t *type = json_object_get(o, "type");
	if (!type && f->type)
		r = set_new(o, "type", json_string(f->type), err);
	else if (!type)
		r = msb_error_set(err, MSB_E_VALUE, "--config `%s` names no backend `type`",
				  f->config);
	else if (f->type && (!json_is_string(type) || strcmp(json_string_value(type), f->type)))
		r = msb_error_set(err, MSB_E_VALUE, "--config `%s` is not a `%s` backend",
				  f->config, f->type);
	/* The flags over the file; a type without such a key refuses it. */
	if (r == 0 && f->state_dir &&
	    (r = set_new(o, "state_dir", json_string(f->state_dir), err)) == 0)
		r = set_new(sources, "state_dir", json_string(SRC_FLAG), err);
	if (r == 0 && f->image && (r = set_new(o, "image", json_string(f->image), err)) == 0)
		r = set_new(sources, "image", json_string(SRC_FLAG), err);
	if (r == 0 && f->runtime) {
		const char *t = json_string_value(json_object_get(o, "type"));
		if (!t || strcmp(t, "oci") != 0)
			r = msb_error_set(
				err, MSB_E_VALUE,
				"--runtime is the `oci` backend's (`--backend oci --runtime "
				"runsc|crun`); this backend is `%s`",
				t ? t : "?");
		else if ((r = set_new(o, "runtime", json_string(f->runtime), err)) == 0)
			r = set_new(sources, "runtime", json_string(SRC_FLAG), err);
	}
	if (r == 0 && f->egress_config) {
		json_t *eg = NULL;
		r = load_file_object("--egress-config", f->egress_config, &eg, err);
		if (r == 0 && (r = set_new(o, "egress", eg, err)) == 0)
			r = set_new(sources, "egress", json_string(SRC_FLAG), err);
	}
	if (r == 0)
		r = default_pool_size(f, o, sources, err);
	if (r < 0) {
		json_decref(o);
		json_decref(sources);
		return r;
	}
	*out = o;
	if (sources_out)
		*sources_out = sources;
	else
		json_decref(sources);
	return 0;
}

int cli_backend_object(const cli_backend_flags *f, json_t **out, msb_error **err)
{
	return cli_backend_object_sourced(f, out, NULL, err);
}

int cli_backend_json(const cli_backend_flags *f, char **out, msb_error **err)
{
	json_t *o = NULL;
	int r = cli_backend_object(f, &o, err);
	if (r < 0)
		return r;
	*out = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	return *out ? 0 : msb_error_set(err, MSB_E_NOMEM, "out of memory");
}

int cli_backend_new(const cli_backend_flags *f, msb_backend **out, msb_error **err)
{
	char *text = NULL;
	int r = cli_backend_json(f, &text, err);
	if (r < 0)
		return r;
	r = msb_backend_from_json(text, strlen(text), out, err);
	free(text);
	if (r == 0)
		cli_backend_progress(*out);
	if (r < 0 && f->config)
		msb_error_wrap(err, "--config `%s`", f->config);
	else if (r < 0 && !f->config) {
		const cli_config *c = NULL;
		if (cli_config_get(&c, NULL) == 0 && c->backend)
			msb_error_wrap(err, "configuration `%s`", c->path);
	}
	return r;
}

/* ---- the router and the spec defaults ------------------------------------------------ */

int cli_router_object(const char *min_isolation, json_t **out, json_t **sources_out,
		      msb_error **err)
{
	const cli_config *c = NULL;
	int r = cli_config_get(&c, err);
	if (r < 0)
		return r;
	json_t *o = c->router ? json_deep_copy(c->router) : json_object();
	json_t *sources = json_object();
	if (!o || !sources)
		r = msb_error_set(err, MSB_E_NOMEM, "out of memory");
	if (r == 0)
		r = mark_all(sources, o, SRC_FILE, err);
	if (r == 0 && min_isolation &&
	    (r = set_new(o, "min_isolation", json_string(min_isolation), err)) == 0)
		r = set_new(sources, "min_isolation", json_string(SRC_FLAG), err);
	if (r < 0) {
		json_decref(o);
		json_decref(sources);
		return r;
	}
	*out = o;
	if (sources_out)
		*sources_out = sources;
	else
		json_decref(sources);
	return 0;
}

int cli_router_options(const char *min_isolation, msb_router_options *out, char **selected,
		       msb_error **err)
{
	json_t *o = NULL;
	int r = cli_router_object(min_isolation, &o, NULL, err);
	if (r < 0)
		return r;
	char *text = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	if (!text)
		return msb_error_set(err, MSB_E_NOMEM, "out of memory");
	r = msb_router_options_from_json(text, strlen(text), out, selected, err);
	free(text);
	if (r < 0 && min_isolation)
		msb_error_wrap(err, "--min-isolation");
	return r;
}

int cli_router_json(const cli_backend_flags *f, const char *min_isolation, char **out,
		    msb_error **err)
{
	json_t *ro = NULL, *bo = NULL, *list = NULL;
	int r = cli_router_object(min_isolation, &ro, NULL, err);
	if (r == 0)
		r = cli_backend_object(f, &bo, err);
	if (r == 0 && (!(list = json_array()) || json_array_append_new(list, bo) < 0 ||
		       json_object_set_new(ro, "backends", list) < 0))
		r = msb_error_set(err, MSB_E_NOMEM, "out of memory");
	if (r == 0 && !(*out = json_dumps(ro, JSON_COMPACT)))
		r = msb_error_set(err, MSB_E_NOMEM, "out of memory");
	json_decref(ro);
	return r;
}

bool cli_floor_from_flag_or_file(const char *min_isolation)
{
	if (min_isolation)
		return true;
	const cli_config *c = NULL;
	return cli_config_get(&c, NULL) == 0 && c->router &&
	       json_object_get(c->router, "min_isolation");
}

void cli_spec_resources(uint64_t res[CLI_RESOURCES])
{
	const cli_config *c = NULL;
	if (cli_config_get(&c, NULL) < 0)
		return;
	for (size_t i = 0; i < CLI_RESOURCES; i++)
		if (!res[i])
			res[i] = c->resources[i];
}

void cli_spec_env(msb_spec_builder *sb)
{
	const cli_config *c = NULL;
	if (cli_config_get(&c, NULL) < 0 || !c->env)
		return;
	const char *k;
	json_t *v;
	json_object_foreach (c->env, k, v)
		msb_spec_builder_set_env(sb, k, json_string_value(v));
}
