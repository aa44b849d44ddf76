/* SPDX-License-Identifier: Apache-2.0 */
/* The bundle's config.json (oci_spec.c). */
#ifndef MSB_BACKENDS_OCI_SPEC_H
#define MSB_BACKENDS_OCI_SPEC_H

#include "backends/oci/oci_shim.h"

typedef struct oci_spec_input {
	const oci_shim_config *cfg;
	const char *state_dir;	 /* absolute: work/ is found below it */
	const char *private_dir; /* absolute: rootfs/, shm/ (OCI_STATE_PRIVATE) */
	const char *agent_path;	 /* the host's msb-agent, bound read-only */
	char *const *host_binds; /* `host` image: host paths bound read-only (or NULL) */
} oci_spec_input;

/* The document as text (malloc'd). 0 or -ENOMEM. */
int oci_spec_write(const oci_spec_input *in, char **out);

#endif
