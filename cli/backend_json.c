/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The backend JSON a verb builds its backend from (docs/policy.md, "Backend
 * JSON"): --config's object, or {"type": TYPE}, with the flags that name a
 * key of it written over the file. Every verb that makes a backend comes
 * here and then to msb_backend_from_json or msb_router_from_json, so a
 * backend means the same thing in every front end.
 */
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli.h"

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

int cli_backend_object(const cli_backend_flags *f, json_t **out, msb_error **err)
{
	json_t *o = NULL;
	int r = 0;
	if (f->config)
		r = load_file_object("--config", f->config, &o, err);
	else if (!(o = json_object()))
		r = msb_error_set(err, MSB_E_NOMEM, "out of memory");
	if (r < 0)
		return r;

	json_t *type = json_object_get(o, "type");
	if (!type && f->type)
		r = set_new(o, "type", json_string(f->type), err);
	else if (!type && f->config)
		r = msb_error_set(err, MSB_E_VALUE, "--config `%s` names no backend `type`",
				  f->config);
	else if (!type)
		r = msb_error_set(err, MSB_E_VALUE, "no backend type given");
	else if (f->type && (!json_is_string(type) || strcmp(json_string_value(type), f->type)))
		r = msb_error_set(err, MSB_E_VALUE, "--config `%s` is not a `%s` backend",
				  f->config, f->type);
	/* The flags over the file; a type without such a key refuses it. */
	if (r == 0 && f->state_dir)
		r = set_new(o, "state_dir", json_string(f->state_dir), err);
	if (r == 0 && f->image)
		r = set_new(o, "image", json_string(f->image), err);
	if (r == 0 && f->egress_config) {
		json_t *eg = NULL;
		r = load_file_object("--egress-config", f->egress_config, &eg, err);
		if (r == 0)
			r = set_new(o, "egress", eg, err);
	}
	if (r < 0) {
		json_decref(o);
		return r;
	}
	*out = o;
	return 0;
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
	if (r < 0 && f->config)
		msb_error_wrap(err, "--config `%s`", f->config);
	return r;
}
