/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A handle onto one `ns` sandbox: commands go straight to the agent over
 * `<state>/<name>/agent.sock` (the shim is not in the data path); the file
 * plane is served on the host (ns_files.c).
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>

#include <msb/backend.h>
#include <msb/ns.h>

#include "client/client.h"
#include "ns_files.h"
#include "backends/ns/boundary/boundary.h"
#include "ns_int.h"
#include "ns_snapshot.h"

#define NS_IDLE_CLIENTS 4
#define NS_CONNECT_TIMEOUT 10.0

typedef struct ns_sandbox {
	char *backend;
	char *sock_path;
	char *instance_id;
	ns_files files;
	char *host_base;
	char *guest_base;
	pthread_mutex_t lock;
	msb_client *idle[NS_IDLE_CLIENTS];
	size_t n_idle;
	/* Egress records become events when an exec ends and at reset. */
	char *dir; /* <state>/<name> */
	char *scope, *thread_id, *agent_dir, *call_id;
	msb_egress_reporter reporter;
} ns_sandbox;

static void drain_egress(ns_sandbox *s)
{
	if (!s->reporter.report)
		return;
	int dfd = open(s->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return;
	msb_key key = {s->scope, s->thread_id, s->agent_dir, s->call_id};
	msb_ns__egress_drain(dfd, &key, &s->reporter);
	close(dfd);
}

static int take_client(ns_sandbox *s, msb_client **out, msb_error **err)
{
	pthread_mutex_lock(&s->lock);
	msb_client *c = s->n_idle ? s->idle[--s->n_idle] : NULL;
	pthread_mutex_unlock(&s->lock);
	if (c) {
		*out = c;
		return 0;
	}
	int r = msb_client__connect(s->sock_path, NS_CONNECT_TIMEOUT, out, err);
	if (r < 0)
		return msb_error_wrap(err, "ns sandbox `%s` is not reachable", s->instance_id);
	return 0;
}

static void give_client(ns_sandbox *s, msb_client *c)
{
	pthread_mutex_lock(&s->lock);
	if (s->n_idle < NS_IDLE_CLIENTS) {
		s->idle[s->n_idle++] = c;
		c = NULL;
	}
	pthread_mutex_unlock(&s->lock);
	msb_client__free(c);
}

static int run(ns_sandbox *s, const msb_exec_request *req, msb_exec_result *out, msb_error **err)
{
	msb_client *c = NULL;
	int r = take_client(s, &c, err);
	if (r < 0)
		return r;
	/* What the limits did: counters before and after (ns_limits.c). */
	ns_outcome oc;
	msb_ns__outcome_begin(&oc, s->host_base);
	r = msb_client__exec(c, req, out, err);
	msb_ns__outcome_end(&oc, s->host_base, r, out, err);
	/* A client whose exec failed for the connection's sake reconnects by
	 * itself; keep it either way. */
	give_client(s, c);
	drain_egress(s);
	return r;
}

static int ns_exec(void *impl, const msb_exec_request *req, msb_exec_result *out, msb_error **err)
{
	msb_exec_request plain = *req;
	plain.max_output_bytes = 0;
	return run(impl, &plain, out, err);
}

static int ns_exec_bounded(void *impl, const msb_exec_request *req, msb_exec_result *out,
			   msb_error **err)
{
	return run(impl, req, out, err);
}

static int ns_run_code(void *impl, const char *code, double timeout, msb_cancel *cancel,
		       msb_exec_result *out, msb_error **err)
{
	return msb_error_set(err, MSB_E_NOT_IMPLEMENTED,
			     "the ns backend does not declare RUN_CODE: run a program with exec");
}

static int ns_write_file(void *impl, const char *path, const uint8_t *data, size_t len,
			 const char *working_directory, msb_error **err)
{
	ns_sandbox *s = impl;
	return msb_ns__write_file(&s->files, path, data, len, working_directory, err);
}

static int ns_stat_file(void *impl, const char *path, const char *working_directory, bool *present,
			msb_entry *out, msb_error **err)
{
	ns_sandbox *s = impl;
	return msb_ns__stat_file(&s->files, path, working_directory, present, out, err);
}

static int ns_read_file(void *impl, const char *path, const char *working_directory,
			uint64_t max_bytes, uint8_t **data, size_t *len, msb_error **err)
{
	ns_sandbox *s = impl;
	return msb_ns__read_file(&s->files, path, working_directory, max_bytes, data, len, err);
}

static int ns_list_dir(void *impl, const char *path, const char *working_directory,
		       msb_entry **entries, size_t *n, msb_error **err)
{
	ns_sandbox *s = impl;
	return msb_ns__list_dir(&s->files, path, working_directory, entries, n, err);
}

static int ns_remove(void *impl, const char *path, const char *working_directory, bool recursive,
		     msb_error **err)
{
	ns_sandbox *s = impl;
	return msb_ns__remove(&s->files, path, working_directory, recursive, err);
}

/* Served on the host by system calls that do not wait on the guest; `timeout`
 * is not applied (a very large tree takes the time its unlinks take). */
static int ns_reclaim(void *impl, const char *directory, const char *working_directory,
		      double timeout, msb_error **err)
{
	ns_sandbox *s = impl;
	return msb_ns__reclaim(&s->files, directory, working_directory, err);
}

/* SNAPSHOT: the shim restarts the sandbox (ns_snapshot.c). */
static int ns_reset(void *impl, double timeout, msb_error **err)
{
	ns_sandbox *s = impl;
	drain_egress(s);
	int r = msb_ns__snapshot_reset(s->sock_path, timeout, err);
	drain_egress(s);
	/* The old agent is gone: so are the connections to it. */
	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < s->n_idle; i++)
		msb_client__free(s->idle[i]);
	s->n_idle = 0;
	pthread_mutex_unlock(&s->lock);
	return r;
}

