/* SPDX-License-Identifier: Apache-2.0 */
/*
 * exec and exec_bounded over an exec channel: EXEC_OPEN, stdin under the
 * agent's credit (from the request's bytes or streamed from a descriptor),
 * stdout/stderr under ours (kept, or handed to the caller as they come), a
 * terminal's size and its changes, the deadline, cancellation and the EXIT
 * report. Every frame from the agent is checked against what this channel
 * allows at that moment.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>

#include "client/client_priv.h"
#include "util/fault.h"

/* Output window granted to the agent per exec (re-granted as consumed). */
#define WINDOW (256u * 1024)

struct run {
	uint32_t chan;
	bool bounded;
	uint64_t budget;
	msb_buf out[2]; /* stdout, stderr */
	uint64_t received;
	msb_proto_credit window; /* granted to the agent, not yet received */
	uint64_t granted;	 /* total granted (bounded: never past the budget) */
	uint32_t consumed;	 /* received since the last CREDIT */
	bool eof[2];
	/* stdin: the request's bytes, or a descriptor (in_fd >= 0) */
	bool stdin_on;
	const uint8_t *in;
	size_t in_len, in_off;
	int in_fd;
	bool in_eof_sent;
	msb_proto_credit in_credit;
	/* output handed to the caller (msb_exec_io.output), else kept */
	msb_exec_output_fn output;
	void *userdata;
	/* a terminal: one output stream, and the size last sent */
	msb_tty *tty;
	msb_proto_winsize ws;
	/* outcome */
	bool have_exit;
	msb_proto_exit exit;
	bool chan_error;
	uint16_t err_code;
	char err_msg[MSB_PROTO_MAX_ERROR_MSG + 1];
	bool timed_out, cancelled;
};

static void run_free(struct run *r)
{
	msb__buf_free(&r->out[0]);
	msb__buf_free(&r->out[1]);
}

static int queue_frame(msb_client *c, int len_or_status, const uint8_t *buf, msb_error **err)
{
	return msb_client__queue_small(c, buf, len_or_status, err);
}

static int send_credit(msb_client *c, struct run *r, msb_error **err)
{
	uint64_t g = r->consumed;
	if (r->bounded && g > r->budget - r->granted)
		g = r->budget - r->granted;
	r->consumed = 0;
	if (g == 0)
		return 0;
	uint8_t buf[32];
	int rc = queue_frame(c, msb_proto_enc_credit(buf, sizeof(buf), r->chan, (uint32_t)g), buf,
			     err);
	if (rc < 0)
		return rc;
	msb_proto_credit_grant(&r->window, (uint32_t)g);
	r->granted += g;
	return 0;
}

static int send_cancel(msb_client *c, struct run *r, uint8_t reason, msb_error **err)
{
	uint8_t buf[32];
	return queue_frame(c, msb_proto_enc_cancel(buf, sizeof(buf), r->chan, reason), buf, err);
}

static int send_stdin_eof(msb_client *c, struct run *r, msb_error **err)
{
	uint8_t buf[32];
	int rc = queue_frame(c, msb_proto_enc_eof(buf, sizeof(buf), r->chan, MSB_PROTO_STDIN), buf,
			     err);
	if (rc == 0)
		r->in_eof_sent = true;
	return rc;
}

/* Does the stdin descriptor want reading now? Only within the agent's credit
 * and below the send queue's mark: a workload that does not read its stdin
 * stops us reading ours, so nothing is read that is not sent. */
static bool stdin_fd_wanted(const msb_client *c, const struct run *r)
{
	return r->in_fd >= 0 && !r->in_eof_sent && !r->have_exit && r->in_credit.avail > 0 &&
	       msb_client__queued(c) < MSB_CLIENT_OUTQ_HIGH;
}

/* One read from the stdin descriptor, straight into a DATA frame; end of
 * file (or a descriptor that fails, such as a terminal hung up) is EOF. */
