/* SPDX-License-Identifier: Apache-2.0 */
/*
 * src/proto - the wire codec between the host (libmsb, msb-shim) and msb-agent.
 *
 * libc only: no util.h, no jansson, so that the static agent links it as
 * is; nothing here allocates except the outbound queue (outq.h). Every
 * function here is reentrant; a reader or a queue is owned by one
 * connection. docs/internals/protocol.md is the reference of the format.
 *
 * A connection is a stream of frames. A frame is a 12-byte little-endian
 * header followed by `length` payload bytes:
 *
 *	u32 length   payload bytes, at most the receiver's stated maximum (<= 64 KiB)
 *	u16 type     enum msb_proto_type
 *	u16 flags    0, except MSB_PROTO_FLAG_MORE on PS_REPLY
 *	u32 channel  0 = the connection itself; otherwise a channel (an exec, a
 *		     process snapshot; later a file transfer or an egress tunnel)
 *
 * Decoders validate completely (every length against what remains, every
 * count against its cap, reserved fields zero, no trailing bytes), so a
 * decoded message is canonical: encoding it again gives the same bytes.
 * Decoded strings are views into the frame (not NUL-terminated) and stay
 * valid as long as the frame does.
 *
 * Return convention: 0 (or a positive length/count) on success, a negative
 * MSB_PROTO_E_* on failure.
 */
#ifndef MSB_PROTO_PROTO_H
#define MSB_PROTO_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- status codes -------------------------------------------------------- */

enum msb_proto_status {
	MSB_PROTO_OK = 0,
	MSB_PROTO_E_MALFORMED = -1, /* bad length, bad field value, trailing bytes */
	MSB_PROTO_E_LIMIT = -2,	    /* a size or count over its cap */
	MSB_PROTO_E_UNKNOWN = -3,   /* unknown frame type or flag */
	MSB_PROTO_E_CHANNEL = -4,   /* message not allowed on that channel */
	MSB_PROTO_E_SPACE = -5,	    /* encoder: the output buffer is too small */
	MSB_PROTO_E_VERSION = -6,   /* HELLO: no common version, or bad magic */
	MSB_PROTO_E_TYPE = -7,	    /* decoder called on a frame of another type */
	MSB_PROTO_E_FULL = -8,	    /* outbound queue: past its maximum (outq.h) */
	MSB_PROTO_E_NOMEM = -9,	    /* outbound queue: allocation failed */
};

/* Static description of a status ("malformed frame", ...). Never NULL. */
const char *msb_proto_strerror(int status);

/* ---- limits (hard caps; a peer exceeding one breaks the protocol) -------- */

#define MSB_PROTO_MAGIC 0x3142534dU /* "MSB1" on the wire */
#define MSB_PROTO_VERSION_MIN 1
/* Version 2 added terminals: EXEC_OPEN's TTY flag and WINSIZE. */
#define MSB_PROTO_VERSION_MAX 2
#define MSB_PROTO_VERSION_TTY 2

#define MSB_PROTO_HEADER_SIZE 12u
#define MSB_PROTO_MAX_PAYLOAD 65536u /* absolute cap on one frame's payload */
#define MSB_PROTO_MIN_PAYLOAD 4096u  /* the smallest maximum a peer may state */
#define MSB_PROTO_FRAME_MAX (MSB_PROTO_HEADER_SIZE + MSB_PROTO_MAX_PAYLOAD)

#define MSB_PROTO_MAX_CHANNELS 64u	 /* open channels per connection */
#define MSB_PROTO_MAX_ARGS 1024u	 /* argv entries */
#define MSB_PROTO_MAX_ENV 1024u		 /* env entries */
#define MSB_PROTO_MAX_STRING 61440u	 /* one argv or env string; a request fits one frame */
#define MSB_PROTO_MAX_PATH 4096u	 /* working directory */
#define MSB_PROTO_MAX_ERROR_MSG 256u	 /* ERROR message bytes */
#define MSB_PROTO_MAX_PS_ENTRIES 4096u	 /* processes in one snapshot */
#define MSB_PROTO_MAX_PS_ARGV 4096u	 /* command line bytes of one process */
#define MSB_PROTO_MAX_COMM 16u		 /* /proc/PID/comm bytes */
#define MSB_PROTO_MAX_WINDOW (16u << 20) /* outstanding credit, per channel and direction */
#define MSB_PROTO_MAX_TIMEOUT_MS (7ull * 24 * 3600 * 1000)
#define MSB_PROTO_MAX_TTY_DIM 4096u /* terminal rows and columns, each 1..this */

