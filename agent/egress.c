/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Egress tunnels (docs/internals/egress.md). When a host connection (the
 * shim's) sends EGRESS_LISTEN, the agent listens on 127.0.0.1:PORT inside the
 * sandbox; each accepted connection becomes an agent-opened channel
 * (EGRESS_OPEN, even id) on that host connection, and its bytes are relayed
 * with the protocol's credit flow. The agent decides nothing here: it does
 * not read the request; the shim's proxy does, on the host side. At most
 * max_tunnels are open; beyond that the agent stops accepting (clients wait
 * in the listen backlog). With MSB_PROTO_EGRESS_HANDOVER the listening
 * socket goes to the host instead, and this file relays nothing. Workloads
 * started after the listener is up get
 * HTTP(S)_PROXY pointing at it and NO_PROXY for loopback.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent.h"

static char proxy_env[6][48];
static const char *proxy_envp[7];

const char *const *egress_env(struct agent *a)
{
	return a->egress && a->egress->ready && !a->egress->closed ? proxy_envp : NULL;
}

static void set_env(uint16_t port)
{
	static const char *const keys[] = {"HTTP_PROXY", "HTTPS_PROXY", "http_proxy",
					   "https_proxy"};
	for (int i = 0; i < 4; i++)
		snprintf(proxy_env[i], sizeof(proxy_env[i]), "%s=http://127.0.0.1:%u", keys[i],
			 (unsigned)port);
	snprintf(proxy_env[4], sizeof(proxy_env[4]), "NO_PROXY=localhost,127.0.0.1,::1");
	snprintf(proxy_env[5], sizeof(proxy_env[5]), "no_proxy=localhost,127.0.0.1,::1");
	for (int i = 0; i < 6; i++)
		proxy_envp[i] = proxy_env[i];
	proxy_envp[6] = NULL;
}

static void channel_error(struct conn *c, uint32_t id, uint16_t code, const char *msg)
{
	uint8_t buf[MSB_PROTO_HEADER_SIZE + 4 + MSB_PROTO_MAX_ERROR_MSG];
	conn_queue(c, buf, msb_proto_enc_error(buf, sizeof(buf), id, code, msg));
}

/*
 * The hand-over (MSB_PROTO_EGRESS_HANDOVER): EGRESS_READY goes out with the
 * listening socket attached, so that the host (the shim, on the same
 * machine) accepts and relays the guest's connections itself. It must be
 * the next bytes on the connection: what is queued is flushed first, and if
 * it cannot all go now the hand-over is refused (the shim asks right after
 * HELLO, with nothing else in flight). NULL, or why not.
 */
static const char *handover(struct conn *c, int fd, const uint8_t *frame, int len)
{
	if (len <= 0)
		return "cannot encode EGRESS_READY";
	conn_flush(c);
	if (c->dead || c->closing || conn_queued(c) > 0)
		return "egress hand-over: the connection is busy";
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} u;
	memset(&u, 0, sizeof(u));
	struct iovec iov = {.iov_base = (void *)frame, .iov_len = (size_t)len};
	struct msghdr mh = {.msg_iov = &iov,
			    .msg_iovlen = 1,
			    .msg_control = u.buf,
			    .msg_controllen = sizeof(u.buf)};
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	ssize_t w;
	do
		w = sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
	while (w < 0 && errno == EINTR);
	/* A short write would leave a partial frame: the frame is 12 bytes on
	 * an idle connection, so all or nothing in practice; a partial one is
	 * not recoverable and ends the connection. */
	if (w == len)
		return NULL;
	if (w > 0) {
		c->closing = true;
		c->close_deadline_ns = 0;
	}
	return w < 0 && errno == EOPNOTSUPP ? "egress hand-over needs a unix connection"
					    : "egress hand-over: cannot send the socket";
}

void egress_listen(struct agent *a, struct conn *c, uint32_t id, const msb_proto_egress_listen *l)
{
	if (a->egress) {
		channel_error(c, id, MSB_PROTO_ERR_UNSUPPORTED, "egress is already listening");
		return;
	}
	struct egress *g = calloc(1, sizeof(*g));
	if (!g) {
		channel_error(c, id, MSB_PROTO_ERR_INTERNAL, "out of memory");
		return;
	}
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int one = 1;
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_port = htons(l->port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 128) < 0) {
		char msg[96];
		snprintf(msg, sizeof(msg), "listen on 127.0.0.1:%u: %s", (unsigned)l->port,
			 strerror(errno));
		if (fd >= 0)
			close(fd);
		free(g);
		channel_error(c, id, MSB_PROTO_ERR_SPAWN, msg);
		return;
	}
	g->listen_fd = fd;
	g->conn = c;
	g->listen_ch = id;
	g->max = l->max_tunnels;
	g->window = l->window;
	uint8_t buf[MSB_PROTO_HEADER_SIZE + 4];
	int len = msb_proto_enc_egress_empty(buf, sizeof(buf), MSB_PROTO_EGRESS_READY, id);
	if (l->flags & MSB_PROTO_EGRESS_HANDOVER) {
		const char *why = handover(c, fd, buf, len);
		close(fd);
		g->listen_fd = -1; /* the host's now: nothing to accept here */
		if (why) {
			free(g);
			channel_error(c, id, MSB_PROTO_ERR_UNSUPPORTED, why);
			return;
		}
	}
	g->ready = true;
	a->egress = g;
	set_env(l->port);
	if (!(l->flags & MSB_PROTO_EGRESS_HANDOVER))
		conn_queue(c, buf, len);
}

