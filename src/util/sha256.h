/* SPDX-License-Identifier: Apache-2.0 */
/* SHA-256 (FIPS 180-4), for sandbox names and label digests. */
#ifndef MSB_UTIL_SHA256_H
#define MSB_UTIL_SHA256_H

#include <stddef.h>
#include <stdint.h>

typedef struct msb_sha256 {
	uint32_t h[8];
	uint64_t total;
	uint8_t block[64];
	size_t used;
} msb_sha256;

void msb__sha256_init(msb_sha256 *s);
void msb__sha256_update(msb_sha256 *s, const void *data, size_t len);
void msb__sha256_final(msb_sha256 *s, uint8_t digest[32]);
/* Lower-case hex of the digest of data into out[65]. */
void msb__sha256_hex(const void *data, size_t len, char out[65]);

#endif
