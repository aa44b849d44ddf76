/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MSB_TESTS_UNIT_INERT_SANDBOX_H
#define MSB_TESTS_UNIT_INERT_SANDBOX_H

#include <msb/backend.h>
#include <msb/sandbox.h>

/* Its vtable: the identity msb_sandbox_impl() compares. */
extern const msb_sandbox_ops test_inert_ops;

/* A sandbox whose every operation refuses; instance_id is copied. */
int test_inert_sandbox_new(const char *instance_id, const char *backend, msb_sandbox **out,
			   msb_error **err);

#endif
