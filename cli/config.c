/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The configuration file (docs/cli.md "Configuration"): the first of
 * $MSB_CONFIG, the per-user file and the system-wide one that exists
 * (os.h: $XDG_CONFIG_HOME/msb/config.json, else ~/.config/..., and
 * /etc/msb/config.json; on Windows %APPDATA%\msb\config.json and
 * %ProgramData%\msb\config.json), read once per process, strict:
 *
 *   {"router":   router JSON without "backends" (docs/policy.md),
 *    "backend":  one backend JSON object (the default backend),
 *    "defaults": {"resources": {memory_bytes, pids_max, cpu_millis,
 *                               writable_bytes}, "pool_size": N,
 *                 "env": {NAME: VALUE}}}
 *
 * Every key is optional. cli/backend_json.c is the one place that puts it
 * together with the flags; this file only finds and checks it, and prints
 * `msb config show`.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "os.h"

#define CONFIG_MAX_BYTES (1u << 20)

static const char *const top_keys[] = {"router", "backend", "defaults", NULL};
static const char *const defaults_keys[] = {"resources", "pool_size", "env", NULL};
const char *const cli_resource_keys[CLI_RESOURCES + 1] = {"memory_bytes", "pids_max", "cpu_millis",
							  "writable_bytes", NULL};

static bool in_list(const char *const *list, const char *key)
{
	for (size_t i = 0; list[i]; i++)
		if (strcmp(list[i], key) == 0)
			return true;
	return false;
}

static int strict_keys(json_t *o, const char *const *keys, const char *where, msb_error **err)
{
	const char *key;
	json_t *v;
	json_object_foreach (o, key, v) {
		if (!in_list(keys, key))
			return msb_error_set(
				err, MSB_E_VALUE, "%s: unknown key `%s` (expected %s)", where, key,
				keys == top_keys	? "router, backend, defaults"
				: keys == defaults_keys ? "resources, pool_size, env"
							: "memory_bytes, pids_max, cpu_millis, "
							  "writable_bytes");
	}
	return 0;
}

/* defaults.env: an object of strings, refused as a spec's env is (docs/spec.md). */
static int check_env(json_t *env, msb_error **err)
{
	if (!json_is_object(env))
		return msb_error_set(err, MSB_E_TYPE,
				     "defaults.env must be an object of strings (the spec's env)");
	msb_spec_builder *b = msb_spec_builder_new("config");
	if (!b)
		return msb_error_set(err, MSB_E_NOMEM, "out of memory");
	const char *k;
	json_t *v;
	int r = 0;
	json_object_foreach (env, k, v) {
		if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v)) {
			r = msb_error_set(err, MSB_E_TYPE,
					  "defaults.env.%.80s: must be a string without NUL", k);
			break;
		}
		msb_spec_builder_set_env(b, k, json_string_value(v));
	}
	msb_spec *spec = NULL;
	if (r == 0 && (r = msb_spec_build(b, &spec, err)) < 0)
		msb_error_wrap(err, "defaults");
	msb_spec_unref(spec);
	msb_spec_builder_free(b);
	return r;
}

static int count(json_t *o, const char *key, const char *where, uint64_t *out, bool *present,
		 msb_error **err)
{
	json_t *v = json_object_get(o, key);
	if (present)
		*present = v != NULL;
	if (!v)
		return 0;
	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return msb_error_set(err, MSB_E_TYPE, "%s.%s must be a non-negative integer", where,
				     key);
	*out = (uint64_t)json_integer_value(v);
	return 0;
}

