/* SPDX-License-Identifier: Apache-2.0 */
/* Both ends of the `vm` channel's multiplexer (mux_link.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "mux_link.h"
#include "proto.h"

/* Stop reading local streams while this much waits to go down the link. */
#define LINK_OUTQ_HIGH (1u << 20)
/* Return credit once this much was handed on. */
#define CREDIT_BATCH (MSB_MUX_WINDOW / 4)

struct stream {
	uint32_t id;
	int fd;
	uint8_t *buf; /* link -> local bytes not yet written: [head, head+len) */
	size_t head, len;
	uint32_t owed;	      /* handed on, not yet credited back */
	uint32_t send_credit; /* what we may still send on the link */
	bool peer_closed;     /* CLOSE received: flush, then go */
	bool local_eof;
	struct stream *next;
};

struct msb_mux_link {
	int fd;
	bool host;
	bool ready;
	bool dead;
	bool synced;	  /* the session's first record (SESSION, READY) was seen */
	uint32_t session; /* host: the one we began */
	msb_mux_session_fn session_fn;
	msb_mux_open_fn open_fn;
	void *ud;
	msb_mux_reader rd;
	uint8_t *out; /* records for the link: [out_head, out_len) */
	size_t out_head, out_len, out_cap;
	uint32_t last_id; /* host: last id opened; guest: highest id seen */
	struct stream *streams;
	unsigned n;
	char why[128];
};

static int set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -errno;
	return 0;
}

msb_mux_link *msb_mux_link_new(int link_fd, bool host, msb_mux_open_fn open_fn, void *ud)
{
	msb_mux_link *l = calloc(1, sizeof(*l));
	if (!l)
		return NULL;
	if (set_nonblock(link_fd) < 0) {
		free(l);
		return NULL;
	}
	l->fd = link_fd;
	l->host = host;
	l->open_fn = open_fn;
	l->ud = ud;
	msb_mux_reader_init(&l->rd);
	return l;
}

static void stream_free(struct stream *s)
{
	if (s->fd >= 0)
		close(s->fd);
	free(s->buf);
	free(s);
}

void msb_mux_link_free(msb_mux_link *l)
{
	if (!l)
		return;
	while (l->streams) {
		struct stream *s = l->streams;
		l->streams = s->next;
		stream_free(s);
	}
	if (l->fd >= 0)
		close(l->fd);
	free(l->out);
	free(l);
}

static int fail(msb_mux_link *l, int e, const char *why)
{
	if (!l->dead)
		snprintf(l->why, sizeof(l->why), "%s", why);
	l->dead = true;
	return e;
}

const char *msb_mux_link_why(const msb_mux_link *l)
{
	return l->why;
}

bool msb_mux_link_ready(const msb_mux_link *l)
{
	return l->ready;
}

unsigned msb_mux_link_streams(const msb_mux_link *l)
{
	return l->n;
}

static int queue(msb_mux_link *l, const uint8_t *a, size_t alen, const uint8_t *b, size_t blen)
{
	size_t need = alen + blen;
	if (l->out_head > 0 && l->out_head == l->out_len)
		l->out_head = l->out_len = 0;
	if (l->out_len + need > l->out_cap) {
		if (l->out_head > 0) {
			memmove(l->out, l->out + l->out_head, l->out_len - l->out_head);
			l->out_len -= l->out_head;
			l->out_head = 0;
		}
		if (l->out_len + need > l->out_cap) {
			size_t cap = l->out_cap ? l->out_cap : 65536;
			while (cap < l->out_len + need)
				cap *= 2;
			uint8_t *p = realloc(l->out, cap);
			if (!p)
				return fail(l, -ENOMEM, "out of memory");
			l->out = p;
			l->out_cap = cap;
		}
	}
	memcpy(l->out + l->out_len, a, alen);
	if (blen)
		memcpy(l->out + l->out_len + alen, b, blen);
	l->out_len += need;
	return 0;
}

