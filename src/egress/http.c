/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The proxy's HTTP/1.1 request-head parser (RFC 9112), strict on purpose:
 * CONNECT host:port and absolute-form http:// requests only; CRLF line ends
 * only (a bare CR or LF is refused); no obs-fold; a line, the head and the
 * header count are capped; a duplicate Content-Length or Host,
 * Content-Length with Transfer-Encoding, and a Host that disagrees with the
 * request target are refused (the usual request-smuggling and
 * host-confusion shapes). Transfer-Encoding on a request is not relayed
 * (501): the proxy forwards exactly one request per connection and must
 * know where its body ends.
 */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "egress/egress.h"

static bool is_tchar(unsigned char c)
{
	return isalnum(c) || (c && strchr("!#$%&'*+-.^_`|~", c));
}

bool msb_egress__valid_name(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > MSB_EGRESS_HOST_MAX)
		return false;
	size_t label = 0;
	bool last_numeric = true;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '.') {
			if (label == 0)
				return false;
			label = 0;
			last_numeric = true;
			continue;
		}
		if (!(islower(c) || isdigit(c) || c == '-' || c == '_'))
			return false;
		if (!isdigit(c))
			last_numeric = false;
		if (++label > 63)
			return false;
	}
	/* An all-numeric last label is an IP literal in another spelling
	 * (2130706433, 127.1): never a name. */
	return label > 0 && !last_numeric;
}

/* host (no brackets) into out, lower-cased, one trailing dot dropped. */
static bool set_host(const char *p, size_t n, bool bracketed, char *out, bool *is_ip)
{
	if (n == 0 || n > MSB_EGRESS_HOST_MAX)
		return false;
	char tmp[MSB_EGRESS_HOST_MAX + 1];
	for (size_t i = 0; i < n; i++)
		tmp[i] = (char)tolower((unsigned char)p[i]);
	tmp[n] = '\0';
	if (bracketed) {
		struct in6_addr a6;
		if (inet_pton(AF_INET6, tmp, &a6) != 1)
			return false;
		*is_ip = true;
		memcpy(out, tmp, n + 1);
		return true;
	}
	struct in_addr a4;
	if (inet_pton(AF_INET, tmp, &a4) == 1) {
		*is_ip = true;
		memcpy(out, tmp, n + 1);
		return true;
	}
	if (n > 1 && tmp[n - 1] == '.')
		tmp[--n] = '\0';
	if (!msb_egress__valid_name(tmp))
		return false;
	*is_ip = false;
	memcpy(out, tmp, n + 1);
	return true;
}

static bool parse_port(const char *p, size_t n, uint16_t *out)
{
	if (n == 0 || n > 5)
		return false;
	unsigned v = 0;
	for (size_t i = 0; i < n; i++) {
		if (!isdigit((unsigned char)p[i]))
			return false;
		v = v * 10 + (unsigned)(p[i] - '0');
	}
	if (v == 0 || v > 65535)
		return false;
	*out = (uint16_t)v;
	return true;
}

/* authority = host [":" port]; host may be "[v6]". No userinfo. *has_port
 * tells whether a port was given (else *port is untouched). */
static bool parse_authority(const char *p, size_t n, char *host, bool *is_ip, uint16_t *port,
			    bool *has_port)
{
	*has_port = false;
	if (memchr(p, '@', n))
		return false;
	const char *hend;
	const char *rest;
	bool bracketed = false;
	if (n > 0 && p[0] == '[') {
		const char *close = memchr(p, ']', n);
		if (!close)
			return false;
		bracketed = true;
		p++;
		hend = close;
		rest = close + 1;
		n -= 1;
	} else {
		const char *colon = NULL;
		for (size_t i = 0; i < n; i++)
			if (p[i] == ':') {
				if (colon)
					return false;
				colon = p + i;
			}
		hend = colon ? colon : p + n;
		rest = hend;
	}
	const char *end = bracketed ? p + n : p + n;
	if (!set_host(p, (size_t)(hend - p), bracketed, host, is_ip))
		return false;
	if (rest < end) {
		if (*rest != ':' || !parse_port(rest + 1, (size_t)(end - rest - 1), port))
			return false;
		*has_port = true;
	}
	return true;
}

static bool name_is(const char *p, size_t n, const char *name)
{
	return strlen(name) == n && strncasecmp(p, name, n) == 0;
}

/* Fields the proxy never forwards (hop-by-hop, proxy credentials, and
 * Upgrade: the connection carries one request and then closes). */
