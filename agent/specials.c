/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The file-plane request `specials ROOT...` (files.c): every socket, fifo
 * and device node below each ROOT (an absolute guest path), one
 * "PATH\0" record each, in walk order. For the `oci` backend under gVisor,
 * whose gofer passes regular files, directories and links to the host (the
 * host walks those) but keeps a bound socket or a fifo in the sentry, where
 * the host cannot see it (docs/oci.md, "Files, reset, fingerprint").
 *
 * It runs as a workload (files.c): no capability, so a directory it cannot
 * read fails the request (AGENT_FILE_PERMISSION) rather than hiding what is
 * inside. No link is followed and no mount is crossed: a directory that is
 * a mount point (/proc/self/mountinfo) is not entered; ROOTs are walked
 * each on its own.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent.h"

#define SPECIALS_MAX_DEPTH 256
#define SPECIALS_MAX_MOUNTS 4096
#define SPECIALS_MOUNTINFO_MAX ((size_t)1 << 20)
#define SPECIALS_PATH_MAX 4096

struct mounts {
	char *text;
	char *points[SPECIALS_MAX_MOUNTS];
	size_t n;
};

static int say(int code, const char *what, const char *path, int e)
{
	char line[SPECIALS_PATH_MAX + 128];
	int n = snprintf(line, sizeof(line), "specials: %s `%.*s`: %s\n", what, 4096, path,
			 strerror(e));
	if (n > 0) {
		ssize_t w = write(STDERR_FILENO, line,
				  (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1);
		(void)w;
	}
	return code;
}

static int put(const char *path)
{
	size_t len = strlen(path) + 1;
	while (len > 0) {
		ssize_t n = write(STDOUT_FILENO, path, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		path += n;
		len -= (size_t)n;
	}
	return 0;
}

/* mountinfo escapes space, tab, newline and backslash as \ooo. */
static void unescape(char *s)
{
	char *w = s;
	for (char *p = s; *p; p++) {
		if (p[0] == '\\' && p[1] >= '0' && p[1] <= '3' && p[2] >= '0' && p[2] <= '7' &&
		    p[3] >= '0' && p[3] <= '7') {
			*w++ = (char)((p[1] - '0') * 64 + (p[2] - '0') * 8 + (p[3] - '0'));
			p += 3;
		} else {
			*w++ = *p;
		}
	}
	*w = '\0';
}

static int read_mounts(struct mounts *m)
{
	int fd = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return say(AGENT_FILE_OS, "open", "/proc/self/mountinfo", errno);
	m->text = malloc(SPECIALS_MOUNTINFO_MAX + 1);
	size_t got = 0;
	while (m->text && got < SPECIALS_MOUNTINFO_MAX) {
		ssize_t n = read(fd, m->text + got, SPECIALS_MOUNTINFO_MAX - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	if (!m->text)
		return say(AGENT_FILE_OS, "read", "/proc/self/mountinfo", ENOMEM);
	if (got == SPECIALS_MOUNTINFO_MAX)
		return say(AGENT_FILE_OS, "read", "/proc/self/mountinfo", EFBIG);
	m->text[got] = '\0';
	for (char *line = m->text, *next; line && *line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		/* ID PARENT MAJ:MIN ROOT MOUNTPOINT ... */
		char *f = line;
		for (int i = 0; i < 4 && f; i++) {
			f = strchr(f, ' ');
			if (f)
				f++;
		}
		char *end = f ? strchr(f, ' ') : NULL;
		if (!end)
			continue;
		*end = '\0';
		unescape(f);
		if (m->n == SPECIALS_MAX_MOUNTS)
			return say(AGENT_FILE_OS, "read", "/proc/self/mountinfo", E2BIG);
		m->points[m->n++] = f;
	}
	return 0;
}

static bool is_mount_point(const struct mounts *m, const char *path)
{
	for (size_t i = 0; i < m->n; i++)
		if (strcmp(m->points[i], path) == 0)
			return true;
	return false;
}

static bool special(mode_t mode)
{
	return S_ISSOCK(mode) || S_ISFIFO(mode) || S_ISCHR(mode) || S_ISBLK(mode);
}

/* Every special entry below the directory fd (path: its guest path). Takes fd. */
static int walk(const struct mounts *m, int fd, char *path, size_t len, int depth)
{
	DIR *d = fdopendir(fd);
	if (!d) {
		int e = errno;
		close(fd);
		return say(AGENT_FILE_OS, "list", path, e);
	}
	int status = 0;
	struct dirent *de;
	while (status == 0 && (de = readdir(d))) {
		const char *name = de->d_name;
		if (!strcmp(name, ".") || !strcmp(name, ".."))
			continue;
		size_t nlen = strlen(name);
		bool root = len == 1; /* "/" */
		size_t clen = len + (root ? 0 : 1) + nlen;
		if (clen >= SPECIALS_PATH_MAX) {
			status = say(AGENT_FILE_OS, "walk", path, ENAMETOOLONG);
			break;
		}
		if (!root)
			path[len] = '/';
		memcpy(path + len + (root ? 0 : 1), name, nlen + 1);
		struct stat st;
		if (fstatat(dirfd(d), name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			path[len] = '\0';
			continue; /* gone meanwhile */
		}
		if (special(st.st_mode)) {
			if (put(path) < 0)
				status = AGENT_FILE_OS;
		} else if (S_ISDIR(st.st_mode) && !is_mount_point(m, path)) {
			if (depth >= SPECIALS_MAX_DEPTH) {
				status = say(AGENT_FILE_OS, "walk", path, ELOOP);
			} else {
				int c = openat(dirfd(d), name,
					       O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
				if (c < 0 && errno != ENOENT)
					status = say(errno == EACCES ? AGENT_FILE_PERMISSION
								     : AGENT_FILE_OS,
						     "open", path, errno);
				else if (c >= 0)
					status = walk(m, c, path, clen, depth + 1);
			}
		}
		path[len] = '\0';
	}
	closedir(d);
	return status;
}

int files_specials(char **roots)
{
	struct mounts m = {0};
	int status = read_mounts(&m);
	char *path = malloc(SPECIALS_PATH_MAX);
	if (!path)
		status = AGENT_FILE_OS;
	for (size_t i = 0; status == 0 && roots[i]; i++) {
		size_t len = strlen(roots[i]);
		if (roots[i][0] != '/' || len >= SPECIALS_PATH_MAX) {
			status = say(AGENT_FILE_USAGE, "root", roots[i], EINVAL);
			break;
		}
		int fd = open(roots[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0) {
			status = say(errno == EACCES ? AGENT_FILE_PERMISSION : AGENT_FILE_OS,
				     "open", roots[i], errno);
			break;
		}
		memcpy(path, roots[i], len + 1);
		status = walk(&m, fd, path, len, 0);
	}
	free(path);
	free(m.text);
	return status;
}
