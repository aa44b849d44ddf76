/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The platform layer: what the portable core needs from the operating system
 * and cannot say in ISO C, with one implementation per platform
 * (posix/platform.c, win32/platform.c; the build system picks one, see
 * src/util/meson.build and docs/windows.md). Errors are -errno values.
 */
#ifndef MSB_PLATFORM_H
#define MSB_PLATFORM_H

#include <stdbool.h>
#include <stddef.h>

/* Fill buf with n bytes from the system's cryptographic random source,
 * blocking until it is seeded. 0, or -errno (-EIO when the source fails). */
int msb__plat_random(void *buf, size_t n);

/* The message for errnum (positive) in buf (or a static string). Never NULL. */
const char *msb__plat_strerror(int errnum, char *buf, size_t size);

/* getenv, except that a set-user-id or otherwise elevated process sees NULL
 * (secure_getenv on Linux). */
const char *msb__plat_secure_getenv(const char *name);

/* Stop this process where it is, for a test to kill it there (a fault
 * point, util/fault.h): SIGSTOP on POSIX, the calling thread suspended on
 * Windows. */
void msb__plat_stop_self(void);

/*
 * A wake-up channel: *rfd becomes readable once anything is written to *wfd
 * (an eventfd, rfd == wfd, with `counter`; else a pipe). Both ends are
 * nonblocking and not inherited by children. 0 or -errno. Close with
 * msb__plat_wake_close.
 */
int msb__plat_wake_new(int *rfd, int *wfd, bool counter);
void msb__plat_wake_close(int rfd, int wfd);

/* Whether fd is an open descriptor that can be read from (an exec's stdin). */
bool msb__plat_fd_readable(int fd);

/* A buffer of size bytes that free() releases: a large one aligned to and
 * advised for transparent huge pages on Linux (far fewer page faults on a
 * big read), plain malloc() elsewhere. NULL when memory is short. */
void *msb__plat_alloc_large(size_t size);

/* The whole file at path (the process's own configuration, never a guest
 * name), at most max bytes: *out (NUL-terminated, free()) and *len. 0, or
 * -errno (-EFBIG past max). */
int msb__plat_read_path(const char *path, size_t max, char **out, size_t *len);

#endif
