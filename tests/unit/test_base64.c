/* SPDX-License-Identifier: Apache-2.0 */
/* util/base64: what the shell road (checklist 11.1, 11.3) and the JSON-RPC
 * front's binary fields rely on. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "util/base64.h"

static void round_trip(const char *plain, const char *encoded)
{
	char *e = msb__base64_encode((const uint8_t *)plain, strlen(plain));
	cr_assert_not_null(e);
	cr_assert_str_eq(e, encoded);
	uint8_t *d = NULL;
	size_t n = 99;
	cr_assert_eq(msb__base64_decode(e, strlen(e), false, &d, &n), 0, "%s", e);
	cr_assert_eq(n, strlen(plain));
	cr_assert_eq(memcmp(d, plain, n), 0);
	free(d);
	free(e);
}

Test(base64, rfc4648_vectors)
{
	round_trip("", "");
	round_trip("f", "Zg==");
	round_trip("fo", "Zm8=");
	round_trip("foo", "Zm9v");
	round_trip("foob", "Zm9vYg==");
	round_trip("fooba", "Zm9vYmE=");
	round_trip("foobar", "Zm9vYmFy");
}

Test(base64, every_byte_value_round_trips)
{
	uint8_t all[256 * 3 + 1];
	for (size_t i = 0; i < sizeof(all); i++)
		all[i] = (uint8_t)(i * 7 + 3);
	for (size_t len = 0; len < 8; len++) {
		size_t total = sizeof(all) - len;
		char *e = msb__base64_encode(all, total);
		uint8_t *d = NULL;
		size_t n = 0;
		cr_assert_eq(msb__base64_decode(e, strlen(e), false, &d, &n), 0);
		cr_assert_eq(n, total);
		cr_assert_eq(memcmp(d, all, n), 0);
		free(d);
		free(e);
	}
}

static int decode(const char *s, bool skip_space)
{
	uint8_t *d = NULL;
	size_t n = 0;
	int r = msb__base64_decode(s, strlen(s), skip_space, &d, &n);
	free(d);
	return r;
}

Test(base64, strict_refusals)
{
	cr_assert_eq(decode("Zg=", false), -EINVAL, "a short group");
	cr_assert_eq(decode("Zg", false), -EINVAL, "missing padding");
	cr_assert_eq(decode("Z===", false), -EINVAL, "padding in the second place");
	cr_assert_eq(decode("Zg=v", false), -EINVAL, "a character after padding");
	cr_assert_eq(decode("Zg==Zm8=", false), -EINVAL, "a group after a padded one");
	cr_assert_eq(decode("Zm9v!A==", false), -EINVAL, "outside the alphabet");
	cr_assert_eq(decode("Zm-_", false), -EINVAL, "the URL alphabet is not this one");
	cr_assert_eq(decode("Zm9v\nYg==", false), -EINVAL, "whitespace unless asked for");
}

Test(base64, whitespace_as_base64_1_prints_it)
{
	uint8_t *d = NULL;
	size_t n = 0;
	const char *s = "Zm9v\nYmFy\r\n Zg==\n";
	cr_assert_eq(msb__base64_decode(s, strlen(s), true, &d, &n), 0);
	cr_assert_eq(n, 7);
	cr_assert_eq(memcmp(d, "foobarf", 7), 0);
	free(d);
	cr_assert_eq(decode("Zm9v\nYg=\n=", true), 0, "padding split by a line break");
	cr_assert_eq(decode("Zm9v\nYg=\nx", true), -EINVAL);
}
