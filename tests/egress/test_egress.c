/* SPDX-License-Identifier: Apache-2.0 */
/* The egress proxy's core (src/egress): the request-head parser, the
 * allowlist decision (checklist 6.7's method tokens as the proxy enforces
 * them), the address filter, the resolver's pieces and the record (17.9). */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "egress/egress.h"

static int parse(const char *s, msb_egress_request *r)
{
	return msb_egress__parse_head(s, strlen(s), r);
}

Test(egress_parse, connect)
{
	msb_egress_request r;
	cr_assert_eq(
		parse("CONNECT Example.COM.:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\nTLS", &r),
		MSB_EGRESS_HEAD_OK);
	cr_assert(r.connect);
	cr_assert_str_eq(r.host, "example.com");
	cr_assert_eq(r.port, 443);
	cr_assert_not(r.host_is_ip);
	cr_assert_eq(r.head_len, strlen("CONNECT Example.COM.:443 HTTP/1.1\r\nHost: "
					"example.com:443\r\n\r\n"));
	msb_egress__request_clear(&r);
	cr_assert_eq(parse("CONNECT [::1]:8443 HTTP/1.1\r\n\r\n", &r), MSB_EGRESS_HEAD_OK);
	cr_assert(r.host_is_ip);
	cr_assert_str_eq(r.host, "::1");
	cr_assert_eq(parse("CONNECT 10.0.0.1:80 HTTP/1.1\r\n\r\n", &r), MSB_EGRESS_HEAD_OK);
	cr_assert(r.host_is_ip);
}

Test(egress_parse, absolute_form_rewritten_for_upstream)
{
	msb_egress_request r;
	cr_assert_eq(parse("POST http://api.example.com:8080/v1?x=1 HTTP/1.1\r\n"
			   "Host: api.example.com:8080\r\nProxy-Connection: keep-alive\r\n"
			   "Content-Length: 5\r\nX-A: b\r\n\r\nhello",
			   &r),
		     MSB_EGRESS_HEAD_OK);
	cr_assert_not(r.connect);
	cr_assert_str_eq(r.method, "POST");
	cr_assert_eq(r.port, 8080);
	cr_assert_eq(r.content_length, 5);
	cr_assert_str_eq(r.upstream_head, "POST /v1?x=1 HTTP/1.1\r\nContent-Length: 5\r\nX-A: "
					  "b\r\nHost: api.example.com:8080\r\nConnection: "
					  "close\r\n\r\n");
	msb_egress__request_clear(&r);
	cr_assert_eq(parse("GET http://h.example HTTP/1.0\r\n\r\n", &r), MSB_EGRESS_HEAD_OK);
	cr_assert_eq(r.port, 80);
	cr_assert_str_eq(r.upstream_head,
			 "GET / HTTP/1.0\r\nHost: h.example\r\nConnection: close\r\n\r\n");
	msb_egress__request_clear(&r);
}

Test(egress_parse, incomplete_needs_more)
{
	msb_egress_request r;
	cr_assert_eq(parse("CONNECT a.example:443 HTTP/1.1\r\nHost: a", &r),
		     MSB_EGRESS_HEAD_NEED_MORE);
	cr_assert_eq(parse("CONNECT a.example:443 HTTP/1.1\r\n\r", &r), MSB_EGRESS_HEAD_NEED_MORE);
}

struct bad {
	const char *head;
	int code;
	const char *reason;
};

