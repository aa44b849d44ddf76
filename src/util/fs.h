/* SPDX-License-Identifier: Apache-2.0 */
/* Host filesystem helpers that never follow a link they did not expect. */
#ifndef MSB_UTIL_FS_H
#define MSB_UTIL_FS_H

#include "util.h"

/* mkdir -p with `mode` for created components. -errno. */
int msb__mkdir_p(const char *path, mode_t mode);
/* Remove `name` under dirfd recursively; never follows links, never crosses
 * a mount point (EXDEV); directories left unsearchable are opened up first.
 * Missing is success. -errno. */
int msb__rm_rf_at(int dirfd, const char *name);
/* Remove `path` recursively (as above). */
int msb__rm_rf(const char *path);
/* Write `data` to dirfd/name atomically (tmp + fsync-free rename). -errno. */
int msb__write_file_atomic_at(int dirfd, const char *name, const void *data, size_t len,
			      mode_t mode);
/* Read a small file (<= max bytes) into a NUL-terminated buffer. -errno. */
int msb__read_file_at(int dirfd, const char *name, size_t max, char **out, size_t *len);

/* The budget on this process's own descriptors: 0 when at least `need` more
 * can be opened under RLIMIT_NOFILE, else MSB_E_OS, "<what>: out of file
 * descriptors: N of this process's limit of M are open, and it needs K
 * free" (so an EMFILE deep inside is not reported as something else). */
int msb__fds_headroom(unsigned need, const char *what, msb_error **err);

#endif
