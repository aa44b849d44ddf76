/* SPDX-License-Identifier: Apache-2.0 */
/* The platform layer on Windows (platform/platform.h). */
#include <windows.h>

#include <bcrypt.h>
#include <errno.h>
#include <fcntl.h>
#include <io.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "platform/platform.h"
#include "platform/win32/win32.h"

int msb__plat_random(void *buf, size_t n)
{
	uint8_t *b = buf;
	while (n > 0) {
		ULONG chunk = n > 0x10000000u ? 0x10000000u : (ULONG)n;
		if (!BCRYPT_SUCCESS(
			    BCryptGenRandom(NULL, b, chunk, BCRYPT_USE_SYSTEM_PREFERRED_RNG)))
			return -EIO;
		b += chunk;
		n -= chunk;
	}
	return 0;
}

const char *msb__plat_strerror(int errnum, char *buf, size_t size)
{
	if (size == 0)
		return "unknown error";
	if (strerror_s(buf, size, errnum) != 0)
		snprintf(buf, size, "error %d", errnum);
	return buf;
}

/* Windows has no set-user-id programs: the environment is the caller's own. */
const char *msb__plat_secure_getenv(const char *name)
{
	return getenv(name);
}

void msb__plat_stop_self(void)
{
	SuspendThread(GetCurrentThread());
}

/* An anonymous pipe of C runtime descriptors, neither end inheritable, both
 * in PIPE_NOWAIT mode (a write to a full pipe fails instead of blocking; the
 * wake-up it would add is already pending). Windows has no eventfd: a
 * counter is the same pipe. */
int msb__plat_wake_new(int *rfd, int *wfd, bool counter)
{
	(void)counter;
	int p[2];
	if (_pipe(p, 4096, _O_BINARY | _O_NOINHERIT) < 0)
		return -errno;
	DWORD mode = PIPE_READMODE_BYTE | PIPE_NOWAIT;
	for (int i = 0; i < 2; i++) {
		HANDLE h = (HANDLE)_get_osfhandle(p[i]);
		if (h == INVALID_HANDLE_VALUE || !SetNamedPipeHandleState(h, &mode, NULL, NULL)) {
			_close(p[0]);
			_close(p[1]);
			return -EIO;
		}
	}
	*rfd = p[0];
	*wfd = p[1];
	return 0;
}

void msb__plat_wake_close(int rfd, int wfd)
{
	if (rfd >= 0)
		_close(rfd);
	if (wfd >= 0 && wfd != rfd)
		_close(wfd);
}

/* The C runtime keeps no access mode that can be asked for: any open
 * descriptor is taken, and a write-only one fails at its first read. */
bool msb__plat_fd_readable(int fd)
{
	return _get_osfhandle(fd) != (intptr_t)INVALID_HANDLE_VALUE;
}

wchar_t *msb__win_wide(const char *s)
{
	int n = MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, s, -1, NULL, 0);
	if (n <= 0) {
		errno = EINVAL;
		return NULL;
	}
	wchar_t *w = malloc((size_t)n * sizeof(*w));
	if (!w) {
		errno = ENOMEM;
		return NULL;
	}
	if (MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, s, -1, w, n) != n) {
		free(w);
		errno = EINVAL;
		return NULL;
	}
	return w;
}

int msb__win_errno(unsigned long code)
{
	switch (code) {
	case ERROR_FILE_NOT_FOUND:
	case ERROR_PATH_NOT_FOUND:
	case ERROR_INVALID_NAME:
	case ERROR_BAD_NETPATH:
		return ENOENT;
	case ERROR_ACCESS_DENIED:
	case ERROR_SHARING_VIOLATION:
	case ERROR_LOCK_VIOLATION:
		return EACCES;
	case ERROR_FILE_EXISTS:
	case ERROR_ALREADY_EXISTS:
		return EEXIST;
	case ERROR_DIRECTORY:
		return ENOTDIR;
	case ERROR_NOT_ENOUGH_MEMORY:
	case ERROR_OUTOFMEMORY:
		return ENOMEM;
	case ERROR_DISK_FULL:
	case ERROR_HANDLE_DISK_FULL:
		return ENOSPC;
	case ERROR_CANT_ACCESS_FILE:
	case ERROR_CANT_RESOLVE_FILENAME:
		return ELOOP;
	default:
		return EIO;
	}
}

/* Windows has no transparent huge pages to ask for: plain memory. */
void *msb__plat_alloc_large(size_t size)
{
	return malloc(size ? size : 1);
}

int msb__plat_read_path(const char *path, size_t max, char **out, size_t *len)
{
	wchar_t *w = msb__win_wide(path);
	if (!w)
		return -errno;
	HANDLE h = CreateFileW(w, GENERIC_READ, FILE_SHARE_READ, NULL, OPEN_EXISTING,
			       FILE_ATTRIBUTE_NORMAL, NULL);
	free(w);
	if (h == INVALID_HANDLE_VALUE)
		return -msb__win_errno(GetLastError());
	char *buf = NULL;
	size_t used = 0, cap = 0;
	int r = 0;
	for (;;) {
		if (cap - used < 4096) {
			size_t ncap = cap ? cap * 2 : 8192;
			char *nb = ncap > cap ? realloc(buf, ncap + 1) : NULL;
			if (!nb) {
				r = -ENOMEM;
				break;
			}
			buf = nb;
			cap = ncap;
		}
		DWORD got = 0;
		if (!ReadFile(h, buf + used, 4096, &got, NULL)) {
			r = -msb__win_errno(GetLastError());
			break;
		}
		if (got == 0)
			break;
		used += got;
		if (used > max) {
			r = -EFBIG;
			break;
		}
	}
	CloseHandle(h);
	if (r < 0) {
		free(buf);
		return r;
	}
	if (!buf && !(buf = malloc(1)))
		return -ENOMEM;
	buf[used] = '\0';
	*out = buf;
	if (len)
		*len = used;
	return 0;
}