/* ---- frame types --------------------------------------------------------- */

enum msb_proto_type {
	/* channel 0 only (ERROR also on a channel) */
	MSB_PROTO_HELLO = 1,
	MSB_PROTO_ERROR = 2,
	MSB_PROTO_PING = 3,
	MSB_PROTO_PONG = 4,
	MSB_PROTO_IDENTITY = 5,	   /* host: the sandbox's host name (a claimed pooled one) */
	MSB_PROTO_IDENTITY_OK = 6, /* agent: done */
	/* exec channels */
	MSB_PROTO_EXEC_OPEN = 16,
	MSB_PROTO_DATA = 17,
	MSB_PROTO_EOF = 18,
	MSB_PROTO_CREDIT = 19,
	MSB_PROTO_EXIT = 20,
	MSB_PROTO_CANCEL = 21,
	MSB_PROTO_WINSIZE = 22, /* version 2: host, on a TTY exec */
	/* process snapshot channels */
	MSB_PROTO_PS_REQUEST = 32,
	MSB_PROTO_PS_REPLY = 33,
	/* egress tunnels (docs/internals/egress.md) */
	MSB_PROTO_EGRESS_LISTEN = 64, /* host: new channel; the agent listens inside */
	MSB_PROTO_EGRESS_READY = 65,  /* agent: on the listen channel */
	MSB_PROTO_EGRESS_OPEN = 66,   /* agent: new even channel, one accepted connection */
	/* 48..63 are reserved for file-transfer channels, 64..79 for egress
	 * tunnels; a version-1 peer refuses them as unknown. */
	/* 80..95 are reserved for host-tool channels forwarded by the agent, for
	 * backends whose guest storage is not a host directory (see
	 * docs/internals/hosttools.md; ns serves host tools without the agent). */
};

/* PS_REPLY: more PS_REPLY frames follow on this channel. */
#define MSB_PROTO_FLAG_MORE 0x0001u

/* Static name of a type ("EXEC_OPEN"); "UNKNOWN" otherwise. */
const char *msb_proto_type_name(uint16_t type);

/* Direction rules: may a host (resp. an agent) send this type? */
bool msb_proto_host_may_send(uint16_t type);
bool msb_proto_agent_may_send(uint16_t type);

/* Channels the host opens have odd ids, strictly increasing per connection;
 * even ids are reserved for channels the agent will open (egress tunnels). */
static inline bool msb_proto_channel_is_host(uint32_t channel)
{
	return (channel & 1u) != 0;
}

/* ---- frames -------------------------------------------------------------- */

typedef struct msb_proto_frame {
	uint16_t type;
	uint16_t flags;
	uint32_t channel;
	uint32_t len;		/* payload length */
	const uint8_t *payload; /* len bytes */
} msb_proto_frame;

/* Validate a header's type, flags and channel (not the payload). */
int msb_proto_header_check(uint16_t type, uint16_t flags, uint32_t channel);

/* Write a 12-byte header at out (for callers that build a payload in place). */
void msb_proto_put_header(uint8_t *out, uint32_t len, uint16_t type, uint16_t flags,
			  uint32_t channel);

/*
 * Incremental frame reader: accepts the byte stream in arbitrary splits. It
 * holds at most one maximal frame (no allocation; embed it or malloc it).
 * The first error latches: every later call returns it.
 */
typedef struct msb_proto_reader {
	uint32_t max_payload; /* frames longer than this are refused (E_LIMIT) */
	int error;
	size_t len;	 /* bytes buffered */
	size_t consumed; /* size of the frame last returned, dropped on the next call */
	uint8_t buf[MSB_PROTO_FRAME_MAX];
} msb_proto_reader;

/* max_payload is clamped to [MSB_PROTO_MIN_PAYLOAD, MSB_PROTO_MAX_PAYLOAD]. */
void msb_proto_reader_init(msb_proto_reader *r, uint32_t max_payload);
/* Free space to read into directly: *dst and its size (0 when full). */
size_t msb_proto_reader_space(msb_proto_reader *r, uint8_t **dst);
/* Account n bytes written at the pointer space() returned. */
void msb_proto_reader_commit(msb_proto_reader *r, size_t n);
/* Copy up to n bytes in; returns how many were taken (0 once an error latched). */
size_t msb_proto_reader_feed(msb_proto_reader *r, const void *data, size_t n);
/* 1: *f is a complete frame (valid until the next call on r); 0: need more
 * bytes; <0: the stream is broken (header check or length cap). */
