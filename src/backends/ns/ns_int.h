/* SPDX-License-Identifier: Apache-2.0 */
/* Internals shared by the `ns` backend's host-side files. */
#ifndef MSB_NS_INT_H
#define MSB_NS_INT_H

#include <msb/backend.h>
#include <jansson.h>
#include <msb/ns.h>
#include <msb/spec.h>

#include "ns_state.h"

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
	msb_ns_progress_fn progress;  /* image unpack progress; NULL = none */
	void *progress_userdata;
} ns_backend;

/* Resolve options into a backend description (defaults, env, paths). */
int msb_ns__backend_init(ns_backend *b, const msb_ns_options *opts, msb_error **err);
void msb_ns__backend_clear(ns_backend *b);

/* The shim's configuration for one sandbox, as JSON (ns_config.c;
 * docs/internals/ns-boundary.md has the keys). */
int msb_ns__shim_config(const ns_backend *b, const msb_spec *spec, const char *work_dir,
			const char *name, char **out, msb_error **err);

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

/* Descriptors an acquire wants free in the calling process before it starts
 * (the shim it starts inherits the same RLIMIT_NOFILE with fewer open):
 * fewer is refused as "out of file descriptors" up front. */
#define MSB_NS_ACQUIRE_FDS 64u

/* A handle onto one running sandbox (ns_sandbox.c), bound to its instance:
 * it keeps a descriptor of the state directory dfd names (the directory of
 * one instance for the whole of its life) and reaches the sandbox only
 * through it. */
int msb_ns__sandbox_new(const ns_backend *b, const char *name, int dfd, const msb_ns_labels *labels,
			msb_sandbox **out, msb_error **err);

#endif
