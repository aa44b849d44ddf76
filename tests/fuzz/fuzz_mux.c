/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: the `vm` channel's multiplexer (host end). */
#include "fuzz_mux_entry.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	msb_fuzz_mux(data, size);
	return 0;
}
