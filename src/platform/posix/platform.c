/* SPDX-License-Identifier: Apache-2.0 */
/* The platform layer on Linux (platform/platform.h). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <unistd.h>

#include "platform/platform.h"

int msb__plat_random(void *buf, size_t n)
{
	uint8_t *b = buf;
	size_t got = 0;
	while (got < n) {
		ssize_t r = getrandom(b + got, n - got, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r < 0 ? -errno : -EIO;
		got += (size_t)r;
	}
	return 0;
}

const char *msb__plat_strerror(int errnum, char *buf, size_t size)
{
	return strerror_r(errnum, buf, size);
}

const char *msb__plat_secure_getenv(const char *name)
{
	return secure_getenv(name);
}

void msb__plat_stop_self(void)
{
	kill(getpid(), SIGSTOP);
}

int msb__plat_wake_new(int *rfd, int *wfd, bool counter)
{
	if (counter) {
		int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (fd < 0)
			return -errno;
		*rfd = *wfd = fd;
		return 0;
	}
	int p[2];
	if (pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0)
		return -errno;
	*rfd = p[0];
	*wfd = p[1];
	return 0;
}

void msb__plat_wake_close(int rfd, int wfd)
{
	if (rfd >= 0)
		close(rfd);
	if (wfd >= 0 && wfd != rfd)
		close(wfd);
}

bool msb__plat_fd_readable(int fd)
{
	int fl = fcntl(fd, F_GETFL);
	return fl >= 0 && (fl & O_ACCMODE) != O_WRONLY;
}

void *msb__plat_alloc_large(size_t size)
{
	const size_t huge = (size_t)2 << 20;
	if (size < huge)
		return malloc(size ? size : 1);
	void *p = NULL;
	if (posix_memalign(&p, huge, size) != 0)
		return NULL;
	(void)madvise(p, size & ~(huge - 1), MADV_HUGEPAGE);
	return p;
}

int msb__plat_read_path(const char *path, size_t max, char **out, size_t *len)
{
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	char *buf = NULL;
	size_t used = 0, cap = 0;
	int r = 0;
	for (;;) {
		if (cap - used < 4096) {
			size_t ncap = cap ? cap * 2 : 8192;
			char *nb = realloc(buf, ncap + 1);
			if (!nb) {
				r = -ENOMEM;
				break;
			}
			buf = nb;
			cap = ncap;
		}
		ssize_t n = read(fd, buf + used, 4096);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			r = -errno;
			break;
		}
		if (n == 0)
			break;
		used += (size_t)n;
		if (used > max) {
			r = -EFBIG;
			break;
		}
	}
	close(fd);
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
