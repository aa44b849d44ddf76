/* SPDX-License-Identifier: Apache-2.0 */
/* msb-shim's egress proxy: see egress_proxy.h and docs/internals/egress.md. */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include "backends/ns/boundary/boundary.h"
#include "egress_int.h"

/* ---- the agent connection's output queue ---------------------------------- */

static size_t queued(const proxy *p)
{
	return msb_proto_outq_pending(&p->out);
}

/* Space for n bytes; NULL when the queue refuses (at OUTQ_MAX, or no
 * memory), and then the proxy is broken: it stops, saying why. */
static uint8_t *reserve(proxy *p, size_t n)
{
	uint8_t *dst;
	int rc = msb_proto_outq_reserve(&p->out, n, &dst);
	if (rc == 0)
		return dst;
	if (!p->broken)
		shim_log("msb-shim: egress: cannot queue for the agent: %s (%zu bytes queued, "
			 "%zu more, at most %u)",
			 msb_proto_strerror(rc), queued(p), n, OUTQ_MAX);
	p->broken = true;
	return NULL;
}

static void commit(proxy *p, size_t n)
{
	msb_proto_outq_commit(&p->out, n);
}

static void queue(proxy *p, const uint8_t *frame, int len)
{
	if (len <= 0) {
		shim_log("msb-shim: egress: cannot encode a frame (%d)", len);
		p->broken = true;
		return;
	}
	uint8_t *dst = reserve(p, (size_t)len);
	if (!dst)
		return;
	memcpy(dst, frame, (size_t)len);
	commit(p, (size_t)len);
}

static void flush(proxy *p)
{
	if (!p->broken && msb_proto_outq_send(&p->out, p->fd) < 0) {
		p->broken = true;
		return;
	}
	bool want = queued(p) > 0;
	if (want != p->want_out) {
		struct epoll_event ev = {.events = EPOLLIN | (want ? EPOLLOUT : 0), .data.ptr = p};
		epoll_ctl(p->ep, EPOLL_CTL_MOD, p->fd, &ev);
		p->want_out = want;
	}
}

static void send_error(proxy *p, uint32_t ch, uint16_t code, const char *msg)
{
	uint8_t buf[MSB_PROTO_HEADER_SIZE + 4 + MSB_PROTO_MAX_ERROR_MSG];
	queue(p, buf, msb_proto_enc_error(buf, sizeof(buf), ch, code, msg));
}

/* ---- records ---------------------------------------------------------------- */

/*
 * The log's budget (docs/security.md, "Budgets on guest bytes"): at most
 * MSB_EGRESS_LOG_MAX bytes between two reads by the backend, each record at
 * most MSB_EGRESS_RECORD_MAX. An egress is allowed only with room for its
 * record held (a slot), so no allowed connection goes unrecorded: past the
 * budget new destinations are refused ("record-log-full") until the backend
 * reads the log, and only DENY records - of connections that reached
 * nothing - can be dropped, counted in the shim's log.
 */
static bool take_slot(proxy *p, tunnel *t)
{
	struct stat st;
	if (fstat(p->log_fd, &st) < 0 ||
	    (uint64_t)st.st_size + ((uint64_t)p->slots + 1) * MSB_EGRESS_RECORD_MAX >
		    MSB_EGRESS_LOG_MAX)
		return false;
	p->slots++;
	t->slot = true;
	return true;
}

/* The room a record of this tunnel may use: its slot's, or what no slot holds. */
static off_t record_room(const proxy *p, const tunnel *t)
{
	uint64_t held = (uint64_t)(p->slots - (t->slot ? 1 : 0)) * MSB_EGRESS_RECORD_MAX;
	return (off_t)(MSB_EGRESS_LOG_MAX -
		       (held < MSB_EGRESS_LOG_MAX ? held : MSB_EGRESS_LOG_MAX));
}

/* Append one record under the log's lock (the backend reads and truncates
 * it under the same lock), within the budget above. */
