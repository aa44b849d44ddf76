/* SPDX-License-Identifier: Apache-2.0 */
/*
 * src/egress - the egress proxy's core: the HTTP/1.1 request-head parser,
 * the allowlist decision, the destination address filter, name resolution
 * (a hosts map, /etc/hosts, then a small DNS client), and the decision
 * record. Depends on util only, so that msb-shim links it statically and the
 * unit tests and the fuzz target link it alone. Nothing here does I/O except
 * the resolver. docs/internals/egress.md is the reference.
 *
 * Every input is untrusted (it comes from the guest); every count and length
 * is capped. Nothing here is thread-safe unless said so.
 */
#ifndef MSB_EGRESS_EGRESS_H
#define MSB_EGRESS_EGRESS_H

#include "plat_net.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/util.h"

/* ---- limits -------------------------------------------------------------- */

#define MSB_EGRESS_HEAD_MAX 16384  /* a whole request head, request line included */
#define MSB_EGRESS_LINE_MAX 8192   /* one line of the head */
#define MSB_EGRESS_HEADERS_MAX 100 /* header fields in one head */
#define MSB_EGRESS_METHOD_MAX 32   /* bytes of a method token */
#define MSB_EGRESS_HOST_MAX 253	   /* a DNS name (or an IP literal) */
#define MSB_EGRESS_ADDRS_MAX 16	   /* addresses one name may resolve to */

/* ---- the request head ----------------------------------------------------- */

/* Outcome of a parse: MSB_EGRESS_HEAD_OK with a request, NEED_MORE (no
 * complete head yet), or a refusal whose status the proxy answers with. */
typedef enum msb_egress_parse {
	MSB_EGRESS_HEAD_OK = 0,
	MSB_EGRESS_HEAD_NEED_MORE = 1,
	MSB_EGRESS_HEAD_BAD = -1,	  /* 400: malformed, smuggling, mismatch */
	MSB_EGRESS_HEAD_TOO_LARGE = -2,	  /* 431: a line, the head or the header count */
	MSB_EGRESS_HEAD_NOT_PROXY = -3,	  /* 400: origin-form or another scheme */
	MSB_EGRESS_HEAD_UNSUPPORTED = -4, /* 501: Transfer-Encoding on a request, a version */
} msb_egress_head_status;

typedef struct msb_egress_request {
	bool connect; /* CONNECT host:port; else absolute-form http:// */
	char method[MSB_EGRESS_METHOD_MAX + 1];
	char host[MSB_EGRESS_HOST_MAX + 1]; /* lower-case, no brackets, no trailing dot */
	bool host_is_ip;
	uint16_t port;
	uint64_t content_length; /* 0 when absent */
	size_t head_len;	 /* bytes of the head, the final CRLF included */
	/* Absolute-form only: the head to send upstream (origin-form request
	 * line, hop-by-hop fields dropped, Host and Connection: close set). */
	char *upstream_head;
	size_t upstream_len;
	const char *reason; /* a refusal's short reason, static */
} msb_egress_request;

/* Parse the head at buf[0..len). On MSB_EGRESS_HEAD_OK the caller owns
 * req->upstream_head (msb_egress__request_clear). A buffer of
 * MSB_EGRESS_HEAD_MAX bytes without the end of the head is TOO_LARGE. */
int msb_egress__parse_head(const char *buf, size_t len, msb_egress_request *req);
void msb_egress__request_clear(msb_egress_request *req);

/* ---- the allowlist -------------------------------------------------------- */

typedef struct msb_egress_rule {
	char *host;	/* as the spec gives it: a name, "*.suffix", or an IP literal */
	char **methods; /* NULL-terminated; NULL = every method */
} msb_egress_rule;

/* A CIDR from the backend's configuration: destinations in it are allowed
 * although they are not global (tests reach their own loopback hosts). */
typedef struct msb_egress_cidr {
	int family; /* AF_INET or AF_INET6 */
	uint8_t addr[16];
	unsigned prefix;
} msb_egress_cidr;

typedef struct msb_egress_policy {
	msb_egress_rule *rules;
	size_t n_rules;
	msb_egress_cidr *cidrs;
	size_t n_cidrs;
} msb_egress_policy;

void msb_egress__policy_clear(msb_egress_policy *p);
/* "10.0.0.0/8", "::1/128", or an address alone (a host prefix). 0 or -EINVAL. */
int msb_egress__cidr_parse(const char *s, msb_egress_cidr *out);

/* The method verbs the proxy can enforce (plain HTTP); NULL-terminated. The
 * ns backend publishes exactly these as egress_method_tokens. */
#define MSB_EGRESS_N_METHOD_TOKENS 17
extern const char *const msb_egress__method_tokens[MSB_EGRESS_N_METHOD_TOKENS + 1];

/* The host part of the decision. NULL when the request may go on (then the
 * address filter decides), else the DENY reason:
 *   "not-allowlisted"        no rule names the host
 *   "ip-literal"             an IP literal that is not itself listed
 *   "method-not-allowed"     plain HTTP with a verb the host's rules omit
 *   "method-needs-plain-http" CONNECT to a host whose rules restrict methods */
const char *msb_egress__decide(const msb_egress_policy *p, const msb_egress_request *req);

/* Is this destination address allowed: global, or inside a configured CIDR.
 * NULL when allowed, else the reason ("loopback", "private", "link-local",
 * "cloud-metadata", "multicast", "unspecified", "cgnat", "ipv4-mapped",
 * "reserved"). */
