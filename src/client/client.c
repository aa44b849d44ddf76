/* SPDX-License-Identifier: Apache-2.0 */
/* The connection to msb-agent: connect, HELLO, buffered I/O, ps and ping. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>

#include "client/client_priv.h"

/* ---- time ---------------------------------------------------------------- */

int64_t msb_client__deadline(double seconds)
{
	int64_t now = msb__now_ns();
	double ns = seconds * 1e9;
	if (!(ns < (double)(INT64_MAX - now)))
		return INT64_MAX;
	return now + (int64_t)ns;
}

/* ---- send queue ---------------------------------------------------------- */

size_t msb_client__queued(const msb_client *c)
{
	return msb_proto_outq_pending(&c->out);
}

int msb_client__reserve(msb_client *c, size_t n, uint8_t **dst, msb_error **err)
{
	int rc = msb_proto_outq_reserve(&c->out, n, dst);
	if (rc == 0)
		return 0;
	size_t queued = msb_client__queued(c);
	msb_client__drop(c);
	if (rc == MSB_PROTO_E_NOMEM)
		return msb__error_nomem(err);
	return msb_error_set(err, MSB_E_PROTOCOL,
			     "sandbox agent is not reading: %zu bytes queued for it, and %zu more "
			     "would pass the send queue's maximum of %u bytes",
			     queued, n, MSB_CLIENT_OUTQ_MAX);
}

void msb_client__commit(msb_client *c, size_t n)
{
	msb_proto_outq_commit(&c->out, n);
}

int msb_client__queue_small(msb_client *c, const uint8_t *frame, int len, msb_error **err)
{
	if (len <= 0)
		return msb_error_set(err, MSB_E_RUNTIME, "cannot encode a frame: %s",
				     msb_proto_strerror(len));
	uint8_t *dst;
	int rc = msb_client__reserve(c, (size_t)len, &dst, err);
	if (rc < 0)
		return rc;
	memcpy(dst, frame, (size_t)len);
	msb_client__commit(c, (size_t)len);
	return 0;
}

/* ---- connection ---------------------------------------------------------- */

void msb_client__drop(msb_client *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	msb_proto_outq_clear(&c->out);
	c->last_channel = 0;
	if (c->rd)
		msb_proto_reader_init(c->rd, MSB_PROTO_MAX_PAYLOAD);
}

uint32_t msb_client__channel(msb_client *c)
{
	if (c->last_channel >= UINT32_MAX - 2)
		return 0;
	c->last_channel = c->last_channel == 0 ? 1 : c->last_channel + 2;
	return c->last_channel;
}

