/* SPDX-License-Identifier: Apache-2.0 */
/*
 * msb-egress-proxy: msb's egress proxy (src/egress) as a program of its own,
 * for the container engines' allowlist topology (docs/internals/engine.md,
 * checklist 21.21-21.24). It runs as the only file of a one-file image in
 * a container on two networks: the sandbox's internal network, where it
 * listens, and an outbound one, where it dials. The workload's only route
 * out is through it.
 *
 *   msb-egress-proxy serve [--port N] [--log PATH]
 *       the configuration (src/egress/config.c, with the spec's "allow"
 *       rules) in $MSB_EGRESS_CONFIG; listens on every non-loopback IPv4
 *       address the container has when it starts (the internal network's:
 *       the outbound network is attached after "listening" is printed)
 *   msb-egress-proxy drain [--log PATH]
 *       prints the decision records and empties the log, under its lock
 *
 * Each connection is one request (a CONNECT tunnel, or one plain-HTTP
 * request) decided exactly as msb-shim's proxy decides it (shim/egress_proxy.c):
 * the same parser, allowlist, address filter and resolver, the same statuses
 * and reasons, one decision record per connection that sent anything. A
 * thread per connection, at most max_tunnels at once.
 */
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <arpa/inet.h>

#include "egress/egress.h"

#define DEFAULT_LOG "/log/egress.log"
#define MAX_LISTENERS 8
#define RELAY_BUF (64u << 10)
#define LINGER_MS 5000
#define THREAD_STACK (256u << 10)
/* How long SIGTERM waits for open tunnels to end and write their records. */
#define STOP_MS 2000

static msb_egress_config cfg;
static int log_fd = -1;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned active;	 /* tunnels alive */
static unsigned slots;	 /* records' room held by allowed tunnels */
static uint64_t dropped; /* DENY records past the log's budget */
static volatile sig_atomic_t stopping;
static int wake[2] = {-1, -1};

/* Open tunnels' client sockets, shut down at SIGTERM so their threads end. */
#define MAX_TRACKED 256
static int tracked[MAX_TRACKED];

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
	char line[512];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n > sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	ssize_t w = write(STDERR_FILENO, line, (size_t)n);
	(void)w;
}

static int64_t now_ms(void)
{
	return msb__now_ns() / 1000000;
}

/* ---- records (the budget of shim/egress_proxy.c) ------------------------------------ */

typedef struct tunnel {
	int fd; /* the guest's connection */
	int up; /* the destination, -1 */
	msb_egress_request req;
	msb_egress_entry rec;
	bool recorded, slot, opened;
	uint8_t head[MSB_EGRESS_HEAD_MAX];
	size_t have; /* bytes in head */
	uint64_t received;
	struct sockaddr_storage addrs[MSB_EGRESS_ADDRS_MAX];
	uint8_t buf[RELAY_BUF]; /* relay(): one direction at a time */
} tunnel;

/* Room for one more record, held until it is written: no allowed
 * connection goes unrecorded (past the budget new ones are refused). */
static bool take_slot(tunnel *t)
{
	struct stat st;
	bool ok = false;
	pthread_mutex_lock(&lock);
	if (fstat(log_fd, &st) == 0 &&
	    (uint64_t)st.st_size + ((uint64_t)slots + 1) * MSB_EGRESS_RECORD_MAX <=
		    MSB_EGRESS_LOG_MAX) {
		slots++;
		t->slot = ok = true;
	}
	pthread_mutex_unlock(&lock);
	return ok;
}

static void record(tunnel *t, bool allow, const char *reason)
{
	if (t->recorded)
		return;
	t->recorded = true;
	t->rec.time_ns = msb__realtime_ns();
	t->rec.allow = allow;
	t->rec.reason = reason;
	char line[MSB_EGRESS_RECORD_MAX];
	int n = msb_egress__record_format(&t->rec, line, sizeof(line));
	pthread_mutex_lock(&lock);
	if (t->slot) {
		t->slot = false;
		slots--;
	}
	uint64_t held = (uint64_t)slots * MSB_EGRESS_RECORD_MAX;
	uint64_t room =
		MSB_EGRESS_LOG_MAX - (held < MSB_EGRESS_LOG_MAX ? held : MSB_EGRESS_LOG_MAX);
	if (n > 0) {
		while (flock(log_fd, LOCK_EX) < 0 && errno == EINTR)
			;
		struct stat st;
		if (fstat(log_fd, &st) == 0 && (uint64_t)st.st_size + (uint64_t)n <= room) {
			ssize_t w = write(log_fd, line, (size_t)n);
			(void)w;
		} else if (dropped++ % 1000 == 0) {
			say("msb-egress-proxy: the record log is full: %llu record(s) dropped",
			    (unsigned long long)dropped);
		}
		flock(log_fd, LOCK_UN);
	}
	pthread_mutex_unlock(&lock);
}

