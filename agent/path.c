/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The working directory of an exec, resolved beneath the storage base.
 *
 * A relative path is normalised lexically ("." and empty components dropped,
 * ".." pops one) and refused when it climbs above the base; an absolute path
 * is accepted only when its normalised form is the base or inside it (legacy
 * addressing). The result is opened from a directory fd of the base with
 * openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS), so a symlink cannot lead
 * outside either; kernels without openat2 get the lexical check only.
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
#define RESOLVE_BENEATH_ 0x08u

/* Normalise in place into out (same capacity). Returns -1 when ".." climbs
 * above the start of a relative path; an absolute path clamps at "/". The
 * result has no leading or trailing '/'. */
static int normalise(const char *in, char *out, size_t cap)
{
	size_t n = 0;
	bool absolute = in[0] == '/';
	const char *p = in;
	out[0] = 0;
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
			if (n == 0) {
				if (!absolute)
					return -1;
				continue;
			}
			while (n > 0 && out[n - 1] != '/')
				n--;
			if (n > 0)
				n--; /* the separator */
			out[n] = 0;
			continue;
		}
		if (n + (n > 0) + len + 1 > cap)
			return -1;
		if (n > 0)
			out[n++] = '/';
		memcpy(out + n, s, len);
		n += len;
		out[n] = 0;
	}
	return 0;
}

static int fail(uint16_t *code, const char **msg, uint16_t c, const char *m)
{
	*code = c;
	*msg = m;
	return -1;
}

static int map_errno(int err, uint16_t *code, const char **msg)
{
	switch (err) {
	case ENOENT:
		return fail(code, msg, MSB_PROTO_ERR_NOT_FOUND, "working directory does not exist");
	case ENOTDIR:
		return fail(code, msg, MSB_PROTO_ERR_NOT_DIRECTORY,
			    "working directory is not a directory");
	case EXDEV:
	case ELOOP:
		return fail(code, msg, MSB_PROTO_ERR_ESCAPE,
			    "working directory escapes the storage base");
	case EACCES:
	case EPERM:
		return fail(code, msg, MSB_PROTO_ERR_PERMISSION,
			    "working directory is not accessible");
	default:
		return fail(code, msg, MSB_PROTO_ERR_INTERNAL, "cannot open the working directory");
	}
}

int workdir_open(const char *base, const msb_proto_str *cwd, char **logical, uint16_t *code,
		 const char **msg)
{
	char in[MSB_PROTO_MAX_PATH + 1], rel[MSB_PROTO_MAX_PATH + 1], nbase[MSB_PROTO_MAX_PATH + 1];

	if (cwd->len > MSB_PROTO_MAX_PATH)
		return fail(code, msg, MSB_PROTO_ERR_BAD_REQUEST, "working directory too long");
	if (cwd->len > 0)
		memcpy(in, cwd->ptr, cwd->len);
	in[cwd->len] = 0;
	if (normalise(base, nbase, sizeof(nbase)) < 0)
		return fail(code, msg, MSB_PROTO_ERR_INTERNAL, "bad storage base");

	if (in[0] == '/') {
		char abs[MSB_PROTO_MAX_PATH + 1];
		size_t bl = strlen(nbase);
		if (normalise(in, abs, sizeof(abs)) < 0)
			return fail(code, msg, MSB_PROTO_ERR_BAD_REQUEST, "bad working directory");
		if (bl == 0) {
			memcpy(rel, abs, strlen(abs) + 1);
		} else if (strncmp(abs, nbase, bl) == 0 && (abs[bl] == 0 || abs[bl] == '/')) {
			const char *r = abs + bl + (abs[bl] == '/');
			memmove(rel, r, strlen(r) + 1);
		} else {
			return fail(code, msg, MSB_PROTO_ERR_ESCAPE,
				    "working directory escapes the storage base");
		}
	} else if (normalise(in, rel, sizeof(rel)) < 0) {
		return fail(code, msg, MSB_PROTO_ERR_ESCAPE,
			    "working directory escapes the storage base");
	}

	int basefd = open(base, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (basefd < 0) {
		int err = errno;
		if (err == ENOENT)
			return fail(code, msg, MSB_PROTO_ERR_NOT_FOUND,
				    "storage base does not exist");
		return map_errno(err, code, msg);
	}
	const char *target = rel[0] ? rel : ".";
	struct open_how_v0 how = {
		.flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
		.mode = 0,
		.resolve = RESOLVE_BENEATH_ | RESOLVE_NO_MAGICLINKS_,
	};
	int fd = (int)syscall(SYS_openat2, basefd, target, &how, sizeof(how));
	if (fd < 0 && (errno == ENOSYS || errno == E2BIG))
		fd = openat(basefd, target, O_PATH | O_DIRECTORY | O_CLOEXEC);
	int err = errno;
	close(basefd);
	if (fd < 0)
		return map_errno(err, code, msg);

	/* "/" + normalised base + "/" + rel, without doubled separators */
	size_t bl = strlen(nbase), rl = strlen(rel);
	char *l = malloc(bl + rl + 3);
	if (!l) {
		close(fd);
		return fail(code, msg, MSB_PROTO_ERR_SPAWN, "out of memory");
	}
	size_t n = 0;
	l[n++] = '/';
	memcpy(l + n, nbase, bl);
	n += bl;
	if (rl > 0) {
		if (bl > 0)
			l[n++] = '/';
		memcpy(l + n, rel, rl);
		n += rl;
	}
	l[n] = 0;
	*logical = l;
	return fd;
}