static int pump_stdin_fd(msb_client *c, struct run *r, msb_error **err)
{
	if (!stdin_fd_wanted(c, r))
		return 0;
	size_t chunk = r->in_credit.avail;
	if (chunk > c->peer_max_payload - 1)
		chunk = c->peer_max_payload - 1;
	size_t cap = MSB_PROTO_DATA_OVERHEAD + chunk;
	uint8_t *dst;
	int rc = msb_client__reserve(c, cap, &dst, err);
	if (rc < 0)
		return rc;
	ssize_t n = read(r->in_fd, dst + MSB_PROTO_DATA_OVERHEAD, chunk);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return 0; /* nothing reserved was committed */
	if (n <= 0)
		return send_stdin_eof(c, r, err);
	msb_proto_put_header(dst, (uint32_t)n + 1, MSB_PROTO_DATA, 0, r->chan);
	dst[MSB_PROTO_HEADER_SIZE] = MSB_PROTO_STDIN;
	msb_client__commit(c, MSB_PROTO_DATA_OVERHEAD + (size_t)n);
	msb_proto_credit_take(&r->in_credit, (uint32_t)n);
	return 0;
}

/* The terminal was resized: tell the agent, once per change. */
static int send_winsize(msb_client *c, struct run *r, msb_error **err)
{
	unsigned rows, cols;
	msb_tty_take_resize(r->tty, &rows, &cols);
	if (r->have_exit || (rows == r->ws.rows && cols == r->ws.cols))
		return 0;
	msb_proto_winsize ws = {(uint16_t)rows, (uint16_t)cols};
	uint8_t buf[32];
	int rc = queue_frame(c, msb_proto_enc_winsize(buf, sizeof(buf), r->chan, &ws), buf, err);
	if (rc == 0)
		r->ws = ws;
	return rc;
}

/* Queue stdin DATA from the request's bytes within the agent's credit, then
 * EOF. */
static int pump_stdin(msb_client *c, struct run *r, msb_error **err)
{
	if (!r->stdin_on || r->in_fd >= 0 || r->in_eof_sent || r->have_exit)
		return 0;
	while (r->in_off < r->in_len && r->in_credit.avail > 0 &&
	       msb_client__queued(c) < MSB_CLIENT_OUTQ_HIGH) {
		size_t chunk = r->in_len - r->in_off;
		if (chunk > r->in_credit.avail)
			chunk = r->in_credit.avail;
		if (chunk > c->peer_max_payload - 1)
			chunk = c->peer_max_payload - 1;
		size_t cap = MSB_PROTO_DATA_OVERHEAD + chunk;
		uint8_t *dst;
		int rc = msb_client__reserve(c, cap, &dst, err);
		if (rc < 0)
			return rc;
		int n = msb_proto_enc_data(dst, cap, r->chan, MSB_PROTO_STDIN, r->in + r->in_off,
					   (uint32_t)chunk);
		if (n < 0)
			return msb_error_set(err, MSB_E_RUNTIME, "cannot encode stdin: %s",
					     msb_proto_strerror(n));
		msb_client__commit(c, (size_t)n);
		msb_proto_credit_take(&r->in_credit, (uint32_t)chunk);
		r->in_off += chunk;
	}
	if (r->in_off == r->in_len)
		return send_stdin_eof(c, r, err);
	return 0;
}

