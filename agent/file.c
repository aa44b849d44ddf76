/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `msb-agent file ...`: the container engines' confined file plane
 * (src/proto/agent_file.h has the contract). The agent binary is placed in
 * the container and run through the engine's exec, as root; every path is
 * resolved from "/" with openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS), so
 * the walk and the transfer are one operation the guest cannot race.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "proto/agent_file.h"

#ifndef SYS_openat2
#define SYS_openat2 437
#endif

struct open_how_v0 {
	uint64_t flags;
	uint64_t mode;
	uint64_t resolve;
};
#define RESOLVE_NO_SYMLINKS_ 0x04u
#define RESOLVE_BENEATH_ 0x08u

static int root_fd = -1;

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n > sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	ssize_t w = write(STDERR_FILENO, line, (size_t)n);
	(void)w;
}

/* openat2 beneath dirfd, no link anywhere: a fd, or -errno. */
static int open_beneath(int dirfd, const char *rel, int flags, mode_t mode)
{
	struct open_how_v0 how = {.flags = (uint64_t)flags | O_CLOEXEC,
				  .mode = mode,
				  .resolve = RESOLVE_BENEATH_ | RESOLVE_NO_SYMLINKS_};
	long fd;
	do
		fd = syscall(SYS_openat2, dirfd, rel, &how, sizeof(how));
	while (fd < 0 && errno == EINTR);
	return fd < 0 ? -errno : (int)fd;
}

/*
 * Why a resolution of `rel` (from "/") failed with ELOOP or ENOTDIR: walk
 * it no-follow to name the component. Only for the message: the refusal
 * itself came from the one resolution. `rel` is a parent of what was asked
 * for: a link anywhere in it is a link on the way.
 */
static int diagnose(const char *rel, int code)
{
	char buf[4096];
	snprintf(buf, sizeof(buf), "%s", rel);
	for (char *p = buf;; p++) {
		char c = *p;
		if (c != '/' && c != '\0')
			continue;
		*p = '\0';
		struct stat st;
		if (fstatat(root_fd, buf, &st, AT_SYMLINK_NOFOLLOW) == 0) {
			if (S_ISLNK(st.st_mode)) {
				say("/%s", buf);
				return MSB_AGENT_FILE_PARENT_LINK;
			}
			if (!S_ISDIR(st.st_mode)) {
				say("/%s", buf);
				return MSB_AGENT_FILE_NOT_DIR;
			}
		}
		if (!c)
			break;
		*p = '/';
	}
	say("/%s", rel);
	return code;
}

/* "a/b/c" -> parent "a/b" (or "." ), leaf "c". */
static int split(const char *abs, char *parent, size_t cap, const char **leaf)
{
	while (*abs == '/')
		abs++;
	if (!*abs || strlen(abs) >= cap)
		return -1;
	const char *slash = strrchr(abs, '/');
	if (slash) {
		memcpy(parent, abs, (size_t)(slash - abs));
		parent[slash - abs] = '\0';
		*leaf = slash + 1;
	} else {
		snprintf(parent, cap, ".");
		*leaf = abs;
	}
	if (!**leaf || strcmp(*leaf, ".") == 0 || strcmp(*leaf, "..") == 0)
		return -1;
	return 0;
}

/* The parent directory of abs, resolved; or an exit status (negative). */
static int open_parent(const char *abs, const char **leaf, char *rel, size_t cap)
{
	char parent[4096];
	if (split(abs, parent, sizeof(parent), leaf) < 0) {
		say("`%s` is not a path to a file", abs);
		return -MSB_AGENT_FILE_USAGE;
	}
	snprintf(rel, cap, "%s", abs[0] == '/' ? abs + 1 : abs);
	int fd = open_beneath(root_fd, parent, O_PATH | O_DIRECTORY, 0);
	if (fd >= 0)
		return fd;
	if (fd == -ENOSYS) {
		say("openat2 is not available");
		return -MSB_AGENT_FILE_NO_OPENAT2;
	}
	if (fd == -ENOENT)
		return -MSB_AGENT_FILE_NOT_FOUND;
	if (fd == -ELOOP || fd == -ENOTDIR || fd == -EXDEV)
		return -diagnose(parent, fd == -ENOTDIR ? MSB_AGENT_FILE_NOT_DIR
							: MSB_AGENT_FILE_PARENT_LINK);
	say("open `/%s`: %s", parent, strerror(-fd));
	return -MSB_AGENT_FILE_ERROR;
}

