/* SPDX-License-Identifier: Apache-2.0 */
/* The wire codec: round trips, caps, the incremental reader, credit, HELLO. */
#include <criterion/criterion.h>
#include <string.h>

#include "proto/proto.h"

static uint8_t buf[MSB_PROTO_FRAME_MAX + 64];

/* Feed `len` bytes one at a time and return the first frame. */
static msb_proto_frame one_frame(msb_proto_reader *rd, const uint8_t *p, int len)
{
	msb_proto_frame f;
	cr_assert_gt(len, 0, "encoder failed: %s", msb_proto_strerror(len));
	msb_proto_reader_init(rd, MSB_PROTO_MAX_PAYLOAD);
	for (int i = 0; i < len; i++) {
		cr_assert_eq(msb_proto_reader_next(rd, &f), 0, "frame before its last byte");
		cr_assert_eq(msb_proto_reader_feed(rd, p + i, 1), 1);
	}
	cr_assert_eq(msb_proto_reader_next(rd, &f), 1);
	return f;
}

static msb_proto_reader rd;

Test(proto, exec_open_round_trip)
{
	static const char *const argv[] = {"sh", "-c", "printf '%s' \"$1\"", "p", "", NULL};
	static const char *const env[] = {"A=1", "B=", NULL};
	msb_proto_exec_spec s = {MSB_PROTO_EXEC_STDIN | MSB_PROTO_EXEC_BOUNDED,
				 4096,
				 1500,
				 777,
				 "x/y",
				 argv,
				 env,
				 {0, 0}};
	msb_proto_frame f = one_frame(&rd, buf, msb_proto_enc_exec_open(buf, sizeof(buf), 5, &s));
	msb_proto_exec_open m;
	cr_assert_eq(msb_proto_dec_exec_open(&f, &m), 0);
	cr_assert_eq(f.channel, 5);
	cr_assert_eq(m.flags, s.flags);
	cr_assert_eq(m.initial_credit, 4096);
	cr_assert_eq(m.timeout_ms, 1500);
	cr_assert_eq(m.output_budget, 777);
	cr_assert_eq(m.cwd.len, 3);
	cr_assert_eq(memcmp(m.cwd.ptr, "x/y", 3), 0);
	msb_proto_str str;
	for (int i = 0; argv[i]; i++) {
		cr_assert(msb_proto_strlist_next(&m.argv, &str));
		cr_assert_eq(str.len, strlen(argv[i]));
		cr_assert_eq(memcmp(str.ptr, argv[i], str.len), 0);
	}
	cr_assert(!msb_proto_strlist_next(&m.argv, &str));
	cr_assert_eq(m.env.count, 2);
}

Test(proto, exec_open_caps)
{
	static const char *big[MSB_PROTO_MAX_ARGS + 2];
	for (size_t i = 0; i < MSB_PROTO_MAX_ARGS + 1; i++)
		big[i] = "x";
	msb_proto_exec_spec s = {0, 0, 1000, 0, NULL, big, NULL, {0, 0}};
	cr_assert_eq(msb_proto_enc_exec_open(buf, sizeof(buf), 1, &s), MSB_PROTO_E_LIMIT);
	static const char *const shell2[] = {"a", "b", NULL};
	s.argv = shell2;
	s.flags = MSB_PROTO_EXEC_SHELL;
	cr_assert_eq(msb_proto_enc_exec_open(buf, sizeof(buf), 1, &s), MSB_PROTO_E_MALFORMED);
	s.flags = MSB_PROTO_EXEC_BOUNDED; /* budget 0 */
	cr_assert_eq(msb_proto_enc_exec_open(buf, sizeof(buf), 1, &s), MSB_PROTO_E_MALFORMED);
	s.flags = 0;
	s.timeout_ms = 0;
	cr_assert_eq(msb_proto_enc_exec_open(buf, sizeof(buf), 1, &s), MSB_PROTO_E_LIMIT);
	static const char *const noeq[] = {"NOEQUALS", NULL};
	s.timeout_ms = 1;
	s.env = noeq;
	cr_assert_eq(msb_proto_enc_exec_open(buf, sizeof(buf), 1, &s), MSB_PROTO_E_MALFORMED);
	/* a request larger than one frame */
	static char huge[MSB_PROTO_MAX_STRING + 1];
	memset(huge, 'a', MSB_PROTO_MAX_STRING);
	static const char *two[3];
	two[0] = huge;
	two[1] = huge;
	s.env = NULL;
	s.argv = two;
	cr_assert_eq(msb_proto_enc_exec_open(buf, sizeof(buf), 1, &s), MSB_PROTO_E_LIMIT);
	/* channel 0 is the connection's */
	s.argv = shell2;
	cr_assert_eq(msb_proto_enc_exec_open(buf, sizeof(buf), 0, &s), MSB_PROTO_E_CHANNEL);
}

