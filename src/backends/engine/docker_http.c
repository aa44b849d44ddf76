/* SPDX-License-Identifier: Apache-2.0 */
/* HTTP to the Docker Engine API over its unix socket (docker_http.h). */
#include <jansson.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "backends/engine/curl_lazy.h"
#include "docker_http.h"

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;

static void curl_init(void)
{
	curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

int msb_docker__http_init(docker_http *h, const char *socket_path, double timeout, msb_error **err)
{
	memset(h, 0, sizeof(*h));
	int lr = msb_docker__curl_load(err);
	if (lr < 0)
		return lr;
	pthread_once(&curl_once, curl_init);
	if (curl_init_rc != CURLE_OK)
		return msb_error_set(err, MSB_E_RUNTIME, "libcurl did not initialise: %s",
				     curl_easy_strerror(curl_init_rc));
	struct sockaddr_un sa;
	if (strlen(socket_path) >= sizeof(sa.sun_path))
		return msb_error_set(err, MSB_E_VALUE, "docker socket path `%s` is too long",
				     socket_path);
	h->socket_path = msb__strdup(socket_path);
	if (!h->socket_path)
		return msb__error_nomem(err);
	h->timeout = timeout;
	pthread_mutex_init(&h->lock, NULL);
	return 0;
}

void msb_docker__http_clear(docker_http *h)
{
	if (!h->socket_path)
		return;
	for (size_t i = 0; i < h->n_idle; i++)
		curl_easy_cleanup(h->idle[i]);
	pthread_mutex_destroy(&h->lock);
	free(h->socket_path);
	memset(h, 0, sizeof(*h));
}

void msb_docker__response_clear(docker_response *r)
{
	msb__buf_free(&r->body);
	free(r->path_stat);
	memset(r, 0, sizeof(*r));
}

char *msb_docker__escape(const char *s)
{
	char *e = curl_easy_escape(NULL, s, 0);
	if (!e)
		return NULL;
	char *copy = msb__strdup(e);
	curl_free(e);
	return copy;
}

/* ---- one call ------------------------------------------------------------------ */

typedef struct call {
	const docker_request *req;
	docker_response *resp;
	/* the request body */
	size_t sent;
	/* the sink's outcome */
	int sink_rc;
	bool sink_done;
	bool over_budget;
	msb_error *sink_err;
} call;

static size_t on_body(char *p, size_t size, size_t nmemb, void *ud)
{
	call *c = ud;
	size_t n = size * nmemb;
	/* The status line came first (on_header). */
	long status = c->resp->status;
	if (c->req->sink && status >= 200 && status < 300) {
		int r = c->req->sink(c->req->sink_ud, (const uint8_t *)p, n, &c->sink_err);
		if (r < 0) {
			c->sink_rc = r;
			return 0; /* abort the transfer */
		}
		if (r == DOCKER_SINK_DONE) {
			c->sink_done = true;
			return 0;
		}
		return n;
	}
	if (c->resp->body.len + n > c->req->max_body) {
		c->over_budget = true;
		return 0;
	}
	if (msb__buf_append(&c->resp->body, p, n) < 0)
		return 0;
	return n;
}

static size_t on_header(char *p, size_t size, size_t nmemb, void *ud)
{
	call *c = ud;
	size_t n = size * nmemb;
	/* The status line of each response (a 100 Continue comes first). */
	if (n > 9 && memcmp(p, "HTTP/", 5) == 0) {
		const char *sp = memchr(p, ' ', n);
		if (sp && (size_t)(sp - p) + 4 <= n)
			c->resp->status = strtol(sp + 1, NULL, 10);
		return n;
	}
	static const char key[] = "x-docker-container-path-stat:";
	if (c->req->want_path_stat && n > sizeof(key) - 1 &&
	    strncasecmp(p, key, sizeof(key) - 1) == 0 && n < 65536) {
		const char *v = p + sizeof(key) - 1;
		size_t vl = n - (sizeof(key) - 1);
		while (vl && (*v == ' ' || *v == '\t'))
			v++, vl--;
		while (vl && (v[vl - 1] == '\r' || v[vl - 1] == '\n' || v[vl - 1] == ' '))
			vl--;
		free(c->resp->path_stat);
		c->resp->path_stat = msb__strndup(v, vl);
	}
	return n;
}

static size_t on_read(char *buf, size_t size, size_t nmemb, void *ud)
{
	call *c = ud;
	const docker_request *q = c->req;
	size_t room = size * nmemb, out = 0;
	size_t total = q->head_len + q->data_len + q->tail_len;
	while (out < room && c->sent < total) {
		size_t take;
		if (c->sent < q->head_len) {
			take = q->head_len - c->sent;
			if (take > room - out)
				take = room - out;
			memcpy(buf + out, q->head + c->sent, take);
		} else if (c->sent < q->head_len + q->data_len) {
			size_t off = c->sent - q->head_len;
			take = q->data_len - off;
			if (take > room - out)
				take = room - out;
			memcpy(buf + out, q->data + off, take);
		} else {
			take = total - c->sent;
			if (take > room - out)
				take = room - out;
			memset(buf + out, 0, take);
		}
		out += take;
		c->sent += take;
	}
	return out;
}

static CURL *take_handle(docker_http *h)
{
	pthread_mutex_lock(&h->lock);
	CURL *e = h->n_idle ? h->idle[--h->n_idle] : NULL;
	pthread_mutex_unlock(&h->lock);
	if (e)
		curl_easy_reset(e);
	else
		e = curl_easy_init();
	return e;
}

static void give_handle(docker_http *h, CURL *e, bool reusable)
{
	if (reusable) {
		pthread_mutex_lock(&h->lock);
		if (h->n_idle < DOCKER_IDLE) {
			h->idle[h->n_idle++] = e;
			e = NULL;
		}
		pthread_mutex_unlock(&h->lock);
	}
	if (e)
		curl_easy_cleanup(e);
}

int msb_docker__http(docker_http *h, const docker_request *req, docker_response *resp,
		     msb_error **err)
{
	memset(resp, 0, sizeof(*resp));
	resp->body = (msb_buf)MSB_BUF_INIT;
	CURL *e = take_handle(h);
	if (!e)
		return msb__error_nomem(err);
	_cleanup_free_ char *url =
		msb__asprintf("http://docker%s%s", req->unversioned ? "" : h->api, req->path);
	if (!url) {
		give_handle(h, e, true);
		return msb__error_nomem(err);
	}
	call c = {.req = req, .resp = resp};
	struct curl_slist *hdrs = NULL;
	hdrs = curl_slist_append(hdrs, "Expect:");
	char ctype[96];
	if (req->json || req->content_type) {
		snprintf(ctype, sizeof(ctype), "Content-Type: %s",
			 req->content_type ? req->content_type : "application/json");
		hdrs = curl_slist_append(hdrs, ctype);
	}
	double t = req->timeout > 0 ? req->timeout : h->timeout;
	curl_easy_setopt(e, CURLOPT_UNIX_SOCKET_PATH, h->socket_path);
	curl_easy_setopt(e, CURLOPT_URL, url);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http");
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, &c);
	curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(e, CURLOPT_HEADERDATA, &c);
	curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)(t * 1000));
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
	/* Archives move tens of MiB: big buffers, few callbacks. */
	curl_easy_setopt(e, CURLOPT_BUFFERSIZE, 1L << 20);
	curl_easy_setopt(e, CURLOPT_UPLOAD_BUFFERSIZE, 2L << 20);
	if (strcmp(req->method, "HEAD") == 0) {
		curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
	} else if (strcmp(req->method, "GET") != 0) {
		curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, req->method);
		if (req->json) {
			curl_easy_setopt(e, CURLOPT_POSTFIELDS, req->json);
			curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE,
					 (curl_off_t)strlen(req->json));
		} else if (req->head || req->data || req->tail_len) {
			curl_easy_setopt(e, CURLOPT_UPLOAD, 1L);
			curl_easy_setopt(e, CURLOPT_READFUNCTION, on_read);
			curl_easy_setopt(e, CURLOPT_READDATA, &c);
			curl_easy_setopt(
				e, CURLOPT_INFILESIZE_LARGE,
				(curl_off_t)(req->head_len + req->data_len + req->tail_len));
		} else if (strcmp(req->method, "POST") == 0) {
			curl_easy_setopt(e, CURLOPT_POSTFIELDS, "");
			curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)0);
		}
	}
	CURLcode rc = curl_easy_perform(e);
	curl_slist_free_all(hdrs);
	long status = 0;
	curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
	if (status)
		resp->status = status;
	int r = 0;
	if (c.sink_rc < 0) {
		r = msb__error_propagate(err, TAKE_PTR(c.sink_err));
	} else if (rc == CURLE_OK || (rc == CURLE_WRITE_ERROR && c.sink_done)) {
		r = 0;
	} else if (c.over_budget) {
		r = msb_error_set(err, MSB_E_PROTOCOL,
				  "the docker engine's answer to %s %s exceeds %llu bytes",
				  req->method, req->path, (unsigned long long)req->max_body);
	} else if (rc == CURLE_OPERATION_TIMEDOUT) {
		r = msb_error_set(err, MSB_E_TIMEOUT,
				  "the docker engine did not answer %s %s within %g s", req->method,
				  req->path, t);
	} else if (rc == CURLE_WRITE_ERROR && resp->body.oom) {
		r = msb__error_nomem(err);
	} else {
		r = msb_error_set(err, MSB_E_OS,
				  "the docker engine at `%s` is not reachable (%s %s): %s",
				  h->socket_path, req->method, req->path, curl_easy_strerror(rc));
	}
	msb_error_free(c.sink_err);
	give_handle(h, e, r == 0 && !c.sink_done);
	if (r < 0)
		msb_docker__response_clear(resp);
	return r;
}

char *msb_docker__error_text(const docker_response *r)
{
	json_error_t je;
	json_t *doc =
		r->body.len ? json_loadb((const char *)r->body.data, r->body.len, 0, &je) : NULL;
	const char *m = doc ? json_string_value(json_object_get(doc, "message")) : NULL;
	char *out = m ? msb__strdup(m) : msb__asprintf("HTTP status %ld", r->status);
	json_decref(doc);
	return out;
}

int msb_docker__connect(const docker_http *h)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	memcpy(sa.sun_path, h->socket_path, strlen(h->socket_path) + 1);
	while (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		if (errno == EINTR)
			continue;
		int e = -errno;
		close(fd);
		return e;
	}
	return fd;
}
