/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Streaming and terminals through src/client and msb-agent (issue 16): stdin
 * read from a descriptor as the workload consumes it, output handed over as
 * it comes, and a pseudo-terminal allocated by the agent with its size set
 * at start and changed while the command runs (WINSIZE).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/client.h"
#include "harness.h"
#include "util/util.h"

static struct agent_proc ap;
static msb_client *cl;

static void setup(void)
{
	cr_assert_eq(agent_start(&ap), 0, "cannot start msb-agent (MSB_AGENT=%s)",
		     getenv("MSB_AGENT") ? getenv("MSB_AGENT") : "(unset)");
	msb_error *err = NULL;
	int rc = msb_client__connect(ap.sock, 5.0, &cl, &err);
	cr_assert_eq(rc, 0, "connect: %s", err ? msb_error_message(err) : "?");
}

static void teardown(void)
{
	msb_client__free(cl);
	cl = NULL;
	agent_stop(&ap);
}

TestSuite(exec_io, .init = setup, .fini = teardown, .timeout = 60);

/* ---- helpers ------------------------------------------------------------- */

/* A writer thread: `len` bytes of a pattern into a pipe, then close it. */
struct feeder {
	int fd;
	size_t len;
	const char *text; /* instead of the pattern, when set */
	pthread_t th;
};

static void *feed(void *arg)
{
	struct feeder *f = arg;
	static uint8_t chunk[65536];
	for (size_t i = 0; i < sizeof(chunk); i++)
		chunk[i] = (uint8_t)(i * 7 + 3);
	if (f->text) {
		ssize_t w = write(f->fd, f->text, strlen(f->text));
		(void)w;
	}
	for (size_t done = 0; !f->text && done < f->len;) {
		size_t n = f->len - done < sizeof(chunk) ? f->len - done : sizeof(chunk);
		ssize_t w = write(f->fd, chunk, n);
		if (w <= 0)
			break;
		done += (size_t)w;
	}
	close(f->fd);
	return NULL;
}

/* The read end of a pipe fed by a thread. */
static int fed_pipe(struct feeder *f, size_t len, const char *text)
{
	int p[2];
	cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
	f->fd = p[1];
	f->len = len;
	f->text = text;
	cr_assert_eq(pthread_create(&f->th, NULL, feed, f), 0);
	return p[0];
}

struct sink {
	msb_buf b;
	size_t calls;
	int stream_seen[3];
	msb_tty *tty; /* resize once `trigger` shows up */
	const char *trigger;
	bool resized;
	int fail_with;
};

static int on_output(void *ud, int stream, const uint8_t *bytes, size_t len)
{
	struct sink *s = ud;
	cr_assert(stream == 1 || stream == 2);
	cr_assert_gt(len, 0);
	s->calls++;
	s->stream_seen[stream]++;
	if (s->fail_with)
		return s->fail_with;
	cr_assert_eq(msb__buf_append(&s->b, bytes, len), 0);
	if (s->tty && !s->resized && s->b.data &&
	    memmem(s->b.data, s->b.len, s->trigger, strlen(s->trigger))) {
		msb_tty_resize(s->tty, 50, 132);
		s->resized = true;
	}
	return 0;
}

struct counter {
	uint64_t bytes;
};

static int count_output(void *ud, int stream, const uint8_t *bytes, size_t len)
{
	((struct counter *)ud)->bytes += len;
	return 0;
}

static char *text(const struct sink *s)
{
	char *t = strndup(s->b.data ? (const char *)s->b.data : "", s->b.len);
	cr_assert(t);
	return t;
}

/* ---- stdin from a descriptor ----------------------------------------------- */

Test(exec_io, stdin_streams_from_a_descriptor_to_eof)
{
	struct feeder f;
	int in = fed_pipe(&f, (size_t)8 << 20, NULL);
	static const char *const argv[] = {"wc", "-c", NULL};
	msb_exec_io io = MSB_EXEC_IO_INIT;
	io.stdin_fd = in;
	msb_exec_request req = MSB_EXEC_REQUEST_INIT;
	req.argv = argv;
	req.io = &io;
	msb_exec_result res = {0};
	msb_error *err = NULL;
	cr_assert_eq(msb_client__exec(cl, &req, &res, &err), 0, "%s",
		     err ? msb_error_message(err) : "");
	pthread_join(f.th, NULL);
	close(in);
	cr_assert_eq(res.exit_code, 0);
	cr_assert_eq(strtoull((const char *)res.stdout_bytes, NULL, 10), (8ull << 20), "%s",
		     res.stdout_bytes);
	msb_exec_result_clear(&res);
}

