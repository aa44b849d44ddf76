/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The JSON-RPC 2.0 transport: newline-delimited messages on stdin/stdout, a
 * worker pool, batches, the standard errors, and observer events as
 * notifications (docs/serve.md "Protocol").
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "invoke.h"
#include "os.h"

/* Messages read but not yet taken by a worker: past this the reader stops
 * reading stdin until a worker takes one (backpressure, not refusal). */
#define QUEUE_MAX 1024
/* ... or past this many bytes of them (one message alone always fits). */
#define QUEUE_BYTES (256u << 20)

/* One event datagram is at most this large (the recorder writes one line). */
#define EVENT_MAX (1u << 20)

/* A request this server sent the client (rpc_client_request), awaiting its response. */
struct out_call {
	char id[40];
	json_t *response; /* the whole response message, once it came */
	struct out_call *next;
};

struct job {
	char *line; /* one message as read, parsed by the worker that takes it */
	size_t len;
	struct job *next;
};

struct rpc_server {
	rpc_server_options o;
	pthread_mutex_t out_lock; /* every line written to stdout */
	pthread_mutex_t q_lock;
	pthread_cond_t q_cond;	/* a job was queued, or EOF */
	pthread_cond_t q_space; /* a job was taken */
	struct job *head, *tail;
	size_t queued, queued_bytes;
	bool eof;
	/* events: the JSON-lines recorder writes its lines into ev[1] (the
	 * event channel, cli/os.h); they are forwarded as notifications, before
	 * the response of the request that caused them. ev_buf holds a line
	 * not yet whole (a stream's, on Windows). */
	int ev[2];
	atomic_bool ev_stop;
	char *ev_buf;
	size_t ev_len;
	msb_jsonl_recorder *recorder;
	msb_observer observer;
	bool have_observer;
	/* server->client requests (rpc_client_request) */
	pthread_mutex_t c_lock;
	pthread_cond_t c_cond; /* a response came, or stdin closed */
	struct out_call *calls;
	unsigned long next_call;
	bool reader_done;
};

void *rpc_server_userdata(rpc_server *srv)
{
	return srv->o.userdata;
}

unsigned rpc_server_pool_default(rpc_server *srv)
{
	return srv->o.pool_default;
}

const msb_observer *rpc_server_observer(rpc_server *srv)
{
	return srv->have_observer ? &srv->observer : NULL;
}

void rpc_log(void *ud, msb_log_level level, const char *component, const char *message)
{
	(void)ud;
	if (level < MSB_LOG_WARNING)
		return;
	fprintf(stderr, "msb: %s: %s: %s\n", level == MSB_LOG_WARNING ? "warning" : "error",
		component, message);
}

/* ---- output ---------------------------------------------------------------------------------- */

static void write_all(const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(STDOUT_FILENO, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return; /* the client went away; the reader will see EOF */
		p += w;
		n -= (size_t)w;
	}
}

/* Forward the queued events, each whole line; out_lock held. A line longer
 * than EVENT_MAX is dropped. */
static void drain_events_locked(rpc_server *srv)
{
	if (srv->ev[0] < 0)
		return;
	static const char head[] = "{\"jsonrpc\":\"2.0\",\"method\":\"event\",\"params\":";
	for (;;) {
		if (srv->ev_len == EVENT_MAX)
			srv->ev_len = 0; /* no end in sight: dropped */
		ssize_t n = cli_os_event_read(srv->ev[0], srv->ev_buf + srv->ev_len,
					      EVENT_MAX - srv->ev_len);
		if (n <= 0)
			return;
		srv->ev_len += (size_t)n;
		char *line = srv->ev_buf, *end = srv->ev_buf + srv->ev_len, *nl;
		while ((nl = memchr(line, '\n', (size_t)(end - line)))) {
			size_t len = (size_t)(nl - line);
			while (len > 0 && line[len - 1] == '\r')
				len--;
			write_all(head, sizeof(head) - 1);
			write_all(line, len);
			write_all("}\n", 2);
			line = nl + 1;
		}
		srv->ev_len = (size_t)(end - line);
		memmove(srv->ev_buf, line, srv->ev_len);
	}
}