static int write_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static int op_stat(const char *abs)
{
	const char *leaf;
	char rel[4096];
	int pfd = open_parent(abs, &leaf, rel, sizeof(rel));
	if (pfd == -MSB_AGENT_FILE_NOT_FOUND) {
		printf("absent 0\n");
		return MSB_AGENT_FILE_OK;
	}
	if (pfd < 0)
		return -pfd;
	struct stat st;
	int r = fstatat(pfd, leaf, &st, AT_SYMLINK_NOFOLLOW);
	int e = errno;
	close(pfd);
	if (r < 0 && (e == ENOENT || e == ENOTDIR)) {
		printf("absent 0\n");
		return MSB_AGENT_FILE_OK;
	}
	if (r < 0) {
		say("stat `%s`: %s", abs, strerror(e));
		return MSB_AGENT_FILE_ERROR;
	}
	const char *kind = S_ISREG(st.st_mode)	 ? "file"
			   : S_ISDIR(st.st_mode) ? "dir"
			   : S_ISLNK(st.st_mode) ? "link"
						 : "other";
	printf("%s %llu\n", kind, S_ISREG(st.st_mode) ? (unsigned long long)st.st_size : 0ull);
	return MSB_AGENT_FILE_OK;
}

/* The leaf opened for reading, never through a link, never blocking on a fifo. */
static int op_read(const char *abs, uint64_t max)
{
	const char *leaf;
	char rel[4096];
	int pfd = open_parent(abs, &leaf, rel, sizeof(rel));
	if (pfd < 0)
		return -pfd;
	int fd = open_beneath(pfd, leaf, O_RDONLY | O_NOFOLLOW | O_NONBLOCK, 0);
	close(pfd);
	if (fd == -ENOENT)
		return MSB_AGENT_FILE_NOT_FOUND;
	if (fd == -ELOOP)
		return MSB_AGENT_FILE_LEAF_LINK;
	if (fd < 0) {
		say("open `%s`: %s", abs, strerror(-fd));
		return MSB_AGENT_FILE_ERROR;
	}
	struct stat st;
	if (fstat(fd, &st) < 0) {
		close(fd);
		say("stat `%s`: %s", abs, strerror(errno));
		return MSB_AGENT_FILE_ERROR;
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return S_ISDIR(st.st_mode) ? MSB_AGENT_FILE_IS_DIR : MSB_AGENT_FILE_NOT_REGULAR;
	}
	if ((uint64_t)st.st_size > max) {
		close(fd);
		say("%llu", (unsigned long long)st.st_size);
		return MSB_AGENT_FILE_TOO_BIG;
	}
	/* What the size said, no more: a file growing meanwhile is cut there. */
	static char buf[1 << 16];
	uint64_t left = (uint64_t)st.st_size;
	while (left > 0) {
		ssize_t n = read(fd, buf, left < sizeof(buf) ? (size_t)left : sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		if (write_all(STDOUT_FILENO, buf, (size_t)n) < 0) {
			close(fd);
			return MSB_AGENT_FILE_ERROR;
		}
		left -= (uint64_t)n;
	}
	close(fd);
	return MSB_AGENT_FILE_OK;
}

/* Every directory of `parent` made beneath "/" (0755), each created and
 * opened relative to the one above it, none through a link. */
static int make_parents(const char *parent)
{
	char buf[4096];
	snprintf(buf, sizeof(buf), "%s", parent);
	if (strcmp(buf, ".") == 0)
		return MSB_AGENT_FILE_OK;
	int cur = dup(root_fd);
	char *comp = buf;
	for (char *p = buf;; p++) {
		char c = *p;
		if (c != '/' && c != '\0')
			continue;
		*p = '\0';
		int fd = open_beneath(cur, comp, O_PATH | O_DIRECTORY, 0);
		if (fd == -ENOENT) {
			if (mkdirat(cur, comp, 0755) < 0 && errno != EEXIST) {
				say("mkdir `/%s`: %s", buf, strerror(errno));
				close(cur);
				return MSB_AGENT_FILE_ERROR;
			}
			fd = open_beneath(cur, comp, O_PATH | O_DIRECTORY, 0);
		}
		close(cur);
		if (fd == -ENOSYS)
			return MSB_AGENT_FILE_NO_OPENAT2;
		if (fd == -ELOOP || fd == -ENOTDIR || fd == -EXDEV)
			return diagnose(buf, fd == -ENOTDIR ? MSB_AGENT_FILE_NOT_DIR
							    : MSB_AGENT_FILE_PARENT_LINK);
		if (fd < 0) {
			say("open `/%s`: %s", buf, strerror(-fd));
			return MSB_AGENT_FILE_ERROR;
		}
		cur = fd;
		if (!c)
			break;
		*p = '/';
		comp = p + 1;
	}
	close(cur);
	return MSB_AGENT_FILE_OK;
}

/*
 * stdin into a private name in the parent, then renamed over the leaf: an
 * existing file is replaced, and a link swapped in at the last moment is
 * replaced too, never written through.
 */
static int op_write(const char *abs, mode_t mode)
{
	char parent[4096];
	const char *leaf;
	if (split(abs, parent, sizeof(parent), &leaf) < 0) {
		say("`%s` is not a path to a file", abs);
		return MSB_AGENT_FILE_USAGE;
	}
	int r = make_parents(parent);
	if (r != MSB_AGENT_FILE_OK)
		return r;
	char rel[4096];
	int pfd = open_parent(abs, &leaf, rel, sizeof(rel));
	if (pfd < 0)
		return -pfd;
	struct stat st;
	if (fstatat(pfd, leaf, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		r = S_ISLNK(st.st_mode)	   ? MSB_AGENT_FILE_LEAF_LINK
		    : S_ISDIR(st.st_mode)  ? MSB_AGENT_FILE_IS_DIR
		    : !S_ISREG(st.st_mode) ? MSB_AGENT_FILE_NOT_REGULAR
					   : MSB_AGENT_FILE_OK;
		if (r != MSB_AGENT_FILE_OK) {
			close(pfd);
			return r;
		}
	}
	char tmp[64];
	int fd = -1;
	for (int i = 0; i < 16 && fd < 0; i++) {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		snprintf(tmp, sizeof(tmp), ".msb-agent-%d-%ld-%d", (int)getpid(), (long)ts.tv_nsec,
			 i);
		fd = openat(pfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	}
	if (fd < 0) {
		say("create in `/%s`: %s", parent, strerror(errno));
		close(pfd);
		return MSB_AGENT_FILE_ERROR;
	}
	static char buf[1 << 16];
	uint64_t total = 0;
	r = MSB_AGENT_FILE_OK;
	for (;;) {
		ssize_t n = read(STDIN_FILENO, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			say("stdin: %s", strerror(errno));
			r = MSB_AGENT_FILE_ERROR;
			break;
		}
		if (n == 0)
			break;
		total += (uint64_t)n;
		if (total > MSB_AGENT_FILE_MAX) {
			say("%llu", (unsigned long long)total);
			r = MSB_AGENT_FILE_TOO_BIG;
			break;
		}
		if (write_all(fd, buf, (size_t)n) < 0) {
			say("write `%s`: %s", abs, strerror(errno));
			r = MSB_AGENT_FILE_ERROR;
			break;
		}
	}
	if (r == MSB_AGENT_FILE_OK && (fchown(fd, 0, 0) < 0 || fchmod(fd, mode) < 0)) {
		say("chmod `%s`: %s", abs, strerror(errno));
		r = MSB_AGENT_FILE_ERROR;
	}
	close(fd);
	if (r == MSB_AGENT_FILE_OK && renameat(pfd, tmp, pfd, leaf) < 0) {
		r = errno == EISDIR ? MSB_AGENT_FILE_IS_DIR : MSB_AGENT_FILE_ERROR;
		if (r == MSB_AGENT_FILE_ERROR)
			say("rename onto `%s`: %s", abs, strerror(errno));
	}
	if (r != MSB_AGENT_FILE_OK)
		unlinkat(pfd, tmp, 0);
	close(pfd);
	return r;
}

/* Remove name in at and, if a directory, everything under it, fd-relative
 * and no-follow. */
static int rm_rf_at(int at, const char *name, int depth)
{
	if (depth > MSB_AGENT_FILE_DEPTH)
		return MSB_AGENT_FILE_TOO_DEEP;
	if (unlinkat(at, name, 0) == 0 || errno == ENOENT)
		return MSB_AGENT_FILE_OK;
	if (errno != EISDIR && errno != EPERM) {
		say("unlink: %s", strerror(errno));
		return MSB_AGENT_FILE_ERROR;
	}
	int fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		say("open a directory to remove: %s", strerror(errno));
		return MSB_AGENT_FILE_ERROR;
	}
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return MSB_AGENT_FILE_ERROR;
	}
	int r = MSB_AGENT_FILE_OK;
	for (struct dirent *e; r == MSB_AGENT_FILE_OK && (e = readdir(d));) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		r = rm_rf_at(dirfd(d), e->d_name, depth + 1);
	}
	closedir(d);
	if (r == MSB_AGENT_FILE_OK && unlinkat(at, name, AT_REMOVEDIR) < 0 && errno != ENOENT) {
		say("rmdir: %s", strerror(errno));
		r = MSB_AGENT_FILE_ERROR;
	}
	return r;
}

