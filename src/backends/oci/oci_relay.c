/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The relay of msb-oci-shim (oci_relay.h): host connections on agent.sock
 * multiplexed onto the agent's stdio connection, channel ids rewritten.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "backends/oci/oci_relay.h"
#include "proto/outq.h"
#include "proto/proto.h"
#include "util/util.h"

#define PEER_LINGER_NS (1000000000LL)
#define READ_ROUNDS 16
#define PEER_OUT_INITIAL (16u * 1024)

/* An exec, a snapshot (PS), the egress listen (the shim's proxy's: at most
 * one per agent), one egress tunnel (opened by the agent, even ids). */
enum chan_kind { CH_EXEC, CH_PS, CH_LISTEN, CH_TUNNEL };

struct peer {
	int fd;
	msb_proto_reader *rd;
	msb_proto_outq out;
	bool hello_done;
	bool closing; /* a fatal ERROR is queued: flush, then close */
	int64_t close_deadline_ns;
	bool dead;
	uint32_t last_id;	 /* the highest channel id this host opened */
	uint32_t last_tunnel_id; /* the highest (even) tunnel id given to this host */
	struct peer *next;
};

struct chan {
	uint32_t up_id;
	uint32_t down_id;
	struct peer *peer; /* NULL once its host left: what comes is dropped */
	enum chan_kind kind;
	bool eof_up, eof_down; /* a tunnel: EOF from the agent, from the host */
	struct chan *next;
};

/* A PING or an IDENTITY in flight: the cookie the agent sees (up) and the
 * host's (down). */
struct ping {
	bool used;
	uint64_t up, down;
	struct peer *peer;
	bool identity;
};

struct oci_relay {
	int up_fd;
	msb_proto_reader *up_rd;
	msb_proto_outq up_out;
	uint16_t version;
	uint32_t agent_max_payload;
	uint32_t last_up_id;	  /* 0: none yet; then odd, increasing */
	uint32_t last_agent_id;	  /* the highest tunnel id the agent opened */
	struct peer *egress_peer; /* the host whose EGRESS_LISTEN stands; NULL: none */
	uint64_t last_cookie;
	int listen_fd;
	struct peer *peers;
	size_t npeers;
	struct chan *chans;
	size_t nchans;
	struct ping pings[OCI_RELAY_MAX_PINGS];
	/* what oci_relay_fill() put in each pollfd slot after the first two */
	struct peer *slots[OCI_RELAY_MAX_PEERS];
	size_t nslots;
	bool lost;
	char why[256];
};

static void lose(oci_relay *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void lose(oci_relay *r, const char *fmt, ...)
{
	if (r->lost)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->why, sizeof(r->why), fmt, ap);
	va_end(ap);
	r->lost = true;
}

int oci_relay_new(int up_fd, oci_relay **out)
{
	oci_relay *r = calloc(1, sizeof(*r));
	msb_proto_reader *rd = malloc(sizeof(*rd));
	if (!r || !rd) {
		free(r);
		free(rd);
		close(up_fd);
		return -ENOMEM;
	}
	int fl = fcntl(up_fd, F_GETFL);
	if (fl < 0 || fcntl(up_fd, F_SETFL, fl | O_NONBLOCK) < 0) {
		int e = -errno;
		free(r);
		free(rd);
		close(up_fd);
		return e;
	}
	msb_proto_reader_init(rd, MSB_PROTO_MAX_PAYLOAD);
	(void)msb_proto_outq_init(&r->up_out, 64u * 1024, OCI_RELAY_UP_MAX);
	r->up_fd = up_fd;
	r->up_rd = rd;
	r->listen_fd = -1;
	*out = r;
	return 0;
}

/* ---- queues ------------------------------------------------------------------ */

/* A whole frame onto q; the frame is `f` with its channel replaced. */
static int put_frame(msb_proto_outq *q, const msb_proto_frame *f, uint32_t channel)
{
	uint8_t *dst;
	int rc = msb_proto_outq_reserve(q, MSB_PROTO_HEADER_SIZE + (size_t)f->len, &dst);
	if (rc < 0)
		return rc;
	msb_proto_put_header(dst, f->len, f->type, f->flags, channel);
	if (f->len)
		memcpy(dst + MSB_PROTO_HEADER_SIZE, f->payload, f->len);
	msb_proto_outq_commit(q, MSB_PROTO_HEADER_SIZE + (size_t)f->len);
	return 0;
}

static int put_encoded(msb_proto_outq *q, const uint8_t *frame, int len)
{
	if (len <= 0)
		return MSB_PROTO_E_SPACE;
	return msb_proto_outq_append(q, frame, (size_t)len);
}

