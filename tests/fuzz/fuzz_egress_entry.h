/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MSB_FUZZ_EGRESS_ENTRY_H
#define MSB_FUZZ_EGRESS_ENTRY_H
#include <stddef.h>
#include <stdint.h>
/* Feed one input to the egress request-head parser (whole and split), the
 * DNS reply parser and the record parser; aborts on a broken invariant.
 * Returns the parser's outcome on the whole input. */
int msb_fuzz_egress(const uint8_t *data, size_t len);
#endif
