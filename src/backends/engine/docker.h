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
	/* podman's compatible service (its /version names "Podman Engine"),
	 * and then its network stack ("cni", "netavark"; "unknown"). */
	bool podman;
	char *net_backend;
	/* The allowlist topology (docker_egress.c), when configured. */
	char *proxy_image;  /* "<repo>:<sha12>", msb's proxy imported */
	char *outbound_esc; /* the proxy's outbound network, URL-escaped */
} docker_transport;

/* GET /version and pick the API version to speak (msb_docker_backend_new). */
int msb_docker__negotiate(docker_transport *d, msb_error **err);

/* podman only: d->net_backend from GET /libpod/info (docker_egress.c). */
int msb_docker__podman_network(docker_transport *d, msb_error **err);
/* Why this engine cannot hold the allowlist topology (newly allocated), or
 * NULL when it can (dockerd). */
char *msb_docker__allowlist_refusal(const docker_transport *d);

/* The exec (docker_exec.c). */
int msb_docker__exec(void *t, const char *ref, const engine_exec *x, msb_exec_result *out,
		     msb_error **err);

/* POST /containers/{ref}/exec: the exec's id (malloc()ed). */
int msb_docker__exec_create(docker_transport *d, const char *ref, const engine_exec *x, char **eid,
			    msb_error **err);
/* POST /exec/{eid}/start on a fresh connection the engine hijacks: the fd,
 * the response head read and checked, bytes past it appended to rest. */
int msb_docker__exec_hijack(docker_transport *d, const char *eid, msb_buf *rest, msb_error **err);

/* The kept agent stream (docker_stream.c, engine_transport_ops.stream_open). */
int msb_docker__stream_open(void *t, const char *ref, const char *const *argv, engine_stream **out,
			    int *fd, msb_error **err);
void msb_docker__stream_close(engine_stream *s);
/* The relay alone, on a connection already hijacked (taken, closed on
 * failure too) and the bytes read past its response head. */
int msb_docker__stream_start(int engine_fd, const uint8_t *pending, size_t n_pending,
			     engine_stream **out, int *fd, msb_error **err);

/* "Container `ref` is gone" when the engine says it has no such container
 * (404 on a container path): a handle bound to a disposed instance. */
int msb_docker__container_error(const docker_response *r, const char *ref, const char *what,
				msb_error **err);

/* The container's State.Pid, 0 when not running (engine_transport_ops.pid). */
int64_t msb_docker__pid(void *t, const char *ref);

/* Force-remove (DELETE ?force=1). */
int msb_docker__remove(void *t, const char *ref, msb_error **err);
/* docker_inspect.c: GET /changes and /top; GraphDriver.Data.MergedDir. */
int msb_docker__fingerprint(void *t, const char *ref, bool *supported, msb_fingerprint *out,
			    msb_error **err);
int msb_docker__host_root(void *t, const char *ref, char **out, msb_error **err);

/* The archive read of one regular file (engine_transport_ops.read). */
int msb_docker__read(void *t, const char *ref, const char *abs, uint64_t max_bytes, uint8_t **data,
		     size_t *len, msb_error **err);

/* ---- the allowlist topology (docker_egress.c) ---- */

/* Import msb's proxy from its static binary as d->proxy_image, unless the
 * engine has that image already. */
int msb_docker__proxy_image(docker_transport *d, const char *repo, const char *binary,
			    msb_error **err);
/* The engine_transport_ops of the topology. */
int msb_docker__net_create(void *t, const char *name, char *const *labels, msb_error **err);
int msb_docker__net_remove(void *t, const char *name, msb_error **err);
int msb_docker__net_list(void *t, char *const *labels, engine_container **out, size_t *n,
			 msb_error **err);
int msb_docker__proxy_ensure(void *t, const engine_proxy *p, bool *kept, msb_buf *records,
			     msb_error **err);
int msb_docker__proxy_records(void *t, const char *ref, bool final, msb_buf *out, msb_error **err);

#endif
