/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MSB_TESTS_UNIT_INERT_SANDBOX_H
#define MSB_TESTS_UNIT_INERT_SANDBOX_H

#include <msb/sandbox.h>

/* A sandbox whose every operation refuses; instance_id is copied. */
int test_inert_sandbox_new(const char *instance_id, const char *backend, msb_sandbox **out,
			   msb_error **err);

#endif