/* Check what the file says, before any verb uses it. */
static int check(cli_config *c, msb_error **err)
{
	json_t *o = c->root;
	int r = strict_keys(o, top_keys, "configuration", err);
	if (r < 0)
		return r;
	json_t *ro = json_object_get(o, "router");
	if (ro) {
		if (!json_is_object(ro))
			return msb_error_set(err, MSB_E_TYPE,
					     "router must be an object (router JSON)");
		if (json_object_get(ro, "backends"))
			return msb_error_set(err, MSB_E_VALUE,
					     "router.backends: the configuration's backend is "
					     "`backend`, one backend JSON object");
		/* The options are checked the way the library reads them. */
		char *text = json_dumps(ro, JSON_COMPACT);
		msb_router_options opts;
		char *selected = NULL;
		r = text ? msb_router_options_from_json(text, strlen(text), &opts, &selected, err)
			 : msb_error_set(err, MSB_E_NOMEM, "out of memory");
		free(text);
		free(selected);
		if (r < 0)
			return r;
		c->router = ro;
	}
	json_t *bo = json_object_get(o, "backend");
	if (bo) {
		if (!json_is_object(bo))
			return msb_error_set(err, MSB_E_TYPE,
					     "backend must be an object (backend JSON)");
		if (!json_is_string(json_object_get(bo, "type")))
			return msb_error_set(err, MSB_E_VALUE, "backend names no `type`");
		c->backend = bo;
	}
	json_t *d = json_object_get(o, "defaults");
	if (d) {
		if (!json_is_object(d))
			return msb_error_set(err, MSB_E_TYPE, "defaults must be an object");
		if ((r = strict_keys(d, defaults_keys, "defaults", err)) < 0 ||
		    (r = count(d, "pool_size", "defaults", &c->pool_size, &c->has_pool_size, err)) <
			    0)
			return r;
		c->env = json_object_get(d, "env");
		if (c->env && (r = check_env(c->env, err)) < 0)
			return r;
		json_t *res = json_object_get(d, "resources");
		if (res && !json_is_object(res))
			return msb_error_set(err, MSB_E_TYPE,
					     "defaults.resources must be an object (the spec's "
					     "resources)");
		if (res && (r = strict_keys(res, cli_resource_keys, "defaults.resources", err)) < 0)
			return r;
		for (size_t i = 0; res && i < CLI_RESOURCES; i++)
			if ((r = count(res, cli_resource_keys[i], "defaults.resources",
				       &c->resources[i], NULL, err)) < 0)
				return r;
	}
	return 0;
}

/* Read `path`; *missing when it does not exist (not an error). */
static int load(cli_config *c, const char *path, bool *missing, msb_error **err)
{
	*missing = false;
	int fd = cli_os_open_read(path);
	if (fd < 0 && errno == ENOENT) {
		*missing = true;
		return 0;
	}
	if (fd < 0)
		return msb_error_set(err, MSB_E_OS, "configuration `%s`: %s", path,
				     strerror(errno));
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > CONFIG_MAX_BYTES) {
		close(fd);
		return msb_error_set(err, MSB_E_VALUE,
				     "configuration `%s`: not a regular file of at most %u bytes",
				     path, CONFIG_MAX_BYTES);
	}
	/* Read here, parsed from memory: jansson's own fd reader is not built
	 * into the Windows deps (scripts/windows-deps), and the size is bounded
	 * either way. */
	char *text = malloc(CONFIG_MAX_BYTES + 1);
	size_t n = 0;
	ssize_t got = 0;
	while (text && n <= CONFIG_MAX_BYTES &&
	       (got = read(fd, text + n, CONFIG_MAX_BYTES + 1 - n)) != 0) {
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0)
			break;
		n += (size_t)got;
	}
	int e = errno;
	close(fd);
	if (!text)
		return msb_error_set(err, MSB_E_NOMEM, "out of memory");
	if (got < 0 || n > CONFIG_MAX_BYTES) {
		free(text);
		return got < 0 ? msb_error_set(err, MSB_E_OS, "configuration `%s`: %s", path,
					       strerror(e))
			       : msb_error_set(
					 err, MSB_E_VALUE,
					 "configuration `%s`: not a regular file of at most %u "
					 "bytes",
					 path, CONFIG_MAX_BYTES);
	}
	json_error_t je;
	json_t *o = json_loadb(text, n, JSON_REJECT_DUPLICATES, &je);
	free(text);
	if (!json_is_object(o)) {
		json_decref(o);
		return msb_error_set(err, MSB_E_VALUE,
				     "configuration `%s`: not a JSON object%s%s (line %d)", path,
				     o ? "" : ": ", o ? "" : je.text, je.line);
	}
	c->root = o;
	if (!(c->path = strdup(path)))
		return msb_error_set(err, MSB_E_NOMEM, "out of memory");
	int r = check(c, err);
	if (r < 0)
		msb_error_wrap(err, "configuration `%s`", path);
	return r;
}

static cli_config the_config;
static bool loaded;

int cli_config_get(const cli_config **out, msb_error **err)
{
	if (loaded) {
		*out = &the_config;
		return 0;
	}
	cli_config c = {0};
	bool missing = true;
	int r = 0;
	char path[4096];
	const char *env = getenv("MSB_CONFIG");
	if (env) {
		/* Set: that file and no other; set and empty: no file at all. */
		if (*env) {
			c.found_by = "$MSB_CONFIG";
			r = load(&c, env, &missing, err);
			if (r == 0 && missing)
				r = msb_error_set(err, MSB_E_NOT_FOUND,
						  "$MSB_CONFIG names `%s`, which does not exist",
						  env);
		}
	} else {
		/* The platform's places (os.h): per-user, then system-wide. */
		const char *by = NULL;
		cli_os_config_user(path, sizeof(path), &by);
		if (path[0]) {
			c.found_by = by;
			r = load(&c, path, &missing, err);
		}
		if (r == 0 && missing) {
			cli_os_config_system(path, sizeof(path), &by);
			if (path[0]) {
				c.found_by = by;
				r = load(&c, path, &missing, err);
			}
		}
	}
	if (r < 0) {
		cli_config_clear(&c);
		return r;
	}
	if (!c.path)
		c.found_by = NULL;
	the_config = c;
	loaded = true;
	*out = &the_config;
	return 0;
}