/* One frame of this exec. Returns 0, or a set error. */
static int on_frame(msb_client *c, struct run *r, const msb_proto_frame *f, msb_error **err)
{
	msb_proto_msg m;
	if (f->channel == 0) {
		if (f->type == MSB_PROTO_ERROR)
			return msb_client__peer_error(c, f, err);
		if (f->type == MSB_PROTO_PING && msb_proto_dec_ping(f, &m.u.cookie) == 0) {
			uint8_t buf[32];
			return queue_frame(
				c, msb_proto_enc_ping(buf, sizeof(buf), MSB_PROTO_PONG, m.u.cookie),
				buf, err);
		}
		return msb_client__violation(c, err, "unexpected %s during exec",
					     msb_proto_type_name(f->type));
	}
	if (f->channel != r->chan)
		return msb_client__violation(c, err, "%s on channel %u, exec is on %u",
					     msb_proto_type_name(f->type), f->channel, r->chan);
	if (!msb_proto_agent_may_send(f->type))
		return msb_client__violation(c, err, "%s is not an agent's frame",
					     msb_proto_type_name(f->type));
	int rc = msb_proto_decode(f, &m);
	if (rc < 0)
		return msb_client__violation(c, err, "bad %s: %s", msb_proto_type_name(f->type),
					     msb_proto_strerror(rc));

	switch (m.type) {
	case MSB_PROTO_DATA: {
		int s = m.u.data.stream - MSB_PROTO_STDOUT;
		uint32_t len = m.u.data.len;
		if (s < 0 || s > 1 || r->eof[s] || (r->tty && s == 1))
			return msb_client__violation(c, err, "DATA on a closed or foreign stream");
		if (msb_proto_credit_take(&r->window, len) < 0)
			return msb_client__violation(c, err, "DATA beyond the granted credit");
		if (r->bounded && len > r->budget - r->received)
			return msb_client__violation(c, err, "DATA beyond the output budget");
		if (r->output) {
			/* handed over, not held: the hold cap does not apply */
			int cr = r->output(r->userdata, s + 1, m.u.data.bytes, len);
			if (cr < 0) {
				msb_client__drop(c); /* the agent kills the command */
				return msb_error_set(err, cr,
						     "exec abandoned: the output consumer "
						     "refused %u bytes of %s",
						     len, s ? "stderr" : "stdout");
			}
		} else if (!r->bounded && len > MSB_CLIENT_MAX_OUTPUT - r->received) {
			msb_client__drop(c); /* the agent kills what it was running */
			return msb_error_set(err, MSB_E_RUNTIME,
					     "exec output exceeds %llu bytes, the limit of an "
					     "unbounded exec; use exec_bounded",
					     (unsigned long long)MSB_CLIENT_MAX_OUTPUT);
		}
		if (!r->output && msb__buf_append(&r->out[s], m.u.data.bytes, len) < 0) {
			msb_client__drop(c);
			return msb__error_nomem(err);
		}
		if (len > 0 && r->received == 0)
			msb__fault_point("exec.output");
		r->received += len;
		r->consumed += len;
		if (r->consumed >= WINDOW / 4)
			return send_credit(c, r, err);
		return 0;
	}
	case MSB_PROTO_EOF: {
		int s = m.u.stream - MSB_PROTO_STDOUT;
		if (s < 0 || s > 1 || r->eof[s] || (r->tty && s == 1))
			return msb_client__violation(c, err, "EOF on a closed or foreign stream");
		r->eof[s] = true;
		return 0;
	}
	case MSB_PROTO_CREDIT:
		if (!r->stdin_on)
			return msb_client__violation(c, err,
						     "stdin CREDIT for an exec without stdin");
		if (msb_proto_credit_grant(&r->in_credit, m.u.credit) < 0)
			return msb_client__violation(c, err, "stdin CREDIT over the window limit");
		return 0;
	case MSB_PROTO_EXIT: {
		const msb_proto_exit *x = &m.u.exit;
		if ((x->flags & MSB_PROTO_EXIT_CANCELLED) && !r->cancelled)
			return msb_client__violation(c, err, "EXIT reports a cancel never sent");
		if (x->flags & MSB_PROTO_EXIT_TRUNCATED) {
			if (!r->bounded || r->received != r->budget)
				return msb_client__violation(
					c, err, "EXIT reports truncation before the budget");
		}
		r->exit = *x;
		r->have_exit = true;
		return 0;
	}
	case MSB_PROTO_ERROR:
		if (r->received > 0 || r->eof[0] || r->eof[1])
			return msb_client__violation(c, err, "ERROR after the exec started");
		r->chan_error = true;
		r->err_code = m.u.error.code;
		memcpy(r->err_msg, m.u.error.message.ptr, m.u.error.message.len);
		r->err_msg[m.u.error.message.len] = 0;
		return 0;
	default:
		return msb_client__violation(c, err, "unexpected %s on an exec channel",
					     msb_proto_type_name(m.type));
	}
}

