/* SPDX-License-Identifier: Apache-2.0 */
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "fs.h"
#include "platform/platform.h"

int msb__mkdir_p(const char *path, mode_t mode)
{
	_cleanup_free_ char *p = msb__strdup(path);
	if (!p)
		return -ENOMEM;
	for (char *s = p + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		/* guest-names: ok - msb__mkdir_p is for host paths (the state root), never a guest
		 * tree */
		if (mkdir(p, mode) < 0 && errno != EEXIST)
			return -errno;
		*s = '/';
	}
	/* guest-names: ok - msb__mkdir_p is for host paths (the state root), never a guest tree */
	if (mkdir(p, mode) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

/* Iterative: one directory fd open at a time, so depth is limited only by
 * memory; the way back up is checked against the identity seen going down. */

struct level {
	char *name; /* of this directory inside its parent */
	dev_t pdev; /* the parent's identity, checked on the way back up */
	ino_t pino;
};

/*
 * Open a directory for removal. The name is in a tree the guest may write, and
 * the guest may swap it for a link or another directory at any moment: the
 * open never follows a link (ELOOP), and what it opened must be on the tree's
 * filesystem (`dev`), so a mount point is never crossed (EXDEV). When the
 * directory is closed to us (an unprivileged sandbox may have left it mode
 * 000), it is opened up first through an O_PATH fd on it - the inode we hold,
 * not whatever the name points at by then.
 */
static int open_for_removal(int dirfd, const char *name, dev_t dev)
{
	int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && errno == EACCES) {
		int p = openat(dirfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (p < 0)
			return -errno;
		char self[40];
		snprintf(self, sizeof(self), "/proc/self/fd/%d", p);
		int c = chmod(self, 0700); /* guest-names: ok - our own fd, not a name */
		close(p);
		if (c < 0)
			return -EACCES;
		fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	}
	if (fd < 0)
		return -errno;
	struct stat st;
	int e = fstat(fd, &st) < 0 ? -errno : st.st_dev != dev ? -EXDEV : 0;
	if (e < 0) {
		close(fd);
		return e;
	}
	(void)!fchmod(fd, 0700); /* writable, for the unlinks inside */
	return fd;
}

/* Remove the non-directories of `fd`; set *subdir to the name of one
 * subdirectory (caller frees), or NULL when the directory is empty. */
static int scan_dir(int fd, dev_t dev, char **subdir)
{
	char buf[8192];
	*subdir = NULL;
	for (;;) {
		bool removed = false;
		if (lseek(fd, 0, SEEK_SET) < 0)
			return -errno;
		for (;;) {
			ssize_t n = getdents64(fd, buf, sizeof(buf));
			if (n < 0)
				return -errno;
			if (n == 0)
				break;
			for (ssize_t off = 0; off < n;) {
				struct dirent64 *de = (struct dirent64 *)(buf + off);
				off += de->d_reclen;
				const char *nm = de->d_name;
				if (strcmp(nm, ".") == 0 || strcmp(nm, "..") == 0)
					continue;
				struct stat st;
				if (fstatat(fd, nm, &st, AT_SYMLINK_NOFOLLOW) < 0) {
					if (errno == ENOENT)
						continue;
					return -errno;
				}
				if (S_ISDIR(st.st_mode)) {
					if (st.st_dev != dev)
						return -EXDEV; /* never cross a mount point */
					*subdir = strdup(nm);
					return *subdir ? 0 : -ENOMEM;
				}
				if (unlinkat(fd, nm, 0) < 0 && errno != ENOENT) {
					if (errno != EACCES && errno != EPERM)
						return -errno;
					if (fchmod(fd, 0700) < 0 || unlinkat(fd, nm, 0) < 0)
						return -errno;
				}
				removed = true;
			}
		}
		if (!removed)
			return 0;
	}
}

int msb__rm_rf_at(int dirfd, const char *name)
{
	struct stat st;
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISDIR(st.st_mode))
		return unlinkat(dirfd, name, 0) < 0 && errno != ENOENT ? -errno : 0;
	dev_t dev = st.st_dev;

	struct level *stack = NULL;
	size_t depth = 0, cap = 0;
	int r = 0;
	int cur = open_for_removal(dirfd, name, dev);
	if (cur < 0)
		return cur;
	for (;;) {
		char *sub = NULL;
		r = scan_dir(cur, dev, &sub);
		if (r < 0)
			break;
		if (sub) {
			struct stat pst;
			if (fstat(cur, &pst) < 0) {
				r = -errno;
				free(sub);
				break;
			}
			if (depth == cap) {
				size_t ncap = cap ? cap * 2 : 16;
				struct level *ns = msb__reallocarray(stack, ncap, sizeof(*ns));
				if (!ns) {
					r = -ENOMEM;
					free(sub);
					break;
				}
				stack = ns;
				cap = ncap;
			}
			int next = open_for_removal(cur, sub, dev);
			if (next < 0) {
				r = next;
				free(sub);
				break;
			}
			stack[depth++] = (struct level){sub, pst.st_dev, pst.st_ino};
			close(cur);
			cur = next;
			continue;
		}
		if (depth == 0)
			break;
		struct level lv = stack[--depth];
		int up = openat(cur, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		struct stat ust;
		if (up < 0 || fstat(up, &ust) < 0 || ust.st_dev != lv.pdev ||
		    ust.st_ino != lv.pino) {
			r = up < 0 ? -errno : -ESTALE; /* the tree moved under us */
			if (up >= 0)
				close(up);
			free(lv.name);
			break;
		}
		close(cur);
		cur = up;
		if (unlinkat(cur, lv.name, AT_REMOVEDIR) < 0 && errno != ENOENT)
			r = -errno;
		free(lv.name);
		if (r < 0)
			break;
	}
	close(cur);
	for (size_t i = 0; i < depth; i++)
		free(stack[i].name);
	free(stack);
	if (r < 0)
		return r;
	if (unlinkat(dirfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
		return -errno;
	return 0;
}

int msb__rm_rf(const char *path)
{
	/* guest-names: ok - for host paths the caller owns; guest trees go through msb__rm_rf_at
	 * from a held fd */
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

int msb__tmpfile_open(int dirfd, mode_t mode)
{
	/* "." names dirfd itself: there is no name to swap for a link. */
	int fd = openat(dirfd, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, mode);
	if (fd >= 0)
		return fd;
	int e = -errno;
	/* ext4 answers EPERM for a directory removed meanwhile, where a named
	 * create answers ENOENT: say what happened. */
	struct stat st;
	if (e == -EPERM && fstat(dirfd, &st) == 0 && st.st_nlink == 0)
		e = -ENOENT;
	return e;
}

static int link_anonymous(int fd, int dirfd, const char *name)
{
	/* AT_EMPTY_PATH needs CAP_DAC_READ_SEARCH; the /proc/self/fd form links
	 * the same open file without it (open(2), O_TMPFILE). */
	if (linkat(fd, "", dirfd, name, AT_EMPTY_PATH) == 0)
		return 0;
	if (errno != ENOENT && errno != EPERM)
		return -errno;
	char self[40];
	snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
	/* guest-names: ok - /proc/self/fd/N is our own anonymous file; the new name is created,
	 * never followed */
	return linkat(AT_FDCWD, self, dirfd, name, AT_SYMLINK_FOLLOW) < 0 ? -errno : 0;
}

int msb__tmpfile_link(int fd, int dirfd, const char *name, bool replace, const char *tmp_prefix)
{
	int r = link_anonymous(fd, dirfd, name);
	if (r != -EEXIST || !replace)
		return r;
	char tmp[NAME_MAX + 1];
	for (int tries = 0; tries < 8; tries++) {
		uint8_t rnd[8];
		if (msb__plat_random(rnd, sizeof(rnd)) < 0)
			return -EIO;
		snprintf(tmp, sizeof(tmp), "%.32s%02x%02x%02x%02x%02x%02x%02x%02x", tmp_prefix,
			 rnd[0], rnd[1], rnd[2], rnd[3], rnd[4], rnd[5], rnd[6], rnd[7]);
		r = link_anonymous(fd, dirfd, tmp);
		if (r != -EEXIST)
			break;
	}
	if (r < 0)
		return r;
	if (renameat(dirfd, tmp, dirfd, name) < 0) {
		r = -errno;
		unlinkat(dirfd, tmp, 0);
		return r;
	}
	return 0;
}

int msb__fds_headroom(unsigned need, const char *what, msb_error **err)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY)
		return 0;
	/* Counting needs one descriptor itself: none left is the answer too.
	 * guest-names: ok - /proc/self/fd is the host process's own */
	int fd = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 && (errno == EMFILE || errno == ENFILE))
		return msb__error_errno(err, errno, "%s", what);
	DIR *d = fd < 0 ? NULL : fdopendir(fd);
	if (!d) {
		if (fd >= 0)
			close(fd);
		return 0; /* no /proc: nothing to tell in advance */
	}
	uint64_t open_now = 0;
	for (struct dirent *de; (de = readdir(d));)
		open_now += de->d_name[0] != '.';
	closedir(d);
	open_now = open_now > 0 ? open_now - 1 : 0; /* the one counting */
	if (open_now + need <= (uint64_t)rl.rlim_cur)
		return 0;
	return msb_error_set(err, MSB_E_OS,
			     "%s: out of file descriptors: %" PRIu64 " of this process's limit of "
			     "%" PRIu64 " (RLIMIT_NOFILE) are open, and it needs %u free",
			     what, open_now, (uint64_t)rl.rlim_cur, need);
}
