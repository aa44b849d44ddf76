/* SPDX-License-Identifier: Apache-2.0 */
/* Allocation, strings, string vectors, buffers, logging, time. */
#include <math.h>
#include <stdio.h>
#include <time.h>

#include "util.h"

const char *msb_version(void)
{
	return MSB_VERSION_STRING;
}

void *msb__reallocarray(void *p, size_t n, size_t size)
{
	size_t bytes;
	if (msb__mul_overflow(n, size, &bytes)) {
		errno = ENOMEM;
		return NULL;
	}
	return realloc(p, bytes ? bytes : 1);
}

char *msb__strdup(const char *s)
{
	return s ? strdup(s) : NULL;
}

char *msb__strndup(const char *s, size_t n)
{
	char *r = malloc(n + 1);
	if (!r)
		return NULL;
	memcpy(r, s, n);
	r[n] = '\0';
	return r;
}

char *msb__vasprintf(const char *fmt, va_list ap)
{
	va_list ap2;
	va_copy(ap2, ap);
	int n = vsnprintf(NULL, 0, fmt, ap2);
	va_end(ap2);
	if (n < 0)
		return NULL;
	char *s = malloc((size_t)n + 1);
	if (!s)
		return NULL;
	vsnprintf(s, (size_t)n + 1, fmt, ap);
	return s;
}

char *msb__asprintf(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *s = msb__vasprintf(fmt, ap);
	va_end(ap);
	return s;
}

bool msb__streq_null(const char *a, const char *b)
{
	if (!a || !b)
		return a == b;
	return strcmp(a, b) == 0;
}

/* ---- string vectors ------------------------------------------------------ */

size_t msb_strv_len(char *const *strv)
{
	size_t n = 0;
	if (strv)
		while (strv[n])
			n++;
	return n;
}

void msb_strv_free(char **strv)
{
	if (!strv)
		return;
	for (char **p = strv; *p; p++)
		free(*p);
	free(strv);
}

void msb__strv_freep(char ***p)
{
	msb_strv_free(*p);
}

int msb__strv_push_take(char ***strv, char *s)
{
	size_t n = msb_strv_len(*strv);
	char **v = msb__reallocarray(*strv, n + 2, sizeof(char *));
	if (!v)
		return -ENOMEM;
	v[n] = s;
	v[n + 1] = NULL;
	*strv = v;
	return 0;
}

int msb__strv_push(char ***strv, const char *s)
{
	char *c = strdup(s);
	if (!c)
		return -ENOMEM;
	int r = msb__strv_push_take(strv, c);
	if (r < 0)
		free(c);
	return r;
}

char **msb__strv_copy(char *const *strv)
{
	size_t n = msb_strv_len(strv);
	char **v = calloc(n + 1, sizeof(char *));
	if (!v)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		v[i] = strdup(strv[i]);
		if (!v[i]) {
			msb_strv_free(v);
			return NULL;
		}
	}
	return v;
}

bool msb__strv_contains(char *const *strv, const char *s)
{
	for (size_t i = 0; strv && strv[i]; i++)
		if (strcmp(strv[i], s) == 0)
			return true;
	return false;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

void msb__strv_sort(char **strv)
{
	qsort(strv, msb_strv_len(strv), sizeof(char *), cmp_str);
}

char *msb__strv_join(char *const *strv, const char *sep)
{
	msb_buf b = MSB_BUF_INIT;
	for (size_t i = 0; strv && strv[i]; i++) {
		if (i > 0)
			msb__buf_puts(&b, sep);
		msb__buf_puts(&b, strv[i]);
	}
	return msb__buf_steal_str(&b);
}

/* ---- buffers -------------------------------------------------------------- */

int msb__buf_reserve(msb_buf *b, size_t extra)
{
	if (b->oom)
		return -ENOMEM;
	size_t need;
	if (msb__add_overflow(b->len, extra, &need) || msb__add_overflow(need, 1, &need)) {
		b->oom = true;
		return -ENOMEM;
	}
	if (need <= b->cap)
		return 0;
	size_t cap = b->cap ? b->cap : 64;
	while (cap < need) {
		if (msb__mul_overflow(cap, 2, &cap)) {
			cap = need;
			break;
		}
	}
	uint8_t *d = realloc(b->data, cap);
	if (!d) {
		b->oom = true;
		return -ENOMEM;
	}
	b->data = d;
	b->cap = cap;
	return 0;
}

int msb__buf_append(msb_buf *b, const void *data, size_t len)
{
	if (msb__buf_reserve(b, len) < 0)
		return -ENOMEM;
	if (len)
		memcpy(b->data + b->len, data, len);
	b->len += len;
	b->data[b->len] = 0;
	return 0;
}

int msb__buf_puts(msb_buf *b, const char *s)
{
	return msb__buf_append(b, s, strlen(s));
}

int msb__buf_printf(msb_buf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *s = msb__vasprintf(fmt, ap);
	va_end(ap);
	if (!s) {
		b->oom = true;
		return -ENOMEM;
	}
	int r = msb__buf_puts(b, s);
	free(s);
	return r;
}

char *msb__buf_steal_str(msb_buf *b)
{
	if (b->oom || msb__buf_reserve(b, 0) < 0) {
		msb__buf_free(b);
		return NULL;
	}
	b->data[b->len] = 0;
	char *s = (char *)b->data;
	b->data = NULL;
	b->len = b->cap = 0;
	return s;
}

void msb__buf_free(msb_buf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
	b->oom = false;
}

/* ---- logging ------------------------------------------------------------- */

void msb__log(const msb_logger *lg, int level, const char *component, const char *fmt, ...)
{
	if (!lg || !lg->fn)
		return;
	va_list ap;
	va_start(ap, fmt);
	char *m = msb__vasprintf(fmt, ap);
	va_end(ap);
	if (!m)
		return;
	for (char *p = m; *p; p++)
		if (*p == '\n' || *p == '\r')
			*p = ' ';
	lg->fn(lg->ud, (msb_log_level)level, component, m);
	free(m);
}

/* ---- time ------------------------------------------------------------------ */

int64_t msb__now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t msb__realtime_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int msb__check_timeout(double seconds, const char *what, msb_error **err)
{
	if (!isfinite(seconds) || seconds <= 0)
		return msb_error_set(err, MSB_E_VALUE, "%s must be finite and positive, not %g",
				     what, seconds);
	return 0;
}
