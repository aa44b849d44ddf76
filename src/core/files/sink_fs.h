/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The filesystem sink's platform part (sink_fs.c holds the rest): hold the
 * root, and land one artifact beneath it - every parent made or opened
 * beneath the root without following a link (a symlink, or on Windows any
 * reparse point: a symlink or a junction), the leaf refused when it is a
 * link, the bytes written whole before the name appears. sink_fs_posix.c
 * (openat2, O_TMPFILE) or sink_fs_win32.c (handles held on every component);
 * the build system picks one (docs/windows.md).
 */
#ifndef MSB_CORE_SINK_FS_H
#define MSB_CORE_SINK_FS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <msb/outputs.h>

typedef struct fs_sink_root fs_sink_root;

/* Open the root (an existing directory, the host's choice: links in it are
 * followed, once) and resolve it: *resolved is its absolute form (malloc()).
 * 0, or -errno. */
int msb_fs_sink__root_open(const char *root, fs_sink_root **out, char **resolved);
void msb_fs_sink__root_close(fs_sink_root *r);

/* What a landing answers besides 0 (landed) and -errno. */
enum {
	FS_SINK_NOT_CONFINED = 1, /* a link (reparse point) on the way or at the leaf */
	FS_SINK_PARENT_NOT_DIR,	  /* a parent exists and is not a directory */
	FS_SINK_EXISTS,		  /* the destination exists (and may not be replaced) */
	FS_SINK_IS_DIR,		  /* the destination is a directory */
	FS_SINK_BAD_NAME,	  /* a name this platform cannot hold (Windows: "a:b", "CON") */
};

/* Land name (valid, msb_validate_artifact_name) with the bytes p[0..n) and
 * mode (POSIX permission bits); an existing regular file is replaced only
 * with MSB_LANDING_REPLACE. On -errno, *stage says what failed. */
int msb_fs_sink__land(fs_sink_root *r, const char *name, const uint8_t *p, size_t n, unsigned mode,
		      msb_landing_existing existing, const char **stage);

/* The handle a landed artifact is reported by: the root and the name joined
 * by the platform's separator. Newly allocated. */
char *msb_fs_sink__handle(const char *root, const char *name);

#endif