/* ---- one connection ------------------------------------------------------------------- */

static int send_all(int fd, const void *buf, size_t n)
{
	const uint8_t *p = buf;
	while (n > 0) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Wait for fd to be readable until the deadline: 1 ready, 0 timed out. */
static int wait_in(int fd, int64_t deadline)
{
	for (;;) {
		int64_t left = deadline - now_ms();
		if (left <= 0)
			return 0;
		struct pollfd p = {.fd = fd, .events = POLLIN};
		int r = poll(&p, 1, (int)left);
		if (r < 0 && errno == EINTR)
			continue;
		return r > 0 ? 1 : 0;
	}
}

/* Answer with an HTTP status and record the DENY, then wait (a while) for
 * the guest to hang up, discarding what it sends. */
static void refuse(tunnel *t, int status, const char *phrase, const char *reason)
{
	char body[160], resp[400];
	snprintf(body, sizeof(body), "msb egress: %s (%s)\n", status == 403 ? "denied" : phrase,
		 reason);
	int n = snprintf(resp, sizeof(resp),
			 "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %zu\r\n"
			 "Connection: close\r\nX-Msb-Egress: DENY %s\r\n\r\n%s",
			 status, phrase, strlen(body), reason, body);
	record(t, false, reason);
	if (n > 0)
		(void)send_all(t->fd, resp,
			       (size_t)n < sizeof(resp) ? (size_t)n : sizeof(resp) - 1);
	shutdown(t->fd, SHUT_WR);
	int64_t deadline = now_ms() + LINGER_MS;
	char sink[4096];
	while (wait_in(t->fd, deadline) > 0) {
		ssize_t r = recv(t->fd, sink, sizeof(sink), 0);
		if (r <= 0 && !(r < 0 && errno == EINTR))
			break;
	}
}

/* Dial each address in turn within the connect timeout: 0 with t->up set. */
static int dial(tunnel *t, int n)
{
	for (int i = 0; i < n && !stopping; i++) {
		const struct sockaddr_storage *sa = &t->addrs[i];
		int fd = socket(sa->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd < 0)
			continue;
		socklen_t len = sa->ss_family == AF_INET ? sizeof(struct sockaddr_in)
							 : sizeof(struct sockaddr_in6);
		int r = connect(fd, (const struct sockaddr *)sa, len);
		if (r < 0 && errno == EINPROGRESS) {
			struct pollfd p = {.fd = fd, .events = POLLOUT};
			int e = 0;
			socklen_t el = sizeof(e);
			int64_t deadline = now_ms() + cfg.connect_timeout_ms;
			do
				r = poll(&p, 1,
					 (int)(deadline - now_ms() > 0 ? deadline - now_ms() : 0));
			while (r < 0 && errno == EINTR);
			r = r == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el) == 0 && e == 0
				    ? 0
				    : -1;
		}
		if (r < 0) {
			close(fd);
			continue;
		}
		int fl = fcntl(fd, F_GETFL);
		int one = 1;
		if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0) {
			close(fd);
			continue;
		}
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		t->up = fd;
		return 0;
	}
	return -1;
}

/*
 * Relay until both ways have ended. A plain request carries its body
 * (body_left bytes) and nothing after it: one request per connection. The
 * guest's end half-closes a tunnel's destination; the destination's end
 * half-closes the guest, who then has LINGER_MS to hang up.
 */