int msb_proto_reader_next(msb_proto_reader *r, msb_proto_frame *f);
/* true when no partial frame is buffered (a clean place to end the stream). */
bool msb_proto_reader_idle(const msb_proto_reader *r);

/* ---- strings ------------------------------------------------------------- */

typedef struct msb_proto_str {
	const uint8_t *ptr; /* not NUL-terminated; never contains NUL */
	uint32_t len;
} msb_proto_str;

/* A validated list of u32-length-prefixed strings; iterate on a copy. */
typedef struct msb_proto_strlist {
	uint32_t count;
	const uint8_t *pos;
	const uint8_t *end;
} msb_proto_strlist;
bool msb_proto_strlist_next(msb_proto_strlist *it, msb_proto_str *out);

/* ---- HELLO (channel 0; each side sends one first) ------------------------ */

enum msb_proto_role {
	MSB_PROTO_ROLE_HOST = 1,
	MSB_PROTO_ROLE_AGENT = 2,
};

typedef struct msb_proto_hello {
	uint16_t min_version;
	uint16_t max_version;
	uint32_t max_payload;  /* largest payload this side accepts */
	uint32_t max_channels; /* open channels this side accepts */
	uint8_t role;
} msb_proto_hello;

/* Fill a HELLO with this build's versions and limits. */
void msb_proto_hello_default(msb_proto_hello *h, uint8_t role);
/* The highest version both ranges contain, or MSB_PROTO_E_VERSION. Also
 * refuses a peer of the same role. */
int msb_proto_hello_negotiate(const msb_proto_hello *local, const msb_proto_hello *remote,
			      uint16_t *version);

/* ---- ERROR (channel 0: the connection ends; else: the channel ends) ------ */

enum msb_proto_error_code {
	MSB_PROTO_ERR_PROTOCOL = 1,	 /* the peer broke the protocol */
	MSB_PROTO_ERR_VERSION = 2,	 /* no common version */
	MSB_PROTO_ERR_UNSUPPORTED = 3,	 /* well-formed, but not served here */
	MSB_PROTO_ERR_LIMIT = 4,	 /* too many channels or connections */
	MSB_PROTO_ERR_BAD_REQUEST = 5,	 /* a field the agent cannot act on */
	MSB_PROTO_ERR_NOT_FOUND = 6,	 /* working directory missing */
	MSB_PROTO_ERR_NOT_DIRECTORY = 7, /* working directory not a directory */
	MSB_PROTO_ERR_ESCAPE = 8,	 /* working directory outside the storage base */
	MSB_PROTO_ERR_PERMISSION = 9,	 /* working directory not accessible */
	MSB_PROTO_ERR_SPAWN = 10,	 /* fork/pipe failed in the agent */
	MSB_PROTO_ERR_INTERNAL = 11,
};
#define MSB_PROTO_ERR_MAX MSB_PROTO_ERR_INTERNAL

typedef struct msb_proto_error {
	uint16_t code;
	msb_proto_str message; /* printable ASCII only, <= MSB_PROTO_MAX_ERROR_MSG */
} msb_proto_error;

/* ---- IDENTITY (channel 0) -------------------------------------------------- */

/*
 * IDENTITY: u64 cookie, u32 length, the host name (1..MSB_PROTO_MAX_HOSTNAME
 * bytes of [A-Za-z0-9.-]). The agent sets the sandbox's host name (its UTS
 * namespace) and, when it holds the synthesized /etc of the `host` image,
 * rewrites /etc/hostname ("NAME\n") and /etc/hosts (MSB_PROTO_ETC_HOSTS_FMT)
 * there, then answers IDENTITY_OK with the cookie (u64), or ERROR on channel
 * 0 and ends the connection. The host sends it once, when it hands a pooled
 * sandbox its identity; a sandbox made for its key is born with it.
 */
#define MSB_PROTO_MAX_HOSTNAME 63u
/* The synthesized /etc/hosts of the `host` image; %s is the host name. */
#define MSB_PROTO_ETC_HOSTS_FMT                                                                    \
	"127.0.0.1\tlocalhost %s\n::1\tlocalhost ip6-localhost ip6-loopback\n"

typedef struct msb_proto_identity {
	uint64_t cookie;
	msb_proto_str hostname;
} msb_proto_identity;

/* ---- EXEC_OPEN (host -> agent, opens channel) ---------------------------- */