static void append(proxy *p, tunnel *t)
{
	char line[MSB_EGRESS_RECORD_MAX];
	int n = msb_egress__record_format(&t->rec, line, sizeof(line));
	if (n < 0 || p->log_fd < 0)
		return;
	while (flock(p->log_fd, LOCK_EX) < 0)
		if (errno != EINTR)
			return;
	struct stat st;
	if (fstat(p->log_fd, &st) == 0 && st.st_size + n <= record_room(p, t)) {
		ssize_t w = write(p->log_fd, line, (size_t)n);
		(void)w;
	} else if (p->dropped++ % 1000 == 0) {
		shim_log("msb-shim: egress.log is full: %llu record(s) dropped",
			 (unsigned long long)p->dropped);
	}
	flock(p->log_fd, LOCK_UN);
}

static void record(proxy *p, tunnel *t, bool allow, const char *reason)
{
	if (t->recorded)
		return;
	t->recorded = true;
	t->rec.time_ns = msb__realtime_ns();
	t->rec.allow = allow;
	t->rec.reason = reason;
	append(p, t);
	if (t->slot) {
		t->slot = false;
		p->slots--;
	}
}

/* ---- tunnels ------------------------------------------------------------------ */

static tunnel *find(proxy *p, uint32_t id)
{
	for (tunnel *t = p->tunnels; t; t = t->next)
		if (t->id == id && !t->done)
			return t;
	return NULL;
}

static void up_interest(proxy *p, tunnel *t)
{
	if (t->up < 0)
		return;
	uint32_t ev = 0;
	if (t->state == T_DIAL) {
		ev = EPOLLOUT;
	} else {
		bool room = direct(t) ? !t->dstall && t->dlen < t->pcap
				      : t->out_credit.avail > 0 && queued(p) < OUTQ_HIGH;
		if (!t->up_eof && room)
			ev |= EPOLLIN;
		if (t->pre_off < t->pre_len || t->ulen > 0 || t->plen > 0)
			ev |= EPOLLOUT;
	}
	if (ev == t->up_events)
		return;
	struct epoll_event e = {.events = ev, .data.ptr = t};
	epoll_ctl(p->ep, EPOLL_CTL_MOD, t->up, &e);
	t->up_events = ev;
}

void tunnel_finish(proxy *p, tunnel *t, const char *why)
{
	if (t->done)
		return;
	/* ALLOW iff bytes were relayed to the destination; a connection that
	 * asked nothing leaves no record. */
	bool allow = t->state == T_OPEN || t->state == T_LINGER;
	if (!t->recorded && !(t->state == T_HEAD && t->received == 0))
		record(p, t, allow,
		       why		    ? why
		       : allow		    ? "allowlisted"
		       : t->state == T_HEAD ? "incomplete-request"
					    : "closed-before-connect");
	if (t->up >= 0) {
		epoll_ctl(p->ep, EPOLL_CTL_DEL, t->up, NULL);
		close(t->up);
		t->up = -1;
	}
	if (direct(t)) {
		epoll_ctl(p->ep, EPOLL_CTL_DEL, t->guest, NULL);
		close(t->guest);
		t->guest = -1;
		for (int i = 0; i < 2; i++) {
			if (t->dpipe[i] >= 0)
				close(t->dpipe[i]);
			if (t->upipe[i] >= 0)
				close(t->upipe[i]);
			t->dpipe[i] = t->upipe[i] = -1;
		}
	}
	t->done = true;
}