/* A workload that never reads: the client reads no more than the agent's
 * window (and its own send mark) ahead, so most of the input stays in the
 * pipe for whoever reads it next - nothing is slurped. */
Test(exec_io, unread_stdin_is_not_slurped)
{
	int p[2];
	cr_assert_eq(pipe2(p, O_CLOEXEC | O_NONBLOCK), 0);
	cr_assert_eq(fcntl(p[1], F_SETPIPE_SZ, 1 << 20) >= (1 << 20), true);
	static uint8_t big[1 << 20];
	memset(big, 'x', sizeof(big));
	cr_assert_eq(write(p[1], big, sizeof(big)), (ssize_t)sizeof(big));
	static const char *const argv[] = {"sleep", "0.3", NULL};
	msb_exec_io io = MSB_EXEC_IO_INIT;
	io.stdin_fd = p[0];
	msb_exec_request req = MSB_EXEC_REQUEST_INIT;
	req.argv = argv;
	req.io = &io;
	msb_exec_result res = {0};
	msb_error *err = NULL;
	cr_assert_eq(msb_client__exec(cl, &req, &res, &err), 0);
	cr_assert_eq(res.exit_code, 0);
	msb_exec_result_clear(&res);
	size_t left = 0;
	for (ssize_t n; (n = read(p[0], big, sizeof(big))) > 0;)
		left += (size_t)n;
	/* the agent's stdin window is 64 KiB, the pipe inside holds 64 KiB more */
	cr_assert_geq(left, (size_t)(1 << 20) - (256u << 10), "only %zu bytes left", left);
	close(p[0]);
	close(p[1]);
}

/* ---- output handed over ------------------------------------------------------ */

Test(exec_io, output_streams_past_the_hold_cap)
{
	/* 96 MiB: more than an unbounded exec may hold (64 MiB), but nothing is
	 * held when the caller takes the bytes as they come */
	static const char *const argv[] = {"head", "-c", "100663296", "/dev/zero", NULL};
	struct counter n = {0};
	msb_exec_io io = MSB_EXEC_IO_INIT;
	io.output = count_output;
	io.userdata = &n;
	msb_exec_request req = MSB_EXEC_REQUEST_INIT;
	req.argv = argv;
	req.io = &io;
	req.timeout = 50;
	msb_exec_result res = {0};
	msb_error *err = NULL;
	cr_assert_eq(msb_client__exec(cl, &req, &res, &err), 0, "%s",
		     err ? msb_error_message(err) : "");
	cr_assert_eq(res.exit_code, 0);
	cr_assert_eq(n.bytes, 100663296ull);
	cr_assert_eq(res.stdout_len, 0, "handed over, not kept");
	cr_assert_eq(res.stderr_len, 0);
	msb_exec_result_clear(&res);
}

Test(exec_io, output_budget_applies_to_streamed_output)
{
	struct counter n = {0};
	msb_exec_io io = MSB_EXEC_IO_INIT;
	io.output = count_output;
	io.userdata = &n;
	msb_exec_request req = MSB_EXEC_REQUEST_INIT;
	req.shell = "yes";
	req.io = &io;
	req.max_output_bytes = 100000;
	msb_exec_result res = {0};
	msb_error *err = NULL;
	cr_assert_eq(msb_client__exec(cl, &req, &res, &err), 0);
	cr_assert(res.truncated);
	cr_assert_eq(n.bytes, 100000);
	msb_exec_result_clear(&res);
}

Test(exec_io, a_refusing_consumer_abandons_the_exec)
{
	struct sink s = {.b = MSB_BUF_INIT, .fail_with = MSB_E_OS};
	msb_exec_io io = MSB_EXEC_IO_INIT;
	io.output = on_output;
	io.userdata = &s;
	msb_exec_request req = MSB_EXEC_REQUEST_INIT;
	req.shell = "echo one; sleep 30";
	req.io = &io;
	msb_exec_result res = {0};
	msb_error *err = NULL;
	double t0 = now_s();
	cr_assert_eq(msb_client__exec(cl, &req, &res, &err), MSB_E_OS);
	cr_assert(now_s() - t0 < 10);
	cr_assert(strstr(msb_error_message(err), "output consumer"), "%s", msb_error_message(err));
	msb_error_free(err);
	msb__buf_free(&s.b);
}

/* ---- terminals ---------------------------------------------------------------- */