#define MSB_PROTO_EXEC_SHELL 0x1u   /* argv has one entry: a /bin/sh -c command line */
#define MSB_PROTO_EXEC_STDIN 0x2u   /* DATA on stream 0 follows; else stdin is /dev/null */
#define MSB_PROTO_EXEC_BOUNDED 0x4u /* output_budget (> 0) applies */
/* Version 2: the command runs on a pseudo-terminal the agent allocates; its
 * output is stream 1 only, and the payload ends with the window size. */
#define MSB_PROTO_EXEC_TTY 0x8u
/* argv is a file-plane request the agent serves itself, confined like a
 * workload (agent/files.c; the `vm` backend, whose host cannot see the
 * guest's files). Never with SHELL or TTY. */
#define MSB_PROTO_EXEC_FILE 0x10u
#define MSB_PROTO_EXEC_FLAGS_ALL 0x1fu

/* A terminal's size (EXEC_OPEN with TTY, WINSIZE): each 1..MAX_TTY_DIM. */
typedef struct msb_proto_winsize {
	uint16_t rows;
	uint16_t cols;
} msb_proto_winsize;

typedef struct msb_proto_exec_open {
	uint32_t flags;
	uint32_t initial_credit;   /* agent -> host DATA bytes granted up front */
	uint64_t timeout_ms;	   /* 1 .. MSB_PROTO_MAX_TIMEOUT_MS */
	uint64_t output_budget;	   /* combined stdout+stderr bytes; 0 unless BOUNDED */
	msb_proto_str cwd;	   /* relative to the storage base; empty = the base */
	msb_proto_strlist argv;	   /* >= 1 entries; argv[0] non-empty unless SHELL */
	msb_proto_strlist env;	   /* "KEY=VALUE", KEY non-empty */
	msb_proto_winsize winsize; /* TTY only; else zero */
} msb_proto_exec_open;

/* Encoder input: NUL-terminated C strings. */
typedef struct msb_proto_exec_spec {
	uint32_t flags;
	uint32_t initial_credit;
	uint64_t timeout_ms;
	uint64_t output_budget;
	const char *cwd;	   /* NULL = "" */
	const char *const *argv;   /* NULL-terminated */
	const char *const *env;	   /* NULL-terminated; NULL = none */
	msb_proto_winsize winsize; /* TTY only */
} msb_proto_exec_spec;

/* ---- streams, credit, exit, cancel --------------------------------------- */

enum msb_proto_stream {
	MSB_PROTO_STDIN = 0,
	MSB_PROTO_STDOUT = 1,
	MSB_PROTO_STDERR = 2,
};
/* DATA payload: u8 stream + bytes. */
#define MSB_PROTO_DATA_OVERHEAD (MSB_PROTO_HEADER_SIZE + 1u)

typedef struct msb_proto_data {
	uint8_t stream;
	const uint8_t *bytes; /* >= 1 byte */
	uint32_t len;
} msb_proto_data;

enum msb_proto_exit_how {
	MSB_PROTO_EXITED = 0,	/* value: exit status 0..255 */
	MSB_PROTO_SIGNALED = 1, /* value: signal 1..127 */
};
#define MSB_PROTO_EXIT_TIMED_OUT 0x01u	 /* the agent's deadline killed the group */
#define MSB_PROTO_EXIT_CANCELLED 0x02u	 /* a CANCEL killed the group */
#define MSB_PROTO_EXIT_KILLED 0x04u	 /* the agent sent SIGKILL to the group */
#define MSB_PROTO_EXIT_NO_SURVIVOR 0x08u /* ... and saw every member of it die */
#define MSB_PROTO_EXIT_TRUNCATED 0x10u	 /* output stopped at the budget */
#define MSB_PROTO_EXIT_FLAGS_ALL 0x1fu

typedef struct msb_proto_exit {
	uint8_t how;
	uint8_t flags;
	int32_t value;
} msb_proto_exit;

enum msb_proto_cancel_reason {
	MSB_PROTO_CANCEL_REQUESTED = 0, /* the caller's cancel token */
	MSB_PROTO_CANCEL_TIMEOUT = 1,	/* the caller's bound expired */
};

/* ---- process snapshot ---------------------------------------------------- */

typedef struct msb_proto_ps_request {
	uint32_t max_entries; /* 1 .. MSB_PROTO_MAX_PS_ENTRIES */
	uint32_t max_argv;    /* 0 .. MSB_PROTO_MAX_PS_ARGV bytes per process */
} msb_proto_ps_request;

