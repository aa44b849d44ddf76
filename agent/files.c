/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The file plane served inside the guest (MSB_PROTO_EXEC_FILE), for a
 * backend whose host cannot see the guest's files (`vm`). It runs in the
 * exec's forked child after every confinement step of a workload (no
 * capabilities, no_new_privs, the seccomp filter), with the working
 * directory (the storage base) as its current directory, so it can do no
 * more than a workload could. Each path arrives relative to the base,
 * already normalised by the host (no `.`, `..` or empty component); every
 * component is opened from the fd of the one before with O_NOFOLLOW, so a
 * link anywhere on the way fails the request instead of leading out, even if
 * the guest swaps one in while it runs. The host counts every byte it gets
 * back against its own caps (src/backends/vm/vm_files.c).
 *
 *	write REL          stdin -> REL (parents made; a temporary sibling made
 *	                   with O_EXCL, renamed into place)
 *	read REL MAX       REL -> stdout, regular files only, at most MAX bytes
 *	stat REL           "F SIZE\n", "D 0\n", "L 0\n", "O 0\n" or "-\n" (absent)
 *	list REL           one "K SIZE NAME\0" record per child, unsorted
 *	remove REL         a file or link (absent is success)
 *	remove-r REL       the same, directories too (never following a link,
 *	                   never crossing a mount)
 *	outcome            "oom_kill N\nbase_avail B\nroot_avail B\n
 *	                   pids_max_events N\n": the guest kernel's OOM kill
 *	                   count, the free blocks of the storage base and of the
 *	                   root (the writable layer), the pids limit's refusals
 *
 * REL "." is the base itself. The exit status is AGENT_FILE_* (agent.h) and
 * stderr says why in one line.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "agent.h"

#define MAX_LIST 65536
#define MAX_DEPTH 256

