/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdlib.h>

#include "util/base64.h"

static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *msb__base64_encode(const uint8_t *data, size_t len)
{
	if (len > (SIZE_MAX - 1) / 4 * 3 - 2)
		return NULL;
	size_t n = (len + 2) / 3 * 4;
	char *out = malloc(n + 1), *p = out;
	if (!out)
		return NULL;
	for (size_t i = 0; i < len; i += 3) {
		uint32_t v = (uint32_t)data[i] << 16;
		if (i + 1 < len)
			v |= (uint32_t)data[i + 1] << 8;
		if (i + 2 < len)
			v |= data[i + 2];
		*p++ = alphabet[v >> 18];
		*p++ = alphabet[(v >> 12) & 63];
		*p++ = i + 1 < len ? alphabet[(v >> 6) & 63] : '=';
		*p++ = i + 2 < len ? alphabet[v & 63] : '=';
	}
	*p = '\0';
	return out;
}

static int value(unsigned char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

static bool is_space(unsigned char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

int msb__base64_decode(const char *text, size_t len, bool skip_space, uint8_t **out,
		       size_t *out_len)
{
	uint8_t *buf = malloc(len / 4 * 3 + 3), *p = buf;
	if (!buf)
		return -ENOMEM;
	int quad[4], k = 0, pad = 0;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)text[i];
		if (skip_space && is_space(c))
			continue;
		if (pad && c != '=')
			goto bad; /* nothing after the padding */
		if (c == '=') {
			/* Padding fills the third and fourth places only. */
			if (k < 2)
				goto bad;
			pad++;
			quad[k++] = 0;
		} else {
			int v = value(c);
			if (v < 0)
				goto bad;
			quad[k++] = v;
		}
		if (k == 4) {
			uint32_t v = (uint32_t)quad[0] << 18 | (uint32_t)quad[1] << 12 |
				     (uint32_t)quad[2] << 6 | (uint32_t)quad[3];
			*p++ = (uint8_t)(v >> 16);
			if (pad < 2)
				*p++ = (uint8_t)(v >> 8);
			if (pad < 1)
				*p++ = (uint8_t)v;
			k = 0;
			if (pad)
				pad = 3; /* the group is closed: only the end may follow */
		}
	}
	if (k != 0)
		goto bad;
	*out = buf;
	*out_len = (size_t)(p - buf);
	return 0;
bad:
	free(buf);
	return -EINVAL;
}