static void tunnel_close(struct tunnel *t)
{
	if (t->fd >= 0)
		close(t->fd);
	t->fd = -1;
	t->done = true;
}

void egress_accept(struct agent *a)
{
	struct egress *g = a->egress;
	while (g && !g->closed && g->ntunnels < g->max && !g->conn->dead && !g->conn->closing) {
		int fd = accept4(g->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			return;
		}
		struct tunnel *t = calloc(1, sizeof(*t));
		uint8_t *in = malloc(g->window);
		if (!t || !in || g->next_id > UINT32_MAX - 2) {
			free(t);
			free(in);
			close(fd);
			return;
		}
		int one = 1;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		g->next_id += 2;
		t->id = g->next_id;
		t->fd = fd;
		t->in_buf = in;
		t->out_credit.avail = g->window;
		t->in_credit.avail = g->window;
		t->next = g->tunnels;
		g->tunnels = t;
		g->ntunnels++;
		uint8_t buf[MSB_PROTO_HEADER_SIZE + 4];
		conn_queue(
			g->conn, buf,
			msb_proto_enc_egress_empty(buf, sizeof(buf), MSB_PROTO_EGRESS_OPEN, t->id));
	}
}

short egress_listen_events(const struct agent *a)
{
	const struct egress *g = a->egress;
	if (!g || g->closed || g->listen_fd < 0 || g->ntunnels >= g->max || g->conn->dead ||
	    g->conn->closing || conn_queued(g->conn) >= AGENT_OUTQ_HIGH)
		return 0;
	return POLLIN;
}

short egress_tunnel_events(const struct agent *a, const struct tunnel *t)
{
	const struct egress *g = a->egress;
	short ev = 0;
	if (t->done || t->fd < 0)
		return 0;
	if (!t->eof_sent && t->out_credit.avail > 0 && conn_queued(g->conn) < AGENT_OUTQ_HIGH)
		ev |= POLLIN;
	if (t->in_len > 0)
		ev |= POLLOUT;
	return ev;
}

static void maybe_finish(struct tunnel *t)
{
	if (t->eof_sent && t->eof_received && t->in_len == 0)
		tunnel_close(t);
}

static void abort_tunnel(struct egress *g, struct tunnel *t, const char *why)
{
	if (t->done)
		return;
	channel_error(g->conn, t->id, MSB_PROTO_ERR_INTERNAL, why);
	tunnel_close(t);
}

