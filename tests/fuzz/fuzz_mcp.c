/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: `msb mcp`'s JSON-RPC dispatch (fuzz_mcp_entry.c). */
#include "fuzz_rpc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	msb_fuzz_mcp_one(data, size);
	return 0;
}
