/* SPDX-License-Identifier: Apache-2.0 */
/*
 * msb-shim's egress proxy: direct tunnels (docs/internals/egress.md). The
 * agent handed its listener over (MSB_PROTO_EGRESS_HANDOVER), so the guest's
 * connections are accepted here; the head is read and decided as for a
 * framed tunnel (egress_proxy.c), and once open each direction is spliced
 * through a pipe: one relay, and no copy through this process.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "egress_int.h"

int open_pipes(tunnel *t)
{
	if (pipe2(t->dpipe, O_NONBLOCK | O_CLOEXEC) < 0 ||
	    pipe2(t->upipe, O_NONBLOCK | O_CLOEXEC) < 0)
		return -1;
	/* Past the user's pipe budget the kernel refuses: keep its default. */
	int a = fcntl(t->dpipe[1], F_SETPIPE_SZ, PIPE_CAP);
	int b = fcntl(t->upipe[1], F_SETPIPE_SZ, PIPE_CAP);
	if (a < 0)
		a = fcntl(t->dpipe[1], F_GETPIPE_SZ);
	if (b < 0)
		b = fcntl(t->upipe[1], F_GETPIPE_SZ);
	if (a <= 0 || b <= 0)
		return -1;
	t->pcap = (size_t)(a < b ? a : b);
	return 0;
}

/* ---- direct tunnels: the guest's connection is here ---------------------- */

/*
 * The destination's end and the guest's done both ways: shut the guest's
 * side once the pipe to it is empty, then the tunnel ends when the guest
 * has ended too (LINGER_MS at most after the shutdown).
 */
void progress(proxy *p, tunnel *t)
{
	if (t->done || !direct(t))
		return;
	if (t->eof_sent && t->dlen == 0 && !t->guest_shut) {
		shutdown(t->guest, SHUT_WR);
		t->guest_shut = true;
	}
	if (t->state == T_LINGER && t->guest_shut) {
		if (t->agent_eof) {
			tunnel_finish(p, t, NULL);
			return;
		}
		if (!t->deadline)
			t->deadline = now_ms() + LINGER_MS;
	}
}

/* Move what a pipe holds (`*left` bytes) to a socket without blocking,
 * until the pipe is empty or the socket full; `*moved` adds what went.
 * 0, or -1 when the socket failed. */
int pipe_drain(int from, int to, size_t *left, uint64_t *moved)
{
	while (*left > 0) {
		ssize_t w = splice(from, NULL, to, NULL, *left, SPLICE_F_NONBLOCK);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN)
			return 0;
		if (w <= 0)
			return -1;
		*left -= (size_t)w;
		*moved += (uint64_t)w;
	}
	return 0;
}

/* Destination pipe -> guest. */
static void drain_down(proxy *p, tunnel *t)
{
	uint64_t moved = 0;
	if (!t->done && pipe_drain(t->dpipe[0], t->guest, &t->dlen, &moved) < 0) {
		tunnel_abort(p, t, "guest connection reset", NULL);
		return;
	}
	if (moved)
		t->dstall = false;
	progress(p, t);
}

/*
 * Destination -> pipe -> guest, a few rounds per wakeup. A splice that
 * finds the pipe's slots full (EAGAIN with bytes in it, although epoll said
 * readable) stops reading until the guest has taken some.
 */
void read_up_direct(proxy *p, tunnel *t)
{
	for (int rounds = 0; rounds < 4 && !t->done && !t->up_eof; rounds++) {
		size_t room = t->pcap - t->dlen;
		if (room == 0 || t->dstall)
			return;
		ssize_t r = splice(t->up, NULL, t->dpipe[1], NULL, room, SPLICE_F_NONBLOCK);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && errno == EAGAIN) {
			t->dstall = t->dlen > 0;
			return;
		}
		if (r < 0) {
			tunnel_abort(p, t, "destination reset", NULL);
			return;
		}
		if (r == 0) {
			t->up_eof = true;
			send_eof(p, t);
			t->state = T_LINGER;
			t->deadline = 0; /* set once the guest's side is shut */
			progress(p, t);
			return;
		}
		t->dlen += (size_t)r;
		t->rec.bytes_down += (uint64_t)r;
		drain_down(p, t);
	}
}

/* Guest -> the head buffer, the pipe to the destination, or nowhere (a
 * refused connection, or past the one request of a plain one). */