static int send_simple(msb_mux_link *l, uint16_t type, uint32_t id)
{
	uint8_t h[MSB_MUX_HEADER];
	msb_mux_put_header(h, type, id, 0);
	return queue(l, h, sizeof(h), NULL, 0);
}

void msb_mux_link_on_session(msb_mux_link *l, msb_mux_session_fn fn)
{
	l->session_fn = fn;
}

int msb_mux_link_send_session(msb_mux_link *l, uint32_t session,
			      const uint8_t payload[MSB_MUX_SESSION_LEN])
{
	if (!l->host || session == 0)
		return -EINVAL;
	l->session = session;
	l->synced = false;
	l->ready = false;
	uint8_t h[MSB_MUX_HEADER];
	msb_mux_put_header(h, MSB_MUX_SESSION, session, MSB_MUX_SESSION_LEN);
	return queue(l, h, sizeof(h), payload, MSB_MUX_SESSION_LEN);
}

static struct stream *stream_new(msb_mux_link *l, uint32_t id, int fd)
{
	struct stream *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->id = id;
	s->fd = fd;
	s->send_credit = MSB_MUX_WINDOW;
	s->next = l->streams;
	l->streams = s;
	l->n++;
	return s;
}

static struct stream *find(msb_mux_link *l, uint32_t id)
{
	for (struct stream *s = l->streams; s; s = s->next)
		if (s->id == id)
			return s;
	return NULL;
}

static void unlink_stream(msb_mux_link *l, struct stream *s)
{
	for (struct stream **p = &l->streams; *p; p = &(*p)->next)
		if (*p == s) {
			*p = s->next;
			l->n--;
			stream_free(s);
			return;
		}
}

/* Our side is done with the stream: tell the peer (unless it closed first). */
static void close_stream(msb_mux_link *l, struct stream *s)
{
	if (!s->peer_closed)
		send_simple(l, MSB_MUX_CLOSE, s->id);
	unlink_stream(l, s);
}

int msb_mux_link_add(msb_mux_link *l, int fd)
{
	if (l->n >= MSB_MUX_MAX_STREAMS || l->last_id == UINT32_MAX) {
		close(fd);
		return -EMFILE;
	}
	int r = set_nonblock(fd);
	if (r < 0) {
		close(fd);
		return r;
	}
	struct stream *s = stream_new(l, ++l->last_id, fd);
	if (!s) {
		close(fd);
		return -ENOMEM;
	}
	return send_simple(l, MSB_MUX_OPEN, s->id);
}

