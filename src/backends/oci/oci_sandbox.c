/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A handle onto one `oci` sandbox: commands go to `<state>/oci/<name>/
 * agent.sock`, where the shim's relay carries them onto the agent's stdio;
 * the file plane is the ns one, served on the host from the storage base
 * (a host directory bound into the container, which gVisor's gofer serves
 * from the host too); reset is the shim's, as on ns.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/statfs.h>

#include "backends/ns/ns_files.h"
#include "backends/ns/ns_snapshot.h"
#include "backends/oci/oci_int.h"
#include "client/client.h"

#define OCI_IDLE_CLIENTS 4
#define OCI_CONNECT_TIMEOUT 10.0

typedef struct oci_sandbox {
	char *sock_path;
	char *instance_id;
	char *runtime;
	bool gvisor;
	ns_files files;
	char *dir;	  /* <state>/oci/<name> */
	int dfd;	  /* that directory, opened once: the instance this handle is bound to */
	char *host_base;  /* <dir>/work */
	char *guest_base; /* the guest's work_dir */
	pthread_mutex_t lock;
	msb_client *idle[OCI_IDLE_CLIENTS];
	size_t n_idle;
	/* Egress records (allowlist) become EgressObserved events when an exec
	 * ends and at reset, as on ns. */
	char *scope, *thread_id, *agent_dir, *call_id;
	msb_egress_reporter reporter;
} oci_sandbox;

static void drain_egress(oci_sandbox *s)
{
	if (!s->reporter.report)
		return;
	msb_key key = {s->scope, s->thread_id, s->agent_dir, s->call_id};
	msb_ns__egress_drain(s->dfd, &key, &s->reporter);
}

static int take_client(oci_sandbox *s, msb_client **out, msb_error **err)
{
	pthread_mutex_lock(&s->lock);
	msb_client *c = s->n_idle ? s->idle[--s->n_idle] : NULL;
	pthread_mutex_unlock(&s->lock);
	if (c) {
		*out = c;
		return 0;
	}
	int r = msb_client__connect(s->sock_path, OCI_CONNECT_TIMEOUT, out, err);
	if (r < 0)
		return msb_error_wrap(err, "oci sandbox `%s` (%s) is not reachable", s->instance_id,
				      s->runtime);
	return 0;
}

static void give_client(oci_sandbox *s, msb_client *c)
{
	pthread_mutex_lock(&s->lock);
	if (s->n_idle < OCI_IDLE_CLIENTS) {
		s->idle[s->n_idle++] = c;
		c = NULL;
	}
	pthread_mutex_unlock(&s->lock);
	msb_client__free(c);
}

static void drop_clients(oci_sandbox *s)
{
	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < s->n_idle; i++)
		msb_client__free(s->idle[i]);
	s->n_idle = 0;
	pthread_mutex_unlock(&s->lock);
}

/*
 * Is the writable layer full? It is a tmpfs of the shim's own mount
 * namespace, seen through /proc/<shim>/root: the shim's start time, checked
 * after the look, proves the pid was the shim's all along. (ns looks through
 * the init's root; under gVisor the container's init is no host process.)
 */
