/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The allowlist topology on the Docker Engine API (engine_egress.c has the
 * core, docs/internals/engine.md the picture): msb's proxy image imported
 * from the static msb-egress-proxy binary as a one-file image (no registry,
 * no base image), internal networks, the proxy container and its records.
 */
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "docker.h"
#include "egress/egress.h"
#include "util/json.h"
#include "util/sha256.h"

#define SMALL_BODY (64u << 10)
#define INSPECT_BODY (4u << 20)
#define LIST_BODY (16u << 20)
/* The proxy binary is a few MiB; a file past this is not it. */
#define PROXY_BINARY_MAX (64u << 20)
#define PROXY_PATH "/msb-egress-proxy"
#define PROXY_LOG "/log/egress.log"
/* What the proxy container may use: its tunnels' buffers and threads. */
#define PROXY_MEMORY (128ull << 20)
#define PROXY_PIDS 256
/* Waiting for "listening" (21.21: the reference polls 20 x 0.25 s). */
#define LISTEN_WAIT_MS 10000
#define LISTEN_POLL_MS 50
#define LOGS_BODY (256u << 10)
/* The records a proxy may hold between two reads, and the tar around them. */
#define RECORDS_MAX (MSB_EGRESS_LOG_MAX + MSB_EGRESS_RECORD_MAX)

static int call(docker_transport *d, const char *method, const char *path, const char *json,
		uint64_t max_body, docker_response *r, msb_error **err)
{
	docker_request q = {.method = method, .path = path, .json = json, .max_body = max_body};
	return msb_docker__http(&d->http, &q, r, err);
}

static json_t *labels_object(char *const *labels)
{
	json_t *o = json_object();
	for (char *const *p = labels; o && p && *p; p++) {
		const char *eq = strchr(*p, '=');
		if (!eq)
			continue;
		_cleanup_free_ char *k = msb__strndup(*p, (size_t)(eq - *p));
		if (!k || json_object_set_new(o, k, json_string(eq + 1)) < 0) {
			json_decref(o);
			return NULL;
		}
	}
	return o;
}

static int engine_refused(const docker_response *r, const char *what, msb_error **err)
{
	_cleanup_free_ char *text = msb_docker__error_text(r);
	return msb_error_set(err, MSB_E_RUNTIME, "%s: %s", what, text ? text : "refused");
}

/* ---- which engine can hold the topology ---------------------------------------------- */

/* podman's network stack, from its own API (GET /libpod/info,
 * host.networkBackend); "unknown" when it does not say. */
int msb_docker__podman_network(docker_transport *d, msb_error **err)
{
	docker_response r;
	docker_request q = {.method = "GET",
			    .path = "/libpod/info",
			    .unversioned = true,
			    .max_body = INSPECT_BODY};
	msb_error *e = NULL;
	int rc = msb_docker__http(&d->http, &q, &r, &e);
	msb_error_free(e);
	json_error_t je;
	json_t *doc = rc == 0 && r.status == 200
			      ? json_loadb((const char *)r.body.data, r.body.len, 0, &je)
			      : NULL;
	const char *nb =
		json_string_value(json_object_get(json_object_get(doc, "host"), "networkBackend"));
	d->net_backend = msb__strdup(nb && *nb ? nb : "unknown");
	json_decref(doc);
	if (rc == 0)
		msb_docker__response_clear(&r);
	return d->net_backend ? 0 : msb__error_nomem(err);
}

char *msb_docker__allowlist_refusal(const docker_transport *d)
{
	if (!d->podman)
		return NULL;
	if (strcmp(d->net_backend, "cni") == 0)
		return msb__strdup(
			"podman with CNI networks cannot hold the allowlist topology: an internal "
			"network has no name service (the workload cannot name its proxy) and "
			"the CNI firewall plugin's chains outlive the networks in the host's "
			"packet filter");
	return msb__asprintf("podman with `%s` networks: the allowlist topology is not "
			     "verified there, so it is refused",
			     d->net_backend);
}

/* ---- the proxy image ---------------------------------------------------------------- */

