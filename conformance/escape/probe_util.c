/* SPDX-License-Identifier: Apache-2.0 */
/* What every probe of msb-escape-probe reports with. */
#include "probe.h"

void oom_adj(const char *value)
{
	int fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
	if (fd >= 0) {
		ssize_t w = write(fd, value, strlen(value));
		(void)w;
		close(fd);
	}
}

void set(struct res *r, const char *outcome, const char *fmt, ...)
{
	va_list ap;
	r->outcome = outcome;
	va_start(ap, fmt);
	vsnprintf(r->detail, sizeof(r->detail), fmt, ap);
	va_end(ap);
}

const char *errname(int e)
{
	switch (e) {
	case EPERM:
		return "EPERM";
	case EACCES:
		return "EACCES";
	case ENOENT:
		return "ENOENT";
	case ENOSYS:
		return "ENOSYS";
	case EROFS:
		return "EROFS";
	case EINVAL:
		return "EINVAL";
	case ESRCH:
		return "ESRCH";
	case ECONNREFUSED:
		return "ECONNREFUSED";
	case ENETUNREACH:
		return "ENETUNREACH";
	case EAFNOSUPPORT:
		return "EAFNOSUPPORT";
	case EAGAIN:
		return "EAGAIN";
	case ENOSPC:
		return "ENOSPC";
	case ENOMEM:
		return "ENOMEM";
	case ETXTBSY:
		return "ETXTBSY";
	case EBADF:
		return "EBADF";
	case EOPNOTSUPP:
		return "EOPNOTSUPP";
	case ENODEV:
		return "ENODEV";
	case EDQUOT:
		return "EDQUOT";
	case EEXIST:
		return "EEXIST";
	case ENOTDIR:
		return "ENOTDIR";
	case EHOSTUNREACH:
		return "EHOSTUNREACH";
	case ETIMEDOUT:
		return "ETIMEDOUT";
	default:
		return strerror(e);
	}
}

/* A system call that must fail: rc < 0 is blocked, anything else escaped. */
void must_fail(struct res *r, long rc, const char *what)
{
	if (rc < 0)
		set(r, "blocked", "%s: %s", what, errname(errno));
	else
		set(r, "escaped", "%s succeeded (returned %ld)", what, rc);
}

/* Read up to 64 bytes of a file: blocked when it cannot be opened. The
 * bytes go into the detail, so the host sees whatever crossed. */
void must_not_read(struct res *r, const char *path)
{
	if (!path || !*path) {
		set(r, "error", "no path given");
		return;
	}
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		set(r, "blocked", "open `%s`: %s", path, errname(errno));
		return;
	}
	char buf[65] = {0};
	ssize_t n = read(fd, buf, 64);
	close(fd);
	for (ssize_t i = 0; i < n; i++)
		if (buf[i] == '\n' || buf[i] == '"' || buf[i] == '\\' || (unsigned char)buf[i] < 32)
			buf[i] = ' ';
	set(r, "escaped", "read `%s`: %s", path, n > 0 ? buf : "(opened, empty)");
}
