/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The `ns` file plane, enforced by the host kernel: every guest path is
 * resolved by the host with openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
 * RESOLVE_NO_MAGICLINKS) from a directory fd of the sandbox's storage base
 * (the host directory bind-mounted at the guest's work_dir), one component at
 * a time from fds already held, so a guest swapping a directory for a link
 * mid-call makes the call fail, never escape. The guest is never asked
 * (DESIGN §5). Paths in entries and messages are guest paths.
 *
 * Every function here is safe to call from several threads at once.
 */
#ifndef MSB_NS_FILES_H
#define MSB_NS_FILES_H

#include <msb/sandbox.h>

#include "util/util.h"

/* The largest file read_file hands out whatever max_bytes says: a guest can
 * make a sparse file of any size, and the host allocates what it reads. The
 * backend declares it as its max_bytes_per_file ceiling (ns_backend.c). */
#define MSB_NS_MAX_FILE_BYTES ((uint64_t)256 << 20)

typedef struct ns_files {
	const char *host_base;	/* <state>/<name>/work */
	const char *guest_base; /* the guest path it is mounted at */
	/* When set, the base is this O_PATH directory fd (borrowed) and
	 * host_base only names it in messages. */
	bool has_base_fd;
	int base_fd;
	/* When set, write_file stores here an O_PATH fd (the caller's to close)
	 * on the regular file of NS_RELEASE_LATER_MIN bytes or more that it
	 * replaced, else -1: its pages and blocks are then freed when that fd is
	 * closed, not in write_file's rename (the engine's host plane closes it
	 * off the caller's path, docs/internals/engine.md). */
	int *replaced;
} ns_files;

#define NS_RELEASE_LATER_MIN ((uint64_t)1 << 20)

/* write_file (9.11-9.18): parents created, a temporary sibling created with
 * O_EXCL then renamed into place, owned by the sandbox's mapped root. */
int msb_ns__write_file(const ns_files *f, const char *path, const uint8_t *data, size_t len,
		       const char *working_directory, msb_error **err);

/* stat_file (9.20): lstat-like on the leaf (a link is MSB_ENTRY_SYMLINK with
 * no size), parents walked (a link -> MSB_E_VALUE, another non-directory ->
 * MSB_E_NOT_DIRECTORY); absent -> *present = false. */
int msb_ns__stat_file(const ns_files *f, const char *path, const char *working_directory,
		      bool *present, msb_entry *out, msb_error **err);

/* read_file (9.21-9.23): regular files only; larger than max_bytes (checked
 * before reading and counted again while reading) -> MSB_E_TRANSFER_CAP_EXCEEDED
 * with the cap `max_bytes_per_file`, never truncated. max_bytes above
 * MSB_NS_MAX_FILE_BYTES counts as that ceiling. */
int msb_ns__read_file(const ns_files *f, const char *path, const char *working_directory,
		      uint64_t max_bytes, uint8_t **data, size_t *len, msb_error **err);

/* list_dir (9.24): the immediate children, sorted by name, links reported as
 * links; the listed directory itself is walked (a link -> MSB_E_VALUE). */
int msb_ns__list_dir(const ns_files *f, const char *path, const char *working_directory,
		     msb_entry **entries, size_t *n, msb_error **err);

/* remove (9.25): missing is success, a link is unlinked, a directory needs
 * `recursive` (even empty), the working directory itself is refused. */
int msb_ns__remove(const ns_files *f, const char *path, const char *working_directory,
		   bool recursive, msb_error **err);

/* reclaim (9.26, 9.27): remove `directory`, a descendant of the working
 * directory, and nothing the guest could not have removed itself. */
int msb_ns__reclaim(const ns_files *f, const char *directory, const char *working_directory,
		    msb_error **err);

/* The path relative to the storage base for (path, working_directory), after
 * the lexical confinement of 9.12/9.13; "" is the base itself. *wd_rel
 * (may be NULL) receives the working directory relative to the base. */
int msb_ns__relative(const ns_files *f, const char *path, const char *working_directory, char **rel,
		     char **wd_rel, msb_error **err);

#endif
