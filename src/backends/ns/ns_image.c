/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Images the ns backend serves: `host`, `dir:PATH` and `oci:PATH[:TAG]`. An
 * OCI layout is resolved, verified and unpacked here, in the host library,
 * before the shim starts (oci_layout.c): the shim gets `"image": "oci"` with
 * the unpacked layer directories, and a bad layout fails the acquire.
 */
#include <unistd.h>

#include "backends/ns/boundary/boundary.h"
#include "backends/ns/oci.h"
#include "ns_int.h"

int msb_ns__image_check(const char *image, msb_error **err)
{
	if (strcmp(image, "host") == 0)
		return 0;
	if (strncmp(image, "dir:", 4) == 0 && image[4] == '/')
		return 0;
	if (strncmp(image, "oci:", 4) == 0) {
		_cleanup_free_ char *path = NULL, *tag = NULL;
		return msb_ns__oci_parse_ref(image, &path, &tag, err);
	}
	return msb_error_set(err, MSB_E_VALUE,
			     "ns image `%s`: expected `host`, `dir:/PATH` or `oci:/PATH[:TAG]`",
			     image);
}

/* <state root>/images, next to <state root>/ns. */
static char *cache_root(const ns_backend *b)
{
	const char *slash = strrchr(b->state_dir, '/');
	if (!slash || slash == b->state_dir)
		return strdup("/images");
	return msb__asprintf("%.*s/images", (int)(slash - b->state_dir), b->state_dir);
}

int msb_ns__config_image(json_t *cfg, const ns_backend *b, msb_error **err)
{
	if (strncmp(b->image, "oci:", 4) != 0) {
		if (json_object_set_new(cfg, "image", json_string(b->image)) < 0)
			return msb__error_nomem(err);
		return 0;
	}
	_cleanup_free_ char *cache = cache_root(b);
	if (!cache)
		return msb__error_nomem(err);
	/* Root maps guest ids onto the default range (the shim's uid_base);
	 * an ordinary user's guest root is the user. */
	msb_oci_owner owner = {.shift = geteuid() == 0, .id_base = MSB_NS_DEFAULT_ID_BASE};
	_cleanup_strv_ char **layers = NULL;
	size_t n = 0;
	msb_oci_progress progress = {.fn = b->progress, .userdata = b->progress_userdata};
	int r = msb_ns__oci_prepare(b->image, cache, &owner, &progress, &layers, &n, err);
	if (r < 0)
		return r;
	json_t *arr = json_array();
	if (!arr)
		return msb__error_nomem(err);
	for (size_t i = 0; i < n; i++)
		if (json_array_append_new(arr, json_string(layers[i])) < 0) {
			json_decref(arr);
			return msb__error_nomem(err);
		}
	if (json_object_set_new(cfg, "layers", arr) < 0 ||
	    json_object_set_new(cfg, "image", json_string("oci")) < 0)
		return msb__error_nomem(err);
	return 0;
}
