/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MSB_FUZZ_OCI_ENTRY_H
#define MSB_FUZZ_OCI_ENTRY_H

#include <stddef.h>
#include <stdint.h>

/* Feed one input to the OCI parsers (see fuzz_oci_entry.c). Aborts when the
 * input reached outside its private directory; always returns 0. */
int msb_fuzz_oci(const uint8_t *data, size_t size);

#endif