static int op_remove(const char *abs, bool recursive)
{
	const char *leaf;
	char rel[4096];
	int pfd = open_parent(abs, &leaf, rel, sizeof(rel));
	if (pfd == -MSB_AGENT_FILE_NOT_FOUND)
		return MSB_AGENT_FILE_OK;
	if (pfd < 0)
		return -pfd;
	struct stat st;
	int r = MSB_AGENT_FILE_OK;
	if (fstatat(pfd, leaf, &st, AT_SYMLINK_NOFOLLOW) < 0)
		r = errno == ENOENT ? MSB_AGENT_FILE_OK : MSB_AGENT_FILE_ERROR;
	else if (S_ISDIR(st.st_mode) && !recursive)
		r = MSB_AGENT_FILE_IS_DIR;
	else if (S_ISDIR(st.st_mode))
		r = rm_rf_at(pfd, leaf, 0);
	else if (unlinkat(pfd, leaf, 0) < 0 && errno != ENOENT)
		r = MSB_AGENT_FILE_ERROR;
	if (r == MSB_AGENT_FILE_ERROR)
		say("remove `%s`: %s", abs, strerror(errno));
	close(pfd);
	return r;
}

int agent_file_main(int argc, char **argv)
{
	/* argv: msb-agent file OP PATH [ARG] */
	if (argc < 4 || argv[3][0] != '/') {
		say("usage: msb-agent file stat|read|write|remove /PATH [MAX|MODE|-r]");
		return MSB_AGENT_FILE_USAGE;
	}
	root_fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root_fd < 0)
		return MSB_AGENT_FILE_ERROR;
	const char *op = argv[2], *path = argv[3];
	if (strcmp(op, "stat") == 0 && argc == 4)
		return op_stat(path);
	if (strcmp(op, "read") == 0 && argc == 5)
		return op_read(path, strtoull(argv[4], NULL, 10));
	if (strcmp(op, "write") == 0 && argc == 5)
		return op_write(path, (mode_t)(strtoul(argv[4], NULL, 8) & 07777));
	if (strcmp(op, "remove") == 0 && (argc == 4 || (argc == 5 && !strcmp(argv[4], "-r"))))
		return op_remove(path, argc == 5);
	say("usage: msb-agent file stat|read|write|remove /PATH [MAX|MODE|-r]");
	return MSB_AGENT_FILE_USAGE;
}
