/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A spec's env (issue 16): the environment every exec of a sandbox acquired
 * with the spec starts from, an exec's own entries winning name by name. The
 * same check as every exec's env (msb_exec_env_check) runs at build, so a
 * reserved name is refused with the spec, before any sandbox exists.
 */
#include <msb/sandbox.h>
#include <msb/spec.h>

#include "core/policy/spec_int.h"
#include "util/util.h"

size_t msb_spec_env_count(const msb_spec *s)
{
	return s ? s->f.n_env : 0;
}

void msb_spec_env(const msb_spec *s, size_t i, const char **name, const char **value)
{
	const struct label *l = s && i < s->f.n_env ? &s->f.env[i] : NULL;
	if (name)
		*name = l ? l->key : NULL;
	if (value)
		*value = l ? l->value : NULL;
}

void msb__env_free(char **env)
{
	for (size_t i = 0; env && env[i]; i++)
		free(env[i]);
	free(env);
}

/* The map as NULL-terminated NAME=VALUE strings (*out NULL when empty). */
static int entries(const struct label *map, size_t n, char ***out, msb_error **err)
{
	*out = NULL;
	if (n == 0)
		return 0;
	if (n > MSB_EXEC_ENV_MAX)
		return msb_error_set(err, MSB_E_VALUE, "env: more than %u entries",
				     MSB_EXEC_ENV_MAX);
	char **env = calloc(n + 1, sizeof(*env));
	if (!env)
		return msb__error_nomem(err);
	for (size_t i = 0; i < n; i++) {
		if (strchr(map[i].key, '=')) {
			msb__env_free(env);
			return msb_error_set(err, MSB_E_VALUE, "env: the name `%.80s` holds `=`",
					     map[i].key);
		}
		if (!(env[i] = msb__asprintf("%s=%s", map[i].key, map[i].value))) {
			msb__env_free(env);
			return msb__error_nomem(err);
		}
	}
	*out = env;
	return 0;
}

int msb__spec_env_validate(const struct spec_fields *f, msb_error **err)
{
	char **env = NULL;
	int r = entries(f->env, f->n_env, &env, err);
	if (r == 0)
		r = msb_exec_env_check((const char *const *)env, err);
	msb__env_free(env);
	return r;
}

int msb__spec_env_entries(const msb_spec *s, char ***out, msb_error **err)
{
	return entries(s ? s->f.env : NULL, s ? s->f.n_env : 0, out, err);
}
