/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A handle onto one `vm` sandbox: commands go to the guest agent through
 * `<state>/vm/<name>/agent.sock`, where msb-vm-shim carries each connection
 * over the guest's serial port. What is not served yet is refused with
 * MSB_E_NOT_IMPLEMENTED (the backend does not declare it either).
 */
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>

#include "backends/ns/boundary/boundary.h"
#include "backends/ns/ns_snapshot.h"
#include "client/client.h"
#include "vm_backend.h"
#include "vm_files.h"

#define VM_IDLE_CLIENTS 4
#define VM_CONNECT_TIMEOUT 10.0
#define VM_GONE_WAIT_MS 3000

typedef struct vm_sandbox {
	char *backend;
	char *name;
	char *dir;
	char *sock_path;
	char *instance_id;
	char *guest_base;
	vm_files files;
	pthread_mutex_t lock;
	msb_client *idle[VM_IDLE_CLIENTS];
	size_t n_idle;
	bool seen_known; /* the guest's counters seen last (under lock) */
	uint64_t oom_seen, pids_seen;
	/* Egress records become events when an exec ends and at reset. */
	msb_ns_labels key; /* scope, thread_id, agent_dir, call_id */
	msb_egress_reporter reporter;
} vm_sandbox;

static void drain_egress(vm_sandbox *s)
{
	if (!s->reporter.report)
		return;
	_cleanup_close_ int dfd = open(s->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd >= 0)
		msb_vm__egress_drain(dfd, &s->key, &s->reporter);
}

/* Is the VM's shim (and so its VMM) still there? A shim whose VMM died is
 * on its way out: give it a moment to finish. */