int msb_client__violation(msb_client *c, msb_error **err, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	_cleanup_free_ char *what = msb__vasprintf(fmt, ap);
	va_end(ap);
	if (c->fd >= 0) {
		/* tell the agent why, best effort, then hang up */
		uint8_t buf[MSB_PROTO_HEADER_SIZE + 4 + MSB_PROTO_MAX_ERROR_MSG];
		int n = msb_proto_enc_error(buf, sizeof(buf), 0, MSB_PROTO_ERR_PROTOCOL,
					    what ? what : "protocol violation");
		if (n > 0) {
			ssize_t w = send(c->fd, buf, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
			(void)w;
		}
	}
	msb_client__drop(c);
	return msb_error_set(err, MSB_E_PROTOCOL, "sandbox agent broke the protocol: %s",
			     what ? what : "protocol violation");
}

int msb_client__lost(msb_client *c, int rc, const char *during, msb_error **err)
{
	msb_client__drop(c);
	if (rc == -EPIPE)
		return msb_error_set(err, MSB_E_PROTOCOL,
				     "sandbox agent closed the connection during %s", during);
	if (rc == -ENOMEM)
		return msb__error_nomem(err);
	return msb_error_set(err, MSB_E_PROTOCOL,
			     "connection to the sandbox agent failed during %s: %s", during,
			     strerror(-rc));
}

int msb_client__peer_error(msb_client *c, const msb_proto_frame *f, msb_error **err)
{
	msb_proto_error pe;
	if (msb_proto_dec_error(f, &pe) < 0)
		return msb_client__violation(c, err, "malformed ERROR frame");
	msb_client__drop(c);
	int rc = msb_error_set(err, MSB_E_PROTOCOL, "sandbox agent ended the connection (code %u)",
			       (unsigned)pe.code);
	msb_error_set_detail(err, "agent: %.*s", (int)pe.message.len, (const char *)pe.message.ptr);
	return rc;
}

static int flush(msb_client *c)
{
	int rc = msb_proto_outq_send(&c->out, c->fd);
	return rc == -ECONNRESET ? -EPIPE : rc;
}

int msb_client__io(msb_client *c, int64_t deadline, msb_client_watch *w, size_t nw)
{
	if (c->fd < 0)
		return -EPIPE;
	if (nw > MSB_CLIENT_MAX_WATCH)
		return -EINVAL;
	int rc = flush(c);
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < nw; i++)
		w[i].revents = 0;
	for (;;) {
		int64_t now = msb__now_ns();
		if (now >= deadline)
			return 0;
		int64_t ms = (deadline - now + 999999) / 1000000;
		int timeout = deadline == INT64_MAX ? -1 : ms > INT_MAX ? INT_MAX : (int)ms;
		struct pollfd p[1 + MSB_CLIENT_MAX_WATCH];
		p[0] = (struct pollfd){.fd = c->fd, .events = POLLIN};
		for (size_t i = 0; i < nw; i++)
			p[1 + i] = (struct pollfd){.fd = w[i].events ? w[i].fd : -1,
						   .events = w[i].events};
		if (msb_client__queued(c) > 0)
			p[0].events |= POLLOUT;
		int n = poll(p, 1 + nw, timeout);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			continue; /* re-check the clock */
		bool progress = false;
		for (size_t i = 0; i < nw; i++) {
			if (p[1 + i].fd >= 0 && p[1 + i].revents) {
				w[i].revents = p[1 + i].revents;
				progress = true;
			}
		}
		if (p[0].revents & POLLOUT) {
			if ((rc = flush(c)) < 0)
				return rc;
			progress = true;
		}
		if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
			uint8_t *dst;
			size_t room = msb_proto_reader_space(c->rd, &dst);
			if (room == 0)
				return -EPROTO;
			ssize_t r = recv(c->fd, dst, room, MSG_DONTWAIT);
			if (r < 0) {
				if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)
					continue;
				return errno == ECONNRESET ? -EPIPE : -errno;
			}
			if (r == 0)
				return -EPIPE;
			msb_proto_reader_commit(c->rd, (size_t)r);
			progress = true;
		}
		if (progress)
			return 1;
	}
}

/* Wait for the next frame (any channel). 1 with *f, 0 at the deadline,
 * <0 on a broken stream: -EPROTO (bad frame) or an msb_client__io error. */
static int next_frame(msb_client *c, int64_t deadline, msb_proto_frame *f)
{
	for (;;) {
		int rc = msb_proto_reader_next(c->rd, f);
		if (rc != 0)
			return rc < 0 ? -EPROTO : 1;
		rc = msb_client__io(c, deadline, NULL, 0);
		if (rc <= 0)
			return rc;
	}
}

static int hello_send(msb_client *c, msb_error **err)
{
	msb_proto_hello mine;
	msb_proto_hello_default(&mine, MSB_PROTO_ROLE_HOST);
	uint8_t buf[64];
	return msb_client__queue_small(c, buf, msb_proto_enc_hello(buf, sizeof(buf), &mine), err);
}

/* The agent's HELLO, to ours already sent. */
static int hello_recv(msb_client *c, int64_t deadline, msb_error **err)
{
	msb_proto_hello mine, theirs;
	msb_proto_hello_default(&mine, MSB_PROTO_ROLE_HOST);
	msb_proto_frame f;
	int rc = next_frame(c, deadline, &f);
	if (rc == 0) {
		msb_client__drop(c);
		return msb_error_set(err, MSB_E_TIMEOUT,
				     "sandbox agent did not answer HELLO in time");
	}
	if (rc == -EPROTO)
		return msb_client__violation(c, err, "bad frame instead of HELLO");
	if (rc < 0)
		return msb_client__lost(c, rc, "HELLO", err);
	if (f.type == MSB_PROTO_ERROR && f.channel == 0)
		return msb_client__peer_error(c, &f, err);
	if (f.type != MSB_PROTO_HELLO)
		return msb_client__violation(c, err, "expected HELLO, got %s",
					     msb_proto_type_name(f.type));
	rc = msb_proto_dec_hello(&f, &theirs);
	if (rc < 0)
		return msb_client__violation(c, err, "bad HELLO: %s", msb_proto_strerror(rc));
	if (theirs.role != MSB_PROTO_ROLE_AGENT)
		return msb_client__violation(c, err, "peer HELLO is not from an agent");
	if (msb_proto_hello_negotiate(&mine, &theirs, &c->version) < 0) {
		msb_client__drop(c);
		return msb_error_set(
			err, MSB_E_PROTOCOL,
			"sandbox agent speaks protocol versions %u..%u, this host %u..%u",
			(unsigned)theirs.min_version, (unsigned)theirs.max_version,
			(unsigned)mine.min_version, (unsigned)mine.max_version);
	}
	c->peer_max_payload = theirs.max_payload;
	return 0;
}

