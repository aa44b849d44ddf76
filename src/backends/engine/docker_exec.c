/* SPDX-License-Identifier: Apache-2.0 */
/*
 * exec over the Engine API: POST /containers/{id}/exec, then
 * POST /exec/{id}/start on a connection the engine hijacks (Upgrade: tcp),
 * which carries stdin one way and the multiplexed stdout/stderr frames
 * (an 8-byte header: stream, 0, 0, 0, big-endian length) the other; the exit
 * code is read from GET /exec/{id}/json once the stream ends.
 *
 * The engine has no call to end an exec's process. At a timeout or a
 * cancellation: when the engine is local and its process is visible in our
 * pid namespace (the exec's Pid is the engine's host pid), the process group
 * it leads - every exec starts a new session - is killed from here; when it
 * is not (a remote or rootless engine's namespace), the container is force
 * removed, which is what the reference does (21.26). docs/internals/engine.md.
 */
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "docker.h"
#include "util/json.h"

#define HEAD_MAX (16u << 10)
#define FRAME_MAX (1u << 24) /* one frame's announced length, a sanity bound */

int msb_docker__exec_create(docker_transport *d, const char *ref, const engine_exec *x, char **eid,
			    msb_error **err)
{
	json_t *cmd = json_array();
	for (const char *const *a = x->argv; a && *a; a++)
		json_array_append_new(cmd, json_string(*a));
	json_t *env = json_array();
	for (const char *const *e = x->env; e && *e; e++)
		json_array_append_new(env, json_string(*e));
	json_t *body =
		json_pack("{s:b, s:b, s:b, s:b, s:o, s:o}", "AttachStdin", x->stdin_data != NULL,
			  "AttachStdout", 1, "AttachStderr", 1, "Tty", 0, "Cmd", cmd, "Env", env);
	if (body && x->work_dir)
		json_object_set_new(body, "WorkingDir", json_string(x->work_dir));
	if (body && x->as_root)
		json_object_set_new(body, "User", json_string("0"));
	_cleanup_free_ char *json = body ? msb__json_dump(body) : NULL;
	json_decref(body);
	_cleanup_free_ char *path = msb__asprintf("/containers/%s/exec", ref);
	if (!json || !path)
		return msb__error_nomem(err);
	docker_response r;
	docker_request q = {.method = "POST", .path = path, .json = json, .max_body = 64u << 10};
	int rc = msb_docker__http(&d->http, &q, &r, err);
	if (rc < 0)
		return rc;
	if (r.status != 201) {
		rc = msb_docker__container_error(&r, ref, "exec", err);
		if (rc == MSB_E_NOT_FOUND)
			rc = MSB_E_RUNTIME;
		msb_docker__response_clear(&r);
		return rc;
	}
	json_error_t je;
	json_t *doc = json_loadb((const char *)r.body.data, r.body.len, 0, &je);
	msb_docker__response_clear(&r);
	*eid = msb__strdup(json_string_value(json_object_get(doc, "Id")));
	json_decref(doc);
	return *eid ? 0 : msb_error_set(err, MSB_E_PROTOCOL, "exec: the engine sent no exec id");
}

typedef struct exec_info {
	bool running;
	bool has_code;
	int exit_code;
	int64_t pid;
} exec_info;

static int inspect_exec(docker_transport *d, const char *eid, exec_info *out, msb_error **err)
{
	_cleanup_free_ char *path = msb__asprintf("/exec/%s/json", eid);
	if (!path)
		return msb__error_nomem(err);
	docker_response r;
	docker_request q = {.method = "GET", .path = path, .max_body = 256u << 10};
	int rc = msb_docker__http(&d->http, &q, &r, err);
	if (rc < 0)
		return rc;
	if (r.status != 200) {
		_cleanup_free_ char *text = msb_docker__error_text(&r);
		msb_docker__response_clear(&r);
		return msb_error_set(err, MSB_E_RUNTIME, "exec inspect: %s", text ? text : "");
	}
	json_error_t je;
	json_t *doc = json_loadb((const char *)r.body.data, r.body.len, 0, &je);
	msb_docker__response_clear(&r);
	json_t *code = json_object_get(doc, "ExitCode");
	*out = (exec_info){
		.running = json_is_true(json_object_get(doc, "Running")),
		.has_code = json_is_integer(code),
		.exit_code = json_is_integer(code) ? (int)json_integer_value(code) : -1,
		.pid = json_integer_value(json_object_get(doc, "Pid")),
	};
	json_decref(doc);
	return 0;
}

