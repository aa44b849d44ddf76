/* SPDX-License-Identifier: Apache-2.0 */
/*
 * HTTP to the Docker Engine API over its unix socket: libcurl for the
 * request/response calls (a few connections kept alive), and a plain socket
 * for exec's hijacked stream, which libcurl cannot hand over once upgraded.
 * Every response body is read against a budget stated by the caller.
 */
#ifndef MSB_ENGINE_DOCKER_HTTP_H
#define MSB_ENGINE_DOCKER_HTTP_H

#include <pthread.h>

#include "engine.h"

#define DOCKER_IDLE 4

typedef struct docker_http {
	char *socket_path;
	char api[16]; /* "/v1.41", or "" before negotiation */
	double timeout;
	pthread_mutex_t lock;
	void *idle[DOCKER_IDLE]; /* CURL * */
	size_t n_idle;
} docker_http;

int msb_docker__http_init(docker_http *h, const char *socket_path, double timeout, msb_error **err);
void msb_docker__http_clear(docker_http *h);

/* A streaming body sink: 0 to go on, a negative MSB_E_* to stop (with
 * *err set), or DOCKER_SINK_DONE to hang up because it has all it wants. */
#define DOCKER_SINK_DONE 1
typedef int (*docker_sink)(void *ud, const uint8_t *p, size_t n, msb_error **err);

typedef struct docker_request {
	const char *method; /* "GET", "POST", "PUT", "DELETE", "HEAD" */
	const char *path;   /* after the version prefix, query included */
	bool unversioned;   /* /_ping and /version */
	const char *json;   /* a JSON body, or NULL */
	/* Or a body in three parts (head, data, zero tail), for archives. */
	const uint8_t *head;
	size_t head_len;
	const uint8_t *data;
	size_t data_len;
	size_t tail_len;
	const char *content_type;
	uint64_t max_body; /* bytes of response body kept; past it MSB_E_PROTOCOL */
	docker_sink sink;  /* instead of keeping the body (2xx only) */
	void *sink_ud;
	double timeout;	     /* 0 = the client's */
	bool want_path_stat; /* keep X-Docker-Container-Path-Stat */
} docker_request;

typedef struct docker_response {
	long status;
	msb_buf body;
	char *path_stat; /* base64 JSON, when asked for and sent */
} docker_response;

void msb_docker__response_clear(docker_response *r);

/* One call. MSB_E_OS when the engine cannot be reached (the message names
 * the socket), MSB_E_TIMEOUT past the bound, MSB_E_PROTOCOL for a body over
 * budget; any HTTP status is returned in r->status for the caller to judge. */
int msb_docker__http(docker_http *h, const docker_request *req, docker_response *r,
		     msb_error **err);

/* The engine's error text from a JSON body {"message": ...}, or the status. */
char *msb_docker__error_text(const docker_response *r);

/* URL-escaped copy of s. */
char *msb_docker__escape(const char *s);

/* A connected socket to the engine (O_CLOEXEC, blocking); -errno. */
int msb_docker__connect(const docker_http *h);

#endif