static int hello(msb_client *c, int64_t deadline, msb_error **err)
{
	int rc = hello_send(c, err);
	return rc < 0 ? rc : hello_recv(c, deadline, err);
}

static int connect_path(const char *path, int64_t deadline, int *out, msb_error **err)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	size_t len = strlen(path);
	if (len == 0 || len >= sizeof(sa.sun_path))
		return msb_error_set(err, MSB_E_VALUE, "agent socket path `%s` is too long", path);
	memcpy(sa.sun_path, path, len + 1);
	_cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return msb__error_errno(err, -errno, "socket");
	for (;;) {
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
			break;
		int e = errno;
		if (e == EINTR)
			continue;
		/* a unix socket's backlog is full: retry until the deadline */
		if ((e == EAGAIN || e == EINPROGRESS) && msb__now_ns() < deadline) {
			struct timespec ts = {0, 1000 * 1000};
			nanosleep(&ts, NULL);
			continue;
		}
		int rc = msb_error_set(err, MSB_E_RUNTIME,
				       "cannot connect to the sandbox agent: %s", strerror(e));
		msb_error_set_detail(err, "socket `%s`", path);
		return rc;
	}
	*out = TAKE_FD(fd);
	return 0;
}

int msb_client__ensure_begin(msb_client *c, int64_t deadline, bool *fresh, msb_error **err)
{
	*fresh = false;
	if (c->fd >= 0)
		return 0;
	if (!c->path)
		return msb_error_set(err, MSB_E_PROTOCOL,
				     "connection to the sandbox agent is closed");
	int rc = connect_path(c->path, deadline, &c->fd, err);
	if (rc == 0)
		rc = hello_send(c, err);
	if (rc < 0)
		return rc;
	/* Every agent takes frames this large, whatever its HELLO will say. */
	c->peer_max_payload = MSB_PROTO_MIN_PAYLOAD;
	*fresh = true;
	return 0;
}

int msb_client__ensure_finish(msb_client *c, int64_t deadline, msb_error **err)
{
	return hello_recv(c, deadline, err);
}

int msb_client__ensure(msb_client *c, int64_t deadline, msb_error **err)
{
	if (c->fd >= 0)
		return 0;
	if (!c->path)
		return msb_error_set(err, MSB_E_PROTOCOL,
				     "connection to the sandbox agent is closed");
	int rc = connect_path(c->path, deadline, &c->fd, err);
	if (rc < 0)
		return rc;
	return hello(c, deadline, err);
}

static int client_new(msb_client **out, msb_error **err)
{
	msb_client *c = calloc(1, sizeof(*c));
	if (!c)
		return msb__error_nomem(err);
	c->rd = malloc(sizeof(*c->rd));
	if (!c->rd) {
		free(c);
		return msb__error_nomem(err);
	}
	msb_proto_reader_init(c->rd, MSB_PROTO_MAX_PAYLOAD);
	(void)msb_proto_outq_init(&c->out, MSB_CLIENT_OUTQ_INITIAL, MSB_CLIENT_OUTQ_MAX);
	c->fd = -1;
	pthread_mutex_init(&c->lock, NULL);
	*out = c;
	return 0;
}

int msb_client__connect(const char *socket_path, double timeout, msb_client **out, msb_error **err)
{
	msb_client *c;
	if (!socket_path)
		return msb_error_set(err, MSB_E_VALUE, "agent socket path is required");
	int rc = msb__check_timeout(timeout, "connect timeout", err);
	if (rc < 0)
		return rc;
	if ((rc = client_new(&c, err)) < 0)
		return rc;
	c->path = msb__strdup(socket_path);
	if (!c->path) {
		msb_client__free(c);
		return msb__error_nomem(err);
	}
	rc = msb_client__ensure(c, msb_client__deadline(timeout), err);
	if (rc < 0) {
		msb_client__free(c);
		return rc;
	}
	*out = c;
	return 0;
}

