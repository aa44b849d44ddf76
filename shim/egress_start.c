/* SPDX-License-Identifier: Apache-2.0 */
/* msb-shim's egress proxy: the start (docs/internals/egress.md). */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "backends/ns/boundary/boundary.h"
#include "egress_int.h"

/* ---- start: connect, HELLO, EGRESS_LISTEN, EGRESS_READY ---------------------- */

/* recv() that keeps the first descriptor passed (EGRESS_READY's listener,
 * MSB_PROTO_EGRESS_HANDOVER) and closes any other. */
static ssize_t recv_fds(proxy *p, uint8_t *dst, size_t room)
{
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(4 * sizeof(int))];
	} u;
	struct iovec iov = {.iov_base = dst, .iov_len = room};
	struct msghdr mh = {.msg_iov = &iov,
			    .msg_iovlen = 1,
			    .msg_control = u.buf,
			    .msg_controllen = sizeof(u.buf)};
	ssize_t n = recvmsg(p->fd, &mh, MSG_CMSG_CLOEXEC);
	if (n < 0)
		return n;
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		size_t k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < k; i++) {
			int fd;
			memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
			if (p->listen_fd < 0)
				p->listen_fd = fd;
			else
				close(fd);
		}
	}
	return n;
}

/* The handed-over descriptor must be a listening TCP socket. */
static bool is_listener(int fd)
{
	int v = 0;
	socklen_t len = sizeof(v);
	if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &v, &len) < 0 || !v)
		return false;
	len = sizeof(v);
	if (getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &v, &len) < 0 || v != IPPROTO_TCP)
		return false;
	int fl = fcntl(fd, F_GETFL);
	return fl >= 0 && fcntl(fd, F_SETFL, fl | O_NONBLOCK) == 0;
}

static int wait_frame(proxy *p, int64_t deadline, msb_proto_msg *m)
{
	for (;;) {
		msb_proto_frame f;
		int rc = msb_proto_reader_next(p->rd, &f);
		if (rc < 0)
			return -EPROTO;
		if (rc > 0)
			return msb_proto_decode(&f, m) < 0 ? -EPROTO : 0;
		int64_t left = deadline - now_ms();
		struct pollfd pf = {.fd = p->fd, .events = POLLIN};
		if (left <= 0 || poll(&pf, 1, (int)left) <= 0)
			return -ETIMEDOUT;
		uint8_t *dst;
		size_t room = msb_proto_reader_space(p->rd, &dst);
		ssize_t n = recv_fds(p, dst, room);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -ECONNRESET;
		msb_proto_reader_commit(p->rd, (size_t)n);
	}
}