static bool hop_by_hop(const char *p, size_t n)
{
	static const char *const names[] = {"connection",
					    "proxy-connection",
					    "keep-alive",
					    "proxy-authorization",
					    "proxy-authenticate",
					    "te",
					    "trailer",
					    "upgrade",
					    "host",
					    NULL};
	for (size_t i = 0; names[i]; i++)
		if (name_is(p, n, names[i]))
			return true;
	return false;
}

void msb_egress__request_clear(msb_egress_request *req)
{
	free(req->upstream_head);
	req->upstream_head = NULL;
	req->upstream_len = 0;
}

static int refuse(msb_egress_request *req, int code, const char *reason)
{
	msb_egress__request_clear(req);
	req->reason = reason;
	return code;
}

/* Find the end of the head, checking line ends and lengths as we go. */
static int scan_head(const char *buf, size_t len, size_t *head_len, msb_egress_request *req)
{
	size_t line_start = 0;
	for (size_t i = 0; i < len; i++) {
		char c = buf[i];
		if (c == '\0')
			return refuse(req, MSB_EGRESS_HEAD_BAD, "nul-byte");
		if (c == '\r') {
			if (i + 1 < len && buf[i + 1] != '\n')
				return refuse(req, MSB_EGRESS_HEAD_BAD, "bare-cr");
			continue;
		}
		if (c == '\n') {
			if (i == 0 || buf[i - 1] != '\r')
				return refuse(req, MSB_EGRESS_HEAD_BAD, "bare-lf");
			if (i + 1 - line_start == 2) {
				if (line_start == 0)
					return refuse(req, MSB_EGRESS_HEAD_BAD,
						      "empty-request-line");
				*head_len = i + 1;
				return MSB_EGRESS_HEAD_OK;
			}
			line_start = i + 1;
			continue;
		}
		if (i - line_start >= MSB_EGRESS_LINE_MAX)
			return refuse(req, MSB_EGRESS_HEAD_TOO_LARGE, "line-too-long");
		if (i + 1 >= MSB_EGRESS_HEAD_MAX)
			return refuse(req, MSB_EGRESS_HEAD_TOO_LARGE, "head-too-large");
	}
	if (len >= MSB_EGRESS_HEAD_MAX)
		return refuse(req, MSB_EGRESS_HEAD_TOO_LARGE, "head-too-large");
	return MSB_EGRESS_HEAD_NEED_MORE;
}

/* request-line = method SP request-target SP HTTP-version */
struct request_line {
	const char *eol; /* its CR */
	size_t mlen;
	const char *target;
	size_t tlen;
	const char *version;
	size_t vlen;
};

static int parse_request_line(const char *buf, size_t head_len, struct request_line *rl,
			      msb_egress_request *req)
{
	const char *line = buf;
	const char *eol = memchr(buf, '\r', head_len);
	const char *sp1 = memchr(line, ' ', (size_t)(eol - line));
	if (!sp1)
		return refuse(req, MSB_EGRESS_HEAD_BAD, "bad-request-line");
	const char *sp2 = memchr(sp1 + 1, ' ', (size_t)(eol - sp1 - 1));
	if (!sp2 || memchr(sp2 + 1, ' ', (size_t)(eol - sp2 - 1)))
		return refuse(req, MSB_EGRESS_HEAD_BAD, "bad-request-line");
	size_t mlen = (size_t)(sp1 - line);
	if (mlen == 0 || mlen > MSB_EGRESS_METHOD_MAX)
		return refuse(req, MSB_EGRESS_HEAD_BAD, "bad-method");
	for (size_t i = 0; i < mlen; i++)
		if (!is_tchar((unsigned char)line[i]))
			return refuse(req, MSB_EGRESS_HEAD_BAD, "bad-method");
	memcpy(req->method, line, mlen);
	req->method[mlen] = '\0';
	const char *target = sp1 + 1;
	size_t tlen = (size_t)(sp2 - target);
	const char *version = sp2 + 1;
	size_t vlen = (size_t)(eol - version);
	if (!(vlen == 8 &&
	      (memcmp(version, "HTTP/1.1", 8) == 0 || memcmp(version, "HTTP/1.0", 8) == 0)))
		return refuse(req,
			      vlen >= 5 && memcmp(version, "HTTP/", 5) == 0
				      ? MSB_EGRESS_HEAD_UNSUPPORTED
				      : MSB_EGRESS_HEAD_BAD,
			      "bad-version");
	if (tlen == 0)
		return refuse(req, MSB_EGRESS_HEAD_BAD, "bad-target");
	for (size_t i = 0; i < tlen; i++)
		if ((unsigned char)target[i] <= 0x20 || (unsigned char)target[i] >= 0x7f)
			return refuse(req, MSB_EGRESS_HEAD_BAD, "bad-target");
	*rl = (struct request_line){eol, mlen, target, tlen, version, vlen};
	return MSB_EGRESS_HEAD_OK;
}