/* Write what the peer sent into the local socket; credit it back. */
static void flush_local(msb_mux_link *l, struct stream *s)
{
	while (s->len > 0) {
		ssize_t w = send(s->fd, s->buf + s->head, s->len, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (w <= 0) {
			/* The local end is gone: drop the rest. */
			s->len = 0;
			s->local_eof = true;
			break;
		}
		s->head += (size_t)w;
		s->len -= (size_t)w;
		s->owed += (uint32_t)w;
	}
	if (s->len == 0)
		s->head = 0;
	if (!s->peer_closed && s->owed > 0 && (s->owed >= CREDIT_BATCH || s->len == 0)) {
		uint8_t c[MSB_MUX_HEADER + 4];
		msb_mux_put_credit(c, s->id, s->owed);
		if (queue(l, c, sizeof(c), NULL, 0) == 0)
			s->owed = 0;
	}
}

/* Guest end: a new host session. Everything of the one before goes (its
 * streams without a CLOSE, what waited to go to the old host); the host's
 * stream ids begin anew. */
static int new_session(msb_mux_link *l, const msb_mux_record *m)
{
	while (l->streams) {
		struct stream *s = l->streams;
		l->streams = s->next;
		stream_free(s);
	}
	l->n = 0;
	l->last_id = 0;
	l->out_head = l->out_len = 0;
	int r = l->session_fn ? l->session_fn(l->ud, m->data) : 0;
	if (r < 0)
		return fail(l, r, "the session's identity was not applied");
	return send_simple(l, MSB_MUX_READY, m->conn);
}

static int on_record(msb_mux_link *l, const msb_mux_record *m)
{
	if (m->type == MSB_MUX_READY) {
		if (!l->host)
			return fail(l, -EPROTO, "READY sent to the guest");
		if (m->conn == l->session)
			l->ready = true;
		return 0; /* another session's: stale */
	}
	if (m->type == MSB_MUX_SESSION) {
		if (l->host)
			return fail(l, -EPROTO, "SESSION sent to the host");
		return new_session(l, m);
	}
	if (m->type == MSB_MUX_OPEN) {
		if (l->host)
			return fail(l, -EPROTO, "OPEN sent to the host");
		if (m->conn <= l->last_id)
			return fail(l, -EPROTO, "OPEN of a stream id used before");
		l->last_id = m->conn;
		if (l->n >= MSB_MUX_MAX_STREAMS)
			return send_simple(l, MSB_MUX_CLOSE, m->conn);
		int fd = l->open_fn ? l->open_fn(l->ud) : -ENOSYS;
		if (fd < 0 || set_nonblock(fd) < 0) {
			if (fd >= 0)
				close(fd);
			return send_simple(l, MSB_MUX_CLOSE, m->conn);
		}
		if (!stream_new(l, m->conn, fd)) {
			close(fd);
			return send_simple(l, MSB_MUX_CLOSE, m->conn);
		}
		return 0;
	}
	if (m->conn > l->last_id)
		return fail(l, -EPROTO, "a record for a stream never opened");
	struct stream *s = find(l, m->conn);
	if (!s)
		return 0; /* closed here already: stale */
	switch (m->type) {
	case MSB_MUX_DATA:
		if (s->peer_closed)
			return fail(l, -EPROTO, "DATA after CLOSE");
		/* In flight from the peer: what waits here, what was handed on
		 * but not credited back yet, and this record. */
		if ((uint64_t)s->len + s->owed + m->len > MSB_MUX_WINDOW)
			return fail(l, -EPROTO, "DATA beyond the stream's window");
		if (!s->buf && !(s->buf = malloc(MSB_MUX_WINDOW)))
			return fail(l, -ENOMEM, "out of memory");
		if (s->local_eof)
			return 0; /* nobody reads it; the CLOSE is on its way */
		if (s->head + s->len + m->len > MSB_MUX_WINDOW) {
			memmove(s->buf, s->buf + s->head, s->len);
			s->head = 0;
		}
		memcpy(s->buf + s->head + s->len, m->data, m->len);
		s->len += m->len;
		flush_local(l, s);
		return 0;
	case MSB_MUX_CREDIT:
		if ((uint64_t)s->send_credit + m->credit > MSB_MUX_WINDOW)
			return fail(l, -EPROTO, "credit beyond the window");
		s->send_credit += m->credit;
		return 0;
	case MSB_MUX_CLOSE:
		s->peer_closed = true;
		flush_local(l, s);
		shutdown(s->fd, SHUT_WR);
		if (s->len == 0)
			unlink_stream(l, s);
		return 0;
	default:
		return fail(l, -EPROTO, "unexpected record");
	}
}

static int read_link(msb_mux_link *l)
{
	for (int turns = 0; turns < 16; turns++) {
		size_t room;
		uint8_t *p = msb_mux_space(&l->rd, &room);
		ssize_t n = room ? read(l->fd, p, room) : 0;
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 0;
		if (n < 0)
			return fail(l, -errno, "read from the link failed");
		if (n == 0 && room)
			return fail(l, -EPIPE, "the link was closed");
		msb_mux_commit(&l->rd, (size_t)n);
		if (!l->synced) {
			if (!msb_mux_sync(&l->rd, !l->host, l->session))
				continue;
			l->synced = true;
		}
		msb_mux_record m;
		int rc;
		while ((rc = msb_mux_next(&l->rd, &m)) == 1)
			if ((rc = on_record(l, &m)) < 0)
				return rc;
		if (rc < 0)
			return fail(l, -EPROTO, msb_proto_strerror(rc));
	}
	return 0;
}

static int flush_link(msb_mux_link *l)
{
	while (l->out_head < l->out_len) {
		ssize_t w = write(l->fd, l->out + l->out_head, l->out_len - l->out_head);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 0;
		if (w <= 0)
			return fail(l, w < 0 && errno != EPIPE ? -errno : -EPIPE,
				    "write to the link failed");
		l->out_head += (size_t)w;
	}
	l->out_head = l->out_len = 0;
	return 0;
}

static size_t queued(const msb_mux_link *l)
{
	return l->out_len - l->out_head;
}

/* Local bytes go down the link as DATA, within the stream's credit. */
static void read_local(msb_mux_link *l, struct stream *s)
{
	uint8_t buf[MSB_MUX_MAX_DATA];
	while (s->send_credit > 0 && queued(l) < LINK_OUTQ_HIGH) {
		size_t want = s->send_credit < sizeof(buf) ? s->send_credit : sizeof(buf);
		ssize_t n = recv(s->fd, buf, want, MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n <= 0) {
			s->local_eof = true;
			return;
		}
		uint8_t h[MSB_MUX_HEADER];
		msb_mux_put_header(h, MSB_MUX_DATA, s->id, (uint32_t)n);
		if (queue(l, h, sizeof(h), buf, (size_t)n) < 0)
			return;
		s->send_credit -= (uint32_t)n;
	}
}

size_t msb_mux_link_pollfds(msb_mux_link *l, struct pollfd *fds, size_t cap)
{
	size_t n = 0;
	if (cap == 0)
		return 0;
	fds[n++] =
		(struct pollfd){.fd = l->fd, .events = (short)(POLLIN | (queued(l) ? POLLOUT : 0))};
	for (struct stream *s = l->streams; s && n < cap; s = s->next) {
		short ev = 0;
		if (!s->local_eof && !s->peer_closed && s->send_credit > 0 &&
		    queued(l) < LINK_OUTQ_HIGH)
			ev |= POLLIN;
		if (s->len > 0)
			ev |= POLLOUT;
		fds[n++] = (struct pollfd){.fd = ev ? s->fd : -1, .events = ev};
	}
	return n;
}

int msb_mux_link_handle(msb_mux_link *l, const struct pollfd *fds, size_t n)
{
	if (l->dead)
		return -EPIPE;
	/* Streams first (their fds are in fds[1..]); a stream may go away here,
	 * so look each one up by fd. */
	for (size_t i = 1; i < n; i++) {
		if (fds[i].fd < 0 || !fds[i].revents)
			continue;
		struct stream *s = l->streams;
		while (s && s->fd != fds[i].fd)
			s = s->next;
		if (!s)
			continue;
		if (fds[i].revents & POLLOUT)
			flush_local(l, s);
		if (fds[i].revents & (POLLIN | POLLHUP | POLLERR))
			read_local(l, s);
	}
	int r = 0;
	if (n > 0 && (fds[0].revents & (POLLIN | POLLHUP | POLLERR)))
		r = read_link(l);
	/* Streams that are over: local end of file, or the peer's CLOSE flushed. */
	for (struct stream *s = l->streams, *next; s; s = next) {
		next = s->next;
		if (s->peer_closed && (s->len == 0 || s->local_eof))
			unlink_stream(l, s);
		else if (s->local_eof)
			close_stream(l, s);
	}
	if (r == 0 && !l->dead)
		r = flush_link(l);
	return l->dead ? (r < 0 ? r : -EPIPE) : r;
}