static void read_guest(proxy *p, tunnel *t)
{
	for (int rounds = 0; rounds < 4 && !t->done && !t->agent_eof; rounds++) {
		bool discard = t->state == T_LINGER ||
			       (t->state == T_OPEN && t->plain && t->body_left == 0);
		ssize_t r;
		if (discard) {
			char sink[16384];
			r = recv(t->guest, sink, sizeof(sink), MSG_DONTWAIT);
		} else if (t->state == T_HEAD || t->state == T_DIAL) {
			size_t room = MSB_EGRESS_WINDOW - t->uhead - t->ulen;
			if (room == 0)
				return;
			r = recv(t->guest, t->ubuf + t->uhead + t->ulen, room, MSG_DONTWAIT);
		} else {
			/* T_OPEN: what was buffered goes first */
			if (t->ulen > 0 || t->pre_off < t->pre_len || t->ustall)
				return;
			size_t room = t->pcap - t->plen;
			if (t->plain && t->body_left < room)
				room = (size_t)t->body_left;
			if (room == 0)
				return;
			r = splice(t->guest, NULL, t->upipe[1], NULL, room, SPLICE_F_NONBLOCK);
			if (r < 0 && errno == EAGAIN && t->plen > 0) {
				t->ustall = true;
				return;
			}
		}
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && errno == EAGAIN)
			return;
		if (r < 0) {
			tunnel_abort(p, t, "guest connection reset", NULL);
			return;
		}
		if (r == 0) {
			on_agent_eof(p, t);
			return;
		}
		t->received += (uint64_t)r;
		if (discard)
			continue;
		if (t->state == T_OPEN) {
			t->plen += (size_t)r;
			if (t->plain)
				t->body_left -= (uint64_t)r;
			flush_up(p, t);
		} else {
			t->ulen += (size_t)r;
			if (t->state == T_HEAD)
				on_head(p, t);
		}
	}
}

void on_guest(proxy *p, tunnel *t, uint32_t events)
{
	if (events & EPOLLERR) {
		tunnel_abort(p, t, "guest connection reset", NULL);
		return;
	}
	if (events & EPOLLOUT)
		drain_down(p, t);
	if (!t->done && (events & (EPOLLIN | EPOLLHUP)))
		read_guest(p, t);
	/* epoll reports HUP whatever the interest: a guest whose end was read
	 * and whose connection is down both ways (a reset: this side is shut
	 * only once the tunnel ends) has nothing more to give or take */
	if (!t->done && (events & EPOLLHUP) && t->agent_eof)
		tunnel_abort(p, t, "guest connection reset", NULL);
}

void guest_interest(proxy *p, tunnel *t)
{
	uint32_t ev = 0;
	if (!t->agent_eof) {
		switch (t->state) {
		case T_HEAD:
		case T_LINGER:
			ev = EPOLLIN;
			break;
		case T_DIAL:
			if (t->uhead + t->ulen < MSB_EGRESS_WINDOW)
				ev = EPOLLIN;
			break;
		default:
			if ((t->plain && t->body_left == 0) ||
			    (t->ulen == 0 && t->pre_off == t->pre_len && !t->ustall &&
			     t->plen < t->pcap))
				ev = EPOLLIN;
			break;
		}
	}
	if (t->dlen > 0)
		ev |= EPOLLOUT;
	if (ev == t->guest_events)
		return;
	struct epoll_event e = {.events = ev, .data.ptr = &t->gtag};
	epoll_ctl(p->ep, EPOLL_CTL_MOD, t->guest, &e);
	t->guest_events = ev;
}

/* The handed-over listener: accept while under the tunnel limit (beyond it
 * clients wait in the backlog, as with the agent's). */
void accept_guests(proxy *p)
{
	while (p->ntunnels < p->cfg.max_tunnels) {
		int fd = accept4(p->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			return;
		}
		tunnel *t = new_tunnel(p, 0);
		if (!t) {
			close(fd);
			return;
		}
		int one = 1;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		t->guest = fd;
		t->guest_events = EPOLLIN;
		struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &t->gtag};
		if (epoll_ctl(p->ep, EPOLL_CTL_ADD, fd, &ev) < 0)
			tunnel_finish(p, t, NULL);
	}
}

void listen_interest(proxy *p)
{
	if (p->listen_fd < 0)
		return;
	uint32_t ev = p->ntunnels < p->cfg.max_tunnels ? EPOLLIN : 0;
	if (ev == p->listen_events)
		return;
	struct epoll_event e = {.events = ev, .data.ptr = &p->ltag};
	epoll_ctl(p->ep, EPOLL_CTL_MOD, p->listen_fd, &e);
	p->listen_events = ev;
}