/* The container's init pid on the engine's host, for the namespace check. */
int64_t msb_docker__pid(void *t, const char *ref)
{
	docker_transport *d = t;
	_cleanup_free_ char *path = msb__asprintf("/containers/%s/json", ref);
	if (!path)
		return 0;
	docker_response r;
	docker_request q = {.method = "GET", .path = path, .max_body = 4u << 20};
	if (msb_docker__http(&d->http, &q, &r, NULL) < 0)
		return 0;
	int64_t pid = 0;
	if (r.status == 200) {
		json_error_t je;
		json_t *doc = json_loadb((const char *)r.body.data, r.body.len, 0, &je);
		pid = json_integer_value(json_object_get(json_object_get(doc, "State"), "Pid"));
		json_decref(doc);
	}
	msb_docker__response_clear(&r);
	return pid;
}

static bool same_pidns(int64_t a, int64_t b)
{
	char pa[64], pb[64];
	snprintf(pa, sizeof(pa), "/proc/%lld/ns/pid", (long long)a);
	snprintf(pb, sizeof(pb), "/proc/%lld/ns/pid", (long long)b);
	struct stat sa, sb;
	return stat(pa, &sa) == 0 && stat(pb, &sb) == 0 && sa.st_ino == sb.st_ino &&
	       sa.st_dev == sb.st_dev;
}

/* The process group id of pid as /proc shows it, or 0. */
static int64_t pgrp_of(int64_t pid)
{
	char p[64], buf[512];
	snprintf(p, sizeof(p), "/proc/%lld/stat", (long long)pid);
	_cleanup_close_ int fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	const char *rp = strrchr(buf, ')');
	long long ppid, pgrp;
	char state;
	if (!rp || sscanf(rp + 1, " %c %lld %lld", &state, &ppid, &pgrp) != 3)
		return 0;
	return pgrp;
}

/* End the exec's process: its group from here when visible, else the
 * container. true when the group was signalled. */
static bool end_exec(docker_transport *d, const char *ref, const char *eid)
{
	exec_info info;
	if (inspect_exec(d, eid, &info, NULL) == 0 && !info.running)
		return true;
	if (info.pid > 1) {
		int64_t init = msb_docker__pid(d, ref);
		/* A session leader (pgrp == pid) in the container's pid namespace,
		 * and not its init. */
		if (init > 1 && init != info.pid && same_pidns(info.pid, init) &&
		    pgrp_of(info.pid) == info.pid && kill(-(pid_t)info.pid, SIGKILL) == 0)
			return true;
	}
	msb_docker__remove(d, ref, NULL);
	return false;
}

/* ---- the stream ---------------------------------------------------------------------- */

typedef struct stream {
	const engine_exec *x;
	uint8_t hdr[8];
	size_t hdr_have;
	uint32_t frame_left;
	int frame_stream; /* 1 stdout, 2 stderr */
	msb_buf out[2];
	uint64_t kept;
	bool truncated;
	bool over; /* an unbounded exec over its ceiling */
} stream;

static int feed(stream *s, const uint8_t *p, size_t n, msb_error **err)
{
	while (n > 0) {
		if (s->frame_left == 0) {
			size_t take = 8 - s->hdr_have < n ? 8 - s->hdr_have : n;
			memcpy(s->hdr + s->hdr_have, p, take);
			s->hdr_have += take;
			p += take;
			n -= take;
			if (s->hdr_have < 8)
				continue;
			s->hdr_have = 0;
			uint32_t len = (uint32_t)s->hdr[4] << 24 | (uint32_t)s->hdr[5] << 16 |
				       (uint32_t)s->hdr[6] << 8 | s->hdr[7];
			if ((s->hdr[0] != 1 && s->hdr[0] != 2) || s->hdr[1] || s->hdr[2] ||
			    s->hdr[3] || len > FRAME_MAX)
				return msb_error_set(err, MSB_E_PROTOCOL,
						     "exec: the engine sent a malformed stream "
						     "frame");
			s->frame_stream = s->hdr[0];
			s->frame_left = len;
			continue;
		}
		size_t take = s->frame_left < n ? s->frame_left : n;
		size_t keep = take;
		if (s->kept + keep > s->x->max_output) {
			keep = (size_t)(s->x->max_output - s->kept);
			if (s->x->bounded)
				s->truncated = true;
			else
				s->over = true;
		}
		if (keep && msb__buf_append(&s->out[s->frame_stream - 1], p, keep) < 0)
			return msb__error_nomem(err);
		s->kept += keep;
		s->frame_left -= (uint32_t)take;
		p += take;
		n -= take;
		if (s->over)
			return 0;
	}
	return 0;
}

