/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The backend types `docker` and `wslc` (msb/backend.h): rows of the
 * backend-type table over the engine backends' own JSON readers and doctors
 * (msb/engine.h).
 */
#include <msb/engine.h>

#include "backends/types.h"
#include "util/util.h"

static const char *const docker_keys[] = {
	"name",		"host",		  "image",  "api_timeout", "egress_proxy_image",
	"egress_proxy", "egress_network", "egress", NULL};
static const char *const wslc_keys[] = {"name",	 "wslc_path",	       "command_timeout",
					"image", "egress_proxy_image", NULL};

static int docker_from_json(const msb_backend_json *in, msb_backend **out, msb_error **err)
{
	return msb_docker_backend_from_json(in->json, in->len, out, err);
}

static int wslc_from_json(const msb_backend_json *in, msb_backend **out, msb_error **err)
{
	return msb_wslc_backend_from_json(in->json, in->len, out, err);
}

/* A doctor with no JSON asks about the defaults: DOCKER_HOST or the
 * default socket; `wslc` on PATH. */
static int verdict(int (*doctor)(const char *, size_t, bool *, char **, msb_error **),
		   msb_backend_probe *out, msb_error **err)
{
	bool ok = false;
	_cleanup_free_ char *reason = NULL;
	int r = doctor(NULL, 0, &ok, &reason, err);
	if (r < 0)
		return r;
	return msb_backends__verdict(out, ok, reason ? reason : "", err);
}

static int docker_doctor(msb_backend_probe *out, msb_error **err)
{
	return verdict(msb_docker_doctor, out, err);
}

static int wslc_doctor(msb_backend_probe *out, msb_error **err)
{
	return verdict(msb_wslc_doctor, out, err);
}

const msb_backend_type msb_docker__type = {
	.version = MSB_BACKEND_TYPE_VERSION,
	.name = "docker",
	.summary = "a container per sandbox through the Docker Engine API on a unix socket "
		   "(dockerd, podman's API service) (container)",
	.keys = docker_keys,
	.from_json = docker_from_json,
	.doctor = docker_doctor,
};

const msb_backend_type msb_wslc__type = {
	.version = MSB_BACKEND_TYPE_VERSION,
	.name = "wslc",
	.summary = "a container per sandbox through the wslc CLI contract (container)",
	.keys = wslc_keys,
	.from_json = wslc_from_json,
	.doctor = wslc_doctor,
};