static void peer_detach(oci_relay *r, struct peer *p);
static void tunnel_refuse(oci_relay *r, uint32_t up_id, const char *why);

/* The host is gone or must go: stop reading it, give up its channels. */
static void peer_close(oci_relay *r, struct peer *p)
{
	if (p->dead)
		return;
	peer_detach(r, p);
	p->dead = true;
	if (p->fd >= 0)
		close(p->fd);
	p->fd = -1;
}

/* A fatal ERROR to the host, flushed within the linger, then closed. */
static void peer_fail(oci_relay *r, struct peer *p, uint16_t code, const char *msg)
{
	if (p->closing || p->dead)
		return;
	uint8_t buf[MSB_PROTO_HEADER_SIZE + 4 + MSB_PROTO_MAX_ERROR_MSG];
	(void)put_encoded(&p->out, buf, msb_proto_enc_error(buf, sizeof(buf), 0, code, msg));
	p->closing = true;
	p->close_deadline_ns = msb__now_ns() + PEER_LINGER_NS;
	peer_detach(r, p);
}

static void to_peer(oci_relay *r, struct peer *p, const msb_proto_frame *f, uint32_t channel)
{
	if (p->dead || p->closing)
		return;
	if (put_frame(&p->out, f, channel) < 0)
		/* The host stopped reading what it granted credit for. */
		peer_close(r, p);
}

static void to_peer_encoded(oci_relay *r, struct peer *p, const uint8_t *frame, int len)
{
	if (p->dead || p->closing)
		return;
	if (put_encoded(&p->out, frame, len) < 0)
		peer_close(r, p);
}

/* ---- channels ---------------------------------------------------------------- */

static struct chan *find_up(oci_relay *r, uint32_t up_id)
{
	for (struct chan *c = r->chans; c; c = c->next)
		if (c->up_id == up_id)
			return c;
	return NULL;
}

static struct chan *find_down(oci_relay *r, struct peer *p, uint32_t down_id)
{
	for (struct chan *c = r->chans; c; c = c->next)
		if (c->peer == p && c->down_id == down_id)
			return c;
	return NULL;
}

static void chan_free(oci_relay *r, struct chan *dead)
{
	for (struct chan **cp = &r->chans; *cp; cp = &(*cp)->next)
		if (*cp == dead) {
			*cp = dead->next;
			r->nchans--;
			free(dead);
			return;
		}
}

static void peer_detach(oci_relay *r, struct peer *p)
{
	if (r->egress_peer == p)
		r->egress_peer = NULL; /* the agent keeps listening; tunnels are refused */
	for (struct chan *c = r->chans, *next; c; c = next) {
		next = c->next;
		if (c->peer != p)
			continue;
		c->peer = NULL;
		if (c->kind == CH_TUNNEL) {
			/* Its proxy is gone: the agent resets the guest's connection. */
			tunnel_refuse(r, c->up_id, "the egress proxy went away");
			chan_free(r, c);
			continue;
		}
		if (c->kind != CH_EXEC)
			continue;
		/* As the agent does for a connection that closes: the exec's
		 * processes are killed. */
		uint8_t buf[32];
		int n = msb_proto_enc_cancel(buf, sizeof(buf), c->up_id,
					     MSB_PROTO_CANCEL_REQUESTED);
		if (put_encoded(&r->up_out, buf, n) < 0)
			lose(r, "the agent is not reading: a cancel could not be queued");
	}
	for (size_t i = 0; i < OCI_RELAY_MAX_PINGS; i++)
		if (r->pings[i].used && r->pings[i].peer == p)
			r->pings[i].used = false;
}

/* ---- egress tunnels (docs/internals/egress.md) ---------------------------------- */

/* ERROR on a tunnel, to the agent: it resets the guest's connection. */
static void tunnel_refuse(oci_relay *r, uint32_t up_id, const char *why)
{
	uint8_t buf[MSB_PROTO_HEADER_SIZE + 4 + MSB_PROTO_MAX_ERROR_MSG];
	if (put_encoded(&r->up_out, buf,
			msb_proto_enc_error(buf, sizeof(buf), up_id, MSB_PROTO_ERR_UNSUPPORTED,
					    why)) < 0)
		lose(r, "the agent is not reading: a tunnel could not be refused");
}

/* After a DATA, EOF, CREDIT or ERROR passed on tunnel c: it ends with an
 * ERROR either way, or once EOF went both ways. */