static int channel_error(const struct run *r, const msb_exec_request *req, msb_error **err)
{
	const char *wd = req->working_directory ? req->working_directory : ".";
	int rc;
	switch (r->err_code) {
	case MSB_PROTO_ERR_ESCAPE:
		rc = msb_error_set(err, MSB_E_VALUE,
				   "working directory `%s` escapes the storage base", wd);
		break;
	case MSB_PROTO_ERR_NOT_FOUND:
		rc = msb_error_set(err, MSB_E_NOT_FOUND, "working directory `%s` does not exist",
				   wd);
		break;
	case MSB_PROTO_ERR_NOT_DIRECTORY:
		rc = msb_error_set(err, MSB_E_NOT_DIRECTORY,
				   "working directory `%s` is not a directory", wd);
		break;
	case MSB_PROTO_ERR_PERMISSION:
		rc = msb_error_set(err, MSB_E_PERMISSION,
				   "working directory `%s` is not accessible", wd);
		break;
	case MSB_PROTO_ERR_BAD_REQUEST:
		rc = msb_error_set(err, MSB_E_VALUE, "sandbox agent refused the exec request");
		break;
	case MSB_PROTO_ERR_PROTOCOL:
	case MSB_PROTO_ERR_VERSION:
		rc = msb_error_set(err, MSB_E_PROTOCOL, "sandbox agent refused the exec channel");
		break;
	default:
		rc = msb_error_set(err, MSB_E_RUNTIME, "sandbox agent could not start the command");
		break;
	}
	msb_error_set_detail(err, "agent: %s", r->err_msg);
	return rc;
}

static uint8_t *steal(msb_buf *b)
{
	if (msb__buf_reserve(b, 0) < 0)
		return NULL;
	return (uint8_t *)msb__buf_steal_str(b);
}

static int finish_timeout(struct run *r, const msb_exec_request *req, msb_error **err)
{
	int outcome = MSB_SIGNAL_UNKNOWN;
	if (r->have_exit && (r->exit.flags & MSB_PROTO_EXIT_NO_SURVIVOR))
		outcome = MSB_SIGNAL_SENT;
	int rc = msb_error_set(err, MSB_E_TIMEOUT, "command timed out after %g s", req->timeout);
	if (!r->have_exit)
		msb_error_set_detail(err, "no report from the sandbox agent after the kill");
	else if (outcome != MSB_SIGNAL_SENT)
		msb_error_set_detail(err,
				     "the agent could not confirm that the process group died");
	/* partial output: stdout then stderr, capped */
	msb_buf partial = MSB_BUF_INIT;
	size_t a = r->out[0].len < MSB_CLIENT_PARTIAL_MAX ? r->out[0].len : MSB_CLIENT_PARTIAL_MAX;
	size_t b = r->out[1].len < MSB_CLIENT_PARTIAL_MAX - a ? r->out[1].len
							      : MSB_CLIENT_PARTIAL_MAX - a;
	msb__buf_append(&partial, r->out[0].data, a);
	msb__buf_append(&partial, r->out[1].data, b);
	msb__error_set_timeout(err, outcome, partial.oom ? NULL : partial.data,
			       partial.oom ? 0 : partial.len);
	msb__buf_free(&partial);
	return rc;
}

static int check_request(const msb_exec_request *req, msb_error **err)
{
	if (!req || req->version != MSB_EXEC_REQUEST_VERSION)
		return msb_error_set(err, MSB_E_VALUE, "exec request version mismatch");
	if ((req->argv == NULL) == (req->shell == NULL))
		return msb_error_set(err, MSB_E_VALUE,
				     "exec needs exactly one of argv and a shell command line");
	if (req->argv && (!req->argv[0] || !req->argv[0][0]))
		return msb_error_set(err, MSB_E_VALUE, "exec argv must name a program");
	if (req->stdin_len > 0 && !req->stdin_data)
		return msb_error_set(err, MSB_E_VALUE, "stdin_len without stdin_data");
	if (req->io && req->io->stdin_fd >= 0 && req->stdin_len > 0)
		return msb_error_set(err, MSB_E_VALUE, "give stdin_data or io.stdin_fd, not both");
	for (size_t i = 0; req->env && req->env[i]; i++) {
		const char *eq = strchr(req->env[i], '=');
		if (!eq || eq == req->env[i])
			return msb_error_set(err, MSB_E_VALUE, "env entry `%s` is not KEY=VALUE",
					     req->env[i]);
	}
	return msb__check_timeout(req->timeout, "timeout", err);
}

