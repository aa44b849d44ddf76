/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The backend type `wslc` (msb/backend.h): a row of the backend-type table
 * over the backend's own JSON reader and doctor (msb/engine.h), on Linux and
 * on Windows (docs/windows.md).
 */
#include <msb/engine.h>

#include "backends/types.h"
#include "engine.h"

static const char *const wslc_keys[] = {"name",	 "wslc_path",	       "command_timeout",
					"image", "egress_proxy_image", NULL};

static int wslc_from_json(const msb_backend_json *in, msb_backend **out, msb_error **err)
{
	return msb_wslc_backend_from_json(in->json, in->len, out, err);
}

/* With no JSON: `wslc` on PATH. */
static int wslc_doctor(msb_backend_probe *out, msb_error **err)
{
	return msb_engine__doctor_verdict(msb_wslc_doctor, out, err);
}

const msb_backend_type msb_wslc__type = {
	.version = MSB_BACKEND_TYPE_VERSION,
	.name = "wslc",
	.summary = "a container per sandbox through the wslc CLI contract (container)",
	.keys = wslc_keys,
	.from_json = wslc_from_json,
	.doctor = wslc_doctor,
};