static int read_binary(const char *path, msb_buf *out, msb_error **err)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return msb_error_set(
			err, MSB_E_VALUE,
			"docker: egress_proxy `%s`: %s (build msb-egress-proxy, or set "
			"$MSB_EGRESS_PROXY)",
			path, strerror(errno));
	struct stat st;
	int r = 0;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size <= 0 ||
	    st.st_size > (off_t)PROXY_BINARY_MAX)
		r = msb_error_set(err, MSB_E_VALUE,
				  "docker: egress_proxy `%s` is not the proxy's static binary",
				  path);
	else if (msb__buf_reserve(out, (size_t)st.st_size) < 0)
		r = msb__error_nomem(err);
	while (r == 0 && out->len < (size_t)st.st_size) {
		ssize_t n = read(fd, out->data + out->len, (size_t)st.st_size - out->len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			r = msb_error_set(err, MSB_E_OS, "docker: reading `%s`: %s", path,
					  n < 0 ? strerror(errno) : "short read");
		else
			out->len += (size_t)n;
	}
	close(fd);
	return r;
}

/*
 * "<repo>:<first 12 hex of the binary's SHA-256>": present in the engine, or
 * imported now from a tar of the binary and an empty /log
 * (POST /images/create?fromSrc=-). A changed binary is a new tag; nothing is
 * pulled and nothing else is in the image.
 */
int msb_docker__proxy_image(docker_transport *d, const char *repo, const char *binary,
			    msb_error **err)
{
	msb_buf bin = MSB_BUF_INIT;
	int r = read_binary(binary, &bin, err);
	if (r < 0) {
		msb__buf_free(&bin);
		return r;
	}
	char hex[65];
	msb__sha256_hex(bin.data, bin.len, hex);
	d->proxy_image = msb__asprintf("%s:%.12s", repo, hex);
	_cleanup_free_ char *esc = d->proxy_image ? msb_docker__escape(d->proxy_image) : NULL;
	_cleanup_free_ char *ipath = esc ? msb__asprintf("/images/%s/json", esc) : NULL;
	if (!ipath) {
		msb__buf_free(&bin);
		return msb__error_nomem(err);
	}
	docker_response resp;
	r = call(d, "GET", ipath, NULL, INSPECT_BODY, &resp, err);
	long status = r == 0 ? resp.status : 0;
	if (r == 0)
		msb_docker__response_clear(&resp);
	if (r < 0 || status == 200) {
		msb__buf_free(&bin);
		return r;
	}
	msb_buf tar = MSB_BUF_INIT;
	r = msb_engine__tar_add(&tar, &PROXY_PATH[1], '0', 0755, bin.data, bin.len, err);
	msb__buf_free(&bin);
	if (r == 0)
		r = msb_engine__tar_add(&tar, "log", '5', 0700, NULL, 0, err);
	if (r == 0)
		r = msb_engine__tar_end(&tar, err);
	/* The tag inside `repo` (the API allows it): podman ignores `tag`. */
	_cleanup_free_ char *path = msb__asprintf("/images/create?fromSrc=-&repo=%s", esc);
	if (r == 0 && !path)
		r = msb__error_nomem(err);
	if (r < 0) {
		msb__buf_free(&tar);
		return r;
	}
	docker_request q = {.method = "POST",
			    .path = path,
			    .content_type = "application/x-tar",
			    .head = tar.data,
			    .head_len = tar.len,
			    .max_body = SMALL_BODY,
			    .timeout = 120};
	r = msb_docker__http(&d->http, &q, &resp, err);
	msb__buf_free(&tar);
	if (r < 0)
		return msb_error_wrap(err, "docker: importing the egress proxy image");
	/* The import reports its errors in the stream, with a 200. */
	if (resp.status != 200 ||
	    (msb__buf_puts(&resp.body, "") == 0 && strstr((const char *)resp.body.data, "\"error")))
		r = msb_error_set(err, MSB_E_RUNTIME,
				  "docker: the engine would not import the egress proxy image "
				  "`%s`: %.300s",
				  d->proxy_image,
				  resp.body.data ? (const char *)resp.body.data : "");
	msb_docker__response_clear(&resp);
	return r;
}

/* ---- networks ------------------------------------------------------------------------- */

