/* SPDX-License-Identifier: Apache-2.0 */
/*
 * msb-shim's egress proxy, inside (docs/internals/egress.md): the state the
 * three files share. egress_proxy.c: records, the tunnels' decisions, the
 * agent's framed relay, the loop; egress_direct.c: direct tunnels (the
 * agent handed its listener over); egress_start.c: the hand-shake.
 */
#ifndef MSB_SHIM_EGRESS_INT_H
#define MSB_SHIM_EGRESS_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "egress_proxy.h"
#include "proto/outq.h"
#include "proto/proto.h"

#define LISTEN_CHANNEL 1u
/* The destinations are not read while this much is queued for the agent. */
#define OUTQ_HIGH (1024u * 1024)
#define OUTQ_INITIAL (64u * 1024)
/*
 * The agent queue's hard maximum. Past OUTQ_HIGH only what one loop turn
 * adds after its check is queued: one read_up() reservation (at most
 * READ_FRAMES frames of the agent's size, about 1 MiB), the answers to one
 * receive buffer of agent frames (CREDIT, EOF, PONG, ERROR, refusals: small
 * frames, fewer than the frames received) and the refusals of due
 * deadlines (one per tunnel). 4 MiB holds that twice over; reaching it means
 * the agent stopped reading, and the proxy stops with a log line saying so.
 */
#define OUTQ_MAX (4u * 1024 * 1024)
#define LINGER_MS 5000
#define HANDSHAKE_MS 5000

enum { T_HEAD, T_DIAL, T_OPEN, T_LINGER };
enum { TAG_AGENT = 1, TAG_TUNNEL = 2, TAG_GUEST = 3, TAG_LISTEN = 4 };

/*
 * A direct tunnel (the agent handed its listener over, MSB_PROTO_EGRESS_HANDOVER):
 * the guest's connection is here, and once the tunnel is open each direction
 * is spliced through a pipe of at most PIPE_CAP bytes (the same budget as a
 * window), with no copy through this process and no framing.
 */
#define PIPE_CAP MSB_EGRESS_WINDOW

typedef struct tunnel {
	int tag; /* TAG_TUNNEL: first, for the epoll cookie */
	uint32_t id;
	int state;
	int up; /* the destination socket, -1 */
	uint32_t up_events;
	msb_egress_request req;
	msb_egress_entry rec;
	bool recorded;
	bool slot; /* holds one record's room in the log (an allowed tunnel) */
	struct sockaddr_storage addrs[MSB_EGRESS_ADDRS_MAX];
	int n_addrs, cur;
	int64_t deadline; /* 0: none */
	char *pre;	  /* the rewritten head of a plain request, then ubuf */
	size_t pre_off, pre_len;
	uint8_t *ubuf; /* guest -> destination bytes, <= window */
	size_t uhead, ulen;
	uint64_t received; /* from the guest, all told */
	uint32_t regrant;
	msb_proto_credit in_credit;  /* granted to the agent */
	msb_proto_credit out_credit; /* granted by the agent */
	bool plain;
	uint64_t body_left;
	bool agent_eof, up_eof, eof_sent, up_shut;
	bool done;
	/* direct only (guest >= 0); agent_eof then means the guest's EOF */
	int gtag; /* TAG_GUEST: the guest socket's epoll cookie */
	int guest;
	uint32_t guest_events;
	int dpipe[2], upipe[2]; /* destination -> guest, guest -> destination */
	size_t dlen, plen;	/* bytes in each */
	size_t pcap;
	bool dstall, ustall; /* a splice into that pipe found it full */
	bool guest_shut;
	struct tunnel *next;
} tunnel;

static inline bool direct(const tunnel *t)
{
	return t->guest >= 0;
}

struct proxy {
	int tag; /* TAG_AGENT */
	int ep;
	int fd; /* the agent connection */
	int dfd;
	int log_fd;
	uint64_t dropped;
	unsigned slots; /* tunnels holding a record's room */
	msb_egress_config cfg;
	msb_proto_reader *rd;
	uint32_t peer_max_payload;
	msb_proto_outq out; /* frames for the agent, at most OUTQ_MAX bytes */
	bool want_out;
	uint32_t last_id;
	unsigned ntunnels;
	tunnel *tunnels;
	bool broken;
	int ltag;      /* TAG_LISTEN */
	int listen_fd; /* handed over by the agent: direct tunnels; else -1 */
	uint32_t listen_events;
};

static inline int64_t now_ms(void)
{
	return msb__now_ns() / 1000000;
}

/* egress_proxy.c */
tunnel *new_tunnel(proxy *p, uint32_t id);
void tunnel_finish(proxy *p, tunnel *t, const char *why);
void tunnel_abort(proxy *p, tunnel *t, const char *msg, const char *why);
void send_eof(proxy *p, tunnel *t);
void flush_up(proxy *p, tunnel *t);
void on_head(proxy *p, tunnel *t);
void on_agent_eof(proxy *p, tunnel *t);

/* egress_direct.c */
int open_pipes(tunnel *t);
int pipe_drain(int from, int to, size_t *left, uint64_t *moved);
void progress(proxy *p, tunnel *t);
void read_up_direct(proxy *p, tunnel *t);
void on_guest(proxy *p, tunnel *t, uint32_t events);
void guest_interest(proxy *p, tunnel *t);
void accept_guests(proxy *p);
void listen_interest(proxy *p);

#endif