static int open_channel(msb_client *c, struct run *r, const msb_exec_request *req, uint32_t extra,
			int64_t deadline, msb_error **err)
{
	const char *shell_argv[2] = {req->shell, NULL};
	msb_proto_exec_spec spec = {
		.flags = extra | (req->shell ? MSB_PROTO_EXEC_SHELL : 0) |
			 (r->stdin_on ? MSB_PROTO_EXEC_STDIN : 0) |
			 (r->bounded ? MSB_PROTO_EXEC_BOUNDED : 0) |
			 (r->tty ? MSB_PROTO_EXEC_TTY : 0),
		.initial_credit = (uint32_t)(r->bounded && r->budget < WINDOW ? r->budget : WINDOW),
		.output_budget = r->budget,
		.cwd = req->working_directory,
		.argv = req->shell ? shell_argv : req->argv,
		.env = req->env,
		.winsize = r->ws,
	};
	/* The agent's bound is what is left of the call's. */
	int64_t left = deadline - msb__now_ns();
	double ms = deadline == INT64_MAX ? ceil(req->timeout * 1000.0)
		    : left > 0		  ? ceil((double)left / 1e6)
					  : 1;
	spec.timeout_ms =
		ms >= (double)MSB_PROTO_MAX_TIMEOUT_MS ? MSB_PROTO_MAX_TIMEOUT_MS : (uint64_t)ms;
	if (spec.timeout_ms == 0)
		spec.timeout_ms = 1;

	size_t cap = MSB_PROTO_HEADER_SIZE + c->peer_max_payload;
	uint8_t *dst;
	int rc = msb_client__reserve(c, cap, &dst, err);
	if (rc < 0)
		return rc;
	int n = msb_proto_enc_exec_open(dst, cap, r->chan, &spec);
	if (n == MSB_PROTO_E_LIMIT || n == MSB_PROTO_E_SPACE)
		return msb_error_set(err, MSB_E_VALUE,
				     "exec request exceeds the protocol limits (%u argv entries, "
				     "%u env entries, %u bytes a string, %u bytes in all)",
				     MSB_PROTO_MAX_ARGS, MSB_PROTO_MAX_ENV, MSB_PROTO_MAX_STRING,
				     c->peer_max_payload);
	if (n < 0)
		return msb_error_set(err, MSB_E_VALUE, "invalid exec request: %s",
				     msb_proto_strerror(n));
	msb_client__commit(c, (size_t)n);
	msb_proto_credit_grant(&r->window, spec.initial_credit);
	r->granted = spec.initial_credit;
	return 0;
}

/* The run's settings from the request: output budget, stdin, the output
 * callback and the terminal (refused on an agent without terminals). */
static int run_init(msb_client *c, struct run *rp, const msb_exec_request *req, msb_error **err)
{
	const msb_exec_io *io = req->io;
	rp->bounded = req->max_output_bytes > 0;
	rp->budget = req->max_output_bytes;
	rp->in = req->stdin_data;
	rp->in_len = req->stdin_len;
	rp->in_fd = io && io->stdin_fd >= 0 ? io->stdin_fd : -1;
	rp->stdin_on = req->stdin_len > 0 || rp->in_fd >= 0;
	rp->output = io ? io->output : NULL;
	rp->userdata = io ? io->userdata : NULL;
	rp->tty = io ? io->tty : NULL;
	if (rp->tty) {
		if (c->version < MSB_PROTO_VERSION_TTY)
			return msb_error_set(
				err, MSB_E_NOT_IMPLEMENTED,
				"the sandbox's agent speaks protocol version %u, which "
				"has no terminals; dispose of the sandbox and acquire "
				"it again",
				c->version);
		unsigned rows, cols;
		msb_tty_take_resize(rp->tty, &rows, &cols);
		rp->ws = (msb_proto_winsize){(uint16_t)rows, (uint16_t)cols};
	}
	return 0;
}