static void send_json(rpc_server *srv, json_t *msg)
{
	char *text = json_dumps(msg, JSON_COMPACT);
	pthread_mutex_lock(&srv->out_lock);
	drain_events_locked(srv);
	if (text && srv->o.output) {
		srv->o.output(srv->o.output_ud, text, strlen(text));
	} else if (text) {
		write_all(text, strlen(text));
		write_all("\n", 1);
	}
	pthread_mutex_unlock(&srv->out_lock);
	free(text);
}

static void *event_forwarder(void *arg)
{
	rpc_server *srv = arg;
	while (cli_os_event_wait(srv->ev[0], &srv->ev_stop)) {
		pthread_mutex_lock(&srv->out_lock);
		drain_events_locked(srv);
		pthread_mutex_unlock(&srv->out_lock);
	}
	return NULL;
}

/* ---- errors ---------------------------------------------------------------------------------- */

int rpc_bad_params(msb_error **err, const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	msb_error_set(err, MSB_E_VALUE, "%s", buf);
	return RPC_INVALID_PARAMS;
}

static const struct {
	unsigned bit;
	const char *name;
} categories[] = {
	{MSB_CAT_PERMISSION, "permission"},
	{MSB_CAT_RUNTIME, "runtime"},
	{MSB_CAT_LOOKUP, "lookup"},
	{MSB_CAT_VALUE, "value"},
	{MSB_CAT_TYPE, "type"},
	{MSB_CAT_OS, "os"},
	{MSB_CAT_TIMEOUT, "timeout"},
	{MSB_CAT_OUTPUT, "output"},
	{MSB_CAT_NOT_IMPLEMENTED, "not_implemented"},
	{MSB_CAT_ASSERTION, "assertion"},
	{MSB_CAT_CANCELLED, "cancelled"},
};

json_t *rpc_error_data(const msb_error *err)
{
	int code = msb_error_code(err);
	json_t *cats = json_array();
	unsigned mask = msb_code_categories(code);
	for (size_t i = 0; i < sizeof(categories) / sizeof(categories[0]); i++)
		if (mask & categories[i].bit)
			json_array_append_new(cats, json_string(categories[i].name));
	json_t *d = json_pack("{s:s, s:o, s:i, s:o}", "name", msb_error_name(err), "message",
			      rpc_text(msb_error_message(err)), "code", code, "categories", cats);
	if (!d)
		return NULL;
	json_t *payload = json_object();
	const char *cap, *file, *path;
	int refusal, signal;
	const uint8_t *output;
	size_t output_len;
	if (msb_error_cap(err, &cap, &file)) {
		json_object_set_new(payload, "cap", rpc_text(cap));
		json_object_set_new(payload, "file", rpc_text(file));
	}
	if (msb_error_path(err, &path))
		json_object_set_new(payload, "path", rpc_text(path));
	if (msb_error_file_refusal(err, &refusal))
		json_object_set_new(payload, "file_refusal",
				    json_string(msb_file_refusal_name((msb_file_refusal)refusal)));
	if (msb_error_timeout(err, &signal, &output, &output_len)) {
		char *b64 = msb__base64_encode(output, output_len);
		json_object_set_new(
			payload, "signal",
			json_string(msb_signal_outcome_name((msb_signal_outcome)signal)));
		json_object_set_new(payload, "output", b64 ? json_string(b64) : json_null());
		free(b64);
	}
	if (json_object_size(payload))
		json_object_set_new(d, "payload", payload);
	else
		json_decref(payload);
	return d;
}

static json_t *error_response(json_t *id, int code, const char *message, json_t *data)
{
	json_t *e = json_pack("{s:i, s:o}", "code", code, "message", rpc_text(message));
	if (data)
		json_object_set_new(e, "data", data);
	return json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id ? id : json_null(), "error",
			 e);
}

/* ---- dispatch ------------------------------------------------------------------------------- */

static bool valid_id(json_t *id)
{
	return json_is_string(id) || json_is_integer(id) || json_is_real(id) || json_is_null(id);
}

