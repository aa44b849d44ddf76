/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Writes the hand-made seeds of tests/fuzz/corpus/proto: valid conversations
 * built with the encoders, and invalid ones made by breaking one field of a
 * valid frame. Run by hand after a format change:
 *   build/tests/fuzz/proto-corpus-gen tests/fuzz/corpus/proto
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/proto.h"

struct out {
	uint8_t buf[1 << 18];
	size_t len;
};

static void add(struct out *o, int n)
{
	if (n < 0) {
		fprintf(stderr, "encoder failed: %s\n", msb_proto_strerror(n));
		exit(1);
	}
	o->len += (size_t)n;
}

static uint8_t *tail(struct out *o)
{
	return o->buf + o->len;
}

static size_t room(const struct out *o)
{
	return sizeof(o->buf) - o->len;
}

static void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void save(const char *dir, const char *name, const struct out *o)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "wbe");
	if (!f || fwrite(o->buf, 1, o->len, f) != o->len || fclose(f) != 0) {
		perror(path);
		exit(1);
	}
}

static void hello(struct out *o, uint8_t role)
{
	msb_proto_hello h;
	msb_proto_hello_default(&h, role);
	add(o, msb_proto_enc_hello(tail(o), room(o), &h));
}

static const char *const argv_sh[] = {"sh", "-c", "printf '%s' \"$1\"", "p", "a b$(echo x)c", NULL};
static const char *const env_ab[] = {"A=1", "LANG=C.UTF-8", NULL};

