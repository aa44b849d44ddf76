/* SPDX-License-Identifier: Apache-2.0 */
/* Internals shared by the `ns` backend's host-side files. */
#ifndef MSB_NS_INT_H
#define MSB_NS_INT_H

#include <pthread.h>

#include <msb/backend.h>
#include <jansson.h>
#include <msb/ns.h>
#include <msb/spec.h>

#include "ns_state.h"

struct ns_pool_ops;

typedef struct ns_backend {
	char *name;
	char *state_root; /* the resolved root (msb_ns_backend_state_root) */
	char *state_dir;  /* <root>/ns */
	char *shim_path;
	char *agent_path;
	char *image;
	uint64_t memory_bytes;
	uint64_t pids_max;
	uint64_t cpu_millis;
	uint64_t writable_bytes;
	double start_timeout;
	char *egress_config;	      /* JSON (egress.h), validated; NULL = defaults */
	msb_egress_reporter reporter; /* set once, at registration */
	unsigned pool_size;	      /* pooled sandboxes kept per template (ns_pool.c) */
	/* What the pool does through the backend it serves: ns's own, or the
	 * oci backend's, which embeds an ns_backend (oci_pool.c). */
	const struct ns_pool_ops *pool_ops;
	/* Refills under way in this process (threads); the backend waits for
	 * them before it goes. */
	pthread_mutex_t refill_lock;
	pthread_cond_t refill_done;
	unsigned refills;
	msb_ns_progress_fn progress; /* image unpack progress; NULL = none */
	void *progress_userdata;
} ns_backend;

/* The ns backend behind b, or NULL. */
ns_backend *msb_ns__backend_of(const msb_backend *b);

/* Resolve options into a backend description (defaults, env, paths). */
int msb_ns__backend_init(ns_backend *b, const msb_ns_options *opts, msb_error **err);
void msb_ns__backend_clear(ns_backend *b);

/* The shim's configuration for one sandbox, as JSON (ns_config.c;
 * docs/internals/ns-boundary.md has the keys). */
int msb_ns__shim_config(const ns_backend *b, const msb_spec *spec, const char *work_dir,
			const char *name, char **out, msb_error **err);
/* The same as an object without the host name (a sandbox's template, before
 * it has a name: ns_pool.c), and its text with `hostname` set. */
int msb_ns__shim_config_obj(const ns_backend *b, const msb_spec *spec, const char *work_dir,
			    json_t **out, msb_error **err);
int msb_ns__shim_config_text(json_t *cfg, const char *hostname, char **out, msb_error **err);

/* Images (ns_image.c): is `image` one this backend can serve; its keys in
 * the shim's configuration. */
int msb_ns__image_check(const char *image, msb_error **err);
int msb_ns__config_image(json_t *cfg, const ns_backend *b, msb_error **err);

/* Limits (ns_limits.c): the cgroup and writable-layer limits for a sandbox
 * of this spec, as keys of the shim's configuration. */
int msb_ns__config_limits(json_t *cfg, const ns_backend *b, const msb_spec *spec, msb_error **err);
/* At acquire: MSB_E_VALUE naming the limit when the spec asks for more than
 * the backend allows. */
int msb_ns__limits_check(const ns_backend *b, const msb_spec *spec, msb_error **err);
/* Reusing the warm sandbox `name` (its state directory is dirfd): refused
 * unless it runs with exactly the limits this spec gets. */
int msb_ns__limits_match(int dirfd, const char *name, const ns_backend *b, const msb_spec *spec,
			 msb_error **err);

/* What the limits did during one exec (msb_exec_result's oom_killed,
 * pids_exhausted, no_space): begin reads the sandbox's cgroup counters,
 * end reads them again and looks at the writable layer and the storage base,
 * then sets the result's flags (r == 0) or, with no result, adds them to
 * *err. work_path is the host path of `<state>/<name>/work`. Never fails: a
 * counter that cannot be read reports nothing. */
typedef struct ns_outcome {
	int oom_fd;	/* memory.events (v2) or memory.oom_control (v1) */
	int failcnt_fd; /* v1 without an oom_kill count: memory.failcnt */
	int pids_fd;	/* pids.events */
	uint64_t oom, failcnt, pids;
} ns_outcome;
void msb_ns__outcome_begin(ns_outcome *o, const char *work_path);
void msb_ns__outcome_end(ns_outcome *o, const char *work_path, int r, msb_exec_result *out,
			 msb_error **err);

/* Egress (ns_egress.c, docs/egress.md). The proxy's configuration for a
 * sandbox of this spec (*out NULL when the spec is not ALLOWLIST); the
 * warm-reuse check against the one it runs with; the records turned into
 * EgressObserved events. */
#define MSB_NS_EGRESS_CONFIG "egress.json"
int msb_ns__egress_check_config(const char *json, msb_error **err);
int msb_ns__egress_config(const ns_backend *b, const msb_spec *spec, char **out, msb_error **err);
int msb_ns__egress_match(int dfd, const char *name, const char *want, msb_error **err);
void msb_ns__egress_drain(int dfd, const msb_key *key, const msb_egress_reporter *rep);

/* 2 * nbytes hex digits of the kernel's randomness into out (nbytes <= 32). */
int msb_ns__random_hex(char *out, size_t nbytes);

/* The labels of a sandbox made (or claimed) now for `key`: a new instance id
 * in `instance`, which *l points into, as into key, kind, work_dir and image
 * (`what` names the backend in the error). ns_backend.c. */
int msb_ns__key_labels(msb_ns_labels *l, char instance[33], const msb_key *key, const char *kind,
		       const char *work_dir, const char *image, const char *what, msb_error **err);

/* pool_size (at most MSB_NS_POOL_MAX) and egress (an object, as compact
 * JSON in *egress, malloc'd) of an ns or oci backend JSON. ns_json.c. */
