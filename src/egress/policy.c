/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The allowlist decision and the destination address filter.
 *
 * Hosts match the spec's normalised rules case-insensitively (a rule
 * "*.example.com" matches every name below example.com, not the name
 * itself); an IP-literal target matches only a rule naming that literal.
 * Methods are enforced where the verb is visible (plain HTTP); a CONNECT to
 * a host whose every matching rule restricts methods is refused, because the
 * verb inside TLS cannot be seen. Destinations are refused unless global or
 * inside a CIDR the backend's configuration names.
 */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "egress/egress.h"

const char *const msb_egress__method_tokens[MSB_EGRESS_N_METHOD_TOKENS + 1] = {
	"DELETE", "GET",      "HEAD",	   "LOCK", "MKCOL",  "MOVE",   "COPY",	"OPTIONS", "PATCH",
	"POST",	  "PROPFIND", "PROPPATCH", "PUT",  "REPORT", "SEARCH", "TRACE", "UNLOCK",  NULL,
};

void msb_egress__policy_clear(msb_egress_policy *p)
{
	for (size_t i = 0; i < p->n_rules; i++) {
		free(p->rules[i].host);
		msb__strv_freep(&p->rules[i].methods);
	}
	free(p->rules);
	free(p->cidrs);
	memset(p, 0, sizeof(*p));
}

int msb_egress__cidr_parse(const char *s, msb_egress_cidr *out)
{
	char tmp[64];
	size_t n = strlen(s);
	if (n == 0 || n >= sizeof(tmp))
		return -EINVAL;
	memcpy(tmp, s, n + 1);
	char *slash = strchr(tmp, '/');
	long prefix = -1;
	if (slash) {
		*slash = '\0';
		char *end;
		errno = 0;
		prefix = strtol(slash + 1, &end, 10);
		if (errno || *end || end == slash + 1 || prefix < 0 ||
		    !isdigit((unsigned char)slash[1]))
			return -EINVAL;
	}
	msb_egress_cidr c = {0};
	if (inet_pton(AF_INET, tmp, c.addr) == 1) {
		c.family = AF_INET;
		if (prefix < 0)
			prefix = 32;
		if (prefix > 32)
			return -EINVAL;
	} else if (inet_pton(AF_INET6, tmp, c.addr) == 1) {
		c.family = AF_INET6;
		if (prefix < 0)
			prefix = 128;
		if (prefix > 128)
			return -EINVAL;
	} else {
		return -EINVAL;
	}
	c.prefix = (unsigned)prefix;
	*out = c;
	return 0;
}

static bool prefix_eq(const uint8_t *a, const uint8_t *b, unsigned bits)
{
	unsigned full = bits / 8, rest = bits % 8;
	if (memcmp(a, b, full) != 0)
		return false;
	if (!rest)
		return true;
	uint8_t mask = (uint8_t)(0xff << (8 - rest));
	return (a[full] & mask) == (b[full] & mask);
}

static bool cidr_has(const msb_egress_cidr *c, int family, const uint8_t *addr)
{
	return c->family == family && prefix_eq(c->addr, addr, c->prefix);
}

/* ---- the host decision ----------------------------------------------------- */

static bool ip_equal(const char *a, const char *b)
{
	uint8_t x[16], y[16];
	if (inet_pton(AF_INET, a, x) == 1)
		return inet_pton(AF_INET, b, y) == 1 && memcmp(x, y, 4) == 0;
	if (inet_pton(AF_INET6, a, x) == 1)
		return inet_pton(AF_INET6, b, y) == 1 && memcmp(x, y, 16) == 0;
	return false;
}

static bool rule_matches(const char *rule, const msb_egress_request *req)
{
	char r[MSB_EGRESS_HOST_MAX + 2];
	size_t n = strlen(rule);
	if (n == 0 || n > MSB_EGRESS_HOST_MAX)
		return false;
	/* "[::1]" in a rule names the literal too. */
	if (rule[0] == '[' && rule[n - 1] == ']') {
		memcpy(r, rule + 1, n - 2);
		r[n - 2] = '\0';
	} else {
		memcpy(r, rule, n + 1);
	}
	if (req->host_is_ip)
		return ip_equal(r, req->host);
	n = strlen(r);
	for (size_t i = 0; i < n; i++)
		r[i] = (char)tolower((unsigned char)r[i]);
	if (n > 1 && r[n - 1] == '.')
		r[--n] = '\0';
	if (n > 2 && r[0] == '*' && r[1] == '.') {
		size_t hl = strlen(req->host);
		size_t sl = n - 1; /* ".suffix" */
		return hl > sl && strcmp(req->host + hl - sl, r + 1) == 0;
	}
	return strcmp(r, req->host) == 0;
}

