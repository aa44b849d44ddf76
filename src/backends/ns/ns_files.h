/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The `ns` file plane, enforced by the host kernel: every guest path is
 * resolved by the host with openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
 * RESOLVE_NO_MAGICLINKS) from a directory fd of the sandbox's storage base
 * (the host directory bind-mounted at the guest's work_dir). The guest is
 * never asked (DESIGN §5).
 */
#ifndef MSB_NS_FILES_H
#define MSB_NS_FILES_H

#include "util/util.h"

typedef struct ns_files {
	const char *host_base;	/* <state>/<name>/work */
	const char *guest_base; /* the guest path it is mounted at */
} ns_files;

/* write_file (9.11-9.18): parents created, a temporary sibling created with
 * O_EXCL then renamed into place, owned by the sandbox's mapped root. */
int msb_ns__write_file(const ns_files *f, const char *path, const uint8_t *data, size_t len,
		       const char *working_directory, msb_error **err);

/* The path relative to the storage base for (path, working_directory), after
 * the lexical confinement of 9.12/9.13; "" is the working directory's own
 * path when it is the base. *wd_rel receives the working directory relative
 * to the base. */
int msb_ns__relative(const ns_files *f, const char *path, const char *working_directory, char **rel,
		     char **wd_rel, msb_error **err);

#endif