int msb_client__open(const char *socket_path, msb_client **out, msb_error **err)
{
	msb_client *c;
	if (!socket_path)
		return msb_error_set(err, MSB_E_VALUE, "agent socket path is required");
	int rc = client_new(&c, err);
	if (rc < 0)
		return rc;
	if (!(c->path = msb__strdup(socket_path))) {
		msb_client__free(c);
		return msb__error_nomem(err);
	}
	*out = c;
	return 0;
}

bool msb_client__idle_ok(msb_client *c)
{
	pthread_mutex_lock(&c->lock);
	bool ok = c->fd >= 0;
	if (ok) {
		/* Between calls the agent says nothing: anything readable is
		 * its end (or a violation), either way not a usable connection. */
		struct pollfd p = {.fd = c->fd, .events = POLLIN};
		ok = poll(&p, 1, 0) == 0;
		if (!ok)
			msb_client__drop(c);
	}
	pthread_mutex_unlock(&c->lock);
	return ok;
}

int msb_client__connect_fd(int fd, double timeout, msb_client **out, msb_error **err)
{
	msb_client *c;
	int rc = msb__check_timeout(timeout, "connect timeout", err);
	if (rc < 0 || (rc = client_new(&c, err)) < 0) {
		if (fd >= 0)
			close(fd);
		return rc;
	}
	if (fd < 0) {
		msb_client__free(c);
		return msb_error_set(err, MSB_E_VALUE, "invalid agent connection fd");
	}
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 ||
	    fcntl(fd, F_SETFD, FD_CLOEXEC) < 0) {
		rc = msb__error_errno(err, -errno, "agent connection fd");
		close(fd);
		msb_client__free(c);
		return rc;
	}
	c->fd = fd;
	rc = hello(c, msb_client__deadline(timeout), err);
	if (rc < 0) {
		msb_client__free(c);
		return rc;
	}
	*out = c;
	return 0;
}

void msb_client__free(msb_client *c)
{
	if (!c)
		return;
	msb_client__drop(c);
	pthread_mutex_destroy(&c->lock);
	free(c->rd);
	msb_proto_outq_free(&c->out);
	free(c->path);
	free(c);
}

uint16_t msb_client__version(const msb_client *c)
{
	return c->version;
}

/* ---- ping ---------------------------------------------------------------- */

static int ping_locked(msb_client *c, double timeout, msb_error **err)
{
	int64_t deadline = msb_client__deadline(timeout);
	int rc = msb_client__ensure(c, deadline, err);
	if (rc < 0)
		return rc;
	uint64_t cookie = (uint64_t)msb__now_ns();
	uint8_t buf[32];
	rc = msb_client__queue_small(
		c, buf, msb_proto_enc_ping(buf, sizeof(buf), MSB_PROTO_PING, cookie), err);
	if (rc < 0)
		return rc;
	for (;;) {
		msb_proto_frame f;
		rc = next_frame(c, deadline, &f);
		if (rc == 0) {
			msb_client__drop(c);
			return msb_error_set(err, MSB_E_TIMEOUT,
					     "sandbox agent did not answer PING");
		}
		if (rc == -EPROTO)
			return msb_client__violation(c, err, "bad frame");
		if (rc < 0)
			return msb_client__lost(c, rc, "PING", err);
		if (f.type == MSB_PROTO_ERROR && f.channel == 0)
			return msb_client__peer_error(c, &f, err);
		uint64_t got;
		if (f.type != MSB_PROTO_PONG || msb_proto_dec_ping(&f, &got) < 0 || got != cookie)
			return msb_client__violation(c, err, "expected PONG, got %s",
						     msb_proto_type_name(f.type));
		return 0;
	}
}

int msb_client__ping(msb_client *c, double timeout, msb_error **err)
{
	int rc = msb__check_timeout(timeout, "timeout", err);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&c->lock);
	rc = ping_locked(c, timeout, err);
	pthread_mutex_unlock(&c->lock);
	return rc;
}

/* ---- identity ------------------------------------------------------------ */