static int send_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

int msb_docker__exec_hijack(docker_transport *d, const char *eid, msb_buf *rest, msb_error **err)
{
	int fd = msb_docker__connect(&d->http);
	if (fd < 0)
		return msb__error_errno(err, fd, "the docker engine at `%s` is not reachable",
					d->host);
	static const char body[] = "{\"Detach\":false,\"Tty\":false}";
	char req[512];
	int n = snprintf(req, sizeof(req),
			 "POST %s/exec/%s/start HTTP/1.1\r\nHost: docker\r\n"
			 "Content-Type: application/json\r\nConnection: Upgrade\r\n"
			 "Upgrade: tcp\r\nContent-Length: %zu\r\n\r\n%s",
			 d->http.api, eid, sizeof(body) - 1, body);
	int rc = n > 0 && (size_t)n < sizeof(req) ? send_all(fd, req, (size_t)n) : -EINVAL;
	if (rc < 0) {
		close(fd);
		return msb__error_errno(err, rc, "exec: cannot start the stream");
	}
	/* The head, bounded, within the API timeout. */
	uint8_t head[HEAD_MAX];
	size_t have = 0;
	int64_t deadline = msb__now_ns() + (int64_t)(d->http.timeout * 1e9);
	const uint8_t *end = NULL;
	while (!end) {
		int64_t left = (deadline - msb__now_ns()) / 1000000;
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		int pr = left > 0 ? poll(&pfd, 1, (int)left) : 0;
		if (pr < 0 && errno == EINTR)
			continue;
		if (pr <= 0 || have == sizeof(head)) {
			close(fd);
			return msb_error_set(err, pr == 0 ? MSB_E_TIMEOUT : MSB_E_PROTOCOL,
					     "exec: the engine did not start the stream");
		}
		ssize_t got = recv(fd, head + have, sizeof(head) - have, 0);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0) {
			close(fd);
			return msb_error_set(err, MSB_E_OS,
					     "exec: the docker engine at `%s` closed the stream "
					     "before answering",
					     d->host);
		}
		have += (size_t)got;
		end = memmem(head, have, "\r\n\r\n", 4);
	}
	int status = 0;
	if (sscanf((const char *)head, "HTTP/1.%*d %d", &status) != 1 ||
	    (status != 101 && status != 200)) {
		close(fd);
		return msb_error_set(err, MSB_E_RUNTIME,
				     "exec: the engine refused to start it "
				     "(status %d)",
				     status);
	}
	size_t n_rest = have - (size_t)(end + 4 - head);
	if (n_rest && msb__buf_append(rest, end + 4, n_rest) < 0) {
		close(fd);
		return msb__error_nomem(err);
	}
	return fd;
}

/* Start the exec on a fresh connection and read the response head; any
 * bytes after it are the stream's and go to s. Returns the fd. */
static int start_stream(docker_transport *d, const char *eid, stream *s, msb_error **err)
{
	msb_buf rest = MSB_BUF_INIT;
	int fd = msb_docker__exec_hijack(d, eid, &rest, err);
	if (fd >= 0 && rest.len) {
		int rc = feed(s, rest.data, rest.len, err);
		if (rc < 0) {
			close(fd);
			fd = rc;
		}
	}
	msb__buf_free(&rest);
	return fd;
}

/* The exit code, set once the engine has reaped the process, which can
 * trail the end of the stream a little. */
static int await_code(docker_transport *d, const char *eid, int64_t deadline, exec_info *info,
		      msb_error **err)
{
	int rc = 0;
	for (int i = 0; rc == 0; i++) {
		rc = inspect_exec(d, eid, info, err);
		if (rc < 0 || (!info->running && info->has_code))
			break;
		if (msb__now_ns() > deadline || i > 2000) {
			rc = msb_error_set(err, MSB_E_PROTOCOL,
					   "exec: the stream ended but the engine reports "
					   "the process still running");
			break;
		}
		struct timespec ts = {0, i < 20 ? 1000000 : 10000000};
		nanosleep(&ts, NULL);
	}
	if (rc < 0)
		rc = msb_error_wrap(err, "exec: the stream ended without an exit status");
	return rc;
}