/* Guest -> host: read what credit allows straight into a DATA frame. */
static void on_readable(struct egress *g, struct tunnel *t)
{
	for (int rounds = 0; rounds < 4 && !t->done && !t->eof_sent; rounds++) {
		size_t n = t->out_credit.avail;
		size_t max = g->conn->peer_max_payload - 1;
		if (n > max)
			n = max;
		if (n == 0 || conn_queued(g->conn) >= AGENT_OUTQ_HIGH)
			return;
		uint8_t *dst = conn_reserve(g->conn, MSB_PROTO_DATA_OVERHEAD + n);
		if (!dst)
			return;
		ssize_t r = recv(t->fd, dst + MSB_PROTO_DATA_OVERHEAD, n, MSG_DONTWAIT);
		if (r < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (r < 0) {
			abort_tunnel(g, t, "guest connection reset");
			return;
		}
		uint8_t buf[MSB_PROTO_HEADER_SIZE + 1];
		if (r == 0) {
			conn_queue(g->conn, buf,
				   msb_proto_enc_eof(buf, sizeof(buf), t->id, MSB_PROTO_STDOUT));
			t->eof_sent = true;
			maybe_finish(t);
			return;
		}
		msb_proto_put_header(dst, (uint32_t)r + 1, MSB_PROTO_DATA, 0, t->id);
		dst[MSB_PROTO_HEADER_SIZE] = MSB_PROTO_STDOUT;
		conn_commit(g->conn, MSB_PROTO_DATA_OVERHEAD + (size_t)r);
		msb_proto_credit_take(&t->out_credit, (uint32_t)r);
		if ((size_t)r < n)
			return;
	}
}

/* Host -> guest: write what is buffered; re-grant what went out. */
static void on_writable(struct egress *g, struct tunnel *t)
{
	while (t->in_len > 0 && !t->done) {
		ssize_t w =
			send(t->fd, t->in_buf + t->in_head, t->in_len, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN)
			break;
		if (w < 0) {
			abort_tunnel(g, t, "guest connection reset");
			return;
		}
		t->in_head += (size_t)w;
		t->in_len -= (size_t)w;
		t->regrant += (uint32_t)w;
	}
	if (t->in_len == 0)
		t->in_head = 0;
	/* A quarter window at a time: a peer that waits for credit has a
	 * whole window out, so the threshold is always reached. */
	if (t->regrant >= g->window / 4) {
		uint8_t buf[MSB_PROTO_HEADER_SIZE + 4];
		conn_queue(g->conn, buf, msb_proto_enc_credit(buf, sizeof(buf), t->id, t->regrant));
		msb_proto_credit_grant(&t->in_credit, t->regrant);
		t->regrant = 0;
	}
	if (t->in_len == 0 && t->eof_received && !t->shut_wr) {
		shutdown(t->fd, SHUT_WR);
		t->shut_wr = true;
	}
	maybe_finish(t);
}

void egress_on_tunnel(struct agent *a, struct tunnel *t, short revents)
{
	struct egress *g = a->egress;
	if (t->done || g->closed || g->conn->dead)
		return;
	if (revents & POLLOUT)
		on_writable(g, t);
	if (!t->done && (revents & (POLLIN | POLLHUP | POLLERR)))
		on_readable(g, t);
}

static struct tunnel *find(struct egress *g, uint32_t id)
{
	for (struct tunnel *t = g->tunnels; t; t = t->next)
		if (t->id == id && !t->done)
			return t;
	return NULL;
}

void egress_on_frame(struct agent *a, struct conn *c, const msb_proto_msg *m)
{
	struct egress *g = a->egress;
	if (!g || g->closed || g->conn != c || m->channel > g->next_id) {
		conn_fail(c, MSB_PROTO_ERR_PROTOCOL, "frame on an egress channel never opened");
		return;
	}
	struct tunnel *t = find(g, m->channel);
	if (!t)
		return; /* ended here already: stale */
	switch (m->type) {
	case MSB_PROTO_DATA: {
		/* Credit bounds what is buffered: in_len + len <= window. */
		if (m->u.data.stream != MSB_PROTO_STDIN || t->eof_received ||
		    msb_proto_credit_take(&t->in_credit, m->u.data.len) < 0) {
			conn_fail(c, MSB_PROTO_ERR_PROTOCOL, "egress data beyond credit");
			return;
		}
		const uint8_t *p = m->u.data.bytes;
		size_t len = m->u.data.len;
		if (t->in_len == 0 && t->fd >= 0) {
			/* Nothing queued: straight from the frame to the guest. */
			ssize_t w = send(t->fd, p, len, MSG_DONTWAIT | MSG_NOSIGNAL);
			if (w < 0 && errno != EAGAIN && errno != EINTR) {
				abort_tunnel(g, t, "guest connection reset");
				return;
			}
			if (w > 0) {
				p += w;
				len -= (size_t)w;
				t->regrant += (uint32_t)w;
			}
		}
		if (t->in_head + t->in_len + len > g->window) {
			memmove(t->in_buf, t->in_buf + t->in_head, t->in_len);
			t->in_head = 0;
		}
		memcpy(t->in_buf + t->in_head + t->in_len, p, len);
		t->in_len += len;
		on_writable(g, t); /* re-grants what went out */
		break;
	}
	case MSB_PROTO_EOF:
		if (m->u.stream != MSB_PROTO_STDIN || t->eof_received) {
			conn_fail(c, MSB_PROTO_ERR_PROTOCOL, "bad egress EOF");
			return;
		}
		t->eof_received = true;
		on_writable(g, t);
		break;
	case MSB_PROTO_CREDIT:
		if (msb_proto_credit_grant(&t->out_credit, m->u.credit) < 0)
			conn_fail(c, MSB_PROTO_ERR_PROTOCOL, "egress credit beyond the window");
		break;
	case MSB_PROTO_ERROR:
		/* the proxy refused or the destination went away: RST the guest */
		if (t->fd >= 0) {
			struct linger lg = {.l_onoff = 1, .l_linger = 0};
			setsockopt(t->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
		}
		tunnel_close(t);
		break;
	default:
		conn_fail(c, MSB_PROTO_ERR_PROTOCOL, "unexpected frame on an egress channel");
		break;
	}
}

void egress_sweep(struct agent *a)
{
	struct egress *g = a->egress;
	if (!g)
		return;
	if (g->closed)
		for (struct tunnel *t = g->tunnels; t; t = t->next)
			t->done = true;
	struct tunnel **tp = &g->tunnels;
	while (*tp) {
		struct tunnel *t = *tp;
		if (t->done) {
			*tp = t->next;
			g->ntunnels--;
			free(t->in_buf);
			free(t);
		} else {
			tp = &t->next;
		}
	}
	if (g->closed) {
		free(g);
		a->egress = NULL;
	}
}

void egress_conn_closed(struct agent *a, struct conn *c)
{
	struct egress *g = a->egress;
	if (!g || g->closed || g->conn != c)
		return;
	/* Freed by egress_sweep() at the end of the turn: the poll set of this
	 * turn may still name the tunnels. */
	for (struct tunnel *t = g->tunnels; t; t = t->next)
		tunnel_close(t);
	if (g->listen_fd >= 0)
		close(g->listen_fd);
	g->listen_fd = -1;
	g->closed = true;
}
