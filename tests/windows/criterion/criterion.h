/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A stand-in for <criterion/criterion.h> in the Windows build (Criterion has
 * no mingw-w64 build in Debian): the portable unit tests compile against it
 * unchanged and tests/windows/runner.c runs them, under Wine in CI
 * (scripts/test-windows, docs/windows.md). A failed assertion prints where
 * and why and ends its test (longjmp back to the runner); TestSuite's
 * .init and .fini run around each test of the suite; .timeout is not
 * enforced (the whole run is bounded by scripts/test-windows).
 */
#ifndef MSB_TESTS_WINDOWS_CRITERION_H
#define MSB_TESTS_WINDOWS_CRITERION_H

#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct win_test_opts {
	void (*init)(void);
	void (*fini)(void);
	int timeout;
};

void win_register(const char *suite, const char *name, void (*fn)(void), struct win_test_opts opts);
void win_register_suite(const char *suite, struct win_test_opts opts);
void win_fail(const char *file, int line, const char *expr, const char *fmt, ...)
	__attribute__((noreturn, format(gnu_printf, 4, 5)));

#define Test(suite, name, ...)                                                                     \
	static void suite##_##name##_impl(void);                                                   \
	__attribute__((constructor)) static void suite##_##name##_register(void)                   \
	{                                                                                          \
		win_register(#suite, #name, suite##_##name##_impl,                                 \
			     (struct win_test_opts){__VA_ARGS__});                                 \
	}                                                                                          \
	static void suite##_##name##_impl(void)

#define TestSuite(suite, ...)                                                                      \
	__attribute__((constructor)) static void suite##_suite_register(void)                      \
	{                                                                                          \
		win_register_suite(#suite, (struct win_test_opts){__VA_ARGS__});                   \
	}

#define cr_assert(cond, ...)                                                                       \
	do {                                                                                       \
		if (!(cond))                                                                       \
			win_fail(__FILE__, __LINE__, #cond, "" __VA_ARGS__);                       \
	} while (0)
#define cr_assert_fail(...) win_fail(__FILE__, __LINE__, "cr_assert_fail", "" __VA_ARGS__)
#define cr_assert_not(cond, ...) cr_assert(!(cond), __VA_ARGS__)
#define cr_assert_eq(a, b, ...) cr_assert((a) == (b), __VA_ARGS__)
#define cr_assert_neq(a, b, ...) cr_assert((a) != (b), __VA_ARGS__)
#define cr_assert_lt(a, b, ...) cr_assert((a) < (b), __VA_ARGS__)
#define cr_assert_leq(a, b, ...) cr_assert((a) <= (b), __VA_ARGS__)
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
