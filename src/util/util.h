/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internal utilities shared by every layer: cleanup attributes, checked
 * allocation, string vectors, a growable buffer, error internals.
 * Never included by public headers.
 */
#ifndef MSB_UTIL_UTIL_H
#define MSB_UTIL_UTIL_H

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <msb/common.h>
#include <msb/error.h>

/* ---- cleanup attributes (systemd/crun style) ---------------------------- */

static inline void msb__freep(void *p)
{
	free(*(void **)p);
}
static inline void msb__closep(int *fd)
{
	if (*fd >= 0) {
		int saved = errno;
		close(*fd);
		errno = saved;
	}
}
void msb__strv_freep(char ***p);
void msb__error_freep(msb_error **p);

#define _cleanup_(f) __attribute__((cleanup(f)))
#define _cleanup_free_ _cleanup_(msb__freep)
#define _cleanup_close_ _cleanup_(msb__closep)
#define _cleanup_strv_ _cleanup_(msb__strv_freep)
#define _cleanup_error_ _cleanup_(msb__error_freep)

#define TAKE_PTR(p)                                                                                \
	({                                                                                         \
		__typeof__(p) _p = (p);                                                            \
		(p) = NULL;                                                                        \
		_p;                                                                                \
	})
#define TAKE_FD(fd)                                                                                \
	({                                                                                         \
		int _fd = (fd);                                                                    \
		(fd) = -1;                                                                         \
		_fd;                                                                               \
	})

#define MSB_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define MSB_UNUSED __attribute__((unused))

/* ---- checked arithmetic and allocation ----------------------------------- */

static inline bool msb__mul_overflow(size_t a, size_t b, size_t *out)
{
	return __builtin_mul_overflow(a, b, out);
}
static inline bool msb__add_overflow(size_t a, size_t b, size_t *out)
{
	return __builtin_add_overflow(a, b, out);
}

/* calloc-like array allocation with overflow check; NULL on failure. */
void *msb__reallocarray(void *p, size_t n, size_t size);
char *msb__strdup(const char *s);	     /* NULL in -> NULL out */
char *msb__strndup(const char *s, size_t n); /* always NUL-terminates */
char *msb__asprintf(const char *fmt, ...) MSB_PRINTF(1, 2);
char *msb__vasprintf(const char *fmt, va_list ap) MSB_PRINTF(1, 0);
bool msb__streq_null(const char *a, const char *b); /* NULL == NULL */

/* ---- string vectors (NULL-terminated char **) ---------------------------- */

/* Append a copy of s. Returns 0 or -ENOMEM. *strv may start NULL. */
int msb__strv_push(char ***strv, const char *s);
/* Append s itself (takes ownership on success). */
int msb__strv_push_take(char ***strv, char *s);
char **msb__strv_copy(char *const *strv);
bool msb__strv_contains(char *const *strv, const char *s);
void msb__strv_sort(char **strv);
/* Join with a separator; NULL on allocation failure. */
char *msb__strv_join(char *const *strv, const char *sep);

/* ---- growable byte buffer ------------------------------------------------ */

typedef struct msb_buf {
	uint8_t *data;
	size_t len;
	size_t cap;
	bool oom; /* latched allocation failure */
} msb_buf;
#define MSB_BUF_INIT                                                                               \
	{                                                                                          \
		NULL, 0, 0, false                                                                  \
	}

int msb__buf_reserve(msb_buf *b, size_t extra);
int msb__buf_append(msb_buf *b, const void *data, size_t len);
int msb__buf_puts(msb_buf *b, const char *s);
int msb__buf_printf(msb_buf *b, const char *fmt, ...) MSB_PRINTF(2, 3);
/* NUL-terminate and hand over the data (caller frees); NULL if oom. */
char *msb__buf_steal_str(msb_buf *b);
void msb__buf_free(msb_buf *b);

/* ---- error internals ----------------------------------------------------- */

/* Allocation failure: sets MSB_E_NOMEM (never allocates). Returns the code. */
int msb__error_nomem(msb_error **err);
/* Attach typed payloads to an error already set (no-op if none). */
void msb__error_set_cap(msb_error **err, const char *cap, const char *file);
void msb__error_set_path(msb_error **err, const char *path);
void msb__error_set_file_refusal(msb_error **err, int refusal);
void msb__error_set_timeout(msb_error **err, int signal, const uint8_t *output, size_t len);
/* Move src into *dst (dst may be NULL: src is freed). Returns src's code. */
int msb__error_propagate(msb_error **dst, msb_error *src);
/* Set from -errno with a prefix: "prefix: strerror". Maps ENOENT etc. */
int msb__error_errno(msb_error **err, int errnum, const char *fmt, ...) MSB_PRINTF(3, 4);
/* strerror, except that EMFILE and ENFILE say what they are: "out of file
 * descriptors (...)". Into buf; returns the text (buf or a constant). */
const char *msb__strerror(int errnum, char *buf, size_t size);

/* ---- logging ------------------------------------------------------------- */

typedef struct msb_logger {
	msb_log_fn fn;
	void *ud;
} msb_logger;
void msb__log(const msb_logger *lg, int level, const char *component, const char *fmt, ...)
	MSB_PRINTF(4, 5);

/* ---- time ---------------------------------------------------------------- */

int64_t msb__now_ns(void);	/* CLOCK_MONOTONIC */
int64_t msb__realtime_ns(void); /* CLOCK_REALTIME */
/* Validate a timeout in seconds: finite and > 0 (24.36). */
int msb__check_timeout(double seconds, const char *what, msb_error **err);

#endif