static int identity_locked(msb_client *c, const char *hostname, double timeout, msb_error **err)
{
	int64_t deadline = msb_client__deadline(timeout);
	uint64_t cookie = (uint64_t)msb__now_ns();
	uint8_t buf[MSB_PROTO_HEADER_SIZE + 12 + MSB_PROTO_MAX_HOSTNAME];
	int len = msb_proto_enc_identity(buf, sizeof(buf), cookie, hostname);
	if (len < 0)
		return msb_error_set(err, MSB_E_VALUE, "host name `%s`: %s", hostname,
				     msb_proto_strerror(len));
	/* On a new connection, IDENTITY goes right behind our HELLO: the frame
	 * is smaller than any agent's least maximum, and the agent reads both
	 * in one wake-up (one round trip, not two). */
	bool fresh = false;
	int rc = msb_client__ensure_begin(c, deadline, &fresh, err);
	if (rc < 0)
		return rc;
	if ((rc = msb_client__queue_small(c, buf, len, err)) < 0)
		return rc;
	if (fresh && (rc = msb_client__ensure_finish(c, deadline, err)) < 0)
		return rc;
	msb_proto_frame f;
	rc = next_frame(c, deadline, &f);
	if (rc == 0) {
		msb_client__drop(c);
		return msb_error_set(err, MSB_E_TIMEOUT, "sandbox agent did not answer IDENTITY");
	}
	if (rc == -EPROTO)
		return msb_client__violation(c, err, "bad frame");
	if (rc < 0)
		return msb_client__lost(c, rc, "IDENTITY", err);
	if (f.type == MSB_PROTO_ERROR && f.channel == 0)
		return msb_client__peer_error(c, &f, err);
	uint64_t got;
	if (f.type != MSB_PROTO_IDENTITY_OK || msb_proto_dec_identity_ok(&f, &got) < 0 ||
	    got != cookie)
		return msb_client__violation(c, err, "expected IDENTITY_OK, got %s",
					     msb_proto_type_name(f.type));
	return 0;
}

int msb_client__identity(msb_client *c, const char *hostname, double timeout, msb_error **err)
{
	int rc = msb__check_timeout(timeout, "timeout", err);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&c->lock);
	rc = identity_locked(c, hostname, timeout, err);
	pthread_mutex_unlock(&c->lock);
	return rc;
}

/* ---- ps ------------------------------------------------------------------ */

void msb_client__procs_free(msb_client_proc *procs, size_t n)
{
	if (!procs)
		return;
	for (size_t i = 0; i < n; i++)
		msb_strv_free(procs[i].argv);
	free(procs);
}

/* Split NUL-separated command line bytes into a vector. */
static char **split_argv(const msb_proto_str *s)
{
	char **v = calloc(1, sizeof(*v));
	if (!v)
		return NULL;
	size_t i = 0;
	while (i < s->len) {
		const uint8_t *p = s->ptr + i;
		const uint8_t *z = memchr(p, 0, s->len - i);
		size_t n = z ? (size_t)(z - p) : s->len - i;
		char *arg = msb__strndup((const char *)p, n);
		if (!arg || msb__strv_push_take(&v, arg) < 0) {
			free(arg);
			msb_strv_free(v);
			return NULL;
		}
		i += n + 1;
	}
	return v;
}

/* Charge one entry's command line to a snapshot's budget, or refuse. */
static int ps_budget(msb_client *c, const msb_proto_str *argv, size_t *bytes, size_t *args,
		     msb_error **err)
{
	size_t n = argv->len ? 1 : 0;
	for (size_t i = 0; i < argv->len; i++)
		n += argv->ptr[i] == 0 && i + 1 < argv->len;
	*bytes += argv->len;
	*args += n;
	if (*bytes <= MSB_CLIENT_PS_MAX_ARGV_BYTES && *args <= MSB_CLIENT_PS_MAX_ARGS)
		return 0;
	msb_client__drop(c);
	if (*args > MSB_CLIENT_PS_MAX_ARGS)
		return msb_error_set(err, MSB_E_RUNTIME,
				     "process snapshot exceeds %u command-line arguments",
				     MSB_CLIENT_PS_MAX_ARGS);
	return msb_error_set(err, MSB_E_RUNTIME,
			     "process snapshot exceeds %zu bytes of command lines",
			     MSB_CLIENT_PS_MAX_ARGV_BYTES);
}

