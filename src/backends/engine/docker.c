/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The `docker` backend: the engine core over the Docker Engine API (also
 * podman's compatible service). docs/engine.md, docs/internals/engine.md.
 */
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <unistd.h>

#include "docker.h"
#include "egress/egress.h"
#include "util/base64.h"
#include "util/json.h"

#ifndef MSB_LIBEXECDIR
#define MSB_LIBEXECDIR "/usr/local/libexec/msb"
#endif

#define DOCKER_DEFAULT_SOCKET "/var/run/docker.sock"
/* The oldest API with everything used here (exec WorkingDir, archive
 * HEAD), and the newest this client was written against. */
#define DOCKER_API_MIN_MINOR 40
#define DOCKER_API_MAX_MINOR 47
/* Response budgets. */
#define SMALL_BODY (64u << 10)
#define INSPECT_BODY (4u << 20)
#define LIST_BODY (16u << 20)
#define PULL_BODY (64u << 20)

/* 22.2-22.5: what the docker backend declares (os_families from the engine). */
static const msb_declarations docker_declarations = {
	.version = MSB_DECLARATIONS_VERSION,
	.capabilities = MSB_CAP_EXEC | MSB_CAP_FILES_IN | MSB_CAP_FILES_OUT | MSB_CAP_FILES_DELETE |
			MSB_CAP_HOST_TOOLS | MSB_CAP_RECLAIM,
	.limits = {{64u << 20, 256u << 20, 256}, {64u << 20, 256u << 20, 256}},
	.egress_modes = MSB_EGRESS_CLOSED,
	.os_families = 0,
	.isolation_scopes = MSB_SCOPE_CONVERSATION,
};

/* ---- small helpers ----------------------------------------------------------------- */

static int call(docker_transport *d, const char *method, const char *path, const char *json,
		uint64_t max_body, docker_response *r, msb_error **err)
{
	docker_request q = {.method = method, .path = path, .json = json, .max_body = max_body};
	return msb_docker__http(&d->http, &q, r, err);
}

static json_t *body_json(const docker_response *r)
{
	json_error_t je;
	return json_loadb((const char *)r->body.data, r->body.len, 0, &je);
}

int msb_docker__container_error(const docker_response *r, const char *ref, const char *what,
				msb_error **err)
{
	_cleanup_free_ char *text = msb_docker__error_text(r);
	if (r->status == 404 && text && strcasestr(text, "no such container"))
		return msb_error_set(err, MSB_E_RUNTIME,
				     "%s: container `%.12s` is gone (disposed, or removed "
				     "outside msb)",
				     what, ref);
	return msb_error_set(err, r->status == 404 ? MSB_E_NOT_FOUND : MSB_E_RUNTIME, "%s: %s",
			     what, text ? text : "the engine refused");
}

/* ---- version negotiation (22.6) ---------------------------------------------------- */

static bool parse_api(const char *v, int *major, int *minor)
{
	return v && sscanf(v, "%d.%d", major, minor) == 2;
}

int msb_docker__negotiate(docker_transport *d, msb_error **err)
{
	docker_response r;
	docker_request q = {
		.method = "GET", .path = "/version", .unversioned = true, .max_body = SMALL_BODY};
	int rc = msb_docker__http(&d->http, &q, &r, err);
	if (rc < 0)
		return rc;
	json_t *doc = r.status == 200 ? body_json(&r) : NULL;
	const char *api = doc ? json_string_value(json_object_get(doc, "ApiVersion")) : NULL;
	const char *os = doc ? json_string_value(json_object_get(doc, "Os")) : NULL;
	const char *ver = doc ? json_string_value(json_object_get(doc, "Version")) : NULL;
	int major, minor;
	if (!parse_api(api, &major, &minor) || !os) {
		json_decref(doc);
		msb_docker__response_clear(&r);
		return msb_error_set(err, MSB_E_PROTOCOL,
				     "the engine at `%s` did not answer GET /version as a Docker "
				     "engine does",
				     d->host);
	}
	if (major != 1 || minor < DOCKER_API_MIN_MINOR) {
		rc = msb_error_set(err, MSB_E_RUNTIME,
				   "the engine at `%s` speaks API %s; msb needs 1.%d or newer",
				   d->host, api, DOCKER_API_MIN_MINOR);
	} else {
		if (minor > DOCKER_API_MAX_MINOR)
			minor = DOCKER_API_MAX_MINOR;
		snprintf(d->http.api, sizeof(d->http.api), "/v1.%d", minor);
		d->api_version = msb__asprintf("1.%d", minor);
		d->os_type = msb__strdup(os);
		d->version = msb__strdup(ver ? ver : "unknown");
		if (!d->api_version || !d->os_type || !d->version)
			rc = msb__error_nomem(err);
	}
	size_t i;
	json_t *c;
	json_array_foreach (json_object_get(doc, "Components"), i, c) {
		const char *n = json_string_value(json_object_get(c, "Name"));
		if (n && strncmp(n, "Podman", 6) == 0)
			d->podman = true;
	}
	json_decref(doc);
	msb_docker__response_clear(&r);
	if (rc == 0 && d->podman)
		rc = msb_docker__podman_network(d, err);
	return rc;
}

/* ---- lifecycle --------------------------------------------------------------------- */

static int docker_inspect(void *t, const char *name, engine_state *state, char **id,
			  msb_error **err)
{
	docker_transport *d = t;
	_cleanup_free_ char *esc = msb_docker__escape(name);
	_cleanup_free_ char *path = esc ? msb__asprintf("/containers/%s/json", esc) : NULL;
	if (!path)
		return msb__error_nomem(err);
	docker_response r;
	int rc = call(d, "GET", path, NULL, INSPECT_BODY, &r, err);
	if (rc < 0)
		return rc;
	if (r.status == 404) {
		*state = ENGINE_ABSENT;
		msb_docker__response_clear(&r);
		return 0;
	}
	if (r.status != 200) {
		rc = msb_docker__container_error(&r, name, "inspect", err);
		msb_docker__response_clear(&r);
		return rc;
	}
	json_t *doc = body_json(&r);
	msb_docker__response_clear(&r);
	const char *cid = json_string_value(json_object_get(doc, "Id"));
	const char *cname = json_string_value(json_object_get(doc, "Name"));
	json_t *st = json_object_get(doc, "State");
	/* Exactly this name (21.19): docker also resolves an id prefix. */
	if (!cid || !cname || strcmp(cname + (cname[0] == '/'), name) != 0) {
		json_decref(doc);
		*state = ENGINE_ABSENT;
		return 0;
	}
	*state = json_is_true(json_object_get(st, "Running")) ? ENGINE_RUNNING : ENGINE_STOPPED;
	*id = msb__strdup(cid);
	json_decref(doc);
	return *id ? 0 : msb__error_nomem(err);
}

static int docker_start(void *t, const char *ref, msb_error **err)
{
	docker_transport *d = t;
	_cleanup_free_ char *path = msb__asprintf("/containers/%s/start", ref);
	if (!path)
		return msb__error_nomem(err);
	docker_response r;
	int rc = call(d, "POST", path, NULL, SMALL_BODY, &r, err);
	if (rc < 0)
		return rc;
	if (r.status != 204 && r.status != 304)
		rc = msb_docker__container_error(&r, ref, "start", err);
	msb_docker__response_clear(&r);
	return rc;
}

int msb_docker__remove(void *t, const char *ref, msb_error **err)
{
	docker_transport *d = t;
	_cleanup_free_ char *esc = msb_docker__escape(ref);
	_cleanup_free_ char *path = esc ? msb__asprintf("/containers/%s?force=1&v=1", esc) : NULL;
	if (!path)
		return msb__error_nomem(err);
	docker_response r;
	int rc = call(d, "DELETE", path, NULL, SMALL_BODY, &r, err);
	if (rc < 0)
		return rc;
	_cleanup_free_ char *text = NULL;
	/* Gone already, or going: both are what was asked. */
	if (r.status != 204 && r.status != 200 && r.status != 404 &&
	    !(r.status == 409 && (text = msb_docker__error_text(&r)) &&
	      strcasestr(text, "already in progress")))
		rc = msb_docker__container_error(&r, ref, "remove", err);
	msb_docker__response_clear(&r);
	return rc;
}

/* POST /images/create?fromImage=: the pull, read to its end (its errors
 * come in the stream). */
static int pull(docker_transport *d, const char *image, msb_error **err)
{
	_cleanup_free_ char *esc = msb_docker__escape(image);
	_cleanup_free_ char *path = esc ? msb__asprintf("/images/create?fromImage=%s", esc) : NULL;
	if (!path)
		return msb__error_nomem(err);
	docker_response r;
	docker_request q = {.method = "POST", .path = path, .max_body = PULL_BODY, .timeout = 600};
	int rc = msb_docker__http(&d->http, &q, &r, err);
	if (rc < 0)
		return rc;
	const char *body = (const char *)r.body.data;
	if (r.status != 200) {
		_cleanup_free_ char *text = msb_docker__error_text(&r);
		rc = msb_error_set(err, MSB_E_RUNTIME,
				   "image `%s` is not present and the engine could not pull it: %s",
				   image, text ? text : "");
	} else if (body && msb__buf_puts(&r.body, "") == 0 &&
		   strstr((const char *)r.body.data, "\"error\"")) {
		rc = msb_error_set(err, MSB_E_RUNTIME,
				   "image `%s` is not present and the engine could not pull it",
				   image);
	}
	msb_docker__response_clear(&r);
	return rc;
}

/* Capabilities of the engine's default set a sandbox does without: raw and
 * packet sockets (forged frames would bypass the egress topology), device
 * nodes, chroot, the audit log and file capabilities (docs/security.md,
 * "Container engines"). */
static const char *const dropped_caps[] = {"NET_RAW", "MKNOD", "SYS_CHROOT", "AUDIT_WRITE",
					   "SETFCAP"};
/* /dev/shm is memory charged to the container: at most an eighth of a
 * memory limit (as ns sizes it), so a fill cannot take the limit. */
#define SHM_DEFAULT (64ull << 20)

static json_t *host_config(const engine_create *c)
{
	json_t *caps = json_array();
	for (size_t i = 0; i < MSB_ARRAY_SIZE(dropped_caps); i++)
		json_array_append_new(caps, json_string(dropped_caps[i]));
	json_t *hc = json_pack("{s:s, s:[s], s:o}", "NetworkMode", c->network ? c->network : "none",
			       "SecurityOpt", "no-new-privileges", "CapDrop", caps);
	if (!hc)
		return NULL;
	/* On the internal network: IPv4 to its proxy and nothing else. No IPv6
	 * at all (the host's bridge has a link-local address). */
	if (c->network)
		json_object_set_new(hc, "Sysctls",
				    json_pack("{s:s}", "net.ipv6.conf.all.disable_ipv6", "1"));
	if (c->memory_bytes) {
		uint64_t shm =
			c->memory_bytes / 8 < SHM_DEFAULT ? c->memory_bytes / 8 : SHM_DEFAULT;
		/* Swap included, as the spec means it. */
		json_object_set_new(hc, "Memory", json_integer((json_int_t)c->memory_bytes));
		json_object_set_new(hc, "MemorySwap", json_integer((json_int_t)c->memory_bytes));
		json_object_set_new(hc, "ShmSize", json_integer((json_int_t)shm));
	}
	if (c->pids_max)
		json_object_set_new(hc, "PidsLimit", json_integer((json_int_t)c->pids_max));
	if (c->cpu_millis)
		json_object_set_new(hc, "NanoCpus",
				    json_integer((json_int_t)(c->cpu_millis * 1000000)));
	if (c->writable_bytes) {
		/* The engine refuses this where its storage driver cannot bound a
		 * container (overlay2 needs xfs with pquota): never silently. */
		char size[32];
		snprintf(size, sizeof(size), "%" PRIu64, c->writable_bytes);
		json_object_set_new(hc, "StorageOpt", json_pack("{s:s}", "size", size));
	}
	return hc;
}

static json_t *create_body(const engine_create *c)
{
	json_t *labels = json_object();
	for (char *const *p = c->labels; p && *p; p++) {
		const char *eq = strchr(*p, '=');
		if (!eq)
			continue;
		char *k = msb__strndup(*p, (size_t)(eq - *p));
		if (k)
			json_object_set_new(labels, k, json_string(eq + 1));
		free(k);
	}
	json_t *env = json_array();
	for (char *const *p = c->env; env && p && *p; p++)
		json_array_append_new(env, json_string(*p));
	return json_pack("{s:s, s:[s,s], s:o, s:s, s:o, s:o, s:b, s:b}", "Image", c->image, "Cmd",
			 "sleep", "infinity", "Labels", labels, "WorkingDir", c->work_dir,
			 "HostConfig", host_config(c), "Env", env, "AttachStdout", 0,
			 "AttachStderr", 0);
}

static int docker_run(void *t, const engine_create *c, char **id, msb_error **err)
{
	docker_transport *d = t;
	json_t *body = create_body(c);
	_cleanup_free_ char *json = body ? msb__json_dump(body) : NULL;
	json_decref(body);
	_cleanup_free_ char *esc = msb_docker__escape(c->name);
	_cleanup_free_ char *path = esc ? msb__asprintf("/containers/create?name=%s", esc) : NULL;
	if (!json || !path)
		return msb__error_nomem(err);
	docker_response r;
	int rc = 0;
	for (int attempt = 0; attempt < 2; attempt++) {
		rc = call(d, "POST", path, json, SMALL_BODY, &r, err);
		if (rc < 0)
			return rc;
		if (r.status == 404 && attempt == 0) {
			/* No such image: pulled if the engine can, never replaced. */
			msb_docker__response_clear(&r);
			rc = pull(d, c->image, err);
			if (rc < 0)
				return rc;
			continue;
		}
		break;
	}
	if (r.status == 409) {
		msb_docker__response_clear(&r);
		return ENGINE_EXISTS;
	}
	if (r.status != 201) {
		_cleanup_free_ char *text = msb_docker__error_text(&r);
		msb_docker__response_clear(&r);
		return msb_error_set(err, MSB_E_RUNTIME, "create `%s` from `%s`: %s", c->name,
				     c->image, text ? text : "");
	}
	json_t *doc = body_json(&r);
	msb_docker__response_clear(&r);
	const char *cid = json_string_value(json_object_get(doc, "Id"));
	_cleanup_free_ char *new_id = msb__strdup(cid);
	json_decref(doc);
	if (!new_id)
		return msb_error_set(err, MSB_E_PROTOCOL, "create `%s`: the engine sent no id",
				     c->name);
	rc = docker_start(t, new_id, err);
	if (rc < 0) {
		/* Leave nothing behind: a container that never ran is removed. */
		msb_docker__remove(t, new_id, NULL);
		return msb_error_wrap(err, "start `%s`", c->name);
	}
	*id = TAKE_PTR(new_id);
	return 0;
}

static int docker_list(void *t, char *const *labels, engine_container **out, size_t *n,
		       msb_error **err)
{
	docker_transport *d = t;
	json_t *lv = json_array();
	for (char *const *p = labels; p && *p; p++)
		json_array_append_new(lv, json_string(*p));
	json_t *filters = json_pack("{s:o}", "label", lv);
	_cleanup_free_ char *fj = filters ? msb__json_dump(filters) : NULL;
	json_decref(filters);
	_cleanup_free_ char *esc = fj ? msb_docker__escape(fj) : NULL;
	_cleanup_free_ char *path =
		esc ? msb__asprintf("/containers/json?all=1&filters=%s", esc) : NULL;
	if (!path)
		return msb__error_nomem(err);
	docker_response r;
	int rc = call(d, "GET", path, NULL, LIST_BODY, &r, err);
	if (rc < 0)
		return rc;
	if (r.status != 200) {
		rc = msb_docker__container_error(&r, "", "list", err);
		msb_docker__response_clear(&r);
		return rc;
	}
	json_t *doc = body_json(&r);
	msb_docker__response_clear(&r);
	if (!json_is_array(doc)) {
		json_decref(doc);
		return msb_error_set(err, MSB_E_PROTOCOL, "list: the engine sent no array");
	}
	size_t count = json_array_size(doc);
	engine_container *v = calloc(count ? count : 1, sizeof(*v));
	if (!v) {
		json_decref(doc);
		return msb__error_nomem(err);
	}
	size_t k = 0;
	rc = 0;
	for (size_t i = 0; i < count && rc == 0; i++) {
		json_t *c = json_array_get(doc, i);
		const char *cid = json_string_value(json_object_get(c, "Id"));
		const char *nm = json_string_value(json_array_get(json_object_get(c, "Names"), 0));
		if (!cid || !nm)
			continue;
		engine_container *e = &v[k++];
		e->id = msb__strdup(cid);
		e->name = msb__strdup(nm + (nm[0] == '/'));
		const char *lk;
		json_t *lval;
		json_object_foreach (json_object_get(c, "Labels"), lk, lval) {
			if (!json_is_string(lval))
				continue;
			char *kv = msb__asprintf("%s=%s", lk, json_string_value(lval));
			if (!kv || msb__strv_push_take(&e->labels, kv) < 0) {
				free(kv);
				rc = -ENOMEM;
			}
		}
		if (!e->id || !e->name ||
		    msb_engine__container_fields(e, json_string_value(json_object_get(c, "Image")),
						 json_string_value(json_object_get(c, "State")),
						 json_integer_value(json_object_get(c, "Created")),
						 NULL) < 0)
			rc = -ENOMEM;
	}
	json_decref(doc);
	if (rc < 0) {
		msb_engine__containers_free(v, k);
		return msb__error_nomem(err);
	}
	*out = v;
	*n = k;
	return 0;
}

/* ---- the file plane ---------------------------------------------------------------- */

/* Go's os.FileMode type bits, as the engine reports them. */
#define GO_MODE_DIR (1u << 31)
#define GO_MODE_SYMLINK (1u << 27)
#define GO_MODE_TYPE                                                                               \
	(GO_MODE_DIR | (1u << 30) | (1u << 29) | GO_MODE_SYMLINK | (1u << 26) | (1u << 25) |       \
	 (1u << 24) | (1u << 21) | (1u << 19))

static char *archive_path(const char *ref, const char *abs)
{
	_cleanup_free_ char *esc = msb_docker__escape(abs);
	return esc ? msb__asprintf("/containers/%s/archive?path=%s", ref, esc) : NULL;
}

/* HEAD .../archive: the engine's lstat of the final component (the parents
 * it resolves inside the container; the walk has checked them). */
static int docker_stat(void *t, const char *ref, const char *abs, engine_stat *out, msb_error **err)
{
	docker_transport *d = t;
	_cleanup_free_ char *path = archive_path(ref, abs);
	if (!path)
		return msb__error_nomem(err);
	docker_response r;
	docker_request q = {
		.method = "HEAD", .path = path, .max_body = SMALL_BODY, .want_path_stat = true};
	int rc = msb_docker__http(&d->http, &q, &r, err);
	if (rc < 0)
		return rc;
	*out = (engine_stat){0};
	if (r.status == 404) {
		msb_docker__response_clear(&r);
		/* A HEAD has no body to say which: is the container there? */
		_cleanup_free_ char *cpath = msb__asprintf("/containers/%s/json", ref);
		if (!cpath)
			return msb__error_nomem(err);
		rc = call(d, "GET", cpath, NULL, INSPECT_BODY, &r, err);
		if (rc < 0)
			return rc;
		long status = r.status;
		msb_docker__response_clear(&r);
		if (status == 404)
			rc = msb_error_set(err, MSB_E_RUNTIME,
					   "stat `%s`: container `%.12s` is gone (disposed, or "
					   "removed outside msb)",
					   abs, ref);
		return rc;
	}
	if (r.status != 200 || !r.path_stat) {
		long status = r.status;
		msb_docker__response_clear(&r);
		return msb_error_set(err, MSB_E_OS, "stat `%s`: the engine answered %ld", abs,
				     status);
	}
	uint8_t *raw = NULL;
	size_t rawlen = 0;
	rc = msb__base64_decode(r.path_stat, strlen(r.path_stat), false, &raw, &rawlen);
	msb_docker__response_clear(&r);
	if (rc < 0)
		return msb_error_set(err, MSB_E_PROTOCOL, "stat `%s`: a malformed stat header",
				     abs);
	json_error_t je;
	json_t *doc = json_loadb((const char *)raw, rawlen, 0, &je);
	free(raw);
	json_t *mode_v = json_object_get(doc, "mode");
	json_t *size_v = json_object_get(doc, "size");
	if (!json_is_integer(mode_v) || !json_is_integer(size_v)) {
		json_decref(doc);
		return msb_error_set(err, MSB_E_PROTOCOL, "stat `%s`: a malformed stat header",
				     abs);
	}
	uint32_t mode = (uint32_t)json_integer_value(mode_v);
	json_int_t size = json_integer_value(size_v);
	json_decref(doc);
	out->present = true;
	if (mode & GO_MODE_DIR)
		out->kind = MSB_ENTRY_DIRECTORY;
	else if (mode & GO_MODE_SYMLINK)
		out->kind = MSB_ENTRY_SYMLINK;
	else if (mode & GO_MODE_TYPE)
		out->kind = MSB_ENTRY_OTHER;
	else
		out->kind = MSB_ENTRY_FILE;
	out->size = size > 0 ? (uint64_t)size : 0;
	return 0;
}

typedef struct read_ctx {
	engine_tar_reader tar;
	const char *abs;
	uint64_t max_bytes;
} read_ctx;

static int read_on_header(void *ud, const engine_tar_header *h, msb_error **err)
{
	read_ctx *c = ud;
	return msb_engine__tar_check(h, c->abs, c->max_bytes, err);
}

static int read_sink(void *ud, const uint8_t *p, size_t n, msb_error **err)
{
	read_ctx *c = ud;
	int r = msb_engine__tar_feed(&c->tar, p, n, err);
	if (r < 0)
		return r;
	return c->tar.done ? DOCKER_SINK_DONE : 0;
}

int msb_docker__read(void *t, const char *ref, const char *abs, uint64_t max_bytes, uint8_t **data,
		     size_t *len, msb_error **err)
{
	docker_transport *d = t;
	_cleanup_free_ char *path = archive_path(ref, abs);
	if (!path)
		return msb__error_nomem(err);
	read_ctx c = {.abs = abs, .max_bytes = max_bytes};
	msb_engine__tar_reader_init(&c.tar, read_on_header, &c);
	docker_response r;
	docker_request q = {.method = "GET",
			    .path = path,
			    .max_body = SMALL_BODY,
			    .sink = read_sink,
			    .sink_ud = &c,
			    .timeout = 600};
	int rc = msb_docker__http(&d->http, &q, &r, err);
	if (rc == 0 && r.status == 404) {
		_cleanup_free_ char *text = msb_docker__error_text(&r);
		rc = text && strcasestr(text, "no such container")
			     ? msb_docker__container_error(&r, ref, "read", err)
			     : msb_error_set(err, MSB_E_NOT_FOUND, "no such file `%s`", abs);
	} else if (rc == 0 && r.status != 200) {
		_cleanup_free_ char *text = msb_docker__error_text(&r);
		rc = msb_error_set(err, MSB_E_OS, "read `%s`: %s", abs, text ? text : "");
	} else if (rc == 0 && !c.tar.done) {
		rc = msb_error_set(err, MSB_E_PROTOCOL,
				   "read `%s`: the engine's archive ended before the file did",
				   abs);
	}
	if (r.status)
		msb_docker__response_clear(&r);
	if (rc == 0) {
		*data = TAKE_PTR(c.tar.body);
		*len = (size_t)c.tar.hdr.size;
	}
	msb_engine__tar_reader_clear(&c.tar);
	return rc;
}

static int docker_write(void *t, const char *ref, const char *abs, const uint8_t *data, size_t len,
			msb_error **err)
{
	docker_transport *d = t;
	msb_buf head = MSB_BUF_INIT;
	/* One entry named by the whole path, extracted at "/", so missing
	 * parents are made (21.27) and an existing entry is replaced. */
	int rc = msb_engine__tar_head(abs + 1, len, &head, err);
	_cleanup_free_ char *path = archive_path(ref, "/");
	if (rc == 0 && !path)
		rc = msb__error_nomem(err);
	if (rc < 0) {
		msb__buf_free(&head);
		return rc;
	}
	docker_response r;
	docker_request q = {.method = "PUT",
			    .path = path,
			    .max_body = SMALL_BODY,
			    .content_type = "application/x-tar",
			    .head = head.data,
			    .head_len = head.len,
			    .data = data,
			    .data_len = len,
			    .tail_len = msb_engine__tar_tail_len(len),
			    .timeout = 600};
	rc = msb_docker__http(&d->http, &q, &r, err);
	msb__buf_free(&head);
	if (rc < 0)
		return rc;
	if (r.status != 200)
		rc = msb_docker__container_error(&r, ref, "write", err);
	msb_docker__response_clear(&r);
	if (rc == MSB_E_NOT_FOUND)
		rc = msb_error_wrap(err, "write `%s`", abs);
	return rc;
}

/* An executable at abs (the confined file plane's agent): a one-entry
 * archive with mode 0755, extracted at "/". */
static int docker_install(void *t, const char *ref, const char *abs, const uint8_t *data,
			  size_t len, msb_error **err)
{
	docker_transport *d = t;
	msb_buf tar = MSB_BUF_INIT;
	_cleanup_free_ char *dir = msb__strdup(abs + 1);
	char *slash = dir ? strrchr(dir, '/') : NULL;
	int rc = dir ? 0 : msb__error_nomem(err);
	if (rc == 0 && slash) {
		*slash = '\0';
		rc = msb_engine__tar_add(&tar, dir, '5', 0755, NULL, 0, err);
	}
	if (rc == 0)
		rc = msb_engine__tar_add(&tar, abs + 1, '0', 0755, data, len, err);
	if (rc == 0)
		rc = msb_engine__tar_end(&tar, err);
	_cleanup_free_ char *path = archive_path(ref, "/");
	if (rc == 0 && !path)
		rc = msb__error_nomem(err);
	if (rc < 0) {
		msb__buf_free(&tar);
		return rc;
	}
	docker_response r;
	docker_request q = {.method = "PUT",
			    .path = path,
			    .max_body = SMALL_BODY,
			    .content_type = "application/x-tar",
			    .head = tar.data,
			    .head_len = tar.len,
			    .timeout = 120};
	rc = msb_docker__http(&d->http, &q, &r, err);
	msb__buf_free(&tar);
	if (rc < 0)
		return rc;
	if (r.status != 200)
		rc = msb_docker__container_error(&r, ref, "place the agent", err);
	msb_docker__response_clear(&r);
	return rc;
}

static void docker_free(void *t)
{
	docker_transport *d = t;
	if (!d)
		return;
	msb_docker__http_clear(&d->http);
	free(d->host);
	free(d->version);
	free(d->api_version);
	free(d->os_type);
	free(d->net_backend);
	free(d->proxy_image);
	free(d->outbound_esc);
	free(d);
}

static const engine_transport_ops docker_ops = {
	.inspect = docker_inspect,
	.run = docker_run,
	.start = docker_start,
	.remove = msb_docker__remove,
	.list = docker_list,
	.exec = msb_docker__exec,
	.stat = docker_stat,
	.read = msb_docker__read,
	.write = docker_write,
	.fingerprint = msb_docker__fingerprint,
	.host_root = msb_docker__host_root,
	.pid = msb_docker__pid,
	.install = docker_install,
	.stream_open = msb_docker__stream_open,
	.stream_close = msb_docker__stream_close,
	.net_create = msb_docker__net_create,
	.net_remove = msb_docker__net_remove,
	.net_list = msb_docker__net_list,
	.proxy_ensure = msb_docker__proxy_ensure,
	.proxy_records = msb_docker__proxy_records,
	.free = docker_free,
};

/* ---- construction --------------------------------------------------------------------- */

/* "unix:///p" or "/p"; NULL = $DOCKER_HOST, then the default. */
static int socket_of(const char *host, char **out, msb_error **err)
{
	const char *h = host && *host ? host : getenv("DOCKER_HOST");
	if (!h || !*h)
		h = "unix://" DOCKER_DEFAULT_SOCKET;
	const char *p = NULL;
	if (strncmp(h, "unix://", 7) == 0)
		p = h + 7;
	else if (h[0] == '/')
		p = h;
	if (!p || p[0] != '/')
		return msb_error_set(err, MSB_E_VALUE,
				     "docker host `%s` is not a unix socket (`unix:///path`): only "
				     "a local engine's socket is spoken to",
				     h);
	*out = msb__strdup(p);
	return *out ? 0 : msb__error_nomem(err);
}

static int transport_new(const msb_docker_options *o, docker_transport **out, msb_error **err)
{
	_cleanup_free_ char *sock = NULL;
	int r = socket_of(o->host, &sock, err);
	if (r < 0)
		return r;
	docker_transport *d = calloc(1, sizeof(*d));
	if (!d)
		return msb__error_nomem(err);
	d->host = msb__asprintf("unix://%s", sock);
	r = d->host ? msb_docker__http_init(&d->http, sock,
					    o->api_timeout > 0 ? o->api_timeout : 60.0, err)
		    : msb__error_nomem(err);
	if (r == 0)
		r = msb_docker__negotiate(d, err);
	if (r < 0) {
		docker_free(d);
		return r;
	}
	*out = d;
	return 0;
}

static int check_options(const msb_docker_options *o, msb_error **err)
{
	if (o->version != MSB_DOCKER_OPTIONS_VERSION)
		return msb_error_set(err, MSB_E_VALUE, "docker options: unsupported version %u",
				     o->version);
	if (o->api_timeout < 0 || o->api_timeout != o->api_timeout)
		return msb_error_set(err, MSB_E_VALUE, "docker: api_timeout must be >= 0");
	if (o->egress_proxy_image && !*o->egress_proxy_image)
		return msb_error_set(err, MSB_E_VALUE, "docker: egress_proxy_image is empty");
	if (!o->egress_proxy_image && (o->egress_proxy || o->egress_network || o->egress_config))
		return msb_error_set(err, MSB_E_VALUE,
				     "docker: egress_proxy, egress_network and egress configure "
				     "the allowlist topology: they need egress_proxy_image");
	if (o->egress_config) {
		msb_egress_config c;
		msb_egress__config_init(&c);
		int r = msb_egress__config_from_json(&c, o->egress_config, strlen(o->egress_config),
						     false, err);
		msb_egress__config_clear(&c);
		if (r < 0)
			return msb_error_wrap(err, "docker: egress");
	}
	return 0;
}

/* The proxy binary: as configured, $MSB_EGRESS_PROXY, or the installed one. */
static char *proxy_binary(const msb_docker_options *o)
{
	if (o->egress_proxy && *o->egress_proxy)
		return msb__strdup(o->egress_proxy);
	const char *e = getenv("MSB_EGRESS_PROXY");
	if (e && *e)
		return msb__strdup(e);
	return msb__strdup(MSB_LIBEXECDIR "/msb-egress-proxy");
}

/* The allowlist topology's part of construction: the proxy image in the
 * engine, the outbound network named. */
static int egress_init(docker_transport *d, const msb_docker_options *o, msb_error **err)
{
	if (!o->egress_proxy_image)
		return 0;
	_cleanup_free_ char *bin = proxy_binary(o);
	d->outbound_esc = msb_docker__escape(o->egress_network ? o->egress_network : "bridge");
	if (!bin || !d->outbound_esc)
		return msb__error_nomem(err);
	return msb_docker__proxy_image(d, o->egress_proxy_image, bin, err);
}

int msb_docker_backend_new(const msb_docker_options *opts, msb_backend **out, msb_error **err)
{
	msb_docker_options defaults = MSB_DOCKER_OPTIONS_INIT;
	const msb_docker_options *o = opts ? opts : &defaults;
	int r = check_options(o, err);
	if (r < 0)
		return r;
	docker_transport *d = NULL;
	r = transport_new(o, &d, err);
	if (r < 0)
		return r;
	/* An engine that cannot hold the topology: egress closed only, and an
	 * allowlist refused at acquire with the reason (never a proxy that
	 * its workload cannot reach). */
	_cleanup_free_ char *refused =
		o->egress_proxy_image ? msb_docker__allowlist_refusal(d) : NULL;
	const bool allowlist = o->egress_proxy_image && !refused;
	if (allowlist && (r = egress_init(d, o, err)) < 0) {
		docker_free(d);
		return r;
	}
	if (refused)
		msb__log(&(msb_logger){o->log, o->log_userdata}, MSB_LOG_WARNING, "docker",
			 "egress_proxy_image `%s` not used: %s", o->egress_proxy_image, refused);
	_cleanup_free_ char *agent = msb_engine__agent_path(NULL);
	msb_declarations decl = docker_declarations;
	if (allowlist) {
		/* msb's proxy: the allowlist, and per-method rules on plain HTTP as
		 * ns serves them (src/egress); every decision observed (21.33). */
		decl.egress_modes |= MSB_EGRESS_ALLOWLIST;
		decl.capabilities |= MSB_CAP_EGRESS_METHODS;
		decl.egress_method_tokens = msb_egress__method_tokens;
		decl.n_egress_method_tokens = MSB_EGRESS_N_METHOD_TOKENS;
		decl.observes_egress = true;
	}
	/* 22.6: the guest shape is the engine's. */
	if (strcmp(d->os_type, "linux") == 0)
		decl.os_families = MSB_OS_POSIX;
	else if (strcmp(d->os_type, "windows") == 0)
		decl.os_families = MSB_OS_WINDOWS;
	engine_backend_config cfg = {
		.name = o->name ? o->name : "docker",
		.prefix = MSB_DOCKER_NAME_PREFIX,
		.image = o->image,
		.transport_tag = "docker",
		.endpoint = d->host + strlen("unix://"),
		.ops = &docker_ops,
		.t = d,
		.decl = &decl,
		.isolation = "container",
		.log = o->log,
		.log_userdata = o->log_userdata,
		.allowlist = allowlist,
		.egress_config = o->egress_config,
		.allowlist_refused = refused,
		.agent_path = agent,
	};
	return msb_engine__backend_new(&cfg, out, err);
}

static const char *const docker_keys[] = {
	"type",		"name",		  "host",   "image", "api_timeout", "egress_proxy_image",
	"egress_proxy", "egress_network", "egress", NULL};

/* o's strings live in obj; the "egress" object's text in *egress. */
static int options_from_json(json_t *obj, msb_docker_options *o, char **egress, msb_error **err)
{
	const char *where = "docker backend";
	const char *type = NULL;
	int r;
	if ((r = msb__json_check_keys(obj, docker_keys, where, err)) < 0 ||
	    (r = msb__json_get_string(obj, "type", where, &type, NULL, err)) < 0 ||
	    (r = msb__json_get_string(obj, "name", where, &o->name, NULL, err)) < 0 ||
	    (r = msb__json_get_string(obj, "host", where, &o->host, NULL, err)) < 0 ||
	    (r = msb__json_get_string(obj, "image", where, &o->image, NULL, err)) < 0 ||
	    (r = msb__json_get_double(obj, "api_timeout", where, &o->api_timeout, NULL, err)) < 0 ||
	    (r = msb__json_get_string(obj, "egress_proxy_image", where, &o->egress_proxy_image,
				      NULL, err)) < 0 ||
	    (r = msb__json_get_string(obj, "egress_proxy", where, &o->egress_proxy, NULL, err)) <
		    0 ||
	    (r = msb__json_get_string(obj, "egress_network", where, &o->egress_network, NULL,
				      err)) < 0)
		return r;
	if (type && strcmp(type, "docker") != 0)
		return msb_error_set(err, MSB_E_VALUE, "%s: `type` is `%s`, not `docker`", where,
				     type);
	json_t *eg = json_object_get(obj, "egress");
	if (eg && !json_is_null(eg)) {
		if (!json_is_object(eg))
			return msb_error_set(err, MSB_E_TYPE, "%s: `egress` must be an object",
					     where);
		if (!(*egress = msb__json_dump(eg)))
			return msb__error_nomem(err);
		o->egress_config = *egress;
	}
	return 0;
}

int msb_docker_backend_from_json(const char *json, size_t len, msb_backend **out, msb_error **err)
{
	json_t *obj = NULL;
	int r = msb__json_load_object(json, len, "docker backend", &obj, err);
	if (r < 0)
		return r;
	msb_docker_options o = MSB_DOCKER_OPTIONS_INIT;
	_cleanup_free_ char *egress = NULL;
	r = options_from_json(obj, &o, &egress, err);
	if (r == 0)
		r = msb_docker_backend_new(&o, out, err);
	json_decref(obj);
	return r;
}

int msb_docker_doctor(const char *json, size_t len, bool *ok, char **reason, msb_error **err)
{
	json_t *obj = NULL;
	msb_docker_options o = MSB_DOCKER_OPTIONS_INIT;
	_cleanup_free_ char *egress = NULL;
	int r = 0;
	if (json) {
		r = msb__json_load_object(json, len, "docker backend", &obj, err);
		if (r == 0)
			r = options_from_json(obj, &o, &egress, err);
		if (r < 0) {
			json_decref(obj);
			return r;
		}
	}
	docker_transport *d = NULL;
	msb_error *e = NULL;
	r = check_options(&o, &e);
	if (r == 0)
		r = transport_new(&o, &d, &e);
	if (r < 0) {
		json_decref(obj);
		*ok = false;
		*reason = msb__asprintf("not usable: %s", msb_error_message(e));
		msb_error_free(e);
		return *reason ? 0 : msb__error_nomem(err);
	}
	const bool on_linux = strcmp(d->os_type, "linux") == 0;
	_cleanup_free_ char *bin = o.egress_proxy_image ? proxy_binary(&o) : NULL;
	_cleanup_free_ char *refused =
		o.egress_proxy_image ? msb_docker__allowlist_refusal(d) : NULL;
	_cleanup_free_ char *egress_text =
		refused ? msb__asprintf("egress closed only: an allowlist is refused (%s)", refused)
		: !o.egress_proxy_image
			? msb__strdup(
				  "egress closed only (set egress_proxy_image for the allowlist "
				  "topology)")
		: bin && access(bin, R_OK) == 0
			? msb__asprintf("egress closed and allowlist (msb's proxy from `%s`, "
					"imported as `%s:<sha12>`, outbound network `%s`)",
					bin, o.egress_proxy_image,
					o.egress_network ? o.egress_network : "bridge")
			: msb__asprintf("egress closed only: the proxy binary `%s` is not there "
					"(build msb-egress-proxy or set egress_proxy)",
					bin ? bin : "?");
	*ok = on_linux && !refused && (!o.egress_proxy_image || (bin && access(bin, R_OK) == 0));
	_cleanup_free_ char *agent = msb_engine__agent_path(NULL);
	bool confined = agent && access(agent, R_OK) == 0;
	_cleanup_free_ char *plane =
		confined ? msb__asprintf(
				   "file plane: the confined agent (`%s` placed in each container "
				   "and "
				   "run by exec, resolving with openat2 RESOLVE_BENEATH|"
				   "RESOLVE_NO_SYMLINKS: the walk and the transfer one operation), "
				   "falling back to the tar-header walk where it cannot run",
				   agent)
			 : msb__asprintf("file plane: the tar-header walk (the engine's no-follow "
					 "stat of every component before the transfer - a link "
					 "swapped in between them is followed inside the "
					 "container); msb-agent not found at `%s` (set $MSB_AGENT) "
					 "for the confined agent",
					 agent ? agent : "?");
	const char *kept_env = getenv("MSB_ENGINE_KEPT");
	const char *exec_path =
		!confined ? "exec: one engine exec per call (no msb-agent for the kept stream)"
		: kept_env && strcmp(kept_env, "0") == 0
			? "exec: one engine exec per call (the kept stream is off: "
			  "MSB_ENGINE_KEPT=0)"
			: "exec: one msb-agent per handle on a kept stream (`msb-agent --engine`, "
			  "started on the first exec), one engine exec per call where it cannot "
			  "start or is busy";
	const char *hf = getenv("MSB_ENGINE_HOSTFS");
	const char *host_plane =
		hf && strcmp(hf, "0") == 0
			? ""
			: "file plane: the host's where the container's init is visible here (its "
			  "root from /proc/PID, the storage base resolved with openat2 "
			  "RESOLVE_IN_ROOT|RESOLVE_NO_SYMLINKS; write, read, stat, remove, "
			  "reclaim), else ";
	*reason = msb__asprintf("engine at %s: version %s, API %s, os %s; %s; %s; %s; %s%s",
				d->host, d->version, d->api_version, d->os_type,
				on_linux ? "exec, files in/out/delete and reclaim work"
					 : "only a linux engine is served (os_families {posix})",
				egress_text ? egress_text : "", exec_path, host_plane,
				plane ? plane : "");
	docker_free(d);
	json_decref(obj); /* o's strings lived in it */
	return *reason ? 0 : msb__error_nomem(err);
}