int msb_docker__net_create(void *t, const char *name, char *const *labels, msb_error **err)
{
	docker_transport *d = t;
	/* Internal: no route out. inhibit_ipv4: the host has no address on it,
	 * so a workload cannot reach the host's own services through it.
	 * CheckDuplicate: an engine before API 1.44 would make a second one. */
	json_t *body =
		json_pack("{s:s, s:s, s:b, s:b, s:o, s:{s:s}}", "Name", name, "Driver", "bridge",
			  "Internal", 1, "CheckDuplicate", 1, "Labels", labels_object(labels),
			  "Options", "com.docker.network.bridge.inhibit_ipv4", "true");
	_cleanup_free_ char *json = body ? msb__json_dump(body) : NULL;
	json_decref(body);
	if (!json)
		return msb__error_nomem(err);
	docker_response r;
	int rc = call(d, "POST", "/networks/create", json, SMALL_BODY, &r, err);
	if (rc < 0)
		return rc;
	_cleanup_free_ char *text = r.status == 500 ? msb_docker__error_text(&r) : NULL;
	/* podman answers a taken name with a 500 that says so. */
	if (r.status == 409 || (text && strstr(text, "network already exists")))
		rc = ENGINE_EXISTS;
	else if (r.status != 201 && r.status != 200)
		rc = engine_refused(&r, "create network", err);
	msb_docker__response_clear(&r);
	return rc;
}

int msb_docker__net_remove(void *t, const char *name, msb_error **err)
{
	docker_transport *d = t;
	_cleanup_free_ char *esc = msb_docker__escape(name);
	_cleanup_free_ char *path = esc ? msb__asprintf("/networks/%s", esc) : NULL;
	if (!path)
		return msb__error_nomem(err);
	docker_response r;
	int rc = call(d, "DELETE", path, NULL, SMALL_BODY, &r, err);
	if (rc < 0)
		return rc;
	if (r.status != 204 && r.status != 200 && r.status != 404)
		rc = engine_refused(&r, "remove network", err);
	msb_docker__response_clear(&r);
	return rc;
}

int msb_docker__net_list(void *t, char *const *labels, engine_container **out, size_t *n,
			 msb_error **err)
{
	docker_transport *d = t;
	json_t *lv = json_array();
	for (char *const *p = labels; lv && p && *p; p++)
		json_array_append_new(lv, json_string(*p));
	json_t *filters = json_pack("{s:o}", "label", lv);
	_cleanup_free_ char *fj = filters ? msb__json_dump(filters) : NULL;
	json_decref(filters);
	_cleanup_free_ char *esc = fj ? msb_docker__escape(fj) : NULL;
	_cleanup_free_ char *path = esc ? msb__asprintf("/networks?filters=%s", esc) : NULL;
	if (!path)
		return msb__error_nomem(err);
	docker_response r;
	int rc = call(d, "GET", path, NULL, LIST_BODY, &r, err);
	if (rc < 0)
		return rc;
	json_error_t je;
	json_t *doc =
		r.status == 200 ? json_loadb((const char *)r.body.data, r.body.len, 0, &je) : NULL;
	if (r.status != 200)
		rc = engine_refused(&r, "list networks", err);
	msb_docker__response_clear(&r);
	if (rc < 0)
		return rc;
	size_t count = json_array_size(doc);
	engine_container *v = calloc(count ? count : 1, sizeof(*v));
	size_t k = 0;
	for (size_t i = 0; v && i < count && rc == 0; i++) {
		json_t *o = json_array_get(doc, i);
		const char *nm = json_string_value(json_object_get(o, "Name"));
		const char *id = json_string_value(json_object_get(o, "Id"));
		if (!nm || !id)
			continue;
		engine_container *e = &v[k++];
		e->name = msb__strdup(nm);
		e->id = msb__strdup(id);
		const char *lk;
		json_t *lval;
		json_object_foreach (json_object_get(o, "Labels"), lk, lval) {
			char *kv = json_is_string(lval)
					   ? msb__asprintf("%s=%s", lk, json_string_value(lval))
					   : NULL;
			if (json_is_string(lval) &&
			    (!kv || msb__strv_push_take(&e->labels, kv) < 0)) {
				free(kv);
				rc = -ENOMEM;
			}
		}
		if (!e->name || !e->id)
			rc = -ENOMEM;
	}
	json_decref(doc);
	if (!v || rc < 0) {
		msb_engine__containers_free(v, k);
		return msb__error_nomem(err);
	}
	*out = v;
	*n = k;
	return 0;
}

