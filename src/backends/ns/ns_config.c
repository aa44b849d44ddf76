/* SPDX-License-Identifier: Apache-2.0 */
/* The shim's configuration for one sandbox. */
#include "ns_int.h"
#include "util/json.h"

int msb_ns__shim_config(const ns_backend *b, const msb_spec *spec, const char *work_dir,
			const char *name, char **out, msb_error **err)
{
	json_t *o = json_pack("{s:s, s:s}", "work_dir", work_dir, "hostname", name);
	if (!o)
		return msb__error_nomem(err);
	int r = msb_ns__config_image(o, b, err);
	if (r == 0)
		r = msb_ns__config_limits(o, b, spec, err);
	if (r < 0) {
		json_decref(o);
		return r;
	}
	char *text = msb__json_dump(o);
	json_decref(o);
	if (!text)
		return msb__error_nomem(err);
	*out = text;
	return 0;
}
