/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: the egress request-head, DNS and record parsers. */
#include "fuzz_egress_entry.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	msb_fuzz_egress(data, size);
	return 0;
}
