/* SPDX-License-Identifier: Apache-2.0 */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>

#include "fs.h"

int msb__mkdir_p(const char *path, mode_t mode)
{
	_cleanup_free_ char *p = msb__strdup(path);
	if (!p)
		return -ENOMEM;
	for (char *s = p + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		if (mkdir(p, mode) < 0 && errno != EEXIST)
			return -errno;
		*s = '/';
	}
	if (mkdir(p, mode) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

static int rm_contents(int dfd, dev_t dev, int depth)
{
	if (depth > 256)
		return -ELOOP;
	DIR *d = fdopendir(dfd);
	if (!d) {
		int e = -errno;
		close(dfd);
		return e;
	}
	int r = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		struct stat st;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			if (errno != ENOENT && r == 0)
				r = -errno;
			continue;
		}
		if (S_ISDIR(st.st_mode)) {
			if (st.st_dev != dev) {
				if (r == 0)
					r = -EXDEV;
				continue;
			}
			int sub = openat(dirfd(d), de->d_name,
					 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (sub < 0) {
				if (errno != ENOENT && r == 0)
					r = -errno;
				continue;
			}
			int q = rm_contents(sub, dev, depth + 1);
			if (q < 0 && r == 0)
				r = q;
			if (unlinkat(dirfd(d), de->d_name, AT_REMOVEDIR) < 0 && errno != ENOENT &&
			    r == 0)
				r = -errno;
		} else if (unlinkat(dirfd(d), de->d_name, 0) < 0 && errno != ENOENT && r == 0) {
			r = -errno;
		}
	}
	closedir(d);
	return r;
}

int msb__rm_rf_at(int dirfd, const char *name)
{
	struct stat st;
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISDIR(st.st_mode))
		return unlinkat(dirfd, name, 0) < 0 && errno != ENOENT ? -errno : 0;
	int sub = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (sub < 0)
		return errno == ENOENT ? 0 : -errno;
	int r = rm_contents(sub, st.st_dev, 0);
	if (unlinkat(dirfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT && r == 0)
		r = -errno;
	return r;
}

int msb__rm_rf(const char *path)
{
	return msb__rm_rf_at(AT_FDCWD, path);
}

int msb__write_file_atomic_at(int dirfd, const char *name, const void *data, size_t len,
			      mode_t mode)
{
	_cleanup_free_ char *tmp = msb__asprintf(".%s.tmp.%ld", name, (long)getpid());
	if (!tmp)
		return -ENOMEM;
	int fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, mode);
	if (fd < 0)
		return -errno;
	const uint8_t *p = data;
	size_t off = 0;
	while (off < len) {
		ssize_t n = write(fd, p + off, len - off);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			int e = -errno;
			close(fd);
			unlinkat(dirfd, tmp, 0);
			return e;
		}
		off += (size_t)n;
	}
	if (close(fd) < 0) {
		int e = -errno;
		unlinkat(dirfd, tmp, 0);
		return e;
	}
	if (renameat(dirfd, tmp, dirfd, name) < 0) {
		int e = -errno;
		unlinkat(dirfd, tmp, 0);
		return e;
	}
	return 0;
}

int msb__read_file_at(int dirfd, const char *name, size_t max, char **out, size_t *len)
{
	int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	msb_buf b = MSB_BUF_INIT;
	char chunk[4096];
	for (;;) {
		ssize_t n = read(fd, chunk, sizeof(chunk));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int e = -errno;
			close(fd);
			msb__buf_free(&b);
			return e;
		}
		if (n == 0)
			break;
		if (b.len + (size_t)n > max) {
			close(fd);
			msb__buf_free(&b);
			return -EFBIG;
		}
		if (msb__buf_append(&b, chunk, (size_t)n) < 0) {
			close(fd);
			return -ENOMEM;
		}
	}
	close(fd);
	size_t l = b.len;
	char *s = msb__buf_steal_str(&b);
	if (!s)
		return -ENOMEM;
	*out = s;
	if (len)
		*len = l;
	return 0;
}
