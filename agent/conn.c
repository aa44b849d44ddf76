/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Host connections: accept, the outbound queue, frame dispatch. Every byte
 * from the host goes through the src/proto reader and decoders; a violation
 * gets one ERROR frame on channel 0 and the connection is closed.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent.h"

size_t conn_queued(const struct conn *c)
{
	return msb_proto_outq_pending(&c->out);
}

uint8_t *conn_reserve(struct conn *c, size_t n)
{
	if (c->dead || c->out_refused)
		return NULL;
	uint8_t *dst;
	int rc = msb_proto_outq_reserve(&c->out, n, &dst);
	if (rc == 0)
		return dst;
	/* Cannot queue what the protocol requires (the host stopped reading,
	 * or no memory): drop the connection now, saying why. */
	agent_log("dropping a host connection: %s (%zu bytes queued, at most %u)",
		  msb_proto_strerror(rc), conn_queued(c), AGENT_OUTQ_MAX);
	c->out_refused = true;
	c->closing = true;
	c->close_deadline_ns = 0;
	return NULL;
}

void conn_commit(struct conn *c, size_t n)
{
	msb_proto_outq_commit(&c->out, n);
}

void conn_queue(struct conn *c, const uint8_t *frame, int len)
{
	if (len <= 0) {
		/* our own encoder refused: a bug, never a peer's doing */
		conn_fail(c, MSB_PROTO_ERR_INTERNAL, "agent failed to encode a frame");
		return;
	}
	uint8_t *dst = conn_reserve(c, (size_t)len);
	if (!dst)
		return;
	memcpy(dst, frame, (size_t)len);
	conn_commit(c, (size_t)len);
}

void conn_flush(struct conn *c)
{
	if (c->dead)
		return;
	if (msb_proto_outq_send(&c->out, c->fd) < 0) {
		/* the host went away: closed at the next turn */
		msb_proto_outq_clear(&c->out);
		c->closing = true;
		c->close_deadline_ns = 0;
	}
}

void conn_fail(struct conn *c, uint16_t code, const char *msg)
{
	if (c->closing)
		return;
	uint8_t buf[MSB_PROTO_HEADER_SIZE + 4 + MSB_PROTO_MAX_ERROR_MSG];
	int n = msb_proto_enc_error(buf, sizeof(buf), 0, code, msg);
	if (n > 0) {
		uint8_t *dst = conn_reserve(c, (size_t)n);
		if (dst) {
			memcpy(dst, buf, (size_t)n);
			conn_commit(c, (size_t)n);
		}
	}
	c->closing = true;
	c->close_deadline_ns = agent_now_ns() + AGENT_CLOSE_LINGER_NS;
}

/* Stop serving: kill the connection's workloads (nobody reads their output
 * any more) and mark it for freeing. */
void conn_close(struct agent *a, struct conn *c)
{
	if (c->dead)
		return;
	for (struct exec_ch *e = c->execs; e; e = e->next)
		if (!e->done)
			exec_abandon(a, e);
	egress_conn_closed(a, c);
	c->dead = true;
}

void conn_free(struct conn *c)
{
	while (c->execs) {
		struct exec_ch *e = c->execs;
		c->execs = e->next;
		exec_free(e);
	}
	if (c->fd >= 0)
		close(c->fd);
	free(c->rd);
	msb_proto_outq_free(&c->out);
	free(c);
}

int conn_add(struct agent *a, int fd)
{
	struct conn *c = calloc(1, sizeof(*c));
	msb_proto_reader *rd = malloc(sizeof(*rd));
	if (!c || !rd) {
		free(c);
		free(rd);
		close(fd);
		return -ENOMEM;
	}
	msb_proto_reader_init(rd, MSB_PROTO_MAX_PAYLOAD);
	(void)msb_proto_outq_init(&c->out, AGENT_OUTQ_INITIAL, AGENT_OUTQ_MAX);
	c->fd = fd;
	c->rd = rd;
	c->peer_max_payload = MSB_PROTO_MIN_PAYLOAD;
	c->next = a->conns;
	a->conns = c;
	a->nconns++;
	return 0;
}

void conn_accept(struct agent *a)
{
	while (a->nconns < AGENT_MAX_CONNS) {
		int fd = accept4(a->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			return; /* EAGAIN, or EMFILE and friends: retry on the next event */
		}
		if (conn_add(a, fd) < 0)
			return;
	}
}

static struct exec_ch *find_exec(struct conn *c, uint32_t id)
{
	for (struct exec_ch *e = c->execs; e; e = e->next)
		if (e->id == id && !e->done)
			return e;
	return NULL;
}

static void on_hello(struct conn *c, const msb_proto_hello *h)
{
	msb_proto_hello mine;
	uint16_t version;
	msb_proto_hello_default(&mine, MSB_PROTO_ROLE_AGENT);
	uint8_t buf[64];
	/* Our HELLO goes out either way, so the host sees our range. */
	conn_queue(c, buf, msb_proto_enc_hello(buf, sizeof(buf), &mine));
	if (h->role != MSB_PROTO_ROLE_HOST) {
		conn_fail(c, MSB_PROTO_ERR_PROTOCOL, "peer HELLO is not from a host");
		return;
	}
	if (msb_proto_hello_negotiate(&mine, h, &version) < 0) {
		conn_fail(c, MSB_PROTO_ERR_VERSION, "no common protocol version");
		return;
	}
	c->hello_done = true;
	c->version = version;
	c->peer_max_payload = h->max_payload;
}

/* A frame on a channel the host opened earlier and that has ended since:
 * stale (the host had not yet seen the end), dropped. Anything else on an
 * unknown channel breaks the protocol. */