Test(egress_parse, refusals)
{
	static const struct bad cases[] = {
		{"GET /path HTTP/1.1\r\nHost: a.example\r\n\r\n", MSB_EGRESS_HEAD_NOT_PROXY,
		 "origin-form"},
		{"GET https://a.example/ HTTP/1.1\r\n\r\n", MSB_EGRESS_HEAD_NOT_PROXY, "not-http"},
		{"GET http://a.example/ HTTP/1.1\r\nHost: b.example\r\n\r\n", MSB_EGRESS_HEAD_BAD,
		 "host-mismatch"},
		{"GET http://a.example/ HTTP/1.1\r\nHost: a.example:81\r\n\r\n",
		 MSB_EGRESS_HEAD_BAD, "host-mismatch"},
		{"CONNECT a.example:443 HTTP/1.1\r\nHost: evil.example:443\r\n\r\n",
		 MSB_EGRESS_HEAD_BAD, "host-mismatch"},
		{"GET http://a.example/ HTTP/1.1\r\nHost: a.example\r\nHost: a.example\r\n\r\n",
		 MSB_EGRESS_HEAD_BAD, "duplicate-host"},
		{"POST http://a.example/ HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: "
		 "3\r\n\r\n",
		 MSB_EGRESS_HEAD_BAD, "duplicate-content-length"},
		{"POST http://a.example/ HTTP/1.1\r\nContent-Length: 3, 3\r\n\r\n",
		 MSB_EGRESS_HEAD_BAD, "bad-content-length"},
		{"POST http://a.example/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: "
		 "3\r\n\r\n",
		 MSB_EGRESS_HEAD_BAD, "content-length-with-transfer-encoding"},
		{"POST http://a.example/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
		 MSB_EGRESS_HEAD_UNSUPPORTED, "transfer-encoding"},
		{"GET http://a.example/ HTTP/1.1\r\nX-A: b\r\n c\r\n\r\n", MSB_EGRESS_HEAD_BAD,
		 "obs-fold"},
		{"GET http://a.example/ HTTP/1.1\nHost: a\r\n\r\n", MSB_EGRESS_HEAD_BAD, "bare-lf"},
		{"GET http://a.example/ HTTP/1.1\r\nX: a\rb\r\n\r\n", MSB_EGRESS_HEAD_BAD,
		 "bare-cr"},
		{"GET http://a.example/ HTTP/1.1\r\nX : a\r\n\r\n", MSB_EGRESS_HEAD_BAD,
		 "bad-header-name"},
		{"GET  http://a.example/ HTTP/1.1\r\n\r\n", MSB_EGRESS_HEAD_BAD,
		 "bad-request-line"},
		{"GET http://a.example/ HTTP/2.0\r\n\r\n", MSB_EGRESS_HEAD_UNSUPPORTED,
		 "bad-version"},
		{"CONNECT a.example HTTP/1.1\r\n\r\n", MSB_EGRESS_HEAD_BAD, "bad-connect-target"},
		{"CONNECT a.example:0 HTTP/1.1\r\n\r\n", MSB_EGRESS_HEAD_BAD, "bad-connect-target"},
		{"CONNECT a.example:65536 HTTP/1.1\r\n\r\n", MSB_EGRESS_HEAD_BAD,
		 "bad-connect-target"},
		{"CONNECT user@a.example:443 HTTP/1.1\r\n\r\n", MSB_EGRESS_HEAD_BAD,
		 "bad-connect-target"},
		{"CONNECT 2130706433:443 HTTP/1.1\r\n\r\n", MSB_EGRESS_HEAD_BAD,
		 "bad-connect-target"},
		{"CONNECT [::1:443 HTTP/1.1\r\n\r\n", MSB_EGRESS_HEAD_BAD, "bad-connect-target"},
		{"CONNECT a.example:443 HTTP/1.1\r\nContent-Length: 4\r\n\r\n", MSB_EGRESS_HEAD_BAD,
		 "connect-with-body"},
		{"\r\nGET http://a.example/ HTTP/1.1\r\n\r\n", MSB_EGRESS_HEAD_BAD,
		 "empty-request-line"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		msb_egress_request r;
		int got = parse(cases[i].head, &r);
		cr_expect_eq(got, cases[i].code, "case %zu (%s): got %d", i, cases[i].reason, got);
		cr_expect_str_eq(r.reason ? r.reason : "", cases[i].reason, "case %zu", i);
		cr_expect_null(r.upstream_head);
	}
}

Test(egress_parse, limits)
{
	msb_egress_request r;
	/* One header line over the limit: refused before the head ends. */
	char *big = calloc(1, MSB_EGRESS_LINE_MAX + 200);
	int n = snprintf(big, 100, "CONNECT a.example:443 HTTP/1.1\r\nX-Long: ");
	memset(big + n, 'a', MSB_EGRESS_LINE_MAX);
	cr_assert_eq(msb_egress__parse_head(big, strlen(big), &r), MSB_EGRESS_HEAD_TOO_LARGE);
	cr_assert_str_eq(r.reason, "line-too-long");
	free(big);
	/* Too many fields. */
	msb_buf b = MSB_BUF_INIT;
	msb__buf_puts(&b, "CONNECT a.example:443 HTTP/1.1\r\n");
	for (int i = 0; i <= MSB_EGRESS_HEADERS_MAX; i++)
		msb__buf_printf(&b, "X-%d: v\r\n", i);
	msb__buf_puts(&b, "\r\n");
	cr_assert_eq(msb_egress__parse_head((char *)b.data, b.len, &r), MSB_EGRESS_HEAD_TOO_LARGE);
	cr_assert_str_eq(r.reason, "too-many-headers");
	msb__buf_free(&b);
	/* A head that never ends within the cap. */
	char *head = malloc(MSB_EGRESS_HEAD_MAX);
	memset(head, 'a', MSB_EGRESS_HEAD_MAX);
	memcpy(head, "CONNECT a.example:443 HTTP/1.1\r\n", 32);
	for (size_t i = 32; i + 10 <= MSB_EGRESS_HEAD_MAX; i += 10)
		memcpy(head + i, "X-Y: abc\r\n", 10);
	cr_assert_eq(msb_egress__parse_head(head, MSB_EGRESS_HEAD_MAX - 100, &r),
		     MSB_EGRESS_HEAD_NEED_MORE);
	cr_assert_eq(msb_egress__parse_head(head, MSB_EGRESS_HEAD_MAX, &r),
		     MSB_EGRESS_HEAD_TOO_LARGE);
	cr_assert_str_eq(r.reason, "head-too-large");
	free(head);
}

/* ---- policy ---------------------------------------------------------------- */

static char *methods_get[] = {(char *)"GET", (char *)"HEAD", NULL};

static msb_egress_policy policy(void)
{
	static msb_egress_rule rules[4];
	rules[0] = (msb_egress_rule){(char *)"api.example.com", methods_get};
	rules[1] = (msb_egress_rule){(char *)"*.files.example", NULL};
	rules[2] = (msb_egress_rule){(char *)"Open.Example.", NULL};
	rules[3] = (msb_egress_rule){(char *)"192.0.2.7", NULL};
	msb_egress_policy p = {.rules = rules, .n_rules = 4};
	return p;
}

static const char *decide(const char *head)
{
	msb_egress_policy p = policy();
	msb_egress_request r;
	cr_assert_eq(parse(head, &r), MSB_EGRESS_HEAD_OK, "%s", head);
	const char *d = msb_egress__decide(&p, &r);
	msb_egress__request_clear(&r);
	return d ? d : "ALLOW";
}

Test(egress_policy, hosts_methods_and_literals)
{
	cr_assert_str_eq(decide("GET http://api.example.com/x HTTP/1.1\r\n\r\n"), "ALLOW");
	cr_assert_str_eq(decide("HEAD http://API.example.com/x HTTP/1.1\r\n\r\n"), "ALLOW");
	cr_assert_str_eq(decide("POST http://api.example.com/x HTTP/1.1\r\n\r\n"),
			 "method-not-allowed");
	cr_assert_str_eq(decide("CONNECT api.example.com:443 HTTP/1.1\r\n\r\n"),
			 "method-needs-plain-http");
	cr_assert_str_eq(decide("CONNECT open.example:443 HTTP/1.1\r\n\r\n"), "ALLOW");
	cr_assert_str_eq(decide("DELETE http://open.example/ HTTP/1.1\r\n\r\n"), "ALLOW");
	cr_assert_str_eq(decide("CONNECT a.files.example:443 HTTP/1.1\r\n\r\n"), "ALLOW");
	cr_assert_str_eq(decide("CONNECT files.example:443 HTTP/1.1\r\n\r\n"), "not-allowlisted");
	cr_assert_str_eq(decide("CONNECT evilfiles.example:443 HTTP/1.1\r\n\r\n"),
			 "not-allowlisted");
	cr_assert_str_eq(decide("CONNECT api.example.com.evil:443 HTTP/1.1\r\n\r\n"),
			 "not-allowlisted");
	cr_assert_str_eq(decide("CONNECT 192.0.2.7:443 HTTP/1.1\r\n\r\n"), "ALLOW");
	cr_assert_str_eq(decide("CONNECT 192.0.2.8:443 HTTP/1.1\r\n\r\n"), "ip-literal");
	cr_assert_str_eq(decide("CONNECT [::ffff:192.0.2.7]:443 HTTP/1.1\r\n\r\n"), "ip-literal");
}

Test(egress_policy, method_tokens_are_verbs)
{
	bool get = false, connect = false;
	for (size_t i = 0; msb_egress__method_tokens[i]; i++) {
		get |= strcmp(msb_egress__method_tokens[i], "GET") == 0;
		connect |= strcmp(msb_egress__method_tokens[i], "CONNECT") == 0;
	}
	cr_assert(get);
	cr_assert_not(connect, "CONNECT is not an enforceable verb: the proxy sees no verb in it");
}

static const char *addr(const msb_egress_policy *p, const char *ip)
{
	struct sockaddr_storage sa = {0};
	if (inet_pton(AF_INET, ip, &((struct sockaddr_in *)&sa)->sin_addr) == 1)
		sa.ss_family = AF_INET;
	else if (inet_pton(AF_INET6, ip, &((struct sockaddr_in6 *)&sa)->sin6_addr) == 1)
		sa.ss_family = AF_INET6;
	else
		cr_assert_fail("bad address %s", ip);
	const char *r = msb_egress__addr_check(p, &sa);
	return r ? r : "global";
}

Test(egress_policy, address_filter)
{
	msb_egress_policy p = {0};
	cr_assert_str_eq(addr(&p, "127.0.0.1"), "loopback");
	cr_assert_str_eq(addr(&p, "10.1.2.3"), "private");
	cr_assert_str_eq(addr(&p, "172.31.0.1"), "private");
	cr_assert_str_eq(addr(&p, "172.32.0.1"), "global");
	cr_assert_str_eq(addr(&p, "192.168.1.1"), "private");
	cr_assert_str_eq(addr(&p, "100.64.0.1"), "cgnat");
	cr_assert_str_eq(addr(&p, "169.254.169.254"), "cloud-metadata");
	cr_assert_str_eq(addr(&p, "169.254.1.1"), "link-local");
	cr_assert_str_eq(addr(&p, "224.0.0.1"), "multicast");
	cr_assert_str_eq(addr(&p, "0.0.0.0"), "unspecified");
	cr_assert_str_eq(addr(&p, "255.255.255.255"), "reserved");
	cr_assert_str_eq(addr(&p, "93.184.216.34"), "global");
	cr_assert_str_eq(addr(&p, "::1"), "loopback");
	cr_assert_str_eq(addr(&p, "::"), "unspecified");
	cr_assert_str_eq(addr(&p, "::ffff:127.0.0.1"), "ipv4-mapped");
	cr_assert_str_eq(addr(&p, "::ffff:8.8.8.8"), "ipv4-mapped");
	cr_assert_str_eq(addr(&p, "fd00:ec2::254"), "cloud-metadata");
	cr_assert_str_eq(addr(&p, "fd12::1"), "private");
	cr_assert_str_eq(addr(&p, "fe80::1"), "link-local");
	cr_assert_str_eq(addr(&p, "ff02::1"), "multicast");
	cr_assert_str_eq(addr(&p, "64:ff9b::7f00:1"), "nat64");
	cr_assert_str_eq(addr(&p, "2606:4700::1"), "global");
	/* A configured CIDR opens exactly its range. */
	msb_egress_cidr c[2];
	cr_assert_eq(msb_egress__cidr_parse("127.0.0.0/8", &c[0]), 0);
	cr_assert_eq(msb_egress__cidr_parse("fd00::/8", &c[1]), 0);
	p.cidrs = c;
	p.n_cidrs = 2;
	cr_assert_str_eq(addr(&p, "127.0.0.1"), "global");
	cr_assert_str_eq(addr(&p, "128.0.0.1"), "global");
	cr_assert_str_eq(addr(&p, "10.0.0.1"), "private");
	cr_assert_str_eq(addr(&p, "fd00:ec2::254"), "global");
	cr_assert_str_eq(addr(&p, "::ffff:127.0.0.1"), "ipv4-mapped");
}

Test(egress_policy, cidr_parse)
{
	msb_egress_cidr c;
	cr_assert_eq(msb_egress__cidr_parse("10.0.0.0/8", &c), 0);
	cr_assert_eq(c.prefix, 8);
	cr_assert_eq(msb_egress__cidr_parse("::1", &c), 0);
	cr_assert_eq(c.prefix, 128);
	cr_assert_eq(msb_egress__cidr_parse("10.0.0.0/33", &c), -EINVAL);
	cr_assert_eq(msb_egress__cidr_parse("10.0.0.0/", &c), -EINVAL);
	cr_assert_eq(msb_egress__cidr_parse("10.0.0.0/-1", &c), -EINVAL);
	cr_assert_eq(msb_egress__cidr_parse("example.com/8", &c), -EINVAL);
}

/* ---- resolver --------------------------------------------------------------- */

Test(egress_resolve, map_then_etc_hosts_and_literals)
{
	msb_egress_resolver r = {0};
	cr_assert_eq(msb_egress__resolver_add(&r, "Pinned.Example", "127.0.0.1"), 0);
	cr_assert_eq(msb_egress__resolver_add(&r, "pinned.example", "::1"), 0);
	cr_assert_eq(msb_egress__resolver_add(&r, "bad name", "127.0.0.1"), -EINVAL);
	cr_assert_eq(msb_egress__resolver_add(&r, "x.example", "not-an-ip"), -EINVAL);
	struct sockaddr_storage a[4];
	cr_assert_eq(msb_egress__resolve(&r, "pinned.example", 8080, a, 4), 2);
	cr_assert_eq(a[0].ss_family, AF_INET);
	cr_assert_eq(ntohs(((struct sockaddr_in *)&a[0])->sin_port), 8080);
	cr_assert_eq(a[1].ss_family, AF_INET6);
	cr_assert_eq(msb_egress__resolve(&r, "unknown.example", 80, a, 4), -ENOENT);
	cr_assert_eq(msb_egress__resolve(&r, "192.0.2.1", 80, a, 4), 1);

	char path[] = "/tmp/msb-egress-hosts-XXXXXX";
	int fd = mkstemp(path);
	cr_assert_geq(fd, 0);
	const char *text = "# comment\n203.0.113.9  a.example b.example # alias\n";
	cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	r.use_system = true;
	r.etc_hosts = path;
	cr_assert_eq(msb_egress__resolve(&r, "B.example", 443, a, 4), 1);
	cr_assert_eq(((struct sockaddr_in *)&a[0])->sin_addr.s_addr, inet_addr("203.0.113.9"));
	unlink(path);
	msb_egress__resolver_clear(&r);
}

Test(egress_resolve, dns_reply_parse)
{
	uint8_t q[300];
	int qlen = msb_egress__dns_query("a.example", 1, 0x1234, q, sizeof(q));
	cr_assert_gt(qlen, 12);
	uint8_t m[512];
	memcpy(m, q, (size_t)qlen);
	m[2] = 0x81;
	m[3] = 0x80;
	m[7] = 2; /* two answers: a CNAME then an A via a compression pointer */
	size_t pos = (size_t)qlen;
	uint8_t cname[] = {0xc0, 12, 0, 5, 0, 1, 0, 0, 0, 60, 0, 2, 0xc0, 12};
	memcpy(m + pos, cname, sizeof(cname));
	pos += sizeof(cname);
	uint8_t arec[] = {0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 198, 51, 100, 7};
	memcpy(m + pos, arec, sizeof(arec));
	pos += sizeof(arec);
	struct sockaddr_storage a[4];
	cr_assert_eq(msb_egress__dns_parse(m, pos, 0x1234, 1, 443, a, 4), 1);
	cr_assert_eq(((struct sockaddr_in *)&a[0])->sin_addr.s_addr, inet_addr("198.51.100.7"));
	cr_assert_eq(msb_egress__dns_parse(m, pos, 0x1235, 1, 443, a, 4), -EIO, "wrong id");
	cr_assert_eq(msb_egress__dns_parse(m, pos - 1, 0x1234, 1, 443, a, 4), -EIO, "truncated");
	m[3] = 0x83;
	cr_assert_eq(msb_egress__dns_parse(m, pos, 0x1234, 1, 443, a, 4), -ENOENT, "NXDOMAIN");
}

/* ---- the record (17.9) ------------------------------------------------------- */

Test(egress_record, round_trip)
{
	msb_egress_entry e = {.time_ns = 1234567,
			      .allow = false,
			      .port = 443,
			      .reason = "not-allowlisted",
			      .bytes_up = 0,
			      .bytes_down = 0};
	snprintf(e.host, sizeof(e.host), "%s", "evil.example");
	char line[MSB_EGRESS_RECORD_MAX];
	int n = msb_egress__record_format(&e, line, sizeof(line));
	cr_assert_gt(n, 0);
	cr_assert_eq(line[n - 1], '\n');
	cr_assert(strstr(line, "\"decision\":\"DENY\""));
	cr_assert(strstr(line, "\"method\":null"));
	msb_egress_entry back;
	char reason[64];
	cr_assert_eq(msb_egress__record_parse(line, (size_t)n - 1, &back, reason, sizeof(reason)),
		     0);
	cr_assert_not(back.allow);
	cr_assert_str_eq(back.host, "evil.example");
	cr_assert_eq(back.port, 443);
	cr_assert_str_eq(back.reason, "not-allowlisted");
	cr_assert_str_eq(back.method, "");
	cr_assert_eq(back.time_ns, 1234567);
	const char *bad = "{\"time_ns\":1,\"decision\":\"MAYBE\",\"host\":\"h\",\"port\":1,"
			  "\"method\":null,\"reason\":\"r\",\"bytes_up\":0,\"bytes_down\":0}";
	cr_assert_eq(msb_egress__record_parse(bad, strlen(bad), &back, reason, sizeof(reason)),
		     -EINVAL);
	const char *extra = "{\"time_ns\":1,\"decision\":\"DENY\",\"host\":\"h\",\"port\":1,"
			    "\"method\":null,\"reason\":\"r\",\"bytes_up\":0,\"bytes_down\":0,"
			    "\"x\":1}";
	cr_assert_eq(msb_egress__record_parse(extra, strlen(extra), &back, reason, sizeof(reason)),
		     -EINVAL);
}

/* The DNS client against a server of ours: A and AAAA answered, a reply from
 * the wrong id ignored, NXDOMAIN as "does not resolve". */
#include <pthread.h>

struct dns_srv {
	int fd;
	int mode; /* 0: answer; 1: first a wrong-id reply, then answer; 2: NXDOMAIN */
};

static void *dns_serve(void *arg)
{
	struct dns_srv *s = arg;
	for (int i = 0; i < 2; i++) {
		uint8_t q[512];
		struct sockaddr_storage from;
		socklen_t fl = sizeof(from);
		ssize_t n = recvfrom(s->fd, q, sizeof(q), 0, (struct sockaddr *)&from, &fl);
		if (n < 12)
			return NULL;
		uint16_t qtype = (uint16_t)((q[n - 4] << 8) | q[n - 3]);
		uint8_t r[600];
		memcpy(r, q, (size_t)n);
		r[2] = 0x81;
		r[3] = s->mode == 2 ? 0x83 : 0x80;
		size_t len = (size_t)n;
		if (s->mode != 2) {
			r[7] = 1;
			uint8_t a4[] = {0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 9, 0, 4, 198, 51, 100, 9};
			uint8_t a6[] = {0xc0, 12,   0, 28, 0, 1, 0, 0, 0, 9, 0, 16, 0x20, 0x01,
					0x0d, 0xb8, 0, 0,  0, 0, 0, 0, 0, 0, 0, 0,  0,	  0x99};
			const uint8_t *rr = qtype == 1 ? a4 : a6;
			size_t rl = qtype == 1 ? sizeof(a4) : sizeof(a6);
			memcpy(r + len, rr, rl);
			len += rl;
		}
		if (s->mode == 1) {
			uint8_t bad[600];
			memcpy(bad, r, len);
			bad[0] ^= 0xff;
			sendto(s->fd, bad, len, 0, (struct sockaddr *)&from, fl);
		}
		sendto(s->fd, r, len, 0, (struct sockaddr *)&from, fl);
		if (s->mode == 2)
			return NULL;
	}
	return NULL;
}

static int resolve_via(int mode, struct sockaddr_storage *a, size_t max)
{
	struct dns_srv s = {.mode = mode};
	s.fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	cr_assert_eq(bind(s.fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	socklen_t sl = sizeof(sa);
	getsockname(s.fd, (struct sockaddr *)&sa, &sl);
	char conf[] = "/tmp/msb-egress-resolv-XXXXXX";
	int fd = mkstemp(conf);
	const char *text = "search example\nnameserver 127.0.0.1\n";
	cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	pthread_t th;
	pthread_create(&th, NULL, dns_serve, &s);
	msb_egress_resolver r = {.use_system = true,
				 .etc_hosts = "/nonexistent",
				 .resolv_conf = conf,
				 .dns_port = ntohs(sa.sin_port),
				 .timeout_ms = 2000};
	int n = msb_egress__resolve(&r, "svc.example", 8443, a, max);
	pthread_join(th, NULL);
	close(s.fd);
	unlink(conf);
	return n;
}

Test(egress_resolve, dns_client_live)
{
	struct sockaddr_storage a[4];
	cr_assert_eq(resolve_via(0, a, 4), 2);
	cr_assert_eq(a[0].ss_family, AF_INET);
	cr_assert_eq(((struct sockaddr_in *)&a[0])->sin_addr.s_addr, inet_addr("198.51.100.9"));
	cr_assert_eq(ntohs(((struct sockaddr_in *)&a[0])->sin_port), 8443);
	cr_assert_eq(a[1].ss_family, AF_INET6);
	cr_assert_eq(((struct sockaddr_in6 *)&a[1])->sin6_addr.s6_addr[15], 0x99);
	cr_assert_eq(resolve_via(1, a, 4), 2, "a reply with another id is not taken");
	cr_assert_eq(resolve_via(2, a, 4), -ENOENT);
}
