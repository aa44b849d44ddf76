/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: the frame reader and every message decoder. */
#include "fuzz_proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct msb_fuzz_stats st;
	msb_fuzz_proto_one(data, size, &st);
	return 0;
}
