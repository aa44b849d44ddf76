/* SPDX-License-Identifier: Apache-2.0 */
/*
 * msb/common.h - export macro, versioning and the small shared types.
 *
 * Every public header includes this one. Nothing here allocates.
 */
#ifndef MSB_COMMON_H
#define MSB_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
#define MSB_BEGIN_DECLS extern "C" {
#define MSB_END_DECLS }
#else
#define MSB_BEGIN_DECLS
#define MSB_END_DECLS
#endif

#if defined(MSB_BUILDING_LIBRARY) && defined(_WIN32)
#define MSB_EXTERN __declspec(dllexport)
#elif defined(MSB_BUILDING_LIBRARY) && defined(__GNUC__)
#define MSB_EXTERN __attribute__((visibility("default")))
#else
#define MSB_EXTERN
#endif

/* printf-style checking; mingw-w64's GCC reads plain "printf" as the
 * Microsoft runtime's format language, which has no %zu. */
#if defined(_WIN32) && defined(__GNUC__) && !defined(__clang__)
#define MSB_PRINTF(fmt, args) __attribute__((format(gnu_printf, fmt, args)))
#else
#define MSB_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#endif

#define MSB_VERSION_MAJOR 0
#define MSB_VERSION_MINOR 1
#define MSB_VERSION_PATCH 0
#define MSB_VERSION_STRING "0.1.0"

MSB_BEGIN_DECLS

/* The library's version string, "MAJOR.MINOR.PATCH". Never NULL. */
MSB_EXTERN const char *msb_version(void);

/*
 * A NULL-terminated vector of owned strings, returned by list-style calls.
 * Free with msb_strv_free(); NULL is accepted.
 */
typedef char **msb_strv;
MSB_EXTERN void msb_strv_free(char **strv);
MSB_EXTERN size_t msb_strv_len(char *const *strv);

/*
 * Log callback. The library never logs by itself: a host that wants the
 * diagnostics (the PER_SPEC construction warning, swallowed backend failures,
 * contained observer failures) installs one. `component` is a short static
 * string ("router", "observer", ...). The message is one line, no newline.
 */
typedef enum msb_log_level {
	MSB_LOG_DEBUG = 0,
	MSB_LOG_INFO = 1,
	MSB_LOG_WARNING = 2,
	MSB_LOG_ERROR = 3,
} msb_log_level;

typedef void (*msb_log_fn)(void *userdata, msb_log_level level, const char *component,
			   const char *message);

MSB_END_DECLS

#endif