/* Version 2 (issue 16): a terminal exec carries its size at the end of
 * EXEC_OPEN, and WINSIZE changes it; both bounded 1..MAX_TTY_DIM. */
Test(proto, exec_open_tty_and_winsize)
{
	static const char *const argv[] = {"bash", NULL};
	msb_proto_exec_spec s = {
		.flags = MSB_PROTO_EXEC_TTY | MSB_PROTO_EXEC_STDIN,
		.initial_credit = 4096,
		.timeout_ms = 1000,
		.argv = argv,
		.winsize = {40, 132},
	};
	int n = msb_proto_enc_exec_open(buf, sizeof(buf), 7, &s);
	msb_proto_frame f = one_frame(&rd, buf, n);
	msb_proto_exec_open m;
	cr_assert_eq(msb_proto_dec_exec_open(&f, &m), 0);
	cr_assert_eq(m.flags, MSB_PROTO_EXEC_TTY | MSB_PROTO_EXEC_STDIN);
	cr_assert_eq(m.winsize.rows, 40);
	cr_assert_eq(m.winsize.cols, 132);
	/* without TTY the size is not on the wire, and may not be given */
	s.flags = 0;
	cr_assert_eq(msb_proto_enc_exec_open(buf, sizeof(buf), 7, &s), MSB_PROTO_E_MALFORMED);
	s.winsize = (msb_proto_winsize){0, 0};
	cr_assert_eq(msb_proto_enc_exec_open(buf, sizeof(buf), 7, &s), n - 4);
	/* a terminal of zero rows, or past the cap */
	s.flags = MSB_PROTO_EXEC_TTY;
	cr_assert_eq(msb_proto_enc_exec_open(buf, sizeof(buf), 7, &s), MSB_PROTO_E_LIMIT);
	s.winsize = (msb_proto_winsize){24, MSB_PROTO_MAX_TTY_DIM + 1};
	cr_assert_eq(msb_proto_enc_exec_open(buf, sizeof(buf), 7, &s), MSB_PROTO_E_LIMIT);
	/* TTY announced, size missing: malformed */
	s.winsize = (msb_proto_winsize){24, 80};
	n = msb_proto_enc_exec_open(buf, sizeof(buf), 7, &s);
	msb_proto_put_header(buf, (uint32_t)(n - 4) - MSB_PROTO_HEADER_SIZE, MSB_PROTO_EXEC_OPEN, 0,
			     7);
	f = one_frame(&rd, buf, n - 4);
	cr_assert_eq(msb_proto_dec_exec_open(&f, &m), MSB_PROTO_E_MALFORMED);

	msb_proto_winsize ws = {50, 200}, got;
	n = msb_proto_enc_winsize(buf, sizeof(buf), 7, &ws);
	cr_assert_eq(n, MSB_PROTO_HEADER_SIZE + 8);
	f = one_frame(&rd, buf, n);
	cr_assert_eq(msb_proto_dec_winsize(&f, &got), 0);
	cr_assert_eq(got.rows, 50);
	cr_assert_eq(got.cols, 200);
	cr_assert(msb_proto_host_may_send(MSB_PROTO_WINSIZE));
	cr_assert(!msb_proto_agent_may_send(MSB_PROTO_WINSIZE));
	buf[MSB_PROTO_HEADER_SIZE + 7] = 1; /* reserved */
	f = one_frame(&rd, buf, n);
	cr_assert_eq(msb_proto_dec_winsize(&f, &got), MSB_PROTO_E_MALFORMED);
	ws.cols = 0;
	cr_assert_eq(msb_proto_enc_winsize(buf, sizeof(buf), 7, &ws), MSB_PROTO_E_LIMIT);
	ws.cols = 80;
	cr_assert_eq(msb_proto_enc_winsize(buf, sizeof(buf), 0, &ws), MSB_PROTO_E_CHANNEL);
}

