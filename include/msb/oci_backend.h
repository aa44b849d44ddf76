/* SPDX-License-Identifier: Apache-2.0 */
/*
 * msb/oci_backend.h - the `oci` backend: each sandbox an OCI container under
 * a runtime found on the host, with msb-agent as the container's init.
 *
 * The runtime decides the isolation rung the backend declares, and nothing
 * else can raise it: `runsc` (gVisor: the guest's system calls are served by
 * a user-space kernel) declares `hardened_container`; `crun` (the host
 * kernel's namespaces) declares `container`. `runc` is refused for now
 * (MSB_E_NOT_IMPLEMENTED: it relays stdio through pipes of its own and
 * moves the container out of the sandbox's cgroup). Each sandbox is held
 * by a per-sandbox `msb-oci-shim`, which outlives the process that acquired
 * it, builds the root from the same images as `ns` (`host`, `dir:PATH`,
 * `oci:PATH[:TAG]`) below a size-capped writable layer, runs the runtime
 * with a strict bundle (no network but lo, no capabilities for workloads,
 * no_new_privs, masked paths, a user namespace, seccomp under crun) in
 * the sandbox's cgroup, and relays host connections onto the agent's
 * stdio. State lives in `<state root>/oci/<name>/`, named from the key as on
 * `ns`, so any process can find, reuse and dispose a sandbox another made.
 * docs/oci.md is the user's page; docs/internals/oci-backend.md the design.
 *
 * As a backend type (msb/backend.h) `oci` reads backend JSON with the keys
 * of msb_oci_options by the same names: name, runtime, runtime_path,
 * platform, state_dir, image, memory_bytes, pids_max, cpu_millis,
 * writable_bytes, start_timeout, pool_size, egress (an object,
 * docs/egress.md). Its doctor tries each runtime here.
 *
 * Root only (the runtimes run rootful). Thread-safety as msb/ns.h.
 */
#ifndef MSB_OCI_BACKEND_H
#define MSB_OCI_BACKEND_H

#include <msb/backend.h>
#include <msb/common.h>
#include <msb/error.h>

MSB_BEGIN_DECLS

typedef struct msb_oci_options {
	unsigned version;
	const char *name;	  /* NULL = "oci" */
	const char *runtime;	  /* "runsc" (default) or "crun" ("runc": refused) */
	const char *runtime_path; /* NULL = the runtime's name searched in PATH */
	const char *platform;	  /* runsc: the gVisor platform; NULL = "ptrace" */
	const char *state_root;	  /* NULL = $MSB_STATE_DIR, else /run/msb; it and every
				   * directory above it must let others traverse (o+x):
				   * the runtime reaches the root as the sandbox's mapped
				   * root */
	const char *shim_path;	  /* NULL = $MSB_OCI_SHIM, else the installed msb-oci-shim */
	const char *agent_path;	  /* NULL = $MSB_AGENT, else the installed msb-agent */
	const char *image;	  /* "host" (default), "dir:PATH" or "oci:PATH[:TAG]" */
	uint64_t memory_bytes;	  /* cgroup memory limit; 0 = default (512 MiB) */
	uint64_t pids_max;	  /* cgroup pids limit; 0 = default (512) */
	uint64_t cpu_millis;	  /* CPU quota, thousandths of a core; 0 = default (1000) */
	uint64_t writable_bytes;  /* the writable layer's size; 0 = default (256 MiB) */
	double start_timeout;	  /* seconds to wait for a new sandbox; 0 = 60 */
	/* Version 2: sandboxes kept started ahead per template, the warm pool
	 * of msb/ns.h (msb_ns_pool_fill, _list, _drain serve an oci backend
	 * too; docs/pool.md); 0 = none, at most MSB_NS_POOL_MAX. */
	unsigned pool_size;
	/* Version 2: the egress proxy's settings for ALLOWLIST sandboxes, strict
	 * JSON as msb_ns_options.egress_config (docs/egress.md); NULL = defaults. */
	const char *egress_config;
} msb_oci_options;
#define MSB_OCI_OPTIONS_VERSION 2
#define MSB_OCI_OPTIONS_INIT                                                                       \
	{                                                                                          \
		MSB_OCI_OPTIONS_VERSION, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 0, 0, 0,  \
			0, 0, 0, NULL                                                              \
	}

/* Make the backend. Refused with MSB_E_VALUE: an unknown runtime, a
 * platform for a runtime other than runsc, a bad image; MSB_E_NOT_FOUND: a
 * runtime not in PATH; MSB_E_NOT_IMPLEMENTED: runc; MSB_E_PERMISSION: not
 * root. Nothing starts until acquire. */
MSB_EXTERN int msb_oci_backend_new(const msb_oci_options *opts, msb_backend **out, msb_error **err);

/* The state root this oci backend resolved (it holds oci/<name>/ per
 * sandbox); NULL when `b` is not an oci backend. Borrowed while b lives. */
MSB_EXTERN const char *msb_oci_backend_state_root(const msb_backend *b);

/* The runtime it runs ("runsc", "crun", "runc"); NULL when `b` is not an
 * oci backend. Static. */
MSB_EXTERN const char *msb_oci_backend_runtime(const msb_backend *b);

MSB_END_DECLS

#endif