static int ns_fingerprint(void *impl, bool *supported, msb_fingerprint *out, msb_error **err)
{
	ns_sandbox *s = impl;
	return msb_ns__snapshot_fingerprint(s->sock_path, s->guest_base, supported, out, err);
}

static const char *ns_instance_id(void *impl)
{
	return ((ns_sandbox *)impl)->instance_id;
}

static void ns_release(void *impl)
{
	ns_sandbox *s = impl;
	if (!s)
		return;
	for (size_t i = 0; i < s->n_idle; i++)
		msb_client__free(s->idle[i]);
	pthread_mutex_destroy(&s->lock);
	free(s->backend);
	free(s->sock_path);
	free(s->instance_id);
	free(s->host_base);
	free(s->guest_base);
	free(s->dir);
	free(s->scope);
	free(s->thread_id);
	free(s->agent_dir);
	free(s->call_id);
	free(s);
}

static const msb_sandbox_ops ns_sandbox_ops = {
	.version = MSB_SANDBOX_OPS_VERSION,
	.exec = ns_exec,
	.exec_bounded = ns_exec_bounded,
	.run_code = ns_run_code,
	.write_file = ns_write_file,
	.stat_file = ns_stat_file,
	.read_file = ns_read_file,
	.list_dir = ns_list_dir,
	.remove = ns_remove,
	.reclaim = ns_reclaim,
	.reset = ns_reset,
	.fingerprint = ns_fingerprint,
	.instance_id = ns_instance_id,
	.release = ns_release,
};

int msb_ns__sandbox_new(const ns_backend *b, const char *name, const msb_ns_labels *labels,
			msb_sandbox **out, msb_error **err)
{
	ns_sandbox *s = calloc(1, sizeof(*s));
	if (!s)
		return msb__error_nomem(err);
	pthread_mutex_init(&s->lock, NULL);
	s->backend = strdup(b->name);
	s->sock_path = msb__asprintf("%s/%s/%s", b->state_dir, name, MSB_NS_STATE_SOCKET);
	s->instance_id = strdup(labels->instance_id);
	s->host_base = msb__asprintf("%s/%s/%s", b->state_dir, name, MSB_NS_STATE_WORK);
	s->guest_base = strdup(labels->work_dir ? labels->work_dir : MSB_DEFAULT_WORK_DIR);
	s->dir = msb__asprintf("%s/%s", b->state_dir, name);
	s->scope = msb__strdup(labels->scope);
	s->thread_id = msb__strdup(labels->thread_id);
	s->agent_dir = msb__strdup(labels->agent_dir);
	s->call_id = msb__strdup(labels->call_id);
	s->reporter = b->reporter;
	if (!s->backend || !s->sock_path || !s->instance_id || !s->host_base || !s->guest_base ||
	    !s->dir || (labels->scope && !s->scope) || (labels->thread_id && !s->thread_id) ||
	    (labels->agent_dir && !s->agent_dir) || (labels->call_id && !s->call_id)) {
		ns_release(s);
		return msb__error_nomem(err);
	}
	s->files.host_base = s->host_base;
	s->files.guest_base = s->guest_base;
	return msb_sandbox_new(&ns_sandbox_ops, s, b->name, out, err);
}

/* ---- the native host-tool channel ---------------------------------------------- */

int msb_ns_host_tools_attach(msb_sandbox *sb, msb_host_tool_run *run, msb_log_fn log,
			     void *log_userdata, msb_native_server **out, msb_error **err)
{
	ns_sandbox *s = msb_sandbox_impl(sb, &ns_sandbox_ops);
	if (!s)
		return msb_error_set(err, MSB_E_VALUE,
				     "native host tools: the sandbox is not an ns sandbox");
	return msb_native_server_start(s->host_base, s->guest_base, run, log, log_userdata, out,
				       err);
}