Test(proto, reader_refuses_oversize_before_buffering)
{
	msb_proto_reader_init(&rd, MSB_PROTO_MIN_PAYLOAD);
	msb_proto_put_header(buf, MSB_PROTO_MIN_PAYLOAD + 1, MSB_PROTO_DATA, 0, 1);
	msb_proto_reader_feed(&rd, buf, MSB_PROTO_HEADER_SIZE);
	msb_proto_frame f;
	cr_assert_eq(msb_proto_reader_next(&rd, &f), MSB_PROTO_E_LIMIT);
	/* latched */
	cr_assert_eq(msb_proto_reader_next(&rd, &f), MSB_PROTO_E_LIMIT);
	cr_assert_eq(msb_proto_reader_feed(&rd, buf, 1), 0);
}

Test(proto, reader_many_frames_in_one_feed)
{
	int len = 0;
	for (uint32_t i = 0; i < 100; i++)
		len += msb_proto_enc_credit(buf + len, sizeof(buf) - (size_t)len, 2 * i + 1, i + 1);
	msb_proto_reader_init(&rd, MSB_PROTO_MAX_PAYLOAD);
	cr_assert_eq(msb_proto_reader_feed(&rd, buf, (size_t)len), (size_t)len);
	msb_proto_frame f;
	for (uint32_t i = 0; i < 100; i++) {
		cr_assert_eq(msb_proto_reader_next(&rd, &f), 1);
		uint32_t credit;
		cr_assert_eq(msb_proto_dec_credit(&f, &credit), 0);
		cr_assert_eq(credit, i + 1);
		cr_assert_eq(f.channel, 2 * i + 1);
	}
	cr_assert_eq(msb_proto_reader_next(&rd, &f), 0);
	cr_assert(msb_proto_reader_idle(&rd));
}

Test(proto, max_frame_fits)
{
	static uint8_t data[MSB_PROTO_MAX_PAYLOAD - 1];
	memset(data, 0xab, sizeof(data));
	msb_proto_frame f = one_frame(
		&rd, buf,
		msb_proto_enc_data(buf, sizeof(buf), 3, MSB_PROTO_STDERR, data, sizeof(data)));
	msb_proto_data d;
	cr_assert_eq(msb_proto_dec_data(&f, &d), 0);
	cr_assert_eq(d.len, sizeof(data));
	cr_assert_eq(d.stream, MSB_PROTO_STDERR);
	cr_assert_eq(msb_proto_enc_data(buf, sizeof(buf), 3, 1, data, MSB_PROTO_MAX_PAYLOAD),
		     MSB_PROTO_E_LIMIT);
	cr_assert_eq(msb_proto_enc_data(buf, 100, 3, 1, data, 200), MSB_PROTO_E_SPACE);
}

