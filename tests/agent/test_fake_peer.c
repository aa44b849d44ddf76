/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The client against a lying agent: a thread plays the agent over a
 * socketpair and breaks the protocol one way per test. Every case must end
 * in MSB_E_PROTOCOL (never a crash, a hang or an over-allocation).
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "client/client.h"

enum scenario {
	GARBAGE_HELLO,
	WRONG_VERSION,
	HOST_ROLE,
	OVER_CREDIT,
	OTHER_CHANNEL,
	BAD_EXIT_FLAGS,
	OVERSIZE_HEADER,
	OVER_BUDGET,
	FALSE_TRUNCATION,
	HANG_UP,
	PS_FLOOD,
	FAKE_CANCEL,
	PS_SPLINTERS,
	PS_LONG_ARGV,
};

static bool is_ps(enum scenario sc)
{
	return sc == PS_FLOOD || sc == PS_SPLINTERS || sc == PS_LONG_ARGV;
}

struct fake {
	int fd;
	enum scenario sc;
};

static void put(int fd, const uint8_t *buf, int n)
{
	if (n <= 0)
		return;
	ssize_t w = send(fd, buf, (size_t)n, MSG_NOSIGNAL);
	(void)w;
}

/* Read host frames until one of `type`; returns its channel (0 on EOF). */
static uint32_t await(int fd, msb_proto_reader *rd, uint16_t type)
{
	for (;;) {
		msb_proto_frame f;
		int rc;
		while ((rc = msb_proto_reader_next(rd, &f)) == 1)
			if (f.type == type)
				return f.channel;
		if (rc < 0)
			return 0;
		uint8_t *dst;
		size_t room = msb_proto_reader_space(rd, &dst);
		ssize_t n = recv(fd, dst, room, 0);
		if (n <= 0)
			return 0;
		msb_proto_reader_commit(rd, (size_t)n);
	}
}

/* Entries within the request's bounds whose command lines break the host's
 * snapshot budget: 2048 one-byte arguments each, or 4096 bytes each. */
static void ps_within_bounds(int fd, uint8_t *buf, size_t size, uint32_t ch, bool splinters)
{
	static uint8_t argv[MSB_PROTO_MAX_PS_ARGV];
	for (size_t i = 0; i < sizeof(argv); i++)
		argv[i] = splinters && i % 2 ? 0 : 'a';
	msb_proto_ps_entry e = {.pid = 2,
				.state = 'S',
				.comm = {(const uint8_t *)"x", 1},
				.argv = {argv, sizeof(argv) - 1}};
	for (unsigned sent = 0; sent < MSB_PROTO_MAX_PS_ENTRIES;) {
		msb_proto_ps_writer w;
		msb_proto_ps_writer_init(&w, buf, size, ch);
		while (sent < MSB_PROTO_MAX_PS_ENTRIES && msb_proto_ps_writer_add(&w, &e) == 0)
			sent++;
		put(fd, buf, msb_proto_ps_writer_finish(&w, sent < MSB_PROTO_MAX_PS_ENTRIES));
	}
}

