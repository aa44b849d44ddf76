/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Name resolution for the proxy. msb-shim is linked statically, and
 * getaddrinfo() from a static glibc loads NSS modules at run time (or fails),
 * so the proxy resolves by itself, in this order:
 *   1. the backend configuration's "hosts" map (tests pin names here);
 *   2. the host's /etc/hosts;
 *   3. DNS: A then AAAA queries over UDP to the `nameserver` lines of the
 *      host's /etc/resolv.conf (at most 3, in order; 127.0.0.1 when none),
 *      each with a timeout, the reply matched on id, source and question.
 * No search domains (a name is taken as fully qualified), no TCP fallback
 * (a truncated reply uses the records it carries), no caching. Every
 * address is then checked by the address filter before it is dialled, and
 * the proxy dials exactly the address it checked.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "egress/egress.h"

#define DNS_MAX 1232
#define NS_MAX 3
#define QTYPE_A 1
#define QTYPE_AAAA 28

static void set_port(struct sockaddr_storage *sa, uint16_t port)
{
	if (sa->ss_family == AF_INET)
		((struct sockaddr_in *)sa)->sin_port = htons(port);
	else
		((struct sockaddr_in6 *)sa)->sin6_port = htons(port);
}

/* /etc/hosts: "ADDRESS NAME [ALIAS...]" lines, '#' comments. */
static int from_etc_hosts(const char *path, const char *host, uint16_t port,
			  struct sockaddr_storage *addrs, size_t max)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return 0;
	char line[1024];
	int n = 0;
	while (fgets(line, sizeof(line), f) && (size_t)n < max) {
		char *hash = strchr(line, '#');
		if (hash)
			*hash = '\0';
		char *save = NULL;
		char *addr = strtok_r(line, " \t\r\n", &save);
		if (!addr)
			continue;
		struct sockaddr_storage sa;
		if (!msb_egress__parse_ip(addr, port, &sa))
			continue;
		for (char *name; (name = strtok_r(NULL, " \t\r\n", &save));) {
			if (strcasecmp(name, host) == 0) {
				addrs[n++] = sa;
				break;
			}
		}
	}
	fclose(f);
	return n;
}

static int nameservers(const char *path, uint16_t port, struct sockaddr_storage *out)
{
	int n = 0;
	FILE *f = fopen(path, "re");
	if (f) {
		char line[512];
		while (n < NS_MAX && fgets(line, sizeof(line), f)) {
			char *save = NULL;
			char *kw = strtok_r(line, " \t\r\n", &save);
			if (!kw || strcmp(kw, "nameserver") != 0)
				continue;
			char *addr = strtok_r(NULL, " \t\r\n", &save);
			if (addr && msb_egress__parse_ip(addr, port, &out[n]))
				n++;
		}
		fclose(f);
	}
	if (n == 0 && msb_egress__parse_ip("127.0.0.1", port, &out[0]))
		n = 1;
	return n;
}

int msb_egress__dns_query(const char *name, uint16_t qtype, uint16_t id, uint8_t *out, size_t cap)
{
	size_t n = strlen(name);
	if (n == 0 || n > MSB_EGRESS_HOST_MAX || cap < 12 + n + 2 + 4)
		return -EINVAL;
	memset(out, 0, 12);
	out[0] = (uint8_t)(id >> 8);
	out[1] = (uint8_t)id;
	out[2] = 0x01; /* RD */
	out[5] = 1;    /* QDCOUNT */
	size_t pos = 12;
	const char *p = name;
	while (*p) {
		const char *dot = strchr(p, '.');
		size_t l = dot ? (size_t)(dot - p) : strlen(p);
		if (l == 0 || l > 63)
			return -EINVAL;
		out[pos++] = (uint8_t)l;
		memcpy(out + pos, p, l);
		pos += l;
		p += l;
		if (*p == '.')
			p++;
	}
	out[pos++] = 0;
	out[pos++] = (uint8_t)(qtype >> 8);
	out[pos++] = (uint8_t)qtype;
	out[pos++] = 0;
	out[pos++] = 1; /* IN */
	return (int)pos;
}

/* Skip a (possibly compressed) name at *pos. */
static bool skip_name(const uint8_t *m, size_t len, size_t *pos)
{
	size_t p = *pos;
	for (int hops = 0; hops < 128; hops++) {
		if (p >= len)
			return false;
		uint8_t l = m[p];
		if (l == 0) {
			*pos = p + 1;
			return true;
		}
		if ((l & 0xc0) == 0xc0) {
			if (p + 1 >= len)
				return false;
			*pos = p + 2;
			return true;
		}
		if (l & 0xc0)
			return false;
		p += 1u + l;
	}
	return false;
}

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)((p[0] << 8) | p[1]);
}

