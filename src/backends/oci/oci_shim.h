/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What msb-oci-shim and the `oci` backend share: the runtimes, the state
 * directory's files beyond the ns ones, and the shim's configuration.
 * docs/internals/oci-backend.md describes the design.
 *
 *   <state>/oci/<name>/
 *     labels.json shim.json shim.pid init.pid cgroups   as on ns (ns_state.h)
 *     agent.sock     the relay's socket: hosts connect here (oci_relay.h)
 *     shim.sock      the control socket: "fds", "reset" (as on ns)
 *     work/          the storage base, bound at the guest's work_dir
 *     run/           a mount point: in the shim's private mount namespace a
 *                    small tmpfs holding what only the shim and the runtime
 *                    use, gone with them (no file on the host's disk):
 *       bundle/        the OCI bundle: config.json (root.path = rootfs/)
 *       runtime/       the runtime's private --root (its state)
 *       rootfs/ layer/ shm/   mount points: the overlay root, the tmpfs of
 *                      its writable layer, the tmpfs of /dev/shm
 *       container.pid  the runtime's --pid-file
 */
#ifndef MSB_BACKENDS_OCI_SHIM_H
#define MSB_BACKENDS_OCI_SHIM_H

#include <stdbool.h>

#include "backends/ns/boundary/boundary.h"
#include "util/util.h"

typedef enum oci_runtime {
	OCI_RUNSC = 0, /* gVisor: hardened_container */
	OCI_CRUN = 1,  /* container */
	OCI_RUNC = 2,  /* container */
} oci_runtime;
#define OCI_N_RUNTIMES 3

/* "runsc", "crun", "runc"; NULL for a bad value. */
const char *msb_oci__runtime_name(oci_runtime rt);
/* -1 when `name` is none of them. */
int msb_oci__runtime_from_name(const char *name);

/* The control request of a claim (docs/pool.md): the pooled sandbox's
 * directory was renamed onto a key's and its shim.json rewritten. */
#define OCI_CONTROL_IDENTITY "identity"
#define OCI_STATE_PRIVATE "run"
#define OCI_STATE_BUNDLE "bundle"
#define OCI_STATE_RUNTIME "runtime"
#define OCI_STATE_ROOTFS "rootfs"
#define OCI_STATE_LAYER "layer"
#define OCI_STATE_SHM "shm"
#define OCI_STATE_CONTAINER_PID "container.pid"
/* Where the agent binary is bound inside the guest. */
#define OCI_AGENT_DIR ".msb"
#define OCI_AGENT_NAME "msb-agent"
#define OCI_AGENT_GUEST_PATH "/" OCI_AGENT_DIR "/" OCI_AGENT_NAME

/* The gVisor platforms runsc may be asked for. */
#define OCI_DEFAULT_PLATFORM "ptrace"

/*
 * The shim's configuration (shim.json): every key of the ns shim's
 * configuration (docs/internals/ns-boundary.md: image, layers, hostname,
 * work_dir, uid_base, writable_bytes, shm_bytes, the cgroup limits,
 * rlimits, egress "closed") and:
 *   runtime        "runsc", "crun" or "runc"
 *   runtime_path   absolute path of its binary
 *   platform       runsc only: the gVisor platform ("ptrace", "kvm", ...)
 */
typedef struct oci_shim_config {
	msb_ns_config ns;
	oci_runtime runtime;
	char *runtime_path;
	char *platform;
} oci_shim_config;

int msb_oci__shim_config_parse(oci_shim_config *c, const char *json, size_t len, msb_error **err);
void msb_oci__shim_config_clear(oci_shim_config *c);

/* Remove the oci files of a state directory (run/, empty on the host); the
 * ns ones are msb_ns__state_remove_files'. Never crosses a mount
 * (msb__rm_rf_at). 0 or the first -errno. */
int msb_oci__state_remove_files(int dirfd);

/*
 * The purge of an oci sandbox's state directory: msb_ns__state_purge (the
 * shim, the recorded init, the cgroups - every runtime, sentry and gofer
 * process is in them - the sockets and the work tree), then the oci files.
 */
int msb_oci__state_purge(const char *state_dir, bool remove_dir, int timeout_ms, msb_error **err);

#endif