static int send_all(int fd, const uint8_t *b, size_t n)
{
	while (n > 0) {
		ssize_t w = send(fd, b, n, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -errno;
		b += w;
		n -= (size_t)w;
	}
	return 0;
}

/* EGRESS_LISTEN on a channel: 0 on EGRESS_READY, 1 when the agent answers
 * ERROR, -1 otherwise; the reason in errbuf. */
static int ask_listen(proxy *p, int64_t deadline, uint32_t ch, uint32_t flags, char *errbuf,
		      size_t errlen)
{
	uint8_t buf[64];
	msb_proto_msg m;
	msb_proto_egress_listen l = {.port = MSB_EGRESS_PORT,
				     .max_tunnels = (uint16_t)p->cfg.max_tunnels,
				     .window = MSB_EGRESS_WINDOW,
				     .flags = flags};
	int len = msb_proto_enc_egress_listen(buf, sizeof(buf), ch, &l);
	if (len < 0 || send_all(p->fd, buf, (size_t)len) < 0 || wait_frame(p, deadline, &m) < 0) {
		snprintf(errbuf, errlen, "egress: the agent did not answer EGRESS_LISTEN");
		return -1;
	}
	if (m.type == MSB_PROTO_ERROR && m.channel == ch) {
		snprintf(errbuf, errlen, "egress: the agent cannot listen: %.*s",
			 (int)m.u.error.message.len, (const char *)m.u.error.message.ptr);
		return 1;
	}
	if (m.type != MSB_PROTO_EGRESS_READY || m.channel != ch) {
		snprintf(errbuf, errlen, "egress: unexpected %s from the agent",
			 msb_proto_type_name(m.type));
		return -1;
	}
	return 0;
}

int proxy_start(proxy **out, msb_egress_config *cfg, int dfd, bool handover, char *errbuf,
		size_t errlen)
{
	proxy *p = calloc(1, sizeof(*p));
	if (!p) {
		snprintf(errbuf, errlen, "out of memory");
		return -1;
	}
	p->tag = TAG_AGENT;
	p->ltag = TAG_LISTEN;
	p->fd = p->ep = p->log_fd = p->listen_fd = -1;
	p->dfd = dfd;
	p->cfg = *cfg;
	memset(cfg, 0, sizeof(*cfg));
	p->rd = malloc(sizeof(*p->rd));
	if (!p->rd) {
		snprintf(errbuf, errlen, "out of memory");
		goto fail;
	}
	msb_proto_reader_init(p->rd, MSB_PROTO_MAX_PAYLOAD);
	(void)msb_proto_outq_init(&p->out, OUTQ_INITIAL, OUTQ_MAX);
	p->log_fd = openat(dfd, MSB_EGRESS_LOG_NAME,
			   O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (p->log_fd < 0) {
		snprintf(errbuf, errlen, "egress log: %s", strerror(errno));
		goto fail;
	}
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d/%s", dfd, MSB_NS_STATE_SOCKET);
	p->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (p->fd < 0 || connect(p->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		snprintf(errbuf, errlen, "egress: connect to the agent: %s", strerror(errno));
		goto fail;
	}
	int64_t deadline = now_ms() + HANDSHAKE_MS;
	msb_proto_hello h;
	msb_proto_hello_default(&h, MSB_PROTO_ROLE_HOST);
	uint8_t buf[64];
	int len = msb_proto_enc_hello(buf, sizeof(buf), &h);
	msb_proto_msg m;
	uint16_t version;
	if (len < 0 || send_all(p->fd, buf, (size_t)len) < 0 || wait_frame(p, deadline, &m) < 0 ||
	    m.type != MSB_PROTO_HELLO || msb_proto_hello_negotiate(&h, &m.u.hello, &version) < 0) {
		snprintf(errbuf, errlen, "egress: no HELLO from the agent");
		goto fail;
	}
	p->peer_max_payload = m.u.hello.max_payload;
	/* One relay instead of two: the agent hands its listener over and the
	 * guest's connections are served here (docs/internals/egress.md).
	 * MSB_SHIM_EGRESS_RELAY=framed keeps the agent's relay (the path a VM
	 * takes), for comparison and its tests; so does an agent that refuses
	 * the hand-over, with a log line. */
	const char *relay = getenv("MSB_SHIM_EGRESS_RELAY");
	bool framed = !handover || (relay && strcmp(relay, "framed") == 0);
	int rc = ask_listen(p, deadline, LISTEN_CHANNEL, framed ? 0 : MSB_PROTO_EGRESS_HANDOVER,
			    errbuf, errlen);
	if (rc > 0 && !framed) {
		shim_log("msb-shim: %s; the agent relays instead", errbuf);
		framed = true;
		rc = ask_listen(p, deadline, LISTEN_CHANNEL + 2, 0, errbuf, errlen);
	}
	if (rc != 0)
		goto fail;
	if (framed && p->listen_fd >= 0) { /* not asked for */
		close(p->listen_fd);
		p->listen_fd = -1;
	}
	if (!framed && (p->listen_fd < 0 || !is_listener(p->listen_fd))) {
		snprintf(errbuf, errlen, "egress: the agent handed over no listening socket");
		goto fail;
	}
	int fl = fcntl(p->fd, F_GETFL);
	p->ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = p};
	struct epoll_event lev = {.events = EPOLLIN, .data.ptr = &p->ltag};
	p->listen_events = EPOLLIN;
	if (fl < 0 || fcntl(p->fd, F_SETFL, fl | O_NONBLOCK) < 0 || p->ep < 0 ||
	    epoll_ctl(p->ep, EPOLL_CTL_ADD, p->fd, &ev) < 0 ||
	    (p->listen_fd >= 0 && epoll_ctl(p->ep, EPOLL_CTL_ADD, p->listen_fd, &lev) < 0)) {
		snprintf(errbuf, errlen, "egress: %s", strerror(errno));
		goto fail;
	}
	*out = p;
	return 0;
fail:
	proxy_stop(p);
	return -1;
}
