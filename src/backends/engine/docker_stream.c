/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The kept agent stream over the Engine API (docs/engine.md, "The kept
 * agent stream"): one exec started on a hijacked connection and held open
 * for a sandbox handle's life. The engine's connection carries raw bytes in
 * (the process's stdin) and multiplexed frames out (an 8-byte header:
 * stream, 0, 0, 0, big-endian length); the protocol client wants one stream
 * socket. So a relay thread per stream sits between the engine's connection
 * and one end of a socketpair: our bytes go to the engine as they are,
 * stdout frames come back as their payloads, stderr frames (the agent's log
 * lines) are dropped. Both directions are bounded (RELAY_MAX queued each
 * way; a full queue stops reading that side). The relay ends when either
 * side ends or stream_close asks; it closes both fds, so the client sees
 * end-of-file and the engine closes the process's stdin.
 */
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>

#include "docker.h"

#define RELAY_MAX (1u << 20)
#define RELAY_CHUNK (64u << 10)
#define RELAY_FRAME_MAX (1u << 24)

struct engine_stream {
	pthread_t thread;
	int engine_fd;	 /* the hijacked connection */
	int peer_fd;	 /* our end of the socketpair (the client has the other) */
	int wake[2];	 /* stream_close -> the relay */
	msb_buf pending; /* bytes past the response head, fed first */
};

typedef struct relay_q {
	uint8_t *buf;
	size_t off, len;
} relay_q;

static bool q_push(relay_q *q, const uint8_t *p, size_t n)
{
	if (q->off && q->off == q->len)
		q->off = q->len = 0;
	if (q->len + n > RELAY_MAX) {
		memmove(q->buf, q->buf + q->off, q->len - q->off);
		q->len -= q->off;
		q->off = 0;
	}
	if (q->len + n > RELAY_MAX)
		return false;
	memcpy(q->buf + q->len, p, n);
	q->len += n;
	return true;
}

/* Send what is queued; false when the reader is gone. */
static bool q_flush(relay_q *q, int fd)
{
	while (q->off < q->len) {
		ssize_t w = send(fd, q->buf + q->off, q->len - q->off, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN)
			return true;
		if (w <= 0)
			return false;
		q->off += (size_t)w;
	}
	q->off = q->len = 0;
	return true;
}

typedef struct demux {
	uint8_t hdr[8];
	size_t hdr_have;
	uint32_t left;
	int stream;
} demux;

/* The engine's frames onto q (stdout's payloads); false on a malformed
 * frame or a full queue (cannot happen: reads are sized to the room). */
static bool demux_feed(demux *m, relay_q *q, const uint8_t *p, size_t n)
{
	while (n > 0) {
		if (m->left == 0) {
			size_t take = 8 - m->hdr_have < n ? 8 - m->hdr_have : n;
			memcpy(m->hdr + m->hdr_have, p, take);
			m->hdr_have += take;
			p += take;
			n -= take;
			if (m->hdr_have < 8)
				continue;
			m->hdr_have = 0;
			uint32_t len = (uint32_t)m->hdr[4] << 24 | (uint32_t)m->hdr[5] << 16 |
				       (uint32_t)m->hdr[6] << 8 | m->hdr[7];
			if ((m->hdr[0] != 1 && m->hdr[0] != 2) || m->hdr[1] || m->hdr[2] ||
			    m->hdr[3] || len > RELAY_FRAME_MAX)
				return false;
			m->stream = m->hdr[0];
			m->left = len;
			continue;
		}
		size_t take = m->left < n ? m->left : n;
		if (m->stream == 1 && !q_push(q, p, take))
			return false;
		m->left -= (uint32_t)take;
		p += take;
		n -= take;
	}
	return true;
}

static void *relay(void *arg)
{
	engine_stream *s = arg;
	relay_q to_peer = {malloc(RELAY_MAX), 0, 0}, to_engine = {malloc(RELAY_MAX), 0, 0};
	uint8_t *chunk = malloc(RELAY_CHUNK);
	demux m = {0};
	bool peer_open = true;
	if (!to_peer.buf || !to_engine.buf || !chunk)
		goto out;
	if (s->pending.len && !demux_feed(&m, &to_peer, s->pending.data, s->pending.len))
		goto out;
	for (;;) {
		bool room_peer = RELAY_MAX - (to_peer.len - to_peer.off) >= RELAY_CHUNK;
		bool room_engine = RELAY_MAX - (to_engine.len - to_engine.off) >= RELAY_CHUNK;
		struct pollfd p[3] = {
			{.fd = s->engine_fd,
			 .events = (short)((room_peer ? POLLIN : 0) |
					   (to_engine.len > to_engine.off ? POLLOUT : 0))},
			{.fd = s->peer_fd,
			 .events = (short)((room_engine && peer_open ? POLLIN : 0) |
					   (to_peer.len > to_peer.off ? POLLOUT : 0))},
			{.fd = s->wake[0], .events = POLLIN},
		};
		/* Nothing wanted of a side: not watched at all (its hang-up is
		 * reported whatever the events, and would spin the loop while
		 * the other side drains). */
		for (int i = 0; i < 2; i++)
			if (!p[i].events)
				p[i].fd = -1;
		if (poll(p, 3, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (p[2].revents)
			break; /* stream_close */
		if (p[0].revents & POLLOUT && !q_flush(&to_engine, s->engine_fd))
			break;
		if (p[1].revents & POLLOUT && !q_flush(&to_peer, s->peer_fd))
			break;
		if (room_peer && p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
			ssize_t n = recv(s->engine_fd, chunk, RELAY_CHUNK, MSG_DONTWAIT);
			if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
				/* the process or the engine ended: what came is
				 * passed on, then the client reads the end */
				fcntl(s->peer_fd, F_SETFL,
				      fcntl(s->peer_fd, F_GETFL) & ~O_NONBLOCK);
				while (to_peer.off < to_peer.len) {
					ssize_t w = send(s->peer_fd, to_peer.buf + to_peer.off,
							 to_peer.len - to_peer.off, MSG_NOSIGNAL);
					if (w <= 0)
						break;
					to_peer.off += (size_t)w;
				}
				break;
			}
			if (n > 0 && !demux_feed(&m, &to_peer, chunk, (size_t)n))
				break;
			if (n > 0 && !q_flush(&to_peer, s->peer_fd))
				break;
		}
		if (peer_open && room_engine && p[1].revents & (POLLIN | POLLHUP | POLLERR)) {
			ssize_t n = recv(s->peer_fd, chunk, RELAY_CHUNK, MSG_DONTWAIT);
			if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
				break; /* the client closed: the stream ends */
			if (n > 0 && (!q_push(&to_engine, chunk, (size_t)n) ||
				      !q_flush(&to_engine, s->engine_fd)))
				break;
		}
	}
out:
	/* Both ends closed here: the client reads end-of-file, the engine
	 * closes the process's stdin. */
	shutdown(s->peer_fd, SHUT_RDWR);
	shutdown(s->engine_fd, SHUT_RDWR);
	free(to_peer.buf);
	free(to_engine.buf);
	free(chunk);
	return NULL;
}

void msb_docker__stream_close(engine_stream *s)
{
	if (!s)
		return;
	ssize_t w = write(s->wake[1], "x", 1);
	(void)w;
	pthread_join(s->thread, NULL);
	close(s->engine_fd);
	close(s->peer_fd);
	close(s->wake[0]);
	close(s->wake[1]);
	msb__buf_free(&s->pending);
	free(s);
}

int msb_docker__stream_start(int engine_fd, const uint8_t *pending, size_t n_pending,
			     engine_stream **out, int *fd, msb_error **err)
{
	engine_stream *s = calloc(1, sizeof(*s));
	if (!s) {
		close(engine_fd);
		return msb__error_nomem(err);
	}
	s->engine_fd = engine_fd;
	s->wake[0] = s->wake[1] = s->peer_fd = -1;
	int rc;
	int sv[2] = {-1, -1};
	if (n_pending && msb__buf_append(&s->pending, pending, n_pending) < 0) {
		rc = msb__error_nomem(err);
		goto fail;
	}
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
		rc = msb__error_errno(err, -errno, "kept stream: socketpair");
		goto fail;
	}
	s->peer_fd = sv[1];
	if (pipe2(s->wake, O_CLOEXEC) < 0) {
		s->wake[0] = s->wake[1] = -1;
		rc = msb__error_errno(err, -errno, "kept stream: pipe");
		goto fail;
	}
	fcntl(s->engine_fd, F_SETFL, fcntl(s->engine_fd, F_GETFL) | O_NONBLOCK);
	fcntl(s->peer_fd, F_SETFL, fcntl(s->peer_fd, F_GETFL) | O_NONBLOCK);
	int e = pthread_create(&s->thread, NULL, relay, s);
	if (e != 0) {
		rc = msb__error_errno(err, -e, "kept stream: thread");
		goto fail;
	}
	*out = s;
	*fd = sv[0];
	return 0;
fail:
	if (sv[0] >= 0)
		close(sv[0]);
	close(s->engine_fd);
	if (s->peer_fd >= 0)
		close(s->peer_fd);
	if (s->wake[0] >= 0) {
		close(s->wake[0]);
		close(s->wake[1]);
	}
	msb__buf_free(&s->pending);
	free(s);
	return rc;
}

int msb_docker__stream_open(void *t, const char *ref, const char *const *argv, engine_stream **out,
			    int *fd, msb_error **err)
{
	docker_transport *d = t;
	engine_exec x = {.argv = argv, .stdin_data = (const uint8_t *)"", .timeout = 1};
	_cleanup_free_ char *eid = NULL;
	int rc = msb_docker__exec_create(d, ref, &x, &eid, err);
	if (rc < 0)
		return rc;
	msb_buf rest = MSB_BUF_INIT;
	int efd = msb_docker__exec_hijack(d, eid, &rest, err);
	if (efd < 0) {
		msb__buf_free(&rest);
		return efd;
	}
	rc = msb_docker__stream_start(efd, rest.data, rest.len, out, fd, err);
	msb__buf_free(&rest);
	return rc;
}