/* The result of a run that ended with its exit report; takes the output. */
static int run_result(struct run *rp, msb_exec_result *out, msb_error **err)
{
	msb_exec_result res = {0};
	res.stdout_len = rp->out[0].len;
	res.stderr_len = rp->out[1].len;
	res.stdout_bytes = steal(&rp->out[0]);
	res.stderr_bytes = steal(&rp->out[1]);
	if (!res.stdout_bytes || !res.stderr_bytes) {
		free(res.stdout_bytes);
		free(res.stderr_bytes);
		return msb__error_nomem(err);
	}
	if (rp->exit.how == MSB_PROTO_SIGNALED) {
		res.term_signal = rp->exit.value;
		res.exit_code = 128 + rp->exit.value;
	} else {
		res.exit_code = rp->exit.value;
	}
	res.truncated = (rp->exit.flags & MSB_PROTO_EXIT_TRUNCATED) != 0;
	*out = res;
	return 0;
}

/* Connect if need be and send the request: on a new connection, a request
 * that fits the least maximum any agent takes goes out right behind our
 * HELLO (one round trip, not two). */
static int exec_start(msb_client *c, struct run *r, const msb_exec_request *req, uint32_t extra,
		      int64_t deadline, msb_error **err)
{
	int rc;
	bool fresh = false;
	if ((rc = msb_client__ensure_begin(c, deadline, &fresh, err)) < 0) {
		if (rc == MSB_E_TIMEOUT)
			msb__error_set_timeout(err, MSB_SIGNAL_ABSENT, NULL, 0);
		return rc;
	}
	/* What depends on the agent's protocol version (a terminal, a flag of
	 * the caller's) waits for its HELLO. */
	if (fresh && (extra != 0 || (req->io && req->io->tty))) {
		fresh = false;
		if ((rc = msb_client__ensure_finish(c, deadline, err)) < 0) {
			if (rc == MSB_E_TIMEOUT)
				msb__error_set_timeout(err, MSB_SIGNAL_ABSENT, NULL, 0);
			return rc;
		}
	}
	r->chan = msb_client__channel(c);
	if (r->chan == 0) {
		msb_client__drop(c);
		return msb_error_set(err, MSB_E_RUNTIME, "agent connection out of channel ids");
	}
	if ((rc = run_init(c, r, req, err)) < 0)
		return rc;
	if (fresh) {
		/* Queued behind HELLO if it fits; else after the agent's HELLO
		 * says how large a frame it takes. */
		msb_error *e = NULL;
		bool early = open_channel(c, r, req, extra, deadline, &e) == 0;
		msb_error_free(e);
		if ((rc = msb_client__ensure_finish(c, deadline, err)) < 0) {
			if (rc == MSB_E_TIMEOUT)
				msb__error_set_timeout(err, MSB_SIGNAL_ABSENT, NULL, 0);
			return rc;
		}
		if (!early && (rc = open_channel(c, r, req, extra, deadline, err)) < 0)
			return rc;
	} else if ((rc = open_channel(c, r, req, extra, deadline, err)) < 0) {
		return rc;
	}
	/* The request on the wire (the loop below sends what the socket did not
	 * take and reports a failed send). */
	if (msb_proto_outq_send(&c->out, c->fd) == 0 && msb_client__queued(c) == 0)
		msb__fault_point("exec.sent");
	return 0;
}