static int ps_locked(msb_client *c, double timeout, msb_client_proc **procs, size_t *nprocs,
		     msb_error **err)
{
	int64_t deadline = msb_client__deadline(timeout);
	int rc = msb_client__ensure(c, deadline, err);
	if (rc < 0)
		return rc;
	uint32_t chan = msb_client__channel(c);
	if (chan == 0) {
		msb_client__drop(c);
		return msb_error_set(err, MSB_E_RUNTIME, "agent connection out of channel ids");
	}
	msb_proto_ps_request q = {MSB_PROTO_MAX_PS_ENTRIES, MSB_PROTO_MAX_PS_ARGV};
	uint8_t buf[64];
	rc = msb_client__queue_small(c, buf, msb_proto_enc_ps_request(buf, sizeof(buf), chan, &q),
				     err);
	if (rc < 0)
		return rc;

	msb_client_proc *v = NULL;
	size_t n = 0, argv_bytes = 0, argv_args = 0;
	bool more = true;
	while (more) {
		msb_proto_frame f;
		rc = next_frame(c, deadline, &f);
		if (rc == 0) {
			msb_client__drop(c);
			rc = msb_error_set(err, MSB_E_TIMEOUT,
					   "process snapshot did not arrive within %g s", timeout);
			goto fail;
		}
		if (rc == -EPROTO) {
			rc = msb_client__violation(c, err, "bad frame");
			goto fail;
		}
		if (rc < 0) {
			rc = msb_client__lost(c, rc, "a process snapshot", err);
			goto fail;
		}
		if (f.type == MSB_PROTO_ERROR && f.channel == 0) {
			rc = msb_client__peer_error(c, &f, err);
			goto fail;
		}
		if (f.channel != chan) {
			rc = msb_client__violation(c, err, "%s on channel %u, expected %u",
						   msb_proto_type_name(f.type), f.channel, chan);
			goto fail;
		}
		if (f.type == MSB_PROTO_ERROR) {
			msb_proto_error pe;
			if (msb_proto_dec_error(&f, &pe) < 0) {
				rc = msb_client__violation(c, err, "malformed ERROR");
				goto fail;
			}
			rc = msb_error_set(err, MSB_E_RUNTIME,
					   "sandbox agent could not take a process snapshot");
			msb_error_set_detail(err, "agent: %.*s", (int)pe.message.len,
					     (const char *)pe.message.ptr);
			goto fail;
		}
		msb_proto_ps_reply r;
		if (f.type != MSB_PROTO_PS_REPLY || msb_proto_dec_ps_reply(&f, &r) < 0) {
			rc = msb_client__violation(c, err, "expected PS_REPLY, got a bad %s",
						   msb_proto_type_name(f.type));
			goto fail;
		}
		if (r.count > q.max_entries - n) {
			rc = msb_client__violation(c, err, "process snapshot over %u entries",
						   q.max_entries);
			goto fail;
		}
		msb_client_proc *nv = msb__reallocarray(v, n + r.count + 1, sizeof(*nv));
		if (!nv) {
			msb_client__drop(c);
			rc = msb__error_nomem(err);
			goto fail;
		}
		v = nv;
		msb_proto_ps_entry e;
		while (msb_proto_ps_next(&r, &e)) {
			if ((rc = ps_budget(c, &e.argv, &argv_bytes, &argv_args, err)) < 0)
				goto fail;
			msb_client_proc *p = &v[n];
			memset(p, 0, sizeof(*p));
			p->pid = e.pid;
			p->ppid = e.ppid;
			p->pgid = e.pgid;
			p->sid = e.sid;
			p->uid = e.uid;
			p->start_ticks = e.start_ticks;
			p->state = (char)e.state;
			p->argv_truncated = (e.flags & MSB_PROTO_PS_ARGV_TRUNCATED) != 0;
			memcpy(p->comm, e.comm.ptr, e.comm.len);
			p->comm[e.comm.len] = 0;
			p->argv = split_argv(&e.argv);
			if (!p->argv) {
				msb_client__drop(c);
				rc = msb__error_nomem(err);
				goto fail;
			}
			n++;
		}
		more = (f.flags & MSB_PROTO_FLAG_MORE) != 0;
	}
	*procs = v;
	*nprocs = n;
	return 0;
fail:
	msb_client__procs_free(v, n);
	return rc;
}

int msb_client__ps(msb_client *c, double timeout, msb_client_proc **procs, size_t *n,
		   msb_error **err)
{
	int rc = msb__check_timeout(timeout, "timeout", err);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&c->lock);
	rc = ps_locked(c, timeout, procs, n, err);
	pthread_mutex_unlock(&c->lock);
	return rc;
}
