/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internals of the `oci` backend's host side. It is the ns backend's host
 * side with another shim and another state directory: names, labels,
 * limits, images, the file plane and reset are the ns code's (ns_int.h),
 * applied to `<state root>/oci/<name>/`.
 */
#ifndef MSB_OCI_INT_H
#define MSB_OCI_INT_H

#include <msb/oci_backend.h>

#include "backends/ns/ns_int.h"
#include "backends/oci/oci_shim.h"

typedef struct oci_backend {
	/* name, state_root, state_dir (<root>/oci), shim_path (msb-oci-shim),
	 * agent_path, image, limits, start_timeout: as an ns backend's. */
	ns_backend ns;
	oci_runtime runtime;
	char *runtime_path;
	char *platform; /* runsc only */
} oci_backend;

/* The isolation rung a runtime gives ("hardened_container", "container"). */
const char *msb_oci__rung(oci_runtime rt);

/* `name` searched in $PATH (executable), malloc'd; NULL when absent. */
char *msb_oci__find_in_path(const char *name);

/* The doctor of the `oci` row (oci_doctor.c). */
int msb_oci__doctor(msb_backend_probe *out, msb_error **err);

/* A handle onto one running sandbox (oci_sandbox.c). */
int msb_oci__sandbox_new(const oci_backend *b, const char *name, const msb_ns_labels *labels,
			 msb_sandbox **out, msb_error **err);

/* A claimed pooled sandbox takes its identity (oci_sandbox.c). */
int msb_oci__sandbox_identity(msb_sandbox *sb, const char *hostname, double timeout,
			      msb_error **err);

/* The warm pool's oci side (oci_pool.c). */
extern const ns_pool_ops msb_oci__pool_ops;

/* The fingerprint under gVisor (oci_fingerprint.c): the host's walk of the
 * writable layer, /dev/shm and the storage base, with the guest's special
 * files and processes asked of the agent over `c`. */
struct msb_client;
int msb_oci__gvisor_fingerprint(struct msb_client *c, int dfd, const char *dir,
				const char *guest_base, msb_fingerprint *out, msb_error **err);

/* Every directory from `path` up to / lets others traverse (o+x): the
 * runtime reaches the root as the sandbox's mapped root. MSB_E_PERMISSION
 * naming the first that does not. */
int msb_oci__check_traversable(const char *path, msb_error **err);

#endif