static int exec_locked(msb_client *c, const msb_exec_request *req, uint32_t extra, int64_t deadline,
		       msb_exec_result *out, msb_error **err)
{
	int64_t grace = INT64_MAX;
	int cancel_fd = req->cancel ? msb_cancel_fd(req->cancel) : -1;
	struct run r = {0};
	int rc;

	if (req->cancel && msb_cancel_requested(req->cancel))
		return msb_error_set(err, MSB_E_CANCELLED, "exec cancelled before it started");
	r.out[0] = (msb_buf)MSB_BUF_INIT;
	r.out[1] = (msb_buf)MSB_BUF_INIT;
	if ((rc = exec_start(c, &r, req, extra, deadline, err)) < 0)
		return rc;

	for (;;) {
		msb_proto_frame f;
		while (!r.have_exit && !r.chan_error &&
		       (rc = msb_proto_reader_next(c->rd, &f)) != 0) {
			if (rc < 0) {
				rc = msb_client__violation(c, err, "bad frame: %s",
							   msb_proto_strerror(rc));
				goto out;
			}
			if ((rc = on_frame(c, &r, &f, err)) < 0)
				goto out;
		}
		if (r.have_exit || r.chan_error)
			break;
		if ((rc = pump_stdin(c, &r, err)) < 0)
			goto out;

		int64_t now = msb__now_ns();
		if (!r.timed_out && !r.cancelled && now >= deadline) {
			r.timed_out = true;
			grace = msb_client__deadline(MSB_CLIENT_KILL_GRACE);
			if ((rc = send_cancel(c, &r, MSB_PROTO_CANCEL_TIMEOUT, err)) < 0)
				goto out;
		}
		if (grace != INT64_MAX && now >= grace) {
			/* no report: hang up, the agent kills what the channel ran */
			msb_client__drop(c);
			break;
		}
		bool stopping = r.timed_out || r.cancelled;
		msb_client_watch w[3] = {
			{.fd = cancel_fd, .events = !stopping && cancel_fd >= 0 ? POLLIN : 0},
			{.fd = r.in_fd, .events = !stopping && stdin_fd_wanted(c, &r) ? POLLIN : 0},
			{.fd = msb_tty_fd(r.tty), .events = !stopping && r.tty ? POLLIN : 0},
		};
		rc = msb_client__io(c, grace != INT64_MAX ? grace : deadline, w, 3);
		if (w[0].revents) {
			r.cancelled = true;
			grace = msb_client__deadline(MSB_CLIENT_KILL_GRACE);
			if ((rc = send_cancel(c, &r, MSB_PROTO_CANCEL_REQUESTED, err)) < 0)
				goto out;
			continue;
		}
		if (rc > 0 && w[1].revents) {
			int q = pump_stdin_fd(c, &r, err);
			if (q < 0) {
				rc = q;
				goto out;
			}
		}
		if (rc > 0 && w[2].revents) {
			int q = send_winsize(c, &r, err);
			if (q < 0) {
				rc = q;
				goto out;
			}
		}
		if (rc < 0) {
			if (r.timed_out || r.cancelled) {
				msb_client__drop(c);
				break;
			}
			rc = msb_client__lost(c, rc, "exec", err);
			goto out;
		}
	}

	if (r.cancelled) {
		rc = msb_error_set(err, MSB_E_CANCELLED, "exec cancelled");
		goto out;
	}
	if (r.chan_error) {
		rc = channel_error(&r, req, err);
		goto out;
	}
	if (r.timed_out || (r.have_exit && (r.exit.flags & MSB_PROTO_EXIT_TIMED_OUT))) {
		/* an EXIT that shows no kill raced the deadline: the command
		 * finished on its own and its result is whole */
		if (!(r.have_exit && !(r.exit.flags & MSB_PROTO_EXIT_KILLED))) {
			rc = finish_timeout(&r, req, err);
			goto out;
		}
	}

	rc = run_result(&r, out, err);
out:
	run_free(&r);
	return rc;
}

int msb_client__exec(msb_client *c, const msb_exec_request *req, msb_exec_result *out,
		     msb_error **err)
{
	int rc = check_request(req, err);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&c->lock);
	rc = exec_locked(c, req, 0, msb_client__deadline(req->timeout), out, err);
	pthread_mutex_unlock(&c->lock);
	return rc;
}

int msb_client__exec_until(msb_client *c, const msb_exec_request *req, int64_t deadline,
			   msb_exec_result *out, msb_error **err)
{
	int rc = check_request(req, err);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&c->lock);
	rc = exec_locked(c, req, 0, deadline, out, err);
	pthread_mutex_unlock(&c->lock);
	return rc;
}

int msb_client__exec_file(msb_client *c, const msb_exec_request *req, msb_exec_result *out,
			  msb_error **err)
{
	if (req->shell)
		return msb_error_set(err, MSB_E_VALUE, "a file request has no shell line");
	if (req->io && req->io->tty)
		return msb_error_set(err, MSB_E_VALUE, "a file request has no terminal");
	int rc = check_request(req, err);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&c->lock);
	rc = exec_locked(c, req, MSB_PROTO_EXEC_FILE, msb_client__deadline(req->timeout), out, err);
	pthread_mutex_unlock(&c->lock);
	return rc;
}
