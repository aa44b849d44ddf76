/* SPDX-License-Identifier: Apache-2.0 */
/* Assertions shared by the unit tests. */
#ifndef MSB_TESTS_UNIT_HELPERS_H
#define MSB_TESTS_UNIT_HELPERS_H

#include <criterion/criterion.h>
#include <string.h>

#include <msb/error.h>

/* `call` (which fills `e_` as its error) fails with `code`, and the message
 * names `phrase`: every refusal test checks both (the seed's key phrases). */
#define assert_refused(call, code, phrase)                                                         \
	do {                                                                                       \
		msb_error *e_ = NULL;                                                              \
		int r_ = (call);                                                                   \
		cr_assert_eq(r_, (code), "%s returned %d", #call, r_);                             \
		cr_assert_not_null(e_);                                                            \
		cr_assert_eq(msb_error_code(e_), (code));                                          \
		cr_assert(strstr(msb_error_message(e_), (phrase)) != NULL,                         \
			  "message `%s` lacks `%s`", msb_error_message(e_), (phrase));             \
		msb_error_free(e_);                                                                \
	} while (0)

#endif