/* ---- the proxy container ------------------------------------------------------------------ */

/* The container of this name: *running, and its egress-config label
 * (newly allocated, NULL when absent); *id NULL when there is none. */
static int proxy_inspect(docker_transport *d, const char *name, char **id, bool *running,
			 char **config, msb_error **err)
{
	*id = *config = NULL;
	*running = false;
	_cleanup_free_ char *esc = msb_docker__escape(name);
	_cleanup_free_ char *path = esc ? msb__asprintf("/containers/%s/json", esc) : NULL;
	if (!path)
		return msb__error_nomem(err);
	docker_response r;
	int rc = call(d, "GET", path, NULL, INSPECT_BODY, &r, err);
	if (rc < 0)
		return rc;
	if (r.status == 404) {
		msb_docker__response_clear(&r);
		return 0;
	}
	json_error_t je;
	json_t *doc =
		r.status == 200 ? json_loadb((const char *)r.body.data, r.body.len, 0, &je) : NULL;
	if (r.status != 200)
		rc = engine_refused(&r, "inspect", err);
	msb_docker__response_clear(&r);
	if (rc < 0)
		return rc;
	const char *cid = json_string_value(json_object_get(doc, "Id"));
	const char *cname = json_string_value(json_object_get(doc, "Name"));
	const char *cfg = json_string_value(
		json_object_get(json_object_get(json_object_get(doc, "Config"), "Labels"),
				ENGINE_LABEL_EGRESS_CONFIG));
	if (cid && cname && strcmp(cname + (cname[0] == '/'), name) == 0) {
		*running = json_is_true(json_object_get(json_object_get(doc, "State"), "Running"));
		*id = msb__strdup(cid);
		*config = cfg ? msb__strdup(cfg) : NULL;
		if (!*id || (cfg && !*config))
			rc = msb__error_nomem(err);
	}
	json_decref(doc);
	return rc;
}

/* GET .../logs: the proxy's stderr and stdout, de-multiplexed, within budget. */
static int proxy_logs(docker_transport *d, const char *id, msb_buf *out, msb_error **err)
{
	_cleanup_free_ char *path = msb__asprintf("/containers/%s/logs?stdout=1&stderr=1", id);
	if (!path)
		return msb__error_nomem(err);
	docker_response r;
	int rc = call(d, "GET", path, NULL, LOGS_BODY, &r, err);
	if (rc < 0)
		return rc;
	if (r.status != 200) {
		rc = engine_refused(&r, "proxy logs", err);
		msb_docker__response_clear(&r);
		return rc;
	}
	const uint8_t *p = r.body.data;
	size_t left = r.body.len;
	while (left >= 8) {
		uint32_t len =
			(uint32_t)p[4] << 24 | (uint32_t)p[5] << 16 | (uint32_t)p[6] << 8 | p[7];
		if (len > left - 8)
			break;
		if (msb__buf_append(out, p + 8, len) < 0) {
			rc = msb__error_nomem(err);
			break;
		}
		p += 8 + len;
		left -= 8 + len;
	}
	msb_docker__response_clear(&r);
	return rc;
}

static bool has_line(const msb_buf *b, const char *line)
{
	size_t n = strlen(line);
	const char *s = (const char *)b->data;
	for (size_t i = 0; s && i + n <= b->len; i++)
		if ((i == 0 || s[i - 1] == '\n') && memcmp(s + i, line, n) == 0 &&
		    (i + n == b->len || s[i + n] == '\n'))
			return true;
	return false;
}