int msb_egress__dns_parse(const uint8_t *m, size_t len, uint16_t id, uint16_t qtype, uint16_t port,
			  struct sockaddr_storage *addrs, size_t max)
{
	if (len < 12 || get16(m) != id || !(m[2] & 0x80))
		return -EIO;
	unsigned rcode = m[3] & 0x0f;
	if (rcode == 3)
		return -ENOENT;
	if (rcode != 0)
		return -EIO;
	uint16_t qd = get16(m + 4), an = get16(m + 6);
	if (qd != 1)
		return -EIO;
	size_t pos = 12;
	if (!skip_name(m, len, &pos) || pos + 4 > len || get16(m + pos) != qtype)
		return -EIO;
	pos += 4;
	int n = 0;
	for (uint16_t i = 0; i < an; i++) {
		if (!skip_name(m, len, &pos) || pos + 10 > len)
			return -EIO;
		uint16_t type = get16(m + pos), cls = get16(m + pos + 2),
			 rdlen = get16(m + pos + 8);
		pos += 10;
		if (pos + rdlen > len)
			return -EIO;
		if (cls == 1 && type == qtype && (size_t)n < max) {
			struct sockaddr_storage *sa = &addrs[n];
			memset(sa, 0, sizeof(*sa));
			if (type == QTYPE_A && rdlen == 4) {
				struct sockaddr_in *in = (struct sockaddr_in *)sa;
				in->sin_family = AF_INET;
				memcpy(&in->sin_addr, m + pos, 4);
				n++;
			} else if (type == QTYPE_AAAA && rdlen == 16) {
				struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)sa;
				in6->sin6_family = AF_INET6;
				memcpy(&in6->sin6_addr, m + pos, 16);
				n++;
			}
			if (n > 0 && sa->ss_family)
				set_port(sa, port);
		}
		pos += rdlen;
	}
	return n;
}

static int64_t now_ms(void)
{
	return msb__now_ns() / 1000000;
}

/* One query to one server. */
static int ask(const struct sockaddr_storage *ns, const char *host, uint16_t qtype, uint16_t port,
	       int timeout_ms, struct sockaddr_storage *addrs, size_t max)
{
	uint16_t id;
	if (getrandom(&id, sizeof(id), 0) != (ssize_t)sizeof(id))
		return -EIO;
	uint8_t q[300];
	int qlen = msb_egress__dns_query(host, qtype, id, q, sizeof(q));
	if (qlen < 0)
		return qlen;
	_cleanup_close_ int fd =
		socket(ns->ss_family, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -EIO;
	socklen_t slen =
		ns->ss_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
	/* connect(): the kernel drops datagrams from any other source. */
	if (connect(fd, (const struct sockaddr *)ns, slen) < 0 || send(fd, q, (size_t)qlen, 0) < 0)
		return -EIO;
	int64_t deadline = now_ms() + timeout_ms;
	uint8_t reply[DNS_MAX];
	for (;;) {
		int64_t left = deadline - now_ms();
		if (left <= 0)
			return -ETIMEDOUT;
		struct pollfd p = {.fd = fd, .events = POLLIN};
		int pr = poll(&p, 1, (int)left);
		if (pr < 0 && errno == EINTR)
			continue;
		if (pr <= 0)
			return -ETIMEDOUT;
		ssize_t n = recv(fd, reply, sizeof(reply), 0);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (n < 0)
			return -EIO;
		/* The question must be ours, byte for byte. */
		if ((size_t)n < (size_t)qlen || memcmp(reply + 12, q + 12, (size_t)qlen - 12) != 0)
			continue;
		int r = msb_egress__dns_parse(reply, (size_t)n, id, qtype, port, addrs, max);
		if (r == -EIO)
			continue; /* not a reply to us: keep waiting */
		return r;
	}
}

int msb_egress__resolve(const msb_egress_resolver *r, const char *host, uint16_t port,
			struct sockaddr_storage *addrs, size_t max)
{
	if (max == 0)
		return -EINVAL;
	if (msb_egress__parse_ip(host, port, &addrs[0]))
		return 1;
	for (size_t i = 0; i < r->n_hosts; i++) {
		if (strcasecmp(r->hosts[i].name, host) != 0)
			continue;
		size_t n = 0;
		for (; n < r->hosts[i].n && n < max; n++) {
			addrs[n] = r->hosts[i].addrs[n];
			set_port(&addrs[n], port);
		}
		return (int)n;
	}
	if (!r->use_system)
		return -ENOENT;
	int n = from_etc_hosts(r->etc_hosts ? r->etc_hosts : "/etc/hosts", host, port, addrs, max);
	if (n > 0)
		return n;
	struct sockaddr_storage ns[NS_MAX];
	int nns = nameservers(r->resolv_conf ? r->resolv_conf : "/etc/resolv.conf",
			      r->dns_port ? r->dns_port : 53, ns);
	int timeout = r->timeout_ms > 0 ? r->timeout_ms : 2000;
	int last = -ENOENT;
	for (int i = 0; i < nns; i++) {
		int got = 0;
		bool answered = false;
		static const uint16_t types[] = {QTYPE_A, QTYPE_AAAA};
		for (size_t t = 0; t < 2 && (size_t)got < max; t++) {
			int k = ask(&ns[i], host, types[t], port, timeout, addrs + got,
				    max - (size_t)got);
			if (k >= 0) {
				got += k;
				answered = true;
			} else if (k == -ENOENT) {
				answered = true;
				break;
			} else {
				last = k;
			}
		}
		if (got > 0)
			return got;
		if (answered)
			return -ENOENT;
	}
	return last;
}