Test(proto, exit_rules)
{
	msb_proto_exit ok = {
		MSB_PROTO_SIGNALED,
		MSB_PROTO_EXIT_CANCELLED | MSB_PROTO_EXIT_KILLED | MSB_PROTO_EXIT_NO_SURVIVOR, 9};
	msb_proto_frame f = one_frame(&rd, buf, msb_proto_enc_exit(buf, sizeof(buf), 1, &ok));
	msb_proto_exit x;
	cr_assert_eq(msb_proto_dec_exit(&f, &x), 0);
	cr_assert_eq(x.value, 9);
	msb_proto_exit bad[] = {
		{MSB_PROTO_EXITED, 0, 256},
		{MSB_PROTO_SIGNALED, 0, 0},
		{2, 0, 0},
		{MSB_PROTO_EXITED, MSB_PROTO_EXIT_KILLED, 0}, /* a kill without a reason */
		{MSB_PROTO_EXITED, MSB_PROTO_EXIT_TIMED_OUT, 0},
		{MSB_PROTO_EXITED, MSB_PROTO_EXIT_NO_SURVIVOR, 0},
		{MSB_PROTO_EXITED, 0x80, 0},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_assert_lt(msb_proto_enc_exit(buf, sizeof(buf), 1, &bad[i]), 0, "case %zu", i);
}

Test(proto, hello_negotiation)
{
	msb_proto_hello host, agent;
	msb_proto_hello_default(&host, MSB_PROTO_ROLE_HOST);
	msb_proto_hello_default(&agent, MSB_PROTO_ROLE_AGENT);
	uint16_t v = 0;
	cr_assert_eq(msb_proto_hello_negotiate(&host, &agent, &v), 0);
	cr_assert_eq(v, MSB_PROTO_VERSION_MAX);
	agent.min_version = agent.max_version = MSB_PROTO_VERSION_MAX + 1;
	cr_assert_eq(msb_proto_hello_negotiate(&host, &agent, &v), MSB_PROTO_E_VERSION);
	msb_proto_hello_default(&agent, MSB_PROTO_ROLE_HOST);
	cr_assert_lt(msb_proto_hello_negotiate(&host, &agent, &v), 0, "two hosts");

	msb_proto_frame f = one_frame(&rd, buf, msb_proto_enc_hello(buf, sizeof(buf), &host));
	msb_proto_hello back;
	cr_assert_eq(msb_proto_dec_hello(&f, &back), 0);
	cr_assert_eq(back.max_payload, MSB_PROTO_MAX_PAYLOAD);
	host.max_payload = 100;
	cr_assert_eq(msb_proto_enc_hello(buf, sizeof(buf), &host), MSB_PROTO_E_LIMIT);
}

Test(proto, credit_accounting)
{
	msb_proto_credit c = {0};
	cr_assert_eq(msb_proto_credit_take(&c, 1), MSB_PROTO_E_LIMIT);
	cr_assert_eq(msb_proto_credit_grant(&c, 100), 0);
	cr_assert_eq(msb_proto_credit_take(&c, 60), 0);
	cr_assert_eq(msb_proto_credit_take(&c, 41), MSB_PROTO_E_LIMIT);
	cr_assert_eq(msb_proto_credit_take(&c, 40), 0);
	cr_assert_eq(msb_proto_credit_grant(&c, MSB_PROTO_MAX_WINDOW), 0);
	cr_assert_eq(msb_proto_credit_grant(&c, 1), MSB_PROTO_E_LIMIT);
}

Test(proto, ps_writer_splits_frames)
{
	static uint8_t frame[MSB_PROTO_HEADER_SIZE + MSB_PROTO_MIN_PAYLOAD];
	static char argv[1000];
	memset(argv, 'a', sizeof(argv));
	msb_proto_ps_entry e = {.pid = 42,
				.ppid = 1,
				.state = 'R',
				.comm = {(const uint8_t *)"cmd", 3},
				.argv = {(const uint8_t *)argv, sizeof(argv)}};
	msb_proto_ps_writer w;
	msb_proto_ps_writer_init(&w, frame, sizeof(frame), 7);
	int added = 0;
	while (msb_proto_ps_writer_add(&w, &e) == 0)
		added++;
	cr_assert_eq(added, 3, "a 4 KiB frame holds three 1 KiB command lines");
	int len = msb_proto_ps_writer_finish(&w, true);
	cr_assert_gt(len, 0);
	msb_proto_reader_init(&rd, MSB_PROTO_MIN_PAYLOAD);
	msb_proto_reader_feed(&rd, frame, (size_t)len);
	msb_proto_frame f;
	cr_assert_eq(msb_proto_reader_next(&rd, &f), 1);
	cr_assert_eq(f.flags, MSB_PROTO_FLAG_MORE);
	msb_proto_ps_reply r;
	cr_assert_eq(msb_proto_dec_ps_reply(&f, &r), 0);
	cr_assert_eq(r.count, 3);
	msb_proto_ps_entry got;
	while (msb_proto_ps_next(&r, &got)) {
		cr_assert_eq(got.pid, 42);
		cr_assert_eq(got.argv.len, sizeof(argv));
	}
	e.state = 0;
	cr_assert_lt(msb_proto_ps_writer_add(&w, &e), 0, "state must be a letter");
}

Test(proto, error_message_is_sanitised)
{
	msb_proto_frame f = one_frame(
		&rd, buf,
		msb_proto_enc_error(buf, sizeof(buf), 3, MSB_PROTO_ERR_NOT_FOUND, "bad\n\x01name"));
	msb_proto_error e;
	cr_assert_eq(msb_proto_dec_error(&f, &e), 0);
	cr_assert_eq(e.message.len, 9);
	cr_assert_eq(memcmp(e.message.ptr, "bad??name", 9), 0);
	cr_assert_lt(msb_proto_enc_error(buf, sizeof(buf), 3, 0, "x"), 0);
	cr_assert_lt(msb_proto_enc_error(buf, sizeof(buf), 3, MSB_PROTO_ERR_MAX + 1, "x"), 0);
}

Test(proto, direction_rules)
{
	cr_assert(msb_proto_host_may_send(MSB_PROTO_EXEC_OPEN));
	cr_assert(!msb_proto_agent_may_send(MSB_PROTO_EXEC_OPEN));
	cr_assert(msb_proto_agent_may_send(MSB_PROTO_EXIT));
	cr_assert(!msb_proto_host_may_send(MSB_PROTO_EXIT));
	cr_assert(!msb_proto_host_may_send(MSB_PROTO_PS_REPLY));
	cr_assert(!msb_proto_agent_may_send(MSB_PROTO_CANCEL));
	cr_assert_eq(msb_proto_header_check(48, 0, 1), MSB_PROTO_E_UNKNOWN, "reserved kinds");
	cr_assert_eq(msb_proto_header_check(MSB_PROTO_PING, 0, 1), MSB_PROTO_E_CHANNEL);
	cr_assert_eq(msb_proto_header_check(MSB_PROTO_PS_REPLY, MSB_PROTO_FLAG_MORE, 1), 0);
	cr_assert_eq(msb_proto_header_check(MSB_PROTO_DATA, MSB_PROTO_FLAG_MORE, 1),
		     MSB_PROTO_E_UNKNOWN);
}

/* IDENTITY (types 5, 6; docs/pool.md): the host name the agent is given,
 * checked by the decoder, so the agent never sees one it cannot set. */
Test(proto, identity_messages)
{
	int n = msb_proto_enc_identity(buf, sizeof(buf), 42, "msb-0123abcd.example");
	cr_assert_gt(n, 0);
	msb_proto_frame f = one_frame(&rd, buf, n);
	msb_proto_msg m;
	cr_assert_eq(msb_proto_decode(&f, &m), 0);
	cr_assert_eq(m.type, MSB_PROTO_IDENTITY);
	cr_assert_eq(m.channel, 0);
	cr_assert_eq(m.u.identity.cookie, 42);
	cr_assert_eq(m.u.identity.hostname.len, strlen("msb-0123abcd.example"));
	cr_assert_eq(memcmp(m.u.identity.hostname.ptr, "msb-0123abcd.example", 20), 0);
	n = msb_proto_enc_identity_ok(buf, sizeof(buf), 42);
	f = one_frame(&rd, buf, n);
	cr_assert_eq(msb_proto_decode(&f, &m), 0);
	cr_assert_eq(m.type, MSB_PROTO_IDENTITY_OK);
	cr_assert_eq(m.u.cookie, 42);
	/* Names the kernel or /etc/hosts would not take as they are. */
	static const char *const bad[] = {"", "a b", "a/b", "a\nb", "caf\xc3\xa9", "x;rm", NULL};
	for (size_t i = 0; bad[i]; i++)
		cr_assert_lt(msb_proto_enc_identity(buf, sizeof(buf), 1, bad[i]), 0, "`%s`",
			     bad[i]);
	char longname[MSB_PROTO_MAX_HOSTNAME + 2];
	memset(longname, 'a', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	cr_assert_eq(msb_proto_enc_identity(buf, sizeof(buf), 1, longname), MSB_PROTO_E_LIMIT);
	longname[MSB_PROTO_MAX_HOSTNAME] = '\0';
	cr_assert_gt(msb_proto_enc_identity(buf, sizeof(buf), 1, longname), 0);
	/* A decoder refuses what an encoder would not make: a space on the
	 * wire, a length past the payload. */
	n = msb_proto_enc_identity(buf, sizeof(buf), 7, "abc");
	buf[MSB_PROTO_HEADER_SIZE + 13] = ' ';
	f = one_frame(&rd, buf, n);
	cr_assert_eq(msb_proto_decode(&f, &m), MSB_PROTO_E_MALFORMED);
	n = msb_proto_enc_identity(buf, sizeof(buf), 7, "abc");
	buf[MSB_PROTO_HEADER_SIZE + 8] = 4;
	f = one_frame(&rd, buf, n);
	cr_assert_eq(msb_proto_decode(&f, &m), MSB_PROTO_E_MALFORMED);
	/* Channel 0 only; the host sends it, the agent answers. */
	cr_assert_eq(msb_proto_header_check(MSB_PROTO_IDENTITY, 0, 1), MSB_PROTO_E_CHANNEL);
	cr_assert(msb_proto_host_may_send(MSB_PROTO_IDENTITY));
	cr_assert(!msb_proto_agent_may_send(MSB_PROTO_IDENTITY));
	cr_assert(msb_proto_agent_may_send(MSB_PROTO_IDENTITY_OK));
	cr_assert(!msb_proto_host_may_send(MSB_PROTO_IDENTITY_OK));
}

/* Egress tunnels (types 64..66; docs/internals/egress.md). */
Test(proto, egress_messages)
{
	msb_proto_egress_listen l = {.port = 3128, .max_tunnels = 60, .window = 256 * 1024};
	int n = msb_proto_enc_egress_listen(buf, sizeof(buf), 1, &l);
	msb_proto_frame f = one_frame(&rd, buf, n);
	msb_proto_msg m;
	cr_assert_eq(msb_proto_decode(&f, &m), 0);
	cr_assert_eq(m.type, MSB_PROTO_EGRESS_LISTEN);
	cr_assert_eq(m.u.egress_listen.port, 3128);
	cr_assert_eq(m.u.egress_listen.max_tunnels, 60);
	cr_assert_eq(m.u.egress_listen.window, 256 * 1024);
	/* Caps: no port, more tunnels than channels, a window past the limit. */
	msb_proto_egress_listen bad = l;
	bad.port = 0;
	cr_assert_lt(msb_proto_enc_egress_listen(buf, sizeof(buf), 1, &bad), 0);
	bad = l;
	bad.max_tunnels = MSB_PROTO_MAX_CHANNELS;
	cr_assert_eq(msb_proto_enc_egress_listen(buf, sizeof(buf), 1, &bad), MSB_PROTO_E_LIMIT);
	bad = l;
	bad.window = MSB_PROTO_MAX_WINDOW + 1;
	cr_assert_eq(msb_proto_enc_egress_listen(buf, sizeof(buf), 1, &bad), MSB_PROTO_E_LIMIT);
	cr_assert_eq(m.u.egress_listen.flags, 0);
	cr_assert_eq(n, MSB_PROTO_HEADER_SIZE + 8); /* no flags: the 8-byte form */
	/* The hand-over flag rides in a u32 after the window; an unknown bit or
	 * a flags word of 0 (the 8-byte form's other spelling) is malformed. */
	msb_proto_egress_listen h = l;
	h.flags = MSB_PROTO_EGRESS_HANDOVER;
	n = msb_proto_enc_egress_listen(buf, sizeof(buf), 1, &h);
	cr_assert_eq(n, MSB_PROTO_HEADER_SIZE + 12);
	f = one_frame(&rd, buf, n);
	cr_assert_eq(msb_proto_decode(&f, &m), 0);
	cr_assert_eq(m.u.egress_listen.flags, MSB_PROTO_EGRESS_HANDOVER);
	cr_assert_eq(m.u.egress_listen.window, 256 * 1024);
	buf[MSB_PROTO_HEADER_SIZE + 8] = 2;
	f = one_frame(&rd, buf, n);
	cr_assert_eq(msb_proto_decode(&f, &m), MSB_PROTO_E_MALFORMED);
	buf[MSB_PROTO_HEADER_SIZE + 8] = 0;
	f = one_frame(&rd, buf, n);
	cr_assert_eq(msb_proto_decode(&f, &m), MSB_PROTO_E_MALFORMED);
	bad = l;
	bad.flags = 4;
	cr_assert_eq(msb_proto_enc_egress_listen(buf, sizeof(buf), 1, &bad), MSB_PROTO_E_MALFORMED);
	/* OPEN only on an even (agent-opened) channel; READY on the host's. */
	n = msb_proto_enc_egress_empty(buf, sizeof(buf), MSB_PROTO_EGRESS_OPEN, 2);
	f = one_frame(&rd, buf, n);
	cr_assert_eq(msb_proto_decode(&f, &m), 0);
	cr_assert_eq(m.channel, 2);
	cr_assert_eq(msb_proto_enc_egress_empty(buf, sizeof(buf), MSB_PROTO_EGRESS_OPEN, 3),
		     MSB_PROTO_E_CHANNEL);
	cr_assert_eq(msb_proto_enc_egress_empty(buf, sizeof(buf), MSB_PROTO_EGRESS_OPEN, 0),
		     MSB_PROTO_E_CHANNEL);
	cr_assert_gt(msb_proto_enc_egress_empty(buf, sizeof(buf), MSB_PROTO_EGRESS_READY, 1), 0);
	/* Reserved field must be zero. */
	n = msb_proto_enc_egress_empty(buf, sizeof(buf), MSB_PROTO_EGRESS_OPEN, 4);
	buf[MSB_PROTO_HEADER_SIZE] = 1;
	f = one_frame(&rd, buf, n);
	cr_assert_eq(msb_proto_decode(&f, &m), MSB_PROTO_E_MALFORMED);
	/* Direction. */
	cr_assert(msb_proto_host_may_send(MSB_PROTO_EGRESS_LISTEN));
	cr_assert(!msb_proto_agent_may_send(MSB_PROTO_EGRESS_LISTEN));
	cr_assert(msb_proto_agent_may_send(MSB_PROTO_EGRESS_OPEN));
	cr_assert(!msb_proto_host_may_send(MSB_PROTO_EGRESS_OPEN));
	cr_assert(!msb_proto_host_may_send(MSB_PROTO_EGRESS_READY));
	cr_assert_eq(msb_proto_header_check(67, 0, 2), MSB_PROTO_E_UNKNOWN, "reserved");
}
