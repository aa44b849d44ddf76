/* SPDX-License-Identifier: Apache-2.0 */
/* Private to the in-process fake: what fake_backend.c needs from fake_sandbox.c. */
#ifndef MSB_BACKENDS_FAKE_FAKE_H
#define MSB_BACKENDS_FAKE_FAKE_H

#include <msb/testing.h>

/* A handle onto `fs` that reports `backend_name` (copied) as its backend and
 * names it in its refusals. Takes a new reference on fs. */
int msb_fake__sandbox_handle(msb_fake_sandbox *fs, const char *backend_name, msb_sandbox **out,
			     msb_error **err);

/* 10.1-10.3: make sure the storage base exists as a directory; a link or a
 * non-directory at it or above it is refused. */
int msb_fake__ensure_base(msb_fake_sandbox *fs, msb_error **err);

/* The emulated POSIX guest (msb_fake_sandbox_options.posix_guest). Each
 * helper takes the fake's lock itself; links are never followed. */
/* 1 and the entry (*data malloc()ed for files, may be NULL) when present,
 * 0 when absent, -ENOMEM. */
int msb_fake__guest_get(msb_fake_sandbox *fs, const char *abs, msb_entry_kind *kind, uint8_t **data,
			size_t *len);
/* A regular file or a link at abs: 0, -ENOENT (parent missing), -ENOTDIR
 * (parent not a directory), -EISDIR (a directory is there), -ENOMEM. */
int msb_fake__guest_put(msb_fake_sandbox *fs, const char *abs, msb_entry_kind kind,
			const uint8_t *data, size_t len);
/* mkdir -p: 0, -ENOTDIR (a non-directory on the way or at abs), -ENOMEM. */
int msb_fake__guest_mkdirs(msb_fake_sandbox *fs, const char *abs);
/* Run one command of the emulated guest; `wd` is absolute. */
int msb_fake__guest_exec(msb_fake_sandbox *fs, const msb_exec_request *req, const char *wd,
			 uint64_t budget, msb_exec_result *out, msb_error **err);

#endif
