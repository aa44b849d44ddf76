/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Header-only guest client of msb's native host-tool channel
 * (docs/hosttools.md). Plain POSIX, no dependencies:
 *
 *     int fd = msb_ht_connect(NULL);            // $MSB_HOST_TOOLS_SOCKET or the default
 *     char *answer = NULL;
 *     msb_ht_call(fd, "{\"name\":\"add\",\"arguments\":{\"left\":2,\"right\":3}}", &answer);
 *     // answer: {"value": 5}  or  {"refusal":"Error: ..."}  (malloc()ed)
 *
 * Each call is one frame each way: a 4-byte little-endian length, then JSON.
 * Building the request JSON and reading the answer are the caller's. This
 * client is not a control: every gate is on the host.
 */
#ifndef MSB_HOST_TOOLS_CLIENT_H
#define MSB_HOST_TOOLS_CLIENT_H

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define MSB_HT_DEFAULT_SOCKET "/maf-sandbox/work/.msb-host-tools.sock"
#define MSB_HT_MAX_RESPONSE (64u << 20)

/* Connect; path NULL = $MSB_HOST_TOOLS_SOCKET or the default. fd or -errno. */
static inline int msb_ht_connect(const char *path)
{
	if (!path)
		path = getenv("MSB_HOST_TOOLS_SOCKET");
	if (!path || !*path)
		path = MSB_HT_DEFAULT_SOCKET;
	struct sockaddr_un sa;
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	memcpy(sa.sun_path, path, strlen(path) + 1);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int e = errno;
		close(fd);
		return -e;
	}
	return fd;
}

static inline int msb_ht__io(int fd, void *buf, size_t n, int writing)
{
	uint8_t *p = (uint8_t *)buf;
	while (n) {
		ssize_t r = writing ? send(fd, p, n, MSG_NOSIGNAL) : recv(fd, p, n, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r == 0 ? -EPIPE : -errno;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

/* One call: send the request JSON, receive the response JSON (malloc()ed,
 * NUL-terminated) into *response. 0 or -errno. */
static inline int msb_ht_call(int fd, const char *request_json, char **response)
{
	size_t len = strlen(request_json);
	uint8_t hdr[4] = {(uint8_t)len, (uint8_t)(len >> 8), (uint8_t)(len >> 16),
			  (uint8_t)(len >> 24)};
	int r = msb_ht__io(fd, hdr, 4, 1);
	if (r == 0)
		r = msb_ht__io(fd, (void *)request_json, len, 1);
	if (r == 0)
		r = msb_ht__io(fd, hdr, 4, 0);
	if (r < 0)
		return r;
	size_t n =
		(size_t)hdr[0] | (size_t)hdr[1] << 8 | (size_t)hdr[2] << 16 | (size_t)hdr[3] << 24;
	if (n > MSB_HT_MAX_RESPONSE)
		return -EPROTO;
	char *out = (char *)malloc(n + 1);
	if (!out)
		return -ENOMEM;
	r = msb_ht__io(fd, out, n, 0);
	if (r < 0) {
		free(out);
		return r;
	}
	out[n] = 0;
	*response = out;
	return 0;
}

#endif