static void tunnel_after(oci_relay *r, struct chan *c, const msb_proto_msg *m, bool from_agent)
{
	if (m->type == MSB_PROTO_EOF)
		*(from_agent ? &c->eof_up : &c->eof_down) = true;
	if (m->type == MSB_PROTO_ERROR || (c->eof_up && c->eof_down))
		chan_free(r, c);
}

static bool tunnel_type(uint16_t t)
{
	return t == MSB_PROTO_DATA || t == MSB_PROTO_EOF || t == MSB_PROTO_CREDIT ||
	       t == MSB_PROTO_ERROR;
}

/* A frame of the agent's on an even channel: a tunnel it opens (EGRESS_OPEN,
 * one accepted guest connection), given to the host that listens under an
 * even id of that host's; or one already open. */
static void up_tunnel(oci_relay *r, const msb_proto_frame *f, const msb_proto_msg *m)
{
	struct chan *c = find_up(r, m->channel);
	if (m->type == MSB_PROTO_EGRESS_OPEN) {
		if (c || m->channel <= r->last_agent_id) {
			lose(r, "the agent opened channel %u twice", (unsigned)m->channel);
			return;
		}
		r->last_agent_id = m->channel;
		struct peer *p = r->egress_peer;
		if (!p || p->dead || p->closing || r->nchans >= OCI_RELAY_MAX_CHANNELS ||
		    p->last_tunnel_id >= UINT32_MAX - 2) {
			tunnel_refuse(r, m->channel, "no egress proxy takes tunnels now");
			return;
		}
		if (!(c = calloc(1, sizeof(*c)))) {
			tunnel_refuse(r, m->channel, "out of memory");
			return;
		}
		p->last_tunnel_id += 2;
		*c = (struct chan){.up_id = m->channel,
				   .down_id = p->last_tunnel_id,
				   .peer = p,
				   .kind = CH_TUNNEL,
				   .next = r->chans};
		r->chans = c;
		r->nchans++;
		to_peer(r, p, f, c->down_id);
		return;
	}
	if (!c) {
		if (m->channel > r->last_agent_id)
			lose(r, "the agent sent %s on channel %u, never opened",
			     msb_proto_type_name(m->type), (unsigned)m->channel);
		return; /* ended here already */
	}
	if (c->kind != CH_TUNNEL || !tunnel_type(m->type)) {
		lose(r, "the agent sent %s on a tunnel", msb_proto_type_name(m->type));
		return;
	}
	if (c->peer)
		to_peer(r, c->peer, f, c->down_id);
	tunnel_after(r, c, m, true);
}

/* A host's frame on an even channel: a tunnel the relay gave it. */
static void peer_tunnel(oci_relay *r, struct peer *p, const msb_proto_frame *f,
			const msb_proto_msg *m)
{
	struct chan *c = find_down(r, p, m->channel);
	if (!c) {
		if (m->channel > p->last_tunnel_id)
			peer_fail(r, p, MSB_PROTO_ERR_PROTOCOL, "frame on a tunnel never opened");
		return; /* stale: the tunnel ended before the host saw it */
	}
	if (c->kind != CH_TUNNEL || !tunnel_type(m->type)) {
		peer_fail(r, p, MSB_PROTO_ERR_PROTOCOL, "unexpected frame on a tunnel");
		return;
	}
	if (put_frame(&r->up_out, f, c->up_id) < 0) {
		peer_fail(r, p, MSB_PROTO_ERR_LIMIT, "the sandbox's agent is not reading");
		return;
	}
	tunnel_after(r, c, m, false);
}

/* ---- the agent's side ---------------------------------------------------------- */

