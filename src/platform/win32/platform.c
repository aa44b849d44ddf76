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