void cli_config_clear(cli_config *c)
{
	json_decref(c->root);
	free(c->path);
	memset(c, 0, sizeof(*c));
}

/* ---- msb config show -------------------------------------------------------------------- */

enum {
	OPT_CONFIG = 1000,
	OPT_STATE,
	OPT_IMAGE,
	OPT_EGRESS_CONFIG,
	OPT_FLOOR,
	OPT_MEMORY,
	OPT_PIDS,
	OPT_CPU,
	OPT_JSON,
};

static const cli_option config_options[] = {
	CLI_OPTION_CONFIG(OPT_CONFIG),
	CLI_OPTION_STATE_DIR(OPT_STATE),
	CLI_OPTION_IMAGE(OPT_IMAGE),
	CLI_OPTION_EGRESS_CONFIG(OPT_EGRESS_CONFIG),
	CLI_OPTION_FLOOR(OPT_FLOOR),
	CLI_OPTION_MEMORY(OPT_MEMORY),
	CLI_OPTION_PIDS(OPT_PIDS),
	CLI_OPTION_CPU(OPT_CPU),
	{"json", NULL, "print one JSON object", OPT_JSON, CLI_VALUE_NONE, NULL},
	{NULL, NULL, NULL, 0, 0, NULL},
};

static int cmd_config(int argc, char **argv);
const cli_verb verb_config = {
	.name = "config",
	.summary = "show the effective configuration and where each value came from",
	.synopsis = "msb config show [--json] [FLAGS...]",
	.description =
		"Print the configuration every verb uses: the configuration file found (the\n"
		"first of $MSB_CONFIG and the per-user and system-wide files `msb --help`\n"
		"names) and how, then each value of the router, the backend and the\n"
		"defaults with its source: `flag`, `file` or `built-in default`. The flags are\n"
		"those of `msb run`; given here, they show what they change. With no backend\n"
		"named by a flag or the file, the backend is `" CLI_DEFAULT_BACKEND "`, this\n"
		"platform's default.\n",
	.options = config_options,
	.operands = "show",
	.run = cmd_config,
};

static int add(json_t *values, const char *key, json_t *value, const char *source)
{
	json_t *o = json_pack("{s:o, s:s}", "value", value ? value : json_null(), "source", source);
	return o && json_object_set_new(values, key, o) == 0 ? 0 : -1;
}

