/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Artifact names (checklist 12.9-12.11, 12.24, 12.25): the lexical rules,
 * the collision key and the delivered spelling, through utf8proc.
 */
#include <utf8proc.h>

#include <msb/outputs.h>

#include "util/util.h"

/* Decode one UTF-8 sequence strictly (no surrogates, no overlongs). Returns
 * its length, or -1. */
static int utf8_seq(const uint8_t *s, size_t n, int32_t *cp)
{
	utf8proc_int32_t c = 0;
	utf8proc_ssize_t k = utf8proc_iterate(s, (utf8proc_ssize_t)n, &c);
	if (k <= 0 || c < 0)
		return -1;
	*cp = c;
	return (int)k;
}

static int invalid(msb_error **err, const char *name, const char *why)
{
	msb_error_set(err, MSB_E_ARTIFACT_NAME_INVALID, "artifact name is invalid: %s", why);
	msb__error_set_path(err, name);
	return MSB_E_ARTIFACT_NAME_INVALID;
}

int msb_validate_artifact_name(const char *name, msb_error **err)
{
	if (!name || !*name)
		return invalid(err, name ? name : "", "it is empty");
	size_t n = strlen(name);
	if (n > MSB_MAX_ARTIFACT_NAME_BYTES)
		return invalid(err, name, "it is longer than 255 UTF-8 bytes");
	if (name[0] == '/')
		return invalid(err, name, "it starts with `/`");
	const uint8_t *s = (const uint8_t *)name;
	for (size_t i = 0; i < n;) {
		if (s[i] == '\\')
			return invalid(err, name, "it contains a backslash");
		if (s[i] < 0x20)
			return invalid(err, name, "it contains an ASCII control character");
		int32_t cp;
		int k = utf8_seq(s + i, n - i, &cp);
		if (k < 0)
			return invalid(err, name, "it is not valid UTF-8");
		i += (size_t)k;
	}
	/* Segments: none empty, ".", or "..". */
	for (const char *seg = name;;) {
		const char *slash = strchr(seg, '/');
		size_t len = slash ? (size_t)(slash - seg) : strlen(seg);
		if (len == 0)
			return invalid(err, name, "it has an empty segment");
		if (len == 1 && seg[0] == '.')
			return invalid(err, name, "it has a `.` segment");
		if (len == 2 && seg[0] == '.' && seg[1] == '.')
			return invalid(err, name, "it has a `..` segment");
		if (!slash)
			break;
		seg = slash + 1;
	}
	return 0;
}

static int nfc(const char *in, char **out, msb_error **err)
{
	utf8proc_uint8_t *r = NULL;
	utf8proc_ssize_t k = utf8proc_map((const utf8proc_uint8_t *)in, 0, &r,
					  UTF8PROC_NULLTERM | UTF8PROC_STABLE | UTF8PROC_COMPOSE);
	if (k < 0) {
		if (k == UTF8PROC_ERROR_NOMEM)
			return msb__error_nomem(err);
		return invalid(err, in, "it is not valid UTF-8");
	}
	*out = (char *)r;
	return 0;
}

int msb_artifact_name_normalize(const char *name, msb_name_normalization normalization, char **out,
				msb_error **err)
{
	if (!name)
		return invalid(err, "", "it is empty");
	if (normalization == MSB_NORMALIZATION_NONE) {
		*out = msb__strdup(name);
		return *out ? 0 : msb__error_nomem(err);
	}
	return nfc(name, out, err);
}

int msb_artifact_name_collision_key(const char *name, char **key, msb_error **err)
{
	_cleanup_free_ char *composed = NULL;
	int r = nfc(name, &composed, err);
	if (r < 0)
		return r;
	/* Simple lowercase mapping per code point: the mapping never needs more
	 * than 4 bytes per code point, so the input length bounds the output. */
	size_t n = strlen(composed);
	size_t cap;
	if (msb__mul_overflow(n, 4, &cap) || msb__add_overflow(cap, 1, &cap))
		return msb__error_nomem(err);
	_cleanup_free_ char *lower = malloc(cap);
	if (!lower)
		return msb__error_nomem(err);
	size_t o = 0;
	for (size_t i = 0; i < n;) {
		int32_t cp;
		int k = utf8_seq((const uint8_t *)composed + i, n - i, &cp);
		if (k < 0)
			return invalid(err, name, "it is not valid UTF-8");
		i += (size_t)k;
		o += (size_t)utf8proc_encode_char(utf8proc_tolower(cp),
						  (utf8proc_uint8_t *)lower + o);
	}
	lower[o] = '\0';
	return nfc(lower, key, err);
}

/* ---- portable_name ------------------------------------------------------------------------ */

static bool reserved_stem(const char *stem, size_t len)
{
	static const char *const plain[] = {"CON", "PRN", "AUX", "NUL"};
	char up[8];
	if (len > 6)
		return false;
	for (size_t i = 0; i < len; i++)
		up[i] = (stem[i] >= 'a' && stem[i] <= 'z') ? (char)(stem[i] - 32) : stem[i];
	up[len] = '\0';
	for (size_t i = 0; i < MSB_ARRAY_SIZE(plain); i++)
		if (strcmp(up, plain[i]) == 0)
			return true;
	if (strncmp(up, "COM", 3) != 0 && strncmp(up, "LPT", 3) != 0)
		return false;
	const char *d = up + 3;
	if (len == 4 && d[0] >= '1' && d[0] <= '9')
		return true;
	/* superscript one, two, three */
	return strcmp(d, "\xc2\xb9") == 0 || strcmp(d, "\xc2\xb2") == 0 ||
	       strcmp(d, "\xc2\xb3") == 0;
}

static int portable_segment(msb_buf *b, const char *seg, size_t len)
{
	size_t start = b->len;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)seg[i];
		bool bad = c < 0x20 || c == 0x7f || strchr("<>:\"|?*", c) != NULL;
		msb__buf_append(b, bad ? "_" : (const char *)&seg[i], 1);
	}
	/* strip trailing dots and spaces */
	while (b->len > start && (b->data[b->len - 1] == '.' || b->data[b->len - 1] == ' '))
		b->len--;
	if (b->len == start)
		return msb__buf_append(b, "_", 1);
	const char *s = (const char *)b->data + start;
	size_t n = b->len - start;
	const char *dot = memchr(s, '.', n);
	size_t stem = dot ? (size_t)(dot - s) : n;
	if (reserved_stem(s, stem)) {
		size_t at = start + stem;
		if (msb__buf_reserve(b, 1) < 0)
			return -ENOMEM;
		memmove(b->data + at + 1, b->data + at, b->len - at);
		b->data[at] = '_';
		b->len++;
	}
	return 0;
}

int msb_portable_name(const char *name, char **out, msb_error **err)
{
	if (!name)
		return msb_error_set(err, MSB_E_VALUE, "portable_name: name is NULL");
	msb_buf b = MSB_BUF_INIT;
	for (const char *seg = name;;) {
		const char *slash = strchr(seg, '/');
		size_t len = slash ? (size_t)(slash - seg) : strlen(seg);
		portable_segment(&b, seg, len);
		if (!slash)
			break;
		msb__buf_append(&b, "/", 1);
		seg = slash + 1;
	}
	char *s = msb__buf_steal_str(&b);
	msb__buf_free(&b);
	if (!s)
		return msb__error_nomem(err);
	*out = s;
	return 0;
}