const char *msb_egress__decide(const msb_egress_policy *p, const msb_egress_request *req)
{
	bool matched = false, every_method = false, method_listed = false;
	for (size_t i = 0; i < p->n_rules; i++) {
		const msb_egress_rule *rule = &p->rules[i];
		if (!rule_matches(rule->host, req))
			continue;
		matched = true;
		if (!rule->methods) {
			every_method = true;
			continue;
		}
		for (char **m = rule->methods; *m; m++)
			if (strcmp(*m, req->method) == 0)
				method_listed = true;
	}
	if (!matched)
		return req->host_is_ip ? "ip-literal" : "not-allowlisted";
	if (every_method)
		return NULL;
	if (req->connect)
		return "method-needs-plain-http";
	return method_listed ? NULL : "method-not-allowed";
}

/* ---- the address filter ---------------------------------------------------- */

typedef struct range {
	uint8_t addr[16];
	unsigned prefix;
	const char *reason;
} range;

/* Most specific first: the metadata addresses before their wider ranges. */
static const range v4_ranges[] = {
	{{169, 254, 169, 254}, 32, "cloud-metadata"},
	{{0}, 8, "unspecified"},
	{{10}, 8, "private"},
	{{100, 64}, 10, "cgnat"},
	{{127}, 8, "loopback"},
	{{169, 254}, 16, "link-local"},
	{{172, 16}, 12, "private"},
	{{192, 0, 0}, 24, "reserved"},
	{{192, 0, 2}, 24, "reserved"},
	{{192, 88, 99}, 24, "reserved"},
	{{192, 168}, 16, "private"},
	{{198, 18}, 15, "reserved"},
	{{198, 51, 100}, 24, "reserved"},
	{{203, 0, 113}, 24, "reserved"},
	{{224}, 4, "multicast"},
	{{240}, 4, "reserved"},
};

static const range v6_ranges[] = {
	{{0xfd, 0x00, 0x0e, 0xc2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02, 0x54}, 128, "cloud-metadata"},
	{{0}, 128, "unspecified"},
	{{[15] = 1}, 128, "loopback"},
	{{[10] = 0xff, [11] = 0xff}, 96, "ipv4-mapped"},
	{{0}, 96, "ipv4-compatible"},
	{{0x00, 0x64, 0xff, 0x9b}, 96, "nat64"},
	{{0x00, 0x64, 0xff, 0x9b, 0x00, 0x01}, 48, "nat64"},
	{{0x01, 0x00}, 64, "reserved"},
	{{0x20, 0x01, 0x0d, 0xb8}, 32, "reserved"},
	{{0x20, 0x01, 0x00, 0x00}, 32, "reserved"}, /* Teredo */
	{{0x20, 0x02}, 16, "reserved"},		    /* 6to4 */
	{{0xfc}, 7, "private"},
	{{0xfe, 0x80}, 10, "link-local"},
	{{0xfe, 0xc0}, 10, "reserved"},
	{{0xff}, 8, "multicast"},
};

const char *msb_egress__addr_check(const msb_egress_policy *p, const struct sockaddr_storage *sa)
{
	const uint8_t *addr;
	int family = sa->ss_family;
	if (family == AF_INET)
		addr = (const uint8_t *)&((const struct sockaddr_in *)sa)->sin_addr;
	else if (family == AF_INET6)
		addr = (const uint8_t *)&((const struct sockaddr_in6 *)sa)->sin6_addr;
	else
		return "reserved";
	for (size_t i = 0; i < p->n_cidrs; i++)
		if (cidr_has(&p->cidrs[i], family, addr))
			return NULL;
	const range *t = family == AF_INET ? v4_ranges : v6_ranges;
	size_t n = family == AF_INET ? MSB_ARRAY_SIZE(v4_ranges) : MSB_ARRAY_SIZE(v6_ranges);
	for (size_t i = 0; i < n; i++)
		if (prefix_eq(t[i].addr, addr, t[i].prefix))
			return t[i].reason;
	if (family == AF_INET6 && (addr[0] & 0xe0) != 0x20)
		return "reserved"; /* outside 2000::/3, the global unicast space */
	return NULL;
}
