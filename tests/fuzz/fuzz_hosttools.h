/* SPDX-License-Identifier: Apache-2.0 */
/* Shared by the libFuzzer target (fuzz_hosttools.c) and replay_hosttools.c. */
#ifndef MSB_TESTS_FUZZ_HOSTTOOLS_H
#define MSB_TESTS_FUZZ_HOSTTOOLS_H

#include <stddef.h>
#include <stdint.h>

void msb_fuzz_hosttools_one(const uint8_t *data, size_t size);

#endif