/* A JSON string equal to `s`, compared by length: an embedded NUL never
 * makes "msb.version\u0000evil" equal "msb.version". */
static bool string_is(json_t *v, const char *s)
{
	size_t n = strlen(s);
	return json_is_string(v) && json_string_length(v) == n &&
	       memcmp(json_string_value(v), s, n) == 0;
}

static bool has_nul(json_t *v)
{
	return memchr(json_string_value(v), '\0', json_string_length(v)) != NULL;
}

static const rpc_method *find_method(rpc_server *srv, json_t *name)
{
	for (const rpc_method *m = srv->o.methods; m->name; m++)
		if (string_is(name, m->name))
			return m;
	return NULL;
}

/* One request or notification; returns the response, or NULL for a notification. */
static json_t *handle_one(rpc_server *srv, json_t *req)
{
	if (!json_is_object(req))
		return error_response(NULL, RPC_INVALID_REQUEST, "invalid request: not an object",
				      NULL);
	json_t *id = json_object_get(req, "id");
	bool is_notification = id == NULL;
	/* A response to a request of ours that is no longer awaited (its wait
	 * timed out): a response is never answered. */
	if (!json_object_get(req, "method") &&
	    (json_object_get(req, "result") || json_object_get(req, "error")))
		return NULL;
	if (id && !valid_id(id))
		return error_response(NULL, RPC_INVALID_REQUEST,
				      "invalid request: id must be a string, number or null", NULL);
	/* The parser refuses a NUL in a member name: names compare as C strings. */
	const char *key;
	json_t *value;
	json_object_foreach (req, key, value) {
		if (strcmp(key, "jsonrpc") && strcmp(key, "id") && strcmp(key, "method") &&
		    strcmp(key, "params")) {
			char msg[160];
			snprintf(msg, sizeof(msg), "invalid request: unknown member `%.100s`", key);
			return error_response(id, RPC_INVALID_REQUEST, msg, NULL);
		}
	}
	json_t *version = json_object_get(req, "jsonrpc");
	if (!string_is(version, "2.0"))
		return error_response(id, RPC_INVALID_REQUEST,
				      "invalid request: jsonrpc must be \"2.0\"", NULL);
	json_t *method = json_object_get(req, "method");
	if (!json_is_string(method))
		return error_response(id, RPC_INVALID_REQUEST,
				      "invalid request: method must be a string", NULL);
	if (has_nul(method))
		return error_response(id, RPC_INVALID_REQUEST,
				      "invalid request: method must not contain a NUL character",
				      NULL);
	json_t *params = json_object_get(req, "params");
	if (params && !json_is_object(params) && !json_is_array(params))
		return error_response(id, RPC_INVALID_REQUEST,
				      "invalid request: params must be an object or an array",
				      NULL);

	const rpc_method *m = find_method(srv, method);
	if (!m) {
		if (is_notification)
			return NULL;
		char msg[200];
		snprintf(msg, sizeof(msg), "method not found: `%.120s`", json_string_value(method));
		return error_response(id, RPC_METHOD_NOT_FOUND, msg, NULL);
	}
	json_t *result = NULL;
	msb_error *err = NULL;
	int r = rpc_invoke(srv, srv->o.handles, m, params, &result, &err);
	if (is_notification) {
		json_decref(result);
		msb_error_free(err);
		return NULL;
	}
	json_t *resp;
	if (r == 0) {
		resp = json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id, "result",
				 result ? result : json_null());
	} else if (r == RPC_INVALID_PARAMS) {
		json_t *data = err ? json_pack("{s:s}", "name", msb_error_name(err)) : NULL;
		char msg[600];
		snprintf(msg, sizeof(msg), "invalid params: %s",
			 err ? msb_error_message(err) : "rejected");
		resp = error_response(id, RPC_INVALID_PARAMS, msg, data);
	} else if (r == RPC_INVALID_REQUEST) {
		char msg[600];
		snprintf(msg, sizeof(msg), "invalid request: %s",
			 err ? msb_error_message(err) : "rejected");
		resp = error_response(id, RPC_INVALID_REQUEST, msg, NULL);
	} else if (err) {
		resp = error_response(id, RPC_LIBRARY_ERROR, msb_error_message(err),
				      rpc_error_data(err));
	} else {
		resp = error_response(id, RPC_INTERNAL_ERROR, "internal error: no detail", NULL);
	}
	msb_error_free(err);
	if (!resp)
		resp = json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", id, "error",
				 "code", RPC_INTERNAL_ERROR, "message",
				 "internal error: the response could not be encoded");
	return resp;
}

