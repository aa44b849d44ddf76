/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A handle onto one `ns` sandbox: commands go straight to the agent over
 * `<state>/<name>/agent.sock` (the shim is not in the data path); the file
 * plane is served on the host (ns_files.c).
 *
 * A handle is bound to its instance (issue 15 finding 3; STYLE: "after
 * dispose it fails, it never reaches a successor"). A state directory holds
 * one instance for the whole of its life - a disposal removes it, and an
 * acquire replacing a stale sandbox makes a new one - so the handle keeps a
 * descriptor of it and reaches everything through `/proc/self/fd/N/...`:
 * the agent's socket (also when a client reconnects), the shim's, the
 * storage base. Every call first checks that the instance is still there and
 * alive, and fails with MSB_E_SANDBOX_GONE when it is not; a call that the
 * instance's end cut short is reported the same way.
 */
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>

#include <msb/backend.h>
#include <msb/ns.h>

#include "client/client.h"
#include "ns_files.h"
#include "backends/ns/boundary/boundary.h"
#include "ns_int.h"
#include "ns_snapshot.h"

#define NS_IDLE_CLIENTS 4
/* The longest a connection's set-up (connect and HELLO) may take, whatever
 * is left of the call's own timeout. */
#define NS_CONNECT_TIMEOUT 10.0
/* After a call to the agent failed: how long the agent's shim gets to record
 * its death before the handle says so without the reason. */
#define NS_SETTLE_NS (1000LL * 1000 * 1000)

typedef struct ns_sandbox {
	char *backend;
	int dfd;	 /* the instance's state directory (an open file description of
			    its own: no lock is ever taken through it) */
	int shim_fd;	 /* a pidfd on the instance's shim (-1: not known) */
	char *sock_path; /* /proc/self/fd/<dfd>/agent.sock */
	char *fd_base;	 /* /proc/self/fd/<dfd>/work: the storage base, this instance's */
	char *host_base; /* <state>/<name>/work, by name (host tools) */
	char *instance_id;
	ns_files files;
	char *guest_base;
	pthread_mutex_t lock;
	msb_client *idle[NS_IDLE_CLIENTS];
	size_t n_idle;
	/* Egress records become events when an exec ends and at reset. */
	char *dir; /* <state>/<name>, for messages */
	char *scope, *thread_id, *agent_dir, *call_id;
	msb_egress_reporter reporter;
} ns_sandbox;

static void drain_egress(ns_sandbox *s)
{
	if (!s->reporter.report)
		return;
	msb_key key = {s->scope, s->thread_id, s->agent_dir, s->call_id};
	msb_ns__egress_drain(s->dfd, &key, &s->reporter);
}

/* ---- the instance -------------------------------------------------------------- */

/* MSB_E_SANDBOX_GONE for the state the directory is in (not RUNNING). */
static int gone(ns_sandbox *s, msb_ns_liveness live, const char *why, msb_error **err)
{
	if (live == MSB_NS_DEAD)
		return msb_error_set(err, MSB_E_SANDBOX_GONE,
				     "ns sandbox instance `%s` is dead: %s; acquire the key again "
				     "once it is disposed of",
				     s->instance_id, why ? why : "it stopped");
	return msb_error_set(err, MSB_E_SANDBOX_GONE, "ns sandbox instance `%s` is gone: %s",
			     s->instance_id, why ? why : "it was taken down");
}

/*
 * Is the handle's instance still there and alive? 0, or MSB_E_SANDBOX_GONE.
 * `settle`: a call to the agent has just failed. If the agent is gone and
 * no reset is under way (a reset holds the directory's lock, and the new
 * agent takes over), its shim is about to record why: wait for that a
 * moment, so the caller hears how the agent died.
 */
static int instance_check(ns_sandbox *s, bool settle, msb_error **err)
{
	struct stat st;
	if (fstat(s->dfd, &st) < 0 || st.st_nlink == 0)
		return gone(s, MSB_NS_STALE, "it was disposed of", err);
	/* The common case in three system calls: the shim's pidfd does not
	 * show it exited (a zombie has), and no death is recorded. */
	struct pollfd pf = {.fd = s->shim_fd, .events = POLLIN};
	bool quick = s->shim_fd >= 0 && poll(&pf, 1, 0) == 0 &&
		     faccessat(s->dfd, MSB_NS_STATE_DEAD, F_OK, AT_SYMLINK_NOFOLLOW) < 0 &&
		     errno == ENOENT;
	_cleanup_free_ char *why = NULL;
	msb_ns_liveness live = quick ? MSB_NS_RUNNING : msb_ns__liveness(s->dfd, NULL, &why);
	if (live != MSB_NS_RUNNING)
		return gone(s, live, why, err);
	if (!settle)
		return 0;
	_cleanup_close_ int lk = openat(s->dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (lk < 0 || flock(lk, LOCK_SH | LOCK_NB) < 0)
		return 0; /* a reset or an acquire holds it: the failure stands */
	int64_t until = msb__now_ns() + NS_SETTLE_NS;
	for (;;) {
		if (msb_ns__init_alive(s->dfd))
			return 0;
		free(why);
		why = NULL;
		int64_t left = until - msb__now_ns();
		live = msb_ns__liveness_settled(s->dfd, NULL, &why, left > 0 ? left : 0, NULL);
		if (live != MSB_NS_RUNNING)
			return gone(s, live, why, err);
		if (msb__now_ns() >= until)
			return gone(s, MSB_NS_DEAD, "its agent is not running", err);
		struct timespec ts = {0, 5 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
}

/* r < 0 from a call on the instance: when the instance's end is why, say
 * that instead (the first error is kept as the detail). */
static int explain(ns_sandbox *s, int r, bool settle, msb_error **err)
{
	if (r >= 0 || r == MSB_E_SANDBOX_GONE || r == MSB_E_CANCELLED)
		return r;
	msb_error *e = NULL;
	if (instance_check(s, settle, &e) == 0)
		return r;
	if (err && *err)
		msb_error_set_detail(&e, "%s", msb_error_message(*err));
	return msb__error_propagate(err, e); /* frees the first */
}

/* ---- commands ------------------------------------------------------------------ */

/* A connection to the agent within the call's deadline (finding 7: every wait
 * a call makes comes out of its own time). */
static int take_client(ns_sandbox *s, int64_t deadline, double timeout, msb_client **out,
		       msb_error **err)
{
	pthread_mutex_lock(&s->lock);
	msb_client *c = s->n_idle ? s->idle[--s->n_idle] : NULL;
	pthread_mutex_unlock(&s->lock);
	if (c) {
		*out = c; /* it reconnects, if it must, within the exec's deadline */
		return 0;
	}
	int64_t left_ns = deadline - msb__now_ns();
	double left = left_ns > 0 ? (double)left_ns / 1e9 : 0;
	bool capped = left > NS_CONNECT_TIMEOUT;
	int r = left > 0 ? msb_client__connect(s->sock_path, capped ? NS_CONNECT_TIMEOUT : left,
					       out, err)
			 : MSB_E_TIMEOUT;
	if (r == MSB_E_TIMEOUT && !capped) {
		/* The caller's own bound: a TimeoutError (9.4), nothing ran. */
		r = msb_error_set(err, MSB_E_TIMEOUT,
				  "command timed out after %g s: the sandbox agent did not answer",
				  timeout);
		msb__error_set_timeout(err, MSB_SIGNAL_ABSENT, NULL, 0);
		return r;
	}
	if (r == MSB_E_TIMEOUT)
		/* Not the caller's bound: never a TimeoutError (9.4). */
		return msb_error_set(err, MSB_E_RUNTIME,
				     "ns sandbox `%s`: the agent did not answer within %g s",
				     s->instance_id, NS_CONNECT_TIMEOUT);
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
	int r = msb__check_timeout(req->timeout, "timeout", err);
	if (r < 0)
		return r;
	int64_t now = msb__now_ns();
	double ns = req->timeout * 1e9;
	int64_t deadline = ns < (double)(INT64_MAX - now) ? now + (int64_t)ns : INT64_MAX;
	if ((r = instance_check(s, false, err)) < 0)
		return r;
	msb_client *c = NULL;
	r = take_client(s, deadline, req->timeout, &c, err);
	if (r < 0)
		return explain(s, r, r != MSB_E_TIMEOUT, err);
	/* What the limits did: counters before and after (ns_limits.c). */
	ns_outcome oc;
	msb_ns__outcome_begin(&oc, s->fd_base);
	r = msb_client__exec_until(c, req, deadline, out, err);
	msb_ns__outcome_end(&oc, s->fd_base, r, out, err);
	/* A client whose exec failed for the connection's sake reconnects by
	 * itself (to this instance: its path is the directory's descriptor);
	 * keep it either way. */
	give_client(s, c);
	drain_egress(s);
	/* The agent died under the exec (an OOM kill, a kill from outside):
	 * say so rather than "connection lost" (finding 2). */
	return explain(s, r, r == MSB_E_PROTOCOL || r == MSB_E_RUNTIME, err);
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

/* The file plane: the instance checked first, the call made through the
 * directory's descriptor, and a failure the instance's end caused said as
 * such. */
#define ON_INSTANCE(s, err, call)                                                                  \
	do {                                                                                       \
		int r_ = instance_check((s), false, (err));                                        \
		if (r_ == 0)                                                                       \
			r_ = explain((s), (call), false, (err));                                   \
		return r_;                                                                         \
	} while (0)

static int ns_write_file(void *impl, const char *path, const uint8_t *data, size_t len,
			 const char *working_directory, msb_error **err)
{
	ns_sandbox *s = impl;
	ON_INSTANCE(s, err, msb_ns__write_file(&s->files, path, data, len, working_directory, err));
}

static int ns_stat_file(void *impl, const char *path, const char *working_directory, bool *present,
			msb_entry *out, msb_error **err)
{
	ns_sandbox *s = impl;
	ON_INSTANCE(s, err,
		    msb_ns__stat_file(&s->files, path, working_directory, present, out, err));
}

static int ns_read_file(void *impl, const char *path, const char *working_directory,
			uint64_t max_bytes, uint8_t **data, size_t *len, msb_error **err)
{
	ns_sandbox *s = impl;
	ON_INSTANCE(
		s, err,
		msb_ns__read_file(&s->files, path, working_directory, max_bytes, data, len, err));
}

static int ns_list_dir(void *impl, const char *path, const char *working_directory,
		       msb_entry **entries, size_t *n, msb_error **err)
{
	ns_sandbox *s = impl;
	ON_INSTANCE(s, err, msb_ns__list_dir(&s->files, path, working_directory, entries, n, err));
}

static int ns_remove(void *impl, const char *path, const char *working_directory, bool recursive,
		     msb_error **err)
{
	ns_sandbox *s = impl;
	ON_INSTANCE(s, err, msb_ns__remove(&s->files, path, working_directory, recursive, err));
}

/* Served on the host by system calls that do not wait on the guest; `timeout`
 * is not applied (a very large tree takes the time its unlinks take). */
static int ns_reclaim(void *impl, const char *directory, const char *working_directory,
		      double timeout, msb_error **err)
{
	ns_sandbox *s = impl;
	ON_INSTANCE(s, err, msb_ns__reclaim(&s->files, directory, working_directory, err));
}

/* SNAPSHOT: the shim restarts the sandbox (ns_snapshot.c). */
static int ns_reset(void *impl, double timeout, msb_error **err)
{
	ns_sandbox *s = impl;
	int r = instance_check(s, false, err);
	if (r < 0)
		return r;
	drain_egress(s);
	r = msb_ns__snapshot_reset(s->dfd, s->dir, timeout, err);
	drain_egress(s);
	/* The old agent is gone: so are the connections to it. */
	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < s->n_idle; i++)
		msb_client__free(s->idle[i]);
	s->n_idle = 0;
	pthread_mutex_unlock(&s->lock);
	return r == MSB_E_TIMEOUT ? r : explain(s, r, false, err);
}

static int ns_fingerprint(void *impl, bool *supported, msb_fingerprint *out, msb_error **err)
{
	ns_sandbox *s = impl;
	ON_INSTANCE(
		s, err,
		msb_ns__snapshot_fingerprint(s->dfd, s->dir, s->guest_base, supported, out, err));
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
	if (s->dfd >= 0)
		close(s->dfd);
	if (s->shim_fd >= 0)
		close(s->shim_fd);
	free(s->backend);
	free(s->sock_path);
	free(s->fd_base);
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
	/* the agent streams both ways and allocates terminals (client_exec.c) */
	.exec_io = MSB_EXEC_CAN_STDIN_FD | MSB_EXEC_CAN_OUTPUT | MSB_EXEC_CAN_TTY,
};

int msb_ns__sandbox_new(const ns_backend *b, const char *name, int dfd, const msb_ns_labels *labels,
			int shim_fd, msb_sandbox **out, msb_error **err)
{
	ns_sandbox *s = calloc(1, sizeof(*s));
	if (!s) {
		if (shim_fd >= 0)
			close(shim_fd);
		return msb__error_nomem(err);
	}
	pthread_mutex_init(&s->lock, NULL);
	s->shim_fd = shim_fd;
	/* An open file description of its own: the caller's holds the lock,
	 * which must not outlive the acquire. */
	s->dfd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (s->dfd >= 0 && s->shim_fd < 0) {
		int64_t shim = 0;
		msb_ns__shim_alive(s->dfd, &shim, &s->shim_fd);
	}
	if (s->dfd < 0) {
		int e = errno;
		ns_release(s);
		return msb__error_errno(err, e, "ns: open the state of `%s`", name);
	}
	s->backend = strdup(b->name);
	s->sock_path = msb__asprintf("/proc/self/fd/%d/%s", s->dfd, MSB_NS_STATE_SOCKET);
	s->fd_base = msb__asprintf("/proc/self/fd/%d/%s", s->dfd, MSB_NS_STATE_WORK);
	s->instance_id = strdup(labels->instance_id);
	s->host_base = msb__asprintf("%s/%s/%s", b->state_dir, name, MSB_NS_STATE_WORK);
	s->guest_base = strdup(labels->work_dir ? labels->work_dir : MSB_DEFAULT_WORK_DIR);
	s->dir = msb__asprintf("%s/%s", b->state_dir, name);
	s->scope = msb__strdup(labels->scope);
	s->thread_id = msb__strdup(labels->thread_id);
	s->agent_dir = msb__strdup(labels->agent_dir);
	s->call_id = msb__strdup(labels->call_id);
	s->reporter = b->reporter;
	if (!s->backend || !s->sock_path || !s->fd_base || !s->instance_id || !s->host_base ||
	    !s->guest_base || !s->dir || (labels->scope && !s->scope) ||
	    (labels->thread_id && !s->thread_id) || (labels->agent_dir && !s->agent_dir) ||
	    (labels->call_id && !s->call_id)) {
		ns_release(s);
		return msb__error_nomem(err);
	}
	s->files.host_base = s->fd_base;
	s->files.guest_base = s->guest_base;
	return msb_sandbox_new(&ns_sandbox_ops, s, b->name, out, err);
}

/* ---- a claimed pooled sandbox's identity ---------------------------------------- */

int msb_ns__sandbox_identity(msb_sandbox *sb, const char *hostname, bool egress, double timeout,
			     msb_error **err)
{
	ns_sandbox *s = msb_sandbox_impl(sb, &ns_sandbox_ops);
	if (!s)
		return msb_error_set(err, MSB_E_VALUE, "ns: not an ns sandbox");
	int64_t deadline = msb__now_ns() + (int64_t)(timeout * 1e9);
	int r = 0;
	if (egress) {
		/* The shim first: the rules are in force before anything runs. */
		char reply[MSB_NS_CONTROL_LINE_MAX];
		r = msb_ns__control(s->dfd, s->dir, MSB_NS_CONTROL_EGRESS, deadline, NULL, reply,
				    sizeof(reply), err);
		if (r == 0 && strcmp(reply, "ok") != 0)
			r = msb_error_set(err, MSB_E_RUNTIME,
					  "ns: the shim refused the egress rules: %s",
					  strncmp(reply, "error: ", 7) == 0 ? reply + 7 : reply);
		if (r < 0)
			return r;
	}
	/* A new connection: its HELLO and IDENTITY go out together. */
	msb_client *c = NULL;
	if ((r = msb_client__open(s->sock_path, &c, err)) < 0)
		return r;
	int64_t left = deadline - msb__now_ns();
	r = msb_client__identity(c, hostname, left > 0 ? (double)left / 1e9 : 0.001, err);
	if (r < 0) {
		msb_client__free(c);
		return r;
	}
	/* The first exec goes out on this connection. */
	give_client(s, c);
	return 0;
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
