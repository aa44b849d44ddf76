/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The root filesystem msb-oci-shim hands the OCI runtime, built in the
 * shim's own private mount namespace (nothing reaches the host's, and
 * everything goes when the shim and the runtime's processes are gone):
 *
 *   <state>/run/layer   tmpfs (writable_bytes): upper/, work/ (overlay), skel/
 *   <state>/run/rootfs  overlay: lower = the image's layers (`dir:` PATH or
 *                       the unpacked `oci` layers) over skel/; upper =
 *                       layer/upper
 *   <state>/run/shm     tmpfs (shm_bytes): bound at the guest's /dev/shm
 * (<state>/run itself a small tmpfs of the shim's: oci_shim.h)
 *
 * skel/ holds the mount points the bundle's mounts need and, for `host`,
 * the synthesized /etc, so that nothing the runtime does writes into
 * upper/: it holds exactly what changed since creation (the fingerprint).
 * Every entry of skel/ and the roots of upper/ and shm belong to the guest's
 * root (uid_base): the runtime maps guest ids onto that range.
 */
#ifndef MSB_BACKENDS_OCI_ROOTFS_H
#define MSB_BACKENDS_OCI_ROOTFS_H

#include "backends/ns/boundary/boundary.h"

typedef struct oci_rootfs {
	const msb_ns_config *cfg;
	int dfd; /* the state directory */
	/* After build: the writable layer's and /dev/shm's tmpfs roots
	 * (O_CLOEXEC), for the host's fingerprint. */
	int layer_fd;
	int shm_fd;
	/* `host` image: the host's /etc entries (oci_rootfs_host_binds) copied
	 * into skel/ instead of left for binds - under gVisor each bind is a
	 * gofer mount, ~7 ms of the sandbox's start apiece here. The copies are
	 * the guest's (a write lands in its layer); the host's stay untouched. */
	bool copy_etc;
	size_t copied; /* entries and KiB copied so far (a budget) */
	char err[512];
} oci_rootfs;
#define OCI_ROOTFS_INIT(c, d)                                                                      \
	{                                                                                          \
		.cfg = (c), .dfd = (d), .layer_fd = -1, .shm_fd = -1, .err = ""                    \
	}

/* Enter a private mount namespace (unshare, then / made recursively private). */
int oci_rootfs_private(char *err, size_t size);

/* crun refuses a host whose cgroup2 hierarchy is mounted beside v1
 * controllers ("hybrid"): in the private namespace, cover it with an empty
 * read-only tmpfs (unmount it if that fails). Nothing the sandbox needs
 * lives there (limits are the shim's, in v1). */
void oci_rootfs_hide_hybrid_cgroup2(void);

/* The private tmpfs at dfd/name (OCI_STATE_PRIVATE): *fd gets its root.
 * 0 or -errno with the reason in err. */
int oci_rootfs_private_tmpfs(int dfd, const char *name, int *fd, char *err, size_t size);
/* Unmount it (lazily), with every mount below it (the root's three) in
 * the same call: one RCU grace period in the kernel, not one per mount. */
void oci_rootfs_private_release(int dfd, const char *name);

/* Build the three mounts, below rf->dfd (the private tmpfs). On failure
 * rf->err says what failed; what was mounted stays for oci_rootfs_teardown. */
int oci_rootfs_build(oci_rootfs *rf);

/* Unmount the three (lazily: a runtime still holding them lets go when it
 * exits) and close the fds. Safe on a half-built or torn-down rootfs.
 * unmount false: close the fds only (oci_rootfs_private_release takes the
 * mounts with the private tmpfs they are on). */
void oci_rootfs_teardown(oci_rootfs *rf, bool unmount);

/* A pooled sandbox claimed under another name (docs/pool.md): for the
 * `host` image, the synthesized /etc/hostname and /etc/hosts in skel/
 * rewritten in place for `hostname`, so that they read as a sandbox
 * created with that name reads them and the writable layer stays empty.
 * 0, or -errno with the reason in rf->err. */
int oci_rootfs_rename_host(oci_rootfs *rf, const char *hostname);
/* The host paths the `host` image binds read-only into the guest (for the
 * bundle's mounts): /usr, the real directories among /bin /sbin /lib*, and
 * (with_etc: unless copied, oci_rootfs.copy_etc) the /etc entries the
 * host's programs need. *out is a NULL-terminated array of absolute paths
 * (msb_strv), whose mount points skel/ provides. */
int oci_rootfs_host_binds(bool with_etc, char ***out);

#endif