static void handle_message(rpc_server *srv, json_t *msg)
{
	if (!json_is_array(msg)) {
		json_t *resp = handle_one(srv, msg);
		if (resp)
			send_json(srv, resp);
		json_decref(resp);
		return;
	}
	if (json_array_size(msg) == 0) {
		json_t *resp = error_response(NULL, RPC_INVALID_REQUEST,
					      "invalid request: empty batch", NULL);
		send_json(srv, resp);
		json_decref(resp);
		return;
	}
	json_t *out = json_array();
	size_t i;
	json_t *req;
	json_array_foreach (msg, i, req) {
		json_t *resp = handle_one(srv, req);
		if (resp)
			json_array_append_new(out, resp);
	}
	if (json_array_size(out))
		send_json(srv, out);
	json_decref(out);
}

static void reply_error(rpc_server *srv, int code, const char *message, json_t *data)
{
	json_t *resp = error_response(NULL, code, message, data);
	send_json(srv, resp);
	json_decref(resp);
}

/* Parse one line and serve it (on a worker, so large messages parse in
 * parallel and the reader keeps reading). */
static void serve_line(rpc_server *srv, const char *line, size_t len)
{
	json_error_t jerr;
	json_t *msg = json_loadb(line, len,
				 JSON_DECODE_ANY | JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &jerr);
	if (!msg) {
		char m[256];
		snprintf(m, sizeof(m), "parse error: %.200s", jerr.text);
		reply_error(srv, RPC_PARSE_ERROR, m, NULL);
		return;
	}
	if (!json_is_object(msg) && !json_is_array(msg))
		reply_error(srv, RPC_INVALID_REQUEST, "invalid request: not an object", NULL);
	else
		handle_message(srv, msg);
	json_decref(msg);
}

/* ---- the worker pool ------------------------------------------------------------------------- */

static void *worker(void *arg)
{
	rpc_server *srv = arg;
	for (;;) {
		pthread_mutex_lock(&srv->q_lock);
		while (!srv->head && !srv->eof)
			pthread_cond_wait(&srv->q_cond, &srv->q_lock);
		struct job *j = srv->head;
		if (j) {
			srv->head = j->next;
			if (!srv->head)
				srv->tail = NULL;
			srv->queued--;
			srv->queued_bytes -= j->len;
			pthread_cond_signal(&srv->q_space);
		}
		pthread_mutex_unlock(&srv->q_lock);
		if (!j)
			return NULL;
		serve_line(srv, j->line, j->len);
		free(j->line);
		free(j);
	}
}

static void enqueue(rpc_server *srv, char *line, size_t len)
{
	struct job *j = calloc(1, sizeof(*j));
	if (!j) {
		free(line);
		return;
	}
	j->line = line;
	j->len = len;
	pthread_mutex_lock(&srv->q_lock);
	while (srv->queued >= QUEUE_MAX ||
	       (srv->queued > 0 && srv->queued_bytes + len > QUEUE_BYTES))
		pthread_cond_wait(&srv->q_space, &srv->q_lock);
	srv->queued++;
	srv->queued_bytes += len;
	if (srv->tail)
		srv->tail->next = j;
	else
		srv->head = j;
	srv->tail = j;
	pthread_cond_signal(&srv->q_cond);
	pthread_mutex_unlock(&srv->q_lock);
}

/* ---- server->client requests ----------------------------------------------------------------
 *
 * The reader itself routes a response to the request that awaits it, so a
 * response is never queued behind requests, nor waits for a worker while
 * every worker waits for a response. Lines are parsed here only while a
 * request of ours is outstanding. */

