/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The working directory of an exec. Commands are not confined (the seed
 * keeps exec unconfined and confines only the file plane, which the host
 * serves): any existing directory of the guest is accepted, an absolute path
 * as it is, a relative one joined onto the storage base. The path is
 * normalised lexically ("." and empty components dropped, ".." pops one and
 * stops at "/") into the logical PWD, then opened with
 * openat2(RESOLVE_NO_MAGICLINKS), so that the agent never follows a /proc
 * magic link to something a workload could not name itself.
 *
 * A directory that cannot be opened is not refused here: the exec runs, and
 * its child reports the reason on stderr and exits 126, as an engine's
 * `exec -w` does (child.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agent.h"

#ifndef SYS_openat2
#define SYS_openat2 437
#endif

struct open_how_v0 {
	uint64_t flags;
	uint64_t mode;
	uint64_t resolve;
};
#define RESOLVE_NO_MAGICLINKS_ 0x02u

/* Append the components of `in` to out[*n] (an absolute path without a
 * trailing '/', "" for the root), resolving "." and ".." lexically. -1 when
 * the result would not fit `cap`. */
static int push_components(const char *in, char *out, size_t *n, size_t cap)
{
	const char *p = in;
	while (*p) {
		while (*p == '/')
			p++;
		if (!*p)
			break;
		const char *s = p;
		while (*p && *p != '/')
			p++;
		size_t len = (size_t)(p - s);
		if (len == 1 && s[0] == '.')
			continue;
		if (len == 2 && s[0] == '.' && s[1] == '.') {
			while (*n > 0 && out[*n - 1] != '/')
				(*n)--;
			if (*n > 0)
				(*n)--; /* the separator */
			out[*n] = 0;
			continue;
		}
		if (*n + 1 + len + 1 > cap)
			return -1;
		out[(*n)++] = '/';
		memcpy(out + *n, s, len);
		*n += len;
		out[*n] = 0;
	}
	return 0;
}

int workdir_resolve(const char *base, const msb_proto_str *cwd, char **logical)
{
	char in[MSB_PROTO_MAX_PATH + 1];
	/* the base and the path, each at most MAX_PATH */
	size_t cap = 2 * MSB_PROTO_MAX_PATH + 4;
	size_t n = 0;

	if (cwd->len > MSB_PROTO_MAX_PATH)
		return -ENAMETOOLONG;
	if (cwd->len > 0)
		memcpy(in, cwd->ptr, cwd->len);
	in[cwd->len] = 0;
	char *out = malloc(cap);
	if (!out)
		return -ENOMEM;
	out[0] = 0;
	if ((in[0] != '/' && push_components(base, out, &n, cap) < 0) ||
	    push_components(in, out, &n, cap) < 0) {
		free(out);
		return -ENAMETOOLONG;
	}
	if (n == 0) {
		out[0] = '/';
		out[1] = 0;
	}
	*logical = out;
	return 0;
}

int workdir_open(const char *path)
{
	struct open_how_v0 how = {
		.flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
		.mode = 0,
		.resolve = RESOLVE_NO_MAGICLINKS_,
	};
	int fd = (int)syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof(how));
	if (fd < 0 && (errno == ENOSYS || errno == E2BIG))
		fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}