static bool layer_full(const oci_sandbox *s)
{
	/* guest-names: ok - the sandbox's state dir, host-private */
	_cleanup_close_ int dfd = open(s->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	pid_t pid;
	uint64_t start, now;
	if (dfd < 0 || msb_ns__read_pid_file(dfd, MSB_NS_STATE_SHIM_PID, &pid, &start) < 0)
		return false;
	_cleanup_free_ char *path = msb__asprintf("/proc/%d/root%s/%s/%s/", (int)pid, s->dir,
						  OCI_STATE_PRIVATE, OCI_STATE_LAYER);
	struct statfs st;
	if (!path || statfs(path, &st) < 0 || msb_ns__proc_start_time(pid, &now) < 0 ||
	    now != start)
		return false;
	return st.f_blocks > 0 && (st.f_bavail == 0 || (st.f_files > 0 && st.f_ffree == 0));
}

static int run(oci_sandbox *s, const msb_exec_request *req, msb_exec_result *out, msb_error **err)
{
	msb_client *c = NULL;
	int r = take_client(s, &c, err);
	if (r < 0)
		return r;
	ns_outcome oc;
	msb_ns__outcome_begin(&oc, s->host_base);
	r = msb_client__exec(c, req, out, err);
	bool full = layer_full(s);
	msb_ns__outcome_end(&oc, s->host_base, r, out, err);
	drain_egress(s);
	/* What the ns look missed (under gVisor it sees no layer). */
	if (full && r == 0)
		out->no_space = true;
	else if (full && err && *err && !strstr(msb_error_message(*err), "is full"))
		msb_error_wrap(err, "the writable layer is full");
	give_client(s, c);
	return r;
}

static int oci_exec(void *impl, const msb_exec_request *req, msb_exec_result *out, msb_error **err)
{
	msb_exec_request plain = *req;
	plain.max_output_bytes = 0;
	return run(impl, &plain, out, err);
}

static int oci_exec_bounded(void *impl, const msb_exec_request *req, msb_exec_result *out,
			    msb_error **err)
{
	return run(impl, req, out, err);
}

static int oci_run_code(void *impl, const char *code, double timeout, msb_cancel *cancel,
			msb_exec_result *out, msb_error **err)
{
	return msb_error_set(err, MSB_E_NOT_IMPLEMENTED,
			     "the oci backend does not declare RUN_CODE: run a program with exec");
}

static int oci_write_file(void *impl, const char *path, const uint8_t *data, size_t len,
			  const char *working_directory, msb_error **err)
{
	oci_sandbox *s = impl;
	return msb_ns__write_file(&s->files, path, data, len, working_directory, err);
}

static int oci_stat_file(void *impl, const char *path, const char *working_directory, bool *present,
			 msb_entry *out, msb_error **err)
{
	oci_sandbox *s = impl;
	return msb_ns__stat_file(&s->files, path, working_directory, present, out, err);
}

static int oci_read_file(void *impl, const char *path, const char *working_directory,
			 uint64_t max_bytes, uint8_t **data, size_t *len, msb_error **err)
{
	oci_sandbox *s = impl;
	return msb_ns__read_file(&s->files, path, working_directory, max_bytes, data, len, err);
}

static int oci_list_dir(void *impl, const char *path, const char *working_directory,
			msb_entry **entries, size_t *n, msb_error **err)
{
	oci_sandbox *s = impl;
	return msb_ns__list_dir(&s->files, path, working_directory, entries, n, err);
}

static int oci_remove(void *impl, const char *path, const char *working_directory, bool recursive,
		      msb_error **err)
{
	oci_sandbox *s = impl;
	return msb_ns__remove(&s->files, path, working_directory, recursive, err);
}

static int oci_reclaim(void *impl, const char *directory, const char *working_directory,
		       double timeout, msb_error **err)
{
	oci_sandbox *s = impl;
	return msb_ns__reclaim(&s->files, directory, working_directory, err);
}

static int oci_reset(void *impl, double timeout, msb_error **err)
{
	oci_sandbox *s = impl;
	drain_egress(s); /* what the old proxy recorded */
	int r = msb_ns__snapshot_reset(s->dfd, s->dir, timeout, err);
	drop_clients(s); /* the old agent is gone, and the connections to it */
	drain_egress(s);
	return r;
}

/*
 * Under crun and runc the container is the host kernel's, exactly as an ns
 * sandbox is: the ns fingerprint reads it on the host (the writable layer
 * and /dev/shm from the shim, the storage base, the init's mount table and
 * pid namespace). Under gVisor the guest's processes, mounts, sockets and
 * fifos are the sentry's: the agent is asked for those (oci_fingerprint.c).
 */
static int oci_fingerprint(void *impl, bool *supported, msb_fingerprint *out, msb_error **err)
{
	oci_sandbox *s = impl;
	if (!s->gvisor)
		return msb_ns__snapshot_fingerprint(s->dfd, s->dir, s->guest_base, supported, out,
						    err);
	msb_client *c = NULL;
	int r = take_client(s, &c, err);
	if (r < 0)
		return r;
	r = msb_oci__gvisor_fingerprint(c, s->dfd, s->dir, s->guest_base, out, err);
	if (r < 0)
		msb_client__free(c); /* its state after a failure is unknown */
	else
		give_client(s, c);
	if (r == 0)
		*supported = true;
	return r;
}

static const char *oci_instance_id(void *impl)
{
	return ((oci_sandbox *)impl)->instance_id;
}

static void oci_release(void *impl)
{
	oci_sandbox *s = impl;
	if (!s)
		return;
	for (size_t i = 0; i < s->n_idle; i++)
		msb_client__free(s->idle[i]);
	pthread_mutex_destroy(&s->lock);
	if (s->dfd >= 0)
		close(s->dfd);
	free(s->sock_path);
	free(s->instance_id);
	free(s->runtime);
	free(s->dir);
	free(s->host_base);
	free(s->guest_base);
	free(s->scope);
	free(s->thread_id);
	free(s->agent_dir);
	free(s->call_id);
	free(s);
}

static const msb_sandbox_ops oci_sandbox_ops = {
	.version = MSB_SANDBOX_OPS_VERSION,
	.exec = oci_exec,
	.exec_bounded = oci_exec_bounded,
	.run_code = oci_run_code,
	.write_file = oci_write_file,
	.stat_file = oci_stat_file,
	.read_file = oci_read_file,
	.list_dir = oci_list_dir,
	.remove = oci_remove,
	.reclaim = oci_reclaim,
	.reset = oci_reset,
	.fingerprint = oci_fingerprint,
	.instance_id = oci_instance_id,
	.release = oci_release,
};

/*
 * A claimed pooled sandbox takes its identity (docs/pool.md): the shim
 * first (its directory's new path, the key's shim.json, the root's /etc
 * names), then the agent the host name, on a new connection kept for the
 * first exec.
 */
int msb_oci__sandbox_identity(msb_sandbox *sb, const char *hostname, double timeout,
			      msb_error **err)
{
	oci_sandbox *s = msb_sandbox_impl(sb, &oci_sandbox_ops);
	if (!s)
		return msb_error_set(err, MSB_E_VALUE, "oci: not an oci sandbox");
	int64_t deadline = msb__now_ns() + (int64_t)(timeout * 1e9);
	char reply[MSB_NS_CONTROL_LINE_MAX];
	int r = msb_ns__control(s->dfd, s->dir, OCI_CONTROL_IDENTITY, deadline, NULL, reply,
				sizeof(reply), err);
	if (r == 0 && strcmp(reply, "ok") != 0)
		r = msb_error_set(err, MSB_E_RUNTIME, "oci: the shim refused the claim: %s",
				  strncmp(reply, "error: ", 7) == 0 ? reply + 7 : reply);
	if (r < 0)
		return r;
	msb_client *c = NULL;
	if ((r = msb_client__open(s->sock_path, &c, err)) < 0)
		return r;
	int64_t left = deadline - msb__now_ns();
	r = msb_client__identity(c, hostname, left > 0 ? (double)left / 1e9 : 0.001, err);
	if (r < 0) {
		msb_client__free(c);
		return r;
	}
	give_client(s, c);
	return 0;
}

int msb_oci__sandbox_new(const oci_backend *b, const char *name, const msb_ns_labels *labels,
			 msb_sandbox **out, msb_error **err)
{
	oci_sandbox *s = calloc(1, sizeof(*s));
	if (!s)
		return msb__error_nomem(err);
	pthread_mutex_init(&s->lock, NULL);
	s->dfd = -1;
	s->sock_path = msb__asprintf("%s/%s/%s", b->ns.state_dir, name, MSB_NS_STATE_SOCKET);
	s->instance_id = strdup(labels->instance_id);
	s->runtime = strdup(msb_oci__runtime_name(b->runtime));
	s->gvisor = b->runtime == OCI_RUNSC;
	s->dir = msb__asprintf("%s/%s", b->ns.state_dir, name);
	s->host_base = msb__asprintf("%s/%s/%s", b->ns.state_dir, name, MSB_NS_STATE_WORK);
	s->guest_base = strdup(labels->work_dir ? labels->work_dir : MSB_DEFAULT_WORK_DIR);
	s->scope = msb__strdup(labels->scope);
	s->thread_id = msb__strdup(labels->thread_id);
	s->agent_dir = msb__strdup(labels->agent_dir);
	s->call_id = msb__strdup(labels->call_id);
	s->reporter = b->ns.reporter;
	if (!s->sock_path || !s->instance_id || !s->runtime || !s->dir || !s->host_base ||
	    !s->guest_base || (labels->scope && !s->scope) ||
	    (labels->thread_id && !s->thread_id) || (labels->agent_dir && !s->agent_dir) ||
	    (labels->call_id && !s->call_id)) {
		oci_release(s);
		return msb__error_nomem(err);
	}
	/* guest-names: ok - the sandbox's state dir, host-private */
	s->dfd = open(s->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (s->dfd < 0) {
		int e = errno;
		oci_release(s);
		return msb__error_errno(err, e, "oci: the sandbox `%s`", name);
	}
	s->files.host_base = s->host_base;
	s->files.guest_base = s->guest_base;
	return msb_sandbox_new(&oci_sandbox_ops, s, b->ns.name, out, err);
}
