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

#endif