const char *msb_egress__addr_check(const msb_egress_policy *p, const struct sockaddr_storage *sa);

/* ---- name resolution ------------------------------------------------------ */

typedef struct msb_egress_hosts_entry {
	char *name; /* lower-case */
	struct sockaddr_storage addrs[MSB_EGRESS_ADDRS_MAX];
	size_t n;
} msb_egress_hosts_entry;

typedef struct msb_egress_resolver {
	msb_egress_hosts_entry *hosts; /* the backend configuration's map: first */
	size_t n_hosts;
	bool use_system;	 /* then /etc/hosts, then DNS to resolv.conf's servers */
	const char *etc_hosts;	 /* default "/etc/hosts" */
	const char *resolv_conf; /* default "/etc/resolv.conf" */
	int timeout_ms;		 /* per DNS server and query; default 2000 */
	uint16_t dns_port;	 /* 0 = 53 (the tests point it at a server of theirs) */
} msb_egress_resolver;

void msb_egress__resolver_clear(msb_egress_resolver *r);
/* An IP literal (v4 or v6) with port as a socket address (hosts.c). */
bool msb_egress__parse_ip(const char *s, uint16_t port, struct sockaddr_storage *out);
/* Add "name" -> "address" to the map. 0, -EINVAL or -ENOMEM. */
int msb_egress__resolver_add(msb_egress_resolver *r, const char *name, const char *address);

/* Resolve host (an IP literal or a name) into addrs (port set). Returns the
 * count (>= 1), -ENOENT when the name does not resolve, -ETIMEDOUT, -EIO. */
int msb_egress__resolve(const msb_egress_resolver *r, const char *host, uint16_t port,
			struct sockaddr_storage *addrs, size_t max);

/* Parse a DNS reply for `id` into addrs (exported for the tests and the
 * fuzz target). Returns the count appended, or -EIO when malformed. */
int msb_egress__dns_parse(const uint8_t *msg, size_t len, uint16_t id, uint16_t qtype,
			  uint16_t port, struct sockaddr_storage *addrs, size_t max);
/* Build a query for name/qtype with id into out; returns its length or -EINVAL. */
int msb_egress__dns_query(const char *name, uint16_t qtype, uint16_t id, uint8_t *out, size_t cap);

/* ---- the decision record -------------------------------------------------- */

typedef struct msb_egress_entry {
	int64_t time_ns; /* CLOCK_REALTIME */
	bool allow;
	char host[MSB_EGRESS_HOST_MAX + 1];
	uint16_t port;
	char method[MSB_EGRESS_METHOD_MAX + 1]; /* "" when not visible (CONNECT) */
	const char *reason;			/* static: "allowlisted" or a DENY reason */
	uint64_t bytes_up;			/* guest -> destination */
	uint64_t bytes_down;
} msb_egress_entry;

#define MSB_EGRESS_LOG_NAME "egress.log"
#define MSB_EGRESS_LOG_MAX (1u << 20) /* the shim stops appending beyond it */
#define MSB_EGRESS_RECORD_MAX 1024    /* one JSON line */

/* One JSON line (with its newline) into out; returns its length or -ENOSPC. */
int msb_egress__record_format(const msb_egress_entry *e, char *out, size_t cap);
/* Parse one line (without the newline); reason is copied into reason_buf.
 * 0 or -EINVAL. */
int msb_egress__record_parse(const char *line, size_t len, msb_egress_entry *e, char *reason_buf,
			     size_t reason_cap);

/* Lower-case host check shared by the parser and the policy: a DNS name of
 * letters, digits, '-', '_' and dots, labels 1..63. */
bool msb_egress__valid_name(const char *s);

#endif

/* ---- configuration ---------------------------------------------------------- */

#define MSB_EGRESS_PORT 3128
#define MSB_EGRESS_DEFAULT_MAX_TUNNELS 60 /* < MSB_PROTO_MAX_CHANNELS: one is the listener */
#define MSB_EGRESS_WINDOW (1024u * 1024)
#define MSB_EGRESS_DEFAULT_HEADER_TIMEOUT_MS 10000
#define MSB_EGRESS_DEFAULT_CONNECT_TIMEOUT_MS 10000

/*
 * The egress configuration, one strict JSON object (unknown keys refused):
 *   "allow":              [{"host": S, "methods": [S, ...] | null}]  (the spec's
 *                         rules; only in the shim's file, never in a backend's)
 *   "allow_cidrs":        ["127.0.0.0/8", ...]  non-global ranges to allow
 *   "hosts":              {"name": ["address", ...]}  pinned resolution
 *   "system_resolver":    true (default): /etc/hosts then DNS after "hosts"
 *   "header_timeout_ms":  a request head must be complete within (10000)
 *   "connect_timeout_ms": dialling the destination (10000)
 *   "max_tunnels":        concurrent tunnels per sandbox, 1..60 (60)
 */
typedef struct msb_egress_config {
	msb_egress_policy policy;
	msb_egress_resolver resolver;
	unsigned header_timeout_ms;
	unsigned connect_timeout_ms;
	unsigned max_tunnels;
} msb_egress_config;

void msb_egress__config_init(msb_egress_config *c);
void msb_egress__config_clear(msb_egress_config *c);
/* allow_rules: whether the "allow" key is accepted (the shim's file). */
int msb_egress__config_from_json(msb_egress_config *c, const char *json, size_t len,
				 bool allow_rules, msb_error **err);
