/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: the host-tool door and the schema validator. */
#include "fuzz_hosttools.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	msb_fuzz_hosttools_one(data, size);
	return 0;
}
