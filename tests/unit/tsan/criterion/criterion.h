/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A stand-in for <criterion/criterion.h>, for the ThreadSanitizer build only.
 *
 * Criterion's runner cannot start under ThreadSanitizer (its inheritable
 * arena fails to map, Snaipe/Criterion#274), so in a `-Db_sanitize=thread`
 * build the lifecycle tests - the threaded ones - are compiled a second time
 * against this header and run by tsan/runner.c: each test in its own forked
 * process, a failed assertion printing where and why and exiting non-zero.
 * Only what those tests use is provided; Test()'s options are ignored.
 */
#ifndef MSB_TESTS_TSAN_CRITERION_H
#define MSB_TESTS_TSAN_CRITERION_H

#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void tsan_register(const char *suite, const char *name, void (*fn)(void));
void tsan_fail(const char *file, int line, const char *expr, const char *fmt, ...)
	__attribute__((noreturn, format(printf, 4, 5)));

#define Test(suite, name, ...)                                                                     \
	static void suite##_##name##_impl(void);                                                   \
	__attribute__((constructor)) static void suite##_##name##_register(void)                   \
	{                                                                                          \
		tsan_register(#suite, #name, suite##_##name##_impl);                               \
	}                                                                                          \
	static void suite##_##name##_impl(void)

#define cr_assert(cond, ...)                                                                       \
	do {                                                                                       \
		if (!(cond))                                                                       \
			tsan_fail(__FILE__, __LINE__, #cond, "" __VA_ARGS__);                      \
	} while (0)
#define cr_assert_not(cond, ...) cr_assert(!(cond), __VA_ARGS__)
#define cr_assert_eq(a, b, ...) cr_assert((a) == (b), __VA_ARGS__)
#define cr_assert_neq(a, b, ...) cr_assert((a) != (b), __VA_ARGS__)
#define cr_assert_lt(a, b, ...) cr_assert((a) < (b), __VA_ARGS__)
#define cr_assert_gt(a, b, ...) cr_assert((a) > (b), __VA_ARGS__)
#define cr_assert_geq(a, b, ...) cr_assert((a) >= (b), __VA_ARGS__)
#define cr_assert_null(p, ...) cr_assert((p) == NULL, __VA_ARGS__)
#define cr_assert_not_null(p, ...) cr_assert((p) != NULL, __VA_ARGS__)
#define cr_assert_str_eq(a, b, ...) cr_assert(strcmp((a), (b)) == 0, __VA_ARGS__)
#define cr_assert_str_neq(a, b, ...) cr_assert(strcmp((a), (b)) != 0, __VA_ARGS__)
#define cr_assert_str_empty(s, ...) cr_assert((s)[0] == '\0', __VA_ARGS__)
#define cr_assert_float_eq(a, b, eps, ...)                                                         \
	cr_assert(fabs((double)(a) - (double)(b)) <= (eps), __VA_ARGS__)

#endif