static void relay(tunnel *t, uint64_t body_left, bool plain)
{
	uint8_t *buf = t->buf;
	bool guest_eof = false, up_eof = false;
	int64_t linger_until = 0;
	while (!(guest_eof && up_eof)) {
		struct pollfd p[2] = {{.fd = guest_eof ? -1 : t->fd, .events = POLLIN},
				      {.fd = up_eof ? -1 : t->up, .events = POLLIN}};
		int timeout = -1;
		if (linger_until) {
			int64_t left = linger_until - now_ms();
			if (left <= 0)
				break;
			timeout = (int)left;
		}
		int r = poll(p, 2, timeout);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		if (p[0].revents) {
			ssize_t n = recv(t->fd, buf, RELAY_BUF, 0);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0) {
				guest_eof = true;
				if (!plain)
					shutdown(t->up, SHUT_WR);
			} else {
				size_t keep = (size_t)n;
				if (plain && keep > body_left)
					keep = (size_t)body_left;
				if (plain)
					body_left -= keep;
				if (keep && send_all(t->up, buf, keep) < 0)
					break;
				t->rec.bytes_up += keep;
			}
		}
		if (p[1].revents) {
			ssize_t n = recv(t->up, buf, RELAY_BUF, 0);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0) {
				up_eof = true;
				shutdown(t->fd, SHUT_WR);
				if (!guest_eof)
					linger_until = now_ms() + LINGER_MS;
			} else {
				if (send_all(t->fd, buf, (size_t)n) < 0)
					break;
				t->rec.bytes_down += (uint64_t)n;
			}
		}
	}
}

static void serve(tunnel *t)
{
	msb_egress_request *q = &t->req;
	int64_t deadline = now_ms() + cfg.header_timeout_ms;
	int r = MSB_EGRESS_HEAD_NEED_MORE;
	while (r == MSB_EGRESS_HEAD_NEED_MORE) {
		if (t->have == sizeof(t->head))
			break; /* parse_head has answered TOO_LARGE for a full buffer */
		if (!wait_in(t->fd, deadline)) {
			refuse(t, 408, "Request Timeout", "header-timeout");
			return;
		}
		ssize_t n = recv(t->fd, t->head + t->have, sizeof(t->head) - t->have, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			/* A connection that asked nothing leaves no record. */
			if (t->received)
				record(t, false, "incomplete-request");
			return;
		}
		t->have += (size_t)n;
		t->received += (uint64_t)n;
		r = msb_egress__parse_head((const char *)t->head, t->have, q);
	}
	snprintf(t->rec.host, sizeof(t->rec.host), "%s", q->host);
	t->rec.port = q->port;
	if (r == MSB_EGRESS_HEAD_OK && !q->connect)
		snprintf(t->rec.method, sizeof(t->rec.method), "%s", q->method);
	switch (r) {
	case MSB_EGRESS_HEAD_OK:
		break;
	case MSB_EGRESS_HEAD_TOO_LARGE:
		refuse(t, 431, "Request Header Fields Too Large", q->reason);
		return;
	case MSB_EGRESS_HEAD_UNSUPPORTED:
		refuse(t, 501, "Not Implemented", q->reason);
		return;
	default:
		refuse(t, 400, "Bad Request", q->reason ? q->reason : "malformed");
		return;
	}
	const char *deny = msb_egress__decide(&cfg.policy, q);
	if (deny) {
		refuse(t, 403, "Forbidden", deny);
		return;
	}
	if (!take_slot(t)) {
		refuse(t, 503, "Service Unavailable", "record-log-full");
		return;
	}
	int n = msb_egress__resolve(&cfg.resolver, q->host, q->port, t->addrs,
				    MSB_EGRESS_ADDRS_MAX);
	if (n <= 0) {
		refuse(t, 502, "Bad Gateway", n == -ETIMEDOUT ? "resolve-timeout" : "unresolvable");
		return;
	}
	/* Every address must pass: a name is refused as a whole if any of its
	 * addresses is not global. */
	for (int i = 0; i < n; i++) {
		const char *bad = msb_egress__addr_check(&cfg.policy, &t->addrs[i]);
		if (bad) {
			refuse(t, 403, "Forbidden", bad);
			return;
		}
	}
	if (dial(t, n) < 0) {
		refuse(t, 502, "Bad Gateway", "unreachable");
		return;
	}
	t->opened = true;
	/* What followed the head already. */
	const uint8_t *rest = t->head + q->head_len;
	size_t rest_len = t->have - q->head_len;
	uint64_t body_left = 0;
	if (q->connect) {
		static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
		if (send_all(t->fd, ok, sizeof(ok) - 1) < 0)
			return;
	} else {
		body_left = q->content_length;
		if (send_all(t->up, q->upstream_head, q->upstream_len) < 0)
			return;
		t->rec.bytes_up += q->upstream_len;
		if (rest_len > body_left)
			rest_len = (size_t)body_left;
		body_left -= rest_len;
	}
	if (rest_len) {
		if (send_all(t->up, rest, rest_len) < 0)
			return;
		t->rec.bytes_up += rest_len;
	}
	relay(t, body_left, !q->connect);
}