static int show(const cli_backend_flags *bf, const char *floor, const uint64_t flags[CLI_RESOURCES],
		bool as_json, msb_error **err)
{
	const cli_config *c = NULL;
	int r = cli_config_get(&c, err);
	if (r < 0)
		return r;
	json_t *values = json_object();
	json_t *rsrc = NULL, *router = NULL, *backend = NULL, *bsrc = NULL;
	if (!values)
		return msb_error_set(err, MSB_E_NOMEM, "out of memory");
	/* The router options, as the library writes them back. */
	if ((r = cli_router_object(floor, &router, &rsrc, err)) < 0)
		goto out;
	msb_router_options opts;
	char *selected = NULL, *text = json_dumps(router, JSON_COMPACT), *full = NULL;
	r = text ? msb_router_options_from_json(text, strlen(text), &opts, &selected, err)
		 : msb_error_set(err, MSB_E_NOMEM, "out of memory");
	free(text);
	if (r == 0 && (r = msb_router_options_to_json(&opts, &full, err)) == 0) {
		json_t *all = json_loads(full, 0, NULL);
		const char *key;
		json_t *v;
		json_object_foreach (all, key, v) {
			char name[128];
			snprintf(name, sizeof(name), "router.%s", key);
			json_t *s = json_object_get(rsrc, key);
			add(values, name, json_incref(v),
			    s ? json_string_value(s) : "built-in default");
		}
		json_decref(all);
	}
	free(full);
	free(selected);
	if (r < 0)
		goto out;
	/* The backend: every key it has, then the type's keys it leaves unset. */
	if ((r = cli_backend_object_sourced(bf, &backend, &bsrc, err)) < 0)
		goto out;
	const char *type = json_string_value(json_object_get(backend, "type"));
	const char *key;
	json_t *v;
	json_object_foreach (backend, key, v) {
		char name[128];
		snprintf(name, sizeof(name), "backend.%s", key);
		json_t *s = json_object_get(bsrc, key);
		add(values, name, json_incref(v), s ? json_string_value(s) : "built-in default");
	}
	const msb_backend_type *t = type ? msb_backend_type_find(type) : NULL;
	for (size_t i = 0; t && t->keys && t->keys[i]; i++) {
		if (json_object_get(backend, t->keys[i]))
			continue;
		char name[128];
		snprintf(name, sizeof(name), "backend.%s", t->keys[i]);
		add(values, name, NULL, "built-in default");
	}
	/* The spec defaults. */
	uint64_t res[CLI_RESOURCES];
	memcpy(res, flags, sizeof(res));
	cli_spec_resources(res);
	for (size_t i = 0; i < CLI_RESOURCES; i++) {
		char name[128];
		snprintf(name, sizeof(name), "defaults.resources.%s", cli_resource_keys[i]);
		json_t *fr =
			c->root ? json_object_get(json_object_get(c->root, "defaults"), "resources")
				: NULL;
		const char *src = flags[i]				      ? "flag"
				  : json_object_get(fr, cli_resource_keys[i]) ? "file"
									      : "built-in default";
		add(values, name, json_integer((json_int_t)res[i]), src);
	}
	/* Without the file: what the front ends (run, serve, mcp) keep. */
	add(values, "defaults.pool_size",
	    json_integer((json_int_t)(c->has_pool_size ? c->pool_size : CLI_FRONT_POOL_SIZE)),
	    c->has_pool_size ? "file" : "built-in default");
	add(values, "defaults.env", c->env ? json_incref(c->env) : json_object(),
	    c->env ? "file" : "built-in default");

	if (as_json) {
		json_t *top = json_pack("{s:s?, s:s?, s:O}", "file", c->path, "found_by",
					c->found_by, "values", values);
		char *out = top ? json_dumps(top, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
		if (out)
			printf("%s\n", out);
		free(out);
		json_decref(top);
	} else {
		if (c->path)
			printf("configuration file: %s (found by %s)\n", c->path, c->found_by);
		else
			printf("configuration file: none\n");
		const char *k;
		json_t *e;
		/* Sorted, so the groups read together. */
		char *sorted = json_dumps(values, JSON_SORT_KEYS | JSON_COMPACT);
		json_t *sv = sorted ? json_loads(sorted, JSON_PRESERVE_ORDER, NULL) : NULL;
		free(sorted);
		json_object_foreach (sv, k, e) {
			json_t *val = json_object_get(e, "value");
			char *vt = json_is_null(val)
					   ? NULL
					   : json_dumps(val, JSON_ENCODE_ANY | JSON_COMPACT);
			printf("%-34s %-30s %s\n", k, vt ? vt : "(unset)",
			       json_string_value(json_object_get(e, "source")));
			free(vt);
		}
		json_decref(sv);
		printf("\n(defaults.pool_size: the warm pool an `ns` backend whose JSON names no "
		       "pool_size keeps;\n0 = no pool; built in: %u for run, serve and mcp, none "
		       "for the other verbs;\ndocs/pool.md)\n",
		       CLI_FRONT_POOL_SIZE);
	}
out:
	json_decref(values);
	json_decref(router);
	json_decref(rsrc);
	json_decref(backend);
	json_decref(bsrc);
	return r;
}

static int cmd_config(int argc, char **argv)
{
	struct option opts[16];
	if (!cli_getopt_table(&verb_config, opts, 16))
		return 1;
	cli_backend_flags bf = {0};
	const char *floor = NULL;
	uint64_t flags[CLI_RESOURCES] = {0};
	bool as_json = false;
	optind = 1;
	opterr = 0;
	int c;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case OPT_CONFIG:
			bf.config = optarg;
			break;
		case OPT_STATE:
			bf.state_dir = optarg;
			break;
		case OPT_IMAGE:
			bf.image = optarg;
			break;
		case OPT_EGRESS_CONFIG:
			bf.egress_config = optarg;
			break;
		case OPT_FLOOR:
			floor = optarg;
			break;
		case OPT_MEMORY:
		case OPT_PIDS:
		case OPT_CPU:
			if (!cli_parse_count(optarg, c == OPT_MEMORY,
					     &flags[c == OPT_MEMORY ? 0
						    : c == OPT_PIDS ? 1
								    : 2]))
				return cli_usage(
					&verb_config,
					"--memory, --pids and --cpu want a positive count");
			break;
		case OPT_JSON:
			as_json = true;
			break;
		default:
			return cli_usage(&verb_config, "unknown option `%s`", argv[optind - 1]);
		}
	}
	if (optind >= argc || strcmp(argv[optind], "show") != 0)
		return cli_usage(&verb_config, "the one sub-verb is `show`");
	if (optind + 1 < argc)
		return cli_usage(&verb_config, "unexpected argument `%s`", argv[optind + 1]);
	msb_error *err = NULL;
	if (show(&bf, floor, flags, as_json, &err) < 0)
		return cli_fail(err);
	return 0;
}