static bool is_response(json_t *m)
{
	return json_is_object(m) && !json_object_get(m, "method") &&
	       json_is_string(json_object_get(m, "id")) &&
	       (json_object_get(m, "result") || json_object_get(m, "error"));
}

/* Hand one response to the request of ours it answers (taking `msg`); a
 * response nothing waits for is dropped. */
static void deliver_response(rpc_server *srv, json_t *msg)
{
	json_t *id = json_object_get(msg, "id");
	pthread_mutex_lock(&srv->c_lock);
	for (struct out_call *c = srv->calls; c; c = c->next) {
		if (!c->response && string_is(id, c->id)) {
			c->response = msg;
			msg = NULL;
			pthread_cond_broadcast(&srv->c_cond);
			break;
		}
	}
	pthread_mutex_unlock(&srv->c_lock);
	json_decref(msg);
}

/* true when the line was a response (or a batch of responses only) and was
 * routed here. */
static bool take_response(rpc_server *srv, const char *line, size_t len)
{
	pthread_mutex_lock(&srv->c_lock);
	bool waiting = srv->calls != NULL;
	pthread_mutex_unlock(&srv->c_lock);
	if (!waiting)
		return false;
	json_error_t jerr;
	json_t *msg = json_loadb(line, len, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &jerr);
	bool all = is_response(msg);
	if (json_is_array(msg) && json_array_size(msg) > 0) {
		size_t i;
		json_t *m;
		all = true;
		json_array_foreach (msg, i, m)
			all = all && is_response(m);
		if (all)
			json_array_foreach (msg, i, m)
				deliver_response(srv, json_incref(m));
		json_decref(msg);
		return all;
	}
	if (!all) {
		json_decref(msg);
		return false;
	}
	deliver_response(srv, msg);
	return true;
}

int rpc_client_request(rpc_server *srv, const char *method, json_t *params, double timeout,
		       json_t **result, msb_error **err)
{
	struct out_call c = {0};
	*result = NULL;
	pthread_mutex_lock(&srv->c_lock);
	snprintf(c.id, sizeof(c.id), "msb-%lu", ++srv->next_call);
	bool gone = srv->reader_done;
	if (!gone) {
		c.next = srv->calls;
		srv->calls = &c;
	}
	pthread_mutex_unlock(&srv->c_lock);
	if (gone) {
		json_decref(params);
		return msb_error_set(err, MSB_E_RUNTIME, "the client closed the connection");
	}
	json_t *req = json_pack("{s:s, s:s, s:s, s:o}", "jsonrpc", "2.0", "id", c.id, "method",
				method, "params", params);
	if (req)
		send_json(srv, req);
	json_decref(req);

	struct timespec deadline;
	clock_gettime(CLOCK_MONOTONIC, &deadline);
	double whole = (double)(time_t)timeout;
	deadline.tv_sec += (time_t)whole;
	deadline.tv_nsec += (long)((timeout - whole) * 1e9);
	if (deadline.tv_nsec >= 1000000000L) {
		deadline.tv_sec++;
		deadline.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&srv->c_lock);
	int w = 0;
	while (req && !c.response && !srv->reader_done && w != ETIMEDOUT)
		w = pthread_cond_timedwait(&srv->c_cond, &srv->c_lock, &deadline);
	for (struct out_call **p = &srv->calls; *p; p = &(*p)->next) {
		if (*p == &c) {
			*p = c.next;
			break;
		}
	}
	pthread_mutex_unlock(&srv->c_lock);
	if (!req)
		return msb_error_set(err, MSB_E_NOMEM, "out of memory");
	if (!c.response) {
		if (w == ETIMEDOUT)
			return msb_error_set(err, MSB_E_TIMEOUT,
					     "the client did not answer `%s` within %g s", method,
					     timeout);
		return msb_error_set(err, MSB_E_RUNTIME,
				     "the client closed the connection before answering `%s`",
				     method);
	}
	json_t *e = json_object_get(c.response, "error");
	int r = 0;
	if (e) {
		json_t *m = json_object_get(e, "message");
		r = msb_error_set(err, MSB_E_RUNTIME,
				  "the client answered `%s` with an error: %.300s", method,
				  json_is_string(m) ? json_string_value(m) : "(no message)");
	} else {
		*result = json_incref(json_object_get(c.response, "result"));
	}
	json_decref(c.response);
	return r;
}

