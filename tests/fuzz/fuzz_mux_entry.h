/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MSB_FUZZ_MUX_ENTRY_H
#define MSB_FUZZ_MUX_ENTRY_H
#include <stddef.h>
#include <stdint.h>
/* Feed one input, as the guest's side of a `vm` channel, to the mux codec
 * (whole and one byte at a time: the same records) and to the host end of a
 * link holding two streams; aborts on a broken invariant. Returns 0 when the
 * link accepted everything, < 0 when it refused the input. */
int msb_fuzz_mux(const uint8_t *data, size_t len);
#endif
