/* SPDX-License-Identifier: Apache-2.0 */
/* The shim's configuration for one sandbox. */
#include "ns_int.h"
#include "util/json.h"

int msb_ns__shim_config_obj(const ns_backend *b, const msb_spec *spec, const char *work_dir,
			    json_t **out, msb_error **err)
{
	json_t *o = json_pack("{s:s}", "work_dir", work_dir);
	if (!o)
		return msb__error_nomem(err);
	int r = msb_ns__config_image(o, b, err);
	if (r == 0)
		r = msb_ns__config_limits(o, b, spec, err);
	if (r < 0) {
		json_decref(o);
		return r;
	}
	*out = o;
	return 0;
}

int msb_ns__shim_config_text(json_t *cfg, const char *hostname, char **out, msb_error **err)
{
	if (json_object_set_new(cfg, "hostname", json_string(hostname)) < 0)
		return msb__error_nomem(err);
	char *text = msb__json_dump(cfg);
	json_object_del(cfg, "hostname");
	if (!text)
		return msb__error_nomem(err);
	*out = text;
	return 0;
}

int msb_ns__shim_config(const ns_backend *b, const msb_spec *spec, const char *work_dir,
			const char *name, char **out, msb_error **err)
{
	json_t *o = NULL;
	int r = msb_ns__shim_config_obj(b, spec, work_dir, &o, err);
	if (r == 0)
		r = msb_ns__shim_config_text(o, name, out, err);
	json_decref(o);
	return r;
}