static void track(int fd, bool on)
{
	pthread_mutex_lock(&lock);
	for (size_t i = 0; i < MAX_TRACKED; i++)
		if (on ? tracked[i] == 0 : tracked[i] == fd + 1) {
			tracked[i] = on ? fd + 1 : 0;
			break;
		}
	pthread_mutex_unlock(&lock);
}

static void *tunnel_main(void *arg)
{
	tunnel *t = arg;
	track(t->fd, true);
	serve(t);
	if (t->opened)
		record(t, true, "allowlisted");
	if (t->slot) { /* never recorded: its room goes back */
		pthread_mutex_lock(&lock);
		slots--;
		pthread_mutex_unlock(&lock);
	}
	track(t->fd, false);
	if (t->up >= 0)
		close(t->up);
	close(t->fd);
	msb_egress__request_clear(&t->req);
	free(t);
	pthread_mutex_lock(&lock);
	active--;
	pthread_mutex_unlock(&lock);
	return NULL;
}

/* ---- serve ---------------------------------------------------------------------------- */

static void on_term(int sig)
{
	(void)sig;
	stopping = 1;
	ssize_t w = write(wake[1], "x", 1);
	(void)w;
}

static int listen_all(int port, int *fds, size_t *n)
{
	struct ifaddrs *ifs = NULL;
	if (getifaddrs(&ifs) < 0) {
		say("msb-egress-proxy: getifaddrs: %s", strerror(errno));
		return -1;
	}
	*n = 0;
	for (struct ifaddrs *i = ifs; i && *n < MAX_LISTENERS; i = i->ifa_next) {
		if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET ||
		    (i->ifa_flags & IFF_LOOPBACK))
			continue;
		struct sockaddr_in sa = *(struct sockaddr_in *)i->ifa_addr;
		sa.sin_port = htons((uint16_t)port);
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		int one = 1;
		char text[INET_ADDRSTRLEN] = "?";
		inet_ntop(AF_INET, &sa.sin_addr, text, sizeof(text));
		if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
		    bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 128) < 0) {
			say("msb-egress-proxy: cannot listen on %s:%d: %s", text, port,
			    strerror(errno));
			if (fd >= 0)
				close(fd);
			continue;
		}
		say("msb-egress-proxy: listening on %s:%d", text, port);
		fds[(*n)++] = fd;
	}
	freeifaddrs(ifs);
	return *n ? 0 : -1;
}

static void refuse_busy(int fd)
{
	/* Past max_tunnels: a reset, as the shim's agent answers. */
	struct linger l = {.l_onoff = 1, .l_linger = 0};
	setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
	close(fd);
}

