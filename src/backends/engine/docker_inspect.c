/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The `docker` backend's looks at a container from outside: its changes and
 * processes (the fingerprint) and where its root filesystem is on the host.
 * docs/engine.md.
 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "docker.h"

#define INSPECT_BODY (4u << 20)
#define LIST_BODY (16u << 20)

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

/* GET /changes: the filesystem since creation; GET /top: what runs. */
int msb_docker__fingerprint(void *t, const char *ref, bool *supported, msb_fingerprint *out,
			    msb_error **err)
{
	docker_transport *d = t;
	_cleanup_free_ char *cpath = msb__asprintf("/containers/%s/changes", ref);
	_cleanup_free_ char *tpath =
		msb__asprintf("/containers/%s/top?ps_args=-o%%20pid,args", ref);
	if (!cpath || !tpath)
		return msb__error_nomem(err);
	docker_response r;
	int rc = call(d, "GET", cpath, NULL, LIST_BODY, &r, err);
	if (rc < 0)
		return rc;
	if (r.status != 200) {
		rc = msb_docker__container_error(&r, ref, "fingerprint", err);
		msb_docker__response_clear(&r);
		return rc;
	}
	json_t *changes = body_json(&r);
	msb_docker__response_clear(&r);
	msb_fingerprint fp = {0};
	size_t i;
	json_t *c;
	/* podman reports /etc itself modified from the start: it creates the
	 * mount points of its /etc/hosts, hostname and resolv.conf there, and
	 * lists them not. That entry alone, with nothing under it, is the
	 * engine's, not a change of the sandbox's. */
	bool etc_alone = true;
	json_array_foreach (changes, i, c) {
		const char *p = json_string_value(json_object_get(c, "Path"));
		if (p && strncmp(p, "/etc/", 5) == 0)
			etc_alone = false;
	}
	json_array_foreach (changes, i, c) {
		const char *p = json_string_value(json_object_get(c, "Path"));
		if (p && etc_alone && strcmp(p, "/etc") == 0 &&
		    json_integer_value(json_object_get(c, "Kind")) == 0)
			continue;
		if (p && msb__strv_push(&fp.changed_paths, p) < 0)
			rc = msb__error_nomem(err);
	}
	json_decref(changes);
	if (rc == 0)
		rc = call(d, "GET", tpath, NULL, LIST_BODY, &r, err);
	json_t *top = NULL;
	if (rc == 0) {
		if (r.status == 200)
			top = body_json(&r);
		else
			rc = msb_docker__container_error(&r, ref, "fingerprint", err);
		msb_docker__response_clear(&r);
	}
	/* Every process but the container's idle init: its pid 1 in the
	 * container is not what top reports, so drop the `sleep infinity`. */
	json_t *proc;
	bool skipped_init = false;
	json_array_foreach (json_object_get(top, "Processes"), i, proc) {
		const char *args = json_string_value(json_array_get(proc, 1));
		if (!args)
			continue;
		if (!skipped_init && strcmp(args, "sleep infinity") == 0) {
			skipped_init = true;
			continue;
		}
		if (msb__strv_push(&fp.running_programs, args) < 0)
			rc = msb__error_nomem(err);
	}
	json_decref(top);
	if (rc < 0) {
		msb_fingerprint_clear(&fp);
		return rc;
	}
	if ((!fp.changed_paths && !(fp.changed_paths = calloc(1, sizeof(char *)))) ||
	    (!fp.running_programs && !(fp.running_programs = calloc(1, sizeof(char *))))) {
		msb_fingerprint_clear(&fp);
		return msb__error_nomem(err);
	}
	msb__strv_sort(fp.changed_paths);
	msb__strv_sort(fp.running_programs);
	*out = fp;
	*supported = true;
	return 0;
}

/* GET /json: GraphDriver.Data.MergedDir, where the engine keeps the
 * container's root filesystem on the host (overlay2; podman's overlay). */
int msb_docker__host_root(void *t, const char *ref, char **out, msb_error **err)
{
	docker_transport *d = t;
	_cleanup_free_ char *path = msb__asprintf("/containers/%s/json", ref);
	if (!path)
		return msb__error_nomem(err);
	docker_response r;
	int rc = call(d, "GET", path, NULL, INSPECT_BODY, &r, err);
	if (rc < 0)
		return rc;
	if (r.status != 200) {
		rc = msb_docker__container_error(&r, ref, "inspect", err);
		msb_docker__response_clear(&r);
		return rc;
	}
	json_t *doc = body_json(&r);
	msb_docker__response_clear(&r);
	const char *merged = json_string_value(json_object_get(
		json_object_get(json_object_get(doc, "GraphDriver"), "Data"), "MergedDir"));
	if (!merged || merged[0] != '/')
		rc = msb_error_set(err, MSB_E_NOT_IMPLEMENTED,
				   "the engine reports no host directory for container `%.12s`",
				   ref);
	else if (!(*out = msb__strdup(merged)))
		rc = msb__error_nomem(err);
	json_decref(doc);
	return rc;
}