/* The target's authority (host and port into req) and, for a request to
 * forward, its path: CONNECT's authority-form, else the absolute-form a
 * proxy is sent (origin-form and other schemes are not for a proxy). */
static int parse_target(const struct request_line *rl, msb_egress_request *req,
			const char **authority, size_t *alen, const char **path, size_t *path_len)
{
	const char *target = rl->target;
	size_t tlen = rl->tlen;
	bool has_port = false;
	*path = "/";
	*path_len = 1;
	req->connect = strcmp(req->method, "CONNECT") == 0;
	if (req->connect) {
		*authority = target;
		*alen = tlen;
		if (!parse_authority(*authority, *alen, req->host, &req->host_is_ip, &req->port,
				     &has_port) ||
		    !has_port)
			return refuse(req, MSB_EGRESS_HEAD_BAD, "bad-connect-target");
		return MSB_EGRESS_HEAD_OK;
	}
	if (target[0] == '/' || target[0] == '*')
		return refuse(req, MSB_EGRESS_HEAD_NOT_PROXY, "origin-form");
	if (tlen < 8 || strncasecmp(target, "http://", 7) != 0)
		return refuse(req, MSB_EGRESS_HEAD_NOT_PROXY, "not-http");
	*authority = target + 7;
	const char *aend = *authority;
	while (aend < target + tlen && *aend != '/' && *aend != '?' && *aend != '#')
		aend++;
	*alen = (size_t)(aend - *authority);
	req->port = 80;
	if (!parse_authority(*authority, *alen, req->host, &req->host_is_ip, &req->port, &has_port))
		return refuse(req, MSB_EGRESS_HEAD_BAD, "bad-url");
	if (aend < target + tlen) {
		if (*aend == '#')
			return refuse(req, MSB_EGRESS_HEAD_BAD, "bad-url");
		/* "http://h?q" means "/?q": the caller adds the slash. */
		*path = aend;
		*path_len = (size_t)(target + tlen - aend);
	}
	return MSB_EGRESS_HEAD_OK;
}

struct header_seen {
	bool content_length;
	bool transfer_encoding;
	bool host;
};

/* One header line [p, le): checked, noted in `seen` and req, and copied to
 * `up` unless it is hop-by-hop or the request is a CONNECT. */
static int parse_header(const char *p, const char *le, struct header_seen *seen, msb_buf *up,
			msb_egress_request *req)
{
	if (*p == ' ' || *p == '\t')
		return refuse(req, MSB_EGRESS_HEAD_BAD, "obs-fold");
	const char *colon = memchr(p, ':', (size_t)(le - p));
	if (!colon || colon == p)
		return refuse(req, MSB_EGRESS_HEAD_BAD, "bad-header");
	for (const char *q = p; q < colon; q++)
		if (!is_tchar((unsigned char)*q))
			return refuse(req, MSB_EGRESS_HEAD_BAD, "bad-header-name");
	const char *v = colon + 1;
	const char *ve = le;
	while (v < ve && (*v == ' ' || *v == '\t'))
		v++;
	while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
		ve--;
	for (const char *q = v; q < ve; q++) {
		unsigned char c = (unsigned char)*q;
		if ((c < 0x20 && c != '\t') || c == 0x7f)
			return refuse(req, MSB_EGRESS_HEAD_BAD, "bad-header-value");
	}
	size_t nlen = (size_t)(colon - p);
	size_t vl = (size_t)(ve - v);
	if (name_is(p, nlen, "content-length")) {
		if (seen->content_length)
			return refuse(req, MSB_EGRESS_HEAD_BAD, "duplicate-content-length");
		seen->content_length = true;
		if (vl == 0 || vl > 18)
			return refuse(req, MSB_EGRESS_HEAD_BAD, "bad-content-length");
		uint64_t cl = 0;
		for (size_t i = 0; i < vl; i++) {
			if (!isdigit((unsigned char)v[i]))
				return refuse(req, MSB_EGRESS_HEAD_BAD, "bad-content-length");
			cl = cl * 10 + (uint64_t)(v[i] - '0');
		}
		req->content_length = cl;
	} else if (name_is(p, nlen, "transfer-encoding")) {
		seen->transfer_encoding = true;
	} else if (name_is(p, nlen, "host")) {
		if (seen->host)
			return refuse(req, MSB_EGRESS_HEAD_BAD, "duplicate-host");
		seen->host = true;
		char h[MSB_EGRESS_HOST_MAX + 1];
		bool h_ip = false, h_has_port = false;
		uint16_t h_port = req->connect ? req->port : 80;
		if (!parse_authority(v, vl, h, &h_ip, &h_port, &h_has_port) ||
		    strcmp(h, req->host) != 0 || h_port != req->port)
			return refuse(req, MSB_EGRESS_HEAD_BAD, "host-mismatch");
	}
	if (!req->connect && !hop_by_hop(p, nlen)) {
		if (msb__buf_append(up, p, (size_t)(le - p)) < 0 || msb__buf_puts(up, "\r\n") < 0)
			return refuse(req, MSB_EGRESS_HEAD_TOO_LARGE, "out-of-memory");
	}
	return MSB_EGRESS_HEAD_OK;
}