int msb_docker__exec(void *t, const char *ref, const engine_exec *x, msb_exec_result *out,
		     msb_error **err)
{
	docker_transport *d = t;
	_cleanup_free_ char *eid = NULL;
	int64_t deadline = msb__now_ns() + (int64_t)(x->timeout * 1e9);
	int rc = msb_docker__exec_create(d, ref, x, &eid, err);
	if (rc < 0)
		return rc;
	stream s = {.x = x, .out = {MSB_BUF_INIT, MSB_BUF_INIT}};
	_cleanup_close_ int fd = start_stream(d, eid, &s, err);
	if (fd < 0) {
		msb__buf_free(&s.out[0]);
		msb__buf_free(&s.out[1]);
		return fd;
	}
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	size_t sent = 0;
	bool want_write = x->stdin_data != NULL;
	if (want_write && x->stdin_len == 0) {
		shutdown(fd, SHUT_WR);
		want_write = false;
	}
	int cancel_fd = x->cancel ? msb_cancel_fd(x->cancel) : -1;
	int ended = 0; /* MSB_E_TIMEOUT or MSB_E_CANCELLED */
	rc = 0;
	uint8_t buf[65536];
	for (;;) {
		if (x->cancel && msb_cancel_requested(x->cancel)) {
			ended = MSB_E_CANCELLED;
			break;
		}
		int64_t left = (deadline - msb__now_ns()) / 1000000;
		if (left <= 0) {
			ended = MSB_E_TIMEOUT;
			break;
		}
		struct pollfd p[2] = {{.fd = fd, .events = POLLIN | (want_write ? POLLOUT : 0)},
				      {.fd = cancel_fd, .events = POLLIN}};
		int pr = poll(p, cancel_fd >= 0 ? 2 : 1, left > 1000000 ? 1000000 : (int)left);
		if (pr < 0 && errno == EINTR)
			continue;
		if (pr < 0) {
			rc = msb__error_errno(err, errno, "exec: poll");
			break;
		}
		if (want_write && (p[0].revents & POLLOUT)) {
			ssize_t w = send(fd, x->stdin_data + sent, x->stdin_len - sent,
					 MSG_NOSIGNAL | MSG_DONTWAIT);
			if (w > 0)
				sent += (size_t)w;
			else if (w < 0 && errno != EAGAIN && errno != EINTR)
				want_write = false; /* the process closed its stdin */
			if (sent == x->stdin_len) {
				shutdown(fd, SHUT_WR);
				want_write = false;
			}
		}
		if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
			ssize_t got = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
			if (got < 0 && (errno == EAGAIN || errno == EINTR))
				continue;
			if (got <= 0)
				break; /* the stream ended: the process did, or the engine */
			rc = feed(&s, buf, (size_t)got, err);
			if (rc < 0)
				break;
			if (s.over) {
				rc = msb_error_set(err, MSB_E_RUNTIME,
						   "exec output exceeds %llu bytes, the limit of "
						   "an unbounded exec; use exec_bounded",
						   (unsigned long long)x->max_output);
				end_exec(d, ref, eid);
				break;
			}
		}
	}
	if (ended) {
		bool group = end_exec(d, ref, eid);
		rc = msb_error_set(err, ended,
				   ended == MSB_E_TIMEOUT ? "exec timed out after %g s: %s"
							  : "exec cancelled after at most %g s: %s",
				   x->timeout,
				   group ? "its process group was killed"
					 : "the container was removed to end it");
		if (ended == MSB_E_TIMEOUT)
			msb__error_set_timeout(err, SIGKILL, s.out[0].data, s.out[0].len);
	}
	exec_info info = {0};
	if (rc == 0)
		rc = await_code(d, eid, deadline, &info, err);
	if (rc < 0 || s.out[0].oom || s.out[1].oom) {
		msb__buf_free(&s.out[0]);
		msb__buf_free(&s.out[1]);
		return rc < 0 ? rc : msb__error_nomem(err);
	}
	if (msb__buf_append(&s.out[0], "", 1) < 0 || msb__buf_append(&s.out[1], "", 1) < 0) {
		msb__buf_free(&s.out[0]);
		msb__buf_free(&s.out[1]);
		return msb__error_nomem(err);
	}
	*out = (msb_exec_result){
		.stdout_bytes = s.out[0].data,
		.stdout_len = s.out[0].len - 1,
		.stderr_bytes = s.out[1].data,
		.stderr_len = s.out[1].len - 1,
		.exit_code = info.exit_code,
		.truncated = s.truncated,
	};
	return 0;
}