static int cmd_serve(int port, const char *log_path)
{
	const char *json = getenv("MSB_EGRESS_CONFIG");
	msb_egress__config_init(&cfg);
	msb_error *err = NULL;
	if (!json || msb_egress__config_from_json(&cfg, json, strlen(json), true, &err) < 0) {
		say("msb-egress-proxy: $MSB_EGRESS_CONFIG: %s",
		    err ? msb_error_message(err) : "not set");
		msb_error_free(err);
		return 2;
	}
	log_fd = open(log_path, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (log_fd < 0) {
		say("msb-egress-proxy: `%s`: %s", log_path, strerror(errno));
		return 1;
	}
	if (pipe2(wake, O_CLOEXEC | O_NONBLOCK) < 0)
		return 1;
	signal(SIGPIPE, SIG_IGN);
	struct sigaction sa = {.sa_handler = on_term};
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	int fds[MAX_LISTENERS];
	size_t n = 0;
	if (listen_all(port, fds, &n) < 0) {
		say("msb-egress-proxy: no address to listen on");
		return 1;
	}
	/* The line the backend waits for (21.21). */
	say("msb-egress-proxy: listening");
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, THREAD_STACK);
	while (!stopping) {
		struct pollfd p[MAX_LISTENERS + 1];
		for (size_t i = 0; i < n; i++)
			p[i] = (struct pollfd){.fd = fds[i], .events = POLLIN};
		p[n] = (struct pollfd){.fd = wake[0], .events = POLLIN};
		if (poll(p, n + 1, -1) < 0)
			continue;
		for (size_t i = 0; i < n && !stopping; i++) {
			if (!(p[i].revents & POLLIN))
				continue;
			int fd = accept4(fds[i], NULL, NULL, SOCK_CLOEXEC);
			if (fd < 0)
				continue;
			pthread_mutex_lock(&lock);
			bool room = active < cfg.max_tunnels;
			if (room)
				active++;
			pthread_mutex_unlock(&lock);
			tunnel *t = room ? calloc(1, sizeof(*t)) : NULL;
			pthread_t th;
			if (t) {
				t->fd = fd;
				t->up = -1;
			}
			if (!t || pthread_create(&th, &attr, tunnel_main, t) != 0) {
				if (room) {
					pthread_mutex_lock(&lock);
					active--;
					pthread_mutex_unlock(&lock);
				}
				free(t);
				refuse_busy(fd);
			}
		}
	}
	/* SIGTERM: end every tunnel so that each writes its record, then go. */
	for (size_t i = 0; i < n; i++)
		close(fds[i]);
	pthread_mutex_lock(&lock);
	for (size_t i = 0; i < MAX_TRACKED; i++)
		if (tracked[i])
			shutdown(tracked[i] - 1, SHUT_RDWR);
	int64_t deadline = now_ms() + STOP_MS;
	while (active > 0 && now_ms() < deadline) {
		pthread_mutex_unlock(&lock);
		usleep(10000);
		pthread_mutex_lock(&lock);
	}
	pthread_mutex_unlock(&lock);
	say("msb-egress-proxy: stopped");
	return 0;
}

/* ---- drain ------------------------------------------------------------------------------ */

static int cmd_drain(const char *log_path)
{
	int fd = open(log_path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : 1;
	while (flock(fd, LOCK_EX) < 0)
		if (errno != EINTR)
			return 1;
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		return 1;
	size_t cap = MSB_EGRESS_LOG_MAX + MSB_EGRESS_RECORD_MAX;
	size_t want = st.st_size < (off_t)cap ? (size_t)st.st_size : cap;
	char *buf = malloc(want ? want : 1);
	size_t len = 0;
	while (buf && len < want) {
		ssize_t r = pread(fd, buf + len, want - len, (off_t)len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		len += (size_t)r;
	}
	int rc = 0;
	for (size_t off = 0; buf && off < len;) {
		ssize_t w = write(STDOUT_FILENO, buf + off, len - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			rc = 1;
			break;
		}
		off += (size_t)w;
	}
	/* Emptied only once printed: a failed drain is read again next time. */
	if (rc == 0 && buf && ftruncate(fd, 0) < 0)
		rc = 1;
	free(buf);
	flock(fd, LOCK_UN);
	close(fd);
	return rc;
}

int main(int argc, char **argv)
{
	const char *log_path = DEFAULT_LOG;
	int port = MSB_EGRESS_PORT;
	if (argc < 2)
		goto usage;
	for (int i = 2; i < argc; i++) {
		if (strcmp(argv[i], "--log") == 0 && i + 1 < argc) {
			log_path = argv[++i];
		} else if (strcmp(argv[i], "--port") == 0 && i + 1 < argc) {
			char *end = NULL;
			long v = strtol(argv[++i], &end, 10);
			if (!end || *end || v < 1 || v > 65535)
				goto usage;
			port = (int)v;
		} else {
			goto usage;
		}
	}
	if (strcmp(argv[1], "serve") == 0)
		return cmd_serve(port, log_path);
	if (strcmp(argv[1], "drain") == 0)
		return cmd_drain(log_path);
usage:
	fprintf(stderr, "usage: msb-egress-proxy serve [--port N] [--log PATH]\n"
			"       msb-egress-proxy drain [--log PATH]\n");
	return 2;
}