static void *fake_agent(void *arg)
{
	struct fake *fk = arg;
	int fd = fk->fd;
	static uint8_t buf[MSB_PROTO_FRAME_MAX];
	static uint8_t zeros[MSB_PROTO_MAX_PAYLOAD];
	msb_proto_reader *rd = malloc(sizeof(*rd));
	msb_proto_reader_init(rd, MSB_PROTO_MAX_PAYLOAD);
	msb_proto_hello h;
	msb_proto_hello_default(&h, MSB_PROTO_ROLE_AGENT);

	await(fd, rd, MSB_PROTO_HELLO);
	switch (fk->sc) {
	case GARBAGE_HELLO:
		put(fd, (const uint8_t *)"SSH-2.0-OpenSSH_9.2\r\n", 21);
		goto out;
	case WRONG_VERSION:
		h.min_version = 7;
		h.max_version = 9;
		put(fd, buf, msb_proto_enc_hello(buf, sizeof(buf), &h));
		goto out;
	case HOST_ROLE:
		h.role = MSB_PROTO_ROLE_HOST;
		put(fd, buf, msb_proto_enc_hello(buf, sizeof(buf), &h));
		goto out;
	case OVER_CREDIT:
	case OTHER_CHANNEL:
	case BAD_EXIT_FLAGS:
	case OVERSIZE_HEADER:
	case OVER_BUDGET:
	case FALSE_TRUNCATION:
	case HANG_UP:
	case PS_FLOOD:
	case FAKE_CANCEL:
	case PS_SPLINTERS:
	case PS_LONG_ARGV:
	default:
		put(fd, buf, msb_proto_enc_hello(buf, sizeof(buf), &h));
		break;
	}
	uint32_t ch = await(fd, rd, is_ps(fk->sc) ? MSB_PROTO_PS_REQUEST : MSB_PROTO_EXEC_OPEN);
	if (ch == 0)
		goto out;
	msb_proto_exit x = {MSB_PROTO_EXITED, 0, 0};
	switch (fk->sc) {
	case OVER_CREDIT:
		/* budget 100000: the client granted that much and no more */
		for (int i = 0; i < 2; i++)
			put(fd, buf,
			    msb_proto_enc_data(buf, sizeof(buf), ch, MSB_PROTO_STDOUT, zeros,
					       MSB_PROTO_MAX_PAYLOAD - 1));
		break;
	case OTHER_CHANNEL:
		put(fd, buf,
		    msb_proto_enc_data(buf, sizeof(buf), ch + 2, MSB_PROTO_STDOUT, "x", 1));
		break;
	case BAD_EXIT_FLAGS:
		msb_proto_enc_exit(buf, sizeof(buf), ch, &x);
		buf[MSB_PROTO_HEADER_SIZE + 1] = MSB_PROTO_EXIT_NO_SURVIVOR;
		put(fd, buf, MSB_PROTO_HEADER_SIZE + 8);
		break;
	case OVERSIZE_HEADER:
		msb_proto_put_header(buf, 0x7fffffff, MSB_PROTO_DATA, 0, ch);
		put(fd, buf, MSB_PROTO_HEADER_SIZE);
		break;
	case OVER_BUDGET:
		/* budget 10: the client granted 10 bytes of credit */
		put(fd, buf, msb_proto_enc_data(buf, sizeof(buf), ch, MSB_PROTO_STDOUT, zeros, 11));
		break;
	case FALSE_TRUNCATION:
		x.flags = MSB_PROTO_EXIT_TRUNCATED;
		put(fd, buf, msb_proto_enc_exit(buf, sizeof(buf), ch, &x));
		break;
	case FAKE_CANCEL:
		x.flags = MSB_PROTO_EXIT_CANCELLED | MSB_PROTO_EXIT_KILLED;
		put(fd, buf, msb_proto_enc_exit(buf, sizeof(buf), ch, &x));
		break;
	case HANG_UP:
		put(fd, buf, msb_proto_enc_data(buf, sizeof(buf), ch, MSB_PROTO_STDOUT, "par", 3));
		shutdown(fd, SHUT_RDWR);
		break;
	case PS_FLOOD: {
		/* more processes than the snapshot cap, in many frames */
		msb_proto_ps_entry e = {.pid = 1, .state = 'S', .comm = {(const uint8_t *)"x", 1}};
		for (unsigned sent = 0; sent <= MSB_PROTO_MAX_PS_ENTRIES;) {
			msb_proto_ps_writer w;
			msb_proto_ps_writer_init(&w, buf, sizeof(buf), ch);
			while (sent <= MSB_PROTO_MAX_PS_ENTRIES &&
			       msb_proto_ps_writer_add(&w, &e) == 0)
				sent++;
			put(fd, buf, msb_proto_ps_writer_finish(&w, true));
		}
		break;
	}
	case PS_SPLINTERS:
	case PS_LONG_ARGV:
		ps_within_bounds(fd, buf, sizeof(buf), ch, fk->sc == PS_SPLINTERS);
		break;
	case GARBAGE_HELLO:
	case WRONG_VERSION:
	case HOST_ROLE:
	default:
		break;
	}
out:
	/* linger until the client hangs up, then go */
	await(fd, rd, 0xffff);
	free(rd);
	close(fd);
	return NULL;
}