/* Hand one line to the pool (taking `line`); blank lines are not messages. */
static void take_line(rpc_server *srv, char *line, size_t len)
{
	size_t a = 0;
	while (a < len && (line[a] == ' ' || line[a] == '\t' || line[a] == '\r'))
		a++;
	if (a == len || take_response(srv, line, len)) {
		free(line);
		return;
	}
	enqueue(srv, line, len);
}

/* Queue the first n bytes of *buf: a short line as a copy, a long one by
 * handing the buffer itself over and starting a fresh one. false when out
 * of memory (then *buf is NULL). */
static bool hand_over(rpc_server *srv, char **buf, size_t *cap, size_t n)
{
	if (n <= (1u << 16)) {
		char *copy = malloc(n ? n : 1);
		if (copy) {
			memcpy(copy, *buf, n);
			take_line(srv, copy, n);
		}
		return true;
	}
	take_line(srv, *buf, n);
	*cap = 1u << 16;
	*buf = malloc(*cap);
	return *buf != NULL;
}

/* Read lines; a line longer than the limit is drained and answered with
 * -32600, and the next line is served. */
static void read_loop(rpc_server *srv)
{
	size_t cap = 1u << 16, n = 0;
	char *buf = malloc(cap);
	char chunk[1u << 16];
	bool discarding = false;
	size_t discarded = 0;
	if (!buf)
		return;
	for (;;) {
		ssize_t r = read(STDIN_FILENO, chunk, sizeof(chunk));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		size_t off = 0;
		while (off < (size_t)r) {
			char *nl = memchr(chunk + off, '\n', (size_t)r - off);
			size_t take = nl ? (size_t)(nl - (chunk + off)) : (size_t)r - off;
			if (!discarding && n + take > srv->o.max_message) {
				discarding = true;
				discarded = n;
				n = 0;
			}
			if (discarding) {
				discarded += take;
			} else {
				if (n + take + 1 > cap) {
					size_t nc = cap;
					while (nc < n + take + 1)
						nc *= 2;
					char *nb = realloc(buf, nc);
					if (!nb) {
						discarding = true;
						discarded = n + take;
						n = 0;
						goto advance;
					}
					buf = nb;
					cap = nc;
				}
				memcpy(buf + n, chunk + off, take);
				n += take;
			}
		advance:
			off += take;
			if (nl) {
				off++;
				if (discarding) {
					char m[160];
					snprintf(
						m, sizeof(m),
						"invalid request: the message exceeds the %zu-byte "
						"limit",
						srv->o.max_message);
					reply_error(srv, RPC_INVALID_REQUEST, m,
						    json_pack("{s:I, s:I}", "limit",
							      (json_int_t)srv->o.max_message,
							      "received", (json_int_t)discarded));
					discarding = false;
				} else if (!hand_over(srv, &buf, &cap, n)) {
					return; /* out of memory: read no more */
				}
				n = 0;
			}
		}
	}
	if (!discarding && n > 0)
		hand_over(srv, &buf, &cap, n); /* a last message without its newline */
	free(buf);
}

rpc_server *rpc_server_new(const rpc_server_options *opts)
{
	rpc_server *srv = calloc(1, sizeof(*srv));
	if (!srv)
		return NULL;
	srv->o = *opts;
	if (!srv->o.max_message)
		srv->o.max_message = RPC_MAX_MESSAGE_DEFAULT;
	if (!srv->o.workers)
		srv->o.workers = RPC_WORKERS_DEFAULT;
	pthread_mutex_init(&srv->out_lock, NULL);
	pthread_mutex_init(&srv->q_lock, NULL);
	pthread_cond_init(&srv->q_cond, NULL);
	pthread_cond_init(&srv->q_space, NULL);
	pthread_mutex_init(&srv->c_lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&srv->c_cond, &ca);
	pthread_condattr_destroy(&ca);
	srv->ev[0] = srv->ev[1] = -1;
	srv->reader_done = true; /* no reader until rpc_serve starts one */
	return srv;
}