static bool alive(vm_sandbox *s)
{
	_cleanup_close_ int dfd = open(s->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return false;
	int64_t pid = 0;
	int pidfd = -1;
	msb_ns__shim_alive(dfd, &pid, &pidfd);
	if (pid <= 0)
		return false;
	struct pollfd p = {.fd = pidfd, .events = POLLIN};
	int r;
	do
		r = poll(&p, 1, VM_GONE_WAIT_MS);
	while (r < 0 && errno == EINTR);
	close(pidfd);
	return r == 0;
}

/* A failure on a VM that is gone says so, with a runtime error (typed
 * "the sandbox is gone", not a protocol fault of the agent). */
static int gone(vm_sandbox *s, int r, msb_error **err)
{
	if (alive(s))
		return r;
	_cleanup_free_ char *was = msb__strdup(err && *err ? msb_error_message(*err) : NULL);
	if (err) {
		msb_error_free(*err);
		*err = NULL;
	}
	return msb_error_set(err, MSB_E_RUNTIME,
			     "the VM `%s` is gone (its VMM or shim exited or was killed): "
			     "dispose it or acquire again: %s",
			     s->name, was ? was : "no detail");
}

static int take_client(vm_sandbox *s, msb_client **out, msb_error **err)
{
	pthread_mutex_lock(&s->lock);
	msb_client *c = s->n_idle ? s->idle[--s->n_idle] : NULL;
	pthread_mutex_unlock(&s->lock);
	if (c) {
		*out = c;
		return 0;
	}
	int r = msb_client__connect(s->sock_path, VM_CONNECT_TIMEOUT, out, err);
	if (r < 0)
		return gone(s,
			    msb_error_wrap(err, "vm sandbox `%s` is not reachable", s->instance_id),
			    err);
	return 0;
}

static void give_client(vm_sandbox *s, msb_client *c)
{
	pthread_mutex_lock(&s->lock);
	if (s->n_idle < VM_IDLE_CLIENTS) {
		s->idle[s->n_idle++] = c;
		c = NULL;
	}
	pthread_mutex_unlock(&s->lock);
	msb_client__free(c);
}

static int run_file(void *ud, const msb_exec_request *req, msb_exec_result *out, msb_error **err);

/*
 * What the guest's limits did, looked at after a command that failed (a
 * success needs no explanation, and each look is one more request to the
 * guest): `oom_killed` when the guest kernel's OOM kill count grew since the
 * last look (before any look: when the command died of SIGKILL and the count
 * is not zero), `pids_exhausted` when the guest's pids limit refused a fork
 * since the last look (before any: ever), `no_space` when the storage base
 * or the writable layer has no free block left. Nothing is reported when the
 * look fails.
 */
static void observe(vm_sandbox *s, msb_exec_result *out)
{
	uint64_t oom = 0, pids = 0;
	bool full = false;
	msb_error *e = NULL;
	if (msb_vm__outcome(&s->files, &oom, &pids, &full, &e) < 0) {
		msb_error_free(e);
		return;
	}
	pthread_mutex_lock(&s->lock);
	out->oom_killed = s->seen_known ? oom > s->oom_seen : oom > 0 && out->term_signal == 9;
	out->pids_exhausted = s->seen_known ? pids > s->pids_seen : pids > 0;
	s->oom_seen = oom;
	s->pids_seen = pids;
	s->seen_known = true;
	pthread_mutex_unlock(&s->lock);
	out->no_space = full;
}

static int run(vm_sandbox *s, const msb_exec_request *req, msb_exec_result *out, msb_error **err)
{
	msb_client *c = NULL;
	int r = take_client(s, &c, err);
	if (r < 0)
		return r;
	r = msb_client__exec(c, req, out, err);
	give_client(s, c);
	drain_egress(s);
	if (r < 0 && r != MSB_E_TIMEOUT && r != MSB_E_CANCELLED && r != MSB_E_VALUE &&
	    r != MSB_E_NOT_FOUND && r != MSB_E_NOT_DIRECTORY && r != MSB_E_PERMISSION)
		r = gone(s, r, err);
	if (r == 0 && out->exit_code != 0)
		observe(s, out);
	return r;
}

static int vm_exec(void *impl, const msb_exec_request *req, msb_exec_result *out, msb_error **err)
{
	msb_exec_request plain = *req;
	plain.max_output_bytes = 0;
	return run(impl, &plain, out, err);
}

static int vm_exec_bounded(void *impl, const msb_exec_request *req, msb_exec_result *out,
			   msb_error **err)
{
	return run(impl, req, out, err);
}

static int vm_run_code(void *impl, const char *code, double timeout, msb_cancel *cancel,
		       msb_exec_result *out, msb_error **err)
{
	return msb_error_set(err, MSB_E_NOT_IMPLEMENTED,
			     "the vm backend does not declare RUN_CODE: run a program with exec");
}

/* One file request through the agent (vm_files.c). */
static int run_file(void *ud, const msb_exec_request *req, msb_exec_result *out, msb_error **err)
{
	vm_sandbox *s = ud;
	msb_client *c = NULL;
	int r = take_client(s, &c, err);
	if (r < 0)
		return r;
	r = msb_client__exec_file(c, req, out, err);
	give_client(s, c);
	if (r < 0 && r != MSB_E_TIMEOUT && r != MSB_E_CANCELLED)
		r = gone(s, r, err);
	return r;
}

static int vm_write_file(void *impl, const char *path, const uint8_t *data, size_t len,
			 const char *working_directory, msb_error **err)
{
	vm_sandbox *s = impl;
	return msb_vm__write_file(&s->files, path, data, len, working_directory, err);
}

static int vm_stat_file(void *impl, const char *path, const char *working_directory, bool *present,
			msb_entry *out, msb_error **err)
{
	vm_sandbox *s = impl;
	return msb_vm__stat_file(&s->files, path, working_directory, present, out, err);
}

static int vm_read_file(void *impl, const char *path, const char *working_directory,
			uint64_t max_bytes, uint8_t **data, size_t *len, msb_error **err)
{
	vm_sandbox *s = impl;
	return msb_vm__read_file(&s->files, path, working_directory, max_bytes, data, len, err);
}

static int vm_list_dir(void *impl, const char *path, const char *working_directory,
		       msb_entry **entries, size_t *n, msb_error **err)
{
	vm_sandbox *s = impl;
	return msb_vm__list_dir(&s->files, path, working_directory, entries, n, err);
}

static int vm_remove(void *impl, const char *path, const char *working_directory, bool recursive,
		     msb_error **err)
{
	vm_sandbox *s = impl;
	return msb_vm__remove(&s->files, path, working_directory, recursive, err);
}

static int vm_reclaim(void *impl, const char *directory, const char *working_directory,
		      double timeout, msb_error **err)
{
	vm_sandbox *s = impl;
	return msb_vm__reclaim(&s->files, directory, working_directory, err);
}

/* SNAPSHOT: the shim boots the VM anew from its configuration, under the
 * same name, labels and instance id; its control socket speaks the `ns`
 * shim's protocol, so the `ns` client of it serves (ns_snapshot.c). */
static int vm_reset(void *impl, double timeout, msb_error **err)
{
	vm_sandbox *s = impl;
	int r;
	drain_egress(s);
	{
		_cleanup_close_ int dfd =
			open(s->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		r = dfd < 0 ? msb__error_errno(err, errno, "vm reset: the sandbox `%s`", s->dir)
			    : msb_ns__snapshot_reset(dfd, s->dir, timeout, err);
	}
	/* The old VM is gone: so are the connections to it, and what its
	 * counters said. */
	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < s->n_idle; i++)
		msb_client__free(s->idle[i]);
	s->n_idle = 0;
	s->seen_known = false;
	pthread_mutex_unlock(&s->lock);
	drain_egress(s);
	if (r < 0)
		return msb_error_wrap(err, "vm");
	return 0;
}

/* Taken inside the guest (vm_fingerprint.c, agent/layer.c). */
static int vm_fingerprint(void *impl, bool *supported, msb_fingerprint *out, msb_error **err)
{
	vm_sandbox *s = impl;
	msb_fingerprint fp = {NULL, NULL};
	int r = msb_vm__fingerprint(&s->files, &fp, err);
	if (r < 0)
		return r;
	*out = fp;
	*supported = true;
	return 0;
}

static const char *vm_instance_id(void *impl)
{
	return ((vm_sandbox *)impl)->instance_id;
}

static void vm_release(void *impl)
{
	vm_sandbox *s = impl;
	if (!s)
		return;
	for (size_t i = 0; i < s->n_idle; i++)
		msb_client__free(s->idle[i]);
	pthread_mutex_destroy(&s->lock);
	free(s->backend);
	free(s->name);
	free(s->dir);
	free(s->sock_path);
	free(s->instance_id);
	free(s->guest_base);
	free(s->key.scope);
	free(s->key.thread_id);
	free(s->key.agent_dir);
	free(s->key.call_id);
	free(s);
}

static const msb_sandbox_ops vm_sandbox_ops = {
	.version = MSB_SANDBOX_OPS_VERSION,
	.exec = vm_exec,
	.exec_bounded = vm_exec_bounded,
	.run_code = vm_run_code,
	.write_file = vm_write_file,
	.stat_file = vm_stat_file,
	.read_file = vm_read_file,
	.list_dir = vm_list_dir,
	.remove = vm_remove,
	.reclaim = vm_reclaim,
	.reset = vm_reset,
	.fingerprint = vm_fingerprint,
	.instance_id = vm_instance_id,
	.release = vm_release,
	/* the guest's agent streams both ways and allocates terminals
	 * (client_exec.c, protocol version 2; issue 16) */
	.exec_io = MSB_EXEC_CAN_STDIN_FD | MSB_EXEC_CAN_OUTPUT | MSB_EXEC_CAN_TTY,
};

int msb_vm__sandbox_new(const vm_backend *b, const char *name, const msb_ns_labels *labels,
			msb_sandbox **out, msb_error **err)
{
	vm_sandbox *s = calloc(1, sizeof(*s));
	if (!s)
		return msb__error_nomem(err);
	pthread_mutex_init(&s->lock, NULL);
	s->backend = strdup(b->name);
	s->name = strdup(name);
	s->dir = msb__asprintf("%s/%s", b->state_dir, name);
	s->sock_path = msb__asprintf("%s/%s/%s", b->state_dir, name, MSB_NS_STATE_SOCKET);
	s->instance_id = strdup(labels->instance_id);
	s->guest_base = strdup(labels->work_dir ? labels->work_dir : MSB_DEFAULT_WORK_DIR);
	s->key.scope = msb__strdup(labels->scope);
	s->key.thread_id = msb__strdup(labels->thread_id);
	s->key.agent_dir = msb__strdup(labels->agent_dir);
	s->key.call_id = msb__strdup(labels->call_id);
	s->reporter = b->reporter;
	if (!s->backend || !s->name || !s->dir || !s->sock_path || !s->instance_id ||
	    !s->guest_base || (labels->scope && !s->key.scope) ||
	    (labels->thread_id && !s->key.thread_id) || (labels->agent_dir && !s->key.agent_dir) ||
	    (labels->call_id && !s->key.call_id)) {
		vm_release(s);
		return msb__error_nomem(err);
	}
	s->files = (vm_files){
		.backend = s->backend, .guest_base = s->guest_base, .run = run_file, .ud = s};
	return msb_sandbox_new(&vm_sandbox_ops, s, b->name, out, err);
}