#define MSB_PROTO_PS_ARGV_TRUNCATED 0x01u
/* Bytes of one PS_REPLY entry besides its comm and argv; a reply's payload
 * starts with 4 bytes (count, reserved). */
#define MSB_PROTO_PS_ENTRY_FIXED 34u

typedef struct msb_proto_ps_entry {
	uint32_t pid, ppid, pgid, sid, uid;
	uint64_t start_ticks; /* /proc/PID/stat field 22 */
	uint8_t state;	      /* /proc/PID/stat field 3 (an ASCII letter) */
	uint8_t flags;	      /* MSB_PROTO_PS_ARGV_TRUNCATED */
	msb_proto_str comm;   /* <= MSB_PROTO_MAX_COMM */
	msb_proto_str argv;   /* NUL-separated /proc/PID/cmdline bytes, <= MAX_PS_ARGV */
} msb_proto_ps_entry;

typedef struct msb_proto_ps_reply {
	uint16_t count;
	const uint8_t *pos;
	const uint8_t *end;
} msb_proto_ps_reply;
/* Iterate a validated reply (on a copy to restart). comm and argv may hold
 * any byte except that comm has no NUL. */
bool msb_proto_ps_next(msb_proto_ps_reply *it, msb_proto_ps_entry *out);

/* Build PS_REPLY frames entry by entry into a caller buffer. */
typedef struct msb_proto_ps_writer {
	uint8_t *out;
	size_t cap; /* header + at most the peer's max payload */
	size_t len;
	uint32_t channel;
	uint16_t count;
} msb_proto_ps_writer;
void msb_proto_ps_writer_init(msb_proto_ps_writer *w, uint8_t *out, size_t cap, uint32_t channel);
/* MSB_PROTO_E_SPACE when the entry does not fit: finish this frame (more =
 * true) and start another. E_LIMIT/E_MALFORMED for an entry over a cap. */
int msb_proto_ps_writer_add(msb_proto_ps_writer *w, const msb_proto_ps_entry *e);
/* Returns the frame length; the writer is then empty again. */
int msb_proto_ps_writer_finish(msb_proto_ps_writer *w, bool more);

/* ---- egress tunnels (src/proto/egress.c) ---------------------------------- */

/*
 * EGRESS_LISTEN: u16 port (1..65535), u16 max_tunnels (1..MAX_CHANNELS-1),
 * u32 window (4096..MAX_WINDOW)[, u32 flags]: the agent listens on 127.0.0.1:port inside
 * and answers EGRESS_READY (u32 0) or ERROR on the channel. Each accepted
 * connection becomes an EGRESS_OPEN (u32 0) on a new even channel id; both
 * directions of a tunnel start with `window` bytes of credit. On a tunnel,
 * DATA/EOF stream 1 flows guest -> host and stream 0 host -> guest; CREDIT
 * re-grants; ERROR aborts it. A tunnel ends once EOF went both ways.
 */
typedef struct msb_proto_egress_listen {
	uint16_t port;
	uint16_t max_tunnels;
	uint32_t window;
	uint32_t flags; /* MSB_PROTO_EGRESS_*; sent (u32 after window) only when not 0 */
} msb_proto_egress_listen;

/*
 * EGRESS_LISTEN flag: hand the listening socket over. The agent answers
 * EGRESS_READY with the socket attached (SCM_RIGHTS, a unix connection only)
 * and keeps no copy: the host accepts and relays itself, one relay instead
 * of two (docs/internals/egress.md), and no EGRESS_OPEN follows.
 */
#define MSB_PROTO_EGRESS_HANDOVER 1u

/* Even ids, strictly increasing per connection, for agent-opened channels. */
static inline bool msb_proto_channel_is_agent(uint32_t channel)
{
	return channel != 0 && (channel & 1u) == 0;
}
int msb_proto_enc_egress_listen(uint8_t *out, size_t cap, uint32_t channel,
				const msb_proto_egress_listen *l);
int msb_proto_dec_egress_listen(const msb_proto_frame *f, msb_proto_egress_listen *out);
/* EGRESS_READY and EGRESS_OPEN: u32 reserved 0. */
int msb_proto_enc_egress_empty(uint8_t *out, size_t cap, uint16_t type, uint32_t channel);
int msb_proto_dec_egress_empty(const msb_proto_frame *f, uint16_t type);

/* ---- encoders: a whole frame into out[cap]; return its length ------------ */

