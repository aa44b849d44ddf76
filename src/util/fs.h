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
/*
 * An anonymous regular file in the directory dirfd, open for writing with
 * `mode` (O_TMPFILE): it has no name until msb__tmpfile_link gives it one, so
 * a writer killed meanwhile leaves nothing in the directory. Returns the fd,
 * or -errno; -EOPNOTSUPP (-EISDIR or -EINVAL on kernels without O_TMPFILE)
 * says the filesystem cannot, and the caller falls back to a named temporary.
 */
int msb__tmpfile_open(int dirfd, mode_t mode);
/*
 * Give the anonymous file `fd` the name dirfd/name; never follows a link at
 * the name. Without `replace`, an existing name fails with -EEXIST. With it,
 * an existing non-directory (a link: the link itself) is replaced: the file is
 * linked under a private name (tmp_prefix + random hex) and renamed onto
 * `name`; a writer killed between those two calls leaves that complete file
 * under the private name. -errno.
 */
int msb__tmpfile_link(int fd, int dirfd, const char *name, bool replace, const char *tmp_prefix);
/* Read a small file (<= max bytes) into a NUL-terminated buffer. -errno. */
int msb__read_file_at(int dirfd, const char *name, size_t max, char **out, size_t *len);

/* The budget on this process's own descriptors: 0 when at least `need` more
 * can be opened under RLIMIT_NOFILE, else MSB_E_OS, "<what>: out of file
 * descriptors: N of this process's limit of M are open, and it needs K
 * free" (so an EMFILE deep inside is not reported as something else). */
int msb__fds_headroom(unsigned need, const char *what, msb_error **err);

#endif