/* Until the proxy says it listens (21.21), or has stopped, or the wait ends. */
static int wait_listening(docker_transport *d, const char *id, const char *name, msb_error **err)
{
	int64_t deadline = msb__now_ns() / 1000000 + LISTEN_WAIT_MS;
	for (;;) {
		msb_buf logs = MSB_BUF_INIT;
		int rc = proxy_logs(d, id, &logs, err);
		if (rc == 0 && has_line(&logs, "msb-egress-proxy: listening")) {
			msb__buf_free(&logs);
			return 0;
		}
		char *tail = NULL;
		if (rc == 0 && msb__buf_puts(&logs, "") == 0)
			tail = (char *)logs.data + (logs.len > 301 ? logs.len - 301 : 0);
		bool running = false;
		_cleanup_free_ char *cid = NULL;
		_cleanup_free_ char *cfg = NULL;
		if (rc == 0)
			rc = proxy_inspect(d, name, &cid, &running, &cfg, err);
		if (rc == 0 && !running)
			rc = msb_error_set(err, MSB_E_RUNTIME,
					   "the egress proxy `%s` stopped before it listened: %s",
					   name, tail ? tail : "");
		else if (rc == 0 && msb__now_ns() / 1000000 >= deadline)
			rc = msb_error_set(err, MSB_E_TIMEOUT,
					   "the egress proxy `%s` did not listen within %d ms: %s",
					   name, LISTEN_WAIT_MS, tail ? tail : "");
		msb__buf_free(&logs);
		if (rc < 0)
			return rc;
		struct timespec ts = {0, LISTEN_POLL_MS * 1000000L};
		nanosleep(&ts, NULL);
	}
}

static json_t *proxy_body(docker_transport *d, const engine_proxy *p)
{
	_cleanup_free_ char *env = msb__asprintf("MSB_EGRESS_CONFIG=%s", p->config_json);
	if (!env)
		return NULL;
	/* Root without a capability (it binds 3128 and writes its own /log),
	 * no forwarding of its own: a workload's frames addressed past it go
	 * nowhere; its tunnels are all it relays. */
	return json_pack("{s:s, s:[s,s], s:[s], s:o, s:{s:s, s:[s], s:[s], s:{s:s, s:s}, s:I, "
			 "s:I, s:I}}",
			 "Image", d->proxy_image, "Cmd", PROXY_PATH, "serve", "Env", env, "Labels",
			 labels_object(p->labels), "HostConfig", "NetworkMode", p->network,
			 "CapDrop", "ALL", "SecurityOpt", "no-new-privileges", "Sysctls",
			 "net.ipv4.ip_forward", "0", "net.ipv4.conf.all.forwarding", "0", "Memory",
			 (json_int_t)PROXY_MEMORY, "MemorySwap", (json_int_t)PROXY_MEMORY,
			 "PidsLimit", (json_int_t)PROXY_PIDS);
}

static int proxy_create(docker_transport *d, const engine_proxy *p, char **id, msb_error **err)
{
	json_t *body = proxy_body(d, p);
	_cleanup_free_ char *json = body ? msb__json_dump(body) : NULL;
	json_decref(body);
	_cleanup_free_ char *esc = msb_docker__escape(p->name);
	_cleanup_free_ char *path = esc ? msb__asprintf("/containers/create?name=%s", esc) : NULL;
	if (!json || !path)
		return msb__error_nomem(err);
	docker_response r;
	int rc = call(d, "POST", path, json, SMALL_BODY, &r, err);
	if (rc < 0)
		return rc;
	json_error_t je;
	json_t *doc =
		r.status == 201 ? json_loadb((const char *)r.body.data, r.body.len, 0, &je) : NULL;
	if (r.status != 201)
		rc = engine_refused(&r, "create", err);
	msb_docker__response_clear(&r);
	const char *cid = json_string_value(json_object_get(doc, "Id"));
	if (rc == 0 && !(*id = msb__strdup(cid)))
		rc = cid ? msb__error_nomem(err)
			 : msb_error_set(err, MSB_E_PROTOCOL, "create: the engine sent no id");
	json_decref(doc);
	return rc;
}