int msb_ns__json_pool_egress(json_t *obj, const char *w, unsigned *pool_size, char **egress,
			     msb_error **err);

/* Start msb-shim on the state directory `dir` (ns_backend.c): with `ready`,
 * *ready receives the pipe msb_ns__shim_await reads its report from; `pool`
 * passes --pool (a pooled sandbox: the shim locks the directory until it is
 * ready). */
int msb_ns__shim_spawn(const ns_backend *b, const char *dir, bool egress, bool pool, int *ready,
		       msb_error **err);
int msb_ns__shim_await(const ns_backend *b, int fd, double timeout, msb_error **err);

/* ---- the warm pool (ns_pool.c, docs/pool.md) ---- */

/* What a pooled sandbox is made from, and its digest: the shim's
 * configuration without a host name, the egress proxy's settings without the
 * spec's rules (allowlist only), the shim's and the agent's binaries (device,
 * inode, size, mtime) and the caller's ids. */
typedef struct ns_template {
	json_t *cfg;	   /* msb_ns__shim_config_obj */
	char *egress_base; /* allowlist: egress.json while pooled ("allow": []); else NULL */
	char digest[65];   /* hex SHA-256; "" until msb_ns__template_digest */
	char dir[17];	   /* its first 16 digits: <state>/ns/pool/<dir> */
} ns_template;
int msb_ns__template_init(const ns_backend *b, const msb_spec *spec, const char *work_dir,
			  ns_template *t, msb_error **err);
int msb_ns__template_digest(const ns_backend *b, ns_template *t, msb_error **err);
void msb_ns__template_clear(ns_template *t);

/*
 * The warm pool serves the ns backend and the oci backend (its shim and
 * runtime differ, its state directories and files are the same): what
 * differs goes through these. `purge` takes down what a shim left in the
 * state directory `dir`; `claimed` makes the handle of a pooled sandbox
 * just renamed onto `name` (sfd: its directory, locked; shim_pidfd taken)
 * and gives it its identity (msb_ns__sandbox_identity's).
 */
typedef struct ns_pool_ops {
	const char *what; /* the backend type: "ns", "oci" */
	/* the pool's directories: 0711 when the runtime must traverse them */
	mode_t dir_mode;
	/* pools allowlist templates too (a claim puts the spec's rules in force) */
	bool allowlist;
	/* keys the backend adds to a template's shim configuration; NULL: none */
	int (*config_extra)(const ns_backend *b, json_t *cfg, msb_error **err);
	/* one more binary whose identity is part of the template; NULL: none */
	const char *(*extra_binary)(const ns_backend *b);
	int (*spawn)(const ns_backend *b, const char *dir, bool egress, bool pool, int *ready,
		     msb_error **err);
	int (*await)(const ns_backend *b, int fd, double timeout, msb_error **err);
	int (*purge)(const char *dir, int timeout_ms, msb_error **err);
	int (*claimed)(ns_backend *b, const char *name, int sfd, const msb_ns_labels *labels,
		       int shim_pidfd, const char *hostname, bool egress, double timeout,
		       msb_sandbox **out, msb_error **err);
} ns_pool_ops;
extern const ns_pool_ops msb_ns__pool_ns_ops;

/* The backend whose pool the public verbs (msb_ns_pool_*) serve: an ns
 * backend, or the ns part of an oci backend (oci_pool.c); NULL else. */
ns_backend *msb_ns__pool_backend_of(const msb_backend *b);
ns_backend *msb_oci__pool_backend_of(const msb_backend *b);

/* Is there a pool at all under this backend's state root (one faccessat)? */
bool msb_ns__pool_exists(const ns_backend *b, int statefd);
/*
 * Hand the key a pooled sandbox of template t (digest computed): it is
 * renamed onto `name`, the key's directory in statefd, which the caller
 * holds locked and empty, and given its identity (labels, instance id, host
 * name, egress rules `egress`). 1 with *out set; 0 when the pool has none
 * ready; 2 when one failed after it took the key's name (its directory is
 * gone again: start over); < 0 on error.
 */
int msb_ns__pool_claim(ns_backend *b, const ns_template *t, const msb_key *key, const char *kind,
		       const char *work_dir, const char *egress, const char *name, int statefd,
		       msb_sandbox **out, msb_error **err);
/* Bring the pool of t up to the backend's pool_size in the background (a
 * thread; the shims start detached). No-op when pool_size is 0. */
void msb_ns__pool_refill(ns_backend *b, const ns_template *t);
/* Wait for the refills this backend started (before it is freed). */
void msb_ns__pool_wait(ns_backend *b);

/* Descriptors an acquire wants free in the calling process before it starts
 * (the shim it starts inherits the same RLIMIT_NOFILE with fewer open):
 * fewer is refused as "out of file descriptors" up front. */
#define MSB_NS_ACQUIRE_FDS 64u

/* A handle onto one running sandbox (ns_sandbox.c), bound to its instance:
 * it keeps a descriptor of the state directory dfd names (the directory of
 * one instance for the whole of its life) and reaches the sandbox only
 * through it. shim_fd: a pidfd on its shim, which the handle takes (closed
 * on failure too), or -1: looked up here. */
int msb_ns__sandbox_new(const ns_backend *b, const char *name, int dfd, const msb_ns_labels *labels,
			int shim_fd, msb_sandbox **out, msb_error **err);
/* A claimed pooled sandbox takes its identity (ns_pool.c): the agent is
 * given `hostname` (its connection is kept for the first exec) and, with
 * `egress`, the shim puts the egress.json now in the directory in force. */
int msb_ns__sandbox_identity(msb_sandbox *sb, const char *hostname, bool egress, double timeout,
			     msb_error **err);

#endif