static int fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(int code, const char *fmt, ...)
{
	char line[512];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return code;
	if ((size_t)n > sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	ssize_t w = write(STDERR_FILENO, line, (size_t)n);
	(void)w;
	return code;
}

static int write_all(int fd, const void *p, size_t len)
{
	const char *c = p;
	while (len > 0) {
		ssize_t n = write(fd, c, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		c += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Why opening `name` in dirfd as a directory failed, as a status. */
static int classify(int dirfd, const char *name, int e)
{
	struct stat st;
	if (e == ENOENT)
		return fail(AGENT_FILE_NOT_FOUND, "`%s` does not exist", name);
	if (e == EACCES || e == EPERM)
		return fail(AGENT_FILE_PERMISSION, "`%s`: permission denied", name);
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		if (S_ISLNK(st.st_mode))
			return fail(AGENT_FILE_VALUE, "`%s` is a symbolic link", name);
		if (!S_ISDIR(st.st_mode))
			return fail(AGENT_FILE_NOT_DIR, "`%s` is not a directory", name);
	}
	return fail(AGENT_FILE_OS, "`%s`: %s", name, strerror(e));
}

static int open_dir(int dirfd, const char *name)
{
	return openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

/*
 * The directory holding the last component of rel, as an fd, and the last
 * component. `make` creates missing parents. rel "." gives the base and
 * *leaf NULL. Returns the fd or a negative status (-AGENT_FILE_*).
 */
static int walk(char *rel, bool make, char **leaf)
{
	int fd = open_dir(AT_FDCWD, ".");
	if (fd < 0)
		return -fail(AGENT_FILE_OS, "the storage base: %s", strerror(errno));
	*leaf = NULL;
	if (strcmp(rel, ".") == 0)
		return fd;
	char *p = rel;
	for (;;) {
		char *slash = strchr(p, '/');
		if (!slash) {
			*leaf = p;
			return fd;
		}
		*slash = '\0';
		int next = open_dir(fd, p);
		if (next < 0 && errno == ENOENT && make) {
			if (mkdirat(fd, p, 0755) < 0 && errno != EEXIST) {
				int st = -fail(AGENT_FILE_OS, "cannot make `%s`: %s", p,
					       strerror(errno));
				close(fd);
				return st;
			}
			next = open_dir(fd, p);
		}
		if (next < 0) {
			int st = -classify(fd, p, errno);
			close(fd);
			return st;
		}
		close(fd);
		fd = next;
		*slash = '/';
		p = slash + 1;
	}
}

static int do_write(char *rel)
{
	char *leaf;
	int dfd = walk(rel, true, &leaf);
	if (dfd < 0)
		return -dfd;
	if (!leaf) {
		close(dfd);
		return fail(AGENT_FILE_VALUE, "cannot write the working directory itself");
	}
	struct stat st;
	if (fstatat(dfd, leaf, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		int r = S_ISDIR(st.st_mode) ? fail(AGENT_FILE_IS_DIR, "`%s` is a directory", rel)
			: S_ISLNK(st.st_mode)
				? fail(AGENT_FILE_VALUE, "`%s` is a symbolic link", rel)
			: !S_ISREG(st.st_mode)
				? fail(AGENT_FILE_OS, "`%s` is not a regular file", rel)
				: 0;
		if (r) {
			close(dfd);
			return r;
		}
	}
	char tmp[64];
	snprintf(tmp, sizeof(tmp), ".msb-write-%d", (int)getpid());
	int fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0) {
		int e = errno;
		close(dfd);
		return fail(e == EACCES ? AGENT_FILE_PERMISSION : AGENT_FILE_OS,
			    "cannot create in `%s`: %s", rel, strerror(e));
	}
	char buf[65536];
	int status = 0;
	for (;;) {
		ssize_t n = read(STDIN_FILENO, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			status = fail(AGENT_FILE_OS, "reading the data: %s", strerror(errno));
			break;
		}
		if (n == 0)
			break;
		if (write_all(fd, buf, (size_t)n) < 0) {
			status = fail(AGENT_FILE_OS, "writing `%s`: %s", rel, strerror(errno));
			break;
		}
	}
	close(fd);
	if (status == 0 && renameat(dfd, tmp, dfd, leaf) < 0)
		status = fail(errno == EISDIR ? AGENT_FILE_IS_DIR : AGENT_FILE_OS,
			      "cannot put `%s` in place: %s", rel, strerror(errno));
	if (status)
		unlinkat(dfd, tmp, 0);
	close(dfd);
	return status;
}

static int do_read(char *rel, const char *max_s)
{
	char *end;
	errno = 0;
	unsigned long long max = strtoull(max_s, &end, 10);
	if (errno || *end)
		return fail(AGENT_FILE_USAGE, "bad size `%s`", max_s);
	char *leaf;
	int dfd = walk(rel, false, &leaf);
	if (dfd < 0)
		return -dfd;
	if (!leaf) {
		close(dfd);
		return fail(AGENT_FILE_IS_DIR, "the working directory is a directory");
	}
	int fd = openat(dfd, leaf, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	int e = errno;
	close(dfd);
	if (fd < 0)
		return e == ENOENT  ? fail(AGENT_FILE_NOT_FOUND, "`%s` does not exist", rel)
		       : e == ELOOP ? fail(AGENT_FILE_OS, "`%s` is a symbolic link", rel)
		       : e == EACCES || e == EPERM
			       ? fail(AGENT_FILE_PERMISSION, "`%s`: permission denied", rel)
			       : fail(AGENT_FILE_OS, "`%s`: %s", rel, strerror(e));
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		bool dir = S_ISDIR(st.st_mode);
		close(fd);
		return dir ? fail(AGENT_FILE_IS_DIR, "`%s` is a directory", rel)
			   : fail(AGENT_FILE_OS, "`%s` is not a regular file", rel);
	}
	if ((unsigned long long)st.st_size > max) {
		close(fd);
		return fail(AGENT_FILE_CAP, "`%s` has %lld bytes", rel, (long long)st.st_size);
	}
	char buf[65536];
	unsigned long long total = 0;
	for (;;) {
		ssize_t n = read(fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			close(fd);
			return fail(AGENT_FILE_OS, "reading `%s`: %s", rel, strerror(errno));
		}
		if (n == 0)
			break;
		total += (unsigned long long)n;
		if (total > max) {
			close(fd);
			return fail(AGENT_FILE_CAP, "`%s` grew past the cap while read", rel);
		}
		if (write_all(STDOUT_FILENO, buf, (size_t)n) < 0) {
			close(fd);
			return AGENT_FILE_OS;
		}
	}
	close(fd);
	return 0;
}

static char kind(mode_t m)
{
	return S_ISREG(m) ? 'F' : S_ISDIR(m) ? 'D' : S_ISLNK(m) ? 'L' : 'O';
}

static int do_stat(char *rel)
{
	char *leaf;
	int dfd = walk(rel, false, &leaf);
	if (dfd == -AGENT_FILE_NOT_FOUND)
		return write_all(STDOUT_FILENO, "-\n", 2) < 0 ? AGENT_FILE_OS : 0;
	if (dfd < 0)
		return -dfd;
	struct stat st;
	int r = leaf ? fstatat(dfd, leaf, &st, AT_SYMLINK_NOFOLLOW) : fstat(dfd, &st);
	int e = errno;
	close(dfd);
	if (r < 0 && e == ENOENT)
		return write_all(STDOUT_FILENO, "-\n", 2) < 0 ? AGENT_FILE_OS : 0;
	if (r < 0)
		return fail(AGENT_FILE_OS, "`%s`: %s", rel, strerror(e));
	char line[64];
	int n = snprintf(line, sizeof(line), "%c %lld\n", kind(st.st_mode),
			 S_ISREG(st.st_mode) ? (long long)st.st_size : 0LL);
	return write_all(STDOUT_FILENO, line, (size_t)n) < 0 ? AGENT_FILE_OS : 0;
}

static int do_list(char *rel)
{
	char *leaf;
	int dfd = walk(rel, false, &leaf);
	if (dfd < 0)
		return -dfd;
	int fd = dfd;
	if (leaf) {
		fd = open_dir(dfd, leaf);
		if (fd < 0) {
			int st = classify(dfd, leaf, errno);
			close(dfd);
			return st;
		}
		close(dfd);
	}
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return fail(AGENT_FILE_OS, "`%s`: %s", rel, strerror(errno));
	}
	int n = 0, status = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (++n > MAX_LIST) {
			status =
				fail(AGENT_FILE_OS, "`%s` has more than %d entries", rel, MAX_LIST);
			break;
		}
		struct stat st;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue; /* gone meanwhile */
		char head[48];
		int h = snprintf(head, sizeof(head), "%c %lld ", kind(st.st_mode),
				 S_ISREG(st.st_mode) ? (long long)st.st_size : 0LL);
		if (write_all(STDOUT_FILENO, head, (size_t)h) < 0 ||
		    write_all(STDOUT_FILENO, de->d_name, strlen(de->d_name) + 1) < 0) {
			status = AGENT_FILE_OS;
			break;
		}
	}
	closedir(d);
	return status;
}

/* Remove dfd/name and below: no link followed, no mount crossed. */
static int rm_tree(int dfd, const char *name, dev_t dev, int depth)
{
	struct stat st;
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISDIR(st.st_mode))
		return unlinkat(dfd, name, 0) < 0 && errno != ENOENT ? -errno : 0;
	if (st.st_dev != dev)
		return -EXDEV;
	if (depth > MAX_DEPTH)
		return -ELOOP;
	int fd = open_dir(dfd, name);
	if (fd < 0)
		return -errno;
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return -errno;
	}
	int r = 0;
	struct dirent *de;
	while (r == 0 && (de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			r = rm_tree(dirfd(d), de->d_name, dev, depth + 1);
	closedir(d);
	if (r == 0 && unlinkat(dfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
		r = -errno;
	return r;
}

static int do_remove(char *rel, bool recursive)
{
	char *leaf;
	int dfd = walk(rel, false, &leaf);
	if (dfd == -AGENT_FILE_NOT_FOUND)
		return 0; /* absent is success */
	if (dfd < 0)
		return -dfd;
	if (!leaf) {
		close(dfd);
		return fail(AGENT_FILE_VALUE, "cannot remove the working directory itself");
	}
	struct stat st, base;
	int status = 0;
	if (fstatat(dfd, leaf, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		status =
			errno == ENOENT ? 0 : fail(AGENT_FILE_OS, "`%s`: %s", rel, strerror(errno));
	} else if (S_ISDIR(st.st_mode) && !recursive) {
		status = fail(AGENT_FILE_OS, "`%s` is a directory: remove it recursively", rel);
	} else if (fstat(dfd, &base) < 0) {
		status = fail(AGENT_FILE_OS, "`%s`: %s", rel, strerror(errno));
	} else {
		int r = rm_tree(dfd, leaf, base.st_dev, 0);
		if (r < 0)
			status = fail(r == -EACCES || r == -EPERM ? AGENT_FILE_PERMISSION
								  : AGENT_FILE_OS,
				      "cannot remove `%s`: %s", rel, strerror(-r));
	}
	close(dfd);
	return status;
}

static unsigned long long vmstat_oom_kill(void)
{
	FILE *f = fopen("/proc/vmstat", "re");
	char line[128];
	unsigned long long v = 0;
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "oom_kill %llu", &v) == 1)
			break;
	if (f)
		fclose(f);
	return v;
}

static int do_outcome(void)
{
	struct statvfs base, root;
	unsigned long long b = 1, r = 1;
	if (statvfs(".", &base) == 0)
		b = base.f_bavail && (base.f_files == 0 || base.f_favail) ? base.f_bavail : 0;
	if (statvfs("/", &root) == 0)
		r = root.f_bavail && (root.f_files == 0 || root.f_favail) ? root.f_bavail : 0;
	/* The sandbox's pids limit refusals (vm_init.c), 0 without one. */
	unsigned long long pids = 0;
	FILE *f = fopen("/sys/fs/cgroup/sandbox/pids.events", "re");
	char ev[128];
	while (f && fgets(ev, sizeof(ev), f))
		if (sscanf(ev, "max %llu", &pids) == 1)
			break;
	if (f)
		fclose(f);
	char line[200];
	int n = snprintf(line, sizeof(line),
			 "oom_kill %llu\nbase_avail %llu\nroot_avail %llu\npids_max_events %llu\n",
			 vmstat_oom_kill(), b, r, pids);
	return write_all(STDOUT_FILENO, line, (size_t)n) < 0 ? AGENT_FILE_OS : 0;
}

int files_serve(char **argv)
{
	int n = 0;
	while (argv[n])
		n++;
	if (n == 1 && strcmp(argv[0], "outcome") == 0)
		return do_outcome();
	if (n >= 2 && argv[1][0] == '/')
		return fail(AGENT_FILE_USAGE, "paths are relative to the storage base");
	if (n == 2 && strcmp(argv[0], "write") == 0)
		return do_write(argv[1]);
	if (n == 3 && strcmp(argv[0], "read") == 0)
		return do_read(argv[1], argv[2]);
	if (n == 2 && strcmp(argv[0], "stat") == 0)
		return do_stat(argv[1]);
	if (n == 2 && strcmp(argv[0], "list") == 0)
		return do_list(argv[1]);
	if (n == 2 && strcmp(argv[0], "remove") == 0)
		return do_remove(argv[1], false);
	if (n == 2 && strcmp(argv[0], "remove-r") == 0)
		return do_remove(argv[1], true);
	return fail(AGENT_FILE_USAGE, "unknown file request `%s`", argv[0]);
}
