/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer main of the spec, router, backend and paths targets. */
#include "fuzz_target.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	msb_fuzz_target_one(data, size);
	return 0;
}