static int simple_post(docker_transport *d, const char *path, const char *json, const char *what,
		       msb_error **err)
{
	docker_response r;
	int rc = call(d, "POST", path, json, SMALL_BODY, &r, err);
	if (rc < 0)
		return rc;
	if (r.status < 200 || r.status >= 300)
		rc = r.status == 304 ? 0 : engine_refused(&r, what, err);
	msb_docker__response_clear(&r);
	return rc;
}

/* The records left in a proxy: live, its log drained by an exec; final, the
 * proxy stopped first (SIGTERM: it ends its tunnels and records them) and the
 * log read from the stopped container's files. */
int msb_docker__proxy_records(void *t, const char *ref, bool final, msb_buf *out, msb_error **err)
{
	docker_transport *d = t;
	if (final) {
		_cleanup_free_ char *path = msb__asprintf("/containers/%s/stop?t=2", ref);
		if (!path)
			return msb__error_nomem(err);
		int rc = simple_post(d, path, NULL, "stop the egress proxy", err);
		if (rc < 0)
			return rc;
		uint8_t *data = NULL;
		size_t len = 0;
		rc = msb_docker__read(d, ref, PROXY_LOG, RECORDS_MAX, &data, &len, err);
		if (rc == MSB_E_NOT_FOUND) {
			msb_error_free(*err);
			*err = NULL;
			return 0;
		}
		if (rc == 0 && msb__buf_append(out, data, len) < 0)
			rc = msb__error_nomem(err);
		free(data);
		return rc;
	}
	static const char *const argv[] = {PROXY_PATH, "drain", NULL};
	engine_exec x = {
		.argv = argv,
		.as_root = true,
		.timeout = 30,
		.max_output = RECORDS_MAX,
		.bounded = true,
	};
	msb_exec_result res = {0};
	int rc = msb_docker__exec(d, ref, &x, &res, err);
	if (rc == 0 && res.exit_code != 0)
		rc = msb_error_set(err, MSB_E_RUNTIME, "draining the egress proxy: exit status %d",
				   res.exit_code);
	if (rc == 0 && msb__buf_append(out, res.stdout_bytes, res.stdout_len) < 0)
		rc = msb__error_nomem(err);
	msb_exec_result_clear(&res);
	return rc;
}

int msb_docker__proxy_ensure(void *t, const engine_proxy *p, bool *kept, msb_buf *records,
			     msb_error **err)
{
	docker_transport *d = t;
	*kept = false;
	_cleanup_free_ char *old = NULL;
	_cleanup_free_ char *cfg = NULL;
	bool running = false;
	int rc = proxy_inspect(d, p->name, &old, &running, &cfg, err);
	if (rc < 0)
		return rc;
	const char *want = strchr(p->config_label, '=') + 1;
	if (old && running && cfg && strcmp(cfg, want) == 0) {
		*kept = true;
		return 0;
	}
	if (old) {
		/* Another configuration, or a dead proxy: its records first. */
		msb_error *e = NULL;
		if (msb_docker__proxy_records(d, old, true, records, &e) < 0)
			msb_error_free(e);
		rc = msb_docker__remove(d, old, err);
		if (rc < 0)
			return rc;
	}
	_cleanup_free_ char *id = NULL;
	rc = proxy_create(d, p, &id, err);
	if (rc < 0)
		return rc;
	_cleanup_free_ char *start = msb__asprintf("/containers/%s/start", id);
	_cleanup_free_ char *connect =
		d->outbound_esc ? msb__asprintf("/networks/%s/connect", d->outbound_esc) : NULL;
	json_t *cbody = json_pack("{s:s}", "Container", id);
	_cleanup_free_ char *cjson = cbody ? msb__json_dump(cbody) : NULL;
	json_decref(cbody);
	if (!start || !connect || !cjson)
		rc = msb__error_nomem(err);
	/* It listens on the internal network alone, then gets its outbound
	 * leg: it never listens there (21.21; a failure fails the acquire). */
	if (rc == 0)
		rc = simple_post(d, start, NULL, "start", err);
	if (rc == 0)
		rc = wait_listening(d, id, p->name, err);
	if (rc == 0)
		rc = simple_post(d, connect, cjson, "connect the outbound network", err);
	if (rc < 0)
		msb_docker__remove(d, id, NULL);
	return rc;
}