/* Abort: the guest's connection is reset (here, or by the agent). */
void tunnel_abort(proxy *p, tunnel *t, const char *msg, const char *why)
{
	if (t->done)
		return;
	if (direct(t)) {
		struct linger lg = {.l_onoff = 1, .l_linger = 0};
		setsockopt(t->guest, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	} else {
		send_error(p, t->id, MSB_PROTO_ERR_INTERNAL, msg);
	}
	tunnel_finish(p, t, why);
}

void send_eof(proxy *p, tunnel *t)
{
	if (t->eof_sent)
		return;
	if (direct(t)) {
		/* the guest's side is shut once the pipe to it is empty (progress) */
		t->eof_sent = true;
		return;
	}
	uint8_t buf[MSB_PROTO_HEADER_SIZE + 1];
	queue(p, buf, msb_proto_enc_eof(buf, sizeof(buf), t->id, MSB_PROTO_STDIN));
	t->eof_sent = true;
}

/* Bytes to the guest (small: status lines and refusals), within credit. */
static void to_guest(proxy *p, tunnel *t, const char *text)
{
	size_t n = strlen(text);
	if (direct(t)) {
		/* the first bytes on a fresh connection: its buffer has room */
		ssize_t w = send(t->guest, text, n, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w != (ssize_t)n)
			tunnel_abort(p, t, "guest connection reset", NULL);
		return;
	}
	if (n == 0 || n > t->out_credit.avail)
		return;
	uint8_t *dst = reserve(p, MSB_PROTO_DATA_OVERHEAD + n);
	if (!dst)
		return;
	int len = msb_proto_enc_data(dst, MSB_PROTO_DATA_OVERHEAD + n, t->id, MSB_PROTO_STDIN, text,
				     (uint32_t)n);
	if (len < 0) {
		p->broken = true;
		return;
	}
	commit(p, (size_t)len);
	msb_proto_credit_take(&t->out_credit, (uint32_t)n);
}

/* Refuse with an HTTP status, record the DENY, and wait for the guest to
 * close (LINGER_MS at most). */
static void refuse(proxy *p, tunnel *t, int status, const char *phrase, const char *reason)
{
	char body[160], resp[400];
	snprintf(body, sizeof(body), "msb egress: %s (%s)\n", status == 403 ? "denied" : phrase,
		 reason);
	snprintf(resp, sizeof(resp),
		 "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %zu\r\n"
		 "Connection: close\r\nX-Msb-Egress: DENY %s\r\n\r\n%s",
		 status, phrase, strlen(body), reason, body);
	record(p, t, false, reason);
	to_guest(p, t, resp);
	send_eof(p, t);
	if (t->up >= 0) {
		epoll_ctl(p->ep, EPOLL_CTL_DEL, t->up, NULL);
		close(t->up);
		t->up = -1;
	}
	t->state = T_LINGER;
	t->deadline = now_ms() + LINGER_MS;
	if (t->agent_eof)
		tunnel_finish(p, t, NULL);
	else
		progress(p, t);
}

static void regrant(proxy *p, tunnel *t, uint32_t n, bool force)
{
	if (direct(t))
		return; /* no credit: the pipes bound what is held */
	t->regrant += n;
	if (t->regrant == 0 || (!force && t->regrant < MSB_EGRESS_WINDOW / 4))
		return;
	uint8_t buf[MSB_PROTO_HEADER_SIZE + 4];
	queue(p, buf, msb_proto_enc_credit(buf, sizeof(buf), t->id, t->regrant));
	msb_proto_credit_grant(&t->in_credit, t->regrant);
	t->regrant = 0;
}

static void dial_next(proxy *p, tunnel *t);

static void connected(proxy *p, tunnel *t)
{
	t->state = T_OPEN;
	t->deadline = 0;
	if (direct(t) && open_pipes(t) < 0) {
		/* nothing was relayed: a refusal, recorded as such */
		shim_log("msb-shim: egress: pipe: %s", strerror(errno));
		refuse(p, t, 503, "Service Unavailable", "proxy-out-of-pipes");
		return;
	}
	if (t->plain) {
		t->pre = t->req.upstream_head;
		t->pre_len = t->req.upstream_len;
		t->req.upstream_head = NULL;
		t->body_left = t->req.content_length;
		/* What followed the head already: body up to Content-Length. */
		size_t keep = t->ulen < t->body_left ? t->ulen : (size_t)t->body_left;
		t->body_left -= keep;
		uint32_t dropped = (uint32_t)(t->ulen - keep);
		t->ulen = keep;
		regrant(p, t, dropped, false);
	} else {
		to_guest(p, t, "HTTP/1.1 200 Connection established\r\n\r\n");
	}
	/* Bytes that came while dialling, and an end the guest already sent
	 * (else a silent destination would hold the tunnel forever). */
	flush_up(p, t);
}

static void dial_next(proxy *p, tunnel *t)
{
	while (t->cur < t->n_addrs) {
		const struct sockaddr_storage *sa = &t->addrs[t->cur++];
		int fd = socket(sa->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd < 0)
			continue;
		int one = 1;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		socklen_t len = sa->ss_family == AF_INET ? sizeof(struct sockaddr_in)
							 : sizeof(struct sockaddr_in6);
		int r = connect(fd, (const struct sockaddr *)sa, len);
		if (r < 0 && errno != EINPROGRESS) {
			close(fd);
			continue;
		}
		t->up = fd;
		t->state = T_DIAL;
		t->up_events = r == 0 ? 0 : EPOLLOUT;
		struct epoll_event ev = {.events = t->up_events, .data.ptr = t};
		if (epoll_ctl(p->ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
			close(fd);
			t->up = -1;
			continue;
		}
		t->deadline = now_ms() + p->cfg.connect_timeout_ms;
		if (r == 0)
			connected(p, t);
		return;
	}
	refuse(p, t, 502, "Bad Gateway", "unreachable");
}

/* A complete head is in ubuf: decide, resolve, dial. */
void on_head(proxy *p, tunnel *t)
{
	msb_egress_request *q = &t->req;
	int r = msb_egress__parse_head((const char *)t->ubuf, t->ulen, q);
	if (r == MSB_EGRESS_HEAD_NEED_MORE)
		return;
	snprintf(t->rec.host, sizeof(t->rec.host), "%s", q->host);
	t->rec.port = q->port;
	if (r == MSB_EGRESS_HEAD_OK && !q->connect)
		snprintf(t->rec.method, sizeof(t->rec.method), "%s", q->method);
	switch (r) {
	case MSB_EGRESS_HEAD_OK:
		break;
	case MSB_EGRESS_HEAD_TOO_LARGE:
		refuse(p, t, 431, "Request Header Fields Too Large", q->reason);
		return;
	case MSB_EGRESS_HEAD_UNSUPPORTED:
		refuse(p, t, 501, "Not Implemented", q->reason);
		return;
	default:
		refuse(p, t, 400, "Bad Request", q->reason);
		return;
	}
	/* The head is consumed: what follows stays in ubuf. */
	t->uhead = q->head_len;
	t->ulen -= q->head_len;
	memmove(t->ubuf, t->ubuf + t->uhead, t->ulen);
	t->uhead = 0;
	regrant(p, t, (uint32_t)q->head_len, false);
	t->plain = !q->connect;

	const char *deny = msb_egress__decide(&p->cfg.policy, q);
	if (deny) {
		refuse(p, t, 403, "Forbidden", deny);
		return;
	}
	if (!take_slot(p, t)) {
		refuse(p, t, 503, "Service Unavailable", "record-log-full");
		return;
	}
	int n = msb_egress__resolve(&p->cfg.resolver, q->host, q->port, t->addrs,
				    MSB_EGRESS_ADDRS_MAX);
	if (n <= 0) {
		refuse(p, t, 502, "Bad Gateway",
		       n == -ETIMEDOUT ? "resolve-timeout" : "unresolvable");
		return;
	}
	/* Every address must pass: a name is refused as a whole if any of its
	 * addresses is not global (no choosing the harmless one to show). */
	for (int i = 0; i < n; i++) {
		const char *bad = msb_egress__addr_check(&p->cfg.policy, &t->addrs[i]);
		if (bad) {
			refuse(p, t, 403, "Forbidden", bad);
			return;
		}
	}
	t->n_addrs = n;
	t->cur = 0;
	dial_next(p, t);
}

void flush_up(proxy *p, tunnel *t)
{
	while (t->up >= 0 && t->state == T_OPEN && t->pre_off < t->pre_len) {
		ssize_t w = send(t->up, t->pre + t->pre_off, t->pre_len - t->pre_off,
				 MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN)
			return;
		if (w < 0) {
			tunnel_abort(p, t, "destination reset", NULL);
			return;
		}
		t->pre_off += (size_t)w;
		t->rec.bytes_up += (uint64_t)w;
	}
	while (t->up >= 0 && (t->state == T_OPEN || t->state == T_LINGER) && t->ulen > 0) {
		ssize_t w = send(t->up, t->ubuf + t->uhead, t->ulen, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN)
			break;
		if (w < 0) {
			tunnel_abort(p, t, "destination reset", NULL);
			return;
		}
		t->uhead += (size_t)w;
		t->ulen -= (size_t)w;
		t->rec.bytes_up += (uint64_t)w;
		regrant(p, t, (uint32_t)w, false);
	}
	if (t->up >= 0 && t->ulen == 0 && t->plen > 0) {
		uint64_t before = t->rec.bytes_up;
		int rc = pipe_drain(t->upipe[0], t->up, &t->plen, &t->rec.bytes_up);
		if (t->rec.bytes_up != before)
			t->ustall = false;
		if (rc < 0) {
			tunnel_abort(p, t, "destination reset", NULL);
			return;
		}
	}
	if (t->ulen == 0 && t->plen == 0) {
		t->uhead = 0;
		regrant(p, t, 0, true);
		if (t->agent_eof && !t->plain && !t->up_shut && t->up >= 0 &&
		    t->pre_off == t->pre_len) {
			shutdown(t->up, SHUT_WR);
			t->up_shut = true;
		}
	}
}

/* Destination -> guest: one readv() fills up to READ_FRAMES DATA frames laid
 * out in the agent queue (a header before each payload slot), as far as
 * credit allows: one system call for up to a megabyte instead of one per
 * frame. */
#define READ_FRAMES 16
static void read_up(proxy *p, tunnel *t)
{
	if (direct(t)) {
		read_up_direct(p, t);
		return;
	}
	size_t slot = p->peer_max_payload - 1;
	size_t avail = t->out_credit.avail;
	if (avail == 0 || queued(p) >= OUTQ_HIGH)
		return;
	size_t nframes = (avail + slot - 1) / slot;
	if (nframes > READ_FRAMES)
		nframes = READ_FRAMES;
	uint8_t *dst = reserve(p, nframes * (MSB_PROTO_DATA_OVERHEAD + slot));
	if (!dst)
		return;
	struct iovec iov[READ_FRAMES];
	size_t left = avail;
	for (size_t i = 0; i < nframes; i++) {
		iov[i].iov_base =
			dst + i * (MSB_PROTO_DATA_OVERHEAD + slot) + MSB_PROTO_DATA_OVERHEAD;
		iov[i].iov_len = left < slot ? left : slot;
		left -= iov[i].iov_len;
	}
	ssize_t r;
	do
		r = readv(t->up, iov, (int)nframes);
	while (r < 0 && errno == EINTR);
	if (r < 0 && errno == EAGAIN)
		return;
	if (r < 0) {
		tunnel_abort(p, t, "destination reset", NULL);
		return;
	}
	if (r == 0) {
		t->up_eof = true;
		send_eof(p, t);
		if (t->agent_eof) {
			tunnel_finish(p, t, NULL);
		} else {
			t->state = T_LINGER;
			t->deadline = now_ms() + LINGER_MS;
		}
		return;
	}
	/* Headers for the slots filled (readv fills them in order; only the
	 * last may be partial, and nothing after it is committed). */
	size_t got = (size_t)r, off = 0;
	for (size_t i = 0; i < nframes && got > 0; i++) {
		size_t k = got < iov[i].iov_len ? got : iov[i].iov_len;
		uint8_t *f = dst + off;
		msb_proto_put_header(f, (uint32_t)k + 1, MSB_PROTO_DATA, 0, t->id);
		f[MSB_PROTO_HEADER_SIZE] = MSB_PROTO_STDIN;
		off += MSB_PROTO_DATA_OVERHEAD + k;
		got -= k;
		if (k < iov[i].iov_len)
			break;
	}
	commit(p, off);
	msb_proto_credit_take(&t->out_credit, (uint32_t)r);
	t->rec.bytes_down += (uint64_t)r;
}

static void on_up(proxy *p, tunnel *t, uint32_t events)
{
	if (t->state == T_DIAL) {
		int e = 0;
		socklen_t el = sizeof(e);
		if (getsockopt(t->up, SOL_SOCKET, SO_ERROR, &e, &el) < 0 || e != 0) {
			epoll_ctl(p->ep, EPOLL_CTL_DEL, t->up, NULL);
			close(t->up);
			t->up = -1;
			dial_next(p, t);
			return;
		}
		connected(p, t);
	}
	if (events & EPOLLOUT)
		flush_up(p, t);
	if (!t->done && t->up >= 0 && !t->up_eof && (events & (EPOLLIN | EPOLLHUP | EPOLLERR)))
		read_up(p, t);
	/* direct: a destination that has ended, and is shut our way too or has
	 * failed, is let go while the guest drains (epoll reports HUP and ERR
	 * whatever the interest: kept, it would wake every turn) */
	if (!t->done && direct(t) && t->up >= 0 && t->up_eof &&
	    (t->up_shut || (events & (EPOLLHUP | EPOLLERR)))) {
		epoll_ctl(p->ep, EPOLL_CTL_DEL, t->up, NULL);
		close(t->up);
		t->up = -1;
	}
}

/* A tunnel in T_HEAD, counted; NULL at the limit or without memory. */
tunnel *new_tunnel(proxy *p, uint32_t id)
{
	tunnel *t = NULL;
	if (p->ntunnels >= p->cfg.max_tunnels || !(t = calloc(1, sizeof(*t))) ||
	    !(t->ubuf = malloc(MSB_EGRESS_WINDOW))) {
		free(t);
		return NULL;
	}
	t->tag = TAG_TUNNEL;
	t->gtag = TAG_GUEST;
	t->id = id;
	t->up = -1;
	t->guest = -1;
	t->dpipe[0] = t->dpipe[1] = t->upipe[0] = t->upipe[1] = -1;
	t->state = T_HEAD;
	t->in_credit.avail = MSB_EGRESS_WINDOW;
	t->out_credit.avail = MSB_EGRESS_WINDOW;
	t->deadline = now_ms() + p->cfg.header_timeout_ms;
	t->next = p->tunnels;
	p->tunnels = t;
	p->ntunnels++;
	return t;
}

static void on_open(proxy *p, uint32_t id)
{
	if (!msb_proto_channel_is_agent(id) || id <= p->last_id) {
		shim_log("msb-shim: egress: the agent opened channel %u out of order", id);
		p->broken = true;
		return;
	}
	p->last_id = id;
	if (!new_tunnel(p, id))
		send_error(p, id, MSB_PROTO_ERR_LIMIT, "too many egress tunnels");
}

static void on_data(proxy *p, tunnel *t, const msb_proto_data *d)
{
	if (d->stream != MSB_PROTO_STDOUT || t->agent_eof ||
	    msb_proto_credit_take(&t->in_credit, d->len) < 0) {
		shim_log("msb-shim: egress: the agent sent data beyond credit");
		p->broken = true;
		return;
	}
	t->received += d->len;
	uint32_t keep = d->len;
	if (t->state == T_LINGER || (t->state == T_OPEN && t->plain && t->body_left < keep)) {
		/* Refused, or past the one request a plain connection carries. */
		keep = t->state == T_LINGER ? 0 : (uint32_t)t->body_left;
	}
	if (t->uhead + t->ulen + keep > MSB_EGRESS_WINDOW) {
		memmove(t->ubuf, t->ubuf + t->uhead, t->ulen);
		t->uhead = 0;
	}
	memcpy(t->ubuf + t->uhead + t->ulen, d->bytes, keep);
	t->ulen += keep;
	if (t->state == T_OPEN && t->plain)
		t->body_left -= keep;
	regrant(p, t, d->len - keep, false);
	if (t->state == T_HEAD)
		on_head(p, t);
	else if (t->state == T_OPEN)
		flush_up(p, t);
}

void on_agent_eof(proxy *p, tunnel *t)
{
	t->agent_eof = true;
	switch (t->state) {
	case T_HEAD:
		send_eof(p, t);
		tunnel_finish(p, t, NULL);
		break;
	case T_DIAL:
		break; /* the request is complete: carry on */
	case T_OPEN:
		flush_up(p, t);
		break;
	case T_LINGER:
		if (direct(t))
			progress(p, t); /* ends once the pipe to the guest is empty */
		else
			tunnel_finish(p, t, NULL);
		break;
	}
}

static void on_frame(proxy *p, const msb_proto_frame *f)
{
	msb_proto_msg m;
	int rc = msb_proto_decode(f, &m);
	if (rc < 0 || !msb_proto_agent_may_send(m.type)) {
		shim_log("msb-shim: egress: bad frame from the agent: %s", msb_proto_strerror(rc));
		p->broken = true;
		return;
	}
	if (m.type == MSB_PROTO_PING) {
		uint8_t buf[32];
		queue(p, buf, msb_proto_enc_ping(buf, sizeof(buf), MSB_PROTO_PONG, m.u.cookie));
		return;
	}
	if (m.type == MSB_PROTO_EGRESS_OPEN) {
		on_open(p, m.channel);
		return;
	}
	if (!msb_proto_channel_is_agent(m.channel) || m.channel > p->last_id) {
		if (m.type != MSB_PROTO_PONG) {
			shim_log("msb-shim: egress: unexpected %s on channel %u",
				 msb_proto_type_name(m.type), m.channel);
			p->broken = true;
		}
		return;
	}
	tunnel *t = find(p, m.channel);
	if (!t)
		return; /* stale: ended here already */
	switch (m.type) {
	case MSB_PROTO_DATA:
		on_data(p, t, &m.u.data);
		break;
	case MSB_PROTO_EOF:
		if (m.u.stream != MSB_PROTO_STDOUT || t->agent_eof) {
			p->broken = true;
			return;
		}
		on_agent_eof(p, t);
		break;
	case MSB_PROTO_CREDIT:
		if (msb_proto_credit_grant(&t->out_credit, m.u.credit) < 0)
			p->broken = true;
		break;
	case MSB_PROTO_ERROR:
		tunnel_finish(p, t, NULL);
		break;
	default:
		p->broken = true;
		break;
	}
}

static void on_agent(proxy *p, uint32_t events)
{
	if (events & EPOLLOUT)
		flush(p);
	if (!(events & (EPOLLIN | EPOLLHUP | EPOLLERR)))
		return;
	for (int rounds = 0; rounds < 16 && !p->broken; rounds++) {
		uint8_t *dst;
		size_t room = msb_proto_reader_space(p->rd, &dst);
		if (room == 0) {
			p->broken = true;
			return;
		}
		ssize_t n = recv(p->fd, dst, room, MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n <= 0) {
			p->broken = true;
			return;
		}
		msb_proto_reader_commit(p->rd, (size_t)n);
		msb_proto_frame f;
		int rc;
		while (!p->broken && (rc = msb_proto_reader_next(p->rd, &f)) != 0) {
			if (rc < 0) {
				p->broken = true;
				return;
			}
			on_frame(p, &f);
		}
		if (queued(p) >= OUTQ_HIGH)
			return;
	}
}

static void sweep(proxy *p)
{
	tunnel **tp = &p->tunnels;
	while (*tp) {
		tunnel *t = *tp;
		if (t->done) {
			*tp = t->next;
			p->ntunnels--;
			if (t->slot) /* never recorded: its room goes back */
				p->slots--;
			msb_egress__request_clear(&t->req);
			free(t->pre);
			free(t->ubuf);
			free(t);
		} else {
			tp = &t->next;
		}
	}
}

static void deadlines(proxy *p)
{
	int64_t now = now_ms();
	for (tunnel *t = p->tunnels; t; t = t->next) {
		if (t->done || !t->deadline || now < t->deadline)
			continue;
		switch (t->state) {
		case T_HEAD:
			/* slow-loris: the head never completed */
			refuse(p, t, 408, "Request Timeout", "header-timeout");
			break;
		case T_DIAL:
			epoll_ctl(p->ep, EPOLL_CTL_DEL, t->up, NULL);
			close(t->up);
			t->up = -1;
			dial_next(p, t);
			break;
		default:
			tunnel_abort(p, t, "egress tunnel closed", NULL);
			break;
		}
	}
}

int proxy_timeout_ms(const proxy *p)
{
	int64_t next = INT64_MAX;
	for (const tunnel *t = p->tunnels; t; t = t->next)
		if (!t->done && t->deadline && t->deadline < next)
			next = t->deadline;
	if (next == INT64_MAX)
		return -1;
	int64_t left = next - now_ms();
	return left < 0 ? 0 : left > 60000 ? 60000 : (int)left;
}

int proxy_fd(const proxy *p)
{
	return p->ep;
}

int proxy_run(proxy *p)
{
	struct epoll_event evs[64];
	int n = epoll_wait(p->ep, evs, 64, 0);
	for (int i = 0; i < n && !p->broken; i++) {
		int tag = *(int *)evs[i].data.ptr;
		if (tag == TAG_AGENT) {
			on_agent(p, evs[i].events);
		} else if (tag == TAG_LISTEN) {
			accept_guests(p);
		} else if (tag == TAG_GUEST) {
			tunnel *t = (tunnel *)((char *)evs[i].data.ptr - offsetof(tunnel, gtag));
			if (!t->done)
				on_guest(p, t, evs[i].events);
		} else {
			tunnel *t = evs[i].data.ptr;
			if (!t->done)
				on_up(p, t, evs[i].events);
		}
	}
	if (!p->broken)
		deadlines(p);
	for (tunnel *t = p->tunnels; t && !p->broken; t = t->next) {
		if (!t->done)
			up_interest(p, t);
		if (!t->done && direct(t))
			guest_interest(p, t);
	}
	if (!p->broken)
		flush(p);
	sweep(p);
	listen_interest(p);
	if (p->broken) {
		shim_log("msb-shim: egress: the agent connection is lost; the proxy stops");
		return -1;
	}
	return 0;
}

int proxy_reconfigure(proxy *p, msb_egress_config *cfg)
{
	if (cfg->max_tunnels != p->cfg.max_tunnels)
		return -1;
	/* Open tunnels keep their decision; the next request gets the new rules.
	 * (The agent's socket is reached through the directory's fd, proxy_start:
	 * a claim renames the directory.) */
	msb_egress__config_clear(&p->cfg);
	p->cfg = *cfg;
	memset(cfg, 0, sizeof(*cfg));
	return 0;
}

void proxy_stop(proxy *p)
{
	if (!p)
		return;
	for (tunnel *t = p->tunnels; t; t = t->next)
		tunnel_finish(p, t, NULL);
	sweep(p);
	if (p->fd >= 0)
		close(p->fd);
	if (p->listen_fd >= 0)
		close(p->listen_fd);
	if (p->ep >= 0)
		close(p->ep);
	if (p->log_fd >= 0)
		close(p->log_fd);
	msb_egress__config_clear(&p->cfg);
	free(p->rd);
	msb_proto_outq_free(&p->out);
	free(p);
}
