/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libarchive, loaded when the first OCI layer is unpacked (lazy_lib.h): the
 * functions oci_unpack.c calls, through a table of libarchive's own types.
 * Include it instead of <archive.h> and <archive_entry.h>, and call
 * msb_ns__archive_load() before any archive_* function.
 */
#ifndef MSB_NS_ARCHIVE_LAZY_H
#define MSB_NS_ARCHIVE_LAZY_H

#include <archive.h>
#include <archive_entry.h>

#include "util/util.h"

#define MSB_ARCHIVE_FUNCTIONS(X)                                                                   \
	X(archive_entry_filetype)                                                                  \
	X(archive_entry_gid)                                                                       \
	X(archive_entry_hardlink)                                                                  \
	X(archive_entry_hardlink_utf8)                                                             \
	X(archive_entry_mtime)                                                                     \
	X(archive_entry_mtime_is_set)                                                              \
	X(archive_entry_mtime_nsec)                                                                \
	X(archive_entry_pathname)                                                                  \
	X(archive_entry_pathname_utf8)                                                             \
	X(archive_entry_perm)                                                                      \
	X(archive_entry_rdevmajor)                                                                 \
	X(archive_entry_rdevminor)                                                                 \
	X(archive_entry_size)                                                                      \
	X(archive_entry_size_is_set)                                                               \
	X(archive_entry_symlink)                                                                   \
	X(archive_entry_symlink_utf8)                                                              \
	X(archive_entry_uid)                                                                       \
	X(archive_error_string)                                                                    \
	X(archive_read_data_block)                                                                 \
	X(archive_read_free)                                                                       \
	X(archive_read_new)                                                                        \
	X(archive_read_next_header)                                                                \
	X(archive_read_open)                                                                       \
	X(archive_read_support_filter_gzip)                                                        \
	X(archive_read_support_filter_zstd)                                                        \
	X(archive_read_support_format_tar)                                                         \
	X(archive_set_error)

#define MSB_LAZY_SLOT(f) __typeof__(f) *f;
typedef struct msb_archive_api {
	MSB_ARCHIVE_FUNCTIONS(MSB_LAZY_SLOT)
} msb_archive_api;
#undef MSB_LAZY_SLOT

extern msb_archive_api msb_ns__archive;

/* Load libarchive (once per process); MSB_E_RUNTIME when it cannot be. */
int msb_ns__archive_load(msb_error **err);

#ifndef MSB_ARCHIVE_LAZY_IMPL
/* Every call goes through the table. */
#define archive_entry_filetype (msb_ns__archive.archive_entry_filetype)
#define archive_entry_gid (msb_ns__archive.archive_entry_gid)
#define archive_entry_hardlink (msb_ns__archive.archive_entry_hardlink)
#define archive_entry_hardlink_utf8 (msb_ns__archive.archive_entry_hardlink_utf8)
#define archive_entry_mtime (msb_ns__archive.archive_entry_mtime)
#define archive_entry_mtime_is_set (msb_ns__archive.archive_entry_mtime_is_set)
#define archive_entry_mtime_nsec (msb_ns__archive.archive_entry_mtime_nsec)
#define archive_entry_pathname (msb_ns__archive.archive_entry_pathname)
#define archive_entry_pathname_utf8 (msb_ns__archive.archive_entry_pathname_utf8)
#define archive_entry_perm (msb_ns__archive.archive_entry_perm)
#define archive_entry_rdevmajor (msb_ns__archive.archive_entry_rdevmajor)
#define archive_entry_rdevminor (msb_ns__archive.archive_entry_rdevminor)
#define archive_entry_size (msb_ns__archive.archive_entry_size)
#define archive_entry_size_is_set (msb_ns__archive.archive_entry_size_is_set)
#define archive_entry_symlink (msb_ns__archive.archive_entry_symlink)
#define archive_entry_symlink_utf8 (msb_ns__archive.archive_entry_symlink_utf8)
#define archive_entry_uid (msb_ns__archive.archive_entry_uid)
#define archive_error_string (msb_ns__archive.archive_error_string)
#define archive_read_data_block (msb_ns__archive.archive_read_data_block)
#define archive_read_free (msb_ns__archive.archive_read_free)
#define archive_read_new (msb_ns__archive.archive_read_new)
#define archive_read_next_header (msb_ns__archive.archive_read_next_header)
#define archive_read_open (msb_ns__archive.archive_read_open)
#define archive_read_support_filter_gzip (msb_ns__archive.archive_read_support_filter_gzip)
#define archive_read_support_filter_zstd (msb_ns__archive.archive_read_support_filter_zstd)
#define archive_read_support_format_tar (msb_ns__archive.archive_read_support_format_tar)
#define archive_set_error (msb_ns__archive.archive_set_error)
#endif

#endif
