/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The backend type `oci` (msb/backend.h): msb_oci_options from backend JSON,
 * by the same names; the doctor is oci_doctor.c's.
 */
#include <msb/oci_backend.h>

#include "backends/oci/oci_int.h"
#include "backends/types.h"
#include "util/json.h"

static const char *const oci_keys[] = {
	"name",		 "runtime",	 "runtime_path", "platform",   "state_dir",
	"image",	 "memory_bytes", "pids_max",	 "cpu_millis", "writable_bytes",
	"start_timeout", "pool_size",	 "egress",	 NULL,
};

static int oci_from_json(const msb_backend_json *in, msb_backend **out, msb_error **err)
{
	_cleanup_json_ json_t *obj = NULL;
	int r = msb__json_load_object(in->json, in->len, in->where, &obj, err);
	if (r < 0)
		return r;
	const char *w = in->where;
	msb_oci_options o = MSB_OCI_OPTIONS_INIT;
	if ((r = msb__json_get_string(obj, "name", w, &o.name, NULL, err)) < 0 ||
	    (r = msb__json_get_string(obj, "runtime", w, &o.runtime, NULL, err)) < 0 ||
	    (r = msb__json_get_string(obj, "runtime_path", w, &o.runtime_path, NULL, err)) < 0 ||
	    (r = msb__json_get_string(obj, "platform", w, &o.platform, NULL, err)) < 0 ||
	    (r = msb__json_get_string(obj, "state_dir", w, &o.state_root, NULL, err)) < 0 ||
	    (r = msb__json_get_string(obj, "image", w, &o.image, NULL, err)) < 0 ||
	    (r = msb__json_get_u64(obj, "memory_bytes", w, &o.memory_bytes, NULL, err)) < 0 ||
	    (r = msb__json_get_u64(obj, "pids_max", w, &o.pids_max, NULL, err)) < 0 ||
	    (r = msb__json_get_u64(obj, "cpu_millis", w, &o.cpu_millis, NULL, err)) < 0 ||
	    (r = msb__json_get_u64(obj, "writable_bytes", w, &o.writable_bytes, NULL, err)) < 0 ||
	    (r = msb__json_get_double(obj, "start_timeout", w, &o.start_timeout, NULL, err)) < 0)
		return r;
	/* pool_size and egress as the ns type reads them */
	_cleanup_free_ char *egress_text = NULL;
	if ((r = msb_ns__json_pool_egress(obj, w, &o.pool_size, &egress_text, err)) < 0)
		return r;
	o.egress_config = egress_text;
	r = msb_oci_backend_new(&o, out, err);
	return r < 0 ? msb_error_wrap(err, "%s", w) : 0;
}

const msb_backend_type msb_oci__type = {
	.version = MSB_BACKEND_TYPE_VERSION,
	.name = "oci",
	.summary = "an OCI runtime around msb-agent: runsc (gVisor, hardened_container) or crun "
		   "(container), held by a per-sandbox msb-oci-shim",
	.keys = oci_keys,
	.from_json = oci_from_json,
	.doctor = msb_oci__doctor,
};