static int run_tty(msb_tty *t, const char *line, int in_fd, struct sink *s, msb_exec_result *res)
{
	msb_exec_io io = MSB_EXEC_IO_INIT;
	io.tty = t;
	io.stdin_fd = in_fd;
	io.output = s ? on_output : NULL;
	io.userdata = s;
	msb_exec_request req = MSB_EXEC_REQUEST_INIT;
	req.shell = line;
	req.io = &io;
	req.timeout = 20;
	memset(res, 0, sizeof(*res));
	msb_error *err = NULL;
	int rc = msb_client__exec(cl, &req, res, &err);
	cr_assert_eq(rc, 0, "`%s`: %s", line, err ? msb_error_message(err) : "");
	return res->exit_code;
}

Test(exec_io, tty_is_the_controlling_terminal_of_the_size_asked)
{
	msb_tty *t = NULL;
	cr_assert_eq(msb_tty_new(30, 100, &t, NULL), 0);
	msb_exec_result res;
	int code = run_tty(t,
			   "test -t 0 && test -t 1 && test -t 2 && stty size && "
			   "ps -o tty= -p $$ | grep -q pts && echo on-pts; echo err >&2; exit 5",
			   -1, NULL, &res);
	cr_assert_eq(code, 5, "%s", res.stdout_bytes);
	/* one stream: stderr is the terminal too; the line discipline's CRLF */
	cr_assert_str_eq((const char *)res.stdout_bytes, "30 100\r\non-pts\r\nerr\r\n");
	cr_assert_eq(res.stderr_len, 0);
	msb_exec_result_clear(&res);
	msb_tty_free(t);
}

Test(exec_io, tty_resize_reaches_the_command)
{
	msb_tty *t = NULL;
	cr_assert_eq(msb_tty_new(24, 80, &t, NULL), 0);
	struct sink s = {.b = MSB_BUF_INIT, .tty = t, .trigger = "ready"};
	msb_exec_result res;
	int code = run_tty(t,
			   "trap 'stty size; exit 3' WINCH; stty size; echo ready; "
			   "while :; do sleep 0.05; done",
			   -1, &s, &res);
	char *out = text(&s);
	cr_assert_eq(code, 3, "%s", out);
	cr_assert(s.resized);
	cr_assert(strstr(out, "24 80\r\nready\r\n50 132\r\n"), "%s", out);
	cr_assert_eq(s.stream_seen[2], 0, "a terminal has one output stream");
	free(out);
	msb__buf_free(&s.b);
	msb_exec_result_clear(&res);
	msb_tty_free(t);
}

Test(exec_io, tty_input_and_its_end)
{
	msb_tty *t = NULL;
	cr_assert_eq(msb_tty_new(24, 80, &t, NULL), 0);
	struct feeder f;
	int in = fed_pipe(&f, 0, "hello\n");
	msb_exec_result res;
	/* cat reads the line, then the terminal's end of file (the host's EOF);
	 * the terminal may echo the line first */
	int code = run_tty(t, "cat; echo done:$?", in, NULL, &res);
	pthread_join(f.th, NULL);
	close(in);
	cr_assert_eq(code, 0);
	static const char tail[] = "hello\r\ndone:0\r\n";
	cr_assert_geq(res.stdout_len, sizeof(tail) - 1);
	cr_assert_str_eq((const char *)res.stdout_bytes + res.stdout_len - (sizeof(tail) - 1), tail,
			 "%s", res.stdout_bytes);
	msb_exec_result_clear(&res);
	/* no stdin at all: the terminal reads end of file at once */
	code = run_tty(t, "cat; echo eof", -1, NULL, &res);
	cr_assert_eq(code, 0);
	cr_assert(strstr((const char *)res.stdout_bytes, "eof\r\n"), "%s", res.stdout_bytes);
	msb_exec_result_clear(&res);
	msb_tty_free(t);
}

Test(exec_io, tty_sizes_are_bounded)
{
	msb_tty *t = NULL;
	msb_error *err = NULL;
	cr_assert_eq(msb_tty_new(0, 80, &t, &err), MSB_E_VALUE);
	msb_error_free(err);
	err = NULL;
	cr_assert_eq(msb_tty_new(24, MSB_TTY_MAX_DIM + 1, &t, &err), MSB_E_VALUE);
	msb_error_free(err);
	cr_assert_eq(msb_tty_new(24, 80, &t, NULL), 0);
	msb_tty_resize(t, 0, 100000); /* clamped, never refused: it runs in signal handlers */
	unsigned r, c;
	cr_assert(msb_tty_take_resize(t, &r, &c));
	cr_assert_eq(r, 1);
	cr_assert_eq(c, MSB_TTY_MAX_DIM);
	cr_assert_not(msb_tty_take_resize(t, &r, &c), "drained");
	msb_tty_free(t);
}