static bool is_stale(const struct conn *c, uint32_t channel)
{
	return msb_proto_channel_is_host(channel) && channel <= c->last_channel;
}

static bool open_channel(struct conn *c, uint32_t channel)
{
	if (!msb_proto_channel_is_host(channel) || channel <= c->last_channel) {
		conn_fail(c, MSB_PROTO_ERR_PROTOCOL, "channel ids must be odd and increasing");
		return false;
	}
	c->last_channel = channel;
	return true;
}

static void on_frame(struct agent *a, struct conn *c, const msb_proto_frame *f)
{
	msb_proto_msg m;
	int rc = msb_proto_decode(f, &m);
	if (rc < 0) {
		conn_fail(c, MSB_PROTO_ERR_PROTOCOL, msb_proto_strerror(rc));
		return;
	}
	if (!msb_proto_host_may_send(m.type)) {
		conn_fail(c, MSB_PROTO_ERR_PROTOCOL, "frame type not sent by a host");
		return;
	}
	if (!c->hello_done) {
		if (m.type == MSB_PROTO_HELLO)
			on_hello(c, &m.u.hello);
		else
			conn_fail(c, MSB_PROTO_ERR_PROTOCOL, "expected HELLO");
		return;
	}

	uint8_t buf[64];
	struct exec_ch *e = NULL;
	if (msb_proto_channel_is_agent(m.channel)) {
		egress_on_frame(a, c, &m);
		return;
	}
	if (m.channel != 0 && m.type != MSB_PROTO_EXEC_OPEN && m.type != MSB_PROTO_PS_REQUEST &&
	    m.type != MSB_PROTO_EGRESS_LISTEN) {
		e = find_exec(c, m.channel);
		if (!e) {
			if (!is_stale(c, m.channel))
				conn_fail(c, MSB_PROTO_ERR_PROTOCOL,
					  "frame on a channel never opened");
			return;
		}
	}

	switch (m.type) {
	case MSB_PROTO_HELLO:
		conn_fail(c, MSB_PROTO_ERR_PROTOCOL, "second HELLO");
		break;
	case MSB_PROTO_PING:
		conn_queue(c, buf,
			   msb_proto_enc_ping(buf, sizeof(buf), MSB_PROTO_PONG, m.u.cookie));
		break;
	case MSB_PROTO_PONG:
		break;
	case MSB_PROTO_IDENTITY:
		agent_identity(a, c, &m.u.identity);
		break;
	case MSB_PROTO_ERROR:
		if (m.channel == 0) {
			/* the host gives up the connection */
			conn_close(a, c);
		} else {
			/* the host gives up the channel: treat as a cancel */
			exec_start_kill(a, e, MSB_PROTO_EXIT_CANCELLED);
		}
		break;
	case MSB_PROTO_EXEC_OPEN:
		if (open_channel(c, m.channel))
			exec_open(a, c, m.channel, &m.u.exec_open);
		break;
	case MSB_PROTO_PS_REQUEST:
		if (open_channel(c, m.channel))
			procs_snapshot(a, c, m.channel, &m.u.ps_request);
		break;
	case MSB_PROTO_EGRESS_LISTEN:
		if (open_channel(c, m.channel))
			egress_listen(a, c, m.channel, &m.u.egress_listen);
		break;
	case MSB_PROTO_DATA:
		exec_on_data(e, &m.u.data);
		break;
	case MSB_PROTO_EOF:
		exec_on_eof(e, m.u.stream);
		break;
	case MSB_PROTO_CREDIT:
		exec_on_credit(e, m.u.credit);
		break;
	case MSB_PROTO_WINSIZE:
		if (c->version < MSB_PROTO_VERSION_TTY)
			conn_fail(c, MSB_PROTO_ERR_PROTOCOL,
				  "WINSIZE is not in protocol version 1");
		else
			exec_on_winsize(e, &m.u.winsize);
		break;
	case MSB_PROTO_CANCEL:
		exec_start_kill(a, e,
				m.u.cancel_reason == MSB_PROTO_CANCEL_TIMEOUT
					? MSB_PROTO_EXIT_TIMED_OUT
					: MSB_PROTO_EXIT_CANCELLED);
		break;
	default:
		conn_fail(c, MSB_PROTO_ERR_PROTOCOL, "unexpected frame type");
		break;
	}
}

void conn_on_readable(struct agent *a, struct conn *c)
{
	/* Bounded work per turn so that one busy host cannot starve the rest. */
	for (int rounds = 0; rounds < 16 && !c->closing && !c->dead; rounds++) {
		uint8_t *dst;
		size_t room = msb_proto_reader_space(c->rd, &dst);
		if (room == 0) {
			conn_fail(c, MSB_PROTO_ERR_PROTOCOL, "frame reader overflow");
			return;
		}
		ssize_t n = recv(c->fd, dst, room, MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return;
			conn_close(a, c);
			return;
		}
		if (n == 0) {
			/* orderly end: a host may leave between frames only */
			conn_close(a, c);
			return;
		}
		msb_proto_reader_commit(c->rd, (size_t)n);
		msb_proto_frame f;
		int rc;
		while (!c->closing && !c->dead && (rc = msb_proto_reader_next(c->rd, &f)) != 0) {
			if (rc < 0) {
				conn_fail(c, MSB_PROTO_ERR_PROTOCOL, msb_proto_strerror(rc));
				return;
			}
			on_frame(a, c, &f);
		}
		if (conn_queued(c) >= AGENT_OUTQ_HIGH)
			return;
	}
}