static void up_frame(oci_relay *r, const msb_proto_frame *f)
{
	msb_proto_msg m;
	int rc = msb_proto_decode(f, &m);
	if (rc < 0) {
		lose(r, "the agent sent a bad frame: %s", msb_proto_strerror(rc));
		return;
	}
	if (!msb_proto_agent_may_send(m.type) || m.type == MSB_PROTO_HELLO) {
		lose(r, "the agent sent a %s frame", msb_proto_type_name(m.type));
		return;
	}
	if (m.channel == 0) {
		uint8_t buf[64];
		switch (m.type) {
		case MSB_PROTO_PING:
			if (put_encoded(&r->up_out, buf,
					msb_proto_enc_ping(buf, sizeof(buf), MSB_PROTO_PONG,
							   m.u.cookie)) < 0)
				lose(r, "the agent is not reading");
			return;
		case MSB_PROTO_PONG:
		case MSB_PROTO_IDENTITY_OK:
			for (size_t i = 0; i < OCI_RELAY_MAX_PINGS; i++) {
				struct ping *pg = &r->pings[i];
				if (!pg->used || pg->up != m.u.cookie ||
				    pg->identity != (m.type == MSB_PROTO_IDENTITY_OK))
					continue;
				pg->used = false;
				if (pg->peer)
					to_peer_encoded(
						r, pg->peer, buf,
						pg->identity ? msb_proto_enc_identity_ok(
								       buf, sizeof(buf), pg->down)
							     : msb_proto_enc_ping(buf, sizeof(buf),
										  MSB_PROTO_PONG,
										  pg->down));
				break;
			}
			return;
		case MSB_PROTO_ERROR:
			lose(r, "the agent ended the connection: %.*s", (int)m.u.error.message.len,
			     (const char *)m.u.error.message.ptr);
			return;
		default:
			lose(r, "the agent sent %s on channel 0", msb_proto_type_name(m.type));
			return;
		}
	}
	if (msb_proto_channel_is_agent(m.channel)) {
		up_tunnel(r, f, &m);
		return;
	}
	struct chan *c = find_up(r, m.channel);
	if (!c) {
		if (m.channel > r->last_up_id)
			lose(r, "the agent sent %s on channel %u, never opened",
			     msb_proto_type_name(m.type), (unsigned)m.channel);
		return; /* ended: nothing more is forwarded on it */
	}
	bool exec_type = m.type == MSB_PROTO_DATA || m.type == MSB_PROTO_EOF ||
			 m.type == MSB_PROTO_CREDIT || m.type == MSB_PROTO_EXIT;
	bool ps_type = m.type == MSB_PROTO_PS_REPLY;
	bool listen_type = m.type == MSB_PROTO_EGRESS_READY;
	if ((c->kind == CH_EXEC && !exec_type && m.type != MSB_PROTO_ERROR) ||
	    (c->kind == CH_PS && !ps_type && m.type != MSB_PROTO_ERROR) ||
	    (c->kind == CH_LISTEN && !listen_type && m.type != MSB_PROTO_ERROR)) {
		lose(r, "the agent sent %s on a%s channel", msb_proto_type_name(m.type),
		     c->kind == CH_EXEC ? "n exec"
		     : c->kind == CH_PS ? " snapshot"
					: "n egress");
		return;
	}
	if (c->peer)
		to_peer(r, c->peer, f, c->down_id);
	if (c->kind == CH_LISTEN && m.type == MSB_PROTO_ERROR && r->egress_peer == c->peer)
		r->egress_peer = NULL; /* the agent does not listen */
	if (m.type == MSB_PROTO_EXIT || m.type == MSB_PROTO_ERROR ||
	    (ps_type && !(m.flags & MSB_PROTO_FLAG_MORE)))
		chan_free(r, c);
}

static void up_read(oci_relay *r)
{
	for (int rounds = 0; rounds < READ_ROUNDS && !r->lost; rounds++) {
		uint8_t *dst;
		size_t room = msb_proto_reader_space(r->up_rd, &dst);
		if (room == 0) {
			lose(r, "the agent's frame reader overflowed");
			return;
		}
		ssize_t n = recv(r->up_fd, dst, room, MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return;
			lose(r, "the agent's connection failed: %s", strerror(errno));
			return;
		}
		if (n == 0) {
			lose(r, "the agent closed its connection");
			return;
		}
		msb_proto_reader_commit(r->up_rd, (size_t)n);
		msb_proto_frame f;
		int rc;
		while (!r->lost && (rc = msb_proto_reader_next(r->up_rd, &f)) != 0) {
			if (rc < 0) {
				lose(r, "the agent broke the frame stream: %s",
				     msb_proto_strerror(rc));
				return;
			}
			up_frame(r, &f);
		}
	}
}

static void up_flush(oci_relay *r)
{
	if (!r->lost && msb_proto_outq_send(&r->up_out, r->up_fd) < 0)
		lose(r, "the agent's connection failed: %s", strerror(errno));
}