static int play(enum scenario sc, msb_error **err, uint64_t budget)
{
	int sv[2];
	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	struct fake fk = {sv[1], sc};
	pthread_t th;
	pthread_create(&th, NULL, fake_agent, &fk);
	msb_client *c = NULL;
	int rc = msb_client__connect_fd(sv[0], 5, &c, err);
	if (rc == 0) {
		if (is_ps(sc)) {
			msb_client_proc *procs = NULL;
			size_t n = 0;
			rc = msb_client__ps(c, 5, &procs, &n, err);
			if (rc == 0)
				msb_client__procs_free(procs, n);
		} else {
			msb_exec_request req = MSB_EXEC_REQUEST_INIT;
			msb_exec_result res = {0};
			req.shell = "true";
			req.timeout = 5;
			req.max_output_bytes = budget;
			rc = msb_client__exec(c, &req, &res, err);
			if (rc == 0)
				msb_exec_result_clear(&res);
		}
	}
	msb_client__free(c);
	pthread_join(th, NULL);
	return rc;
}

static void expect_protocol(enum scenario sc, uint64_t budget)
{
	msb_error *err = NULL;
	int rc = play(sc, &err, budget);
	cr_assert_eq(rc, MSB_E_PROTOCOL, "scenario %d: rc %d (%s)", (int)sc, rc,
		     err ? msb_error_message(err) : "no error");
	cr_assert_eq(msb_error_code(err), MSB_E_PROTOCOL);
	cr_assert_str_eq(msb_error_name(err), "ProtocolError");
	msb_error_free(err);
}

TestSuite(fake_peer, .timeout = 30);

Test(fake_peer, garbage_instead_of_hello)
{
	expect_protocol(GARBAGE_HELLO, 0);
}

Test(fake_peer, no_common_version)
{
	expect_protocol(WRONG_VERSION, 0);
}

Test(fake_peer, peer_claims_to_be_a_host)
{
	expect_protocol(HOST_ROLE, 0);
}

Test(fake_peer, data_beyond_credit)
{
	expect_protocol(OVER_CREDIT, 100000);
}

Test(fake_peer, frame_on_another_channel)
{
	expect_protocol(OTHER_CHANNEL, 0);
}

Test(fake_peer, inconsistent_exit_flags)
{
	expect_protocol(BAD_EXIT_FLAGS, 0);
}

Test(fake_peer, oversize_frame_header)
{
	expect_protocol(OVERSIZE_HEADER, 0);
}

Test(fake_peer, data_beyond_the_budget)
{
	expect_protocol(OVER_BUDGET, 10);
}

Test(fake_peer, truncation_without_a_budget)
{
	expect_protocol(FALSE_TRUNCATION, 0);
}

Test(fake_peer, cancel_never_sent)
{
	expect_protocol(FAKE_CANCEL, 0);
}

Test(fake_peer, hang_up_mid_exec)
{
	expect_protocol(HANG_UP, 0);
}

Test(fake_peer, snapshot_over_the_cap)
{
	expect_protocol(PS_FLOOD, 0);
}

/* Within the protocol's bounds, past the host's budget (docs/security.md):
 * refused typed, never held. */
static void expect_budget(enum scenario sc, const char *phrase)
{
	msb_error *err = NULL;
	int rc = play(sc, &err, 0);
	cr_assert_eq(rc, MSB_E_RUNTIME, "scenario %d: rc %d (%s)", (int)sc, rc,
		     err ? msb_error_message(err) : "no error");
	cr_assert(strstr(msb_error_message(err), phrase), "%s", msb_error_message(err));
	msb_error_free(err);
}

Test(fake_peer, snapshot_of_argument_splinters)
{
	expect_budget(PS_SPLINTERS, "process snapshot exceeds 65536 command-line arguments");
}

Test(fake_peer, snapshot_of_long_command_lines)
{
	expect_budget(PS_LONG_ARGV, "process snapshot exceeds 4194304 bytes of command lines");
}
