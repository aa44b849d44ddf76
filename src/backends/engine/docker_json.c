/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The backend type `docker` (msb/backend.h): a row of the backend-type table
 * over the backend's own JSON reader and doctor (msb/engine.h). Linux only
 * (docs/windows.md): the Engine API over a unix socket.
 */
#include <msb/engine.h>

#include "backends/types.h"
#include "engine.h"

static const char *const docker_keys[] = {
	"name",		"host",		  "image",  "api_timeout", "egress_proxy_image",
	"egress_proxy", "egress_network", "egress", NULL};

static int docker_from_json(const msb_backend_json *in, msb_backend **out, msb_error **err)
{
	return msb_docker_backend_from_json(in->json, in->len, out, err);
}

/* With no JSON: DOCKER_HOST or the default socket. */
static int docker_doctor(msb_backend_probe *out, msb_error **err)
{
	return msb_engine__doctor_verdict(msb_docker_doctor, out, err);
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