int oci_relay_handshake(oci_relay *r, int timeout_ms, char *why, size_t size)
{
	msb_proto_hello mine;
	msb_proto_hello_default(&mine, MSB_PROTO_ROLE_HOST);
	uint8_t buf[64];
	(void)put_encoded(&r->up_out, buf, msb_proto_enc_hello(buf, sizeof(buf), &mine));
	int64_t deadline = msb__now_ns() + (int64_t)timeout_ms * 1000000;
	for (;;) {
		up_flush(r);
		if (r->lost)
			break;
		msb_proto_frame f;
		int rc = msb_proto_reader_next(r->up_rd, &f);
		if (rc < 0) {
			lose(r, "the agent broke the frame stream: %s", msb_proto_strerror(rc));
			break;
		}
		if (rc > 0) {
			msb_proto_msg m;
			rc = msb_proto_decode(&f, &m);
			if (rc < 0 || m.channel != 0) {
				lose(r, "the agent's HELLO is malformed");
			} else if (m.type == MSB_PROTO_ERROR) {
				lose(r, "the agent refused the HELLO: %.*s",
				     (int)m.u.error.message.len,
				     (const char *)m.u.error.message.ptr);
			} else if (m.type != MSB_PROTO_HELLO ||
				   m.u.hello.role != MSB_PROTO_ROLE_AGENT) {
				lose(r, "the agent did not answer with a HELLO");
			} else if (msb_proto_hello_negotiate(&mine, &m.u.hello, &r->version) < 0) {
				lose(r, "no protocol version in common with the agent (%u..%u)",
				     m.u.hello.min_version, m.u.hello.max_version);
			} else {
				r->agent_max_payload = m.u.hello.max_payload;
				return 0;
			}
			break;
		}
		int64_t left = (deadline - msb__now_ns()) / 1000000;
		if (left <= 0) {
			lose(r, "the agent did not answer within %d ms", timeout_ms);
			break;
		}
		struct pollfd p = {.fd = r->up_fd, .events = POLLIN};
		if (msb_proto_outq_pending(&r->up_out))
			p.events |= POLLOUT;
		int pr = poll(&p, 1, (int)left);
		if (pr < 0 && errno != EINTR) {
			lose(r, "poll: %s", strerror(errno));
			break;
		}
		if (pr <= 0 || !(p.revents & (POLLIN | POLLHUP | POLLERR)))
			continue;
		uint8_t *dst;
		size_t room = msb_proto_reader_space(r->up_rd, &dst);
		ssize_t n = room ? recv(r->up_fd, dst, room, MSG_DONTWAIT) : -1;
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n <= 0) {
			lose(r, "the agent closed its connection before its HELLO");
			break;
		}
		msb_proto_reader_commit(r->up_rd, (size_t)n);
	}
	snprintf(why, size, "%s", r->why);
	return -1;
}

/* ---- the hosts' side ------------------------------------------------------------ */

static void peer_hello(struct peer *p, oci_relay *r, const msb_proto_hello *h)
{
	msb_proto_hello mine;
	msb_proto_hello_default(&mine, MSB_PROTO_ROLE_AGENT);
	/* Up to the version spoken with the agent; an older host still speaks
	 * a subset of it (version 2 only added terminals). */
	mine.max_version = r->version;
	if (mine.min_version > mine.max_version)
		mine.min_version = mine.max_version;
	/* A host never sends more than the agent accepts. */
	mine.max_payload = r->agent_max_payload;
	uint8_t buf[64];
	to_peer_encoded(r, p, buf, msb_proto_enc_hello(buf, sizeof(buf), &mine));
	uint16_t version;
	if (h->role != MSB_PROTO_ROLE_HOST) {
		peer_fail(r, p, MSB_PROTO_ERR_PROTOCOL, "peer HELLO is not from a host");
	} else if (msb_proto_hello_negotiate(&mine, h, &version) < 0) {
		peer_fail(r, p, MSB_PROTO_ERR_VERSION, "no common protocol version");
	} else if (h->max_payload < MSB_PROTO_MAX_PAYLOAD) {
		/* The agent's frames are passed on whole: up to the maximum. */
		peer_fail(r, p, MSB_PROTO_ERR_LIMIT,
			  "this relay passes frames of up to 65536 bytes: state that maximum");
	} else {
		p->hello_done = true;
	}
}