int msb_proto_enc_hello(uint8_t *out, size_t cap, const msb_proto_hello *h);
int msb_proto_enc_error(uint8_t *out, size_t cap, uint32_t channel, uint16_t code,
			const char *message);
int msb_proto_enc_ping(uint8_t *out, size_t cap, uint16_t type, uint64_t cookie);
int msb_proto_enc_identity(uint8_t *out, size_t cap, uint64_t cookie, const char *hostname);
/* IDENTITY_OK: u64 cookie. */
int msb_proto_enc_identity_ok(uint8_t *out, size_t cap, uint64_t cookie);
int msb_proto_enc_exec_open(uint8_t *out, size_t cap, uint32_t channel,
			    const msb_proto_exec_spec *spec);
int msb_proto_enc_data(uint8_t *out, size_t cap, uint32_t channel, uint8_t stream,
		       const void *bytes, uint32_t len);
int msb_proto_enc_eof(uint8_t *out, size_t cap, uint32_t channel, uint8_t stream);
int msb_proto_enc_credit(uint8_t *out, size_t cap, uint32_t channel, uint32_t bytes);
int msb_proto_enc_exit(uint8_t *out, size_t cap, uint32_t channel, const msb_proto_exit *e);
int msb_proto_enc_cancel(uint8_t *out, size_t cap, uint32_t channel, uint8_t reason);
int msb_proto_enc_ps_request(uint8_t *out, size_t cap, uint32_t channel,
			     const msb_proto_ps_request *r);
/* WINSIZE: u16 rows, u16 cols, u32 reserved 0. */
int msb_proto_enc_winsize(uint8_t *out, size_t cap, uint32_t channel, const msb_proto_winsize *w);

/* ---- decoders ------------------------------------------------------------ */

int msb_proto_dec_hello(const msb_proto_frame *f, msb_proto_hello *out);
int msb_proto_dec_error(const msb_proto_frame *f, msb_proto_error *out);
/* PING or PONG */
int msb_proto_dec_ping(const msb_proto_frame *f, uint64_t *cookie);
int msb_proto_dec_identity(const msb_proto_frame *f, msb_proto_identity *out);
int msb_proto_dec_identity_ok(const msb_proto_frame *f, uint64_t *cookie);
int msb_proto_dec_exec_open(const msb_proto_frame *f, msb_proto_exec_open *out);
int msb_proto_dec_data(const msb_proto_frame *f, msb_proto_data *out);
int msb_proto_dec_eof(const msb_proto_frame *f, uint8_t *stream);
int msb_proto_dec_credit(const msb_proto_frame *f, uint32_t *bytes);
int msb_proto_dec_exit(const msb_proto_frame *f, msb_proto_exit *out);
int msb_proto_dec_cancel(const msb_proto_frame *f, uint8_t *reason);
int msb_proto_dec_winsize(const msb_proto_frame *f, msb_proto_winsize *out);
int msb_proto_dec_ps_request(const msb_proto_frame *f, msb_proto_ps_request *out);
int msb_proto_dec_ps_reply(const msb_proto_frame *f, msb_proto_ps_reply *out);

/* Any frame: validates the header and decodes the payload by type. */
typedef struct msb_proto_msg {
	uint16_t type;
	uint16_t flags;
	uint32_t channel;
	union {
		msb_proto_hello hello;
		msb_proto_error error;
		uint64_t cookie; /* PING, PONG, IDENTITY_OK */
		msb_proto_identity identity;
		msb_proto_exec_open exec_open;
		msb_proto_data data;
		uint8_t stream; /* EOF */
		uint32_t credit;
		msb_proto_exit exit;
		uint8_t cancel_reason;
		msb_proto_winsize winsize;
		msb_proto_ps_request ps_request;
		msb_proto_ps_reply ps_reply;
		msb_proto_egress_listen egress_listen;
	} u;
} msb_proto_msg;
int msb_proto_decode(const msb_proto_frame *f, msb_proto_msg *out);

/* ---- credit accounting (one direction of one channel) -------------------- */

/*
 * The sender side: `avail` is what it may still send. grant() adds a peer's
 * CREDIT and fails with E_LIMIT when the total would pass MAX_WINDOW;
 * take() fails with E_LIMIT when asked for more than avail.
 */
typedef struct msb_proto_credit {
	uint32_t avail;
} msb_proto_credit;
int msb_proto_credit_grant(msb_proto_credit *c, uint32_t bytes);
int msb_proto_credit_take(msb_proto_credit *c, uint32_t bytes);

#endif