static void exec_open(struct out *o, uint32_t chan)
{
	msb_proto_exec_spec s = {
		.flags = 0,
		.initial_credit = 262144,
		.timeout_ms = 30000,
		.cwd = "sub/dir",
		.argv = argv_sh,
		.env = env_ab,
	};
	add(o, msb_proto_enc_exec_open(tail(o), room(o), chan, &s));
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s DIR\n", argv[0]);
		return 2;
	}
	const char *dir = argv[1];
	static struct out o;
	static const uint8_t bin[] = {0xff, 0x00, 'o', 'k', 0x00, 0xfe, '\n'};

	/* ---- valid ---- */
	o.len = 0;
	hello(&o, MSB_PROTO_ROLE_HOST);
	save(dir, "valid-hello-host", &o);

	o.len = 0;
	hello(&o, MSB_PROTO_ROLE_AGENT);
	add(&o, msb_proto_enc_credit(tail(&o), room(&o), 1, 65536));
	save(dir, "valid-hello-agent-credit", &o);

	o.len = 0;
	hello(&o, MSB_PROTO_ROLE_HOST);
	exec_open(&o, 1);
	save(dir, "valid-exec-argv", &o);

	o.len = 0;
	{
		static const char *const line[] = {"cat; exit 7", NULL};
		msb_proto_exec_spec s = {
			.flags = MSB_PROTO_EXEC_SHELL | MSB_PROTO_EXEC_STDIN |
				 MSB_PROTO_EXEC_BOUNDED,
			.initial_credit = 1024,
			.timeout_ms = 1000,
			.output_budget = 1024,
			.cwd = "",
			.argv = line,
			.env = NULL,
		};
		add(&o, msb_proto_enc_exec_open(tail(&o), room(&o), 3, &s));
		add(&o,
		    msb_proto_enc_data(tail(&o), room(&o), 3, MSB_PROTO_STDIN, bin, sizeof(bin)));
		add(&o, msb_proto_enc_eof(tail(&o), room(&o), 3, MSB_PROTO_STDIN));
		add(&o, msb_proto_enc_credit(tail(&o), room(&o), 3, 4096));
	}
	save(dir, "valid-exec-shell-stdin-bounded", &o);

	o.len = 0;
	{
		add(&o,
		    msb_proto_enc_data(tail(&o), room(&o), 1, MSB_PROTO_STDOUT, bin, sizeof(bin)));
		add(&o, msb_proto_enc_data(tail(&o), room(&o), 1, MSB_PROTO_STDERR, "err", 3));
		add(&o, msb_proto_enc_eof(tail(&o), room(&o), 1, MSB_PROTO_STDOUT));
		add(&o, msb_proto_enc_eof(tail(&o), room(&o), 1, MSB_PROTO_STDERR));
		msb_proto_exit x = {MSB_PROTO_EXITED, 0, 7};
		add(&o, msb_proto_enc_exit(tail(&o), room(&o), 1, &x));
	}
	save(dir, "valid-output-exit", &o);

	o.len = 0;
	{
		msb_proto_exit k = {MSB_PROTO_SIGNALED,
				    MSB_PROTO_EXIT_TIMED_OUT | MSB_PROTO_EXIT_KILLED |
					    MSB_PROTO_EXIT_NO_SURVIVOR,
				    9};
		add(&o, msb_proto_enc_exit(tail(&o), room(&o), 5, &k));
		msb_proto_exit t = {MSB_PROTO_SIGNALED, MSB_PROTO_EXIT_TRUNCATED, 13};
		add(&o, msb_proto_enc_exit(tail(&o), room(&o), 7, &t));
		msb_proto_exit cn = {MSB_PROTO_EXITED,
				     MSB_PROTO_EXIT_CANCELLED | MSB_PROTO_EXIT_KILLED, 0};
		add(&o, msb_proto_enc_exit(tail(&o), room(&o), 9, &cn));
	}
	save(dir, "valid-exit-killed-truncated", &o);

	o.len = 0;
	{
		msb_proto_ps_request q = {MSB_PROTO_MAX_PS_ENTRIES, MSB_PROTO_MAX_PS_ARGV};
		add(&o, msb_proto_enc_ps_request(tail(&o), room(&o), 11, &q));
		static const char cmd[] = "sleep\0"
					  "100";
		msb_proto_ps_entry e = {
			.pid = 1,
			.ppid = 0,
			.pgid = 1,
			.sid = 1,
			.uid = 0,
			.start_ticks = 12345,
			.state = 'S',
			.flags = 0,
			.comm = {(const uint8_t *)"msb-agent", 9},
			.argv = {(const uint8_t *)"/msb-agent", 10},
		};
		msb_proto_ps_writer w;
		msb_proto_ps_writer_init(&w, tail(&o), room(&o), 11);
		msb_proto_ps_writer_add(&w, &e);
		add(&o, msb_proto_ps_writer_finish(&w, true));
		e.pid = 7;
		e.ppid = 1;
		e.pgid = e.sid = 7;
		e.state = 'Z';
		e.flags = MSB_PROTO_PS_ARGV_TRUNCATED;
		e.comm = (msb_proto_str){(const uint8_t *)"sleep", 5};
		e.argv = (msb_proto_str){(const uint8_t *)cmd, sizeof(cmd) - 1};
		msb_proto_ps_writer_init(&w, tail(&o), room(&o), 11);
		msb_proto_ps_writer_add(&w, &e);
		e.pid = 8;
		e.comm = (msb_proto_str){(const uint8_t *)"kthreadd", 8};
		e.argv = (msb_proto_str){NULL, 0};
		e.flags = 0;
		msb_proto_ps_writer_add(&w, &e);
		add(&o, msb_proto_ps_writer_finish(&w, false));
	}
	save(dir, "valid-ps", &o);

	o.len = 0;
	add(&o, msb_proto_enc_ping(tail(&o), room(&o), MSB_PROTO_PING, 0x0123456789abcdefull));
	add(&o, msb_proto_enc_ping(tail(&o), room(&o), MSB_PROTO_PONG, 0x0123456789abcdefull));
	add(&o, msb_proto_enc_cancel(tail(&o), room(&o), 13, MSB_PROTO_CANCEL_TIMEOUT));
	add(&o, msb_proto_enc_error(tail(&o), room(&o), 13, MSB_PROTO_ERR_ESCAPE,
				    "working directory escapes the storage base"));
	add(&o, msb_proto_enc_error(tail(&o), room(&o), 0, MSB_PROTO_ERR_PROTOCOL, "bye"));
	save(dir, "valid-ping-cancel-error", &o);

	/* IDENTITY and its answer (a claimed pooled sandbox, docs/pool.md). */
	o.len = 0;
	add(&o, msb_proto_enc_identity(tail(&o), room(&o), 0x0123456789abcdefull,
				       "msb-0123456789abcdef0123456789abcdef"));
	add(&o, msb_proto_enc_identity_ok(tail(&o), room(&o), 0x0123456789abcdefull));
	save(dir, "valid-identity", &o);

	/* version 2: a terminal exec, typed input, a resize, end of input */
	o.len = 0;
	hello(&o, MSB_PROTO_ROLE_HOST);
	{
		static const char *const sh[] = {"bash", NULL};
		msb_proto_exec_spec s = {
			.flags = MSB_PROTO_EXEC_TTY | MSB_PROTO_EXEC_STDIN,
			.initial_credit = 262144,
			.timeout_ms = 604800000ull,
			.cwd = "/",
			.argv = sh,
			.env = env_ab,
			.winsize = {24, 80},
		};
		add(&o, msb_proto_enc_exec_open(tail(&o), room(&o), 15, &s));
		add(&o,
		    msb_proto_enc_data(tail(&o), room(&o), 15, MSB_PROTO_STDIN, "stty size\r", 10));
		msb_proto_winsize ws = {50, 132};
		add(&o, msb_proto_enc_winsize(tail(&o), room(&o), 15, &ws));
		add(&o, msb_proto_enc_eof(tail(&o), room(&o), 15, MSB_PROTO_STDIN));
	}
	save(dir, "valid-exec-tty-winsize", &o);

	/* ---- invalid: one broken field each ---- */
	o.len = 0;
	add(&o, msb_proto_enc_data(tail(&o), room(&o), 1, MSB_PROTO_STDOUT, "x", 1));
	put32(o.buf, MSB_PROTO_MAX_PAYLOAD + 1);
	save(dir, "invalid-oversize-length", &o);

	o.len = 0;
	add(&o, msb_proto_enc_credit(tail(&o), room(&o), 1, 10));
	o.buf[4] = 99; /* type */
	save(dir, "invalid-unknown-type", &o);

	o.len = 0;
	add(&o, msb_proto_enc_data(tail(&o), room(&o), 1, MSB_PROTO_STDOUT, "x", 1));
	o.buf[6] = 1; /* flags: MORE is for PS_REPLY only */
	save(dir, "invalid-flags-on-data", &o);

	o.len = 0;
	exec_open(&o, 1);
	put32(o.buf + 8, 0); /* EXEC_OPEN on the control channel */
	save(dir, "invalid-exec-on-channel0", &o);

	o.len = 0;
	exec_open(&o, 1);
	{
		/* the last env string "LANG=C.UTF-8": put a NUL inside it */
		o.buf[o.len - 3] = 0;
	}
	save(dir, "invalid-exec-nul-in-string", &o);

	o.len = 0;
	exec_open(&o, 1);
	{
		/* argc sits after flags, credit, timeout, budget, cwd(len+7) */
		size_t at = MSB_PROTO_HEADER_SIZE + 4 + 4 + 8 + 8 + 4 + 7;
		put32(o.buf + at, MSB_PROTO_MAX_ARGS + 1);
	}
	save(dir, "invalid-exec-argc-over-cap", &o);

	o.len = 0;
	exec_open(&o, 1);
	{
		size_t at = MSB_PROTO_HEADER_SIZE + 4 + 4 + 8 + 8 + 4 + 7 + 8; /* argv[0] length */
		put32(o.buf + at, 1000);
	}
	save(dir, "invalid-exec-string-past-end", &o);

	o.len = 0;
	add(&o, msb_proto_enc_credit(tail(&o), room(&o), 1, 10));
	o.buf[o.len++] = 0; /* trailing byte */
	put32(o.buf, 5);
	save(dir, "invalid-credit-trailing-byte", &o);

	o.len = 0;
	hello(&o, MSB_PROTO_ROLE_HOST);
	o.buf[MSB_PROTO_HEADER_SIZE] ^= 0xff; /* magic */
	save(dir, "invalid-hello-magic", &o);

	o.len = 0;
	{
		msb_proto_exit x = {MSB_PROTO_EXITED, 0, 0};
		add(&o, msb_proto_enc_exit(tail(&o), room(&o), 1, &x));
		o.buf[MSB_PROTO_HEADER_SIZE + 1] = MSB_PROTO_EXIT_NO_SURVIVOR; /* without KILLED */
	}
	save(dir, "invalid-exit-survivor-without-kill", &o);

	o.len = 0;
	add(&o, msb_proto_enc_credit(tail(&o), room(&o), 1, 10));
	put32(o.buf + MSB_PROTO_HEADER_SIZE, MSB_PROTO_MAX_WINDOW + 1);
	save(dir, "invalid-credit-over-window", &o);

	o.len = 0;
	add(&o, msb_proto_enc_error(tail(&o), room(&o), 0, MSB_PROTO_ERR_PROTOCOL, "bad"));
	o.buf[o.len - 1] = 0x07; /* not printable */
	save(dir, "invalid-error-control-char", &o);

	/* a terminal exec without its window size */
	o.len = 0;
	{
		static const char *const sh[] = {"bash", NULL};
		msb_proto_exec_spec s = {
			.flags = MSB_PROTO_EXEC_TTY,
			.initial_credit = 4096,
			.timeout_ms = 1000,
			.argv = sh,
			.winsize = {24, 80},
		};
		add(&o, msb_proto_enc_exec_open(tail(&o), room(&o), 1, &s));
		o.len -= 4;
		put32(o.buf, (uint32_t)(o.len - MSB_PROTO_HEADER_SIZE));
	}
	save(dir, "invalid-exec-tty-no-winsize", &o);

	o.len = 0;
	{
		msb_proto_winsize ws = {24, 80};
		add(&o, msb_proto_enc_winsize(tail(&o), room(&o), 1, &ws));
		o.buf[MSB_PROTO_HEADER_SIZE] = 0; /* rows 0 */
	}
	save(dir, "invalid-winsize-zero-rows", &o);

	o.len = 0;
	{
		msb_proto_winsize ws = {24, 80};
		add(&o, msb_proto_enc_winsize(tail(&o), room(&o), 1, &ws));
		o.buf[o.len - 1] = 1; /* reserved */
	}
	save(dir, "invalid-winsize-reserved", &o);

	return 0;
}
