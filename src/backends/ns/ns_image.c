/* SPDX-License-Identifier: Apache-2.0 */
/* Images the ns backend serves: `host` and `dir:PATH`. */
#include "ns_int.h"

int msb_ns__image_check(const char *image, msb_error **err)
{
	if (strcmp(image, "host") == 0)
		return 0;
	if (strncmp(image, "dir:", 4) == 0 && image[4] == '/')
		return 0;
	return msb_error_set(err, MSB_E_VALUE, "ns image `%s`: expected `host` or `dir:/PATH`",
			     image);
}

int msb_ns__config_image(json_t *cfg, const ns_backend *b, msb_error **err)
{
	if (json_object_set_new(cfg, "image", json_string(b->image)) < 0)
		return msb__error_nomem(err);
	return 0;
}
