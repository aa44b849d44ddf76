/* SPDX-License-Identifier: Apache-2.0 */
/* Internals shared by the ns boundary's files (child-side rootfs, helpers). */
#ifndef MSB_BACKENDS_NS_INTERNAL_H
#define MSB_BACKENDS_NS_INTERNAL_H

#include "backends/ns/boundary/boundary.h"

/*
 * What the child needs to build its root. Everything is resolved and opened
 * before the clone; the child only makes system calls and formats messages
 * into `err` (one line, "what: reason").
 */
typedef struct msb_ns_rootfs {
	const msb_ns_config *cfg;
	/* Host paths, opened again by the child inside its own mount namespace
	 * (a mount from the parent's namespace cannot be a mount target, a bind
	 * source or an overlay layer there), each checked against the identity
	 * the parent saw. */
	const char *stage_path; /* the new root (or the overlay's tmpfs) is mounted here */
	const char *work_path;	/* the host work dir, bound at cfg->work_dir */
	dev_t stage_dev, work_dev, image_dev;
	ino_t stage_ino, work_ino, image_ino;
	int stage_fd; /* opened by msb_ns__rootfs_open() */
	int work_fd;
	int image_fd; /* MSB_NS_IMAGE_DIR only */
	/* MSB_NS_IMAGE_OCI: cfg->layers, top first, with the identities the
	 * parent saw and the fds msb_ns__rootfs_open() fills (n_layers each). */
	const dev_t *layer_dev;
	const ino_t *layer_ino;
	int *layer_fds;
	bool single_id; /* one-id mapping: only guest uid/gid 0 exist */
	/* Set by msb_ns__rootfs_build(), O_CLOEXEC: the tmpfs of the writable
	 * layer (upper/, the overlay's work/, skel/) and /dev/shm's root. */
	int layer_fd;
	int shm_fd;
	/* `host` image: the synthesized /etc in skel/ (O_PATH, O_CLOEXEC), which
	 * the agent keeps to rewrite hostname and hosts when a pooled sandbox
	 * is given its identity (MSB_PROTO_IDENTITY); -1 otherwise. */
	int etc_fd;
	char err[512];
} msb_ns_rootfs;

/* In the child, once its ids are mapped but before it takes uid 0 (the
 * host-side directories may be closed to the guest's root): open the host
 * paths in the child's mount namespace. */
int msb_ns__rootfs_open(msb_ns_rootfs *rf);

/* In the child, inside the new user and mount namespaces (ids mapped, / made
 * private): build the root on stage_fd, pivot_root into it and detach the
 * old root. On return 0 the working directory is the new "/". On failure
 * returns -errno and rf->err says what failed. */
int msb_ns__rootfs_build(msb_ns_rootfs *rf);

/* Format "what: strerror(-r)" (or just `what` when r == 0) into buf. */
void msb_ns__fmt_err(char *buf, size_t size, int r, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* Write a string to an existing file (sysfs/procfs/cgroupfs style). */
int msb_ns__write_string(int dirfd, const char *path, const char *s);

#endif
