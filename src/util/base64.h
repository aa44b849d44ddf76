/* SPDX-License-Identifier: Apache-2.0 */
/* Base64 (RFC 4648, standard alphabet, padded): the shell road's chunks and
 * the JSON-RPC front's binary fields. */
#ifndef MSB_UTIL_BASE64_H
#define MSB_UTIL_BASE64_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A NUL-terminated encoding of data[0..len), malloc()ed; NULL when out of
 * memory or when the encoding's size would overflow. */
char *msb__base64_encode(const uint8_t *data, size_t len);

/* Decode text[0..len) into a malloc()ed *out of *out_len bytes. Strict:
 * only the alphabet, padding only at the end and only as much as the last
 * group needs, a length (whitespace aside) that is a multiple of four.
 * `skip_space` lets spaces, tabs and line breaks through (what base64(1)
 * prints). Returns 0, -EINVAL for anything else, or -ENOMEM. */
int msb__base64_decode(const char *text, size_t len, bool skip_space, uint8_t **out,
		       size_t *out_len);

#endif
