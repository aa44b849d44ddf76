/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for the OCI layout and layer parsers. */
#include <stddef.h>
#include <stdint.h>

#include "fuzz_oci_entry.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	return msb_fuzz_oci(data, size);
}
