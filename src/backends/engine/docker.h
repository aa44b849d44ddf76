/* SPDX-License-Identifier: Apache-2.0 */
/* The `docker` transport: the Engine API (docker.c, docker_exec.c). */
#ifndef MSB_ENGINE_DOCKER_H
#define MSB_ENGINE_DOCKER_H

#include "docker_http.h"

typedef struct docker_transport {
	docker_http http;
	char *host;	   /* as configured, for messages */
	char *version;	   /* the engine's own version */
	char *api_version; /* the one spoken, "1.41" */
	char *os_type;	   /* "linux", "windows" */
} docker_transport;

/* GET /version and pick the API version to speak (msb_docker_backend_new). */
int msb_docker__negotiate(docker_transport *d, msb_error **err);

/* The exec (docker_exec.c). */
int msb_docker__exec(void *t, const char *ref, const engine_exec *x, msb_exec_result *out,
		     msb_error **err);

/* "Container `ref` is gone" when the engine says it has no such container
 * (404 on a container path): a handle bound to a disposed instance. */
int msb_docker__container_error(const docker_response *r, const char *ref, const char *what,
				msb_error **err);

/* Force-remove (DELETE ?force=1). */
int msb_docker__remove(void *t, const char *ref, msb_error **err);

#endif