/* A channel the host opens: its id checked, one of ours allocated. */
static void peer_open(oci_relay *r, struct peer *p, const msb_proto_frame *f,
		      const msb_proto_msg *m)
{
	if (!msb_proto_channel_is_host(m->channel) || m->channel <= p->last_id) {
		peer_fail(r, p, MSB_PROTO_ERR_PROTOCOL, "channel ids must be odd and increasing");
		return;
	}
	p->last_id = m->channel;
	uint8_t buf[MSB_PROTO_HEADER_SIZE + 4 + MSB_PROTO_MAX_ERROR_MSG];
	if (m->type == MSB_PROTO_EGRESS_LISTEN) {
		/* One listen per agent, the shim's proxy's; its socket stays in
		 * the sandbox (no handover through a relay). */
		const char *no = m->u.egress_listen.flags & MSB_PROTO_EGRESS_HANDOVER
					 ? "no listening socket is handed over through the relay"
				 : r->egress_peer ? "egress is already listening"
						  : NULL;
		if (no) {
			to_peer_encoded(r, p, buf,
					msb_proto_enc_error(buf, sizeof(buf), m->channel,
							    MSB_PROTO_ERR_UNSUPPORTED, no));
			return;
		}
	}
	if (r->nchans >= OCI_RELAY_MAX_CHANNELS || r->last_up_id >= UINT32_MAX - 2) {
		to_peer_encoded(r, p, buf,
				msb_proto_enc_error(buf, sizeof(buf), m->channel,
						    MSB_PROTO_ERR_LIMIT,
						    "too many channels open on this sandbox"));
		return;
	}
	struct chan *c = calloc(1, sizeof(*c));
	if (!c) {
		to_peer_encoded(r, p, buf,
				msb_proto_enc_error(buf, sizeof(buf), m->channel,
						    MSB_PROTO_ERR_INTERNAL, "out of memory"));
		return;
	}
	r->last_up_id = r->last_up_id ? r->last_up_id + 2 : 1;
	c->up_id = r->last_up_id;
	c->down_id = m->channel;
	c->peer = p;
	c->kind = m->type == MSB_PROTO_EXEC_OPEN       ? CH_EXEC
		  : m->type == MSB_PROTO_EGRESS_LISTEN ? CH_LISTEN
						       : CH_PS;
	if (c->kind == CH_LISTEN)
		r->egress_peer = p;
	c->next = r->chans;
	r->chans = c;
	r->nchans++;
	if (put_frame(&r->up_out, f, c->up_id) < 0)
		peer_fail(r, p, MSB_PROTO_ERR_LIMIT, "the sandbox's agent is not reading");
}

/* IDENTITY (a claimed pooled sandbox's host name, docs/pool.md): passed to
 * the agent under a cookie of the relay's; its IDENTITY_OK comes back to
 * this host. An agent that fails it ends its connection, and the sandbox
 * with it: the claim fails and the library takes it down. */
static void peer_identity(oci_relay *r, struct peer *p, const msb_proto_identity *id)
{
	char name[MSB_PROTO_MAX_HOSTNAME + 1];
	uint8_t buf[MSB_PROTO_HEADER_SIZE + 16 + MSB_PROTO_MAX_HOSTNAME];
	memcpy(name, id->hostname.ptr, id->hostname.len); /* checked by the decoder */
	name[id->hostname.len] = '\0';
	for (size_t i = 0; i < OCI_RELAY_MAX_PINGS; i++) {
		struct ping *pg = &r->pings[i];
		if (pg->used)
			continue;
		*pg = (struct ping){true, ++r->last_cookie, id->cookie, p, true};
		if (put_encoded(&r->up_out, buf,
				msb_proto_enc_identity(buf, sizeof(buf), pg->up, name)) < 0) {
			pg->used = false;
			peer_fail(r, p, MSB_PROTO_ERR_LIMIT, "the sandbox's agent is not reading");
		}
		return;
	}
	peer_fail(r, p, MSB_PROTO_ERR_LIMIT, "too many requests in flight on this sandbox");
}