void rpc_server_serve_line(rpc_server *srv, const char *line, size_t len)
{
	size_t a = 0;
	while (a < len && (line[a] == ' ' || line[a] == '\t' || line[a] == '\r'))
		a++;
	if (a < len)
		serve_line(srv, line, len);
}

void rpc_server_free(rpc_server *srv)
{
	if (!srv)
		return;
	if (srv->o.at_eof)
		srv->o.at_eof(srv);
	pthread_mutex_lock(&srv->out_lock);
	drain_events_locked(srv);
	pthread_mutex_unlock(&srv->out_lock);
	msb_jsonl_recorder_free(srv->recorder);
	for (int i = 0; i < 2; i++) {
		if (srv->ev[i] >= 0)
			close(srv->ev[i]);
	}
	free(srv->ev_buf);
	pthread_mutex_destroy(&srv->out_lock);
	pthread_mutex_destroy(&srv->q_lock);
	pthread_cond_destroy(&srv->q_cond);
	pthread_cond_destroy(&srv->q_space);
	pthread_mutex_destroy(&srv->c_lock);
	pthread_cond_destroy(&srv->c_cond);
	free(srv);
}

/* Observer events: as notifications on stdout, or as JSON lines to a file. */
static int start_events(rpc_server *srv)
{
	msb_error *err = NULL;
	if (srv->o.events) {
		if (cli_os_event_channel(srv->ev, EVENT_MAX + 4096) < 0 ||
		    !(srv->ev_buf = malloc(EVENT_MAX))) {
			fprintf(stderr, "msb: cannot set up the event channel: %s\n",
				strerror(errno));
			return -1;
		}
	}
	int fd = srv->o.events ? srv->ev[1] : srv->o.events_fd;
	if (fd < 0)
		return 0;
	if (msb_jsonl_recorder_new(fd, &srv->recorder, &srv->observer, &err) < 0) {
		fprintf(stderr, "msb: %s\n", msb_error_message(err));
		msb_error_free(err);
		return -1;
	}
	srv->have_observer = true;
	return 0;
}

int rpc_serve(const rpc_server_options *opts)
{
	rpc_server *srv = rpc_server_new(opts);
	if (!srv || start_events(srv) < 0)
		return 1;
	srv->reader_done = false; /* before any worker can send the client a request */
	pthread_t fwd;
	bool fwd_started = srv->o.events && pthread_create(&fwd, NULL, event_forwarder, srv) == 0;
	pthread_t *workers = calloc(srv->o.workers, sizeof(*workers));
	unsigned started = 0;
	for (; workers && started < srv->o.workers; started++)
		if (pthread_create(&workers[started], NULL, worker, srv) != 0)
			break;
	if (started == 0) {
		fprintf(stderr, "msb: cannot start a worker thread\n");
		return 1;
	}

	read_loop(srv);
	pthread_mutex_lock(&srv->c_lock);
	srv->reader_done = true; /* requests of ours waiting for an answer fail now */
	pthread_cond_broadcast(&srv->c_cond);
	pthread_mutex_unlock(&srv->c_lock);

	/* EOF: finish every request already read, then let the front end
	 * release what it holds (docs/serve.md "Shutdown"). */
	pthread_mutex_lock(&srv->q_lock);
	srv->eof = true;
	pthread_cond_broadcast(&srv->q_cond);
	pthread_mutex_unlock(&srv->q_lock);
	for (unsigned i = 0; i < started; i++)
		pthread_join(workers[i], NULL);
	free(workers);
	if (srv->o.at_eof)
		srv->o.at_eof(srv);
	srv->o.at_eof = NULL;

	if (fwd_started) {
		atomic_store(&srv->ev_stop, true);
		cli_os_event_wake(srv->ev[1]);
		pthread_join(fwd, NULL);
	}
	rpc_server_free(srv);
	return 0;
}
