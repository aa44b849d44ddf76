/* SPDX-License-Identifier: Apache-2.0 */
/* msb-escape-probe's probes of sockets: raw, packet, outbound, loopback, abstract, the shim, the
 * proxy (docs/security.md). */
#include "probe.h"

/* ---- sockets ------------------------------------------------------------------------ */

void p_raw(const struct ctx *c, struct res *r)
{
	int fd = socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_ICMP);
	if (fd >= 0)
		close(fd);
	must_fail(r, fd, "socket(AF_INET, SOCK_RAW)");
}

void p_packet(const struct ctx *c, struct res *r)
{
	int fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0);
	if (fd >= 0)
		close(fd);
	must_fail(r, fd, "socket(AF_PACKET)");
}

static int tcp_connect(const char *ip, int port, int timeout_ms)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -1;
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	inet_pton(AF_INET, ip, &a.sin_addr);
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0)
		return fd;
	if (errno != EINPROGRESS) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	fd_set w;
	FD_ZERO(&w);
	FD_SET(fd, &w);
	struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
	if (select(fd + 1, NULL, &w, NULL, &tv) <= 0) {
		close(fd);
		errno = ETIMEDOUT;
		return -1;
	}
	int soerr = 0;
	socklen_t sl = sizeof(soerr);
	getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
	if (soerr) {
		close(fd);
		errno = soerr;
		return -1;
	}
	return fd;
}

void p_outbound(const struct ctx *c, struct res *r)
{
	int fd = tcp_connect("1.1.1.1", 443, 2000);
	if (fd >= 0)
		close(fd);
	must_fail(r, fd, "connect 1.1.1.1:443");
}

void p_host_tcp(const struct ctx *c, struct res *r)
{
	int fd = tcp_connect("127.0.0.1", c->tcp_port, 1000);
	if (fd >= 0)
		close(fd);
	char what[64];
	snprintf(what, sizeof(what), "connect to the host's 127.0.0.1:%d", c->tcp_port);
	must_fail(r, fd, what);
}

void p_metadata(const struct ctx *c, struct res *r)
{
	int fd = tcp_connect("169.254.169.254", 80, 1000);
	if (fd >= 0)
		close(fd);
	must_fail(r, fd, "connect to the metadata address 169.254.169.254:80");
}

static int unix_connect(const char *name, bool abstract)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	size_t n = strlen(name);
	if (n + 2 > sizeof(a.sun_path)) {
		close(fd);
		errno = EINVAL;
		return -1;
	}
	memcpy(a.sun_path + (abstract ? 1 : 0), name, n);
	socklen_t len =
		(socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + (abstract ? 1 : 0));
	if (connect(fd, (struct sockaddr *)&a, len) < 0) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

void p_abstract(const struct ctx *c, struct res *r)
{
	int fd = unix_connect(c->abstract, true);
	if (fd >= 0)
		close(fd);
	must_fail(r, fd, "connect to the host's abstract socket");
}

void p_shim_sock(const struct ctx *c, struct res *r)
{
	int fd = unix_connect(c->shim_sock, false);
	if (fd >= 0)
		close(fd);
	must_fail(r, fd, "connect to the shim's socket by its host path");
}

void p_proxy(const struct ctx *c, struct res *r)
{
	/* The allowlist proxy's port inside the sandbox: with `closed` egress
	 * nothing listens; with `allowlist` a CONNECT to a private address or
	 * an unlisted host must be refused. */
	int fd = tcp_connect("127.0.0.1", 3128, 1000);
	if (fd < 0) {
		set(r, "blocked", "connect 127.0.0.1:3128: %s", errname(errno));
		return;
	}
	const char req[] = "CONNECT 127.0.0.1:22 HTTP/1.1\r\nHost: 127.0.0.1:22\r\n\r\n";
	char buf[128] = {0};
	ssize_t n = -1;
	if (write(fd, req, sizeof(req) - 1) == (ssize_t)(sizeof(req) - 1)) {
		fd_set rd;
		FD_ZERO(&rd);
		FD_SET(fd, &rd);
		struct timeval tv = {3, 0};
		if (select(fd + 1, &rd, NULL, NULL, &tv) > 0)
			n = read(fd, buf, sizeof(buf) - 1);
	}
	close(fd);
	for (ssize_t i = 0; i < n; i++)
		if (buf[i] == '\r' || buf[i] == '\n' || buf[i] == '"' || buf[i] == '\\')
			buf[i] = ' ';
	if (n > 12 && strncmp(buf + 9, "2", 1) == 0)
		set(r, "escaped", "the proxy tunnelled to the host's loopback: %s", buf);
	else
		set(r, "blocked", "the proxy refused: %s", n > 0 ? buf : "(no answer)");
}