static void peer_frame(oci_relay *r, struct peer *p, const msb_proto_frame *f)
{
	msb_proto_msg m;
	int rc = msb_proto_decode(f, &m);
	if (rc < 0) {
		peer_fail(r, p, MSB_PROTO_ERR_PROTOCOL, msb_proto_strerror(rc));
		return;
	}
	if (!msb_proto_host_may_send(m.type)) {
		peer_fail(r, p, MSB_PROTO_ERR_PROTOCOL, "frame type not sent by a host");
		return;
	}
	if (!p->hello_done) {
		if (m.type == MSB_PROTO_HELLO)
			peer_hello(p, r, &m.u.hello);
		else
			peer_fail(r, p, MSB_PROTO_ERR_PROTOCOL, "expected HELLO");
		return;
	}
	uint8_t buf[64];
	if (m.channel == 0) {
		switch (m.type) {
		case MSB_PROTO_PING:
			for (size_t i = 0; i < OCI_RELAY_MAX_PINGS; i++) {
				struct ping *pg = &r->pings[i];
				if (pg->used)
					continue;
				*pg = (struct ping){true, ++r->last_cookie, m.u.cookie, p, false};
				if (put_encoded(&r->up_out, buf,
						msb_proto_enc_ping(buf, sizeof(buf), MSB_PROTO_PING,
								   pg->up)) < 0) {
					pg->used = false;
					peer_fail(r, p, MSB_PROTO_ERR_LIMIT,
						  "the sandbox's agent is not reading");
				}
				return;
			}
			/* Many PINGs in flight: the relay answers this one itself. */
			to_peer_encoded(
				r, p, buf,
				msb_proto_enc_ping(buf, sizeof(buf), MSB_PROTO_PONG, m.u.cookie));
			return;
		case MSB_PROTO_PONG:
			return;
		case MSB_PROTO_IDENTITY:
			peer_identity(r, p, &m.u.identity);
			return;
		case MSB_PROTO_ERROR:
			peer_close(r, p); /* the host gives up the connection */
			return;
		default:
			peer_fail(r, p, MSB_PROTO_ERR_PROTOCOL, "unexpected frame on channel 0");
			return;
		}
	}
	if (msb_proto_channel_is_agent(m.channel)) {
		peer_tunnel(r, p, f, &m);
		return;
	}
	switch (m.type) {
	case MSB_PROTO_EXEC_OPEN:
	case MSB_PROTO_PS_REQUEST:
	case MSB_PROTO_EGRESS_LISTEN:
		peer_open(r, p, f, &m);
		return;
	case MSB_PROTO_DATA:
	case MSB_PROTO_EOF:
	case MSB_PROTO_CREDIT:
	case MSB_PROTO_CANCEL:
	case MSB_PROTO_ERROR: {
		struct chan *c = find_down(r, p, m.channel);
		if (!c) {
			if (m.channel > p->last_id)
				peer_fail(r, p, MSB_PROTO_ERR_PROTOCOL,
					  "frame on a channel never opened");
			return; /* stale: the channel ended before the host saw it */
		}
		if (c->kind != CH_EXEC)
			return; /* the agent takes nothing on a snapshot channel */
		if (put_frame(&r->up_out, f, c->up_id) < 0)
			peer_fail(r, p, MSB_PROTO_ERR_LIMIT, "the sandbox's agent is not reading");
		return;
	}
	default:
		peer_fail(r, p, MSB_PROTO_ERR_PROTOCOL, "unexpected frame type");
		return;
	}
}

static void peer_read(oci_relay *r, struct peer *p)
{
	for (int rounds = 0; rounds < READ_ROUNDS && !p->closing && !p->dead && !r->lost;
	     rounds++) {
		if (msb_proto_outq_pending(&r->up_out) >= OCI_RELAY_UP_HIGH)
			return; /* the agent's queue first */
		uint8_t *dst;
		size_t room = msb_proto_reader_space(p->rd, &dst);
		if (room == 0) {
			peer_fail(r, p, MSB_PROTO_ERR_PROTOCOL, "frame reader overflow");
			return;
		}
		ssize_t n = recv(p->fd, dst, room, MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				peer_close(r, p);
			return;
		}
		if (n == 0) {
			peer_close(r, p);
			return;
		}
		msb_proto_reader_commit(p->rd, (size_t)n);
		msb_proto_frame f;
		int rc;
		while (!p->closing && !p->dead && !r->lost &&
		       (rc = msb_proto_reader_next(p->rd, &f)) != 0) {
			if (rc < 0) {
				peer_fail(r, p, MSB_PROTO_ERR_PROTOCOL, msb_proto_strerror(rc));
				return;
			}
			peer_frame(r, p, &f);
		}
	}
}

static void peer_flush(oci_relay *r, struct peer *p)
{
	if (p->dead)
		return;
	if (msb_proto_outq_send(&p->out, p->fd) < 0)
		peer_close(r, p);
}

static void accept_peers(oci_relay *r)
{
	while (r->npeers < OCI_RELAY_MAX_PEERS) {
		int fd = accept4(r->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			return;
		}
		struct peer *p = calloc(1, sizeof(*p));
		msb_proto_reader *rd = malloc(sizeof(*rd));
		if (!p || !rd) {
			free(p);
			free(rd);
			close(fd);
			return;
		}
		msb_proto_reader_init(rd, r->agent_max_payload);
		(void)msb_proto_outq_init(&p->out, PEER_OUT_INITIAL, OCI_RELAY_PEER_MAX);
		p->fd = fd;
		p->rd = rd;
		p->next = r->peers;
		r->peers = p;
		r->npeers++;
	}
}

static void peer_free(struct peer *p)
{
	if (p->fd >= 0)
		close(p->fd);
	free(p->rd);
	msb_proto_outq_free(&p->out);
	free(p);
}

