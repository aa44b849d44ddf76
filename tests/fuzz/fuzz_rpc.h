/* SPDX-License-Identifier: Apache-2.0 */
/* Shared by the libFuzzer targets (fuzz_rpc.c, fuzz_mcp.c) and their replays. */
#ifndef MSB_TESTS_FUZZ_RPC_H
#define MSB_TESTS_FUZZ_RPC_H

#include <stddef.h>
#include <stdint.h>

/* `msb serve`'s dispatcher in-process, over a fake backend. */
void msb_fuzz_rpc_one(const uint8_t *data, size_t size);
/* `msb mcp`'s dispatcher in-process, over a fake backend. */
void msb_fuzz_mcp_one(const uint8_t *data, size_t size);

#endif