int msb_egress__parse_head(const char *buf, size_t len, msb_egress_request *req)
{
	memset(req, 0, sizeof(*req));
	size_t head_len = 0;
	int r = scan_head(buf, len, &head_len, req);
	if (r != MSB_EGRESS_HEAD_OK)
		return r;
	req->head_len = head_len;

	struct request_line rl;
	r = parse_request_line(buf, head_len, &rl, req);
	if (r != MSB_EGRESS_HEAD_OK)
		return r;
	const char *authority = NULL, *path = NULL;
	size_t alen = 0, path_len = 0;
	r = parse_target(&rl, req, &authority, &alen, &path, &path_len);
	if (r != MSB_EGRESS_HEAD_OK)
		return r;

	msb_buf up = MSB_BUF_INIT;
	if (!req->connect) {
		if (msb__buf_append(&up, req->method, rl.mlen) < 0 || msb__buf_puts(&up, " ") < 0 ||
		    (path[0] == '?' && msb__buf_puts(&up, "/") < 0) ||
		    msb__buf_append(&up, path, path_len) < 0 || msb__buf_puts(&up, " ") < 0 ||
		    msb__buf_append(&up, rl.version, rl.vlen) < 0 || msb__buf_puts(&up, "\r\n") < 0)
			goto nomem;
	}

	struct header_seen seen = {false, false, false};
	size_t n_headers = 0;
	const char *p = rl.eol + 2;
	const char *end = buf + head_len - 2;
	while (p < end) {
		const char *le = memchr(p, '\r', (size_t)(end - p) + 1);
		if (++n_headers > MSB_EGRESS_HEADERS_MAX) {
			msb__buf_free(&up);
			return refuse(req, MSB_EGRESS_HEAD_TOO_LARGE, "too-many-headers");
		}
		r = parse_header(p, le, &seen, &up, req);
		if (r != MSB_EGRESS_HEAD_OK) {
			msb__buf_free(&up);
			return r;
		}
		p = le + 2;
	}
	if (seen.transfer_encoding && seen.content_length) {
		msb__buf_free(&up);
		return refuse(req, MSB_EGRESS_HEAD_BAD, "content-length-with-transfer-encoding");
	}
	if (seen.transfer_encoding) {
		msb__buf_free(&up);
		return refuse(req, MSB_EGRESS_HEAD_UNSUPPORTED, "transfer-encoding");
	}
	if (req->connect) {
		if (req->content_length) {
			msb__buf_free(&up);
			return refuse(req, MSB_EGRESS_HEAD_BAD, "connect-with-body");
		}
		return MSB_EGRESS_HEAD_OK;
	}
	if (msb__buf_puts(&up, "Host: ") < 0 || msb__buf_append(&up, authority, alen) < 0 ||
	    msb__buf_puts(&up, "\r\nConnection: close\r\n\r\n") < 0)
		goto nomem;
	req->upstream_len = up.len;
	req->upstream_head = msb__buf_steal_str(&up);
	if (!req->upstream_head)
		goto nomem;
	return MSB_EGRESS_HEAD_OK;
nomem:
	msb__buf_free(&up);
	return refuse(req, MSB_EGRESS_HEAD_TOO_LARGE, "out-of-memory");
}
