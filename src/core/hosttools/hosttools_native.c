/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The native host-tool channel (docs/internals/hosttools.md): a unix socket
 * the host binds in a directory the guest sees (the ns backend's work/ is a
 * host directory bound at the guest's work_dir), served by one host thread.
 * Each call is one frame each way on a guest connection: u32 little-endian
 * length + JSON. Requests go through the same door as every other transport
 * (msb_host_tool_run_call_request): same gates, caps and events.
 */
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <msb/hosttools_native.h>

#include "core/hosttools/hosttools_int.h"
#include "util/syscalls.h"

/*
 * Budgets on the guest's bytes (docs/security.md, "Budgets on guest bytes"):
 * MAX_CONNS connections; one request is held only up to
 * MSB_HOSTTOOLS_MAX_REQUEST_BYTES, and all unfinished requests together up
 * to MAX_HELD_BYTES. A request past either is drained (read into scratch,
 * never held) and answered with a refusal through the door, so the guest
 * reads why and the connection stays in step.
 */
#define MAX_CONNS 64
#define MAX_HELD_BYTES ((size_t)8 << 20)
#define BUSY                                                                                       \
	"Error: the host already holds 8388608 bytes of unfinished host-tool requests — finish " \
	"those first"

struct nconn {
	int fd;
	uint8_t hdr[4];
	size_t hdr_len;
	uint8_t *body;	     /* NULL while draining */
	const char *refusal; /* the answer once a drained request is in */
	size_t want, got;
};

struct msb_native_server {
	msb_host_tool_run *run;
	int dir_fd;
	int listen_fd;
	int stop_fd;
	char *guest_path;
	pthread_t thread;
	bool started;
	struct nconn conns[MAX_CONNS];
	size_t n;
	size_t held; /* bytes of the conns' bodies */
	msb_logger log;
};

/* Give back a connection's request body. */
static void release_body(struct msb_native_server *s, struct nconn *c)
{
	if (c->body)
		s->held -= c->want;
	free(c->body);
	c->body = NULL;
}

static void drop(struct msb_native_server *s, size_t i)
{
	close(s->conns[i].fd);
	release_body(s, &s->conns[i]);
	s->conns[i] = s->conns[--s->n];
}

/* A request of c->want bytes was announced: hold it if the budget allows,
 * else drain it and answer `refusal`. false drops the connection. */
static bool admit(struct msb_native_server *s, struct nconn *c)
{
	c->got = 0;
	c->refusal = c->want > MSB_HOSTTOOLS_MAX_REQUEST_BYTES ? MSB_HOSTTOOLS_TOO_LARGE
		     : c->want > MAX_HELD_BYTES - s->held      ? BUSY
							       : NULL;
	if (c->refusal)
		return true;
	c->body = malloc(c->want);
	if (!c->body)
		return false;
	s->held += c->want;
	return true;
}

static bool write_all(int fd, const void *p, size_t n)
{
	const uint8_t *b = p;
	while (n) {
		ssize_t w = send(fd, b, n, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			struct pollfd pf = {fd, POLLOUT, 0};
			if (poll(&pf, 1, 2000) <= 0)
				return false;
			continue;
		}
		if (w <= 0)
			return false;
		b += w;
		n -= (size_t)w;
	}
	return true;
}

/* Answer one complete request; false drops the connection. */
static bool answer(struct msb_native_server *s, struct nconn *c)
{
	msb_host_tool_result res = {NULL, NULL};
	msb_error *e = NULL;
	int rc = c->refusal ? msb_hosttools__refuse_request(s->run, c->refusal,
							    MSB_HOSTTOOLS_FRAMING_BYTES, &res, &e)
			    : msb_host_tool_run_call_request(s->run, (const char *)c->body, c->got,
							     MSB_HOSTTOOLS_FRAMING_BYTES, &res, &e);
	release_body(s, c);
	c->refusal = NULL;
	c->want = c->got = c->hdr_len = 0;
	if (rc < 0) {
		msb__log(&s->log, MSB_LOG_WARNING, "hosttools", "native call failed: %s",
			 e ? msb_error_message(e) : msb_code_name(rc));
		msb_error_free(e);
		return false;
	}
	char *body = msb_hosttools__response_body(&res);
	if (!body)
		return false;
	size_t len = strlen(body);
	uint8_t hdr[4] = {(uint8_t)len, (uint8_t)(len >> 8), (uint8_t)(len >> 16),
			  (uint8_t)(len >> 24)};
	bool ok = write_all(c->fd, hdr, 4) && write_all(c->fd, body, len);
	free(body);
	return ok;
}

/* Read what is there; false drops the connection. */
static bool on_readable(struct msb_native_server *s, struct nconn *c)
{
	uint8_t scratch[16384]; /* where a drained request goes */
	for (;;) {
		ssize_t n;
		if (c->hdr_len < 4) {
			n = recv(c->fd, c->hdr + c->hdr_len, 4 - c->hdr_len, MSG_DONTWAIT);
		} else if (c->body) {
			n = recv(c->fd, c->body + c->got, c->want - c->got, MSG_DONTWAIT);
		} else {
			size_t left = c->want - c->got;
			n = recv(c->fd, scratch, left < sizeof(scratch) ? left : sizeof(scratch),
				 MSG_DONTWAIT);
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return true;
		if (n <= 0)
			return false;
		if (c->hdr_len < 4) {
			c->hdr_len += (size_t)n;
			if (c->hdr_len < 4)
				continue;
			c->want = (size_t)c->hdr[0] | (size_t)c->hdr[1] << 8 |
				  (size_t)c->hdr[2] << 16 | (size_t)c->hdr[3] << 24;
			/* A guest-chosen length: bounded before anything is allocated. */
			if (c->want == 0 || !admit(s, c))
				return false;
			continue;
		}
		c->got += (size_t)n;
		if (c->got == c->want && !answer(s, c))
			return false;
	}
}

static void *serve(void *arg)
{
	struct msb_native_server *s = arg;
	struct pollfd pf[MAX_CONNS + 2];
	for (;;) {
		pf[0] = (struct pollfd){s->stop_fd, POLLIN, 0};
		pf[1] = (struct pollfd){s->listen_fd, s->n < MAX_CONNS ? POLLIN : 0, 0};
		for (size_t i = 0; i < s->n; i++)
			pf[2 + i] = (struct pollfd){s->conns[i].fd, POLLIN, 0};
		size_t n = s->n;
		if (poll(pf, 2 + n, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (pf[0].revents)
			break;
		/* Connections first, in order, so a busy accept cannot starve them. */
		for (size_t i = n; i-- > 0;) {
			if (pf[2 + i].revents && !on_readable(s, &s->conns[i]))
				drop(s, i);
		}
		if (pf[1].revents & POLLIN) {
			int fd = accept4(s->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
			if (fd >= 0) {
				if (s->n < MAX_CONNS)
					s->conns[s->n++] = (struct nconn){.fd = fd};
				else
					close(fd);
			}
		}
	}
	while (s->n)
		drop(s, s->n - 1);
	return NULL;
}

/* Remove the name if it is still a socket. The guest may have replaced it
 * with something else meanwhile, which is then the guest's own file; unlinkat
 * removes a name and never follows it, so at worst a guest's entry in its own
 * directory goes. */
static void remove_socket(struct msb_native_server *s)
{
	struct stat b;
	if (fstatat(s->dir_fd, MSB_HOST_TOOLS_SOCKET_NAME, &b, AT_SYMLINK_NOFOLLOW) == 0 &&
	    S_ISSOCK(b.st_mode))
		unlinkat(s->dir_fd, MSB_HOST_TOOLS_SOCKET_NAME, 0);
}

/*
 * Bind `fd` at dir_fd/name with mode 0666, so that the guest's (mapped) root,
 * the client, may connect. The directory is the guest's: a chmod by name
 * after the bind would follow whatever link the guest put at the name
 * meanwhile (issue 15: a swap loop made a root-owned 0600 host file 0666),
 * and fchmod on a socket fd changes the socket, not the file. The file's mode
 * comes from the umask at bind time, which is the whole process's, and other
 * threads create files too: a short-lived child with its own umask binds the
 * socket it shares with us. The child makes only async-signal-safe calls;
 * exit signal 0 keeps it away from the application's SIGCHLD handling.
 */
static int bind_open_to_all(int fd, int dir_fd, const char *name)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	/* Through the directory's fd: a long host path still fits sun_path. bind
	 * creates the last component and never follows it (EADDRINUSE). */
	snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d/%s", dir_fd, name);
	pid_t pid = msb__sys_clone3(0, 0, -1, NULL);
	if (pid < 0)
		return pid;
	if (pid == 0) {
		umask(0111);
		/* guest-names: ok - bind creates the name and never follows it (EADDRINUSE) */
		_exit(bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ? errno : 0);
	}
	int st = 0;
	while (waitpid(pid, &st, __WALL) < 0)
		if (errno != EINTR)
			return -errno;
	if (!WIFEXITED(st))
		return -ECHILD;
	return -WEXITSTATUS(st);
}

int msb_native_server_start(const char *host_dir, const char *guest_dir, msb_host_tool_run *run,
			    msb_log_fn log, void *log_userdata, msb_native_server **out,
			    msb_error **err)
{
	if (!host_dir || !guest_dir || !run || !out)
		return msb_error_set(err, MSB_E_VALUE, "native host tools: NULL argument");
	struct msb_native_server *s = calloc(1, sizeof(*s));
	if (!s)
		return msb__error_nomem(err);
	s->run = run;
	s->listen_fd = s->stop_fd = -1;
	s->log = (msb_logger){log, log_userdata};
	int rc = 0;
	/* host_dir itself is the host's (ns: <state>/ns/<name>/work); what is
	 * inside it is the guest's, and touched only through this fd. */
	/* guest-names: ok - host_dir is the host's (the sandbox's work/, in its private state dir);
	 * only what is inside is the guest's */
	s->dir_fd = open(host_dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (s->dir_fd < 0) {
		rc = msb__error_errno(err, -errno, "native host tools: `%s`", host_dir);
		goto fail;
	}
	s->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (s->listen_fd < 0) {
		rc = msb__error_errno(err, -errno, "native host tools: socket");
		goto fail;
	}
	int b = bind_open_to_all(s->listen_fd, s->dir_fd, MSB_HOST_TOOLS_SOCKET_NAME);
	if (b < 0) {
		rc = msb__error_errno(err, b,
				      "native host tools: cannot bind the socket (is another run "
				      "attached to this sandbox?)");
		goto fail;
	}
	if (listen(s->listen_fd, 64) < 0) {
		rc = msb__error_errno(err, -errno, "native host tools: socket");
		goto unlink;
	}
	s->stop_fd = eventfd(0, EFD_CLOEXEC);
	s->guest_path = msb__asprintf("%s/" MSB_HOST_TOOLS_SOCKET_NAME, guest_dir);
	if (s->stop_fd < 0 || !s->guest_path) {
		rc = msb__error_nomem(err);
		goto unlink;
	}
	if (pthread_create(&s->thread, NULL, serve, s) != 0) {
		rc = msb_error_set(err, MSB_E_RUNTIME, "native host tools: no thread");
		goto unlink;
	}
	s->started = true;
	*out = s;
	return 0;
unlink:
	remove_socket(s);
fail:
	if (s->dir_fd >= 0)
		close(s->dir_fd);
	if (s->listen_fd >= 0)
		close(s->listen_fd);
	if (s->stop_fd >= 0)
		close(s->stop_fd);
	free(s->guest_path);
	free(s);
	return rc;
}

const char *msb_native_server_guest_path(const msb_native_server *s)
{
	return s ? s->guest_path : NULL;
}

void msb_native_server_stop(msb_native_server *s)
{
	if (!s)
		return;
	if (s->started) {
		uint64_t one = 1;
		ssize_t w = write(s->stop_fd, &one, sizeof(one));
		(void)w;
		pthread_join(s->thread, NULL);
	}
	remove_socket(s);
	close(s->listen_fd);
	close(s->stop_fd);
	close(s->dir_fd);
	free(s->guest_path);
	free(s);
}