static void sweep(oci_relay *r)
{
	int64_t now = msb__now_ns();
	for (struct peer **pp = &r->peers; *pp;) {
		struct peer *p = *pp;
		if (p->closing && !p->dead &&
		    (msb_proto_outq_pending(&p->out) == 0 || now >= p->close_deadline_ns))
			peer_close(r, p);
		if (p->dead) {
			*pp = p->next;
			r->npeers--;
			peer_free(p);
		} else {
			pp = &p->next;
		}
	}
}

/* ---- the loop's interface --------------------------------------------------------- */

void oci_relay_listen(oci_relay *r, int listen_fd)
{
	int fl = fcntl(listen_fd, F_GETFL);
	if (fl >= 0)
		fcntl(listen_fd, F_SETFL, fl | O_NONBLOCK);
	r->listen_fd = listen_fd;
}

size_t oci_relay_nfds(const oci_relay *r)
{
	return 2 + r->npeers;
}

size_t oci_relay_fill(oci_relay *r, struct pollfd *fds, size_t cap)
{
	if (cap < 2)
		return 0;
	fds[0] = (struct pollfd){.fd = r->lost ? -1 : r->up_fd, .events = POLLIN};
	if (msb_proto_outq_pending(&r->up_out))
		fds[0].events |= POLLOUT;
	fds[1] = (struct pollfd){.fd = r->npeers < OCI_RELAY_MAX_PEERS ? r->listen_fd : -1,
				 .events = POLLIN};
	size_t n = 2;
	r->nslots = 0;
	bool up_busy = msb_proto_outq_pending(&r->up_out) >= OCI_RELAY_UP_HIGH;
	for (struct peer *p = r->peers; p && n < cap && r->nslots < OCI_RELAY_MAX_PEERS;
	     p = p->next) {
		if (p->dead)
			continue;
		short ev = 0;
		if (!p->closing && !up_busy)
			ev |= POLLIN;
		if (msb_proto_outq_pending(&p->out))
			ev |= POLLOUT;
		fds[n++] = (struct pollfd){.fd = ev ? p->fd : -1, .events = ev};
		r->slots[r->nslots++] = p;
	}
	return n;
}

int oci_relay_run(oci_relay *r, const struct pollfd *fds, size_t n, char *why, size_t size)
{
	if (n >= 1 && !r->lost) {
		if (fds[0].revents & POLLOUT)
			up_flush(r);
		if (fds[0].revents & (POLLIN | POLLHUP | POLLERR))
			up_read(r);
	}
	if (n >= 2 && (fds[1].revents & POLLIN) && r->listen_fd >= 0)
		accept_peers(r);
	for (size_t i = 2; i < n && i - 2 < r->nslots && !r->lost; i++) {
		struct peer *p = r->slots[i - 2];
		short re = fds[i].revents;
		if (!re || p->dead)
			continue;
		if (re & POLLOUT)
			peer_flush(r, p);
		if (!p->dead && (re & (POLLIN | POLLHUP | POLLERR)))
			peer_read(r, p);
	}
	/* What this turn queued goes out now where the kernel takes it. */
	up_flush(r);
	for (struct peer *p = r->peers; p; p = p->next)
		if (!p->dead && msb_proto_outq_pending(&p->out))
			peer_flush(r, p);
	sweep(r);
	if (r->lost) {
		snprintf(why, size, "%s", r->why);
		return -1;
	}
	return 0;
}

int oci_relay_timeout_ms(const oci_relay *r)
{
	int64_t next = INT64_MAX;
	for (const struct peer *p = r->peers; p; p = p->next)
		if (p->closing && !p->dead && p->close_deadline_ns < next)
			next = p->close_deadline_ns;
	if (next == INT64_MAX)
		return -1;
	int64_t ms = (next - msb__now_ns() + 999999) / 1000000;
	return ms < 0 ? 0 : ms > 60000 ? 60000 : (int)ms;
}

size_t oci_relay_peers(const oci_relay *r)
{
	return r->npeers;
}

void oci_relay_free(oci_relay *r)
{
	if (!r)
		return;
	while (r->peers) {
		struct peer *p = r->peers;
		r->peers = p->next;
		peer_free(p);
	}
	while (r->chans) {
		struct chan *c = r->chans;
		r->chans = c->next;
		free(c);
	}
	if (r->listen_fd >= 0)
		close(r->listen_fd);
	if (r->up_fd >= 0)
		close(r->up_fd);
	free(r->up_rd);
	msb_proto_outq_free(&r->up_out);
	free(r);
}
